// Loads libcake.so the way a host program outside the build tree might: a copy of the library
// and its compile worker in a folder of their own, opened by a path relative to another
// folder, after which the program changes folder. The library must still name the worker
// beside it. Exit 0 when it does, 1 otherwise (with what it named).
//   dlopen_worker_check LIBCAKE WORKER
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LIBCAKE WORKER\n", argv[0]);
    return 2;
  }
  char tmpl[] = "/tmp/cake-dlopen-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const fs::path root = tmpl, lib = root / "lib", work = root / "work";
  fs::create_directories(lib);
  fs::create_directories(work);
  fs::copy_file(argv[1], lib / "libcake.so");
  fs::copy_file(argv[2], lib / "cake_compile_worker");
  int rc = 1;
  if (::chdir(work.c_str()) == 0) {
    void* handle = ::dlopen("../lib/libcake.so", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::fprintf(stderr, "dlopen ../lib/libcake.so: %s\n", ::dlerror());
    } else if (::chdir("/") == 0) {  // the relative path no longer leads anywhere
      using WorkerPath = const char* (*)();
      auto worker = reinterpret_cast<WorkerPath>(::dlsym(handle, "cake_compile_worker_path"));
      const std::string got = worker ? worker() : "(no cake_compile_worker_path)";
      std::error_code ec;
      const bool same = fs::equivalent(got, lib / "cake_compile_worker", ec);
      std::printf("worker: '%s'\nexpected: '%s'\n", got.c_str(), (lib / "cake_compile_worker").c_str());
      rc = same ? 0 : 1;
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  return rc;
}
