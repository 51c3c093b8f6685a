#!/usr/bin/env python3
"""Masked prefill: where the time goes per block class, and the ceiling of skipping work inside
the partially visible blocks (docs/performance.md, "Issue 13, CPU", session 18).

    python bench/masked_ceiling.py --threads 1 --patterns window,random --rounds 7

bench/run.py's masked_prefill shapes and masks (B 1, H 8, S 2048, D 128, 64 x 64 blocks, fp32),
examples/masked_attention.py's kernel timed side by side with examples/flash_attention.py's
causal kernel, alternating, best of 3 calls per round (1 thread: the process's CPU time, the
figure a shared machine disturbs least; more: wall time, and the process's CPU time of the same
calls, all threads: with the CPU time of a 1-thread run it tells extra work from idle threads,
session 24). Per pattern:

* `tables`: the kernel with the mask's block tables (what the bench times), the gemms given each
  block's band of visible diagonals (`block_bands`: micro-tiles past it skipped);
* `whole blocks`: the same with every block's band full (`dense_blocks`' bands): the gemms compute
  whole blocks, as before the bands (session 18);
* `full only`: the same with only the fully visible blocks listed (the partial ones dropped:
  wrong results, timing only): the floor of any scheme that keeps the full blocks whole;
* `no blocks`: nothing listed: the per-query-block work alone (Q load, output);
* `no rects`: the tables without the blocks' rectangles (`Rects` whole, `band_exact` on the
  bands alone): the gemms' regions and the mask-tile blocks as before session 31 (h-rect), the
  rectangles' gain measured in the same process;
* `first full`: only the first fully visible block of each query block listed (timing only):
  with `full only`, the marginal cost of a full block and the fixed cost per query block with any
  block (its Q pack, and as many K and V packs: one per key block and launch), which a pattern
  with few blocks per query block pays on few blocks (session 20).

Then the masked pairs each pattern's gemms compute (`computed_pairs`: the cpu gemm runtime's
band rules counted in numpy, for AVX-512's 14 x 32 micro-tiles and AVX2's 6 x 16): Q K^T (c_band)
computes, in each kNR-wide column tile of a row panel, the rows with a visible diagonal among each
half of its columns (session 24: one vector of columns where a row needs one half); P V (a_band)
each row panel over the k its rows' bands reach; against the visible pairs (each gemm's ideal) and
whole blocks (session 23).

For the blocks that apply their mask tile without rectangles (1), `region_forms` counts what the
gemms would compute if the runtime's band rules also kept to a column range per row
(`region_pairs`): the band met with the block's bounding rectangle (`rect`, built in session 31:
T.gemm's rows / cols), with each 16-row group's visible columns (`rows16`) and with each row's
(`exact`), beside the band alone (`band`; session 30's estimate).
`--blocks 128x128,...` also times the masked kernel (with its tables) and the causal kernel at
those block shapes (a user's autotune choice; with more threads, their busy share too).

Then, per granularity g, the ceiling of a kernel that computes in each partial block only its
g x g sub-tiles with a visible element, at the partial blocks' measured cost per computed score
and with no cost for the finer grain: time = full only + a_g (whole blocks - full only), a_g the
fraction of the partial blocks' area such sub-tiles cover (g = 1: the visible fraction). The
ratio is per unmasked element against the causal kernel (bench/run.py's goal, >= 0.9x); it also
prints the ratio per required score (`required_scores`: the same for the window, causal and
block-sparse patterns).
"""
import argparse
import os
import sys
import time
from pathlib import Path


def panels(m, mr, split_below=4):
    """The row panels (first row, height) of an m-row block of mr-row micro-panels (gemm_impl.h
    panel_rows: a remainder under split_below rows shares the last full panel in two halves)."""
    full, rem = divmod(m, mr)
    if 0 < rem < split_below and full > 0 and mr + rem >= 2 * split_below - 1:
        h1 = (mr + rem + 1) // 2
        return [(p * mr, mr) for p in range(full - 1)] + [((full - 1) * mr, h1), ((full - 1) * mr + h1, mr + rem - h1)]
    return [(p * mr, mr) for p in range(full)] + ([(full * mr, rem)] if rem else [])


