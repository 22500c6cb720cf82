// Label gpu: grouped_gemm fwd, dgrad and wgrad (bf16 / f32 out, accumulate fused and
// composed) against an FP64 reference on the same bf16 inputs, with TARGETS.md's budgets.
// Outputs are poisoned with NaN before every run; input rows past offs[E-1] hold NaN too, so
// a kernel that reads them into a reduction is caught, and output rows there must keep their
// poison. Every case runs on the planner's route and with the portable programs forced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <numeric>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "compile_worker.hpp"
#include "error.hpp"
#include "gemm_contract.h"
#include "gpu_util.hpp"
#include "grouped_gemm_ops.hpp"
#include "prebuild.hpp"
#include "registry.hpp"
#include "renderer.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using test::bf16_float;
using test::f32_bits;

using test::Dev;
using test::expect_bf16_close;
using test::parallel_for;
using test::widen;

enum class Sizes { balanced, skewed, one_empty, all_empty_but_one, lognormal, odd, all_empty };

struct Case {
  const char* name;
  int64_t e, m, n, k;  // m: rows in groups (offs[E-1]); the tensors have kTail more
  Sizes sizes;
};
constexpr int64_t kTail = 5;
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // gtest: the case's name, not its bytes

std::vector<int32_t> group_sizes(const Case& c) {
  std::vector<int64_t> s(size_t(c.e), 0);
  std::mt19937_64 rng(uint64_t(c.e * 7919 + c.m));
  switch (c.sizes) {
    case Sizes::balanced:
      for (int64_t i = 0; i < c.e; ++i) s[size_t(i)] = c.m * (i + 1) / c.e - c.m * i / c.e;
      break;
    case Sizes::skewed: {  // one group holds ~70 %, the others share the rest
      const int64_t big_i = c.e / 2, rest = c.e > 1 ? c.m - c.m * 7 / 10 : 0;
      for (int64_t i = 0, j = 0; i < c.e; ++i)
        if (i != big_i) s[size_t(i)] = rest * (j + 1) / (c.e - 1) - rest * j / (c.e - 1), ++j;
      s[size_t(big_i)] = c.m - rest;
      break;
    }
    case Sizes::one_empty: {
      for (int64_t i = 0; i < c.e; ++i) s[size_t(i)] = c.m * (i + 1) / c.e - c.m * i / c.e;
      if (c.e > 1) s[0] += s[1], s[1] = 0;
      break;
    }
    case Sizes::all_empty_but_one: s[size_t(c.e - 1) / 2] = c.m; break;
    case Sizes::lognormal: {
      std::lognormal_distribution<double> d(0.0, 1.0);
      std::vector<double> w(size_t(c.e));
      for (auto& x : w) x = d(rng);
      double total = std::accumulate(w.begin(), w.end(), 0.0), acc = 0;
      int64_t prev = 0;
      for (int64_t i = 0; i < c.e; ++i) {
        acc += w[size_t(i)];
        int64_t end = i + 1 == c.e ? c.m : int64_t(std::llround(double(c.m) * acc / total));
        s[size_t(i)] = end - prev, prev = end;
      }
      break;
    }
    case Sizes::odd: {  // 1, 7, 129, 0, 64, 65, 192, then the rest
      // 64 and 192 end a row block halfway, 65 one row later. E8_odd_untiled's last group
      // (642 rows) ends in a block whose second warpgroup idles.
      const int64_t pat[] = {1, 7, 129, 0, 64, 65, 192};
      constexpr int64_t kPat = int64_t(std::size(pat));
      int64_t used = 0;
      for (int64_t i = 0; i < c.e; ++i) s[size_t(i)] = pat[i % kPat], used += pat[i % kPat];
      s[size_t(c.e - 1)] += c.m - used;
      break;
    }
    case Sizes::all_empty: break;
  }
  std::vector<int32_t> offs(size_t(c.e));
  int64_t end = 0;
  for (int64_t i = 0; i < c.e; ++i) end += s[size_t(i)], offs[size_t(i)] = int32_t(end);
  return offs;
}

// Candidates of the portable programs (registry/grouped_gemm.json), by op and out kind.
const char* portable(const std::string& what) {
  static const std::map<std::string, const char*> names = {
      {"fwd", "fwd_portable_128x128"},
      {"dgrad", "dgrad_portable_128x128"},
      {"wgrad_bf16", "wgrad_bf16_portable_128x128"},
      {"wgrad_f32", "wgrad_f32_portable_128x128"},
      {"wgrad_acc_f32", "wgrad_acc_f32_fused_portable_128x128"},
      {"wgrad_acc_f32_composed", "wgrad_acc_f32_composed_portable"},
      {"wgrad_acc_bf16", "wgrad_acc_bf16_composed_portable"}};
  return names.at(what);
}

class GroupedGemm : public ::testing::TestWithParam<std::tuple<Case, bool>> {
 protected:
  static void SetUpTestSuite() {
    auto& d = Driver::instance();
    if (!d.available() || d.device_count() == 0) return;
    ctx_ = new test::PrimaryContext();
    cache_ = new test::TempDir();
    RuntimeOptions o;
    o.cache_dir = cache_->path().string();
    o.aot_dir = "";
    o.stand_ins = false;  // the routes' programs themselves (StandIn tests the stand-ins)
    rt_ = new Runtime(o);  // one runtime: each program compiles once for the whole suite
  }
  static void TearDownTestSuite() {
    delete rt_, delete cache_, delete ctx_;
    rt_ = nullptr, cache_ = nullptr, ctx_ = nullptr;
  }
  void SetUp() override { CAKE_SKIP_WITHOUT_GPU(); }
  // The route for `what`: the planner's, or the portable program forced.
  ops::OpOptions opt(const std::string& what) const {
    ops::OpOptions o;
    if (std::get<1>(GetParam())) o.candidate = portable(what);
    return o;
  }
  void expect_route(const Launch& l, const std::string& what) const {
    ASSERT_NE(l.plan(), nullptr);
    if (std::get<1>(GetParam())) EXPECT_EQ(l.plan()->route, portable(what)) << l.describe();
  }
  static inline test::PrimaryContext* ctx_ = nullptr;
  static inline test::TempDir* cache_ = nullptr;
  static inline Runtime* rt_ = nullptr;
};

