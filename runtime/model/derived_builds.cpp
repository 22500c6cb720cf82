#include "derived_builds.hpp"

#include <mutex>

namespace cake {

std::vector<std::string> retarget_options(const std::vector<std::string>& options, const Arch& arch) {
  std::vector<std::string> out = options;
  bool named = false;
  for (auto& o : out)
    for (const std::string flag : {"--gpu-architecture=", "-arch="})
      if (o.rfind(flag, 0) == 0) {
        o = flag + arch.str();
        named = true;
      }
  if (!named) out.insert(out.begin(), "--gpu-architecture=" + arch.str());
  return out;
}

const Build* derivation_source(const Registry& registry, const Program& program, const Arch& arch) {
  if (arch.virt || arch.suffix != 0) return nullptr;
  const Build* best = nullptr;
  for (const auto& a : program.archs)
    if (a.virt && a.suffix == 0 && a.runs_on(arch))
      if (const Build* b = registry.build(program.name, a); b && (!best || best->arch < a)) best = b;
  return best;
}

const Build* DerivedBuildTable::get(const Build& from, const Arch& arch) {
  const std::string key = from.program + "@" + arch.str();
  {
    std::shared_lock lock(mu_);
    if (auto it = builds_.find(key); it != builds_.end()) return it->second.get();
  }
  auto b = std::make_unique<Build>(from);
  b->arch = arch;
  b->options = retarget_options(from.options, arch);
  std::unique_lock lock(mu_);
  return builds_.emplace(key, std::move(b)).first->second.get();
}

const Build* DerivedBuildTable::find(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = builds_.find(key);
  return it == builds_.end() ? nullptr : it->second.get();
}

}  // namespace cake
