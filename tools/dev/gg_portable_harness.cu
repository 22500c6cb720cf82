// Standalone check and timing of templates/smxx_grouped_gemm.cuh (the portable grouped GEMM).
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I templates \
//        tools/dev/gg_portable_harness.cu -o gg_portable && ./gg_portable
//
// Tile config: -DGG_BM=128 -DGG_BN=128 -DGG_BK=32 -DGG_STAGES=4 -DGG_WM=2 -DGG_WN=2 (defaults).
// ./gg_portable --no-perf skips the large timed cases; --perf-only runs only them.
//
// Per case and op: fp32 and bf16 outputs against an FP64 GPU reference (TARGETS.md budgets),
// NaN-poisoned outputs (every element written), rows past offs[E-1] untouched (bitwise the
// poison), a second run with a different grid bitwise equal, and kAccumulate (fp32 and bf16)
// bitwise equal to OutT(old + acc) with acc taken from the fp32 run of the same kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "smxx_grouped_gemm.cuh"

#ifndef GG_BM
#define GG_BM 128
#endif
#ifndef GG_BN
#define GG_BN 128
#endif
#ifndef GG_BK
#define GG_BK 32
#endif
#ifndef GG_STAGES
#define GG_STAGES 4
#endif
#ifndef GG_WM
#define GG_WM 2
#endif
#ifndef GG_WN
#define GG_WN 2
#endif

using cake::bf16;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t err_ = (x);                                                                \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                      \
                   cudaGetErrorString(err_));                                              \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

