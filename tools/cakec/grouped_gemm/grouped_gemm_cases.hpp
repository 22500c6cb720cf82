// The cases of `cakec bench grouped_gemm` (shape, M, E, group size distribution) and its two
// cuBLAS baselines: the per-expert cublasGemmEx loop and cublasGemmGroupedBatchedEx.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cublas_loader.hpp"

namespace cakec {

struct Shape {
  std::string name;
  int64_t n, k;  // w is [E, N, K]
};
Shape shape_by_name(const std::string& name);  // gate_up (4096, 6144), down (6144, 2048)

// `--cases models`: the expert GEMMs of open MoE models, the experts one GPU holds under the
// expert parallelism named (EP8: 8 GPUs), lognormal routing. Per model two shapes, named
// "<model> gate_up" (N = 2 x the expert's intermediate size, K = hidden) and "<model> down"
// (N = hidden, K = intermediate), with the model's M (routed rows a step) and E.
struct ModelCase {
  Shape shape;
  int64_t m, e;
};
const std::vector<ModelCase>& model_cases();

struct Case {
  int64_t m = 0, e = 0, n = 0, k = 0;
  std::string dist;
  std::vector<int64_t> sizes;    // [E] rows per group, summing to M
  std::vector<int64_t> offsets;  // [E + 1]: offsets[e] is group e's first row
  std::vector<int32_t> ends;     // [E]: cumulative group ends, the `offs` tensor of the op
  int64_t min_size() const;
  int64_t max_size() const;
};
// balanced: M/E each (the remainder on the first groups); skewed: group 0 has M/2, the rest
// split evenly; one_empty: group E/2 has no rows, the rest split evenly; lognormal: weights
// exp(N(0, 1)) from a fixed seed per E, floored, the remainder to the largest fractions.
Case make_case(const Shape& shape, int64_t m, int64_t e, const std::string& dist);

// One GEMM in cuBLAS's column-major terms, for one non-empty group.
struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  const void* a;
  int lda;
  const void* b;
  int ldb;
  void* c;
  int ldc;
  cudaDataType_t ctype;
  float beta;
};

// The per-group GEMMs of `op` (fwd, dgrad, wgrad, wgrad_acc) over row-major x [M, K],
// g [M, N], w [E, N, K] into `out` (y [M, N], dx [M, K] or dw [E, N, K]); empty groups are
// skipped.
std::vector<Gemm> baseline_gemms(const Case& c, const std::string& op, CUdeviceptr x, CUdeviceptr g,
                                 CUdeviceptr w, CUdeviceptr out);

// cublasGemmEx per group on the handle's stream; throws cake::Error on a failed call.
void run_loop(const CublasHandle& h, const std::vector<Gemm>& gemms);

// cublasGemmGroupedBatchedEx with one group per GEMM. The device arrays of pointers are
// written to `ptrs` (3 * gemms.size() pointers) here, outside any timed region.
class GroupedBatched {
 public:
  GroupedBatched(const std::vector<Gemm>& gemms, CUdeviceptr ptrs);
  cublasStatus_t run(const CublasHandle& h) const;
  void run_checked(const CublasHandle& h) const;  // throws cake::Error on failure

 private:
  std::vector<cublasOperation_t> ta_, tb_;
  std::vector<int> m_, n_, k_, lda_, ldb_, ldc_, group_size_;
  std::vector<float> alpha_, beta_;
  cudaDataType_t ctype_ = CUDA_R_16BF;
  CUdeviceptr ptrs_ = 0;
};

}  // namespace cakec
