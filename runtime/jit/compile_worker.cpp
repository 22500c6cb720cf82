#include "compile_worker.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "env.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "log.hpp"

extern char** environ;

// The installed worker's path from the installed library's and cakec's folders (set by
// runtime/CMakeLists.txt from the install layout; these are GNUInstallDirs' defaults).
#ifndef CAKE_WORKER_FROM_LIB
#define CAKE_WORKER_FROM_LIB "../libexec/cake_compile_worker"
#endif
#ifndef CAKE_WORKER_FROM_BIN
#define CAKE_WORKER_FROM_BIN "../libexec/cake_compile_worker"
#endif

namespace cake {
namespace fs = std::filesystem;

namespace worker_protocol {

void write_frame(int fd, const std::string& data) {
  uint64_t n = data.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  std::string buf(reinterpret_cast<char*>(len), 8);
  buf += data;
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(std::string("compile worker pipe: ") + std::strerror(errno));
    done += size_t(w);
  }
}

bool read_frame(int fd, std::string& data) {
  auto read_all = [fd](char* p, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::read(fd, p + done, n - done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      done += size_t(r);
    }
    return true;
  };
  unsigned char len[8];
  if (!read_all(reinterpret_cast<char*>(len), 8)) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(len[i]) << (8 * i);
  if (n > (uint64_t(1) << 32)) return false;  // no frame is that large: a corrupt stream
  data.resize(n);
  return read_all(data.data(), n);
}

std::string encode(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) {
    uint64_t n = f.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
    out += f;
  }
  return out;
}

std::vector<std::string> decode(const std::string& blob) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < blob.size()) {
    if (blob.size() - pos < 8) throw Error("malformed compile worker message");
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(blob[pos + i])) << (8 * i);
    pos += 8;
    if (n > blob.size() - pos) throw Error("malformed compile worker message");
    out.push_back(blob.substr(pos, n));
    pos += n;
  }
  return out;
}

}  // namespace worker_protocol

namespace {
// An address inside this module: internal linkage, so that no other copy of cake in the
// process (a static one beside libcake.so) can stand in for it.
void module_anchor() {}

bool executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}
}  // namespace

std::filesystem::path this_module_path() {
  // dladdr names the module as it was loaded, which may be relative to a working directory
  // that has changed since; /proc/self/maps names the file that holds this code, absolutely.
  const auto self = reinterpret_cast<uintptr_t>(&module_anchor);
  if (auto maps = read_file("/proc/self/maps")) {
    size_t pos = 0;
    while (pos < maps->size()) {
      size_t eol = maps->find('\n', pos);
      if (eol == std::string::npos) eol = maps->size();
      const std::string line = maps->substr(pos, eol - pos);
      pos = eol + 1;
      unsigned long lo = 0, hi = 0;
      int path_at = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || path_at == 0) continue;
      if (self < lo || self >= hi || line[size_t(path_at)] != '/') continue;
      std::string path = line.substr(size_t(path_at));
      const std::string deleted = " (deleted)";
      if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
        path.resize(path.size() - deleted.size());
      return path;
    }
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&module_anchor), &info) && info.dli_fname && info.dli_fname[0] == '/')
    return info.dli_fname;
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec);
}

