// Hopper (sm_90a) grouped GEMM (MoE experts; one group: a dense GEMM): fwd Y_e = X_e W_e^T,
// dgrad dX_e = G_e W_e, wgrad dW_e = G_e^T X_e (BF16 in, FP32 accumulate, BF16 or FP32 out,
// optionally out += dW). Groups come from device offsets and are only read here, so the grid
// never depends on them: a persistent grid walks the tiles of all groups. Null offsets: E
// groups of m / E rows (gemm_contract.h).
//
// One CTA per SM, three warpgroups: warpgroup 0 produces (one thread issues TMA loads into a
// kStages-deep shared-memory ring; full/empty mbarriers per stage), warpgroups 1 and 2 each
// own 64 rows of the 128-row tile and issue wgmma from shared memory (m64nNk16, FP32
// accumulators in registers). setmaxnreg moves registers from the producer to the consumers.
// With kCluster = 2 the two CTAs of a cluster take neighbouring row blocks and each loads half
// of the shared B tile, multicast into both.
//
// With `split_ws` (and `sched`) the last wave's tiles split along the reduction (Scheduler::
// plan_split for wgrad, plan_split_rows for fwd and dgrad launches of few waves:
// deterministic stream-K, a fixed summation order). FP32 wgrad with `chain_rows` sums a
// tile (a part) in segments of that many rows: after each segment but the last a consumer
// thread adds its accumulators into its CTA's chain tile of workspace (the first one stores,
// later ones reduce-add in L2, flushing subnormal sums to zero) and zeroes them; the last
// segment's accumulators add the chain tile's sum before the epilogue. Each thread reads
// back only what it wrote, so no barrier is needed.
//
// Tile order: each CTA's first tile is its own index; after that, with `sched` (two ints in
// global memory, zero at launch; clusters of 1) the producer takes the next tile index from
// an atomic counter, so SMs that run faster (or start earlier) take more tiles and uneven
// wgrad tiles (their length is the group's rows) even out as they come. The kernel leaves
// the counters zero again: the last CTA to finish resets them, so launches of one `sched`
// must be stream-ordered. A launch whose tiles all fit in the grid, none split, never touches
// the counters (each CTA runs its own tile), which spares every CTA the fence and atomic of
// the reset on its way out. Without `sched` the CTAs walk the tiles round-robin. Either way a
// tile is computed by one CTA in one fixed order (a split one: its parts summed in one fixed
// order), so the results are the same bits whichever CTA takes it.
// The producer walks the schedule and hands each decoded tile to the consumers through a
// two-slot ring in shared memory (full/empty mbarriers).
//
// Epilogue: each consumer writes its 64 rows in slices of 128-byte rows into shared memory
// (swizzled like TMA's 128-byte mode) and one thread stores the slice with TMA, or with
// accumulate reduce-adds it into global memory (cp.reduce.async.bulk .add: one FP32 add per
// element, so out + dW is rounded once); the store drains while the next tile's main loop
// runs. A row block that ends inside its group (fwd, dgrad) goes out of the slice buffer in
// 16-byte chunks of the group's rows instead, since a TMA box would write the next group's
// rows. A finished tile moves into held registers (BF16: packed pairs, half the
// accumulators' registers; FP32: a copy, up to 192 columns), and its slices are written
// during the next tile's first k blocks, while their wgmma run. FP32 out at 128 x 256 holds
// its last 4 of 8 slices; the tensor cores wait for the first 4 only. The k loop after those
// blocks is not unrolled (no faster unrolled, and each copy of a k block costs a cold NVRTC
// compile about 0.2 s on the CPU machine).
//
// Operand layouts (128-byte swizzle everywhere, one 64-element K block per stage):
//   K-major operand (X, G as A; W as B in fwd): rows of 64 K elements = 128 B, as TMA writes
//     them; descriptor SBO = 1024 (8 rows), a K step of 16 moves the start by 32 B.
//   MN-major operand (W in dgrad, G and X in wgrad): sub-tiles of [64 K rows][64 MN elements],
//     one TMA box each, 8 KB apart: descriptor LBO = 8192 (next 64 MN), SBO = 1024 (next 8 K),
//     a K step of 16 moves the start by 2048 B; the wgmma transpose bit is set.
// Bounds: TMA fills out-of-range boxes with zeros (tensor ends, K and N tails, W's expert
// boundary through its 3-D map). Rows of the next group inside a tile are computed but never
// stored (fwd, dgrad); in wgrad they would enter the reduction, so the consumers zero those
// rows of the last K block in shared memory before the wgmma reads it.
//
// Host contract (gemm_contract.h: Sm90Args, sm90_smem_bytes, the counters): block
// kSm90Threads, grid a multiple of kCluster (one CTA per SM), bf16 maps with 128-byte swizzle:
//   fwd:   A = x {K, M} box {64, 128};  B = w {K, N, E} box {64, kBN / kCluster, 1};  out y {N, M}
//          (kBParts > 1: B = the parts {K, kBParts N, E}, box {64, kBN, 1})
//   dgrad: A = g {N, M} box {64, 128};  B = w {K, N, E} box {64, 64, 1};              out dx {K, M}
//   wgrad: A = g {N, M} box {64, 64};   B = x {K, M} box {64, 64};                    out dw {K, N, E}
//   out boxes {128 / sizeof(OutT), 64 (, 1)} in out's dtype. Every {cols, M} map above is 3-D,
//   {cols, M, 1}, or with `heads` {cols, M / E, E}; its box is one deep in the last dim.
#pragma once
#include "gemm_contract.h"
#include "smxx_types.cuh"

namespace cake::gemm {

namespace sm90 {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return static_cast<unsigned>(a);
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred ready;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
          dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}


// TMA store (or, with kReduce, element-wise add into global) of a 128-byte-row smem slice.
template <bool kReduce>
__device__ __forceinline__ void tma_store_3d(const TmaDesc* map, unsigned src, int c0, int c1, int c2) {
  if constexpr (kReduce)
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                     map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(map), "r"(src),
                 "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most kPending bulk groups still read shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Barrier of one consumer warpgroup (ids 2, 3; id 1 spans both consumers).
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// Shared-memory matrix descriptor, 128-byte swizzle: the low word holds the address (bits
// 0-13: addr >> 4) and the leading byte offset, the high word the stride and the mode (1 in
// bits 62-63). Shared addresses are below 2^18, so moving the address by a stage or a k step
// is an add to the low word that never carries out of its field: the main loop adds to a
// low word made once (rebuilding whole descriptors cost the fwd kernel 83 instead of 61 SASS
// instructions a consumer warp a k block).
__device__ __forceinline__ unsigned desc_lo(unsigned addr, unsigned lbo) {
  return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16);
}
__device__ __forceinline__ unsigned long long desc_of(unsigned lo, unsigned sbo) {
  return (static_cast<unsigned long long>((sbo >> 4) | (1u << 30)) << 32) | lo;
}


// Multicast TMA load: the box lands at `dst` (and signals `bar`) in every CTA of the mask.
__device__ __forceinline__ void tma_load_3d_mc(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1, int c2,
                                               unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
      "%4, %5}], [%2], %6;" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(mask)
      : "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Arrive on the barrier at the same shared address in CTA `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accumulator registers across an in-flight wgmma.
template <int kN>
__device__ __forceinline__ void fence_acc(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, %131, %132;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
}

template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, %99, %100;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
}

template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
}

