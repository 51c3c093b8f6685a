"""The twenty-third stream (session 38, h-hunt38): what session 37 changed, as programs of kind ``scal``.

Each program is one of three forms (``d["scal"]``), with its reference here:

* ``math``    scalar math (session 37's lower_scalar_math) in a let, an ``if`` condition, a serial loop's
  extent and a map's operand, mixed with maps over a (bm, N) tile: ``s = T.f1(p * a + b)`` of a parameter
  p read from a GM tensor (``P[0]``), from a tile (``pt[0]``) or of the block index (cast to the tile's 16-bit
  dtype half the time: the call's float32 value stands until a store); ``if T.f2(q) > thr``
  around a map (with or without an else); ``for k in T.serial(nk)`` with ``nk = floor(sqrt(P[3]))``
  (0 to 3 trips) and ``T.f4(k * 0.25 + 0.5)`` or ``T.pow(c, k)`` in its map (the functions include T.sin /
  T.cos since session 40); two programs in three first map ``x[i, j] = T.sin(x[i, j] * c)`` (or T.cos) with c up
  to 399999.9 (|x| <= 1: arguments inside the documented |x| <= 400000; the reference rounds the product to
  float32 as the map does), its argument read down the first or last column of a second tile in two of three
  (a per-row value: ascend910b gathers the column first, session 40). float32 / float16 / bfloat16 tiles; the
  reference is float64 with the tile's rounding at each store.
* ``unroll``  ``T.unroll(U)`` loops (U of 1 to 4) with ifs on the variable (``l < U - 1``, ``l == 0`` with an
  else, ``l % 2 == 0`` with an else) and a tile handed along between copies: a gemm MLP whose layer
  output goes back into the gemm's operand (``gemm``: the loop form fails, unroll_loops writes it out), or
  vector code only inside a ``T.Pipelined`` / ``T.serial`` loop over K chunks (``vec``: multi_buffer's copies
  of a loop around T.unroll).
* ``dstore``  stores under data-dependent ifs, inside the tensor: a map's masked store into a tile filled
  first (``tile``), or a map's stores straight into the output under ``if row < M`` and a condition on the
  data with an else arm (``gm``).

Structure from ``scal38-<seed // GROUP>``, shapes and values from ``scal38-shape-<seed>``;
``python -m fuzz --stream scal`` runs only these (grammar.generate does not draw them).
"""
import math
import random

import numpy as np

from .hunt import _np
from .llm import U32, UNIT, _conv, kernel_text, shape
from .llm2 import Track

FORMS = ("math", "unroll", "dstore")
# (function, its float64 value): arguments are kept inside each domain (positive for log / sqrt / rsqrt)
FNS = {"exp": math.exp, "exp2": lambda x: 2.0 ** x, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
       "rsqrt": lambda x: 1 / math.sqrt(x), "tanh": math.tanh, "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
       "erf": math.erf, "silu": lambda x: x / (1 + math.exp(-x)), "abs": abs, "floor": math.floor,
       "ceil": math.ceil, "sin": math.sin, "cos": math.cos}
