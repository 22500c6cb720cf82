// A prepared launch: the kernels of a plan, their packed arguments and launch geometry, and
// the scratch the plan needs, owned. launch(stream) does no allocation, compilation or host
// synchronisation, so it can be captured into a CUDA graph and replayed. A launch's kernels
// may keep state between launches in its scratch, counters (a tile counter that the kernel
// leaves zero when it finishes) and workspace: run one Launch's launches in stream order,
// never two at once.
#pragma once
#include <cuda.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "driver_types.hpp"
#include "planner.hpp"

namespace cake {

struct ProgramSwap;   // loader.hpp
struct LaunchOrigin;  // ops_common.hpp: the call a launch was prepared for (ops::rebind)

// Kernel arguments packed by value into one buffer, each at its natural alignment, the way
// the compiler lays out a kernel's parameters (a struct of them): offsets() are the
// parameter offsets, and the buffer itself is 64-byte aligned, so an alignas(64) argument
// (a CUtensorMap) sits at an address of its own alignment, not merely at an aligned offset.
class ArgPack {
 public:
  static constexpr size_t kMaxAlign = 64;
  template <typename T>
  void add(const T& v) {
    static_assert(alignof(T) <= kMaxAlign, "ArgPack aligns arguments to at most 64 bytes");
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied as bytes");
    add_bytes(&v, sizeof(T), alignof(T));
  }
  // `size` bytes aligned to `align` (a power of two, at most kMaxAlign).
  void add_bytes(const void* bytes, size_t size, size_t align) {
    size_t off = (size_ + align - 1) / align * align;
    size_ = off + size;
    blocks_.resize((size_ + kMaxAlign - 1) / kMaxAlign);
    std::memcpy(data() + off, bytes, size);
    offsets_.push_back(off);
  }
  // Pointers into the buffer, as cuLaunchKernel takes them. Valid while the pack lives and
  // is not changed.
  std::vector<void*> pointers();
  const std::vector<size_t>& offsets() const { return offsets_; }
  size_t size() const { return size_; }  // bytes, the last argument's end

 private:
  struct alignas(kMaxAlign) Block {
    unsigned char bytes[kMaxAlign];
  };
  unsigned char* data() { return reinterpret_cast<unsigned char*>(blocks_.data()); }
  std::vector<Block> blocks_;
  size_t size_ = 0;
  std::vector<size_t> offsets_;
};

// A kernel launch, or (function null, memset_bytes > 0) a stream-ordered zero fill of
// memset_bytes (a multiple of 4) at memset_ptr: both can be captured into a CUDA graph.
struct LaunchStage {
  CUfunction function = nullptr;
  CUdeviceptr memset_ptr = 0;
  size_t memset_bytes = 0;
  std::string what;  // for describe(), when there is no plan (a zero fill)
  std::string stand_in;  // the program that runs in the planned one's place (Program::stand_in), if one does
  // With a stand-in: the planned program's kernel once it is loaded, which every launch
  // from then on runs instead (a graph captured before keeps the stand-in).
  std::shared_ptr<const ProgramSwap> swap;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem = 0;
  ArgPack args;
  std::vector<void*> arg_pointers;
};

// A launch's memory besides the tensors, when the caller provides it (OpOptions::
// external_memory: a framework's allocator) as one block laid out scratch | workspace |
// counters, each part starting at a multiple of 256 bytes.
struct LaunchMemory {
  size_t scratch = 0, workspace = 0, counters = 0;  // bytes
  static size_t rounded(size_t bytes) { return (bytes + 255) / 256 * 256; }
  size_t workspace_at() const { return rounded(scratch); }
  size_t counters_at() const { return workspace_at() + rounded(workspace); }
  size_t total() const { return counters_at() + rounded(counters); }
};

class Launch {
 public:
  Launch() = default;
  // `plan` belongs to the Runtime's plan cache; a Launch must not outlive its Runtime (its
  // kernels live in the Runtime's modules too).
  // `counters`: int32 words some kernels need zero at launch and leave zero when done
  // (zeroed once when allocated). `workspace`: memory some kernels pass partial results
  // through within one launch (never read before it is written there; not zeroed).
  Launch(CUcontext ctx, const PlanResult* plan, std::vector<LaunchStage> stages,
         DeviceBuffer scratch, DeviceBuffer counters = DeviceBuffer(), DeviceBuffer workspace = DeviceBuffer());
  // No kernel: `bytes` (a multiple of 4) at `ptr` set to zero on the stream, for a problem
  // whose whole output is defined to be zeros (a grouped wgrad with no rows, say).
  static Launch zero_fill(CUcontext ctx, CUdeviceptr ptr, size_t bytes, std::string why);
  // Owns no memory: `memory` says what the caller's block must hold. Its counters are zeroed
  // by the launch itself (a memset before the kernels), since the block is the caller's.
  static Launch external(CUcontext ctx, const PlanResult* plan, std::vector<LaunchStage> stages, LaunchMemory memory);
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
  // Stage i's kernel (null for a zero fill): benchmarks launch it raw to price Launch itself.
  CUfunction stage_function(size_t i) const { return stages_.at(i).function; }
  size_t scratch_bytes() const { return external_ ? memory_.scratch : scratch_.bytes(); }
  size_t counter_bytes() const { return external_ ? memory_.counters : counters_.bytes(); }
  size_t workspace_bytes() const { return external_ ? memory_.workspace : workspace_.bytes(); }
  // Where the workspace lies (0: none): tests read which slots a kernel wrote.
  CUdeviceptr workspace_ptr() const { return external_ ? base_ + memory_.workspace_at() : workspace_.get(); }
  CUdeviceptr scratch_ptr() const { return external_ ? base_ : scratch_.get(); }
  CUdeviceptr counters_ptr() const { return external_ ? base_ + memory_.counters_at() : counters_.get(); }
  // With external memory: the bytes the caller's block must hold (0: none needed), and the
  // block it last gave (ops::rebind); 0 for a launch that owns its memory.
  size_t memory_bytes() const { return external_ ? memory_.total() : 0; }
  bool external_memory() const { return external_; }
  const LaunchMemory& memory_layout() const { return memory_; }
  void set_memory_base(CUdeviceptr base) { base_ = base; }
  CUcontext context() const { return ctx_; }

  // For ops::rebind: the call the launch was prepared for (null for a launch made otherwise),
  // and a way to pack every stage's arguments again, `pack(i, stage)`, keeping its kernel.
  const std::shared_ptr<const LaunchOrigin>& origin() const { return origin_; }
  void set_origin(std::shared_ptr<const LaunchOrigin> origin) { origin_ = std::move(origin); }
  void repack(const std::function<void(size_t, LaunchStage&)>& pack);

 private:
  CUcontext ctx_ = nullptr;
  const PlanResult* plan_ = nullptr;
  std::vector<LaunchStage> stages_;
  DeviceBuffer scratch_;
  DeviceBuffer counters_;
  DeviceBuffer workspace_;
  std::shared_ptr<const LaunchOrigin> origin_;
  bool external_ = false;
  LaunchMemory memory_;
  CUdeviceptr base_ = 0;  // the caller's block, once given
};

}  // namespace cake
