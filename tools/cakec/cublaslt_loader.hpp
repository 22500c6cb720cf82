// cuBLASLt for the benchmarks' baselines, loaded with dlopen as cuBLAS is (cublas_loader.hpp):
// a column-major GEMM with the heuristic's top algorithms, each of which a benchmark can time
// to take the fastest (the "cuBLASLt top 8" baseline). The header is used for its types only.
#pragma once
#include <cublasLt.h>

#include <string>
#include <vector>

namespace cakec {

#define CAKEC_CUBLASLT_FUNCTIONS(X)                                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)            \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLtApi {
#define CAKEC_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  CAKEC_CUBLASLT_FUNCTIONS(CAKEC_CUBLASLT_MEMBER)
#undef CAKEC_CUBLASLT_MEMBER
};

class CublasLt {
 public:
  // Tries `path` first when not empty, then libcublasLt.so.13, .so.12, .so, and the same
  // under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Never throws.
  explicit CublasLt(const std::string& path = "");
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  bool available() const { return lt_ != nullptr; }
  const std::string& missing_reason() const { return missing_; }
  const CublasLtApi& api() const { return api_; }
  cublasLtHandle_t handle() const { return lt_; }

 private:
  void* lib_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  CublasLtApi api_;
  std::string missing_;
};

// D = alpha op(A) op(B) + beta C (C is D), column-major, FP32 compute; A and B of type `ab`,
// C and D of type `cd`.
struct LtGemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  cudaDataType ab, cd;
  int lda, ldb, ldc;
  float beta;
};

// One GEMM's descriptors and the heuristic's top `top` algorithms for it (that fit
// `workspace_bytes`). Throws cake::Error when a descriptor cannot be made.
class LtMatmul {
 public:
  LtMatmul(const CublasLt& lib, const LtGemm& g, void* workspace, size_t workspace_bytes, int top = 8);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;
  int algos() const { return int(algos_.size()); }
  // Runs algorithm i on the stream; false when cuBLASLt refuses it.
  bool run(int i, const void* a, const void* b, void* c, void* stream) const;

 private:
  const CublasLt& lib_;
  float beta_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos_;
};

}  // namespace cakec
