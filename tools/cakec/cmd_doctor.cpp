// cakec doctor: what this machine offers cake - libcuda, libnvrtc, toolkit, devices, cache
// folder, registry, aot/.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli_common.hpp"
#include "driver.hpp"
#include "env.hpp"
#include "error.hpp"
#include "nvrtc.hpp"

namespace cakec {
namespace {

int run_doctor(const Globals& g) {
  int status = kOk;
  auto line = [](const std::string& k, const std::string& v) {
    std::cout << k << std::string(k.size() < 10 ? 10 - k.size() : 1, ' ') << v << "\n";
  };
  auto& drv = cake::Driver::instance();
  if (drv.available()) {
    line("libcuda", drv.path() + " (driver API " + std::to_string(drv.version() / 1000) + "." +
                        std::to_string(drv.version() % 1000 / 10) + ")");
    line("devices", std::to_string(drv.device_count()));
    for (int i = 0; i < drv.device_count(); ++i) {
      const auto& d = drv.device(i);
      line("  gpu " + std::to_string(i), d.name + ", " + d.arch.str() + ", " + std::to_string(d.sm_count) +
                                             " SMs, " + std::to_string(d.max_smem_per_block_optin / 1024) +
                                             " KiB smem/block, " + std::to_string(d.l2_bytes >> 20) + " MiB L2");
    }
  } else {
    line("libcuda", "not usable: " + drv.missing_reason());
    line("devices", "0 (kernels cannot run here; render, build, plan and list still work)");
  }
  const auto& nv = cake::Nvrtc::instance().info();
  if (nv.present) {
    std::string archs;
    for (int a : nv.archs) archs += (archs.empty() ? "" : " ") + std::to_string(a);
    line("libnvrtc", nv.path + " (CUDA " + nv.version.str() + "; archs " + archs + ")");
  } else {
    line("libnvrtc", "not usable: " + nv.missing_reason + " (JIT unavailable; prebuilt cubins only)");
  }
  line("jit", cake::env::jit_enabled() ? "enabled" : "disabled by CAKE_JIT=0");
  line("toolkit", "CUDA_HOME=" + cake::env::get("CUDA_HOME").value_or("(unset)"));
  std::string cache = cake::env::cache_dir();
  std::error_code ec;
  bool exists = std::filesystem::exists(cache, ec);
  line("cache", cache + (exists ? (::access(cache.c_str(), W_OK) == 0 ? " (writable)" : " (NOT writable)")
                                 : " (not created yet)"));
  try {
    Context ctx = load_context(g);
    std::string files;
    for (const auto& f : ctx.registry->files()) files += (files.empty() ? "" : ", ") + f;
    line("registry", std::to_string(ctx.registry->programs().size()) + " programs, " +
                         std::to_string(ctx.registry->builds().size()) + " builds, " +
                         std::to_string(ctx.registry->routes().size()) + " routes from " + files);
    if (ctx.aot)
      line("aot", ctx.aot_dir + " (" + std::to_string(ctx.aot->entries().size()) + " prebuilt cubins)");
    else
      line("aot", ctx.aot_dir.empty() ? "none (no --aot, no CAKE_AOT_DIR, no ./aot)" : ctx.aot_dir + " (unreadable)");
  } catch (const cake::Error& e) {
    line("registry", std::string("BROKEN: ") + e.what());
    status = kFailure;
  }
  return status;
}

}  // namespace

void add_doctor_command(CLI::App& app, Globals& g, int& exit_code) {
  auto* c = app.add_subcommand("doctor", "What cake found: libcuda, libnvrtc, toolkit, devices, cache, registry");
  c->callback([&g, &exit_code] { exit_code = run_doctor(g); });
}

}  // namespace cakec
