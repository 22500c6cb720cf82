#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <set>

#include "env.hpp"

namespace cake {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // A process can hold two copies of the library (libcake.so and a static link): share
    // the one registered logger instead of failing to register it twice.
    if (auto existing = spdlog::get("cake")) return existing;
    auto l = spdlog::stderr_color_mt("cake");
    l->set_pattern("[%n %l] %v");
    l->set_level(spdlog::level::from_str(env::log_level()));
    return l;
  }();
  return *logger;
}

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard lock(mu);
    if (!seen.insert(key).second) return;
  }
  log().warn("{}", message);
}

}  // namespace cake
