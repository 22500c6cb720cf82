"""cake's elementwise ops through the C ABI next to torch, on torch's stream: results equal
torch's bit for bit, a bad argument raises with cake's message, and a prepared launch replays
inside a torch CUDA graph. Usage: python3 tools/elementwise/torch_check.py build-gpu/runtime/libcake.so"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # cake
import cake  # noqa: E402
from cake import CakeError  # noqa: E402,F401

rt = cake.Runtime(sys.argv[1], cache_dir=tempfile.mkdtemp())
torch.manual_seed(0)
n = (1 << 22) + 3
a = torch.randn(n, device="cuda")
b = torch.randn(n, device="cuda")
out = torch.full_like(a, float("nan"))
rt.run("elementwise.add", out=out, a=a, b=b)
assert torch.equal(out, a + b), "add f32"

g = torch.randn(n, device="cuda").to(torch.bfloat16)
acc = torch.randn(n, device="cuda")
ref = acc + g.float()
launch = rt.prepare("elementwise.cast", out=acc, in_=g, accumulate=True)
print(launch.describe(), end="")
launch.run()
assert torch.equal(acc, ref), "fused accumulate"

acc2 = torch.randn(n, device="cuda")
start = acc2.clone()
graph = torch.cuda.CUDAGraph()
prepared = rt.prepare("elementwise.cast", out=acc2, in_=g, accumulate=True)
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    with torch.cuda.graph(graph, stream=s):
        prepared.run(s)
for _ in range(3):
    graph.replay()
torch.cuda.synchronize()
expect = start
for _ in range(3):
    expect = expect + g.float()
assert torch.equal(acc2, expect), "graph replay"

try:
    rt.run("elementwise.add", out=out, a=a, b=b[:-1])
    raise SystemExit("a bad argument was accepted")
except CakeError as e:
    assert "argument 'b'" in str(e), str(e)
print("elementwise torch_check: ok (add, fused accumulate, graph replay x3, rejection)")
