// The C ABI over the C++ API: exceptions become status codes and a per-thread message.
#include <nlohmann/json.hpp>

#include <string>

#include "cake_c.h"
#include "compile_worker.hpp"
#include "env.hpp"
#include "error.hpp"
#include "elementwise_ops.hpp"
#include "grouped_gemm_ops.hpp"
#include "rmsnorm_ops.hpp"

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

cake::ops::OpOptions options(int deterministic, const char* candidate) {
  cake::ops::OpOptions opt;
  opt.deterministic = deterministic != 0;
  if (candidate) opt.candidate = candidate;
  return opt;
}

cake_status null_arg(const char* name) {
  last_error = std::string("argument '") + name + "': null";
  return CAKE_ERROR_ARGUMENT;
}

}  // namespace

extern "C" {

cake_status cake_runtime_create(const char* options_json, cake_runtime** out) {
  if (!out) return null_arg("out");
  *out = nullptr;
  return guarded([&] {
    cake::RuntimeOptions o;
    if (options_json && *options_json) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(options_json);
      } catch (const std::exception& e) {
        throw cake::ArgumentError("options_json", std::string("not valid JSON: ") + e.what());
      }
      if (!j.is_object()) throw cake::ArgumentError("options_json", "must be a JSON object");
      for (auto& [k, v] : j.items()) {
        if (k == "aot_dir" && v.is_string()) o.aot_dir = v.get<std::string>();
        else if (k == "cache_dir" && v.is_string()) o.cache_dir = v.get<std::string>();
        else if (k == "jit" && v.is_boolean()) o.jit = v.get<bool>();
        else if (k == "registry" && v.is_array()) o.registry_files = v.get<std::vector<std::string>>();
        else throw cake::ArgumentError("options_json", "unknown or mistyped option '" + k + "'");
      }
    }
    *out = new cake_runtime(std::move(o));
  });
}

void cake_runtime_destroy(cake_runtime* rt) { delete rt; }

cake_status cake_prepare_add(cake_runtime* rt, const DLTensor* out, const DLTensor* a,
                             const DLTensor* b, int deterministic, cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!out) return null_arg("out");
  if (!a) return null_arg("a");
  if (!b) return null_arg("b");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    cake::ops::OpOptions opt{deterministic != 0};
    *launch = new cake_launch{cake::ops::prepare_add(rt->rt, *out, *a, *b, opt), {}};
  });
}

cake_status cake_prepare_cast(cake_runtime* rt, const DLTensor* out, const DLTensor* in,
                              int accumulate, int deterministic, cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!out) return null_arg("out");
  if (!in) return null_arg("in");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    cake::ops::OpOptions opt{deterministic != 0};
    *launch = new cake_launch{cake::ops::prepare_cast(rt->rt, *out, *in, accumulate != 0, opt), {}};
  });
}

cake_status cake_prepare_rmsnorm_fwd(cake_runtime* rt, const DLTensor* y, const DLTensor* rstd,
                                     const DLTensor* h_out, const DLTensor* x,
                                     const DLTensor* residual, const DLTensor* w, float eps,
                                     cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!y) return null_arg("y");
  if (!rstd) return null_arg("rstd");
  if (!x) return null_arg("x");
  if (!w) return null_arg("w");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    *launch = new cake_launch{cake::ops::prepare_rmsnorm_fwd(rt->rt, *y, *rstd, h_out, *x, residual, *w, eps), {}};
  });
}

cake_status cake_prepare_rmsnorm_bwd(cake_runtime* rt, const DLTensor* dx, const DLTensor* dw,
                                     const DLTensor* dy, const DLTensor* x, const DLTensor* rstd,
                                     const DLTensor* w, cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!dx) return null_arg("dx");
  if (!dw) return null_arg("dw");
  if (!dy) return null_arg("dy");
  if (!x) return null_arg("x");
  if (!rstd) return null_arg("rstd");
  if (!w) return null_arg("w");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    *launch = new cake_launch{cake::ops::prepare_rmsnorm_bwd(rt->rt, *dx, *dw, *dy, *x, *rstd, *w), {}};
  });
}

cake_status cake_prepare_grouped_gemm_fwd(cake_runtime* rt, const DLTensor* y, const DLTensor* x,
                                          const DLTensor* w, const DLTensor* offs, int deterministic,
                                          const char* candidate, cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!y) return null_arg("y");
  if (!x) return null_arg("x");
  if (!w) return null_arg("w");
  if (!offs) return null_arg("offs");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    *launch = new cake_launch{
        cake::ops::prepare_grouped_gemm_fwd(rt->rt, *y, *x, *w, *offs, options(deterministic, candidate)), {}};
  });
}

cake_status cake_prepare_grouped_gemm_dgrad(cake_runtime* rt, const DLTensor* dx, const DLTensor* g,
                                            const DLTensor* w, const DLTensor* offs, int deterministic,
                                            const char* candidate, cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!dx) return null_arg("dx");
  if (!g) return null_arg("g");
  if (!w) return null_arg("w");
  if (!offs) return null_arg("offs");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    *launch = new cake_launch{
        cake::ops::prepare_grouped_gemm_dgrad(rt->rt, *dx, *g, *w, *offs, options(deterministic, candidate)), {}};
  });
}

cake_status cake_prepare_grouped_gemm_wgrad(cake_runtime* rt, const DLTensor* dw, const DLTensor* g,
                                            const DLTensor* x, const DLTensor* offs, int accumulate,
                                            int deterministic, const char* candidate,
                                            cake_launch** launch) {
  if (!rt) return null_arg("rt");
  if (!dw) return null_arg("dw");
  if (!g) return null_arg("g");
  if (!x) return null_arg("x");
  if (!offs) return null_arg("offs");
  if (!launch) return null_arg("launch");
  *launch = nullptr;
  return guarded([&] {
    *launch = new cake_launch{cake::ops::prepare_grouped_gemm_wgrad(rt->rt, *dw, *g, *x, *offs, accumulate != 0,
                                                                    options(deterministic, candidate)),
                              {}};
  });
}

cake_status cake_launch_run(const cake_launch* launch, void* stream) {
  if (!launch) return null_arg("launch");
  return guarded([&] { launch->launch.launch(static_cast<CUstream>(stream)); });
}

const char* cake_launch_describe(const cake_launch* launch) {
  if (!launch) return "";
  auto* l = const_cast<cake_launch*>(launch);
  if (l->text.empty()) l->text = l->launch.describe();
  return l->text.c_str();
}

void cake_launch_free(cake_launch* launch) { delete launch; }

cake_status cake_add(cake_runtime* rt, const DLTensor* out, const DLTensor* a, const DLTensor* b,
                     void* stream) {
  if (!rt) return null_arg("rt");
  if (!out) return null_arg("out");
  if (!a) return null_arg("a");
  if (!b) return null_arg("b");
  return guarded([&] { cake::ops::add(rt->rt, *out, *a, *b, static_cast<CUstream>(stream)); });
}

cake_status cake_cast(cake_runtime* rt, const DLTensor* out, const DLTensor* in, int accumulate,
                      void* stream) {
  if (!rt) return null_arg("rt");
  if (!out) return null_arg("out");
  if (!in) return null_arg("in");
  return guarded([&] {
    cake::ops::cast(rt->rt, *out, *in, accumulate != 0, static_cast<CUstream>(stream));
  });
}

const char* cake_last_error(void) { return last_error.c_str(); }

const char* cake_compile_worker_path(void) {
  static const std::string worker = cake::env::compile_isolation() == "inprocess" ? "" : cake::find_compile_worker();
  return worker.c_str();
}

}  // extern "C"
