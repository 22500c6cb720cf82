#!/usr/bin/env python3
"""List-scheduling model of the sm90 wgrad tile schedule and its tail split.

Models the dynamic schedule of templates/sm90_grouped_gemm.cuh for wgrad: tiles walked
largest group first, each taken by the SM that frees up first; a tile costs its k blocks
(group rows / 64) plus EPI for the epilogue; a split part costs its share plus PASS for
passing its sum on, and finishes no earlier than its predecessor part + PASS. Prints work
over makespan (1.0 = no idle SM) for the bench's rows under three plans:
  none     no split
  landed   the rule in Scheduler::plan_split (groups of one size: the last tiles mod SMs in
           the parts that fill the last wave; uneven groups under 16 waves: the last
           min(SMs, tiles of a group) tiles in 2)
  uneven2  the uneven split in 2 without the 16-wave limit
Group sizes are made as `cakec bench grouped_gemm` makes them, except lognormal (numpy's
generator, not the bench's mt19937: same sigma, other draws).
"""
import heapq
import math

import numpy as np

SMS, EPI, PASS = 132, 3, 3


def sizes(m, e, dist):
    if dist == "balanced":
        return [m // e + (1 if i < m % e else 0) for i in range(e)]
    if dist == "skewed":
        r = m - m // 2
        return [m // 2] + [r // (e - 1) + (1 if i < r % (e - 1) else 0) for i in range(e - 1)]
    if dist == "one_empty":
        r = [m // (e - 1) + (1 if i < m % (e - 1) else 0) for i in range(e - 1)]
        r.insert(e // 2, 0)
        return r
    w = np.exp(np.random.default_rng(20261129 + e).normal(size=e))
    ex = m * w / w.sum()
    s = np.floor(ex).astype(int)
    frac = sorted(((ex[i] - s[i], i) for i in range(e)), reverse=True)
    i = 0
    while s.sum() < m:
        s[frac[i % e][1]] += 1
        i += 1
    return [int(v) for v in s]


def plan(s, per_group, rule):
    """(split tiles, parts) for group sizes s, tiles per group, and a rule."""
    rows = [v for v in s if v > 0]
    work, lo, hi = len(rows) * per_group, min(rows), max(rows)
    if rule == "none":
        return 0, 1
    if hi - lo > lo // 8:  # uneven
        if lo < 512 or (rule == "landed" and work >= 16 * SMS):
            return 0, 1
        return min(SMS, per_group), 2
    r = work % SMS
    most, best = min(lo // 256, 4), 1
    for p in range(2, most + 1):
        if (p * r + SMS - 1) // SMS * best < (best * r + SMS - 1) // SMS * p:
            best = p
    return (r, best) if r and best > 1 else (0, 1)


def efficiency(s, per_group, rule):
    lens = [math.ceil(v / 64) for v in sorted((v for v in s if v > 0), reverse=True)]
    split, parts = plan(s, per_group, rule)
    units, tile = [], 0
    for k in lens:
        for _ in range(per_group):
            if tile >= len(lens) * per_group - split:
                units += [(k / parts + EPI * (j == parts - 1) + PASS * (j > 0), tile, j) for j in range(parts)]
            else:
                units.append((k + EPI, tile, 0))
            tile += 1
    free = [(0.0, i) for i in range(SMS)]
    done, end = {}, 0.0
    for cost, t, j in units:
        start, sm = heapq.heappop(free)
        finish = start + cost if j == 0 else max(start + cost, done[(t, j - 1)] + PASS)
        done[(t, j)] = finish
        end = max(end, finish)
        heapq.heappush(free, (finish, sm))
    return sum(lens) * per_group / SMS / end


def main():
    print(f"{'shape':8s}{'M':>7s} {'E':>3s} {'dist':10s} {'none':>7s} {'landed':>7s} {'uneven2':>8s}")
    for shape, n, k in (("gate_up", 4096, 6144), ("down", 6144, 2048)):
        per_group = (n // 128) * math.ceil(k / 256)  # dW [N, K] in 128 x 256 tiles
        for m in (112576, 131072):
            for e in (4, 8, 16, 32):
                for dist in ("balanced", "skewed", "one_empty", "lognormal"):
                    s = sizes(m, e, dist)
                    row = [efficiency(s, per_group, r) for r in ("none", "landed", "uneven2")]
                    print(f"{shape:8s}{m:7d} {e:3d} {dist:10s} " + " ".join(f"{v:7.4f}" for v in row))


if __name__ == "__main__":
    main()
