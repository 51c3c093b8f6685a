"""The float64 numpy reference of a program description, its inputs, and the tolerances.

The reference follows the documented semantics (docs/language.md): a copy converts (round to
nearest even into float16/bfloat16, truncation toward zero into integers, wrap-around between
integers), source elements outside a tensor read as 0 and destination elements outside it are not
written, map expressions compute in a wider type and round once when stored, ``clear=False``
reductions round into the destination after each merge, gemm accumulates in float32/int32.
Arithmetic is float64 (exact for the small integers and halves the inputs are made of); an
element whose value is undefined by the language (a float converted to an integer out of its
range) is NaN in the reference and not compared. With special input values (the fourteenth stream:
inf, NaN, -0.0, subnormals, huge) the float64 arithmetic gives IEEE results (numpy's NaN
propagation for max / min, as the docs say), a fused float map's intermediate past float32's range
becomes inf (float16 / bfloat16 compute in float32), and ``compare`` tells a NaN value (NaN only with
the special values: the output must be NaN) from an undefined element.

TOLERANCES is the one place that says how close a target must be.
"""
import math

import ml_dtypes
import numpy as np

from . import chain, hunt, idiom, llm, llm2, scal, skip, wide
from .grammar import FLOATS, SPECIAL_P, acc_dtype, checked, is_int, pad_value, shape_of, tensors

# Per-dtype unit of error: a few ulps of the type (float32: the cpu target's math functions are
# within 2 ulp; the Ascend vector units may compute float16 maps in float16). A program's
# tolerance is  atol = unit * steps * scale,  rtol = unit * steps, with `steps` the number of
# rounding steps on the data path and `scale` the largest magnitude along it, per output element
# (cancellation: for sums and products the sum of the magnitudes of the terms).
# Integer outputs: exact, or within 1 when a float value that went through inexact arithmetic
# (math functions, float reductions, maps) is truncated into them.
TOLERANCES = {
    "float32": 4 * 2.0 ** -24,
    "float16": 2 * 2.0 ** -11,
    "bfloat16": 2 * 2.0 ** -8,
}


def np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


INT_RANGE = {"int8": (-128, 127), "int32": (-2 ** 31, 2 ** 31 - 1)}


def convert(x, src, dst):
    """float64 array `x` holding `src` values, converted to `dst` (as float64; NaN = undefined)."""
    if dst in FLOATS:
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(np_dtype(dst)).astype(np.float64)
    lo, hi = INT_RANGE[dst]
    if is_int(src):   # integer -> integer: modular wrap-around
        span = hi - lo + 1
        return np.where(np.isnan(x), np.nan, np.mod(np.nan_to_num(x) - lo, span) + lo)
    t = np.trunc(x) + 0.0   # an integer has no -0
    return np.where((t >= lo) & (t <= hi), t, np.nan)   # out of range: undefined


def inputs(d):
    """The input arrays of the program (fixed by its seed): floats are multiples of 1/2 in
    [-4, 4], integers in [-8, 8] (exact in every dtype, so copies and gemms are exact)."""
    if d["kind"] == "llm":
        return llm.inputs(d)
    if d["kind"] == "llm2":
        return llm2.inputs(d)
    if d["kind"] == "skip":
        return skip.inputs(d)
    if d["kind"] == "hunt":
        return hunt.inputs(d)
    if d["kind"] == "chain":
        return chain.inputs(d)
    if d["kind"] == "scal":
        return scal.inputs(d)
    if d["kind"] == "wide":
        return wide.inputs(d)
    if d["kind"] == "idiom":
        return idiom.inputs(d)
    rng = np.random.default_rng(d["seed"])
    arrays = []
    for name, dims, dt, out in tensors(d):
        if out:
            continue
        shape = shape_of(d, dims)
        if d.get("gform") and name == "Idx":   # the thirteenth stream's indices
            arrays.append(_gform_indices(d, rng, shape))
            continue
        if d["kind"] == "gather" and name == "Idx":   # tile column indices, the zero-filled tail included
            rows = d.get("gaxis") == 0   # a gather along the leading dim: row indices (eleventh stream)
            arrays.append(rng.integers(0, d["bm" if rows else "bn"], size=shape).astype(np.int32))
            continue
        if name == "Lens":   # the run-time extent's n (not drawn from rng: the other inputs stay)
            arrays.append(np.array([d["n"]], np.int32))
            continue
        if shape == ():   # a run-time start, a scalar parameter (ninth stream; not drawn from rng)
            arrays.append(int(d["starts"][name]))
            continue
        ints = rng.integers(-8, 9, size=shape)
        if name == "A" and d.get("band", [""])[0] == "a":   # an a_band's promise: op(A) 0 outside the band
            ints = np.where(_in_band(shape[::-1] if d["ta"] else shape, d["band"]).T if d["ta"]
                            else _in_band(shape, d["band"]), ints, 0)
        arrays.append((ints if is_int(dt) else ints / 2.0).astype(np_dtype(dt)))
    if d.get("special"):
        _add_specials(d, arrays)
    return arrays


