#include "disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "file_util.hpp"
#include "folder_trust.hpp"
#include "log.hpp"
#include "sha256.hpp"

namespace cake {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr std::string_view kMagic = "cake-cubin v1\n";

// Creates every missing folder of `dir` private to the user (0700).
void make_private_dirs(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  if (dir.has_parent_path() && dir.parent_path() != dir) make_private_dirs(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error("cannot create " + dir.string() + ": " + std::strerror(errno));
}

// Temp files of writers that died mid-write (kill -9): "<entry>.tmp.<pid>.<n>" whose pid
// is gone.
void remove_stale_temps(const fs::path& entry) {
  std::error_code ec;
  std::string prefix = entry.filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(entry.parent_path(), ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    pid_t pid = pid_t(std::atol(name.c_str() + prefix.size()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}
}  // namespace

std::string cache_key(const RenderedProgram& program, const std::string& arch,
                      const std::vector<std::string>& options, const std::string& nvrtc_version) {
  Sha256 h;
  h.field("cake-cache").field(std::to_string(kCacheFormat));
  h.field(program.source);
  for (const auto& [name, content] : program.headers) h.field(name).field(content);
  for (const auto& e : program.name_expressions) h.field(e);
  h.field(std::to_string(options.size()));
  for (const auto& o : options) h.field(o);
  h.field(nvrtc_version).field(arch);
  return h.hex();
}

FolderTrust DiskCache::trust(const fs::path& entry_dir) const {
  FolderTrust t = check_folder_trust(dir_);
  if (!t.safe) return t;
  const fs::path version = dir_ / ("v" + std::to_string(kCacheFormat));
  if (t = check_own_folder(version); !t.safe) return t;
  if (!entry_dir.empty()) return check_own_folder(entry_dir);
  std::error_code ec;  // every entry folder, as `cakec doctor` asks
  for (const auto& e : fs::directory_iterator(version, ec))
    if (e.is_directory(ec))
      if (t = check_own_folder(e.path()); !t.safe) return t;
  return {};
}

bool DiskCache::usable(const fs::path& entry) const {
  const FolderTrust t = trust(entry.parent_path());
  if (t.safe) return true;
  warn_once("unsafe:" + t.folder, "cake: not using the JIT disk cache " + dir_.string() + ": " + t.text() +
                                      " (another user could plant code in it); compiling instead");
  return false;
}

fs::path DiskCache::entry_path(const std::string& key) const {
  return dir_ / ("v" + std::to_string(kCacheFormat)) / key.substr(0, 2) / (key + ".cubin");
}

std::optional<CachedBinary> DiskCache::get(const std::string& key) const {
  fs::path p = entry_path(key);
  if (!usable(p)) return std::nullopt;
  auto data = read_file(p);
  if (!data) return std::nullopt;
  auto bad = [&](const std::string& why) -> std::optional<CachedBinary> {
    warn_once("corrupt:" + key, "cake: removing corrupt cache entry " + p.string() + " (" + why +
                                    "); it will be rebuilt");
    std::error_code ec;
    fs::remove(p, ec);
    return std::nullopt;
  };
  if (data->compare(0, kMagic.size(), kMagic) != 0) return bad("bad header");
  size_t eol = data->find('\n', kMagic.size());
  if (eol == std::string::npos) return bad("truncated header");
  json meta;
  try {
    meta = json::parse(data->substr(kMagic.size(), eol - kMagic.size()));
    CachedBinary b;
    b.cubin = data->substr(eol + 1);
    if (meta.at("key").get<std::string>() != key) return bad("entry for another key");
    if (meta.at("size").get<uint64_t>() != b.cubin.size()) return bad("truncated cubin");
    if (meta.at("sha256").get<std::string>() != sha256_hex(b.cubin)) return bad("checksum mismatch");
    b.lowered_names = meta.at("lowered_names").get<std::vector<std::string>>();
    return b;
  } catch (const json::exception& e) {
    return bad(std::string("bad metadata: ") + e.what());
  }
}

bool DiskCache::put(const std::string& key, const std::string& program, const CachedBinary& b) const {
  fs::path p = entry_path(key);
  if (!usable(p)) return false;
  try {
    make_private_dirs(p.parent_path());
    remove_stale_temps(p);
    json meta = {{"key", key},
                 {"program", program},
                 {"size", b.cubin.size()},
                 {"sha256", sha256_hex(b.cubin)},
                 {"lowered_names", b.lowered_names}};
    write_file_atomic(p, std::string(kMagic) + meta.dump() + "\n" + b.cubin);
    return true;
  } catch (const std::exception& e) {
    warn_once("cache-write:" + dir_.string(),
              std::string("cake: cannot write the JIT disk cache (") + e.what() +
                  "); compiled programs stay in memory only");
    return false;
  }
}

DiskCache::KeyLock::KeyLock(const DiskCache& cache, const std::string& key) {
  fs::path p = cache.entry_path(key);
  if (!cache.usable(p)) return;  // an unsafe cache is not used: no entry, so no lock either
  try {
    make_private_dirs(p.parent_path());
  } catch (const Error&) {
    return;  // unwritable cache: work without the cross-process lock
  }
  fd_ = ::open((p.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return;  // unwritable cache: work without the cross-process lock
  while (::flock(fd_, LOCK_EX) != 0)
    if (errno != EINTR) break;
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::vector<DiskCache::Entry> DiskCache::list() const {
  std::vector<Entry> out;
  fs::path root = dir_ / ("v" + std::to_string(kCacheFormat));
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (e.path().extension() != ".cubin") continue;
    Entry entry;
    entry.key = e.path().stem().string();
    entry.bytes = e.file_size(ec);
    auto head = read_file(e.path());
    if (head) {
      size_t eol = head->find('\n', kMagic.size());
      try {
        entry.program = json::parse(head->substr(kMagic.size(), eol - kMagic.size())).value("program", "?");
      } catch (...) {
        entry.program = "(corrupt)";
      }
    }
    out.push_back(entry);
  }
  return out;
}

int DiskCache::clear() const {
  int n = 0;
  std::error_code ec;
  fs::path root = dir_ / ("v" + std::to_string(kCacheFormat));
  if (!fs::exists(root, ec)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(root, ec))
    if (e.path().extension() == ".cubin") ++n;
  fs::remove_all(root, ec);
  return n;
}

}  // namespace cake
