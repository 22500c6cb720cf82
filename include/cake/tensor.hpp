// Tensors at the API boundary: DLPack's DLTensor (device pointer, shape, strides in
// elements), checked into a plain view. Every check names the argument.
#pragma once
#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arch.hpp"

namespace cake {

struct TensorView {
  std::string name;  // the argument's name, for errors
  uintptr_t data = 0;
  DType dtype = DType::f32;
  int device = 0;
  std::vector<int64_t> shape, strides;  // strides in elements
  int64_t numel() const;
  bool contiguous() const;
  uintptr_t end() const;  // one past the last byte it can touch
  int alignment() const;  // largest power of two (<= 256) dividing the address
};

// The largest power of two (<= 256) dividing an address (256 for 0).
int address_alignment(uintptr_t address);

// Validates and converts: a CUDA tensor of a supported dtype, non-negative shape, a
// non-null pointer when it holds elements.
TensorView view(const DLTensor& t, const std::string& name);

void require_dtype(const TensorView& t, const std::vector<DType>& allowed);
void require_contiguous(const TensorView& t);
void require_same_device(const TensorView& a, const TensorView& b);
void require_same_numel(const TensorView& a, const TensorView& b);
// Outputs must not partly overlap an input; `allow_exact_alias` permits out == in (in-place).
void require_no_overlap(const TensorView& out, const TensorView& in, bool allow_exact_alias = false);

}  // namespace cake