def _gform_indices(d, rng, shape):
    """The index tensor of a thirteenth-stream gather: tile indices, the zero-filled tail included;
    clamped forms also draw 5 below 0 and 5 past the tile; oob1 puts one index outside the tile."""
    f = d["gform"]
    n = d["bm"] if f == "clamp0" else d["bn"]
    lo, hi = (-5, n + 5) if f in ("clamp0", "clamp1") else (0, n)
    idx = rng.integers(lo, hi, size=shape).astype(np.int32)
    if f == "oob1":
        idx[d["oob"][0]] = d["oob"][1]
    return idx


# the fourteenth stream's special values, per input dtype
HUGE = {"float32": 2.0 ** 100, "bfloat16": 2.0 ** 100, "float16": 2.0 ** 14}
DENORM = {"float32": 2.0 ** -149, "bfloat16": 2.0 ** -133, "float16": 2.0 ** -24}


def special_value(name, dtype):
    return {"inf": np.inf, "-inf": -np.inf, "nan": np.nan, "-0": -0.0, "denorm": DENORM[dtype],
            "huge": HUGE[dtype], "-huge": -HUGE[dtype]}[name]


def _add_specials(d, arrays):
    """Replaces about SPECIAL_P of the elements of the float input tensors (not the in-place added
    atomic B) by d["special"]'s values, drawn from their own stream (the other inputs stay)."""
    rng = np.random.default_rng(list(b"extension12-data") + [d["seed"]])
    for i, ((name, _, dt, _), a) in enumerate(zip([t for t in tensors(d) if not t[3]], arrays)):
        if dt not in FLOATS or name not in ("A", "A2", "B") or (name == "B" and d["kind"] != "gemm"):
            continue
        vals = np.array([special_value(v, dt) for v in d["special"]], np.float64)
        pick = rng.random(a.shape) < SPECIAL_P
        new = np.where(pick, vals[rng.integers(0, len(vals), size=a.shape)], a.astype(np.float64))
        arrays[i] = new.astype(np_dtype(dt))


# each map operation of grammar.OP_SOURCE on float64 arrays (`dtype`: the tile's)
OP_VALUE = {
    "axpb": lambda op, x, y, dtype: x * op[1] + op[2],
    "max": lambda op, x, y, dtype: np.maximum(x, op[1]),
    "min": lambda op, x, y, dtype: np.minimum(x, op[1]),
    "abs": lambda op, x, y, dtype: np.abs(x),
    "sq": lambda op, x, y, dtype: x * x,
    "exp": lambda op, x, y, dtype: np.exp(x),
    "cast": lambda op, x, y, dtype: convert(x, dtype, op[1]),
    "add2": lambda op, x, y, dtype: x + y,
    "where": lambda op, x, y, dtype: np.where(x > op[1], x, x * op[2]),
    "where2": lambda op, x, y, dtype: np.where(y > op[1], x, y),
    "fdiv": lambda op, x, y, dtype: np.floor_divide(x, op[1]),
    "mod": lambda op, x, y, dtype: np.mod(x, op[1]),
    "shl": lambda op, x, y, dtype: x * 2.0 ** op[1],
    "shr": lambda op, x, y, dtype: np.floor(x / 2.0 ** op[1]),
    "inv": lambda op, x, y, dtype: -x - 1,
    "band": lambda op, x, y, dtype: _bits(np.bitwise_and, x, op[1]),
    "bor": lambda op, x, y, dtype: _bits(np.bitwise_or, x, op[1]),
    "bxor": lambda op, x, y, dtype: _bits(np.bitwise_xor, x, op[1]),
}


