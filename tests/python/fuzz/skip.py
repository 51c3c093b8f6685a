"""The eighteenth stream (session 25): skipped work, as programs of kind ``skip``.

Grids much larger than the cores (24 AIC / 48 AIV: 100-2000 programs) whose programs mostly skip
their work by a data-dependent condition read from a GM tensor ``Lens`` (int32, one length per
sequence b), the siblings of hunt13 F1 (a cross-core flag's pending sets overflowing when many
programs skip their Cube <-> Vector hand-offs) and F2 (a copy of more than 4095 rows). Each program
is one of five forms (``d["skip"]``), with its float64 reference and tolerances here:

* ``epi``   gemm -> vector epilogue (Cube -> Vector): program (row block bx, sequence b) with
  ``r0 = bx * bm``, under its condition, accumulates ``A[b, rows, :] @ W`` over a serial / pipelined
  loop of K blocks, ``y = acc * 0.5 + 1`` on the vector cores, stored into ``C[b, rows, :]`` or
  (``atomic``) added by ``T.atomic_add`` into ``B[b * bm:(b + 1) * bm, :]`` (every working row block
  of a sequence adds into the same rows; skipped programs add nothing).
* ``pro``   vector prologue -> gemm (Vector -> Cube): rows past the length zeroed and halved by a
  ``T.where`` (an ``int32`` index tile ``ix[i] = r0 + i`` compared with the length) and cast to the
  gemm's dtype inside the K loop, ``T.gemm`` into the accumulator, stored into ``C``.
* ``flash`` both in one kernel: S = Q K^T over a key loop ``T.ceildiv(Lens[b], bn)`` long (empty for
  an empty sequence), keys past the length zeroed, P = S / 4 cast, O += P V.
* ``vec``   vector only: a loop ``T.ceildiv(Lens[b], bs)`` long over row blocks of X, rows past the
  length masked through an int32 index tile, column sums stored into ``Out[b, cols]`` or atomically
  added into ``B[b, cols]``.
* ``rows``  tiles of many rows (1-6000: copies of more than 4095 rows, DataCopy's blockCount, and
  gemm operands of up to 1024 rows through Nd2Nz): program g copies rows ``g * R`` of X in, maps
  them (or multiplies them by W) and copies them out, under ``Lens[g] > 0`` (or ``<= 0``). A UB row
  takes a 32 B block at least, so tiles past 2048 rows are one float32 tile mapped in place (8192
  rows of any dtype do not fit the 192 KiB UB).

Conditions (``cond``): ``lt`` (``if r0 < Lens[b]``: late programs skip), ``ge`` (``if r0 >= Lens[b]``:
early programs skip, late ones work), ``nested`` (``if Lens[b] > 0`` around ``if r0 < Lens[b]``),
``none`` (no condition: the flash / vec forms' loops are empty for an empty sequence). Length
patterns (``lens``): ``sparse`` (most sequences empty), ``one`` (one long sequence, the rest of
length 0 or 1), ``short`` (all within the first row block), ``full`` (uniform). Loops are
``T.Pipelined`` with 2 or 3 stages half the time. Unwritten output elements are undefined (NaN in
the reference, not compared).

Structure and shapes from ``skipped-<seed // GROUP>`` (the GROUP programs of a group share one
compiled kernel), the lengths' pattern from ``skipped-shape-<seed>``; ``python -m fuzz
--stream skip`` runs only these (grammar.generate does not draw them: the other streams' programs
are unchanged).
"""
import random

import numpy as np

from .llm import FLOATS, U32, UNIT, _conv, _np_dtype, kernel_text, shape
from .llm2 import Track, _alloc, _loop

FORMS = ("epi", "pro", "flash", "vec", "rows")
CONDS = ("lt", "ge", "nested", "none")
LENS = ("sparse", "one", "short", "full")
GEMM_DT = ("float16", "bfloat16")
ROWS = (1, 17, 255, 1024, 1500, 4095, 4096, 4097, 6000)   # (past 1500: one float32 tile, mapped in place)
INPLACE = 2048   # a UB row takes a 32 B block at least: 3 tiles of 2048 rows (x, y, a cast's copy) do not fit


