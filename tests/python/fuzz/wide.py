"""The nineteenth stream (session 26): wide programs, as programs of kind ``wide``.

Programs whose tiles exceed the AIV's UB (192 KiB), so that ascend910b's capacity passes run: the
rows of a block in groups (``split_rows``: a block of 2-6000 rows of up to 12000 columns), a row
in column blocks (``split_cols``: rows of 4000-152065 elements), copies of more than 4095 rows
(tiles of 4095-6000 rows of 1-8 columns), and ``T.Pipelined`` stages retried with fewer when
the staged tiles overflow L1. Each program is one of three forms (``d["wide"]``), with its float64
reference and tolerances here:

* ``row``   whole-row tiles as docs/language.md teaches them: program bx copies rows
  ``bx * bm`` of X (float32 / float16 / bfloat16, read into a float32 tile, a row tail when bm
  does not divide M) and maps them by a chain of elementwise statements (``ops``: a scale, a
  constant added, a per-column weight ``w[j]`` or bias ``bb[j]`` read from a (N,) tensor of any
  float dtype, a residual tile of a second tensor, relu, ``exp``, a cast through float16 /
  bfloat16), then one row computation (``red``): none, a row sum / max / min (float32 (M,)), an
  argmax (int32 ids: reduce_max, ``T.where(x == best, j, N)``, reduce_min; inputs with many ties),
  a log-sum-exp, softmax, log_softmax, rms_norm or layer_norm (times an optional weight row), the
  (M, N) result stored in the output dtype by a copy that converts or through a tile of that
  dtype. Shapes (``shape``): ``group`` (a block of rows that does not fit, each row does),
  ``wide`` (1-8 rows of 4000-152065 columns: a row does not fit), ``tall`` (4095-6000 rows of
  1-8 columns: a UB row is a 32 B block) and ``fit`` (small: the passes do not run).
* ``chunk`` the same computations with the loop over column chunks written by the user: a
  ``T.serial`` / ``T.Pipelined`` (2-3 stages) loop over ``T.ceildiv(N, bn)`` chunks of bn columns
  (a column window with a tail: reads past N are 0, stores past N are not written), running
  reductions merged with ``clear=False`` after the columns past N are set to the identity by a
  ``T.where``; softmax in three passes, log-sum-exp and rms_norm in two.
* ``gemm``  a gemm prologue at odd M / N / K (float16 / bfloat16): C = relu?(A @ W * 0.5 + bias[j])
  over a grid of (bm, bn) blocks, A and W staged by the kernel in a ``T.Pipelined`` loop over K
  chunks (2-4 stages of up to 256 x 256 tiles: the staged copies may overflow L1 and run with
  fewer) or read from the tensors by a whole-K gemm (``T.gemm(A[rows, :], W[:, cols], acc)``:
  K chunks with a run-time tail; blocks that divide M and N).

A program may run its work under a condition read from a tensor (``cond``: ``if Lens[bx] > k:``,
Lens int32 in [0, 4]); rows of the programs that skip are undefined (not compared).

Structure and shapes from ``wide-<seed // GROUP>`` (the GROUP programs of a group share one
compiled kernel), values from the seed; ``python -m fuzz --stream wide`` runs only these
(grammar.generate does not draw them: the other streams' programs are unchanged).
"""
import math
import random

import numpy as np

from .llm import FLOATS, NINF, STEP, U32, UNIT, _conv, _lit, _np_dtype, kernel_text, shape
from .llm2 import Track, _alloc, tolerance  # noqa: F401 (the stream's tolerance is llm2's)

