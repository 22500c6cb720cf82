// What a family tells the generic ops layer: its ops, each with the tensors it takes (its
// argument schema) and a check that turns a call into a planner problem and a binder; and how
// to bind a stage of its programs inside another family's plan (a composed route's second
// half). Each family folder runtime/ops/<family>/ defines `const FamilyOps& op_family_<family>()`;
// the list of them is generated from the folders (cmake/families.cmake).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops_common.hpp"

namespace cake::ops {

struct ArgSpec {
  std::string name;
  std::vector<DType> dtypes;  // accepted; the first is what `cakec plan` assumes when not given
  bool output = false;
  bool optional = false;      // may be left out (an op's optional inputs)
};

// A call as the op's check sees it: every tensor given, as a checked view, by argument name.
struct OpCall {
  std::map<std::string, TensorView> tensors;
  OpOptions options;
  const TensorView* find(const std::string& name) const;  // null when not given
  const TensorView& at(const std::string& name) const;    // given (a required argument)
};

// What an op's check makes of a call.
struct OpPlan {
  Problem problem;  // op, dims, dtypes, alignments, accumulate, deterministic, candidate
  int device = 0;   // the tensors' device (the check has made sure they share it)
  ArgMap args;      // kernel arguments by name
  // Packs the op's own stages; made once the device's context and SM count are known.
  std::function<Binder(Runtime& rt, const DeviceContext& dc)> binder;
  // The element count a stage of another family's program works over (a composed route's
  // add into the output, say).
  int64_t composed_elements = 0;
  // Nothing to compute (an empty problem): no kernel runs, or `zero_fill_bytes` at
  // `zero_fill` are zeroed (with `why` in the launch's description).
  bool noop = false;
  uintptr_t zero_fill = 0;
  size_t zero_fill_bytes = 0;
  std::string why;
};

struct OpSpec {
  std::string name;           // "family.op"
  std::vector<ArgSpec> args;
  bool takes_accumulate = false;
  bool takes_eps = false;
  std::function<OpPlan(const OpCall&)> check;  // throws ArgumentError naming the argument
};

// Binds one stage of this family's programs in another family's plan over `elements`
// elements, with at most `sms` SMs' worth of blocks.
using StageBinder = std::function<void(const Plan& plan, const PlannedStage& stage, const ArgMap& args,
                                       int64_t elements, int sms, LaunchStage& out)>;

// The one argument a kernel of the family's programs takes: a struct of its contract header
// (templates/<family>/<family>_contract.h), by value. Empty `type`: not a program of this
// family's kinds.
struct KernelArgs {
  std::string type;
  size_t bytes = 0;
};

struct FamilyOps {
  std::string name;
  std::vector<OpSpec> ops;
  StageBinder bind_stage;  // may be empty: the family's programs serve only its own ops
  // What the binders pack for a program's kernel. Every bind is checked against it, and a
  // test checks it against each compiled kernel's parameter list (tests/test_nvrtc.cpp).
  std::function<KernelArgs(const Program& program, int kernel)> kernel_args;
  // What the family's kernels will decide from the problem that the plan does not show (a
  // tail split, say), as lines `cakec plan` prints under the plan. May be empty.
  std::function<std::vector<std::string>(const Problem& problem, const Plan& plan, const Device& device)> plan_notes;
};

// Every family with a runtime/ops/<family>/ folder, in name order.
const std::vector<const FamilyOps*>& op_families();
const FamilyOps* find_family(const std::string& name);
const OpSpec* find_op(const std::string& op);

// The plan notes of the problem's family (FamilyOps::plan_notes); none when it has none.
std::vector<std::string> plan_notes(const Problem& problem, const Plan& plan, const Device& device);

// Throws unless `ls` holds exactly the argument `family` declares for the stage's kernel.
void check_packed_args(const FamilyOps& family, const PlannedStage& stage, const LaunchStage& ls);

}  // namespace cake::ops
