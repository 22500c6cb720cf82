// grouped_gemm ops: ragged BF16 grouped GEMM for MoE experts (fwd, dgrad, wgrad with BF16 or
// FP32 output and accumulate), groups given by device offsets and never read on the host.
// The binder fills the argument struct each kernel takes (grouped_gemm_contract.h): the TMA
// descriptors of the sm90 programs, and the launch geometry of each kind of program.
#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

#include "driver.hpp"
#include "error.hpp"
#include "grouped_gemm_contract.h"
#include "op_family.hpp"

namespace cake::ops {
namespace {

using gg::TmaDesc;
static_assert(sizeof(CUtensorMap) == sizeof(TmaDesc), "a tensor map is copied into a TmaDesc");

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// Rank first, so the dims can be read from it before the full shape check.
void require_rank(const TensorView& t, size_t rank, const char* dims) {
  if (t.shape.size() != rank)
    throw ArgumentError(t.name, "must be " + std::to_string(rank) + "-D " + dims + ", got " +
                                    std::to_string(t.shape.size()) + "-D");
}

// A fully contiguous tensor of exactly `shape` (named `dims`, e.g. "[M, K]") whose base is
// 16-byte aligned: TMA and the 16-byte vector accesses of every program need it.
void require_operand(const TensorView& t, const std::vector<int64_t>& shape, const char* dims,
                     std::initializer_list<DType> dtypes) {
  require_dtype(t, dtypes);
  require_rank(t, shape.size(), dims);
  if (t.shape != shape)
    throw ArgumentError(t.name, "shape " + shape_text(t.shape) + " differs from " + dims + " = " + shape_text(shape));
  require_contiguous(t);
  if (t.numel() > 0 && t.alignment() < 16)
    throw ArgumentError(t.name, "base pointer must be 16-byte aligned, is " + std::to_string(t.alignment()) +
                                    "-byte aligned");
}

// N and K are row lengths of some operand: TMA needs 16-byte row strides (multiples of 8
// bf16 elements), and a zero extent has no tensor map.
void require_inner(const TensorView& t, const char* dim, int64_t v) {
  if (v < 8 || v % 8 != 0)
    throw ArgumentError(t.name, std::string(dim) + " = " + std::to_string(v) +
                                    " must be a positive multiple of 8 (16-byte rows for TMA)");
}

// The kernels take every dim as an int.
void require_int(const TensorView& t, const char* dim, int64_t v) {
  if (v > INT_MAX)
    throw ArgumentError(t.name, std::string(dim) + " = " + std::to_string(v) + " is larger than cake supports (2^31 - 1)");
}

void require_offs(const TensorView& offs, int64_t e) {
  require_dtype(offs, {DType::i32});
  require_rank(offs, 1, "[E]");
  if (offs.shape[0] != e)
    throw ArgumentError(offs.name, "has " + std::to_string(offs.shape[0]) + " entries, E = " + std::to_string(e));
  require_contiguous(offs);
}

// One checked problem: the tensors by argument name and the dims M, N, K, E.
struct Checked {
  std::vector<TensorView> tensors;  // output first
  int64_t m = 0, n = 0, k = 0, e = 0;
};

// Same device, and the output (tensors[0]) overlaps no input: the kernels read inputs while
// writing the output, and nothing is accepted that would make that order matter.
void require_device_and_overlap(const Checked& c) {
  const TensorView& out = c.tensors[0];
  for (size_t i = 1; i < c.tensors.size(); ++i) {
    require_same_device(out, c.tensors[i]);
    require_no_overlap(out, c.tensors[i]);
  }
}

// Each op's tensors: the output, then the kernel's operands a and b, with their dims by
// letter (M, N, K, E) and dtypes.
struct TensorSpec {
  const char* name;
  const char* dims;  // e.g. "MK": [M, K]
  std::initializer_list<DType> dtypes;
};
struct GgSpec {
  TensorSpec out, a, b;
};
const GgSpec& spec(int op) {
  static const GgSpec fwd{{"y", "MN", {DType::bf16}}, {"x", "MK", {DType::bf16}}, {"w", "ENK", {DType::bf16}}};
  static const GgSpec dgrad{{"dx", "MK", {DType::bf16}}, {"g", "MN", {DType::bf16}}, {"w", "ENK", {DType::bf16}}};
  // Contiguity also rules out an expanded or self-overlapping dw, which accumulate would
  // read and write through several aliases.
  static const GgSpec wgrad{{"dw", "ENK", {DType::bf16, DType::f32}}, {"g", "MN", {DType::bf16}}, {"x", "MK", {DType::bf16}}};
  return op == gg::kOpFwd ? fwd : op == gg::kOpDgrad ? dgrad : wgrad;
}

std::string dims_text(const char* dims) {
  std::string t = "[";
  for (const char* d = dims; *d; ++d) t += (d == dims ? "" : ", ") + std::string(1, *d);
  return t + "]";
}

// The dims come from the inputs (a, then b; E from offs when neither has it), each checked
// where it is first seen; then every tensor's full shape, dtype, layout and alignment.
Checked check(int op, const OpCall& call) {
  const GgSpec& sp = spec(op);
  Checked c;
  c.tensors = {call.at(sp.out.name), call.at(sp.a.name), call.at(sp.b.name), call.at("offs")};
  const TensorView &out = c.tensors[0], &a = c.tensors[1], &b = c.tensors[2], &offs = c.tensors[3];
  std::map<char, int64_t> dim;
  auto discover = [&](const TensorView& t, const char* dims) {
    require_rank(t, std::strlen(dims), dims_text(dims).c_str());
    for (size_t i = 0; dims[i]; ++i) {
      const char d = dims[i];
      if (dim.count(d)) continue;
      const int64_t v = dim[d] = t.shape[i];
      if (d == 'N' || d == 'K') require_inner(t, std::string(1, d).c_str(), v);
      if (d == 'E' && v < 1) throw ArgumentError(t.name, "E = 0: at least one group is needed");
      require_int(t, std::string(1, d).c_str(), v);
    }
  };
  discover(a, sp.a.dims);
  discover(b, sp.b.dims);
  if (!dim.count('E')) discover(offs, "E");
  c.m = dim['M'], c.n = dim['N'], c.k = dim['K'], c.e = dim['E'];
  for (const auto& [t, ts] : {std::pair{&a, &sp.a}, std::pair{&b, &sp.b}, std::pair{&out, &sp.out}}) {
    std::vector<int64_t> shape;
    for (const char* d = ts->dims; *d; ++d) shape.push_back(dim[*d]);
    require_operand(*t, shape, dims_text(ts->dims).c_str(), ts->dtypes);
  }
  require_offs(offs, c.e);
  require_device_and_overlap(c);
  return c;
}

Problem make_problem(const char* op, const Checked& c, bool accumulate, const OpOptions& opt) {
  Problem p;
  p.op = op;
  p.dims = {{"m", c.m}, {"n", c.n}, {"k", c.k}, {"e", c.e}};
  p.accumulate = accumulate;
  p.deterministic = opt.deterministic;
  p.candidate = opt.candidate;
  for (const auto& t : c.tensors) p.dtypes[t.name] = t.dtype, p.align[t.name] = t.alignment();
  return p;
}

// A 2-D or 3-D tensor map (dims innermost first; byte strides of dims 1..rank-1) with the
// layout every sm90 program expects: 128-byte swizzle, 256-byte L2 promotion, no OOB fill
// (out-of-range elements read as zeros, and are not written by stores).
TmaDesc encode_tma(DType t, uintptr_t ptr, std::vector<uint64_t> dims, std::vector<uint64_t> strides,
                   std::vector<uint32_t> box, const std::string& what) {
  const DriverApi& api = Driver::instance().api();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw Error("the CUDA driver (" + Driver::instance().path() +
                ") has no cuTensorMapEncodeTiled (CUDA 12.0+ drivers): the sm90 grouped GEMM programs cannot run; "
                "force a portable candidate (OpOptions::candidate)");
  const uint32_t rank = uint32_t(dims.size());
  std::vector<uint32_t> elem(rank, 1);
  CUtensorMap map;
  CUresult r = api.cuTensorMapEncodeTiled(
      &map, t == DType::f32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank,
      reinterpret_cast<void*>(ptr), dims.data(), strides.data(), box.data(), elem.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw_driver_error(("cuTensorMapEncodeTiled (" + what + ")").c_str(), r);
  TmaDesc d;
  std::memcpy(&d, &map, sizeof(d));
  return d;
}

// The argument a stage's kernel parameter reads: the stage's bind map, else `fallback`.
uintptr_t bound(const PlannedStage& s, const ArgMap& args, const std::string& param, const std::string& fallback) {
  auto it = s.bind.find(param);
  return args.at(it == s.bind.end() ? fallback : it->second);
}

int param_int(const PlannedStage& s, const char* name) { return s.program->params.at(name).get<int>(); }

// `sm_count`: the SMs the launch fills (max_sms); `device_sms`: the device's, which the tail
// split is planned for, so that a capped grid computes the same bits.
Binder grouped_gemm_binder(Runtime& rt, int op, const Checked& c, int sm_count, int device_sms) {
  const uint64_t M = uint64_t(c.m), N = uint64_t(c.n), K = uint64_t(c.k), E = uint64_t(c.e);
  Runtime* rtp = &rt;
  return [=](const Plan&, const PlannedStage& s, const ArgMap& args, LaunchStage& ls) {
    const GgSpec& names = spec(op);
    const uintptr_t a = bound(s, args, "a", names.a.name), b = bound(s, args, "b", names.b.name),
                    out = bound(s, args, "out", names.out.name), offs = bound(s, args, "offs", "offs");
    const std::string kind = s.program->params.at("kind").get<std::string>();
    const int threads = param_int(s, "threads"), smem = param_int(s, "smem");
    if (kind == "sm90") {
      gg::Sm90Args k{};
      // The maps of the kernel's host contract (sm90_grouped_gemm.cuh): operand boxes of 64
      // inner elements (128 bytes, the swizzle span); the output box 128 bytes by 64 rows in
      // the output's dtype (the composed route's scratch has it too).
      const uint32_t bm = uint32_t(param_int(s, "tile_m")), bn = uint32_t(param_int(s, "tile_n")),
                     cluster = uint32_t(param_int(s, "cluster"));
      const DType ot = s.program->params.at("kernels").at(size_t(s.kernel)).at("out") == "f32" ? DType::f32 : DType::bf16;
      const uint64_t osz = uint64_t(dtype_size(ot));
      const uint32_t obox = uint32_t(128 / osz);
      switch (op) {
        case gg::kOpFwd:
          k.a = encode_tma(DType::bf16, a, {K, M}, {2 * K}, {64, bm}, "x");
          k.b = encode_tma(DType::bf16, b, {K, N, E}, {2 * K, 2 * N * K}, {64, bn / cluster, 1}, "w");
          k.out_map = encode_tma(ot, out, {N, M}, {osz * N}, {obox, 64}, "y");
          break;
        case gg::kOpDgrad:
          k.a = encode_tma(DType::bf16, a, {N, M}, {2 * N}, {64, bm}, "g");
          k.b = encode_tma(DType::bf16, b, {K, N, E}, {2 * K, 2 * N * K}, {64, 64, 1}, "w");
          k.out_map = encode_tma(ot, out, {K, M}, {osz * K}, {obox, 64}, "dx");
          break;
        default:
          k.a = encode_tma(DType::bf16, a, {N, M}, {2 * N}, {64, 64}, "g");
          k.b = encode_tma(DType::bf16, b, {K, M}, {2 * K}, {64, 64}, "x");
          k.out_map = encode_tma(ot, out, {K, N, E}, {osz * K, osz * N * K}, {obox, 64, 1}, "dw");
          break;
      }
      k.out = reinterpret_cast<void*>(out);
      k.offs = reinterpret_cast<const int*>(offs);
      // The tile counters of the dynamic schedule (none: round-robin).
      const auto counters = args.find("counters");
      k.sched = reinterpret_cast<int*>(counters == args.end() ? uintptr_t(0) : counters->second);
      k.groups = int(E), k.m = int(M), k.n = int(N), k.k = int(K);
      // The tail split: its workspace, planned for the device's SMs.
      const auto w = args.find("workspace");
      if (w != args.end() &&
          (int_param_or_zero(s, "counters") < gg::kCounterInts ||
           int_param_or_zero(s, "workspace_per_sm") < int64_t(bm) * bn * 4))
        throw Error("grouped_gemm: program " + s.program->name + ": workspace_per_sm needs \"counters\": " +
                    std::to_string(gg::kCounterInts) + " and a tile_m x tile_n FP32 tile per SM");
      k.split_ws = reinterpret_cast<float*>(w == args.end() ? uintptr_t(0) : w->second);
      k.split_ctas = device_sms;
      ls.args.add(k);
      // Persistent: one CTA per SM walks every tile; a whole number of clusters.
      ls.grid[0] = unsigned(std::max<int>(int(cluster), sm_count / int(cluster) * int(cluster)));
    } else if (kind == "portable") {
      gg::PortableArgs k{};
      k.a = reinterpret_cast<const void*>(a);
      k.b = reinterpret_cast<const void*>(b);
      k.out = reinterpret_cast<void*>(out);
      k.offs = reinterpret_cast<const int*>(offs);
      k.groups = int(E), k.m = int(M), k.n = int(N), k.k = int(K);
      ls.args.add(k);
      // Persistent too: as many CTAs as fit on the chip at once (shared memory and registers
      // decide), so the opt-in must come before the occupancy query.
      const int per_sm = ops::resident_blocks(*rtp, ls.function, threads, smem);
      ls.grid[0] = unsigned(sm_count * std::clamp(per_sm, 1, 4));
    } else {
      throw Error("grouped_gemm: program " + s.program->name + " has an unknown kind '" + kind + "'");
    }
    ls.block[0] = unsigned(threads);
    ls.smem = unsigned(smem);
  };
}

// The struct a program's kernel takes, by its kind (the binder above packs the same).
KernelArgs kernel_args(const Program& program, int) {
  const std::string kind = program.params.value("kind", "");
  if (kind == "sm90") return {"cake::gg::Sm90Args", sizeof(gg::Sm90Args)};
  if (kind == "portable") return {"cake::gg::PortableArgs", sizeof(gg::PortableArgs)};
  return {};
}

OpPlan make_plan(int op, const char* op_name, const OpCall& call) {
  const Checked c = check(op, call);
  const OpOptions& opt = call.options;
  const TensorView& out = c.tensors[0];
  OpPlan p;
  p.device = out.device;
  if (c.m == 0) {
    // No rows: fwd and dgrad have nothing to write; every wgrad group is empty, so dw is zeros
    // (or, accumulating, unchanged). A zero fill needs no kernel and no plan.
    p.noop = op != gg::kOpWgrad || opt.accumulate;
    if (!p.noop) {
      p.zero_fill = out.data;
      p.zero_fill_bytes = size_t(out.numel()) * size_t(dtype_size(out.dtype));
      p.why = "M = 0: every group is empty, dw is zeros";
    }
    return p;
  }
  p.problem = make_problem(op_name, c, opt.accumulate, opt);
  for (const auto& t : c.tensors) p.args[t.name] = t.data;
  p.composed_elements = c.e * c.n * c.k;  // a composed accumulate adds over dw
  p.binder = [op, c, opt](Runtime& rt, const DeviceContext& dc) {
    return grouped_gemm_binder(rt, op, c, grid_sms(dc, opt), dc.info->sm_count);
  };
  return p;
}

}  // namespace

const FamilyOps& op_family_grouped_gemm() {
  const std::vector<DType> bf16 = {DType::bf16};
  const std::vector<DType> i32 = {DType::i32};
  static const FamilyOps family{
      "grouped_gemm",
      {{"grouped_gemm.fwd",
        {{"y", bf16, true}, {"x", bf16}, {"w", bf16}, {"offs", i32}},
        false, false, [](const OpCall& c) { return make_plan(gg::kOpFwd, "grouped_gemm.fwd", c); }},
       {"grouped_gemm.dgrad",
        {{"dx", bf16, true}, {"g", bf16}, {"w", bf16}, {"offs", i32}},
        false, false, [](const OpCall& c) { return make_plan(gg::kOpDgrad, "grouped_gemm.dgrad", c); }},
       {"grouped_gemm.wgrad",
        {{"dw", {DType::f32, DType::bf16}, true}, {"g", bf16}, {"x", bf16}, {"offs", i32}},
        true, false, [](const OpCall& c) { return make_plan(gg::kOpWgrad, "grouped_gemm.wgrad", c); }}},
      {},
      kernel_args};
  return family;
}

}  // namespace cake::ops
