// The elementwise family: add and cast, and the second stage of every composed route.
// Typed wrappers over ops::prepare / ops::run.
#pragma once
#include "ops.hpp"

namespace cake::ops {

// elementwise.add: out = a + b (same dtype: f32 or bf16), contiguous, same element count.
// out may be a itself (in place); any other overlap is rejected.
inline Launch prepare_add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b,
                          const OpOptions& opt = {}) {
  return prepare(rt, "elementwise.add", {{"out", &out}, {"a", &a}, {"b", &b}}, opt);
}
// elementwise.cast: out = cast(in) between f32 and bf16; with accumulate, out += cast(in)
// (fused where a route allows, else composed through a scratch of out's dtype).
inline Launch prepare_cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate,
                           OpOptions opt = {}) {
  opt.accumulate = accumulate;
  return prepare(rt, "elementwise.cast", {{"out", &out}, {"in", &in}}, opt);
}

inline void add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b, CUstream stream,
                const OpOptions& opt = {}) {
  run(rt, "elementwise.add", {{"out", &out}, {"a", &a}, {"b", &b}}, stream, opt);
}
inline void cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate, CUstream stream,
                 OpOptions opt = {}) {
  opt.accumulate = accumulate;
  run(rt, "elementwise.cast", {{"out", &out}, {"in", &in}}, stream, opt);
}

}  // namespace cake::ops
