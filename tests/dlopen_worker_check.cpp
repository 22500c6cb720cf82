// Loads libcake.so by the relative path it is given, as a host program might, then changes
// folder and asks which compile worker the library would use: the one beside the library,
// however it was loaded. Exit 0 when it is `expected`, 1 otherwise (with both printed).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RELATIVE_LIBCAKE EXPECTED_WORKER\n", argv[0]);
    return 2;
  }
  void* lib = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], ::dlerror());
    return 1;
  }
  if (::chdir("/") != 0) return 1;  // the library's path was relative to the old folder
  using WorkerPath = const char* (*)();
  auto worker = reinterpret_cast<WorkerPath>(::dlsym(lib, "cake_compile_worker_path"));
  if (!worker) {
    std::fprintf(stderr, "no cake_compile_worker_path in %s\n", argv[1]);
    return 1;
  }
  const std::string got = worker();
  std::printf("worker: '%s'\nexpected: '%s'\n", got.c_str(), argv[2]);
  return got == argv[2] ? 0 : 1;
}
