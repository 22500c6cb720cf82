// The ratio `cakec bench grouped_gemm` prints as VS_BEST (tools/cakec/bench_stats.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

}  // namespace
}  // namespace cakec
