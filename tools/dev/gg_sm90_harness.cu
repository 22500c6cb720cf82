// Standalone check and timing of templates/sm90_grouped_gemm.cuh on the GPU machine, outside
// the runtime (tensor maps encoded here the way runtime/ops_grouped_gemm.cpp does):
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I templates -I tools/dev -I tools/cakec \
//        tools/dev/gg_sm90_harness.cu tools/cakec/nvml_reader.cpp -lcublas -ldl -o gg_sm90 && ./gg_sm90 [--bench]
// FP64 reference on the GPU, NaN-poisoned outputs, TARGETS.md budgets, determinism, accumulate
// bits, rows past offs[E-1] untouched; --bench times gate_up/down against a per-expert cuBLAS loop.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "sm90_grouped_gemm.cuh"

#include "cuda_check.hpp"
#include "nvml_reader.hpp"  // tools/cakec: clock and power through NVML

using cake::bf16;
using cake::gg::TmaDesc;
typedef CUresult (*EncodeFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                             const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                             CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeFn encode_fn;

static TmaDesc make_map(const void* base, int rank, const uint64_t* dims, const uint32_t* box, int esize = 2) {
  cuuint64_t gdim[3], gstride[2];
  cuuint32_t bx[3], es[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) gdim[i] = dims[i], bx[i] = box[i];
  uint64_t s = esize;
  for (int i = 0; i + 1 < rank; ++i) s *= dims[i], gstride[i] = s;
  CUtensorMap m;
  CUresult r = encode_fn(&m, esize == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), gdim, gstride, bx, es,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::fprintf(stderr, "cuTensorMapEncodeTiled failed %d\n", int(r)), std::exit(3);
  TmaDesc d;
  std::memcpy(&d, &m, sizeof d);
  return d;
}

// GG_BAND: the raster the checks and the default variants use (the routes' bands of 16 row
// units; a negative value is a template variant's strips of -GG_BAND column blocks, see
// tools/dev/patches/).
#ifndef GG_BAND
#define GG_BAND 16
#endif
// GG_STAGES: the ring's stages in the checks and the default variants (the routes' 4; 3 is
// what the larger tiles fit, measured to see what a shallower ring costs the routes' tile).
#ifndef GG_STAGES
#define GG_STAGES 4
#endif
constexpr int kBM = 128, kStages = GG_STAGES, kBand = GG_BAND;
// Tile counters for the dynamic schedule (two zeroed ints; the kernel leaves them zero), and
// whether run_op passes them (else the round-robin schedule).
static int* g_sched = nullptr;
static bool g_dynamic = false;
// The tail split (dynamic schedule only): its workspace (a 128 x 256 FP32 slot per SM;
// its flags follow the two counters in g_sched, 1024 ints in all), whether run_op passes it,
// and the SM count the split is planned for (the device's, whatever the grid).
static float* g_split_ws = nullptr;
static bool g_split = false;
static int g_split_ctas = 0;
template <int kBN>
constexpr int smem_bytes() { return cake::gg::sm90_smem_bytes<kBM, kBN, kStages>(); }

// a: fwd x, dgrad g, wgrad g; b: fwd w, dgrad w, wgrad x
// kBMT = 256: tall fwd and dgrad tiles (tools/dev/patches/sm90_tall_tiles.patch); A's box stays 128 rows.
// kBMT = 192: three consumers (tools/dev/patches/sm90_three_consumers.patch); A's box is 192 rows, 512 threads.
template <int kOp, typename OutT, bool kAcc, int kBN, int kBandT = kBand, int kStagesT = kStages, int kCl = 1,
          int kBMT = kBM>
void run_op(const bf16* a, const bf16* b, OutT* out, const int* offs, int E, int M, int N, int K, int sms,
            cudaStream_t st = 0) {
  TmaDesc ta, tb, to;
  {
    const int es = sizeof(OutT);
    if (kOp == 2) {
      uint64_t d[3] = {uint64_t(K), uint64_t(N), uint64_t(E)};
      uint32_t bx[3] = {uint32_t(128 / es), 64, 1};
      to = make_map(out, 3, d, bx, es);
    } else {
      uint64_t d[2] = {uint64_t(kOp == 0 ? N : K), uint64_t(M)};
      uint32_t bx[2] = {uint32_t(128 / es), 64};
      to = make_map(out, 2, d, bx, es);
    }
  }
  if (kOp == 0) {
    uint64_t da[2] = {uint64_t(K), uint64_t(M)}, db[3] = {uint64_t(K), uint64_t(N), uint64_t(E)};
    uint32_t ba[2] = {64, kBMT == 192 ? 192u : kBM}, bb[3] = {64, kBN / kCl, 1};
    ta = make_map(a, 2, da, ba), tb = make_map(b, 3, db, bb);
  } else if (kOp == 1) {
    uint64_t da[2] = {uint64_t(N), uint64_t(M)}, db[3] = {uint64_t(K), uint64_t(N), uint64_t(E)};
    uint32_t ba[2] = {64, kBMT == 192 ? 192u : kBM}, bb[3] = {64, 64, 1};
    ta = make_map(a, 2, da, ba), tb = make_map(b, 3, db, bb);
  } else {
    uint64_t da[2] = {uint64_t(N), uint64_t(M)}, db[2] = {uint64_t(K), uint64_t(M)};
    uint32_t ba[2] = {64, 64}, bb[2] = {64, 64};
    ta = make_map(a, 2, da, ba), tb = make_map(b, 2, db, bb);
  }
  auto kern = cake::gg::sm90_grouped_gemm<kOp, OutT, kAcc, kBMT, kBN, kStagesT, kBandT, kCl>;
  constexpr int kSmem = cake::gg::sm90_smem_bytes<kBMT, kBN, kStagesT>();
  static bool attr = false;
  if (!attr) {
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    attr = true;
  }
  int* sched = g_dynamic ? g_sched : nullptr;
  float* split_ws = g_dynamic && g_split ? g_split_ws : nullptr;
  void* args[] = {&ta, &tb, &to, &out, &offs, &sched, &E, &M, &N, &K, &split_ws, &g_split_ctas};
  CK(cudaLaunchKernel((const void*)kern, dim3(sms / kCl * kCl), dim3(kBMT == 192 ? 512 : 384), args, kSmem, st));
  CK(cudaGetLastError());
}

__global__ void ref_kernel(int op, const bf16* a, const bf16* b, double* ref, const int* offs, int E, int M, int N,
                           int K) {
  // C dims per op: fwd [M,N], dgrad [M,K], wgrad [E,N,K]
  long long rows = op == 2 ? (long long)E * N : M;
  int cols = op == 0 ? N : K;
  long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (idx >= rows * cols) return;
  long long r = idx / cols;
  int c = idx % cols;
  auto f = [](bf16 v) { return (double)cake::to_f32(v); };
  double s = 0;
  if (op == 2) {
    int e = r / N, nn = r % N;
    int s0 = e ? offs[e - 1] : 0, s1 = offs[e];
    for (int i = s0; i < s1; ++i) s += f(a[(long long)i * N + nn]) * f(b[(long long)i * K + c]);
  } else {
    int e = 0;
    while (e < E && r >= offs[e]) ++e;
    if (e == E) { ref[idx] = NAN; return; }  // past the end: must stay untouched
    if (op == 0)
      for (int kk = 0; kk < K; ++kk) s += f(a[r * K + kk]) * f(b[((long long)e * N + c) * K + kk]);
    else
      for (int nn = 0; nn < N; ++nn) s += f(a[r * N + nn]) * f(b[((long long)e * N + nn) * K + c]);
  }
  ref[idx] = s;
}

static std::vector<bf16> rand_bf16(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x.bits = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  }
  return v;
}
static float bf2f(bf16 v) { uint32_t b = uint32_t(v.bits) << 16; float f; std::memcpy(&f, &b, 4); return f; }

