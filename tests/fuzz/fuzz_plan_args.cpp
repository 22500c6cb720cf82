// libFuzzer target: `cakec plan` arguments. The input is lines; a line's first byte says
// where the rest goes (so the seed corpus stays readable):
//   o op   a arch   s sms   d --dim   t --dtype   l --align   + --accumulate   ~ --nondeterministic
// any other first byte: byte % 6 picks op, arch, sms, dim, dtype, align (the whole line).
// cakec::build_problem(args) turns them into a problem (UsageError on a malformed value);
// then the real planner over the embedded registry plans it, every build available by JIT,
// and format_plan prints it. UsageError and cake::Error are expected; anything else is a finding.
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli_common.hpp"
#include "error.hpp"
#include "plan_args.hpp"
#include "planner.hpp"
#include "registry.hpp"

namespace {

cakec::PlanArgs parse_input(std::string_view in) {
  cakec::PlanArgs a;
  size_t pos = 0;
  while (pos <= in.size()) {
    size_t nl = in.find('\n', pos);
    if (nl == std::string_view::npos) nl = in.size();
    std::string_view line = in.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    char tag = line[0];
    std::string rest(line.substr(1));
    switch (tag) {
      case 'o': a.op = rest; break;
      case 'a': a.arch = rest; break;
      case 's': a.sms = int(std::strtol(rest.c_str(), nullptr, 10)); break;
      case 'd': a.dims.push_back(rest); break;
      case 't': a.dtypes.push_back(rest); break;
      case 'l': a.aligns.push_back(rest); break;
      case '+': a.accumulate = !a.accumulate; break;
      case '~': a.nondeterministic = !a.nondeterministic; break;
      default: {
        std::string whole(line);
        switch (static_cast<unsigned char>(tag) % 6) {
          case 0: a.op = whole; break;
          case 1: a.arch = whole; break;
          case 2: a.sms = int(std::strtol(whole.c_str(), nullptr, 10)); break;
          case 3: a.dims.push_back(whole); break;
          case 4: a.dtypes.push_back(whole); break;
          default: a.aligns.push_back(whole); break;
        }
      }
    }
  }
  return a;
}

const cake::Planner& planner() {
  static const auto reg = cake::Registry::load_default();
  // Every build is available by JIT: the build of the closest arch that runs on the device.
  static const cake::Planner p(reg, [](const cake::Program& prog, const cake::Arch& device) {
    cake::Availability a;
    for (const auto& arch : prog.archs)
      if (arch.runs_on(device))
        if (const cake::Build* b = reg->build(prog.name, arch); b && (!a.build || arch == device)) {
          a.build = b;
          a.by = cake::ServedBy::jit;
        }
    if (!a.available()) {
      a.reason = "no_build";
      a.detail = "program " + prog.name + " has no build that runs on " + device.str();
    }
    return a;
  });
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  static const bool print = std::getenv("CAKE_FUZZ_PRINT") != nullptr;  // replaying by hand
  cakec::PlanArgs args = parse_input({reinterpret_cast<const char*>(data), size});
  try {
    cake::Problem problem = cakec::build_problem(args);
    cake::Device device{cake::Arch::parse(args.arch).value_or(*cake::Arch::parse("sm_90a")), args.sms};
    cake::PlanResult r = planner().plan(problem, device);
    std::string text = cake::format_plan(r, problem, device);
    if (print) std::fprintf(stderr, "%s", text.c_str());
    if (r.ok() && r.plan->scratch_bytes < 0) __builtin_trap();  // a negative buffer size
    (void)problem.hash();
  } catch (const cakec::UsageError& e) {
    if (print) std::fprintf(stderr, "usage error: %s\n", e.what());
  } catch (const cake::Error& e) {
    if (print) std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 0;
}
