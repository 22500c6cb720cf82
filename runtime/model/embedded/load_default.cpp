// Registry::load_default, apart from registry.cpp: it reads the snapshot the build makes
// (make_snapshot.cpp), so it is linked into every user of the model layer but that tool.
#include "embedded.hpp"
#include "env.hpp"
#include "registry.hpp"
#include "registry_values.hpp"

namespace cake {

std::shared_ptr<const Registry> Registry::load_default(const std::vector<std::string>& extra) {
  std::vector<std::string> files = env::registry_paths();
  files.insert(files.end(), extra.begin(), extra.end());
  std::vector<RegistrySource> on_top;
  on_top.reserve(files.size());
  for (const auto& f : files) on_top.push_back({f, read_file_text(f)});
  return from_snapshot(embedded_registry_snapshot(), on_top);
}

}  // namespace cake
