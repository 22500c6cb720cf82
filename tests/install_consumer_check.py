"""The installed package as a user's project meets it: `cmake --install` into a prefix, the
prefix moved elsewhere (an install must be relocatable), tests/consumer configured against it
with find_package(cake CONFIG REQUIRED), built and run. Checks the layout, the library's
SONAME and exports, plans through the C++ API (shared and static) and the C ABI, the compile
worker found from the moved library and from the installed cakec, and an error through the C ABI.
Usage: python3 install_consumer_check.py BUILD_DIR SOURCE_DIR   (no GPU needed)"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

build, source = (os.path.abspath(a) for a in sys.argv[1:3])
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL {' '.join(cmd)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


tmp = tempfile.mkdtemp(prefix="cake-install-")
try:
    staged = os.path.join(tmp, "staged")
    must(["cmake", "--install", build, "--prefix", staged])
    prefix = os.path.join(tmp, "moved", "prefix")
    os.makedirs(os.path.dirname(prefix))
    shutil.move(staged, prefix)

    libs = glob.glob(os.path.join(prefix, "lib*", "**", "libcake.so"), recursive=True)
    check(len(libs) == 1, f"one libcake.so under {prefix}: {libs}")
    lib = libs[0]
    libdir = os.path.dirname(lib)
    real = os.path.realpath(lib)
    check(os.path.basename(real).startswith("libcake.so.0.1"), f"libcake.so links to a versioned file: {real}")
    check(os.path.isfile(os.path.join(libdir, "libcake.a")), "libcake.a beside it")
    worker = os.path.join(prefix, "libexec", "cake_compile_worker")
    check(os.access(worker, os.X_OK), "libexec/cake_compile_worker")
    check(os.access(os.path.join(prefix, "bin", "cakec"), os.X_OK), "bin/cakec")
    for h in ("cake_c.h", "ops.hpp", "runtime.hpp", "launch.hpp", "tensor.hpp"):
        check(os.path.isfile(os.path.join(prefix, "include", "cake", h)), f"include/cake/{h}")
    for f in ("cakeConfig.cmake", "cakeConfigVersion.cmake", "cakeTargets.cmake"):
        check(os.path.isfile(os.path.join(libdir, "cmake", "cake", f)), f"{os.path.relpath(libdir, prefix)}/cmake/cake/{f}")

    dyn = must(["readelf", "-d", lib]).stdout
    check("Library soname: [libcake.so.0.1]" in dyn, "SONAME libcake.so.0.1")
    # libcuda and libnvrtc are dlopen-ed and fmt/spdlog compiled in: a bare host runs it.
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    extra = [n for n in needed if not re.match(r"(libc|libm|libstdc\+\+|libgcc_s|ld-linux.*)\.so", n)]
    check(bool(needed) and not extra, f"needs only libc, libm, libstdc++, libgcc_s: {needed}")
    exported = must(["nm", "-D", "--defined-only", "--format=posix", lib]).stdout.split("\n")
    names = [line.split()[0] for line in exported if line.strip()]
    foreign = [n for n in names if not (n.startswith("cake_") or "4cake" in n)]
    check(bool(names) and not foreign, f"exports only cake_* and cake:: ({len(names)} symbols; others: {foreign[:5]})")

    consumer_build = os.path.join(tmp, "consumer")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    must(["cmake", "-S", os.path.join(source, "tests", "consumer"), "-B", consumer_build, *gen,
          f"-DCMAKE_PREFIX_PATH={prefix}"])
    must(["cmake", "--build", consumer_build, "-j", str(os.cpu_count() or 2)])

    env = dict(os.environ, CAKE_CACHE_DIR=os.path.join(tmp, "cache"))
    env.pop("CAKE_COMPILE_WORKER", None)
    for exe in ("consumer", "consumer_static"):
        r = run([os.path.join(consumer_build, exe), "sm_90a", "132", "rmsnorm.fwd", "t=4096", "h=4096", "residual=0"], env=env)
        check(r.returncode == 0 and "chosen:" in r.stdout and "rms_fwd" in r.stdout,
              f"{exe}: a plan on sm_90a (rc {r.returncode}) {r.stdout.splitlines()[-2:]} {r.stderr[-300:]}")
        r = run([os.path.join(consumer_build, exe), "sm_100a", "148", "rmsnorm.fwd", "t=4096", "h=4096", "residual=0"], env=env)
        check(r.returncode == 0 and "[sm_100, jit]" in r.stdout, f"{exe}: a JIT route on sm_100a (rc {r.returncode})")
        r = run([os.path.join(consumer_build, exe), "sm_90a", "132", "no_such.op"], env=env)
        check(r.returncode == 1 and "no route" in r.stdout, f"{exe}: an unknown op has no route (rc {r.returncode})")

    shapes = {"arch": "sm_90a", "sms": 132,
              "problems": [{"op": "rmsnorm.fwd", "dims": {"t": 65536, "h": 7168, "residual": 0}},
                           {"op": "grouped_gemm.fwd", "dims": {"m": 4096, "n": 4096, "k": 4096, "e": 8}}]}
    r = run([os.path.join(consumer_build, "consumer_c"), json.dumps(shapes)], env=env)
    text, _, worker_line = r.stdout.rpartition("\nworker: ")
    check(r.returncode == 0, f"consumer_c: rc 0 ({r.stderr[-300:]})")
    plans = json.loads(text)["plans"] if r.returncode == 0 else []
    check(len(plans) == 2 and all(p["ok"] and p["route"] for p in plans), "consumer_c: both problems planned")
    if plans:
        st = plans[0]["stages"][0]
        check(st.get("instance") == {"of": "rms_fwd", "values": {"h": 7168}} and st["served_by"] == "jit",
              f"consumer_c: the h=7168 instance, served by JIT ({st})")
    check(os.path.realpath(worker_line.strip()) == os.path.realpath(worker),
          f"the moved library finds the moved worker: {worker_line.strip()!r}")
    r = run([os.path.join(consumer_build, "consumer_c"), '{"problems": 3}'], env=env)
    check(r.returncode == 1 and "shapes_json" in r.stderr, f"consumer_c: a bad document is an error naming shapes_json: {r.stderr.strip()[:200]}")

    r = run([os.path.join(prefix, "bin", "cakec"), "doctor"], env=env)
    check(worker in r.stdout or os.path.realpath(worker) in r.stdout,
          f"installed cakec finds the worker: {[l for l in r.stdout.splitlines() if 'worker' in l]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print(f"install_consumer_check: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