template <typename T>
T* dev_copy(const std::vector<T>& h) {
  T* d;
  CK(cudaMalloc(&d, std::max<size_t>(h.size(), 1) * sizeof(T)));
  if (!h.empty()) CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

static int failures = 0;

template <int kOp, typename OutT, bool kAcc, int kBN, int kCl = 1, int kBMT = kBM, int kStagesT = kStages>
void check_case(const char* name, int E, const std::vector<int>& sizes, int trailing, int N, int K, int sms) {
  std::mt19937 rng(1234 + E + N + K + kOp);
  std::vector<int> offs(E);
  int M = 0;
  for (int e = 0; e < E; ++e) M += sizes[e], offs[e] = M;
  M += trailing;
  size_t na = kOp == 0 ? (size_t)M * K : (size_t)M * N;
  size_t nb = kOp == 2 ? (size_t)M * K : (size_t)E * N * K;
  size_t rows = kOp == 2 ? (size_t)E * N : M;
  size_t cols = kOp == 0 ? N : K;
  auto ha = rand_bf16(na, rng), hb = rand_bf16(nb, rng);
  if (kOp == 2 && kAcc && sizes[0] > 0)  // group 0: dW == 0 exactly, so out + dW must keep subnormal outs
    for (size_t i = 0; i < (size_t)sizes[0] * N; ++i) ha[i].bits = 0;
  bf16 *a = dev_copy(ha), *b = dev_copy(hb);
  int* doffs = dev_copy(offs);
  double* ref;
  CK(cudaMalloc(&ref, rows * cols * 8));
  ref_kernel<<<(rows * cols + 255) / 256, 256>>>(kOp, a, b, ref, doffs, E, M, N, K);
  CK(cudaGetLastError());
  std::vector<double> href(rows * cols);
  CK(cudaMemcpy(href.data(), ref, rows * cols * 8, cudaMemcpyDeviceToHost));
  OutT* out;
  CK(cudaMalloc(&out, rows * cols * sizeof(OutT)));
  std::vector<OutT> init(rows * cols), r1(rows * cols), r2(rows * cols);
  // poison: NaN (or, for accumulate, random finite values that must be added to)
  for (size_t i = 0; i < init.size(); ++i) {
    if constexpr (sizeof(OutT) == 4) {
      init[i] = kAcc ? std::uniform_real_distribution<float>(-2, 2)(rng) : NAN;
      if (kAcc && i < (size_t)N * K && i % 3 == 0) init[i] = (i % 2 ? 1e-40f : -3e-39f);  // subnormal
      if (kAcc && i < (size_t)N * K && i % 3 == 1) init[i] = -0.0f;
    }
    else init[i].bits = 0x7FC1;
  }
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaMemcpy(out, init.data(), init.size() * sizeof(OutT), cudaMemcpyHostToDevice));
    run_op<kOp, OutT, kAcc, kBN, kBand, kStagesT, kCl, kBMT>(a, b, out, doffs, E, M, N, K, sms);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(rep ? r2.data() : r1.data(), out, init.size() * sizeof(OutT), cudaMemcpyDeviceToHost));
  }
  bool det = std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(OutT)) == 0;
  long bad = 0, untouched_bad = 0;
  double err2 = 0, ref2 = 0, maxerr = 0, maxref = 0;
  std::vector<float> plain;
  if constexpr (kAcc) {  // accumulate bits: out0 + dW (dW from the non-accumulate kernel), one fp32 rounding
    CK(cudaMemcpy(out, init.data(), init.size() * sizeof(OutT), cudaMemcpyHostToDevice));
    run_op<kOp, OutT, false, kBN, kBand, kStagesT, kCl, kBMT>(a, b, out, doffs, E, M, N, K, sms);
    CK(cudaDeviceSynchronize());
    plain.resize(rows * cols);
    CK(cudaMemcpy(plain.data(), out, plain.size() * 4, cudaMemcpyDeviceToHost));
  }
  for (size_t i = 0; i < r1.size(); ++i) {
    double o;
    if constexpr (sizeof(OutT) == 4) o = r1[i]; else o = bf2f(r1[i]);
    if (std::isnan(href[i])) {  // must be untouched
      if (std::memcmp(&r1[i], &init[i], sizeof(OutT)) != 0) ++untouched_bad;
      continue;
    }
    if constexpr (kAcc) {
      const size_t grp = i / ((size_t)N * K);
      float expect = sizes[grp] == 0 ? init[i] : init[i] + plain[i];
      if (std::memcmp(&expect, &r1[i], 4) != 0) ++bad;
      continue;
    }
    double rf = href[i], e = std::fabs(o - rf);
    if (!(e == e)) e = INFINITY;
    if constexpr (sizeof(OutT) == 2) {
      if (!(e <= 1e-2 + 1e-2 * std::fabs(rf))) ++bad;
    } else {
      err2 += e * e, ref2 += rf * rf, maxerr = std::max(maxerr, e), maxref = std::max(maxref, std::fabs(rf));
    }
  }
  bool ok = det && bad == 0 && untouched_bad == 0;
  if (sizeof(OutT) == 4 && !kAcc) ok = ok && std::sqrt(err2) <= 5e-5 * std::sqrt(ref2) && maxerr <= 1e-3 * maxref;
  std::printf("%s %-34s cl=%d dyn=%d grid=%d op=%d out=%s acc=%d bm=%d bn=%d E=%d M=%d N=%d K=%d det=%d bad=%ld untouched_bad=%ld relF=%.2e\n",
              ok ? "PASS" : "FAIL", name, kCl, int(g_dynamic), sms, kOp, sizeof(OutT) == 4 ? "f32" : "bf16", int(kAcc), kBMT, kBN, E, M, N, K, int(det),
              bad, untouched_bad, ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0);
  if (!ok) ++failures;
  cudaFree(a), cudaFree(b), cudaFree(doffs), cudaFree(ref), cudaFree(out);
}

