// The CUDA driver API through dlopen(libcuda) and dlsym: the binaries link no CUDA
// library, run on machines without a GPU and say what is missing. CAKE_CU checks a call and
// throws DriverError with the call's text and the CUresult's name.
#pragma once
#include <cuda.h>

#include <string>
#include <vector>

#include "arch.hpp"
#include "error.hpp"

namespace cake {

#define CAKE_DRIVER_FUNCTIONS(X)                                                           \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                    \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDeviceGetName)            \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)              \
  X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxGetDevice)              \
  X(cuCtxSynchronize) X(cuCtxCreate) X(cuCtxDestroy) X(cuModuleLoadData) X(cuModuleUnload) \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel)     \
  X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) \
  X(cuMemsetD32) X(cuMemsetD32Async) X(cuMemcpyDtoDAsync) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)                      \
  X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture)                     \
  X(cuStreamIsCapturing) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)      \
  X(cuGraphDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                    \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuPointerGetAttribute) X(cuPointerGetAttributes) \
  X(cuMemAllocManaged) X(cuMemAllocHost) X(cuMemFreeHost)                                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

// Entry points a driver may lack without making it unusable: null when absent, and the
// code that needs one says so. cuTensorMapEncodeTiled (TMA descriptors) came with 12.0.
// The virtual memory management calls serve the tests of memory mapped in parts.
#define CAKE_DRIVER_OPTIONAL_FUNCTIONS(X)                                                   \
  X(cuTensorMapEncodeTiled) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate)       \
  X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity)

struct DriverApi {
#define CAKE_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  CAKE_DRIVER_FUNCTIONS(CAKE_DRIVER_MEMBER)
  CAKE_DRIVER_OPTIONAL_FUNCTIONS(CAKE_DRIVER_MEMBER)
#undef CAKE_DRIVER_MEMBER
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  Arch arch;  // with its 'a' suffix where the chip has arch-specific features (sm_90a)
  int sm_count = 0;
  int max_smem_per_block_optin = 0;
  int l2_bytes = 0;
};

class Driver {
 public:
  // Loads libcuda and calls cuInit once. Never throws; check available().
  static Driver& instance();
  bool available() const { return api_ != nullptr; }
  const std::string& missing_reason() const { return missing_; }
  const std::string& path() const { return path_; }
  int version() const { return version_; }  // cuDriverGetVersion: 13000 for 13.0
  int device_count() const { return device_count_; }
  // Throws LibraryMissing when libcuda is absent.
  const DriverApi& api() const;
  // Facts of a device, read once per device.
  const DeviceInfo& device(int ordinal);

  std::string error_name(CUresult r) const;

 private:
  Driver();
  const DriverApi* api_ = nullptr;
  std::string missing_, path_;
  int version_ = 0;
  int device_count_ = 0;
  std::vector<DeviceInfo> devices_;
  std::vector<bool> device_read_;
};

[[noreturn]] void throw_driver_error(const char* call, CUresult r);

}  // namespace cake

#define CAKE_CU(call)                                            \
  do {                                                           \
    CUresult cake_cu_result_ = ::cake::Driver::instance().api().call; \
    if (cake_cu_result_ != CUDA_SUCCESS)                         \
      ::cake::throw_driver_error(#call, cake_cu_result_);        \
  } while (0)