# T.sin / T.cos of the tile's data times a scale (session 40, h-math40): |x| <= 1, so the argument stays inside the
# functions' documented |x| <= 400000 (docs/language.md); the scale is rounded to float32 as the literal is
TRIG_SCALES = (1.0, 3.7, 977.3, 123456.7, 399999.9)
PVALS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def generate(seed):
    from .grammar import GROUP
    s = random.Random(f"scal38-{seed // GROUP}")
    v = random.Random(f"scal38-shape-{seed}")
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "scal", "scal": f, "sym": s.random() < 0.5}
    d["bm"] = s.choice((1, 8, 16)) if f != "unroll" else 16
    d["M"] = v.choice((1, 3, 17, 40))
    d["N"] = v.choice((1, 7, 16, 33)) if f != "unroll" else 16
    if f == "math":
        d["dt"] = s.choice(("float32", "float16", "bfloat16"))
        d["src"] = s.choice(("gm", "tile", "bx"))
        d["f1"], d["f2"], d["f3"] = s.choice(list(FNS)), s.choice(list(FNS)), s.choice(list(FNS))
        d["a"], d["b"] = s.choice((0.5, 1.0)), s.choice((0.0, 0.5))
        d["els"] = s.random() < 0.5
        d["f4"] = s.choice(list(FNS) + ["pow"])
        d["c"] = s.choice((0.5, 2.0, 3.0))
        d["hc"] = d["dt"] != "float32" and s.random() < 0.5   # the let's argument cast to the tile's dtype
        d["trig"] = s.choice((None, "sin", "cos"))   # a map of T.sin / T.cos of the data first
        d["big"] = v.choice(TRIG_SCALES)
        d["tcol"] = v.choice((None, "first", "last"))   # the map reads a column of a second tile as its argument
        d["p"] = [v.choice(PVALS), v.choice(PVALS), v.choice(PVALS), float(v.choice((0, 1, 4, 9)))]
        q = FNS[d["f2"]](d["p"][1])
        d["thr"] = round(q + v.choice((-0.25, 0.25)), 2)   # a quarter away from the value: no rounding decides it
    elif f == "unroll":
        d["dt"] = s.choice(("float16", "bfloat16"))
        d["U"] = s.choice((1, 2, 3, 4))
        d["cond"] = s.choice(("lt", "eq0", "mod"))
        d["shape"] = s.choice(("gemm", "vec"))
        d["S"] = s.choice((1, 2, 3))
        d["kloop"] = s.choice(("serial", "pipelined"))
    else:
        d["dt"] = s.choice(("float32", "float16", "int32"))
        d["where"] = s.choice(("tile", "gm"))
        d["thr"] = s.choice((-1.0, 0.0, 1.5))
    d["dt_in"] = d["dt_tile"] = d["dt_out"] = d["dt"]
    d["loop"] = "grid"
    return d


def tensors(d):
    f, dt = d["scal"], d["dt"]
    if f == "math":
        return [("X", ("M", "N"), dt, False), ("P", (4,), "float32", False), ("Y", ("M", "N"), dt, True)]
    if f == "unroll":
        if d["shape"] == "gemm":
            return [("X", ("M", 16), dt, False), ("W", (d["U"], 16, 16), dt, False),
                    ("Y", ("M", 16), "float32", True)]
        return [("X", (d["S"], "M", 16), dt, False), ("Y", ("M", 16 * d["U"]), "float32", True)]
    return [("X", ("M", "N"), dt, False), ("Y", ("M", "N"), dt, True)]


def source(d):
    body = {"math": _math_body, "unroll": _unroll_body, "dstore": _dstore_body}[d["scal"]](d)
    return kernel_text(d, tensors(d), body)


def _grid(d):
    bm = d["bm"]
    return f"with T.Kernel(T.ceildiv(M, {bm})) as bx:" if d["sym"] else f"with T.Kernel({-(-d['M'] // bm)}) as bx:"


def _arg(fn, x):
    """The argument of fn kept inside its domain (x is positive)."""
    return f"({x}) - 1.0" if fn in ("tanh", "erf", "sigmoid", "silu", "abs", "floor", "ceil") else x


