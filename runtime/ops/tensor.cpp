#include "tensor.hpp"

#include "error.hpp"

namespace cake {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

bool TensorView::contiguous() const {
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

uintptr_t TensorView::end() const {
  if (numel() == 0) return data;
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return data + uintptr_t(last + 1) * uintptr_t(dtype_size(dtype));
}

int address_alignment(uintptr_t address) {
  int a = 256;
  while (a > 1 && address % uintptr_t(a) != 0) a /= 2;
  return a;
}

int TensorView::alignment() const { return address_alignment(data); }

TensorView view(const DLTensor& t, const std::string& name) {
  TensorView v;
  v.name = name;
  if (t.device.device_type != kDLCUDA)
    throw ArgumentError(name, "must be a CUDA device tensor (DLPack device_type " +
                                  std::to_string(int(t.device.device_type)) + ")");
  v.device = t.device.device_id;
  if (t.dtype.lanes != 1) throw ArgumentError(name, "vector dtypes (lanes != 1) are not supported");
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) v.dtype = DType::bf16;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 16) v.dtype = DType::f16;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 32) v.dtype = DType::f32;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 64) v.dtype = DType::f64;
  else if (t.dtype.code == kDLInt && t.dtype.bits == 32) v.dtype = DType::i32;
  else if (t.dtype.code == kDLInt && t.dtype.bits == 64) v.dtype = DType::i64;
  else
    throw ArgumentError(name, "unsupported dtype (code " + std::to_string(t.dtype.code) + ", " +
                                  std::to_string(t.dtype.bits) + " bits)");
  if (t.ndim < 0 || t.ndim > 8) throw ArgumentError(name, "ndim " + std::to_string(t.ndim) + " out of range");
  if (t.ndim > 0 && t.shape == nullptr) throw ArgumentError(name, "shape is null");
  v.shape.assign(t.shape, t.shape + t.ndim);
  for (int i = 0; i < t.ndim; ++i)
    if (v.shape[size_t(i)] < 0) throw ArgumentError(name, "negative extent in dim " + std::to_string(i));
  if (t.strides) {
    v.strides.assign(t.strides, t.strides + t.ndim);
    for (int i = 0; i < t.ndim; ++i)
      if (v.strides[size_t(i)] < 0) throw ArgumentError(name, "negative stride in dim " + std::to_string(i));
  } else {
    v.strides.resize(size_t(t.ndim));
    int64_t s = 1;
    for (int i = t.ndim; i-- > 0;) {
      v.strides[size_t(i)] = s;
      s *= v.shape[size_t(i)];
    }
  }
  v.data = reinterpret_cast<uintptr_t>(t.data) + uintptr_t(t.byte_offset);
  if (v.numel() > 0 && v.data == 0) throw ArgumentError(name, "null data pointer");
  if (v.data % uintptr_t(dtype_size(v.dtype)) != 0)
    throw ArgumentError(name, "pointer is not aligned to its element size");
  return v;
}

void require_dtype(const TensorView& t, const std::vector<DType>& allowed) {
  std::string list;
  for (DType d : allowed) {
    if (d == t.dtype) return;
    list += (list.empty() ? "" : ", ") + std::string(dtype_name(d));
  }
  throw ArgumentError(t.name, std::string("dtype ") + dtype_name(t.dtype) + " not supported here (" + list + ")");
}

void require_contiguous(const TensorView& t) {
  if (!t.contiguous()) throw ArgumentError(t.name, "must be contiguous (row-major, no gaps, no expanded dims)");
}

void require_same_device(const TensorView& a, const TensorView& b) {
  if (a.device != b.device)
    throw ArgumentError(b.name, "is on device " + std::to_string(b.device) + ", " + a.name + " on " +
                                    std::to_string(a.device));
}

void require_same_numel(const TensorView& a, const TensorView& b) {
  if (a.numel() != b.numel())
    throw ArgumentError(b.name, "has " + std::to_string(b.numel()) + " elements, " + a.name + " has " +
                                    std::to_string(a.numel()));
}

void require_no_overlap(const TensorView& out, const TensorView& in, bool allow_exact_alias) {
  if (out.numel() == 0 || in.numel() == 0) return;
  if (allow_exact_alias && out.data == in.data && out.dtype == in.dtype && out.shape == in.shape &&
      out.strides == in.strides)
    return;
  if (out.data < in.end() && in.data < out.end())
    throw ArgumentError(out.name, "overlaps input '" + in.name + "' in memory");
}

}  // namespace cake
