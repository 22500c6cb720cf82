// cake_compile_worker: compiles one program with NVRTC and exits. Request on stdin, reply on
// stdout (see compile_worker.hpp). A crash here costs the host nothing but this compile.
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "compile_worker.hpp"
#include "env.hpp"
#include "error.hpp"

int main() {
  using namespace cake;
  std::string frame;
  if (!worker_protocol::read_frame(0, frame)) return 3;
  std::vector<std::string> reply;
  try {
    auto f = worker_protocol::decode(frame);
    size_t i = 0;
    auto next = [&]() -> std::string& {
      if (i >= f.size()) throw Error("truncated request");
      return f[i++];
    };
    if (next() != "cake-compile-v1") throw Error("unknown request format");
    RenderedProgram p;
    p.name = next();
    auto arch = Arch::parse(next());
    if (!arch) throw Error("bad arch in request");
    p.source = next();
    size_t nh = std::stoul(next());
    for (size_t k = 0; k < nh; ++k) {
      std::string name = next();
      p.headers.emplace_back(name, next());
    }
    std::vector<std::string> options;
    size_t no = std::stoul(next());
    for (size_t k = 0; k < no; ++k) options.push_back(next());
    size_t ne = std::stoul(next());
    for (size_t k = 0; k < ne; ++k) p.name_expressions.push_back(next());
    // Fault injection for the tests of the isolation itself (never set in production).
    if (auto fault = env::worker_fault(); fault && fault->second == p.name) {
      if (fault->first == "crash") ::raise(SIGSEGV);
      if (fault->first == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    }
    CompiledBinary b = Nvrtc::instance().compile(p, *arch, options);
    reply = {"ok", b.cubin, b.log, std::to_string(b.lowered_names.size())};
    for (auto& l : b.lowered_names) reply.push_back(l);
  } catch (const CompileError& e) {
    std::string what = e.what();
    reply = {"error", what.substr(0, what.find(" [program")), e.log()};
  } catch (const std::exception& e) {
    reply = {"error", e.what(), ""};
  }
  worker_protocol::write_frame(1, worker_protocol::encode(reply));
  return 0;
}
