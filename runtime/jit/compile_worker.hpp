// Crash-isolated compiles: NVRTC runs in a child process (cake_compile_worker), so a
// segfault or a hang inside nvrtcCompileProgram becomes a CompileError naming the signal
// (or the timeout) instead of killing the host. The request and the reply travel over the
// child's stdin and stdout as length-prefixed frames.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "nvrtc.hpp"

namespace cake {

// The absolute path of the module holding this code (libcake.so, or the executable that
// links cake statically), however it was loaded: relative paths and later chdir included.
std::filesystem::path this_module_path();

// Where the worker binary is: CAKE_COMPILE_WORKER, else next to the module holding this
// code (or in ../libexec/, or ../runtime/ for the build tree's tools and tests). Empty if none.
std::string find_compile_worker();

// Compiles in a fresh worker process. Throws CompileError (the compiler's error, a signal,
// a timeout) or cake::Error (the worker could not be started).
CompiledBinary compile_in_worker(const std::string& worker, const RenderedProgram& program,
                                 const Arch& arch, const std::vector<std::string>& options,
                                 double timeout_s);

// The default compile function: in a worker unless CAKE_COMPILE_ISOLATION=inprocess. With
// no worker binary found: CAKE_COMPILE_ISOLATION=required makes that a CompileError, else
// the compile runs in process with one warning.
CompiledBinary compile_isolated(const RenderedProgram& program, const Arch& arch,
                                const std::vector<std::string>& options);

namespace worker_protocol {
void write_frame(int fd, const std::string& data);  // u64 little-endian length + bytes
bool read_frame(int fd, std::string& data);         // false on EOF or a short read
std::string encode(const std::vector<std::string>& fields);
std::vector<std::string> decode(const std::string& blob);  // throws on malformed input
}  // namespace worker_protocol

}  // namespace cake
