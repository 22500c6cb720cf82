#!/usr/bin/env python3
"""L2 / DRAM-read model of the persistent grouped-GEMM fwd kernel for different tile orders.

Y = X W^T per group. X [M, K] bf16, W [E, N, K] bf16. Tiles are 128 rows (of one group) x 256
columns; each tile walks K in k blocks of 64 and, per k block, reads an A chunk (128 x 64 x 2 B
= 16 KB, less for a group's partial last row block) and a B chunk (256 x 64 x 2 B = 32 KB, kept
as two 16 KB halves) through L2. 132 persistent CTAs; tile index t goes to CTA t for t < 132,
then to whichever CTA frees up first (atomic counter).

Timing: a k block is one step; a tile takes K/64 steps scaled by (1 + N(0, sigma)) (jitter so
CTAs drift out of lock step); inside a step each access gets a uniform random offset, so the
order of CTAs' accesses within a step is random. Timing does not depend on hits/misses.

L2 variants (--cache), all counting in 16 KB slots, DRAM bytes = bytes of missed chunks:
  lru     one LRU of CAP MB
  hash2   two LRUs of CAP/2 MB, each 16 KB chunk hashed to one
  side2x  two LRUs of CAP/2 MB, one per SM half (CTA parity); a chunk used by both halves is
          held twice (A100/H100-style near-partition caching); a miss in the near half that
          hits the far half costs no DRAM read (it is copied into the near half)
  side2   as side2x but a near-half miss always reads DRAM (pessimistic)
  rand    one cache of CAP MB with random replacement
--out inserts the 64 KB of Y a tile writes at its end as 4 fresh 16 KB chunks (evicting).

Pure Python (no numpy on the box); ~5-10 s per run of 16k tiles x 96 k blocks.

Usage:
  l2_raster_model.py calib [--seeds 3]         band 8/16/32 on lognormal for cache/jitter variants
  l2_raster_model.py sweep [--cache lru ...]   alternative orders, lognormal + balanced
  l2_raster_model.py one --order band:16 [...]
"""
import argparse
import heapq
import random
import sys
import time
from collections import OrderedDict
from multiprocessing import Pool

SMS = 132
BM, BN, BK = 128, 256, 64
MB = 1 << 20
SLOT = 16384

LOGNORMAL = [3286, 47982, 36745, 43059]  # first two from logs (min, max); middle two assumed
BALANCED = [32768] * 4


# ----------------------------------------------------------------------------- tile orders
def _band_local(mu, tn, B, inner="m", serp_n=False, serp_m=False):
    """Current order (inner='m', no serpentine) = the kernel's band raster."""
    out = []
    nb = (mu + B - 1) // B
    for band in range(nb):
        rows = min(B, mu - band * B)
        ns = list(range(tn))
        if serp_n and band % 2:
            ns.reverse()
        if inner == "m":
            for j, n in enumerate(ns):
                ms = list(range(rows))
                if serp_m and j % 2:
                    ms.reverse()
                for m in ms:
                    out.append((band * B + m, n))
        else:  # columns fastest inside the band
            for i, m in enumerate(range(rows)):
                nn = ns if not (serp_m and i % 2) else ns[::-1]
                for n in nn:
                    out.append((band * B + m, n))
    return out


def _swz_local(mu, tn, R, C, serp=False):
    """Column strips of C tiles; inside a strip, blocks of R row blocks walked down M; inside a
    block rows fastest then columns. C = tn reproduces band R. serp: alternate M direction of
    blocks per strip (so the A rows at a strip change are still hot)."""
    out = []
    strips = (tn + C - 1) // C
    nblk = (mu + R - 1) // R
    for s in range(strips):
        cs = list(range(s * C, min(tn, (s + 1) * C)))
        bl = list(range(nblk))
        if serp and s % 2:
            bl.reverse()
        for b in bl:
            rs = list(range(b * R, min(mu, (b + 1) * R)))
            for n in cs:
                for m in rs:
                    out.append((m, n))
    return out


