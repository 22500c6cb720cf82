#!/usr/bin/env python3
"""Summarise gg_sm90_harness solo runs (GG_SOLO_MS) from their logs.

    tools/dev/solo_summary.py solo.log [more.log ...]

A solo row is a "SOLO row SHAPE DIST E=N" line and then, per round, one SOLO line per variant
followed by the cuBLAS loop's. Prints, per row and variant, the mean over rounds of its time,
SM clock, board power and tensor work a clock, and its speed against the loop timed in the
same row (the loop's time / the variant's). A "== NAME ..." line in the log (written by the
script that ran the binaries) names the binary of the rows after it.
"""
import re
import sys
from collections import defaultdict

ROW = re.compile(r"^SOLO row (\S+) (\S+) E=(\d+)")
SOLO = re.compile(r"^SOLO (\S+)\s+([\d.]+) ms\s+[\d.]+ TFLOP/s\s+(\d+) MHz\s+([\d.]+) W.*?([\d.]+) of peak/clk")


def main(paths):
    # (index, binary, shape, dist, E) -> variant -> [(ms, MHz, W, work a clock), one a round]
    rows = defaultdict(lambda: defaultdict(list))
    order = []
    for path in paths:
        binary, row = path, None
        with open(path) as f:
            for line in f:
                if line.startswith("== "):
                    binary = line.split()[1]
                    continue
                m = ROW.match(line)
                if m:
                    # Each header starts a row of its own (fwd's and dgrad's share a heading).
                    row = (len(order), binary) + m.groups()
                    order.append(row)
                    continue
                m = SOLO.match(line)
                if m and row:
                    rows[row][m.group(1)].append(tuple(float(v) for v in m.groups()[1:]))
    for row in order:
        loop = rows[row].get("cublas_loop")
        loop_ms = sum(v[0] for v in loop) / len(loop) if loop else None
        print(" ".join(row[1:]))
        for variant, runs in rows[row].items():
            ms, mhz, w, clk = (sum(v[i] for v in runs) / len(runs) for i in range(4))
            vs = f"{loop_ms / ms:.3f}x" if loop_ms else "-"
            print(f"  {variant:16s} {ms:8.3f} ms {mhz:6.0f} MHz {w:5.0f} W {clk:.3f}/clk  {vs} vs loop ({len(runs)} rounds)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
