#include "json_reader.hpp"

#include <algorithm>
#include <cstring>

namespace cake {

std::string JsonReader::where() const {
  const std::string p = path();
  return v_.doc().file() + ": " + (p.empty() ? "/" : p);
}

void JsonReader::expect_object() const {
  if (!v_.is_object()) fail(std::string("expected an object, got ") + v_.type_name());
}

void JsonReader::expect_array() const {
  if (!v_.is_array()) fail(std::string("expected an array, got ") + v_.type_name());
}

bool JsonReader::has(std::string_view key) const {
  JsonValue m = v_;
  return v_.find(key, &m);
}

JsonReader JsonReader::at(std::string_view key) const {
  expect_object();
  JsonValue m = v_;
  if (!v_.find(key, &m)) fail("missing required member '" + std::string(key) + "'");
  return JsonReader(m);
}

JsonReader JsonReader::at(size_t i) const {
  expect_array();
  if (i >= v_.size()) fail("expected at least " + std::to_string(i + 1) + " elements, got " + std::to_string(v_.size()));
  return JsonReader(v_.element(i));
}

void JsonReader::allow_only(std::initializer_list<std::string_view> allowed) const {
  expect_object();
  for (size_t i = 0, n = v_.size(); i < n; ++i) {
    const std::string_view k = v_.key(i);
    if (std::none_of(allowed.begin(), allowed.end(), [&](std::string_view a) { return k == a; }))
      fail("unknown member '" + std::string(k) + "'");
  }
}

std::string JsonReader::str() const {
  if (!v_.is_string()) fail(std::string("expected a string, got ") + v_.type_name());
  return std::string(v_.str());
}

int64_t JsonReader::int64() const {
  if (!v_.is_integer()) fail(std::string("expected an integer, got ") + v_.type_name());
  if (v_.is_unsigned_only()) fail("integer out of range");
  return v_.int64();
}

bool JsonReader::boolean() const {
  if (v_.type() != JsonValue::Type::boolean) fail(std::string("expected a boolean, got ") + v_.type_name());
  return v_.boolean();
}

}  // namespace cake
