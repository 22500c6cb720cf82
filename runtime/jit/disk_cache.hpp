// The JIT disk cache: one file per content key under <dir>/v1/<key[0..2]>/<key>.cubin.
// Keys are content only (rendered source, every header, NVRTC options and version, arch,
// cache format), so two checkouts share entries and an edit never reuses a stale one.
// Writes go to a temp file and are renamed into place; a lock file per key makes racing
// processes compile once; every read checks a checksum, and a bad entry is removed. A cache
// in a folder another user can change is not used at all (folder_trust.hpp).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "folder_trust.hpp"
#include "renderer.hpp"

namespace cake {

inline constexpr int kCacheFormat = 1;

std::string cache_key(const RenderedProgram& program, const std::string& arch,
                      const std::vector<std::string>& options, const std::string& nvrtc_version);

struct CachedBinary {
  std::string cubin;
  std::vector<std::string> lowered_names;
};

class DiskCache {
 public:
  explicit DiskCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  const std::filesystem::path& dir() const { return dir_; }

  // Reads and verifies an entry. A corrupt one is removed (with a warning) and reported as
  // absent, so the caller rebuilds it.
  std::optional<CachedBinary> get(const std::string& key) const;
  // Atomic write; returns false (with a warning) when the folder cannot be written.
  bool put(const std::string& key, const std::string& program, const CachedBinary& b) const;

  // Holds an exclusive lock on one key (flock on <key>.lock) for the scope. A process that
  // dies holding it releases it with its file descriptors.
  class KeyLock {
   public:
    KeyLock(const DiskCache& cache, const std::string& key);
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;
    bool locked() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };

  struct Entry {
    std::string key, program;
    uint64_t bytes = 0;
  };
  std::vector<Entry> list() const;
  int clear() const;  // removes every entry; returns how many

  std::filesystem::path entry_path(const std::string& key) const;

  // Whether the cache may be used: its root and the folders above it (folder_trust.hpp), its
  // v1/ folder and an entry's folder (without one: every entry folder). An unsafe cache is
  // neither read nor written.
  FolderTrust trust(const std::filesystem::path& entry_dir = {}) const;

 private:
  bool usable(const std::filesystem::path& entry) const;  // trust(), with one warning per folder

  std::filesystem::path dir_;
};

}  // namespace cake