def computed_pairs(np, blocks, bands, bm, bn, mr, nr, split_below=4):
    """(Q K^T pairs, P V pairs) the kernel's gemms compute per head with the blocks' bands
    (`block_bands`): whole for a full block (class 2); in a partial one, per row panel and
    nr-wide column tile of the score the rows with a band diagonal among each half of the tile's
    columns (c_band, gemm_impl.h `band_halves`: a row that needs one half computes that half; a
    one-half stretch of fewer than split_below rows computes both), and per row panel of P V its
    rows times the k their bands reach (a_band). One unit per score element (Q K^T) or per element
    of P used (P V), as the visible pairs count."""
    vf = nr // 2  # one vector: every instruction set's strip is two vectors wide
    qk = pv = 0
    for qb, kb in zip(*np.nonzero(blocks)):
        if blocks[qb, kb] == 2:
            qk += bm * bn
            pv += bm * bn
            continue
        lo, hi = (int(x) for x in bands[qb, kb])
        for r0, h in panels(bm, mr, split_below):
            for j0 in range(0, bn, nr):
                w = min(nr, bn - j0)
                wl, wr = min(w, vf), w - vf

                def rows(c0, cw):  # the panel's rows with a band diagonal among columns c0 .. c0 + cw
                    return max(r0, c0 - hi + 1), min(r0 + h, c0 + cw - lo)
                a0, a1 = rows(j0, wl)
                b0, b1 = rows(j0 + vf, wr) if wr > 0 else (0, 0)
                if a0 >= a1 and b0 >= b1:
                    continue
                if b0 >= b1:
                    qk += wl * (a1 - a0)
                elif a0 >= a1:
                    qk += wr * (b1 - b0)
                else:  # left only a0 .. b0, both b0 .. a1, right only a1 .. b1
                    if b0 - a0 < split_below:
                        b0 = a0
                    if b1 - a1 < split_below:
                        a1 = b1
                    qk += wl * (b0 - a0) + w * (a1 - b0) + wr * (b1 - a1)
            pv += h * max(0, min(bn, r0 + h - 1 + hi) - max(0, r0 + lo))
    return qk, pv


def region_pairs(np, tile, lo, hi, cols, mr, nr, split_below=4):
    """(Q K^T pairs, P V pairs) of one partial block (`tile`: its bm x bn visibility) if the gemm
    runtime's band rules (computed_pairs) also kept to a column range per row: `cols(i)` = (c0, c1),
    the columns row i may need (an empty range: the row is skipped). What a band form with row and
    column limits would compute (not built: session 30's estimate for the document's blocks)."""
    bm, bn = tile.shape
    vf, qk, pv = nr // 2, 0, 0

    def need(i, c, cw):  # row i has a needed element among columns c .. c + cw
        c0, c1 = cols(i)
        return max(c0, c, i + lo) < min(c1, c + cw, i + hi)
    for r0, h in panels(bm, mr, split_below):
        ks = [(max(cols(i)[0], i + lo), min(cols(i)[1], i + hi)) for i in range(r0, r0 + h)]
        ks = [(a, b) for a, b in ks if a < b]
        if ks:  # P V: the panel over the k its rows reach
            pv += h * (max(b for _, b in ks) - min(a for a, _ in ks))
        for j0 in range(0, bn, nr):
            w = min(nr, bn - j0)
            left = [i for i in range(r0, r0 + h) if need(i, j0, min(w, vf))]
            right = [i for i in range(r0, r0 + h) if w > vf and need(i, j0 + vf, w - vf)]
            if not left and not right:
                continue
            if not right or not left:
                rows = left or right
                qk += (min(w, vf) if left else w - vf) * (rows[-1] - rows[0] + 1)
                continue
            a0, a1, b0, b1 = left[0], left[-1] + 1, right[0], right[-1] + 1
            if b0 - a0 < split_below:
                b0 = a0
            if b1 - a1 < split_below:
                a1 = b1
            qk += min(w, vf) * (b0 - a0) + w * (a1 - b0) + (w - vf) * (b1 - a1)
    return qk, pv


