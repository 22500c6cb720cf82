// What the benchmarks compute from their timed calls; no GPU needed (unit-tested).
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

namespace cakec {

// One timed call of a run of contenders in turn (Timer::median_ms_interleaved).
struct TimedCall {
  int rep, slot, contender;  // slot: the call's place in its rep
  double ms;
};

// The median over reps of (the fastest other contender's time in the rep / contender 0's
// time in it); NaN with one contender. A rep's calls run back to back at about one clock,
// which the ratio cancels, while the clock moves between a row's reps (they slow by 2-3 %
// as the card warms, and single reps by more): the medians of each contender's times can
// come from reps at different clocks, so their ratio moves more from run to run
// (docs/perf.md, twenty-second session).
inline double median_rep_ratio(const std::vector<TimedCall>& calls) {
  std::map<int, std::pair<double, double>> rep;  // rep -> (contender 0's ms, fastest other's)
  for (const TimedCall& k : calls) {
    auto it = rep.try_emplace(k.rep, NAN, NAN).first;
    if (k.contender == 0)
      it->second.first = k.ms;
    else
      it->second.second = std::fmin(it->second.second, k.ms);  // fmin ignores the NaN
  }
  std::vector<double> r;
  for (const auto& [i, t] : rep)
    if (!std::isnan(t.second)) r.push_back(t.second / t.first);
  if (r.empty()) return NAN;
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

}  // namespace cakec
