// cakec bench dense_gemm: cake's projection GEMM (fwd, dgrad, wgrad with bf16 output, fwd with
// an f32 y on request, wgrad accumulating into f32, the same with deterministic = false, and a
// training step's backward: dgrad then the accumulating wgrad) against cublasGemmEx (default
// algorithm, FP32 compute, same dtypes; beta = 1 for the accumulate) and cuBLASLt (the fastest of its heuristic's top 8 for each GEMM, each timed
// first) in one process. Each contender's call is replayed from a CUDA graph (as a training
// step's graph runs it; --no-graph launches it), with CUDA events around it and L2 flushed
// before it, the contenders in turn rep by rep; VS_BEST is the median over reps of the faster
// baseline's time / cake's (bench_stats.hpp). Each row's roofline is the larger of its bytes at
// the copy bandwidth and its FLOPs at cuBLAS's 8192^3 rate, both measured at the start of the
// run; ROOF% is the share of it each reaches. Outputs are compared with cuBLAS's, and with FP64
// where the two differ (--no-check skips), each GEMM of a step on its own.
#include <cmath>
#include <cstdio>
#include <memory>

#include "bench_util.hpp"
#include "cli_common.hpp"
#include "cublas_loader.hpp"
#include "cublaslt_loader.hpp"
#include "dense_gemm_ops.hpp"
#include "error.hpp"

namespace cakec {
namespace {

struct Args {
  std::vector<int64_t> ks{4096}, ns{32, 64, 128, 512, 1024}, ts{1024, 4097, 16173, 32768, 65537, 131072};
  std::vector<std::string> ops{"fwd", "dgrad", "wgrad", "wgrad_acc", "wgrad_acc_nd", "step"};
  int reps = 10;
  std::string cublas;
  bool check = true, graph = true;
};

// The GEMMs of a row's op: itself, or a step's dgrad then accumulating wgrad. wgrad_acc_nd is
// wgrad_acc with deterministic = false for cake (the baselines' GEMM is wgrad_acc's).
std::vector<std::string> gemms_of(const std::string& op) {
  if (op == "step") return {"dgrad", "wgrad_acc"};
  return {op};
}
std::string baseline_of(const std::string& gemm) { return gemm == "wgrad_acc_nd" ? "wgrad_acc" : gemm; }
bool is_wgrad(const std::string& op) { return op.rfind("wgrad", 0) == 0; }

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw cake::Error(std::string(what) + ": " + cublas_status_name(s));
}

class Bench {
 public:
  Bench(const Args& a, int64_t max_t, int64_t max_n, int64_t max_k)
      : a_(a), rt_(cake::RuntimeOptions{}), lib_(a.cublas),
        x_(size_t(max_t * max_k) * 2), dy_(size_t(max_t * max_n) * 2), w_(size_t(max_n * max_k) * 2),
        out_(size_t(max_t * std::max(max_n, max_k)) * out_elem_bytes(a.ops)), ref_(out_.bytes()), dw_(size_t(max_n * max_k) * 4),
        ref_dw_(dw_.bytes()) {
    if (!lib_.available()) throw cake::Error("cuBLAS: " + lib_.missing_reason());
    handle_ = std::make_unique<CublasHandle>(lib_, reinterpret_cast<cudaStream_t>(timer_.stream));
    hx_ = fill_random(x_.get(), size_t(max_t * max_k), 1);
    hdy_ = fill_random(dy_.get(), size_t(max_t * max_n), 2);
    hw_ = fill_random(w_.get(), size_t(max_n * max_k), 3);
    CAKE_CU(cuCtxSynchronize());
    measure_bounds();
  }

