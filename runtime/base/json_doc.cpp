#include "json_doc.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>

#include "error.hpp"

namespace cake {

using Type = JsonValue::Type;

// Bytes a string copies as they are: not '"', '\\', a control character or a UTF-8 lead.
constexpr auto kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

// Recursive descent over the text; containers gather their children's node indices on one
// stack and move them to the document's index array when they close.
class JsonParser {
 public:
  JsonParser(std::string_view text, JsonDoc& doc) : t_(text), doc_(doc) {}

  void run() {
    if (t_.size() >= 3 && t_.substr(0, 3) == "\xEF\xBB\xBF") p_ = 3;
    doc_.nodes_.reserve(t_.size() / 7 + 8);  // a registry document has a node per 8-16 bytes
    doc_.kids_.reserve(t_.size() / 7 + 8);
    doc_.strings_.reserve(t_.size() + 64);
    doc_.strings_.assign(t_);  // strings without escapes are slices of it
    skip_ws();
    value(0, 0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected content after the document");
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
  JsonDoc& doc_;
  std::vector<uint32_t> stack_;
  uint32_t pos_ = 0;  // the position of the next node among its parent's children

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
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\r' || t_[p_] == '\t')) ++p_;
  }

  // A node under `parent`, at position pos_ among its children (set by the container).
  uint32_t add(Type type, uint32_t parent) {
    if (doc_.nodes_.size() >= UINT32_MAX) fail("document too large");
    JsonDoc::Node n;
    n.type = type;
    n.parent = parent;
    n.pos = pos_;
    doc_.nodes_.push_back(n);
    return uint32_t(doc_.nodes_.size() - 1);
  }

  uint32_t value(int depth, uint32_t parent) {
    switch (peek()) {
      case '{': return container(Type::object, depth + 1, parent);
      case '[': return container(Type::array, depth + 1, parent);
      case '"': return string(parent);
      case 't': return literal("true", Type::boolean, true, parent);
      case 'f': return literal("false", Type::boolean, false, parent);
      case 'n': return literal("null", Type::null, false, parent);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number(parent);
        fail("expected a value, found " + describe_here());
    }
  }

  uint32_t literal(std::string_view word, Type type, bool b, uint32_t parent) {
    if (t_.substr(p_, word.size()) != word) fail("expected a value, found " + describe_here());
    p_ += word.size();
    uint32_t n = add(type, parent);
    doc_.nodes_[n].b = b;
    return n;
  }

  uint32_t container(Type type, int depth, uint32_t parent) {
    if (depth > JsonDoc::kMaxDepth) fail("nested deeper than " + std::to_string(JsonDoc::kMaxDepth) + " levels");
    const size_t open = p_++;
    const uint32_t self = add(type, parent);
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
          pos_ = count;
          stack_.push_back(string(self));
          skip_ws();
          if (peek() != ':') fail("expected ':' after a member name, found " + describe_here());
          ++p_;
          skip_ws();
        }
        pos_ = count;
        stack_.push_back(value(depth, self));
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
    n.first = uint32_t(doc_.kids_.size());
    n.count = count;
    doc_.kids_.insert(doc_.kids_.end(), stack_.begin() + base, stack_.end());
    stack_.resize(base);
    return self;
  }

  std::string_view text_of(uint32_t node) const {
    const JsonDoc::Node& n = doc_.nodes_[node];
    return std::string_view(doc_.strings_).substr(n.first, n.count);
  }

  // A key given twice is refused: which one a reader sees would be the parser's choice.
  void check_unique_keys(size_t base, uint32_t count, size_t open) {
    if (count <= 16) {  // pairwise: no allocation for the small objects a registry has
      for (uint32_t i = 1; i < count; ++i)
        for (uint32_t j = 0; j < i; ++j)
          if (text_of(stack_[base + 2 * i]) == text_of(stack_[base + 2 * j]))
            fail_at(open, "the object has member '" + std::string(text_of(stack_[base + 2 * i])) + "' twice");
      return;
    }
    std::vector<std::string_view> keys;
    keys.reserve(count);
    for (uint32_t i = 0; i < count; ++i) keys.push_back(text_of(stack_[base + 2 * i]));
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) fail_at(open, "the object has member '" + std::string(*dup) + "' twice");
  }

  // A string without escapes is a slice of the text's copy at the head of strings_ (same
  // offsets); one with escapes is decoded onto its tail.
  uint32_t string(uint32_t parent) {
    const size_t start = ++p_;  // past the opening quote
    size_t first = start;
    for (;;) {  // plain bytes and valid UTF-8 up to the closing quote: nothing to copy
      while (p_ < t_.size() && kPlain[static_cast<unsigned char>(t_[p_])]) ++p_;
      if (at_end()) fail("a string is not closed");
      const unsigned char c = t_[p_];
      if (c < 0x80) break;
      p_ += utf8_length();
    }
    size_t end = p_;
    if (t_[p_] == '"') {
      ++p_;
    } else {
      std::string& out = doc_.strings_;
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
    uint32_t n = add(Type::string, parent);
    doc_.nodes_[n].first = uint32_t(first);
    doc_.nodes_[n].count = uint32_t(end - first);
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

  uint32_t number(uint32_t parent) {
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
        uint32_t n = add(Type::integer, parent);
        doc_.nodes_[n].i = i;
        return n;
      }
      uint64_t u = 0;
      if (!negative && std::from_chars(b, e, u).ec == std::errc()) {
        uint32_t n = add(Type::integer, parent);
        doc_.nodes_[n].u = u;
        doc_.nodes_[n].is_unsigned = true;
        return n;
      }
    }
    double d = 0;
    if (std::from_chars(b, e, d).ec != std::errc())
      fail_at(start, "the number " + std::string(b, e) + " is out of a double's range");
    uint32_t n = add(Type::number, parent);
    doc_.nodes_[n].d = d;
    return n;
  }
};

std::shared_ptr<const JsonDoc> JsonDoc::parse(std::string_view text, const std::string& file) {
  auto doc = std::make_shared<JsonDoc>();
  doc->file_ = file;
  JsonParser(text, *doc).run();
  return doc;
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

void JsonValue::append_pointer(std::string& out) const {
  if (node_ == 0) return;
  const auto& n = doc_->nodes_[node_];
  const JsonValue parent(doc_, n.parent);
  parent.append_pointer(out);
  out += '/';
  if (!parent.is_object()) {
    out += std::to_string(n.pos);
    return;
  }
  for (char c : parent.key(n.pos)) {  // RFC 6901: '~' -> "~0", '/' -> "~1"
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
}

std::string JsonValue::pointer() const {
  std::string out;
  append_pointer(out);
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
      for (size_t i = 0; i < n.count; ++i) j.push_back(element(i).to_nlohmann());
      return j;
    }
    case Type::object: {
      auto j = nlohmann::json::object();
      for (size_t i = 0; i < n.count; ++i) j[std::string(key(i))] = member(i).to_nlohmann();
      return j;
    }
  }
  return nullptr;
}

}  // namespace cake