template <int kOp, typename OutT, bool kAcc, int kBN, int kCl = 1, int kBMT = kBM, int kStagesT = kStages>
void check_all(int sms) {
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E1 square", 1, {128}, 0, 128, 128, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E4 odd sizes + empty", 4, {0, 7, 129, 300}, 0, 264, 136, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E3 one group + trailing rows", 3, {0, 333, 0}, 50, 520, 200, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E8 balanced", 8, {512, 512, 512, 512, 512, 512, 512, 512}, 0, 1024, 512, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E32 skewed", 32,
                                   {1, 2, 3, 900, 0, 65, 64, 63, 1, 1, 0, 0, 0, 5, 7, 9, 11, 13, 128, 256, 1,
                                    200, 0, 0, 3, 3, 3, 3, 77, 1, 0, 2},
                                   0, 384, 256, sms);
  // Few tiles of long groups: with the dynamic schedule wgrad splits the last ones along K
  // (groups of one size: 3 parts, fewer tiles than SMs; uneven groups: the smallest group's
  // tiles in 2 parts), a partial column tile included. Parts have at least kMinSplitPartRows
  // (4096) rows, so the groups are long.
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E3 split tail, one size", 3, {12300, 0, 12400}, 20, 384, 520, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E3 split tail, uneven", 3, {8200, 0, 12000}, 20, 384, 520, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E2 split tail, uneven", 2, {16384, 8200}, 0, 256, 256, sms);
  // fwd (K = 2048) and dgrad (N = 2048) of fewer tiles than SMs: with the dynamic schedule
  // every tile splits in 2 parts of 16 k blocks; masked row blocks (groups of 1000 and 1300
  // rows) among them.
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E3 fwd split tail", 3, {1000, 0, 1300}, 20, 384, 2048, sms);
  check_case<kOp, OutT, kAcc, kBN, kCl, kBMT, kStagesT>("E3 dgrad split tail", 3, {1000, 0, 1300}, 20, 2048, 384, sms);
}

