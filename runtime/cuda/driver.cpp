#include "driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "env.hpp"
#include "log.hpp"

namespace cake {

Driver::Driver() {
  std::vector<std::string> names;
  if (auto p = env::libcuda_path()) names.push_back(*p);
  names.push_back("libcuda.so.1");
  names.push_back("libcuda.so");
  void* handle = nullptr;
  std::string tried;
  for (const auto& n : names) {
    handle = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      path_ = n;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (!handle) {
    missing_ = "libcuda not found (tried " + tried + "): no NVIDIA driver on this machine";
    return;
  }
  // Each entry point by the exact symbol the header's declaration names (cuMemAlloc is
  // cuMemAlloc_v2, cuCtxSynchronize is the (void) one): cuGetProcAddress with the toolkit's
  // version can hand back a newer ABI than the declaration we call through.
  auto* api = new DriverApi();
  std::string absent;
#define CAKE_STR2(x) #x
#define CAKE_STR(x) CAKE_STR2(x)
#define CAKE_DRIVER_LOAD(name)                                              \
  api->name = reinterpret_cast<decltype(api->name)>(::dlsym(handle, CAKE_STR(name))); \
  if (api->name == nullptr) absent += std::string(absent.empty() ? "" : ", ") + CAKE_STR(name);
  CAKE_DRIVER_FUNCTIONS(CAKE_DRIVER_LOAD)
#undef CAKE_DRIVER_LOAD
#define CAKE_DRIVER_LOAD_OPTIONAL(name) \
  api->name = reinterpret_cast<decltype(api->name)>(::dlsym(handle, CAKE_STR(name)));
  CAKE_DRIVER_OPTIONAL_FUNCTIONS(CAKE_DRIVER_LOAD_OPTIONAL)
#undef CAKE_DRIVER_LOAD_OPTIONAL
#undef CAKE_STR
#undef CAKE_STR2
  if (!absent.empty()) {
    missing_ = path_ + " lacks driver entry points: " + absent;
    delete api;
    return;
  }
  CUresult r = api->cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    api->cuGetErrorName(r, &name);
    missing_ = std::string("cuInit failed: ") + (name ? name : "?") + " (no usable GPU)";
    delete api;
    return;
  }
  api->cuDriverGetVersion(&version_);
  api->cuDeviceGetCount(&device_count_);
  devices_.resize(size_t(device_count_));
  device_read_.assign(size_t(device_count_), false);
  api_ = api;
}

Driver& Driver::instance() {
  static Driver driver;
  return driver;
}

const DriverApi& Driver::api() const {
  if (!api_) throw LibraryMissing(missing_);
  return *api_;
}

std::string Driver::error_name(CUresult r) const {
  const char* name = nullptr;
  if (api_ && api_->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(int(r));
}

void throw_driver_error(const char* call, CUresult r) {
  throw DriverError(call, int(r), Driver::instance().error_name(r));
}

const DeviceInfo& Driver::device(int ordinal) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (!api_) throw LibraryMissing(missing_);
  if (ordinal < 0 || ordinal >= device_count_)
    throw ArgumentError("device", "ordinal " + std::to_string(ordinal) + " out of range (" +
                                      std::to_string(device_count_) + " devices)");
  DeviceInfo& d = devices_[size_t(ordinal)];
  if (device_read_[size_t(ordinal)]) return d;
  CUdevice dev;
  CAKE_CU(cuDeviceGet(&dev, ordinal));
  char name[256] = {0};
  CAKE_CU(cuDeviceGetName(name, sizeof(name) - 1, dev));
  int major = 0, minor = 0;
  CAKE_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CAKE_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CAKE_CU(cuDeviceGetAttribute(&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CAKE_CU(cuDeviceGetAttribute(&d.max_smem_per_block_optin,
                               CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  CAKE_CU(cuDeviceGetAttribute(&d.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  d.ordinal = ordinal;
  d.name = name;
  // Chips from Hopper on have an arch-specific ('a') target: wgmma, setmaxnreg, tcgen05.
  d.arch = Arch{major, minor, char(major >= 9 ? 'a' : 0)};
  device_read_[size_t(ordinal)] = true;
  return d;
}

}  // namespace cake
