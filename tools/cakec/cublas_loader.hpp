// cuBLAS for the benchmarks' baselines, loaded with dlopen: cakec links no CUDA library
// (CI has no GPU and no cuBLAS), so the functions the benchmarks call are looked up with
// dlsym, and a missing library or symbol is a value with a reason, not a link error. The
// cuBLAS header is used for its types and enums only.
#pragma once
#include <cublas_api.h>

#include <string>
#include <vector>

namespace cakec {

// cublasGemmEx is loaded too; it is not in the list because C++ sees it overloaded (the
// header adds an inline overload taking a cudaDataType compute type).
#define CAKEC_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetWorkspace_v2)

// Absent from cuBLAS < 12.5: null there, and the benchmark prints "n/a".
#define CAKEC_CUBLAS_OPTIONAL_FUNCTIONS(X) X(cublasGemmGroupedBatchedEx) X(cublasGetVersion_v2)

struct CublasApi {
#define CAKEC_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
  CAKEC_CUBLAS_FUNCTIONS(CAKEC_CUBLAS_MEMBER)
  CAKEC_CUBLAS_OPTIONAL_FUNCTIONS(CAKEC_CUBLAS_MEMBER)
#undef CAKEC_CUBLAS_MEMBER
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

class Cublas {
 public:
  // Tries `path` first when not empty, then libcublas.so.13, .so.12, libcublas.so, and the
  // same under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Never throws.
  explicit Cublas(const std::string& path = "");
  ~Cublas();  // leaves the library loaded
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  bool available() const { return handle_ != nullptr; }
  const std::string& missing_reason() const { return missing_; }
  const std::string& path() const { return path_; }
  const CublasApi& api() const { return api_; }
  bool has_grouped_batched() const { return api_.cublasGemmGroupedBatchedEx != nullptr; }
  std::string version() const;  // "13.1.0" from a handle, or "?"

 private:
  void* handle_ = nullptr;
  CublasApi api_;
  std::string missing_, path_;
};

// dlopen of the first library that loads: `path` when not empty, then each soname, then each
// under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Null (the loader's messages in `errors`)
// when none does; `opened` is the name that loaded.
void* dlopen_first(const std::string& path, const std::vector<std::string>& sonames, std::string& opened,
                   std::string& errors);

// "CUBLAS_STATUS_NOT_SUPPORTED" and the like.
const char* cublas_status_name(cublasStatus_t s);

// A cuBLAS handle on a stream, with its own workspace (allocated here, outside any timed
// region: cuBLAS would otherwise allocate one at the first call on a stream).
class CublasHandle {
 public:
  CublasHandle(const Cublas& lib, cudaStream_t stream, size_t workspace_bytes = size_t(64) << 20);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }
  const CublasApi& api() const { return lib_.api(); }

 private:
  void release() noexcept;
  const Cublas& lib_;
  cublasHandle_t h_ = nullptr;
  unsigned long long workspace_ = 0;  // a CUdeviceptr
};

}  // namespace cakec
