// Shared by the libFuzzer targets: what counts as an expected rejection, and a planner run
// over every route of a registry that loaded (so a registry the validator accepts is also
// one the planner and format_plan survive).
#pragma once
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "availability.hpp"
#include "error.hpp"
#include "planner.hpp"
#include "registry.hpp"

namespace cake::fuzz {

// NVRTC as `cakec plan` sees it on a CUDA 13 machine, without loading any library.
inline NvrtcInfo fake_nvrtc() {
  NvrtcInfo n;
  n.present = true;
  n.path = "<fuzz>";
  n.version = CudaVersion{13, 0};
  n.archs = {75, 80, 86, 87, 89, 90, 100, 103, 120};
  return n;
}

// Every dim, argument and arch a route mentions, so the problems built below reach past the
// window checks into availability, scratch sizing and format_plan.
struct RouteNames {
  std::set<std::string> dims, args;
  std::set<Arch> archs;
};

inline RouteNames names_of(const Route& r, const Registry& reg) {
  RouteNames n;
  for (const auto& c : r.candidates) {
    for (const auto& st : c.stages)
      if (const Program* p = reg.program(st.program))
        for (const auto& d : p->instance_dims) n.dims.insert(d.dim);
    const Window& w = c.window;
    for (const auto& [k, v] : w.dims) n.dims.insert(k);
    for (const auto& [k, v] : w.divisible) n.dims.insert(k);
    for (const auto& [k, v] : w.tiles.per) n.dims.insert(k);
    for (const auto& [k, v] : w.parity) n.dims.insert(k);
    for (const auto& [k, v] : w.dtypes) n.args.insert(k);
    for (const auto& [k, v] : w.align) n.args.insert(k);
    for (const auto& b : c.scratch.buffers) {
      for (const auto& d : b.dims) n.dims.insert(d);
      if (!b.dtype_of.empty()) n.args.insert(b.dtype_of);
      if (!b.ceil_div_dim.empty()) n.dims.insert(b.ceil_div_dim);
    }
    for (const auto& a : w.archs) n.archs.insert(a.arch);
  }
  return n;
}

// Plans a few problems per route (bounded work per input) through the real availability rule.
// With `only_file`, only routes with a candidate from that file (the embedded ones are not
// the fuzzer's business and cost most of the time).
inline void plan_every_route(const std::shared_ptr<const Registry>& reg,
                             const std::string& only_file = "") {
  AvailabilityRule rule(*reg, nullptr, fake_nvrtc(), true);
  Planner planner(reg, [&](const Program& p, const Arch& a) { return rule.check(p, a); });
  const int64_t values[] = {0, 1, 4096, 4097, std::numeric_limits<int64_t>::max()};
  size_t routes = 0;
  for (const auto& r : reg->routes()) {
    if (!only_file.empty()) {
      bool mine = false;
      for (const auto& c : r.candidates) mine = mine || c.origin.file() == only_file;
      if (!mine) continue;
    }
    if (++routes > 16) break;
    RouteNames n = names_of(r, *reg);
    std::vector<Device> devices = {{*Arch::parse("sm_90a"), 132}, {*Arch::parse("sm_80"), 108}};
    for (const auto& a : n.archs) {
      if (devices.size() >= 6) break;
      devices.push_back({a, 1});
    }
    constexpr size_t kValues = std::size(values);
    // Rounds 0..4: every dim the same value; 5..9: the values rotated over the dims (so one
    // dim can be huge while the others are small).
    for (size_t round = 0; round < 2 * kValues; ++round) {
      const int64_t v = values[round % kValues];
      for (bool acc : {false, true}) {
        Problem p;
        p.op = r.op;
        p.accumulate = acc;
        p.deterministic = v != 1;
        size_t i = 0;
        for (const auto& d : n.dims)
          p.dims[d] = round < kValues ? v : values[(round + i++) % kValues];
        for (const auto& arg : n.args) {
          p.dtypes[arg] = DType((round + i++) % 6);
          p.align[arg] = 256;
        }
        for (const auto& dev : devices) {
          PlanResult res = planner.plan(p, dev);
          std::string text = format_plan(res, p, dev);
          if (res.ok() && res.plan->scratch_bytes < 0) __builtin_trap();  // a negative buffer size
          // The memoised path must agree with the plain one.
          const PlanResult& cached = planner.plan_cached(p, dev);
          if (cached.ok() != res.ok() || (res.ok() && cached.plan->route != res.plan->route))
            __builtin_trap();
        }
      }
    }
  }
}

}  // namespace cake::fuzz
