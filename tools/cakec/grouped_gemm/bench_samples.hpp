// The `cakec bench grouped_gemm --samples` CSV file: one line per timed call. Written by the
// bench (format_sample_line), read back by `cakec bench summarize` (parse_samples); both are
// here, and the unit tests pin the writer's exact line and round-trip it. No GPU needed.
#pragma once
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench_stats.hpp"
#include "error.hpp"

namespace cakec {

inline const char* const kSamplesHeader = "row,shape,m,e,dist,op,rep,slot,contender,ms";
// The contenders in the order `cakec bench grouped_gemm` times them (TimedCall::contender).
inline const char* const kContenderNames[] = {"cake", "loop", "grouped"};
constexpr int kContenders = 3;

// One row of a run: what was multiplied and every timed call of it.
struct SampleRow {
  int row = -1;  // the row's place in its run (--m 4096 4096 repeats a key, not a row)
  std::string shape, dist, op;
  long long m = 0, e = 0;
  std::vector<TimedCall> calls;
  // As the bench's summary names a row: "down M=112576 E=4 one_empty dgrad".
  std::string what() const {
    return shape + " M=" + std::to_string(m) + " E=" + std::to_string(e) + " " + dist + " " + op;
  }
};

// One CSV line of a timed call (with its newline), as --samples writes it.
inline std::string format_sample_line(const SampleRow& r, const TimedCall& k) {
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.9g", k.ms);  // 9 significant digits: a float's time to the last bit
  return std::to_string(r.row) + "," + r.shape + "," + std::to_string(r.m) + "," + std::to_string(r.e) + "," +
         r.dist + "," + r.op + "," + std::to_string(k.rep) + "," + std::to_string(k.slot) + "," +
         kContenderNames[k.contender] + "," + ms + "\n";
}

namespace detail {

// The whole field, digits only (no sign, space or hex that strtoll / strtod would take).
inline bool parse_int(const std::string& s, long long& v) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}
inline bool parse_positive(const std::string& s, double& v) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(v) && v > 0;
}

}  // namespace detail

// The rows of one --samples file, in their row order. `name` (the file) and the line number
// are in every error: a cake::Error such as "runs/a.csv:7: ms 'x' is not a positive number".
inline std::vector<SampleRow> parse_samples(const std::string& text, const std::string& name) {
  std::map<int, SampleRow> rows;
  std::map<std::tuple<int, int, int>, int> seen;  // (row, rep, contender) -> line
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto fail = [&](const std::string& why) -> void {
      throw cake::Error(name + ":" + std::to_string(line_no) + ": " + why);
    };
    if (line_no == 1) {
      if (line != kSamplesHeader)
        fail("not a `cakec bench grouped_gemm --samples` file: the first line is not '" + std::string(kSamplesHeader) +
             "'");
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> f;
    for (size_t a = 0;;) {
      const size_t b = line.find(',', a);
      f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    if (f.size() != 10) fail("expected 10 fields, got " + std::to_string(f.size()));
    long long row = 0, m = 0, e = 0, rep = 0, slot = 0;
    if (!detail::parse_int(f[0], row) || row < 0 || row > 1000000000) fail("row '" + f[0] + "' is not a count");
    if (!detail::parse_int(f[2], m) || m < 0) fail("m '" + f[2] + "' is not a count");
    if (!detail::parse_int(f[3], e) || e < 1) fail("e '" + f[3] + "' is not a positive count");
    if (!detail::parse_int(f[6], rep) || rep < 0 || rep > 1000000000) fail("rep '" + f[6] + "' is not a count");
    if (!detail::parse_int(f[7], slot) || slot < 0 || slot >= kContenders) fail("slot '" + f[7] + "' is not 0-2");
    int contender = -1;
    for (int c = 0; c < kContenders; ++c)
      if (f[8] == kContenderNames[c]) contender = c;
    if (contender < 0) fail("contender '" + f[8] + "' is not cake, loop or grouped");
    double ms = 0;
    if (!detail::parse_positive(f[9], ms)) fail("ms '" + f[9] + "' is not a positive number");
    for (int i : {1, 4, 5})
      if (f[size_t(i)].empty()) fail("an empty " + std::string(i == 1 ? "shape" : i == 4 ? "dist" : "op"));
    SampleRow& r = rows[int(row)];
    if (r.row < 0) {
      r.row = int(row), r.shape = f[1], r.m = m, r.e = e, r.dist = f[4], r.op = f[5];
    } else if (r.shape != f[1] || r.m != m || r.e != e || r.dist != f[4] || r.op != f[5]) {
      fail("row " + f[0] + " was '" + r.what() + "' on an earlier line");
    }
    if (auto [it, fresh] = seen.emplace(std::tuple{int(row), int(rep), contender}, line_no); !fresh)
      fail(f[8] + " timed twice in rep " + f[6] + " of row " + f[0] + " (line " + std::to_string(it->second) + ")");
    r.calls.push_back({int(rep), int(slot), contender, ms});
  }
  if (line_no == 0) throw cake::Error(name + ": empty, not a `cakec bench grouped_gemm --samples` file");
  std::vector<SampleRow> out;
  for (auto& [_, r] : rows) out.push_back(std::move(r));
  return out;
}

}  // namespace cakec