FORMS = ("row", "chunk", "gemm")
SHAPES = ("group", "wide", "tall", "fit")
REDS = ("none", "sum", "max", "min", "argmax", "lse", "softmax", "log_softmax", "rms", "layer")
CHUNK_REDS = ("none", "sum", "max", "min", "lse", "softmax", "rms")
OPS = ("scale", "add", "wmul", "badd", "res", "relu", "exp", "cast")
EXACT_OPS = ("scale", "add", "wmul", "badd", "res", "relu")   # exact on halves (argmax: ties must be ties)
SCALES = (0.5, 2.0, -1.0, 0.25, 1.5)
ADDS = (1.0, -0.5, 2.5)
EPS = 1e-5
MAX_ELEMS = 1_500_000   # M x N of one program past its first row block (the simulator's time)
STATS = ("sum", "max", "min", "lse")   # row results stored as an (M,) float32 tensor


def _ops(s, exact):
    names = EXACT_OPS if exact else OPS
    out = []
    for _ in range(s.choice((0, 1, 1, 2, 3))):
        n = s.choice(names)
        if n == "scale":
            out.append(["scale", s.choice(SCALES)])
        elif n == "add":
            out.append(["add", s.choice(ADDS)])
        elif n == "cast":
            out.append(["cast", s.choice(("float16", "bfloat16"))])
        else:
            out.append([n])
    return out


