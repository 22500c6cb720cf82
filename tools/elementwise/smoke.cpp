// The elementwise family's part of the main job's smoke run (tools/main.sh): out += in on GPU 0
// through the whole runtime, checked against the CPU. 0 when it matches.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "error.hpp"
#include "elementwise_ops.hpp"

namespace cakec {

int smoke_elementwise(cake::Runtime& rt) {
  auto& drv = cake::Driver::instance();
  {  // the scope frees the buffers before the runtime goes
    const int64_t n = 1 << 22;
    std::vector<float> out(n), in(n);
    for (int64_t i = 0; i < n; ++i) out[i] = std::sin(float(i)), in[i] = std::cos(float(i)) * 3.0f;
    cake::DeviceBuffer d_out(n * 4), d_in(n * 4);
    CAKE_CU(cuMemcpyHtoD(d_out.get(), out.data(), n * 4));
    CAKE_CU(cuMemcpyHtoD(d_in.get(), in.data(), n * 4));
    int64_t shape[1] = {n};
    DLTensor t_out{d_out.ptr(), {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    DLTensor t_in{d_in.ptr(), {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    auto launch = cake::ops::prepare_add(rt, t_out, t_out, t_in);  // out += in
    std::printf("%s", launch.describe().c_str());
    launch.launch(nullptr);
    std::vector<float> got(n);
    CAKE_CU(cuCtxSynchronize());
    CAKE_CU(cuMemcpyDtoH(got.data(), d_out.get(), n * 4));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += got[i] != out[i] + in[i];
    std::printf("cake_smoke elementwise: %s on %s: %lld of %lld elements wrong\n", bad ? "FAILED" : "ok",
                drv.device(0).name.c_str(), (long long)bad, (long long)n);
    return bad ? 1 : 0;
  }
}

}  // namespace cakec
