// RAII over driver objects: a loaded module, a device allocation, a context made current
// for a scope. Destructors never throw (a failing release at process exit is ignored).
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>

namespace cake {

class Module {
 public:
  Module() = default;
  // Loads a cubin into the current context.
  explicit Module(const std::string& cubin);
  ~Module();
  Module(Module&& o) noexcept : mod_(o.mod_) { o.mod_ = nullptr; }
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  CUfunction function(const std::string& lowered_name) const;
  CUmodule get() const { return mod_; }

 private:
  CUmodule mod_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // in the current context
  // Stream-ordered: allocated and later freed on `stream`, so a one-call op that needs
  // scratch neither waits for the device nor frees memory a kernel still uses.
  DeviceBuffer(size_t bytes, CUstream stream);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_), async_(o.async_) {
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  CUstream stream_ = nullptr;
  bool async_ = false;
};

// Makes `ctx` current for the scope when it is not already (cuCtxPush/Pop).
class ContextGuard {
 public:
  explicit ContextGuard(CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace cake