// ---------------------------------------------------------------- host bf16
static uint16_t f2bf(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
static float bf2f(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---------------------------------------------------------------- launch
constexpr int kThreads = GG_WM * GG_WN * 32;

template <int kOp, typename OutT, bool kAcc>
struct Kern {
  static constexpr int kSmem =
      cake::gg::portable_smem_bytes<kOp, OutT, kAcc, GG_BM, GG_BN, GG_BK, GG_STAGES, GG_WM, GG_WN>();
  static auto fn() {
    return &cake::gg::portable_grouped_gemm<kOp, OutT, kAcc, GG_BM, GG_BN, GG_BK, GG_STAGES, GG_WM,
                                            GG_WN>;
  }
  static int occupancy() {
    static int occ = [] {
      CK(cudaFuncSetAttribute(fn(), cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      int o = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, fn(), kThreads, kSmem));
      cudaFuncAttributes attr{};
      CK(cudaFuncGetAttributes(&attr, fn()));
      std::printf("  [kernel op=%d out=%s acc=%d: %d regs, %zu B local, %d B smem, %d CTA/SM]\n",
                  kOp, sizeof(OutT) == 4 ? "f32" : "bf16", int(kAcc), attr.numRegs,
                  attr.localSizeBytes, kSmem, o);
      if (o < 1) {
        std::fprintf(stderr, "kernel cannot launch (occupancy 0)\n");
        std::exit(2);
      }
      return o;
    }();
    return occ;
  }
  static void launch(int grid, const bf16* a, const bf16* b, OutT* out, const int* offs, int E,
                     int m, int n, int k, cudaStream_t st = 0) {
    occupancy();
    fn()<<<grid, kThreads, kSmem, st>>>(a, b, out, offs, E, m, n, k);
    CK(cudaGetLastError());
  }
};

// ---------------------------------------------------------------- FP64 reference
// grp[row] = group of row, or -1 past offs[E-1]. fwd/dgrad: ref[M][cols]; wgrad: ref[E][N][K].
__global__ void ref_kernel(int op, const bf16* a, const bf16* b, const int* grp, const int* offs,
                           double* ref, int E, int m, int n, int k) {
  const long long cols = op == 0 ? n : k;
  const long long total = op == 2 ? static_cast<long long>(E) * n * k : m * cols;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    auto f = [](const bf16& v) { return static_cast<double>(__uint_as_float(unsigned(v.bits) << 16)); };
    double s = 0.0;
    if (op == 0) {
      const long long row = idx / cols, col = idx % cols;
      const int e = grp[row];
      if (e < 0) continue;
      const bf16* x = a + row * k;
      const bf16* w = b + (static_cast<long long>(e) * n + col) * k;
      for (int r = 0; r < k; ++r) s += f(x[r]) * f(w[r]);
    } else if (op == 1) {
      const long long row = idx / cols, col = idx % cols;
      const int e = grp[row];
      if (e < 0) continue;
      const bf16* g = a + row * n;
      const bf16* w = b + static_cast<long long>(e) * n * k + col;
      for (int r = 0; r < n; ++r) s += f(g[r]) * f(w[static_cast<long long>(r) * k]);
    } else {
      const long long e = idx / (static_cast<long long>(n) * k);
      const long long i = (idx / k) % n, j = idx % k;
      const int r0 = e == 0 ? 0 : offs[e - 1], r1 = offs[e];
      for (int r = r0; r < r1; ++r)
        s += f(a[static_cast<long long>(r) * n + i]) * f(b[static_cast<long long>(r) * k + j]);
    }
    ref[idx] = s;
  }
}

// ---------------------------------------------------------------- case
struct Case {
  std::string name;
  int E, m, n, k;
  std::vector<int> offs;
};

static int g_fail = 0;
static int g_sms = 0;

static void report(const std::string& what, bool ok, const std::string& detail) {
  std::printf("%s %s  %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  if (!ok) ++g_fail;
}

template <typename T>
static std::vector<T> download(const T* d, size_t count) {
  std::vector<T> h(count);
  CK(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

template <int kOp>
static void run_op(const Case& c, const bf16* d_a, const bf16* d_b, const int* d_offs,
                   const int* d_grp, const std::vector<int>& grp) {
  const char* opname = kOp == 0 ? "fwd" : kOp == 1 ? "dgrad" : "wgrad";
  const int E = c.E, m = c.m, n = c.n, k = c.k;
  const long long rows_out = kOp == 2 ? static_cast<long long>(E) * n : m;
  const long long cols = kOp == 0 ? n : k;
  const size_t count = static_cast<size_t>(rows_out * cols);
  // Element valid = must be written (fwd/dgrad: rows inside a group; wgrad: all).
  auto valid = [&](size_t idx) { return kOp == 2 || grp[idx / cols] >= 0; };
  auto empty_group_elem = [&](size_t idx) {  // wgrad: element of an empty group
    if (kOp != 2) return false;
    const int e = static_cast<int>(idx / (static_cast<size_t>(n) * k));
    const int r0 = e == 0 ? 0 : c.offs[e - 1];
    return c.offs[e] == r0;
  };

  double* d_ref;
  CK(cudaMalloc(&d_ref, count * sizeof(double)));
  CK(cudaMemset(d_ref, 0, count * sizeof(double)));
  ref_kernel<<<g_sms * 8, 256>>>(kOp, d_a, d_b, d_grp, d_offs, d_ref, E, m, n, k);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const std::vector<double> ref = download(d_ref, count);
  CK(cudaFree(d_ref));
  double ref_max = 0, ref_f2 = 0;
  for (size_t i = 0; i < count; ++i)
    if (valid(i)) {
      ref_max = std::max(ref_max, std::fabs(ref[i]));
      ref_f2 += ref[i] * ref[i];
    }

  float* d_f32;
  bf16* d_bf;
  CK(cudaMalloc(&d_f32, count * 4));
  CK(cudaMalloc(&d_bf, count * 2));
  const int grid_a = g_sms * Kern<kOp, float, false>::occupancy();
  const int grid_b = 7;  // a very different grid: bits must not change
  char buf[256];
  const std::string tag = c.name + " " + opname;
  // Runs the plain (non-accumulating) kernel again on grid_b into a poisoned `d_out` and
  // reports whether it gave the bits of `first`.
  auto rerun_same_bits = [&](auto* d_out, const auto& first, const char* what) {
    using OutT = std::remove_pointer_t<decltype(d_out)>;
    CK(cudaMemset(d_out, 0xff, count * sizeof(OutT)));
    Kern<kOp, OutT, false>::launch(grid_b, d_a, d_b, d_out, d_offs, E, m, n, k);
    CK(cudaDeviceSynchronize());
    const std::vector<OutT> again = download(d_out, count);
    const bool same = std::memcmp(again.data(), first.data(), count * sizeof(OutT)) == 0;
    std::snprintf(buf, sizeof buf, "grid %d vs %d", grid_a, grid_b);
    report(tag + " " + what + " deterministic", same, buf);
  };

  // ---- fp32 out
  std::vector<float> f32_out;
  {
    CK(cudaMemset(d_f32, 0xff, count * 4));  // NaN poison
    Kern<kOp, float, false>::launch(grid_a, d_a, d_b, d_f32, d_offs, E, m, n, k);
    CK(cudaDeviceSynchronize());
    f32_out = download(d_f32, count);
    double err2 = 0, err_max = 0;
    long long untouched_bad = 0, nan_bad = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!valid(i)) {
        untouched_bad += fbits(f32_out[i]) != 0xffffffffu;
        continue;
      }
      if (std::isnan(f32_out[i])) {
        ++nan_bad;
        continue;
      }
      const double d = std::fabs(static_cast<double>(f32_out[i]) - ref[i]);
      err2 += d * d;
      err_max = std::max(err_max, d);
    }
    const double rel = ref_f2 > 0 ? std::sqrt(err2 / ref_f2) : std::sqrt(err2);
    const bool ok = nan_bad == 0 && untouched_bad == 0 && rel <= 5e-5 && err_max <= 1e-3 * ref_max;
    std::snprintf(buf, sizeof buf, "relF=%.2e max_abs=%.2e (max|ref|=%.3g) nan=%lld touched_past_end=%lld",
                  rel, err_max, ref_max, nan_bad, untouched_bad);
    report(tag + " out=f32", ok, buf);

    rerun_same_bits(d_f32, f32_out, "out=f32");
  }

  // ---- bf16 out
  {
    CK(cudaMemset(d_bf, 0xff, count * 2));
    Kern<kOp, bf16, false>::launch(grid_a, d_a, d_b, d_bf, d_offs, E, m, n, k);
    CK(cudaDeviceSynchronize());
    const std::vector<bf16> o = download(d_bf, count);
    long long bad = 0, untouched_bad = 0, mismatch_f32 = 0;
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!valid(i)) {
        untouched_bad += o[i].bits != 0xffff;
        continue;
      }
      const float v = bf2f(o[i].bits);
      const double d = std::fabs(static_cast<double>(v) - ref[i]);
      const double tol = 1e-2 + 1e-2 * std::fabs(ref[i]);
      if (!(d <= tol)) ++bad;
      worst = std::max(worst, d / tol);
      mismatch_f32 += o[i].bits != f2bf(f32_out[i]);  // same accumulator, rounded once
    }
    const bool ok = bad == 0 && untouched_bad == 0 && mismatch_f32 == 0;
    std::snprintf(buf, sizeof buf, "violations=%lld worst err/tol=%.3f touched_past_end=%lld !=bf16(f32 run)=%lld",
                  bad, worst, untouched_bad, mismatch_f32);
    report(tag + " out=bf16", ok, buf);

    rerun_same_bits(d_bf, o, "out=bf16");
  }

  // ---- accumulate: old values random (rows past the end keep a known pattern)
  std::mt19937 rng(1234 + kOp);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  {
    std::vector<float> old(count);
    for (size_t i = 0; i < count; ++i) old[i] = valid(i) ? U(rng) : bf2f(0x7fc1);
    CK(cudaMemcpy(d_f32, old.data(), count * 4, cudaMemcpyHostToDevice));
    Kern<kOp, float, true>::launch(grid_a, d_a, d_b, d_f32, d_offs, E, m, n, k);
    CK(cudaDeviceSynchronize());
    const std::vector<float> o = download(d_f32, count);
    long long bad = 0;
    for (size_t i = 0; i < count; ++i) {
      float want;
      if (!valid(i) || empty_group_elem(i)) {
        want = old[i];  // untouched, not even rewritten
      } else {
        volatile float s = old[i] + f32_out[i];  // one fp32 rounding
        want = s;
      }
      bad += fbits(o[i]) != fbits(want);
    }
    std::snprintf(buf, sizeof buf, "bitwise != f32(old + acc): %lld", bad);
    report(tag + " out=f32 accumulate", bad == 0, buf);
  }
  {
    std::vector<bf16> old(count);
    for (size_t i = 0; i < count; ++i) old[i].bits = valid(i) ? f2bf(U(rng)) : 0x7fc1;
    CK(cudaMemcpy(d_bf, old.data(), count * 2, cudaMemcpyHostToDevice));
    Kern<kOp, bf16, true>::launch(grid_a, d_a, d_b, d_bf, d_offs, E, m, n, k);
    CK(cudaDeviceSynchronize());
    const std::vector<bf16> o = download(d_bf, count);
    long long bad = 0;
    for (size_t i = 0; i < count; ++i) {
      uint16_t want;
      if (!valid(i) || empty_group_elem(i)) {
        want = old[i].bits;
      } else {
        volatile float s = bf2f(old[i].bits) + f32_out[i];
        want = f2bf(s);
      }
      bad += o[i].bits != want;
    }
    std::snprintf(buf, sizeof buf, "bitwise != bf16(old + acc): %lld", bad);
    report(tag + " out=bf16 accumulate", bad == 0, buf);
  }
  CK(cudaFree(d_f32));
  CK(cudaFree(d_bf));
}

