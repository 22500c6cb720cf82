#include "cublaslt_loader.hpp"

#include <dlfcn.h>

#include "cublas_loader.hpp"
#include "error.hpp"

namespace cakec {

CublasLt::CublasLt(const std::string& path) {
  std::string opened, errors;
  lib_ = dlopen_first(path, {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, opened, errors);
  if (!lib_) {
    missing_ = "libcublasLt not found (" + errors + ")";
    return;
  }
  std::string absent;
#define CAKEC_CUBLASLT_LOAD(name)                                             \
  api_.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib_, #name));      \
  if (!api_.name) absent += std::string(absent.empty() ? "" : ", ") + #name;
  CAKEC_CUBLASLT_FUNCTIONS(CAKEC_CUBLASLT_LOAD)
#undef CAKEC_CUBLASLT_LOAD
  if (!absent.empty()) {
    missing_ = "libcublasLt lacks " + absent;
    return;
  }
  if (const cublasStatus_t s = api_.cublasLtCreate(&lt_); s != CUBLAS_STATUS_SUCCESS) {
    missing_ = std::string("cublasLtCreate: ") + cublas_status_name(s);
    lt_ = nullptr;
  }
}

// The handle goes; the library stays loaded (as cuBLAS: its runtime's exit handlers).
CublasLt::~CublasLt() {
  if (lt_) api_.cublasLtDestroy(lt_);
}

namespace {
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw cake::Error(std::string(what) + ": " + cublas_status_name(s));
}
}  // namespace

LtMatmul::LtMatmul(const CublasLt& lib, const LtGemm& g, void* workspace, size_t workspace_bytes, int top)
    : lib_(lib), beta_(g.beta), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  const CublasLtApi& api = lib.api();
  check(api.cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  check(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &g.ta, sizeof(g.ta)), "TRANSA");
  check(api.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &g.tb, sizeof(g.tb)), "TRANSB");
  // Stored shapes: op(A) is m x k, so A is m x k (N) or k x m (T); likewise B.
  const bool at = g.ta != CUBLAS_OP_N, bt = g.tb != CUBLAS_OP_N;
  check(api.cublasLtMatrixLayoutCreate(&a_, g.ab, at ? g.k : g.m, at ? g.m : g.k, g.lda), "layout A");
  check(api.cublasLtMatrixLayoutCreate(&b_, g.ab, bt ? g.n : g.k, bt ? g.k : g.n, g.ldb), "layout B");
  check(api.cublasLtMatrixLayoutCreate(&c_, g.cd, g.m, g.n, g.ldc), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  check(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_bytes;
  api.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  algos_.resize(size_t(top));
  int found = 0;
  const cublasStatus_t s = api.cublasLtMatmulAlgoGetHeuristic(lib.handle(), desc_, a_, b_, c_, c_, pref, top,
                                                              algos_.data(), &found);
  api.cublasLtMatmulPreferenceDestroy(pref);
  algos_.resize(s == CUBLAS_STATUS_SUCCESS ? size_t(found) : 0);
}

LtMatmul::~LtMatmul() {
  const CublasLtApi& api = lib_.api();
  if (c_) api.cublasLtMatrixLayoutDestroy(c_);
  if (b_) api.cublasLtMatrixLayoutDestroy(b_);
  if (a_) api.cublasLtMatrixLayoutDestroy(a_);
  if (desc_) api.cublasLtMatmulDescDestroy(desc_);
}

bool LtMatmul::run(int i, const void* a, const void* b, void* c, void* stream) const {
  const float alpha = 1.0f;
  return lib_.api().cublasLtMatmul(lib_.handle(), desc_, &alpha, a, a_, b, b_, &beta_, c, c_, c, c_,
                                   &algos_[size_t(i)].algo, workspace_, workspace_bytes_,
                                   reinterpret_cast<cudaStream_t>(stream)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace cakec
