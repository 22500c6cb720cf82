// The C ABI over the C++ API: exceptions become status codes and a per-thread message.
#include <nlohmann/json.hpp>

#include <cfloat>
#include <climits>
#include <cmath>
#include <string>

#include "cake_c.h"
#include "compile_worker.hpp"
#include "env.hpp"
#include "error.hpp"
#include "op_family.hpp"
#include "plan_json.hpp"
#include "ops.hpp"
#include "shapes.hpp"

struct cake_runtime {
  cake::Runtime rt;
  explicit cake_runtime(cake::RuntimeOptions o) : rt(std::move(o)) {}
};

struct cake_launch {
  cake::Launch launch;
  std::string text;
};

namespace {

thread_local std::string last_error;
thread_local std::string last_summary;

template <typename F>
cake_status guarded(F&& f) {
  try {
    last_error.clear();
    f();
    return CAKE_OK;
  } catch (const cake::ArgumentError& e) {
    last_error = e.what();
    return CAKE_ERROR_ARGUMENT;
  } catch (const cake::CompileError& e) {
    last_error = e.what();
    return CAKE_ERROR_COMPILE;
  } catch (const cake::DriverError& e) {
    last_error = e.what();
    return CAKE_ERROR_DRIVER;
  } catch (const cake::Error& e) {
    last_error = e.what();
    return std::string(e.what()).rfind("no route", 0) == 0 ? CAKE_ERROR_NO_ROUTE : CAKE_ERROR_OTHER;
  } catch (const std::exception& e) {
    last_error = e.what();
    return CAKE_ERROR_OTHER;
  }
}

// A shapes document given to the C ABI: its errors are the argument's.
cake::ops::Shapes read_shapes_arg(const char* shapes_json) {
  try {
    return cake::ops::parse_shapes(shapes_json, "shapes_json");
  } catch (const cake::Error& e) {
    throw cake::ArgumentError("shapes_json", e.what());
  }
}

// The device a shapes document names (its arch and SM count), if it names one.
std::optional<cake::Device> shapes_device(const cake::ops::Shapes& shapes) {
  if (shapes.arch && shapes.sms > 0) return cake::Device{*shapes.arch, shapes.sms, shapes.max_smem};
  return std::nullopt;
}

cake_status null_arg(const char* name) {
  last_error = std::string("argument '") + name + "': null";
  return CAKE_ERROR_ARGUMENT;
}

// The pointers of a generic call, before anything else runs.
cake_status check_tensor_args(int n, const char* const* names, const DLTensor* const* tensors) {
  if (n < 0) {
    last_error = "argument 'n': must be >= 0, got " + std::to_string(n);
    return CAKE_ERROR_ARGUMENT;
  }
  if (n > 0 && !names) return null_arg("names");
  if (n > 0 && !tensors) return null_arg("tensors");
  for (int i = 0; i < n; ++i)
    if (!names[i]) {
      last_error = "argument 'names[" + std::to_string(i) + "]': null";
      return CAKE_ERROR_ARGUMENT;
    }
  return CAKE_OK;
}

cake_status check_call(cake_runtime* rt, const char* op, int n, const char* const* names,
                       const DLTensor* const* tensors) {
  if (!rt) return null_arg("rt");
  if (!op) return null_arg("op");
  return check_tensor_args(n, names, tensors);
}

// A null tensor is left to the generic prepare, which names it.
cake::ops::NamedTensors named(int n, const char* const* names, const DLTensor* const* tensors) {
  cake::ops::NamedTensors out;
  for (int i = 0; i < n; ++i) out.emplace_back(names[i], tensors[i]);
  return out;
}

// An options argument: NULL or "" is no options, else a JSON object.
nlohmann::json options_object(const char* options_json) {
  if (!options_json || !*options_json) return nlohmann::json::object();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(options_json);
  } catch (const std::exception& e) {
    throw cake::ArgumentError("options_json", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw cake::ArgumentError("options_json", "must be a JSON object");
  return j;
}

// options_json: NULL, "", or an object of deterministic, candidate, max_sms, accumulate, eps.
cake::ops::OpOptions parse_options(const char* options_json) {
  cake::ops::OpOptions o;
  const nlohmann::json j = options_object(options_json);  // items() refers into it
  for (auto& [k, v] : j.items()) {
    if (k == "deterministic" && v.is_boolean()) o.deterministic = v.get<bool>();
    else if (k == "accumulate" && v.is_boolean()) o.accumulate = v.get<bool>();
    else if (k == "external_memory" && v.is_boolean()) o.external_memory = v.get<bool>();
    else if (k == "candidate" && v.is_string()) o.candidate = v.get<std::string>();
    else if (k == "max_sms" && v.is_number_integer() && v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX)
      o.max_sms = int(v.get<int64_t>());
    else if (k == "eps" && v.is_number() && std::abs(v.get<double>()) <= double(FLT_MAX)) o.eps = float(v.get<double>());
    else throw cake::ArgumentError("options_json", "unknown or mistyped option '" + k + "'");
  }
  return o;
}

}  // namespace

extern "C" {

cake_status cake_runtime_create(const char* options_json, cake_runtime** out) {
  if (!out) return null_arg("out");
  *out = nullptr;
  return guarded([&] {
    cake::RuntimeOptions o;
    const nlohmann::json j = options_object(options_json);  // items() refers into it
    for (auto& [k, v] : j.items()) {
      if (k == "aot_dir" && v.is_string()) o.aot_dir = v.get<std::string>();
      else if (k == "cache_dir" && v.is_string()) o.cache_dir = v.get<std::string>();
      else if (k == "jit" && v.is_boolean()) o.jit = v.get<bool>();
      else if (k == "registry" && v.is_array()) o.registry_files = v.get<std::vector<std::string>>();
      else throw cake::ArgumentError("options_json", "unknown or mistyped option '" + k + "'");
    }
    *out = new cake_runtime(std::move(o));
  });
}

void cake_runtime_destroy(cake_runtime* rt) { delete rt; }

cake_status cake_prepare(cake_runtime* rt, const char* op, int n, const char* const* names,
                         const DLTensor* const* tensors, const char* options_json, cake_launch** launch) {
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  if (cake_status st = check_call(rt, op, n, names, tensors); st != CAKE_OK) return st;
  return guarded([&] {
    *launch = new cake_launch{cake::ops::prepare(rt->rt, op, named(n, names, tensors), parse_options(options_json)), {}};
  });
}

cake_status cake_run(cake_runtime* rt, const char* op, int n, const char* const* names,
                     const DLTensor* const* tensors, const char* options_json, void* stream) {
  if (cake_status st = check_call(rt, op, n, names, tensors); st != CAKE_OK) return st;
  return guarded([&] {
    cake::ops::run(rt->rt, op, named(n, names, tensors), static_cast<CUstream>(stream), parse_options(options_json));
  });
}

cake_status cake_prebuild_for(cake_runtime* rt, const char* shapes_json, const char** summary_json) {
  if (summary_json) *summary_json = "";
  if (!rt) return null_arg("rt");
  if (!shapes_json) return null_arg("shapes_json");
  cake::PrebuildSummary sum;
  cake_status st = guarded([&] {
    cake::ops::Shapes shapes = read_shapes_arg(shapes_json);
    sum = cake::ops::prebuild_for(rt->rt, shapes.problems, shapes_device(shapes));
  });
  if (st != CAKE_OK) return st;
  nlohmann::json skipped = nlohmann::json::array(), failed = nlohmann::json::array();
  for (const auto& [problem, why] : sum.skipped) skipped.push_back({{"problem", problem}, {"why", why}});
  for (const auto& [build, why] : sum.failures) failed.push_back({{"build", build}, {"why", why}});
  last_summary = nlohmann::json{{"built", sum.built}, {"up_to_date", sum.up_to_date}, {"skipped", skipped},
                                {"failed", failed}}.dump();
  if (summary_json) *summary_json = last_summary.c_str();
  if (!sum.failures.empty()) {
    last_error = "prebuild_for: " + std::to_string(sum.failures.size()) + " build(s) failed, first " +
                 sum.failures[0].first + ": " + sum.failures[0].second;
    return CAKE_ERROR_COMPILE;
  }
  if (!sum.skipped.empty()) {
    last_error = "prebuild_for: no route for " + std::to_string(sum.skipped.size()) + " problem(s), first " +
                 sum.skipped[0].first + ": " + sum.skipped[0].second;
    return CAKE_ERROR_NO_ROUTE;
  }
  return CAKE_OK;
}

cake_status cake_plan(cake_runtime* rt, const char* shapes_json, const char** plans_json) {
  if (plans_json) *plans_json = "";
  if (!rt) return null_arg("rt");
  if (!shapes_json) return null_arg("shapes_json");
  if (!plans_json) return null_arg("plans_json");
  size_t no_route = 0;
  std::string first_error;
  cake_status st = guarded([&] {
    cake::ops::Shapes shapes = read_shapes_arg(shapes_json);
    const std::optional<cake::Device> named = shapes_device(shapes);
    const cake::Device device = named ? *named : rt->rt.context_for(0).device();
    nlohmann::json plans = nlohmann::json::array();
    for (const cake::Problem& p : shapes.problems) {
      const cake::PlanResult& r = rt->rt.plan(p, device);
      if (!r.ok() && no_route++ == 0) first_error = r.error;
      nlohmann::json j = cake::plan_json(r);
      j["problem"] = p.describe();
      j["device"] = device.describe();
      // The family's notes (the split, how FP32 sums run), as `cakec plan` prints them.
      const std::vector<std::string> notes = r.ok() ? cake::ops::plan_notes(p, *r.plan, device) : std::vector<std::string>{};
      std::string text = cake::format_plan(r, p, device);
      for (const std::string& n : notes) text += "note: " + n + "\n";
      j["notes"] = notes;
      j["text"] = std::move(text);
      plans.push_back(std::move(j));
    }
    last_summary = nlohmann::json{{"plans", std::move(plans)}}.dump();
  });
  if (st != CAKE_OK) return st;
  *plans_json = last_summary.c_str();
  if (no_route == 0) return CAKE_OK;
  last_error = "plan: no route for " + std::to_string(no_route) + " problem(s), first " + first_error;
  return CAKE_ERROR_NO_ROUTE;
}

const char* cake_ops_json(void) {
  // Built once from static data; should that throw (out of memory), the answer is "[]".
  static const std::string text = []() -> std::string {
    try {
      nlohmann::json ops = nlohmann::json::array();
      for (const cake::ops::FamilyOps* f : cake::ops::op_families())
        for (const cake::ops::OpSpec& s : f->ops) {
          nlohmann::json args = nlohmann::json::array();
          for (const auto& a : s.args) {
            nlohmann::json dtypes = nlohmann::json::array();
            for (cake::DType d : a.dtypes) dtypes.push_back(cake::dtype_name(d));
            args.push_back({{"name", a.name}, {"dtypes", dtypes}, {"output", a.output}, {"optional", a.optional}});
          }
          ops.push_back({{"op", s.name}, {"args", args}, {"accumulate", s.takes_accumulate}, {"eps", s.takes_eps}});
        }
      return ops.dump();
    } catch (...) {
      return "[]";
    }
  }();
  return text.c_str();
}

cake_status cake_launch_run(const cake_launch* launch, void* stream) {
  if (!launch) return null_arg("launch");
  return guarded([&] { launch->launch.launch(static_cast<CUstream>(stream)); });
}

cake_status cake_launch_rebind_data(cake_launch* launch, int n, void* const* data, void* memory) {
  if (!launch) return null_arg("launch");
  if (n < 0) {
    last_error = "argument 'n': must be >= 0, got " + std::to_string(n);
    return CAKE_ERROR_ARGUMENT;
  }
  if (n > 0 && !data) return null_arg("data");
  return guarded([&] {
    cake::ops::rebind_data(launch->launch, reinterpret_cast<const CUdeviceptr*>(data), size_t(n),
                           reinterpret_cast<CUdeviceptr>(memory));
  });
}

cake_status cake_launch_rebind(cake_launch* launch, int n, const char* const* names, const DLTensor* const* tensors,
                               void* memory) {
  if (!launch) return null_arg("launch");
  if (cake_status st = check_tensor_args(n, names, tensors); st != CAKE_OK) return st;
  return guarded([&] {
    cake::ops::rebind(launch->launch, named(n, names, tensors), reinterpret_cast<CUdeviceptr>(memory));
  });
}

const char* cake_runtime_stats(cake_runtime* rt) {
  if (!rt) return "{}";
  const cake::LoaderStats& s = rt->rt.load_stats();
  last_summary = nlohmann::json{{"memory_hits", s.memory_hits.load()}, {"aot_loads", s.aot_loads.load()},
                                {"disk_hits", s.disk_hits.load()},     {"compiles", s.compiles.load()},
                                {"failures", s.failures.load()},       {"module_loads", s.module_loads.load()},
                                {"stand_ins", s.stand_ins.load()},     {"swaps", s.swaps.load()}}
                     .dump();
  return last_summary.c_str();
}

size_t cake_launch_memory_bytes(const cake_launch* launch) { return launch ? launch->launch.memory_bytes() : 0; }

const char* cake_launch_describe(const cake_launch* launch) {
  if (!launch) return "";
  auto* l = const_cast<cake_launch*>(launch);
  // No exception may cross the C boundary: on one, the text is empty and cake_last_error says why.
  if (l->text.empty() && guarded([&] { l->text = l->launch.describe(); }) != CAKE_OK) return "";
  return l->text.c_str();
}

void cake_launch_free(cake_launch* launch) { delete launch; }

const char* cake_last_error(void) { return last_error.c_str(); }

const char* cake_compile_worker_path(void) {
  static const std::string worker = cake::env::compile_isolation() == "inprocess" ? "" : cake::find_compile_worker();
  return worker.c_str();
}

}  // extern "C"
