// Builds the registry does not list. A program that lists a virtual arch ("compute_80") is
// plain CUDA C++ for every chip from that one on: besides its PTX build, it has a cubin build
// for any plain arch from there ("sm_100", "sm_120"), made from the virtual arch's build with
// the same source hash and the arch option changed. This is how a device newer than the
// registry's archs gets a cubin: JIT for its own arch, or `cakec build --arch` ahead of time.
#pragma once
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "registry.hpp"

namespace cake {

// `options` with its arch option (--gpu-architecture=, -arch=) naming `arch` instead.
std::vector<std::string> retarget_options(const std::vector<std::string>& options, const Arch& arch);

// The plain arch `arch` of a portable program: the virtual build it derives from (the most
// recent virtual arch of the program that runs on `arch`), or null when `arch` is not plain or
// no virtual build of the program runs on it.
const Build* derivation_source(const Registry& registry, const Program& program, const Arch& arch);

class DerivedBuildTable {
 public:
  // `from` (a virtual arch's build) made for real arch `arch`: made on the first ask, then the
  // same pointer. Thread-safe.
  const Build* get(const Build& from, const Arch& arch);
  const Build* find(const std::string& key) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::unique_ptr<Build>> builds_;  // by build key
};

}  // namespace cake
