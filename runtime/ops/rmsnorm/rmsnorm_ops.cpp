// rmsnorm ops: training forward (optional residual) and backward (dx, deterministic dw). The
// binders fill the argument structs of rmsnorm_contract.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "error.hpp"
#include "op_family.hpp"
#include "rmsnorm_contract.h"

namespace cake::ops {
namespace {

// A [T, H] bf16 matrix with contiguous rows: stride(1) == 1, stride(0) >= H and a multiple
// of 8 elements, so every row starts 16-byte aligned when the tensor does.
void require_rows(const TensorView& t, int64_t rows, int64_t h) {
  require_dtype(t, {DType::bf16});
  if (t.shape.size() != 2) throw ArgumentError(t.name, "must be 2-D [T, H], got " + std::to_string(t.shape.size()) + "-D");
  if (t.shape[0] != rows || t.shape[1] != h)
    throw ArgumentError(t.name, "shape [" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) +
                                    "] differs from [" + std::to_string(rows) + ", " + std::to_string(h) + "]");
  if (rows > 1 || h > 1) {
    if (h > 1 && t.strides[1] != 1) throw ArgumentError(t.name, "rows must be contiguous (stride(1) == 1)");
    if (rows > 1 && (t.strides[0] < h || t.strides[0] % 8 != 0))
      throw ArgumentError(t.name, "row stride " + std::to_string(t.strides[0]) + " must be >= H and a multiple of 8");
  }
}

int64_t row_stride(const TensorView& t) { return t.shape[0] > 1 ? t.strides[0] : t.shape[1]; }

void require_vector(const TensorView& t, int64_t n, std::initializer_list<DType> dtypes) {
  require_dtype(t, dtypes);
  if (t.shape.size() != 1 || t.shape[0] != n)
    throw ArgumentError(t.name, "must be 1-D of " + std::to_string(n) + " elements");
  require_contiguous(t);
}

int blocks_for(int64_t work, int threads, int sm_count) {
  int64_t resident = int64_t(sm_count) * std::max(1, 2048 / threads);
  return int(std::clamp<int64_t>(work, 1, resident));
}

const nlohmann::json& kernel_params(const PlannedStage& s) {
  return s.program->params->at("kernels").at(size_t(s.kernel));
}

OpPlan check_fwd(const OpCall& call) {
  const OpOptions& opt = call.options;
  const float eps = *opt.eps;
  const TensorView &x = call.at("x"), &y = call.at("y"), &rstd = call.at("rstd"), &w = call.at("w");
  if (x.shape.size() != 2) throw ArgumentError("x", "must be 2-D [T, H]");
  const int64_t T = x.shape[0], H = x.shape[1];
  if (H < 8 || H % 8 != 0) throw ArgumentError("x", "H = " + std::to_string(H) + " must be a positive multiple of 8");
  if (H > rms::kMaxH) throw ArgumentError("x", "H = " + std::to_string(H) + " is larger than cake supports (2^20)");
  if (!(eps > 0.0f) || !std::isfinite(eps)) throw ArgumentError("eps", "must be a finite number > 0");
  const TensorView *res = call.find("residual"), *hout = call.find("h_out");
  if ((res == nullptr) != (hout == nullptr))
    throw ArgumentError(res ? "h_out" : "residual", "residual and h_out come together (h = x + residual is written to h_out)");
  require_rows(x, T, H);
  require_rows(y, T, H);
  require_vector(rstd, T, {DType::f32});
  require_vector(w, H, {DType::bf16, DType::f32});
  if (res) {
    require_rows(*res, T, H);
    require_rows(*hout, T, H);
  }
  for (const TensorView* t : {&y, &rstd, &w}) require_same_device(x, *t);
  if (res) require_same_device(x, *res), require_same_device(x, *hout);
  // Outputs may be an input exactly (in place); any other overlap is rejected.
  require_no_overlap(y, x, true);
  require_no_overlap(y, w);
  require_no_overlap(rstd, x);
  require_no_overlap(rstd, w);
  require_no_overlap(rstd, y);
  if (res) {
    require_no_overlap(y, *res, true);
    require_no_overlap(*hout, x, true);
    require_no_overlap(*hout, *res, true);
    require_no_overlap(*hout, w);
    require_no_overlap(rstd, *res);
    require_no_overlap(rstd, *hout);
    require_no_overlap(y, *hout);
  }
  OpPlan op;
  op.device = x.device;
  op.noop = T == 0;
  Problem& p = op.problem;
  p.op = "rmsnorm.fwd";
  p.dims = {{"t", T}, {"h", H}, {"residual", res ? 1 : 0}};
  p.deterministic = opt.deterministic;
  p.candidate = opt.candidate;
  for (const TensorView* t : {&x, &y, &rstd, &w}) p.dtypes[t->name] = t->dtype, p.align[t->name] = t->alignment();
  if (res)
    for (const TensorView* t : {res, hout}) p.dtypes[t->name] = t->dtype, p.align[t->name] = t->alignment();
  op.args = {{"x", x.data}, {"y", y.data}, {"rstd", rstd.data}, {"w", w.data},
             {"residual", res ? res->data : 0}, {"h_out", hout ? hout->data : 0}};
  const int64_t xs = row_stride(x), ys = row_stride(y), rs = res ? row_stride(*res) : 0,
                hs = hout ? row_stride(*hout) : 0;
  op.binder = [=](Runtime&, const DeviceContext& dc) -> Binder {
  const int sms = grid_sms(dc, opt), all_sms = dc.info->sm_count;
  return [=](const Plan&, const PlannedStage& s, const ArgMap& a, LaunchStage& ls) {
    // The program's H (an instance's value, or the generic program's 0) gives its geometry.
    const int ph = s.program->params->at("h").get<int>();
    const int threads = rms::fwd_threads(ph);
    const int rows_per_block = rms::rows_per_block(ph, rms::fwd_vec(ph), threads);
    rms::FwdArgs k{};
    k.y = reinterpret_cast<bf16*>(a.at("y"));
    k.rstd = reinterpret_cast<float*>(a.at("rstd"));
    k.h_out = reinterpret_cast<bf16*>(a.at("h_out"));
    k.x = reinterpret_cast<const bf16*>(a.at("x"));
    k.residual = reinterpret_cast<const bf16*>(a.at("residual"));
    k.w = reinterpret_cast<const void*>(a.at("w"));
    k.rows = T, k.x_stride = xs, k.res_stride = rs, k.y_stride = ys, k.h_stride = hs;
    k.h = int(H);
    k.eps = eps;
    ls.args.add(k);
    // One block per row group: the block scheduler overlaps one block's loads with another's
    // reduction and stores (5-14 % faster than a resident-size grid-stride grid on the H200,
    // H 1024-8192, docs/decisions.md). When max_sms caps the SMs, the grid-stride form keeps the
    // grid to their resident blocks; the bits are the same either way.
    const int64_t groups = (T + rows_per_block - 1) / rows_per_block;
    ls.grid[0] = unsigned(sms < all_sms ? blocks_for(groups, threads, sms)
                                        : std::min<int64_t>(groups, std::numeric_limits<int32_t>::max()));
    ls.block[0] = unsigned(threads);
  };
  };
  return op;
}

OpPlan check_bwd(const OpCall& call) {
  const OpOptions& opt = call.options;
  const TensorView &dx = call.at("dx"), &dw = call.at("dw"), &dy = call.at("dy"), &x = call.at("x"),
                   &rstd = call.at("rstd"), &w = call.at("w");
  if (x.shape.size() != 2) throw ArgumentError("x", "must be 2-D [T, H]");
  const int64_t T = x.shape[0], H = x.shape[1];
  if (H < 8 || H % 8 != 0) throw ArgumentError("x", "H = " + std::to_string(H) + " must be a positive multiple of 8");
  if (H > rms::kMaxH) throw ArgumentError("x", "H = " + std::to_string(H) + " is larger than cake supports (2^20)");
  require_rows(x, T, H);
  require_rows(dy, T, H);
  require_rows(dx, T, H);
  require_vector(rstd, T, {DType::f32});
  require_vector(w, H, {DType::bf16, DType::f32});
  require_vector(dw, H, {w.dtype});
  for (const TensorView* t : {&dx, &dw, &dy, &rstd, &w}) require_same_device(x, *t);
  require_no_overlap(dx, dy, true);
  require_no_overlap(dx, x, true);
  for (const TensorView* in : {&rstd, &w}) require_no_overlap(dx, *in);
  for (const TensorView* in : {&dy, &x, &rstd, &w, &dx}) require_no_overlap(dw, *in);
  OpPlan op;
  op.device = x.device;
  op.noop = T == 0;  // nothing is written, dw included
  Problem& p = op.problem;
  p.op = "rmsnorm.bwd";
  p.dims = {{"t", T}, {"h", H}};
  p.deterministic = opt.deterministic;
  p.candidate = opt.candidate;
  for (const TensorView* t : {&dx, &dw, &dy, &x, &rstd, &w}) p.dtypes[t->name] = t->dtype, p.align[t->name] = t->alignment();
  op.args = {{"dx", dx.data}, {"dw", dw.data}, {"dy", dy.data}, {"x", x.data}, {"rstd", rstd.data}, {"w", w.data}};
  const int64_t dys = row_stride(dy), xs = row_stride(x), dxs = row_stride(dx);
  op.binder = [=](Runtime&, const DeviceContext& dc) -> Binder {
  const int sms = grid_sms(dc, opt);
  return [=](const Plan& plan, const PlannedStage& s, const ArgMap& a, LaunchStage& ls) {
    const auto& params = s.program->params;
    const int threads = params->at("op") == "bwd" ? rms::bwd_threads(params->at("h").get<int>()) : rms::kFinalizeThreads;
    if (params->at("op") == "bwd") {
      const int64_t chunk = kernel_params(s).at("chunk_rows").get<int64_t>();
      rms::BwdArgs k{};
      k.dx = reinterpret_cast<bf16*>(a.at("dx"));
      k.partial = reinterpret_cast<float*>(a.at("scratch"));
      k.dy = reinterpret_cast<const bf16*>(a.at("dy"));
      k.hin = reinterpret_cast<const bf16*>(a.at("x"));
      k.rstd = reinterpret_cast<const float*>(a.at("rstd"));
      k.w = reinterpret_cast<const void*>(a.at("w"));
      k.rows = T, k.dy_stride = dys, k.h_stride = xs, k.dx_stride = dxs;
      k.h = int(H);
      ls.args.add(k);
      ls.grid[0] = unsigned(blocks_for((T + chunk - 1) / chunk, threads, sms));
    } else {  // dw_finalize over the partial rows the bwd stage wrote
      // One partial row per chunk of the bwd stage's kernel.
      const int64_t chunk = kernel_params(plan.stages.at(0)).at("chunk_rows").get<int64_t>();
      rms::FinalizeArgs k{};
      k.dw = reinterpret_cast<void*>(a.at("dw"));
      k.partial = reinterpret_cast<const float*>(a.at("scratch"));
      k.chunks = (T + chunk - 1) / chunk;
      k.h = int(H);
      ls.args.add(k);
      // kFinalizeCols columns a block, grid-stride: any grid gives the same bits.
      constexpr int cols = rms::kFinalizeCols;
      ls.grid[0] = unsigned(std::min<int64_t>((H + cols - 1) / cols, int64_t(sms) * 8));
    }
    ls.block[0] = unsigned(threads);
  };
  };
  return op;
}

// The struct each program's kernels take, by the program's op.
KernelArgs kernel_args(const Program& program, int) {
  const std::string op = program.params->value("op", "");
  if (op == "fwd") return {"cake::rms::FwdArgs", sizeof(rms::FwdArgs)};
  if (op == "bwd") return {"cake::rms::BwdArgs", sizeof(rms::BwdArgs)};
  if (op == "dw_finalize") return {"cake::rms::FinalizeArgs", sizeof(rms::FinalizeArgs)};
  return {};
}

}  // namespace

const FamilyOps& op_family_rmsnorm() {
  static const FamilyOps family{
      "rmsnorm",
      {{"rmsnorm.fwd",
        {{"y", {DType::bf16}, true},
         {"rstd", {DType::f32}, true},
         {"x", {DType::bf16}},
         {"w", {DType::bf16, DType::f32}},
         {"residual", {DType::bf16}, false, true},
         {"h_out", {DType::bf16}, true, true}},
        false, true, check_fwd},
       {"rmsnorm.bwd",
        {{"dx", {DType::bf16}, true},
         {"dw", {DType::bf16, DType::f32}, true},
         {"dy", {DType::bf16}},
         {"x", {DType::bf16}},
         {"rstd", {DType::f32}},
         {"w", {DType::bf16, DType::f32}}},
        false, false, check_bwd}},
      {},
      kernel_args};
  return family;
}

}  // namespace cake::ops
