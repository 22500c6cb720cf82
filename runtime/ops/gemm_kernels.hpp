// What any family whose programs are the BF16 GEMM kernels (templates/common/sm90_gemm.cuh,
// smxx_gemm.cuh, their contract gemm_contract.h) needs on the host: the operand checks the
// kernels' contract asks for, and the binder (the TMA maps of the sm90 programs, the argument
// structs, the persistent grids). A family says what its tensors are and which GEMM a call is.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "gemm_contract.h"
#include "op_family.hpp"

namespace cake::ops {

// One tensor of a GEMM op: its call argument, its dims by letter outermost first ("MK" is
// [M, K]) and the dtypes it takes. `aligned`: a 16-byte aligned base (TMA and the 16-byte
// vector accesses of every program need it of the operands; not of an index tensor).
// `strided_rows`: a row-grouped operand ([T, C] or [B, T, C]) that may be a strided view (rows
// and heads anywhere, RowLayout), not only a contiguous tensor.
struct OperandSpec {
  const char* name;
  std::string dims;
  std::vector<DType> dtypes;
  bool aligned = true;
  bool strided_rows = false;
};

// Where a row-grouped operand's rows are: row t of head (group) g at g * head + t * ld
// elements from its base, each row contiguous. A contiguous [B, T, C] tensor has ld C and
// head T C; heads as the strided view of a [T, B, C] tensor (x_tbc.transpose(0, 1)) ld B C and
// head C.
struct RowLayout {
  int64_t ld = 0, head = 0;
};

// What check_operands found: the tensors in the specs' order, the dims by letter, and the
// layouts of the strided_rows operands by argument name.
struct GemmOperands {
  std::vector<TensorView> tensors;
  std::map<char, int64_t> dims;
  std::map<std::string, RowLayout> rows;
};

// specs[0] is the output. The dims come from the inputs in order, each checked where it is
// first seen (N and K: positive multiples of 8, the rows of TMA maps; E: at least 1; every dim
// fits an int, as the kernels take them); then each tensor's full shape, dtype, contiguity
// (strided_rows: unit stride along a row, row and head strides multiples of 16 bytes that
// keep every element apart) and alignment; then one device, and the output overlapping no
// input (the kernels read the inputs while they write it). Throws ArgumentError naming the
// argument.
GemmOperands check_operands(const OpCall& call, const std::vector<OperandSpec>& specs);

// The plan of a call with no rows (T = 0, no tokens, no heads): fwd and dgrad have nothing
// to write; wgrad's sum over no rows is zeros, a memset of `out` with no kernel and no plan
// (`why` says so in the launch's description), or, accumulating, leaves `out` as it is.
OpPlan no_rows_plan(int op, const TensorView& out, const OpOptions& opt, std::string why);

// The planner's problem of a checked call: the op, its dims by name, every tensor's dtype
// and alignment, and the call's options.
Problem gemm_problem(const char* op, std::map<std::string, int64_t> dims, const std::vector<TensorView>& tensors,
                     const OpOptions& opt);

// One GEMM problem as the kernels see it: kOp, dims (m rows of the row-grouped operand, e
// groups) and the call arguments the operands default to (a stage's bind map may rename them,
// e.g. a composed route's scratch). `offs` empty: no offsets argument, e groups of m / e rows.
// `rows`: the layouts of strided row-grouped arguments by name (absent: contiguous rows);
// heads apart from each other need uniform groups (no offs, e dividing m).
struct GemmCall {
  int op = gemm::kOpFwd;
  int64_t m = 0, n = 0, k = 0, e = 1;
  std::string a, b, out, offs;
  std::map<std::string, RowLayout> rows;
};

// `sm_count`: the SMs the launch fills (max_sms); `device_sms`: the device's, which the tail
// split is planned for, so that a capped grid computes the same bits.
Binder gemm_binder(Runtime& rt, const GemmCall& call, int sm_count, int device_sms);

// How an sm90 program's launch splits its last wave (gemm_contract.h, TailSplit), for a plan's
// notes: `rows` is each group's (uniform groups; 0: the groups come from device offsets, and
// the kernel decides from them), `groups` their count. Empty for a portable program.
std::vector<std::string> gemm_split_notes(const Plan& plan, int64_t rows, int64_t groups, int64_t n, int64_t k,
                                          int device_sms);

// The struct a GEMM program's kernel takes, by its "kind" param (FamilyOps::kernel_args).
KernelArgs gemm_kernel_args(const Program& program, int kernel);

}  // namespace cake::ops
