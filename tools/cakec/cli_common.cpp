#include "cli_common.hpp"

#include <filesystem>
#include <sstream>

#include "env.hpp"
#include "error.hpp"
#include "log.hpp"
#include "nvrtc.hpp"
#include "renderer.hpp"

namespace cakec {

Context load_context(const Globals& g) {
  Context c;
  c.registry = cake::Registry::load_default(g.registries);
  cake::check_templates(*c.registry);
  c.aot_dir = !g.aot.empty() ? g.aot : cake::env::aot_dir().value_or("");
  if (c.aot_dir.empty() && std::filesystem::exists("aot/manifest.json")) c.aot_dir = "aot";
  if (!c.aot_dir.empty()) {
    try {
      c.aot = cake::AotManifest::read(c.aot_dir);
      if (!c.aot->refused().empty())
        cake::log().warn("not loading prebuilt cubins from {}: {} (another user could plant code in it)",
                         c.aot_dir, c.aot->refused());
    } catch (const cake::Error& e) {
      cake::log().warn("ignoring aot folder: {}", e.what());
    }
  }
  c.rule = std::make_unique<cake::AvailabilityRule>(
      *c.registry, c.aot ? &*c.aot : nullptr, cake::Nvrtc::instance().info(),
      cake::env::jit_enabled());
  return c;
}

cake::Arch parse_arch_arg(const std::string& option, const std::string& value) {
  auto a = cake::Arch::parse(value);
  if (!a) throw UsageError(option + ": '" + value + "' is not an arch (e.g. sm_90a, sm_80, compute_80)");
  return *a;
}

cake::Arch parse_device_arch_arg(const std::string& option, const std::string& value) {
  cake::Arch a = parse_arch_arg(option, value);
  if (a.virt) throw UsageError(option + ": '" + value + "' is a virtual arch; name a device's (e.g. sm_90a, sm_100a)");
  return a;
}

std::optional<std::regex> parse_filter_arg(const std::string& option, const std::string& value) {
  if (value.empty()) return std::nullopt;
  try {
    return std::regex(value);
  } catch (const std::regex_error&) {
    throw UsageError(option + ": not a regular expression: " + value);
  }
}

std::pair<std::string, std::string> split_assignment(const std::string& option, const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw UsageError(option + ": expected NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i) {
      s += r[i];
      if (i + 1 < r.size()) s += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    o << s << "\n";
  };
  line(header);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& r : rows) line(r);
  return o.str();
}

}  // namespace cakec