def _bits(fn, x, c):
    """A bitwise operation of integer-valued float64 `x` with the constant `c` (two's complement;
    NaN stays NaN)."""
    ok = ~np.isnan(x)
    out = fn(np.where(ok, x, 0).astype(np.int64), c).astype(np.float64)
    return np.where(ok, out, np.nan)


def _apply(op, x, y, dtype):
    return OP_VALUE[op[0]](op, x, y, dtype)


class Tracker:
    """Records the rounding steps and, per output element, the largest magnitude along the data
    path (every array seen has the output's shape)."""

    def __init__(self):
        self.steps = 1
        self.scale = 1.0
        self.inexact = False   # a float value was rounded or approximated on the way

    def see(self, x):
        with np.errstate(invalid="ignore"):
            self.scale = np.maximum(self.scale, np.where(np.isfinite(x), np.abs(x), 0.0))
        return x


def _map(ops, fused, x, y, dtype, tr):
    if not ops:
        return x
    v = x
    tr.inexact = tr.inexact or not is_int(dtype)
    for op in ops:
        v = tr.see(_apply(op, v, y, dtype))
        tr.steps += 1
        if not fused:
            v = convert(v, dtype, dtype)
        elif not is_int(dtype):   # float tiles compute in float32: an intermediate past its range is inf
            v = _float32_range(v)
    return convert(v, dtype, dtype)


def _float32_range(v):
    """float64 `v` with the values past float32's range made +-inf (as float32 arithmetic overflows)."""
    with np.errstate(over="ignore", invalid="ignore"):
        w = v.astype(np.float32)
    return np.where(np.isinf(w) & np.isfinite(v), w.astype(np.float64), v)


def _shifted(a, shape, offsets):
    """out[i, ...] = a[i + offset, ...], 0 outside `a` (the copy's zero fill; offsets may be
    negative: the indices before 0 read 0 too)."""
    out = np.zeros(shape, np.float64)
    src, dst = [], []
    for o, s, n in zip(offsets, shape, a.shape):
        lo, hi = max(0, -o), min(s, n - o)   # out indices whose source lies inside a
        if hi <= lo:
            return out
        src.append(slice(lo + o, hi + o))
        dst.append(slice(lo, hi))
    out[tuple(dst)] = a[tuple(src)]
    return out