  // The copy bandwidth (a 1 GiB device-to-device copy: 2 GiB moved) and cuBLAS's bf16 rate
  // at 8192^3.
  void measure_bounds() {
    cake::DeviceBuffer a(size_t(1) << 30), b(size_t(1) << 30);
    const double copy_ms = timer_.median_ms([&] { CAKE_CU(cuMemcpyDtoDAsync(b.get(), a.get(), a.bytes(), timer_.stream)); });
    bytes_per_ms_ = 2.0 * double(a.bytes()) / copy_ms;
    const int s = 8192;
    cake::DeviceBuffer m(size_t(s) * s * 2), c(size_t(s) * s * 2);
    fill_random(m.get(), size_t(s) * s, 4);
    const double gemm_ms = timer_.median_ms([&] { gemm(CUBLAS_OP_T, CUBLAS_OP_N, s, s, s, m.ptr(), s, m.ptr(), s, c.ptr(), s, false, false); });
    flops_per_ms_ = 2.0 * s * double(s) * s / gemm_ms;
    std::printf("cakec bench dense_gemm: %s; copy %.0f GB/s, cuBLAS bf16 8192^3 %.0f TFLOP/s; bf16 in, fp32 compute; median "
                "of %d in turn, L2 flushed, %s\n",
                cake::Driver::instance().device(0).name.c_str(), bytes_per_ms_ / 1e6, flops_per_ms_ / 1e9, a_.reps,
                a_.graph ? "CUDA graph replay" : "launched");
    std::printf("%-9s %6s %5s %7s  %9s %9s %9s  %8s  %6s %6s  %s\n", "OP", "K", "N", "T", "CAKE_MS", "CUBLAS_MS",
                "LT8_MS", "VS_BEST", "ROOF%c", "ROOF%b", "ROUTE / CHECK");
  }

