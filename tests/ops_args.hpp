// What the argument tests of every family share: fake device tensors (metadata only, at
// distinct addresses that are never touched) and a fixture that expects an ArgumentError
// naming the argument. Checks run before any device call, so these tests need no GPU.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error.hpp"
#include "ops.hpp"

namespace cake::test {

struct FakeTensor {
  FakeTensor(uintptr_t addr, DLDataType t, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : shape(std::move(s)), strides(std::move(st)) {
    dl.data = reinterpret_cast<void*>(addr);
    dl.device = {kDLCUDA, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = t;
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
  }
  std::vector<int64_t> shape, strides;
  DLTensor dl{};
};

constexpr DLDataType kBf16{kDLBfloat, 16, 1}, kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1};
constexpr uintptr_t kGiB = uintptr_t(1) << 30;

class OpsArgs : public ::testing::Test {
 protected:
  template <typename F>
  void rejects(F&& call, const std::string& arg, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error about '" << arg << "'";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected ArgumentError about '" << arg << "', got: " << e.what();
    }
  }
  RuntimeOptions opts() {
    RuntimeOptions o;
    o.cache_dir = "";
    o.aot_dir = "";
    return o;
  }
};

}  // namespace cake::test
