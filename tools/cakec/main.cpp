// cakec: render, prebuild and inspect cake's programs and routes.
// Exit codes: 0 success, 1 failure, 2 usage error.
#include <iostream>

#include "cli_common.hpp"
#include "error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cakec - cake's kernel compiler: render, prebuild, list and plan routes"};
  app.require_subcommand(1);
  app.fallthrough();
  cakec::Globals g;
  app.add_option("--registry", g.registries, "extra registry file on top of the embedded one")
      ->type_name("FILE");
  app.add_option("--aot", g.aot, "prebuilt folder (default: $CAKE_AOT_DIR, else ./aot if present)")
      ->type_name("DIR");
  int exit_code = cakec::kOk;
  cakec::add_inspect_commands(app, g, exit_code);
  cakec::add_plan_command(app, g, exit_code);
  cakec::add_build_commands(app, g, exit_code);
  cakec::add_doctor_command(app, g, exit_code);
  cakec::add_bench_command(app, g, exit_code);
  cakec::add_cache_command(app, g, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cakec::kUsage;
  } catch (const cakec::UsageError& e) {
    std::cerr << "cakec: usage: " << e.what() << "\n";
    return cakec::kUsage;
  } catch (const cake::Error& e) {
    std::cerr << "cakec: error: " << e.what() << "\n";
    return cakec::kFailure;
  } catch (const std::exception& e) {
    std::cerr << "cakec: error: " << e.what() << "\n";
    return cakec::kFailure;
  }
  return exit_code;
}
