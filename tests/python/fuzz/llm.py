"""The sixteenth stream (session 23): the patterns of LLM kernels, as programs of kind ``llm``.

Each program is one of five forms (``d["llm"]``), written as docs/llm-kernels.md's examples write
them, with its float64 reference and tolerance here (the forms share no code with the other kinds):

* ``osm``     online softmax over key blocks: a serial / pipelined loop over blocks of ``bn`` keys
  keeps a running row max ``m`` (initialised to ``-inf`` or float32's lowest), ``exp(s - m)`` (or
  ``exp2``), a running sum and a running weighted sum of a value tensor rescaled by
  ``exp(m_old - m_new)``; the keys past N hidden by ``T.where(k * bn + j < N, ..., -inf)``, a mask
  by ``T.where`` on an int32 mask tile, an additive float32 mask tile (0 or -inf / lowest / -1e4),
  a causal condition with an offset (negative: fully masked rows) or none; the final divide
  ``T.where(l == 0, 0, acc / l)`` or ``acc / (l + 1e-30)``. With a ``-inf`` initial max the
  rescale and the exponentials are guarded (``T.where(m_old == -inf, 0, ...)``).
* ``attn``    a two-gemm chain: S = Q K^T (``transpose_B``), P = the online softmax of S (as
  ``osm``), P cast to the input dtype, O += P V; M, N and the head dim with tails (the Q/K/V tiles
  are the head dim rounded up to 16).
* ``paged``   indirect page reads (paged decode's form): ``n = Lens[b]``, pages walked
  ``pps`` per step, ``pg = Table[b, t]`` read by a scalar read, ``T.copy(Cache[pg, :, h, :],
  x[jj * PS:(jj + 1) * PS, :])`` under ``if t < pages``, a map, the rows past n zeroed by a
  ``T.where``, the tile stored at the step's rows; the steps cover the whole table (TP pages), so
  every row of the out_idx output is written (rows past n: 0; session 39's `unwritten output`).
* ``scatter`` scatter-add with ``T.atomic_add`` at indexed rows (MoE combine): program (block,
  token t, k) reads a row of Y (``src``: at ``Slot[t, k]``, added into row t; ``dst``: row
  t * K + k, added into row ``Slot[t, k]``, rows colliding), times a weight read by a scalar read,
  added into B (an input, in place) in any order.
* ``rope``    RoPE at per-token positions: the cos / sin table rows copied by a row loop at
  ``Pos[t]`` (``if`` the token exists), then rotate-half (``x[j]`` with ``x[j + D/2]``) or
  interleaved (``x[2j]`` with ``x[2j + 1]``) pair maps.

Structure from ``extension14-<seed // GROUP>``, shapes and values from ``extension14-shape-<seed>``;
grammar.generate gives LLM_P of the copy groups this kind (every other program is unchanged), and
``python -m fuzz --stream llm`` runs only these.
"""
import math
import random

import numpy as np

LLM_P = 0.04   # the fraction of the copy program groups of this kind in grammar.generate
FORMS = ("osm", "attn", "paged", "scatter", "rope")
FLOATS = ("float32", "float16", "bfloat16")
LOWEST = -3.4028234663852886e38   # float32's most negative finite value
HIDES = {"-inf": -math.inf, "lowest": LOWEST, "-1e4": -10000.0}
NINF = "-T.infinity('float32')"
SCALES = (1.0, 0.5, 0.25, 0.1767766952966369)   # (the last: 1 / sqrt(32), inexact in float32)
U32 = 4 * 2.0 ** -24
UNIT = {"float32": U32, "float16": 2 * 2.0 ** -11, "bfloat16": 2 * 2.0 ** -8}


def _lit(v):
    if v == -math.inf:
        return NINF
    return repr(float(v))


