#include "plan_args.hpp"

#include "cli_common.hpp"

namespace cakec {
namespace {

int64_t parse_int(const std::string& option, const std::string& name, const std::string& v) {
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used != v.size() || x < 0) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw UsageError(option + " " + name + ": '" + v + "' is not a non-negative integer");
  }
}

}  // namespace

cake::Problem build_problem(const PlanArgs& a) {
  cake::Problem p;
  p.op = a.op;
  p.accumulate = a.accumulate;
  p.deterministic = !a.nondeterministic;
  p.candidate = a.candidate;
  for (const auto& d : a.dims) {
    auto [name, value] = split_assignment("--dim", d);
    p.dims[name] = parse_int("--dim", name, value);
  }
  for (const auto& d : a.dtypes) {
    auto [name, value] = split_assignment("--dtype", d);
    auto t = cake::parse_dtype(value);
    if (!t) throw UsageError("--dtype " + name + ": '" + value + "' is not a dtype (bf16, f16, f32, f64, i32, i64)");
    p.dtypes[name] = *t;
    p.align[name] = 256;  // what cudaMalloc and every framework allocator give
  }
  for (const auto& d : a.aligns) {
    auto [name, value] = split_assignment("--align", d);
    int64_t v = parse_int("--align", name, value);
    if (v < 1 || (v & (v - 1)) != 0) throw UsageError("--align " + name + ": must be a power of two");
    p.align[name] = int(std::min<int64_t>(v, 1 << 20));
  }
  return p;
}


}  // namespace cakec