template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], unsigned long long desc_a,
                                                unsigned long long desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
}

template <int kBN, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[kBN / 2], unsigned long long da, unsigned long long db) {
  if constexpr (kBN == 256)
    wgmma_m64n256k16<kTransA, kTransB>(d, da, db);
  else if constexpr (kBN == 192)
    wgmma_m64n192k16<kTransA, kTransB>(d, da, db);
  else if constexpr (kBN == 128)
    wgmma_m64n128k16<kTransA, kTransB>(d, da, db);
  else
    wgmma_m64n64k16<kTransA, kTransB>(d, da, db);
}

// The registers a finished tile is held in until its epilogue has stored it: BF16 pairs
// packed into one word each (the bits that are stored), FP32 values as they are (indexed as
// the accumulators; where only the last slices are held, the first words stay unused).
template <typename OutT, int kBN>
struct HeldTile {
  using type = unsigned[kBN / 4];
};
template <int kBN>
struct HeldTile<float, kBN> {
  using type = float[kBN / 2];
};

__device__ __forceinline__ int clamp_row(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Where a tile is: its group, its block coordinates in the group's C matrix, and the group's
// rows [row0, row_end) of the row-grouped operand (C's rows in fwd/dgrad, the reduction in wgrad).
// A tile of the split tail is run as `parts` units: unit `part` takes k blocks
// [kb0, kb1) and passes its sum on through workspace slot `slot`.
struct Tile {
  int group, m_blk, n_blk, row0, row_end;
  int kb0, kb1, part, parts, slot;
};

// Walks unit indices (increasing per cluster) to tiles. A unit is kCluster row blocks side by
// side with one column block: the CTAs of a cluster take one row block each and share the B
// tile (multicast). Offsets are clamped to [previous, M] so a malformed offs never leads
// outside the tensors.
template <int kOp, int kBM, int kBN, int kBand, int kCluster>
struct Scheduler {
  const int* offs;
  const unsigned short* order;  // wgrad: groups by decreasing size (null: natural order)
  int groups, m, rank, units_m_fixed, tiles_n;
  int g = -1, g_base = 0, g_units = 0, g_units_m = 0, g_row0 = 0, g_end = 0;
  int total = 0;
  int split_first = 0, split_tiles = 0, parts = 1;  // the tail split (plan_split, plan_split_rows)

  __device__ void bounds(int e, int& start, int& end) const {
    if (offs == nullptr) {  // uniform groups, the last one shorter
      const int rows = uniform_group_rows(m, groups);
      start = e * rows < m ? e * rows : m;
      end = start + rows < m ? start + rows : m;
      return;
    }
    start = e == 0 ? 0 : clamp_row(__ldg(offs + e - 1), 0, m);
    end = clamp_row(__ldg(offs + e), start, m);
  }
  static __device__ int units_for_rows(int rows) { return (rows + kBM * kCluster - 1) / (kBM * kCluster); }

  __device__ Scheduler(const int* offs_, int groups_, int m_, int c_rows, int c_cols, int rank_)
      : offs(offs_), order(nullptr), groups(groups_), m(m_), rank(rank_) {
    tiles_n = (c_cols + kBN - 1) / kBN;
    units_m_fixed = units_for_rows(c_rows);  // wgrad: C is [N, K] for every group
    if (kOp == kOpWgrad) {
      total = groups * units_m_fixed * tiles_n;
    } else {
      for (int e = 0; e < groups; ++e) {
        int s, t;
        bounds(e, s, t);
        total += units_for_rows(t - s) * tiles_n;
      }
    }
  }

  __device__ bool get(int t, Tile& tile) {
    if (t >= total) return false;
    tile.part = 0, tile.parts = 1, tile.slot = 0;
    if (parts > 1 && t >= split_first) {  // units of the split tail, then the tiles after it
      const int u = t - split_first;
      if (u < split_tiles * parts) {
        tile.slot = u / parts, tile.part = u - tile.slot * parts, tile.parts = parts;
        t = split_first + tile.slot;
      } else {
        t -= split_tiles * (parts - 1);
      }
    }
    int local, mu;
    if (kOp == kOpWgrad) {
      const int per_group = units_m_fixed * tiles_n;
      const int pos = t / per_group;
      tile.group = order ? order[pos] : pos;
      local = t - pos * per_group;
      mu = units_m_fixed;
      bounds(tile.group, tile.row0, tile.row_end);
    } else {
      while (g < 0 || t >= g_base + g_units) {  // move the cursor forward to t's group
        g_base += g_units;
        ++g;
        bounds(g, g_row0, g_end);
        g_units_m = units_for_rows(g_end - g_row0);
        g_units = g_units_m * tiles_n;
      }
      tile.group = g;
      tile.row0 = g_row0;
      tile.row_end = g_end;
      local = t - g_base;
      mu = g_units_m;
    }
    // Bands of kBand row units, rows fastest inside a band: neighbouring clusters share B tiles.
    const int band_units = kBand * tiles_n;
    const int band = local / band_units;
    const int in_band = local - band * band_units;
    const int band_rows = mu - band * kBand < kBand ? mu - band * kBand : kBand;
    // A row block past the group's (or C's) end computes nothing that is stored; it is loaded
    // anyway so that both CTAs of the cluster take the same steps, and multiplied too unless
    // its group has over two row blocks (then its warpgroups idle: the consumers' mainloop).
    tile.m_blk = (band * kBand + in_band % band_rows) * kCluster + rank;
    tile.n_blk = in_band / band_rows;
    return true;
  }

  // wgrad tiles cost in proportion to their group's rows: walking the largest groups first
  // leaves the short tiles for the end, where they even out the CTAs' finishing times.
  // Every thread of the CTA calls this (it writes `table` and synchronises).
  __device__ void sort_groups(unsigned short* table) {
    for (int e = threadIdx.x; e < groups; e += blockDim.x) {
      int s, t;
      bounds(e, s, t);
      int before = 0;  // groups that come first: larger, or as large with a smaller index
      for (int f = 0; f < groups; ++f) {
        int fs, ft;
        bounds(f, fs, ft);
        before += (ft - fs > t - s) || (ft - fs == t - s && f < e);
      }
      table[before] = static_cast<unsigned short>(e);
    }
    __syncthreads();
    order = table;
  }

  // Deterministic stream-K for wgrad's last wave: with every group's tiles as long as its rows,
  // the last tiles leave SMs idle for up to a tile's time. They run as `parts` units each
  // instead, over equal shares of their k blocks; each part adds its predecessor's sum to its
  // own, so a tile is ((p0 + p1) + p2) + ... in every run. Groups of one size keep the SMs in
  // step: the last (work mod ctas) tiles split, into the parts that best fill the last wave.
  // With uneven groups the SMs' last tiles start at scattered times, so the last ctas tiles
  // (of the smallest group, walked last) split in two, when a launch has under 16 waves of
  // tiles (more: the scatter is a small share). Parts have min_split_part_rows or more, so
  // short groups never split. `ctas` is the device's SM count (not the grid's), so a capped
  // grid computes the same bits. After sort_groups (empty groups last).
  __device__ void plan_split(int ctas) {
    if (kOp != kOpWgrad || order == nullptr || ctas <= 0 || ctas > kMaxSplitSlots) return;
    int work_groups = 0, min_rows = m, max_rows = 0;
    for (int e = 0; e < groups; ++e) {
      int s, t;
      bounds(e, s, t);
      if (t == s) continue;
      ++work_groups;
      min_rows = t - s < min_rows ? t - s : min_rows;
      max_rows = t - s > max_rows ? t - s : max_rows;
    }
    const int per_group = units_m_fixed * tiles_n, work = work_groups * per_group;
    if (max_rows - min_rows > min_rows / 8) {  // uneven (docs/decisions.md)
      if (work >= 16 * ctas || min_rows < 2 * min_split_part_rows(kBM, kBN)) return;
      const int last = per_group < ctas ? per_group : ctas;
      parts = 2, split_tiles = last, split_first = work - last;
      total += last;
      return;
    }
    apply(even_wgrad_split(ctas, work, min_rows, min_split_part_rows(kBM, kBN)), work);
  }

  // fwd and dgrad (gemm_contract.h, row_op_split).
  __device__ void plan_split_rows(int ctas, int k_blocks) {
    if (kOp == kOpWgrad) return;
    apply(row_op_split(ctas, total, k_blocks), total);
  }

  // Runs the last `split.tiles` of `work` tiles as `split.parts` units each.
  __device__ void apply(TailSplit split, int work) {
    if (split.parts <= 1) return;
    parts = split.parts, split_tiles = split.tiles, split_first = work - split.tiles;
    total += split.tiles * (split.parts - 1);
  }
};

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

}  // namespace sm90