def _dim(r, blk, lo=1, hi=70):
    """A dimension for blocks of `blk`: 1, one less / more than the block, several blocks with a
    tail, half a block, or anything up to `hi`."""
    c = r.random()
    if c < 0.1:
        return lo
    if c < 0.25:
        return max(lo, blk - 1)
    if c < 0.35:
        return blk
    if c < 0.5:
        return blk + 1
    if c < 0.65:
        return 2 * blk + r.choice((1, 3, blk // 2 or 1))
    if c < 0.75:
        return max(lo, blk // 2)
    return r.randint(lo, hi)


def generate(seed):
    """The LLM-form program of `seed`."""
    from .grammar import GROUP, _ops
    s = random.Random(f"extension14-{seed // GROUP}")
    v = random.Random(f"extension14-shape-{seed}")
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "llm", "llm": f, "sym": False, "loop": "grid"}
    d["dt_in"] = s.choice(FLOATS)
    d["dt_out"] = s.choice(FLOATS)
    d["dt_tile"] = "float32"
    if f in ("osm", "attn"):
        d["sym"] = s.random() < 0.5
        d["loop"] = s.choice(("serial", "pipelined"))
        d["stages"] = s.choice((2, 3))
        blocks = (4, 8, 16, 32) if f == "osm" else (16, 32, 64)
        d["bm"], d["bn"] = s.choice(blocks), s.choice(blocks)
        d["mask"] = s.choice(("none", "where", "add", "causal") if f == "osm" else ("none", "where", "causal", "add"))
        d["hide"] = s.choice(tuple(HIDES))
        d["init"] = s.choice(("-inf", "lowest"))
        d["exp"] = s.choice(("exp", "exp2"))
        d["final"] = s.choice(("where", "eps"))
        d["scale"] = s.choice(SCALES)
        d["M"] = _dim(v, d["bm"])
        d["N"] = _dim(v, d["bn"], hi=140)
        if d["mask"] == "causal":
            d["off"] = v.choice((0, d["N"] - d["M"], -3, 5, -d["bm"], -d["M"]))
        if d["mask"] in ("where", "add"):
            d["pvis"] = v.choice((0.0, 0.3, 0.7, 1.0))   # per-row visible fraction drawn up to this
        if f == "osm":
            d["vrow"] = s.random() < 0.4   # V (N,): one value per key, broadcast along the rows
        else:
            d["D"] = v.choice((16, 32, 64, 8, 20, 40))
            if d["dt_in"] == "float32" and d["bn"] == 64 and d["D"] > 32:
                d["D"] = 32   # (keep the fp32 K / V tiles small)
    elif f == "paged":
        d["PS"] = s.choice((4, 8, 16))
        d["pps"] = s.choice((1, 2, 4))
        d["H"] = s.choice((1, 2, 3))
        d["D"] = s.choice((8, 16, 32, 64))
        d["dt_tile"] = s.choice(("float32", d["dt_in"]))
        d["ops"] = _ops(s, d["dt_tile"], s.randint(0, 2), False)
        d["R"] = v.randint(1, 4)
        d["TP"] = v.randint(1, 6)
        d["NB"] = v.randint(1, 9)
        d["lens"] = [min(d["TP"] * d["PS"], v.choice((0, 1, d["PS"], d["PS"] + 1, v.randint(0, d["TP"] * d["PS"]),
                                                         d["TP"] * d["PS"]))) for _ in range(d["R"])]
    elif f == "scatter":
        d["form"] = s.choice(("src", "dst"))
        d["weighted"] = s.random() < 0.7
        d["dt_out"] = s.choice(FLOATS)
        d["bn"] = s.choice((8, 16, 32, 64, 128))
        d["dt_tile"] = s.choice(("float32", d["dt_in"]))
        d["atomic"] = 1   # B is an input the kernel adds into (runner, reference.compare)
        d["M"] = v.randint(1, 9)       # tokens
        d["K"] = v.choice((1, 2, 3))   # top-k
        d["N"] = _dim(v, d["bn"], hi=150)
        d["NR"] = v.randint(1, 12)     # rows of Y (src) / of B (dst)
    else:   # rope
        d["inter"] = s.random() < 0.5
        d["sym"] = s.random() < 0.5
        d["bm"] = s.choice((1, 4, 8, 16, 32))
        d["H"] = s.choice((1, 2, 3))
        d["D"] = s.choice((8, 16, 32, 64) if d["inter"] else (16, 32, 64))
        d["M"] = _dim(v, d["bm"])
        d["MP"] = v.randint(1, 40)
    return d


# ---------------------------------------------------------------------------------------------
# Tensors and source

def tensors(d):
    f = d["llm"]
    if f == "osm":
        mk = [("Mk", ("M", "N"), "int32" if d["mask"] == "where" else "float32", False)] \
            if d["mask"] in ("where", "add") else []
        return [("S", ("M", "N"), d["dt_in"], False), ("V", ("N",) if d["vrow"] else ("M", "N"), d["dt_in"], False)] \
            + mk + [("O", ("M",), d["dt_out"], True)]
    if f == "attn":
        mk = [("Mk", ("M", "N"), "int32" if d["mask"] == "where" else "float32", False)] \
            if d["mask"] in ("where", "add") else []
        return [("Q", ("M", "D"), d["dt_in"], False), ("K", ("N", "D"), d["dt_in"], False),
                ("V", ("N", "D"), d["dt_in"], False)] + mk + [("O", ("M", "D"), d["dt_out"], True)]
    if f == "paged":
        return [("Cache", ("NB", "PS", "H", "D"), d["dt_in"], False), ("Table", ("R", "TP"), "int32", False),
                ("Lens", ("R",), "int32", False), ("O", ("R", "H", d["TP"] * d["PS"], "D"), d["dt_out"], True)]
    if f == "scatter":
        y = ("NR", "N") if d["form"] == "src" else (d["M"] * d["K"], "N")
        b = ("M", "N") if d["form"] == "src" else ("NR", "N")
        return [("Y", y, d["dt_in"], False), ("Slot", ("M", "K"), "int32", False),
                ("W", ("M", "K"), "float32", False), ("B", b, d["dt_out"], False)]
    half = d["D"] // 2
    return [("X", ("M", "H", "D"), d["dt_in"], False), ("Cos", ("MP", half), "float32", False),
            ("Sin", ("MP", half), "float32", False), ("Pos", ("M",), "int32", False),
            ("Y", ("M", "H", "D"), d["dt_out"], True)]


SYM_DIMS = ("M", "N")   # the dimensions a symbolic program names (T.symbolic)


def dimtext(d, n):
    if not isinstance(n, str):
        return str(n)
    return n if d["sym"] and n in SYM_DIMS else str(d[n])


def source(d):
    body = {"osm": _softmax_body, "attn": _softmax_body, "paged": _paged_body, "scatter": _scatter_body,
            "rope": _rope_body}[d["llm"]](d)
    return kernel_text(d, tensors(d), body)


def kernel_text(d, ts, body):
    """The kernel's source: its symbolic dimensions, the signature of the tensors ts ((name, shape,
    dtype, is_output)) and the body's lines (also llm2.py's)."""
    from .grammar import KERNEL_NAME
    lines = ["import tilewright.language as T", ""]
    if d["sym"]:
        names = sorted({n for _, sh, _, _ in ts for n in sh if n in SYM_DIMS})
        lines += [f"{n} = T.symbolic({n!r})" for n in names] + [""]
    params = []
    for name, shape, dt, _ in ts:
        dims = ", ".join(dimtext(d, n) for n in shape) + ("," if len(shape) == 1 else "")
        params.append(f"{name}: T.Tensor(({dims}), {dt!r})")
    lines += ["", "@T.prim_func", f"def {KERNEL_NAME}({', '.join(params)}):"]
    return "\n".join(lines + ["    " + s for s in body]) + "\n"


def _loop(d, var, extent):
    if d["loop"] == "pipelined":
        return f"for {var} in T.Pipelined({extent}, num_stages={d['stages']}):"
    return f"for {var} in T.serial({extent}):"


def _masked(d, s):
    """The masked, scaled score of element (i, j) of key block k (before the keys-past-N bound)."""
    sc = f"{s} * {_lit(d['scale'])}" if d["scale"] != 1.0 else s
    m, hide = d["mask"], _lit(HIDES[d["hide"]])
    if m == "where":
        return f"T.where(mk[i, j] != 0, {sc}, {hide})"
    if m == "add":
        return f"{sc} + mk[i, j]"
    if m == "causal":
        off = d["off"]
        o = f" + {off}" if off > 0 else (f" - {-off}" if off < 0 else "")
        return f"T.where(by * {d['bm']} + i{o} >= k * {d['bn']} + j, {sc}, {hide})"
    return sc


def _softmax_body(d):
    """osm and attn: one program per block of bm rows, an online softmax over blocks of bn keys."""
    bm, bn, dim = d["bm"], d["bn"], lambda n: dimtext(d, n)  # noqa: E731
    attn = d["llm"] == "attn"
    ex = "T.exp2" if d["exp"] == "exp2" else "T.exp"
    init = NINF if d["init"] == "-inf" else _lit(LOWEST)
    guard = d["init"] == "-inf"
    b = ["s = T.alloc_fragment((%d, %d), 'float32')" % (bm, bn)]
    if attn:
        dt_, dp = d["dt_in"], -(-d["D"] // 16) * 16
        b += [f"q = T.alloc_shared(({bm}, {dp}), {dt_!r})", f"kt = T.alloc_shared(({bn}, {dp}), {dt_!r})",
              f"vt = T.alloc_shared(({bn}, {dp}), {dt_!r})", f"p = T.alloc_fragment(({bm}, {bn}), {dt_!r})",
              f"acc = T.alloc_fragment(({bm}, {dp}), 'float32')"]
    else:
        vshape = f"({bn},)" if d["vrow"] else f"({bm}, {bn})"
        b += [f"v = T.alloc_fragment({vshape}, 'float32')",
              f"acc = T.alloc_fragment(({bm},), 'float32')", f"ws = T.alloc_fragment(({bm},), 'float32')"]
    if d["mask"] in ("where", "add"):
        b.append(f"mk = T.alloc_fragment(({bm}, {bn}), {'int32' if d['mask'] == 'where' else 'float32'!r})")
    b += [f"{n} = T.alloc_fragment(({bm},), 'float32')" for n in ("m", "mp", "sc", "l", "rs")]
    if attn:
        b.append(f"T.copy(Q[by * {bm}, 0], q)")
    b += [f"T.fill(m, {init})", "T.fill(l, 0)", "T.fill(acc, 0)",
          _loop(d, "k", f"T.ceildiv({dim('N')}, {bn})")]
    inner = []
    if attn:
        inner += [f"T.copy(K[k * {bn}, 0], kt)", "T.gemm(q, kt, s, transpose_B=True, clear_accum=True)"]
    else:
        inner += [f"T.copy(S[by * {bm}, k * {bn}], s)",
                  f"T.copy(V[k * {bn}], v)" if d["vrow"] else f"T.copy(V[by * {bm}, k * {bn}], v)"]
    if d["mask"] in ("where", "add"):
        inner.append(f"T.copy(Mk[by * {bm}, k * {bn}], mk)")
    inner += [f"for i, j in T.Parallel({bm}, {bn}):",
              f"    s[i, j] = T.where(k * {bn} + j < {dim('N')}, {_masked(d, 's[i, j]')}, {NINF})",
              "T.copy(m, mp)", "T.reduce_max(s, m, dim=1, clear=False)", f"for i in T.Parallel({bm}):"]
    rescale = f"{ex}(mp[i] - m[i])"
    inner.append(f"    sc[i] = T.where(mp[i] == {NINF}, 0.0, {rescale})" if guard else f"    sc[i] = {rescale}")
    p = f"{ex}(s[i, j] - m[i])"
    inner += [f"for i, j in T.Parallel({bm}, {bn}):",
              f"    s[i, j] = T.where(s[i, j] == {NINF}, 0.0, {p})" if guard else f"    s[i, j] = {p}",
              "T.reduce_sum(s, rs, dim=1)", f"for i in T.Parallel({bm}):", "    l[i] = l[i] * sc[i] + rs[i]"]
    if attn:
        inner += [f"for i, j in T.Parallel({bm}, {dp}):", "    acc[i, j] = acc[i, j] * sc[i]",
                  f"T.copy(V[k * {bn}, 0], vt)", "T.copy(s, p)", "T.gemm(p, vt, acc)"]
    else:
        vij = "v[j]" if d["vrow"] else "v[i, j]"
        inner += [f"for i, j in T.Parallel({bm}, {bn}):", f"    s[i, j] = s[i, j] * {vij}",
                  "T.reduce_sum(s, ws, dim=1)", f"for i in T.Parallel({bm}):", "    acc[i] = acc[i] * sc[i] + ws[i]"]
    b += ["    " + x for x in inner]
    at = "acc[i, j]" if attn else "acc[i]"
    fin = f"T.where(l[i] == 0, 0.0, {at} / l[i])" if d["final"] == "where" else f"{at} / (l[i] + 1e-30)"
    b += [f"for i, j in T.Parallel({bm}, {dp}):" if attn else f"for i in T.Parallel({bm}):", f"    {at} = {fin}",
          f"T.copy(acc, O[by * {bm}, 0])" if attn else f"T.copy(acc, O[by * {bm}])"]
    return [f"with T.Kernel(T.ceildiv({dim('M')}, {bm})) as by:"] + ["    " + x for x in b]


def _paged_body(d):
    from .grammar import _expr
    ps, pps, D = d["PS"], d["pps"], d["D"]
    rows = ps * pps
    e = "x[i, c]"
    for op in d["ops"]:
        e = _expr(op, f"({e})" if e != "x[i, c]" else e, None)
    b = [f"x = T.alloc_fragment(({rows}, {D}), {d['dt_tile']!r})", "n = Lens[b]",
         f"pages = T.ceildiv(n, {ps})", f"for j in T.serial({-(-d['TP'] // pps)}):",
         f"    for jj in T.serial({pps}):", f"        if j * {pps} + jj < pages:",
         f"            pg = Table[b, j * {pps} + jj]",
         f"            T.copy(Cache[pg, :, h, :], x[jj * {ps}:(jj + 1) * {ps}, :])",
         f"    for i, c in T.Parallel({rows}, {D}):",
         f"        x[i, c] = T.where(j * {rows} + i < n, {e}, 0.0)",
         f"    T.copy(x, O[b, h, j * {rows}:(j + 1) * {rows}, :])"]
    return [f"with T.Kernel({d['R']}, {d['H']}) as (b, h):"] + ["    " + x for x in b]


def _scatter_body(d):
    bn, K = d["bn"], d["K"]
    cols = f"bx * {bn}:(bx + 1) * {bn}"
    src = f"Y[Slot[t, kk], {cols}]" if d["form"] == "src" else f"Y[t * {K} + kk, {cols}]"
    dst = f"B[t, {cols}]" if d["form"] == "src" else f"B[Slot[t, kk], {cols}]"
    b = [f"y = T.alloc_fragment(({bn},), {d['dt_tile']!r})", f"T.copy({src}, y)"]
    if d["weighted"]:
        b += ["w = W[t, kk]", f"for j in T.Parallel({bn}):", "    y[j] = w * y[j]"]
    b.append(f"T.atomic_add({dst}, y)")
    return [f"with T.Kernel(T.ceildiv({d['N']}, {bn}), {d['M']}, {K}) as (bx, t, kk):"] + ["    " + x for x in b]


def _rope_body(d):
    bm, D, half = d["bm"], d["D"], d["D"] // 2
    M = dimtext(d, "M")
    b = [f"x = T.alloc_fragment(({bm}, {D}), 'float32')", f"y = T.alloc_fragment(({bm}, {D}), {d['dt_out']!r})",
         f"c = T.alloc_fragment(({bm}, {half}), 'float32')", f"s = T.alloc_fragment(({bm}, {half}), 'float32')",
         f"T.copy(X[bx * {bm}:(bx + 1) * {bm}, h, :], x)",
         f"for r in T.serial({bm}):", f"    if bx * {bm} + r < {M}:", f"        p = Pos[bx * {bm} + r]",
         "        T.copy(Cos[p, :], c[r, :])", "        T.copy(Sin[p, :], s[r, :])",
         f"for i, j in T.Parallel({bm}, {half}):"]
    lo, hi = ("2 * j", "2 * j + 1") if d["inter"] else ("j", f"j + {half}")
    b += [f"    a = x[i, {lo}]", f"    b = x[i, {hi}]", f"    y[i, {lo}] = a * c[i, j] - b * s[i, j]",
          f"    y[i, {hi}] = b * c[i, j] + a * s[i, j]", f"T.copy(y, Y[bx * {bm}:(bx + 1) * {bm}, h, :])"]
    return [f"with T.Kernel(T.ceildiv({M}, {bm}), {d['H']}) as (bx, h):"] + ["    " + x for x in b]


# ---------------------------------------------------------------------------------------------
# Inputs, reference, tolerance

def _np_dtype(name):
    from .reference import np_dtype
    return np_dtype(name)


def shape(d, dims):
    return tuple(d[n] if isinstance(n, str) else n for n in dims)


def inputs(d):
    """The input arrays (fixed by the seed): values multiples of 1/2 in [-4, 4]; masks with rows
    fully hidden, partly and fully visible; indices inside their tensors."""
    rng = np.random.default_rng(d["seed"])
    out = []
    for name, dims, dt, o in tensors(d):
        if o:
            continue
        sh = shape(d, dims)
        if name == "Mk":
            vis = rng.random((sh[0], 1)) * d["pvis"]   # per-row visible fraction (0: a fully hidden row)
            keep = rng.random(sh) < vis
            out.append(keep.astype(np.int32) if dt == "int32" else
                       np.where(keep, 0.0, HIDES[d["hide"]]).astype(np.float32))
        elif name == "Table":
            out.append(rng.integers(0, d["NB"], size=sh).astype(np.int32))
        elif name == "Lens":
            out.append(np.array(d["lens"], np.int32))
        elif name == "Slot":
            out.append(rng.integers(0, d["NR"], size=sh).astype(np.int32))
        elif name == "Pos":
            out.append(rng.integers(0, d["MP"], size=sh).astype(np.int32))
        else:
            out.append((rng.integers(-8, 9, size=sh) / 2.0).astype(_np_dtype(dt)))
    return out


class Track:
    """Per output element: `scale` (the largest magnitude the error is relative to), `rel` (the
    relative error allowed) and `extra` (an absolute error allowed besides)."""

    def __init__(self, scale, rel, extra=0.0):
        self.scale, self.rel, self.extra = scale, rel, extra


# the largest absolute error of one softmax weight p <= 1 stored in a dtype: half its smallest
# subnormal (float16), or float32's smallest normal (an exp result may be flushed to 0)
TINY = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -126, "float32": 2.0 ** -126}


def _conv(x, dt):
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(_np_dtype(dt)).astype(np.float64)


def _softmax(d, z, v):
    """Rows of weights softmax(z) applied to v ((rows, keys) @ (keys, ...)): (out, scale, rel).
    A row whose scores are all -inf gives 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        zmax = z.max(axis=1, keepdims=True) if z.shape[1] else np.full((z.shape[0], 1), -np.inf)
        live = np.isfinite(zmax)
        zm = np.where(live, zmax, 0.0)
        base = 2.0 if d["exp"] == "exp2" else math.e
        p = np.where(np.isneginf(z), 0.0, base ** (z - zm))
        lsum = p.sum(axis=1, keepdims=True)
        lsafe = np.where(lsum > 0, lsum, 1.0)
        out = (p @ v) / lsafe
        scale = (p @ np.abs(v)) / lsafe
        # the exponent's rounding in float32: |z| of the terms that count (float32's lowest is exact)
        counts = (p > 0) & (z != LOWEST)
        zerr = np.where(counts, np.abs(z), 0.0).max(axis=1, keepdims=True) if z.shape[1] else np.zeros_like(zm)
        zerr = np.maximum(zerr, np.where(live & (zmax != LOWEST), np.abs(zmax), 0.0))
    nblk = max(1, -(-d["N"] // d["bn"]))
    rel = U32 * (3 * nblk + d["bn"] + 10) + 4 * 2.0 ** -24 * zerr * (2.0 if d["exp"] == "exp2" else 1.0)
    return np.where(live, out, 0.0), scale, rel


def _scores(d, s, mk):
    """The masked, scaled scores (rows M, keys N) in float64."""
    z = s * d["scale"]
    if d["scale"] != 1.0:
        z = _conv(z, "float32")   # (the kernel scales in float32)
    M, N = z.shape
    hide = HIDES[d["hide"]]
    if d["mask"] == "where":
        z = np.where(mk != 0, z, hide)
    elif d["mask"] == "add":
        z = _conv(z + mk, "float32")
    elif d["mask"] == "causal":
        z = np.where(np.arange(M)[:, None] + d["off"] >= np.arange(N)[None, :], z, hide)
    return z


def reference(d):
    """([float64 outputs], Track)."""
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    f = d["llm"]
    if f in ("osm", "attn"):
        mk = ins[2 if f == "osm" else 3] if d["mask"] in ("where", "add") else None
        if f == "osm":
            s, v = ins[0], ins[1]
            z = _scores(d, s, mk)
            if d["vrow"]:
                out, scale, rel = _softmax(d, z, v[:, None])
                out, scale, rel = out[:, 0], scale[:, 0], rel[:, 0]
            else:   # row i's own values: out[i] = sum_j p[i, j] v[i, j] / l[i]
                outs = [_softmax(d, z[i:i + 1], v[i][:, None]) for i in range(z.shape[0])]
                out = np.array([o[0][0, 0] for o in outs])
                scale = np.array([o[1][0, 0] for o in outs])
                rel = np.array([o[2][0, 0] if np.ndim(o[2]) else o[2] for o in outs])
            rel = np.broadcast_to(rel, out.shape).reshape(out.shape) + UNIT[d["dt_out"]]
            return [_conv(out, d["dt_out"])], Track(scale, rel, TINY["float32"] * 4 * d["N"])
        q, k, v = ins[0], ins[1], ins[2]
        z = _scores(d, q @ k.T, mk)
        out, scale, rel = _softmax(d, z, v)
        rel = rel + UNIT[d["dt_in"]] + UNIT[d["dt_out"]] + U32 * d["D"]
        # P in the input dtype: a weight below its range is 0 (the row sum l >= 1 divides the error)
        extra = TINY[d["dt_in"]] * np.abs(v).sum(axis=0)[None, :]
        return [_conv(out, d["dt_out"])], Track(scale, np.broadcast_to(rel, out.shape), extra)
    if f == "paged":
        from .reference import _map, Tracker
        cache, table = ins[0], ins[1].astype(np.int64)
        ps, pps, R, H = d["PS"], d["pps"], d["R"], d["H"]
        rows = d["TP"] * ps
        out = np.full((R, H, rows, d["D"]), np.nan)
        tr = Tracker()
        for b in range(R):
            n = d["lens"][b]
            for i in range(rows):  # every row: rows past n are stored 0 (an out_idx output is written whole)
                if i < n:
                    x = _conv(cache[table[b, i // ps], i % ps], d["dt_tile"])
                    out[b, :, i] = x
                else:
                    out[b, :, i] = 0.0
        with np.errstate(invalid="ignore"):
            tr.see(out)
            y = _map(d["ops"], True, out, None, d["dt_tile"], tr)
        y = np.where(np.isnan(out), np.nan, y)
        # rows past n are 0 whatever the map gives
        for b in range(R):
            n = d["lens"][b]
            y[b, :, n:][~np.isnan(y[b, :, n:])] = 0.0
        from .reference import path_dtypes   # (the map's casts included)
        unit = max(UNIT[t] for t in path_dtypes(d))
        return [_conv(y, d["dt_out"])], Track(np.broadcast_to(tr.scale, y.shape), unit * tr.steps)
    if f == "scatter":
        y, slot, w, b0 = ins[0], ins[1].astype(np.int64), ins[2], ins[3]
        acc, mag, adds = b0.copy(), np.abs(b0), np.zeros(b0.shape[0])
        for t in range(d["M"]):
            for kk in range(d["K"]):
                row = _conv(y[slot[t, kk]] if d["form"] == "src" else y[t * d["K"] + kk], d["dt_tile"])
                term = _conv((w[t, kk] if d["weighted"] else 1.0) * row, d["dt_tile"])
                r = t if d["form"] == "src" else slot[t, kk]
                acc[r] += term
                mag[r] += np.abs(term)
                adds[r] += 1
        unit = UNIT[d["dt_out"]] + (UNIT[d["dt_tile"]] if d["dt_tile"] != "float32" else 0.0)
        return [_conv(acc, d["dt_out"])], Track(mag, unit * (adds[:, None] + 1))
    x, cos, sin, pos = ins[0], ins[1], ins[2], ins[3].astype(np.int64)
    half = d["D"] // 2
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    if d["inter"]:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., :half], x[..., half:]
    lo, hi = a * c - b * s, b * c + a * s
    y = np.empty_like(x)
    mag = np.empty_like(x)
    if d["inter"]:
        y[..., 0::2], y[..., 1::2] = lo, hi
        mag[..., 0::2] = mag[..., 1::2] = np.abs(a * c) + np.abs(b * s)
    else:
        y[..., :half], y[..., half:] = lo, hi
        mag[..., :half] = np.abs(a * c) + np.abs(b * s)
        mag[..., half:] = np.abs(b * c) + np.abs(a * s)
    return [_conv(y, d["dt_out"])], Track(mag, np.full(y.shape, U32 * 4 + UNIT[d["dt_out"]]))


# the smallest subnormal of an output dtype: a value rounded into float16's subnormals is off by up to
# half of it, whatever its relative error (4.53e-6 stored as 4.59e-6 in float16)
STEP = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149}


def tolerance(tr, out_dtype):
    """(atol, rtol) of an output of `out_dtype`: rel of its scale, per element, and the absolute terms."""
    return tr.rel * tr.scale + tr.extra + STEP[out_dtype], 0.0


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    f = d["llm"]
    if d["dt_in"] not in FLOATS or d["dt_out"] not in FLOATS:
        return False
    if f in ("osm", "attn"):
        if d["loop"] not in ("serial", "pipelined") or d["M"] < 1 or d["N"] < 1:
            return False
        if f == "attn" and (d["bm"] % 16 or d["bn"] % 16 or d["D"] < 1):
            return False
        if d.get("mask") in ("where", "add") and "pvis" not in d:
            return False
    if f == "paged" and (d["R"] < 1 or d["TP"] < 1 or d["NB"] < 1 or len(d["lens"]) != d["R"]
                         or max(d["lens"]) > d["TP"] * d["PS"]):
        return False
    if f == "scatter" and min(d["M"], d["K"], d["N"], d["NR"]) < 1:
        return False
    if f == "rope" and (d["M"] < 1 or d["MP"] < 1):
        return False
    return True


def candidates(d):
    """Simpler variants of an LLM-form program (reducer.candidates adds the dtypes, loops and
    dimensions)."""
    out = []

    def put(**kw):
        c = dict(d)
        for k, v in kw.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        out.append(c)
    f = d["llm"]
    if f in ("osm", "attn"):
        if d["mask"] != "none":
            put(mask="none", off=None, pvis=None)
        if d.get("pvis") not in (None, 0.0, 1.0):
            put(pvis=1.0)
            put(pvis=0.0)
        if d.get("off"):
            put(off=0)
        for k, v in (("init", "lowest"), ("exp", "exp"), ("final", "where"), ("scale", 1.0), ("hide", "-inf")):
            if d[k] != v:
                put(**{k: v})
        if f == "osm" and d["vrow"]:
            put(vrow=False)
        if f == "attn":
            for D in (16, 8, 1):
                if D < d["D"]:
                    put(D=D)
        for b in ("bm", "bn"):
            if d[b] // 2 >= (16 if f == "attn" else 1):
                put(**{b: d[b] // 2})
    if f == "paged":
        if d["ops"]:
            put(ops=d["ops"][:-1])
        if d["R"] > 1:
            put(R=1, lens=d["lens"][:1])
        for k in ("pps", "H", "TP", "NB"):
            if d[k] > 1:
                c = dict(d, **{k: d[k] // 2})
                c["lens"] = [min(n, c["TP"] * c["PS"]) for n in c["lens"]]
                out.append(c)
        if d["PS"] > 4:
            put(PS=d["PS"] // 2, lens=[min(n, d["TP"] * d["PS"] // 2) for n in d["lens"]])
        if d["D"] > 8:
            put(D=d["D"] // 2)
    if f == "scatter":
        if d["weighted"]:
            put(weighted=False)
        if d["form"] == "dst":
            put(form="src")
        for k in ("K", "NR"):
            if d[k] > 1:
                put(**{k: d[k] - 1})
        if d["bn"] > 8:
            put(bn=d["bn"] // 2)
    if f == "rope":
        if d["inter"]:
            put(inter=False, D=max(16, d["D"]))
        if d["H"] > 1:
            put(H=1)
        if d["MP"] > 1:
            put(MP=1)
        if d["bm"] > 1:
            put(bm=d["bm"] // 2)
    return out
