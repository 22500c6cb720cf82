// The elementwise family: add and cast, the second stage of every composed route.
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include "ops.hpp"
#include "ops_common.hpp"

namespace cake::ops {

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


// Binds a stage of an elementwise program (smxx_elementwise.cuh: add, cast, cast_accumulate)
// over n elements: the second half of composed routes of other families too. Kernel
// parameters are resolved through the stage's bind map ("out" -> "scratch", ...).
Binder elementwise_binder(int64_t n, int sm_count);

}  // namespace cake::ops
