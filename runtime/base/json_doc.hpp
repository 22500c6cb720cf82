// A parsed JSON document held flat: every value is a node of one array, every container's
// children one run of an index array, every string a slice of the text (or, where it had
// escapes, of one buffer of decoded strings). A new Runtime reads
// the whole registry through it; nlohmann's DOM (a heap object per value) took 1.5 ms of
// that (docs/decisions.md, "A new process's Runtime").
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cake {

class JsonDoc;

// A value of a document: (document, node), valid while the document lives. Cheap to copy.
class JsonValue {
 public:
  enum class Type : uint8_t { null, boolean, integer, number, string, array, object };

  inline Type type() const;
  // nlohmann's names, so messages read as before: null, boolean, number, string, array, object.
  const char* type_name() const;
  bool is_null() const { return type() == Type::null; }
  bool is_object() const { return type() == Type::object; }
  bool is_array() const { return type() == Type::array; }
  bool is_string() const { return type() == Type::string; }
  bool is_integer() const { return type() == Type::integer; }

  // Members of an object, elements of an array, 0 otherwise.
  inline size_t size() const;
  inline JsonValue element(size_t i) const;     // an array's i-th element (i < size())
  inline std::string_view key(size_t i) const;  // an object's i-th member's name, in document order
  inline JsonValue member(size_t i) const;      // and its value
  inline bool find(std::string_view key, JsonValue* out) const;  // false when absent or not an object

  inline std::string_view str() const;  // a string's decoded text
  inline bool boolean() const;
  // An integer literal: int64 when it fits, else (positive, fits 64 bits) unsigned.
  inline bool is_unsigned_only() const;  // a positive integer above INT64_MAX
  inline int64_t int64() const;
  inline uint64_t uint64() const;

  const JsonDoc& doc() const { return *doc_; }
  // The value's text as the document has it (whitespace and all).
  std::string_view source() const;
  // The RFC 6901 pointer of this value in its document ("" for the root).
  std::string pointer() const;
  // The same value as an nlohmann::json.
  nlohmann::json to_nlohmann() const;

 private:
  friend class JsonDoc;
  JsonValue(const JsonDoc* doc, uint32_t node) : doc_(doc), node_(node) {}
  const JsonDoc* doc_;
  uint32_t node_;
};

class JsonDoc {
 public:
  // Strict RFC 8259 (UTF-8 checked, a leading BOM skipped). Refused beyond the RFC: a key twice
  // in one object, nesting deeper than kMaxDepth, a number a double cannot hold. Throws
  // RegistryError(file, "not valid JSON: line L, column C: ...").
  static std::shared_ptr<const JsonDoc> parse(std::string_view text, const std::string& file);
  // The same without a copy of the text: the document reads it, so it must outlive the document.
  static std::shared_ptr<const JsonDoc> parse_view(std::string_view text, const std::string& file);
  static constexpr int kMaxDepth = 256;

  JsonDoc() = default;
  JsonDoc(const JsonDoc&) = delete;  // text_ may point into own_
  JsonDoc& operator=(const JsonDoc&) = delete;

  JsonValue root() const { return JsonValue(this, 0); }
  const std::string& file() const { return file_; }

 private:
  friend class JsonValue;
  friend class JsonParser;
  // 16 bytes: a value's type and its payload. Where a node sits (its parent, its key) is not
  // stored: only an error message asks, and JsonValue::pointer() finds it from the root.
  struct Span {
    uint32_t first;  // string: offset in text_ (or decoded_); container: offset in kids_
    uint32_t count;  // string: bytes; array: elements; object: members
  };
  struct Node {
    JsonValue::Type type;
    bool is_unsigned = false;  // an integer above INT64_MAX (bits in `u`)
    bool decoded = false;      // a string that had escapes: its text is in decoded_
    uint32_t at = 0;           // where the value starts in text_
    union {
      Span span;
      int64_t i = 0;
      uint64_t u;
      double d;
      bool b;
    };
  };
  static_assert(sizeof(Node) == 16);
  std::string file_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> kids_;  // an object's run alternates key node, value node
  std::string own_;             // the text, when the document keeps a copy
  std::string_view text_;       // the text: own_ or the caller's
  std::string decoded_;         // the strings that had escapes, decoded
};

// The accessors are inline: a registry load makes tens of thousands of them.
JsonValue::Type JsonValue::type() const { return doc_->nodes_[node_].type; }

size_t JsonValue::size() const {
  const auto& n = doc_->nodes_[node_];
  return n.type == Type::array || n.type == Type::object ? n.span.count : 0;
}

JsonValue JsonValue::element(size_t i) const { return {doc_, doc_->kids_[doc_->nodes_[node_].span.first + i]}; }

std::string_view JsonValue::key(size_t i) const {
  return JsonValue(doc_, doc_->kids_[doc_->nodes_[node_].span.first + 2 * i]).str();
}

JsonValue JsonValue::member(size_t i) const { return {doc_, doc_->kids_[doc_->nodes_[node_].span.first + 2 * i + 1]}; }

bool JsonValue::find(std::string_view k, JsonValue* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type != Type::object) return false;
  const uint32_t* kid = doc_->kids_.data() + n.span.first;
  for (uint32_t i = 0; i < n.span.count; ++i, kid += 2) {
    const auto& key = doc_->nodes_[kid[0]];
    if (key.span.count == k.size() &&
        std::memcmp((key.decoded ? doc_->decoded_.data() : doc_->text_.data()) + key.span.first, k.data(), k.size()) == 0) {
      *out = JsonValue(doc_, kid[1]);
      return true;
    }
  }
  return false;
}

std::string_view JsonValue::str() const {
  const auto& n = doc_->nodes_[node_];
  return std::string_view((n.decoded ? doc_->decoded_.data() : doc_->text_.data()) + n.span.first, n.span.count);
}

bool JsonValue::boolean() const { return doc_->nodes_[node_].b; }
bool JsonValue::is_unsigned_only() const { return doc_->nodes_[node_].is_unsigned; }
int64_t JsonValue::int64() const { return doc_->nodes_[node_].i; }
uint64_t JsonValue::uint64() const { return doc_->nodes_[node_].u; }

}  // namespace cake
