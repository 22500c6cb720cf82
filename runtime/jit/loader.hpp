// The loader: a build's cubin from, in order, memory -> aot/ (hash and checksum checked)
// -> the disk cache -> NVRTC (then written to the disk cache); and its kernels as CUfunctions,
// one module per CUDA context. Single flight: however many threads ask for one build at
// once, it is loaded or compiled once and they all get it.
//
// Stand-ins (Program::stand_in): when a program with a stand-in would have to be compiled,
// the call compiles (or loads) the stand-in, which computes the same bits and compiles
// faster, and the program compiles on a background thread into memory and the disk cache;
// calls after that get the program itself. A launch prepared with the stand-in swaps to the
// program once the background thread has loaded it (ProgramSwap). A background failure is
// logged and the stand-in keeps serving.
#pragma once
#include <cuda.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "aot_manifest.hpp"
#include "disk_cache.hpp"
#include "driver_types.hpp"
#include "nvrtc.hpp"
#include "registry.hpp"

namespace cake {

enum class ServedFrom : uint8_t { aot, disk, jit };

struct LoadedBinary {
  std::string cubin;
  std::vector<std::string> lowered_names;
  ServedFrom from = ServedFrom::jit;
};

using CompileFn = std::function<CompiledBinary(const RenderedProgram&, const Arch&,
                                               const std::vector<std::string>&)>;

struct LoaderOptions {
  const AotManifest* aot = nullptr;
  std::optional<std::filesystem::path> cache_dir;  // absent: no disk cache
  bool jit_enabled = true;
  // The NVRTC version, part of every cache key; asked for only when aot/ does not serve.
  std::function<std::string()> nvrtc_version = [] { return std::string("none"); };
  CompileFn compile;          // default: compile_isolated (NVRTC in a worker process)
  std::optional<std::filesystem::path> dump_dir;  // rendered source of failing compiles
  bool stand_ins = true;      // false: a program is always compiled before its first call
};

struct LoaderStats {
  std::atomic<int> memory_hits{0}, aot_loads{0}, disk_hits{0}, compiles{0}, failures{0},
      module_loads{0}, stand_ins{0},  // stand_ins: calls a stand-in served
      swaps{0};                       // swaps: their kernels whose program has since replaced them
};

// A kernel that a stand-in runs for now: `function` becomes the program's kernel (loaded in
// the same context, dynamic shared memory opted in) once its background compile is done, and
// stays null if that compile fails. Read with one atomic load per launch.
struct ProgramSwap {
  std::atomic<CUfunction> function{nullptr};
};

// What to run for a call: the build's binary, or its stand-in's while the build compiles.
struct ServedBinary {
  std::shared_ptr<const LoadedBinary> binary;
  const Build* build = nullptr;  // the build `binary` is of
  bool stand_in = false;
};

class Loader {
 public:
  explicit Loader(LoaderOptions opt);
  ~Loader();  // waits for background compiles
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Throws CompileError, cake::Error (JIT disabled, unreadable), never returns null.
  std::shared_ptr<const LoadedBinary> binary(const Program& program, const Build& build);
  // `build`'s binary if it is served without compiling (memory, aot/, the disk cache), or
  // if `stand_in` is null or stand-ins are off; else the stand-in's (`stand_in_build`, same
  // arch), with `build` compiling in the background. Throws as binary() does.
  ServedBinary serve(const Program& program, const Build& build, const Program* stand_in,
                     const Build* stand_in_build);
  // Blocks until every background compile started so far has finished (and has swapped its
  // program into the launches waiting for it).
  void wait_background();
  // The kernel in context `ctx`, which must be current, of what serve() gives. Loads the
  // module on first use.
  // `*stood_in` (if given) says whether the stand-in's function was returned.
  CUfunction function(const Program& program, const Build& build, int kernel, CUcontext ctx,
                      const Program* stand_in = nullptr, const Build* stand_in_build = nullptr,
                      bool* stood_in = nullptr);
  // For a kernel that function() returned from a stand-in: where the program's kernel
  // `kernel` (in `ctx`, which must be current, opted in to `smem` bytes of dynamic shared
  // memory) appears once the program is loaded. Filled by the background compile's thread,
  // or here if that has already finished.
  std::shared_ptr<const ProgramSwap> swap_when_ready(const Program& program, const Build& build, int kernel,
                                                     CUcontext ctx, int smem);

  // Lets `f` (a kernel of this loader, its context current) take `bytes` of dynamic shared
  // memory: above the 48 KiB default a kernel must opt in (cuFuncSetAttribute), once per
  // function and size; later calls with the same or a smaller size cost a map lookup.
  void ensure_dynamic_smem(CUfunction f, int bytes);

  // How many blocks of `f` (threads, dynamic shared memory bytes, opted in here first) one SM
  // holds at once: the driver's occupancy answer, asked once per function and geometry (a
  // persistent kernel's binder asks at every rebind).
  int resident_blocks(CUfunction f, int threads, int smem);

  // Whether `build`'s binary is in memory (or being loaded) already.
  bool holds(const Build& build);

  const LoaderStats& stats() const { return stats_; }
  const DiskCache* disk_cache() const { return disk_ ? &*disk_ : nullptr; }

 private:
  std::shared_ptr<const LoadedBinary> load(const Program& program, const Build& build);
  std::optional<LoadedBinary> from_aot(const Build& build);
  std::optional<LoadedBinary> from_disk(const Program& program, const std::string& key);
  std::string disk_key(const Program& program, const Build& build);
  LoadedBinary from_disk_or_jit(const Program& program, const Build& build);

  LoaderOptions opt_;
  std::optional<DiskCache> disk_;
  LoaderStats stats_;
  std::mutex mu_;
  std::map<std::string, std::shared_future<std::shared_ptr<const LoadedBinary>>> binaries_;
  struct LoadedModule {
    Module module;
    std::vector<CUfunction> functions;
  };
  std::mutex module_mu_;
  std::map<std::pair<CUcontext, std::string>, std::unique_ptr<LoadedModule>> modules_;
  std::map<CUfunction, int> dynamic_smem_;  // under module_mu_: the size each function opted in to
  // resident_blocks' answers, under their own mutex: a rebind on a training thread must not
  // wait behind a module load holding module_mu_.
  std::mutex resident_mu_;
  std::map<std::tuple<CUfunction, int, int>, int> resident_;
  // The entry of binaries_ under `key`, if there is one (done or under way).
  std::optional<std::shared_future<std::shared_ptr<const LoadedBinary>>> known_binary(const std::string& key);
  // Loads the program's kernel into `ctx` and publishes it in `swap`; failures are logged and
  // leave the stand-in serving.
  void fill_swap(const Program& program, const Build& build, int kernel, CUcontext ctx, int smem,
                 ProgramSwap& swap);
  void fill_swaps(const Program& program, const Build& build, const std::string& key);

  std::mutex background_mu_;
  std::vector<std::thread> background_;  // compiles of programs whose stand-in serves
  struct PendingSwap {
    int kernel;
    CUcontext ctx;
    int smem;
    std::shared_ptr<ProgramSwap> swap;
  };
  struct SwapList {
    bool done = false;  // the background compile has finished: no more entries
    std::vector<PendingSwap> pending;
  };
  std::mutex swap_mu_;
  std::map<std::string, SwapList> swaps_;  // by the program build's binaries_ key
};

}  // namespace cake