def reference(d):
    """([float64 arrays of the outputs], Tracker) of the program on inputs(d)."""
    if d["kind"] == "llm":
        return llm.reference(d)
    if d["kind"] == "llm2":   # (a tolerance per output)
        return llm2.reference(d)
    if d["kind"] == "skip":   # (the same)
        return skip.reference(d)
    if d["kind"] == "hunt":   # (the same)
        return hunt.reference(d)
    if d["kind"] == "chain":   # (the same)
        return chain.reference(d)
    if d["kind"] == "scal":   # (the same)
        return scal.reference(d)
    if d["kind"] == "wide":   # (the same)
        return wide.reference(d)
    if d["kind"] == "idiom":   # (the same)
        return idiom.reference(d)
    tr = Tracker()
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    k = d["kind"]
    if d.get("d3"):
        return _d3(d, ins, tr), tr
    if k in ("copy", "map"):
        shape = (d["M"],) if d["ndim"] == 1 else (d["M"], d["N"])
        st = d.get("starts", {})   # run-time starts (ninth stream)
        offs = (d["r0"] + st.get("ro", 0),) if d["ndim"] == 1 else (d["r0"] + st.get("ro", 0), d["c0"] + st.get("co", 0))
        # B[p] = tile[p + s]: the seventh stream's s0 / s1, minus the twelfth's run-time store starts
        stores = (d.get("s0", 0) - st.get("so", 0), d.get("s1", 0) - st.get("sc", 0))[:d["ndim"]]
        out_shape = shape
        if any(stores):   # stored s before its origin: the tiles are computed over whole blocks
            blocks = (d["bm"],) if d["ndim"] == 1 else (d["bm"], d["bn"])
            shape = tuple(-(-n // b) * b for n, b in zip(shape, blocks))
        col = (lambda a: a[:, d["c0"]]) if d.get("col") else (lambda a: a)  # noqa: E731
        if d.get("nd"):
            h = d["nd"]["h"]
            col = (lambda a: a[h]) if d["nd"]["pos"] == 0 else (lambda a: a[:, h, :])  # noqa: E731
        rt = d.get("rt")
        # a run-time extent: the elements at index n or past it along its axis read as 0
        keep = _before_n(shape, rt["axis"], d["n"]) if rt else np.ones(shape, bool)
        x = convert(np.where(keep, _shifted(col(ins[0]), shape, offs), 0.0), d["dt_in"], d["dt_tile"])
        tr.see(x)
        if k == "map":
            y = None
            if d["second"]:
                y = convert(np.where(keep, _shifted(col(ins[1]), shape, offs), 0.0), d["dt_in"], d["dt_tile"])
            x = _map(d["ops"], d["fused"], x, y, d["dt_tile"], tr)
        out = convert(x, d["dt_tile"], d["dt_out"])
        if d.get("atomic"):   # B (an input) plus the tile, S times, each add rounded once
            b = ins[-1]
            for _ in range(d["atomic"]):
                b = convert(tr.see(b + out), d["dt_out"], d["dt_out"])
                tr.steps += 1
            return [b], tr
        if rt and rt["store"]:   # not written past n: undefined
            out = np.where(keep, out, np.nan)
        if any(stores):
            out = _stored(out, out_shape, stores, tr)
        return [out], tr
    if k == "reduce":
        x = convert(ins[0], d["dt_in"], d["dt_tile"])
        outs = [_reduce(d, x, d["op"], tr)]
        if d.get("sumsq"):
            outs.append(_reduce(d, convert(x * x, d["dt_tile"], d["dt_tile"]), "sum", tr))
        return outs, tr
    if k == "gather":
        return [_gather(d, ins[0], ins[1].astype(np.int64) if len(ins) > 1 else None)], tr
    return [_gemm(d, ins, tr)], tr


def _d3(d, ins, tr):
    """A fifteenth-stream program: a map or a grid reduction of (bh, bm, bn) tiles of 3-D tensors."""
    if d["kind"] == "map":
        shape = (d["H"], d["M"], d["N"])
        offs = (0, d["r0"], d["c0"])
        x = tr.see(convert(_shifted(ins[0], shape, offs), d["dt_in"], d["dt_tile"]))
        y = convert(_shifted(ins[1], shape, offs), d["dt_in"], d["dt_tile"]) if d["second"] else None
        return [convert(_map(d["ops"], d["fused"], x, y, d["dt_tile"], tr), d["dt_tile"], d["dt_out"])]
    dt, op, axis = d["dt_tile"], d["op"], d["dim"] + 1
    x = convert(ins[0], d["dt_in"], dt)
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[op]
    if x.shape[axis] == 0:   # an empty reduced dim: the identity (the tile's zero-filled rows for max / min)
        x = np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1:])
    elif x.shape[axis] < (d["bm"] if axis == 1 else d["bn"]) and op != "sum":
        # the tile's rows / columns past the tensor read 0 and take part in max / min
        x = np.concatenate([x, np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1:])], axis=axis)
    if op == "sum":
        tr.see(np.sum(np.abs(x), axis=axis))
        tr.steps += d["bm"] if axis == 1 else d["bn"]
        tr.inexact = tr.inexact or not is_int(dt)
    acc = tr.see(convert(fn(x, axis=axis), dt, dt))
    tr.steps += 2
    return [convert(acc, dt, d["dt_out"])]


