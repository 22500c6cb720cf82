// Runs every candidate of a family's ops by name (tests that check each route, not only the
// planner's choice), and checks afterwards that none was left out.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "driver.hpp"
#include "error.hpp"
#include "ops.hpp"
#include "registry.hpp"
#include "runtime.hpp"

namespace cake::test {

class RouteSweep {
 public:
  // `keep`: the candidates swept (empty: all).
  RouteSweep(const Runtime& rt, std::string family, std::function<bool(const Candidate&)> keep = {})
      : rt_(rt), family_(std::move(family)), keep_(std::move(keep)) {}

  // `run(c, o)` for each kept candidate of `op`, `o` forcing it (non-deterministic ones allowed).
  void each(const std::string& op, const std::function<void(const Candidate&, const ops::OpOptions&)>& run) const {
    for (const Candidate& c : candidates(op)) {
      ops::OpOptions o;
      o.candidate = c.name;
      o.deterministic = c.deterministic;
      SCOPED_TRACE(op + " " + c.name);
      run(c, o);
    }
  }
  // The forced candidate's launch, recorded as run; none where the planner refuses it for the
  // call (its window or dtypes are not the call's, or the device has no build of it). Any
  // other error (binding, memory, a compile) fails the test.
  std::optional<Launch> served(const std::string& op, const Candidate& c, const std::function<Launch()>& prepare) {
    try {
      Launch l = prepare();
      ran_[op].insert(c.name);
      return l;
    } catch (const Error& e) {
      if (std::string_view(e.what()).rfind("no route for ", 0) != 0) ADD_FAILURE() << c.name << ": " << e.what();
      return std::nullopt;
    }
  }
  // Every kept candidate of `ops` ran on some call: all of them on Hopper, the portable ones
  // elsewhere.
  void expect_all_ran(const std::vector<std::string>& ops) const {
    const bool hopper = Driver::instance().device(0).arch == *Arch::parse("sm_90a");
    for (const std::string& op : ops) {
      const auto it = ran_.find(op);
      for (const Candidate& c : candidates(op))
        if (hopper || c.name.find("portable") != std::string::npos)
          EXPECT_TRUE(it != ran_.end() && it->second.count(c.name)) << op << " " << c.name << " never ran";
    }
  }

 private:
  std::vector<Candidate> candidates(const std::string& op) const {
    std::vector<Candidate> out;
    for (const Candidate& c : rt_.registry().route(family_ + "." + op)->candidates)
      if (!keep_ || keep_(c)) out.push_back(c);
    return out;
  }
  const Runtime& rt_;
  std::string family_;
  std::function<bool(const Candidate&)> keep_;
  std::map<std::string, std::set<std::string>> ran_;
};

}  // namespace cake::test
