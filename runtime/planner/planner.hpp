// The planner: a pure function from (op, problem, device, availability) to a plan. No CUDA
// calls. Candidates are tried in registry order and the first whose window matches and whose
// stages can all be served wins; every candidate passed over is recorded with its reason.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "availability.hpp"
#include "registry.hpp"

namespace cake {

struct Problem {
  std::string op;
  std::map<std::string, int64_t> dims;
  std::map<std::string, DType> dtypes;
  std::map<std::string, int> align;  // byte alignment of each pointer argument (absent: 1)
  bool accumulate = false;
  bool deterministic = true;
  // Non-empty: only the candidate of this name is considered (tests and users forcing a
  // route, e.g. the portable program on a Hopper part); if it cannot serve, no route.
  std::string candidate;
  std::string describe() const;
  uint64_t hash() const;
  bool operator==(const Problem&) const = default;
};

struct Device {
  Arch arch;
  int sm_count = 0;
  // Largest dynamic shared memory a block may opt in to; 0: unknown (not checked). A
  // program whose params say "smem" above it is passed over (reason "smem").
  int max_smem_optin = 0;
  std::string describe() const;
  bool operator==(const Device&) const = default;
};

struct PlannedStage {
  const Program* program = nullptr;
  int kernel = 0;
  const Build* build = nullptr;
  ServedBy served_by = ServedBy::none;
  std::map<std::string, std::string> bind;
};

struct Rejection {
  std::string candidate;
  std::string reason;  // short code: arch, sm_count, dim, divisible, parity, dtype, align,
                       // accumulate, deterministic, smem, candidate, instance (the dims are
                       // outside a parametric program's domain), unavailable:<code>
  std::string detail;  // one readable sentence
};

struct Plan {
  std::string op;
  std::string route;  // the chosen candidate's name
  const Candidate* candidate = nullptr;
  Accumulate accumulate = Accumulate::off;
  bool deterministic = true;
  int64_t scratch_bytes = 0;
  std::vector<int64_t> scratch_offsets;  // where each scratch buffer starts (Scratch)
  std::vector<PlannedStage> stages;
  std::vector<Rejection> passed_over;  // candidates before the chosen one, in order
  std::string why;
};

struct PlanResult {
  std::optional<Plan> plan;
  std::vector<Rejection> rejections;  // when there is no plan: every candidate
  std::string error;                  // when there is no plan: one sentence
  bool ok() const { return plan.has_value(); }
};

using AvailabilityFn = std::function<Availability(const Program&, const Arch&)>;

class Planner {
 public:
  Planner(std::shared_ptr<const Registry> registry, AvailabilityFn availability)
      : registry_(std::move(registry)), availability_(std::move(availability)) {}

  PlanResult plan(const Problem& problem, const Device& device) const;
  // Same, memoised by (problem, device). Thread-safe. The result lives as long as the
  // planner: entries are never evicted (a process sees a bounded set of shapes).
  const PlanResult& plan_cached(const Problem& problem, const Device& device) const;

  const Registry& registry() const { return *registry_; }
  // Forget every cached plan (availability changed). Plans already handed out stay valid.
  void clear_cache() const;

 private:
  std::optional<Rejection> check_window(const Candidate& c, const Problem& p, const Device& d) const;

  std::shared_ptr<const Registry> registry_;
  AvailabilityFn availability_;
  // Keyed by a hash of the problem and device; entries compare in full on a hit. No string
  // is built on the lookup path (target: <= 0.2 us).
  struct CacheEntry {
    Problem problem;
    Device device;
    std::shared_ptr<const PlanResult> result;
  };
  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<uint64_t, std::vector<CacheEntry>> cache_;
  mutable std::vector<std::shared_ptr<const PlanResult>> retired_;  // keeps handed-out plans alive
};

// Human-readable text of a plan, as `cakec plan` prints it.
std::string format_plan(const PlanResult& result, const Problem& problem, const Device& device);

}  // namespace cake
