#include "instance_table.hpp"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>

#include "sha256.hpp"

namespace cake {

std::string instance_name(const Program& parametric, const std::map<std::string, int64_t>& values) {
  std::string name = parametric.name;
  for (const auto& [dim, v] : values) name += "." + dim + std::to_string(v);
  return name;
}

std::string instance_source_hash(const std::string& parametric_hash, const std::string& instance_name) {
  Sha256 h;
  h.field("cake-instance-v1").field(parametric_hash).field(instance_name);
  return h.hex();
}

std::string instance_domain_error(const Program& parametric, const std::map<std::string, int64_t>& dims) {
  for (const auto& d : parametric.instance_dims) {
    auto it = dims.find(d.dim);
    if (it == dims.end()) return "the problem has no dim '" + d.dim + "' (program " + parametric.name + " takes it)";
    const int64_t v = it->second;
    if (v < d.range.lo || v > d.range.hi || v % d.divisible != 0)
      return d.dim + "=" + std::to_string(v) + " is outside program " + parametric.name + "'s instances (" + d.dim +
             " in [" + std::to_string(d.range.lo) + ", " + std::to_string(d.range.hi) + "]" +
             (d.divisible > 1 ? ", a multiple of " + std::to_string(d.divisible) : "") + ")";
  }
  return "";
}

std::vector<std::string> kernel_placeholders(const std::string& kernel) {
  // Hand-written, not std::regex: every program's kernels are scanned at registry load.
  auto word = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  std::vector<std::string> out;
  for (size_t open = kernel.find('{'); open != std::string::npos; open = kernel.find('{', open + 1)) {
    size_t end = open + 1;
    while (end < kernel.size() && word(kernel[end], end == open + 1)) ++end;
    if (end > open + 1 && end < kernel.size() && kernel[end] == '}') out.push_back(kernel.substr(open + 1, end - open - 1));
  }
  return out;
}

namespace {
// [a-z_][a-z0-9_]{0,31}: a dim name, as the kernels' {placeholders} spell them.
bool dim_name(const std::string& k) {
  if (k.empty() || k.size() > 32 || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  return std::all_of(k.begin(), k.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}
}  // namespace

void read_instance(const JsonReader& r, Program& p) {
  r.allow_only({"dims", "prebuild"});
  auto dims = r.at("dims");
  dims.expect_object();
  if (dims.size() == 0) dims.fail("a parametric program needs at least one dim");
  dims.each_member([&](const std::string& k, const JsonReader& d) {
    if (!dim_name(k)) d.fail("'" + k + "' is not a dim name (lowercase letters, digits, '_')");
    d.allow_only({"range", "divisible"});
    InstanceDim idim;
    idim.dim = k;
    auto range = d.at("range");
    range.expect_array();
    if (range.size() != 2 || range.at(size_t{1}).is_null())
      range.fail("an instance dim's range is [lo, hi], both given: each value is a program");
    idim.range = {range.at(size_t{0}).int64(), range.at(size_t{1}).int64()};
    if (idim.range.lo < 1 || idim.range.lo > idim.range.hi)
      range.fail("needs 1 <= lo <= hi, got [" + std::to_string(idim.range.lo) + ", " + std::to_string(idim.range.hi) + "]");
    if (d.has("divisible")) {
      idim.divisible = d.at("divisible").int64();
      if (idim.divisible < 1) d.at("divisible").fail("divisor must be >= 1");
    }
    p.instance_dims.push_back(idim);
  });
  // In name order, as they were when read from a sorted map: instance names follow it.
  std::sort(p.instance_dims.begin(), p.instance_dims.end(),
            [](const InstanceDim& a, const InstanceDim& b) { return a.dim < b.dim; });
  if (r.has("prebuild")) {
    auto pre = r.at("prebuild");
    pre.expect_array();
    for (size_t i = 0; i < pre.size(); ++i) {
      auto e = pre.at(i);
      e.expect_object();
      std::map<std::string, int64_t> values;
      e.each_member([&](const std::string& k, const JsonReader& v) { values[k] = v.int64(); });
      p.prebuild.push_back(std::move(values));
    }
  }
}

void check_instance_rules(const Program& p, const std::map<std::string_view, const Program*>& programs) {
  auto where = [&] { return p.origin.str(); };
  std::set<std::string> named;
  for (const auto& k : p.kernels)
    for (const auto& ph : kernel_placeholders(k)) named.insert(ph);
  if (!p.parametric()) {
    if (!named.empty())
      throw RegistryError(where() + "/kernels", "names {" + *named.begin() + "} but the program has no \"instance\" dims");
    return;
  }
  std::set<std::string> declared;
  for (const auto& d : p.instance_dims) {
    declared.insert(d.dim);
    if (!named.count(d.dim)) throw RegistryError(where() + "/kernels", "no kernel names {" + d.dim + "}");
    if (p.params->contains(d.dim))
      throw RegistryError(where() + "/params", "sets '" + d.dim + "', which each instance sets to its value");
  }
  for (const auto& ph : named)
    if (!declared.count(ph)) throw RegistryError(where() + "/kernels", "{" + ph + "} is not one of the instance dims");
  for (size_t i = 0; i < p.prebuild.size(); ++i) {
    auto at = [&] { return where() + "/instance/prebuild/" + std::to_string(i); };
    if (p.prebuild[i].size() != p.instance_dims.size())
      throw RegistryError(at(), "needs a value for each instance dim and nothing else");
    if (std::string err = instance_domain_error(p, p.prebuild[i]); !err.empty()) throw RegistryError(at(), err);
  }
  const std::string prefix = p.name + ".";
  for (auto it = programs.lower_bound(prefix); it != programs.end() && it->first.rfind(prefix, 0) == 0; ++it)
    throw RegistryError(it->second->origin.str() + "/name",
                        "'" + std::string(it->first) + "' is in the names of program " + p.name + "'s instances");
}

namespace {
std::string substitute(std::string kernel, const std::map<std::string, int64_t>& values) {
  for (const auto& [dim, v] : values) {
    const std::string key = "{" + dim + "}", val = std::to_string(v);
    for (size_t at = kernel.find(key); at != std::string::npos; at = kernel.find(key, at + val.size()))
      kernel.replace(at, key.size(), val);
  }
  return kernel;
}
}  // namespace

const Program* InstanceTable::get(const Registry& registry, const Program& p,
                                  const std::map<std::string, int64_t>& dims, std::string* why) {
  if (std::string err = instance_domain_error(p, dims); !err.empty()) {
    if (why) *why = err;
    return nullptr;
  }
  std::map<std::string, int64_t> values;
  for (const auto& d : p.instance_dims) values[d.dim] = dims.at(d.dim);
  const std::string name = instance_name(p, values);
  {
    std::shared_lock lock(mu_);
    if (auto it = programs_.find(name); it != programs_.end()) return &it->second->program;
  }
  // A stand-in of a parametric program is parametric on the same dims (checked at load).
  std::string stand_in;
  if (!p.stand_in.empty()) {
    const Program* si = registry.program(p.stand_in);
    const Program* si_inst = si ? get(registry, *si, dims, why) : nullptr;
    if (si_inst == nullptr) return nullptr;
    stand_in = si_inst->name;
  }
  auto e = std::make_unique<Entry>();
  Program& inst = e->program;
  inst.name = name;
  inst.family = p.family;
  inst.templ = p.templ;
  for (const auto& k : p.kernels) inst.kernels.push_back(substitute(k, values));
  inst.archs = p.archs;
  nlohmann::json params = *p.params;
  for (const auto& [dim, v] : values) params[dim] = v;
  inst.params = ProgramParams(std::move(params));
  inst.stand_in = stand_in;
  inst.instance_of = &p;
  inst.instance_values = values;
  inst.origin = p.origin;
  for (const auto& arch : p.archs) {
    const Build* b = registry.build(p.name, arch);
    if (b == nullptr) continue;  // validated at load: every arch has a build
    auto ib = std::make_unique<Build>(*b);
    ib->program = name;
    ib->source_hash = instance_source_hash(b->source_hash, name);
    e->builds.push_back(std::move(ib));
  }
  std::unique_lock lock(mu_);
  auto [it, fresh] = programs_.emplace(name, std::move(e));
  if (fresh)
    for (const auto& b : it->second->builds) builds_.emplace(b->key(), b.get());
  return &it->second->program;
}

const Program* InstanceTable::find_program(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = programs_.find(name);
  return it == programs_.end() ? nullptr : &it->second->program;
}

const Build* InstanceTable::find_build(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = builds_.find(key);
  return it == builds_.end() ? nullptr : it->second;
}

}  // namespace cake
