#!/usr/bin/env python3
"""Writes user registries (CAKE_REGISTRY) that put RMSNorm programs with other block sizes in
front of the embedded ones, to choose the family's thread counts from measurements:

  tools/dev/rmsnorm_variants.py OUTDIR            # OUTDIR/rms_t{128,256,512,1024}.json
  for f in OUTDIR/*.json; do CAKE_REGISTRY=$f cakec bench rmsnorm --h ... --t 65536; done

Each file serves bf16-weight, no-residual forward and chunk-64 backward calls (the bench's
case) for every H of the list with one thread count; other calls fall through to the
embedded routes."""
import json
import os
import sys

SIZES = [1024, 1536, 2048, 4096, 5120, 6144, 8192]


def rows_per_block(h, threads):
    tpr = 1
    while tpr < h // 8:
        tpr *= 2
    return threads // min(tpr, threads)


def registry(threads):
    programs, fwd, bwd = [], [], []
    for h in SIZES:
        pf = f"rmsv_fwd_h{h}_t{threads}"
        programs.append({"name": pf, "template": "smxx_rmsnorm.cuh", "archs": ["sm_90a"],
                         "kernels": [f"cake::rms::fwd<cake::bf16, {h}, 8, {threads}, false>"],
                         "params": {"op": "fwd", "h": h, "threads": threads,
                                    "rows_per_block": rows_per_block(h, threads),
                                    "kernels": [{"w": "bf16", "residual": False}]}})
        fwd.append({"name": f"v_fwd_h{h}_t{threads}", "stages": [{"program": pf, "kernel": 0}],
                    "window": {"archs": ["sm_90a"], "dtypes": {"w": "bf16"},
                               "dims": {"h": [h, h], "residual": [0, 0]},
                               "align": {"x": 16, "y": 16, "w": 16}}})
        pb = f"rmsv_bwd_h{h}_t{threads}"
        programs.append({"name": pb, "template": "smxx_rmsnorm.cuh", "archs": ["sm_90a"],
                         "kernels": [f"cake::rms::bwd<cake::bf16, {h}, 8, {threads}, 64, false>"],
                         "params": {"op": "bwd", "h": h, "threads": threads,
                                    "rows_per_block": rows_per_block(h, threads),
                                    "kernels": [{"w": "bf16", "chunk_rows": 64, "compensated": False}]}})
        bwd.append({"name": f"v_bwd_h{h}_t{threads}",
                    "stages": [{"program": pb, "kernel": 0, "bind": {"partial": "scratch"}},
                               {"program": "rms_dw_finalize", "kernel": 0, "bind": {"partial": "scratch"}}],
                    "window": {"archs": ["sm_90a"], "dtypes": {"w": "bf16"},
                               "dims": {"h": [h, h], "t": [16385, 131071]},
                               "align": {"dy": 16, "x": 16, "dx": 16, "w": 16}},
                    "scratch": {"dims": ["h"], "ceil_div": ["t", 64], "dtype_of": "rstd"}})
    builds = [{"program": p["name"], "arch": "sm_90a", "min_cuda": "12.0",
               "options": ["--gpu-architecture=sm_90a", "--std=c++17", "--fmad=true"],
               # The loader warns once and compiles what the renderer produces.
               "source_hash": "0" * 64} for p in programs]
    return {"family": f"rmsnorm_t{threads}", "programs": programs, "builds": builds,
            "routes": [{"op": "rmsnorm.fwd", "candidates": fwd}, {"op": "rmsnorm.bwd", "candidates": bwd}]}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: rmsnorm_variants.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for t in (128, 256, 512, 1024):
        with open(os.path.join(out, f"rms_t{t}.json"), "w") as f:
            json.dump(registry(t), f, indent=1)
