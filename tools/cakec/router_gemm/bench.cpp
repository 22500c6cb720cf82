// cakec bench router_gemm: cake's FP32 router GEMM (x bf16, w and dlogits f32 through exact
// BF16 parts) against cuBLAS's FP32 GEMMs on the same values (x widened to f32): exact SGEMM
// (CUBLAS_COMPUTE_32F), TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) and the BF16x9 emulation
// (CUBLAS_COMPUTE_32F_EMULATED_16BFX9, "n/a" where cuBLAS does not offer it). One process,
// each call replayed from a CUDA graph (--no-graph launches it), CUDA events, L2 flushed
// before each call, contenders in turn rep by rep; VS_X is the median
// over reps of X's time / cake's. CHECK: cake's output against the SGEMM's (relative
// Frobenius difference; bf16 dx against 1e-2, f32 outputs against 5e-4: two FP32 results of
// long reductions, each within ~1e-5 to 1e-4 of the exact one).
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "bench_stats.hpp"
#include "bench_util.hpp"
#include "cli_common.hpp"
#include "cublas_loader.hpp"
#include "error.hpp"
#include "router_gemm_ops.hpp"

namespace cakec {
namespace {

struct Args {
  std::vector<int64_t> es{64, 128, 256}, hs{4096, 5120, 7168}, ts{1024, 4097, 16173, 32768, 65537, 131072};
  std::vector<std::string> ops{"fwd", "dgrad", "wgrad", "wgrad_acc"};
  std::string dx = "bf16";
  int reps = 10;
  std::string cublas;
  bool check = true, graph = true;
};

// cuBLAS's FP32 modes, in column order.
const cublasComputeType_t kModes[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_EMULATED_16BFX9};
const char* const kModeNames[] = {"SGEMM", "TF32", "BF16X9"};

// Random FP32 values with full 24-bit significands, a 1M block repeated by device copies. With
// `bf16`, the values are BF16's (x) and written to `bf16` too.
void fill(CUdeviceptr f32, CUdeviceptr bf16, size_t elems, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  const size_t block = std::min<size_t>(elems, size_t(1) << 20);
  std::vector<float> h(block);
  std::vector<uint16_t> hb(block);
  for (size_t i = 0; i < block; ++i) {
    h[i] = d(rng);
    if (bf16) hb[i] = float_to_bf16(h[i]), h[i] = bf16_to_float(hb[i]);
  }
  auto spread = [&](CUdeviceptr p, const void* src, size_t size) {
    CAKE_CU(cuMemcpyHtoD(p, src, block * size));
    for (size_t done = block; done < elems;) {
      const size_t n = std::min(done, elems - done);  // doubling copies
      CAKE_CU(cuMemcpyDtoD(p + done * size, p, n * size));
      done += n;
    }
  };
  spread(f32, h.data(), 4);
  if (bf16) spread(bf16, hb.data(), 2);
}

class Bench {
 public:
  Bench(const Args& a, int64_t t, int64_t e, int64_t h)
      : a_(a), rt_(cake::RuntimeOptions{}), lib_(a.cublas), x_(size_t(t * h) * 2), xf_(size_t(t * h) * 4),
        w_(size_t(e * h) * 4), g_(size_t(t * e) * 4), out_(size_t(t * std::max(e, h)) * 4), ref_(out_.bytes()) {
    if (!lib_.available()) throw cake::Error("cuBLAS: " + lib_.missing_reason());
    handle_ = std::make_unique<CublasHandle>(lib_, reinterpret_cast<cudaStream_t>(timer_.stream));
    fill(xf_.get(), x_.get(), size_t(t * h), 1, 1.0f);
    fill(w_.get(), 0, size_t(e * h), 2, 0.02f);
    fill(g_.get(), 0, size_t(t * e), 3, 1e-3f);
    CAKE_CU(cuCtxSynchronize());
    std::printf("cakec bench router_gemm: %s; x bf16, w and dlogits f32 (full precision), dx %s; cuBLAS in FP32 on "
                "the same values; median of %d in turn, L2 flushed, %s\n",
                cake::Driver::instance().device(0).name.c_str(), a_.dx.c_str(), a_.reps,
                a_.graph ? "CUDA graph replay" : "launched");
    std::printf("%-9s %4s %5s %7s  %8s %8s %8s %8s  %8s %7s  %s\n", "OP", "E", "H", "T", "CAKE_MS", "SGEMM_MS",
                "TF32_MS", "BF16X9", "VS_SGEMM", "VS_TF32", "ROUTE / CHECK");
  }