// Tall tiles (tools/dev/patches/sm90_tall_tiles.patch): fwd and dgrad, 256 x 192 and 256 x 128.
static void check_tall(int grid) {
#ifdef GG_TALL
  check_all<0, bf16, false, 192, 1, 256, 3>(grid);
  check_all<0, bf16, false, 128, 1, 256, 4>(grid);
  check_all<1, bf16, false, 192, 1, 256, 3>(grid);
  check_all<1, bf16, false, 128, 1, 256, 4>(grid);
#else
  (void)grid;
#endif
}

// Three consumers (tools/dev/patches/sm90_three_consumers.patch): fwd and dgrad, 192 x 256, 3 stages.
static void check_three(int grid) {
#ifdef GG_THREE
  check_all<0, bf16, false, 256, 1, 192, 3>(grid);
  check_all<1, bf16, false, 256, 1, 192, 3>(grid);
  // Groups on either side of a 192-row block, and one of a single row.
  check_case<0, bf16, false, 256, 1, 192, 3>("E5 around 192 rows", 5, {191, 192, 193, 64, 65}, 0, 512, 256, grid);
  check_case<1, bf16, false, 256, 1, 192, 3>("E5 around 192 rows", 5, {191, 192, 193, 64, 65}, 0, 512, 256, grid);
  check_case<0, bf16, false, 256, 1, 192, 3>("E3 1000 / 1 / 2100", 3, {1000, 1, 2100}, 0, 256, 384, grid);
  check_case<1, bf16, false, 256, 1, 192, 3>("E3 1000 / 1 / 2100", 3, {1000, 1, 2100}, 0, 256, 384, grid);
#else
  (void)grid;
#endif
}

// ---- benchmark against a per-expert cuBLAS loop (same data; L2 flushed between calls)
// Median times of two contenders, timed alternately (same clocks and temperature for both).
static void time_pair(int iters, void (*f1)(void*), void (*f2)(void*), void* ctx, void* flush, size_t flush_bytes,
                      float& m1, float& m2, int op1, int op2, float* spread1 = nullptr) {
  std::vector<float> t1, t2;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  // GG_GAP_MS=t: the GPU idles t ms before each timed call, so that no call starts at the
  // clock the other contender left behind.
  static const int gap_ms = getenv("GG_GAP_MS") ? std::atoi(getenv("GG_GAP_MS")) : 0;
  for (int i = 0; i < 2 * (iters + 1); ++i) {
    const bool first = i % 2 == 0;
    static_cast<int*>(ctx)[0] = first ? op1 : op2;
    CK(cudaMemsetAsync(flush, i, flush_bytes, 0));
    if (gap_ms > 0) {
      CK(cudaStreamSynchronize(0));
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    CK(cudaEventRecord(a, 0));
    (first ? f1 : f2)(ctx);
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) (first ? t1 : t2).push_back(ms);
  }
  std::sort(t1.begin(), t1.end());
  std::sort(t2.begin(), t2.end());
  m1 = t1[t1.size() / 2], m2 = t2[t2.size() / 2];
  if (spread1) spread1[0] = t1.front(), spread1[1] = t1.back();
}

struct BenchCtx {
  int op, E, M, N, K, sms;
  std::vector<int> sizes;
  bf16 *x, *w, *g;
  void* out;
  int* offs;
  cublasHandle_t h;
};

