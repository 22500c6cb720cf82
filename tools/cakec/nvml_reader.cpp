#include "nvml_reader.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace cakec {
namespace {

// nvml.h's nvmlFieldValue_t (the header is not on the build machine); stable since NVML 7.
struct FieldValue {
  unsigned field_id, scope_id;
  long long timestamp, latency_us;
  int value_type, nvml_return;  // nvmlValueType_t, nvmlReturn_t
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
  } value;
};
constexpr unsigned kPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, mW

}  // namespace

Nvml::Nvml(int pci_domain, int pci_bus, int pci_device) {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    missing_ = std::string("libnvidia-ml.so.1 not loaded: ") + (e ? e : "?");
    return;
  }
  auto init = reinterpret_cast<int (*)()>(::dlsym(lib, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(::dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  clock_ = reinterpret_cast<decltype(clock_)>(::dlsym(lib, "nvmlDeviceGetClockInfo"));
  power_ = reinterpret_cast<decltype(power_)>(::dlsym(lib, "nvmlDeviceGetPowerUsage"));
  fields_ = reinterpret_cast<decltype(fields_)>(::dlsym(lib, "nvmlDeviceGetFieldValues"));  // optional
  reasons_ = reinterpret_cast<decltype(reasons_)>(::dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  energy_ = reinterpret_cast<decltype(energy_)>(::dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));  // optional
  if (!init || !by_bus || !clock_ || !power_) {
    missing_ = "libnvidia-ml.so.1 lacks a function cakec reads";
    return;
  }
  if (int rc = init(); rc != 0) {
    missing_ = "nvmlInit_v2 returned " + std::to_string(rc);
    return;
  }
  char bus_id[32];
  std::snprintf(bus_id, sizeof(bus_id), "%08x:%02x:%02x.0", unsigned(pci_domain), unsigned(pci_bus),
                unsigned(pci_device));
  if (int rc = by_bus(bus_id, &dev_); rc != 0) {
    dev_ = nullptr;
    missing_ = std::string("no NVML device at ") + bus_id + " (" + std::to_string(rc) + ")";
    return;
  }
  unsigned mw = 0;
  instant_ = instant_power_mw(mw);
}

bool Nvml::instant_power_mw(unsigned& mw) const {
  if (!fields_) return false;
  FieldValue v{};
  v.field_id = kPowerInstant;
  if (fields_(dev_, 1, &v) != 0 || v.nvml_return != 0) return false;
  switch (v.value_type) {
    case 0: mw = unsigned(v.value.d); return true;
    case 1: mw = v.value.ui; return true;
    case 2: mw = unsigned(v.value.ul); return true;
    case 3: mw = unsigned(v.value.ull); return true;
    default: return false;
  }
}

bool Nvml::read(unsigned& sm_mhz, double& watts) const {
  unsigned mw = 0;
  if (!dev_ || clock_(dev_, 1 /* NVML_CLOCK_SM */, &sm_mhz) != 0) return false;
  if (!(instant_ ? instant_power_mw(mw) : power_(dev_, &mw) == 0)) return false;
  watts = mw / 1000.0;
  return true;
}

int Nvml::power_capped() const {
  unsigned long long reasons = 0;
  if (!dev_ || !reasons_ || reasons_(dev_, &reasons) != 0) return -1;
  return (reasons & 0x4) != 0;  // nvmlClocksEventReasonSwPowerCap
}

bool Nvml::energy_mj(unsigned long long& mj) const { return dev_ && energy_ && energy_(dev_, &mj) == 0; }

ClockSampler::ClockSampler(const Nvml* nvml) {
  if (!nvml || !nvml->available()) return;
  thread_ = std::thread([this, nvml] {
    while (!stop_.load()) {
      unsigned mhz = 0;
      double w = 0;
      if (nvml->read(mhz, w)) mhz_sum_ += mhz, watt_sum_ += w, ++samples_;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

ClockSampler::Means ClockSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (samples_ == 0) return {NAN, NAN};
  return {mhz_sum_ / samples_, watt_sum_ / samples_};
}

}  // namespace cakec
