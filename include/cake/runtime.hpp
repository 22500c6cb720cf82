// The process-side entry point: registry + planner + loader + device contexts. One Runtime
// is shared by every op call; all its methods are thread-safe.
#pragma once
#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "aot_manifest.hpp"
#include "driver.hpp"
#include "loader.hpp"
#include "planner.hpp"
#include "registry.hpp"

namespace cake {

struct RuntimeOptions {
  std::vector<std::string> registry_files;  // on top of the embedded registry and CAKE_REGISTRY
  std::optional<std::string> aot_dir;       // default: CAKE_AOT_DIR (none if unset)
  std::optional<std::string> cache_dir;     // default: CAKE_CACHE_DIR etc.; "" disables it
  std::optional<bool> jit;                  // default: CAKE_JIT
  std::optional<bool> stand_ins;            // default: CAKE_JIT_STAND_IN (Program::stand_in)
  std::optional<std::string> dump_dir;      // default: CAKE_DUMP_DIR
  CompileFn compile;                        // default: the process's NVRTC (tests inject)
  std::optional<NvrtcInfo> nvrtc;           // default: the process's NVRTC (tests inject)
};

// The context an op runs in, and the facts of its device.
struct DeviceContext {
  CUcontext ctx = nullptr;
  const DeviceInfo* info = nullptr;
  Device device() const { return Device{info->arch, info->sm_count, info->max_smem_per_block_optin}; }
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions opt = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Registry& registry() const { return *registry_; }
  const Planner& planner() const { return *planner_; }
  // What the loader did so far (aot loads, disk hits, compiles, stand-ins, swaps).
  const LoaderStats& load_stats() const;
  // Returns once every background compile (a stand-in's program) has finished.
  void wait_background();
  const AotManifest* aot() const { return aot_ ? &*aot_ : nullptr; }
  const AvailabilityRule& availability() const { return *rule_; }

  // The context ops on device `ordinal` use: the current context when it belongs to that
  // device (a framework's, or one the caller made), else the device's primary context.
  DeviceContext context_for(int ordinal);

  const PlanResult& plan(const Problem& problem, const Device& device) const {
    return planner_->plan_cached(problem, device);
  }

  // A build that failed to compile (an NVRTC error, a crash, a timeout) is unavailable for
  // the rest of the process, reason "compile_failed": plans made from now on pass it over.
  void mark_failed(const std::string& build_key, const std::string& why);

 private:
  // The ops layer loads kernels through it; nothing above the ops layer sees the loader.
  friend Loader& loader_of(Runtime& rt);
  std::shared_ptr<const Registry> registry_;
  std::optional<AotManifest> aot_;
  std::unique_ptr<AvailabilityRule> rule_;
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<Loader> loader_;
  mutable std::mutex failed_mu_;
  std::map<std::string, std::string> failed_;  // build key -> why
  std::mutex ctx_mu_;
  std::map<int, CUcontext> primary_;  // retained primary contexts, released at destruction
};

}  // namespace cake
