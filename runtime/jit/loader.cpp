#include "loader.hpp"

#include <unistd.h>

#include <chrono>

#include "compile_worker.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "log.hpp"
#include "renderer.hpp"
#include "sha256.hpp"

namespace cake {
namespace fs = std::filesystem;

namespace {
// A build's entry in memory (binaries_) and its modules (modules_): the source hash keeps a
// user registry's build of another source apart.
std::string binary_key(const Build& build) { return build.key() + "#" + build.source_hash; }
}  // namespace

Loader::Loader(LoaderOptions opt) : opt_(std::move(opt)) {
  if (!opt_.compile) opt_.compile = compile_isolated;
  if (opt_.cache_dir) disk_.emplace(*opt_.cache_dir);
}

Loader::~Loader() { wait_background(); }

void Loader::wait_background() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(background_mu_);
    threads.swap(background_);
  }
  for (auto& t : threads) t.join();
}

ServedBinary Loader::serve(const Program& program, const Build& build, const Program* stand_in,
                           const Build* stand_in_build) {
  if (!stand_in || !stand_in_build || !opt_.stand_ins || !opt_.jit_enabled) return {binary(program, build), &build};
  const std::string key = binary_key(build);
  std::optional<std::shared_future<std::shared_ptr<const LoadedBinary>>> known = known_binary(key);
  if (known && known->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    try {
      auto b = known->get();
      ++stats_.memory_hits;
      return {b, &build};
    } catch (...) {
      // Its compile failed (logged when it did): the stand-in keeps serving.
    }
  } else if (!known) {
    // aot/ or the disk cache serve it at once; else it compiles in the background.
    std::optional<LoadedBinary> found = from_aot(build);
    if (found) {
      ++stats_.aot_loads;
    } else if ((found = from_disk(program, disk_key(program, build)))) {
      ++stats_.disk_hits;
    }
    std::promise<std::shared_ptr<const LoadedBinary>> promise;
    auto future = promise.get_future().share();
    {
      std::lock_guard lock(mu_);
      if (!binaries_.emplace(key, future).second) known = binaries_.at(key);
    }
    if (known) return serve(program, build, stand_in, stand_in_build);  // another thread got here first
    if (found) {
      promise.set_value(std::make_shared<const LoadedBinary>(std::move(*found)));
      return {future.get(), &build};
    }
    {
      std::lock_guard lock(background_mu_);
      background_.emplace_back([this, program, build, key, p = std::move(promise)]() mutable {
        try {
          p.set_value(load(program, build));
          fill_swaps(program, build, key);
        } catch (...) {
          ++stats_.failures;
          std::string why = "unknown error";
          try {
            throw;
          } catch (const std::exception& e) {
            why = e.what();
          } catch (...) {
          }
          warn_once("background:" + build.key(), "cake: the background compile of " + build.key() +
                                                     " failed (its stand-in keeps serving): " + why);
          p.set_exception(std::current_exception());
          std::lock_guard lock(swap_mu_);
          swaps_[key].done = true;  // nothing to swap to: the launches keep their stand-ins
          swaps_[key].pending.clear();
        }
      });
    }
  }
  try {
    auto b = binary(*stand_in, *stand_in_build);
    ++stats_.stand_ins;
    return {b, stand_in_build, true};
  } catch (const std::exception& e) {
    warn_once("stand-in:" + stand_in_build->key(), "cake: stand-in " + stand_in_build->key() + " failed (" +
                                                       e.what() + "); waiting for " + build.key());
    return {binary(program, build), &build};
  }
}