static void fill_bf16(std::vector<uint16_t>& v, std::mt19937& rng) {
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  for (auto& x : v) x = f2bf(U(rng));
}

static void run_case(const Case& c) {
  std::printf("case %s: E=%d M=%d N=%d K=%d offs=[", c.name.c_str(), c.E, c.m, c.n, c.k);
  for (int i = 0; i < c.E; ++i) std::printf("%s%d", i ? "," : "", c.offs[i]);
  std::printf("]\n");
  std::mt19937 rng(42);
  std::vector<uint16_t> x(static_cast<size_t>(c.m) * c.k), w(static_cast<size_t>(c.E) * c.n * c.k),
      g(static_cast<size_t>(c.m) * c.n);
  fill_bf16(x, rng);
  fill_bf16(w, rng);
  fill_bf16(g, rng);
  std::vector<int> grp(c.m, -1);
  for (int e = 0, r = 0; e < c.E; ++e)
    for (; r < c.offs[e]; ++r) grp[r] = e;

  bf16 *d_x, *d_w, *d_g;
  int *d_offs, *d_grp;
  CK(cudaMalloc(&d_x, x.size() * 2));
  CK(cudaMalloc(&d_w, w.size() * 2));
  CK(cudaMalloc(&d_g, g.size() * 2));
  CK(cudaMalloc(&d_offs, c.E * 4));
  CK(cudaMalloc(&d_grp, c.m * 4));
  CK(cudaMemcpy(d_x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_g, g.data(), g.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_offs, c.offs.data(), c.E * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_grp, grp.data(), c.m * 4, cudaMemcpyHostToDevice));

  run_op<0>(c, d_x, d_w, d_offs, d_grp, grp);
  run_op<1>(c, d_g, d_w, d_offs, d_grp, grp);
  run_op<2>(c, d_g, d_x, d_offs, d_grp, grp);

  CK(cudaFree(d_x));
  CK(cudaFree(d_w));
  CK(cudaFree(d_g));
  CK(cudaFree(d_offs));
  CK(cudaFree(d_grp));
}

