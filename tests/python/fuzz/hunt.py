"""The twenty-first stream (session 36, h-hunt36): what session 35 changed, as programs of kind ``hunt``.

Each program is one of three forms (``d["hunt"]``), with its reference here (every output exact):

* ``hash``   int32 hashes: X (M, N) int32 (values over all of int32, its edges included) and a seed
  ``Sd[0]`` read as a scalar; two to four map steps over a (bm, N) int32 tile, each a template of
  STEPS (a product by a constant outside 16 bits (past int32 too) or a power of two, the seed added or xor-ed, an
  xor-shift, an `&` with a constant in [0, 2^31), a product of the global element index, a
  rotation by shifts), each step's value wrapped into int32 where it is stored; Y the hash, and
  (``drop``) a dropout of a float input F by the hash's low 10 bits (``T.where((h & 1023) < P,
  F * 2, 0)``). The language wraps int32 arithmetic modulo 2^32 (docs/language.md); on ascend910b
  such products are computed from 16-bit pieces (session 35, h-mul35).
* ``acc``    outputs written only by ``T.atomic_add`` (an ``out_idx`` output, zero at the start on
  every target: session 35, h-api35): a scatter-add of X's row blocks into ``Out[Idx[t], :]``
  (``scatter``), a histogram of Idx (``hist``: ``T.atomic_add(H[Idx[b]], 1)`` or a weight), or
  split partial sums over a grid dimension (``parts``: S programs add their (bm, bn) block into
  every element); float32 / int32 / float16 / bfloat16, small integers (every sum exact in any
  order); the token count symbolic, 0 a tenth of the time (no program runs: all zeros).
* ``imask``  masks read from index tensors: per-row labels / lengths ``Lab`` (int32, -1 = ignore,
  some past N) loaded into an int32 tile, compared with the map's global column (one-hot,
  ``j < len``, ignore rows), combined with an index mask on the rows (``r0 + i < M``) and a data
  comparison; two outputs (a T.where and an if in the map).

Structure from ``hunt36-<seed // GROUP>``, shapes and values from ``hunt36-shape-<seed>``;
``python -m fuzz --stream hunt`` runs only these (grammar.generate does not draw them).
"""
import random

import numpy as np

from .llm import kernel_text, shape
from .llm2 import Track

FORMS = ("hash", "acc", "imask")
BIG = (1103515245, -1640531535, 668265263, -2048144777, 374761393, 22695477, 131071, -2147483647,
       2654435761, 6364136223846793005)   # (the last two past int32: hunt36 F3)
POW = (196608, -65536, 1048576, 65536 * 3 - 65536 * 7)   # ch * 2^16 and 2^k forms
STEPS = (
    "h * {c} + s",
    "(h ^ s) * {c}",
    "h ^ (h >> {k})",
    "(h * {c}) & 2147483647",
    "h * {p}",
    "h + ((bx * {bm} + i) * 4099 + j) * {c}",
    "((h >> 16) & 65535) | (h << 16)",
    "s - h * {c}",
    "~(h * {c})",
)
ACC_DT = ("float32", "int32", "float16", "bfloat16")


def generate(seed):
    from .grammar import GROUP
    s = random.Random(f"hunt36-{seed // GROUP}")
    v = random.Random(f"hunt36-shape-{seed}")
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "hunt", "hunt": f, "sym": s.random() < 0.5}
    if f == "hash":
        d["bm"] = s.choice((1, 8, 16, 32))
        d["steps"] = [s.choice(STEPS).format(c=s.choice(BIG), p=s.choice(POW), k=s.choice((7, 13, 15, 16)),
                                             bm="{bm}") for _ in range(s.randint(2, 4))]
        d["drop"] = s.random() < 0.4
        d["P"] = s.choice((0, 1, 300, 900, 1024))
        d["M"] = v.choice((1, 3, 17, 33, 64, 100))
        d["N"] = v.choice((1, 7, 16, 19, 40))
    elif f == "acc":
        d["acc"] = s.choice(("scatter", "hist", "parts"))
        d["dt"] = s.choice(ACC_DT)
        d["bd"] = s.choice((8, 16, 32))
        d["weight"] = s.random() < 0.5
        d["rows"] = s.choice((1, 3, 7))
        d["S"] = s.choice((1, 2, 3, 5))
        d["M"] = 0 if d["sym"] and v.random() < 0.1 else v.choice((1, 5, 13, 40))
        d["N"] = v.choice((1, 9, 16, 37))
    else:
        d["imask"] = s.choice(("onehot", "len", "ignore"))
        d["dt"] = s.choice(("float32", "float16", "bfloat16"))
        d["bm"] = s.choice((1, 8, 16))
        d["bn"] = s.choice((16, 32))
        d["data"] = s.random() < 0.5
        d["M"] = v.choice((1, 5, 17, 40))
        d["N"] = v.choice((1, 9, 16, 33, 70))
    # (the keys the shared comparison and reducer read: the data's dtypes, no loop to simplify)
    d["dt_in"] = d["dt_tile"] = d["dt_out"] = d.get("dt", "int32")
    d["loop"] = "grid"
    return d


