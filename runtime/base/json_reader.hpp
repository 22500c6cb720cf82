// Typed access to a JSON document that remembers where it is, so every complaint names
// the file and the JSON pointer of the offending value.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "error.hpp"

namespace cake {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string file, std::string path = "")
      : j_(j), file_(std::make_shared<const std::string>(std::move(file))), path_(std::move(path)) {}

  const nlohmann::json& json() const { return j_; }
  const std::string& path() const { return path_; }
  std::string where() const { return *file_ + ": " + (path_.empty() ? "/" : path_); }
  [[noreturn]] void fail(const std::string& what) const { throw RegistryError(where(), what); }

  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  JsonReader at(const std::string& key) const;          // required member
  JsonReader at(size_t i) const;                        // array element
  size_t size() const { return j_.size(); }
  void expect_object() const;
  void expect_array() const;
  // Members other than `allowed` are a typo, not an extension: reject them.
  void allow_only(std::initializer_list<const char*> allowed) const;

  std::string str() const;
  int64_t int64() const;
  bool boolean() const;

 private:
  JsonReader(const nlohmann::json& j, std::shared_ptr<const std::string> file, std::string path)
      : j_(j), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& j_;
  // Shared by a document's readers: a registry load makes one per value it reads.
  std::shared_ptr<const std::string> file_;
  std::string path_;
};

}  // namespace cake
