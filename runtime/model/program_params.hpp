// A program's params (launch geometry the ops read, counters, workspace): the JSON text the
// registry gives them, parsed into an nlohmann::json on first use. A registry load reads some
// seventy of them and a process uses the few its calls plan with; building every DOM at load
// was a tenth of a new process's Runtime creation (docs/decisions.md, "A new process's Runtime").
#pragma once
#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace cake {

class ProgramParams {
 public:
  ProgramParams();                               // {}
  explicit ProgramParams(nlohmann::json value);  // made already (an instance's, a spec's)
  // JSON text of an object, as a registry file has it (checked by its reader).
  static ProgramParams from_text(std::string_view text);

  // The value; the first call parses the text (thread-safe).
  const nlohmann::json& json() const;
  const nlohmann::json& operator*() const { return json(); }
  const nlohmann::json* operator->() const { return &json(); }
  // The JSON text (as the registry gives it, or the dump of a value made in code).
  const std::string& text() const { return state_->text; }

  // As nlohmann compares; the same text is equal without a parse.
  friend bool operator==(const ProgramParams& a, const ProgramParams& b);

 private:
  struct State {
    std::string text;
    std::atomic<bool> parsed{false};  // `value` is made (an acquire load: a prepare reads it often)
    std::mutex mu;
    nlohmann::json value;
  };
  std::shared_ptr<State> state_;  // shared by copies: one parse for all
};

}  // namespace cake
