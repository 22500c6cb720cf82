// What the benchmarks compute from their timed calls; no GPU needed (unit-tested).
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace cakec {

// One timed call of a run of contenders in turn (Timer::median_ms_interleaved).
struct TimedCall {
  int rep, slot, contender;  // slot: the call's place in its rep
  double ms;
};

// The median of one contender's times: of an even count the upper middle (the benchmarks'
// medians, and so every table of times in docs/perf.md). NaN if empty.
inline double median_time(std::vector<double> ms) {
  if (ms.empty()) return NAN;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The median of ratios: for an even count the geometric mean of the middle two, so that it
// leans to neither side and the median of the inverse ratios is its inverse. NaN if empty.
inline double median_of_ratios(std::vector<double> r) {
  if (r.empty()) return NAN;
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  return n % 2 ? r[n / 2] : std::sqrt(r[n / 2 - 1] * r[n / 2]);
}

// VS_BEST of a row: for each other contender, the median over reps of (its time in the rep /
// contender 0's time in it); the smallest of those, i.e. against the faster one (chosen for
// the row, not rep by rep: the faster of two noisy times in each rep would be faster than
// either). NaN with no other contender; a rep missing either call is left out. A rep's calls
// run one after the other, so the ratio cancels most of the clock's drift, which the medians
// of each contender's times do not: they can come from reps at different clocks, and their
// ratio moves more from run to run (docs/decisions.md, "VS_BEST taken per rep").
inline double median_rep_ratio(const std::vector<TimedCall>& calls) {
  std::map<int, double> first;                  // rep -> contender 0's ms
  std::map<int, std::map<int, double>> others;  // contender -> rep -> ms
  for (const TimedCall& k : calls) (k.contender == 0 ? first[k.rep] : others[k.contender][k.rep]) = k.ms;
  double best = NAN;
  for (const auto& [contender, reps] : others) {
    std::vector<double> r;
    for (const auto& [rep, ms] : reps)
      if (auto it = first.find(rep); it != first.end() && !std::isnan(ms) && !std::isnan(it->second))
        r.push_back(ms / it->second);
    best = std::fmin(best, median_of_ratios(r));  // fmin ignores a NaN
  }
  return best;
}

// The older estimate the summary prints beside VS_BEST: each contender's median_time, the
// faster baseline's over contender 0's. NaN without contender 0 or another.
inline double ratio_of_medians(const std::vector<TimedCall>& calls) {
  std::map<int, std::vector<double>> ms;  // contender -> times
  for (const TimedCall& k : calls)
    if (!std::isnan(k.ms)) ms[k.contender].push_back(k.ms);
  if (!ms.count(0)) return NAN;
  double best = NAN;
  for (const auto& [contender, v] : ms)
    if (contender != 0) best = std::fmin(best, median_time(v));
  return best / median_time(ms[0]);
}

}  // namespace cakec
