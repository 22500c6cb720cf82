// Whole-file reads and crash-safe writes: a reader sees the old file or the new one, never
// a torn one (temp file in the same folder, fsync, rename).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace cake {

std::optional<std::string> read_file(const std::filesystem::path& p);
void write_file_atomic(const std::filesystem::path& p, const std::string& data);

}  // namespace cake
