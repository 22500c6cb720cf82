// NVRTC, loaded with dlopen so that cake runs (and says why it can't JIT) where libnvrtc is
// missing. One process-wide instance; compile() is thread-safe (one nvrtcProgram per call).
#pragma once
#include <string>
#include <vector>

#include "arch.hpp"
#include "nvrtc_info.hpp"
#include "renderer.hpp"

namespace cake {

struct CompiledBinary {
  std::string cubin;  // for a virtual arch, PTX text (no NUL)
  std::string log;
  std::vector<std::string> lowered_names;  // one per name expression, same order
  double seconds = 0;
};

class Nvrtc {
 public:
  static const Nvrtc& instance();  // never throws; check info().present
  const NvrtcInfo& info() const { return info_; }
  // Throws CompileError (with the log) on failure, LibraryMissing if NVRTC is absent.
  CompiledBinary compile(const RenderedProgram& program, const Arch& arch,
                         const std::vector<std::string>& options) const;

 private:
  Nvrtc();
  struct Api;
  NvrtcInfo info_;
  Api* api_ = nullptr;  // lives for the process
};

}  // namespace cake
