#include "driver_types.hpp"

#include "driver.hpp"

namespace cake {

Module::Module(const std::string& cubin) { CAKE_CU(cuModuleLoadData(&mod_, cubin.data())); }

Module::~Module() {
  if (mod_) Driver::instance().api().cuModuleUnload(mod_);
}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (mod_) Driver::instance().api().cuModuleUnload(mod_);
    mod_ = o.mod_;
    o.mod_ = nullptr;
  }
  return *this;
}

CUfunction Module::function(const std::string& lowered_name) const {
  CUfunction f = nullptr;
  CAKE_CU(cuModuleGetFunction(&f, mod_, lowered_name.c_str()));
  return f;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) CAKE_CU(cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::DeviceBuffer(size_t bytes, CUstream stream) : bytes_(bytes), stream_(stream), async_(true) {
  if (bytes > 0) CAKE_CU(cuMemAllocAsync(&ptr_, bytes, stream));
}

void DeviceBuffer::release() noexcept {
  if (!ptr_) return;
  const auto& api = Driver::instance().api();
  if (async_) api.cuMemFreeAsync(ptr_, stream_);
  else api.cuMemFree(ptr_);
  ptr_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    stream_ = o.stream_;
    async_ = o.async_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

ContextGuard::ContextGuard(CUcontext ctx) {
  CUcontext cur = nullptr;
  CAKE_CU(cuCtxGetCurrent(&cur));
  if (cur != ctx) {
    CAKE_CU(cuCtxPushCurrent(ctx));
    pushed_ = true;
  }
}

ContextGuard::~ContextGuard() {
  if (pushed_) {
    CUcontext popped = nullptr;
    Driver::instance().api().cuCtxPopCurrent(&popped);
  }
}

}  // namespace cake
