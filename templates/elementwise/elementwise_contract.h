// The elementwise programs' host/device contract: the one argument struct every kernel takes
// and the block the host launches. Included by the template (smxx_elementwise.cuh) and the
// binder (runtime/ops/elementwise/), which other families' composed routes use too.
#pragma once
#include "contract_base.h"

namespace cake::ew {

constexpr int kThreads = 256;

// out = a + b (add), out = in (cast: `a` is in, `b` unused), out += in (cast_accumulate), over
// n elements of the kernel's types.
struct ElementwiseArgs {
  void* out;
  const void* a;
  const void* b;
  long long n;
};
CAKE_CONTRACT_SIZE(ElementwiseArgs, 32);
CAKE_CONTRACT_FIELD(ElementwiseArgs, n, 24);

}  // namespace cake::ew