def _math_body(d):
    bm, n, dt = d["bm"], d["N"], repr(d["dt"])
    par = {"gm": "P[{}]", "tile": "pt[{}]", "bx": None}[d["src"]]
    p0 = par.format(0) if par else f"T.cast(bx % 3, 'float32') * 0.5 + 0.25"
    p1 = par.format(1) if par else "P[1]"
    b = [_grid(d),
         f"    x = T.alloc_fragment(({bm}, {n}), {dt})",
         f"    T.copy(X[bx * {bm}, 0], x)"]
    if d["src"] == "tile":
        b += ["    pt = T.alloc_fragment((4,), 'float32')", "    T.copy(P, pt)"]
    f4 = (f"T.pow({d['c']!r}, k)" if d["f4"] == "pow" else f"T.{d['f4']}({_arg(d['f4'], 'k * 0.25 + 0.5')})")
    if d.get("hc"):   # (a float16 / bfloat16 call: its float32 value until stored, hunt38 F2)
        p0 = f"T.cast({p0}, {dt})"
    arg1 = f"({p0}) * {d['a']!r} + {d['b']!r}"
    if d.get("trig"):
        arg = "x[i, j]"
        if d.get("tcol"):   # a per-row value read down a column (gathered into a 1-D tile on ascend910b, session 40)
            b += [f"    w = T.alloc_fragment(({bm}, {n}), {dt})", f"    T.copy(X[bx * {bm}, 0], w)"]
            arg = f"w[i, {0 if d['tcol'] == 'first' else n - 1}]"
        b += [f"    for i, j in T.Parallel({bm}, {n}):",
              f"        x[i, j] = T.{d['trig']}({arg} * {d['big']!r})"]
    b += [f"    s = T.{d['f1']}({_arg(d['f1'], arg1)})",
          f"    if T.{d['f2']}({p1}) > {d['thr']!r}:",
          f"        for i, j in T.Parallel({bm}, {n}):",
          f"            x[i, j] = x[i, j] * s + T.{d['f3']}({_arg(d['f3'], p1)})"]
    if d["els"]:
        b += ["    else:",
              f"        for i, j in T.Parallel({bm}, {n}):",
              "            x[i, j] = x[i, j] - s"]
    b += ["    nk = T.cast(T.floor(T.sqrt(P[3])), 'int32')",
          "    for k in T.serial(nk):",
          f"        for i, j in T.Parallel({bm}, {n}):",
          f"            x[i, j] = x[i, j] * 0.5 + {f4}",
          f"    T.copy(x, Y[bx * {bm}, 0])"]
    return b


def _cond(d, var):
    return {"lt": f"{var} < {d['U'] - 1}", "eq0": f"{var} == 0", "mod": f"{var} % 2 == 0"}[d["cond"]]


def _unroll_body(d):
    bm, dt, U = d["bm"], repr(d["dt"]), d["U"]
    other = d["cond"] != "lt"   # an else arm
    if d["shape"] == "gemm":
        b = [_grid(d),
             f"    xs = T.alloc_shared(({bm}, 16), {dt})",
             f"    ws = T.alloc_shared((16, 16), {dt})",
             f"    acc = T.alloc_fragment(({bm}, 16), 'float32')",
             f"    h = T.alloc_fragment(({bm}, 16), 'float32')",
             f"    T.copy(X[bx * {bm}, 0], xs)",
             f"    for l in T.unroll({U}):",
             "        T.copy(W[l, 0, 0], ws)",
             "        T.gemm(xs, ws, acc, clear_accum=True)",
             f"        if {_cond(d, 'l')}:",
             f"            for i, j in T.Parallel({bm}, 16):",
             "                h[i, j] = T.max(acc[i, j], 0.0) * 0.5"]
        if other:
            b += ["        else:",
                  f"            for i, j in T.Parallel({bm}, 16):",
                  "                h[i, j] = acc[i, j] * 0.25"]
        b += [f"        if l < {U - 1}:", "            T.copy(h, xs)",
              f"    T.copy(acc, Y[bx * {bm}, 0])"]
        return b
    loop = (f"for t in T.Pipelined({d['S']}, num_stages=2):" if d["kloop"] == "pipelined" else
            f"for t in T.serial({d['S']}):")
    b = [_grid(d),
         f"    xs = T.alloc_fragment(({bm}, 16), {dt})",
         f"    acc = T.alloc_fragment(({bm}, {16 * U}), 'float32')",
         f"    h = T.alloc_fragment(({bm}, 16), 'float32')",
         "    T.clear(acc)",
         "    T.clear(h)",
         "    " + loop,
         f"        T.copy(X[t, bx * {bm}, 0], xs)",
         f"        for l in T.unroll({U}):",
         f"            if {_cond(d, 'l')}:",
         f"                for i, j in T.Parallel({bm}, 16):",
         "                    h[i, j] = h[i, j] * 0.5 + xs[i, j]"]
    if other:
        b += ["            else:",
              f"                for i, j in T.Parallel({bm}, 16):",
              "                    h[i, j] = h[i, j] - xs[i, j] * (l + 1)"]
    b += [f"            for i, j in T.Parallel({bm}, 16):",
          "                acc[i, l * 16 + j] = acc[i, l * 16 + j] + h[i, j]"]
    b += [f"    T.copy(acc, Y[bx * {bm}, 0])"]
    return b


