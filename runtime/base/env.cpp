#include "env.hpp"

#include <cstdlib>
#include <sstream>

namespace cake::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<std::string> registry_paths() {
  std::vector<std::string> out;
  auto v = get("CAKE_REGISTRY");
  if (!v) return out;
  std::stringstream ss(*v);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string cache_dir() {
  if (auto v = get("CAKE_CACHE_DIR")) return *v;
  if (auto v = get("XDG_CACHE_HOME")) return *v + "/cake";
  if (auto v = get("HOME")) return *v + "/.cache/cake";
  return "/tmp/cake-cache";
}

std::optional<std::string> aot_dir() { return get("CAKE_AOT_DIR"); }
std::optional<std::string> dump_dir() { return get("CAKE_DUMP_DIR"); }
std::optional<std::string> nvrtc_path() { return get("CAKE_NVRTC_PATH"); }
std::optional<std::string> libcuda_path() { return get("CAKE_LIBCUDA_PATH"); }

namespace {
// A switch that is on unless set to 0, off or false.
bool on_unless_off(const char* name) {
  auto v = get(name);
  return !(v && (*v == "0" || *v == "off" || *v == "false"));
}
}  // namespace

bool stand_ins_enabled() { return on_unless_off("CAKE_JIT_STAND_IN"); }
bool jit_enabled() { return on_unless_off("CAKE_JIT"); }

std::string log_level() { return get("CAKE_LOG_LEVEL").value_or("warn"); }

double compile_timeout_s() {
  auto v = get("CAKE_COMPILE_TIMEOUT");
  if (!v) return 300.0;
  try {
    return std::stod(*v);
  } catch (...) {
    return 300.0;
  }
}

std::string compile_isolation() { return get("CAKE_COMPILE_ISOLATION").value_or("process"); }
std::optional<std::string> compile_worker() { return get("CAKE_COMPILE_WORKER"); }

std::optional<std::pair<std::string, std::string>> worker_fault() {
  auto v = get("CAKE_TEST_WORKER_FAULT");
  if (!v) return std::nullopt;
  auto colon = v->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return std::make_pair(v->substr(0, colon), v->substr(colon + 1));
}

}  // namespace cake::env
