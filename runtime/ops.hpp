// The public C++ ops API: prepare -> launch. prepare_* validates every argument (an
// ArgumentError naming it, before anything is launched or written), plans, loads the
// kernels and allocates the scratch the plan needs; Launch::launch(stream) then only
// enqueues. The one-call forms do both.
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include "launch.hpp"
#include "runtime.hpp"

namespace cake::ops {

struct OpOptions {
  bool deterministic = true;  // false admits non-deterministic routes
};

// elementwise.add: out = a + b (same dtype: f32 or bf16), contiguous, same element count.
// out may be a itself (in place); any other overlap is rejected.
Launch prepare_add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b,
                   const OpOptions& opt = {});
// elementwise.cast: out = cast(in) between f32 and bf16; with accumulate, out += cast(in)
// (fused where a route allows, else composed through a scratch of out's dtype).
Launch prepare_cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate,
                    const OpOptions& opt = {});

void add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b, CUstream stream,
         const OpOptions& opt = {});
void cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate, CUstream stream,
          const OpOptions& opt = {});

}  // namespace cake::ops
