// cakec doctor: what this machine offers cake - libcuda, libnvrtc, toolkit, devices, the
// compile worker, the cache folder, registry, aot/ (and whether cake trusts the folders).
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli_common.hpp"
#include "compile_worker.hpp"
#include "disk_cache.hpp"
#include "driver.hpp"
#include "env.hpp"
#include "error.hpp"
#include "nvrtc.hpp"
#include "shapes_cli.hpp"

namespace cakec {
namespace {

struct DoctorArgs {
  bool strict = false;
  std::string arch;
  ShapesArgs shapes;
};

// The folders cake would load code from that another user could change: "cache: <why>".
std::vector<std::string> unsafe_folders(const Context& ctx) {
  std::vector<std::string> out;
  const std::string cache = cake::env::cache_dir();
  if (!cache.empty())
    if (cake::FolderTrust t = cake::DiskCache(cache).trust(); !t.safe)
      out.push_back("cache " + cache + ": " + t.text() + " (not used)");
  if (ctx.aot && !ctx.aot->refused().empty())
    out.push_back("aot " + ctx.aot_dir + ": " + ctx.aot->refused() + " (not used)");
  return out;
}

// Every candidate this device's arch admits whose stages could not be served without JIT,
// after any folder cake would refuse to load code from.
int run_strict(const Globals& g, const DoctorArgs& a) {
  Context ctx = load_context(g);
  const std::vector<std::string> unsafe = unsafe_folders(ctx);
  for (const auto& u : unsafe) std::cout << "unsafe: " << u << "\n";
  cake::Arch arch;
  if (!a.arch.empty()) {
    arch = parse_device_arch_arg("--arch", a.arch);
  } else {
    auto& drv = cake::Driver::instance();
    if (!drv.available() || drv.device_count() == 0) {
      if (!unsafe.empty()) return kFailure;
      throw UsageError("--strict needs a GPU or --arch (" + drv.missing_reason() + ")");
    }
    arch = drv.device(0).arch;
  }
  cake::AvailabilityRule offline(*ctx.registry, ctx.aot ? &*ctx.aot : nullptr, cake::NvrtcInfo{}, false);
  std::vector<std::vector<std::string>> rows;
  int ops_without = 0;
  for (const auto& r : ctx.registry->routes()) {
    bool any = false, op_servable = false;
    for (const auto& c : r.candidates) {
      bool admits = c.window.archs.empty();
      for (const auto& p : c.window.archs) admits = admits || p.matches(arch);
      if (!admits) continue;
      any = true;
      std::string missing;
      for (const auto& s : c.stages) {
        auto av = offline.check(*ctx.registry->program(s.program), arch);
        if (!av.available()) missing += (missing.empty() ? "" : ", ") + s.program + " (" + av.reason + ")";
      }
      if (missing.empty()) op_servable = true;
      else rows.push_back({r.op, c.name, missing});
    }
    if (any && !op_servable) ++ops_without;
  }
  std::cout << "strict: " << arch.str() << ", aot " << (ctx.aot_dir.empty() ? "(none)" : ctx.aot_dir) << "\n";
  if (rows.empty()) {
    std::cout << "every route this arch admits is served without JIT\n";
    return unsafe.empty() ? kOk : kFailure;
  }
  std::cout << format_table({"OP", "CANDIDATE", "NEEDS JIT FOR"}, rows);
  std::cout << rows.size() << " candidates need JIT; " << ops_without
            << " ops have no candidate served without JIT (prebuild: cakec build --for-device)\n";
  return kFailure;
}

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
  const std::string worker = cake::find_compile_worker();
  if (cake::env::compile_isolation() == "inprocess")
    line("worker", "none: CAKE_COMPILE_ISOLATION=inprocess compiles in this process");
  else if (worker.empty())
    line("worker", "NOT FOUND beside " + cake::this_module_path().string() +
                       (cake::env::compile_isolation() == "required"
                            ? ": compiles fail (CAKE_COMPILE_ISOLATION=required)"
                            : ": compiles run in process, where an NVRTC crash takes the process down"));
  else
    line("worker", worker + " (compiles run in a child process)");
  std::string cache = cake::env::cache_dir();
  std::error_code ec;
  bool exists = std::filesystem::exists(cache, ec);
  const cake::FolderTrust trust = cake::DiskCache(cache).trust();
  line("cache", cache + (!trust.safe ? " (UNSAFE, not used: " + trust.text() + ")"
                         : exists    ? (::access(cache.c_str(), W_OK) == 0 ? " (writable)" : " (NOT writable)")
                                     : " (not created yet)"));
  try {
    Context ctx = load_context(g);
    std::string files;
    for (const auto& f : ctx.registry->files()) files += (files.empty() ? "" : ", ") + f;
    line("registry", std::to_string(ctx.registry->programs().size()) + " programs, " +
                         std::to_string(ctx.registry->builds().size()) + " builds, " +
                         std::to_string(ctx.registry->routes().size()) + " routes from " + files);
    if (ctx.aot && !ctx.aot->refused().empty())
      line("aot", ctx.aot_dir + " (UNSAFE, not used: " + ctx.aot->refused() + ")");
    else if (ctx.aot)
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
  auto a = std::make_shared<DoctorArgs>();
  auto* c = app.add_subcommand("doctor", "What cake found: libcuda, libnvrtc, toolkit, devices, cache, registry");
  c->add_flag("--strict", a->strict,
              "list every candidate this device could not serve without JIT, and any cache or aot "
              "folder another user could change (exit 1 if any)");
  c->add_option("--arch", a->arch, "with --strict: the arch to check (default GPU 0's)");
  c->add_option("--shapes", a->shapes.file,
                "with --strict: which of the problems in this JSON (cakec build --shapes) would still compile")
      ->type_name("FILE");
  c->add_option("--sms", a->shapes.sms, "with --shapes: the device's SM count (default the file's, else GPU 0's)");
  c->callback([&g, &exit_code, a] {
    if (!a->shapes.file.empty() || a->shapes.sms != 0) {
      if (!a->strict) throw UsageError("--shapes and --sms go with --strict");
      ShapesArgs s = a->shapes;
      s.arch = a->arch;
      exit_code = strict_for_shapes(g, s);
      return;
    }
    exit_code = a->strict ? run_strict(g, *a) : run_doctor(g);
  });
}

}  // namespace cakec
