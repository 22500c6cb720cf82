// What every cakec command shares: global options, loading the registry and aot/, the
// availability rule for an arch, exit codes.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "aot_manifest.hpp"
#include "availability.hpp"
#include "registry.hpp"

namespace cakec {

enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2 };

struct Globals {
  std::vector<std::string> registries;  // --registry, on top of the embedded one
  std::string aot;                      // --aot; else CAKE_AOT_DIR; else ./aot if present
};

struct Context {
  std::shared_ptr<const cake::Registry> registry;
  std::optional<cake::AotManifest> aot;
  std::string aot_dir;
  std::unique_ptr<cake::AvailabilityRule> rule;  // JIT per CAKE_JIT, the real NVRTC
};

Context load_context(const Globals& g);

// A usage error: printed with the command's name, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A build's arch: a device's ("sm_90a") or a virtual one ("compute_80", PTX).
cake::Arch parse_arch_arg(const std::string& option, const std::string& value);
// A device's arch (what a GPU reports): virtual archs are refused.
cake::Arch parse_device_arch_arg(const std::string& option, const std::string& value);

// A --filter regex: nullopt when empty, UsageError naming the option when it does not parse.
std::optional<std::regex> parse_filter_arg(const std::string& option, const std::string& value);

// "name=value" -> pair; UsageError naming the option otherwise.
std::pair<std::string, std::string> split_assignment(const std::string& option, const std::string& s);

// A CLI11 check for sizes a GEMM's rows need (16-byte rows of bf16): empty when `v` is a
// positive multiple of 8, else the message.
inline std::string positive_multiple_of_8(const std::string& v) {
  long long x = 0;
  return CLI::detail::lexical_cast(v, x) && x > 0 && x % 8 == 0 ? std::string() : "must be a positive multiple of 8, got " + v;
}

// Left-aligned text table.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

void add_inspect_commands(CLI::App& app, Globals& g, int& exit_code);
void add_plan_command(CLI::App& app, Globals& g, int& exit_code);
void add_build_commands(CLI::App& app, Globals& g, int& exit_code);
void add_doctor_command(CLI::App& app, Globals& g, int& exit_code);
void add_bench_command(CLI::App& app, Globals& g, int& exit_code);
void add_cache_command(CLI::App& app, Globals& g, int& exit_code);
// Every family's bench commands (tools/cakec/<family>/; the list is generated).
void add_family_benches(CLI::App& bench, int& exit_code);

}  // namespace cakec
