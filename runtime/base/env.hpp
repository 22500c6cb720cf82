// Every CAKE_* environment variable is read here and nowhere else.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace cake::env {

std::vector<std::string> registry_paths();      // CAKE_REGISTRY, ':'-separated files
std::string cache_dir();                        // CAKE_CACHE_DIR, else XDG_CACHE_HOME/cake, ~/.cache/cake
std::optional<std::string> aot_dir();           // CAKE_AOT_DIR
std::optional<std::string> dump_dir();          // CAKE_DUMP_DIR
bool stand_ins_enabled();                       // CAKE_JIT_STAND_IN (default 1; 0 = compile before the first call)
bool jit_enabled();                             // CAKE_JIT (default 1; 0 = never call NVRTC)
std::optional<std::string> nvrtc_path();        // CAKE_NVRTC_PATH: a libnvrtc to dlopen first
std::optional<std::string> libcuda_path();      // CAKE_LIBCUDA_PATH: a libcuda to dlopen first
std::string log_level();                        // CAKE_LOG_LEVEL (default "warn")
double compile_timeout_s();                     // CAKE_COMPILE_TIMEOUT (default 300)
std::string compile_isolation();                // CAKE_COMPILE_ISOLATION: process (default) | required | inprocess
std::optional<std::string> compile_worker();    // CAKE_COMPILE_WORKER: the worker binary
// CAKE_TEST_WORKER_FAULT=crash:<program> or hang:<program>: the worker faults on purpose
// (tests of crash isolation only).
std::optional<std::pair<std::string, std::string>> worker_fault();

// The raw value of one variable, for `cakec doctor`.
std::optional<std::string> get(const char* name);

}  // namespace cake::env