TEST_P(GroupedGemm, MatchesFp64) {
  const Case c = std::get<0>(GetParam());
  const bool forced = std::get<1>(GetParam());
  const int64_t E = c.e, N = c.n, K = c.k, Mt = c.m + kTail;  // tensors' M
  auto offs_h = group_sizes(c);
  ASSERT_EQ(offs_h.back(), c.m);
  std::vector<int64_t> group(size_t(Mt), -1);  // each row's group, -1 past offs[E-1]
  for (int64_t e = 0, r = 0; e < E; ++e)
    for (; r < offs_h[size_t(e)]; ++r) group[size_t(r)] = e;

  const uint64_t seed = uint64_t(E * 1000003 + N * 1009 + K * 17 + c.m);
  auto xb = test::to_bf16(test::random_floats(size_t(Mt * K), seed));
  auto gb = test::to_bf16(test::random_floats(size_t(Mt * N), seed + 1));
  auto wb = test::to_bf16(test::random_floats(size_t(E * N * K), seed + 2, 0.5f));
  for (int64_t r = c.m; r < Mt; ++r) {  // rows past offs[E-1]: NaN, never to be read
    std::fill_n(xb.begin() + r * K, K, uint16_t(0x7fc0));
    std::fill_n(gb.begin() + r * N, N, uint16_t(0x7fc0));
  }
  const auto x = widen(xb), g = widen(gb), w = widen(wb);

  Dev X(DType::bf16, {Mt, K}), G(DType::bf16, {Mt, N}), W(DType::bf16, {E, N, K}), O(DType::i32, {E});
  X.upload(xb), G.upload(gb), W.upload(wb), O.upload(offs_h);

  // FP64 references over rows in groups.
  std::vector<double> yref(size_t(c.m * N)), dxref(size_t(c.m * K)), dwref(size_t(E * N * K), 0.0);
  parallel_for(c.m, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t e = group[size_t(r)];
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        const double* wr = &w[size_t((e * N + j) * K)];
        for (int64_t kk = 0; kk < K; ++kk) s += x[size_t(r * K + kk)] * wr[kk];
        yref[size_t(r * N + j)] = s;
        const double gv = g[size_t(r * N + j)];
        for (int64_t kk = 0; kk < K; ++kk) dxref[size_t(r * K + kk)] += gv * wr[kk];
      }
    }
  });
  parallel_for(E * N, [&](int64_t lo, int64_t hi) {
    for (int64_t ej = lo; ej < hi; ++ej) {
      const int64_t e = ej / N, j = ej % N;
      double* out = &dwref[size_t(ej * K)];
      for (int64_t r = e ? offs_h[size_t(e - 1)] : 0; r < offs_h[size_t(e)]; ++r) {
        const double gv = g[size_t(r * N + j)];
        for (int64_t kk = 0; kk < K; ++kk) out[kk] += gv * x[size_t(r * K + kk)];
      }
    }
  });

  // Runs `l` twice on a poisoned output: the same bits both times (deterministic).
  auto run_twice = [](const Launch& l, Dev& out) {
    out.poison();
    l.launch(nullptr);
    auto first = out.download<uint8_t>();
    out.poison();
    l.launch(nullptr);
    EXPECT_EQ(out.download<uint8_t>(), first) << "two runs differ";
    return first;
  };
  auto as16 = [](const std::vector<uint8_t>& b) {
    std::vector<uint16_t> v(b.size() / 2);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  auto as32 = [](const std::vector<uint8_t>& b) {
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };

  // fwd and dgrad: [Mt, cols] bf16 outputs whose rows past offs[E-1] keep their poison. A
  // grid of 3 SMs' worth of blocks gives the same bits (on the sm90 route each block takes
  // many tiles in turn, so a tile whose epilogue is held runs before an idle warpgroup; no
  // case here is long enough to split, the SplitTail tests cover that).
  auto check_rows = [&](const std::string& what, int64_t cols, const std::vector<double>& ref,
                        const std::function<Launch(const DLTensor&, int)>& prepare) {
    SCOPED_TRACE(what);
    Dev out(DType::bf16, {Mt, cols});
    auto l = prepare(out.dl, 0);
    expect_route(l, what);
    const auto bits = run_twice(l, out);
    auto got = as16(bits);
    expect_bf16_close(got, ref, size_t(c.m * cols), what.c_str());
    for (size_t i = size_t(c.m * cols); i < got.size(); ++i)
      ASSERT_EQ(got[i], 0xffff) << what << " written past offs[E-1] at " << i;
    auto capped = prepare(out.dl, 3);
    out.poison();
    capped.launch(nullptr);
    EXPECT_EQ(out.download<uint8_t>(), bits) << what << ": bits depend on the grid (max_sms 3)";
  };
  auto capped_opt = [&](const std::string& what, int max_sms) {
    ops::OpOptions o = opt(what);
    o.max_sms = max_sms;
    return o;
  };
  check_rows("fwd", N, yref, [&](const DLTensor& y, int max_sms) {
    return ops::prepare_grouped_gemm_fwd(*rt_, y, X.dl, W.dl, O.dl, capped_opt("fwd", max_sms));
  });
  check_rows("dgrad", K, dxref, [&](const DLTensor& dx, int max_sms) {
    return ops::prepare_grouped_gemm_dgrad(*rt_, dx, G.dl, W.dl, O.dl, capped_opt("dgrad", max_sms));
  });
  // wgrad: bf16 and f32 out; empty groups are zeros.
  Dev DWb(DType::bf16, {E, N, K}), DWf(DType::f32, {E, N, K});
  std::vector<uint16_t> dwb;
  std::vector<float> dwf;
  {
    SCOPED_TRACE("wgrad bf16");
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, DWb.dl, G.dl, X.dl, O.dl, false, opt("wgrad_bf16"));
    expect_route(l, "wgrad_bf16");
    dwb = as16(run_twice(l, DWb));
    expect_bf16_close(dwb, dwref, dwref.size(), "dw (bf16)");
  }
  {
    SCOPED_TRACE("wgrad f32");
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, DWf.dl, G.dl, X.dl, O.dl, false, opt("wgrad_f32"));
    expect_route(l, "wgrad_f32");
    dwf = as32(run_twice(l, DWf));
    test::expect_f32_close(dwf, dwref, "dw (f32)");
  }
  {
    // A grid of 3 SMs' worth of blocks walks every tile through far fewer CTAs: same bits.
    SCOPED_TRACE("wgrad f32, max_sms 3");
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, DWf.dl, G.dl, X.dl, O.dl, false, capped_opt("wgrad_f32", 3));
    DWf.poison();
    l.launch(nullptr);
    auto again = as32(DWf.download<uint8_t>());
    ASSERT_EQ(again.size(), dwf.size());
    EXPECT_EQ(std::memcmp(again.data(), dwf.data(), dwf.size() * 4), 0) << "bits depend on the grid";
  }
  for (int64_t e = 0; e < E; ++e)
    if (offs_h[size_t(e)] == (e ? offs_h[size_t(e - 1)] : 0))
      for (int64_t i = e * N * K; i < (e + 1) * N * K; ++i) {
        ASSERT_EQ(dwf[size_t(i)], 0.0f) << "empty group " << e;
        ASSERT_EQ(dwb[size_t(i)] & 0x7fff, 0) << "empty group " << e;
      }

  // Accumulate into f32, fused and composed: bitwise fp32(out0 + dW) with dW the
  // overwriting f32 result of the same route family; an empty group leaves out[e] alone.
  auto out0 = test::random_floats(size_t(E * N * K), seed + 3, 4.0f);
  auto check_acc_f32 = [&](const std::string& what, const std::string& candidate, Accumulate want) {
    SCOPED_TRACE(what);
    Dev D(DType::f32, {E, N, K});
    ops::OpOptions o = opt("wgrad_acc_f32");
    if (!candidate.empty()) o.candidate = candidate;
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, O.dl, true, o);
    EXPECT_EQ(l.plan()->accumulate, want) << l.describe();
    D.upload(out0);
    l.launch(nullptr);
    EXPECT_EQ(test::accumulate_mismatches(D.download<float>(), out0, dwf, what), 0u) << l.describe();
  };
  check_acc_f32("accumulate f32 (planner's route)", "", Accumulate::fused);
  const bool hopper = Driver::instance().device(0).arch == *Arch::parse("sm_90a");
  check_acc_f32("accumulate f32 composed",
                forced ? portable("wgrad_acc_f32_composed")
                       : hopper ? "wgrad_acc_f32_composed_sm90" : "wgrad_acc_f32_composed_portable",
                Accumulate::composed);

  {  // Accumulate into bf16: composed only, out = bf16(out0 + bf16(dW)), one fp32 add.
    SCOPED_TRACE("accumulate bf16");
    auto out0b = test::to_bf16(test::random_floats(size_t(E * N * K), seed + 4, 4.0f));
    Dev D(DType::bf16, {E, N, K});
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, O.dl, true, opt("wgrad_acc_bf16"));
    expect_route(l, "wgrad_acc_bf16");
    EXPECT_EQ(l.plan()->accumulate, Accumulate::composed);
    EXPECT_EQ(l.scratch_bytes(), D.bytes());
    D.upload(out0b);
    l.launch(nullptr);
    auto got = D.download<uint16_t>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], test::bf16_bits(bf16_float(out0b[i]) + bf16_float(dwb[i]))) << i;
  }
}

