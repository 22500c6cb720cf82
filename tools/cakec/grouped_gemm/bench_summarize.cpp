// cakec bench summarize FILE...: the summary tables of one or more `cakec bench grouped_gemm
// --samples` files, one run a file, computed from their timed calls by the bench's own rule
// (bench_stats.hpp): per op and E the geomean of VS_BEST, the min row, the rows below 1.00x,
// the same for the ratio of the medians, and the rows that came lowest over the runs. No GPU:
// runs taken on the GPU machine are compared where their files are.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench_samples.hpp"
#include "cli_common.hpp"
#include "error.hpp"
#include "file_util.hpp"

namespace cakec {
namespace {

struct SummarizeArgs {
  std::vector<std::string> files;
  int lowest = 10;
};

// A row of one run, with its two ratios (NaN: no baseline timed).
struct RowRatios {
  std::string what, op;
  long long e;
  double vs_best, of_medians;
};

std::string ratio_text(double r) {
  if (std::isnan(r)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3fx", r);
  return buf;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / double(v.size()));
}

int run_summarize(const SummarizeArgs& a) {
  // Rows are matched across runs by what they multiplied, and the n-th row of a key in a run
  // with the n-th in another (--m 4096 4096 gives a key twice; where one of those failed in a
  // run, and so has no calls, that run's other one pairs with the first of another run: the
  // same problem, so the tables stay right but for which of the two it was).
  std::vector<std::vector<RowRatios>> runs;
  std::vector<std::string> ops;  // in the order the rows first name them
  std::set<long long> es;
  for (const std::string& file : a.files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) throw cake::Error(file + ": not a file");
    const auto text = cake::read_file(file);
    if (!text) throw cake::Error(file + ": cannot be read");
    std::vector<RowRatios> run;
    std::map<std::string, int> times_seen;
    for (const SampleRow& r : parse_samples(*text, file)) {
      const int n = times_seen[r.what()]++;
      run.push_back({r.what() + (n ? " #" + std::to_string(n + 1) : ""), r.op, r.e, median_rep_ratio(r.calls),
                     ratio_of_medians(r.calls)});
      if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
      es.insert(r.e);
    }
    runs.push_back(std::move(run));
  }

  std::cout << "cakec bench summarize: " << runs.size() << (runs.size() == 1 ? " run" : " runs")
            << " of `cakec bench grouped_gemm --samples`; VS_BEST as the bench takes it: for each baseline the "
               "median over reps of its time in the rep / cake's, the smaller of the two\n";
  for (size_t i = 0; i < runs.size(); ++i)
    std::cout << "  run " << i + 1 << ": " << a.files[i] << " (" << runs[i].size() << " rows)\n";

  std::vector<std::string> head = {""};
  for (size_t i = 0; i < runs.size(); ++i) head.push_back("run " + std::to_string(i + 1));
  std::vector<std::vector<std::string>> table;
  // One line of the table: f(run) for every run.
  auto add = [&](const std::string& label, auto f) {
    std::vector<std::string> line = {label};
    for (const auto& run : runs) line.push_back(f(run));
    table.push_back(line);
  };
  // The geomean of `ratio` over a run's rows that `keep` admits.
  auto geo = [](double RowRatios::*ratio, auto keep) {
    return [=](const std::vector<RowRatios>& run) {
      std::vector<double> v;
      for (const RowRatios& r : run)
        if (!std::isnan(r.*ratio) && keep(r)) v.push_back(r.*ratio);
      return v.empty() ? std::string("-") : ratio_text(geomean(v)) + " (" + std::to_string(v.size()) + ")";
    };
  };
  auto all = [](const RowRatios&) { return true; };
  auto lowest = [](double RowRatios::*ratio) {
    return [=](const std::vector<RowRatios>& run) {
      double m = NAN;
      for (const RowRatios& r : run) m = std::fmin(m, r.*ratio);
      return ratio_text(m);
    };
  };
  auto below_one = [](double RowRatios::*ratio) {
    return [=](const std::vector<RowRatios>& run) {
      int n = 0;
      for (const RowRatios& r : run) n += r.*ratio < 1.0;
      return std::to_string(n);
    };
  };
  for (const std::string& op : ops)
    add(op, geo(&RowRatios::vs_best, [op](const RowRatios& r) { return r.op == op; }));
  add("all", geo(&RowRatios::vs_best, all));
  for (long long e : es)
    add("E = " + std::to_string(e), geo(&RowRatios::vs_best, [e](const RowRatios& r) { return r.e == e; }));
  add("min row", lowest(&RowRatios::vs_best));
  add("rows < 1.00x", below_one(&RowRatios::vs_best));
  add("ratio of the medians: all", geo(&RowRatios::of_medians, all));
  add("ratio of the medians: min row", lowest(&RowRatios::of_medians));
  add("ratio of the medians: rows < 1.00x", below_one(&RowRatios::of_medians));
  std::cout << "\nVS_BEST per run (geomeans with their rows in brackets; rows < 1.00x: unrounded ratios):\n"
            << format_table(head, table);

  // Each row over the runs it is in, lowest first by its lowest VS_BEST.
  struct Over {
    std::vector<double> vs_best;
    double of_medians = NAN;  // lowest
  };
  std::map<std::string, Over> over;
  for (const auto& run : runs)
    for (const RowRatios& r : run)
      if (!std::isnan(r.vs_best)) {
        Over& o = over[r.what];
        o.vs_best.push_back(r.vs_best);
        o.of_medians = std::fmin(o.of_medians, r.of_medians);
      }
  std::vector<std::pair<std::string, Over>> sorted(over.begin(), over.end());
  for (auto& [_, o] : sorted) std::sort(o.vs_best.begin(), o.vs_best.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& x, const auto& y) { return x.second.vs_best[0] < y.second.vs_best[0]; });
  std::vector<std::vector<std::string>> low;
  for (size_t i = 0; i < sorted.size() && int(i) < a.lowest; ++i) {
    const auto& [what, o] = sorted[i];
    low.push_back({what, std::to_string(o.vs_best.size()), ratio_text(o.vs_best.front()),
                   ratio_text(median_of_ratios(o.vs_best)), ratio_text(o.vs_best.back()), ratio_text(o.of_medians)});
  }
  if (!low.empty())
    std::cout << "\nthe " << low.size() << " lowest rows of " << sorted.size()
              << " (VS_BEST over the runs a row is in; the median of an even count: the geometric mean of the "
                 "middle two):\n"
              << format_table({"ROW", "RUNS", "LOWEST", "MEDIAN", "HIGHEST", "RATIO OF THE MEDIANS, LOWEST"}, low);
  return kOk;
}

}  // namespace

void add_bench_summarize(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<SummarizeArgs>();
  auto* c = bench.add_subcommand(
      "summarize", "Summary tables of `bench grouped_gemm --samples` files, one run each (no GPU needed)");
  c->add_option("FILE", a->files, "--samples files, one run each")->required();
  c->add_option("--lowest", a->lowest, "how many of the lowest rows to list (default 10)")
      ->check(CLI::Range(0, 100000));
  c->callback([&exit_code, a] { exit_code = run_summarize(*a); });
}

}  // namespace cakec
