#include "json_doc.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>

#include "error.hpp"

namespace cake {

using Type = JsonValue::Type;

// Bytes a string copies as they are: not '"', '\\', a control character or a UTF-8 lead.
constexpr auto kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

// Strings are scanned eight bytes at a time: the word tests below are exact as booleans (a
// borrow can only mark bytes above a byte that truly matches).
inline uint64_t load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
inline uint64_t zero_byte(uint64_t v) { return (v - kOnes) & ~v & kHigh; }
// The high bit of each byte that is not plain ('"', '\\', below 0x20 or from 0x80); the lowest
// marked byte is the first such byte (little-endian loads).
static_assert(std::endian::native == std::endian::little);
inline uint64_t special_bytes(uint64_t v) {
  return zero_byte(v ^ (kOnes * '"')) | zero_byte(v ^ (kOnes * '\\')) | ((v - kOnes * 0x20) & ~v & kHigh) | (v & kHigh);
}

// Recursive descent over the text; containers gather their children's node indices on one
// stack and move them to the document's index array when they close.
class JsonParser {
 public:
  JsonParser(std::string_view text, JsonDoc& doc) : t_(text), doc_(doc) {}

  void run() {
    if (t_.size() > UINT32_MAX) fail_at(0, "document too large");
    if (t_.size() >= 3 && t_.substr(0, 3) == "\xEF\xBB\xBF") p_ = 3;
    doc_.nodes_.reserve(t_.size() / 12 + 8);  // a registry document has a node per 8-20 bytes
    doc_.kids_.reserve(t_.size() / 12 + 8);
    skip_ws();
    value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected content after the document");
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
  JsonDoc& doc_;
  std::vector<uint32_t> stack_;

  [[noreturn]] void fail(const std::string& what) const { fail_at(p_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    at = std::min(at, t_.size());
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at; ++i) {
      if (t_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw RegistryError(doc_.file_, "not valid JSON: line " + std::to_string(line) + ", column " +
                                        std::to_string(col) + ": " + what);
  }
  std::string describe_here() const {
    if (p_ >= t_.size()) return "the end of the input";
    const unsigned char c = t_[p_];
    if (c >= 0x20 && c < 0x7f) return std::string("'") + char(c) + "'";
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", c);
    return std::string("byte ") + buf;
  }

  char peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  bool at_end() const { return p_ >= t_.size(); }
  void skip_ws() {
    const char* d = t_.data();
    size_t p = p_;
    while (p < t_.size() && (d[p] == ' ' || d[p] == '\n' || d[p] == '\r' || d[p] == '\t')) ++p;
    p_ = p;
  }

  // Nodes are numbered in document order, a container before its children (JsonValue::pointer
  // relies on it).
  uint32_t add(Type type) { return add(type, p_); }
  uint32_t add(Type type, size_t at) {
    if (doc_.nodes_.size() >= UINT32_MAX) fail("document too large");
    JsonDoc::Node& n = doc_.nodes_.emplace_back();
    n.type = type;
    n.at = uint32_t(at);
    return uint32_t(doc_.nodes_.size() - 1);
  }

  uint32_t value(int depth) {
    switch (peek()) {
      case '{': return container(Type::object, depth + 1);
      case '[': return container(Type::array, depth + 1);
      case '"': return string();
      case 't': return literal("true", Type::boolean, true);
      case 'f': return literal("false", Type::boolean, false);
      case 'n': return literal("null", Type::null, false);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        fail("expected a value, found " + describe_here());
    }
  }

  uint32_t literal(std::string_view word, Type type, bool b) {
    if (t_.substr(p_, word.size()) != word) fail("expected a value, found " + describe_here());
    uint32_t n = add(type);
    p_ += word.size();
    doc_.nodes_[n].b = b;
    return n;
  }

  uint32_t container(Type type, int depth) {
    if (depth > JsonDoc::kMaxDepth) fail("nested deeper than " + std::to_string(JsonDoc::kMaxDepth) + " levels");
    const size_t open = p_;
    const uint32_t self = add(type);
    ++p_;
    const size_t base = stack_.size();
    const char close = type == Type::object ? '}' : ']';
    uint32_t count = 0;
    skip_ws();
    if (peek() == close) {
      ++p_;
    } else {
      for (;;) {
        if (type == Type::object) {
          if (peek() != '"') fail("expected a member name (a string), found " + describe_here());
          stack_.push_back(string());
          skip_ws();
          if (peek() != ':') fail("expected ':' after a member name, found " + describe_here());
          ++p_;
          skip_ws();
        }
        stack_.push_back(value(depth));
        ++count;
        skip_ws();
        if (peek() == ',') {
          ++p_;
          skip_ws();
          continue;
        }
        if (peek() == close) {
          ++p_;
          break;
        }
        fail(std::string("expected ',' or '") + close + "', found " + describe_here());
      }
    }
    if (type == Type::object) check_unique_keys(base, count, open);
    JsonDoc::Node& n = doc_.nodes_[self];
    n.span.first = uint32_t(doc_.kids_.size());
    n.span.count = count;
    doc_.kids_.insert(doc_.kids_.end(), stack_.begin() + base, stack_.end());
    stack_.resize(base);
    return self;
  }

  std::string_view text_of(uint32_t node) const {
    const JsonDoc::Node& n = doc_.nodes_[node];
    return std::string_view((n.decoded ? doc_.decoded_.data() : t_.data()) + n.span.first, n.span.count);
  }

  // A key given twice is refused: which one a reader sees would be the parser's choice.
  void check_unique_keys(size_t base, uint32_t count, size_t open) {
    if (count <= 16) {  // no allocation for the small objects a registry has
      // A key is compared with the earlier ones only when its length and ends share a bit of
      // `seen` with one of them: keys that differ there cannot be equal.
      uint64_t seen = 0;
      for (uint32_t i = 0; i < count; ++i) {
        const std::string_view k = text_of(stack_[base + 2 * i]);
        const uint64_t bit = uint64_t(1) << ((k.size() + (k.empty() ? 0 : 7 * k.front() + 13 * k.back())) & 63);
        if (seen & bit)
          for (uint32_t j = 0; j < i; ++j)
            if (k == text_of(stack_[base + 2 * j]))
              fail_at(open, "the object has member '" + std::string(k) + "' twice");
        seen |= bit;
      }
      return;
    }
    std::vector<std::string_view> keys;
    keys.reserve(count);
    for (uint32_t i = 0; i < count; ++i) keys.push_back(text_of(stack_[base + 2 * i]));
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) fail_at(open, "the object has member '" + std::string(*dup) + "' twice");
  }

  // A string without escapes is a slice of the text (same offsets); one with escapes is
  // decoded onto decoded_.
  uint32_t string() {
    const uint32_t n = add(Type::string);
    const size_t start = ++p_;  // past the opening quote
    size_t first = start;
    for (;;) {  // plain bytes and valid UTF-8 up to the closing quote: nothing to copy
      for (;;) {
        if (p_ + 8 > t_.size()) {
          while (p_ < t_.size() && kPlain[static_cast<unsigned char>(t_[p_])]) ++p_;
          break;
        }
        if (const uint64_t m = special_bytes(load8(t_.data() + p_))) {
          p_ += size_t(std::countr_zero(m)) / 8;
          break;
        }
        p_ += 8;
      }
      if (at_end()) fail("a string is not closed");
      const unsigned char c = t_[p_];
      if (c < 0x80) break;
      p_ += utf8_length();
    }
    size_t end = p_;
    bool decoded = false;
    if (t_[p_] == '"') {
      ++p_;
    } else {
      decoded = true;
      std::string& out = doc_.decoded_;
      first = out.size();
      out.append(t_.data() + start, p_ - start);
      for (;;) {
        size_t run = p_;
        while (run < t_.size() && kPlain[static_cast<unsigned char>(t_[run])]) ++run;
        out.append(t_.data() + p_, run - p_);
        p_ = run;
        if (at_end()) fail("a string is not closed");
        const unsigned char c = t_[p_];
        if (c == '"') {
          ++p_;
          break;
        }
        if (c == '\\') {
          escape(out);
        } else if (c < 0x20) {
          fail("a control character (" + describe_here() + ") in a string must be escaped");
        } else {
          const int len = utf8_length();
          out.append(t_.data() + p_, len);
          p_ += len;
        }
      }
      end = out.size();
    }
    if (end > UINT32_MAX) fail("document too large");
    doc_.nodes_[n].span = {uint32_t(first), uint32_t(end - first)};
    doc_.nodes_[n].decoded = decoded;
    return n;
  }

  // The length of the UTF-8 encoded code point at p_, checked (RFC 3629: no overlong forms,
  // no surrogates, <= U+10FFFF).
  int utf8_length() const {
    const unsigned char c = t_[p_];
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else fail("invalid UTF-8 (" + describe_here() + ") in a string");
    if (p_ + len > t_.size()) fail("invalid UTF-8: a sequence cut by the end of the input");
    for (int k = 1; k < len; ++k) {
      const unsigned char b = t_[p_ + k];
      const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (b < l || b > h) fail_at(p_ + k, "invalid UTF-8 in a string");
    }
    return len;
  }

  void escape(std::string& out) {
    ++p_;  // the backslash
    if (at_end()) fail("a string is not closed");
    const char c = t_[p_++];
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: --p_; fail("invalid escape '\\" + std::string(1, c) + "' in a string");
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a low surrogate (\\u" + hex_text(cp) + ") without a high one");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (t_.substr(p_, 2) != "\\u") fail("a high surrogate (\\u" + hex_text(cp) + ") without a low one");
      p_ += 2;
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate (\\u" + hex_text(cp) + ") without a low one");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  static std::string hex_text(uint32_t v) {
    char buf[8];
    snprintf(buf, sizeof buf, "%04X", v);
    return buf;
  }

  uint32_t hex4() {
    if (p_ + 4 > t_.size()) fail("\\u needs four hex digits");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = t_[p_ + k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail_at(p_ + k, "\\u needs four hex digits");
      v = v * 16 + uint32_t(d);
    }
    p_ += 4;
    return v;
  }

  bool digit() const { return p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9'; }

  uint32_t number() {
    const size_t start = p_;
    const bool negative = peek() == '-';
    if (negative) ++p_;
    if (peek() == '0') {
      ++p_;
    } else if (digit()) {
      while (digit()) ++p_;
    } else {
      fail("expected a digit, found " + describe_here());
    }
    bool integer = true;
    if (peek() == '.') {
      ++p_;
      if (!digit()) fail("expected a digit after '.', found " + describe_here());
      while (digit()) ++p_;
      integer = false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!digit()) fail("expected a digit in the exponent, found " + describe_here());
      while (digit()) ++p_;
      integer = false;
    }
    const char* b = t_.data() + start;
    const char* e = t_.data() + p_;
    if (integer) {
      int64_t i = 0;
      if (std::from_chars(b, e, i).ec == std::errc()) {
        uint32_t n = add(Type::integer, start);
        doc_.nodes_[n].i = i;
        return n;
      }
      uint64_t u = 0;
      if (!negative && std::from_chars(b, e, u).ec == std::errc()) {
        uint32_t n = add(Type::integer, start);
        doc_.nodes_[n].u = u;
        doc_.nodes_[n].is_unsigned = true;
        return n;
      }
    }
    double d = 0;
    if (std::from_chars(b, e, d).ec != std::errc())
      fail_at(start, "the number " + std::string(b, e) + " is out of a double's range");
    uint32_t n = add(Type::number, start);
    doc_.nodes_[n].d = d;
    return n;
  }
};

std::shared_ptr<const JsonDoc> JsonDoc::parse(std::string_view text, const std::string& file) {
  auto doc = std::make_shared<JsonDoc>();
  doc->file_ = file;
  doc->own_.assign(text);
  doc->text_ = doc->own_;
  JsonParser(doc->text_, *doc).run();
  return doc;
}

std::shared_ptr<const JsonDoc> JsonDoc::parse_view(std::string_view text, const std::string& file) {
  auto doc = std::make_shared<JsonDoc>();
  doc->file_ = file;
  doc->text_ = text;
  JsonParser(text, *doc).run();
  return doc;
}

// The end of the value at `at` of text the parser accepted: its closing bracket found by
// depth, strings (and the brackets in them) skipped whole.
std::string_view JsonValue::source() const {
  const std::string_view t = doc_->text_;
  const size_t at = doc_->nodes_[node_].at;
  size_t p = at;
  int depth = 0;
  do {
    const char c = t[p++];
    if (c == '"') {
      while (t[p] != '"') p += t[p] == '\\' ? 2 : 1;
      ++p;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (depth == 0) {  // a number or a literal: up to the next delimiter
      while (p < t.size() && t[p] != ',' && t[p] != '}' && t[p] != ']' && t[p] != ' ' && t[p] != '\n' &&
             t[p] != '\r' && t[p] != '\t')
        ++p;
    }
  } while (depth > 0);
  return t.substr(at, p - at);
}

const char* JsonValue::type_name() const {
  switch (type()) {
    case Type::null: return "null";
    case Type::boolean: return "boolean";
    case Type::integer:
    case Type::number: return "number";
    case Type::string: return "string";
    case Type::array: return "array";
    case Type::object: return "object";
  }
  return "?";
}

// Walks down from the root: children are numbered after their container and before its
// next sibling, so the child holding node_ is the last one numbered at or below it.
std::string JsonValue::pointer() const {
  std::string out;
  uint32_t at = 0;
  while (at != node_) {
    const JsonDoc::Node& n = doc_->nodes_[at];
    if ((n.type != Type::object && n.type != Type::array) || n.span.count == 0) break;  // not below `at`
    const bool object = n.type == Type::object;
    const uint32_t step = object ? 2 : 1;
    const uint32_t* kids = doc_->kids_.data() + n.span.first;
    uint32_t lo = 0, hi = n.span.count;  // the last child (value) numbered <= node_
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (kids[mid * step + step - 1] <= node_) lo = mid;
      else hi = mid;
    }
    out += '/';
    if (!object) {
      out += std::to_string(lo);
    } else {
      for (char c : JsonValue(doc_, kids[lo * 2]).str()) {  // RFC 6901: '~' -> "~0", '/' -> "~1"
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
      }
    }
    at = kids[lo * step + step - 1];
  }
  return out;
}

nlohmann::json JsonValue::to_nlohmann() const {
  const auto& n = doc_->nodes_[node_];
  switch (n.type) {
    case Type::null: return nullptr;
    case Type::boolean: return n.b;
    case Type::integer: return n.is_unsigned ? nlohmann::json(n.u) : nlohmann::json(n.i);
    case Type::number: return n.d;
    case Type::string: return std::string(str());
    case Type::array: {
      auto j = nlohmann::json::array();
      for (size_t i = 0; i < n.span.count; ++i) j.push_back(element(i).to_nlohmann());
      return j;
    }
    case Type::object: {
      auto j = nlohmann::json::object();
      for (size_t i = 0; i < n.span.count; ++i) j[std::string(key(i))] = member(i).to_nlohmann();
      return j;
    }
  }
  return nullptr;
}

}  // namespace cake
