#include "program_params.hpp"

namespace cake {

ProgramParams::ProgramParams() {
  static const ProgramParams empty(nlohmann::json::object());
  state_ = empty.state_;
}

ProgramParams::ProgramParams(nlohmann::json value) : state_(std::make_shared<State>()) {
  state_->text = value.dump();
  state_->value = std::move(value);
  state_->parsed.store(true, std::memory_order_release);
}

ProgramParams ProgramParams::from_text(std::string_view text) {
  ProgramParams p;
  p.state_ = std::make_shared<State>();
  p.state_->text = text;
  return p;
}

const nlohmann::json& ProgramParams::json() const {
  State& s = *state_;
  if (!s.parsed.load(std::memory_order_acquire)) {
    std::lock_guard lock(s.mu);
    if (!s.parsed.load(std::memory_order_relaxed)) {
      s.value = nlohmann::json::parse(s.text);
      s.parsed.store(true, std::memory_order_release);
    }
  }
  return s.value;
}

bool operator==(const ProgramParams& a, const ProgramParams& b) {
  return a.state_ == b.state_ || a.state_->text == b.state_->text || a.json() == b.json();
}

}  // namespace cake
