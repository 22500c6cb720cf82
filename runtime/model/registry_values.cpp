#include "registry_values.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

namespace cake {

// (Hand-written checks, not std::regex: a registry load runs thousands of them, and a new
// process's Runtime is meant to cost under a millisecond.)
void check_name(const JsonReader& r, const std::string& s) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  bool ok = !s.empty() && s.size() <= 128 && word(s[0]);
  for (size_t i = 1; ok && i < s.size(); ++i) ok = word(s[i]) || s[i] == '.' || s[i] == '-';
  if (!ok)
    r.fail("'" + s + "' is not a valid name (letters, digits, '_', '.', '-'; at most 128)");
}

Arch read_arch(const JsonReader& r) {
  auto a = Arch::parse(r.str());
  if (!a) r.fail("'" + r.str() + "' is not an arch (expected e.g. sm_90a)");
  return *a;
}

ArchPattern read_arch_pattern(const JsonReader& r) {
  std::string s = r.str();
  ArchPattern p;
  if (!s.empty() && s.back() == '+') {
    p.or_newer = true;
    s.pop_back();
  }
  auto a = Arch::parse(s);
  if (!a) r.fail("'" + r.str() + "' is not an arch pattern (e.g. sm_90a or sm_80+)");
  if (a->virt) r.fail("'" + r.str() + "' is a virtual arch; a window names devices' archs (e.g. sm_80+)");
  p.arch = *a;
  return p;
}

DType read_dtype(const JsonReader& r) {
  auto t = parse_dtype(r.str());
  if (!t) r.fail("'" + r.str() + "' is not a dtype (bf16, f16, f32, f64, i32, i64)");
  return *t;
}

Range read_range(const JsonReader& r) {
  r.expect_array();
  if (r.size() != 2) r.fail("a range is [lo, hi] (hi may be null for no upper bound)");
  Range out;
  out.lo = r.at(size_t{0}).int64();
  if (!r.at(size_t{1}).is_null()) out.hi = r.at(size_t{1}).int64();
  if (out.lo < 0) r.fail("range lower bound " + std::to_string(out.lo) + " is negative");
  if (out.lo > out.hi)
    r.fail("empty range: lo " + std::to_string(out.lo) + " > hi " + std::to_string(out.hi));
  return out;
}

// One pass over the members (a registry has a hundred windows; a lookup per known key twice
// over, has() then at(), was most of their cost).
Window read_window(const JsonReader& r) {
  r.expect_object();
  Window w;
  const JsonValue& v = r.value();
  for (size_t m = 0; m < v.size(); ++m) {
    const std::string_view key = v.key(m);
    const JsonReader d(v.member(m));
    if (key == "archs") {
      d.expect_array();
      for (size_t i = 0; i < d.size(); ++i) w.archs.push_back(read_arch_pattern(d.at(i)));
    } else if (key == "sm_count") {
      w.sm_count = read_range(d);
    } else if (key == "dims") {
      d.each_member([&](const std::string& k, const JsonReader& x) { w.dims[k] = read_range(x); });
    } else if (key == "tiles") {
      d.allow_only({"per", "waves"});
      d.at("per").each_member([&](const std::string& k, const JsonReader& x) {
        const int64_t size = x.int64();
        if (size < 1) x.fail("a tile's size must be >= 1");
        w.tiles.per[k] = size;
      });
      if (w.tiles.per.empty()) d.at("per").fail("names no dim");
      w.tiles.waves = read_range(d.at("waves"));
    } else if (key == "divisible") {
      d.each_member([&](const std::string& k, const JsonReader& x) {
        int64_t div = x.int64();
        if (div < 1) x.fail("divisor must be >= 1");
        w.divisible[k] = div;
      });
    } else if (key == "parity") {
      d.each_member([&](const std::string& k, const JsonReader& x) {
        std::string p = x.str();
        if (p != "odd" && p != "even") x.fail("parity is 'odd' or 'even'");
        w.parity[k] = p == "odd" ? 1 : 0;
      });
    } else if (key == "dtypes") {
      d.each_member([&](const std::string& k, const JsonReader& x) { w.dtypes[k] = read_dtype(x); });
    } else if (key == "align") {
      d.each_member([&](const std::string& k, const JsonReader& x) {
        int64_t a = x.int64();
        if (a < 1 || a > 4096 || (a & (a - 1)) != 0) x.fail("alignment must be a power of two in 1..4096");
        w.align[k] = int(a);
      });
    } else {
      r.fail("unknown member '" + std::string(key) + "'");
    }
  }
  return w;
}

std::vector<std::string> read_strings(const JsonReader& r) {
  r.expect_array();
  std::vector<std::string> out;
  for (size_t i = 0; i < r.size(); ++i) out.push_back(r.at(i).str());
  return out;
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RegistryError(path, "cannot open registry file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cake