// kCompact: the same bits from less code, for a shorter cold NVRTC compile (the registry
// serves it as the stand-in of the program without it while that one compiles,
// runtime/loader.hpp). fwd and dgrad run the k blocks that write the previous tile's slices
// as one loop (one copy of the k block, as BF16 wgrad always does): about half the compile,
// 1-3 % slower. BF16 wgrad does not overlap its epilogue (no held tile, no slice writes in
// the k loop).
//
// kReduceGroups (wgrad, accumulating): every group's tiles reduce-add into group 0's output, so
// groups that split T's rows (null offs, gemm_contract.h reduce_parts) sum into one dW in the
// order their tiles finish: not bitwise repeatable, the route's non-deterministic split.
// kBParts (fwd, clusters of 1): Y = X (W_0 + ... + W_{P-1})^T with B's map holding the P parts
// as P N rows; a stage holds one A tile and P B tiles, and each k step issues one wgmma per
// part into the same accumulators, so X is read once (an FP32 weight's BF16 parts).
template <int kOp, typename OutT, bool kAccumulate, int kBM, int kBN, int kStages, int kRasterBand, int kCluster,
          bool kCompact = false, bool kReduceGroups = false, int kBParts = 1>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kSm90Threads, 1)
    sm90_gemm(const __grid_constant__ Sm90Args args) {
  using namespace sm90;
  // The maps stay in parameter space (TMA takes their addresses there).
  const TmaDesc &tma_a = args.a, &tma_b = args.b, &tma_out = args.out_map;
  OutT* __restrict__ const out = static_cast<OutT*>(args.out);
  const int* __restrict__ const offs = args.offs;
  int* __restrict__ const sched = args.sched;
  float* __restrict__ const split_ws = args.split_ws;
  const int num_groups = args.groups, m = args.m, n = args.n, k = args.k, split_ctas = args.split_ctas;
  // FP32 wgrad sums a tile in segments of args.chain_rows rows (gemm_contract.h kChainRows)
  // through the CTA's chain tile after the split slots. Read from parameter space where used,
  // so that nothing of it stays in registers across the k loop.
  constexpr bool kChained = kOp == kOpWgrad && sizeof(OutT) == 4;
  auto chain_tile = [&] {
    return reinterpret_cast<float4*>(args.split_ws + (static_cast<long long>(args.split_ctas) + blockIdx.x) * (kBM * kBN));
  };
  static_assert(kBM == 128, "two consumer warpgroups of 64 rows");
  static_assert(kBN == 64 || kBN == 128 || kBN == 192 || kBN == 256, "wgmma n");
  static_assert(!kAccumulate || sizeof(OutT) == 4, "accumulate is fused for FP32 out only");
  static_assert(!kReduceGroups || (kOp == kOpWgrad && kAccumulate), "groups reduce into one output by adding");
  // The epilogue writes a tile in kSlices slices of 128-byte rows; a slice is 16 registers of
  // a consumer thread (64 rows x kSliceCols over 128 threads; BF16 packed in pairs). A finished
  // tile's last kHeldSlices slices are held in registers beside the accumulators (192 of the
  // 232 a consumer thread gets) and written while the next tile's main loop runs; the first
  // kDirect slices, which do not fit (FP32 out at 256 columns: 4 of 8), are written from the
  // accumulators before it starts, while the tensor cores wait.
  using Held = typename HeldTile<OutT, kBN>::type;
  constexpr int kHeldWords = int(sizeof(Held) / 4);
  constexpr int kSliceCols = 128 / sizeof(OutT);
  constexpr int kSlices = kBN / kSliceCols;
  constexpr int kHeldSlices = (192 - kBN / 2) / 16 < kSlices ? (192 - kBN / 2) / 16 : kSlices;
  constexpr int kDirect = kSlices - kHeldSlices;
  static_assert(kDirect == 0 || sizeof(OutT) == 4, "a BF16 tile is held whole (masked stores read it)");
  static_assert(kDirect == 0 || kOp == kOpWgrad, "fwd and dgrad tiles are held whole (masked stores read them)");
  static_assert(kBParts >= 1 && (kBParts == 1 || (kOp == kOpFwd && kCluster == 1)), "B parts: fwd, clusters of 1");
  constexpr bool kOverlapEpilogue = kHeldSlices > 0 && !(kCompact && kOp == kOpWgrad);
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs along M");
  static_assert(kOp == kOpFwd || (kBN / 64) % kCluster == 0, "each CTA of a cluster loads whole 64-column B sub-tiles");
  constexpr int kTransA = kOp == kOpWgrad ? 1 : 0;  // A is MN-major
  constexpr int kTransB = kOp == kOpFwd ? 0 : 1;    // B is MN-major
  constexpr unsigned kABytes = kBM * 128, kBBytes = kBN * 128, kStageBBytes = kBParts * kBBytes;
  // C is [c_rows, c_cols] per group (row-grouped ops: rows come from the group).
  const int c_rows = kOp == kOpWgrad ? n : m;
  const int c_cols = kOp == kOpFwd ? n : k;

  extern __shared__ unsigned char smem_raw[];
  const unsigned raw = smem_u32(smem_raw);
  const unsigned a_base = (raw + 1023u) & ~1023u;
  const unsigned b_base = a_base + kStages * kABytes;
  const unsigned epi_base = b_base + kStages * kStageBBytes;  // 4 epilogue slices of 8 KB
  const unsigned full_bar = epi_base + 4 * 8192;          // kStages barriers of 8 bytes
  const unsigned empty_bar = full_bar + kStages * 8;
  const unsigned tile_full = empty_bar + kStages * 8;     // tile-index ring: 2 slots
  const unsigned tile_empty = tile_full + 16;
  // Slot entries: a valid flag, then the Tile (the producer walks the schedule; the consumers
  // only read what it decoded, which keeps the scheduler's state out of their registers).
  constexpr int kSlotInts = 12;
  volatile int* const tile_slot = reinterpret_cast<volatile int*>(smem_raw + (tile_empty + 16 - raw));
  const int wg = threadIdx.x / 128;
  const bool dynamic = kCluster == 1 && sched != nullptr;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar + 8 * s, 1);
      mbar_init(empty_bar + 8 * s, 8 * kCluster);  // lane 0 of each consumer warp of the cluster
    }
    for (int s = 0; s < 2; ++s) {
      mbar_init(tile_full + 8 * s, 1);   // the producer
      mbar_init(tile_empty + 8 * s, 256);  // every consumer thread, after its own read
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tma_a) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tma_b) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tma_out) : "memory");
  }
  // Peers multicast into this CTA's ring and arrive on its barriers: all must be initialised.
  if constexpr (kCluster > 1)
    cluster_sync();
  else
    __syncthreads();

  const int rank = kCluster > 1 ? int(cluster_rank()) : 0;
  const int unit0 = blockIdx.x / kCluster, unit_step = gridDim.x / kCluster;
  Scheduler<kOp, kBM, kBN, kRasterBand, kCluster> tiles(offs, num_groups, m, c_rows, c_cols, rank);
  // The group order table lives in the slack after the barriers and the tile ring:
  // sm90_smem_bytes keeps 2048 bytes for alignment and those, so at least 780 remain (up to 8
  // stages) whatever the alignment of dynamic shared memory: room for kMaxSortedGroups 2-byte
  // entries (more groups: natural order, and no tail split).
  if (kOp == kOpWgrad && num_groups <= kMaxSortedGroups)
    tiles.sort_groups(reinterpret_cast<unsigned short*>(smem_raw + (tile_empty + 16 + 2 * kSlotInts * 4 - raw)));
  // The split's flags follow the schedule's two counters; its sums go through split_ws.
  if (dynamic && split_ws != nullptr) {
    if constexpr (kOp == kOpWgrad)
      tiles.plan_split(split_ctas);
    else
      tiles.plan_split_rows(split_ctas, ((kOp == kOpFwd ? k : n) + 63) / 64);
  }
  // A launch whose tiles all fit in the grid, none split, takes no index from the counter: each
  // CTA runs its own tile and leaves without the reset's fence and atomic (about 1 us of a
  // short launch, docs/decisions.md). Every CTA computes the same total, so all agree.
  const bool counted = dynamic && (tiles.parts > 1 || tiles.total > unit_step);
  Tile tile{};
  int stage = 0;
  unsigned phase = 0;
  auto advance = [&] {
    if (++stage == kStages) stage = 0, phase ^= 1;
  };
  auto k_blocks = [&](const Tile& t) {
    const int red = kOp == kOpFwd ? k : kOp == kOpDgrad ? n : t.row_end - t.row0;
    return (red + 63) / 64;
  };

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      constexpr unsigned short kMask = (1u << kCluster) - 1;
      int slot = 0;
      unsigned slot_phase = 0;
      // With a split, every index comes from the counter, the first too: then a part waits
      // only for units that CTAs already running have taken, whether or not the whole grid
      // is resident at once.
      const bool all_counted = tiles.parts > 1;
      const int counted_base = all_counted ? 0 : unit_step;  // the counter's index 0 is this
      for (int t = all_counted ? atomicAdd(sched, 1) : unit0;;) {
        const bool more = tiles.get(t, tile);
        // Hand the tile to the consumers (past the end: they stop too).
        mbar_wait(tile_empty + 8 * slot, slot_phase ^ 1);
        volatile int* const e = tile_slot + slot * kSlotInts;
        if (more) {
          const int kbs = k_blocks(tile);
          tile.kb0 = kbs * tile.part / tile.parts, tile.kb1 = kbs * (tile.part + 1) / tile.parts;
        }
        e[0] = more, e[1] = tile.group, e[2] = tile.m_blk, e[3] = tile.n_blk, e[4] = tile.row0, e[5] = tile.row_end;
        e[6] = tile.kb0, e[7] = tile.kb1, e[8] = tile.part, e[9] = tile.parts, e[10] = tile.slot;
        mbar_arrive(tile_full + 8 * slot);
        if (++slot == 2) slot = 0, slot_phase ^= 1;
        if (!more) break;
        // The next index is asked for with this tile's first load (its latency hides behind
        // the loads), in wgrad kAskAhead loads before its last: a wgrad tile is as long as its
        // group's rows, and a CTA that took its next unit a whole tile ahead could hold a unit
        // that another CTA would start sooner (a split part the next part waits for, the last
        // tiles of uneven groups). Measured in docs/decisions.md.
        constexpr int kAskAhead = 8;
        int next = t + unit_step;
        if (kOp != kOpWgrad && counted) next = counted_base + atomicAdd(sched, 1);
        const int ask_at = kOp != kOpWgrad || !counted         ? -1
                           : tile.kb1 - kAskAhead < tile.kb0 ? tile.kb0
                                                             : tile.kb1 - kAskAhead;
        const int mrow = tile.m_blk * kBM, ncol = tile.n_blk * kBN;
        // The row-grouped maps' row and depth coordinates (Sm90Args): rows from the group's
        // first, or from the head's.
        const int r0 = args.heads ? 0 : tile.row0, z = args.heads ? tile.group : 0;
        for (int kb = tile.kb0; kb < tile.kb1; ++kb) {
          if (kb == ask_at) next = counted_base + atomicAdd(sched, 1);
          mbar_wait(empty_bar + 8 * stage, phase ^ 1);
          const unsigned bar = full_bar + 8 * stage;
          const unsigned sa = a_base + stage * kABytes, sb = b_base + stage * kStageBBytes;
          if constexpr (kOp == kOpWgrad) {
            // A 64-row sub-tile wholly past C's rows (a dw of N <= 64) is not loaded: its rows
            // are never stored, and an out-of-range box costs the TMA about a real one's time.
            // (A row block wholly past C's end, a cluster's second CTA: no A at all.)
            const int past = c_rows > mrow ? (c_rows - mrow + 63) / 64 : 0;
            const int a_subs = past < kBM / 64 ? past : kBM / 64;
            mbar_expect_tx(bar, a_subs * 8192 + kBBytes);
#pragma unroll
            for (int j = 0; j < kBM / 64; ++j)
              if (j < a_subs) tma_load_3d(sa + j * 8192, &tma_a, bar, mrow + 64 * j, r0 + kb * 64, z);
          } else {
            mbar_expect_tx(bar, kABytes + kStageBBytes);  // own A, all of B (a 1/kCluster share from each CTA)
            tma_load_3d(sa, &tma_a, bar, kb * 64, r0 + mrow, z);
          }
          if constexpr (kOp == kOpFwd) {  // K-major B: rows [rank * kBN / kCluster, ...) of the tile
            constexpr int kRows = kBN / kCluster;
            if constexpr (kCluster > 1) {
              tma_load_3d_mc(sb + rank * kRows * 128, &tma_b, bar, kb * 64, ncol + rank * kRows, tile.group, kMask);
            } else {
#pragma unroll
              for (int p = 0; p < kBParts; ++p) tma_load_3d(sb + p * kBBytes, &tma_b, bar, kb * 64, p * n + ncol, tile.group);
            }
          } else {  // MN-major B: this CTA's share of the 64-column sub-tiles
            constexpr int kSubs = kBN / 64 / kCluster;
#pragma unroll
            for (int jj = 0; jj < kSubs; ++jj) {
              const int j = rank * kSubs + jj;
              const unsigned dst = sb + j * 8192;
              if constexpr (kOp == kOpDgrad) {
                if constexpr (kCluster > 1)
                  tma_load_3d_mc(dst, &tma_b, bar, ncol + 64 * j, kb * 64, tile.group, kMask);
                else
                  tma_load_3d(dst, &tma_b, bar, ncol + 64 * j, kb * 64, tile.group);
              } else {
                if constexpr (kCluster > 1)
                  tma_load_3d_mc(dst, &tma_b, bar, ncol + 64 * j, r0 + kb * 64, z, kMask);
                else
                  tma_load_3d(dst, &tma_b, bar, ncol + 64 * j, r0 + kb * 64, z);
              }
            }
          }
          advance();
        }
        if (ask_at >= 0 && tile.kb0 == tile.kb1) next = counted_base + atomicAdd(sched, 1);  // no k blocks
        t = next;
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = __shfl_sync(0xffffffffu, wg - 1, 0);  // consumer: rows [64c, 64c + 64) of the tile
    // Descriptor low words of stage 0: this consumer's A rows and the whole B tile.
    const unsigned a_lo0 = desc_lo(a_base + c * 8192, kTransA ? 8192 : 16), b_lo0 = desc_lo(b_base, kTransB ? 8192 : 16);
    const int ctid = threadIdx.x - 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    // A stage is free once every consumer warp of the cluster is done with it (its B share was
    // multicast into every CTA).
    auto release = [&](int st) {
      if constexpr (kCluster > 1) {
#pragma unroll
        for (int p = 0; p < kCluster; ++p) mbar_arrive_cluster(empty_bar + 8 * st, p);
      } else {
        mbar_arrive(empty_bar + 8 * st);
      }
    };
    int slot = 0;
    unsigned slot_phase = 0;
    auto take = [&](Tile& t) {  // the producer's next tile; false past the end
      mbar_wait(tile_full + 8 * slot, slot_phase);
      const volatile int* const e = tile_slot + slot * kSlotInts;
      // Broadcast from lane 0: the same words in every lane, and provably so, which lets the
      // compiler keep the k loop's counters and descriptors in uniform registers.
      auto u = [](int v) { return __shfl_sync(0xffffffffu, v, 0); };
      const bool more = u(e[0]) != 0;
      t.group = u(e[1]), t.m_blk = u(e[2]), t.n_blk = u(e[3]), t.row0 = u(e[4]), t.row_end = u(e[5]);
      t.kb0 = u(e[6]), t.kb1 = u(e[7]), t.part = u(e[8]), t.parts = u(e[9]), t.slot = u(e[10]);
      // Each reader arrives itself: an arrive releases only its own thread's read, and the
      // producer overwrites the slot once the barrier completes.
      mbar_arrive(tile_empty + 8 * slot);
      if (++slot == 2) slot = 0, slot_phase ^= 1;
      return more;
    };

    // Epilogue: thread holds rows r and r + 8, column pairs 8j + 2(lane % 4): accumulators 4j + 2h
    // and 4j + 2h + 1 for row r + 8h, held as word 2j + h (BF16) or as those two values (FP32).
    // A tile's rows go
    // out through shared memory in kSlices slices of 128-byte rows, stored (or reduce-added)
    // by TMA, so each store drains while the main loop runs. A row block that ends inside its
    // group (fwd, dgrad) goes out of the slice buffer by plain stores of its group's rows
    // instead, since a TMA box would write the next group's rows.
    // With the overlapped epilogue, held slice i (the tile's slice kDirect + i) of the previous
    // tile is written at k block i of the next one, between its wgmma issue and wait. ptxas
    // serialises every wgmma if an accumulator is read on a branch there, so those slices are
    // written whatever the previous tile needs (only the TMA store is conditional). Indices into the held tile must
    // be constants (it stays in registers only if every one is). For BF16 wgrad the k loop is
    // one loop whose first kPeeled blocks write a slice, picking its registers by a compare
    // chain over the constant indices (store_slice_at): one copy of the k block for a cold
    // compile instead of kPeeled + 1, and no slower. So does FP32 wgrad at 256 columns (64 held
    // registers, as BF16). fwd and dgrad unroll those blocks unless kCompact: the loop costs
    // them 1-3 % on the H200, about 0.8 k block a tile (moving the held words instead cost
    // 1 %), which E = 4 rows level with cuBLAS cannot give (docs/decisions.md). FP32 out holding a
    // whole tile (up to 192 columns) unrolls them too (the loop spills there).
    constexpr bool kRolledSlices =
        kOverlapEpilogue && (sizeof(OutT) == 2 || kDirect > 0) && (kOp == kOpWgrad || kCompact);
    constexpr int kPeeled = kOverlapEpilogue ? kHeldSlices : 0;
    static_assert(!kChained || kChainRows / 64 > kPeeled, "a chain's segment outlasts the peeled k blocks");

    // fwd, dgrad: whether this warpgroup's 64 rows of the tile all lie past its group's end.
    auto half_past_end = [&](const Tile& tile) {
      return kOp != kOpWgrad && tile.row0 + tile.m_blk * kBM + c * 64 >= tile.row_end;
    };
    // What a tile's epilogue does: kSlices TMA slices, 0 nothing (an empty group accumulates
    // nothing; fwd, dgrad: a half past the end), or -1 the masked stores (a head's 3-D box
    // stops at its last row itself).
    auto epilogue_kind = [&](const Tile& tile) {
      if (kAccumulate && kOp == kOpWgrad && tile.row_end == tile.row0) return 0;
      if (half_past_end(tile)) return 0;
      return kOp == kOpWgrad || args.heads || tile.row0 + tile.m_blk * kBM + c * 64 + 64 <= tile.row_end ? kSlices : -1;
    };
    int epi_seq = 0;  // slices written so far: the two buffers of a warpgroup alternate
    // Writes slice `s` (a constant) of the held tile into shared memory and, if `store`, has
    // TMA store it.
    auto store_slice = [&](const Held& held, const Tile& tile, int s, bool store) {
      const unsigned buf = epi_base + (c * 2 + (epi_seq & 1)) * 8192;
      ++epi_seq;
      if (ctid % 128 == 0) bulk_wait_read<1>();  // the store that used `buf` has read it
      named_sync(2 + c);
#pragma unroll
      for (int jj = 0; jj < kSliceCols / 8; ++jj) {
        const int j = s * (kSliceCols / 8) + jj;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp * 16 + lane / 4 + 8 * h;
          const int byte = (jj * 8 + (lane % 4) * 2) * int(sizeof(OutT));  // within the 128-byte row
          const unsigned addr = buf + row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
          if constexpr (sizeof(OutT) == 4)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(held[4 * j + 2 * h]),
                         "f"(held[4 * j + 2 * h + 1])
                         : "memory");
          else
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(held[2 * j + h]) : "memory");
        }
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      named_sync(2 + c);
      if (ctid % 128 == 0) {
        if (store) {
          const int wg_row = tile.m_blk * kBM + c * 64;
          const int col = tile.n_blk * kBN + s * kSliceCols;
          if constexpr (kOp == kOpWgrad)
            tma_store_3d<kAccumulate>(&tma_out, buf, col, wg_row, kReduceGroups ? 0 : tile.group);
          else if (args.heads)
            tma_store_3d<kAccumulate>(&tma_out, buf, col, wg_row, tile.group);
          else
            tma_store_3d<kAccumulate>(&tma_out, buf, col, tile.row0 + wg_row, 0);
        }
        // Every slice commits a bulk group (an empty one when it stores nothing), so the
        // bulk_wait_read<1> above always waits for the store that last used this buffer: two
        // unstored slices after a stored one would otherwise reuse its buffer unguarded.
        bulk_commit();
      }
    };
    // A row block that ends inside its group (fwd, dgrad): slice `s`, just written into the
    // warpgroup's last buffer by store_slice, goes out in 16-byte chunks (8 BF16 or 4 FP32
    // columns) of the group's rows only; accumulating, each chunk adds to what is there (one
    // rounding, as TMA's reduce-add). N and K are multiples of 8 (checked before launch), so a
    // chunk is all in or all out of the columns, and 16-byte aligned.
    auto store_masked = [&](const Tile& tile, int s) {
      if constexpr (kOp != kOpWgrad) {  // a wgrad tile's rows are C's: always TMA-stored
        constexpr int kChunkCols = 16 / int(sizeof(OutT));
        const unsigned buf = epi_base + (c * 2 + ((epi_seq - 1) & 1)) * 8192;
        const int row0 = tile.row0 + tile.m_blk * kBM + c * 64;  // the buffer's first row
        const int rows = tile.row_end - row0 < 64 ? tile.row_end - row0 : 64;
        const int col0 = tile.n_blk * kBN + s * kSliceCols;
#pragma unroll 1
        for (int i = ctid % 128; i < rows * 8; i += 128) {
          const int row = i >> 3, chunk = i & 7;
          if (col0 + chunk * kChunkCols >= c_cols) continue;
          uint4 v;
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                       : "r"(buf + row * 128 + ((chunk ^ (row & 7)) << 4)));
          uint4* const dst =
              reinterpret_cast<uint4*>(out + static_cast<long long>(row0 + row) * args.out_ld + col0 + chunk * kChunkCols);
          if constexpr (kAccumulate) {
            const float4 o = *reinterpret_cast<const float4*>(dst);
            *reinterpret_cast<float4*>(dst) = make_float4(o.x + __uint_as_float(v.x), o.y + __uint_as_float(v.y),
                                                          o.z + __uint_as_float(v.z), o.w + __uint_as_float(v.w));
          } else {
            *dst = v;
          }
        }
      }
    };
    // Writes held slice `s` (a run-time index, kDirect <= s < kSlices) from its own registers:
    // a compare chain over the constant indices, so the held tile stays in registers and
    // nothing moves.
    auto store_slice_at = [&](const Held& held, const Tile& tile, int s, bool store) {
#pragma unroll
      for (int q = kDirect; q < kSlices; ++q)
        if (s == q) store_slice(held, tile, q, store);
    };
    // The epilogue of `tile` from slice `from` on (masked stores: all of them); the slices
    // before `from` were written from the accumulators or during the next tile's k blocks.
    auto finish = [&](const Held& held, const Tile& tile, int kind, int from) {
      if constexpr (kRolledSlices && kOp == kOpWgrad) {  // wgrad: always TMA, so the slices roll
        if (kind > 0) {
#pragma unroll 1
          for (int s = from; s < kSlices; ++s) store_slice_at(held, tile, s, true);
        }
      } else {
#pragma unroll
        for (int s = 0; s < kSlices; ++s) {
          // Masked: every slice (the next tile's k blocks wrote them, but the buffers moved on).
          if (kind < 0 || (kind > 0 && s >= from)) {
            store_slice(held, tile, s, kind > 0);
            if (kind < 0) store_masked(tile, s);  // nothing in wgrad (never masked)
          }
        }
      }
    };
    // Moves a finished tile's held slices into the held registers (BF16: rounded once, here).
    auto hold = [&](const float(&acc)[kBN / 2], Held& held) {
#pragma unroll
      for (int i = kDirect * 16; i < kHeldWords; ++i) {
        if constexpr (sizeof(OutT) == 4)
          held[i] = acc[i];
        else
          held[i] = pack_bf16x2(acc[2 * i], acc[2 * i + 1]);
      }
    };

    // The main loop of one tile into `acc`; k block i < kPeeled writes slice kDirect + i of
    // `old` (`old_tile`'s held tile, whose epilogue is `old_kind`). Returns the first slice of
    // `old` that no k block wrote.
    auto mainloop = [&](float(&acc)[kBN / 2], const Tile& tile, const Held& old, const Tile& old_tile, int old_kind) {
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
      // fwd, dgrad: a warpgroup whose 64 rows all lie past the group's end (the second one of
      // the last row block of a group of 128 q + 1 .. 128 q + 64 rows; with clusters of 2 both
      // of a block wholly past it) multiplies nothing, and its tile ends sooner (by as much as
      // the loads allow). Its loop only frees the stages, and the previous tile's held slices
      // are all written after it (a branch around the wgmma inside the k block makes ptxas add
      // a dummy wgmma to every k block, or serialise them all).
      // Only in groups of over two row blocks: a shorter group streams its W tiles, which its
      // row blocks share through L2 while they run in step; with it gate_up fwd with groups of
      // 132 rows took up to 8 % longer, likely from a block running ahead (docs/decisions.md).
      if (tile.row_end - tile.row0 > 2 * kBM && half_past_end(tile)) {
#pragma unroll 1
        for (int kb = tile.kb0; kb < tile.kb1; ++kb) {
          mbar_wait(full_bar + 8 * stage, phase);
          if (lane == 0) release(stage);
          advance();
        }
        return kDirect;
      }
      int held = -1;  // the stage the previous k block read, released once its wgmma is done
      auto k_block = [&](int kb, int old_slice, bool writes_old) {  // a constant unless rolled
        mbar_wait(full_bar + 8 * stage, phase);
        const unsigned sa = a_base + stage * kABytes, sb = b_base + stage * kStageBBytes;
        const unsigned a_lo = a_lo0 + stage * (kABytes >> 4), b_lo = b_lo0 + stage * (kStageBBytes >> 4);
        if constexpr (kOp == kOpWgrad) {
          const int valid = tile.row_end - tile.row0 - kb * 64;
          if (valid < 64) {  // rows of the next group (or past M): zero them for the reduction
            // Rows valid..63 of each 64-row sub-tile (8 KB) are one run of 16-byte chunks.
            const int chunks = (64 - valid) * 8;
#pragma unroll 1
            for (int sub = 0; sub < (kBM + kBN) / 64; ++sub) {
              const unsigned run = (sub < kBM / 64 ? sa + sub * 8192 : sb + (sub - kBM / 64) * 8192) + valid * 128;
              for (int ch = ctid; ch < chunks; ch += 256)
                asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(run + ch * 16), "r"(0) : "memory");
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("bar.sync 1, 256;" ::: "memory");
          }
        }
        fence_acc(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const unsigned long long da = desc_of(a_lo + kk * (kTransA ? 2048 : 32) / 16, 1024);
#pragma unroll
          for (int p = 0; p < kBParts; ++p) {
            const unsigned long long db = desc_of(b_lo + p * (kBBytes >> 4) + kk * (kTransB ? 2048 : 32) / 16, 1024);
            wgmma<kBN, kTransA, kTransB>(acc, da, db);
          }
        }
        wgmma_commit();
        if (writes_old) {
          if constexpr (kRolledSlices) {
            store_slice_at(old, old_tile, old_slice, old_kind > 0);
          } else {
            store_slice(old, old_tile, old_slice, old_kind > 0);  // a constant after unrolling
          }
        }
        wgmma_wait<1>();
        fence_acc(acc);
        if (held >= 0 && lane == 0) release(held);
        held = stage;
        advance();
      };
      // k blocks of the chain's segment left (kChained; none: it never reaches 0), counted from
      // the tile's first. At its end, unless the tile ends there too, the running sum in the
      // chain tile gains the accumulators, which restart from zero. Segments are longer than
      // the peeled blocks, so no held slice is pending then.
      const bool chained = kChained && args.split_ws != nullptr && args.chain_rows > 0;
      int seg_left = chained ? args.chain_rows / 64 : 0;
      auto end_segment = [&](int kb) {
        if (--seg_left != 0) return;
        seg_left = args.chain_rows / 64;
        if (kb + 1 == tile.kb1) return;
        const bool first = kb + 1 - tile.kb0 == seg_left;
        wgmma_wait<0>();
        fence_acc(acc);
        float4* const chain = chain_tile();
        // The first segment stores; later ones add in L2 (red: no round trip, so the tensor
        // cores wait only for the issue; a thread's own later load sees its adds).
#pragma unroll
        for (int i = 0; i < kBN / 8; ++i) {
          float4* const p = chain + i * 256 + ctid;
          if (first)
            __stcg(p, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
          else
            asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(acc[4 * i]),
                         "f"(acc[4 * i + 1]), "f"(acc[4 * i + 2]), "f"(acc[4 * i + 3])
                         : "memory");
          acc[4 * i] = 0.0f, acc[4 * i + 1] = 0.0f, acc[4 * i + 2] = 0.0f, acc[4 * i + 3] = 0.0f;
        }
        fence_acc(acc);
      };
      int kb = tile.kb0;
      if constexpr (kRolledSlices) {
#pragma unroll 1
        for (; kb < tile.kb1; ++kb) {
          k_block(kb, kDirect + kb - tile.kb0, kb - tile.kb0 < kPeeled);
          if constexpr (kChained) end_segment(kb);
        }
      } else {
#pragma unroll
        for (int s = 0; s < kPeeled; ++s)
          if (kb < tile.kb1) k_block(kb++, kDirect + s, true);
        seg_left -= kb - tile.kb0;  // the peeled blocks are the segment's first
#pragma unroll 1
        for (; kb < tile.kb1; ++kb) {
          k_block(kb, 0, false);
          if constexpr (kChained) end_segment(kb);
        }
      }
      wgmma_wait<0>();
      fence_acc(acc);
      if (held >= 0 && lane == 0) release(held);
      if constexpr (kChained) {
        if (chained && tile.kb1 - tile.kb0 > args.chain_rows / 64) {  // the chain's sum, then the last segment's
          const float4* const chain = chain_tile();
#pragma unroll
          for (int i = 0; i < kBN / 8; ++i) {
            const float4 r = __ldcg(chain + i * 256 + ctid);
            acc[4 * i] = r.x + acc[4 * i], acc[4 * i + 1] = r.y + acc[4 * i + 1];
            acc[4 * i + 2] = r.z + acc[4 * i + 2], acc[4 * i + 3] = r.w + acc[4 * i + 3];
          }
        }
      }
      return kDirect + (kb - tile.kb0 < kPeeled ? kb - tile.kb0 : kPeeled);
    };

    // fwd and dgrad split a tile into parts of equal k blocks that finish together, so they
    // pass their sums side by side (gemm_contract.h row_op_split): each part but the last
    // writes its FP32 sum to a workspace tile of its own and counts itself in on the slot's
    // flag; the last waits for all of them, sums them in part order and adds that to its own,
    // which gives the chain's bits ((p0 + p1) + p2, then + its own) in one pass where the
    // chain takes parts - 1 in a row (docs/decisions.md). Returns whether this unit stores
    // the tile.
    auto pass_on_side_by_side = [&](float(&acc)[kBN / 2], const Tile& tile, int* flag) {
      constexpr int kTileFloats = kBM * kBN;
      const float4* const ws = reinterpret_cast<const float4*>(
          split_ws + static_cast<long long>(tile.slot) * (tile.parts - 1) * kTileFloats);
      if (tile.part + 1 < tile.parts) {
        float4* const mine = reinterpret_cast<float4*>(split_ws) +
                             (static_cast<long long>(tile.slot) * (tile.parts - 1) + tile.part) * (kTileFloats / 4);
#pragma unroll
        for (int i = 0; i < kBN / 8; ++i)
          __stcg(mine + i * 256 + ctid, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (ctid == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(flag) : "memory");
        return false;
      }
      if (ctid == 0) {
        int seen;
        do {
          asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
        } while (seen != tile.parts - 1);
        *flag = 0;  // every other part has counted in: zero for the next launch
      }
      asm volatile("bar.sync 1, 256;" ::: "memory");
#pragma unroll
      for (int i = 0; i < kBN / 8; ++i) {
        float4 v[kMaxSplitParts - 1];
#pragma unroll
        for (int q = 0; q < kMaxSplitParts - 1; ++q)
          if (q + 1 < tile.parts) v[q] = __ldcg(ws + q * (kTileFloats / 4) + i * 256 + ctid);
        float4 sum = v[0];
#pragma unroll
        for (int q = 1; q < kMaxSplitParts - 1; ++q)
          if (q + 1 < tile.parts) sum.x += v[q].x, sum.y += v[q].y, sum.z += v[q].z, sum.w += v[q].w;
        acc[4 * i] += sum.x, acc[4 * i + 1] += sum.y, acc[4 * i + 2] += sum.z, acc[4 * i + 3] += sum.w;
      }
      return true;
    };

    // A part of a split wgrad tile (Scheduler::plan_split): adds the previous parts' sum, in chain
    // order, and passes the total on to the next part through its workspace slot (flag
    // sched[2 + slot] = parts done so far). Returns whether this unit stores the tile. Part j
    // waits only for part j - 1, a lower unit index that a running CTA has already taken from
    // the counter, so the chain always moves.
    auto pass_on = [&](float(&acc)[kBN / 2], const Tile& tile) {
      if (tile.parts == 1) return true;
      int* const flag = sched + 2 + tile.slot;
      if constexpr (kOp != kOpWgrad) return pass_on_side_by_side(acc, tile, flag);
      float* const ws = split_ws + static_cast<long long>(tile.slot) * (kBM * kBN);
      if (tile.part > 0) {
        if (ctid == 0) {
          int seen;
          do {
            asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
          } while (seen != tile.part);
        }
        asm volatile("bar.sync 1, 256;" ::: "memory");
#pragma unroll
        for (int i = 0; i < kBN / 8; ++i) {
          const float4 v = __ldcg(reinterpret_cast<const float4*>(ws) + i * 256 + ctid);
          acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
        }
      }
      if (tile.part + 1 == tile.parts) {
        if (ctid == 0) *flag = 0;  // read by nobody else this launch; zero for the next one
        return true;
      }
#pragma unroll
      for (int i = 0; i < kBN / 8; ++i)
        __stcg(reinterpret_cast<float4*>(ws) + i * 256 + ctid,
               make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
      asm volatile("bar.sync 1, 256;" ::: "memory");
      if (ctid == 0) {
        __threadfence();
        asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(tile.part + 1) : "memory");
      }
      return false;
    };

    float acc[kBN / 2];
    if constexpr (kOverlapEpilogue) {
      // Tile i's first kDirect slices are written from the accumulators; the rest are held
      // while tile i + 1's first k blocks write them (their wgmma run meanwhile), and what is
      // left once that main loop ends is written then.
      Held held;
#pragma unroll
      for (int i = kDirect * 16; i < kHeldWords; ++i) held[i] = 0;
      Tile prev{};
      int pending = 0;  // prev's epilogue_kind (0 before the first tile)
      for (;;) {
        const bool more = take(tile);
        const int from = more ? mainloop(acc, tile, held, prev, pending) : kDirect;
        finish(held, prev, pending, from);
        if (!more) break;
        const bool stores = pass_on(acc, tile);
        if constexpr (kDirect > 0) {  // FP32 wgrad: epilogue_kind is kSlices or 0, never masked
          if (stores && epilogue_kind(tile) > 0) {
#pragma unroll
            for (int s = 0; s < kDirect; ++s) store_slice(acc, tile, s, true);
          }
        }
        hold(acc, held);
        prev = tile, pending = stores ? epilogue_kind(tile) : 0;
      }
    } else {  // compact wgrad: the tensor cores wait for each epilogue
      while (take(tile)) {
        if constexpr (sizeof(OutT) == 4) {
          mainloop(acc, tile, acc, tile, 0);
          if (pass_on(acc, tile)) finish(acc, tile, epilogue_kind(tile), 0);
        } else {
          Held held{};
          mainloop(acc, tile, held, tile, 0);  // kPeeled = 0: no k block reads `held`
          if (pass_on(acc, tile)) {
            hold(acc, held);
            finish(held, tile, epilogue_kind(tile), 0);
          }
        }
      }
    }
    if (ctid % 128 == 0) bulk_wait_read<0>();  // shared memory stays valid until TMA has read it
  }
  // No CTA leaves while a peer may still arrive on its barriers.
  if constexpr (kCluster > 1) cluster_sync();
  if (counted) {
    // The last CTA out (every other CTA has taken its last index) zeroes the counters for
    // the next launch.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(sched + 1, 1) == int(gridDim.x) - 1) {
        atomicExch(sched, 0);
        atomicExch(sched + 1, 0);
      }
    }
  }
}

}  // namespace cake::gemm
