#include "json_reader.hpp"

namespace cake {

namespace {
// path + "/" + the key as a JSON pointer token ('~' -> "~0", '/' -> "~1").
std::string child_path(const std::string& path, const std::string& key) {
  std::string out;
  out.reserve(path.size() + 1 + key.size());
  out += path;
  out += '/';
  if (key.find_first_of("~/") == std::string::npos) return out += key;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out.push_back(c);
  }
  return out;
}
}  // namespace

void JsonReader::expect_object() const {
  if (!j_.is_object()) fail(std::string("expected an object, got ") + j_.type_name());
}

void JsonReader::expect_array() const {
  if (!j_.is_array()) fail(std::string("expected an array, got ") + j_.type_name());
}

JsonReader JsonReader::at(const std::string& key) const {
  expect_object();
  auto it = j_.find(key);
  if (it == j_.end()) fail("missing required member '" + key + "'");
  return JsonReader(*it, file_, child_path(path_, key));
}

JsonReader JsonReader::at(size_t i) const {
  expect_array();
  return JsonReader(j_.at(i), file_, path_ + "/" + std::to_string(i));
}

void JsonReader::allow_only(std::initializer_list<const char*> allowed) const {
  expect_object();
  for (auto& [k, v] : j_.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) fail("unknown member '" + k + "'");
  }
}

std::string JsonReader::str() const {
  if (!j_.is_string()) fail(std::string("expected a string, got ") + j_.type_name());
  return j_.get<std::string>();
}

int64_t JsonReader::int64() const {
  if (!j_.is_number_integer()) fail(std::string("expected an integer, got ") + j_.type_name());
  if (j_.is_number_unsigned() && j_.get<uint64_t>() > uint64_t(INT64_MAX))
    fail("integer out of range");
  return j_.get<int64_t>();
}

bool JsonReader::boolean() const {
  if (!j_.is_boolean()) fail(std::string("expected a boolean, got ") + j_.type_name());
  return j_.get<bool>();
}

}  // namespace cake
