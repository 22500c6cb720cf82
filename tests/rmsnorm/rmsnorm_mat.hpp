// What the rmsnorm GPU tests share: matrices in device memory with their DLTensors, and a
// Runtime over a cache of its own.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "gpu_util.hpp"
#include "runtime.hpp"
#include "test_util.hpp"

namespace cake::test {

// A [rows, h] bf16 matrix (row stride `stride`) or a vector, with its DLTensor.
struct Mat {
  Mat(DType t, int64_t rows, int64_t h, int64_t stride = 0)
      : dtype(t), rows(rows), h(h), stride(stride ? stride : h),
        buf(size_t(std::max<int64_t>(1, h > 0 ? rows * (stride ? stride : h) : rows)) * size_t(dtype_size(t))) {
    shape[0] = rows, shape[1] = h;
    strides[0] = this->stride, strides[1] = 1;
    dl.data = buf.ptr();
    dl.device = {kDLCUDA, 0};
    dl.ndim = h > 0 ? 2 : 1;
    if (h == 0) shape[0] = rows;
    dl.dtype = t == DType::bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    dl.shape = shape;
    dl.strides = h > 0 ? strides : nullptr;
  }
  size_t bytes() const { return buf.bytes(); }
  template <typename T>
  void upload(const std::vector<T>& v) { CAKE_CU(cuMemcpyHtoD(buf.get(), v.data(), v.size() * sizeof(T))); }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> v(bytes() / sizeof(T));
    CAKE_CU(cuCtxSynchronize());
    CAKE_CU(cuMemcpyDtoH(v.data(), buf.get(), v.size() * sizeof(T)));
    return v;
  }
  void poison() { CAKE_CU(cuMemsetD8(buf.get(), 0xff, bytes())); }
  DType dtype;
  int64_t rows, h, stride;
  DeviceBuffer buf;
  int64_t shape[2], strides[2];
  DLTensor dl{};
};

// Device 0's primary context and a Runtime over a cache of its own, for the tests outside the fixture.
struct FreshRuntime {
  test::PrimaryContext ctx;
  test::TempDir cache;
  std::unique_ptr<Runtime> rt;
  FreshRuntime() {
    RuntimeOptions o;
    o.cache_dir = cache.path().string();
    rt = std::make_unique<Runtime>(o);
  }
};

}  // namespace cake::test
