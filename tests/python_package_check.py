"""The Python package as a user installs it: a fresh venv, `pip install <repo>` (the README's
command), then, in that venv and without torch: import, version, the library and compile
worker inside the package, plans (an instance of a parametric program), prebuild, the ops'
schemas, and each error as its exception with the library's message.
Usage: python3 python_package_check.py SOURCE_DIR   (no GPU needed; pip reaches PyPI)"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

CHECKS = textwrap.dedent('''
    import os, sys, tempfile
    import cake
    assert "torch" not in sys.modules, "importing cake imported torch"
    assert cake.__version__ == sys.argv[1], (cake.__version__, sys.argv[1])
    rt = cake.Runtime(cache_dir=tempfile.mkdtemp(), aot_dir="")
    pkg = os.path.dirname(cake.__file__)
    assert os.path.samefile(rt.library, os.path.join(pkg, "_lib", "libcake.so")), rt.library
    assert rt.compile_worker and os.path.samefile(rt.compile_worker, os.path.join(pkg, "_lib", "cake_compile_worker")), rt.compile_worker

    p = cake.plan("rmsnorm.fwd", {"t": 65536, "h": 7168, "residual": 0}, arch="sm_90a", sms=132)
    assert p["ok"] and p["stages"][0]["instance"] == {"of": "rms_fwd", "values": {"h": 7168}}, p
    assert "chosen:" in p["text"], p["text"]
    # The family's notes: how a dense FP32 dw's sums run (gemm_contract.h kChainRows).
    p = cake.plan("dense_gemm.wgrad", {"t": 131072, "n": 32, "k": 4096, "b": 1, "kn": 0}, {"dw": "f32"},
                  arch="sm_90a", sms=132)
    assert any(n.startswith("FP32 sums: 131072 rows in segments of 16384") for n in p["notes"]), p["notes"]
    assert "note: FP32 sums" in p["text"], p["text"]
    plans = rt.plans([{"op": "rmsnorm.bwd", "dims": {"t": 4096, "h": 4096}},
                      {"op": "elementwise.add", "dims": {"n": 64}, "dtypes": {"out": "f32"}}], arch="sm_100a", sms=148)
    assert [s["arch"] for q in plans for s in q["stages"]][:1] == ["sm_100"], plans
    assert any(o["op"] == "rmsnorm.fwd" for o in cake.ops())
    assert rt.stats()["compiles"] == 0, rt.stats()

    def raises(cls, fn, text):
        try:
            fn()
        except cls as e:
            assert text in str(e), (text, str(e))
            return e
        raise AssertionError(f"no {cls.__name__} ({text})")

    raises(cake.ArgumentError, lambda: cake.plan("nope.fwd", {}, arch="sm_90a", sms=132), "/problems/0/op")
    raises(ValueError, lambda: cake.plan("rmsnorm.fwd", {"t": -1}, arch="sm_90a", sms=132), "shapes_json")
    e = raises(cake.NoRouteError, lambda: cake.plan("grouped_gemm.fwd", {"m": 64, "n": 12, "k": 64, "e": 2},
                                                    arch="sm_90a", sms=132), "no route")
    assert e.details and e.details["ok"] is False and e.details["passed_over"], e.details
    offline = cake.Runtime(cache_dir="", aot_dir="", jit=False)
    e = raises(cake.NoRouteError, lambda: offline.prebuild([{"op": "elementwise.add", "dims": {"n": 64}}],
                                                           arch="sm_90a", sms=132), "jit_disabled")
    assert e.details["built"] == 0 and len(e.details["skipped"]) == 1, e.details
    raises(cake.CakeError, lambda: cake.Runtime(registry=["/no/such/registry.json"]), "/no/such/registry.json")
    raises(FileNotFoundError, lambda: cake.Runtime(library="/no/such/libcake.so"), "CAKE_LIBRARY")
    assert isinstance(cake.CompileError("x"), cake.CakeError) and isinstance(cake.ArgumentError("x"), ValueError)
    print("python package: ok", cake.__version__, rt.library)
''')


def main():
    source = os.path.abspath(sys.argv[1])
    version = next(line.split("VERSION")[1].split()[0] for line in open(os.path.join(source, "CMakeLists.txt"))
                   if line.startswith("project(cake"))
    tmp = tempfile.mkdtemp(prefix="cake-venv-")
    try:
        subprocess.run([sys.executable, "-m", "venv", os.path.join(tmp, "venv")], check=True)
        py = os.path.join(tmp, "venv", "bin", "python")
        env = dict(os.environ)
        for k in ("CAKE_LIBRARY", "CAKE_COMPILE_WORKER", "PYTHONPATH"):
            env.pop(k, None)
        r = subprocess.run([py, "-m", "pip", "install", "-q", source], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-4000:], r.stderr[-4000:])
            print("FAIL: pip install")
            return 1
        # From another folder, so `import cake` finds the installed package, not python/cake.
        r = subprocess.run([py, "-c", CHECKS, version], env=env, cwd=tmp, capture_output=True, text=True)
        print(r.stdout, r.stderr)
        return r.returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