const Case kCases[] = {
    {"E1_balanced", 1, 128, 64, 64, Sizes::balanced},
    {"E4_balanced", 4, 1024, 128, 256, Sizes::balanced},
    {"E8_skewed", 8, 2048, 256, 128, Sizes::skewed},
    {"E8_one_empty", 8, 1000, 64, 512, Sizes::one_empty},
    {"E32_all_empty_but_one", 32, 777, 128, 64, Sizes::all_empty_but_one},
    {"E32_lognormal", 32, 4096, 256, 256, Sizes::lognormal},
    {"E4_odd_smallest", 4, 137, 8, 8, Sizes::odd},
    {"E8_odd_untiled", 8, 1100, 520, 136, Sizes::odd},
    {"E4_large", 4, 4096, 512, 512, Sizes::balanced},
    {"E8_all_empty", 8, 0, 64, 64, Sizes::all_empty},
};

INSTANTIATE_TEST_SUITE_P(Cases, GroupedGemm, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_portable" : "_planned");
                         });

using GroupedGemmGpu = test::RuntimeTest<>;

// Random bf16 x [M, K], g [M, N], w [E, N, K] (seeds seed, seed + 1, seed + 2) and offs.
struct Operands {
  Operands(int64_t e, int64_t m, int64_t n, int64_t k, const std::vector<int32_t>& offs, uint64_t seed)
      : X(DType::bf16, {m, k}), G(DType::bf16, {m, n}), W(DType::bf16, {e, n, k}), O(DType::i32, {e}) {
    X.upload(test::to_bf16(test::random_floats(size_t(m * k), seed)));
    G.upload(test::to_bf16(test::random_floats(size_t(m * n), seed + 1)));
    W.upload(test::to_bf16(test::random_floats(size_t(e * n * k), seed + 2)));
    O.upload(offs);
  }
  Dev X, G, W, O;
};

// dW [E, N, K] in FP64 of the operands' G and X over the groups of `offs`.
std::vector<double> wgrad_fp64(const Operands& in, const std::vector<int32_t>& offs, int64_t N, int64_t K) {
  const auto x = widen(in.X.download<uint16_t>()), g = widen(in.G.download<uint16_t>());
  const int64_t E = int64_t(offs.size());
  std::vector<double> ref(size_t(E * N * K), 0.0);
  parallel_for(E * N, [&](int64_t lo, int64_t hi) {
    for (int64_t ej = lo; ej < hi; ++ej) {
      const int64_t e = ej / N, j = ej % N;
      for (int64_t r = e ? offs[size_t(e - 1)] : 0; r < offs[size_t(e)]; ++r)
        for (int64_t kk = 0; kk < K; ++kk) ref[size_t(ej * K + kk)] += g[size_t(r * N + j)] * x[size_t(r * K + kk)];
    }
  });
  return ref;
}

// Slot indices, increasing, as ranges: "0-37", "0-9 12"; "" for none.
std::string slot_ranges(const std::vector<size_t>& slots) {
  std::string out;
  for (size_t i = 0; i < slots.size(); ++i) {
    size_t j = i;
    while (j + 1 < slots.size() && slots[j + 1] == slots[j] + 1) ++j;
    out += (out.empty() ? "" : " ") + std::to_string(slots[i]) + (j > i ? "-" + std::to_string(slots[j]) : "");
    i = j;
  }
  return out;
}

// Slots 0 .. n - 1 as slot_ranges gives them.
std::string first_slots(size_t n) {
  std::vector<size_t> slots(n);
  std::iota(slots.begin(), slots.end(), size_t(0));
  return slot_ranges(slots);
}

// Fills the launch's workspace with 0xff (a word no FP32 sum takes: NaNs the GPU makes are
// 0x7fffffff) before a run, so that written_slots sees what that run wrote.
void poison_workspace(const Launch& l) {
  CAKE_CU(cuMemsetD8(l.workspace_ptr(), 0xff, l.workspace_bytes()));
  CAKE_CU(cuCtxSynchronize());  // before a graph replays on its own stream
}

// The launch's workspace slots (one FP32 128 x 256 tile each, one per SM) that the run after
// poison_workspace wrote whole, as ranges, and after "partly" those it wrote in part. The
// parts of a split tile but its last pass their sums on whole through the slot of the tile's
// index in the split (0, 1, ...); the slots cannot tell how many parts a tile ran as.
std::string written_slots(const Launch& l) {
  const size_t words = 128 * 256;
  std::vector<uint32_t> ws(l.workspace_bytes() / 4);
  CAKE_CU(cuCtxSynchronize());
  CAKE_CU(cuMemcpyDtoH(ws.data(), l.workspace_ptr(), l.workspace_bytes()));
  std::vector<size_t> whole, part;
  for (size_t s = 0; s < ws.size() / words; ++s) {
    const auto first = ws.begin() + std::ptrdiff_t(s * words);
    const auto n = std::count_if(first, first + std::ptrdiff_t(words), [](uint32_t w) { return w != 0xffffffffu; });
    if (size_t(n) == words) whole.push_back(s);
    else if (n > 0) part.push_back(s);
  }
  return slot_ranges(whole) + (part.empty() ? "" : " partly " + slot_ranges(part));
}

// The tail split's bits: `prepare(max_sms)` prepared with every SM and with 3 (the split is
// planned for the device's SMs, not the grid's), each run twice and replayed once in a
// graph with `out` and the workspace poisoned first, all bitwise equal to the first run.
// Checks the launch owns `tiles_per_sm` FP32 128 x 256 tiles of workspace per SM (FP32 wgrad:
// 2, the split slots and the chain tiles after them) and that every run split `split_tiles`
// tiles: wrote workspace slots 0 .. split_tiles - 1 whole and no other (-1: not checked; no
// tile here is long enough to use a chain tile). Returns the first run's bytes.
std::vector<uint8_t> expect_split_bits_stable(Dev& out, int split_tiles, const std::function<Launch(int)>& prepare,
                                              size_t tiles_per_sm = 1) {
  const size_t sms = size_t(Driver::instance().device(0).sm_count);
  std::vector<uint8_t> first;
  for (int max_sms : {0, 3}) {
    SCOPED_TRACE("max_sms " + std::to_string(max_sms));
    Launch l = prepare(max_sms);
    EXPECT_NE(l.plan(), nullptr);
    if (l.plan()) EXPECT_NE(l.plan()->route.find("sm90"), std::string::npos) << l.describe();
    EXPECT_EQ(l.workspace_bytes(), tiles_per_sm * sms * 128 * 256 * 4) << l.describe();
    EXPECT_NE(l.describe().find("bytes of workspace"), std::string::npos) << l.describe();
    if (l.workspace_bytes() == 0) return first;
    auto expect_slots = [&](const std::string& run) {
      if (split_tiles >= 0)
        EXPECT_EQ(written_slots(l), first_slots(size_t(split_tiles))) << "workspace slots written, " << run;
    };
    for (int rep = 0; rep < 2; ++rep) {
      out.poison();
      poison_workspace(l);
      l.launch(nullptr);
      if (first.empty()) first = out.download<uint8_t>();
      EXPECT_EQ(out.download<uint8_t>(), first) << "run " << rep + 1;
      expect_slots("run " + std::to_string(rep + 1));
    }
    test::CapturedGraph graph([&](CUstream st) { l.launch(st); });
    out.poison();
    poison_workspace(l);
    graph.replay();
    EXPECT_EQ(out.download<uint8_t>(), first) << "graph replay";
    expect_slots("graph replay");
  }
  return first;
}

