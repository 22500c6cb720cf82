#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "driver.hpp"
#include "error.hpp"

namespace cakec {

void* dlopen_first(const std::string& path, const std::vector<std::string>& sonames, std::string& opened,
                   std::string& errors) {
  std::vector<std::string> names;
  if (!path.empty()) names.push_back(path);
  for (const auto& n : sonames) names.push_back(n);
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/lib64/");
  dirs.push_back("/usr/local/cuda/lib64/");
  for (const auto& d : dirs)
    for (const auto& n : sonames) names.push_back(d + n);
  for (const auto& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      opened = n;
      return h;
    }
    if (const char* e = ::dlerror(); e && errors.size() < 400) errors += std::string(errors.empty() ? "" : "; ") + e;
  }
  return nullptr;
}

Cublas::Cublas(const std::string& path) {
  std::string errors;
  handle_ = dlopen_first(path, {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, path_, errors);
  if (!handle_) {
    missing_ = "libcublas not found (" + errors + ")";
    return;
  }
  std::string absent;
#define CAKEC_CUBLAS_LOAD(name)                                                        \
  api_.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle_, #name));            \
  if (!api_.name) absent += std::string(absent.empty() ? "" : ", ") + #name;
  CAKEC_CUBLAS_FUNCTIONS(CAKEC_CUBLAS_LOAD)
#undef CAKEC_CUBLAS_LOAD
  api_.cublasGemmEx = reinterpret_cast<decltype(api_.cublasGemmEx)>(::dlsym(handle_, "cublasGemmEx"));
  if (!api_.cublasGemmEx) absent += std::string(absent.empty() ? "" : ", ") + "cublasGemmEx";
#define CAKEC_CUBLAS_LOAD_OPTIONAL(name) \
  api_.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle_, #name));
  CAKEC_CUBLAS_OPTIONAL_FUNCTIONS(CAKEC_CUBLAS_LOAD_OPTIONAL)
#undef CAKEC_CUBLAS_LOAD_OPTIONAL
  if (!absent.empty()) {
    missing_ = path_ + " lacks " + absent;
    ::dlclose(handle_);
    handle_ = nullptr;
    api_ = {};
  }
}

// The library stays loaded: cuBLAS carries its own CUDA runtime, whose exit handlers would
// run (and could touch freed state) at dlclose while the process still uses the context.
Cublas::~Cublas() = default;

std::string Cublas::version() const {
  if (!handle_ || !api_.cublasGetVersion_v2) return "?";
  cublasHandle_t h = nullptr;
  if (api_.cublasCreate_v2(&h) != CUBLAS_STATUS_SUCCESS) return "?";
  int v = 0;
  api_.cublasGetVersion_v2(h, &v);
  api_.cublasDestroy_v2(h);
  // CUBLAS_VERSION layout: major * 10000 + minor * 100 + patch (cuBLAS >= 11).
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_?";
  }
}

CublasHandle::CublasHandle(const Cublas& lib, cudaStream_t stream, size_t workspace_bytes) : lib_(lib) {
  if (!lib.available()) throw cake::Error("cuBLAS: " + lib.missing_reason());
  auto check = [](cublasStatus_t s, const char* call) {
    if (s != CUBLAS_STATUS_SUCCESS) throw cake::Error(std::string(call) + " failed: " + cublas_status_name(s));
  };
  check(lib.api().cublasCreate_v2(&h_), "cublasCreate_v2");
  try {
    CUdeviceptr ws = 0;
    CAKE_CU(cuMemAlloc(&ws, workspace_bytes));
    workspace_ = ws;
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the stream comes first.
    check(lib.api().cublasSetStream_v2(h_, stream), "cublasSetStream_v2");
    check(lib.api().cublasSetWorkspace_v2(h_, reinterpret_cast<void*>(ws), workspace_bytes), "cublasSetWorkspace_v2");
  } catch (...) {
    release();  // a constructor that throws gets no destructor call
    throw;
  }
}

CublasHandle::~CublasHandle() { release(); }

void CublasHandle::release() noexcept {
  if (h_) lib_.api().cublasDestroy_v2(h_);
  if (workspace_) cake::Driver::instance().api().cuMemFree(CUdeviceptr(workspace_));
  h_ = nullptr;
  workspace_ = 0;
}

}  // namespace cakec