// ---------------------------------------------------------------- timing
template <int kOp, typename OutT, bool kAcc>
static void time_op(const char* name, const bf16* a, const bf16* b, OutT* out, const int* offs,
                    int E, int m, int n, int k) {
  const int grid = g_sms * Kern<kOp, OutT, kAcc>::occupancy();
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  for (int i = 0; i < 2; ++i) Kern<kOp, OutT, kAcc>::launch(grid, a, b, out, offs, E, m, n, k);
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    CK(cudaEventRecord(t0));
    Kern<kOp, OutT, kAcc>::launch(grid, a, b, out, offs, E, m, n, k);
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float t;
    CK(cudaEventElapsedTime(&t, t0, t1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = 0.5 * (ms[4] + ms[5]);
  const double flops = 2.0 * m * static_cast<double>(n) * k;
  std::printf("TIME %-28s E=%d M=%d N=%d K=%d: median %.3f ms (min %.3f)  %.1f TFLOP/s  grid=%d\n",
              name, E, m, n, k, med, ms[0], flops / (med * 1e-3) / 1e12, grid);
  CK(cudaEventDestroy(t0));
  CK(cudaEventDestroy(t1));
}

static void perf() {
  const int E = 8, m = 65536, n = 4096, k = 2048;
  std::vector<int> offs(E);
  for (int e = 0; e < E; ++e) offs[e] = (e + 1) * (m / E);
  std::mt19937 rng(7);
  std::vector<uint16_t> x(static_cast<size_t>(m) * k), w(static_cast<size_t>(E) * n * k);
  fill_bf16(x, rng);
  fill_bf16(w, rng);
  bf16 *d_x, *d_w, *d_g, *d_y;
  float* d_dw;
  int* d_offs;
  CK(cudaMalloc(&d_x, x.size() * 2));
  CK(cudaMalloc(&d_w, w.size() * 2));
  CK(cudaMalloc(&d_g, static_cast<size_t>(m) * n * 2));
  CK(cudaMalloc(&d_y, static_cast<size_t>(m) * n * 2));
  CK(cudaMalloc(&d_dw, w.size() * 4));
  CK(cudaMalloc(&d_offs, E * 4));
  CK(cudaMemcpy(d_x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_w, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_offs, offs.data(), E * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_g, 0x3c, static_cast<size_t>(m) * n * 2));  // bf16 ~0.0115: finite values
  CK(cudaMemset(d_dw, 0, w.size() * 4));

  time_op<0, bf16, false>("fwd out=bf16", d_x, d_w, d_y, d_offs, E, m, n, k);
  time_op<1, bf16, false>("dgrad out=bf16", d_g, d_w, d_x, d_offs, E, m, n, k);
  time_op<2, float, true>("wgrad out=f32 accumulate", d_g, d_x, d_dw, d_offs, E, m, n, k);

  CK(cudaFree(d_x));
  CK(cudaFree(d_w));
  CK(cudaFree(d_g));
  CK(cudaFree(d_y));
  CK(cudaFree(d_dw));
  CK(cudaFree(d_offs));
}

int main(int argc, char** argv) {
  bool do_check = true, do_perf = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-perf")) do_perf = false;
    if (!std::strcmp(argv[i], "--perf-only")) do_check = false;
  }
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  g_sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs; tile %dx%dx%d, %d stages, %dx%d warps\n", prop.name, g_sms,
              GG_BM, GG_BN, GG_BK, GG_STAGES, GG_WM, GG_WN);

  if (do_check) {
    run_case({"single", 1, 128, 128, 128, {128}});
    run_case({"ragged", 4, 436, 264, 136, {0, 7, 136, 436}});
    {
      Case c{"balanced", 8, 4096, 1024, 512, {}};
      for (int e = 0; e < 8; ++e) c.offs.push_back((e + 1) * 512);
      run_case(c);
    }
    // All rows in group 1, groups 0 and 2 empty, rows 250..299 past offs[E-1].
    run_case({"one_group_tail", 3, 300, 136, 200, {0, 250, 250}});
    {
      // 16 groups of random sizes 0..400 (about a quarter empty), 37 rows past the end.
      Case c{"random16", 16, 0, 520, 264, {}};
      std::mt19937 r(99);
      int end = 0;
      for (int e = 0; e < 16; ++e) {
        end += (r() % 4 == 0) ? 0 : static_cast<int>(r() % 401);
        c.offs.push_back(end);
      }
      c.m = end + 37;
      run_case(c);
    }
  }
  if (do_perf) perf();
  std::printf("%s: %d failure(s)\n", g_fail ? "FAIL" : "PASS", g_fail);
  return g_fail ? 1 : 0;
}