// Prepared launches replay in a captured graph: the same bits as a direct launch, for a
// one-stage route, a two-stage composed one and (both routes) the fused accumulate.
TEST_F(GroupedGemmGpu, ReplaysInACapturedGraph) {
  const int64_t E = 4, M = 300, N = 64, K = 128;
  Operands in(E, M, N, K, {50, 50, 210, 300}, 1);
  const Dev &X = in.X, &G = in.G, &W = in.W, &O = in.O;
  auto out0 = test::random_floats(size_t(E * N * K), 4);
  auto out0b = test::to_bf16(out0);
  for (bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "portable" : "planned");
    auto opt = [&](const char* cand) {
      ops::OpOptions o;
      if (forced) o.candidate = cand;
      return o;
    };
    Dev Y(DType::bf16, {M, N}), DW(DType::f32, {E, N, K}), DWB(DType::bf16, {E, N, K});
    auto fwd = ops::prepare_grouped_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, O.dl, opt(portable("fwd")));
    auto acc = ops::prepare_grouped_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, O.dl, true, opt(portable("wgrad_acc_f32")));
    auto accb = ops::prepare_grouped_gemm_wgrad(*rt_, DWB.dl, G.dl, X.dl, O.dl, true, opt(portable("wgrad_acc_bf16")));
    // Direct results.
    Y.poison();
    fwd.launch(nullptr);
    DW.upload(out0), DWB.upload(out0b);
    acc.launch(nullptr), accb.launch(nullptr);
    auto y1 = Y.download<uint16_t>();
    auto dw1 = DW.download<uint32_t>();
    auto dwb1 = DWB.download<uint16_t>();
    // The same from a graph.
    test::CapturedGraph graph([&](CUstream s) { fwd.launch(s), acc.launch(s), accb.launch(s); });
    Y.poison();
    DW.upload(out0), DWB.upload(out0b);
    graph.replay();
    EXPECT_EQ(Y.download<uint16_t>(), y1);
    EXPECT_EQ(DW.download<uint32_t>(), dw1);
    EXPECT_EQ(DWB.download<uint16_t>(), dwb1);
  }
}

// The portable program as PTX (cakec build --arch compute_80), compiled by the driver at load:
// the path a GPU newer than the local NVRTC takes. With the cubin withheld (no JIT, an aot/
// holding only the PTX) the forced portable candidate loads the PTX and gives the cubin's bits.
TEST_F(GroupedGemmGpu, PtxServesThePortableProgramWithTheCubinsBits) {
  const int64_t E = 4, M = 300, N = 64, K = 128;
  Operands in(E, M, N, K, {50, 50, 210, 300}, 5);
  ops::OpOptions o;
  o.candidate = portable("fwd");
  Dev Y(DType::bf16, {M, N});
  Y.poison();
  auto cubin = ops::prepare_grouped_gemm_fwd(*rt_, Y.dl, in.X.dl, in.W.dl, in.O.dl, o);
  ASSERT_FALSE(cubin.plan()->stages[0].build->arch.virt);
  cubin.launch(nullptr);
  const auto want = Y.download<uint16_t>();

  test::TempDir aot;
  PrebuildOptions p;
  p.archs = {*Arch::parse("compute_80")};
  p.out = aot.path();
  p.filter = std::regex("^" + cubin.plan()->stages[0].program->name + "$");
  auto sum = prebuild(*Registry::load_default(), Nvrtc::instance(), p);
  ASSERT_EQ(sum.built, 1) << "NVRTC is needed to make the PTX";
  RuntimeOptions ro;
  ro.aot_dir = aot.path().string();
  ro.cache_dir = "";
  ro.jit = false;
  ro.compile = [](const RenderedProgram&, const Arch&, const std::vector<std::string>&) -> CompiledBinary {
    throw Error("the test forbids compiling");
  };
  Runtime ptx_rt(ro);
  Y.poison();
  auto ptx = ops::prepare_grouped_gemm_fwd(ptx_rt, Y.dl, in.X.dl, in.W.dl, in.O.dl, o);
  EXPECT_EQ(ptx.plan()->stages[0].build->arch.str(), "compute_80");
  EXPECT_EQ(ptx.plan()->stages[0].served_by, ServedBy::aot);
  ptx.launch(nullptr);
  EXPECT_EQ(Y.download<uint16_t>(), want);
  EXPECT_EQ(ptx_rt.load_stats().aot_loads.load(), 1);
  EXPECT_EQ(ptx_rt.load_stats().compiles.load(), 0);
}

// The sm90 programs hand tiles out from two counters the launch owns, which each kernel must
// leave zero: repeated launches (direct, capped to 3 SMs so that most tiles are handed out
// through the counter, and graph replays) give the first launch's bits every time.
TEST_F(GroupedGemmGpu, TileCountersReturnToZeroBetweenLaunches) {
  if (Driver::instance().device(0).arch != *Arch::parse("sm_90a")) GTEST_SKIP() << "the sm90 programs need sm_90a";
  const int64_t E = 4, M = 3000, N = 512, K = 256;
  Operands in(E, M, N, K, {700, 700, 2100, 3000}, 11);
  const Dev &X = in.X, &G = in.G, &W = in.W, &O = in.O;
  for (int max_sms : {0, 3}) {
    SCOPED_TRACE("max_sms " + std::to_string(max_sms));
    ops::OpOptions o;
    o.max_sms = max_sms;
    Dev Y(DType::bf16, {M, N}), DW(DType::f32, {E, N, K});
    auto fwd = ops::prepare_grouped_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, O.dl, o);
    auto wg = ops::prepare_grouped_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, O.dl, false, o);
    // The two counters and the tail split's flags after them (1024 words).
    EXPECT_EQ(fwd.counter_bytes(), 4096u) << fwd.describe();
    EXPECT_NE(fwd.describe().find("4096 bytes of counters"), std::string::npos) << fwd.describe();
    EXPECT_EQ(wg.counter_bytes(), 4096u) << wg.describe();
    EXPECT_NE(wg.describe().find("4096 bytes of counters"), std::string::npos) << wg.describe();
    // Neither splits (4 k blocks in fwd's tiles, under 2 x 16; wgrad's groups under 2 x 4096
    // rows): their workspace keeps its poison.
    for (const Launch* l : {&fwd, &wg}) {
      ASSERT_GT(l->workspace_bytes(), 0u) << l->describe();
      poison_workspace(*l);
    }
    Y.poison(), DW.poison();
    fwd.launch(nullptr), wg.launch(nullptr);
    const auto y1 = Y.download<uint16_t>();
    const auto dw1 = DW.download<uint32_t>();
    EXPECT_EQ(written_slots(fwd), "") << "fwd split a tile";
    EXPECT_EQ(written_slots(wg), "") << "wgrad split a tile";
    for (int rep = 0; rep < 4; ++rep) {
      Y.poison(), DW.poison();
      fwd.launch(nullptr), wg.launch(nullptr);
      ASSERT_EQ(Y.download<uint16_t>(), y1) << "launch " << rep + 2;
      ASSERT_EQ(DW.download<uint32_t>(), dw1) << "launch " << rep + 2;
    }
    test::CapturedGraph graph([&](CUstream s) { fwd.launch(s), wg.launch(s); });
    for (int rep = 0; rep < 3; ++rep) {
      Y.poison(), DW.poison();
      graph.replay();
      ASSERT_EQ(Y.download<uint16_t>(), y1) << "replay " << rep + 1;
      ASSERT_EQ(DW.download<uint32_t>(), dw1) << "replay " << rep + 1;
    }
  }
}

