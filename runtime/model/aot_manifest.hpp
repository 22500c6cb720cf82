// aot/manifest.json: what `cakec build` prebuilt. One entry per (program, arch) with the
// source hash it was built from, the toolkit, the cubin's sha256 and size, and the lowered
// kernel names, so a prebuilt cubin loads without NVRTC.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arch.hpp"

namespace cake {

struct AotEntry {
  std::string program;
  std::string arch;
  std::string source_hash;
  std::string toolkit;  // NVRTC version that built it
  std::vector<std::string> options;
  std::string file;     // relative to the aot folder: "<arch>/<program>.cubin"
  std::string sha256;
  uint64_t size = 0;
  std::vector<std::string> lowered_names;
  std::string key() const { return program + "@" + arch; }
};

class AotManifest {
 public:
  static constexpr int kFormat = 1;

  AotManifest() = default;
  explicit AotManifest(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // Reads dir/manifest.json. A missing manifest is an empty one; a malformed one throws
  // cake::Error naming the file (the caller decides whether to ignore it). A folder or
  // manifest another user can change (folder_trust.hpp) is not read: the manifest is empty
  // and refused() says why, since its hashes would vouch for planted cubins.
  static AotManifest read(const std::filesystem::path& dir);
  void write() const;  // atomic

  const std::filesystem::path& dir() const { return dir_; }
  // Empty, or why the folder was not read ("<folder> is writable by others").
  const std::string& refused() const { return refused_; }
  const AotEntry* find(const std::string& program, const Arch& arch) const;
  void put(AotEntry e);
  const std::map<std::string, AotEntry>& entries() const { return entries_; }

  // The static rule's check: an entry with this hash whose file exists. Reads no cubin.
  bool has(const std::string& program, const Arch& arch, const std::string& source_hash) const;

 private:
  std::filesystem::path dir_;
  std::string refused_;
  std::map<std::string, AotEntry> entries_;
};

}  // namespace cake
