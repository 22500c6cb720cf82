// libFuzzer target: cake's flat JSON parser (runtime/base/json_doc) against nlohmann's on the
// same bytes. Both accept or both refuse, except where cake refuses on purpose (a key twice,
// nesting deeper than JsonDoc::kMaxDepth, a number out of a double's range, a NUL byte outside
// a string, where nlohmann stops reading); where both accept,
// the values are equal and each value's RFC 6901 pointer leads nlohmann to the same value.
// A disagreement is a finding (__builtin_trap).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "json_doc.hpp"

namespace {

void check_pointers(const cake::JsonValue& v, const nlohmann::json& whole) {
  if (whole.at(nlohmann::json::json_pointer(v.pointer())) != v.to_nlohmann()) __builtin_trap();
  if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) check_pointers(v.element(i), whole);
  if (v.is_object())
    for (size_t i = 0; i < v.size(); ++i) check_pointers(v.member(i), whole);
}

bool refused_on_purpose(std::string_view text, const std::string& why) {
  // nlohmann ends its input at a NUL byte ("1 \0 x" reads as 1); RFC 8259 and cake refuse one.
  if (text.find('\0') != std::string_view::npos) return true;
  for (const char* reason : {"twice", "nested deeper", "out of a double's range"})
    if (why.find(reason) != std::string::npos) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<nlohmann::json> theirs;
  try {
    theirs = std::make_unique<nlohmann::json>(nlohmann::json::parse(text.begin(), text.end()));
  } catch (const nlohmann::json::exception&) {
  }
  std::shared_ptr<const cake::JsonDoc> mine;
  std::string why;
  try {
    mine = cake::JsonDoc::parse(text, "fuzz.json");
  } catch (const cake::RegistryError& e) {
    why = e.what();
    if (why.rfind("fuzz.json: not valid JSON: line ", 0) != 0) __builtin_trap();
  }
  if (!theirs) {
    if (mine) __builtin_trap();  // accepted what is not JSON
    return 0;
  }
  if (!mine) {
    if (!refused_on_purpose(text, why)) __builtin_trap();  // refused valid JSON
    return 0;
  }
  if (mine->root().to_nlohmann() != *theirs) __builtin_trap();
  check_pointers(mine->root(), *theirs);
  return 0;
}
