// What the argument tests of every family share: fake device tensors (metadata only, at
// distinct addresses that are never touched) and a fixture that expects an ArgumentError
// naming the argument. Checks run before any device call, so these tests need no GPU.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cake_c.h"
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
  // The call passes every argument check. Past them it stops at the device: without a GPU
  // (no driver), or with one at the memory check, which fake tensors fail last.
  template <typename F>
  void accepts(F&& call, const std::string& what) {
    try {
      call();
    } catch (const ArgumentError& e) {
      const std::string m = e.what();
      if (m.find("not on cuda:") == std::string::npos && m.find("allocation") == std::string::npos)
        ADD_FAILURE() << what << ": refused: " << m;
    } catch (const std::exception&) {
    }
  }
  RuntimeOptions opts() {
    RuntimeOptions o;
    o.cache_dir = "";
    o.aot_dir = "";
    return o;
  }
};

// The same checks through the C ABI: cake_prepare of `op` on the named tensors with the
// options' JSON (null: none) must fail with CAKE_ERROR_ARGUMENT, a message holding `text`,
// and no launch.
class CAbiArgs {
 public:
  CAbiArgs() { EXPECT_EQ(cake_runtime_create("{\"cache_dir\": \"\"}", &rt_), CAKE_OK) << cake_last_error(); }
  ~CAbiArgs() { cake_runtime_destroy(rt_); }
  CAbiArgs(const CAbiArgs&) = delete;
  CAbiArgs& operator=(const CAbiArgs&) = delete;
  void rejects(const char* op, const std::vector<std::pair<const char*, const DLTensor*>>& tensors, const char* options,
               const std::string& text) {
    std::vector<const char*> names;
    std::vector<const DLTensor*> views;
    for (const auto& [n, d] : tensors) names.push_back(n), views.push_back(d);
    cake_launch* l = nullptr;
    EXPECT_EQ(cake_prepare(rt_, op, int(names.size()), names.data(), views.data(), options, &l), CAKE_ERROR_ARGUMENT)
        << cake_last_error();
    EXPECT_NE(std::string(cake_last_error()).find(text), std::string::npos) << cake_last_error();
    EXPECT_EQ(l, nullptr);
  }

 private:
  cake_runtime* rt_ = nullptr;
};

}  // namespace cake::test