  // Row-major logits = x w^T, dx = g w, dw = g^T x as column-major GEMMs; false where cuBLAS
  // refuses the mode.
  bool cublas_op(const std::string& op, int64_t t, int64_t e, int64_t h, cublasComputeType_t mode) {
    const int T = int(t), E = int(e), H = int(h);
    const bool acc = op == "wgrad_acc";
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* A, int lda,
                    const void* B, int ldb, int ldc) {
      return handle_->api().cublasGemmEx(handle_->get(), ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F,
                                         ldb, &beta, ref_.ptr(), CUDA_R_32F, ldc, mode, CUBLAS_GEMM_DEFAULT);
    };
    cublasStatus_t s;
    if (op == "fwd") s = gemm(CUBLAS_OP_T, CUBLAS_OP_N, E, T, H, w_.ptr(), H, xf_.ptr(), H, E);
    else if (op == "dgrad") s = gemm(CUBLAS_OP_N, CUBLAS_OP_N, H, T, E, w_.ptr(), H, g_.ptr(), E, H);
    else s = gemm(CUBLAS_OP_N, CUBLAS_OP_T, H, E, T, xf_.ptr(), H, g_.ptr(), E, H);
    return s == CUBLAS_STATUS_SUCCESS;
  }

  cake::Launch prepare(const std::string& op, int64_t t, int64_t e, int64_t h) {
    std::vector<int64_t> th{t, h}, te{t, e}, eh{e, h};
    DLTensor x = tensor(x_, kBf16, th), w = tensor(w_, kF32, eh), g = tensor(g_, kF32, te);
    if (op == "fwd") return cake::ops::prepare_router_gemm_fwd(rt_, tensor(out_, kF32, te), x, w);
    if (op == "dgrad")
      return cake::ops::prepare_router_gemm_dgrad(rt_, tensor(out_, a_.dx == "f32" ? kF32 : kBf16, th), g, w);
    return cake::ops::prepare_router_gemm_wgrad(rt_, tensor(out_, kF32, eh), g, x, op == "wgrad_acc");
  }

  std::string compare(const std::string& op, int64_t t, int64_t e, int64_t h) const {
    const bool bf16 = op == "dgrad" && a_.dx == "bf16";
    const size_t elems = size_t(op == "fwd" ? t * e : op == "dgrad" ? t * h : e * h), count = std::min<size_t>(elems, 1 << 20);
    const double rel = rel_frobenius(read_floats(out_, count, bf16), read_floats(ref_, count, false));
    const double budget = bf16 ? 1e-2 : 5e-4;
    if (!(rel <= budget)) failed_ = true;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s %.1e", rel <= budget ? "ok" : "BAD", rel);
    return buf;
  }