def _dstore_body(d):
    bm, n, dt = d["bm"], d["N"], repr(d["dt"])
    thr = d["thr"] if d["dt"] != "int32" else int(d["thr"])
    b = [_grid(d),
         f"    x = T.alloc_fragment(({bm}, {n}), {dt})",
         f"    T.copy(X[bx * {bm}, 0], x)"]
    if d["where"] == "tile":
        return b + [f"    y = T.alloc_fragment(({bm}, {n}), {dt})",
                    f"    T.fill(y, {'-7' if d['dt'] == 'int32' else '-7.0'})",
                    f"    for i, j in T.Parallel({bm}, {n}):",
                    f"        if x[i, j] > {thr!r}:",
                    "            y[i, j] = x[i, j] * 2 + 1",
                    f"    T.copy(y, Y[bx * {bm}, 0])"]
    m = "M" if d["sym"] else str(d["M"])
    return b + [f"    for i, j in T.Parallel({bm}, {n}):",
                f"        if bx * {bm} + i < {m}:",
                f"            if x[i, j] > {thr!r}:",
                f"                Y[bx * {bm} + i, j] = x[i, j] * 2 + 1",
                "            else:",
                f"                Y[bx * {bm} + i, j] = x[i, j] - 3"]


# ---------------------------------------------------------------------------------------------
# Inputs and reference

def inputs(d):
    rng = np.random.default_rng(d["seed"])
    out = []
    for name, dm, dt, o in tensors(d):
        if o:
            continue
        sh = shape(d, dm)
        if name == "P":
            out.append(np.array(d["p"], np.float32))
        elif name == "W":
            out.append((rng.integers(-4, 5, size=sh) / 8).astype(_np(dt)))
        elif dt == "int32":
            out.append(rng.integers(-4, 5, size=sh).astype(np.int32))
        else:
            out.append((rng.integers(-4, 5, size=sh) / 4).astype(_np(dt)))
    return out


def _fn(name, x):
    return FNS[name](x - 1.0 if _arg(name, "x") != "x" else x)