def _nband_local(mu, tn, C, serp=False):
    """Column strips of C tiles, walk all rows of the group inside a strip, columns fastest.
    serp: alternate M direction per strip."""
    out = []
    for s in range((tn + C - 1) // C):
        cs = list(range(s * C, min(tn, (s + 1) * C)))
        ms = list(range(mu))
        if serp and s % 2:
            ms.reverse()
        for m in ms:
            for n in cs:
                out.append((m, n))
    return out


def local_order(mu, tn, spec):
    kind, _, arg = spec.partition(":")
    if kind in ("band", "bandn", "serpn", "serpm", "serpnm"):
        B = int(arg)
        return _band_local(mu, tn, B, inner="n" if kind == "bandn" else "m",
                           serp_n=kind in ("serpn", "serpnm"), serp_m=kind in ("serpm", "serpnm"))
    if kind in ("swz", "swzs"):
        R, C = (int(v) for v in arg.split("x"))
        return _swz_local(mu, tn, R, C, serp=kind == "swzs")
    if kind in ("nband", "nbands"):
        return _nband_local(mu, tn, int(arg), serp=kind == "nbands")
    raise ValueError(spec)


def tile_order(sizes, N, spec):
    """List of (e, m_blk, n_blk, rows) in tile index order. 'ilv:<spec>' interleaves groups
    round robin, one band (B*tn tiles of the inner spec's band size) at a time."""
    tn = N // BN
    inter = spec.startswith("ilv:")
    inner = spec[4:] if inter else spec
    per = []
    for e, s in enumerate(sizes):
        mu = (s + BM - 1) // BM
        lst = [(e, m, n, min(BM, s - m * BM)) for (m, n) in local_order(mu, tn, inner)]
        per.append(lst)
    if not inter:
        return [t for lst in per for t in lst]
    chunk = int(inner.split(":")[1].split("x")[0]) * tn
    out, pos = [], [0] * len(per)
    while any(pos[e] < len(per[e]) for e in range(len(per))):
        for e in range(len(per)):
            out.extend(per[e][pos[e]:pos[e] + chunk])
            pos[e] += chunk
    return out


# ----------------------------------------------------------------------------- simulation
def simulate(sizes, N, K, spec, sigma=0.02, seed=0, cache="lru", cap_mb=50.0, out=False,
             stagger=0.0):
    rng = random.Random(seed)
    kbs = K // BK
    tn = N // BN
    tiles = tile_order(sizes, N, spec)
    assert len(tiles) == len(set((t[0], t[1], t[2]) for t in tiles))
    rb_off, acc = [], 0
    for s in sizes:
        rb_off.append(acc)
        acc += (s + BM - 1) // BM
    bbase = acc * kbs

    # schedule (cache-independent)
    heap = [(rng.random() * stagger, c) for c in range(SMS)]
    heapq.heapify(heap)
    times, keys = [], []
    tile_cta = []
    ends = []
    rnd = rng.random
    for ti, _ in enumerate(tiles):
        start, c = heapq.heappop(heap)
        d = kbs * max(0.5, 1.0 + rng.gauss(0.0, sigma))
        step = d / kbs
        tile_cta.append(c)
        base = ti * kbs
        for k in range(kbs):
            times.append(start + (k + rnd()) * step)
            keys.append(base + k)
        ends.append(start + d)
        heapq.heappush(heap, (start + d, c))
    if out:
        for ti, t_end in enumerate(ends):
            times.append(t_end)
            keys.append(-1 - ti)
    order = sorted(range(len(times)), key=times.__getitem__)

    cap = int(cap_mb * MB / SLOT)
    dram = 0
    oid = [0]

    def accesses(key):
        """yield (chunk id, bytes) for one event."""
        ti, k = divmod(key, kbs)
        e, m, n, rows = tiles[ti]
        a = (rb_off[e] + m) * kbs + k
        b = bbase + ((e * tn + n) * kbs + k) * 2
        return ((a, rows * 128), (b, SLOT), (b + 1, SLOT))

    out_base = 1 << 40

    def chunks(key):
        """(tile, [(chunk id, DRAM bytes on a miss)]) of one event: a k block's reads, or
        (key < 0) the 4 output chunks tile -1 - key writes at its end (no DRAM read)."""
        if key < 0:
            ti = -1 - key
            return ti, [(out_base + ti * 4 + j, 0) for j in range(4)]
        return key // kbs, accesses(key)

    if cache in ("lru", "hash2"):
        nparts = 1 if cache == "lru" else 2
        parts = [OrderedDict() for _ in range(nparts)]
        pc = cap // nparts
        for idx in order:
            _, lst = chunks(keys[idx])
            for cid, nb in lst:
                od = parts[0] if nparts == 1 else parts[((cid * 2654435761) >> 13) & 1]
                if cid in od:
                    od.move_to_end(cid)
                else:
                    dram += nb
                    od[cid] = None
                    if len(od) > pc:
                        od.popitem(last=False)
    elif cache in ("side2", "side2x"):
        parts = [OrderedDict(), OrderedDict()]
        pc = cap // 2
        far_ok = cache == "side2x"
        for idx in order:
            ti, lst = chunks(keys[idx])
            side = tile_cta[ti] & 1
            od, far = parts[side], parts[side ^ 1]
            for cid, nb in lst:
                if cid in od:
                    od.move_to_end(cid)
                else:
                    if not (far_ok and cid in far):
                        dram += nb
                    od[cid] = None
                    if len(od) > pc:
                        od.popitem(last=False)
    elif cache == "rand":
        slots = []
        where = {}
        r2 = random.Random(seed + 12345)
        for idx in order:
            _, lst = chunks(keys[idx])
            for cid, nb in lst:
                if cid in where:
                    continue
                dram += nb
                if len(slots) < cap:
                    where[cid] = len(slots)
                    slots.append(cid)
                else:
                    j = int(r2.random() * cap)
                    del where[slots[j]]
                    slots[j] = cid
                    where[cid] = j
    else:
        raise ValueError(cache)
    return dram / 1e9


def _run(args):
    t0 = time.time()
    r = simulate(**args)
    return args, r, time.time() - t0


def compulsory(sizes, N, K):
    return (sum(sizes) * K * 2 + len(sizes) * N * K * 2) / 1e9


def run_many(jobs, procs):
    with Pool(procs) as p:
        return p.map(_run, jobs, chunksize=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["calib", "sweep", "one"])
    ap.add_argument("--order", nargs="+", default=["band:16"])
    ap.add_argument("--cache", nargs="+", default=["lru"])
    ap.add_argument("--cap", nargs="+", type=float, default=[50.0])
    ap.add_argument("--sigma", nargs="+", type=float, default=[0.02])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--dist", nargs="+", default=["lognormal"], choices=["lognormal", "balanced"])
    ap.add_argument("--out", action="store_true", help="model Y writes as evicting inserts")
    ap.add_argument("--stagger", type=float, default=0.0, help="random CTA start offsets, steps")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--K", type=int, default=6144)
    a = ap.parse_args()
    dists = {"lognormal": LOGNORMAL, "balanced": BALANCED}
    orders = a.order
    if a.mode == "calib":
        orders = ["band:8", "band:16", "band:32"]
    jobs = []
    for d in a.dist:
        for c in a.cache:
            for cap in a.cap:
                for sg in a.sigma:
                    for o in orders:
                        for s in range(a.seeds):
                            jobs.append(dict(sizes=dists[d], N=a.N, K=a.K, spec=o, sigma=sg,
                                             seed=s, cache=c, cap_mb=cap, out=a.out,
                                             stagger=a.stagger))
    res = run_many(jobs, a.procs)
    rows = {}
    for args, r, dt in res:
        d = "lognormal" if args["sizes"] == LOGNORMAL else "balanced"
        k = (d, args["cache"], args["cap_mb"], args["sigma"], args["spec"])
        rows.setdefault(k, []).append((r, dt))
    print(f"compulsory lognormal {compulsory(LOGNORMAL, a.N, a.K):.2f} GB, out={a.out} stagger={a.stagger}")
    print("| dist | cache | cap MB | sigma | order | DRAM GB per seed | mean | s/run |")
    print("|---|---|---|---|---|---|---|---|")
    for k, v in rows.items():
        gs = [x[0] for x in v]
        print(f"| {k[0]} | {k[1]} | {k[2]:g} | {k[3]:g} | {k[4]} | "
              f"{' / '.join(f'{g:.2f}' for g in gs)} | {sum(gs)/len(gs):.2f} | "
              f"{sum(x[1] for x in v)/len(v):.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
