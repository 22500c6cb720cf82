// cakec list-routes, cakec list-programs.
#include <iostream>
#include <map>

#include "cli_common.hpp"

namespace cakec {
namespace {
using nlohmann::json;

std::string range_str(const cake::Range& r) {
  return "[" + std::to_string(r.lo) + ", " +
         (r.hi == cake::Range{}.hi ? std::string("inf") : std::to_string(r.hi)) + "]";
}

std::string window_str(const cake::Window& w) {
  std::vector<std::string> parts;
  std::string archs;
  for (const auto& a : w.archs) archs += (archs.empty() ? "" : ",") + a.str();
  if (!archs.empty()) parts.push_back(archs);
  if (w.sm_count.lo != 0 || w.sm_count.hi != cake::Range{}.hi)
    parts.push_back("sms" + range_str(w.sm_count));
  std::string dt;
  for (const auto& [k, v] : w.dtypes) dt += (dt.empty() ? "" : " ") + k + "=" + cake::dtype_name(v);
  if (!dt.empty()) parts.push_back(dt);
  for (const auto& [k, r] : w.dims) parts.push_back(k + range_str(r));
  if (!w.tiles.per.empty()) {
    std::string per;
    for (const auto& [k, size] : w.tiles.per) per += (per.empty() ? "" : "x") + k + "/" + std::to_string(size);
    parts.push_back("waves(" + per + ")" + range_str(w.tiles.waves));
  }
  for (const auto& [k, d] : w.divisible) parts.push_back(k + "%" + std::to_string(d));
  for (const auto& [k, p] : w.parity) parts.push_back(k + (p ? " odd" : " even"));
  std::map<int, std::string> align;
  for (const auto& [k, a] : w.align) align[a] += (align[a].empty() ? "" : ",") + k;
  for (const auto& [a, args] : align) parts.push_back("align(" + args + ")>=" + std::to_string(a));
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s.empty() ? "any" : s;
}

// A parametric program's name with the dims it is instantiated on: "rms_fwd[h]".
std::string program_str(const cake::Program& p) {
  std::string dims;
  for (const auto& d : p.instance_dims) dims += (dims.empty() ? "" : ",") + d.dim;
  return dims.empty() ? p.name : p.name + "[" + dims + "]";
}

json instance_json(const cake::Program& p) {
  json dims = json::object();
  for (const auto& d : p.instance_dims) dims[d.dim] = {{"range", {d.range.lo, d.range.hi}}, {"divisible", d.divisible}};
  return {{"dims", dims}, {"prebuild", p.prebuild}};
}

json window_json(const cake::Window& w) {
  json j = json::object();
  if (!w.archs.empty()) {
    j["archs"] = json::array();
    for (const auto& a : w.archs) j["archs"].push_back(a.str());
  }
  auto range = [](const cake::Range& r) {
    return json::array({r.lo, r.hi == cake::Range{}.hi ? json(nullptr) : json(r.hi)});
  };
  if (w.sm_count.lo != 0 || w.sm_count.hi != cake::Range{}.hi) j["sm_count"] = range(w.sm_count);
  for (const auto& [k, r] : w.dims) j["dims"][k] = range(r);
  if (!w.tiles.per.empty()) j["tiles"] = {{"per", w.tiles.per}, {"waves", range(w.tiles.waves)}};
  for (const auto& [k, d] : w.divisible) j["divisible"][k] = d;
  for (const auto& [k, p] : w.parity) j["parity"][k] = p ? "odd" : "even";
  for (const auto& [k, t] : w.dtypes) j["dtypes"][k] = cake::dtype_name(t);
  for (const auto& [k, a] : w.align) j["align"][k] = a;
  return j;
}

struct ListRoutesArgs {
  std::string family, op, arch;
  bool json = false;
};

int list_routes(const Globals& g, const ListRoutesArgs& a) {
  std::optional<cake::Arch> arch;
  if (!a.arch.empty()) arch = parse_device_arch_arg("--arch", a.arch);
  Context ctx = load_context(g);
  std::vector<std::vector<std::string>> rows;
  json out = json::array();
  for (const auto& r : ctx.registry->routes()) {
    if (!a.family.empty() && r.family != a.family) continue;
    if (!a.op.empty() && r.op != a.op) continue;
    json jr = {{"op", r.op}, {"family", r.family}, {"candidates", json::array()}};
    int index = 0;
    for (const auto& c : r.candidates) {
      ++index;
      if (arch && !c.window.archs.empty()) {
        bool any = false;
        for (const auto& p : c.window.archs) any = any || p.matches(*arch);
        if (!any) continue;
      }
      std::string stages;
      json js = json::array();
      for (const auto& s : c.stages) {
        stages += (stages.empty() ? "" : " -> ") + program_str(*ctx.registry->program(s.program));
        js.push_back({{"program", s.program}, {"kernel", s.kernel}, {"bind", s.bind}});
      }
      std::string served;
      json jserved = nullptr;
      if (arch) {
        for (const auto& s : c.stages) {
          auto av = ctx.rule->check(*ctx.registry->program(s.program), *arch);
          // The build's arch where it is not the device's: sm_80's cubin on sm_86, PTX, ...
          std::string one = !av.available()         ? "-(" + av.reason + ")"
                            : av.build->arch == *arch ? cake::served_by_name(av.by)
                                                      : std::string(cake::served_by_name(av.by)) + " " + av.build->arch.str();
          served += (served.empty() ? "" : ",") + one;
        }
        jserved = served;
      }
      std::vector<std::string> row = {
          r.op, std::to_string(index), c.name, cake::accumulate_name(c.accumulate),
          c.deterministic ? "yes" : "no", window_str(c.window), stages};
      if (arch) row.push_back(served);
      rows.push_back(row);
      json jc = {{"name", c.name},
                 {"accumulate", cake::accumulate_name(c.accumulate)},
                 {"deterministic", c.deterministic},
                 {"window", window_json(c.window)},
                 {"stages", js},
                 {"note", c.note}};
      for (const auto& b : c.scratch.buffers) {
        json jb = {{"dims", b.dims}, {"dtype_of", b.dtype_of}};
        if (b.times > 1) jb["times"] = b.times;
        if (!b.ceil_div_dim.empty()) jb["ceil_div"] = {b.ceil_div_dim, b.ceil_div_by};
        jc["scratch"].push_back(jb);
      }
      if (arch) jc["served"] = jserved;
      jr["candidates"].push_back(jc);
    }
    out.push_back(jr);
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  std::vector<std::string> header = {"OP", "#", "CANDIDATE", "ACCUMULATE", "DET", "WINDOW", "STAGES"};
  if (arch) header.push_back("SERVED(" + arch->str() + ")");
  std::cout << format_table(header, rows);
  std::cout << rows.size() << " candidates in " << out.size() << " routes\n";
  return kOk;
}

struct ListProgramsArgs {
  std::string family, arch;
  bool json = false;
};

int list_programs(const Globals& g, const ListProgramsArgs& a) {
  std::optional<cake::Arch> arch;
  if (!a.arch.empty()) arch = parse_arch_arg("--arch", a.arch);
  Context ctx = load_context(g);
  std::vector<std::vector<std::string>> rows;
  json out = json::array();
  for (const auto& p : ctx.registry->programs()) {
    if (!a.family.empty() && p.family != a.family) continue;
    for (const auto& pa : p.archs) {
      if (arch && pa != *arch) continue;
      const cake::Build* b = ctx.registry->build(p.name, pa);
      auto av = ctx.rule->check_build(*b);
      std::string served = av.available() ? cake::served_by_name(av.by) : "-(" + av.reason + ")";
      rows.push_back({program_str(p), p.family, pa.str(), b->min_cuda.str(), b->source_hash.substr(0, 12),
                      served, p.stand_in.empty() ? "-" : p.stand_in,
                      p.kernels.front() + (p.kernels.size() > 1 ? " ..." : "")});
      out.push_back({{"program", p.name},
                     {"family", p.family},
                     {"template", p.templ},
                     {"arch", pa.str()},
                     {"min_cuda", b->min_cuda.str()},
                     {"options", b->options},
                     {"source_hash", b->source_hash},
                     {"served", served},
                     {"kernels", p.kernels},
                     {"params", *p.params}});
      if (!p.stand_in.empty()) out.back()["stand_in"] = p.stand_in;
      if (p.parametric()) out.back()["instance"] = instance_json(p);
    }
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  std::cout << format_table({"PROGRAM", "FAMILY", "ARCH", "MIN_CUDA", "SOURCE", "SERVED", "STAND_IN", "KERNEL"}, rows);
  std::cout << rows.size() << " builds\n";
  return kOk;
}

}  // namespace

void add_inspect_commands(CLI::App& app, Globals& g, int& exit_code) {
  auto routes_args = std::make_shared<ListRoutesArgs>();
  auto* lr = app.add_subcommand("list-routes", "Table of every route: candidates, windows, stages");
  lr->add_option("--family", routes_args->family, "only this family");
  lr->add_option("--op", routes_args->op, "only this op");
  lr->add_option("--arch", routes_args->arch,
                 "only candidates whose window admits this arch; adds how each stage is served");
  lr->add_flag("--json", routes_args->json, "machine-readable output");
  lr->callback([&g, &exit_code, routes_args] { exit_code = list_routes(g, *routes_args); });

  auto prog_args = std::make_shared<ListProgramsArgs>();
  auto* lp = app.add_subcommand("list-programs", "Table of every build: program x arch");
  lp->add_option("--family", prog_args->family, "only this family");
  lp->add_option("--arch", prog_args->arch, "only builds for this arch");
  lp->add_flag("--json", prog_args->json, "machine-readable output");
  lp->callback([&g, &exit_code, prog_args] { exit_code = list_programs(g, *prog_args); });
}

}  // namespace cakec