// wgrad's last wave: groups of one size whose tiles do not fill a whole number of waves, and
// the smallest of uneven groups, are split along K. Each part adds its predecessor's FP32
// sum, in a fixed order: against FP64, the same bits run to run, with 3 SMs (the split is
// planned for the device's SM count, not the grid's) and in graph replays, and the fused
// accumulate is fp32(out + dW) of that same dW. The empty group (walked last) is zeros, or
// with accumulate untouched. Three cases: 12 tiles of one size (3 parts, fewer tiles than
// SMs), SMs + 10 tiles (3 parts after a full wave), 12 tiles of uneven groups (the smaller
// group's 6 in 2 parts). A part has at least 4096 rows (kMinSplitPartRows), so the groups
// are long and N x K small. Each run's workspace slots show that those tiles, and no others,
// split.
TEST_F(GroupedGemmGpu, WgradSplitTailMatchesFp64) {
  if (Driver::instance().device(0).arch != *Arch::parse("sm_90a")) GTEST_SKIP() << "the sm90 programs need sm_90a";
  const int sms = Driver::instance().device(0).sm_count;
  // offs: 3 groups, the middle one empty.
  auto check = [&](int64_t N, int64_t K, uint64_t seed, const std::vector<int32_t>& offs, int split_tiles) {
    SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K) + " groups " +
                 std::to_string(offs[0]) + ", 0, " + std::to_string(offs[2] - offs[1]));
    const int64_t E = 3, M = offs[2] + 3;  // 3 rows past offs[E-1]
    Operands in(E, M, N, K, offs, seed);
    const Dev &X = in.X, &G = in.G, &O = in.O;
    const auto ref = wgrad_fp64(in, offs, N, K);
    Dev DB(DType::bf16, {E, N, K}), DF(DType::f32, {E, N, K});
    std::vector<uint8_t> dw_f32_run;
    for (Dev* d : {&DB, &DF}) {
      const bool f32 = d == &DF;
      SCOPED_TRACE(f32 ? "f32" : "bf16");
      const auto first = expect_split_bits_stable(
          *d, split_tiles,
          [&](int max_sms) {
            ops::OpOptions o;
            o.max_sms = max_sms;
            return ops::prepare_grouped_gemm_wgrad(*rt_, d->dl, G.dl, X.dl, O.dl, false, o);
          },
          f32 ? 2 : 1);
      if (::testing::Test::HasFailure()) return;
      if (f32) {
        test::expect_f32_close(d->download<float>(), ref, "dw (f32)");
        dw_f32_run = first;
      } else {
        expect_bf16_close(d->download<uint16_t>(), ref, ref.size(), "dw (bf16)");
      }
      const auto out = d->download<uint8_t>();
      const size_t es = f32 ? 4 : 2;
      for (size_t i = size_t(N * K) * es; i < size_t(2 * N * K) * es; ++i)  // the empty group: zeros
        ASSERT_EQ(out[i], (i % es == es - 1) ? out[i] & 0x80 : 0) << "empty group at byte " << i;
    }
    std::vector<float> dw(size_t(E * N * K));
    std::memcpy(dw.data(), dw_f32_run.data(), dw_f32_run.size());
    auto out0 = test::random_floats(size_t(E * N * K), seed + 7, 4.0f);
    Dev DA(DType::f32, {E, N, K});
    auto acc = ops::prepare_grouped_gemm_wgrad(*rt_, DA.dl, G.dl, X.dl, O.dl, true, ops::OpOptions());
    EXPECT_EQ(acc.plan()->accumulate, Accumulate::fused) << acc.describe();
    DA.upload(out0);
    acc.launch(nullptr);
    ASSERT_EQ(test::accumulate_mismatches(DA.download<float>(), out0, dw, "accumulate"), 0u);
  };
  // The split tiles the workspace slots show (below), as counted here, need 36 SMs or more
  // (12 and 10-11 tiles in 3 parts in one wave).
  const bool few_sms = sms < 36;
  // Groups of one size (12288 and 12312 rows): 2 x 2 x 3 tiles, 3 parts of 64-65 k blocks.
  check(256, 520, 21, {12288, 12288, 24600}, few_sms ? -1 : 12);
  // Tiles 128 x 256: 2 groups x N / 128 x 1 = sms + 10 (sms even) or + 11; the last 10-11 run
  // as 3 parts each after a whole wave.
  const int64_t wide = 128 * ((int64_t(sms) + 11) / 2);
  check(wide, 64, 31, {12288, 12288, 24600}, few_sms ? -1 : int(2 * wide / 128 - sms));
  // Uneven groups (12000 and 8200 rows): the 6 tiles of the smaller one run as 2 parts of
  // 64-65 k blocks each.
  check(256, 520, 41, {12000, 12000, 20200}, few_sms ? -1 : 6);
}

// Groups longer than kChainRows (gemm_contract.h) sum in segments through a chain tile per
// CTA: FP32 dw within the FP32 budget against FP64, the same bits with 3 SMs (a CTA walks
// several tiles, its chain tile restarting with each) and, accumulating, bitwise
// fp32(out + dW). The planned route and the portable program. Groups of 40000 rows (three
// segments: 16384, 16384, 7232), none and 20001 (16384 and 3617, the last k tile one row).
// The portable program (no split) is checked exactly too: each group is the FP32 sum, in
// order, of its segments computed as groups of their own, ((s0 + s1) + s2) and s0 + s1.
TEST_F(GroupedGemmGpu, LongGroupsWgradSumInSegments) {
  const std::vector<int32_t> offs{40000, 40000, 60001};
  const int64_t E = 3, M = offs[2], N = 64, K = 1024;
  Operands in(E, M, N, K, offs, 71);
  const auto ref = wgrad_fp64(in, offs, N, K);
  const auto out0 = test::random_floats(size_t(E * N * K), 72, 4.0f);
  // The segments as groups (one run each): 0-2 of the first group, 3 empty, 4-5 of the last.
  const std::vector<int32_t> seg_offs{16384, 32768, 40000, 40000, 56384, 60001};
  Dev SO(DType::i32, {6}), SW(DType::f32, {6, N, K});
  SO.upload(seg_offs);
  {
    ops::OpOptions o;
    o.candidate = portable("wgrad_f32");
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, SW.dl, in.G.dl, in.X.dl, SO.dl, false, o);
    SW.poison();
    l.launch(nullptr);
  }
  const auto seg = SW.download<float>();
  for (const bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "portable" : "planned");
    auto options = [&](const char* what, int max_sms) {
      ops::OpOptions o;
      if (forced) o.candidate = portable(what);
      o.max_sms = max_sms;
      return o;
    };
    Dev DW(DType::f32, {E, N, K});
    std::vector<uint32_t> bits;
    for (const int max_sms : {0, 3}) {
      auto l = ops::prepare_grouped_gemm_wgrad(*rt_, DW.dl, in.G.dl, in.X.dl, in.O.dl, false, options("wgrad_f32", max_sms));
      DW.poison();
      l.launch(nullptr);
      const auto b = DW.download<uint32_t>();
      if (bits.empty()) bits = b;
      else EXPECT_EQ(b, bits) << "bits differ with 3 SMs; " << l.describe();
    }
    std::vector<float> dw(bits.size());
    std::memcpy(dw.data(), bits.data(), bits.size() * 4);
    test::expect_f32_close(dw, ref, "dw (f32)");
    if (forced) {
      const size_t nk = size_t(N * K);
      for (size_t i = 0; i < nk; ++i) {
        const float first = (seg[i] + seg[nk + i]) + seg[2 * nk + i], last = seg[4 * nk + i] + seg[5 * nk + i];
        ASSERT_EQ(f32_bits(dw[i]), f32_bits(first)) << "group 0 at " << i << ": not ((s0 + s1) + s2)";
        ASSERT_EQ(f32_bits(dw[2 * nk + i]), f32_bits(last)) << "group 2 at " << i << ": not s0 + s1";
      }
    }
    for (const int max_sms : {0, 3}) {
      Dev D(DType::f32, {E, N, K});
      auto acc = ops::prepare_grouped_gemm_wgrad(*rt_, D.dl, in.G.dl, in.X.dl, in.O.dl, true, options("wgrad_acc_f32", max_sms));
      D.upload(out0);
      acc.launch(nullptr);
      ASSERT_EQ(test::accumulate_mismatches(D.download<float>(), out0, dw, "accumulate, max_sms " + std::to_string(max_sms)), 0u);
    }
  }
}

