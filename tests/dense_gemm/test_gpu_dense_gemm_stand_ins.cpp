// Label gpu: dense_gemm's Hopper stand-ins (the `_compact` programs a first call runs while
// its program compiles) give their programs' bits: fwd at each tile width (64, 128 and 256
// columns) for both weight layouts, dgrad, and wgrad accumulating into f32. A runtime whose
// compiles of the full programs are refused runs the stand-ins on every call.
#include <gtest/gtest.h>

#include "compile_worker.hpp"
#include "dense_gemm_ops.hpp"
#include "error.hpp"
#include "gpu_util.hpp"

namespace cake {
namespace {
using test::Dev;

std::vector<uint8_t> run(const Launch& l, Dev& out) {
  out.poison();
  l.launch(nullptr);
  return out.download<uint8_t>();
}

TEST(DenseGemmStandIn, SameBitsAsTheProgram) {
  CAKE_SKIP_WITHOUT_GPU();
  test::PrimaryContext ctx;
  if (Driver::instance().device(0).arch != *Arch::parse("sm_90a")) GTEST_SKIP() << "the stand-ins are sm_90a programs";
  test::TempDir cache;
  RuntimeOptions o;
  o.cache_dir = cache.path().string();
  o.aot_dir = "";
  RuntimeOptions q = o;
  q.cache_dir = "";
  q.compile = [](const RenderedProgram& p, const Arch& a, const std::vector<std::string>& opts) {
    if (p.name.rfind("dense_sm90_", 0) == 0 && p.name.find("_compact") == std::string::npos)
      throw CompileError("refused by the test", p.name, a.str(), p.source_hash, opts, "");
    return compile_isolated(p, a, opts);
  };
  Runtime quick(q);  // stand-ins on, as by default
  RuntimeOptions f = o;
  f.stand_ins = false;
  Runtime full(f);

  const int64_t T = 1000, K = 264;
  auto xb = test::to_bf16(test::random_floats(size_t(T * K), 31));
  Dev X(DType::bf16, {T, K});
  X.upload(xb);
  auto served_by_stand_in = [](const Launch& l) {
    EXPECT_NE(l.describe().find("_compact"), std::string::npos) << l.describe();
  };
  for (int64_t N : {40, 104, 200}) {
    SCOPED_TRACE("N " + std::to_string(N));
    auto wb = test::to_bf16(test::random_floats(size_t(N * K), uint64_t(N), 0.5f));
    auto gb = test::to_bf16(test::random_floats(size_t(T * N), uint64_t(N) + 1));
    Dev W(DType::bf16, {N, K}), WKN(DType::bf16, {K, N}), G(DType::bf16, {T, N}), Y(DType::bf16, {T, N});
    W.upload(wb), WKN.upload(wb), G.upload(gb);  // WKN: other values in the [K, N] layout, as good
    std::vector<int64_t> nk{N, K}, st{1, N};
    DLTensor wv = WKN.dl;  // the [N, K] view of the [K, N] storage
    wv.shape = nk.data(), wv.strides = st.data();
    for (const DLTensor* w : {&W.dl, &wv}) {
      SCOPED_TRACE(w == &wv ? "[K, N] weight" : "[N, K] weight");
      const Launch lq = ops::prepare_dense_gemm_fwd(quick, Y.dl, X.dl, *w);
      const Launch lf = ops::prepare_dense_gemm_fwd(full, Y.dl, X.dl, *w);
      served_by_stand_in(lq);
      EXPECT_EQ(run(lq, Y), run(lf, Y)) << "fwd";
    }
    if (N != 104) continue;
    Dev DX(DType::bf16, {T, K}), DW(DType::f32, {N, K});
    const Launch dq = ops::prepare_dense_gemm_dgrad(quick, DX.dl, G.dl, W.dl);
    served_by_stand_in(dq);
    EXPECT_EQ(run(dq, DX), run(ops::prepare_dense_gemm_dgrad(full, DX.dl, G.dl, W.dl), DX)) << "dgrad";
    const auto dw0 = test::random_floats(size_t(N * K), 7, 4.0f);
    auto run_acc = [&](const Launch& l) {
      DW.upload(dw0);
      l.launch(nullptr);
      return DW.download<uint8_t>();
    };
    const Launch aq = ops::prepare_dense_gemm_wgrad(quick, DW.dl, G.dl, X.dl, true);
    served_by_stand_in(aq);
    EXPECT_EQ(run_acc(aq), run_acc(ops::prepare_dense_gemm_wgrad(full, DW.dl, G.dl, X.dl, true))) << "wgrad f32 acc";
  }
}

}  // namespace
}  // namespace cake