def tensors(d):
    f = d["hunt"]
    if f == "hash":
        n = d["N"]   # (a tile's width: a constant; M symbolic in `sym` programs)
        ts = [("X", ("M", n), "int32", False), ("Sd", (1,), "int32", False)]
        if d["drop"]:
            ts.append(("F", ("M", n), "float32", False))
        ts.append(("Y", ("M", n), "int32", True))
        if d["drop"]:
            ts.append(("Z", ("M", n), "float32", True))
        return ts
    if f == "acc":
        a = d["acc"]
        if a == "scatter":
            return [("X", ("M", "N"), d["dt"], False), ("Idx", ("M",), "int32", False),
                    ("Out", (d["rows"], "N"), d["dt"], True)]
        if a == "hist":
            return [("Idx", ("M",), "int32", False), ("W", ("M",), d["dt"], False),
                    ("H", (d["rows"] + 2,), d["dt"], True)]
        return [("X", (d["S"], "M", "N"), d["dt"], False), ("Out", ("M", "N"), d["dt"], True)]
    return [("X", ("M", "N"), d["dt"], False), ("Lab", ("M",), "int32", False),
            ("Y", ("M", "N"), d["dt"], True), ("Z", ("M", "N"), d["dt"], True)]


def source(d):
    body = {"hash": _hash_body, "acc": _acc_body, "imask": _imask_body}[d["hunt"]](d)
    return kernel_text(d, tensors(d), body)


def _hash_body(d):
    bm = d["bm"]
    b = [f"with T.Kernel(T.ceildiv(M, {bm})) as bx:" if d["sym"] else
         f"with T.Kernel({-(-d['M'] // bm)}) as bx:",
         "    s = Sd[0]",
         f"    t = T.alloc_fragment(({bm}, {d['N']}), 'int32')",
         f"    T.copy(X[bx * {bm}, 0], t)"]
    n = d["N"]
    for st in d["steps"]:
        b += [f"    for i, j in T.Parallel({bm}, {n}):",
              "        t[i, j] = " + st.replace("{bm}", str(bm)).replace("h", "t[i, j]")]
    b.append(f"    T.copy(t, Y[bx * {bm}, 0])")
    if d["drop"]:
        b += [f"    z = T.alloc_fragment(({bm}, {n}), 'float32')",
              f"    T.copy(F[bx * {bm}, 0], z)",
              f"    for i, j in T.Parallel({bm}, {n}):",
              f"        z[i, j] = T.where((t[i, j] & 1023) < {d['P']}, z[i, j] * 2.0, 0.0)",
              f"    T.copy(z, Z[bx * {bm}, 0])"]
    return b


def _acc_body(d):
    a, bd, dt = d["acc"], d["bd"], d["dt"]
    m = "M" if d["sym"] else d["M"]
    n = "N" if d["sym"] else d["N"]
    if a == "scatter":
        return [f"with T.Kernel({m}, T.ceildiv({n}, {bd})) as (t, j):",
                f"    x = T.alloc_fragment(({bd},), {dt!r})",
                f"    T.copy(X[t, j * {bd}], x)",
                f"    T.atomic_add(Out[Idx[t], j * {bd}], x)"]
    if a == "hist":
        return [f"with T.Kernel({m}) as b:",
                f"    T.atomic_add(H[Idx[b]], {'W[b]' if d['weight'] else '1'})"]
    return [f"with T.Kernel(T.ceildiv({m}, 8), T.ceildiv({n}, {bd}), {d['S']}) as (i, j, p):",
            f"    x = T.alloc_fragment((8, {bd}), {dt!r})",
            f"    T.copy(X[p, i * 8, j * {bd}], x)",
            f"    T.atomic_add(Out[i * 8, j * {bd}], x)"]


def _imask_body(d):
    bm, bn, dt = d["bm"], d["bn"], d["dt"]
    m = "M" if d["sym"] else d["M"]
    n = "N" if d["sym"] else d["N"]
    cond = {"onehot": "by * {bn} + j == lb[i]", "len": "by * {bn} + j < lb[i]",
            "ignore": "lb[i] >= 0 and by * {bn} + j != lb[i]"}[d["imask"]].format(bn=bn)
    cond = f"({cond}) and bx * {bm} + i < {m}"
    if d["data"]:
        cond = f"{cond} or x[i, j] > 1"
    return [f"with T.Kernel(T.ceildiv({m}, {bm}), T.ceildiv({n}, {bn})) as (bx, by):",
            f"    x = T.alloc_fragment(({bm}, {bn}), {dt!r})",
            f"    y = T.alloc_fragment(({bm}, {bn}), {dt!r})",
            f"    z = T.alloc_fragment(({bm}, {bn}), {dt!r})",
            f"    lb = T.alloc_fragment(({bm},), 'int32')",
            f"    T.copy(X[bx * {bm}, by * {bn}], x)",
            f"    T.copy(X[bx * {bm}, by * {bn}], z)",
            f"    T.copy(Lab[bx * {bm}], lb)",
            f"    for i, j in T.Parallel({bm}, {bn}):",
            f"        on = {cond}",
            "        y[i, j] = T.where(on, x[i, j] - 1.0, x[i, j] * 0.5)",
            "        if on:",
            "            z[i, j] = x[i, j] + 2.0",
            f"    T.copy(y, Y[bx * {bm}, by * {bn}])",
            f"    T.copy(z, Z[bx * {bm}, by * {bn}])"]