// fwd and dgrad launches of a few waves split their last wave's tiles along K (fwd) or N
// (dgrad) as wgrad's tail splits. Groups of 1000 and 1300 rows (each ends in a masked row
// block; the 1300-row group's last has 20 rows, so its second warpgroup idles) around an
// empty one: 38 tiles, fewer than SMs, each run as parts of at least 16 k blocks
// (plan_split_rows): 2 over 32 k blocks (on 132 SMs; fwd and dgrad), 3 over 64 (fwd, K 4096).
// Against FP64, the same bits run to run, with 3 SMs (the split is planned for the device's
// SMs) and in a graph replay; the rows past offs[E-1] untouched; each run wrote the
// workspace tiles of the parts but the last, 0 .. 38 (parts - 1) - 1, as row_op_split plans.
TEST_F(GroupedGemmGpu, FwdDgradSplitTailMatchesFp64) {
  if (Driver::instance().device(0).arch != *Arch::parse("sm_90a")) GTEST_SKIP() << "the sm90 programs need sm_90a";
  const int sms = Driver::instance().device(0).sm_count;
  const std::vector<int32_t> offs{1000, 1000, 2300};
  const int64_t E = 3, rows = offs.back(), M = rows + 3;  // 3 rows past offs[E-1]
  struct Shape {
    bool fwd;
    int64_t n, k;
  };
  for (const Shape& shape : {Shape{true, 384, 2048}, Shape{false, 2048, 384}, Shape{true, 384, 4096}}) {
    const bool fwd = shape.fwd;
    const int64_t N = shape.n, K = shape.k, cols = fwd ? N : K;
    SCOPED_TRACE(std::string(fwd ? "fwd" : "dgrad") + " N " + std::to_string(N) + " K " + std::to_string(K));
    const gemm::TailSplit split = gemm::row_op_split(sms, 38, int((fwd ? K : N) / 64));
    if (sms == 132) EXPECT_EQ(split.parts, K == 4096 ? 3 : 2);
    Operands in(E, M, N, K, offs, fwd ? 51 : 61);
    const auto a = widen((fwd ? in.X : in.G).download<uint16_t>()), w = widen(in.W.download<uint16_t>());
    const int64_t red = fwd ? K : N;  // the reduction: over K (fwd) or N (dgrad)
    std::vector<double> ref(size_t(rows * cols), 0.0);
    parallel_for(rows, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t e = r < offs[0] ? 0 : 2;
        for (int64_t c = 0; c < cols; ++c) {
          double s = 0;
          for (int64_t i = 0; i < red; ++i)  // w[e] is [N, K]: fwd reads row c, dgrad column c
            s += a[size_t(r * red + i)] * (fwd ? w[size_t((e * N + c) * K + i)] : w[size_t((e * N + i) * K + c)]);
          ref[size_t(r * cols + c)] = s;
        }
      }
    });
    Dev Out(DType::bf16, {M, cols});
    expect_split_bits_stable(Out, split.tiles * (split.parts - 1), [&](int max_sms) {
      ops::OpOptions o;
      o.max_sms = max_sms;
      return fwd ? ops::prepare_grouped_gemm_fwd(*rt_, Out.dl, in.X.dl, in.W.dl, in.O.dl, o)
                 : ops::prepare_grouped_gemm_dgrad(*rt_, Out.dl, in.G.dl, in.W.dl, in.O.dl, o);
    });
    if (::testing::Test::HasFailure()) return;
    const auto got = Out.download<uint16_t>();
    expect_bf16_close(got, ref, ref.size(), fwd ? "y" : "dx");
    for (size_t i = size_t(rows * cols); i < got.size(); ++i)
      ASSERT_EQ(got[i], 0xffff) << "row " << i / size_t(cols) << " past offs[E-1] was written";
  }
}

// M = 0: fwd and dgrad launch nothing; wgrad zero-fills dw (a memset, graph-capturable), or
// with accumulate leaves it alone.
TEST_F(GroupedGemmGpu, NoRows) {
  const int64_t E = 4, N = 32, K = 64;
  Dev X(DType::bf16, {0, K}), G(DType::bf16, {0, N}), Y(DType::bf16, {0, N}), DX(DType::bf16, {0, K}),
      W(DType::bf16, {E, N, K}), O(DType::i32, {E});
  O.upload(std::vector<int32_t>(size_t(E), 0));
  EXPECT_EQ(ops::prepare_grouped_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, O.dl).stage_count(), 0u);
  EXPECT_EQ(ops::prepare_grouped_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, O.dl).stage_count(), 0u);
  for (DType t : {DType::f32, DType::bf16}) {
    Dev DW(t, {E, N, K});
    DW.poison();
    auto acc = ops::prepare_grouped_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, O.dl, true);
    EXPECT_EQ(acc.stage_count(), 0u);
    acc.launch(nullptr);
    for (auto b : DW.download<uint8_t>()) ASSERT_EQ(b, 0xff);  // untouched
    auto l = ops::prepare_grouped_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, O.dl, false);
    EXPECT_EQ(l.stage_count(), 1u);
    EXPECT_NE(l.describe().find("zero fill"), std::string::npos) << l.describe();
    l.launch(nullptr);
    for (auto b : DW.download<uint8_t>()) ASSERT_EQ(b, 0);
  }
}