def reference(d):
    """([float64 outputs], [a Track per output])."""
    ins = inputs(d)
    f, dt = d["scal"], d["dt"]
    if f == "math":
        x, p = ins[0].astype(np.float64), [float(v) for v in ins[1]]
        M, bm = x.shape[0], d["bm"]
        if d.get("trig"):   # the argument as the map computes it: one float32 product of exact operands
            a = x if not d.get("tcol") else np.broadcast_to(x[:, :1] if d["tcol"] == "first" else x[:, -1:], x.shape)
            t = (a * float(np.float32(d["big"]))).astype(np.float32).astype(np.float64)
            x = _conv(np.sin(t) if d["trig"] == "sin" else np.cos(t), dt)
        rows = np.arange(M) // bm
        p0 = p[0] if d["src"] != "bx" else (rows % 3) * 0.5 + 0.25
        if d.get("hc"):
            p0 = _conv(np.asarray(p0, np.float64), dt)
        s = np.vectorize(lambda v: _fn(d["f1"], v * d["a"] + d["b"]))(np.asarray(p0, np.float64))
        s = np.broadcast_to(np.asarray(s, np.float64).reshape(-1, 1) if d["src"] == "bx" else s, x.shape)
        mag = np.abs(x) + (1.0 if d.get("trig") else 0.0)   # (sin / cos: 1.53e-7 off, absolute)
        if FNS[d["f2"]](p[1]) > d["thr"]:
            g = _fn(d["f3"], p[1])
            x = _conv(x * s + g, dt)
            mag = mag * np.abs(s) + abs(g)
        elif d["els"]:
            x = _conv(x - s, dt)
            mag = mag + np.abs(s)
        for k in range(int(math.floor(math.sqrt(p[3])))):
            t = d["c"] ** k if d["f4"] == "pow" else _fn(d["f4"], k * 0.25 + 0.5)
            x = _conv(x * 0.5 + t, dt)
            mag = mag * 0.5 + abs(t)
        return [x], [Track(mag, 64 * U32 + 4 * UNIT[dt])]
    if f == "unroll":
        U = d["U"]
        cond = {"lt": lambda l: l < U - 1, "eq0": lambda l: l == 0, "mod": lambda l: l % 2 == 0}[d["cond"]]
        other = d["cond"] != "lt"
        if d["shape"] == "gemm":
            h, w = ins[0].astype(np.float64), ins[1].astype(np.float64)
            hn = None   # (the last layer's h: not read)
            for l in range(U):
                acc = h @ w[l]
                hn = np.maximum(acc, 0) * 0.5 if cond(l) else (acc * 0.25 if other else hn)
                if l < U - 1:
                    h = _conv(hn, dt)
            return [acc], [Track(np.abs(acc) + 1.0, 8 * U32)]
        x = ins[0].astype(np.float64)
        h = np.zeros(x.shape[1:])
        acc = np.zeros((U,) + x.shape[1:])   # (the kernel's (M, 16 U): layer l in columns 16 l ...)
        for t in range(d["S"]):
            for l in range(U):
                if cond(l):
                    h = h * 0.5 + x[t]
                elif other:
                    h = h - x[t] * (l + 1)
                acc[l] = acc[l] + h
        acc = np.concatenate(list(acc), axis=1)
        return [acc], [Track(np.abs(acc) + 1.0, 8 * U32)]
    x = ins[0].astype(np.float64)
    hit = x > d["thr"] if dt != "int32" else x > int(d["thr"])
    if d["where"] == "tile":
        y = np.where(hit, x * 2 + 1, -7.0)
    else:
        y = np.where(hit, x * 2 + 1, x - 3)
    return [_conv(y, dt) if dt != "int32" else y], [Track(np.abs(y), 0.0, exact=True)]


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    return d["M"] >= 1 and d["N"] >= 1


def candidates(d):
    """Simpler variants: fewer copies, no else arm, a serial loop, smaller shapes."""
    out = []

    def put(**kw):
        out.append(dict(d, **kw))
    if d["scal"] == "math":
        if d.get("trig"):
            put(trig=None)
        if d.get("tcol"):
            put(tcol=None)
        if d["els"]:
            put(els=False)
        if d["src"] != "gm":
            put(src="gm")
        if d["p"][3] > 0:
            put(p=d["p"][:3] + [0.0])
    if d["scal"] == "unroll":
        if d["U"] > 1:
            put(U=d["U"] - 1)
        if d["S"] > 1:
            put(S=1)
        if d["kloop"] == "pipelined":
            put(kloop="serial")
    for k in ("M", "N"):
        if d[k] > 1 and not (k == "N" and d["scal"] == "unroll"):
            put(**{k: max(1, d[k] // 2)})
    if d["sym"]:
        put(sym=False)
    return out
