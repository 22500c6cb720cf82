// The SM clock, board power and energy through NVML, loaded with dlopen (the driver's
// libnvidia-ml.so.1; cakec links no NVIDIA library): the sustained benchmarks report the
// clock each contender runs at when it alone sets the card's power draw, and its energy.
#pragma once
#include <atomic>
#include <string>
#include <thread>

namespace cakec {

class Nvml {
 public:
  // The NVML device at the CUDA device's PCI address. Never throws: a missing library,
  // symbol or device is a reason.
  Nvml(int pci_domain, int pci_bus, int pci_device);
  bool available() const { return dev_ != nullptr; }
  const std::string& missing_reason() const { return missing_; }
  // SM clock (MHz) and board power (W) now; false when a read fails.
  bool read(unsigned& sm_mhz, double& watts) const;
  // Whether read() gives the instant power (NVML_FI_DEV_POWER_INSTANT), else the power
  // averaged over the last second that nvmlDeviceGetPowerUsage gives from Ampere on.
  bool instant_power() const { return instant_; }
  // Whether the power cap holds the clock down now (the software power cap reason); -1 when
  // NVML cannot say.
  int power_capped() const;
  // The board's energy counter (mJ since the driver loaded; Volta on); false when unreadable.
  bool energy_mj(unsigned long long& mj) const;

 private:
  bool instant_power_mw(unsigned& mw) const;

  void* dev_ = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;  // nvmlDeviceGetClockInfo
  int (*power_)(void*, unsigned*) = nullptr;       // nvmlDeviceGetPowerUsage (mW)
  int (*fields_)(void*, int, void*) = nullptr;     // nvmlDeviceGetFieldValues
  int (*reasons_)(void*, unsigned long long*) = nullptr;  // nvmlDeviceGetCurrentClocksThrottleReasons
  int (*energy_)(void*, unsigned long long*) = nullptr;   // nvmlDeviceGetTotalEnergyConsumption
  bool instant_ = false;
  std::string missing_;
};

// Reads the clock and power every 5 ms on a thread from construction to stop(), and gives
// their means (NaN without NVML or readings).
class ClockSampler {
 public:
  struct Means {
    double mhz, watts;
  };
  explicit ClockSampler(const Nvml* nvml);
  ~ClockSampler() { stop(); }
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;
  Means stop();

 private:
  std::atomic<bool> stop_{false};
  double mhz_sum_ = 0, watt_sum_ = 0;
  long samples_ = 0;
  std::thread thread_;
};

}  // namespace cakec
