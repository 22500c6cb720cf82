"""N ranks of one node sharing one cold cake cache (issue: eight ranks, one cache), as
`torchrun --nproc_per_node N` starts them; ranks may share a GPU. Every rank runs one step of
a grouped GEMM and an rmsnorm (forward and backward) through cake.torch on the same shapes,
checks its results against torch's ops, and reports its loader's counters and its time to the
first step. Rank 0 checks that each build was compiled once on the node (the ranks' compiles
add up to the builds one rank loads; the others read the shared disk cache) and prints a table.

    CAKE_CACHE_DIR=$(mktemp -d) CAKE_LOG_LEVEL=info \\
      torchrun --nproc_per_node 8 tests/multi_rank_check.py PYTHON_DIR LIBCAKE
    python3 tests/multi_rank_check.py --write-shapes FILE     # the step's problems, for
      cakec build --shapes FILE --out AOT; then the run above with CAKE_AOT_DIR=AOT
"""
import json
import os
import sys
import time

E, M, N, K, H = 8, 8192, 1024, 2048, 4096
SHAPES = {"problems": [
    {"op": "grouped_gemm.fwd", "dims": {"m": M, "n": N, "k": K, "e": E}},
    {"op": "grouped_gemm.dgrad", "dims": {"m": M, "n": N, "k": K, "e": E}},
    {"op": "grouped_gemm.wgrad", "dims": {"m": M, "n": N, "k": K, "e": E}, "dtypes": {"dw": "bf16"}},
    {"op": "rmsnorm.fwd", "dims": {"t": M, "h": H, "residual": 0}},
    {"op": "rmsnorm.bwd", "dims": {"t": M, "h": H}}]}

if sys.argv[1] == "--write-shapes":
    with open(sys.argv[2], "w") as f:
        json.dump(SHAPES, f, indent=1)
    sys.exit(0)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, sys.argv[1])
os.environ["CAKE_LIBRARY"] = os.path.abspath(sys.argv[2])
# No stand-ins: every rank then loads exactly the planned builds, so the counts compare.
os.environ["CAKE_JIT_STAND_IN"] = "0"
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(rank % torch.cuda.device_count())
torch.manual_seed(0)  # the same inputs on every rank
dev = "cuda"
x = torch.randn(M, K, device=dev).to(torch.bfloat16).requires_grad_()
w = (torch.randn(E, N, K, device=dev) * 0.05).to(torch.bfloat16).requires_grad_()
offs = torch.full((E,), M // E, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
xn = torch.randn(M, H, device=dev).to(torch.bfloat16).requires_grad_()
wn = torch.ones(H, device=dev, dtype=torch.bfloat16, requires_grad=True)
dist.barrier()

t0 = time.perf_counter()
import cake.torch as ct  # noqa: E402  (the library loads and the runtime starts inside the step)
y = ct.grouped_mm(x, w, offs)
y.float().square().mean().backward()
yn = ct.rms_norm(xn, wn, 1e-6)
yn.float().square().mean().backward()
torch.cuda.synchronize()
first_step = time.perf_counter() - t0

xt, wt = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
yt = torch._grouped_mm(xt, wt.transpose(-2, -1), offs=offs)
yt.float().square().mean().backward()
xnt, wnt = xn.detach().clone().requires_grad_(), wn.detach().clone().requires_grad_()
ynt = torch.nn.functional.rms_norm(xnt.float(), (H,), wnt.float(), 1e-6)
ynt.square().mean().backward()


def near(a, b, tol):
    return bool(((a.double() - b.double()).abs() <= tol + tol * b.double().abs()).all())


ok = (near(y, yt, 2e-2) and near(x.grad, xt.grad, 2e-2) and near(w.grad, wt.grad, 5e-2) and near(yn, ynt, 2e-2)
      and near(xn.grad, xnt.grad, 2e-2))
report = {"rank": rank, "ok": ok, "first_step_s": first_step, "stats": ct.calls.runtime.stats()}
reports = [None] * world
dist.all_gather_object(reports, report)
status = 0
if rank == 0:
    print("rank | results | first step (s) | compiles | disk hits | aot loads | memory hits")
    for r in reports:
        s = r["stats"]
        print(f"{r['rank']} | {'ok' if r['ok'] else 'WRONG'} | {r['first_step_s']:.3f} | {s['compiles']} | "
              f"{s['disk_hits']} | {s['aot_loads']} | {s['memory_hits']}")
    loads = [r["stats"]["compiles"] + r["stats"]["disk_hits"] + r["stats"]["aot_loads"] for r in reports]
    compiles = sum(r["stats"]["compiles"] for r in reports)
    aot = os.environ.get("CAKE_AOT_DIR")
    want = 0 if aot else loads[0]
    print(f"builds a rank loads: {loads}; compiles on the node: {compiles} (want {want}); "
          f"first step: max {max(r['first_step_s'] for r in reports):.3f} s{' with aot/' if aot else ''}")
    if not all(r["ok"] for r in reports) or len(set(loads)) != 1 or compiles != want:
        print("multi_rank_check: FAIL")
        status = 1
    else:
        print("multi_rank_check: ok")
dist.destroy_process_group()
sys.exit(status)
