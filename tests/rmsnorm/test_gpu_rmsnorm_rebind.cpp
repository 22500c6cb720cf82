// Label gpu: a prepared rmsnorm launch bound to new tensors, checked (ops::rebind) and by
// address (ops::rebind_data): the bits of a fresh prepare, the old tensors untouched, and the
// refusals that leave the binding as it was.
#include <gtest/gtest.h>

#include "error.hpp"
#include "gpu_util.hpp"
#include "rmsnorm_mat.hpp"
#include "rmsnorm_ops.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using test::FreshRuntime;
using test::Mat;

// ops::rebind: a launch prepared on one set of tensors, bound to another of the same problem,
// gives the bits a launch prepared on the second set gives, writes nothing of the first, and
// refuses another problem (T, or an alignment the plan depends on) leaving its binding as it was.
TEST(RmsNormRebind, SameBitsAsAFreshPrepareAndRefusesAnotherProblem) {
  CAKE_SKIP_WITHOUT_GPU();
  FreshRuntime fresh;
  Runtime& rt = *fresh.rt;
  const int64_t T = 300, H = 4096;
  struct Set {
    Mat x{DType::bf16, T, H}, dy{DType::bf16, T, H}, y{DType::bf16, T, H}, dx{DType::bf16, T, H},
        rstd{DType::f32, T, 0}, dw{DType::bf16, H, 0};
    void fill(uint64_t seed) {
      x.upload(test::to_bf16(test::random_floats(size_t(T * H), seed)));
      dy.upload(test::to_bf16(test::random_floats(size_t(T * H), seed + 1)));
      y.poison(), dx.poison(), rstd.poison(), dw.poison();
    }
    ops::NamedTensors fwd() const { return {{"y", &y.dl}, {"rstd", &rstd.dl}, {"x", &x.dl}, {"w", &w->dl}}; }
    ops::NamedTensors bwd() const {
      return {{"dx", &dx.dl}, {"dw", &dw.dl}, {"dy", &dy.dl}, {"x", &x.dl}, {"rstd", &rstd.dl}, {"w", &w->dl}};
    }
    const Mat* w = nullptr;
  };
  Mat w(DType::bf16, H, 0);
  w.upload(test::to_bf16(test::random_floats(size_t(H), 7, 0.5f)));
  Set a, b, c;
  a.w = b.w = c.w = &w;
  a.fill(1), b.fill(2), c.fill(2);  // b and c hold the same inputs
  ops::OpOptions opt;
  opt.eps = 1e-6f;
  Launch fwd = ops::prepare(rt, "rmsnorm.fwd", a.fwd(), opt);
  Launch bwd = ops::prepare(rt, "rmsnorm.bwd", a.bwd());
  fwd.launch(nullptr), bwd.launch(nullptr);
  const auto a_y = a.y.download<uint16_t>(), a_dw = a.dw.download<uint16_t>();
  ops::rebind(fwd, b.fwd());
  ops::rebind(bwd, b.bwd());
  a.y.poison(), a.dw.poison();
  fwd.launch(nullptr), bwd.launch(nullptr);
  ops::prepare(rt, "rmsnorm.fwd", c.fwd(), opt).launch(nullptr);
  ops::prepare(rt, "rmsnorm.bwd", c.bwd()).launch(nullptr);
  EXPECT_EQ(b.y.download<uint16_t>(), c.y.download<uint16_t>());
  EXPECT_EQ(b.rstd.download<float>(), c.rstd.download<float>());
  EXPECT_EQ(b.dx.download<uint16_t>(), c.dx.download<uint16_t>());
  EXPECT_EQ(b.dw.download<uint16_t>(), c.dw.download<uint16_t>());
  EXPECT_NE(b.y.download<uint16_t>(), a_y);
  for (auto v : a.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "the rebound launch wrote the old y";
  for (auto v : a.dw.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "the rebound launch wrote the old dw";
  (void)a_dw;

  // Another T; x 16 bytes off its 256-byte alignment (the problem records alignments).
  Mat x_short(DType::bf16, T - 1, H), y_short(DType::bf16, T - 1, H), r_short(DType::f32, T - 1, 0);
  test::expect_argument_error([&] {
    ops::rebind(fwd, {{"y", &y_short.dl}, {"rstd", &r_short.dl}, {"x", &x_short.dl}, {"w", &w.dl}});
  }, "tensors", "prepare a launch for it");
  Mat big(DType::bf16, T + 1, H);
  DLTensor shifted = a.x.dl;
  shifted.data = big.dl.data;
  shifted.byte_offset = 16;
  test::expect_argument_error([&] {
    ops::rebind(fwd, {{"y", &a.y.dl}, {"rstd", &a.rstd.dl}, {"x", &shifted}, {"w", &w.dl}});
  }, "tensors", "another problem");
  test::expect_argument_error([&] { ops::rebind(fwd, {{"y", &a.y.dl}, {"x", &a.x.dl}, {"w", &w.dl}}); }, "rstd",
                              "missing");
  // Still bound to b: a launch now writes b's outputs again and leaves a's alone.
  b.y.poison();
  fwd.launch(nullptr);
  EXPECT_EQ(b.y.download<uint16_t>(), c.y.download<uint16_t>());
  for (auto v : a.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff);
  Launch moved = std::move(fwd);
  test::expect_argument_error([&] { ops::rebind(fwd, b.fwd()); }, "launch", "nothing to rebind");

  // External memory: the backward's scratch from the caller's block, the same bits.
  ops::OpOptions ext;
  ext.external_memory = true;
  Launch bwd_ext = ops::prepare(rt, "rmsnorm.bwd", b.bwd(), ext);
  ASSERT_GT(bwd_ext.memory_bytes(), 0u) << bwd_ext.describe();
  EXPECT_THROW(bwd_ext.launch(nullptr), Error);  // no memory given yet
  test::expect_argument_error([&] { ops::rebind(bwd_ext, b.bwd()); }, "memory", "null");
  DeviceBuffer small(bwd_ext.memory_bytes() / 2), block(bwd_ext.memory_bytes());
  test::expect_argument_error([&] { ops::rebind(bwd_ext, b.bwd(), small.get()); }, "memory", "past its allocation");
  test::expect_argument_error([&] { ops::rebind(bwd, b.bwd(), block.get()); }, "memory", "owns its memory");
  b.dx.poison(), b.dw.poison();
  ops::rebind(bwd_ext, b.bwd(), block.get());
  bwd_ext.launch(nullptr);
  EXPECT_EQ(b.dx.download<uint16_t>(), c.dx.download<uint16_t>());
  EXPECT_EQ(b.dw.download<uint16_t>(), c.dw.download<uint16_t>());
  EXPECT_THROW(ops::run(rt, "rmsnorm.bwd", b.bwd(), nullptr, ext), ArgumentError);
}


// ops::rebind_data: a launch bound to new tensors of the last checked bind's layout by their
// addresses alone gives the bits a fresh prepare gives; the checks it keeps (count, null,
// alignment, overlap, memory) refuse with the argument's name and leave the binding as it was.
TEST(RmsNormRebind, DataOnlySameBitsAndRefusals) {
  CAKE_SKIP_WITHOUT_GPU();
  FreshRuntime fresh;
  Runtime& rt = *fresh.rt;
  const int64_t T = 300, H = 4096;
  Mat w(DType::bf16, H, 0);
  w.upload(test::to_bf16(test::random_floats(size_t(H), 7, 0.5f)));
  struct Set {
    Mat x{DType::bf16, T, H}, dy{DType::bf16, T, H}, y{DType::bf16, T, H}, dx{DType::bf16, T, H},
        rstd{DType::f32, T, 0}, dw{DType::bf16, H, 0};
  } a, b, c;
  for (Set* s : {&a, &b, &c}) {
    const uint64_t seed = s == &a ? 1 : 2;  // b and c hold the same inputs
    s->x.upload(test::to_bf16(test::random_floats(size_t(T * H), seed)));
    s->dy.upload(test::to_bf16(test::random_floats(size_t(T * H), seed + 1)));
    s->y.poison(), s->dx.poison(), s->rstd.poison(), s->dw.poison();
  }
  auto fwd_of = [&](const Set& s) { return ops::NamedTensors{{"y", &s.y.dl}, {"rstd", &s.rstd.dl}, {"x", &s.x.dl}, {"w", &w.dl}}; };
  auto bwd_of = [&](const Set& s) {
    return ops::NamedTensors{{"dx", &s.dx.dl}, {"dw", &s.dw.dl}, {"dy", &s.dy.dl}, {"x", &s.x.dl}, {"rstd", &s.rstd.dl}, {"w", &w.dl}};
  };
  ops::OpOptions opt;
  opt.eps = 1e-6f;
  ops::OpOptions ext;
  ext.external_memory = true;
  Launch fwd = ops::prepare(rt, "rmsnorm.fwd", fwd_of(a), opt);
  Launch bwd = ops::prepare(rt, "rmsnorm.bwd", bwd_of(a), ext);
  ASSERT_GT(bwd.memory_bytes(), 0u) << bwd.describe();
  DeviceBuffer block(bwd.memory_bytes());
  const CUdeviceptr b_fwd[] = {b.y.buf.get(), b.rstd.buf.get(), b.x.buf.get(), w.buf.get()};
  const CUdeviceptr b_bwd[] = {b.dx.buf.get(), b.dw.buf.get(), b.dy.buf.get(), b.x.buf.get(), b.rstd.buf.get(), w.buf.get()};
  ops::rebind_data(fwd, b_fwd, 4);
  fwd.launch(nullptr);
  ops::rebind_data(bwd, b_bwd, 6, block.get());
  bwd.launch(nullptr);
  ops::prepare(rt, "rmsnorm.fwd", fwd_of(c), opt).launch(nullptr);
  ops::prepare(rt, "rmsnorm.bwd", bwd_of(c)).launch(nullptr);
  EXPECT_EQ(b.y.download<uint16_t>(), c.y.download<uint16_t>());
  EXPECT_EQ(b.rstd.download<float>(), c.rstd.download<float>());
  EXPECT_EQ(b.dx.download<uint16_t>(), c.dx.download<uint16_t>());
  EXPECT_EQ(b.dw.download<uint16_t>(), c.dw.download<uint16_t>());
  for (auto v : a.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "the launch wrote the old y";

  auto refused = [&](std::vector<CUdeviceptr> d, const char* arg, const char* what, CUdeviceptr memory = 0) {
    test::expect_argument_error([&] { ops::rebind_data(fwd, d.data(), d.size(), memory); }, arg, what);
  };
  refused({b.y.buf.get(), b.rstd.buf.get(), b.x.buf.get()}, "tensors", "had 4 tensors");
  refused({0, b.rstd.buf.get(), b.x.buf.get(), w.buf.get()}, "y", "null data pointer");
  refused({b.y.buf.get(), b.rstd.buf.get(), a.x.buf.get() + 16, w.buf.get()}, "x", "16-byte aligned");
  refused({b.y.buf.get(), b.rstd.buf.get(), ~CUdeviceptr(0) - 255, w.buf.get()}, "x", "past the end of the address space");
  refused({b.x.buf.get() + 256, b.rstd.buf.get(), b.x.buf.get(), w.buf.get()}, "y", "overlaps 'x'");
  // In place (y = x) is an op rebind checks, not one rebind_data keeps: prepare bound them apart.
  refused({b.x.buf.get(), b.rstd.buf.get(), b.x.buf.get(), w.buf.get()}, "y", "overlaps 'x'");
  refused({b.y.buf.get(), b.y.buf.get(), b.x.buf.get(), w.buf.get()}, "y", "overlaps 'rstd'");
  refused({b.y.buf.get(), b.rstd.buf.get(), b.x.buf.get(), w.buf.get()}, "memory", "takes none", block.get());
  test::expect_argument_error([&] { ops::rebind_data(bwd, b_bwd, 6); }, "memory", "null");
  test::expect_argument_error([&] { ops::rebind_data(bwd, b_bwd, 6, block.get() + 128); }, "memory", "256-byte");
  // Still bound to b.
  b.y.poison();
  fwd.launch(nullptr);
  EXPECT_EQ(b.y.download<uint16_t>(), c.y.download<uint16_t>());
  for (auto v : a.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff);
  // A checked rebind to another order of the same tensors: rebind_data follows that order.
  ops::rebind(fwd, {{"x", &a.x.dl}, {"w", &w.dl}, {"y", &a.y.dl}, {"rstd", &a.rstd.dl}});
  const CUdeviceptr b_reordered[] = {b.x.buf.get(), w.buf.get(), b.y.buf.get(), b.rstd.buf.get()};
  b.y.poison();
  ops::rebind_data(fwd, b_reordered, 4);
  fwd.launch(nullptr);
  EXPECT_EQ(b.y.download<uint16_t>(), c.y.download<uint16_t>());
  for (auto v : a.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff);
  Launch moved = std::move(fwd);
  test::expect_argument_error([&] { ops::rebind_data(fwd, b_fwd, 4); }, "launch", "nothing to rebind");
}

// An empty problem (T = 0) rebound by address: forward and backward write nothing (dw
// included: the op leaves it as it is), before and after the rebind.
TEST(RmsNormRebind, DataOnlyEmptyProblemWritesNothing) {
  CAKE_SKIP_WITHOUT_GPU();
  FreshRuntime fresh;
  Runtime& rt = *fresh.rt;
  const int64_t H = 4096;
  Mat w(DType::bf16, H, 0);
  w.upload(test::to_bf16(test::random_floats(size_t(H), 7, 0.5f)));
  struct Set {
    Mat x{DType::bf16, 0, H}, dy{DType::bf16, 0, H}, y{DType::bf16, 0, H}, dx{DType::bf16, 0, H},
        rstd{DType::f32, 0, 0}, dw{DType::bf16, H, 0};
  } a, b;
  auto fwd_of = [&](const Set& s) { return ops::NamedTensors{{"y", &s.y.dl}, {"rstd", &s.rstd.dl}, {"x", &s.x.dl}, {"w", &w.dl}}; };
  auto bwd_of = [&](const Set& s) {
    return ops::NamedTensors{{"dx", &s.dx.dl}, {"dw", &s.dw.dl}, {"dy", &s.dy.dl}, {"x", &s.x.dl}, {"rstd", &s.rstd.dl}, {"w", &w.dl}};
  };
  ops::OpOptions opt;
  opt.eps = 1e-6f;
  Launch fwd = ops::prepare(rt, "rmsnorm.fwd", fwd_of(a), opt);
  Launch bwd = ops::prepare(rt, "rmsnorm.bwd", bwd_of(a));
  a.dw.poison(), b.dw.poison(), b.y.poison();
  const CUdeviceptr b_fwd[] = {b.y.buf.get(), b.rstd.buf.get(), b.x.buf.get(), w.buf.get()};
  const CUdeviceptr b_bwd[] = {b.dx.buf.get(), b.dw.buf.get(), b.dy.buf.get(), b.x.buf.get(), b.rstd.buf.get(), w.buf.get()};
  ops::rebind_data(fwd, b_fwd, 4);
  fwd.launch(nullptr);
  ops::rebind_data(bwd, b_bwd, 6);
  bwd.launch(nullptr);
  for (auto v : b.dw.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "an empty backward wrote dw";
  for (auto v : a.dw.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "an empty backward wrote the old dw";
  for (auto v : b.y.download<uint16_t>()) ASSERT_EQ(v, 0xffff) << "an empty forward wrote";
  test::expect_argument_error([&] { ops::rebind_data(bwd, b_bwd, 5); }, "tensors", "had 6 tensors");
}

}  // namespace
}  // namespace cake
