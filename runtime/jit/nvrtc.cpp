#include "nvrtc.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>

#include "env.hpp"
#include "error.hpp"

namespace cake {

struct Nvrtc::Api {
#define CAKE_NVRTC_FN(name) decltype(&::name) name = nullptr
  CAKE_NVRTC_FN(nvrtcVersion);
  CAKE_NVRTC_FN(nvrtcGetNumSupportedArchs);
  CAKE_NVRTC_FN(nvrtcGetSupportedArchs);
  CAKE_NVRTC_FN(nvrtcCreateProgram);
  CAKE_NVRTC_FN(nvrtcDestroyProgram);
  CAKE_NVRTC_FN(nvrtcCompileProgram);
  CAKE_NVRTC_FN(nvrtcGetProgramLogSize);
  CAKE_NVRTC_FN(nvrtcGetProgramLog);
  CAKE_NVRTC_FN(nvrtcGetCUBINSize);
  CAKE_NVRTC_FN(nvrtcGetCUBIN);
  CAKE_NVRTC_FN(nvrtcGetPTXSize);
  CAKE_NVRTC_FN(nvrtcGetPTX);
  CAKE_NVRTC_FN(nvrtcAddNameExpression);
  CAKE_NVRTC_FN(nvrtcGetLoweredName);
  CAKE_NVRTC_FN(nvrtcGetErrorString);
#undef CAKE_NVRTC_FN
};

Nvrtc::Nvrtc() {
  std::vector<std::string> names;
  if (auto p = env::nvrtc_path()) names.push_back(*p);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) names.push_back(n);
  if (auto home = env::get("CUDA_HOME")) names.push_back(*home + "/lib64/libnvrtc.so");
  names.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  void* handle = nullptr;
  std::string tried;
  for (const auto& n : names) {
    handle = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      info_.path = n;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (!handle) {
    info_.missing_reason = "libnvrtc not found (tried " + tried + ")";
    return;
  }
  auto api = new Api();
  bool ok = true;
#define CAKE_LOAD(name)                                                     \
  api->name = reinterpret_cast<decltype(api->name)>(::dlsym(handle, #name)); \
  ok = ok && api->name != nullptr
  CAKE_LOAD(nvrtcVersion);
  CAKE_LOAD(nvrtcGetNumSupportedArchs);
  CAKE_LOAD(nvrtcGetSupportedArchs);
  CAKE_LOAD(nvrtcCreateProgram);
  CAKE_LOAD(nvrtcDestroyProgram);
  CAKE_LOAD(nvrtcCompileProgram);
  CAKE_LOAD(nvrtcGetProgramLogSize);
  CAKE_LOAD(nvrtcGetProgramLog);
  CAKE_LOAD(nvrtcGetCUBINSize);
  CAKE_LOAD(nvrtcGetCUBIN);
  CAKE_LOAD(nvrtcGetPTXSize);
  CAKE_LOAD(nvrtcGetPTX);
  CAKE_LOAD(nvrtcAddNameExpression);
  CAKE_LOAD(nvrtcGetLoweredName);
  CAKE_LOAD(nvrtcGetErrorString);
#undef CAKE_LOAD
  if (!ok) {
    info_.missing_reason = info_.path + " lacks an NVRTC entry point cake needs";
    delete api;
    return;
  }
  int major = 0, minor = 0, n = 0;
  api->nvrtcVersion(&major, &minor);
  api->nvrtcGetNumSupportedArchs(&n);
  info_.archs.resize(size_t(std::max(n, 0)));
  if (n > 0) api->nvrtcGetSupportedArchs(info_.archs.data());
  info_.version = {major, minor};
  info_.present = true;
  api_ = api;
}

const Nvrtc& Nvrtc::instance() {
  static const Nvrtc nvrtc;
  return nvrtc;
}

CompiledBinary Nvrtc::compile(const RenderedProgram& program, const Arch& arch,
                              const std::vector<std::string>& options) const {
  if (!info_.present) throw LibraryMissing(info_.missing_reason);
  const Api& a = *api_;
  auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& what, nvrtcResult r, const std::string& log) {
    return CompileError(what + ": " + a.nvrtcGetErrorString(r), program.name, arch.str(),
                        program.source_hash, options, log);
  };

  std::vector<const char*> header_src, header_names;
  for (const auto& [name, content] : program.headers) {
    header_names.push_back(name.c_str());
    header_src.push_back(content.c_str());
  }
  nvrtcProgram prog = nullptr;
  std::string file = program.name + ".cu";
  nvrtcResult r = a.nvrtcCreateProgram(&prog, program.source.c_str(), file.c_str(),
                                       int(header_src.size()), header_src.data(),
                                       header_names.data());
  if (r != NVRTC_SUCCESS) throw fail("nvrtcCreateProgram", r, "");
  struct Destroy {
    const Api& a;
    nvrtcProgram* p;
    ~Destroy() { a.nvrtcDestroyProgram(p); }
  } destroy{a, &prog};

  for (const auto& e : program.name_expressions) {
    r = a.nvrtcAddNameExpression(prog, e.c_str());
    if (r != NVRTC_SUCCESS) throw fail("nvrtcAddNameExpression(" + e + ")", r, "");
  }
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  nvrtcResult compiled = a.nvrtcCompileProgram(prog, int(opts.size()), opts.data());

  CompiledBinary out;
  size_t log_size = 0;
  if (a.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    a.nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS) throw fail("nvrtcCompileProgram", compiled, out.log);

  size_t size = 0;
  if (arch.virt) {  // PTX text; the size counts its terminating NUL, the string keeps its own
    r = a.nvrtcGetPTXSize(prog, &size);
    if (r != NVRTC_SUCCESS || size <= 1) throw fail("nvrtcGetPTXSize", r, out.log);
    out.cubin.resize(size);
    r = a.nvrtcGetPTX(prog, out.cubin.data());
    if (r != NVRTC_SUCCESS) throw fail("nvrtcGetPTX", r, out.log);
    out.cubin.resize(size - 1);
  } else {
    r = a.nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS || size == 0)
      throw fail("nvrtcGetCUBINSize (is the arch option a real sm_ arch?)", r, out.log);
    out.cubin.resize(size);
    r = a.nvrtcGetCUBIN(prog, out.cubin.data());
    if (r != NVRTC_SUCCESS) throw fail("nvrtcGetCUBIN", r, out.log);
  }
  for (const auto& e : program.name_expressions) {
    const char* lowered = nullptr;
    r = a.nvrtcGetLoweredName(prog, e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || lowered == nullptr) throw fail("nvrtcGetLoweredName(" + e + ")", r, out.log);
    out.lowered_names.emplace_back(lowered);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace cake