def region_forms(np, vis, blocks, bands, bm, bn, mr=14, nr=32):
    """Per computed-region form, the Q K^T and P V pairs of the blocks that apply their mask tile
    (1) per visible pair of theirs: `band` (today's: the block's band of diagonals), `rect` (the
    band met with the block's bounding rectangle: rows and columns with a visible element), `rows16`
    (the band met with each 16-row group's visible columns) and `exact` (each row's)."""
    nq, nk = blocks.shape
    pad = np.zeros((nq * bm, nk * bn), bool)
    pad[:vis.shape[0], :vis.shape[1]] = vis
    out = {f: [0, 0] for f in ("band", "rect", "rows16", "exact")}
    nvis = 0
    for qb, kb in zip(*np.nonzero(blocks == 1)):
        tile = pad[qb * bm:(qb + 1) * bm, kb * bn:(kb + 1) * bn]
        lo, hi = (int(x) for x in bands[qb, kb])
        nvis += int(tile.sum())

        def span(x):  # the first and one past the last visible column of x (bool rows)
            c = np.nonzero(x.any(axis=0))[0]
            return (int(c[0]), int(c[-1]) + 1) if len(c) else (0, 0)
        rows = np.nonzero(tile.any(axis=1))[0]
        whole = span(tile)
        g16 = [span(tile[g:g + 16]) for g in range(0, bm, 16)]
        each = [span(tile[i:i + 1]) for i in range(bm)]
        forms = {"band": lambda i: (0, bn), "rect": lambda i: whole if rows[0] <= i <= rows[-1] else (0, 0),
                 "rows16": lambda i: g16[i // 16], "exact": lambda i: each[i]}
        for f, cols in forms.items():
            a, b = region_pairs(np, tile, lo, hi, cols, mr, nr)
            out[f][0] += a
            out[f][1] += b
    return nvis, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--patterns", default="window,random")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--blocks", default="",
                    help="more block shapes, e.g. 128x64,128x128: the masked kernel with its tables and the "
                         "causal kernel at each, beside the 64 x 64 ones (the user's autotune choice, session 30)")
    args = ap.parse_args()
    os.environ["TW_NUM_THREADS"] = str(args.threads)  # read once, at import
    root = Path(__file__).resolve().parent
    sys.path[:0] = [str(root), str(root.parent / "examples")]
    import numpy as np
    import masked_attention as ma
    from flash_attention import flash_attention
    from run import MASK_PATTERNS, mask_pattern, required_scores

    B, H, S, D, bm, bn = 1, 8, args.seq, 128, 64, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float32) for _ in range(3))
    kv_len = np.full((B,), S, np.int32)
    kern = ma.attention_prefill(B, H, H, S, S, D, mask="bool", block_M=bm, block_N=bn)
    causal = flash_attention(B, H, S, D, True)
    clock = time.process_time if args.threads == 1 else time.perf_counter

    def tables(blocks, bands, rects):
        blocks = np.asarray(blocks, np.int32)
        return (blocks, *ma.block_lists(blocks), bands, rects)

    impls, info = {"causal": lambda: causal(q, k, v)}, {}
    shapes = [tuple(int(x) for x in b.split("x")) for b in args.blocks.split(",") if b]
    for sm, sn in shapes:  # the causal kernel at the other shapes (the reference stays 64 x 64)
        impls[("causal", f"{sm}/{sn}")] = lambda c=flash_attention(B, H, S, D, True, sm, sn): c(q, k, v)
    for p in args.patterns.split(","):
        if p not in MASK_PATTERNS:
            sys.exit(f"unknown pattern {p!r}: one of {', '.join(MASK_PATTERNS)}")
        vis = mask_pattern(np, rng, p, S, bm, bn)
        t = ma.prefill_blocks(vis, bm, bn)
        blocks, bands, rects = (np.asarray(t[i]) for i in (0, 3, 4))
        # every diagonal of the whole block: the gemms compute whole blocks
        full, whole = ma.dense_blocks(S, S, bm, bn)[3:]
        only_full = np.where(blocks == 2, 2, 0)
        first_full = np.where(np.cumsum(only_full == 2, axis=1) == 1, only_full, 0)
        partial = np.where(blocks == 3, 1, blocks)  # every band full: band_exact's blocks read their mask
        banded = ma.band_exact(vis, ma.block_mask(vis, bm, bn), bands, whole, bm, bn)  # no rectangles
        variants = {"tables": tables(blocks, bands, rects), "whole blocks": tables(partial, full, whole),
                    "full only": tables(only_full, bands, rects), "first full": tables(first_full, bands, rects),
                    "no blocks": tables(np.zeros_like(blocks), bands, rects),
                    "no rects": tables(banded, bands, whole)}
        for name, t in variants.items():
            impls[(p, name)] = lambda vis=vis, t=t: kern(q, k, v, vis, *t, kv_len)
        for sm, sn in shapes:  # the tables at another block shape (the same mask)
            ks = ma.attention_prefill(B, H, H, S, S, D, mask="bool", block_M=sm, block_N=sn)
            impls[(p, f"tables {sm}/{sn}")] = lambda vis=vis, ks=ks, t=ma.prefill_blocks(vis, sm, sn): \
                ks(q, k, v, vis, *t, kv_len)
        ref = ma.reference(q[:, :1], k[:, :1], v[:, :1], vis)
        err = float(np.abs(impls[(p, "tables")]()[:, :1] - ref).max())
        # the partial blocks' area covered by g x g sub-tiles with a visible element
        nq, nk = blocks.shape
        pad = np.zeros((nq * bm, nk * bn), bool)
        pad[:S, :S] = vis
        part = np.kron((blocks == 1) | (blocks == 3), np.ones((bm, bn), bool))
        cover = {}
        for g in (32, 16, 8, 1):
            sub = pad.reshape(nq * bm // g, g, nk * bn // g, g).any(axis=(1, 3))
            cover[g] = float((np.kron(sub, np.ones((g, g), bool)) & part).sum() / max(part.sum(), 1))
        waste = {tiles: computed_pairs(np, blocks, bands, bm, bn, *tiles) for tiles in ((14, 32), (6, 16))}
        info[p] = dict(vis=vis, blocks=blocks, err=err, cover=cover, n_first=int((first_full == 2).sum()), waste=waste,
                       forms=region_forms(np, vis, banded, bands, bm, bn), n_rect=int(((banded == 1) & (blocks == 3)).sum()))
    for fn in impls.values():
        fn()
    res = {n: [] for n in impls}
    cpu = {n: [] for n in impls}  # more threads: the process's CPU time of the best call, all threads
    for _ in range(args.rounds):
        for n, fn in impls.items():
            best = float("inf")
            for _ in range(3):
                t0, c0 = clock(), time.process_time()
                fn()
                t1, c1 = clock(), time.process_time()
                if t1 - t0 < best:
                    best = t1 - t0
                    busy = c1 - c0
            res[n].append(best)
            cpu[n].append(busy)
    med = {n: float(np.median(v)) for n, v in res.items()}
    lo = {n: min(v) for n, v in res.items()}
    pairs_c = S * (S + 1) / 2
    print(f"masked prefill B {B} H {H} S {S} D {D}, 64 x 64 blocks, fp32, {args.threads} thread(s), "
          f"{'CPU' if args.threads == 1 else 'wall'} time, {args.rounds} rounds of best-of-3; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"causal kernel: min {lo['causal'] * 1e3:.2f} ms, median {med['causal'] * 1e3:.2f} ms")
    for sm, sn in shapes:
        c = ("causal", f"{sm}/{sn}")
        print(f"causal kernel {sm}/{sn}: min {lo[c] * 1e3:.2f} ms, median {med[c] * 1e3:.2f} ms")
    if args.threads > 1:  # CPU time (all threads) against threads x wall: the share the threads were busy
        print("CPU time per call, all threads (median) and busy share = CPU / (threads x wall), per round median:")
        for n in impls:
            share = [c / (args.threads * w) for c, w in zip(cpu[n], res[n])]
            print(f"  {str(n):28s} {float(np.median(cpu[n])) * 1e3:8.2f} ms  busy {float(np.median(share)):.3f}")
    for p, d in info.items():
        vis, blocks = d["vis"], d["blocks"]
        n0, n1, n2 = (int(np.isin(blocks, c).sum()) for c in ((0,), (1, 3), (2,)))  # 3: partial, band_exact

        def ratio(t):
            return (vis.sum() / t) / (pairs_c / med["causal"])
        print(f"\n{p}: visible {vis.mean():.4f}, blocks 0 / 1 / 2 per head {n0} / {n1} / {n2}, "
              f"error vs float64 (head 0) {d['err']:.1e}")
        for name in ("tables", "whole blocks", "full only", "first full", "no blocks"):
            print(f"  {name:12s} min {lo[(p, name)] * 1e3:8.2f} ms  median {med[(p, name)] * 1e3:8.2f} ms")
        for sm, sn in shapes:  # per unmasked element against the causal kernel at 64 x 64 and at this shape
            n, c = (p, f"tables {sm}/{sn}"), ("causal", f"{sm}/{sn}")
            r64 = [(vis.sum() / a) / (pairs_c / b) for a, b in zip(res[n], res["causal"])]
            rsh = [(vis.sum() / a) / (pairs_c / b) for a, b in zip(res[n], res[c])]
            print(f"  tables {sm}/{sn}: min {lo[n] * 1e3:8.2f} ms  median {med[n] * 1e3:8.2f} ms; per unmasked "
                  f"element, per round median (min): vs causal 64/64 {float(np.median(r64)):.3f} ({min(r64):.3f}), "
                  f"vs causal {sm}/{sn} {float(np.median(rsh)):.3f} ({min(rsh):.3f})")
        t_b, t_m, t_f, t_0 = (med[(p, n)] for n in ("tables", "whole blocks", "full only", "no blocks"))
        blk = B * H
        if n1:
            print(f"  per partial block {(t_b - t_f) / (n1 * blk) * 1e6:.1f} us with bands, "
                  f"{(t_m - t_f) / (n1 * blk) * 1e6:.1f} us whole; per query block with no "
                  f"block {t_0 / (blocks.shape[0] * blk) * 1e6:.1f} us")
        if n2:
            print(f"  per full block, with its share of the packs {(t_f - t_0) / (n2 * blk) * 1e6:.1f} us")
        n_1 = d["n_first"]
        if n2 > n_1:  # two points: 1 and (on average) n2 / n_1 full blocks per query block
            t_1 = med[(p, "first full")]
            marg = (t_f - t_1) / ((n2 - n_1) * blk)
            fixed = t_1 - n_1 * blk * marg
            print(f"  per full block, marginal {marg * 1e6:.1f} us; fixed per query block with a block "
                  f"(its Q pack, a key block's K and V packs, the rest) {fixed / (n_1 * blk) * 1e6:.1f} us, "
                  f"{fixed / t_b:.1%} of the tables' time")
        rb = [(vis.sum() / a) / (pairs_c / c) for a, c in zip(res[(p, "tables")], res["causal"])]
        rw = [(vis.sum() / a) / (pairs_c / c) for a, c in zip(res[(p, "whole blocks")], res["causal"])]
        print(f"  measured: {ratio(t_b):.3f}x the causal kernel per unmasked element with bands, "
              f"{ratio(t_m):.3f}x whole blocks (medians); per round, bands: min {min(rb):.3f} median "
              f"{float(np.median(rb)):.3f}, whole: min {min(rw):.3f} median {float(np.median(rw)):.3f}; "
              f"bands / whole time: median {float(np.median([a / b for a, b in zip(res[(p, 'tables')], res[(p, 'whole blocks')])])):.3f}")
        rr = [a / b for a, b in zip(res[(p, "tables")], res[(p, "no rects")])]
        rt = [(vis.sum() / a) / (pairs_c / c) for a, c in zip(res[(p, "no rects")], res["causal"])]
        print(f"  no rects (the bands alone, as before session 31; {d['n_rect']} blocks a head exact with their "
              f"rectangle): min {lo[(p, 'no rects')] * 1e3:.2f} ms median {med[(p, 'no rects')] * 1e3:.2f} ms; "
              f"tables / no rects per round median {float(np.median(rr)):.3f} (min {min(rr):.3f}); per unmasked "
              f"element median {float(np.median(rt)):.3f}x (tables {float(np.median(rb)):.3f}x)")
        req = required_scores(np, vis, ma.block_bands(vis, bm, bn), bm, bn)  # printed beside bench/run.py's goal
        print(f"  per required score: {ratio(t_b) * req / vis.sum():.3f}x "
              f"(required / visible {req / vis.sum():.3f})")
        nvis, nblk = int(vis.sum()), int((blocks != 0).sum()) * bm * bn
        print(f"  masked share of the pairs computed: whole blocks {1 - nvis / nblk:.3f}", end="")
        for (mr, nr), (qk, pv) in d["waste"].items():
            print(f"; {mr} x {nr} tiles: Q K^T {1 - nvis / qk:.3f}, P V {1 - nvis / pv:.3f}, both "
                  f"{1 - 2 * nvis / (qk + pv):.3f}", end="")
        print()
        nv, forms = d["forms"]
        if nv:
            print(f"  the mask-tile blocks (1), per visible pair of theirs ({nv} a head), 14 x 32 tiles, Q K^T / P V: "
                  + ", ".join(f"{f} {qk / nv:.3f} / {pv / nv:.3f}" for f, (qk, pv) in forms.items()))
        for g, a in d["cover"].items():
            t = t_f + a * (t_m - t_f)
            print(f"  ceiling, {g} x {g} sub-tiles skipped: {a:.3f} of the partial area computed -> "
                  f"{ratio(t):.3f}x")


if __name__ == "__main__":
    main()