static void run_cake(void* p) {
  auto& c = *static_cast<BenchCtx*>(p);
  // 4..7: ops 0..3 with clusters of 2 and bands of 8 row units (16 row blocks, as 16 units of
  // clusters of 1); 8..11: clusters of 2 and bands of 16 units. Both pass the counters: with
  // tools/dev/patches/sm90_cluster2_dynamic.patch applied they walk the dynamic schedule (no
  // tail split); the template as it is walks clusters of 2 round-robin. 12..15: ops 0..3 with
  // the dynamic tile schedule (wgrad: the tail split); 16..19: 128 x 192 tiles; 20, 21: wgrad
  // and wgrad_acc with the dynamic schedule, no split; 26, 27: fwd with tall tiles (256 x 192,
  // 3 stages; 256 x 128, 4 stages), 28, 29: dgrad with them (tools/dev/patches/
  // sm90_tall_tiles.patch, built with -DGG_TALL). GG_NO_SPLIT set: no timed variant splits.
  g_dynamic = c.op >= 4, g_split = (c.op < 20 || c.op >= 22) && !getenv("GG_NO_SPLIT");
  const int op = c.op >= 12 && c.op < 16 ? c.op - 12 : c.op == 20 || c.op == 21 ? c.op - 18 : c.op;
#ifdef GG_THREE
  // Built with -DGG_THREE, variants { and } (26, 28) are fwd and dgrad with 192 x 256 tiles and
  // three consumers, raster bands of 8 units of 192 rows (GG_TALL_BAND=16 for 16).
  if (op == 26 || op == 28) {
    static const bool band16 = getenv("GG_TALL_BAND") && std::atoi(getenv("GG_TALL_BAND")) == 16;
    if (op == 26 && band16) run_op<0, bf16, false, 256, 16, 3, 1, 192>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
    else if (op == 26) run_op<0, bf16, false, 256, 8, 3, 1, 192>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
    else if (band16) run_op<1, bf16, false, 256, 16, 3, 1, 192>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
    else run_op<1, bf16, false, 256, 8, 3, 1, 192>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
    return;
  }
  if (op == 27 || op == 29) {
    std::fprintf(stderr, "variants | and ~ do not exist in a -DGG_THREE build (only { and })\n");
    std::exit(2);
  }
#endif
  if (op >= 26) {
#ifdef GG_TALL
    // Raster bands of 8 units of 256 rows (GG_TALL_BAND=16 for 16): 2048 rows a band, as the
    // routes' 16 units of 128.
    static const bool band16 = getenv("GG_TALL_BAND") && std::atoi(getenv("GG_TALL_BAND")) == 16;
    auto tall = [&](auto band) {
      constexpr int kB = decltype(band)::value;
      if (op == 26) run_op<0, bf16, false, 192, kB, 3, 1, 256>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
      else if (op == 27) run_op<0, bf16, false, 128, kB, 4, 1, 256>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
      else if (op == 28) run_op<1, bf16, false, 192, kB, 3, 1, 256>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
      else run_op<1, bf16, false, 128, kB, 4, 1, 256>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
    };
    if (band16) tall(std::integral_constant<int, 16>{});
    else tall(std::integral_constant<int, 8>{});
#else
    std::fprintf(stderr, "variants { | } ~ need -DGG_TALL and tools/dev/patches/sm90_tall_tiles.patch\n");
    std::exit(2);
#endif
  }
  else if (op == 16) run_op<0, bf16, false, 192>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 17) run_op<1, bf16, false, 192>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 18) run_op<2, bf16, false, 192>(c.g, c.x, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 19) run_op<2, float, true, 192>(c.g, c.x, (float*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 0) run_op<0, bf16, false, 256>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 1) run_op<1, bf16, false, 256>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 2) run_op<2, bf16, false, 256>(c.g, c.x, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 3) run_op<2, float, true, 256>(c.g, c.x, (float*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 4) run_op<0, bf16, false, 256, 8, 4, 2>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 5) run_op<1, bf16, false, 256, 8, 4, 2>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 6) run_op<2, bf16, false, 256, 8, 4, 2>(c.g, c.x, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 7) run_op<2, float, true, 256, 8, 4, 2>(c.g, c.x, (float*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  // 8..11: the same with bands of 16 units.
  else if (op == 8) run_op<0, bf16, false, 256, 16, 4, 2>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 9) run_op<1, bf16, false, 256, 16, 4, 2>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 10) run_op<2, bf16, false, 256, 16, 4, 2>(c.g, c.x, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 11) run_op<2, float, true, 256, 16, 4, 2>(c.g, c.x, (float*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  // 22..25: fwd and dgrad with the dynamic schedule and raster bands of 8, then of 32.
  else if (op == 22) run_op<0, bf16, false, 256, 8>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 23) run_op<1, bf16, false, 256, 8>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else if (op == 24) run_op<0, bf16, false, 256, 32>(c.x, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
  else run_op<1, bf16, false, 256, 32>(c.g, c.w, (bf16*)c.out, c.offs, c.E, c.M, c.N, c.K, c.sms);
}
static void run_cublas(void* p) {
  auto& c = *static_cast<BenchCtx*>(p);
  float one = 1, zero = 0;
  long long row = 0;
  for (int e = 0; e < c.E; ++e) {
    int me = c.sizes[e];
    if (me == 0 && c.op < 2) { continue; }
    const bf16* we = c.w + (long long)e * c.N * c.K;
    // column-major view: row-major [r, c] == col-major [c, r]
    if (c.op == 0)  // Y[me,N] = X[me,K] W^T : col-major Y^T[N,me] = W[N,K] (colmajor K x N)^T ...
      cublasGemmEx(c.h, CUBLAS_OP_T, CUBLAS_OP_N, c.N, me, c.K, &one, we, CUDA_R_16BF, c.K, c.x + row * c.K, CUDA_R_16BF,
                   c.K, &zero, (bf16*)c.out + row * c.N, CUDA_R_16BF, c.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else if (c.op == 1)  // dX[me,K] = G[me,N] W[N,K]: col-major dX^T[K,me] = W^T(colmajor [K,N]) G^T([N,me])
      cublasGemmEx(c.h, CUBLAS_OP_N, CUBLAS_OP_N, c.K, me, c.N, &one, we, CUDA_R_16BF, c.K, c.g + row * c.N, CUDA_R_16BF,
                   c.N, &zero, (bf16*)c.out + row * c.K, CUDA_R_16BF, c.K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else  // dW[N,K] = G^T X: col-major dW^T[K,N] = X^T([K,me]) G([me,N])
      cublasGemmEx(c.h, CUBLAS_OP_N, CUBLAS_OP_T, c.K, c.N, me, &one, c.x + row * c.K, CUDA_R_16BF, c.K,
                   c.g + row * c.N, CUDA_R_16BF, c.N, c.op >= 3 ? &one : &zero,
                   c.op >= 3 ? (void*)((float*)c.out + (long long)e * c.N * c.K) : (void*)((bf16*)c.out + (long long)e * c.N * c.K),
                   c.op >= 3 ? CUDA_R_32F : CUDA_R_16BF, c.K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    row += me;
  }
}

// Whether `v` is in the comma-separated list of env var `name` (or of `fallback` when unset).
static bool listed(const char* name, int v, const char* fallback) {
  const char* l = getenv(name) ? getenv(name) : fallback;
  for (const char* p = l; *p;) {
    if (std::atoi(p) == v) return true;
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  return false;
}
// Group sizes as `cakec bench grouped_gemm` makes them (grouped_gemm_cases.cpp).
static std::vector<int> bench_sizes(const char* dist, int m, int e) {
  std::vector<int> s;
  if (!std::strcmp(dist, "skewed")) {
    s.push_back(m / 2);
    for (int i = 1; i < e; ++i) s.push_back((m - m / 2) / (e - 1) + (i - 1 < (m - m / 2) % (e - 1)));
  } else if (!std::strcmp(dist, "lognormal")) {
    std::mt19937 rng(uint32_t(20261129 + e));
    std::normal_distribution<double> d(0.0, 1.0);
    std::vector<double> w(e);
    for (auto& v : w) v = std::exp(d(rng));
    double sum = 0;
    for (double v : w) sum += v;
    std::vector<std::pair<double, int>> frac;
    int given = 0;
    for (int i = 0; i < e; ++i) {
      const double exact = double(m) * w[i] / sum;
      s.push_back(int(std::floor(exact)));
      given += s.back();
      frac.push_back({exact - s.back(), i});
    }
    std::sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t i = 0; given < m; ++i, ++given) ++s[frac[i % frac.size()].second];
  } else {
    s.assign(e, m / e);
  }
  return s;
}

// Random bf16 from a hash of the index, made on the device (host generation of 10^9 values
// took longer than the timings): uniform in [-1, 1), or with `gauss` standard normal
// (Box-Muller), as torch.randn and `cakec bench` draw.
__device__ unsigned mix(unsigned x) {
  x ^= x >> 15, x *= 2246822519u, x ^= x >> 13, x *= 3266489917u, x ^= x >> 16;
  return x;
}
__global__ void fill_random(bf16* p, size_t n, unsigned seed, bool gauss) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const unsigned x = mix(unsigned(i) * 2654435761u ^ unsigned(i >> 32) * 40503u ^ seed * 2246822519u);
    const float u = float(x >> 8) * (1.0f / 16777216.0f);
    float v = 2.0f * u - 1.0f;
    if (gauss) {
      const float u2 = (float(mix(x ^ 0x9e3779b9u) >> 8) + 0.5f) * (1.0f / 16777216.0f);
      v = sqrtf(-2.0f * logf(u2)) * cospif(2.0f * u);
    }
    p[i] = cake::from_f32<bf16>(v);
  }
}
static bf16* dev_random(size_t n, unsigned seed) {
  bf16* d;
  CK(cudaMalloc(&d, n * sizeof(bf16)));
  fill_random<<<1024, 256>>>(d, n, seed, getenv("GG_GAUSS") && std::atoi(getenv("GG_GAUSS")));
  CK(cudaGetLastError());
  return d;
}

// One contender alone for `ms` milliseconds, calls back to back (no flush), with NVML read
// every 2 ms from a host thread. Timing and means leave out the first quarter (the clock
// settles); the clock is also printed in windows from the phase's start, to show how long the
// previous contender's clock lasts.
static void solo_phase(BenchCtx& c, int op, bool cublas, int ms, double flops, const char* what) {
  static const cakec::Nvml nvml = [] {
    int dev = 0, domain = 0, bus = 0, slot = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, dev));
    CK(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, dev));
    CK(cudaDeviceGetAttribute(&slot, cudaDevAttrPciDeviceId, dev));
    return cakec::Nvml(domain, bus, slot);
  }();
  std::atomic<bool> stop{false};
  std::vector<double> clk, pw;
  const int edges[] = {0, 10, 20, 50, 100, 200, 500, 1000, 1 << 30};
  double win_sum[8] = {}, win_n[8] = {};
  int capped = 0, samples = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread sampler([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const long long t =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      unsigned v = 0;
      double w = 0;
      if (!nvml.read(v, w)) continue;
      for (int i = 0; i < 8; ++i)
        if (t >= edges[i] && t < edges[i + 1]) win_sum[i] += v, win_n[i] += 1;
      if (t < ms / 4) continue;
      clk.push_back(v), pw.push_back(w);
      capped += nvml.power_capped() == 1;
      ++samples;
    }
  });
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  c.op = op;
  int calls = 0;
  float timed_ms = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ms)) {
    const bool timed = std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(ms / 4);
    if (timed) CK(cudaEventRecord(a, 0));
    for (int i = 0; i < 5; ++i) (cublas ? run_cublas : run_cake)(&c);
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    if (timed) {
      float t;
      CK(cudaEventElapsedTime(&t, a, b));
      timed_ms += t, calls += 5;
    }
  }
  stop = true;
  sampler.join();
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / v.size();
  };
  const double per_call = timed_ms / std::max(calls, 1), tf = flops / per_call / 1e9, mhz = mean(clk);
  // flops per SM per clock against the dense bf16 4096 of an H100/H200 SM
  const double per_clk = mhz > 0 ? flops / (per_call * 1e-3) / (c.sms * mhz * 1e6) / 4096 : 0;
  std::printf("SOLO %-14s %7.3f ms %6.1f TFLOP/s  %6.0f MHz  %5.1f W  cap %3d/%-3d  %.3f of peak/clk  (%d calls)"
              "  MHz from start, 0-10/-20/-50/-100/-200/-500/-1000/rest ms:",
              what, per_call, tf, mhz, mean(pw), capped, samples, per_clk, calls);
  for (int w = 0; w < 8; ++w) std::printf(" %.0f", win_n[w] ? win_sum[w] / win_n[w] : 0.0);
  std::printf("\n");
}

