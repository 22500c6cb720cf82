// The generic prepare: the op's schema checks the names, the family's check turns the call
// into a problem, and the rest (device context, memory checks, plan, load, scratch) is the
// same for every op.
#include <algorithm>
#include <limits>
#include <memory>

#include "error.hpp"
#include "op_family.hpp"

namespace cake::ops {

const TensorView* OpCall::find(const std::string& name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const TensorView& OpCall::at(const std::string& name) const {
  if (const TensorView* t = find(name)) return *t;
  throw ArgumentError(name, "missing");
}

const FamilyOps* find_family(const std::string& name) {
  for (const FamilyOps* f : op_families())
    if (f->name == name) return f;
  return nullptr;
}

std::vector<std::string> plan_notes(const Problem& problem, const Plan& plan, const Device& device) {
  const FamilyOps* f = find_family(problem.op.substr(0, problem.op.find('.')));
  return f && f->plan_notes ? f->plan_notes(problem, plan, device) : std::vector<std::string>{};
}

const OpSpec* find_op(const std::string& op) {
  for (const FamilyOps* f : op_families())
    for (const OpSpec& s : f->ops)
      if (s.name == op) return &s;
  return nullptr;
}

void check_packed_args(const FamilyOps& family, const PlannedStage& stage, const LaunchStage& ls) {
  const KernelArgs want = family.kernel_args ? family.kernel_args(*stage.program, stage.kernel) : KernelArgs{};
  // Every bind runs this (a rebind per training step): the message is made only on a mismatch.
  auto where = [&] { return "program " + stage.program->name + " kernel " + std::to_string(stage.kernel); };
  if (want.type.empty())
    throw Error(where() + ": family '" + family.name + "' declares no argument struct for it");
  if (ls.args.offsets().size() != 1 || ls.args.size() != want.bytes)
    throw Error(where() + ": the binder packed " + std::to_string(ls.args.offsets().size()) + " arguments (" +
                std::to_string(ls.args.size()) + " bytes); the kernel takes one " + want.type + " (" +
                std::to_string(want.bytes) + " bytes)");
}

namespace {

std::string known_ops() {
  std::string all;
  for (const FamilyOps* f : op_families())
    for (const OpSpec& s : f->ops) all += (all.empty() ? "" : ", ") + s.name;
  return all;
}

std::string arg_names(const OpSpec& spec) {
  std::string all;
  for (const ArgSpec& a : spec.args) all += (all.empty() ? "" : ", ") + a.name + (a.optional ? "?" : "");
  return all;
}

// A stage of another family's program (the second half of a composed route) goes to that
// family's stage binder; every other stage, the op's family's own or a user registry's
// program that names no family, to the op's binder.
Binder dispatching_binder(const std::string& family, Binder own, int64_t elements, int sms) {
  const FamilyOps* own_family = find_family(family);
  return [family, own_family, own = std::move(own), elements, sms](const Plan& plan, const PlannedStage& s,
                                                                  const ArgMap& args, LaunchStage& ls) {
    const FamilyOps* other = s.program->family == family ? nullptr : find_family(s.program->family);
    if (other == nullptr) {
      own(plan, s, args, ls);
      if (own_family != nullptr) check_packed_args(*own_family, s, ls);
      return;
    }
    if (!other->bind_stage)
      throw Error("program " + s.program->name + " of family '" + s.program->family +
                  "' has no stage binder for a route of " + plan.op);
    if (elements <= 0)  // the op's check did not say what a composed stage works over
      throw Error("a route of " + plan.op + " runs program " + s.program->name + " of family '" +
                  s.program->family + "', but " + plan.op + " does not take composed stages");
    other->bind_stage(plan, s, args, elements, sms, ls);
    check_packed_args(*other, s, ls);
  };
}

// A call checked as prepare checks it: the names against the op's schema, every tensor's view,
// the family's check and every tensor's memory.
struct CheckedCall {
  OpPlan plan;
  DeviceContext dc;
  std::string family;
  std::vector<BoundTensor> bound;  // the tensors in the caller's order
};

CheckedCall check_call(Runtime& rt, const std::string& op, const NamedTensors& tensors, const OpOptions& opt,
                       std::optional<CUstream> one_call) {
  check_options(opt);
  const OpSpec* spec = find_op(op);
  if (spec == nullptr) throw ArgumentError("op", "unknown op '" + op + "' (known: " + known_ops() + ")");
  if (opt.accumulate && !spec->takes_accumulate) throw ArgumentError("accumulate", op + " does not accumulate");
  if (opt.eps && !spec->takes_eps) throw ArgumentError("eps", op + " takes no eps");
  if (!opt.eps && spec->takes_eps) throw ArgumentError("eps", op + " needs eps");
  OpCall call;
  call.options = opt;
  for (const auto& given : tensors) {
    const std::string& name = given.first;  // a plain name: clang 14 lambdas cannot capture bindings
    const DLTensor* dl = given.second;
    const auto arg = std::find_if(spec->args.begin(), spec->args.end(), [&](const ArgSpec& a) { return a.name == name; });
    if (arg == spec->args.end())
      throw ArgumentError(name, "is not an argument of " + op + " (its arguments: " + arg_names(*spec) + ")");
    if (dl == nullptr) throw ArgumentError(name, "null");
    if (call.tensors.count(name)) throw ArgumentError(name, "given twice");
    call.tensors.emplace(name, view(*dl, name));
  }
  for (const ArgSpec& a : spec->args)
    if (!a.optional && !call.tensors.count(a.name)) throw ArgumentError(a.name, "missing (" + op + " takes " + arg_names(*spec) + ")");
  CheckedCall c{spec->check(call), {}, op.substr(0, op.find('.')), {}};
  c.dc = rt.context_for(c.plan.device);
  std::vector<const TensorView*> views;
  for (const auto& [name, v] : call.tensors) views.push_back(&v);
  check_memory(c.dc, views, one_call);
  if (one_call) return c;  // a one-call op is never rebound
  for (const auto& given : tensors) {
    const TensorView& v = call.tensors.at(given.first);
    const auto arg = std::find_if(spec->args.begin(), spec->args.end(), [&](const ArgSpec& a) { return a.name == v.name; });
    const auto planned = c.plan.problem.align.find(v.name);
    c.bound.push_back({v.name, arg->output, v.data, v.numel() > 0 ? v.end() - v.data : 0,
                       planned != c.plan.problem.align.end() ? planned->second : v.alignment()});
  }
  return c;
}

// The block a rebind gives a launch: one with external memory needs one of memory_bytes(),
// 256-byte aligned; one that owns its memory takes none. This part asks no driver; true when
// a block was given.
bool check_launch_block(const Launch& launch, CUdeviceptr memory) {
  if (!launch.external_memory() || launch.memory_bytes() == 0) {
    if (memory != 0)
      throw ArgumentError("memory", launch.external_memory() ? "given, but the launch takes none"
                                                             : "given, but the launch takes none (it owns its memory: "
                                                               "prepare it with external_memory to give it yours)");
    return false;
  }
  if (memory == 0)
    throw ArgumentError("memory", "null: the launch needs a block of " + std::to_string(launch.memory_bytes()) + " bytes");
  if (memory % 256 != 0) throw ArgumentError("memory", "must be 256-byte aligned");
  return true;
}

// The checked rebind's: also on the device, the whole extent allocated (as a tensor's memory).
void check_launch_memory(const Launch& launch, const DeviceContext& dc, CUdeviceptr memory) {
  if (!check_launch_block(launch, memory)) return;
  int64_t words[1] = {int64_t(launch.memory_bytes() / 4)};
  DLTensor block{};
  block.data = reinterpret_cast<void*>(memory);
  block.device = {kDLCUDA, dc.info ? dc.info->ordinal : 0};
  block.ndim = 1;
  block.dtype = {kDLInt, 32, 1};
  block.shape = words;
  const TensorView v = view(block, "memory");
  check_memory(dc, {&v});
}

Binder binder_of(Runtime& rt, const CheckedCall& c, const OpOptions& opt) {
  return dispatching_binder(c.family, c.plan.binder(rt, c.dc), c.plan.composed_elements, grid_sms(c.dc, opt));
}

// What a later rebind_data needs of a checked call.
std::shared_ptr<const LaunchOrigin> origin_of(Runtime& rt, const std::string& op, const OpOptions& opt,
                                              const CheckedCall& c, Binder bind) {
  auto o = std::make_shared<LaunchOrigin>();
  o->rt = &rt, o->op = op, o->options = opt, o->problem = c.plan.problem, o->device = c.plan.device;
  o->tensors = c.bound;
  o->args = c.plan.args;
  o->bind = std::move(bind);
  o->sms = c.dc.info->sm_count;
  using Kind = LaunchOrigin::Kind;
  o->kind = c.plan.noop ? Kind::noop : c.plan.zero_fill_bytes > 0 ? Kind::zero_fill : Kind::kernels;
  o->zero_fill_bytes = c.plan.zero_fill_bytes;
  if (o->kind == Kind::zero_fill)  // the output the fill clears (an empty input may share its address)
    for (const BoundTensor& t : c.bound)
      if (t.output && t.bytes > 0 && t.data == c.plan.zero_fill && o->zero_fill_arg.empty()) o->zero_fill_arg = t.name;
  return o;
}

// Packs every stage of `launch` again for the tensors' addresses in `args` and the memory
// (the caller's block with external memory, else the launch's own).
void bind_stages(Launch& launch, const LaunchOrigin& o, ArgMap args, CUdeviceptr memory) {
  const Plan& plan = *launch.plan();
  const bool ext = launch.external_memory();
  const LaunchMemory& layout = launch.memory_layout();
  const CUdeviceptr scratch = ext ? memory : launch.scratch_ptr();
  const CUdeviceptr counters = ext ? memory + layout.counters_at() : launch.counters_ptr();
  const CUdeviceptr workspace = ext ? memory + layout.workspace_at() : launch.workspace_ptr();
  scratch_args(args, plan, scratch);
  int64_t counter_offset = 0, ws_offset = 0;
  launch.repack([&](size_t i, LaunchStage& ls) {
    const PlannedStage& s = plan.stages.at(i);
    stage_memory_args(args, s, o.sms, counters, counter_offset, workspace, ws_offset);
    o.bind(plan, s, args, ls);
  });
  if (ext) launch.set_memory_base(memory);
}

Launch prepare_call(Runtime& rt, const std::string& op, const NamedTensors& tensors, const OpOptions& opt,
                    std::optional<CUstream> one_call) {
  CheckedCall c = check_call(rt, op, tensors, opt, one_call);
  const OpPlan& p = c.plan;
  const Binder bind = p.noop || p.zero_fill_bytes > 0 ? Binder() : binder_of(rt, c, opt);
  Launch launch = p.noop ? Launch(c.dc.ctx, nullptr, {}, DeviceBuffer())
                  : p.zero_fill_bytes > 0
                      ? Launch::zero_fill(c.dc.ctx, p.zero_fill, p.zero_fill_bytes, p.why)
                      : prepare_planned(rt, c.dc, p.problem, p.args, bind, one_call, opt.external_memory);
  if (!one_call) launch.set_origin(origin_of(rt, op, opt, c, bind));
  return launch;
}

}  // namespace

Launch prepare(Runtime& rt, const std::string& op, const NamedTensors& tensors, const OpOptions& opt) {
  return prepare_call(rt, op, tensors, opt, std::nullopt);
}

void run(Runtime& rt, const std::string& op, const NamedTensors& tensors, CUstream stream, const OpOptions& opt) {
  if (opt.external_memory)
    throw ArgumentError("external_memory", "is for prepared launches (prepare, then rebind with the memory)");
  prepare_call(rt, op, tensors, opt, stream).launch(stream);
}

void rebind(Launch& launch, const NamedTensors& tensors, CUdeviceptr memory) {
  const std::shared_ptr<const LaunchOrigin> origin = launch.origin();
  if (!origin) throw ArgumentError("launch", "was not made by prepare (or was moved from): nothing to rebind");
  Runtime& rt = *origin->rt;
  CheckedCall c = check_call(rt, origin->op, tensors, origin->options, std::nullopt);
  check_launch_memory(launch, c.dc, memory);
  const OpPlan& p = c.plan;
  if (!(p.problem == origin->problem) || p.device != origin->device)
    throw ArgumentError("tensors", "make another problem (" + p.problem.describe() + " on cuda:" +
                                       std::to_string(p.device) + ") than the launch was prepared for (" +
                                       origin->problem.describe() + " on cuda:" + std::to_string(origin->device) +
                                       "): prepare a launch for it");
  // A new binder: the problem is the same, but what the kernels take besides it (strides) may not be.
  const bool kernels = !p.noop && p.zero_fill_bytes == 0;
  std::shared_ptr<const LaunchOrigin> next =
      origin_of(rt, origin->op, origin->options, c, kernels ? binder_of(rt, c, origin->options) : Binder());
  // An empty problem plans no problem to compare: what it launches (nothing, or a fill of so many
  // bytes) must be the launch's.
  if (next->kind != origin->kind || next->zero_fill_bytes != origin->zero_fill_bytes) {
    const std::string what = p.noop ? "nothing to launch"
                             : p.zero_fill_bytes ? "a zero fill of " + std::to_string(p.zero_fill_bytes) + " bytes"
                                                 : "kernels";
    throw ArgumentError("tensors", "make another problem (" + what + ") than the launch was prepared for: prepare a launch for it");
  }
  if (p.zero_fill_bytes > 0) launch.repack([&](size_t, LaunchStage& s) { s.memset_ptr = p.zero_fill; });
  else if (kernels) bind_stages(launch, *next, p.args, memory);
  launch.set_origin(std::move(next));
}

void rebind_data(Launch& launch, const CUdeviceptr* data, size_t n, CUdeviceptr memory) {
  const std::shared_ptr<const LaunchOrigin> origin = launch.origin();
  if (!origin) throw ArgumentError("launch", "was not made by prepare (or was moved from): nothing to rebind");
  const LaunchOrigin& o = *origin;
  if (n != o.tensors.size())
    throw ArgumentError("tensors", std::to_string(n) + " addresses given; the launch's last bind had " +
                                       std::to_string(o.tensors.size()) + " tensors");
  if (n > 0 && data == nullptr) throw ArgumentError("tensors", "null address array");
  for (size_t i = 0; i < n; ++i) {
    const BoundTensor& t = o.tensors[i];
    if (t.bytes > 0 && data[i] == 0) throw ArgumentError(t.name, "null data pointer");
    if (data[i] > std::numeric_limits<uintptr_t>::max() - t.bytes)
      throw ArgumentError(t.name, "its extent runs past the end of the address space");
    if (t.bytes > 0 && address_alignment(data[i]) < t.align)
      throw ArgumentError(t.name, "is " + std::to_string(address_alignment(data[i])) + "-byte aligned; the launch was planned for " +
                                      std::to_string(t.align) + " bytes: rebind it with tensors, or prepare one");
  }
  // An output may meet another tensor only as it did at the checked bind: wholly apart, or as
  // the very same tensor (an in-place call the op allowed).
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      const BoundTensor &a = o.tensors[i], &b = o.tensors[j];
      if (i == j || !a.output || a.bytes == 0 || b.bytes == 0) continue;
      if (data[i] < data[j] + b.bytes && data[j] < data[i] + a.bytes && !(a.data == b.data && data[i] == data[j]))
        throw ArgumentError(a.name, "overlaps '" + b.name + "' in memory");
    }
  check_launch_block(launch, memory);
  if (o.kind == LaunchOrigin::Kind::noop) return;
  ArgMap args = o.args;
  for (size_t i = 0; i < n; ++i) args[o.tensors[i].name] = data[i];
  if (o.kind == LaunchOrigin::Kind::zero_fill) {
    const auto it = args.find(o.zero_fill_arg);
    if (it == args.end()) throw Error("launch: its zero fill names no tensor of the call: rebind it with tensors");
    const uintptr_t at = it->second;
    launch.repack([&](size_t, LaunchStage& s) { s.memset_ptr = at; });
    return;
  }
  bind_stages(launch, o, std::move(args), memory);
}

}  // namespace cake::ops