def _stored(out, out_shape, stores, tr):
    """The output as a store `s` before its origin leaves it (the seventh stream; s < 0: after it,
    the twelfth): out is the computed tile values over whole blocks; B[p] = out[p + s] where
    0 <= p + s < the blocks' end, the elements never written undefined (NaN). The tracker's
    magnitudes move with the values."""
    shape = out.shape
    lo = [max(0, -s) for s in stores]   # the first output index written
    hi = [max(lo_, min(n, e - s)) for lo_, s, n, e in zip(lo, stores, out_shape, shape)]
    src = tuple(slice(a + s, b + s) for a, b, s in zip(lo, hi, stores))
    dst = tuple(slice(a, b) for a, b in zip(lo, hi))
    written = all(b > a for a, b in zip(lo, hi))

    def moved(a, fill):
        b = np.full(out_shape, fill)
        if written:
            b[dst] = np.broadcast_to(a, shape)[src]
        return b
    tr.scale = moved(tr.scale, 0.0)
    return moved(out, np.nan)


def _whole_blocks(x, rows, cols):
    """x zero-padded to rows x cols (a tile past the tensor's end reads zeros)."""
    out = np.zeros((rows, cols))
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _before_n(shape, axis, n):
    """The elements of `shape` whose index along `axis` is below n."""
    idx = np.arange(shape[axis]) < n
    return np.broadcast_to(idx if axis == len(shape) - 1 else idx[:, None], shape) if len(shape) == 2 else idx


