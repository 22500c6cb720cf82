#include "shapes.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "error.hpp"
#include "file_util.hpp"
#include "json_reader.hpp"
#include "loader.hpp"
#include "op_family.hpp"
#include "ops_common.hpp"

namespace cake::ops {

std::string complete_problem(Problem& p) {
  const OpSpec* spec = find_op(p.op);
  if (spec == nullptr) return "";
  std::optional<DType> given;
  for (const auto& arg : spec->args)
    if (!given && p.dtypes.count(arg.name)) given = p.dtypes.at(arg.name);
  std::string assumed;
  for (const auto& arg : spec->args) {
    if (arg.optional) continue;
    if (!p.dtypes.count(arg.name)) {
      const bool takes = given && std::find(arg.dtypes.begin(), arg.dtypes.end(), *given) != arg.dtypes.end();
      const DType t = takes ? *given : arg.dtypes.front();
      p.dtypes[arg.name] = t;
      assumed += std::string(assumed.empty() ? "" : ", ") + arg.name + "=" + dtype_name(t);
    }
    if (!p.align.count(arg.name)) p.align[arg.name] = 256;
  }
  return assumed;
}

namespace {

int positive_int(const JsonReader& r) {
  const int64_t v = r.int64();
  if (v < 1 || v > (int64_t(1) << 30)) r.fail("must be a positive count, got " + std::to_string(v));
  return int(v);
}

Problem read_problem(const JsonReader& r) {
  r.expect_object();
  r.allow_only({"op", "dims", "dtypes", "accumulate", "deterministic"});
  Problem p;
  p.op = r.at("op").str();
  if (find_op(p.op) == nullptr) r.at("op").fail("no family has an op '" + p.op + "'");
  if (r.has("dims")) {
    auto dims = r.at("dims");
    dims.expect_object();
    dims.each_member([&](const std::string& k, const JsonReader& v) {
      const int64_t x = v.int64();
      if (x < 0) v.fail("a dim is >= 0, got " + std::to_string(x));
      p.dims[k] = x;
    });
  }
  if (r.has("dtypes")) {
    auto dtypes = r.at("dtypes");
    dtypes.expect_object();
    dtypes.each_member([&](const std::string& k, const JsonReader& v) {
      auto t = parse_dtype(v.str());
      if (!t) v.fail("'" + v.str() + "' is not a dtype (bf16, f16, f32, f64, i32, i64)");
      p.dtypes[k] = *t;
    });
  }
  if (r.has("accumulate")) p.accumulate = r.at("accumulate").boolean();
  if (r.has("deterministic")) p.deterministic = r.at("deterministic").boolean();
  complete_problem(p);
  return p;
}

}  // namespace

Shapes parse_shapes(const std::string& text, const std::string& file) {
  const auto doc = JsonDoc::parse(text, file);
  JsonReader root(doc->root());
  root.expect_object();
  root.allow_only({"comment", "arch", "sms", "max_smem", "problems"});
  Shapes s;
  if (root.has("arch")) {
    auto a = Arch::parse(root.at("arch").str());
    if (!a || a->virt) root.at("arch").fail("'" + root.at("arch").str() + "' is not a device arch (e.g. sm_90a)");
    s.arch = *a;
  }
  if (root.has("sms")) s.sms = positive_int(root.at("sms"));
  if (root.has("max_smem")) s.max_smem = positive_int(root.at("max_smem"));
  auto problems = root.at("problems");
  problems.expect_array();
  if (problems.size() == 0) problems.fail("no problems: list the ops the job runs");
  for (size_t i = 0; i < problems.size(); ++i) s.problems.push_back(read_problem(problems.at(i)));
  return s;
}

Shapes read_shapes(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text) throw Error("cannot read the shapes file " + file.string());
  return parse_shapes(*text, file.string());
}

ShapePlans plan_shapes(const Planner& planner, const std::vector<Problem>& problems, const Device& device) {
  ShapePlans out;
  std::set<std::string> seen;
  for (const Problem& p : problems) {
    PlanResult r = planner.plan(p, device);
    out.routes.push_back(r.ok() ? r.plan->route : "");
    std::string why = r.error;
    if (!r.ok())
      for (const Rejection& x : r.rejections) why += "; " + x.candidate + ": " + x.reason;
    out.errors.push_back(r.ok() ? "" : why);
    if (!r.ok()) continue;
    for (const PlannedStage& s : r.plan->stages)
      if (seen.insert(s.build->key() + "#" + s.build->source_hash).second) out.stages.push_back(s);
  }
  return out;
}

PrebuildSummary prebuild_for(Runtime& rt, std::vector<Problem> problems, std::optional<Device> device) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!device) device = rt.context_for(0).device();
  for (Problem& p : problems) complete_problem(p);
  const ShapePlans plans = plan_shapes(rt.planner(), problems, *device);
  PrebuildSummary sum;
  for (size_t i = 0; i < problems.size(); ++i)
    if (!plans.errors[i].empty()) sum.skipped.emplace_back(problems[i].describe(), plans.errors[i]);
  // Loads and compiles in parallel: the loader is single-flight per build and compiles in
  // worker processes.
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < plans.stages.size();) {
      const PlannedStage& s = plans.stages[i];
      try {
        const bool held = loader_of(rt).holds(*s.build);
        const auto bin = loader_of(rt).binary(*s.program, *s.build);
        std::lock_guard lock(mu);
        ++(!held && bin->from == ServedFrom::jit ? sum.built : sum.up_to_date);
      } catch (const std::exception& e) {
        const std::string why = std::string(e.what()).substr(0, 300);
        rt.mark_failed(s.build->key(), why);  // later plans pass it over, as a failed first call does
        std::lock_guard lock(mu);
        ++sum.failed;
        sum.failures.emplace_back(s.build->key(), why);
      }
    }
  };
  const size_t jobs = std::min<size_t>(plans.stages.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace cake::ops
