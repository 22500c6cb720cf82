// `cakec bench jit`'s calls: four elementwise ops, each another program (add f32 and bf16,
// cast both ways), over 2^20 elements.
#include "jit_probe.hpp"

#include <algorithm>

#include "driver.hpp"
#include "elementwise_contract.h"
#include "elementwise_ops.hpp"

namespace cakec {
namespace {

class ElementwiseProbe : public JitProbe {
 public:
  ElementwiseProbe()
      : f1(size_t(n) * 4), f2(size_t(n) * 4), f3(size_t(n) * 4), h1(size_t(n) * 2), h2(size_t(n) * 2),
        h3(size_t(n) * 2) {}
  int calls() const override { return 4; }
  cake::Launch prepare(cake::Runtime& rt, int i) override {
    switch (i) {
      case 0: return cake::ops::prepare_add(rt, t(f3, false), t(f1, false), t(f2, false));
      case 1: return cake::ops::prepare_add(rt, t(h3, true), t(h1, true), t(h2, true));
      case 2: return cake::ops::prepare_cast(rt, t(h1, true), t(f1, false), false);
      default: return cake::ops::prepare_cast(rt, t(f1, false), t(h1, true), false);
    }
  }
  cake::Problem problem() const override {
    cake::Problem p;
    p.op = "elementwise.add";
    p.dims = {{"n", n}};
    p.dtypes = {{"out", cake::DType::f32}, {"a", cake::DType::f32}, {"b", cake::DType::f32}};
    p.align = {{"out", 256}, {"a", 256}, {"b", 256}};
    return p;
  }
  std::regex programs() const override { return std::regex("^ew_.*_v[48]$"); }
  void launch_raw(CUfunction fn, CUstream stream, int sm_count) override {
    // The kernel's one argument, as the binder packs it (elementwise_contract.h).
    cake::ew::ElementwiseArgs a{f3.ptr(), f1.ptr(), f2.ptr(), n};
    void* args[] = {&a};
    const int64_t blocks = (n / 4 + cake::ew::kThreads - 1) / cake::ew::kThreads;  // 4 elements a thread
    const unsigned grid = unsigned(std::min<int64_t>(blocks, int64_t(sm_count) * 8));
    CAKE_CU(cuLaunchKernel(fn, grid, 1, 1, cake::ew::kThreads, 1, 1, 0, stream, args, nullptr));
  }

 private:
  DLTensor t(const cake::DeviceBuffer& b, bool bf16) {
    DLTensor x{};
    x.data = b.ptr();
    x.device = {kDLCUDA, 0};
    x.ndim = 1;
    x.dtype = bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    x.shape = &n;
    return x;
  }
  int64_t n = 1 << 20;
  cake::DeviceBuffer f1, f2, f3, h1, h2, h3;
};

}  // namespace

std::unique_ptr<JitProbe> make_jit_probe() { return std::make_unique<ElementwiseProbe>(); }

}  // namespace cakec
