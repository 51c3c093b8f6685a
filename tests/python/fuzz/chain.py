"""The twenty-second stream (session 37, h-hunt37): what session 36 changed, as programs of kind ``chain``.

Each program is one of three forms (``d["chain"]``), with its reference here:

* ``fix``   chained gemms through a Cube accumulator copied into a 16-bit gemm operand (session 36's
  Fixpipe L0C -> L1 where the windows are whole 16 x 16 fractals, the vector hand-off otherwise): per row
  block of ``bm`` rows, ``s = sum_t A[rows, chunk t] @ B[chunk t, :]`` over S K-chunks (T.serial or
  T.Pipelined), ``ssh = s`` (float16 / bfloat16), then ``o = ssh @ C`` (``once``: after the loop) or
  ``o += ssh @ C`` at every chunk (``each``), C read as (N, P) or transposed as (P, N) (``tb``); N of
  16 / 24 / 32 / 48 (24: a partial fractal), row tails (M of 1, 17, 33, 40), M symbolic half the time.
  Exact: halves in [-1.5, 1.5]; the reference rounds s to the operand's dtype as the copy does.
* ``i8``    int32 products whose ranges come from int8 / uint8 tensors through casts, clamps, ``&`` and
  ``>>`` (session 36's range_of picks a product's form from them): ``p = (t * u + k) * c`` with c at
  the edge of int32 for the proven bound (one below, at, one past), then stored, shifted, masked, or
  (inside int32 only) compared or floor-divided. Exact, Python ints under the language's rules.
* ``pow``   ``T.pow(a * x + b, c)`` for exponents 1, 2, 3, 0.5, -0.5, -1 and non-integer constants
  (session 36's exp(c log x)) over float32 / float16 / bfloat16 tiles, x in (0, 8] (0 for c > 0).

Structure from ``chain37-<seed // GROUP>``, shapes and values from ``chain37-shape-<seed>``;
``python -m fuzz --stream chain`` runs only these (grammar.generate does not draw them).
"""
import random

import numpy as np

from .hunt import _np, _wrap
from .llm import UNIT, _conv, kernel_text, shape
from .llm2 import Track

FORMS = ("fix", "i8", "pow")
EXPS = (1, 2, 3, 0.5, -0.5, -1, 0.8, 1.5, -2.5, 0.3333, 2.2)


def generate(seed):
    from .grammar import GROUP
    s = random.Random(f"chain37-{seed // GROUP}")
    v = random.Random(f"chain37-shape-{seed}")
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "chain", "chain": f, "sym": s.random() < 0.5}
    if f == "fix":
        d["dt"] = s.choice(("float16", "bfloat16"))
        d["bm"] = s.choice((16, 32))
        d["kc"] = s.choice((16, 32))
        d["S"] = s.choice((1, 2, 3))
        d["N"] = s.choice((16, 24, 32, 48))
        d["P"] = s.choice((16, 32))
        d["when"] = s.choice(("once", "each"))
        d["tb"] = s.random() < 0.3
        d["kloop"] = s.choice(("serial", "pipelined"))
        d["M"] = v.choice((1, 16, 17, 33, 40))
    elif f == "i8":
        d["xt"] = s.choice(("int8", "uint8"))
        d["wt"] = s.choice(("int8", "uint8"))
        d["clamp"] = s.choice((None, (-100, 90), (0, 127), (-5, 3)))
        d["wop"] = s.choice(("", "& 15", ">> 2", "& 127"))
        d["k"] = s.choice((0, 7, -300, 65536))
        d["delta"] = s.choice((-1, 0, 1))
        use = ("store", "shr", "and") + (("cmp", "div") if d["delta"] < 1 else ())
        d["use"] = s.choice(use)
        d["bm"] = s.choice((1, 8, 16))
        d["M"] = v.choice((1, 3, 17, 40))
        d["N"] = v.choice((1, 7, 17, 33))
    else:
        d["dt"] = s.choice(("float32", "float16", "bfloat16"))
        d["c"] = s.choice(EXPS)
        d["a"] = s.choice((1.0, 0.5, 2.0))
        d["b"] = s.choice((0.0, 0.25)) if d["c"] > 0 else 0.25
        d["bm"] = s.choice((1, 8, 16))
        d["M"] = v.choice((1, 3, 17, 40))
        d["N"] = v.choice((1, 7, 16, 33))
    # (the keys the shared comparison and reducer read: the data's dtypes, no grid loop to simplify)
    d["dt_in"] = d["dt_tile"] = d["dt_out"] = d.get("dt", "int32")
    d["loop"] = "grid"
    return d


