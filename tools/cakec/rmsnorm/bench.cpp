// cakec bench rmsnorm: forward and backward bandwidth (bytes that must move over the median
// time, CUDA events, L2 flushed before each timed call) against the device-to-device copy
// bandwidth measured in the same run, and each op's time against a copy that moves the same
// bytes as the row (read and written), timed in turn with it: a short row's launch and tail
// cost a copy of its size too, which the large copy's bandwidth does not show.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "bench_util.hpp"
#include "cli_common.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "rmsnorm_ops.hpp"

namespace cakec {
namespace {

DLTensor tensor(const cake::DeviceBuffer& b, bool bf16, int ndim, int64_t* shape) {
  DLTensor t{};
  t.data = b.ptr();
  t.device = {kDLCUDA, 0};
  t.ndim = ndim;
  t.dtype = bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

int run_bench_rmsnorm(std::vector<int64_t> hs, std::vector<int64_t> ts) {
  auto& drv = cake::Driver::instance();
  if (!drv.available() || drv.device_count() == 0)
    throw cake::Error("cakec bench rmsnorm needs a GPU: " + drv.missing_reason());
  CUdevice dev;
  CAKE_CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CAKE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CAKE_CU(cuCtxSetCurrent(ctx));
  cake::Runtime rt;
  Timer timer;
  double copy_tbps;
  {
    size_t bytes = size_t(2) << 30;
    cake::DeviceBuffer src(bytes), dst(bytes);
    CAKE_CU(cuMemsetD32(src.get(), 0x3f800000u, bytes / 4));
    double ms = timer.median_ms([&] { CAKE_CU(cuMemcpyDtoDAsync(dst.get(), src.get(), bytes, timer.stream)); }, 15);
    copy_tbps = 2.0 * double(bytes) / ms / 1e9;
  }
  std::printf("cakec bench rmsnorm: %s, device-to-device copy %.2f TB/s (bytes read + written), bf16 x, bf16 w, "
              "no residual; median of 25, L2 flushed; OF_SAME: a copy of the row's bytes' time over the op's, "
              "timed in turn\n", drv.device(0).name.c_str(), copy_tbps);
  // Same-size copies (n elements a row): fwd moves 4n bytes (x in, y out), as a copy of 2n bytes
  // does; bwd 6n (dy and x in, dx out), as a copy of 3n. Buffers for the largest row.
  size_t max_n = 0;
  for (int64_t H : hs)
    for (int64_t T : ts) max_n = std::max(max_n, size_t(T * H));
  cake::DeviceBuffer copy_src(max_n * 3), copy_dst(max_n * 3);
  std::vector<std::vector<std::string>> rows;
  char buf[256];
  for (int64_t H : hs)
    for (int64_t T : ts) {
      int64_t shape2[2] = {T, H}, shape_t[1] = {T}, shape_h[1] = {H};
      size_t n = size_t(T * H);
      cake::DeviceBuffer x(n * 2), y(n * 2), dy(n * 2), dx(n * 2), rstd(size_t(T) * 4), w(size_t(H) * 2), dw(size_t(H) * 2);
      fill_random(x.get(), n, 1);
      fill_random(dy.get(), n, 2);
      fill_random(w.get(), size_t(H), 3);
      auto tx = tensor(x, true, 2, shape2), ty = tensor(y, true, 2, shape2), tdy = tensor(dy, true, 2, shape2),
           tdx = tensor(dx, true, 2, shape2), tr = tensor(rstd, false, 1, shape_t), tw = tensor(w, true, 1, shape_h),
           tdw = tensor(dw, true, 1, shape_h);
      auto fwd = cake::ops::prepare_rmsnorm_fwd(rt, ty, tr, nullptr, tx, nullptr, tw, 1e-6f);
      auto bwd = cake::ops::prepare_rmsnorm_bwd(rt, tdx, tdw, tdy, tx, tr, tw);
      auto copy = [&](size_t bytes) {
        return [&, bytes] { CAKE_CU(cuMemcpyDtoDAsync(copy_dst.get(), copy_src.get(), bytes, timer.stream)); };
      };
      const auto f_times = timer.median_ms_interleaved({[&] { fwd.launch(timer.stream); }, copy(n * 2)}, 25);
      const auto b_times = timer.median_ms_interleaved({[&] { bwd.launch(timer.stream); }, copy(n * 3)}, 25);
      const double fwd_ms = f_times[0], bwd_ms = b_times[0];
      double fin_ms = timer.median_ms([&] { bwd.launch_stage(1, timer.stream); });
      double fwd_bytes = double(n) * 4 + double(H) * 2 + double(T) * 4;
      double bwd_bytes = double(n) * 6 + double(H) * 4 + double(T) * 4;
      double f_tbps = fwd_bytes / fwd_ms / 1e9, b_tbps = bwd_bytes / bwd_ms / 1e9;
      auto f = [&](const char* format, double v) {
        std::snprintf(buf, sizeof(buf), format, v);
        return std::string(buf);
      };
      rows.push_back({std::to_string(H), std::to_string(T), f("%.1f", fwd_ms * 1000), f("%.2f", f_tbps),
                      f("%.0f%%", 100 * f_tbps / copy_tbps),
                      f("%.0f%%", 100 * f_times[1] / fwd_ms), f("%.1f", bwd_ms * 1000), f("%.2f", b_tbps),
                      f("%.0f%%", 100 * b_tbps / copy_tbps), f("%.0f%%", 100 * b_times[1] / bwd_ms),
                      f("%.1f%%", 100 * fin_ms / bwd_ms),
                      fwd.plan()->route + " (" + fwd.plan()->stages[0].program->name + ")",
                      bwd.plan()->route + " (" + bwd.plan()->stages[0].program->name + ")"});
    }
  std::cout << format_table({"H", "T", "FWD_US", "FWD_TB/S", "OF_COPY", "OF_SAME", "BWD_US", "BWD_TB/S", "OF_COPY",
                             "OF_SAME", "FINALIZE", "FWD_ROUTE", "BWD_ROUTE"},
                            rows);
  return kOk;
}

}  // namespace

void add_bench_rmsnorm(CLI::App& bench, int& exit_code) {
  // Common models' hidden sizes, and the smallest the specialised programs serve.
  auto hs = std::make_shared<std::vector<int64_t>>(
      std::vector<int64_t>{256, 1024, 2048, 3072, 3584, 4096, 5120, 5376, 6144, 7168, 8192, 12288, 16384});
  auto ts = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{4096, 16384, 65536});
  auto* c = bench.add_subcommand("rmsnorm", "RMSNorm fwd/bwd TB/s and fraction of the copy bandwidth");
  c->add_option("--h", *hs, "hidden sizes (default 256 1024 2048 3072 3584 4096 5120 5376 6144 7168 8192 12288 16384)");
  c->add_option("--t", *ts, "row counts (default 4096 16384 65536)");
  c->callback([&exit_code, hs, ts] { exit_code = run_bench_rmsnorm(*hs, *ts); });
}

}  // namespace cakec
