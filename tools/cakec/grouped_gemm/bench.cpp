// cakec bench grouped_gemm: cake's grouped GEMM (fwd, dgrad, wgrad with bf16 output, wgrad
// accumulating into f32) against two cuBLAS baselines in one process: the per-expert loop
// of cublasGemmEx calls (group sizes known on the host: the baseline's advantage) and
// cublasGemmGroupedBatchedEx (one group per expert). CUDA events, L2 flushed before each
// timed call, median of --reps, the contenders timed in turn rep by rep (at a shared clock)
// and each row's ratio, per baseline, the median over reps of its time in the rep / cake's,
// the smaller of the two (bench_stats.hpp);
// with --sustained each contender runs alone long enough to set the clock by its own power
// draw (docs/decisions.md: in turn and alone differ under the power cap). cuBLAS
// is dlopen-ed (cublas_loader.hpp). Each row's cake output is checked against the loop's on
// sampled rows (--no-check skips it). --samples writes every timed call to a CSV file.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "bench_samples.hpp"
#include "bench_util.hpp"
#include "cli_common.hpp"
#include "cublas_loader.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "grouped_gemm_cases.hpp"
#include "grouped_gemm_ops.hpp"

namespace cakec {
namespace {

struct Args {
  std::vector<std::string> shapes{"gate_up", "down"}, dists{"balanced", "skewed", "one_empty", "lognormal"},
      ops{"fwd", "dgrad", "wgrad", "wgrad_acc"};
  std::vector<int64_t> ms{112576, 131072};
  std::vector<int> es{4, 8, 16, 32};
  std::string cases = "grid";  // grid: shapes x M x E x dists; models: model_cases()
  int reps = 10;
  std::string order = "permute";
  std::string cublas;
  bool check = true;
  bool sustained = false;
  int warm_ms = 1000, window_ms = 500, rounds = 2;
  std::string samples;  // CSV of every timed call; empty: none
};

// --samples is written once, when the run ends (whole or not at all): its folder is checked
// before anything runs, so a bad path does not cost the run.
void check_samples_path(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path), dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("--samples: no folder '" + dir.string() + "'" + (ec ? ": " + ec.message() : ""));
  // The file is replaced by a rename: a folder, a device or a link there is not a CSV file.
  if (const auto st = fs::symlink_status(p, ec); fs::exists(st) && !fs::is_regular_file(st))
    throw UsageError("--samples: '" + path + "' exists and is not a regular file");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("--samples: folder '" + dir.string() + "' is not writable (or not searchable)");
}

// The device tensors of one shape, sized for the largest M and E and shared by every case
// of that shape: cake writes y, dx, dw; the cuBLAS baselines write the *_ref twins.
struct Buffers {
  Buffers(int64_t m, int64_t e, int64_t n, int64_t k)
      : x(size_t(m * k) * 2), g(size_t(m * n) * 2), w(size_t(e * n * k) * 2), y(size_t(m * n) * 2),
        y_ref(y.bytes()), dx(size_t(m * k) * 2), dx_ref(dx.bytes()), dw(size_t(e * n * k) * 4), dw_ref(dw.bytes()),
        offs(size_t(e) * 4), ptrs(size_t(e) * 3 * 8) {
    fill_random(x.get(), size_t(m * k), 1);
    fill_random(g.get(), size_t(m * n), 2);
    fill_random(w.get(), size_t(e * n * k), 3);
    CAKE_CU(cuCtxSynchronize());
  }
  cake::DeviceBuffer x, g, w, y, y_ref, dx, dx_ref, dw, dw_ref, offs, ptrs;
};

constexpr DLDataType kI32{kDLInt, 32, 1};

cake::Launch prepare_cake(cake::Runtime& rt, const Buffers& b, const std::string& op, int64_t m, int64_t e,
                          int64_t n, int64_t k) {
  std::vector<int64_t> mk{m, k}, mn{m, n}, enk{e, n, k}, ve{e};
  DLTensor x = tensor(b.x, kBf16, mk), g = tensor(b.g, kBf16, mn), w = tensor(b.w, kBf16, enk),
           offs = tensor(b.offs, kI32, ve);
  if (op == "fwd") return cake::ops::prepare_grouped_gemm_fwd(rt, tensor(b.y, kBf16, mn), x, w, offs);
  if (op == "dgrad") return cake::ops::prepare_grouped_gemm_dgrad(rt, tensor(b.dx, kBf16, mk), g, w, offs);
  bool acc = op == "wgrad_acc";
  return cake::ops::prepare_grouped_gemm_wgrad(rt, tensor(b.dw, acc ? kF32 : kBf16, enk), g, x, offs, acc);
}

// The output an op writes (cake's, or the baselines' with ref) and its element size.
CUdeviceptr output(const Buffers& b, const std::string& op, bool ref) {
  if (op == "fwd") return (ref ? b.y_ref : b.y).get();
  if (op == "dgrad") return (ref ? b.dx_ref : b.dx).get();
  return (ref ? b.dw_ref : b.dw).get();
}

// Samples cake's output against the loop's: for fwd/dgrad three rows of each non-empty
// group, for wgrad three rows of every dw[e] (empty groups too: zeros, or unchanged with
// accumulate, where the baselines' output was prepared the same way). Returns "ok" or
// "BAD n/total".
std::string compare(const Buffers& b, const std::string& op, const Case& c) {
  const bool f32 = op == "wgrad_acc", wgrad = op.rfind("wgrad", 0) == 0;
  const int64_t width = op == "fwd" ? c.n : c.k;
  const size_t elem = f32 ? 4 : 2;
  std::vector<size_t> rows;  // row indices into the output, each `width` elements
  for (int64_t e = 0; e < c.e; ++e) {
    int64_t first = wgrad ? e * c.n : c.offsets[e], count = wgrad ? c.n : c.sizes[e];
    if (count > 0)
      for (int64_t r : {first, first + count / 2, first + count - 1}) rows.push_back(size_t(r));
  }
  std::vector<unsigned char> got(size_t(width) * elem), want(got.size());
  size_t bad = 0, total = 0;
  for (size_t r : rows) {
    CAKE_CU(cuMemcpyDtoH(got.data(), output(b, op, false) + r * width * elem, got.size()));
    CAKE_CU(cuMemcpyDtoH(want.data(), output(b, op, true) + r * width * elem, want.size()));
    for (int64_t i = 0; i < width; ++i, ++total) {
      float u, v;
      if (f32) {
        std::memcpy(&u, &got[i * 4], 4), std::memcpy(&v, &want[i * 4], 4);
      } else {
        uint16_t p, q;
        std::memcpy(&p, &got[i * 2], 2), std::memcpy(&q, &want[i * 2], 2);
        u = bf16_to_float(p), v = bf16_to_float(q);
      }
      if (!(std::fabs(u - v) <= 1e-2f + 1e-2f * std::fabs(v))) ++bad;  // NaN counts as bad
    }
  }
  return bad == 0 ? "ok" : "BAD " + std::to_string(bad) + "/" + std::to_string(total);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

const std::vector<int> kWidths = {7, 6, 2, 9, 9, 11, 7, 7, 7, 7, 7, 7, 14, 11, 0};
void print_row(const std::vector<std::string>& cols) {
  std::string s;
  for (size_t i = 0; i < cols.size(); ++i) {
    s += cols[i];
    if (i + 1 < cols.size()) s += std::string(std::max<int>(1, kWidths[i] - int(cols[i].size()) + 2), ' ');
  }
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

struct Result {
  std::string what;  // shape M E dist op
  std::string op;
  double ratio;  // VS_BEST
  double ratio_of_medians;  // the faster baseline's median / cake's (in turn; = ratio with --sustained)
  double joules_ratio;      // J_VS_BEST (--sustained; NaN otherwise or without NVML)
};

// One process's run: the runtime, the timer, cuBLAS, and what the summary needs.
class Bench {
 public:
  Bench(const Args& a, CUdevice dev) : a_(a), rt_(timed_runtime()), lib_(a.cublas) {
    if (lib_.available()) handle_ = std::make_unique<CublasHandle>(lib_, timer_.stream);
    if (a.sustained) {
      auto attr = [&](CUdevice_attribute at) {
        int v = 0;
        CAKE_CU(cuDeviceGetAttribute(&v, at, dev));
        return v;
      };
      nvml_ = std::make_unique<Nvml>(attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID), attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                                     attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
    }
  }

  void print_header(const std::string& device) {
    std::string cublas = !lib_.available() ? "n/a: " + lib_.missing_reason()
                         : lib_.path() + " " + lib_.version() +
                               (lib_.has_grouped_batched() ? "" : " (no cublasGemmGroupedBatchedEx: GROUPED n/a)");
    if (!a_.sustained)
      std::printf("cakec bench grouped_gemm: %s; cuBLAS %s; bf16 in, fp32 compute; median of %d, L2 flushed; "
                  "contenders in turn call by call (one shared clock), %s; TF = TFLOP/s (2*M*N*K)\n",
                  device.c_str(), cublas.c_str(), a_.reps,
                  a_.order == "permute" ? "each rep in the next permutation of their order"
                                        : "in a fixed order (cake, loop, grouped)");
    else
      std::printf("cakec bench grouped_gemm --sustained: %s; cuBLAS %s; bf16 in, fp32 compute; L2 flushed; each "
                  "contender alone, %d ms untimed then %d ms timed back to back, in turn, %d rounds: mean ms a "
                  "call; clocks %s; J = joules a call (NVML's energy counter over the window, the L2 flush's "
                  "share, timed alone, taken off); TF = TFLOP/s (2*M*N*K)\n",
                  device.c_str(), cublas.c_str(), a_.warm_ms, a_.window_ms, a_.rounds,
                  !nvml_->available()        ? ("n/a (" + nvml_->missing_reason() + ")").c_str()
                  : nvml_->instant_power() ? "(MHZ) and board power (W, instant) read with NVML"
                                           : "(MHZ) and board power (W, NVML's 1 s average) read with NVML");
    std::printf("LOOP = cublasGemmEx per non-empty group; GROUPED = cublasGemmGroupedBatchedEx, one group per "
                "non-empty expert; both skip empty groups (for wgrad bf16 cake zero-fills them, the baselines do "
                "not); wgrad_acc: f32 dW += (beta = 1). %s\n",
                a_.sustained ? "VS_BEST = faster baseline's mean time / cake's; J_VS_BEST = the baseline's of the "
                               "lower energy J / cake's."
                             : "CAKE_MS and the TF columns: medians. VS_BEST = for each baseline the median over reps "
                               "of its time in the rep / cake's (a rep's calls run at about one clock); the "
                               "smaller of the two.");
    std::vector<std::string> head = {"SHAPE",   "M",       "E",       "DIST",    "OP",    "GROUPS", "CAKE_MS",
                                     "CAKE_TF", "LOOP_TF", "GROUPED", "VS_BEST", "CHECK"};
    if (a_.sustained) head.insert(head.end(), {"MHZ c/l/g", "W c/l/g", "J c/l/g", "J_VS_BEST"});
    head.push_back("ROUTE");
    print_row(head);
  }

  // Prepares, checks and times one (case, op) and prints its row. False: stop the run.
  bool row(Buffers& b, const Shape& shape, const Case& c, const std::string& op) {
    ++rows_seen_;
    std::vector<std::string> row = {shape.name, std::to_string(c.m), std::to_string(c.e), c.dist, op,
                                    std::to_string(c.min_size()) + "-" + std::to_string(c.max_size())};
    bool stop = false;
    try {
      cake::Launch launch = prepare_cake(rt_, b, op, c.m, c.e, c.n, c.k);
      const cake::Plan* plan = launch.plan();
      std::string route = plan ? plan->route : "-";
      if (plan && plan->accumulate != cake::Accumulate::off)
        route += std::string(" (") + cake::accumulate_name(plan->accumulate) + ")";
      const auto gemms = baseline_gemms(c, op, b.x.get(), b.g.get(), b.w.get(), output(b, op, true));
      const std::string check = a_.check && handle_ ? check_once(b, c, op, launch, gemms) : "-";
      failed_ |= check != "ok" && check != "-";
      // cake and the baselines timed in turn, rep by rep (same clocks for all).
      std::vector<std::function<void()>> contenders = {[&] { launch.launch(timer_.stream); }};
      std::optional<GroupedBatched> gb;
      if (handle_) {
        contenders.push_back([&] { run_loop(*handle_, gemms); });
        if (lib_.has_grouped_batched()) {
          gb.emplace(gemms, b.ptrs.get());
          cublasStatus_t s = gb->run(*handle_);  // it may refuse the types: then no column
          if (s == CUBLAS_STATUS_SUCCESS)
            contenders.push_back([&] { gb->run_checked(*handle_); });
          else
            ++grouped_errors_[std::string(cublas_status_name(s)) + " for " + op];
        }
      }
      std::vector<double> ms;
      double ratio = NAN;      // VS_BEST
      double of_medians = NAN;  // in turn: the faster baseline's median / cake's
      std::string mhz, watts, joules;  // per contender, "/"-separated (sustained only)
      double j_ratio = NAN;            // J_VS_BEST
      if (!a_.sustained) {
        std::vector<TimedCall> calls;
        ms = timer_.median_ms_interleaved(contenders, a_.reps, a_.order == "permute", &calls);
        ratio = median_rep_ratio(calls);
        of_medians = ratio_of_medians(calls);  // as `cakec bench summarize` takes it from the file
        if (!a_.samples.empty()) add_samples(shape, c, op, calls);
      } else {
        const auto windows = timer_.sustained(contenders, a_.warm_ms, a_.window_ms, a_.rounds, nvml_.get());
        auto joined = [](std::string& to, double v, const char* f) {
          to += (to.empty() ? "" : "/") + (std::isnan(v) ? std::string("n/a") : fmt(f, v));
        };
        double best_joules = NAN;
        for (size_t c = 0; c < windows.size(); ++c) {
          const auto& s = windows[c];
          ms.push_back(s.ms);
          joined(mhz, s.mhz, "%.0f"), joined(watts, s.watts, "%.0f"), joined(joules, s.joules, "%.3g");
          if (c > 0) best_joules = std::fmin(best_joules, s.joules);  // fmin ignores a NaN
        }
        j_ratio = best_joules / windows[0].joules;
      }
      const double cake_ms = ms[0], loop_ms = ms.size() > 1 ? ms[1] : NAN, grouped_ms = ms.size() > 2 ? ms[2] : NAN;
      const double flop = 2.0 * double(c.m) * double(c.n) * double(c.k);
      const double best = std::fmin(loop_ms, grouped_ms);  // fmin ignores a NaN
      if (a_.sustained) ratio = of_medians = best / cake_ms;
      auto tf = [&](double ms) { return std::isnan(ms) ? std::string("n/a") : fmt("%.0f", flop / ms / 1e9); };
      row.insert(row.end(), {fmt("%.3f", cake_ms), tf(cake_ms), tf(loop_ms), tf(grouped_ms),
                             std::isnan(ratio) ? "n/a" : fmt("%.3fx", ratio), check});
      if (a_.sustained)
        row.insert(row.end(), {mhz, watts, joules, std::isnan(j_ratio) ? "n/a" : fmt("%.3fx", j_ratio)});
      row.push_back(route);
      if (!std::isnan(ratio))
        results_.push_back({shape.name + " M=" + std::to_string(c.m) + " E=" + std::to_string(c.e) + " " + c.dist +
                                " " + op, op, ratio, of_medians, j_ratio});
      ++routes_[op][route];
    } catch (const cake::Error& err) {
      failed_ = true;
      // A driver error (a faulted kernel, say) may have left the context unusable: stop.
      stop = dynamic_cast<const cake::DriverError*>(&err) != nullptr;
      row.push_back(std::string(stop ? "error (stopping): " : "error: ") + err.what());
    }
    print_row(row);
    return !stop;
  }

  // One untimed call of cake and of the loop on outputs prepared alike (NaN, or 1.0 for
  // accumulate; the loop's empty wgrad groups zeroed as cake's are), then compare().
  std::string check_once(Buffers& b, const Case& c, const std::string& op, const cake::Launch& launch,
                         const std::vector<Gemm>& gemms) {
    const size_t bytes = op == "fwd" ? size_t(c.m * c.n) * 2 : op == "dgrad" ? size_t(c.m * c.k) * 2
                         : size_t(c.e * c.n * c.k) * (op == "wgrad" ? 2 : 4);
    const uint32_t init = op == "wgrad_acc" ? 0x3f800000u : 0xffffffffu;
    for (bool ref : {false, true}) CAKE_CU(cuMemsetD32Async(output(b, op, ref), init, bytes / 4, timer_.stream));
    if (op == "wgrad")
      for (int64_t g = 0; g < c.e; ++g)
        if (c.sizes[size_t(g)] == 0)
          CAKE_CU(cuMemsetD32Async(output(b, op, true) + size_t(g * c.n * c.k) * 2, 0, size_t(c.n * c.k) / 2,
                                   timer_.stream));
    launch.launch(timer_.stream);
    run_loop(*handle_, gemms);
    CAKE_CU(cuStreamSynchronize(timer_.stream));
    return compare(b, op, c);
  }

  int summary() const {
    for (const auto& [what, n] : grouped_errors_)
      std::printf("cublasGemmGroupedBatchedEx returned %s (%d rows): GROUPED n/a there\n", what.c_str(), n);
    std::printf("\ncake's routes:\n");
    for (const auto& [op, rs] : routes_)
      for (const auto& [r, n] : rs) std::printf("  %-9s %s (%d rows)\n", op.c_str(), r.c_str(), n);
    if (!results_.empty()) {
      std::printf("\ngeomean of VS_BEST (cake over the faster cuBLAS baseline):\n");
      auto geomean = [&](const std::string& op, int& n) {
        double s = 0;
        n = 0;
        for (const auto& r : results_)
          if (op.empty() || r.op == op) s += std::log(r.ratio), ++n;
        return n ? std::exp(s / n) : NAN;
      };
      int n = 0;
      for (const auto& op : a_.ops)
        if (double g = geomean(op, n); n > 0) std::printf("  %-9s %.3fx over %d rows\n", op.c_str(), g, n);
      double all = geomean("", n);
      std::printf("  %-9s %.3fx over %d rows\n", "all", all, n);
      const auto worst = std::min_element(results_.begin(), results_.end(),
                                          [](const Result& x, const Result& y) { return x.ratio < y.ratio; });
      std::printf("  min row   %.3fx  (%s)\n", worst->ratio, worst->what.c_str());
      if (a_.sustained) {  // energy: cake's joules a call against the lower-energy baseline's
        double s = 0;
        int n_j = 0, below = 0;
        const Result* w = nullptr;
        for (const auto& r : results_)
          if (!std::isnan(r.joules_ratio)) {
            s += std::log(r.joules_ratio), ++n_j, below += r.joules_ratio < 1.0;
            if (!w || r.joules_ratio < w->joules_ratio) w = &r;
          }
        if (n_j > 0)
          std::printf("  J_VS_BEST geomean %.3fx over %d rows, %d below 1.00x, min %.3fx (%s)\n", std::exp(s / n_j), n_j,
                      below, w->joules_ratio, w->what.c_str());
        else
          std::printf("  J_VS_BEST: n/a (no energy reading)\n");
      }
      if (!a_.sustained) {  // the older estimate, printed for comparison (docs/decisions.md)
        double s = 0;
        for (const auto& r : results_) s += std::log(r.ratio_of_medians);
        const auto w = std::min_element(results_.begin(), results_.end(), [](const Result& x, const Result& y) {
          return x.ratio_of_medians < y.ratio_of_medians;
        });
        std::printf("  as the faster baseline's median / cake's median: all %.3fx, min row %.3fx (%s)\n",
                    std::exp(s / double(results_.size())), w->ratio_of_medians, w->what.c_str());
      }
    }
    if (failed_) std::printf("\nFAILED: a row above has an error or a BAD check\n");
    return failed_ ? kFailure : kOk;
  }

  Timer& timer() { return timer_; }

  // The --samples file, whole: a header and one line per timed call, in the order they ran.
  // False (said why) if it could not be written; the summary is printed either way.
  bool write_samples() const noexcept {
    if (a_.samples.empty()) return true;
    try {
      cake::write_file_atomic(a_.samples, std::string(kSamplesHeader) + "\n" + samples_);
      std::printf("\n%zu timed calls written to %s\n", sample_lines_, a_.samples.c_str());
      return true;
    } catch (const std::exception& e) {
      std::printf("\n--samples: could not write %s: %s\n", a_.samples.c_str(), e.what());
      return false;
    }
  }

 private:
  void add_samples(const Shape& shape, const Case& c, const std::string& op, const std::vector<TimedCall>& calls) {
    SampleRow r;  // row: the row's place in the run (--m 4096 4096 repeats a key)
    r.row = rows_seen_ - 1, r.shape = shape.name, r.m = c.m, r.e = c.e, r.dist = c.dist, r.op = op;
    for (const auto& k : calls) samples_ += format_sample_line(r, k);
    sample_lines_ += calls.size();
  }

  // The programs the routes name are what is timed, never a stand-in serving while one
  // compiles (runtime/loader.hpp).
  static cake::RuntimeOptions timed_runtime() {
    cake::RuntimeOptions o;
    o.stand_ins = false;
    return o;
  }

  const Args& a_;
  cake::Runtime rt_;
  Timer timer_;
  Cublas lib_;
  std::unique_ptr<CublasHandle> handle_;
  std::unique_ptr<Nvml> nvml_;  // --sustained only
  std::vector<Result> results_;
  std::map<std::string, std::map<std::string, int>> routes_;  // op -> route -> rows
  std::map<std::string, int> grouped_errors_;
  bool failed_ = false;
  std::string samples_;  // --samples' lines so far
  size_t sample_lines_ = 0;
  int rows_seen_ = 0;  // row() calls so far, printed or failed
};

int run_bench_grouped_gemm(const Args& a) {
  if (!a.samples.empty()) check_samples_path(a.samples);
  const CUdevice dev = use_primary_context("grouped_gemm");
  Bench bench(a, dev);
  bench.print_header(cake::Driver::instance().device(0).name);
  const int64_t max_m = *std::max_element(a.ms.begin(), a.ms.end());
  const int max_e = *std::max_element(a.es.begin(), a.es.end());
  auto case_rows = [&](Buffers& b, const Shape& shape, const Case& c) {
    CAKE_CU(cuStreamSynchronize(bench.timer().stream));  // nothing still reads offs
    CAKE_CU(cuMemcpyHtoD(b.offs.get(), c.ends.data(), size_t(c.e) * 4));
    CAKE_CU(cuCtxSynchronize());
    bool go = true;
    for (size_t oi = 0; oi < a.ops.size() && go; ++oi) go = bench.row(b, shape, c, a.ops[oi]);
    return go;
  };
  auto run_rows = [&] {
    bool go = true;
    if (a.cases == "models") {
      for (size_t i = 0; i < model_cases().size() && go; ++i) {
        const ModelCase& mc = model_cases()[i];
        Buffers b(mc.m, mc.e, mc.shape.n, mc.shape.k);
        go = case_rows(b, mc.shape, make_case(mc.shape, mc.m, mc.e, "lognormal"));
      }
      return;
    }
    for (size_t si = 0; si < a.shapes.size() && go; ++si) {
      const Shape shape = shape_by_name(a.shapes[si]);
      Buffers b(max_m, max_e, shape.n, shape.k);  // once per shape: every case uses a prefix
      for (size_t mi = 0; mi < a.ms.size() && go; ++mi)
        for (size_t ei = 0; ei < a.es.size() && go; ++ei)
          for (size_t di = 0; di < a.dists.size() && go; ++di)
            go = case_rows(b, shape, make_case(shape, a.ms[mi], a.es[ei], a.dists[di]));
    }
  };
  try {
    run_rows();
  } catch (...) {
    bench.write_samples();  // what was timed before the error (a row's own errors do not land here)
    throw;
  }
  const int rc = bench.summary();
  return bench.write_samples() ? rc : kFailure;
}

}  // namespace

void add_bench_summarize(CLI::App& bench, int& exit_code);  // bench_summarize.cpp

void add_bench_grouped_gemm(CLI::App& bench, int& exit_code) {
  add_bench_summarize(bench, exit_code);
  auto a = std::make_shared<Args>();
  auto* c = bench.add_subcommand("grouped_gemm",
                                 "Grouped GEMM fwd/dgrad/wgrad TFLOP/s against the cuBLAS loop and grouped batched GEMM");
  auto* cases = c->add_option("--cases", a->cases,
                              "grid (default: every --shape x --m x --e x --dist) or models (the expert GEMMs of seven "
                              "open MoE models, lognormal routing: see the footer)")
                    ->check(CLI::IsMember({"grid", "models"}));
  auto* shape = c->add_option("--shape", a->shapes, "gate_up (N=4096, K=6144) and/or down (N=6144, K=2048); default both")
                    ->check(CLI::IsMember({"gate_up", "down"}));
  auto* m = c->add_option("--m", a->ms, "total rows M (default 112576 131072)")->check(CLI::PositiveNumber);
  auto* e = c->add_option("--e", a->es, "expert counts E (default 4 8 16 32)")->check(CLI::PositiveNumber);
  auto* dist = c->add_option("--dist", a->dists, "group size distributions (default all four)")
                   ->check(CLI::IsMember({"balanced", "skewed", "one_empty", "lognormal"}));
  c->add_option("--op", a->ops, "ops (default all four)")->check(CLI::IsMember({"fwd", "dgrad", "wgrad", "wgrad_acc"}));
  auto* reps = c->add_option("--reps", a->reps, "timed calls per contender and row; the median is reported (default 10)")
                   ->check(CLI::Range(1, 1000));
  auto* order =
      c->add_option("--order", a->order,
                    "in turn: permute (default: each rep runs the contenders in the next permutation of their order, "
                    "so each follows each other one about equally often) or fixed (cake, loop, grouped every rep: "
                    "cake always follows the grouped GEMM; the tables before 2026-12-03)")
          ->check(CLI::IsMember({"permute", "fixed"}));
  c->add_option("--cublas", a->cublas, "libcublas to dlopen before libcublas.so.13/.12/.so")->type_name("FILE");
  c->add_flag("--no-check", [a](int64_t) { a->check = false; }, "skip the sampled comparison with the cuBLAS loop");
  auto* sustained = c->add_flag(
      "--sustained", a->sustained,
      "time each contender alone, back to back, after --warm-ms of calls that let the clock settle at what its own "
      "power draw allows (instead of in turn call by call, at one shared clock); prints the clock and power (NVML)");
  reps->excludes(sustained);  // sustained windows are timed by length, not by a count
  order->excludes(sustained);
  c->add_option("--samples", a->samples,
                "write every timed call (row, shape, m, e, dist, op, rep, slot in the rep, contender, ms) to this "
                "CSV file when the run ends")
      ->type_name("FILE")
      ->check([](const std::string& v) { return v.empty() ? std::string("an empty path") : std::string(); })
      ->excludes(sustained);
  c->add_option("--warm-ms", a->warm_ms, "with --sustained: untimed calls before each window (default 1000)")
      ->check(CLI::Range(0, 60000))
      ->needs(sustained);
  c->add_option("--window-ms", a->window_ms, "with --sustained: timed calls per contender and round (default 500)")
      ->check(CLI::Range(1, 60000))
      ->needs(sustained);
  c->add_option("--rounds", a->rounds, "with --sustained: windows per contender, in turn (default 2)")
      ->check(CLI::Range(1, 100))
      ->needs(sustained);
  c->footer(
      "Group sizes: balanced (M/E each), skewed (group 0 has M/2, the rest split evenly), one_empty (group E/2 "
      "empty, the rest split evenly), lognormal (sigma 1, fixed seed, rounded to sum to M). --cases models (hidden, "
      "expert intermediate size, experts a GPU holds, M): DeepSeek-V3/EP8 (7168, 2048, 32, 65536), Mixtral-8x7B "
      "(4096, 14336, 8, 32768), Mixtral-8x22B (6144, 16384, 8, 32768), Qwen3-30B-A3B (2048, 768, 128, 65536), "
      "Qwen3-235B/EP8 (4096, 1536, 16, 65536), DBRX (6144, 10752, 16, 65536), OLMoE-1B-7B (2048, 1024, 64, 65536); "
      "gate_up: N = 2 x intermediate, K = hidden; down: N = hidden, K = intermediate.");
  c->callback([&exit_code, a, cases, shape, m, e, dist] {
    if (a->cases == "models")
      for (const CLI::Option* o : {shape, m, e, dist})
        if (o->count() > 0) throw UsageError(o->get_name() + " is for --cases grid: the models set has its own shapes, M and E");
    exit_code = run_bench_grouped_gemm(*a);
  });
}

}  // namespace cakec