std::shared_ptr<const LoadedBinary> Loader::binary(const Program& program, const Build& build) {
  std::string key = binary_key(build);
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

namespace {
LoadedBinary take(CachedBinary&& c, ServedFrom from) {
  LoadedBinary b;
  b.cubin = std::move(c.cubin);
  b.lowered_names = std::move(c.lowered_names);
  b.from = from;
  return b;
}
}  // namespace

std::string Loader::disk_key(const Program& program, const Build& build) {
  return cache_key(render(program), build.arch.str(), build.options, opt_.nvrtc_version());
}

std::optional<LoadedBinary> Loader::from_disk(const Program& program, const std::string& key) {
  if (!disk_) return std::nullopt;
  if (auto hit = disk_->get(key); hit && hit->lowered_names.size() == program.kernels.size())
    return take(std::move(*hit), ServedFrom::disk);
  return std::nullopt;
}

LoadedBinary Loader::from_disk_or_jit(const Program& program, const Build& build) {
  RenderedProgram r = render(program);
  if (r.source_hash != build.source_hash)
    warn_once("hash:" + build.key(), "cake: build " + build.key() +
                                         " records a source hash that differs from the rendered "
                                         "program; compiling what the renderer produces");
  std::string key = cache_key(r, build.arch.str(), build.options, opt_.nvrtc_version());
  if (auto hit = from_disk(program, key)) {
    ++stats_.disk_hits;
    return std::move(*hit);
  }
  if (!opt_.jit_enabled)
    throw Error("cannot serve " + build.key() +
                ": JIT is disabled (CAKE_JIT=0) and neither aot/ nor the disk cache holds it");
  std::optional<DiskCache::KeyLock> lock;
  if (disk_) {
    lock.emplace(*disk_, key);
    // Another process may have compiled it while this one waited for the lock.
    if (auto hit = from_disk(program, key)) {
      ++stats_.disk_hits;
      return std::move(*hit);
    }
  }
  CompiledBinary bin;
  const auto started = std::chrono::steady_clock::now();
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
  // One line per compile at info level: what N processes sharing a cache compiled, and where.
  log().info("cake: compiled {} in {:.2f} s (pid {})", build.key(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), ::getpid());
  CachedBinary c{std::move(bin.cubin), std::move(bin.lowered_names)};
  if (disk_) disk_->put(key, program.name, c);
  return take(std::move(c), ServedFrom::jit);
}

std::shared_ptr<const ProgramSwap> Loader::swap_when_ready(const Program& program, const Build& build, int kernel,
                                                           CUcontext ctx, int smem) {
  auto swap = std::make_shared<ProgramSwap>();
  const std::string key = binary_key(build);
  {
    std::lock_guard lock(swap_mu_);
    SwapList& list = swaps_[key];
    if (!list.done) {
      list.pending.push_back({kernel, ctx, smem, swap});
      return swap;
    }
  }
  // The background compile has finished: the program is in memory (or failed: stays null).
  const auto known = known_binary(key);
  bool ok = false;
  if (known) {
    try {
      known->get();
      ok = true;
    } catch (...) {
    }
  }
  if (ok) fill_swap(program, build, kernel, ctx, smem, *swap);
  return swap;
}

bool Loader::holds(const Build& build) { return known_binary(binary_key(build)).has_value(); }

std::optional<std::shared_future<std::shared_ptr<const LoadedBinary>>> Loader::known_binary(
    const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = binaries_.find(key); it != binaries_.end()) return it->second;
  return std::nullopt;
}

void Loader::fill_swaps(const Program& program, const Build& build, const std::string& key) {
  std::vector<PendingSwap> pending;
  {
    std::lock_guard lock(swap_mu_);
    SwapList& list = swaps_[key];
    list.done = true;
    pending.swap(list.pending);
  }
  for (const PendingSwap& p : pending) fill_swap(program, build, p.kernel, p.ctx, p.smem, *p.swap);
}

void Loader::fill_swap(const Program& program, const Build& build, int kernel, CUcontext ctx, int smem,
                       ProgramSwap& swap) {
  try {
    ContextGuard guard(ctx);  // on the background thread: the context the launch was prepared in
    CUfunction f = function(program, build, kernel, ctx);
    if (smem > 0) ensure_dynamic_smem(f, smem);
    swap.function.store(f, std::memory_order_release);
    ++stats_.swaps;
  } catch (const std::exception& e) {
    warn_once("swap:" + build.key(), "cake: cannot load " + build.key() + " in place of its stand-in (" + e.what() +
                                          "); the stand-in keeps serving");
  }
}

CUfunction Loader::function(const Program& program, const Build& build, int kernel, CUcontext ctx,
                            const Program* stand_in, const Build* stand_in_build, bool* stood_in) {
  const ServedBinary served = serve(program, build, stand_in, stand_in_build);
  if (stood_in) *stood_in = served.stand_in;
  const auto& bin = served.binary;
  std::lock_guard lock(module_mu_);
  auto& slot = modules_[{ctx, binary_key(*served.build)}];
  if (!slot) {
    if (served.build->arch.virt)
      warn_once("ptx:" + served.build->key(),
                "cake: " + served.build->key() + " runs as PTX, which the driver compiles for this GPU at load: "
                "no cubin for its arch is served here (`cakec build --arch <its arch>` with a toolkit that knows "
                "the arch makes one)");
    auto m = std::make_unique<LoadedModule>();
    m->module = Module(bin->cubin);
    for (const auto& name : bin->lowered_names) m->functions.push_back(m->module.function(name));
    ++stats_.module_loads;
    slot = std::move(m);
  }
  if (kernel < 0 || kernel >= int(slot->functions.size()))
    throw Error("kernel index " + std::to_string(kernel) + " out of range for " + served.build->key());
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

int Loader::resident_blocks(CUfunction f, int threads, int smem) {
  const auto key = std::make_tuple(f, threads, smem);
  {
    std::lock_guard lock(resident_mu_);
    if (const auto it = resident_.find(key); it != resident_.end()) return it->second;
  }
  ensure_dynamic_smem(f, smem);
  int per_sm = 0;
  CAKE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, threads, size_t(smem)));
  std::lock_guard lock(resident_mu_);
  resident_[key] = per_sm;
  return per_sm;
}

}  // namespace cake