# ---------------------------------------------------------------------------------------------
# Inputs and reference

EDGES = (0, 1, -1, 2**31 - 1, -2**31, 65535, 65536, -65536, 32767, -32768, 123456789, -987654321)


def _np(dt):
    from tilewright.testing import np_dtype
    return np_dtype(dt)


def inputs(d):
    rng = np.random.default_rng(d["seed"])
    out = []
    for name, dm, dt, o in tensors(d):
        if o:
            continue
        sh = shape(d, dm)
        if name == "X" and d["hunt"] == "hash":
            x = rng.integers(-2**31, 2**31, size=sh, dtype=np.int64).reshape(-1)
            x[:min(x.size, len(EDGES))] = EDGES[:x.size]
            out.append(x.reshape(sh).astype(np.int32))
        elif name == "Sd":
            out.append(np.array([rng.integers(-2**31, 2**31)], np.int32))
        elif name == "Idx":
            hi = d["rows"] + (2 if d["acc"] == "hist" else 0)
            out.append(rng.integers(0, hi, size=sh).astype(np.int32))
        elif name == "Lab":
            out.append(rng.integers(-1, d["N"] + 2, size=sh).astype(np.int32))
        else:
            out.append(rng.integers(-4, 5, size=sh).astype(_np(dt)))
    return out


def _wrap(v):
    return ((v + 2**31) % 2**32) - 2**31


def _step(st, h, s, i, j):
    """One hash step on Python ints (the language's int64 arithmetic, wrapped into int32 at the store)."""
    return _wrap(eval(st.replace("{bm}", "0"), {}, {"h": h, "s": s, "bx": 0, "i": i, "j": j}))


def reference(d):
    """([float64 outputs], [a Track per output]): every output exact."""
    ins = inputs(d)
    f = d["hunt"]
    if f == "hash":
        x, sd = ins[0], int(ins[1][0])
        M, N = x.shape
        y = np.zeros((M, N))
        for i in range(M):
            for j in range(N):
                h = int(x[i, j])
                for st in d["steps"]:
                    h = _step(st, h, sd, i, j)
                y[i, j] = h
        outs = [y]
        if d["drop"]:
            f64 = ins[2].astype(np.float64)
            outs.append(np.where((y.astype(np.int64) & 1023) < d["P"], f64 * 2.0, 0.0))
        return outs, [Track(np.zeros_like(o), 0.0, exact=True) for o in outs]
    if f == "acc":
        a = d["acc"]
        if a == "scatter":
            x, idx = ins[0].astype(np.float64), ins[1]
            out = np.zeros((d["rows"], x.shape[1]))
            np.add.at(out, idx, x)
        elif a == "hist":
            idx, w = ins[0], ins[1].astype(np.float64)
            out = np.zeros(d["rows"] + 2)
            np.add.at(out, idx, w if d["weight"] else 1.0)
        else:
            out = ins[0].astype(np.float64).sum(axis=0)
        return [out], [Track(np.zeros_like(out), 0.0, exact=True)]
    x, lab = ins[0].astype(np.float64), ins[1]
    M, N = x.shape
    j = np.arange(N)[None, :]
    lb = lab[:, None]
    on = {"onehot": j == lb, "len": j < lb, "ignore": (lb >= 0) & (j != lb)}[d["imask"]]
    if d["data"]:
        on = on | (x > 1)
    return ([np.where(on, x - 1.0, x * 0.5), np.where(on, x + 2.0, x)],
            [Track(np.zeros((M, N)), 0.0, exact=True)] * 2)


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    if d["hunt"] == "hash":
        return d["M"] >= 1 and d["N"] >= 1 and 1 <= len(d["steps"])
    return d["M"] >= 0 and d["N"] >= 1


def candidates(d):
    """Simpler variants: fewer hash steps, no dropout, no data condition, smaller shapes."""
    out = []

    def put(**kw):
        out.append(dict(d, **kw))
    if d["hunt"] == "hash":
        for k in range(len(d["steps"])):
            if len(d["steps"]) > 1:
                put(steps=d["steps"][:k] + d["steps"][k + 1:])
        if d["drop"]:
            put(drop=False)
    if d.get("data"):
        put(data=False)
    if d.get("weight"):
        put(weight=False)
    for k in ("M", "N"):
        for v in (1, d[k] // 2):
            if 1 <= v < d[k]:
                put(**{k: v})
    if d["sym"]:
        put(sym=False)
    return out