def tensors(d):
    f = d["chain"]
    if f == "fix":
        K = d["kc"] * d["S"]
        c = ("C", (d["P"], d["N"]) if d["tb"] else (d["N"], d["P"]), d["dt"], False)
        return [("A", ("M", K), d["dt"], False), ("B", (K, d["N"]), d["dt"], False), c,
                ("O", ("M", d["P"]), "float32", True)]
    if f == "i8":
        n = d["N"]   # (a tile's width: a constant; M symbolic in `sym` programs)
        return [("X", ("M", n), d["xt"], False), ("W", ("M", n), d["wt"], False), ("Y", ("M", n), "int32", True)]
    return [("X", ("M", d["N"]), d["dt"], False), ("Y", ("M", d["N"]), d["dt"], True)]


def source(d):
    body = {"fix": _fix_body, "i8": _i8_body, "pow": _pow_body}[d["chain"]](d)
    return kernel_text(d, tensors(d), body)


def _grid(d, bm):
    return f"with T.Kernel(T.ceildiv(M, {bm})) as bx:" if d["sym"] else f"with T.Kernel({-(-d['M'] // bm)}) as bx:"


def _fix_body(d):
    bm, kc, N, P, dt = d["bm"], d["kc"], d["N"], d["P"], repr(d["dt"])
    loop = (f"for t in T.Pipelined({d['S']}, num_stages=2):" if d["kloop"] == "pipelined" else
            f"for t in T.serial({d['S']}):")
    gemm2 = "T.gemm(ssh, c, o, transpose_B=True)" if d["tb"] else "T.gemm(ssh, c, o)"
    b = [_grid(d, bm),
         f"    a = T.alloc_shared(({bm}, {kc}), {dt})",
         f"    b = T.alloc_shared(({kc}, {N}), {dt})",
         f"    c = T.alloc_shared({(P, N) if d['tb'] else (N, P)}, {dt})",
         f"    s = T.alloc_fragment(({bm}, {N}), 'float32')",
         f"    ssh = T.alloc_shared(({bm}, {N}), {dt})",
         f"    o = T.alloc_fragment(({bm}, {P}), 'float32')",
         "    T.copy(C[0, 0], c)",
         "    T.clear(s)",
         "    T.clear(o)",
         "    " + loop,
         f"        T.copy(A[bx * {bm}, t * {kc}], a)",
         f"        T.copy(B[t * {kc}, 0], b)",
         "        T.gemm(a, b, s)"]
    if d["when"] == "each":
        b += ["        T.copy(s, ssh)", "        " + gemm2]
    else:
        b += ["    T.copy(s, ssh)", "    " + gemm2]
    return b + [f"    T.copy(o, O[bx * {bm}, 0])"]


def _bound(d):
    """(lo, hi) of t * u + k: the proven interval of the product's operand."""
    lo, hi = (-128, 127) if d["xt"] == "int8" else (0, 255)
    if d["clamp"]:
        lo, hi = max(lo, d["clamp"][0]), min(hi, d["clamp"][1])
        lo, hi = min(lo, hi), max(lo, hi)
    wl, wh = (-128, 127) if d["wt"] == "int8" else (0, 255)
    if d["wop"].startswith("&"):
        wl, wh = 0, int(d["wop"].split()[1])
    elif d["wop"]:
        wl, wh = wl >> 2, wh >> 2
    ps = [p * q for p in (lo, hi) for q in (wl, wh)]
    return min(ps) + d["k"], max(ps) + d["k"]


