#include "prebuild.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "aot_manifest.hpp"
#include "availability.hpp"
#include "compile_worker.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "renderer.hpp"
#include "sha256.hpp"

namespace cake {
namespace fs = std::filesystem;

namespace {

// Two `cakec build` runs into one folder would each rewrite manifest.json: serialise them.
class FolderLock {
 public:
  explicit FolderLock(const fs::path& dir) {
    fd_ = ::open((dir / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot open " + (dir / ".lock").string());
    ::flock(fd_, LOCK_EX);
  }
  ~FolderLock() { ::close(fd_); }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

bool current(const AotManifest& m, const Build& b, const NvrtcInfo& nvrtc) {
  const AotEntry* e = m.find(b.program, b.arch);
  if (!e || e->source_hash != b.source_hash || e->toolkit != nvrtc.version.str() ||
      e->options != b.options)
    return false;
  auto data = read_file(m.dir() / e->file);
  return data && data->size() == e->size && sha256_hex(*data) == e->sha256;
}

}  // namespace

std::vector<const Build*> builds_for_archs(const Registry& registry, const std::vector<Arch>& archs) {
  std::vector<const Program*> programs;
  std::set<std::string> seen;
  for (const Build* b : registry.concrete_builds())
    if (seen.insert(b->program).second) programs.push_back(registry.program(b->program));
  std::vector<const Build*> out;
  std::set<std::string> keys;
  for (const Arch& arch : archs)
    for (const Program* p : programs) {
      const Build* chosen = nullptr;
      if (arch.virt) {
        chosen = registry.build(p->name, arch);  // listed only: nothing derives a virtual build
      } else {
        for (const Build* b : registry.device_builds(*p, arch))
          if (!b->arch.virt) {
            chosen = b;
            break;
          }
      }
      if (chosen && keys.insert(chosen->key()).second) out.push_back(chosen);
    }
  return out;
}

PrebuildSummary prebuild(const Registry& registry, const Nvrtc& nvrtc, const PrebuildOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  PrebuildSummary sum;
  fs::create_directories(opt.out);
  FolderLock lock(opt.out);
  AotManifest manifest;
  try {
    manifest = AotManifest::read(opt.out);
  } catch (const Error& e) {
    // A damaged manifest only costs a rebuild: start a fresh one.
    if (opt.progress) *opt.progress << "warning: " << e.what() << "; rebuilding everything\n";
    manifest = AotManifest(opt.out);
  }
  if (!manifest.refused().empty())
    throw Error("cannot prebuild into " + opt.out.string() + ": " + manifest.refused() +
                " (cake would not load cubins from it)");
  AvailabilityRule rule(registry, nullptr, nvrtc.info(), opt.jit_enabled);

  std::vector<const Build*> todo;
  for (const Build* bp : opt.builds.empty() ? builds_for_archs(registry, opt.archs) : opt.builds) {
    const Build& b = *bp;
    if (opt.filter && !std::regex_search(b.program, *opt.filter)) continue;
    Availability a = rule.check_build(b);
    if (!a.available()) {
      sum.skipped.emplace_back(b.key(), a.reason + ": " + a.detail);
      continue;
    }
    if (!opt.force && current(manifest, b, nvrtc.info())) {
      ++sum.up_to_date;
      continue;
    }
    todo.push_back(&b);
  }

  std::mutex mu;
  std::atomic<size_t> next{0};
  size_t done = 0;
  int jobs = opt.jobs > 0 ? opt.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min<int>(jobs, int(std::max<size_t>(todo.size(), 1)));
  auto worker = [&] {
    for (size_t i; (i = next++) < todo.size();) {
      const Build& b = *todo[i];
      std::string error;
      double secs = 0;
      try {
        RenderedProgram r = render(*registry.program(b.program));
        if (r.source_hash != b.source_hash)
          throw Error("build.json is stale for " + b.key() + ": run `cakec render`");
        CompiledBinary bin = opt.compile ? opt.compile(r, b.arch, b.options)
                                         : compile_isolated(r, b.arch, b.options);
        secs = bin.seconds;
        AotEntry e;
        e.program = b.program;
        e.arch = b.arch.str();
        e.source_hash = b.source_hash;
        e.toolkit = nvrtc.info().version.str();
        e.options = b.options;
        e.file = b.arch.str() + "/" + b.program + (b.arch.virt ? ".ptx" : ".cubin");
        e.sha256 = sha256_hex(bin.cubin);
        e.size = bin.cubin.size();
        e.lowered_names = bin.lowered_names;
        fs::create_directories(opt.out / b.arch.str());
        write_file_atomic(opt.out / e.file, bin.cubin);
        std::lock_guard g(mu);
        manifest.put(std::move(e));
      } catch (const std::exception& ex) {
        error = ex.what();
      }
      std::lock_guard g(mu);
      ++done;
      sum.compile_s += secs;
      if (error.empty()) {
        ++sum.built;
      } else {
        ++sum.failed;
        sum.failures.emplace_back(b.key(), error);
      }
      if (opt.progress) {
        char line[256];
        std::snprintf(line, sizeof(line), "[%3zu/%zu] %-8s %-40s %s", done, todo.size(),
                      error.empty() ? "built" : "FAILED", b.key().c_str(),
                      error.empty() ? (std::to_string(secs).substr(0, 5) + " s").c_str() : "");
        *opt.progress << line << "\n" << std::flush;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (sum.built > 0 || !fs::exists(opt.out / "manifest.json")) manifest.write();
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

PrebuildSummary prebuild_for_device(const Registry& registry, int ordinal, const fs::path& out,
                                    std::ostream* progress) {
  PrebuildOptions opt;
  opt.archs = {Driver::instance().device(ordinal).arch};
  opt.out = out;
  opt.progress = progress;
  return prebuild(registry, Nvrtc::instance(), opt);
}

}  // namespace cake
