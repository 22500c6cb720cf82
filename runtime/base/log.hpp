// The one logger, "cake". Level from CAKE_LOG_LEVEL. `warn_once` keys a message so that a
// repeated condition (the same unavailable reason, say) is reported once per process.
#pragma once
#include <spdlog/spdlog.h>

#include <string>

namespace cake {

spdlog::logger& log();
void warn_once(const std::string& key, const std::string& message);

}  // namespace cake