def _gather(d, a, idx):
    """y = x[i, idx] on each block's tile (A's block, zero past A's end): exact."""
    M, N, bn = d["M"], d["N"], d["bn"]
    f = d.get("gform")
    if f in ("flat1", "clamp1", "oob1"):   # y[i] = x[ix[i]] (oob1: an error; the others' values)
        idx = np.clip(idx, 0, bn - 1) if f == "clamp1" else np.clip(idx, 0, bn)
        return np.where(idx < N, a[np.minimum(idx, max(N - 1, 0))], 0.0) if N else np.zeros(M)
    if f in ("stride1", "stride0", "trans"):   # B[r, c] = A[r, s c + o], A[s r + o, c], A[c, r]
        r, c = np.arange(M)[:, None], np.arange(N)[None, :]
        if f == "trans":
            return a.T.copy() if M and N else np.zeros((M, N))
        s, o = d["stride"]
        src = (r, s * c + o) if f == "stride1" else (s * r + o, c)
        lim = a.shape[1 if f == "stride1" else 0]
        ok = np.broadcast_to(src[1 if f == "stride1" else 0] < lim, (M, N))
        rr, cc = (np.broadcast_to(v, (M, N)) for v in src)
        out = np.zeros((M, N))
        out[ok] = a[rr[ok], cc[ok]]
        return out
    if f == "clamp0":
        idx = np.clip(idx, 0, d["bm"] - 1)
    if d["ndim"] == 1:
        rows = np.arange(M)
        return np.where(idx < N, a[rows, np.minimum(idx, max(N - 1, 0))], 0.0) if N else np.zeros(M)
    if d.get("gaxis") == 0 or f == "clamp0":   # y[i, j] = x[idx[i, j], j]: the source row of each element
        row = (np.arange(M) // d["bm"] * d["bm"])[:, None] + idx
        cols = np.arange(N)[None, :]
        return np.where(row < M, a[np.minimum(row, M - 1), cols], 0.0) if M and N else np.zeros((M, N))
    col = (np.arange(N) // bn * bn)[None, :] + idx   # the source column of each element
    rows = np.arange(M)[:, None]
    return np.where(col < N, a[rows, np.minimum(col, N - 1)], 0.0) if M and N else np.zeros((M, N))


def _reduce(d, x, op, tr):
    """reduce_<op> of the tile values x (float64 of dtype dt_tile) as the program walks them."""
    dt = d["dt_tile"]
    if d["dim"] == 0:
        x = x.T
    blk = d["bm"] if d["dim"] == 0 else d["bn"]
    kept, red = x.shape
    nblocks = max(1, math.ceil(red / blk)) if red else 0
    if d["loop"] == "grid":
        nblocks = 1
    pad = np.zeros((kept, nblocks * blk))
    pad[:, :red] = x
    if d.get("pad"):   # a wider tile: every block's row also holds `pad` filled columns
        p = d["pad"]
        fill = np.full((kept, nblocks, p), pad_value(op, dt))
        pad = np.concatenate([pad.reshape(kept, nblocks, blk), fill], axis=2).reshape(kept, nblocks * (blk + p))
        blk += p
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[op]
    if op == "sum":   # the terms' magnitudes, summed in an unspecified order within a block
        tr.see(np.sum(np.abs(pad), axis=1))
        tr.steps += blk
    if d["loop"] == "grid":
        acc = convert(fn(pad, axis=1), dt, dt)
    else:
        ident = 0.0 if op == "sum" else (INT_RANGE["int8"][0 if op == "max" else 1] if is_int(dt)
                                         else (-np.inf if op == "max" else np.inf))
        acc = np.full(kept, float(ident))
        for b in range(nblocks):
            part = fn(pad[:, b * blk:(b + 1) * blk], axis=1)
            merged = acc + part if op == "sum" else (np.maximum(acc, part) if op == "max" else np.minimum(acc, part))
            acc = convert(tr.see(merged), dt, dt)
            tr.steps += 1
    tr.see(acc)
    tr.steps += 2
    tr.inexact = tr.inexact or (op == "sum" and not is_int(dt))
    return convert(acc, dt, d["dt_out"])


def _in_band(shape, band):
    """The elements (row, col) of a 2-D `shape` with band[1] <= col - row < band[2]."""
    diag = np.arange(shape[1])[None, :] - np.arange(shape[0])[:, None]
    return (diag >= band[1]) & (diag < band[2])


def _gemm(d, ins, tr):
    a, b = ins[0], ins[1]
    bshd = d.get("bshd", {})   # a 4-D tensor's matrix at [b, :, h, :] (ninth stream)
    if "a" in bshd:
        a = a[bshd["a"][0], :, bshd["a"][2], :]
    if "b" in bshd:
        b = b[bshd["b"][0], :, bshd["b"][2], :]
    if d["ta"]:
        a = a.T
    if d["tb"]:
        b = b.T
    if "starts" in d or bshd:   # the regions the blocks read at their run-time starts, zeros outside
        st = d["starts"] if "starts" in d else {}
        mp, np_ = -(-d["M"] // d["bm"]) * d["bm"], -(-d["N"] // d["bn"]) * d["bn"]
        kp = d["K"] if d.get("wholek") else -(-d["K"] // d["bk"]) * d["bk"]
        a = _shifted(a, (mp, kp), (st.get("ra", 0), st.get("ka", 0)))
        b = _shifted(b, (kp, np_), (st.get("kb", 0), st.get("nb", 0)))
        if not (d.get("s0") or d.get("s1")):   # else the tiles over whole blocks (below)
            a, b = a[:d["M"]], b[:, :d["N"]]
    stores = (d.get("s0", 0), d.get("s1", 0))
    if any(stores):   # stored before its origin: the tiles over whole blocks (zeros past the tensors)
        mp, np_ = -(-d["M"] // d["bm"]) * d["bm"], -(-d["N"] // d["bn"]) * d["bn"]
        a, b = _whole_blocks(a, mp, a.shape[1]), _whole_blocks(b, b.shape[0], np_)
        if d["accum"]:
            ins = ins[:2] + [_whole_blocks(ins[2], mp, np_)] + ins[3:]
    rt = d.get("rt")
    if rt:   # A's rows (B's columns) at n or past it read as 0
        if rt["axis"] == 0:
            a = np.where(np.arange(a.shape[0])[:, None] < d["n"], a, 0.0)
        else:
            b = np.where(np.arange(b.shape[1])[None, :] < d["n"], b, 0.0)
    acc_dt = acc_dtype(d)
    acc = (ins[2] if d["accum"] == "init" else 0.0) + a @ b
    tr.see(np.abs(a) @ np.abs(b))
    tr.see(acc)
    tr.steps += 2
    acc = convert(acc, acc_dt, acc_dt)
    if d["accum"] == "add":
        acc = convert(tr.see(acc + ins[2]), acc_dt, acc_dt)
    acc = _map(d["epilogue"], True, acc, None, acc_dt, tr)
    out = convert(acc, acc_dt, d["dt_out"])
    if d.get("band", [""])[0] == "c":   # C outside a c_band: undefined
        out = np.where(_in_band(out.shape, d["band"]), out, np.nan)
    if rt and rt["store"]:   # not written past n: undefined
        shape = (d["M"], d["N"])
        out = np.where(_before_n(shape, rt["axis"], d["n"]), out, np.nan)
    if any(stores):
        out = _stored(out, (d["M"], d["N"]), stores, tr)
    return out


def path_dtypes(d):
    """The dtypes the data passes through (for the tolerance)."""
    dts = {d["dt_in"], d["dt_out"], d.get("dt_tile", acc_dtype(d))}
    for op in d.get("ops", []) + d.get("epilogue", []):
        if op[0] == "cast":
            dts.add(op[1])
    return dts


def tolerance(d, out_dtype, tr):
    """(atol, rtol) for an output of `out_dtype`."""
    if d["kind"] == "llm":
        return llm.tolerance(tr, out_dtype)
    if d["kind"] in ("llm2", "skip", "wide", "idiom", "hunt", "chain", "scal"):
        return llm2.tolerance(tr, out_dtype)
    if is_int(out_dtype):
        converts_float = any(dt in FLOATS for dt in path_dtypes(d))
        return (1.0 if converts_float and tr.inexact else 0.0), 0.0
    unit = max(TOLERANCES[dt] for dt in path_dtypes(d) if dt in TOLERANCES)
    if d["kind"] == "gemm":
        unit = max(unit, TOLERANCES["float32"] * d["K"])
    return unit * tr.steps * tr.scale, unit * tr.steps


def compare(d, outputs):
    """None when every output matches the reference within its tolerance, else a short text."""
    with np.errstate(all="ignore"):   # special input values (fourteenth stream) meet every operation
        refs, tr = reference(d)
        # which elements are defined: NaN in the reference of the same program without special values
        # (a NaN there is a never-written element); NaN only with them is a NaN the float output must hold
        plain = reference({k: v for k, v in d.items() if k != "special"})[0] if d.get("special") else refs
    problems = []
    names = checked(d)
    trs = tr if isinstance(tr, list) else [tr] * len(refs)   # (llm2: a tolerance per output)
    for (name, _, dt, _), got, ref, ref0, tr in zip(names, outputs, refs, plain, trs):
        got = np.asarray(got)
        if got.shape != ref.shape:
            problems.append(f"{name}: shape {got.shape}, expected {ref.shape}")
            continue
        with np.errstate(invalid="ignore"):   # never-written elements of an undefined output
            got = got.astype(np.float64)
        atol, rtol = tolerance(d, dt, tr)
        atol = np.broadcast_to(atol, ref.shape)
        defined = ~np.isnan(ref)
        # a NaN value, not an undefined element (a NaN that went through an integer is undefined)
        nan = ~defined & ~np.isnan(ref0) & all(t in FLOATS for t in path_dtypes(d) | {dt})
        with np.errstate(invalid="ignore"):
            err = np.where(defined, np.abs(got - ref), 0.0)
            same_inf = np.isinf(ref) & (got == ref)
            close = np.isfinite(ref) & (err <= atol + rtol * np.abs(ref))
            bad = (defined & ~same_inf & ~close) | (nan & ~np.isnan(got))
            if d.get("special") and d["kind"] in ("copy", "gather") and dt in FLOATS:   # moves keep -0.0
                bad |= defined & (ref == 0) & (np.signbit(got) != np.signbit(ref))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"{name}: {int(bad.sum())} of {bad.size} elements off; first at {idx}: got {got[idx]!r}, "
                            f"expected {ref[idx]!r} (atol {float(atol[idx]):.3g}, rtol {rtol:.3g})")
    return "; ".join(problems) or None