// Every selected variant of a row alone, then the cuBLAS loop alone; two rounds.
static void solo(BenchCtx& c, const std::vector<int>& ops, int bop, int ms, double flops, const char* shape,
                 const char* dist, const char* const* names) {
  std::printf("SOLO row %s %s E=%d\n", shape, dist, c.E);
  for (int round = 0; round < 2; ++round) {
    for (int op : ops) solo_phase(c, op, false, ms, flops, names[op]);
    solo_phase(c, bop, true, ms, flops, "cublas_loop");
  }
  std::fflush(stdout);
}

static void bench(int sms) {
  cublasHandle_t h;
  cublasCreate(&h);
  void* flush;
  size_t flush_bytes = 256 << 20;
  CK(cudaMalloc(&flush, flush_bytes));
  struct Shape { const char* name; int N, K; };
  // GG_SHAPES (gate_up,down), GG_ES (8,32), GG_DIST (balanced,lognormal,skewed: a list), GG_REPS (10);
  // GG_SIZES=s0,s1,...: one case of exactly those group sizes (E their count, M their sum);
  // GG_GAUSS=1: normal operands instead of uniform ones.
  std::vector<int> custom;
  for (const char* p = getenv("GG_SIZES") ? getenv("GG_SIZES") : ""; *p;) {
    custom.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  const char* dists = getenv("GG_DIST") ? getenv("GG_DIST") : "balanced";
  int reps = getenv("GG_REPS") ? std::atoi(getenv("GG_REPS")) : 10;
  // GG_SOLO_MS=t: instead of timing in turn, run each contender alone back to back for t ms
  // (cake, cuBLAS, cake, cuBLAS) and read the SM clock and board power through NVML meanwhile.
  const int solo_ms = getenv("GG_SOLO_MS") ? std::atoi(getenv("GG_SOLO_MS")) : 0;
  for (const char* p = dists; *p;) {
    const char* e = std::strchr(p, ',');
    const std::string d(p, e ? e - p : std::strlen(p));
    if (d != "balanced" && d != "skewed" && d != "lognormal") reps = 0;
    p = e ? e + 1 : p + std::strlen(p);
  }
  if (reps < 1) {
    std::fprintf(stderr, "GG_REPS must be >= 1 and GG_DIST a list of balanced, skewed, lognormal\n");
    std::exit(2);
  }
  if (!custom.empty()) dists = "custom";
  for (const char* dist : {"balanced", "skewed", "lognormal", "custom"})
  for (Shape s : {Shape{"gate_up", 4096, 6144}, Shape{"down", 6144, 2048}}) {
    if (!std::strstr(dists, dist)) continue;
    if (getenv("GG_SHAPES") && !strstr(getenv("GG_SHAPES"), s.name)) continue;
    for (int E : {4, 8, 16, 32, 0}) {
      if (custom.empty() ? !listed("GG_ES", E, "8,32") : E != 0) continue;
      int M = 131072;
      std::vector<int> sizes = custom.empty() ? bench_sizes(dist, M, E) : custom;
      if (!custom.empty()) {
        E = int(custom.size()), M = 0;
        for (int v : custom) M += v;
      }
      BenchCtx c{0, E, M, s.N, s.K, sms, sizes, nullptr, nullptr, nullptr, nullptr, nullptr, h};
      c.x = dev_random((size_t)M * s.K, 1), c.w = dev_random((size_t)E * s.N * s.K, 2),
      c.g = dev_random((size_t)M * s.N, 3);
      std::vector<int> offs(E);
      for (int e = 0, acc = 0; e < E; ++e) offs[e] = acc += c.sizes[e];
      c.offs = dev_copy(offs);
      size_t out_bytes = std::max((size_t)M * std::max(s.N, s.K) * 2, (size_t)E * s.N * s.K * 4);
      CK(cudaMalloc(&c.out, out_bytes));
      CK(cudaMemset(c.out, 0, out_bytes));
      double flops = 2.0 * M * s.N * s.K;
      const char* names[] = {"fwd", "dgrad", "wgrad", "wgrad_acc_f32", "fwd_c2b8", "dgrad_c2b8", "wgrad_c2b8", "acc_c2b8",
                             "fwd_c2dyn", "dgrad_c2dyn", "wgrad_c2dyn", "acc_c2dyn", "fwd_dyn", "dgrad_dyn",
                             "wgrad_dyn", "acc_dyn", "fwd_192", "dgrad_192", "wgrad_192", "acc_192",
                             "wgrad_nosplit", "acc_nosplit", "fwd_dyn_b8", "dgrad_dyn_b8",
                             "fwd_dyn_b32", "dgrad_dyn_b32",
#ifdef GG_THREE
                             "fwd_192x256", "-", "dgrad_192x256", "-"};
#else
                             "fwd_256x192", "fwd_256x128", "dgrad_256x192", "dgrad_256x128"};
#endif
      std::vector<std::pair<int, int>> solo_ops;  // (cuBLAS baseline op, variant)
      for (int op = 0; op < 30; ++op) {
        if (getenv("GG_OPS") && !strchr(getenv("GG_OPS"), 'a' + op)) continue;
        const int bop = op < 4 ? op : op == 20 || op == 21 ? op - 18 : op >= 26 ? (op - 26) / 2 : op >= 22 ? (op - 22) % 2 : op % 4;
        if (solo_ms > 0) {  // collected, run after the loop
          solo_ops.push_back({bop, op});
          continue;
        }
        float tc, tb, spread[2];
        time_pair(reps, run_cake, run_cublas, &c, flush, flush_bytes, tc, tb, op, bop, spread);
        std::printf("BENCH %-8s %-9s E=%-3d %-14s cake %7.3f ms %6.1f TFLOP/s (min %.3f max %.3f) | cublas loop %7.3f ms "
                    "%6.1f TFLOP/s | %.3fx\n",
                    s.name, dist, E, names[op], tc, flops / tc / 1e9, spread[0], spread[1], tb, flops / tb / 1e9, tb / tc);
      }
      // Variants with the same baseline (the loop of the same op) share a solo row.
      std::sort(solo_ops.begin(), solo_ops.end());
      for (size_t i = 0; i < solo_ops.size();) {
        std::vector<int> ops;
        const int bop = solo_ops[i].first;
        for (; i < solo_ops.size() && solo_ops[i].first == bop; ++i) ops.push_back(solo_ops[i].second);
        solo(c, ops, bop, solo_ms, flops, s.name, dist, names);
      }
      cudaFree(c.x), cudaFree(c.w), cudaFree(c.g), cudaFree(c.offs), cudaFree(c.out);
    }
  }
}