  void row(const std::string& op, int64_t t, int64_t e, int64_t h) {
    cake::Launch l = prepare(op, t, e, h);
    const size_t out_bytes = size_t(op == "fwd" ? t * e : op == "dgrad" ? t * h : e * h) * 4;
    std::vector<std::function<void()>> fs{[&] { l.launch(timer_.stream); }};
    std::vector<int> mode_of{-1};
    for (int m = 0; m < 3; ++m)
      if (cublas_op(op, t, e, h, kModes[m])) fs.push_back([&, m] { cublas_op(op, t, e, h, kModes[m]); }), mode_of.push_back(m);
    std::vector<TimedCall> calls;
    std::vector<double> med;
    // The check first: both from zeros (accumulating, both add once), the SGEMM's result last,
    // all on the timer's stream in order (after the probes).
    CAKE_CU(cuMemsetD32Async(out_.get(), 0, out_bytes / 4, timer_.stream));
    CAKE_CU(cuMemsetD32Async(ref_.get(), 0, out_bytes / 4, timer_.stream));
    l.launch(timer_.stream);
    cublas_op(op, t, e, h, kModes[0]);
    const std::string check = a_.check ? compare(op, t, e, h) : "";
    if (a_.graph)
      for (auto& f : fs) f = graph_of(f, timer_.stream);
    med = timer_.median_ms_interleaved(fs, a_.reps, true, &calls);
    double ms[3] = {NAN, NAN, NAN}, vs[3] = {NAN, NAN, NAN};
    for (size_t c = 1; c < fs.size(); ++c) {
      ms[mode_of[c]] = med[c];
      std::vector<TimedCall> pair;
      for (const TimedCall& k : calls)
        if (k.contender == 0 || size_t(k.contender) == c) pair.push_back(k);
      vs[mode_of[c]] = median_rep_ratio(pair);
    }
    auto cell = [](double v, const char* fmt) {
      char b[32];
      if (std::isnan(v)) std::snprintf(b, sizeof(b), "%s", "n/a");
      else std::snprintf(b, sizeof(b), fmt, v);
      return std::string(b);
    };
    std::printf("%-9s %4lld %5lld %7lld  %8.4f %8s %8s %8s  %8s %7s  %s %s\n", op.c_str(), (long long)e, (long long)h,
                (long long)t, med[0], cell(ms[0], "%.4f").c_str(), cell(ms[1], "%.4f").c_str(),
                cell(ms[2], "%.4f").c_str(), cell(vs[0], "%.2fx").c_str(), cell(vs[1], "%.2fx").c_str(),
                l.plan() ? l.plan()->route.c_str() : "(none)", check.c_str());
    std::fflush(stdout);
  }
  bool failed() const { return failed_; }

 private:
  const Args& a_;
  cake::Runtime rt_;
  Timer timer_;
  Cublas lib_;
  std::unique_ptr<CublasHandle> handle_;
  cake::DeviceBuffer x_, xf_, w_, g_, out_, ref_;
  mutable bool failed_ = false;
};

int run(const Args& a) {
  use_primary_context("router_gemm");
  auto biggest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  Bench bench(a, biggest(a.ts), biggest(a.es), biggest(a.hs));
  for (int64_t e : a.es)
    for (int64_t h : a.hs)
      for (int64_t t : a.ts)
        for (const std::string& op : a.ops) bench.row(op, t, e, h);
  if (bench.failed()) std::printf("\nFAILED: a row differs from cuBLAS's SGEMM\n");
  return bench.failed() ? kFailure : kOk;
}

}  // namespace

void add_bench_router_gemm(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* c = bench.add_subcommand("router_gemm", "FP32 router GEMM fwd/dgrad/wgrad against cuBLAS SGEMM, TF32, BF16x9");
  c->add_option("--e", a->es, "E, experts, a multiple of 8 (default 64 128 256)")->check(positive_multiple_of_8);
  c->add_option("--h", a->hs, "H, hidden size, a multiple of 8 (default 4096 5120 7168)")
      ->check(positive_multiple_of_8);
  c->add_option("--t", a->ts, "T, tokens (default 1024 4097 16173 32768 65537 131072)")->check(CLI::PositiveNumber);
  c->add_option("--op", a->ops, "ops (default all four)")->check(CLI::IsMember({"fwd", "dgrad", "wgrad", "wgrad_acc"}));
  c->add_option("--dx", a->dx, "dgrad's dx dtype (default bf16)")->check(CLI::IsMember({"bf16", "f32"}));
  c->add_option("--reps", a->reps, "timed calls per contender and row (default 10)")->check(CLI::Range(1, 1000));
  c->add_option("--cublas", a->cublas, "libcublas to dlopen before libcublas.so.13/.12/.so")->type_name("FILE");
  c->add_flag("--no-check", [a](int64_t) { a->check = false; }, "skip the comparison with cuBLAS's SGEMM");
  c->add_flag("--no-graph", [a](int64_t) { a->graph = false; }, "launch each call instead of replaying its CUDA graph");
  c->callback([&exit_code, a] { exit_code = run(*a); });
}

}  // namespace cakec
