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
/* What the runtime's loader did so far, as JSON: {"memory_hits", "aot_loads", "disk_hits",
 * "compiles", "failures", "module_loads", "stand_ins", "swaps"} ("{}" for NULL); valid until
 * the next cake call on this thread. Each compile also logs one line at info level
 * (CAKE_LOG_LEVEL=info). */
const char* cake_runtime_stats(cake_runtime* rt);

/* Every op of every family through one call. op: "family.op" (cake_ops_json lists them);
 * the tensors by argument name: names[i] names tensors[i], i < n; an optional argument is
 * left out. options_json: NULL, "" or a JSON object with any of "deterministic" (bool,
 * default true), "candidate" (string: the one route candidate to consider), "max_sms" (int),
 * "accumulate" (bool, for ops that accumulate), "eps" (number, for ops that take it),
 * "external_memory" (bool: the launch allocates no scratch; cake_launch_rebind gives it memory).
 * Validates every argument (nothing is launched or written on an error), plans, loads the
 * kernels and allocates the scratch the launch owns. */
cake_status cake_prepare(cake_runtime* rt, const char* op, int n, const char* const* names,
                         const DLTensor* const* tensors, const char* options_json, cake_launch** launch);
/* Enqueues on a CUstream (NULL: the legacy default stream). No allocation, no compile,
 * no host synchronisation: graph-capturable. */
cake_status cake_launch_run(const cake_launch* launch, void* stream);
/* Binds the launch to new tensors of the same problem (names and tensors as cake_prepare
 * takes them): checked as cake_prepare checks them, the problem must be the launch's; the
 * plan, kernels and scratch are reused (no plan, load or allocation). memory: for a launch
 * prepared with "external_memory", a block of cake_launch_memory_bytes() bytes (256-byte
 * aligned, on the tensors' device) its launches use from now on, e.g. from the framework's
 * allocator; NULL otherwise. CAKE_ERROR_ARGUMENT, the launch unchanged, when a check fails
 * or the problem differs. */
cake_status cake_launch_rebind(cake_launch* launch, int n, const char* const* names, const DLTensor* const* tensors,
                               void* memory);
/* cake_launch_rebind's fast form, for a caller that vouches that the new tensors are laid
 * out as those of the launch's last checked bind (cake_prepare's or cake_launch_rebind's):
 * the same names in the same order, shapes, strides, dtypes and device (a framework keying its
 * launches on that layout). data[i]: the i-th tensor's address (byte offset added), i < n.
 * Checked: n, null addresses, each address's alignment against the planned one, and that an
 * output meets another tensor only as it did then (apart, or the very same tensor); memory as
 * cake_launch_rebind takes it (null and alignment only). Not checked: that the memory is the
 * device's and spans the tensor. CAKE_ERROR_ARGUMENT, the launch unchanged, when a check fails. */
cake_status cake_launch_rebind_data(cake_launch* launch, int n, void* const* data, void* memory);
/* The bytes of memory a launch prepared with "external_memory" takes at each rebind (0: none,
 * or a launch that owns its memory). */
size_t cake_launch_memory_bytes(const cake_launch* launch);
/* The plan, as text: route, accumulate mode, stages, candidates passed over. */
const char* cake_launch_describe(const cake_launch* launch);
void cake_launch_free(cake_launch* launch);

/* One call: prepare and launch on `stream`, scratch allocated and freed in stream order. */
cake_status cake_run(cake_runtime* rt, const char* op, int n, const char* const* names,
                     const DLTensor* const* tensors, const char* options_json, void* stream);

/* Compiles (or loads from aot/ and the disk cache) every program the planner picks for the
 * problems of shapes_json, so that their first calls compile nothing; call it before the
 * first step. shapes_json: the format of `cakec build --shapes` ({"problems": [{"op", "dims",
 * "dtypes", "accumulate", "deterministic"}]}, docs/design.md); its "arch" and "sms", when both
 * are given, name the device, else device 0's are used. summary_json (may be NULL) receives
 * {"built", "up_to_date", "skipped": [{"problem", "why"}], "failed": [{"build", "why"}]},
 * valid until the next cake call on this thread. CAKE_ERROR_ARGUMENT for a malformed
 * shapes_json; CAKE_ERROR_NO_ROUTE when a problem has no route, CAKE_ERROR_COMPILE when a
 * build failed (the others are still built). */
cake_status cake_prebuild_for(cake_runtime* rt, const char* shapes_json, const char** summary_json);

/* What the planner picks for the problems of shapes_json (the format of cake_prebuild_for;
 * its "arch" and "sms", when both are given, name the device, else device 0's are used):
 * plans_json receives {"plans": [...]}, one per problem in order, each as `cakec plan --json` prints
 * it ({"ok", "route", "stages": [{"program", "kernel", "arch", "build", "served_by", ...}],
 * "passed_over": [{"candidate", "reason", "detail"}], "error" when there is no route, ...;
 * plan_json.hpp) with "problem", "device", "notes" (the family's: the split, how FP32 sums
 * run) and "text" (as `cakec plan` prints it, notes included) added;
 * valid until the next cake call on this thread. Compiles and launches nothing.
 * CAKE_ERROR_NO_ROUTE when a problem has no route (plans_json still says why). */
cake_status cake_plan(cake_runtime* rt, const char* shapes_json, const char** plans_json);

/* Every op's schema as a JSON array: [{"op", "args": [{"name", "dtypes", "output",
 * "optional"}], "accumulate", "eps"}]. Valid for the life of the process. */
const char* cake_ops_json(void);

const char* cake_last_error(void);

/* The compile worker this library runs NVRTC in (found beside the library however it was
 * loaded, or CAKE_COMPILE_WORKER); "" when compiles would run in process. */
const char* cake_compile_worker_path(void);

#ifdef __cplusplus
}
#endif

#endif /* CAKE_C_H */
