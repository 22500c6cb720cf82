#include "planner.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

namespace cake {
namespace {

std::string join_bind(const std::map<std::string, std::string>& bind) {
  std::string s;
  for (const auto& [k, v] : bind) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

// The candidate's scratch buffers for the problem: each one's offset (multiples of
// kScratchAlign) and the total bytes. A rejection when a size cannot be computed (a dim or a
// dtype not given, or a size past int64).
std::optional<Rejection> scratch_layout(const Candidate& c, const Problem& problem, std::vector<int64_t>& offsets,
                                        int64_t& total) {
  total = 0;
  for (const ScratchBuffer& b : c.scratch.buffers) {
    auto t = problem.dtypes.find(b.dtype_of);
    if (t == problem.dtypes.end())
      return Rejection{c.name, "dtype", "scratch needs the dtype of '" + b.dtype_of + "', not given"};
    int64_t bytes = dtype_size(t->second);
    bool missing = b.times > INT64_MAX / bytes;
    if (!missing) bytes *= b.times;
    for (const auto& dim : b.dims) {
      auto it = problem.dims.find(dim);
      if (missing || it == problem.dims.end() || it->second < 0 ||
          (it->second > 0 && bytes > INT64_MAX / it->second)) {
        missing = true;
        break;
      }
      bytes *= it->second;
    }
    if (!missing && !b.ceil_div_dim.empty()) {
      auto it = problem.dims.find(b.ceil_div_dim);
      if (it == problem.dims.end() || it->second < 0) {
        missing = true;
      } else {
        // ceil(dim / by) without dim + by - 1, which overflows near INT64_MAX
        const int64_t chunks = it->second / b.ceil_div_by + (it->second % b.ceil_div_by != 0);
        if (chunks > 0 && bytes > INT64_MAX / chunks) missing = true;
        else bytes *= chunks;
      }
    }
    // Checked before the sums, which would overflow past INT64_MAX.
    if (missing || bytes > INT64_MAX / 2 ||
        (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign > INT64_MAX - total)
      return Rejection{c.name, "dim", "scratch size cannot be computed from the dims"};
    const int64_t padded = total + (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    offsets.push_back(total);
    total = offsets.size() == c.scratch.buffers.size() ? total + bytes : padded;
  }
  return std::nullopt;
}

// "[lo, hi]", an unbounded hi as "inf".
std::string range_text(const Range& r) {
  return "[" + std::to_string(r.lo) + ", " + (r.hi == Range{}.hi ? "inf" : std::to_string(r.hi)) + "]";
}

}  // namespace

std::string Problem::describe() const {
  std::ostringstream o;
  o << op << " (";
  bool first = true;
  for (const auto& [n, v] : dims) o << (first ? "" : " ") << n << "=" << v, first = false;
  o << ";";
  for (const auto& [n, t] : dtypes) o << " " << n << "=" << dtype_name(t);
  o << (accumulate ? "; accumulate" : "") << (deterministic ? "; deterministic" : "; non-deterministic allowed")
    << (candidate.empty() ? "" : "; candidate " + candidate) << ")";
  return o.str();
}

std::string Device::describe() const {
  return arch.str() + ", " + std::to_string(sm_count) + " SMs" +
         (max_smem_optin > 0 ? ", " + std::to_string(max_smem_optin) + " bytes of smem per block" : "");
}

std::optional<Rejection> Planner::check_window(const Candidate& c, const Problem& p,
                                               const Device& d) const {
  const Window& w = c.window;
  auto reject = [&](const std::string& reason, const std::string& detail) {
    return Rejection{c.name, reason, detail};
  };
  if (p.accumulate && c.accumulate == Accumulate::off)
    return reject("accumulate", "the call accumulates; this candidate overwrites");
  if (!p.accumulate && c.accumulate != Accumulate::off)
    return reject("accumulate", "this candidate accumulates; the call does not");
  if (!c.deterministic && p.deterministic)
    return reject("deterministic", "non-deterministic; taken only with deterministic=false");
  if (!w.archs.empty()) {
    bool any = false;
    std::string list;
    for (const auto& a : w.archs) {
      any = any || a.matches(d.arch);
      list += (list.empty() ? "" : ", ") + a.str();
    }
    if (!any) return reject("arch", d.arch.str() + " is not in [" + list + "]");
  }
  if (d.sm_count < w.sm_count.lo || d.sm_count > w.sm_count.hi)
    return reject("sm_count", std::to_string(d.sm_count) + " SMs outside [" +
                                  std::to_string(w.sm_count.lo) + ", " +
                                  std::to_string(w.sm_count.hi) + "]");
  for (const auto& [name, range] : w.dims) {
    auto it = p.dims.find(name);
    if (it == p.dims.end()) return reject("dim", "the problem has no dim '" + name + "'");
    if (it->second < range.lo || it->second > range.hi)
      return reject("dim", name + "=" + std::to_string(it->second) + " outside " + range_text(range));
  }
  if (!w.tiles.per.empty()) {
    for (const auto& [name, size] : w.tiles.per)
      if (!p.dims.count(name)) return reject("tiles", "the problem has no dim '" + name + "'");
    const int64_t waves = w.tiles.count(p.dims, d.sm_count);
    if (waves < w.tiles.waves.lo || waves > w.tiles.waves.hi) {
      std::string per;
      for (const auto& [name, size] : w.tiles.per) per += (per.empty() ? "" : " x ") + name + "/" + std::to_string(size);
      return reject("tiles", "tiles of " + per + " make " + std::to_string(waves) + " waves on " +
                                 std::to_string(d.sm_count) + " SMs, outside " + range_text(w.tiles.waves));
    }
  }
  for (const auto& [name, div] : w.divisible) {
    auto it = p.dims.find(name);
    if (it == p.dims.end()) return reject("divisible", "the problem has no dim '" + name + "'");
    if (it->second % div != 0)
      return reject("divisible", name + "=" + std::to_string(it->second) + " is not a multiple of " +
                                     std::to_string(div));
  }
  for (const auto& [name, parity] : w.parity) {
    auto it = p.dims.find(name);
    if (it == p.dims.end()) return reject("parity", "the problem has no dim '" + name + "'");
    if (it->second % 2 != parity)
      return reject("parity", name + "=" + std::to_string(it->second) + " is not " +
                                  (parity ? "odd" : "even"));
  }
  for (const auto& [arg, t] : w.dtypes) {
    auto it = p.dtypes.find(arg);
    if (it == p.dtypes.end()) return reject("dtype", "the problem has no argument '" + arg + "'");
    if (it->second != t)
      return reject("dtype", arg + " is " + dtype_name(it->second) + ", needs " + dtype_name(t));
  }
  for (const auto& [arg, need] : w.align) {
    auto it = p.align.find(arg);
    int have = it == p.align.end() ? 1 : it->second;
    if (have < need)
      return reject("align", arg + " is " + std::to_string(have) + "-byte aligned, needs " +
                                 std::to_string(need));
  }
  return std::nullopt;
}

PlanResult Planner::plan(const Problem& problem, const Device& device) const {
  PlanResult result;
  const Route* route = registry_->route(problem.op);
  if (route == nullptr) {
    std::string known;
    for (const auto& r : registry_->routes()) known += (known.empty() ? "" : ", ") + r.op;
    result.error = "unknown op '" + problem.op + "' (known: " + known + ")";
    return result;
  }
  if (!problem.candidate.empty() &&
      std::none_of(route->candidates.begin(), route->candidates.end(),
                   [&](const Candidate& c) { return c.name == problem.candidate; })) {
    std::string known;
    for (const auto& c : route->candidates) known += (known.empty() ? "" : ", ") + c.name;
    result.rejections.push_back({problem.candidate, "candidate", "no candidate of this name (known: " + known + ")"});
    result.error = "no route for " + problem.describe() + ": op " + problem.op + " has no candidate '" +
                   problem.candidate + "'";
    return result;
  }
  for (const auto& c : route->candidates) {
    if (!problem.candidate.empty() && c.name != problem.candidate) continue;  // forced: not a rejection
    if (auto r = check_window(c, problem, device)) {
      result.rejections.push_back(*r);
      continue;
    }
    std::vector<PlannedStage> stages;
    std::optional<Rejection> unavailable;
    for (const auto& st : c.stages) {
      const Program* prog = registry_->program(st.program);
      if (prog->parametric()) {
        // The program made for this call's dims (compiled at the first call, as any program).
        std::string why;
        prog = registry_->instance(*prog, problem.dims, &why);
        if (prog == nullptr) {
          unavailable = Rejection{c.name, "instance", why};
          break;
        }
      }
      // Programs that opt in to more dynamic shared memory than the device allows cannot be
      // launched; say so here rather than fail in cuFuncSetAttribute.
      if (auto smem = prog->params->find("smem");
          device.max_smem_optin > 0 && smem != prog->params->end() && smem->is_number_integer() &&
          smem->get<int64_t>() > device.max_smem_optin) {
        unavailable = Rejection{c.name, "smem", prog->name + " needs " + std::to_string(smem->get<int64_t>()) +
                                                    " bytes of shared memory per block, the device allows " +
                                                    std::to_string(device.max_smem_optin)};
        break;
      }
      Availability a = availability_(*prog, device.arch);
      if (!a.available()) {
        unavailable = Rejection{c.name, "unavailable:" + a.reason, a.detail};
        break;
      }
      stages.push_back({prog, st.kernel, a.build, a.by, st.bind});
    }
    if (unavailable) {
      result.rejections.push_back(*unavailable);
      continue;
    }
    std::vector<int64_t> scratch_offsets;
    int64_t scratch = 0;
    if (const std::optional<Rejection> why = scratch_layout(c, problem, scratch_offsets, scratch)) {
      result.rejections.push_back(*why);
      continue;
    }
    Plan plan;
    plan.op = problem.op;
    plan.route = c.name;
    plan.candidate = &c;
    plan.accumulate = c.accumulate;
    plan.deterministic = c.deterministic;
    plan.scratch_bytes = scratch;
    plan.scratch_offsets = std::move(scratch_offsets);
    plan.stages = std::move(stages);
    plan.passed_over = std::move(result.rejections);
    result.rejections.clear();
    plan.why = !problem.candidate.empty()  ? "the candidate the caller asked for"
               : plan.passed_over.empty() ? "first candidate; its window matches"
                                          : "first candidate whose window matches and whose stages "
                                            "can be served";
    if (c.accumulate == Accumulate::composed) {
      std::string fused;
      for (const auto& r : plan.passed_over)
        if (const Candidate* pc = [&]() -> const Candidate* {
              for (const auto& x : route->candidates)
                if (x.name == r.candidate) return &x;
              return nullptr;
            }();
            pc && pc->accumulate == Accumulate::fused)
          fused += (fused.empty() ? "" : "; ") + r.candidate + ": " + r.detail;
      if (!fused.empty())
        plan.why += "; composed because the fused candidates were passed over (" + fused + ")";
      else if (!problem.candidate.empty())
        plan.why += "; composed: forced by the caller";
      else
        plan.why += "; composed: no fused candidate in this route";
      if (!c.note.empty()) plan.why += "; " + c.note;  // the route's own word on why it composes
    }
    result.plan = std::move(plan);
    return result;
  }
  result.error = "no route for " + problem.describe() +
                 (problem.candidate.empty() ? ": every candidate was passed over"
                                            : ": the candidate asked for cannot serve it");
  // Dims the windows ask about that the problem lacks (a hand-written problem, as `cakec plan`
  // takes, that left one out): name them, since each rejection names only the first.
  std::set<std::string> missing;
  for (const auto& c : route->candidates) {
    if (!problem.candidate.empty() && c.name != problem.candidate) continue;
    for (const auto& [name, range] : c.window.dims)
      if (!problem.dims.count(name)) missing.insert(name);
    for (const auto& [name, div] : c.window.divisible)
      if (!problem.dims.count(name)) missing.insert(name);
    for (const auto& [name, size] : c.window.tiles.per)
      if (!problem.dims.count(name)) missing.insert(name);
    for (const auto& [name, parity] : c.window.parity)
      if (!problem.dims.count(name)) missing.insert(name);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    result.error += " (the problem has no dim " + list + ")";
  }
  return result;
}

namespace {
// Word-at-a-time multiplicative mixing: cheap, and a collision only costs a full comparison.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  template <typename T>
  void val(const T& v) {
    static_assert(sizeof(T) <= 8);
    uint64_t w = 0;
    std::memcpy(&w, &v, sizeof(T));
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
};
}  // namespace

uint64_t Problem::hash() const {
  // The op's name and the values; argument and dim names are left to the full comparison
  // of a hit (they are the same for every call of an op), which keeps this short.
  Fnv f;
  f.val(std::hash<std::string>{}(op));
  for (const auto& [n, v] : dims) f.val(v);
  for (const auto& [n, t] : dtypes) f.val(t);
  for (const auto& [n, a] : align) f.val(a);
  f.val(uint8_t(accumulate * 2 + deterministic));
  if (!candidate.empty()) f.val(std::hash<std::string>{}(candidate));
  return f.h;
}

const PlanResult& Planner::plan_cached(const Problem& problem, const Device& device) const {
  Fnv f;
  f.val(problem.hash());
  f.val(device.arch.major), f.val(device.arch.minor), f.val(device.arch.suffix), f.val(device.sm_count);
  f.val(device.max_smem_optin);
  {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(f.h);
    if (it != cache_.end())
      for (const auto& e : it->second)
        if (e.device == device && e.problem == problem) return *e.result;
  }
  auto result = std::make_shared<const PlanResult>(plan(problem, device));
  std::unique_lock lock(cache_mu_);
  auto& bucket = cache_[f.h];
  for (const auto& e : bucket)
    if (e.device == device && e.problem == problem) return *e.result;
  bucket.push_back({problem, device, result});
  return *result;
}

void Planner::clear_cache() const {
  std::unique_lock lock(cache_mu_);
  for (auto& [h, bucket] : cache_)
    for (auto& e : bucket) retired_.push_back(std::move(e.result));
  cache_.clear();
}

std::string format_plan(const PlanResult& result, const Problem& problem, const Device& device) {
  std::ostringstream o;
  o << "problem: " << problem.describe() << "\n";
  o << "device:  " << device.describe() << "\n";
  const auto& passed = result.ok() ? result.plan->passed_over : result.rejections;
  for (const auto& r : passed)
    o << "  passed over " << r.candidate << ": " << r.reason << " - " << r.detail << "\n";
  if (!result.ok()) {
    o << "no route: " << result.error << "\n";
    return o.str();
  }
  const Plan& p = *result.plan;
  o << "chosen:  " << p.route << "  (accumulate " << accumulate_name(p.accumulate) << ", "
    << (p.deterministic ? "deterministic" : "non-deterministic") << ", scratch "
    << p.scratch_bytes << " bytes)\n";
  o << "why:     " << p.why << "\n";
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const auto& s = p.stages[i];
    o << "  stage " << i + 1 << ": " << s.program->name << " [" << s.build->arch.str() << ", "
      << served_by_name(s.served_by) << "] " << s.program->kernels[size_t(s.kernel)];
    if (!s.bind.empty()) o << "  (" << join_bind(s.bind) << ")";
    o << "\n";
    if (s.program->instance_of != nullptr) {
      o << "           instance of " << s.program->instance_of->name << ":";
      for (const auto& [dim, v] : s.program->instance_values) o << " " << dim << "=" << v;
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace cake
