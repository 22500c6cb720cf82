#include "loader.hpp"

#include "compile_worker.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "log.hpp"
#include "renderer.hpp"
#include "sha256.hpp"

namespace cake {
namespace fs = std::filesystem;

Loader::Loader(LoaderOptions opt) : opt_(std::move(opt)) {
  if (!opt_.compile) opt_.compile = compile_isolated;
  if (opt_.cache_dir) disk_.emplace(*opt_.cache_dir);
}

std::shared_ptr<const LoadedBinary> Loader::binary(const Program& program, const Build& build) {
  std::string key = build.key() + "#" + build.source_hash;
  std::promise<std::shared_ptr<const LoadedBinary>> promise;
  std::shared_future<std::shared_ptr<const LoadedBinary>> future;
  bool owner = false;
  {
    std::lock_guard lock(mu_);
    auto it = binaries_.find(key);
    if (it != binaries_.end()) {
      future = it->second;
    } else {
      future = promise.get_future().share();
      binaries_.emplace(key, future);
      owner = true;
    }
  }
  if (!owner) {
    ++stats_.memory_hits;
    return future.get();  // waits for the thread that loads it; rethrows its error
  }
  try {
    promise.set_value(load(program, build));
  } catch (...) {
    ++stats_.failures;
    // The failure stays recorded: a build that cannot be compiled is not retried by every
    // call of the process.
    promise.set_exception(std::current_exception());
  }
  return future.get();
}

std::shared_ptr<const LoadedBinary> Loader::load(const Program& program, const Build& build) {
  if (auto b = from_aot(build)) {
    ++stats_.aot_loads;
    return std::make_shared<const LoadedBinary>(std::move(*b));
  }
  return std::make_shared<const LoadedBinary>(from_disk_or_jit(program, build));
}

std::optional<LoadedBinary> Loader::from_aot(const Build& build) {
  if (!opt_.aot) return std::nullopt;
  const AotEntry* e = opt_.aot->find(build.program, build.arch);
  if (!e || e->source_hash != build.source_hash) return std::nullopt;
  auto data = read_file(opt_.aot->dir() / e->file);
  if (!data || data->size() != e->size || sha256_hex(*data) != e->sha256) {
    warn_once("aot-corrupt:" + build.key(),
              "cake: aot cubin for " + build.key() + " is missing or does not match its sha256 in " +
                  (opt_.aot->dir() / "manifest.json").string() + "; serving it another way");
    return std::nullopt;
  }
  LoadedBinary b;
  b.cubin = std::move(*data);
  b.lowered_names = e->lowered_names;
  b.from = ServedFrom::aot;
  return b;
}

LoadedBinary Loader::from_disk_or_jit(const Program& program, const Build& build) {
  RenderedProgram r = render(program);
  if (r.source_hash != build.source_hash)
    warn_once("hash:" + build.key(), "cake: build " + build.key() +
                                         " records a source hash that differs from the rendered "
                                         "program; compiling what the renderer produces");
  std::string key = cache_key(r, build.arch.str(), build.options, opt_.nvrtc_version());
  auto take = [&](CachedBinary&& c, ServedFrom from) {
    LoadedBinary b;
    b.cubin = std::move(c.cubin);
    b.lowered_names = std::move(c.lowered_names);
    b.from = from;
    return b;
  };
  if (disk_) {
    if (auto hit = disk_->get(key); hit && hit->lowered_names.size() == program.kernels.size()) {
      ++stats_.disk_hits;
      return take(std::move(*hit), ServedFrom::disk);
    }
  }
  if (!opt_.jit_enabled)
    throw Error("cannot serve " + build.key() +
                ": JIT is disabled (CAKE_JIT=0) and neither aot/ nor the disk cache holds it");
  std::optional<DiskCache::KeyLock> lock;
  if (disk_) {
    lock.emplace(*disk_, key);
    // Another process may have compiled it while this one waited for the lock.
    if (auto hit = disk_->get(key); hit && hit->lowered_names.size() == program.kernels.size()) {
      ++stats_.disk_hits;
      return take(std::move(*hit), ServedFrom::disk);
    }
  }
  CompiledBinary bin;
  try {
    bin = opt_.compile(r, build.arch, build.options);
  } catch (const CompileError&) {
    if (opt_.dump_dir) {
      try {
        fs::create_directories(*opt_.dump_dir);
        write_file_atomic(*opt_.dump_dir / (program.name + "." + build.arch.str() + ".cu"), r.source);
        for (const auto& [name, content] : r.headers) write_file_atomic(*opt_.dump_dir / name, content);
      } catch (const std::exception& e) {
        log().warn("cannot dump the failing program to {}: {}", opt_.dump_dir->string(), e.what());
      }
    }
    throw;
  }
  ++stats_.compiles;
  CachedBinary c{std::move(bin.cubin), std::move(bin.lowered_names)};
  if (disk_) disk_->put(key, program.name, c);
  return take(std::move(c), ServedFrom::jit);
}

CUfunction Loader::function(const Program& program, const Build& build, int kernel, CUcontext ctx) {
  auto bin = binary(program, build);
  std::lock_guard lock(module_mu_);
  auto& slot = modules_[{ctx, build.key() + "#" + build.source_hash}];
  if (!slot) {
    auto m = std::make_unique<LoadedModule>();
    m->module = Module(bin->cubin);
    for (const auto& name : bin->lowered_names) m->functions.push_back(m->module.function(name));
    ++stats_.module_loads;
    slot = std::move(m);
  }
  if (kernel < 0 || kernel >= int(slot->functions.size()))
    throw Error("kernel index " + std::to_string(kernel) + " out of range for " + build.key());
  return slot->functions[size_t(kernel)];
}

}  // namespace cake

namespace cake {

void Loader::ensure_dynamic_smem(CUfunction f, int bytes) {
  constexpr int kDefaultLimit = 48 * 1024;
  if (bytes <= kDefaultLimit) return;
  std::lock_guard lock(module_mu_);
  int& have = dynamic_smem_[f];
  if (have >= bytes) return;
  CAKE_CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
  have = bytes;
}

}  // namespace cake
