/* cake's C ABI: what a Python script reaches with ctypes next to torch, or any host code
 * that cannot take C++. Tensors are DLPack DLTensors (device pointers, strides in elements).
 * Every call returns a cake_status; on failure cake_last_error() has the message (per
 * thread, valid until the next cake call on that thread). */
#ifndef CAKE_C_H
#define CAKE_C_H

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CAKE_OK = 0,
  CAKE_ERROR_ARGUMENT = 1, /* a bad argument: nothing was launched or written */
  CAKE_ERROR_NO_ROUTE = 2, /* no candidate of the op's route can serve the call */
  CAKE_ERROR_COMPILE = 3,  /* NVRTC failed; the message carries its log */
  CAKE_ERROR_DRIVER = 4,   /* a CUDA driver call failed */
  CAKE_ERROR_OTHER = 5
} cake_status;

typedef struct cake_runtime cake_runtime;
typedef struct cake_launch cake_launch;

/* options_json: NULL or a JSON object with any of "aot_dir", "cache_dir", "jit" (bool),
 * "registry" (array of file names). */
cake_status cake_runtime_create(const char* options_json, cake_runtime** out);
void cake_runtime_destroy(cake_runtime* rt);

/* Prepared launches: validate, plan, load, allocate scratch. */
cake_status cake_prepare_add(cake_runtime* rt, const DLTensor* out, const DLTensor* a,
                             const DLTensor* b, int deterministic, cake_launch** launch);
cake_status cake_prepare_cast(cake_runtime* rt, const DLTensor* out, const DLTensor* in,
                              int accumulate, int deterministic, cake_launch** launch);
/* Enqueues on a CUstream (NULL: the legacy default stream). No allocation, no compile,
 * no host synchronisation: graph-capturable. */
cake_status cake_launch_run(const cake_launch* launch, void* stream);
/* The plan, as text: route, accumulate mode, stages, candidates passed over. */
const char* cake_launch_describe(const cake_launch* launch);
void cake_launch_free(cake_launch* launch);

/* rmsnorm: see runtime/ops.hpp. h_out and residual are both NULL or both given. */
cake_status cake_prepare_rmsnorm_fwd(cake_runtime* rt, const DLTensor* y, const DLTensor* rstd,
                                     const DLTensor* h_out, const DLTensor* x,
                                     const DLTensor* residual, const DLTensor* w, float eps,
                                     cake_launch** launch);
cake_status cake_prepare_rmsnorm_bwd(cake_runtime* rt, const DLTensor* dx, const DLTensor* dw,
                                     const DLTensor* dy, const DLTensor* x, const DLTensor* rstd,
                                     const DLTensor* w, cake_launch** launch);

/* grouped_gemm: see runtime/ops.hpp. offs: [E] int32 cumulative group ends, on the device.
 * candidate: NULL or "" for the planner's choice, else the name of the one route candidate
 * to consider (e.g. a portable program on a Hopper part). */
cake_status cake_prepare_grouped_gemm_fwd(cake_runtime* rt, const DLTensor* y, const DLTensor* x,
                                          const DLTensor* w, const DLTensor* offs, int deterministic,
                                          const char* candidate, cake_launch** launch);
cake_status cake_prepare_grouped_gemm_dgrad(cake_runtime* rt, const DLTensor* dx, const DLTensor* g,
                                            const DLTensor* w, const DLTensor* offs, int deterministic,
                                            const char* candidate, cake_launch** launch);
cake_status cake_prepare_grouped_gemm_wgrad(cake_runtime* rt, const DLTensor* dw, const DLTensor* g,
                                            const DLTensor* x, const DLTensor* offs, int accumulate,
                                            int deterministic, const char* candidate,
                                            cake_launch** launch);

/* One-call forms: prepare + launch. */
cake_status cake_add(cake_runtime* rt, const DLTensor* out, const DLTensor* a, const DLTensor* b,
                     void* stream);
cake_status cake_cast(cake_runtime* rt, const DLTensor* out, const DLTensor* in, int accumulate,
                      void* stream);

const char* cake_last_error(void);

/* The compile worker this library runs NVRTC in (found beside the library however it was
 * loaded, or CAKE_COMPILE_WORKER); "" when compiles would run in process. */
const char* cake_compile_worker_path(void);

#ifdef __cplusplus
}
#endif

#endif /* CAKE_C_H */