  // Column-major cublasGemmEx, C = op(A) op(B), bf16 A and B, C bf16 or f32 (beta 1 with acc).
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* A, int lda, const void* B,
            int ldb, void* C, int ldc, bool f32, bool acc) {
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    check_cublas(handle_->api().cublasGemmEx(handle_->get(), ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B,
                                             CUDA_R_16BF, ldb, &beta, C, f32 ? CUDA_R_32F : CUDA_R_16BF, ldc,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  // Where a GEMM writes: y and dx into out_ (cake) or ref_ (the baselines), dw into dw_ or
  // ref_dw_, so that a step's two GEMMs keep their outputs apart.
  const cake::DeviceBuffer& out(const std::string& op) const { return is_wgrad(op) ? dw_ : out_; }
  const cake::DeviceBuffer& ref(const std::string& op) const { return is_wgrad(op) ? ref_dw_ : ref_; }
  static bool is_fwd(const std::string& op) { return op.rfind("fwd", 0) == 0; }
  static bool f32_out(const std::string& op) { return op == "wgrad_acc" || op == "fwd_f32"; }
  // y and dx share out_: bf16, or f32 when the rows include an f32 y.
  static size_t out_elem_bytes(const std::vector<std::string>& ops) {
    return std::find(ops.begin(), ops.end(), "fwd_f32") != ops.end() ? 4 : 2;
  }
  static size_t out_bytes(const std::string& op, int64_t t, int64_t n, int64_t k) {
    return size_t(is_fwd(op) ? t * n : op == "dgrad" ? t * k : n * k) * (f32_out(op) ? 4 : 2);
  }

  // Row-major y = x w^T, dx = dy w, dw = dy^T x as column-major GEMMs of the transposes.
  void cublas_op(const std::string& op, int64_t t, int64_t n, int64_t k) {
    const int T = int(t), N = int(n), K = int(k);
    void* c = ref(op).ptr();
    if (is_fwd(op)) gemm(CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, w_.ptr(), K, x_.ptr(), K, c, N, f32_out(op), false);
    else if (op == "dgrad") gemm(CUBLAS_OP_N, CUBLAS_OP_N, K, T, N, w_.ptr(), K, dy_.ptr(), N, c, K, false, false);
    else gemm(CUBLAS_OP_N, CUBLAS_OP_T, K, N, T, x_.ptr(), K, dy_.ptr(), N, c, K, op == "wgrad_acc", op == "wgrad_acc");
  }

  // The same GEMM for cuBLASLt: its descriptors, operands and output.
  struct LtCall {
    LtGemm g;
    const void *a, *b;
    void* c;
  };
  LtCall lt_call(const std::string& op, int64_t t, int64_t n, int64_t k) const {
    const int T = int(t), N = int(n), K = int(k);
    const bool acc = op == "wgrad_acc";
    const cudaDataType cd = f32_out(op) ? CUDA_R_32F : CUDA_R_16BF;
    void* c = ref(op).ptr();
    if (is_fwd(op)) return {{CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, CUDA_R_16BF, cd, K, K, N, 0.0f}, w_.ptr(), x_.ptr(), c};
    if (op == "dgrad") return {{CUBLAS_OP_N, CUBLAS_OP_N, K, T, N, CUDA_R_16BF, cd, K, N, K, 0.0f}, w_.ptr(), dy_.ptr(), c};
    return {{CUBLAS_OP_N, CUBLAS_OP_T, K, N, T, CUDA_R_16BF, cd, K, N, K, acc ? 1.0f : 0.0f}, x_.ptr(), dy_.ptr(), c};
  }

  // The fastest of cuBLASLt's top 8 for the row (each timed thrice, L2 flushed): its index, or
  // -1 when cuBLASLt is missing or runs none of them.
  int best_lt_algo(const LtMatmul& m, const LtCall& c) {
    int best = -1;
    double best_ms = 0;
    for (int i = 0; i < m.algos(); ++i) {
      if (!m.run(i, c.a, c.b, c.c, timer_.stream)) continue;
      std::vector<double> t;
      for (uint32_t r = 0; r < 3; ++r) t.push_back(timer_.timed_ms([&] { m.run(i, c.a, c.b, c.c, timer_.stream); }, r));
      const double ms = median_time(t);
      if (best < 0 || ms < best_ms) best = i, best_ms = ms;
    }
    return best;
  }

  cake::Launch prepare(const std::string& op, int64_t t, int64_t n, int64_t k) {
    std::vector<int64_t> tk{t, k}, tn{t, n}, nk{n, k};
    DLTensor x = tensor(x_, kBf16, tk), dy = tensor(dy_, kBf16, tn), w = tensor(w_, kBf16, nk);
    if (is_fwd(op)) return cake::ops::prepare_dense_gemm_fwd(rt_, tensor(out_, f32_out(op) ? kF32 : kBf16, tn), x, w);
    if (op == "dgrad") return cake::ops::prepare_dense_gemm_dgrad(rt_, tensor(out_, kBf16, tk), dy, w);
    const bool acc = op != "wgrad";
    cake::ops::OpOptions o;
    o.deterministic = op != "wgrad_acc_nd";
    return cake::ops::prepare_dense_gemm_wgrad(rt_, tensor(dw_, acc ? kF32 : kBf16, nk), dy, x, acc, o);
  }

  // The bytes a GEMM must move: its inputs read once, its output written (and read, accumulating).
  static double bytes(const std::string& op, int64_t t, int64_t n, int64_t k) {
    if (op == "step") return bytes("dgrad", t, n, k) + bytes("wgrad_acc", t, n, k);
    const double in = 2.0 * (is_fwd(op) ? t * k + n * k : op == "dgrad" ? t * n + n * k : t * n + t * k);
    const double out = op == "fwd"       ? 2.0 * t * n
                       : op == "fwd_f32" ? 4.0 * t * n
                       : op == "dgrad"   ? 2.0 * t * k
                       : op == "wgrad"   ? 2.0 * n * k
                                         : 8.0 * n * k;
    return in + out;
  }

  // Output element `i` (row-major) in FP64 from the host's copies of the inputs.
  double fp64(const std::string& op, int64_t t, int64_t n, int64_t k, size_t i) const {
    auto at = [](const std::vector<uint16_t>& block, int64_t e) { return double(bf16_to_float(block[size_t(e) % block.size()])); };
    double s = 0;
    if (is_fwd(op)) {
      const int64_t r = int64_t(i) / n, c = int64_t(i) % n;
      for (int64_t j = 0; j < k; ++j) s += at(hx_, r * k + j) * at(hw_, c * k + j);
    } else if (op == "dgrad") {
      const int64_t r = int64_t(i) / k, c = int64_t(i) % k;
      for (int64_t j = 0; j < n; ++j) s += at(hdy_, r * n + j) * at(hw_, j * k + c);
    } else {
      const int64_t r = int64_t(i) / k, c = int64_t(i) % k;
      for (int64_t j = 0; j < t; ++j) s += at(hdy_, j * n + r) * at(hx_, j * k + c);
    }
    return s;
  }

  // cake's output against cuBLAS's: relative Frobenius difference over the first 1M elements.
  // Where they agree, 8 elements must agree with FP64 too; where they differ (beyond 1e-2),
  // FP64 decides on up to 32 of the elements that differ by more than 1e-2 (1 + |value|): the
  // row is ok when cake is within that of FP64 at every one (cuBLAS is the side off; where
  // the two straddle the bound, cuBLAS may be within it too), else BAD.
  std::string compare(const std::string& op, int64_t t, int64_t n, int64_t k) const {
    const bool f32 = f32_out(op);
    const size_t elems = size_t(is_fwd(op) ? t * n : op == "dgrad" ? t * k : n * k), count = std::min<size_t>(elems, 1 << 20);
    const std::vector<float> got = read_floats(out(op), count, !f32), want = read_floats(ref(op), count, !f32);
    const double rel = rel_frobenius(got, want);
    char buf[320];
    auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-2 * (1 + std::fabs(b)); };
    const int64_t cols = is_fwd(op) ? n : k;
    std::vector<size_t> off;  // the elements where the two differ
    for (size_t i = 0; i < count; ++i)
      if (!near(got[i], want[i])) off.push_back(i);
    if (rel <= 1e-2 || off.empty()) {  // (off empty: small values, each within the bound)
      // Agreeing with cuBLAS is not enough (both could be off alike): 8 elements against FP64.
      for (size_t s = 0; s < 8; ++s) {
        const size_t i = s * (count - 1) / 7;
        const double ref64 = fp64(op, t, n, k, i);
        if (!near(got[i], ref64)) {
          failed_ = true;
          std::snprintf(buf, sizeof(buf), "BAD %.1e (as cuBLAS, but FP64 differs at [%lld, %lld]: %g, FP64 %g)", rel,
                        (long long)(int64_t(i) / cols), (long long)(int64_t(i) % cols), got[i], ref64);
          return buf;
        }
      }
      std::snprintf(buf, sizeof(buf), "ok %.1e", rel);
      return buf;
    }
    const size_t step = std::max<size_t>(1, off.size() / 32);
    size_t sampled = 0, cake_right = 0, cublas_right = 0;
    for (size_t s = 0; s < off.size() && sampled < 32; s += step, ++sampled) {
      const double ref64 = fp64(op, t, n, k, off[s]);
      cake_right += near(got[off[s]], ref64), cublas_right += near(want[off[s]], ref64);
    }
    const bool cake_ok = cake_right == sampled;
    if (!cake_ok) failed_ = true;
    const size_t first = off[0];
    std::snprintf(buf, sizeof(buf),
                  "%s %.1e (%zu elements differ from cuBLAS; FP64 agrees with cake at %zu, cuBLAS at %zu of %zu "
                  "sampled; first [%lld, %lld]: %g, cuBLAS %g, FP64 %g)",
                  cake_ok ? "ok" : "BAD", rel, off.size(), cake_right, cublas_right, sampled,
                  (long long)(int64_t(first) / cols), (long long)(int64_t(first) % cols), got[first], want[first],
                  fp64(op, t, n, k, first));
    return buf;
  }

  void row(const std::string& op, int64_t t, int64_t n, int64_t k) {
    const std::vector<std::string> gemms = gemms_of(op);
    std::vector<cake::Launch> ls;
    std::vector<std::string> base;  // what the baselines run and the checks read
    for (const std::string& g : gemms) ls.push_back(prepare(g, t, n, k)), base.push_back(baseline_of(g));
    // The check first, each GEMM from zeros (accumulating, both add once), all on the timer's
    // stream in order.
    std::string check;
    for (size_t i = 0; i < gemms.size(); ++i) {
      const size_t bytes = out_bytes(base[i], t, n, k);
      CAKE_CU(cuMemsetD32Async(out(base[i]).get(), 0, bytes / 4, timer_.stream));
      CAKE_CU(cuMemsetD32Async(ref(base[i]).get(), 0, bytes / 4, timer_.stream));
      ls[i].launch(timer_.stream);
      cublas_op(base[i], t, n, k);
      if (a_.check) check += (i ? " / " : "") + compare(base[i], t, n, k);
    }
    std::vector<std::function<void()>> fs{[&] { for (cake::Launch& l : ls) l.launch(timer_.stream); },
                                          [&] { for (const std::string& g : base) cublas_op(g, t, n, k); }};
    // cuBLASLt: the best of its top 8 for each GEMM; a contender only if it runs all of them.
    std::vector<std::unique_ptr<LtMatmul>> lts;
    std::vector<LtCall> lcs;
    std::vector<int> algos;
    for (size_t i = 0; lt_lib_.available() && i < gemms.size(); ++i) {
      lcs.push_back(lt_call(base[i], t, n, k));
      lts.push_back(std::make_unique<LtMatmul>(lt_lib_, lcs[i].g, lt_ws_.ptr(), lt_ws_.bytes()));
      algos.push_back(best_lt_algo(*lts[i], lcs[i]));
    }
    if (!algos.empty() && *std::min_element(algos.begin(), algos.end()) >= 0)
      fs.push_back([&] {
        for (size_t i = 0; i < lts.size(); ++i) lts[i]->run(algos[i], lcs[i].a, lcs[i].b, lcs[i].c, timer_.stream);
      });
    if (a_.graph)
      for (auto& f : fs) f = graph_of(f, timer_.stream);
    std::vector<TimedCall> calls;
    const auto med = timer_.median_ms_interleaved(fs, a_.reps, true, &calls);
    const double lt_ms = fs.size() > 2 ? med[2] : NAN, best_ms = std::fmin(med[1], lt_ms);
    const double flops = 2.0 * t * double(n) * k * double(gemms.size());
    const double roof = std::max(bytes(baseline_of(op), t, n, k) / bytes_per_ms_, flops / flops_per_ms_);
    std::string route;
    for (const cake::Launch& l : ls) route += (route.empty() ? "" : "+") + (l.plan() ? l.plan()->route : "(none)");
    std::printf("%-9s %6lld %5lld %7lld  %9.4f %9.4f %9.4f  %7.3fx  %5.1f%% %5.1f%%  %s %s\n", op.c_str(), (long long)k,
                (long long)n, (long long)t, med[0], med[1], lt_ms, median_rep_ratio(calls), 100 * roof / med[0],
                100 * roof / best_ms, route.c_str(), check.c_str());
    std::fflush(stdout);
  }
  bool failed() const { return failed_; }

 private:
  const Args& a_;
  cake::Runtime rt_;
  Timer timer_;
  Cublas lib_;
  CublasLt lt_lib_;
  std::unique_ptr<CublasHandle> handle_;
  cake::DeviceBuffer x_, dy_, w_, out_, ref_, dw_, ref_dw_, lt_ws_{size_t(64) << 20};
  std::vector<uint16_t> hx_, hdy_, hw_;  // the host blocks the inputs repeat (fill_random)
  double bytes_per_ms_ = 0, flops_per_ms_ = 0;
  mutable bool failed_ = false;
};

int run(const Args& a) {
  use_primary_context("dense_gemm");
  auto biggest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  Bench bench(a, biggest(a.ts), biggest(a.ns), biggest(a.ks));
  for (int64_t k : a.ks)
    for (int64_t n : a.ns)
      for (int64_t t : a.ts)
        for (const std::string& op : a.ops) bench.row(op, t, n, k);
  if (bench.failed()) std::printf("\nFAILED: a row differs from cuBLAS where FP64 does not side with cake\n");
  return bench.failed() ? kFailure : kOk;
}

}  // namespace

void add_bench_dense_gemm(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* c = bench.add_subcommand("dense_gemm", "Projection GEMM fwd/dgrad/wgrad against cublasGemmEx, with rooflines");
  c->add_option("--k", a->ks, "K, the input width, a multiple of 8 (default 4096)")->check(positive_multiple_of_8);
  c->add_option("--n", a->ns, "N, the output width, a multiple of 8 (default 32 64 128 512 1024)")
      ->check(positive_multiple_of_8);
  c->add_option("--t", a->ts, "T, tokens (default 1024 4097 16173 32768 65537 131072)")->check(CLI::PositiveNumber);
  c->add_option("--op", a->ops, "ops (default all but fwd_f32; fwd_f32: fwd with an f32 y; wgrad_acc_nd: cake with "
                               "deterministic = false; step: dgrad then wgrad_acc)")
      ->check(CLI::IsMember({"fwd", "fwd_f32", "dgrad", "wgrad", "wgrad_acc", "wgrad_acc_nd", "step"}));
  c->add_option("--reps", a->reps, "timed calls per contender and row (default 10)")->check(CLI::Range(1, 1000));
  c->add_option("--cublas", a->cublas, "libcublas to dlopen before libcublas.so.13/.12/.so")->type_name("FILE");
  c->add_flag("--no-check", [a](int64_t) { a->check = false; }, "skip the comparison with cuBLAS's output");
  c->add_flag("--no-graph", [a](int64_t) { a->graph = false; }, "launch each call instead of replaying its CUDA graph");
  c->callback([&exit_code, a] { exit_code = run(*a); });
}

}  // namespace cakec
