#include "launch.hpp"

#include <sstream>

#include "driver.hpp"
#include "loader.hpp"

namespace cake {

std::vector<void*> ArgPack::pointers() {
  std::vector<void*> out;
  out.reserve(offsets_.size());
  for (size_t off : offsets_) out.push_back(data() + off);
  return out;
}

Launch::Launch(CUcontext ctx, const PlanResult* plan, std::vector<LaunchStage> stages,
               DeviceBuffer scratch, DeviceBuffer counters, DeviceBuffer workspace)
    : ctx_(ctx), plan_(plan), stages_(std::move(stages)), scratch_(std::move(scratch)),
      counters_(std::move(counters)), workspace_(std::move(workspace)) {
  for (auto& s : stages_) s.arg_pointers = s.args.pointers();
}

void Launch::repack(const std::function<void(size_t, LaunchStage&)>& pack) {
  // Packed into a copy, kept only when every stage packed: a failure leaves the launch as it was.
  std::vector<LaunchStage> packed = stages_;
  for (size_t i = 0; i < packed.size(); ++i) {
    packed[i].args = ArgPack();
    pack(i, packed[i]);
  }
  for (auto& s : packed) s.arg_pointers = s.args.pointers();
  stages_ = std::move(packed);
}

Launch Launch::external(CUcontext ctx, const PlanResult* plan, std::vector<LaunchStage> stages, LaunchMemory memory) {
  Launch l(ctx, plan, std::move(stages), DeviceBuffer());
  l.external_ = true;
  l.memory_ = memory;
  return l;
}

Launch Launch::zero_fill(CUcontext ctx, CUdeviceptr ptr, size_t bytes, std::string why) {
  if (bytes % 4 != 0) throw Error("zero fill of " + std::to_string(bytes) + " bytes: not a multiple of 4");
  std::vector<LaunchStage> stages;
  if (bytes > 0) {
    LaunchStage s;
    s.memset_ptr = ptr;
    s.memset_bytes = bytes;
    s.what = std::move(why);
    stages.push_back(std::move(s));
  }
  return Launch(ctx, nullptr, std::move(stages), DeviceBuffer());
}

namespace {
// The planned program's kernel once it has replaced the stand-in `s` was prepared with, else null.
CUfunction swapped_in(const LaunchStage& s) {
  return s.swap ? s.swap->function.load(std::memory_order_acquire) : nullptr;
}

CUresult enqueue(const DriverApi& api, const LaunchStage& s, CUstream stream, const char*& call) {
  if (!s.function) {
    call = "cuMemsetD32Async";
    return api.cuMemsetD32Async(s.memset_ptr, 0u, s.memset_bytes / 4, stream);
  }
  CUfunction f = swapped_in(s);
  if (!f) f = s.function;
  call = "cuLaunchKernel";
  return api.cuLaunchKernel(f, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2],
                            s.smem, stream, const_cast<void**>(s.arg_pointers.data()), nullptr);
}
}  // namespace

void Launch::launch(CUstream stream) const {
  if (stages_.empty()) return;
  if (external_ && memory_.total() > 0 && base_ == 0)
    throw Error("launch: it takes its memory from the caller (external_memory) and has none yet: rebind it with a block of " +
                std::to_string(memory_.total()) + " bytes");
  const DriverApi& api = Driver::instance().api();
  // The kernels belong to the context they were prepared in. Frameworks keep that context
  // current; make it so for the call only when it is not (one cheap query otherwise).
  CUcontext cur = nullptr;
  api.cuCtxGetCurrent(&cur);
  bool pushed = false;
  if (cur != ctx_) {
    CAKE_CU(cuCtxPushCurrent(ctx_));
    pushed = true;
  }
  CUresult r = CUDA_SUCCESS;
  const char* failed = nullptr;
  if (external_ && memory_.counters > 0) {  // the caller's block: its counters are zeroed here
    r = api.cuMemsetD32Async(counters_ptr(), 0u, memory_.counters / 4, stream);
    if (r != CUDA_SUCCESS) failed = "cuMemsetD32Async (counters)";
  }
  for (const auto& s : stages_) {
    if (failed) break;
    const char* call = nullptr;
    r = enqueue(api, s, stream, call);
    if (r != CUDA_SUCCESS) {
      failed = call;
      break;
    }
  }
  if (pushed) {
    CUcontext popped;
    api.cuCtxPopCurrent(&popped);
  }
  if (failed) throw_driver_error(failed, r);
}

void Launch::launch_stage(size_t i, CUstream stream) const {
  const LaunchStage& s = stages_.at(i);
  ContextGuard guard(ctx_);
  const char* call = nullptr;
  CUresult r = enqueue(Driver::instance().api(), s, stream, call);
  if (r != CUDA_SUCCESS) throw_driver_error(call, r);
}

std::string Launch::describe() const {
  if (!plan()) {
    if (stages_.empty()) return "empty problem: nothing to launch\n";
    std::string out;
    for (const auto& s : stages_) out += "no kernel: " + s.what + " (zero fill of " + std::to_string(s.memset_bytes) + " bytes)\n";
    return out;
  }
  const Plan& p = *plan();
  std::ostringstream o;
  o << "route " << p.route << " (accumulate " << accumulate_name(p.accumulate) << ", "
    << (p.deterministic ? "deterministic" : "non-deterministic") << ", scratch " << scratch_bytes()
    << " bytes" << (counter_bytes() ? ", " + std::to_string(counter_bytes()) + " bytes of counters" : std::string())
    << (workspace_bytes() ? ", " + std::to_string(workspace_bytes()) + " bytes of workspace" : std::string())
    << (external_ ? ", in the caller's memory" : "")
    << "): " << p.why << "\n";
  for (const auto& r : p.passed_over) o << "  passed over " << r.candidate << ": " << r.reason << " - " << r.detail << "\n";
  for (size_t i = 0; i < p.stages.size(); ++i)
    o << "  stage " << i + 1 << ": " << p.stages[i].program->name << " [" << p.stages[i].build->arch.str()
      << "] grid " << stages_[i].grid[0] << " x block " << stages_[i].block[0]
      << (stages_[i].smem ? ", " + std::to_string(stages_[i].smem) + " bytes of dynamic smem" : std::string())
      << (stages_[i].stand_in.empty() || swapped_in(stages_[i])
              ? std::string()
              : ", run by its stand-in " + stages_[i].stand_in + " while it compiles")
      << "\n";
  return o.str();
}

}  // namespace cake