def _c(d):
    lo, hi = _bound(d)
    m = max(-lo, hi, 1)
    return max(1, (2**31 - 1) // m + d["delta"])


def _i8_body(d):
    bm, n = d["bm"], d["N"]
    t = "T.cast(x[i, j], 'int32')"
    if d["clamp"]:
        t = f"T.max(T.min({t}, {d['clamp'][1]}), {d['clamp'][0]})"
    u = "T.cast(w[i, j], 'int32')" + (f" {d['wop']}" if d["wop"] else "")
    p = f"({t} * ({u}) + {d['k']}) * {_c(d)}"
    y = {"store": p, "shr": f"({p}) >> 5", "and": f"({p}) & 65535", "cmp": f"T.cast({p} < 12345, 'int32')",
         "div": f"({p}) // 1000"}[d["use"]]
    return [_grid(d, bm),
            f"    x = T.alloc_fragment(({bm}, {n}), {d['xt']!r})",
            f"    w = T.alloc_fragment(({bm}, {n}), {d['wt']!r})",
            f"    y = T.alloc_fragment(({bm}, {n}), 'int32')",
            f"    T.copy(X[bx * {bm}, 0], x)",
            f"    T.copy(W[bx * {bm}, 0], w)",
            f"    for i, j in T.Parallel({bm}, {n}):",
            f"        y[i, j] = {y}",
            f"    T.copy(y, Y[bx * {bm}, 0])"]


def _pow_body(d):
    bm, n, dt = d["bm"], d["N"], repr(d["dt"])
    return [_grid(d, bm),
            f"    x = T.alloc_fragment(({bm}, {n}), {dt})",
            f"    T.copy(X[bx * {bm}, 0], x)",
            f"    for i, j in T.Parallel({bm}, {n}):",
            f"        x[i, j] = T.pow(x[i, j] * {d['a']!r} + {d['b']!r}, {d['c']!r})",
            f"    T.copy(x, Y[bx * {bm}, 0])"]


# ---------------------------------------------------------------------------------------------
# Inputs and reference

def inputs(d):
    rng = np.random.default_rng(d["seed"])
    out = []
    for name, dm, dt, o in tensors(d):
        if o:
            continue
        sh = shape(d, dm)
        if d["chain"] == "fix":
            out.append((rng.integers(-3, 4, size=sh) / 2.0).astype(_np(dt)))
        elif d["chain"] == "i8":
            lo, hi = (-128, 128) if dt == "int8" else (0, 256)
            x = rng.integers(lo, hi, size=sh).reshape(-1)
            x[:2] = [lo, hi - 1][:x.size]
            out.append(x.reshape(sh).astype(_np(dt)))
        else:
            lo = 0 if d["c"] > 0 else 1
            out.append((rng.integers(lo, 33, size=sh) / 4.0).astype(_np(dt)))
    return out


def reference(d):
    """([float64 outputs], [a Track per output])."""
    ins = inputs(d)
    f = d["chain"]
    if f == "fix":
        a, b, c = (x.astype(np.float64) for x in ins)
        if d["tb"]:
            c = c.T
        M, kc = a.shape[0], d["kc"]
        s = np.zeros((M, d["N"]))
        o = np.zeros((M, d["P"]))
        for t in range(d["S"]):
            s = s + a[:, t * kc:(t + 1) * kc] @ b[t * kc:(t + 1) * kc]
            if d["when"] == "each":
                o = o + _conv(s, d["dt"]) @ c
        if d["when"] == "once":
            o = _conv(s, d["dt"]) @ c
        return [o], [Track(np.zeros_like(o), 0.0, exact=True)]
    if f == "i8":
        x, w = (v.astype(np.int64) for v in ins)
        if d["clamp"]:
            x = np.clip(x, d["clamp"][0], d["clamp"][1])
        if d["wop"].startswith("&"):
            w = w & int(d["wop"].split()[1])
        elif d["wop"]:
            w = w >> 2
        c = _c(d)
        p = [(int(xv) * int(wv) + d["k"]) * c for xv, wv in zip(x.reshape(-1), w.reshape(-1))]
        use = d["use"]
        y = [_wrap(q) if use == "store" else _wrap(q) >> 5 if use == "shr" else q & 65535 if use == "and" else
             int(q < 12345) if use == "cmp" else _wrap(q // 1000) for q in p]
        y = np.array(y, np.float64).reshape(x.shape)
        return [y], [Track(np.zeros_like(y), 0.0, exact=True)]
    x = ins[0].astype(np.float64) * d["a"] + d["b"]
    with np.errstate(divide="ignore"):
        r = np.power(x, d["c"])
    tol = 3e-6 * (1 + abs(d["c"]) * np.abs(np.log(np.where(x > 0, x, 1)))) + UNIT[d["dt"]]
    return [_conv(r, d["dt"])], [Track(np.where(np.isfinite(r), np.abs(r), 0.0), tol)]


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    return d["M"] >= 1 and d.get("N", 1) >= 1


def candidates(d):
    """Simpler variants: one chunk, no transpose, no clamp, smaller shapes."""
    out = []

    def put(**kw):
        out.append(dict(d, **kw))
    if d["chain"] == "fix":
        if d["S"] > 1:
            put(S=1)
        if d["tb"]:
            put(tb=False)
        if d["kloop"] == "pipelined":
            put(kloop="serial")
    if d.get("clamp"):
        put(clamp=None)
    if d.get("wop"):
        put(wop="")
    for k in ("M", "N"):
        if k in d and d[k] > 1 and not (k == "N" and d["chain"] == "fix"):
            put(**{k: max(1, d[k] // 2)})
    if d["sym"]:
        put(sym=False)
    return out
