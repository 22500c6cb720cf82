// Typed access to a JSON document that knows where it is, so every complaint names the file
// and the JSON pointer of the offending value. The pointer is worked out only when asked for.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"
#include "json_doc.hpp"

namespace cake {

class JsonReader {
 public:
  explicit JsonReader(JsonValue v) : v_(v) {}

  const JsonValue& value() const { return v_; }
  std::string path() const { return v_.pointer(); }
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const { throw RegistryError(where(), what); }

  bool has(std::string_view key) const;
  JsonReader at(std::string_view key) const;  // required member
  JsonReader at(size_t i) const;              // array element
  size_t size() const { return v_.size(); }
  bool is_null() const { return v_.is_null(); }
  void expect_object() const;
  void expect_array() const;
  // Members other than `allowed` are a typo, not an extension: reject them.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  // f(name, value) for each member of an object, in document order.
  template <class F>
  void each_member(F&& f) const {
    expect_object();
    for (size_t i = 0, n = v_.size(); i < n; ++i) f(std::string(v_.key(i)), JsonReader(v_.member(i)));
  }

  std::string str() const;
  int64_t int64() const;
  bool boolean() const;

 private:
  JsonValue v_;
};

}  // namespace cake
