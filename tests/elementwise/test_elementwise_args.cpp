// Every argument of elementwise.add and .cast, rejected before anything happens.
#include "ops_args.hpp"
#include "elementwise_ops.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::OpsArgs;
using test::kBf16;
using test::kF32;
using test::kF64;
using test::kGiB;

TEST_F(OpsArgs, Add) {
  Runtime rt(opts());
  FakeTensor out(1 * kGiB, kF32, {1024}), a(2 * kGiB, kF32, {1024}), b(3 * kGiB, kF32, {1024});
  FakeTensor f64(4 * kGiB, kF64, {1024}), bf(5 * kGiB, kBf16, {1024}), short_b(6 * kGiB, kF32, {1000});
  FakeTensor strided(7 * kGiB, kF32, {512}, {2}), inside(1 * kGiB + 8, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, f64.dl, a.dl, b.dl); }, "out", "dtype f64 not supported");
  rejects([&] { ops::prepare_add(rt, out.dl, bf.dl, b.dl); }, "a", "differs from out's");
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, short_b.dl); }, "b", "1000 elements");
  rejects([&] { ops::prepare_add(rt, strided.dl, strided.dl, strided.dl); }, "out", "contiguous");
  rejects([&] { ops::prepare_add(rt, out.dl, inside.dl, b.dl); }, "out", "overlaps input 'a'");
  FakeTensor null_a(0, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, out.dl, null_a.dl, b.dl); }, "a", "null data pointer");
  FakeTensor cpu(8 * kGiB, kF32, {1024});
  cpu.dl.device = {kDLCPU, 0};
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, cpu.dl); }, "b", "CUDA device tensor");
  FakeTensor other_dev(9 * kGiB, kF32, {1024});
  other_dev.dl.device = {kDLCUDA, 1};
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, other_dev.dl); }, "b", "device 1");
  FakeTensor lanes(10 * kGiB, {kDLFloat, 32, 4}, {1024});
  rejects([&] { ops::prepare_add(rt, out.dl, lanes.dl, b.dl); }, "a", "lanes");
  FakeTensor neg(11 * kGiB, kF32, {-4});
  rejects([&] { ops::prepare_add(rt, neg.dl, a.dl, b.dl); }, "out", "negative extent");
  FakeTensor misaligned(12 * kGiB + 2, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, misaligned.dl, a.dl, b.dl); }, "out", "aligned to its element size");
}

TEST_F(OpsArgs, Cast) {
  Runtime rt(opts());
  FakeTensor out(1 * kGiB, kBf16, {64}), in(2 * kGiB, kF32, {64}), same(3 * kGiB, kBf16, {64});
  FakeTensor i32(4 * kGiB, {kDLInt, 32, 1}, {64}), big(5 * kGiB, kF32, {65});
  rejects([&] { ops::prepare_cast(rt, out.dl, same.dl, false); }, "out", "different dtypes");
  rejects([&] { ops::prepare_cast(rt, out.dl, i32.dl, false); }, "in", "dtype i32 not supported");
  rejects([&] { ops::prepare_cast(rt, i32.dl, in.dl, false); }, "out", "dtype i32 not supported");
  rejects([&] { ops::prepare_cast(rt, out.dl, big.dl, true); }, "in", "65 elements");
  FakeTensor overlap(1 * kGiB + 64, kF32, {64});
  rejects([&] { ops::prepare_cast(rt, out.dl, overlap.dl, true); }, "out", "overlaps input 'in'");
}

}  // namespace
}  // namespace cake
