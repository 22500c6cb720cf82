// A prepared launch: the kernels of a plan, their packed arguments and launch geometry, and
// the scratch the plan needs, owned. launch(stream) does no allocation, compilation or host
// synchronisation, so it can be captured into a CUDA graph and replayed.
#pragma once
#include <cuda.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "driver_types.hpp"
#include "planner.hpp"

namespace cake {

// Kernel arguments packed by value into one buffer, each at its natural alignment.
class ArgPack {
 public:
  template <typename T>
  void add(const T& v) {
    size_t off = (bytes_.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    bytes_.resize(off + sizeof(T));
    std::memcpy(bytes_.data() + off, &v, sizeof(T));
    offsets_.push_back(off);
  }
  // Pointers into the buffer, as cuLaunchKernel takes them. Valid while the pack lives and
  // is not changed.
  std::vector<void*> pointers();

 private:
  std::vector<unsigned char> bytes_;
  std::vector<size_t> offsets_;
};

struct LaunchStage {
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem = 0;
  ArgPack args;
  std::vector<void*> arg_pointers;
};

class Launch {
 public:
  Launch() = default;
  // `plan` belongs to the Runtime's plan cache; a Launch must not outlive its Runtime (its
  // kernels live in the Runtime's modules too).
  Launch(CUcontext ctx, const PlanResult* plan, std::vector<LaunchStage> stages,
         DeviceBuffer scratch);
  Launch(Launch&&) noexcept = default;
  Launch& operator=(Launch&&) noexcept = default;
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  // Enqueues every stage on `stream` (0: the legacy default stream).
  void launch(CUstream stream) const;
  // Enqueues stage i alone: for benchmarks that time a stage (a finalize, say) by itself.
  void launch_stage(size_t i, CUstream stream) const;

  // What was chosen and why; null for an empty problem (nothing to launch).
  const Plan* plan() const { return plan_ && plan_->ok() ? &*plan_->plan : nullptr; }
  std::string describe() const;
  size_t stage_count() const { return stages_.size(); }
  size_t scratch_bytes() const { return scratch_.bytes(); }
  CUcontext context() const { return ctx_; }

 private:
  CUcontext ctx_ = nullptr;
  const PlanResult* plan_ = nullptr;
  std::vector<LaunchStage> stages_;
  DeviceBuffer scratch_;
};

}  // namespace cake