def generate(seed):
    """The program of `seed` of this stream."""
    from .grammar import GROUP
    s = random.Random(f"skipped-{seed // GROUP}")
    v = random.Random(f"skipped-shape-{seed}")   # (the lengths' pattern only: a group shares its kernel)
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "skip", "skip": f, "sym": False, "loop": s.choice(("serial", "pipelined")),
         "stages": s.choice((2, 3)), "cond": s.choice(CONDS), "lens": v.choice(LENS), "atomic": False,
         "dt_tile": "float32"}
    d["dt_in"] = s.choice(GEMM_DT if f in ("epi", "pro", "flash") else FLOATS)
    d["dt_out"] = s.choice(FLOATS)
    if f in ("epi", "vec") and s.random() < 0.3:
        d["atomic"] = True
        d["dt_out"] = "float32"
    if f == "rows":
        d["gemm"] = s.random() < 0.3
        R = s.choice(ROWS[:4] if d["gemm"] else ROWS)   # (a gemm of 1500 rows: no K step fits the L0A)
        d["R"] = R
        d["C"] = 16 if d["gemm"] else s.choice((1, 2, 3, 8))
        d["G"] = s.randint(100, 400) if R <= 17 else s.randint(2, 5)
        if R > INPLACE:
            d["dt_in"] = d["dt_out"] = "float32"
        d["cond"] = s.choice(("lt", "ge"))
        if d["gemm"]:
            d["dt_in"] = s.choice(GEMM_DT)
        return d
    d["bm"] = s.choice((16, 32)) if f != "vec" else s.choice((1, 8, 16, 64))
    target = s.randint(100, 2000)
    d["NB"] = s.randint(2, 24)                      # row blocks per sequence
    d["B"] = max(1, target // d["NB"])              # sequences
    d["L"] = d["NB"] * d["bm"] - s.choice((0, 0, 1, d["bm"] // 2))   # (a tail block)
    if f in ("epi", "pro"):
        d["K"] = s.choice((16, 32, 64))
        d["bk"] = s.choice(tuple(k for k in (16, 32) if k <= d["K"]))
        d["N"] = s.choice((16, 32))
    elif f == "flash":
        d["D"] = s.choice((16, 32))
        d["bn"] = s.choice((16, 32))
        d["B"] = max(1, target // d["NB"])
    else:
        d["D"] = s.choice((8, 16, 24))
        d["bd"] = s.choice((8, 16))
        d["bs"] = s.choice((1, 8, 16, 32))
        d["B"] = max(1, target // -(-d["D"] // d["bd"]))
        d["L"] = s.randint(1, 70)
    return d


# ---------------------------------------------------------------------------------------------
# Tensors and source


def tensors(d):
    f = d["skip"]
    lens = ("Lens", ("G",) if f == "rows" else ("B",), "int32", False)
    if f == "rows":
        if d["gemm"]:
            return [("X", ("GR", 16), d["dt_in"], False), ("W", (16, 16), d["dt_in"], False), lens,
                    ("Y", ("GR", 16), d["dt_out"], True)]
        return [("X", ("GR", "C"), d["dt_in"], False), lens, ("Y", ("GR", "C"), d["dt_out"], True)]
    if f in ("epi", "pro"):
        ts = [("A", ("B", "L", "K"), d["dt_in"], False), ("W", ("K", "N"), d["dt_in"], False), lens]
        if d["atomic"]:
            return ts + [("B", ("Bbm", "N"), "float32", False)]
        return ts + [("C", ("B", "L", "N"), d["dt_out"], True)]
    if f == "flash":
        return [("Q", ("B", "L", "D"), d["dt_in"], False), ("Kt", ("B", "L", "D"), d["dt_in"], False),
                ("V", ("B", "L", "D"), d["dt_in"], False), lens, ("O", ("B", "L", "D"), d["dt_out"], True)]
    ts = [("X", ("B", "L", "D"), d["dt_in"], False), lens]
    if d["atomic"]:
        return ts + [("B", ("B", "D"), "float32", False)]
    return ts + [("Out", ("B", "D"), d["dt_out"], True)]


def dims(d):
    """The description with the derived dimensions (GR, Bbm) added."""
    x = dict(d)
    if d["skip"] == "rows":
        x["GR"] = d["G"] * d["R"]
    elif "bm" in d:
        x["Bbm"] = d["B"] * d["bm"]
    return x


def source(d):
    body = {"epi": _gemm_body, "pro": _gemm_body, "flash": _flash_body, "vec": _vec_body,
            "rows": _rows_body}[d["skip"]](d)
    return kernel_text(dims(d), tensors(d), body)


def _guard(d, r0, b, work):
    """`work` (lines) under the program's condition."""
    ind = lambda ls, n=1: ["    " * n + x for x in ls]   # noqa: E731
    c = d["cond"]
    if c == "none":
        return work
    if c == "lt":
        return [f"if {r0} < Lens[{b}]:"] + ind(work)
    if c == "ge":
        return [f"if {r0} >= Lens[{b}]:"] + ind(work)
    return [f"if Lens[{b}] > 0:", f"    if {r0} < Lens[{b}]:"] + ind(work, 2)


def _grid(d, body):
    return [f"with T.Kernel({d['NB']}, {d['B']}) as (bx, b):"] + ["    " + x for x in body]


def _gemm_body(d):
    bm, bk, K, N, dt = d["bm"], d["bk"], d["K"], d["N"], d["dt_in"]
    rows = "b, bx * {0}:(bx + 1) * {0}".format(bm)
    b = [f"w = T.alloc_shared(({bk}, {N}), {dt!r})", _alloc("acc", (bm, N), "float32")]
    if d["skip"] == "epi":
        b += [_alloc("y", (bm, N), "float32" if d["atomic"] else d["dt_out"]), f"a = T.alloc_shared(({bm}, {bk}), {dt!r})"]
        inner = [f"    T.copy(A[{rows}, k * {bk}:(k + 1) * {bk}], a)", f"    T.copy(W[k * {bk}, 0], w)",
                 "    T.gemm(a, w, acc)"]
    else:
        b += [_alloc("x", (bm, bk), "float32"), _alloc("p", (bm, bk), dt), _alloc("ix", (bm,), "int32")]
        inner = [f"    T.copy(A[{rows}, k * {bk}:(k + 1) * {bk}], x)",
                 f"    for i in T.Parallel({bm}):", f"        ix[i] = bx * {bm} + i",
                 f"    for i, j in T.Parallel({bm}, {bk}):",
                 "        p[i, j] = T.where(ix[i] < Lens[b], x[i, j] * 0.5, 0.0)",
                 f"    T.copy(W[k * {bk}, 0], w)", "    T.gemm(p, w, acc)"]
    work = ["T.clear(acc)", _loop(d, "k", K // bk)] + inner
    if d["skip"] == "epi":
        work += [f"for i, j in T.Parallel({bm}, {N}):", "    y[i, j] = acc[i, j] * 0.5 + 1.0"]
        work.append(f"T.atomic_add(B[b * {bm}, 0], y)" if d["atomic"] else f"T.copy(y, C[{rows}, :])")
    else:
        work.append(f"T.copy(acc, C[{rows}, :])")
    return _grid(d, b + _guard(d, f"bx * {bm}", "b", work))


def _flash_body(d):
    bm, bn, D, dt = d["bm"], d["bn"], d["D"], d["dt_in"]
    b = [f"q = T.alloc_shared(({bm}, {D}), {dt!r})", f"kt = T.alloc_shared(({bn}, {D}), {dt!r})",
         f"vt = T.alloc_shared(({bn}, {D}), {dt!r})", _alloc("s", (bm, bn), "float32"), _alloc("p", (bm, bn), dt),
         _alloc("acc", (bm, D), "float32")]
    work = ["n = Lens[b]", f"T.copy(Q[b, bx * {bm}:(bx + 1) * {bm}, :], q)", "T.fill(acc, 0)",
            _loop(d, "k", f"T.ceildiv(n, {bn})"),
            f"    T.copy(Kt[b, k * {bn}:(k + 1) * {bn}, :], kt)",
            "    T.gemm(q, kt, s, transpose_B=True, clear_accum=True)",
            f"    for i, j in T.Parallel({bm}, {bn}):",
            f"        p[i, j] = T.where(k * {bn} + j < n, s[i, j] * 0.25, 0.0)",
            f"    T.copy(V[b, k * {bn}:(k + 1) * {bn}, :], vt)",
            f"    for j, e in T.Parallel({bn}, {D}):",
            f"        vt[j, e] = T.where(k * {bn} + j < n, vt[j, e], 0.0)",
            "    T.gemm(p, vt, acc)", f"T.copy(acc, O[b, bx * {bm}:(bx + 1) * {bm}, :])"]
    return _grid(d, b + _guard(d, f"bx * {bm}", "b", work))


def _vec_body(d):
    bs, bd, D = d["bs"], d["bd"], d["D"]
    cols = f"bx * {bd}:(bx + 1) * {bd}"
    b = [_alloc("x", (bs, bd), "float32"), _alloc("ix", (bs,), "int32"), _alloc("rs", (bd,), "float32"),
         _alloc("acc", (bd,), "float32")]
    work = ["n = Lens[b]", "T.fill(acc, 0)", _loop(d, "k", f"T.ceildiv(n, {bs})"),
            f"    T.copy(X[b, k * {bs}:(k + 1) * {bs}, {cols}], x)",
            f"    for i in T.Parallel({bs}):", f"        ix[i] = k * {bs} + i",
            f"    for i, j in T.Parallel({bs}, {bd}):", "        x[i, j] = T.where(ix[i] < n, x[i, j], 0.0)",
            "    T.reduce_sum(x, rs, dim=0)", f"    for j in T.Parallel({bd}):", "        acc[j] = acc[j] + rs[j]",
            f"T.atomic_add(B[b, {cols}], acc)" if d["atomic"] else f"T.copy(acc, Out[b, {cols}])"]
    grid = f"with T.Kernel(T.ceildiv({D}, {bd}), {d['B']}) as (bx, b):"
    return [grid] + ["    " + x for x in b + _guard(d, "0", "b", work)]


def _rows_body(d):
    R, C, dt = d["R"], d["C"], d["dt_in"]
    rows = f"g * {R}:(g + 1) * {R}"
    if d["gemm"]:
        b = [f"a = T.alloc_shared(({R}, 16), {dt!r})", f"w = T.alloc_shared((16, 16), {dt!r})",
             _alloc("acc", (R, 16), "float32")]
        work = [f"T.copy(X[{rows}, :], a)", "T.copy(W, w)", "T.gemm(a, w, acc, clear_accum=True)",
                f"T.copy(acc, Y[{rows}, :])"]
    elif R > INPLACE:   # one tile of R rows (at least R x 32 B of UB), mapped in place
        b = [_alloc("x", (R, C), "float32")]
        work = [f"T.copy(X[{rows}, :], x)", f"for i, j in T.Parallel({R}, {C}):", "    x[i, j] = x[i, j] * 2.0 + 1.0",
                f"T.copy(x, Y[{rows}, :])"]
    else:
        b = [_alloc("x", (R, C), "float32"), _alloc("y", (R, C), d["dt_out"])]
        work = [f"T.copy(X[{rows}, :], x)", f"for i, j in T.Parallel({R}, {C}):", "    y[i, j] = x[i, j] * 2.0 + 1.0",
                f"T.copy(y, Y[{rows}, :])"]
    cond = "0 < Lens[g]" if d["cond"] == "lt" else "0 >= Lens[g]"
    return [f"with T.Kernel({d['G']}) as g:"] + ["    " + x for x in b + [f"if {cond}:"] + ["    " + w for w in work]]


# ---------------------------------------------------------------------------------------------
# Inputs, reference, tolerance

def _lengths(d, rng, n, L):
    """n lengths in [0, L] of the pattern d["lens"] (for ``ge``: L minus them, so that most programs
    still skip)."""
    p = d["lens"]
    if p == "sparse":
        x = np.where(rng.random(n) < 0.1, rng.integers(1, L + 1, n), 0)
    elif p == "one":
        x = rng.integers(0, 2, n)
        x[rng.integers(0, n)] = L
    elif p == "short":
        x = rng.integers(0, min(L, d.get("bm", 1)) + 1, n)
    else:
        x = rng.integers(0, L + 1, n)
    x = np.minimum(x, L)
    return (L - x if d["cond"] == "ge" else x).astype(np.int32)


def inputs(d):
    """The input arrays (fixed by the seed): values multiples of 1/2 in [-2, 2]; lengths of the
    pattern; the atomic target B filled with multiples of 1/4."""
    rng = np.random.default_rng(d["seed"])
    dd = dims(d)
    out = []
    for name, dm, dt, o in tensors(d):
        if o:
            continue
        sh = shape(dd, dm)
        if name == "Lens":
            out.append(_lengths(d, rng, sh[0], 1 if d["skip"] == "rows" else d["L"]))
        elif name == "B":
            out.append((rng.integers(-8, 9, size=sh) / 4.0).astype(np.float32))
        else:
            out.append((rng.integers(-4, 5, size=sh) / 2.0).astype(_np_dtype(dt)))
    return out


def _works(d, r0, n):
    c = d["cond"]
    return {"none": True, "lt": r0 < n, "ge": r0 >= n, "nested": n > 0 and r0 < n}[c]


def reference(d):
    """([float64 outputs], [a Track per output]); unwritten elements NaN."""
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    f = d["skip"]
    if f == "rows":
        x, lens = ins[0], ins[-1]
        R = d["R"]
        y = np.full((d["G"] * R, x.shape[1]), np.nan)
        mag = np.zeros_like(y)
        for g in range(d["G"]):
            if (lens[g] > 0) == (d["cond"] == "lt"):
                rows = slice(g * R, (g + 1) * R)
                if d["gemm"]:
                    y[rows] = x[rows] @ ins[1]
                    mag[rows] = np.abs(x[rows]) @ np.abs(ins[1])
                else:
                    y[rows] = x[rows] * 2.0 + 1.0
                    mag[rows] = np.abs(y[rows])
        return [_conv(y, d["dt_out"])], [Track(mag, UNIT[d["dt_out"]] + U32 * 20)]
    if f in ("epi", "pro"):
        a, w, lens = ins[0], ins[1], ins[2]
        Bn, L, bm, N = d["B"], d["L"], d["bm"], d["N"]
        c = np.full((Bn, L, N), np.nan)
        mag = np.zeros((Bn, L, N))
        acc_b = ins[3].copy() if d["atomic"] else None
        mag_b = np.abs(acc_b) if d["atomic"] else None
        for b in range(Bn):
            n = int(lens[b])
            for bx in range(d["NB"]):
                r0 = bx * bm
                if not _works(d, r0, n):
                    continue
                rows = slice(r0, min(r0 + bm, L))
                x = a[b, rows]
                if f == "pro":
                    keep = (np.arange(r0, rows.stop) < n)[:, None]
                    x = _conv(np.where(keep, x * 0.5, 0.0), d["dt_in"])
                acc = x @ w
                m = np.abs(x) @ np.abs(w)
                if f == "epi":
                    acc, m = acc * 0.5 + 1.0, m * 0.5 + 1.0
                if d["atomic"]:   # the tile's rows past L (the tail block) are stale: undefined
                    rv = rows.stop - r0
                    acc_b[b * bm:b * bm + rv] += acc
                    mag_b[b * bm:b * bm + rv] += m
                    acc_b[b * bm + rv:(b + 1) * bm] = np.nan
                else:
                    c[b, rows], mag[b, rows] = acc, m
        if d["atomic"]:
            return [acc_b], [Track(mag_b, U32 * 8)]
        return [_conv(c, d["dt_out"])], [Track(mag, UNIT[d["dt_out"]] + U32 * (d["K"] + 8))]
    if f == "flash":
        q, k, v, lens = ins
        Bn, L, bm, D = d["B"], d["L"], d["bm"], d["D"]
        o = np.full((Bn, L, D), np.nan)
        mag = np.zeros((Bn, L, D))
        for b in range(Bn):
            n = int(lens[b])
            for bx in range(d["NB"]):
                r0 = bx * bm
                if not _works(d, r0, n):
                    continue
                rows = slice(r0, min(r0 + bm, L))
                p = _conv(q[b, rows] @ k[b, :n].T * 0.25, d["dt_in"])
                o[b, rows] = p @ v[b, :n]
                mag[b, rows] = np.abs(p) @ np.abs(v[b, :n])
        return [_conv(o, d["dt_out"])], [Track(mag, UNIT[d["dt_out"]] + U32 * (L + D + 8))]
    x, lens = ins[0], ins[1]
    Bn, D = d["B"], d["D"]
    out = ins[2].copy() if d["atomic"] else np.full((Bn, D), np.nan)
    mag = np.abs(out) if d["atomic"] else np.zeros((Bn, D))
    for b in range(Bn):
        n = int(lens[b])
        if not _works(d, 0, n):
            continue
        s, m = x[b, :n].sum(axis=0), np.abs(x[b, :n]).sum(axis=0)
        if d["atomic"]:
            out[b] += s
            mag[b] += m
        else:
            out[b], mag[b] = s, m
    dt = "float32" if d["atomic"] else d["dt_out"]
    return [_conv(out, dt)], [Track(mag, UNIT[dt] + U32 * (d["L"] + 8))]


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    f = d["skip"]
    if d["loop"] not in ("serial", "pipelined") or d["dt_tile"] != "float32":
        return False
    if f == "rows":
        return d["R"] >= 1 and d["C"] >= 1 and d["G"] >= 1
    if d["B"] < 1 or d["NB"] < 1 or d["L"] < 1 or (f != "vec" and d["L"] > d["NB"] * d["bm"]):
        return False
    if f in ("epi", "pro") and (d["K"] % d["bk"] or d["N"] % 16 or d["bm"] % 16 or d["bk"] % 16):
        return False
    if f == "flash" and (d["D"] % 16 or d["bn"] % 16 or d["bm"] % 16):
        return False
    return True


def candidates(d):
    """Simpler variants: no condition, a serial loop, no atomic add, fewer sequences / blocks, smaller
    tiles."""
    out = []

    def put(**kw):
        out.append(dict(d, **kw))
    if d["skip"] == "rows":
        if d["G"] > 1:
            put(G=1)
            put(G=d["G"] // 2)
        for R in (1, 17, 1024, 4095, 4096):
            if R < d["R"]:
                put(R=R)
        if d["C"] > 1:
            put(C=1)
        return out
    if d["cond"] != "none":
        put(cond="none")
        if d["cond"] == "nested":
            put(cond="lt")
    if d["loop"] != "serial":
        put(loop="serial")
    if d["atomic"]:
        put(atomic=False)
    for B in (1, 2, d["B"] // 2):
        if 1 <= B < d["B"]:
            put(B=B)
    if d["skip"] != "vec":
        for nb in (1, 2, d["NB"] // 2):
            if 1 <= nb < d["NB"]:
                put(NB=nb, L=min(d["L"], nb * d["bm"]))
        if d["bm"] > 16:
            put(bm=16, L=min(d["L"], d["NB"] * 16))
    else:
        for L in (1, d["bs"], d["L"] // 2):
            if 1 <= L < d["L"]:
                put(L=L)
    if d.get("K", 16) > 16:
        put(K=16, bk=16)
    return out
