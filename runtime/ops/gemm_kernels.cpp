// The GEMM kernels' binder (gemm_kernels.hpp).
#include "gemm_kernels.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "driver.hpp"
#include "error.hpp"

namespace cake::ops {
namespace {

using gemm::TmaDesc;
static_assert(sizeof(CUtensorMap) == sizeof(TmaDesc), "a tensor map is copied into a TmaDesc");

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::string dims_text(const std::string& dims) {
  std::string t = "[";
  for (size_t i = 0; i < dims.size(); ++i) t += (i ? ", " : "") + std::string(1, dims[i]);
  return t + "]";
}

// Rank first, so the dims can be read from it before the full shape check.
void require_rank(const TensorView& t, const std::string& dims) {
  const size_t rank = dims.size();
  if (t.shape.size() != rank)
    throw ArgumentError(t.name, "must be " + std::to_string(rank) + "-D " + dims_text(dims) + ", got " +
                                    std::to_string(t.shape.size()) + "-D");
}

// A dim's value where it is first seen.
void require_dim(const TensorView& t, char d, int64_t v) {
  const std::string name(1, d);
  // N and K are row lengths of some operand: TMA needs 16-byte row strides (multiples of 8
  // bf16 elements), and a zero extent has no tensor map.
  if ((d == 'N' || d == 'K') && (v < 8 || v % 8 != 0))
    throw ArgumentError(t.name, name + " = " + std::to_string(v) + " must be a positive multiple of 8 (16-byte rows for TMA)");
  if (d == 'E' && v < 1) throw ArgumentError(t.name, "E = 0: at least one group is needed");
  if (v > INT_MAX)
    throw ArgumentError(t.name, name + " = " + std::to_string(v) + " is larger than cake supports (2^31 - 1)");
}

// The rows of a [T, C] or [B, T, C] view: each row contiguous, the row and head strides
// multiples of 16 bytes (TMA's global strides), and no element reached twice (the strides,
// smaller first, each at least the extent of what the one before spans); a dim of one element
// takes the stride of a contiguous tensor.
RowLayout strided_rows(const TensorView& t) {
  const size_t r = t.shape.size();
  const int64_t c = t.shape[r - 1], rows = t.shape[r - 2], heads = r == 3 ? t.shape[0] : 1;
  if (c > 1 && t.strides[r - 1] != 1)
    throw ArgumentError(t.name, "strides " + shape_text(t.strides) + ": each row must be contiguous (stride 1 in the last dim)");
  RowLayout l;
  l.ld = rows > 1 ? t.strides[r - 2] : c;
  if (l.ld > INT_MAX || (heads > 1 && t.strides[0] >= (int64_t(1) << 40) / dtype_size(t.dtype)))
    throw ArgumentError(t.name, "strides " + shape_text(t.strides) +
                                    " are larger than cake supports (rows 2^31 - 1 elements, heads under 2^40 bytes apart)");
  l.head = heads > 1 ? t.strides[0] : rows * l.ld;
  const int64_t unit = 16 / dtype_size(t.dtype);
  for (const int64_t s : {l.ld, l.head})
    if (s % unit != 0)
      throw ArgumentError(t.name, "strides " + shape_text(t.strides) + ": row and head strides must be multiples of " +
                                      std::to_string(unit) + " elements (16 bytes, for TMA)");
  // (stride, extent) of the rows and of the heads, the smaller stride first.
  std::pair<int64_t, int64_t> in{l.ld, rows}, out{l.head, heads};
  if (heads > 1 && rows > 1 && out.first < in.first) std::swap(in, out);
  const bool apart = (rows <= 1 || l.ld >= c) && (heads <= 1 || l.head >= c) &&
                     (heads <= 1 || rows <= 1 || out.first / in.second >= in.first);
  if (!apart)
    throw ArgumentError(t.name, "strides " + shape_text(t.strides) + " reach some elements twice (overlapping rows or heads)");
  return l;
}

// A tensor of exactly the spec's shape, dtype and alignment: fully contiguous, or with
// strided rows where the spec allows them.
void require_operand(const TensorView& t, const OperandSpec& spec, const std::map<char, int64_t>& dims,
                     GemmOperands& found) {
  require_dtype(t, spec.dtypes);
  std::vector<int64_t> shape;
  for (char d : spec.dims) shape.push_back(dims.at(d));
  if (t.shape != shape)
    throw ArgumentError(t.name, "shape " + shape_text(t.shape) + " differs from " + dims_text(spec.dims) + " = " +
                                    shape_text(shape));
  if (spec.strided_rows && !t.contiguous())
    found.rows[t.name] = strided_rows(t);
  else
    require_contiguous(t);
  if (spec.aligned && t.numel() > 0 && t.alignment() < 16)
    throw ArgumentError(t.name, "base pointer must be 16-byte aligned, is " + std::to_string(t.alignment()) +
                                    "-byte aligned");
}

// A 2-D or 3-D tensor map (dims innermost first; byte strides of dims 1..rank-1) with the
// layout every sm90 program expects: 128-byte swizzle, 256-byte L2 promotion, no OOB fill
// (out-of-range elements read as zeros, and are not written by stores).
TmaDesc encode_tma(DType t, uintptr_t ptr, std::vector<uint64_t> dims, std::vector<uint64_t> strides,
                   std::vector<uint32_t> box, const std::string& what) {
  const DriverApi& api = Driver::instance().api();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw Error("the CUDA driver (" + Driver::instance().path() +
                ") has no cuTensorMapEncodeTiled (CUDA 12.0+ drivers): the sm90 GEMM programs cannot run; "
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
const std::string& bound_name(const PlannedStage& s, const std::string& param, const std::string& fallback) {
  auto it = s.bind.find(param);
  return it == s.bind.end() ? fallback : it->second;
}
uintptr_t bound(const PlannedStage& s, const ArgMap& args, const std::string& param, const std::string& fallback) {
  return args.at(bound_name(s, param, fallback));
}

int param_int(const PlannedStage& s, const char* name) { return s.program->params->at(name).get<int>(); }

}  // namespace

GemmOperands check_operands(const OpCall& call, const std::vector<OperandSpec>& specs) {
  GemmOperands c;
  for (const OperandSpec& sp : specs) c.tensors.push_back(call.at(sp.name));
  for (size_t i = 1; i <= specs.size(); ++i) {  // the inputs, then the output
    const size_t at = i % specs.size();
    const TensorView& t = c.tensors[at];
    require_rank(t, specs[at].dims);
    for (size_t j = 0; j < specs[at].dims.size(); ++j) {
      const char d = specs[at].dims[j];
      if (c.dims.count(d)) continue;
      require_dim(t, d, c.dims[d] = t.shape[j]);
    }
  }
  for (size_t i = 1; i <= specs.size(); ++i)
    require_operand(c.tensors[i % specs.size()], specs[i % specs.size()], c.dims, c);
  const TensorView& out = c.tensors[0];
  for (size_t i = 1; i < c.tensors.size(); ++i) {
    require_same_device(out, c.tensors[i]);
    require_no_overlap(out, c.tensors[i]);
  }
  return c;
}

OpPlan no_rows_plan(int op, const TensorView& out, const OpOptions& opt, std::string why) {
  OpPlan p;
  p.device = out.device;
  p.noop = op != gemm::kOpWgrad || opt.accumulate || out.numel() == 0;
  if (!p.noop) {
    p.zero_fill = out.data;
    p.zero_fill_bytes = size_t(out.numel()) * size_t(dtype_size(out.dtype));
    p.why = std::move(why);
  }
  return p;
}

Problem gemm_problem(const char* op, std::map<std::string, int64_t> dims, const std::vector<TensorView>& tensors,
                     const OpOptions& opt) {
  Problem p;
  p.op = op;
  p.dims = std::move(dims);
  p.accumulate = opt.accumulate;
  p.deterministic = opt.deterministic;
  p.candidate = opt.candidate;
  for (const auto& t : tensors) p.dtypes[t.name] = t.dtype, p.align[t.name] = t.alignment();
  return p;
}

Binder gemm_binder(Runtime& rt, const GemmCall& call, int sm_count, int device_sms) {
  const uint64_t M = uint64_t(call.m), N = uint64_t(call.n), K = uint64_t(call.k), E = uint64_t(call.e);
  const int op = call.op;
  Runtime* rtp = &rt;
  return [=](const Plan&, const PlannedStage& s, const ArgMap& args, LaunchStage& ls) {
    const uintptr_t a = bound(s, args, "a", call.a), b = bound(s, args, "b", call.b),
                    out = bound(s, args, "out", call.out),
                    offs = call.offs.empty() ? uintptr_t(0) : bound(s, args, "offs", call.offs);
    const std::string kind = s.program->params->at("kind").get<std::string>();
    // The maps and the argument struct are the call's op's: a program of another op (a route
    // that names the wrong program) would read them as its own.
    static const char* const kOpNames[] = {"fwd", "dgrad", "wgrad"};
    if (s.program->params->value("op", "") != kOpNames[op])
      throw Error("program " + s.program->name + " computes " + s.program->params->value("op", "?") +
                  ", the call's GEMM is " + kOpNames[op]);
    const int threads = param_int(s, "threads"), smem = param_int(s, "smem");
    // The row-grouped operands (fwd, dgrad: a and out; wgrad: a and b; `lr` the second) and
    // their rows; heads lie apart when any operand's do not follow each other.
    const uint64_t T = M / E;
    auto layout = [&](const char* param, const std::string& fallback, uint64_t cols) {
      const auto it = call.rows.find(bound_name(s, param, fallback));
      return it != call.rows.end() ? it->second : RowLayout{int64_t(cols), int64_t(T * cols)};
    };
    const RowLayout la = layout("a", call.a, op == gemm::kOpFwd ? K : N);
    const RowLayout lr = op == gemm::kOpWgrad ? layout("b", call.b, K) : layout("out", call.out, op == gemm::kOpFwd ? N : K);
    const bool heads = call.offs.empty() && E > 1 &&
                       (uint64_t(la.head) != T * uint64_t(la.ld) || uint64_t(lr.head) != T * uint64_t(lr.ld));
    if (heads && T * E != M)
      throw Error("program " + s.program->name + ": heads apart in memory need groups of one size (" + std::to_string(M) +
                  " rows in " + std::to_string(E) + " groups)");
    // FP32 wgrad programs may sum a tile's rows in segments through a chain tile ("chain").
    const bool chain = s.program->params->value("chain", false);
    if (chain && (op != gemm::kOpWgrad || s.program->params->at("kernels").at(size_t(s.kernel)).at("out") != "f32"))
      throw Error("program " + s.program->name + ": \"chain\" is for FP32 wgrad programs");
    if (kind == "sm90") {
      gemm::Sm90Args k{};
      // The maps of the kernel's host contract (sm90_gemm.cuh): operand boxes of 64
      // inner elements (128 bytes, the swizzle span); the output box 128 bytes by 64 rows in
      // the output's dtype (the composed route's scratch has it too).
      const uint32_t bm = uint32_t(param_int(s, "tile_m")), bn = uint32_t(param_int(s, "tile_n")),
                     cluster = uint32_t(param_int(s, "cluster"));
      const DType ot = s.program->params->at("kernels").at(size_t(s.kernel)).at("out") == "f32" ? DType::f32 : DType::bf16;
      const uint64_t osz = uint64_t(dtype_size(ot));
      const uint32_t obox = uint32_t(128 / osz);
      // B parts (fwd): the weight is P stacked [N, K] parts per group, summed by the kernel.
      const int b_parts = s.program->params->value("b_parts", 1);
      if (b_parts < 1 || (b_parts != 1 && (op != gemm::kOpFwd || cluster != 1)))
        throw Error("program " + s.program->name + ": b_parts " + std::to_string(b_parts) +
                    " (B parts are summed by fwd programs of clusters of 1 only)");
      const uint64_t parts = uint64_t(b_parts);
      // A row-grouped map, 3-D: {cols, M, 1} over all rows, or with heads {cols, T, E}.
      auto rows_map = [&](DType t, uintptr_t p, uint64_t cols, const RowLayout& l, uint32_t box_cols, uint32_t box_rows,
                          const std::string& what) {
        const uint64_t sz = uint64_t(dtype_size(t)), ld = sz * uint64_t(l.ld);
        if (heads) return encode_tma(t, p, {cols, T, E}, {ld, sz * uint64_t(l.head)}, {box_cols, box_rows, 1}, what);
        return encode_tma(t, p, {cols, M, 1}, {ld, ld * M}, {box_cols, box_rows, 1}, what);
      };
      switch (op) {
        case gemm::kOpFwd:
          k.a = rows_map(DType::bf16, a, K, la, 64, bm, call.a);
          k.b = encode_tma(DType::bf16, b, {K, parts * N, E}, {2 * K, 2 * parts * N * K}, {64, bn / cluster, 1}, call.b);
          k.out_map = rows_map(ot, out, N, lr, obox, 64, call.out);
          break;
        case gemm::kOpDgrad:
          k.a = rows_map(DType::bf16, a, N, la, 64, bm, call.a);
          k.b = encode_tma(DType::bf16, b, {K, N, E}, {2 * K, 2 * N * K}, {64, 64, 1}, call.b);
          k.out_map = rows_map(ot, out, K, lr, obox, 64, call.out);
          break;
        default:
          k.a = rows_map(DType::bf16, a, N, la, 64, 64, call.a);
          k.b = rows_map(DType::bf16, b, K, lr, 64, 64, call.b);
          k.out_map = encode_tma(ot, out, {K, N, E}, {osz * K, osz * N * K}, {obox, 64, 1}, call.out);
          break;
      }
      k.heads = heads ? 1 : 0;
      k.out_ld = int(op == gemm::kOpWgrad ? K : uint64_t(lr.ld));
      int groups = int(E);
      if (s.program->params->value("reduce_groups", false)) {
        // The non-deterministic split: T's rows as groups that all reduce-add into dw.
        if (op != gemm::kOpWgrad || E != 1)
          throw Error("program " + s.program->name + " splits one wgrad's rows; the call has " + std::to_string(E) +
                      " groups");
        groups = gemm::reduce_parts(device_sms, int(((N + bm - 1) / bm) * ((K + bn - 1) / bn)), int(M));
      }
      k.out = reinterpret_cast<void*>(out);
      k.offs = reinterpret_cast<const int*>(offs);
      // The tile counters of the dynamic schedule (none: round-robin).
      const auto counters = args.find("counters");
      k.sched = reinterpret_cast<int*>(counters == args.end() ? uintptr_t(0) : counters->second);
      k.groups = groups, k.m = int(M), k.n = int(N), k.k = int(K);
      // The tail split: its workspace, planned for the device's SMs; with "chain" (FP32
      // wgrad) the chain tiles after it (gemm_contract.h kChainRows).
      const auto w = args.find("workspace");
      const int64_t ws_per_sm = gemm::sm90_workspace_per_sm(int(bm), int(bn), chain);
      if (w != args.end() &&
          (int_param_or_zero(s, "counters") < gemm::kCounterInts || int_param_or_zero(s, "workspace_per_sm") < ws_per_sm))
        throw Error("program " + s.program->name + ": workspace_per_sm needs \"counters\": " +
                    std::to_string(gemm::kCounterInts) + " and " + std::to_string(ws_per_sm) + " bytes (" +
                    (chain ? "two tile_m x tile_n FP32 tiles, with \"chain\"" : "a tile_m x tile_n FP32 tile") +
                    ") per SM");
      k.split_ws = reinterpret_cast<float*>(w == args.end() ? uintptr_t(0) : w->second);
      k.split_ctas = device_sms;
      k.chain_rows = chain && k.split_ws != nullptr ? gemm::kChainRows : 0;
      ls.args.add(k);
      // Persistent: one CTA per SM walks every tile; a whole number of clusters.
      ls.grid[0] = unsigned(std::max<int>(int(cluster), sm_count / int(cluster) * int(cluster)));
    } else if (kind == "portable") {
      gemm::PortableArgs k{};
      k.a = reinterpret_cast<const void*>(a);
      k.b = reinterpret_cast<const void*>(b);
      k.out = reinterpret_cast<void*>(out);
      k.offs = reinterpret_cast<const int*>(offs);
      k.groups = int(E), k.m = int(M), k.n = int(N), k.k = int(K);
      k.heads = heads ? 1 : 0;
      k.a_ld = int(la.ld), k.a_head = heads ? la.head : 0;
      const bool wgrad = op == gemm::kOpWgrad;
      k.b_ld = int(wgrad ? lr.ld : int64_t(K)), k.b_head = wgrad && heads ? lr.head : 0;
      k.out_ld = int(wgrad ? int64_t(K) : lr.ld), k.out_head = !wgrad && heads ? lr.head : 0;
      // FP32 wgrad with "chain": a chain tile of workspace per CTA (gemm_contract.h kChainRows),
      // which bounds the CTAs per SM.
      int max_per_sm = 4;
      if (chain) {
        const int64_t tile_bytes = int64_t(param_int(s, "tile_m")) * param_int(s, "tile_n") * 4;
        const auto w = args.find("workspace");
        max_per_sm = int(std::min<int64_t>(4, int_param_or_zero(s, "workspace_per_sm") / tile_bytes));
        if (w == args.end() || max_per_sm < 1)
          throw Error("program " + s.program->name + ": \"chain\" needs workspace_per_sm of at least one tile_m x "
                      "tile_n FP32 tile (" + std::to_string(tile_bytes) + " bytes)");
        k.chain = reinterpret_cast<float*>(w->second);
        k.chain_rows = gemm::kChainRows;
      }
      ls.args.add(k);
      // Persistent too: as many CTAs as fit on the chip at once (shared memory and registers
      // decide), so the opt-in must come before the occupancy query.
      const int per_sm = ops::resident_blocks(*rtp, ls.function, threads, smem);
      ls.grid[0] = unsigned(sm_count * std::clamp(per_sm, 1, max_per_sm));
    } else {
      throw Error("program " + s.program->name + " has an unknown kind '" + kind + "'");
    }
    ls.block[0] = unsigned(threads);
    ls.smem = unsigned(smem);
  };
}

namespace {
// FP32 wgrad programs with "chain" sum at most kChainRows rows in one run (gemm_contract.h);
// `rows` 0: the group sizes are on the device.
std::string chain_note(const Program& prog, int64_t rows) {
  if (!prog.params->value("chain", false)) return "";
  const std::string seg = std::to_string(gemm::kChainRows);
  const std::string tail = ", added in order through a chain tile of workspace per CTA (same bits for any grid)";
  if (rows == 0) return "FP32 sums: a group of over " + seg + " rows sums in segments of " + seg + tail;
  if (rows <= gemm::kChainRows) return "FP32 sums: one run (" + std::to_string(rows) + " rows, at most " + seg + " a run)";
  return "FP32 sums: " + std::to_string(rows) + " rows in segments of " + seg + " (" +
         std::to_string((rows + gemm::kChainRows - 1) / gemm::kChainRows) + " a whole tile, fewer a split part's)" + tail;
}
}  // namespace

std::vector<std::string> gemm_split_notes(const Plan& plan, int64_t rows, int64_t groups, int64_t n, int64_t k,
                                          int device_sms) {
  if (plan.stages.empty()) return {};
  const Program& prog = *plan.stages[0].program;
  std::vector<std::string> notes;
  if (std::string chain = chain_note(prog, rows); !chain.empty()) notes.push_back(std::move(chain));
  if (prog.params->value("kind", "") != "sm90") return notes;
  const std::string op = prog.params->at("op").get<std::string>();
  const int64_t bm = prog.params->at("tile_m").get<int64_t>(), bn = prog.params->at("tile_n").get<int64_t>();
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (prog.params->value("reduce_groups", false) && rows > 0 && groups == 1) {
    const int64_t tiles = cdiv(n, bm) * cdiv(k, bn);
    const int parts = tiles > INT_MAX || rows > INT_MAX ? 1 : gemm::reduce_parts(device_sms, int(tiles), int(rows));
    char text[256];
    std::snprintf(text, sizeof(text),
                  "split over T: %lld rows in %d parts of up to %d, %lld tiles of %lld x %lld each (%lld units on %d "
                  "SMs), reduce-added into dw in the order they finish: not bitwise repeatable",
                  (long long)rows, parts, gemm::uniform_group_rows(int(rows), parts), (long long)tiles, (long long)bm,
                  (long long)bn, (long long)(tiles * parts), device_sms);
    notes.push_back(text);
    return notes;
  }
  if (!prog.params->contains("workspace_per_sm")) {
    notes.push_back("tail split: none (" + prog.name + " has no split workspace)");
    return notes;
  }
  if (rows == 0) {
    notes.push_back("tail split: decided on the device from the group sizes in offs (deterministic either way)");
    return notes;
  }
  const bool wgrad = op == "wgrad";
  // Tiles: wgrad's C is [N, K] per group, reduced over the group's rows; fwd's [rows, N] and
  // dgrad's [rows, K] per group, reduced over K and N.
  const int64_t tiles = wgrad ? groups * cdiv(n, bm) * cdiv(k, bn) : groups * cdiv(rows, bm) * cdiv(op == "fwd" ? n : k, bn);
  const int64_t red = wgrad ? rows : op == "fwd" ? k : n;
  char waves[128];
  std::snprintf(waves, sizeof(waves), "%lld tiles of %lld x %lld on %d SMs (%.2f waves), each over %lld %s",
                (long long)tiles, (long long)bm, (long long)bn, device_sms, double(tiles) / device_sms, (long long)red,
                wgrad ? "rows" : "reduction elements");
  notes.push_back(waves);
  if (tiles > INT_MAX) return notes;
  gemm::TailSplit split;
  const int min_rows = gemm::min_split_part_rows(int(bm), int(bn));
  std::string none;
  if (wgrad && groups > gemm::kMaxSortedGroups) {
    none = "over " + std::to_string(gemm::kMaxSortedGroups) + " groups";
  } else {
    split = wgrad ? gemm::even_wgrad_split(device_sms, int(tiles), int(rows), min_rows)
                  : gemm::row_op_split(device_sms, int(tiles), int(cdiv(red, 64)));
    if (split.parts <= 1)
      none = tiles % device_sms == 0 ? "the tiles fill whole waves"
             : !wgrad && tiles >= gemm::kRowOpSplitWaves * device_sms
                 ? std::to_string(gemm::kRowOpSplitWaves) + " waves or more: the tail is a small share"
                 : "no split into parts of at least " +
                       (wgrad ? std::to_string(min_rows) + " rows"
                              : std::to_string(gemm::kRowOpSplitBlocks * 64) + " reduction elements") +
                       " shortens the tail";
  }
  if (split.parts <= 1) {
    notes.push_back("tail split: none (" + none + ")");
  } else {
    notes.push_back("tail split: the last " + std::to_string(split.tiles) + " tiles run as " +
                    std::to_string(split.parts) + " parts each over equal shares of the reduction, " +
                    (wgrad ? "each part adding its predecessor's sum" : "the last adding the others' sums") +
                    " in part order (deterministic; planned for the device's SMs, so max_sms does not change it)");
  }
  return notes;
}

KernelArgs gemm_kernel_args(const Program& program, int) {
  const std::string kind = program.params->value("kind", "");
  if (kind == "sm90") return {"cake::gemm::Sm90Args", sizeof(gemm::Sm90Args)};
  if (kind == "portable") return {"cake::gemm::PortableArgs", sizeof(gemm::PortableArgs)};
  return {};
}

}  // namespace cake::ops
