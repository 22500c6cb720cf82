// What the loader's static rule knows about the local NVRTC: data only, so the model and the
// planner decide availability without loading the library (jit/nvrtc.hpp fills it).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "arch.hpp"

namespace cake {

struct NvrtcInfo {
  bool present = false;
  std::string path;            // the library that was loaded
  std::string missing_reason;  // why not, when !present
  CudaVersion version;
  std::vector<int> archs;      // nvrtcGetSupportedArchs: 75, 80, 90, ...
  bool supports(const Arch& a) const { return std::find(archs.begin(), archs.end(), a.number()) != archs.end(); }
};

}  // namespace cake
