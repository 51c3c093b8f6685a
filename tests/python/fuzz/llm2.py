"""The seventeenth stream (session 24): more LLM-kernel patterns, as programs of kind ``llm2``.

Patterns neither the grammar nor the sixteenth stream (fuzz/llm.py) generates. Each program is one
of six forms (``d["llm2"]``), with its float64 reference and tolerances here:

* ``combine`` flash-decoding's split-KV combine: per row, ``S`` partial outputs ``Op[s, rows, :]``
  (an N-D window with a unit dim) and their log-sum-exps ``Lse`` (S, M) (a split with no keys has
  ``lse = -inf`` and a partial output of 0); the max over the splits by ``T.reduce_max`` of a (S, bm)
  tile over dim 0 (``maxred``) or by a first pass over the splits (``T.max``); a serial / pipelined
  loop over the splits reading each split's lse row, its weight ``exp(lse - max)`` (0 for ``-inf``
  by a ``T.where``), the running sum of the weights and of the weighted partials; the output divided
  by the weights' sum and the combined ``lse = log(sum) + max`` (rows whose splits are all empty give
  0 and ``-inf``). Log-sum-exps small (multiples of 1/4 in [-8, 8]) or large (|lse| 60-100: exp
  without the max overflows float32); 0%, 30%, 60% or all splits empty.
* ``gqa``     grouped-query attention's head mapping inside a kernel: program (query block, head h,
  batch b) reads ``Q[b, rows, h, :]`` of a BSHD tensor and the keys / values of kv head ``h // G``
  (MQA: one kv head) from ``K[b, keys, h // G, :]`` (BSHD) or from a paged cache
  ``Kc[Table[b, k], :, h // G, :]`` ((num_blocks, block_size, kv_heads, D): a page per step, the
  page read by a scalar read), S = Q K^T, P = S / 8 (keys past N zeroed by a ``T.where``) cast to the
  input dtype, O += P V over a serial / pipelined key loop, O stored into ``O[b, rows, h, :]``.
* ``norm``    layer_norm (two passes: the mean, then the variance of ``x - mean``; optional bias)
  and rms_norm, float16 / bfloat16 / float32 in, float32 statistics (``T.rsqrt(var / N + eps)``),
  a weight row broadcast along the rows (float32 or the input dtype), optional Mean / Rstd outputs.
* ``topk``    top-k gating: k rounds of ``T.reduce_max``, the lowest index holding the max
  (``T.where(x == best, j, N)`` then ``T.reduce_min``: ties go to the lowest index, as np.argmax),
  the picked element hidden by ``-inf``; ids stored into column r of a (bm, k) tile by a column map
  (``ids[i, r] = idx[i]``) or a whole-tile ``T.where(c == r, ...)``; then a softmax over the k
  selected values (scaled), renormalised to sum 1. Inputs with many ties (integers in [-2, 2]).
* ``split``   flash-decoding's first kernel: program (row block, split sp) runs the online softmax
  (running max from ``-inf``, guarded rescales) over its KB key blocks of a (M, N) score tensor and a
  value per key and row, storing the partial output ``O[sp, rows]`` and ``L[sp, rows] = log(l) + m``
  (``-inf`` for a split with no keys: the split past N, drawn a third of the time). Drawn from its
  own stream (``extension15-split-<seed // GROUP>``: 20% of the groups), so the other forms' programs
  are those drawn before it.
* ``cumsum``  an inclusive scan along the rows (a ``T.serial(1, bn)`` loop of column maps
  ``x[i, j] = x[i, j] + x[i, j - 1]``: on Ascend an element loop) or down the columns (row maps), the
  blocks walked by a serial / pipelined loop carrying each block's ``T.reduce_sum`` or (``carry``
  ``last``, 40% of the groups, from ``extension15-carry-<seed // GROUP>``) its last scanned column /
  row (``cy[i] = x[i, bn - 1]``) in a tile allocated before the loop, added into the next block's
  first column / row.

Every loop form draws ``T.Pipelined`` with ``num_stages`` 2 or 3 half the time, its tiles allocated
before the loop (issue 13's multi-buffering). Sizes: tails in every blocked dimension, 1-element
dimensions, symbolic dimensions of 0 (an empty grid or loop).

Structure from ``extension15-<seed // GROUP>``, shapes and values from ``extension15-shape-<seed>``;
grammar.generate gives LLM2_P of the copy groups the sixteenth stream did not take this kind
(``extension15-pick-<seed // GROUP>``; every other program is unchanged), and
``python -m fuzz --stream llm2`` runs only these.
"""
import random

import numpy as np

from .llm import FLOATS, NINF, STEP, U32, UNIT, _conv, _lit, _np_dtype, dimtext, kernel_text, shape

LLM2_P = 0.03   # the fraction of the (not LLM) copy program groups of this kind in grammar.generate
FORMS = ("combine", "gqa", "norm", "topk", "cumsum", "split")
GQA_SCALE = 0.125