// A bad argument on real memory: rejected, nothing written; a forced candidate that cannot
// serve (the sm90 one on another arch, or one that does not exist) is an error naming it.
TEST_F(GroupedGemmGpu, RejectedBeforeAnythingIsWritten) {
  const int64_t E = 2, M = 64, N = 32, K = 64;
  Dev X(DType::bf16, {M, K}), W(DType::bf16, {E, N, K}), O(DType::i32, {E}), Y(DType::bf16, {M, N}),
      Ybad(DType::bf16, {M, N + 8});
  O.upload(std::vector<int32_t>{20, 64});
  Y.poison(), Ybad.poison();
  test::expect_argument_error([&] { ops::prepare_grouped_gemm_fwd(*rt_, Ybad.dl, X.dl, W.dl, O.dl); }, "y", "differs from");
  test::expect_argument_error([&] { ops::prepare_grouped_gemm_fwd(*rt_, X.dl, X.dl, W.dl, O.dl); }, "y", "differs from");
  DLTensor yview = Y.dl;  // y two bytes into its buffer: not 16-byte aligned (and M - 1 rows, to fit)
  int64_t y_shape[2] = {M - 1, N};
  yview.shape = y_shape;
  yview.byte_offset = 2;
  DLTensor xview = X.dl;
  int64_t x_shape[2] = {M - 1, K};
  xview.shape = x_shape;
  test::expect_argument_error([&] { ops::prepare_grouped_gemm_fwd(*rt_, yview, xview, W.dl, O.dl); }, "y", "16-byte aligned");
  for (auto b : Ybad.download<uint8_t>()) ASSERT_EQ(b, 0xff);
  for (auto b : Y.download<uint8_t>()) ASSERT_EQ(b, 0xff);
  ops::OpOptions o;
  o.candidate = "no_such_candidate";
  try {
    ops::prepare_grouped_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, O.dl, o);
    ADD_FAILURE() << "an unknown candidate was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no candidate 'no_such_candidate'"), std::string::npos) << e.what();
  }
  for (auto b : Y.download<uint8_t>()) ASSERT_EQ(b, 0xff);
}

// A user registry whose one wgrad candidate runs `p` (a copy of a default program, renamed,
// its params changed) on sm_90a, for tests of what the binder refuses.
nlohmann::json user_wgrad_registry(const Registry& base, const Program& p, const std::string& from,
                                   const nlohmann::json& params) {
  const Build* b = base.build(from, *cake::Arch::parse("sm_90a"));
  EXPECT_NE(b, nullptr) << from;
  if (b == nullptr) return {};
  return {{"programs",
           {{{"name", p.name}, {"template", p.templ}, {"kernels", p.kernels}, {"archs", {"sm_90a"}}, {"params", params}}}},
          {"builds",
           {{{"program", p.name}, {"arch", "sm_90a"}, {"min_cuda", b->min_cuda.str()}, {"options", b->options},
             {"source_hash", render(p).source_hash}}}},
          {"routes",
           {{{"op", "grouped_gemm.wgrad"},
             {"candidates",
              {{{"name", "user_wgrad_bf16"},
                {"stages", {{{"program", p.name}, {"kernel", 0},
                             {"bind", {{"a", "g"}, {"b", "x"}, {"out", "dw"}, {"offs", "offs"}}}}}},
                {"window", {{"archs", {"sm_90a"}},
                            {"dtypes", {{"g", "bf16"}, {"x", "bf16"}, {"dw", "bf16"}, {"offs", "i32"}}}}}}}}}}}};
}

// Prepares a bf16 wgrad through `user` and expects it refused with an error naming `program`
// and saying `says`, before anything is launched or written.
void expect_user_wgrad_refused(const nlohmann::json& user, const std::string& program, const std::string& says) {
  test::TempDir dir;
  RuntimeOptions o;
  o.registry_files = {dir.write("user.json", user.dump()).string()};
  o.cache_dir = "";
  o.aot_dir = "";
  Runtime rt(o);
  if (rt.context_for(0).info->arch != *cake::Arch::parse("sm_90a")) GTEST_SKIP() << "the user program is sm_90a";
  const int64_t E = 2, M = 256, N = 64, K = 64;
  Operands ops_in(E, M, N, K, {128, 256}, 11);
  Dev DW(DType::bf16, {E, N, K});
  DW.poison();
  try {
    ops::prepare_grouped_gemm_wgrad(rt, DW.dl, ops_in.G.dl, ops_in.X.dl, ops_in.O.dl, false);
    ADD_FAILURE() << program << " was prepared";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(program), std::string::npos) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
  }
  for (auto v : DW.download<uint8_t>()) ASSERT_EQ(v, 0xff);
}

// The sm90 kernel's split contract: a program that asks for workspace must also own the
// 1024 counters its flags live in. A user registry that gives it less is refused when the
// launch is prepared, naming the program, before anything is launched or written.
TEST(GroupedGemmGpuUserRegistry, WorkspaceWithoutTheFlagCountersIsRefused) {
  CAKE_SKIP_WITHOUT_GPU();
  test::PrimaryContext ctx;
  auto base = Registry::load_default();
  const std::string from = "gg_sm90_wgrad_bf16_128x256_s4_r16_c1";
  Program p = *base->program(from);
  p.name = "user_wgrad_two_counters";
  nlohmann::json params = *p.params;
  params["counters"] = 2;  // the schedule's two, no flags
  expect_user_wgrad_refused(user_wgrad_registry(*base, p, from, params), p.name,
                            "workspace_per_sm needs \"counters\": 1024");
}

// "chain" (a tile's rows summed in segments through a chain tile) is for FP32 wgrad programs:
// on a BF16 one, sm90 or portable, the binder refuses it by name.
TEST(GroupedGemmGpuUserRegistry, ChainOnABf16WgradIsRefused) {
  CAKE_SKIP_WITHOUT_GPU();
  test::PrimaryContext ctx;
  auto base = Registry::load_default();
  for (const std::string from : {"gg_sm90_wgrad_bf16_128x256_s4_r16_c1", "gg_portable_wgrad_bf16_128x128x32_s4_w2x2"}) {
    SCOPED_TRACE(from);
    Program p = *base->program(from);
    p.name = "user_chained_" + from;
    nlohmann::json params = *p.params;
    params["chain"] = true;
    expect_user_wgrad_refused(user_wgrad_registry(*base, p, from, params), p.name,
                              "\"chain\" is for FP32 wgrad programs");
  }
}

