#!/usr/bin/env python3
"""Summarise an A/B of gg_sm90_harness builds from their `--bench` logs.

    tools/dev/harness_ab.py base=ab_base.log new=ab_new.log [--rows]

Each log holds the BENCH lines of one binary (any number of rounds, appended). Prints each
binary's geomean speedup over the cuBLAS loop (the loop's time / cake's) per variant
(fwd_dyn, dgrad_dyn, ...), and with --rows the geomean over rounds of every (shape, dist, E,
variant) row, with each binary's change against the first one named.
"""
import math
import re
import sys
from collections import defaultdict

BENCH = re.compile(r"^BENCH\s+(\S+)\s+(\S+)\s+E=(\d+)\s+(\S+)\s.*\|\s*([0-9.]+)x\s*$")


def read(path):
    """{(shape, dist, E, variant): [ratio, ...]} from one log's BENCH lines."""
    rows = defaultdict(list)
    with open(path) as f:
        for line in f:
            m = BENCH.match(line.strip())
            if m:
                shape, dist, e, variant, ratio = m.groups()
                rows[(shape, dist, int(e), variant)].append(float(ratio))
    return rows


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv):
    show_rows = "--rows" in argv
    pairs = [a.split("=", 1) for a in argv if a != "--rows"]
    if not pairs or any(len(p) != 2 for p in pairs):
        sys.exit(__doc__.strip())
    logs = {}
    for name, path in pairs:
        try:
            logs[name] = read(path)
        except OSError as e:
            sys.exit(f"{name}: cannot read {path}: {e.strerror}")
    names = [name for name, _ in pairs]
    for name in names:
        if not logs[name]:
            sys.exit(f"{name}: no BENCH lines in {dict(pairs)[name]}")
    variants = sorted({key[3] for rows in logs.values() for key in rows})
    width = max(len(n) for n in names)
    for name in names:
        cells = []
        for v in variants:
            ratios = [r for key, rs in logs[name].items() if key[3] == v for r in rs]
            if ratios:
                cells.append(f"{v} {geomean(ratios):.4f}x ({len(ratios)})")
        print(f"{name:<{width}}  " + "  ".join(cells))
    if not show_rows:
        return
    base = names[0]
    print()
    print("shape    dist       E   variant         " + "  ".join(f"{n:>16}" for n in names))
    for key in sorted(set().union(*(logs[n].keys() for n in names))):
        cells = []
        ref = geomean(logs[base][key]) if key in logs[base] else None
        for n in names:
            if key not in logs[n]:
                cells.append(f"{'-':>16}")
                continue
            g = geomean(logs[n][key])
            delta = f" {100 * (g / ref - 1):+5.1f}%" if ref and n != base else " " * 7
            cells.append(f"{g:8.4f}x{delta}")
        shape, dist, e, variant = key
        print(f"{shape:<8} {dist:<10} {e:<3} {variant:<15} " + "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