def _dim(r, blk, hi=70):
    """1, one less / more than the block, several blocks with a tail, half a block, or up to `hi`."""
    c = r.random()
    if c < 0.12:
        return 1
    if c < 0.27:
        return max(1, blk - 1)
    if c < 0.35:
        return blk
    if c < 0.5:
        return blk + 1
    if c < 0.65:
        return 2 * blk + r.choice((1, 3, blk // 2 or 1))
    if c < 0.75:
        return max(1, blk // 2)
    return r.randint(1, hi)


def generate(seed):
    """The program of `seed` of this stream."""
    from .grammar import GROUP
    s = random.Random(f"extension15-{seed // GROUP}")
    v = random.Random(f"extension15-shape-{seed}")
    f = s.choice(FORMS[:-1])
    if random.Random(f"extension15-split-{seed // GROUP}").random() < 0.2:
        f = "split"   # (drawn after the first five forms: their programs stay)
    d = {"seed": seed, "kind": "llm2", "llm2": f, "sym": False, "loop": "grid"}
    d["dt_in"] = s.choice(FLOATS)
    d["dt_out"] = s.choice(FLOATS)
    d["dt_tile"] = "float32"
    if f in ("combine", "gqa", "cumsum", "split"):
        d["loop"] = s.choice(("serial", "pipelined"))
        d["stages"] = s.choice((2, 3))
    if f == "combine":
        d["sym"] = s.random() < 0.5
        d["bm"] = s.choice((1, 2, 4, 8, 16))
        d["maxred"] = s.random() < 0.5          # the max by a reduction over dim 0 (else a first pass)
        d["dt_tile"] = s.choice(("float32", d["dt_in"]))
        d["D"] = s.choice((1, 8, 16, 20, 32, 40, 64))
        d["S"] = v.choice((1, 2, 3, 4, 5, 8, 9))
        d["M"] = 0 if d["sym"] and v.random() < 0.05 else _dim(v, d["bm"])
        d["pempty"] = v.choice((0.0, 0.3, 0.6, 1.0))
        d["big"] = v.random() < 0.3
    elif f == "gqa":
        d["layout"] = s.choice(("bshd", "paged"))
        d["KVH"] = s.choice((1, 1, 2))
        d["G"] = s.choice((1, 2, 3, 4))
        d["D"] = s.choice((16, 32, 64))
        d["bm"] = s.choice((16, 32))
        d["bn"] = s.choice((16, 32, 64))
        d["B"] = v.choice((1, 2))
        d["M"] = _dim(v, d["bm"])
        d["N"] = _dim(v, d["bn"], hi=140)
        if d["layout"] == "paged":
            d["TP"] = -(-d["N"] // d["bn"])     # pages per sequence
            d["NB"] = v.randint(1, 2 * d["TP"] + 1)
    elif f == "norm":
        d["norm"] = s.choice(("layer", "rms"))
        d["sym"] = s.random() < 0.4
        d["bm"] = s.choice((1, 2, 4, 8, 16))
        d["wdt"] = s.choice(("float32", d["dt_in"]))
        d["bias"] = d["norm"] == "layer" and s.random() < 0.5
        d["eps"] = s.choice((1e-5, 1e-6))
        d["div"] = s.choice(("div", "mul"))
        d["stats"] = s.random() < 0.4
        d["M"] = 0 if d["sym"] and v.random() < 0.05 else _dim(v, d["bm"])
        d["N"] = v.choice((1, 2, 7, 16, 31, 33, 64, 100, 127, 150))
    elif f == "topk":
        d["sym"] = s.random() < 0.4
        d["bm"] = s.choice((1, 2, 4, 8, 16))
        d["K"] = s.choice((1, 2, 3, 4))
        d["store"] = s.choice(("col", "where"))
        d["scale"] = s.choice((1.0, 0.5))
        d["ties"] = s.random() < 0.7
        d["M"] = 0 if d["sym"] and v.random() < 0.05 else _dim(v, d["bm"])
        d["N"] = max(d["K"], v.choice((1, 2, 3, 5, 8, 16, 17, 33, 64, 70)))
    elif f == "split":
        w = random.Random(f"extension15-split-shape-{seed}")
        d["sym"] = s.random() < 0.5
        d["bm"] = s.choice((1, 2, 4, 8, 16))
        d["bn"] = s.choice((4, 8, 16, 32))
        d["KB"] = s.choice((1, 2, 3))          # key blocks per split
        d["M"] = _dim(w, d["bm"])
        d["N"] = _dim(w, d["bn"] * d["KB"], hi=140)
        d["NS"] = -(-d["N"] // (d["bn"] * d["KB"])) + w.choice((0, 0, 1))   # (+1: a split with no keys)
    else:   # cumsum
        d["axis"] = s.choice((0, 1))   # 1: along each row (over columns); 0: down each column
        d["sym"] = s.random() < 0.4
        d["bm"] = s.choice((1, 2, 4, 8, 16, 32))
        d["bn"] = s.choice((1, 2, 4, 8, 16, 32))
        # the carry: each block's T.reduce_sum, or (40%, its own stream) the block's last column / row
        # copied into the carry tile (cy[i] = x[i, bn - 1]: fuzz12 F1 on ascend910b with T.Pipelined)
        d["carry"] = "last" if random.Random(f"extension15-carry-{seed // GROUP}").random() < 0.4 else "sum"
        z = d["sym"] and v.random() < 0.05
        d["M"] = _dim(v, d["bm"])
        d["N"] = 0 if z else _dim(v, d["bn"], hi=150)
    return d


# ---------------------------------------------------------------------------------------------
# Tensors and source


def tensors(d):
    f = d["llm2"]
    if f == "combine":
        return [("Op", ("S", "M", "D"), d["dt_in"], False), ("Lse", ("S", "M"), "float32", False),
                ("O", ("M", "D"), d["dt_out"], True), ("L", ("M",), "float32", True)]
    if f == "gqa":
        H = d["KVH"] * d["G"]
        q = ("Q", ("B", "M", H, "D"), d["dt_in"], False)
        o = ("O", ("B", "M", H, "D"), d["dt_out"], True)
        if d["layout"] == "bshd":
            return [q, ("K", ("B", "N", "KVH", "D"), d["dt_in"], False),
                    ("V", ("B", "N", "KVH", "D"), d["dt_in"], False), o]
        return [q, ("Kc", ("NB", "bn", "KVH", "D"), d["dt_in"], False),
                ("Vc", ("NB", "bn", "KVH", "D"), d["dt_in"], False), ("Table", ("B", "TP"), "int32", False), o]
    if f == "norm":
        ts = [("X", ("M", "N"), d["dt_in"], False), ("W", ("N",), d["wdt"], False)]
        if d["bias"]:
            ts.append(("Bb", ("N",), d["wdt"], False))
        ts.append(("Y", ("M", "N"), d["dt_out"], True))
        if d["stats"]:
            ts += [("Mean", ("M",), "float32", True), ("Rstd", ("M",), "float32", True)]
        return ts
    if f == "topk":
        return [("X", ("M", "N"), d["dt_in"], False), ("I", ("M", "K"), "int32", True),
                ("Wt", ("M", "K"), d["dt_out"], True)]
    if f == "split":
        return [("S", ("M", "N"), d["dt_in"], False), ("V", ("M", "N"), d["dt_in"], False),
                ("O", ("NS", "M"), d["dt_out"], True), ("L", ("NS", "M"), "float32", True)]
    return [("X", ("M", "N"), d["dt_in"], False), ("Y", ("M", "N"), d["dt_out"], True)]


def source(d):
    body = {"combine": _combine_body, "gqa": _gqa_body, "norm": _norm_body, "topk": _topk_body,
            "cumsum": _cumsum_body, "split": _split_body}[d["llm2"]](d)
    return kernel_text(d, tensors(d), body)


def _loop(d, var, extent):
    if d["loop"] == "pipelined":
        return f"for {var} in T.Pipelined({extent}, num_stages={d['stages']}):"
    return f"for {var} in T.serial({extent}):"


def _alloc(name, shape, dt):
    shp = f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(str(x) for x in shape)})"
    return f"{name} = T.alloc_fragment({shp}, {dt!r})"


def _combine_body(d):
    bm, S, D, M = d["bm"], d["S"], d["D"], dimtext(d, "M")
    lrow = f"Lse[s, by * {bm}:(by + 1) * {bm}]"
    b = [_alloc("lv", (bm,), "float32"), _alloc("wv", (bm,), "float32"), _alloc("mx", (bm,), "float32"),
         _alloc("tot", (bm,), "float32"), _alloc("lo", (bm,), "float32"), _alloc("o", (bm, D), d["dt_tile"]),
         _alloc("t", (bm, D), "float32"), _alloc("acc", (bm, D), "float32")]
    if d["maxred"]:   # the max of a (S, bm) tile over dim 0
        b += [_alloc("lm", (S, bm), "float32"), f"T.copy(Lse[0, by * {bm}], lm)", "T.reduce_max(lm, mx, dim=0)"]
    else:            # a first pass over the splits
        b += [f"T.fill(mx, {NINF})", _loop(d, "s", S), f"    T.copy({lrow}, lv)",
              f"    for i in T.Parallel({bm}):", "        mx[i] = T.max(mx[i], lv[i])"]
    b += ["T.fill(tot, 0)", "T.fill(acc, 0)", _loop(d, "s", S), f"    T.copy({lrow}, lv)",
          f"    T.copy(Op[s, by * {bm}:(by + 1) * {bm}, :], o)",
          f"    for i in T.Parallel({bm}):",
          f"        wv[i] = T.where(lv[i] == {NINF}, 0.0, T.exp(lv[i] - mx[i]))",
          f"    for i in T.Parallel({bm}):", "        tot[i] = tot[i] + wv[i]",
          f"    for i, j in T.Parallel({bm}, {D}):", "        t[i, j] = o[i, j] * wv[i]",
          f"    for i, j in T.Parallel({bm}, {D}):", "        acc[i, j] = acc[i, j] + t[i, j]",
          f"for i, j in T.Parallel({bm}, {D}):",
          "    acc[i, j] = T.where(tot[i] == 0, 0.0, acc[i, j] / tot[i])",
          f"for i in T.Parallel({bm}):", "    lo[i] = T.log(tot[i])",
          f"for i in T.Parallel({bm}):", f"    lo[i] = T.where(tot[i] == 0, {NINF}, lo[i] + mx[i])",
          f"T.copy(acc, O[by * {bm}, 0])", f"T.copy(lo, L[by * {bm}])"]
    return [f"with T.Kernel(T.ceildiv({M}, {bm})) as by:"] + ["    " + x for x in b]


def _gqa_body(d):
    bm, bn, D, G, dt = d["bm"], d["bn"], d["D"], d["G"], d["dt_in"]
    paged = d["layout"] == "paged"
    H = d["KVH"] * G
    kvh = "h" if G == 1 else f"h // {G}"
    b = [f"q = T.alloc_shared(({bm}, {D}), {dt!r})", f"kt = T.alloc_shared(({bn}, {D}), {dt!r})",
         f"vt = T.alloc_shared(({bn}, {D}), {dt!r})", _alloc("s", (bm, bn), "float32"), _alloc("p", (bm, bn), dt),
         _alloc("acc", (bm, D), "float32"),
         f"T.copy(Q[b, bx * {bm}:(bx + 1) * {bm}, h, :], q)", "T.fill(acc, 0)",
         _loop(d, "k", f"T.ceildiv({d['N']}, {bn})")]
    if paged:
        b += ["    pg = Table[b, k]", f"    T.copy(Kc[pg, :, {kvh}, :], kt)"]
    else:
        b.append(f"    T.copy(K[b, k * {bn}:(k + 1) * {bn}, {kvh}, :], kt)")
    b += ["    T.gemm(q, kt, s, transpose_B=True, clear_accum=True)",
          f"    for i, j in T.Parallel({bm}, {bn}):",
          f"        p[i, j] = T.where(k * {bn} + j < {d['N']}, s[i, j] * {_lit(GQA_SCALE)}, 0.0)",
          f"    T.copy(Vc[pg, :, {kvh}, :], vt)" if paged else
          f"    T.copy(V[b, k * {bn}:(k + 1) * {bn}, {kvh}, :], vt)",
          "    T.gemm(p, vt, acc)", f"T.copy(acc, O[b, bx * {bm}:(bx + 1) * {bm}, h, :])"]
    return [f"with T.Kernel(T.ceildiv({d['M']}, {bm}), {H}, {d['B']}) as (bx, h, b):"] + ["    " + x for x in b]


def _over_n(d, x):
    n = d["N"]
    return f"{x} / {n}" if d["div"] == "div" else f"{x} * {_lit(1.0 / n)}"


def _norm_body(d):
    bm, N, M = d["bm"], d["N"], dimtext(d, "M")
    b = [_alloc("x", (bm, N), "float32"), _alloc("t", (bm, N), "float32"), _alloc("w", (N,), "float32"),
         _alloc("mu", (bm,), "float32"), _alloc("r", (bm,), "float32")]
    if d["bias"]:
        b.append(_alloc("bb", (N,), "float32"))
    b += [f"T.copy(X[by * {bm}, 0], x)", "T.copy(W[0], w)"] + (["T.copy(Bb[0], bb)"] if d["bias"] else [])
    if d["norm"] == "layer":
        b += ["T.reduce_sum(x, mu, dim=1)", f"for i in T.Parallel({bm}):", f"    mu[i] = {_over_n(d, 'mu[i]')}",
              f"for i, j in T.Parallel({bm}, {N}):", "    x[i, j] = x[i, j] - mu[i]",
              f"for i, j in T.Parallel({bm}, {N}):", "    t[i, j] = x[i, j] * x[i, j]"]
    else:
        b += [f"for i, j in T.Parallel({bm}, {N}):", "    t[i, j] = x[i, j] * x[i, j]"]
    b += ["T.reduce_sum(t, r, dim=1)", f"for i in T.Parallel({bm}):",
          f"    r[i] = T.rsqrt({_over_n(d, 'r[i]')} + {_lit(d['eps'])})",
          f"for i, j in T.Parallel({bm}, {N}):",
          "    x[i, j] = x[i, j] * r[i] * w[j]" + (" + bb[j]" if d["bias"] else ""),
          f"T.copy(x, Y[by * {bm}, 0])"]
    if d["stats"]:
        if d["norm"] == "rms":
            b += [f"for i in T.Parallel({bm}):", "    mu[i] = 0.0"]
        b += [f"T.copy(mu, Mean[by * {bm}])", f"T.copy(r, Rstd[by * {bm}])"]
    return [f"with T.Kernel(T.ceildiv({M}, {bm})) as by:"] + ["    " + x for x in b]


def _topk_body(d):
    bm, N, K, M = d["bm"], d["N"], d["K"], dimtext(d, "M")
    b = [_alloc("x", (bm, N), "float32"), _alloc("pk", (bm, N), "int32"), _alloc("best", (bm,), "float32"),
         _alloc("idx", (bm,), "int32"), _alloc("m0", (bm,), "float32"), _alloc("ids", (bm, K), "int32"),
         _alloc("vals", (bm, K), "float32"), _alloc("tot", (bm,), "float32"), _alloc("wt", (bm, K), d["dt_out"])]
    b.append(f"T.copy(X[by * {bm}, 0], x)")
    if d["store"] == "where":
        b += ["T.fill(ids, 0)", "T.fill(vals, 0)"]
    for r in range(K):
        b += ["T.reduce_max(x, best, dim=1)", f"for i, j in T.Parallel({bm}, {N}):",
              f"    pk[i, j] = T.where(x[i, j] == best[i], j, {N})", "T.reduce_min(pk, idx, dim=1)"]
        if d["store"] == "col":
            b += [f"for i in T.Parallel({bm}):", f"    ids[i, {r}] = idx[i]", f"    vals[i, {r}] = best[i]"]
        else:
            b += [f"for i, c in T.Parallel({bm}, {K}):", f"    ids[i, c] = T.where(c == {r}, idx[i], ids[i, c])",
                  f"    vals[i, c] = T.where(c == {r}, best[i], vals[i, c])"]
        if r == 0:
            b += ["T.copy(best, m0)"]
        if r < K - 1:
            b += [f"for i, j in T.Parallel({bm}, {N}):", f"    x[i, j] = T.where(j == idx[i], {NINF}, x[i, j])"]
    sc = f" * {_lit(d['scale'])}" if d["scale"] != 1.0 else ""
    b += [f"for i, c in T.Parallel({bm}, {K}):", f"    vals[i, c] = T.exp((vals[i, c] - m0[i]){sc})",
          "T.reduce_sum(vals, tot, dim=1)", f"for i, c in T.Parallel({bm}, {K}):", "    wt[i, c] = vals[i, c] / tot[i]",
          f"T.copy(ids, I[by * {bm}, 0])", f"T.copy(wt, Wt[by * {bm}, 0])"]
    return [f"with T.Kernel(T.ceildiv({M}, {bm})) as by:"] + ["    " + x for x in b]


def _split_body(d):
    """Flash-decoding's first kernel on a row of values: program (row block, split sp) runs the online
    softmax over its KB key blocks and stores the partial output and its log-sum-exp (-inf: no keys)."""
    bm, bn, KB, M, N = d["bm"], d["bn"], d["KB"], dimtext(d, "M"), dimtext(d, "N")
    col = f"(sp * {KB} + k) * {bn}"
    b = [_alloc("s", (bm, bn), "float32"), _alloc("v", (bm, bn), "float32")]
    b += [_alloc(n, (bm,), "float32") for n in ("m", "mp", "sc", "l", "rs", "acc", "ws", "lo")]
    b += [f"T.fill(m, {NINF})", "T.fill(l, 0)", "T.fill(acc, 0)", _loop(d, "k", KB),
          f"    T.copy(S[by * {bm}, {col}], s)", f"    T.copy(V[by * {bm}, {col}], v)",
          f"    for i, j in T.Parallel({bm}, {bn}):", f"        s[i, j] = T.where({col} + j < {N}, s[i, j], {NINF})",
          "    T.copy(m, mp)", "    T.reduce_max(s, m, dim=1, clear=False)",
          f"    for i in T.Parallel({bm}):", f"        sc[i] = T.where(mp[i] == {NINF}, 0.0, T.exp(mp[i] - m[i]))",
          f"    for i, j in T.Parallel({bm}, {bn}):", f"        s[i, j] = T.where(s[i, j] == {NINF}, 0.0, T.exp(s[i, j] - m[i]))",
          "    T.reduce_sum(s, rs, dim=1)", f"    for i in T.Parallel({bm}):", "        l[i] = l[i] * sc[i] + rs[i]",
          f"    for i, j in T.Parallel({bm}, {bn}):", "        s[i, j] = s[i, j] * v[i, j]",
          "    T.reduce_sum(s, ws, dim=1)", f"    for i in T.Parallel({bm}):", "        acc[i] = acc[i] * sc[i] + ws[i]",
          f"for i in T.Parallel({bm}):", "    acc[i] = T.where(l[i] == 0, 0.0, acc[i] / l[i])",
          f"for i in T.Parallel({bm}):", "    lo[i] = T.log(l[i])",
          f"for i in T.Parallel({bm}):", f"    lo[i] = T.where(l[i] == 0, {NINF}, lo[i] + m[i])",
          f"T.copy(acc, O[sp, by * {bm}:(by + 1) * {bm}])", f"T.copy(lo, L[sp, by * {bm}:(by + 1) * {bm}])"]
    return [f"with T.Kernel(T.ceildiv({M}, {bm}), {d['NS']}) as (by, sp):"] + ["    " + x for x in b]


def _cumsum_body(d):
    """The carry into the next block: the block's sum along the scanned dim (T.reduce_sum before the
    scan) or its scanned last column / row (``carry == "last"``)."""
    bm, bn, M, N = d["bm"], d["bn"], dimtext(d, "M"), dimtext(d, "N")
    last = True if d.get("carry") == "last" else None
    b = [_alloc("x", (bm, bn), "float32")]
    if d["axis"] == 1:
        b += [_alloc("cy", (bm,), "float32"), _alloc("rs", (bm,), "float32"), "T.fill(cy, 0)",
              _loop(d, "k", f"T.ceildiv({N}, {bn})"),
              f"    T.copy(X[by * {bm}, k * {bn}], x)"] + (["    T.reduce_sum(x, rs, dim=1)"] if last is None else []) + [
              f"    for i in T.Parallel({bm}):", "        x[i, 0] = x[i, 0] + cy[i]"]
        if bn > 1:   # (a constant loop of no iterations is an error at its line)
            b += [f"    for j in T.serial(1, {bn}):",
                  f"        for i in T.Parallel({bm}):", "            x[i, j] = x[i, j] + x[i, j - 1]"]
        b += [f"    for i in T.Parallel({bm}):", "        cy[i] = cy[i] + rs[i]" if last is None else f"        cy[i] = x[i, {bn - 1}]",
              f"    T.copy(x, Y[by * {bm}, k * {bn}])"]
        return [f"with T.Kernel(T.ceildiv({M}, {bm})) as by:"] + ["    " + x for x in b]
    b += [_alloc("cy", (bn,), "float32"), _alloc("rs", (bn,), "float32"), "T.fill(cy, 0)",
          _loop(d, "k", f"T.ceildiv({M}, {bm})"),
          f"    T.copy(X[k * {bm}, bx * {bn}], x)"] + (["    T.reduce_sum(x, rs, dim=0)"] if last is None else []) + [
          f"    for j in T.Parallel({bn}):", "        x[0, j] = x[0, j] + cy[j]"]
    if bm > 1:
        b += [f"    for i in T.serial(1, {bm}):",
              f"        for j in T.Parallel({bn}):", "            x[i, j] = x[i, j] + x[i - 1, j]"]
    b += [f"    for j in T.Parallel({bn}):", "        cy[j] = cy[j] + rs[j]" if last is None else f"        cy[j] = x[{bm - 1}, j]",
          f"    T.copy(x, Y[k * {bm}, bx * {bn}])"]
    return [f"with T.Kernel(T.ceildiv({N}, {bn})) as bx:"] + ["    " + x for x in b]


# ---------------------------------------------------------------------------------------------
# Inputs, reference, tolerance

def inputs(d):
    """The input arrays (fixed by the seed): values multiples of 1/2 in [-4, 4] (gqa: in [-1, 1];
    topk with ties: integers in [-2, 2]); log-sum-exps multiples of 1/4, -inf for empty splits
    (whose partial outputs are 0); page tables inside the cache."""
    rng = np.random.default_rng(d["seed"])
    out = []
    f = d["llm2"]
    for name, dims, dt, o in tensors(d):
        if o:
            continue
        sh = shape(d, dims)
        if name == "Lse":
            mag = rng.integers(240, 401, size=sh) / 4.0 * rng.choice((-1.0, 1.0), size=sh) if d["big"] \
                else rng.integers(-32, 33, size=sh) / 4.0
            ms = (d["S"], d["M"])   # which splits are empty: per row, each with probability pempty
            empty = rng.random(ms) < d["pempty"]
            out.append(np.where(empty, -np.inf, mag).astype(np.float32))
        elif name == "Table":
            out.append(rng.integers(0, d["NB"], size=sh).astype(np.int32))
        elif f == "gqa":
            out.append((rng.integers(-2, 3, size=sh) / 2.0).astype(_np_dtype(dt)))
        elif f == "topk" and d["ties"]:
            out.append(rng.integers(-2, 3, size=sh).astype(_np_dtype(dt)))
        elif name in ("W", "Bb"):
            out.append((rng.integers(-8, 9, size=sh) / 4.0).astype(_np_dtype(dt)))
        else:
            out.append((rng.integers(-8, 9, size=sh) / 2.0).astype(_np_dtype(dt)))
    if f == "combine":   # an empty split's partial output is 0
        op, lse = out
        out[0] = np.where(np.isneginf(lse)[:, :, None], 0.0, op.astype(np.float64)).astype(op.dtype)
    return out


class Track:
    """Per output element: `scale` (the magnitude the error is relative to), `rel` (the relative
    error allowed) and `extra` (an absolute error allowed besides); exact: integer outputs."""

    def __init__(self, scale, rel, extra=0.0, exact=False):
        self.scale, self.rel, self.extra, self.exact = scale, rel, extra, exact


def _combine(d, ins):
    op, lse = ins[0], ins[1].T   # lse (M, S)
    with np.errstate(invalid="ignore", over="ignore"):
        mx = lse.max(axis=1) if lse.shape[1] else np.full(lse.shape[0], -np.inf)
        live = np.isfinite(mx)
        w = np.where(np.isneginf(lse), 0.0, np.exp(lse - np.where(live, mx, 0.0)[:, None]))
        tot = w.sum(axis=1)
        ts = np.where(tot > 0, tot, 1.0)
        opd = _conv(op, d["dt_tile"])             # (S, M, D)
        num = np.einsum("ms,smd->md", w, opd)
        mag = np.einsum("ms,smd->md", w, np.abs(opd))
        o = np.where((tot > 0)[:, None], num / ts[:, None], 0.0)
        lout = np.where(tot > 0, np.where(live, mx, 0.0) + np.log(ts), -np.inf)
    S = d["S"]
    rel = U32 * (4 * S + 16)
    to = Track(mag / ts[:, None], rel + UNIT[d["dt_out"]])
    tl = Track(np.where(np.isfinite(lout), np.abs(lout) + 1.0, 0.0), rel)
    return [_conv(o, d["dt_out"]), lout], [to, tl]


def _gqa(d, ins):
    q, k, v = ins[0], ins[1], ins[2]
    B, M, N, D, G = d["B"], d["M"], d["N"], d["D"], d["G"]
    H = d["KVH"] * G
    if d["layout"] == "paged":   # the sequence's keys: its pages in table order
        table = ins[3].astype(np.int64)
        k = np.stack([np.concatenate([k[table[b, t]] for t in range(d["TP"])])[:N] for b in range(B)])
        v = np.stack([np.concatenate([v[table[b, t]] for t in range(d["TP"])])[:N] for b in range(B)])
    out = np.zeros((B, M, H, D))
    mag = np.zeros((B, M, H, D))
    for b in range(B):
        for h in range(H):
            s = q[b, :, h, :] @ k[b, :, h // G, :].T          # exact (halves, D <= 64)
            p = _conv(s * GQA_SCALE, d["dt_in"])
            out[b, :, h, :] = p @ v[b, :, h // G, :]
            mag[b, :, h, :] = np.abs(p) @ np.abs(v[b, :, h // G, :])
    return [_conv(out, d["dt_out"])], [Track(mag, U32 * (N + D + 4) + UNIT[d["dt_out"]])]


def _norm(d, ins):
    x, w = ins[0], ins[1]
    bb = ins[2] if d["bias"] else np.zeros_like(w)
    N = d["N"]
    with np.errstate(divide="ignore"):
        if d["norm"] == "layer":
            mu = x.mean(axis=1) if N else np.zeros(x.shape[0])
            xc = x - mu[:, None]
        else:
            mu = np.zeros(x.shape[0])
            xc = x
        r = 1.0 / np.sqrt((xc * xc).sum(axis=1) / N + d["eps"])
    y = xc * r[:, None] * w[None, :] + bb[None, :]
    rel = U32 * (N + 16)
    # the mean's float32 error (a sum of N terms) moves every x - mean by up to U32 * sum |x|
    emu = U32 * (np.abs(x).sum(axis=1) + 4.0) if d["norm"] == "layer" else np.zeros(x.shape[0])
    ty = Track(np.abs(xc) * r[:, None] * np.abs(w)[None, :] + np.abs(bb)[None, :], rel + UNIT[d["dt_out"]],
               (emu * r)[:, None] * np.abs(w)[None, :] * 2)
    outs, trs = [_conv(y, d["dt_out"])], [ty]
    if d["stats"]:
        outs += [mu, r]
        trs += [Track(np.abs(mu), U32 * 2, emu), Track(r, rel)]
    return outs, trs


def _topk(d, ins):
    x = ins[0].copy()
    M, K = x.shape[0], d["K"]
    ids = np.zeros((M, K))
    vals = np.zeros((M, K))
    for r in range(K):
        j = np.argmax(x, axis=1) if M else np.zeros(0, np.int64)   # ties: the lowest index
        ids[:, r] = j
        vals[:, r] = x[np.arange(M), j]
        x[np.arange(M), j] = -np.inf
    e = np.exp((vals - vals[:, :1]) * d["scale"])
    wt = e / e.sum(axis=1, keepdims=True)
    return [ids, _conv(wt, d["dt_out"])], [Track(0.0, 0.0, exact=True),
                                           Track(wt, U32 * (K + 8) + UNIT[d["dt_out"]])]


def _cumsum(d, ins):
    y = np.cumsum(ins[0], axis=d["axis"])   # exact: halves, |sums| <= 600
    return [_conv(y, d["dt_out"])], [Track(np.abs(y), UNIT[d["dt_out"]] / 2)]


def _split(d, ins):
    z, v = ins[0], ins[1]
    M, L = z.shape[0], d["bn"] * d["KB"]
    o, lse = np.zeros((d["NS"], M)), np.full((d["NS"], M), -np.inf)
    mag = np.zeros((d["NS"], M))
    for sp in range(d["NS"]):
        zs, vs = z[:, sp * L:(sp + 1) * L], v[:, sp * L:(sp + 1) * L]
        if zs.shape[1] == 0:
            continue
        mx = zs.max(axis=1, keepdims=True)
        p = np.exp(zs - mx)
        tot = p.sum(axis=1)
        o[sp] = (p * vs).sum(axis=1) / tot
        mag[sp] = (p * np.abs(vs)).sum(axis=1) / tot
        lse[sp] = mx[:, 0] + np.log(tot)
    rel = U32 * (3 * d["KB"] + d["bn"] + 26)
    return [_conv(o, d["dt_out"]), lse], [Track(mag, rel + UNIT[d["dt_out"]]),
                                          Track(np.where(np.isfinite(lse), np.abs(lse) + 1.0, 0.0), rel)]


def reference(d):
    """([float64 outputs], [a Track per output])."""
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    return {"combine": _combine, "gqa": _gqa, "norm": _norm, "topk": _topk, "cumsum": _cumsum,
            "split": _split}[d["llm2"]](d, ins)


def tolerance(tr, out_dtype):
    """(atol, rtol) of an output of `out_dtype`: rel of its scale, per element, and the absolute terms."""
    if tr.exact:
        return 0.0, 0.0
    return tr.rel * tr.scale + tr.extra + STEP[out_dtype], 0.0


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    f = d["llm2"]
    if d["dt_in"] not in FLOATS or d["dt_out"] not in FLOATS:
        return False
    if f in ("combine", "gqa", "cumsum", "split") and d["loop"] not in ("serial", "pipelined"):
        return False
    dims = [d[n] for n in ("M", "N", "S", "D", "K", "B") if n in d]
    if any(x < 0 for x in dims) or (not d["sym"] and 0 in dims):
        return False
    if f == "gqa" and (d["bm"] % 16 or d["bn"] % 16 or d["D"] % 16 or d["M"] < 1 or d["N"] < 1
                       or (d["layout"] == "paged" and d["TP"] != -(-d["N"] // d["bn"]))):
        return False
    if f == "split" and (d["KB"] < 1 or d["NS"] < 1 or d["M"] < 1 and not d["sym"]):
        return False
    if f == "topk" and not 1 <= d["K"] <= d["N"]:
        return False
    if f in ("combine", "norm", "topk") and d["sym"] is False and d["M"] < 1:
        return False
    if f in ("combine", "topk", "norm") and (d.get("S", 1) < 1 or d.get("N", 1) < 1 or d.get("D", 1) < 1):
        return False
    return True


def candidates(d):
    """Simpler variants (reducer.candidates adds the dtypes, loops and dimensions)."""
    out = []

    def put(**kw):
        c = dict(d)
        for k, val in kw.items():
            if val is None:
                c.pop(k, None)
            else:
                c[k] = val
        out.append(c)
    f = d["llm2"]
    if f == "combine":
        if d["maxred"]:
            put(maxred=False)
        if d["big"]:
            put(big=False)
        for p in (0.0, 1.0):
            if d["pempty"] != p:
                put(pempty=p)
        for S in (1, 2, d["S"] - 1):
            if 1 <= S < d["S"]:
                put(S=S)
        for D in (1, 8):
            if D < d["D"]:
                put(D=D)
        if d["bm"] > 1:
            put(bm=d["bm"] // 2)
    if f == "gqa":
        if d["layout"] == "paged":
            put(layout="bshd", TP=None, NB=None)
        for k in ("KVH", "G", "B"):
            if d[k] > 1:
                put(**{k: 1})
        if d["D"] > 16:
            put(D=16)
        for blk in ("bm", "bn"):
            if d[blk] > 16:
                c = dict(d, **{blk: 16})
                if "TP" in c:
                    c["TP"] = -(-c["N"] // c["bn"])
                    c["NB"] = max(c["NB"], 1)
                out.append(c)
        for N in (1, d["bn"], d["N"] - 1):
            if 1 <= N < d["N"]:
                c = dict(d, N=N)
                if "TP" in c:
                    c["TP"] = -(-N // c["bn"])
                out.append(c)
    if f == "norm":
        for k in ("bias", "stats"):
            if d[k]:
                put(**{k: False})
        if d["norm"] == "layer":
            put(norm="rms", bias=False)
        if d["div"] != "div":
            put(div="div")
        if d["wdt"] != "float32":
            put(wdt="float32")
        if d["bm"] > 1:
            put(bm=d["bm"] // 2)
    if f == "topk":
        if d["K"] > 1:
            put(K=d["K"] - 1)
            put(K=1)
        if d["store"] != "col":
            put(store="col")
        if d["scale"] != 1.0:
            put(scale=1.0)
        if d["bm"] > 1:
            put(bm=d["bm"] // 2)
    if f == "split":
        if d["KB"] > 1:
            put(KB=1, NS=-(-d["N"] // d["bn"]))
        if d["NS"] > 1:
            put(NS=d["NS"] - 1)
        if d["bm"] > 1:
            put(bm=d["bm"] // 2)
    if f == "cumsum":
        if d.get("carry") == "last":
            put(carry="sum")
        for blk in ("bm", "bn"):
            if d[blk] > 1:
                put(**{blk: d[blk] // 2})
    return out