std::string find_compile_worker() {
  if (auto p = env::compile_worker()) {
    if (executable_file(*p)) return *p;
    warn_once("bad-worker", "cake: CAKE_COMPILE_WORKER=" + *p + " is not an executable file; ignored");
    return "";
  }
  const fs::path module = this_module_path();
  if (module.empty()) return "";
  // Beside the module (libcake.so in the build tree); where an install puts it, seen from
  // the installed library or cakec; from an executable of the build tree's tools/ or tests/.
  const fs::path dir = module.parent_path();
  for (const fs::path& c : {dir / "cake_compile_worker", dir / CAKE_WORKER_FROM_LIB, dir / CAKE_WORKER_FROM_BIN,
                            dir / "../runtime/cake_compile_worker"}) {
    std::error_code ec;
    if (executable_file(c)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

namespace {

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return std::string("SIG") + (name ? name : std::to_string(sig).c_str()) + " (" + strsignal(sig) + ")";
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

}  // namespace

CompiledBinary compile_in_worker(const std::string& worker, const RenderedProgram& program,
                                 const Arch& arch, const std::vector<std::string>& options,
                                 double timeout_s) {
  auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& what, const std::string& log = "") {
    return CompileError(what, program.name, arch.str(), program.source_hash, options, log);
  };
  Pipe in, out;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>(worker.c_str()), nullptr};
  int rc = ::posix_spawn(&pid, worker.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error("cannot start the compile worker " + worker + ": " + std::strerror(rc));
  in.close_end(0);
  out.close_end(1);

  // A worker that dies early closes its stdin: don't let SIGPIPE kill the host.
  struct sigaction ignore {}, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  std::vector<std::string> req = {"cake-compile-v1", program.name, arch.str(), program.source};
  req.push_back(std::to_string(program.headers.size()));
  for (const auto& [name, content] : program.headers) req.push_back(name), req.push_back(content);
  req.push_back(std::to_string(options.size()));
  for (const auto& o : options) req.push_back(o);
  req.push_back(std::to_string(program.name_expressions.size()));
  for (const auto& e : program.name_expressions) req.push_back(e);
  bool sent = true;
  try {
    worker_protocol::write_frame(in.fd[1], worker_protocol::encode(req));
  } catch (const Error&) {
    sent = false;  // the exit status below says why
  }
  in.close_end(1);
  ::sigaction(SIGPIPE, &old, nullptr);

  // Read the reply, giving up at the deadline.
  std::string reply;
  bool timed_out = false;
  {
    std::string buf;
    char chunk[65536];
    for (;;) {
      double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      pollfd p{out.fd[0], POLLIN, 0};
      int r = ::poll(&p, 1, int(std::min(left * 1000, 1000.0)) + 1);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;
      ssize_t n = ::read(out.fd[0], chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buf.append(chunk, size_t(n));
    }
    reply = std::move(buf);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw fail("the compile timed out after " + std::to_string(int(timeout_s)) +
               " s (CAKE_COMPILE_TIMEOUT); the worker was killed");
  if (WIFSIGNALED(status))
    throw fail("the NVRTC worker was killed by signal " + signal_text(WTERMSIG(status)));
  std::vector<std::string> fields;
  try {
    if (reply.size() < 8) throw Error("no reply");
    std::string frame = reply.substr(8);
    fields = worker_protocol::decode(frame);
  } catch (const Error&) {
    throw fail("the NVRTC worker exited with status " + std::to_string(WEXITSTATUS(status)) +
               " without a reply" + (sent ? "" : " (it did not read the request)"));
  }
  // Reply: "ok", cubin, log, n, lowered... | "error", message, log
  if (fields.size() >= 3 && fields[0] == "error") throw fail(fields[1], fields[2]);
  if (fields.size() < 4 || fields[0] != "ok") throw fail("malformed reply from the NVRTC worker");
  CompiledBinary b;
  b.cubin = std::move(fields[1]);
  b.log = std::move(fields[2]);
  size_t n = std::stoul(fields[3]);
  if (fields.size() != 4 + n) throw fail("malformed reply from the NVRTC worker");
  for (size_t i = 0; i < n; ++i) b.lowered_names.push_back(std::move(fields[4 + i]));
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

CompiledBinary compile_isolated(const RenderedProgram& program, const Arch& arch,
                                const std::vector<std::string>& options) {
  const std::string isolation = env::compile_isolation();
  if (isolation == "inprocess") return Nvrtc::instance().compile(program, arch, options);
  static const std::string worker = find_compile_worker();
  if (worker.empty() && isolation == "required")
    throw CompileError("cake_compile_worker not found next to " + this_module_path().string() +
                           " (set CAKE_COMPILE_WORKER) and CAKE_COMPILE_ISOLATION=required: not compiling in process",
                       program.name, arch.str(), program.source_hash, options, "");
  if (worker.empty()) {
    warn_once("no-worker",
              "cake: cake_compile_worker not found (set CAKE_COMPILE_WORKER); compiling in "
              "process, where an NVRTC crash would take the host down");
    return Nvrtc::instance().compile(program, arch, options);
  }
  return compile_in_worker(worker, program, arch, options, env::compile_timeout_s());
}

}  // namespace cake