// A first call with nothing compiled runs the stand-in of a Hopper program (fwd, dgrad, wgrad
// BF16 / FP32 / FP32 accumulate) while the program compiles; a later one runs the program, and
// so does the first call's Launch once the program is loaded. Both give the same bits on every case (the
// stand-ins of a runtime whose program compiles are refused serve every call).
TEST(GroupedGemmStandIn, SameBitsAsTheProgram) {
  CAKE_SKIP_WITHOUT_GPU();
  test::PrimaryContext ctx;
  const std::string fwd = "gg_sm90_fwd_128x256_s4_r16_c1", dgrad = "gg_sm90_dgrad_128x256_s4_r16_c1",
                    wgrad = "gg_sm90_wgrad_bf16_128x256_s4_r16_c1", wgrad32 = "gg_sm90_wgrad_f32_128x256_s4_r16_c1",
                    acc32 = "gg_sm90_wgrad_f32_acc_128x256_s4_r16_c1";
  test::TempDir cache;
  RuntimeOptions o;
  o.cache_dir = cache.path().string();
  o.aot_dir = "";
  // The fwd program compiles only once the first Launch has run on its stand-in: a background
  // compile that finished first (a slow module load under racecheck) would swap it in before
  // the test looked. The gate opens at the latest when the test ends.
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  RuntimeOptions gated = o;
  gated.compile = [opened, fwd](const RenderedProgram& p, const Arch& a, const std::vector<std::string>& opts) {
    if (p.name == fwd) opened.wait();
    return compile_isolated(p, a, opts);
  };
  Runtime rt(gated);  // stand-ins on, as by default
  struct Opener {
    std::promise<void>& gate;
    bool open = false;
    void operator()() {
      if (!open) gate.set_value(), open = true;
    }
    ~Opener() { (*this)(); }
  } open_gate{gate};  // destroyed before rt, whose destructor waits for the compile
  if (rt.context_for(0).info->arch != *Arch::parse("sm_90a")) GTEST_SKIP() << "the stand-ins are sm_90a programs";
  RuntimeOptions q = o;
  q.cache_dir = "";
  q.compile = [&](const RenderedProgram& p, const Arch& a, const std::vector<std::string>& opts) {
    if (p.name == fwd || p.name == dgrad || p.name == wgrad || p.name == wgrad32 || p.name == acc32)
      throw CompileError("refused by the test", p.name, a.str(), p.source_hash, opts, "");
    return compile_isolated(p, a, opts);
  };
  Runtime stand_ins_only(q);
  RuntimeOptions f = o;
  f.stand_ins = false;
  Runtime full(f);

  {  // the user's path: the first launch is the stand-in's, the one after the compile the program's
    const Case c{"E4_skewed", 4, 1000, 256, 192, Sizes::skewed};
    Operands in(c.e, c.m + kTail, c.n, c.k, group_sizes(c), 21);
    Dev Y(DType::bf16, {c.m + kTail, c.n});
    Launch first = ops::prepare_grouped_gemm_fwd(rt, Y.dl, in.X.dl, in.W.dl, in.O.dl);
    EXPECT_NE(first.describe().find("run by its stand-in " + fwd + "_compact while it compiles"), std::string::npos)
        << first.describe();
    EXPECT_EQ(rt.load_stats().stand_ins.load(), 1);
    Y.poison();
    first.launch(nullptr);
    const auto a = Y.download<uint8_t>();
    open_gate();
    rt.wait_background();
    EXPECT_EQ(rt.load_stats().swaps.load(), 1) << "the first Launch did not get the program";
    EXPECT_EQ(first.describe().find("stand-in"), std::string::npos) << first.describe();
    Y.poison();
    first.launch(nullptr);  // now the program's kernel
    EXPECT_EQ(Y.download<uint8_t>(), a) << "the first Launch's bits changed with its kernel";
    Launch later = ops::prepare_grouped_gemm_fwd(rt, Y.dl, in.X.dl, in.W.dl, in.O.dl);
    EXPECT_EQ(later.describe().find("stand-in"), std::string::npos) << later.describe();
    Y.poison();
    later.launch(nullptr);
    EXPECT_EQ(Y.download<uint8_t>(), a) << "the stand-in's bits differ from the program's";
    EXPECT_EQ(rt.load_stats().stand_ins.load(), 1);
  }

  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const int64_t Mt = c.m + kTail;
    Operands in(c.e, Mt, c.n, c.k, group_sizes(c), uint64_t(c.e * 31 + c.m));
    Dev Y(DType::bf16, {Mt, c.n}), DX(DType::bf16, {Mt, c.k}), DW(DType::bf16, {c.e, c.n, c.k}),
        DW32(DType::f32, {c.e, c.n, c.k});
    auto run = [](const Launch& l, Dev& out) {
      out.poison();
      l.launch(nullptr);
      return out.download<uint8_t>();
    };
    const auto out0 = test::random_floats(size_t(c.e * c.n * c.k), uint64_t(c.e + c.m), 4.0f);
    auto run_acc = [&](const Launch& l) {  // out += dW from the same out0
      DW32.upload(out0);
      l.launch(nullptr);
      return DW32.download<uint8_t>();
    };
    const Launch f_full = ops::prepare_grouped_gemm_fwd(full, Y.dl, in.X.dl, in.W.dl, in.O.dl);
    const Launch f_quick = ops::prepare_grouped_gemm_fwd(stand_ins_only, Y.dl, in.X.dl, in.W.dl, in.O.dl);
    const Launch d_full = ops::prepare_grouped_gemm_dgrad(full, DX.dl, in.G.dl, in.W.dl, in.O.dl);
    const Launch d_quick = ops::prepare_grouped_gemm_dgrad(stand_ins_only, DX.dl, in.G.dl, in.W.dl, in.O.dl);
    const Launch w_full = ops::prepare_grouped_gemm_wgrad(full, DW.dl, in.G.dl, in.X.dl, in.O.dl, false);
    const Launch w_quick = ops::prepare_grouped_gemm_wgrad(stand_ins_only, DW.dl, in.G.dl, in.X.dl, in.O.dl, false);
    const Launch w32_full = ops::prepare_grouped_gemm_wgrad(full, DW32.dl, in.G.dl, in.X.dl, in.O.dl, false);
    const Launch w32_quick = ops::prepare_grouped_gemm_wgrad(stand_ins_only, DW32.dl, in.G.dl, in.X.dl, in.O.dl, false);
    const Launch a32_full = ops::prepare_grouped_gemm_wgrad(full, DW32.dl, in.G.dl, in.X.dl, in.O.dl, true);
    const Launch a32_quick = ops::prepare_grouped_gemm_wgrad(stand_ins_only, DW32.dl, in.G.dl, in.X.dl, in.O.dl, true);
    if (c.m > 0) {
      EXPECT_NE(f_quick.describe().find("stand-in " + fwd + "_compact"), std::string::npos) << f_quick.describe();
      EXPECT_NE(d_quick.describe().find("stand-in " + dgrad + "_compact"), std::string::npos) << d_quick.describe();
      EXPECT_EQ(f_full.describe().find("stand-in"), std::string::npos) << f_full.describe();
      EXPECT_EQ(d_full.describe().find("stand-in"), std::string::npos) << d_full.describe();
      EXPECT_NE(w_quick.describe().find("stand-in " + wgrad + "_compact"), std::string::npos) << w_quick.describe();
      EXPECT_EQ(w_full.describe().find("stand-in"), std::string::npos) << w_full.describe();
      EXPECT_NE(w32_quick.describe().find("stand-in " + wgrad32 + "_compact"), std::string::npos) << w32_quick.describe();
      EXPECT_NE(a32_quick.describe().find("stand-in " + acc32 + "_compact"), std::string::npos) << a32_quick.describe();
      EXPECT_EQ(a32_full.describe().find("stand-in"), std::string::npos) << a32_full.describe();
    }
    EXPECT_EQ(run(f_quick, Y), run(f_full, Y)) << "fwd";
    EXPECT_EQ(run(d_quick, DX), run(d_full, DX)) << "dgrad";
    EXPECT_EQ(run(w_quick, DW), run(w_full, DW)) << "wgrad";
    EXPECT_EQ(run(w32_quick, DW32), run(w32_full, DW32)) << "wgrad f32";
    EXPECT_EQ(run_acc(a32_quick), run_acc(a32_full)) << "wgrad f32 accumulate";
    if (c.m > 0) {  // the refused programs never arrive: their launches keep the stand-ins
      stand_ins_only.wait_background();
      EXPECT_NE(f_quick.describe().find("stand-in " + fwd + "_compact"), std::string::npos) << f_quick.describe();
      EXPECT_EQ(run(f_quick, Y), run(f_full, Y)) << "fwd, after the refused compile";
    }
  }
  EXPECT_EQ(stand_ins_only.load_stats().swaps.load(), 0);
}

}  // namespace
}  // namespace cake
