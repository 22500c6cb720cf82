// The ratio `cakec bench grouped_gemm` prints as VS_BEST (tools/cakec/bench_stats.hpp) and its
// --samples file (tools/cakec/bench_samples.hpp), which `cakec bench summarize` reads back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bench_samples.hpp"
#include "bench_stats.hpp"

namespace cakec {
namespace {

// One rep of (cake, loop, grouped) times; a NaN time: no such call.
void add_rep(std::vector<TimedCall>& calls, int rep, double cake, double loop, double grouped) {
  int slot = 0;
  for (auto [c, ms] : {std::pair{0, cake}, std::pair{1, loop}, std::pair{2, grouped}})
    if (!std::isnan(ms)) calls.push_back({rep, slot++, c, ms});
}

TEST(BenchStats, MedianRepRatioCancelsTheClockOfEachRep) {
  // The clock differs rep to rep; the loop does 3 % more work than cake in every rep but one.
  // That rep moves each contender's median to a different rep, and their ratio to 1.005; the
  // median of the per-rep ratios stays 1.03.
  const double cake[] = {4.0, 4.4, 3.8, 4.2, 4.1}, ratio[] = {1.03, 1.03, 1.03, 0.97, 1.03};
  std::vector<TimedCall> calls;
  for (int i = 0; i < 5; ++i) add_rep(calls, i, cake[i], cake[i] * ratio[i], 3 * cake[i]);
  EXPECT_NEAR(median_rep_ratio(calls), 1.03, 1e-12);
  std::vector<double> c(cake, cake + 5), l;  // the premise: the ratio of the medians is off
  for (int i = 0; i < 5; ++i) l.push_back(cake[i] * ratio[i]);
  std::sort(c.begin(), c.end()), std::sort(l.begin(), l.end());
  EXPECT_NEAR(l[2] / c[2], 1.005, 1e-3);
}

TEST(BenchStats, MedianRepRatioIsAgainstTheFasterBaselineOfTheRow) {
  std::vector<TimedCall> calls;
  add_rep(calls, 0, 1.0, 1.2, 1.1);
  add_rep(calls, 1, 1.0, 0.9, 1.3);
  add_rep(calls, 2, 1.0, 5.0, 1.0);
  // loop: 0.9, 1.2, 5.0 -> 1.2; grouped: 1.0, 1.1, 1.3 -> 1.1. Not each rep's faster one
  // (1.1, 0.9, 1.0 -> 1.0).
  EXPECT_NEAR(median_rep_ratio(calls), 1.1, 1e-12);
}

TEST(BenchStats, MedianOfAnEvenCountIsTheGeometricMeanOfTheMiddleTwo) {
  std::vector<TimedCall> calls;
  add_rep(calls, 0, 1.0, 1.0, NAN);
  add_rep(calls, 1, 1.0, 1.1, NAN);
  add_rep(calls, 2, 1.0, 0.5, NAN);
  add_rep(calls, 3, 1.0, 2.0, NAN);
  EXPECT_NEAR(median_rep_ratio(calls), std::sqrt(1.1), 1e-12);
  // Inverted (cake as the baseline): the inverse, which the upper middle would not give.
  for (auto& k : calls) k.contender = 1 - k.contender;
  EXPECT_NEAR(median_rep_ratio(calls), 1 / std::sqrt(1.1), 1e-12);
}

TEST(BenchStats, MedianRepRatioLeavesOutRepsMissingACall) {
  std::vector<TimedCall> calls;
  add_rep(calls, 0, 1.0, 1.5, NAN);
  add_rep(calls, 1, NAN, 0.1, NAN);  // no cake call in rep 1
  add_rep(calls, 2, 1.0, 1.7, NAN);
  add_rep(calls, 3, 1.0, 1.6, NAN);
  EXPECT_NEAR(median_rep_ratio(calls), 1.6, 1e-12);
}

TEST(BenchStats, MedianRepRatioIsNanWithoutABaseline) {
  std::vector<TimedCall> calls = {{0, 0, 0, 1.0}, {1, 0, 0, 1.0}};
  EXPECT_TRUE(std::isnan(median_rep_ratio(calls)));
  EXPECT_TRUE(std::isnan(median_rep_ratio({})));
}

TEST(BenchStats, MedianTimeIsTheUpperMiddle) {
  EXPECT_EQ(median_time({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median_time({4.0, 1.0, 3.0, 2.0}), 3.0);
  EXPECT_TRUE(std::isnan(median_time({})));
}

TEST(BenchStats, RatioOfMediansTakesEachContendersUpperMiddle) {
  std::vector<TimedCall> calls;
  add_rep(calls, 0, 1.0, 1.3, 2.0);
  add_rep(calls, 1, 2.0, 1.1, 1.9);
  add_rep(calls, 2, 3.0, 1.2, 1.8);
  add_rep(calls, 3, 4.0, 1.4, NAN);
  // cake 1 2 3 4 -> 3; loop 1.1 1.2 1.3 1.4 -> 1.3; grouped 1.8 1.9 2.0 -> 1.9: 1.3 / 3.
  EXPECT_NEAR(ratio_of_medians(calls), 1.3 / 3.0, 1e-12);
  EXPECT_TRUE(std::isnan(ratio_of_medians({{0, 0, 0, 1.0}})));
  EXPECT_TRUE(std::isnan(ratio_of_medians({{0, 0, 1, 1.0}})));
}

// A --samples file's text of `rows`, written line by line as the bench writes it.
std::string samples_text(const std::vector<SampleRow>& rows) {
  std::string s = std::string(kSamplesHeader) + "\n";
  for (const SampleRow& r : rows)
    for (const TimedCall& k : r.calls) s += format_sample_line(r, k);
  return s;
}

TEST(BenchSamples, WhatTheBenchWritesParsesBack) {
  SampleRow a;
  a.row = 0, a.shape = "down", a.m = 112576, a.e = 4, a.dist = "one_empty", a.op = "dgrad";
  add_rep(a.calls, 0, 3.675123456, 3.882, 9.7);
  add_rep(a.calls, 1, 3.795, 3.855, 10.6);
  SampleRow b = a;
  b.row = 1, b.op = "wgrad_acc", b.calls.clear();
  add_rep(b.calls, 0, 4.5, 4.75, NAN);
  // The writer's exact line, as the GPU smoke test and the files of earlier runs have it.
  EXPECT_EQ(format_sample_line(a, a.calls[1]), "0,down,112576,4,one_empty,dgrad,0,1,loop,3.882\n");
  EXPECT_EQ(format_sample_line(a, a.calls[0]), "0,down,112576,4,one_empty,dgrad,0,0,cake,3.67512346\n");
  const auto rows = parse_samples(samples_text({a, b}), "run.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].what(), "down M=112576 E=4 one_empty dgrad");
  EXPECT_EQ(rows[1].what(), "down M=112576 E=4 one_empty wgrad_acc");
  ASSERT_EQ(rows[0].calls.size(), 6u);
  ASSERT_EQ(rows[1].calls.size(), 2u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rows[0].calls[i].rep, a.calls[i].rep);
    EXPECT_EQ(rows[0].calls[i].slot, a.calls[i].slot);
    EXPECT_EQ(rows[0].calls[i].contender, a.calls[i].contender);
    EXPECT_NEAR(rows[0].calls[i].ms, a.calls[i].ms, 1e-8 * a.calls[i].ms);  // 9 significant digits
  }
  EXPECT_NEAR(median_rep_ratio(rows[0].calls), median_rep_ratio(a.calls), 1e-8);
  EXPECT_EQ(rows[1].calls[1].contender, 1);
}

TEST(BenchSamples, EveryBadLineIsNamedByFileAndLine) {
  const std::string head = std::string(kSamplesHeader) + "\n";
  const std::string ok = "0,down,4096,4,balanced,fwd,0,0,cake,1.5\n";
  auto error_of = [](const std::string& text) {
    try {
      parse_samples(text, "r.csv");
    } catch (const cake::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(""), "r.csv: empty, not a `cakec bench grouped_gemm --samples` file");
  EXPECT_NE(error_of("shape,m\n" + ok).find("r.csv:1: not a `cakec bench grouped_gemm --samples` file"),
            std::string::npos);
  EXPECT_EQ(error_of(head + ok + "0,down,4096,4,balanced,fwd,0,1,loop\n"), "r.csv:3: expected 10 fields, got 9");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,x\n"), "r.csv:2: ms 'x' is not a positive number");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,-1\n"),
            "r.csv:2: ms '-1' is not a positive number");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,nan\n"),
            "r.csv:2: ms 'nan' is not a positive number");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,torch,1\n"),
            "r.csv:2: contender 'torch' is not cake, loop or grouped");
  EXPECT_EQ(error_of(head + "-1,down,4096,4,balanced,fwd,0,0,cake,1\n"), "r.csv:2: row '-1' is not a count");
  EXPECT_EQ(error_of(head + "0,down,4096,0,balanced,fwd,0,0,cake,1\n"), "r.csv:2: e '0' is not a positive count");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,3,cake,1\n"), "r.csv:2: slot '3' is not 0-2");
  EXPECT_EQ(error_of(head + "0,,4096,4,balanced,fwd,0,0,cake,1\n"), "r.csv:2: an empty shape");
  // Digits only: no sign, space or hex form.
  EXPECT_EQ(error_of(head + "0,down,+4096,4,balanced,fwd,0,0,cake,1\n"), "r.csv:2: m '+4096' is not a count");
  EXPECT_EQ(error_of(head + " 0,down,4096,4,balanced,fwd,0,0,cake,1\n"), "r.csv:2: row ' 0' is not a count");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,0x1p0\n"),
            "r.csv:2: ms '0x1p0' is not a positive number");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,1.5 \n"),
            "r.csv:2: ms '1.5 ' is not a positive number");
  EXPECT_EQ(error_of(head + "0,down,4096,4,balanced,fwd,0,0,cake,0\n"), "r.csv:2: ms '0' is not a positive number");
  EXPECT_EQ(error_of(head + ok + "0,down,4096,4,balanced,dgrad,0,1,loop,1\n"),
            "r.csv:3: row 0 was 'down M=4096 E=4 balanced fwd' on an earlier line");
  EXPECT_EQ(error_of(head + ok + ok), "r.csv:3: cake timed twice in rep 0 of row 0 (line 2)");
  // A header alone is a run of no rows; CRLF line ends and a missing last newline are read.
  EXPECT_TRUE(parse_samples(head, "r.csv").empty());
  EXPECT_EQ(parse_samples(std::string(kSamplesHeader) + "\r\n0,down,4096,4,balanced,fwd,0,0,cake,1.5", "r.csv")
                .at(0)
                .calls.at(0)
                .ms,
            1.5);
}

}  // namespace
}  // namespace cakec