def _row_shape(s, d):
    c = d["shape"]
    if c == "group":
        N = s.choice((s.randint(1, 64), s.randint(65, 2048), s.randint(2049, 12000)))
        bm = max(2, min(6000, s.randint(30000, 250000) // N))
    elif c == "wide":
        N = s.choice((s.randint(4000, 49000), s.randint(49001, 152065), 151936, 152064, 152065, 65536, 49081))
        bm = s.choice((1, 1, 2, 3, 4, 8))
        if N < 30000:
            bm = s.choice((4, 8))
    elif c == "tall":
        N = s.randint(1, 8)
        bm = s.choice((4095, 4096, 4097, 6000, s.randint(4090, 6000)))
    else:
        N = s.randint(1, 600)
        bm = max(1, min(s.choice((1, 2, 8, 16, 33)), 8000 // N))
    return N, bm


def _rows(s, d, N, bm):
    nb = s.choice((1, 1, 2, 3))
    if nb * bm * N > MAX_ELEMS:
        nb = 1
    d["N"], d["bm"] = N, bm
    d["M"] = max(1, nb * bm - s.choice((0, 0, 1, bm // 2)))


def generate(seed):
    """The program of `seed` of this stream."""
    from .grammar import GROUP
    s = random.Random(f"wide-{seed // GROUP}")
    f = s.choice(("row", "row", "row", "chunk", "chunk", "gemm"))
    d = {"seed": seed, "kind": "wide", "wide": f, "sym": False, "loop": "grid", "stages": 2,
         "dt_tile": "float32", "dt_in": s.choice(FLOATS), "dt_out": s.choice(FLOATS)}
    d["cond"] = s.choice((0, 1, 2)) if s.random() < 0.25 else None
    if f == "gemm":
        d["dt_in"] = s.choice(("float16", "bfloat16"))
        d["mode"] = s.choice(("staged", "staged", "global"))
        d["bm"], d["bn"] = s.choice((16, 32, 64, 128)), s.choice((16, 32, 64, 128, 256))
        if d["bm"] * d["bn"] > 16384:
            d["bn"] = 16384 // d["bm"]
        d["bk"] = s.choice((16, 32, 64, 128, 256))
        d["loop"] = "pipelined"
        d["stages"] = s.choice((2, 3, 4))
        d["relu"] = s.random() < 0.5
        if d["mode"] == "global":   # (cpu does not clip a gemm's tensor region: whole blocks)
            d["M"], d["N"] = d["bm"] * s.randint(1, 3), d["bn"] * s.randint(1, 2)
        else:
            d["M"], d["N"] = s.randint(1, 300), s.randint(1, 300)
        d["K"] = s.choice((1, 15, 17, s.randint(1, 600), s.randint(600, 4100)))
        return d
    d["red"] = s.choice(REDS if f == "row" else CHUNK_REDS)
    d["ops"] = _ops(s, d["red"] == "argmax")
    d["wdt"] = s.choice(FLOATS)   # the per-column operands' tensors
    d["weight"] = d["red"] in ("rms", "layer") and s.random() < 0.6   # a norm's weight row
    d["out"] = s.choice(("copy", "tile"))   # the output's cast: by the copy, or by a map into a tile
    d["both"] = d["red"] in STATS + ("argmax",) and s.random() < 0.4   # the mapped rows stored too
    if f == "row":
        d["shape"] = s.choice(("group", "group", "wide", "wide", "tall", "fit"))
        d["inplace"] = s.random() < 0.5   # the row computations in x (fewer tiles)
        _rows(s, d, *_row_shape(s, d))
        if d["shape"] == "tall" and d["red"] in ("lse", "softmax", "log_softmax", "rms", "layer"):
            d["inplace"] = True
        return d
    d["loop"] = s.choice(("serial", "pipelined"))
    d["stages"] = s.choice((2, 3))
    N = s.choice((s.randint(1, 300), s.randint(300, 20000), s.randint(20000, 152065)))
    bm = s.choice((1, 2, 4, 8, 16, 33))
    bn = s.choice((64, 100, 128, 333, 512, 1000, 1024, 2048, 4096))
    while bm * bn > 8192:
        bn //= 2
    d["bn"] = bn
    _rows(s, d, N, bm)
    return d


# ---------------------------------------------------------------------------------------------
# Tensors and source

def _uses(d, name):
    return any(op[0] == name for op in d.get("ops", ()))


def _has_y(d):
    return d["red"] in ("none", "softmax", "log_softmax", "rms", "layer") or d["both"]


def tensors(d):
    lens = [("Lens", ("G",), "int32", False)] if d["cond"] is not None else []
    if d["wide"] == "gemm":
        return [("A", ("M", "K"), d["dt_in"], False), ("W", ("K", "N"), d["dt_in"], False),
                ("Bias", ("N",), "float32", False)] + lens + [("C", ("M", "N"), d["dt_out"], True)]
    ts = [("X", ("M", "N"), d["dt_in"], False)]
    if _uses(d, "wmul"):
        ts.append(("Wc", ("N",), d["wdt"], False))
    if _uses(d, "badd"):
        ts.append(("Bc", ("N",), d["wdt"], False))
    if _uses(d, "res"):
        ts.append(("Res", ("M", "N"), d["dt_in"], False))
    if d["weight"]:
        ts.append(("Gw", ("N",), d["wdt"], False))
    ts += lens
    if _has_y(d):
        ts.append(("Y", ("M", "N"), d["dt_out"], True))
    if d["red"] in STATS:
        ts.append(("S", ("M",), "float32", True))
    if d["red"] == "argmax":
        ts.append(("I", ("M",), "int32", True))
    return ts


def dims(d):
    """The description with the derived dimension G (the programs along the rows)."""
    x = dict(d)
    x["G"] = -(-d["M"] // d["bm"])
    return x


def source(d):
    body = {"row": _row_body, "chunk": _chunk_body, "gemm": _gemm_body}[d["wide"]](d)
    return kernel_text(dims(d), tensors(d), body)


def _ind(lines, n=1):
    return ["    " * n + x for x in lines]


def _guard(d, b, work):
    if d["cond"] is None:
        return work
    return [f"if Lens[{b}] > {d['cond']}:"] + _ind(work)


def _op_expr(op, x, col):
    """The expression of one elementwise op on `x` (element (i, j); col: the column index j of the
    per-column tiles)."""
    n = op[0]
    if n == "scale":
        return f"{x} * {_lit(op[1])}"
    if n == "add":
        return f"{x} + {_lit(op[1])}"
    if n == "wmul":
        return f"{x} * wc[{col}]"
    if n == "badd":
        return f"{x} + bc[{col}]"
    if n == "res":
        return f"{x} + r[i, j]"
    if n == "relu":
        return f"T.max({x}, 0.0)"
    if n == "exp":
        return f"T.exp({x} * 0.25)"
    return f"T.cast({x}, {op[1]!r})"


def _pre(d, bm, bn, rows, cols, wcol, again=False):
    """The copies of X (and the per-column / residual operands) into tiles of bm x bn and the ops'
    maps (each op one statement, in place); again: X read a second time (the per-column tiles hold
    their values still)."""
    out = [f"T.copy(X[{rows}, {cols}], x)"]
    if _uses(d, "wmul") and not again:
        out.append(f"T.copy(Wc[{wcol}], wc)")
    if _uses(d, "badd") and not again:
        out.append(f"T.copy(Bc[{wcol}], bc)")
    if _uses(d, "res"):
        out.append(f"T.copy(Res[{rows}, {cols}], r)")
    for op in d["ops"]:
        out += [f"for i, j in T.Parallel({bm}, {bn}):", f"    x[i, j] = {_op_expr(op, 'x[i, j]', 'j')}"]
    return out


def _allocs(d, bm, bn):
    b = [_alloc("x", (bm, bn), "float32")]
    if _uses(d, "wmul"):
        b.append(_alloc("wc", (bn,), "float32"))
    if _uses(d, "badd"):
        b.append(_alloc("bc", (bn,), "float32"))
    if _uses(d, "res"):
        b.append(_alloc("r", (bm, bn), "float32"))
    if d["weight"]:
        b.append(_alloc("gw", (bn,), "float32"))
    return b


def _store(d, bm, bn, src, rows, cols):
    """`src` (a float32 tile) stored into Y[rows, cols] in the output dtype."""
    if d["out"] == "tile":
        return [f"for i, j in T.Parallel({bm}, {bn}):", f"    y[i, j] = {src}[i, j]", f"T.copy(y, Y[{rows}, {cols}])"]
    return [f"T.copy({src}, Y[{rows}, {cols}])"]


def _row_body(d):
    bm, N, red = d["bm"], d["N"], d["red"]
    rows = f"bx * {bm}"
    b = _allocs(d, bm, N)
    work = _pre(d, bm, N, rows, "0", "0")
    if d["weight"]:
        work.append("T.copy(Gw[0], gw)")
    e = "x" if d["inplace"] else "e"
    if red in ("lse", "softmax", "log_softmax") and e == "e" or red in ("rms", "layer"):
        b.append(_alloc(e if red not in ("rms", "layer") else "t", (bm, N), "float32"))
    if _has_y(d) and d["out"] == "tile":
        b.append(_alloc("y", (bm, N), d["dt_out"]))
    par = f"for i, j in T.Parallel({bm}, {N}):"
    if d["both"]:
        work += _store(d, bm, N, "x", rows, "0")
    if red == "none":
        work += _store(d, bm, N, "x", rows, "0")
    elif red in ("sum", "max", "min"):
        b.append(_alloc("s", (bm,), "float32"))
        work += [f"T.reduce_{red}(x, s, dim=1)", f"T.copy(s, S[{rows}])"]
    elif red == "argmax":
        b += [_alloc("best", (bm,), "float32"), _alloc("pk", (bm, N), "int32"), _alloc("idx", (bm,), "int32")]
        work += ["T.reduce_max(x, best, dim=1)", par, f"    pk[i, j] = T.where(x[i, j] == best[i], j, {N})",
                 "T.reduce_min(pk, idx, dim=1)", f"T.copy(idx, I[{rows}])"]
    elif red in ("lse", "softmax", "log_softmax"):
        b += [_alloc("mx", (bm,), "float32"), _alloc("s", (bm,), "float32")]
        work += ["T.reduce_max(x, mx, dim=1)", par, f"    {e}[i, j] = T.exp(x[i, j] - mx[i])",
                 f"T.reduce_sum({e}, s, dim=1)"]
        if red == "lse":
            work += [f"for i in T.Parallel({bm}):", "    s[i] = mx[i] + T.log(s[i])", f"T.copy(s, S[{rows}])"]
        elif red == "softmax":
            work += [par, f"    {e}[i, j] = {e}[i, j] / s[i]"] + _store(d, bm, N, e, rows, "0")
        else:
            if e == "x":   # (x was overwritten by the exponentials: read X again)
                work += _pre(d, bm, N, rows, "0", "0", again=True)
            work += [f"for i in T.Parallel({bm}):", "    s[i] = mx[i] + T.log(s[i])", par,
                     "    x[i, j] = x[i, j] - s[i]"] + _store(d, bm, N, "x", rows, "0")
    else:   # rms / layer
        b += [_alloc("mu", (bm,), "float32"), _alloc("rs", (bm,), "float32")]
        if red == "layer":
            work += ["T.reduce_sum(x, mu, dim=1)", f"for i in T.Parallel({bm}):", f"    mu[i] = mu[i] / {N}",
                     par, "    x[i, j] = x[i, j] - mu[i]"]
        work += [par, "    t[i, j] = x[i, j] * x[i, j]", "T.reduce_sum(t, rs, dim=1)",
                 f"for i in T.Parallel({bm}):", f"    rs[i] = T.rsqrt(rs[i] / {N} + {_lit(EPS)})", par,
                 "    x[i, j] = x[i, j] * rs[i]" + (" * gw[j]" if d["weight"] else "")]
        work += _store(d, bm, N, "x", rows, "0")
    body = b + _guard(d, "bx", work)
    return [f"with T.Kernel({-(-d['M'] // bm)}) as bx:"] + _ind(body)


def _chunk_body(d):
    bm, bn, N, red = d["bm"], d["bn"], d["N"], d["red"]
    nc = -(-N // bn)
    rows, cols = f"bx * {bm}", f"c * {bn}"
    loop = (f"for c in T.Pipelined({nc}, num_stages={d['stages']}):" if d["loop"] == "pipelined"
            else f"for c in T.serial({nc}):")
    par = f"for i, j in T.Parallel({bm}, {bn}):"
    b = _allocs(d, bm, bn)
    if _has_y(d) and d["out"] == "tile":
        b.append(_alloc("y", (bm, bn), d["dt_out"]))
    pre = _pre(d, bm, bn, rows, cols, cols)
    if d["weight"]:
        pre.append(f"T.copy(Gw[{cols}], gw)")
    live = f"{cols} + j < {N}"

    def masked(ident):
        return [par, f"    x[i, j] = T.where({live}, x[i, j], {ident})"]

    work = []
    if red == "none" or d["both"]:
        work += [loop] + _ind(pre + _store(d, bm, bn, "x", rows, cols))
    if red in ("sum", "max", "min"):
        b.append(_alloc("s", (bm,), "float32"))
        ident = {"sum": "0.0", "max": NINF, "min": "T.infinity('float32')"}[red]
        work += [f"T.fill(s, {ident})", loop] + _ind(pre + masked(ident) + [f"T.reduce_{red}(x, s, dim=1, clear=False)"])
        work.append(f"T.copy(s, S[{rows}])")
    elif red in ("lse", "softmax"):
        b += [_alloc("mx", (bm,), "float32"), _alloc("s", (bm,), "float32")]
        work += [f"T.fill(mx, {NINF})", loop] + _ind(pre + masked(NINF) + ["T.reduce_max(x, mx, dim=1, clear=False)"])
        work += ["T.fill(s, 0.0)", loop] + _ind(pre + [par, f"    x[i, j] = T.where({live}, T.exp(x[i, j] - mx[i]), 0.0)",
                                                      "T.reduce_sum(x, s, dim=1, clear=False)"])
        if red == "lse":
            work += [f"for i in T.Parallel({bm}):", "    s[i] = mx[i] + T.log(s[i])", f"T.copy(s, S[{rows}])"]
        else:
            work += [loop] + _ind(pre + [par, "    x[i, j] = T.exp(x[i, j] - mx[i]) / s[i]"]
                                  + _store(d, bm, bn, "x", rows, cols))
    elif red == "rms":
        b.append(_alloc("rs", (bm,), "float32"))
        work += ["T.fill(rs, 0.0)", loop] + _ind(pre + [par, f"    x[i, j] = T.where({live}, x[i, j] * x[i, j], 0.0)",
                                                       "T.reduce_sum(x, rs, dim=1, clear=False)"])
        work += [f"for i in T.Parallel({bm}):", f"    rs[i] = T.rsqrt(rs[i] / {N} + {_lit(EPS)})"]
        work += [loop] + _ind(pre + [par, "    x[i, j] = x[i, j] * rs[i]" + (" * gw[j]" if d["weight"] else "")]
                              + _store(d, bm, bn, "x", rows, cols))
    body = b + _guard(d, "bx", work)
    return [f"with T.Kernel({-(-d['M'] // bm)}) as bx:"] + _ind(body)


def _gemm_body(d):
    bm, bn, bk, dt = d["bm"], d["bn"], d["bk"], d["dt_in"]
    b = [_alloc("acc", (bm, bn), "float32"), _alloc("bias", (bn,), "float32"), _alloc("y", (bm, bn), d["dt_out"])]
    if d["mode"] == "staged":
        b = [f"a = T.alloc_shared(({bm}, {bk}), {dt!r})", f"w = T.alloc_shared(({bk}, {bn}), {dt!r})"] + b
        work = ["T.clear(acc)", f"for k in T.Pipelined({-(-d['K'] // bk)}, num_stages={d['stages']}):",
                f"    T.copy(A[by * {bm}, k * {bk}], a)", f"    T.copy(W[k * {bk}, bx * {bn}], w)",
                "    T.gemm(a, w, acc)"]
    else:
        work = [f"T.gemm(A[by * {bm}:(by + 1) * {bm}, :], W[:, bx * {bn}:(bx + 1) * {bn}], acc, clear_accum=True)"]
    y = "acc[i, j] * 0.5 + bias[j]"
    work += [f"T.copy(Bias[bx * {bn}], bias)", f"for i, j in T.Parallel({bm}, {bn}):",
             f"    y[i, j] = {'T.max(' + y + ', 0.0)' if d['relu'] else y}", f"T.copy(y, C[by * {bm}, bx * {bn}])"]
    grid = f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}) as (bx, by):"
    return [grid] + _ind(b + _guard(d, "by", work))


# ---------------------------------------------------------------------------------------------
# Inputs, reference, tolerance

def inputs(d):
    """The input arrays (fixed by the seed): values multiples of 1/2 in [-4, 4] (many ties: an
    argmax's ids are exact); per-column operands multiples of 1/4 in [-2, 2]; lengths in [0, 4]."""
    rng = np.random.default_rng(d["seed"])
    dd = dims(d)
    out = []
    for name, dm, dt, o in tensors(d):
        if o:
            continue
        sh = shape(dd, dm)
        if name == "Lens":
            out.append(rng.integers(0, 5, size=sh).astype(np.int32))
        elif name in ("Wc", "Bc", "Gw", "Bias"):
            out.append((rng.integers(-8, 9, size=sh) / 4.0).astype(_np_dtype(dt)))
        else:
            out.append((rng.integers(-8, 9, size=sh) / 2.0).astype(_np_dtype(dt)))
    return out


def _apply(d, x, named):
    """(values, absolute error bounds) of the ops applied to x (float64), as the kernel computes
    them in float32 (each statement rounds once)."""
    v, e = x.copy(), np.zeros_like(x)
    for op in d["ops"]:
        n = op[0]
        if n == "scale":
            v, e = v * op[1], e * abs(op[1])
        elif n == "add":
            v = v + op[1]
        elif n == "wmul":
            w = named["Wc"][None, :]
            v, e = v * w, e * np.abs(w)
        elif n == "badd":
            v = v + named["Bc"][None, :]
        elif n == "res":
            v = v + named["Res"]
        elif n == "relu":
            v = np.maximum(v, 0.0)
        elif n == "exp":
            v = np.exp(v * 0.25)
            e = v * (np.expm1(0.25 * e) + 4 * U32)
        else:
            inexact = e > 0
            v = _conv(v, op[1])
            e = np.where(inexact, e + UNIT[op[1]] * np.abs(v) + STEP[op[1]], e)
            continue
        e = np.where(e > 0, e + U32 * np.abs(v), e)   # (exact halves stay exact in float32)
    return v, e


def _gemm_ref(d, ins):
    a, w, bias = ins[0], ins[1], ins[2]
    acc = a @ w   # exact: halves, K <= 4100 (|sum| < 2^24 quarters)
    y = acc * 0.5 + bias[None, :]
    return np.maximum(y, 0.0) if d["relu"] else y


def reference(d):
    """([float64 outputs], [a Track per output]); rows of programs that skip are NaN."""
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    names = [t[0] for t in tensors(d) if not t[3]]
    named = dict(zip(names, ins))
    M, N, bm = d["M"], d["N"], d["bm"]
    if d["cond"] is not None:
        lens = named["Lens"]
        blk = lens > d["cond"]
        work = np.repeat(blk, bm)[:M]   # (the programs along the rows: bx, or the gemm's by)
    else:
        work = np.ones(M, bool)
    nan_rows = lambda y: np.where(work.reshape((-1,) + (1,) * (y.ndim - 1)), y, np.nan)  # noqa: E731
    if d["wide"] == "gemm":
        y = _gemm_ref(d, ins)
        return [nan_rows(_conv(y, d["dt_out"]))], [Track(np.abs(y), UNIT[d["dt_out"]])]
    x = named["X"]
    v, e = _apply(d, x, named)
    red, dto = d["red"], d["dt_out"]
    outs, trs = [], []
    emax = e.max(axis=1) if N else np.zeros(M)
    inexact_sum = U32 * (N + 16)

    def y_out(y, err):
        outs.append(nan_rows(_conv(y, dto)))
        trs.append(Track(err, 1.0, UNIT[dto] * np.abs(y)))

    if d["both"] or red == "none":
        y_out(v, e)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if red == "sum":
            s = v.sum(axis=1)
            exact = not e.any() and _exact_sum(v)
            err = np.zeros(M) if exact else e.sum(axis=1) + inexact_sum * np.abs(v).sum(axis=1)
            outs.append(nan_rows(s))
            trs.append(Track(err, 1.0, U32 * np.abs(s)))
        elif red in ("max", "min"):
            s = v.max(axis=1) if red == "max" else v.min(axis=1)
            outs.append(nan_rows(s))
            trs.append(Track(emax, 1.0, U32 * np.abs(s)))
        elif red == "argmax":
            outs.append(nan_rows(np.argmax(v, axis=1).astype(np.float64)))
            trs.append(Track(0.0, 0.0, exact=True))
        elif red in ("lse", "softmax", "log_softmax"):
            mx = v.max(axis=1, keepdims=True)
            p = np.exp(v - mx)
            tot = p.sum(axis=1, keepdims=True)
            rel_s = inexact_sum + 4 * U32 * (1 + np.abs(v - mx).max(axis=1, keepdims=True)) + 2 * emax[:, None]
            lse = mx + np.log(tot)
            if red == "lse":
                outs.append(nan_rows(lse[:, 0]))
                trs.append(Track(rel_s[:, 0] + U32 * (np.abs(lse[:, 0]) + np.abs(mx[:, 0])), 1.0))
            elif red == "softmax":
                y = p / tot
                rel = rel_s + e + emax[:, None] + 4 * U32 * (1 + np.abs(v - mx))
                y_out(y, y * rel + 2.0 ** -126)
            else:
                y = v - lse
                y_out(y, e + rel_s + U32 * (np.abs(v) + np.abs(lse)))
        elif red in ("rms", "layer"):
            g = named["Gw"][None, :] if d["weight"] else np.ones((1, N))
            if red == "layer":
                mu = v.mean(axis=1, keepdims=True)
                emu = (e.sum(axis=1, keepdims=True) + U32 * (np.abs(v).sum(axis=1, keepdims=True) + 4.0)) / N * 2
            else:
                mu, emu = np.zeros((M, 1)), np.zeros((M, 1))
            xc = v - mu
            r = 1.0 / np.sqrt((xc * xc).sum(axis=1, keepdims=True) / N + EPS)
            y = xc * r * g
            rel = inexact_sum + 8 * U32
            # the mean's and the ops' errors move x - mean; their effect on r: relative 2 (e / |x|) at most
            ex = e + emu
            rel_r = rel + 2 * np.where(np.abs(xc).max(axis=1, keepdims=True) > 0,
                                       ex.max(axis=1, keepdims=True) / np.maximum(
                                           np.sqrt((xc * xc).mean(axis=1, keepdims=True)), 1e-30), 0.0)
            y_out(y, (np.abs(xc) * rel_r + ex) * r * np.abs(g))
    return outs, trs


def _exact_sum(v):
    """Whether every partial sum of each row of v is exact in float32 in any order: all values
    multiples of one power of two g and each row's sum of magnitudes below 2^24 g."""
    nz = np.abs(v[v != 0])
    if nz.size == 0:
        return True
    g = 16.0
    while g >= 2.0 ** -12 and np.any(np.mod(nz, g) != 0):
        g *= 0.5
    return g >= 2.0 ** -12 and bool(np.abs(v).sum(axis=1).max() < 2.0 ** 24 * g)


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    f = d["wide"]
    if d["dt_in"] not in FLOATS or d["dt_out"] not in FLOATS or min(d["M"], d["N"], d["bm"]) < 1:
        return False
    if f == "gemm":
        if d["bm"] % 16 or d["bn"] % 16 or d["bk"] % 16 or d["K"] < 1 or d["dt_in"] == "float32":
            return False
        if d["mode"] == "global" and (d["M"] % d["bm"] or d["N"] % d["bn"]):
            return False
        return d["loop"] == "pipelined"
    if f == "chunk" and (d["loop"] not in ("serial", "pipelined") or d["bn"] < 1):
        return False
    if f == "row" and d["loop"] != "grid":
        return False
    if d["red"] == "argmax" and any(op[0] not in EXACT_OPS for op in d["ops"]):
        return False
    return True


def candidates(d):
    """Simpler variants: no condition, fewer ops, no second store, float32 operands, fewer rows /
    columns (reducer.candidates adds the dtypes, loops and dimensions)."""
    out = []

    def put(**kw):
        out.append(dict(d, **kw))
    if d["cond"] is not None:
        put(cond=None)
    if d["wide"] == "gemm":
        if d["relu"]:
            put(relu=False)
        if d["mode"] == "global":
            put(M=d["bm"], N=d["bn"])
        if d["stages"] > 2:
            put(stages=2)
        return out
    for i in range(len(d["ops"])):
        put(ops=d["ops"][:i] + d["ops"][i + 1:])
    if d["both"]:
        put(both=False)
    if d["weight"]:
        put(weight=False)
    if d["red"] != "none":
        put(red="none", both=False, weight=False)
    if d["out"] == "tile":
        put(out="copy")
    if d.get("inplace") is False:
        put(inplace=True)
    if d["wdt"] != "float32":
        put(wdt="float32")
    if d["M"] > d["bm"]:
        put(M=d["bm"])
    return out
