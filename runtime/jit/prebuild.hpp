// `cakec build`: compile every concrete build of the registry (its programs, and the prebuild
// instances of parametric ones) that the local NVRTC can serve for the requested archs, in
// parallel, into aot/<arch>/<program>.cubin (PTX for a virtual arch: <program>.ptx) and
// aot/manifest.json.
// Incremental: a build whose cubin is current (same source hash, toolkit, options and
// sha256) is not compiled again.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include "nvrtc.hpp"
#include "registry.hpp"

namespace cake {

struct PrebuildOptions {
  std::vector<Arch> archs;
  // Non-empty: exactly these builds (of `registry`, e.g. what the planner picks for a job's
  // problems: ops::plan_shapes), and `archs` is not read.
  std::vector<const Build*> builds;
  std::filesystem::path out = "aot";
  int jobs = 0;                     // 0: one per core
  std::optional<std::regex> filter;  // program names to build
  bool force = false;               // rebuild even when current
  bool jit_enabled = true;          // false (CAKE_JIT=0): compile nothing, skip with a reason
  // How to compile; default compile_isolated (a worker process per compile).
  std::function<CompiledBinary(const RenderedProgram&, const Arch&, const std::vector<std::string>&)> compile;
  std::ostream* progress = nullptr;
};

struct PrebuildSummary {
  int built = 0, up_to_date = 0, failed = 0;
  std::vector<std::pair<std::string, std::string>> skipped;   // build key, reason
  std::vector<std::pair<std::string, std::string>> failures;  // build key, error
  double wall_s = 0, compile_s = 0;
};

PrebuildSummary prebuild(const Registry& registry, const Nvrtc& nvrtc, const PrebuildOptions& opt);

// What `archs` need, one build per concrete program (declared, or a prebuild instance) and arch:
// for a device arch, the cubin build that serves it (a listed build that runs there, else one
// derived for it from a virtual arch); for a virtual arch, the program's PTX build for it.
std::vector<const Build*> builds_for_archs(const Registry& registry, const std::vector<Arch>& archs);

// Prebuilds every program the registry registers for device `ordinal`'s arch into `out`,
// so that no compile happens in the middle of a training step. Throws LibraryMissing
// without a GPU.
PrebuildSummary prebuild_for_device(const Registry& registry, int ordinal, const std::filesystem::path& out,
                                    std::ostream* progress = nullptr);

}  // namespace cake
