#include "runtime.hpp"

#include "env.hpp"
#include "error.hpp"
#include "log.hpp"
#include "renderer.hpp"

namespace cake {

Runtime::Runtime(RuntimeOptions opt) {
  registry_ = Registry::load_default(opt.registry_files);
  check_templates(*registry_);
  std::string aot_dir = opt.aot_dir.value_or(env::aot_dir().value_or(""));
  if (!aot_dir.empty()) {
    try {
      aot_ = AotManifest::read(aot_dir);
      if (!aot_->refused().empty())
        warn_once("unsafe:" + aot_dir, "cake: not loading prebuilt cubins from " + aot_dir + ": " + aot_->refused() +
                                           " (another user could plant code in it); compiling instead");
    } catch (const Error& e) {
      warn_once("aot-manifest:" + aot_dir, std::string("cake: ignoring aot folder: ") + e.what());
    }
  }
  bool jit = opt.jit.value_or(env::jit_enabled());
  std::function<NvrtcInfo()> nvrtc = [fixed = opt.nvrtc] { return fixed ? *fixed : Nvrtc::instance().info(); };
  rule_ = std::make_unique<AvailabilityRule>(*registry_, aot_ ? &*aot_ : nullptr, nvrtc, jit);
  planner_ = std::make_unique<Planner>(registry_, [this](const Program& p, const Arch& a) {
    Availability av = rule_->check(p, a);
    if (av.available() && av.build) {
      std::lock_guard lock(failed_mu_);
      auto it = failed_.find(av.build->key());
      if (it != failed_.end()) {
        av.by = ServedBy::none;
        av.reason = "compile_failed";
        av.detail = it->second;
      }
    }
    if (!av.available())
      warn_once("unavailable:" + av.reason, "cake: some builds are unavailable (" + av.reason +
                                                "): " + av.detail + "; routes fall back where they can");
    return av;
  });
  LoaderOptions lo;
  lo.aot = aot_ ? &*aot_ : nullptr;
  std::string cache = opt.cache_dir.value_or(env::cache_dir());
  if (!cache.empty()) lo.cache_dir = cache;
  lo.jit_enabled = jit;
  lo.stand_ins = opt.stand_ins.value_or(env::stand_ins_enabled());
  lo.nvrtc_version = [rule = rule_.get()] {
    const NvrtcInfo& n = rule->nvrtc();
    return n.present ? n.version.str() : std::string("none");
  };
  lo.compile = opt.compile;
  if (auto d = opt.dump_dir ? opt.dump_dir : env::dump_dir()) lo.dump_dir = *d;
  loader_ = std::make_unique<Loader>(std::move(lo));
}

Runtime::~Runtime() {
  // Background compiles load their programs into the contexts of launches that wait for them:
  // done before those contexts are released.
  if (loader_) loader_->wait_background();
  auto& drv = Driver::instance();
  if (!drv.available()) return;
  for (const auto& [ordinal, ctx] : primary_) {
    CUdevice dev;
    if (drv.api().cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS) drv.api().cuDevicePrimaryCtxRelease(dev);
  }
}

const LoaderStats& Runtime::load_stats() const { return loader_->stats(); }

void Runtime::wait_background() { loader_->wait_background(); }

Loader& loader_of(Runtime& rt) { return *rt.loader_; }

void Runtime::mark_failed(const std::string& build_key, const std::string& why) {
  {
    std::lock_guard lock(failed_mu_);
    failed_[build_key] = why;
  }
  warn_once("failed:" + build_key, "cake: " + build_key + " is unavailable for this process: " + why);
  planner_->clear_cache();
}

DeviceContext Runtime::context_for(int ordinal) {
  auto& drv = Driver::instance();
  const DeviceInfo& info = drv.device(ordinal);  // throws LibraryMissing / ArgumentError
  CUcontext cur = nullptr;
  CAKE_CU(cuCtxGetCurrent(&cur));
  if (cur != nullptr) {
    CUdevice dev;
    if (drv.api().cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
      CUdevice want;
      CAKE_CU(cuDeviceGet(&want, ordinal));
      if (dev == want) return {cur, &info};
    }
  }
  std::lock_guard lock(ctx_mu_);
  auto it = primary_.find(ordinal);
  if (it == primary_.end()) {
    CUdevice dev;
    CAKE_CU(cuDeviceGet(&dev, ordinal));
    CUcontext ctx = nullptr;
    CAKE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    it = primary_.emplace(ordinal, ctx).first;
  }
  return {it->second, &info};
}

}  // namespace cake