int main(int argc, char** argv) {
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void**)&encode_fn, cudaEnableDefault, &q));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  {
    auto kern = cake::gg::sm90_grouped_gemm<0, bf16, false, kBM, 256, kStages, kBand, 2>;
    constexpr int kSmem = cake::gg::sm90_smem_bytes<kBM, 256, kStages>();
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(sms);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = kSmem;
    int clusters = -1;
    CK(cudaOccupancyMaxActiveClusters(&clusters, (void*)kern, &cfg));
    std::printf("max active 2-CTA clusters: %d (SMs %d)\n", clusters, sms);
  }
  CK(cudaMalloc(&g_sched, 1024 * sizeof(int)));
  CK(cudaMemset(g_sched, 0, 1024 * sizeof(int)));
  CK(cudaMalloc(&g_split_ws, size_t(sms) * 128 * 256 * sizeof(float)));
  g_split_ctas = sms;
  bool do_bench = argc > 1 && !std::strcmp(argv[1], "--bench");
  if (do_bench && getenv("GG_SKIP_CHECKS")) {  // timing (or profiling) only
    bench(sms);
    return 0;
  }
  check_all<0, bf16, false, 256>(sms);
  check_all<1, bf16, false, 256>(sms);
  check_all<2, bf16, false, 256>(sms);
  check_all<2, float, false, 256>(sms);
  check_all<2, float, true, 256>(sms);
  check_all<0, bf16, false, 128>(sms);
  check_all<2, float, false, 128>(sms);
  check_all<0, bf16, false, 192>(sms);
  check_all<1, bf16, false, 192>(sms);
  check_all<2, bf16, false, 192>(sms);
  check_all<2, float, false, 192>(sms);
  check_all<2, float, true, 192>(sms);
  check_all<0, bf16, false, 256, 2>(sms);
  check_all<1, bf16, false, 256, 2>(sms);
  check_all<2, bf16, false, 256, 2>(sms);
  check_all<2, float, true, 256, 2>(sms);
  check_all<0, bf16, false, 128, 2>(sms);
  check_all<2, float, false, 128, 2>(sms);
  check_tall(sms);
  check_three(sms);
  // The dynamic tile schedule: the same checks (two runs each, so the counters' reset is
  // exercised), with every SM and with 7, then the counters must read zero again.
  g_dynamic = true, g_split = true;
  for (int grid : {sms, 7}) {
    check_all<0, bf16, false, 256>(grid);
    check_all<1, bf16, false, 256>(grid);
    check_all<2, bf16, false, 256>(grid);
    check_all<2, float, true, 256>(grid);
    check_all<0, bf16, false, 192>(grid);
    check_all<1, bf16, false, 192>(grid);
    check_all<2, bf16, false, 192>(grid);
    check_all<2, float, true, 192>(grid);
    check_all<0, bf16, false, 256, 2>(grid);
    check_all<1, bf16, false, 256, 2>(grid);
    check_all<2, bf16, false, 256, 2>(grid);
    check_all<2, float, true, 256, 2>(grid);
    check_tall(grid);
    check_three(grid);
  }
  g_dynamic = false;
  {
    std::vector<int> h(1024);
    CK(cudaMemcpy(h.data(), g_sched, 1024 * sizeof(int), cudaMemcpyDeviceToHost));
    int nonzero = 0;
    for (int v : h) nonzero += v != 0;
    std::printf("%s dynamic schedule counters and split flags back to zero (%d of 1024 not)\n", nonzero ? "FAIL" : "PASS",
                nonzero);
    failures += nonzero != 0;
  }
  std::printf("%s: %d failures\n", failures ? "FAILED" : "ALL PASSED", failures);
  if (do_bench) bench(sms);
  return failures ? 1 : 0;
}
