"""The twentieth stream (session 32): the idioms users write now, as programs of kind ``idiom``.

Constructs the older streams' grammar predates, each program one form (``d["idiom"]``) with its
float64 reference (the language's semantics as docs/language.md states them: integers computed wide
and wrapped on store, float16 / bfloat16 computed in float32 and rounded when stored or cast) here:

* ``pick``   label masks over a tile spanning the row: ``T.where(j == lab[i], e, 0)`` reduced by
  ``T.reduce_sum`` (the one-hot pick; ``T.reduce_max`` over ``-inf`` fills), ``j < ln[i]``,
  ``j != lab[i]``, ``j >= lab[i]``, the label from an int32 tile (``lab[i]``) or a scalar read
  ``s = Sel[bx]``; labels outside the row (-1, -100, the row length, past the tile) included; or the
  guarded gather ``if 0 <= lab[i] < N: p[i] = x[i, lab[i]] else: p[i] = 0`` / ``if lab[i] == -100``
  (PyTorch's ignore_index).
* ``ifmap``  ``if`` / ``else`` inside a ``T.Parallel`` map (a select on Ascend): on the values, on a
  shifted index (``if j + s < N: y = x[i, j + s] - x[i, j]``, ``if j >= s: y = x[i, j - s]``) or on
  a gather index (``if 0 <= ix[i, j] < bn: y = x[i, ix[i, j]]``): the untaken arm reads outside.
* ``int``    integer maps on int32 / int8 / uint8 tiles: ``//`` and ``%`` by negative constants and by a
  tile of divisors (0 and negatives included), ``& | ^``, ``+ - *``, same-dtype ``T.cast`` (a wrap),
  and on int32 shifts and ``~``; wide intermediates (computed in int64, wrapped on store).
* ``let``    scalar lets whose value leaves the dtype: ``d = U[b, 0] - U[b, 1]`` of uint8 / int8
  (negative, past 127), ``h = H[b, 0] * H[b, 1]`` of float16 / bfloat16 (past 65504, or rounded),
  then ``d // 3``, ``d % 5``, ``T.cast(d, dt)``, ``w: T.uint8 = d``, ``T.where(d < 0, -d, d)``,
  ``T.cast(h, "float16") - h``; per program (scalars) or per element of a map (tile lets).
* ``cast``   T.cast chains through bfloat16 / float16 / float32 inside maps: scales by powers of two,
  added constants, ``abs``, ``max``, the difference to the input (the rounding error), overflow to inf.
* ``rt``     run-time extents as a let: ``rows = T.min(bm, n - r0)``, ``T.copy(X[r0:r0 + rows, :], t)``,
  a map, ``T.copy(t[0:rows, :], Y[r0:r0 + rows, :])`` (or the whole tile, its zero rows mapped), n a
  scalar parameter or ``Lens[bx]``; the same over columns.
* ``atomic`` ``T.atomic_add`` of tiles (S programs adding into the same rows of a float32 / float16 /
  bfloat16 / int32 B) and of scalars (a histogram of labels, guarded: ``if 0 <= l < NB``).
* ``band``   ``T.gemm`` with ``c_band=`` (C undefined outside) or ``a_band=`` (A zero outside), met
  with ``rows=`` / ``cols=`` rectangles, all relative to the block: the packed cpu path honours them.
* ``ub``     a select over tiles near the UB's 184 KiB limit for selecting code (170-200 KiB of tiles).

Structure and shapes from ``idiom-<seed // GROUP>`` (the GROUP programs of a group share one compiled
kernel), values from the seed; ``python -m fuzz --stream idiom`` runs only these (grammar.generate
does not draw them: the other streams' programs are unchanged).
"""
import math
import random

import numpy as np

from .llm import FLOATS, U32, UNIT, _np_dtype
from .llm2 import Track, _dim, tolerance  # noqa: F401 (the stream's tolerance is llm2's)

FORMS = ("pick", "ifmap", "int", "let", "cast", "rt", "atomic", "band", "ub")
INTS = ("int32", "int8", "uint8")
RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-2 ** 31, 2 ** 31 - 1)}
BITS = {"int8": 8, "uint8": 8, "int32": 32}
NINF = "-T.infinity('float32')"


def _ind(lines, n=1):
    return ["    " * n + x for x in lines]


def _alloc(name, shape, dt, kind="fragment"):
    shp = f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(str(x) for x in shape)})"
    return f"{name} = T.alloc_{kind}({shp}, {dt!r})"


def _wrap(x, dt):
    """Integer values x (int64 array / int) wrapped into dt."""
    lo, hi = RANGE[dt]
    return (np.asarray(x, np.int64) - lo) % (hi - lo + 1) + lo


def _f32(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def _conv(x, dt):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float64).astype(_np_dtype(dt)).astype(np.float64)


def _store(x, dt):
    """A value computed wide (float64 holding float32 / int64 values) stored into dt."""
    if dt in FLOATS:
        return _conv(x, dt)
    return _wrap(x, dt).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# Generation

def generate(seed):
    """The program of `seed` of this stream."""
    from .grammar import GROUP
    s = random.Random(f"idiom-{seed // GROUP}")
    f = s.choice(FORMS)
    d = {"seed": seed, "kind": "idiom", "idiom": f, "sym": False, "loop": "grid"}
    {"pick": _gen_pick, "ifmap": _gen_ifmap, "int": _gen_int, "let": _gen_let, "cast": _gen_cast,
     "rt": _gen_rt, "atomic": _gen_atomic, "band": _gen_band, "ub": _gen_ub}[f](s, d)
    return d


def _fit_row(d, gathers):
    """A block whose map reads at a run-time or shifted column (a gather on Ascend) keeps rows that fit the UB
    (past about 5888 float32 elements the documented UB-overflow error names the fix: a pick by T.where)."""
    if d["big"] and gathers:
        d["bn"] = min(d["bn"], 4096)
        d["N"] = min(d["N"], d["bn"])


def _row_tile(s, d, widths=(4, 8, 16, 32, 64, 128)):
    """A tile spanning the row: bn >= N (the tail zero-filled), blocks of bm rows; 30% big (the block's
    tiles past the UB: Ascend's capacity passes split them)."""
    d["big"] = s.random() < 0.3
    d["bn"] = s.choice((1024, 2048, 4096, 8192) if d["big"] else widths)
    d["N"] = s.choice((d["bn"], d["bn"], max(1, d["bn"] - 1), max(1, d["bn"] // 2 + 1), 1, s.randint(1, d["bn"])))
    d["bm"] = s.choice((2, 4, 8, 16) if d["big"] else (1, 2, 4, 8, 16, 32))
    d["M"] = _dim(s, d["bm"], 40 if d["big"] else 70)


def _gen_pick(s, d):
    _row_tile(s, d)
    d["dt_in"] = s.choice(FLOATS + ("int32",) if s.random() < 0.2 else FLOATS)
    d["dt_tile"] = d["dt_in"] if s.random() < 0.5 else "float32"
    if d["dt_in"] == "int32":
        d["dt_tile"] = "int32"
    d["form"] = s.choice(("mask", "mask", "mask", "gather", "ignore"))
    d["src"] = s.choice(("tile", "tile", "scalar")) if d["form"] == "mask" else "tile"
    d["mask"] = s.choice(("eq", "eq", "lt", "ne", "ge"))
    d["red"] = s.choice(("sum", "sum", "max")) if d["form"] == "mask" else None
    d["e"] = s.choice(("x", "affine", "abs"))
    d["dt_out"] = s.choice(FLOATS) if d["dt_tile"] != "int32" else s.choice(("int32", "float32"))
    if d["red"] == "max" and d["dt_tile"] == "int32":
        d["red"] = "sum"
    d["labels"] = s.choice(("in", "edge", "wild"))
    _fit_row(d, d["form"] != "mask")


def _gen_ifmap(s, d):
    _row_tile(s, d)
    d["dt_in"] = s.choice(FLOATS + ("int32",))
    d["dt_tile"] = "int32" if d["dt_in"] == "int32" else s.choice((d["dt_in"], "float32"))
    d["dt_out"] = d["dt_in"] if s.random() < 0.6 else ("int32" if d["dt_tile"] == "int32" else s.choice(FLOATS))
    d["cond"] = s.choice(("val", "shift", "back", "idx", "idxneg", "mixed", "backneg"))
    d["shift"] = s.choice((1, 2, 3, 8, d["bn"] // 2 or 1))
    d["else"] = s.choice(("zero", "x", "affine"))
    d["then"] = s.choice(("x", "affine"))
    d["nested"] = s.random() < 0.2 and d["cond"] in ("shift", "back", "idx")
    _fit_row(d, d["cond"] != "val")


INT_OPS = ("fdivc", "modc", "fdivt", "modt", "and", "or", "xor", "add", "sub", "mul", "wrap")
INT32_OPS = ("shl", "shr", "inv")


def _gen_int(s, d):
    t = s.choice(INTS)
    d["dt_in"] = d["dt_tile"] = t
    d["dt_out"] = t if s.random() < 0.7 else s.choice(INTS)
    d["big"] = s.random() < 0.2
    d["bm"] = s.choice((1, 4, 8, 16))
    d["bn"] = s.choice((2048, 4096, 8192) if d["big"] else (8, 16, 32, 64))
    d["M"], d["N"] = _dim(s, d["bm"], 40), _dim(s, d["bn"], 70) if not d["big"] else s.choice((d["bn"], d["bn"] + 3, 100))
    # scalar lets (X[b, j] read per element: shifts and ~ on every dtype) or a map (on 8-bit tiles shifts and ~
    # are a documented Ascend error: drawn in 20% of the 8-bit maps, where Ascend must reject them clearly)
    d["mode"] = s.choice(("map", "map", "scalar"))
    if d["mode"] == "scalar":
        d["big"] = False
        d["bm"], d["bn"] = 1, s.choice((4, 8, 16))
        d["M"], d["N"] = s.choice((1, 3, 8)), s.choice((d["bn"], d["bn"] - 1, 1))
    shifts = t == "int32" or d["mode"] == "scalar" or s.random() < 0.2
    names = INT_OPS + (INT32_OPS if shifts else ())
    ops = []
    bound = 100000 if t == "int32" else 255   # |values| (int32 arithmetic on Ascend must stay inside int32)
    for _ in range(s.randint(1, 4)):
        n = s.choice(names)
        nb = {"mul": bound * 5, "shl": bound * 128, "add": bound + 200, "sub": bound + 128, "inv": bound + 1,
              "and": 2 * bound + 256, "or": 2 * bound + 256, "xor": 2 * bound + 256}.get(n, bound)
        if nb >= 2 ** 30:
            continue
        bound = nb
        if n in ("fdivc", "modc"):
            c = s.choice((-7, -3, -2, -1, 2, 3, 5, 7) if t != "uint8" else (2, 3, 5, 7, 16))
            ops.append([n, c])
        elif n in ("and", "or", "xor"):
            ops.append([n, s.choice((-4, 5, 0x0F, 0x70, -128) if t != "uint8" else (5, 0x0F, 0xF0, 0x81))])
        elif n == "add":
            ops.append([n, s.choice((-100, 7, 120, 200))])
        elif n == "mul":
            ops.append([n, s.choice((-3, 3, 5))])
        elif n in ("shl", "shr"):
            ops.append([n, s.choice((1, 3, 7))])
        else:
            ops.append([n])
    d["ops"] = ops


LET_OUTS = {"int": ("fdiv", "mod", "castwrap", "annot", "raw", "absdiff", "cmp"),
            "float": ("half", "castsub", "annot", "raw", "castmul")}
# each output's expression of the let (d: an integer difference, h: a float product; v: the let's name)
LET_EXPR = {"fdiv": "d // 3", "mod": "d % -5", "castwrap": "T.cast(d, {lt}) // 2", "raw": "{v}",
            "absdiff": "T.where(d < 0, -d, d)", "cmp": "T.where(d > 100, 1, 0)", "half": "h * 0.5",
            "castsub": "T.cast(h, {lt}) - h", "castmul": "T.cast(h * 2.0, {lt}) * 0.25"}


def _gen_let(s, d):
    d["lt"] = s.choice(("uint8", "uint8", "int8", "float16", "bfloat16"))
    d["mode"] = s.choice(("scalar", "map"))
    fam = "float" if d["lt"] in FLOATS else "int"
    d["outs"] = s.sample(LET_OUTS[fam], s.randint(1, 3))
    d["dt_in"] = d["dt_tile"] = d["lt"]
    d["dt_out"] = s.choice(("float32", d["lt"])) if fam == "float" else s.choice(("int32", d["lt"], "int8", "uint8"))
    d["M"] = s.choice((1, 3, 8, 17, 40))
    d["bm"] = s.choice((1, 8, 16)) if d["mode"] == "map" else 1


CAST_OPS = ("scale", "add", "cast", "cast", "sub_x", "abs", "max")


def _gen_cast(s, d):
    d["dt_in"] = s.choice(FLOATS)
    d["dt_tile"] = s.choice((d["dt_in"], "float32"))
    d["dt_out"] = s.choice(FLOATS)
    d["big"] = s.random() < 0.2
    d["bm"], d["bn"] = s.choice((1, 4, 8, 16)), s.choice((2048, 4096, 8192) if d["big"] else (8, 16, 32))
    d["M"], d["N"] = _dim(s, d["bm"], 40), _dim(s, d["bn"]) if not d["big"] else s.choice((d["bn"], d["bn"] - 5, 300))
    d["mag"] = s.choice((1.0, 64.0, 4096.0))
    ops = []
    for _ in range(s.randint(2, 6)):
        n = s.choice(CAST_OPS)
        if n == "scale":
            ops.append([n, s.choice((0.5, 2.0, 16.0, -0.25, 1024.0))])
        elif n == "add":
            ops.append([n, s.choice((0.1, -1.0, 3.0, 1e-3, 1000.5))])
        elif n == "cast":
            ops.append([n, s.choice(("float16", "bfloat16", "bfloat16", "float32"))])
        elif n == "max":
            ops.append([n, s.choice((0.0, -2.5))])
        else:
            ops.append([n])
    if not any(o[0] == "cast" for o in ops):
        ops.insert(s.randint(0, len(ops)), ["cast", s.choice(("float16", "bfloat16"))])
    d["ops"] = ops


def _gen_rt(s, d):
    d["dt_in"] = s.choice(FLOATS + ("int32",))
    d["dt_tile"] = d["dt_in"] if d["dt_in"] == "int32" else s.choice((d["dt_in"], "float32"))
    d["dt_out"] = d["dt_in"] if s.random() < 0.6 else ("int32" if d["dt_in"] == "int32" else s.choice(FLOATS))
    d["axis"] = s.choice((0, 0, 1))
    # (a run-time extent of bound 1 is an error on Ascend, documented: no bm = 1 with rows of run-time extent)
    d["bm"], d["bn"] = s.choice((2, 4, 8, 16, 32) if d["axis"] == 0 else (1, 4, 8, 16)), s.choice((8, 16, 32))
    d["M"], d["N"] = _dim(s, d["bm"]), _dim(s, d["bn"])
    d["nsrc"] = s.choice(("param", "lens"))
    d["whole"] = s.random() < 0.3
    d["map"] = s.choice((None, "affine", "where"))
    size = d["M"] if d["axis"] == 0 else d["N"]
    d["n"] = s.choice((0, -2, 1, size, max(0, size - 1), size // 2, size + 3))


def _gen_atomic(s, d):
    d["form"] = s.choice(("tile", "tile", "hist"))
    if d["form"] == "tile":
        d["dt_out"] = s.choice(("float32", "float32", "int32", "float16", "bfloat16"))
        d["dt_in"] = "int32" if d["dt_out"] == "int32" else s.choice(FLOATS)
        d["dt_tile"] = "int32" if d["dt_out"] == "int32" else "float32"
        d["bm"], d["bn"] = s.choice((1, 4, 8, 16)), s.choice((8, 16, 32))
        d["M"], d["N"] = _dim(s, d["bm"], 40), _dim(s, d["bn"], 40)
        d["S"] = s.choice((1, 2, 3, 7))
        d["scale"] = s.choice((1, 2, -1))
    else:
        d["dt_out"] = s.choice(("int32", "float32"))
        d["dt_in"] = d["dt_tile"] = "int32"
        d["NB"] = s.choice((1, 4, 16, 33))
        d["B"] = s.choice((1, 3, 8, 20))
        d["L"] = s.choice((1, 5, 16))
        d["weighted"] = d["dt_out"] == "float32" and s.random() < 0.5
    d["atomic"] = True


def _gen_band(s, d):
    d["dt_in"] = s.choice(FLOATS)
    d["dt_out"] = s.choice(("float32", "float32", d["dt_in"]))
    d["dt_tile"] = "float32"
    d["bm"], d["bn"], d["bk"] = s.choice((16, 32, 64)), s.choice((16, 32, 64)), s.choice((16, 32))
    d["M"], d["N"] = _dim(s, d["bm"], 100), _dim(s, d["bn"], 100)
    d["K"] = s.choice((d["bk"], 2 * d["bk"], 3 * d["bk"]))
    d["which"] = s.choice(("c", "c", "a"))
    d["loop"] = s.choice(("serial", "pipelined"))
    M, N, K = d["M"], d["N"], d["K"]
    span = K if d["which"] == "a" else N
    d["lo"] = s.choice((-M, 0, -8, -(M // 2), 1 - M))
    d["hi"] = s.choice((span, 1, 9, span // 2 + 1, 16))
    if d["hi"] <= d["lo"]:
        d["hi"] = d["lo"] + 1
    d["rect"] = s.choice((None, "rows", "cols", "both"))
    d["r0"], d["r1"] = s.choice((0, 1, M // 3)), s.choice((M, M - 1, M // 2 + 1))
    d["c0"], d["c1"] = s.choice((0, 3, span // 3)), s.choice((span, span - 2, span // 2 + 1))
    d["r1"], d["c1"] = max(d["r1"], d["r0"]), max(d["c1"], d["c0"])
    d["table"] = s.random() < 0.4   # the band and rectangle read from an int32 tensor (run-time values)


def _gen_ub(s, d):
    d["dt_in"] = s.choice(FLOATS)
    d["dt_tile"] = s.choice(("float32", d["dt_in"]))
    d["dt_out"] = s.choice(FLOATS)
    d["mk"] = s.choice(("int32", "float32", "value"))
    d["bn"] = s.choice((64, 128, 256, 512))
    esz = {"float32": 4, "float16": 2, "bfloat16": 2}
    row = d["bn"] * (esz[d["dt_tile"]] * 2 + (0 if d["mk"] == "value" else 4))
    target = s.choice((170, 180, 183, 184, 185, 188, 192, 200)) * 1024
    d["bm"] = max(1, target // row)
    d["M"] = d["bm"] * s.choice((1, 2)) + s.choice((0, 0, 1, d["bm"] // 2))
    d["N"] = d["bn"] - s.choice((0, 0, 1, 7))


# ---------------------------------------------------------------------------------------------
# Tensors and source

def tensors(d):
    """[(name, shape (ints), dtype, is_output)]; a shape () is a scalar parameter."""
    f = d["idiom"]
    M, N = d.get("M"), d.get("N")
    if f == "pick":
        lab = [("Sel", (-(-M // d["bm"]),), "int32", False)] if d["src"] == "scalar" else [("Lab", (M,), "int32", False)]
        return [("X", (M, N), d["dt_in"], False)] + lab + [("P", (M,), d["dt_out"], True)]
    if f == "ifmap":
        ix = [("Ix", (M, N), "int32", False)] if d["cond"] in ("idx", "idxneg", "mixed") else []
        return [("X", (M, N), d["dt_in"], False)] + ix + [("Y", (M, N), d["dt_out"], True)]
    if f == "int":
        return [("X", (M, N), d["dt_in"], False), ("D", (M, N), d["dt_in"], False), ("Y", (M, N), d["dt_out"], True)]
    if f == "let":   # (a map reads two 1-D tiles: a column of a (bm, 2) tile would be a gather on Ascend)
        if d["mode"] == "scalar":
            return [("U", (M, 2), d["lt"], False), ("O", (M, len(d["outs"])), d["dt_out"], True)]
        return [("U0", (M,), d["lt"], False), ("U1", (M,), d["lt"], False)] + \
            [(f"O{k}", (M,), d["dt_out"], True) for k in range(len(d["outs"]))]
    if f == "cast":
        return [("X", (M, N), d["dt_in"], False), ("Y", (M, N), d["dt_out"], True)]
    if f == "rt":
        n = [("n", (), "int32", False)] if d["nsrc"] == "param" else [("Lens", (1,), "int32", False)]
        return [("X", (M, N), d["dt_in"], False)] + n + [("Y", (M, N), d["dt_out"], True)]
    if f == "atomic":
        if d["form"] == "tile":
            return [("X", (d["S"], M, N), d["dt_in"], False), ("B", (M, N), d["dt_out"], False)]
        w = [("W", (d["B"], d["L"]), "float32", False)] if d["weighted"] else []
        return [("Lab", (d["B"], d["L"]), "int32", False)] + w + [("B", (d["NB"],), d["dt_out"], False)]
    if f == "band":
        bd = [("Bd", (6,), "int32", False)] if d.get("table") else []
        return [("A", (M, d["K"]), d["dt_in"], False), ("Bm", (d["K"], N), d["dt_in"], False)] + bd + \
            [("C", (M, N), d["dt_out"], True)]
    mk = [] if d["mk"] == "value" else [("Mk", (M, N), d["mk"], False)]
    return [("X", (M, N), d["dt_in"], False)] + mk + [("Y", (M, N), d["dt_out"], True)]


def source(d):
    from .grammar import KERNEL_NAME
    body = {"pick": _pick_body, "ifmap": _ifmap_body, "int": _int_body, "let": _let_body, "cast": _cast_body,
            "rt": _rt_body, "atomic": _atomic_body, "band": _band_body, "ub": _ub_body}[d["idiom"]](d)
    params = []
    for name, shape, dt, _ in tensors(d):
        if shape == ():
            params.append(f"{name}: T.{dt}")
        else:
            params.append(f"{name}: T.Tensor(({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''}), {dt!r})")
    lines = ["import tilewright.language as T", "", "", "@T.prim_func", f"def {KERNEL_NAME}({', '.join(params)}):"]
    return "\n".join(lines + _ind(body)) + "\n"


def _lit(v, dt):
    return str(int(v)) if dt in INTS else repr(float(v))


def _e(d, x):
    """The picked value's expression of the element x."""
    dt = d["dt_tile"]
    return {"x": x, "affine": f"{x} * {_lit(2, dt)} + {_lit(1, dt)}", "abs": f"T.abs({x})"}[d["e"]]


def _e_ref(d, x):
    return {"x": x, "affine": x * 2 + 1, "abs": np.abs(x)}[d["e"]]


def _pick_body(d):
    bm, bn, N, dt = d["bm"], d["bn"], d["N"], d["dt_tile"]
    ein = dt if d["red"] != "max" else "float32"   # (a reduction's source and result share their dtype)
    b = [f"with T.Kernel({-(-d['M'] // bm)}) as bx:",
         "    " + _alloc("x", (bm, bn), dt), "    " + _alloc("p", (bm,), ein if d["form"] == "mask" else "float32"),
         f"    T.copy(X[bx * {bm}, 0], x)"]
    if d["src"] == "scalar":
        b += ["    s = Sel[bx]"]
        lab = "s"
    else:
        b += ["    " + _alloc("lab", (bm,), "int32"), f"    T.copy(Lab[bx * {bm}], lab)"]
        lab = "lab[i]"
    if d["form"] == "mask":
        cond = {"eq": f"j == {lab}", "lt": f"j < {lab}", "ne": f"j != {lab}", "ge": f"j >= {lab}"}[d["mask"]]
        fill = NINF if d["red"] == "max" else _lit(0, dt)
        b += ["    " + _alloc("e", (bm, bn), ein if dt != "int32" else "int32"),
              f"    for i, j in T.Parallel({bm}, {bn}):",
              f"        e[i, j] = T.where({cond} and j < {N}, {_e(d, 'x[i, j]')}, {fill})" if d["mask"] in ("ne", "ge")
              else f"        e[i, j] = T.where({cond}, {_e(d, 'x[i, j]')}, {fill})",
              f"    T.reduce_{d['red']}(e, p, dim=1)"]
    elif d["form"] == "gather":
        b += [f"    for i in T.Parallel({bm}):", f"        if {lab} >= 0 and {lab} < {N}:",
              f"            p[i] = {_e(d, f'x[i, {lab}]')}", "        else:", f"            p[i] = {_lit(0, dt)}"]
    else:
        b += [f"    for i in T.Parallel({bm}):", f"        if {lab} == -100:", f"            p[i] = {_lit(0, dt)}",
              "        else:", f"            p[i] = {_e(d, f'x[i, {lab}]')}"]
    b += [f"    T.copy(p, P[bx * {bm}])"]
    return b


def _arm(d, which, x="x[i, j]"):
    kind = d[which]
    dt = d["dt_tile"]
    if kind == "zero":
        return _lit(0, dt)
    if kind == "x":
        return x
    return f"{x} * {_lit(-2 if which == 'then' else 3, dt)} + {_lit(1, dt)}"


def _ifmap_body(d):
    bm, bn, N, dt, sh = d["bm"], d["bn"], d["N"], d["dt_tile"], d["shift"]
    b = [f"with T.Kernel({-(-d['M'] // bm)}) as bx:",
         "    " + _alloc("x", (bm, bn), dt), "    " + _alloc("y", (bm, bn), dt), f"    T.copy(X[bx * {bm}, 0], x)"]
    c = d["cond"]
    if c in ("idx", "idxneg", "mixed"):
        b += ["    " + _alloc("ix", (bm, bn), "int32"), f"    T.copy(Ix[bx * {bm}, 0], ix)"]
    els = _arm(d, "else")
    if c == "val":
        cond, then = f"x[i, j] > {_lit(0, dt)}", _arm(d, "then")
    elif c == "shift":
        cond, then = f"j + {sh} < {N}", f"x[i, j + {sh}] - x[i, j]"
    elif c == "back":
        cond, then = f"j >= {sh}", _arm(d, "then", f"x[i, j - {sh}]")
    elif c == "idx":
        cond, then = f"ix[i, j] >= 0 and ix[i, j] < {bn}", _arm(d, "then", "x[i, ix[i, j]]")
    elif c == "mixed":
        cond, then = f"ix[i, j] >= 0 and ix[i, j] < {bn} and x[i, j] > {_lit(0, dt)}", _arm(d, "then", "x[i, ix[i, j]]")
    elif c == "backneg":
        cond, then = f"j < {sh}", None
    else:
        cond, then = f"ix[i, j] < 0 or ix[i, j] >= {bn}", None
    body = [f"    for i, j in T.Parallel({bm}, {bn}):"]
    if c in ("idxneg", "backneg"):   # the read in the else arm
        body += [f"        if {cond}:", f"            y[i, j] = {els}", "        else:",
                 f"            y[i, j] = {_arm(d, 'then', 'x[i, ix[i, j]]' if c == 'idxneg' else f'x[i, j - {sh}]')}"]
    elif d["nested"]:
        body += [f"        if {cond}:", f"            if x[i, j] > {_lit(0, dt)}:", f"                y[i, j] = {then}",
                 "            else:", f"                y[i, j] = {_lit(0, dt)}", "        else:", f"            y[i, j] = {els}"]
    else:
        body += [f"        if {cond}:", f"            y[i, j] = {then}", "        else:", f"            y[i, j] = {els}"]
    return b + body + [f"    T.copy(y, Y[bx * {bm}, 0])"]


def _int_expr(d, x):
    t = d["dt_tile"]
    for op in d["ops"]:
        n = op[0]
        c = op[1] if len(op) > 1 else None
        x = {"fdivc": f"({x}) // {c}", "modc": f"({x}) % {c}", "fdivt": f"({x}) // dv[i, j]",
             "modt": f"({x}) % dv[i, j]", "and": f"({x}) & {c}", "or": f"({x}) | {c}", "xor": f"({x}) ^ {c}",
             "add": f"({x}) + {c}", "sub": f"({x}) - dv[i, j]", "mul": f"({x}) * {c}", "wrap": f"T.cast({x}, {t!r})",
             "shl": f"({x}) << {c}", "shr": f"({x}) >> {c}", "inv": f"~({x})"}[n]
    return x


def _int_body(d):
    bm, bn, t = d["bm"], d["bn"], d["dt_tile"]
    if d.get("mode") == "scalar":   # (Ascend's scalar unit writes elements of UB tiles)
        expr = _int_expr(d, "v").replace("dv[i, j]", "w")
        return [f"with T.Kernel({d['M']}) as b:", "    " + _alloc("y", (1, bn), d["dt_out"]),
                f"    for j in T.serial({d['N']}):", "        v = X[b, j]", "        w = D[b, j]",
                f"        y[0, j] = {expr}", "    T.copy(y, Y[b, 0])"]
    return [f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}) as (bx, by):",
            "    " + _alloc("x", (bm, bn), t), "    " + _alloc("dv", (bm, bn), t), "    " + _alloc("y", (bm, bn), d["dt_out"]),
            f"    T.copy(X[by * {bm}, bx * {bn}], x)", f"    T.copy(D[by * {bm}, bx * {bn}], dv)",
            f"    for i, j in T.Parallel({bm}, {bn}):", f"        y[i, j] = {_int_expr(d, 'x[i, j]')}",
            f"    T.copy(y, Y[by * {bm}, bx * {bn}])"]


def _let_lines(d, a, b, out):
    """The lets of a row (a, b the two elements) and the statements storing each output via `out(k)`."""
    lt = d["lt"]
    fam = "float" if lt in FLOATS else "int"
    lines = [f"d = {a} - {b}" if fam == "int" else f"h = {a} * {b}"]
    v = "d" if fam == "int" else "h"
    for k, o in enumerate(d["outs"]):
        if o == "annot":
            lines += [f"w{k}: T.{lt} = {v}", f"{out(k)} = w{k}"]
        else:
            lines.append(f"{out(k)} = " + LET_EXPR[o].format(v=v, lt=repr(lt)))
    return lines


def _let_body(d):
    M, K = d["M"], len(d["outs"])
    if d["mode"] == "scalar":   # (Ascend's scalar unit writes elements of UB tiles, not of GM tensors)
        return [f"with T.Kernel({M}) as b:", "    " + _alloc("o", (1, K), d["dt_out"])] + \
            _ind(_let_lines(d, "U[b, 0]", "U[b, 1]", lambda k: f"o[0, {k}]")) + ["    T.copy(o, O[b, 0])"]
    bm, lt = d["bm"], d["lt"]
    return [f"with T.Kernel({-(-M // bm)}) as bx:", "    " + _alloc("u0", (bm,), lt), "    " + _alloc("u1", (bm,), lt)] + \
        ["    " + _alloc(f"o{k}", (bm,), d["dt_out"]) for k in range(K)] + \
        [f"    T.copy(U0[bx * {bm}], u0)", f"    T.copy(U1[bx * {bm}], u1)", f"    for i in T.Parallel({bm}):"] + \
        _ind(_let_lines(d, "u0[i]", "u1[i]", lambda k: f"o{k}[i]"), 2) + \
        [f"    T.copy(o{k}, O{k}[bx * {bm}])" for k in range(K)]


def _cast_expr(d, x):
    x0 = x
    for op in d["ops"]:
        n = op[0]
        if n == "scale":
            x = f"({x}) * {op[1]!r}"
        elif n == "add":
            x = f"({x}) + {op[1]!r}"
        elif n == "cast":
            x = f"T.cast({x}, {op[1]!r})"
        elif n == "sub_x":
            x = f"({x}) - {x0}"
        elif n == "abs":
            x = f"T.abs({x})"
        else:
            x = f"T.max({x}, {op[1]!r})"
    return x


def _cast_body(d):
    bm, bn = d["bm"], d["bn"]
    return [f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}) as (bx, by):",
            "    " + _alloc("x", (bm, bn), d["dt_tile"]), "    " + _alloc("y", (bm, bn), d["dt_out"]),
            f"    T.copy(X[by * {bm}, bx * {bn}], x)",
            f"    for i, j in T.Parallel({bm}, {bn}):", f"        y[i, j] = {_cast_expr(d, 'x[i, j]')}",
            f"    T.copy(y, Y[by * {bm}, bx * {bn}])"]


def _rt_body(d):
    bm, bn, dt = d["bm"], d["bn"], d["dt_tile"]
    ax = d["axis"]
    blk = bm if ax == 0 else bn
    n = "n" if d["nsrc"] == "param" else "Lens[0]"
    grid = f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}) as (bx, by):"
    b = [grid, "    " + _alloc("t", (bm, bn), dt), f"    r0 = by * {bm}", f"    c0 = bx * {bn}",
         f"    e = T.min({blk}, {n} - {'r0' if ax == 0 else 'c0'})"]
    if ax == 0:
        src, tw, dst = f"X[r0:r0 + e, c0:c0 + {bn}]", "t[0:e, :]", f"Y[r0:r0 + e, c0:c0 + {bn}]"
    else:
        src, tw, dst = f"X[r0:r0 + {bm}, c0:c0 + e]", "t[:, 0:e]", f"Y[r0:r0 + {bm}, c0:c0 + e]"
    b += [f"    T.copy({src}, t)"]
    one, two = _lit(1, dt), _lit(2, dt)
    if d["map"] == "affine":
        b += [f"    for i, j in T.Parallel({bm}, {bn}):", f"        t[i, j] = t[i, j] * {two} + {one}"]
    elif d["map"] == "where":
        b += [f"    for i, j in T.Parallel({bm}, {bn}):", f"        t[i, j] = T.where(t[i, j] > {_lit(0, dt)}, t[i, j], {one})"]
    if d["whole"]:
        b += [f"    T.copy(t, Y[r0, c0])"]
    else:
        b += [f"    T.copy({tw}, {dst})"]
    return b


def _atomic_body(d):
    if d["form"] == "tile":
        bm, bn, S = d["bm"], d["bn"], d["S"]
        sc = d["scale"]
        lit = _lit(sc, d["dt_tile"])
        return [f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}, {S}) as (bx, by, s):",
                "    " + _alloc("t", (bm, bn), d["dt_tile"]),
                f"    T.copy(X[s, by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}], t)",
                f"    for i, j in T.Parallel({bm}, {bn}):", f"        t[i, j] = t[i, j] * {lit}",
                f"    T.atomic_add(B[by * {bm}, bx * {bn}], t)"]
    one = "W[b, i]" if d["weighted"] else ("1" if d["dt_out"] == "int32" else "1.0")
    return [f"with T.Kernel({d['B']}) as b:", f"    for i in T.serial({d['L']}):", "        l = Lab[b, i]",
            f"        if l >= 0 and l < {d['NB']}:", f"            T.atomic_add(B[l], {one})"]


def _band_body(d):
    bm, bn, bk, K = d["bm"], d["bn"], d["bk"], d["K"]
    dt = d["dt_in"]
    a_off = "by * {0} - k * {1}".format(bm, bk)
    c_off = "by * {0} - bx * {1}".format(bm, bn)
    off, coff = (c_off, f"bx * {bn}") if d["which"] == "c" else (a_off, f"k * {bk}")
    v = {n: (n if d.get("table") else d[n]) for n in ("lo", "hi", "r0", "r1", "c0", "c1")}
    kw = [f"{d['which']}_band=({v['lo']} + {off}, {v['hi']} + {off})"]
    if d["rect"] in ("rows", "both"):
        kw.append(f"rows=({v['r0']} - by * {bm}, {v['r1']} - by * {bm})")
    if d["rect"] in ("cols", "both"):
        kw.append(f"cols=({v['c0']} - {coff}, {v['c1']} - {coff})")
    lets = [f"    {n} = Bd[{k}]" for k, n in enumerate(("lo", "hi", "r0", "r1", "c0", "c1"))] if d.get("table") else []
    loop = f"T.Pipelined({K // bk}, num_stages=2)" if d["loop"] == "pipelined" else f"T.serial({K // bk})"
    return [f"with T.Kernel({-(-d['N'] // bn)}, {-(-d['M'] // bm)}) as (bx, by):",
            "    " + _alloc("a", (bm, bk), dt, "shared"), "    " + _alloc("w", (bk, bn), dt, "shared"),
            "    " + _alloc("acc", (bm, bn), "float32")] + lets + ["    T.clear(acc)", f"    for k in {loop}:",
            f"        T.copy(A[by * {bm}, k * {bk}], a)", f"        T.copy(Bm[k * {bk}, bx * {bn}], w)",
            f"        T.gemm(a, w, acc, {', '.join(kw)})", f"    T.copy(acc, C[by * {bm}, bx * {bn}])"]


def _ub_body(d):
    bm, bn, dt = d["bm"], d["bn"], d["dt_tile"]
    b = [f"with T.Kernel({-(-d['M'] // bm)}) as bx:", "    " + _alloc("x", (bm, bn), dt),
         "    " + _alloc("y", (bm, bn), dt), f"    T.copy(X[bx * {bm}, 0], x)"]
    if d["mk"] == "value":
        cond = f"x[i, j] > {_lit(0, dt)}"
    else:
        b += ["    " + _alloc("m", (bm, bn), d["mk"]), f"    T.copy(Mk[bx * {bm}, 0], m)"]
        cond = "m[i, j] != 0" if d["mk"] == "int32" else "m[i, j] > 0.0"
    return b + [f"    for i, j in T.Parallel({bm}, {bn}):", f"        y[i, j] = T.where({cond}, x[i, j] * 2.0, -1.0)",
                f"    T.copy(y, Y[bx * {bm}, 0])"]


# ---------------------------------------------------------------------------------------------
# Inputs, reference

def _labels(d, rng, shape, N, bn):
    p = d.get("labels", "in")
    lab = rng.integers(0, max(N, 1), size=shape)
    if p == "edge":
        lab = np.where(rng.random(shape) < 0.4, rng.choice([-1, N, bn - 1 if bn > N else N, 0], size=shape), lab)
    elif p == "wild":
        lab = np.where(rng.random(shape) < 0.4, rng.integers(-3, bn + 4, size=shape), lab)
    if d["idiom"] == "pick" and d["form"] == "ignore":
        lab = np.where(rng.random(shape) < 0.3, -100, rng.integers(0, max(N, 1), size=shape))
    elif d["idiom"] == "pick" and d["form"] == "gather" and p == "in":
        lab = np.where(rng.random(shape) < 0.3, rng.choice([-1, -100, N, bn + 2], size=shape), lab)
    return lab.astype(np.int32)


def inputs(d):
    """The input arrays (fixed by the seed)."""
    rng = np.random.default_rng(d["seed"])
    f = d["idiom"]
    out = []
    for name, sh, dt, o in tensors(d):
        if o:
            continue
        if name in ("Lab", "Sel"):
            if f == "atomic":
                out.append(rng.integers(-2, d["NB"] + 2, size=sh).astype(np.int32))
            else:
                out.append(_labels(d, rng, sh, d["N"], d["bn"]))
        elif name == "Bd":
            out.append(np.array([d[n] for n in ("lo", "hi", "r0", "r1", "c0", "c1")], np.int32))
        elif name == "Ix":
            out.append(rng.integers(-3, d["bn"] + 3, size=sh).astype(np.int32))
        elif name == "n":
            out.append(int(d["n"]))
        elif name == "Lens":
            out.append(np.array([d["n"]], np.int32))
        elif name == "Mk":
            out.append((rng.random(sh) < 0.5).astype(_np_dtype(dt)))
        elif f == "int":
            lo, hi = RANGE[dt]
            if name == "D":   # divisors: small, 0 and negatives included
                v = rng.integers(max(lo, -9), min(hi, 9) + 1, size=sh)
            else:
                v = rng.integers(lo, hi + 1, size=sh) if dt != "int32" else rng.integers(-100000, 100001, size=sh)
            out.append(v.astype(_np_dtype(dt)))
        elif f == "let":
            if d["lt"] in FLOATS:
                v = rng.integers(-400, 401, size=sh).astype(np.float64)
                if d["lt"] == "bfloat16":
                    v = _conv(v, "bfloat16")
                out.append(v.astype(_np_dtype(dt)))
            else:
                lo, hi = RANGE[dt]
                out.append(rng.integers(lo, hi + 1, size=sh).astype(_np_dtype(dt)))
        elif f == "cast":
            v = rng.standard_normal(sh) * d["mag"]
            out.append(_conv(v, "float32").astype(_np_dtype(dt)))
        elif f == "atomic" and name == "B":
            out.append((rng.integers(-8, 9, size=sh) / (1 if dt == "int32" else 4)).astype(_np_dtype(dt)))
        elif f == "atomic" and name == "W":
            out.append((rng.integers(-4, 5, size=sh) / 2).astype(np.float32))
        elif f == "band" and name == "A" and d["which"] == "a":
            v = rng.integers(-8, 9, size=sh) / 2.0
            out.append((v * _band_mask(d, sh[0], sh[1])).astype(_np_dtype(dt)))
        elif dt == "int32":
            out.append(rng.integers(-50, 51, size=sh).astype(np.int32))
        else:
            out.append((rng.integers(-8, 9, size=sh) / 2.0).astype(_np_dtype(dt)))
    return out


def _band_mask(d, rows, cols):
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    m = (c - r >= d["lo"]) & (c - r < d["hi"])
    if d["rect"] in ("rows", "both"):
        m &= (r >= d["r0"]) & (r < d["r1"])
    if d["rect"] in ("cols", "both"):
        m &= (c >= d["c0"]) & (c < d["c1"])
    return m


def _pad(x, rows, cols):
    """x zero-padded to whole tiles (the zero-filled tails)."""
    out = np.zeros((rows, cols))
    out[:x.shape[0], :x.shape[1]] = x
    return out


def reference(d):
    """([float64 outputs], [a Track per output]); unwritten / undefined elements NaN."""
    ins = [np.asarray(x, np.float64) for x in inputs(d)]
    return {"pick": _pick_ref, "ifmap": _ifmap_ref, "int": _int_ref, "let": _let_ref, "cast": _cast_ref,
            "rt": _rt_ref, "atomic": _atomic_ref, "band": _band_ref, "ub": _ub_ref}[d["idiom"]](d, ins)


def _exact(y):
    return Track(np.zeros_like(y), 0.0, exact=True)


def _tile_in(x, dt):
    """Values loaded into a tile of dt (an integer tile of float data: not drawn)."""
    return _conv(x, dt) if dt in FLOATS else x


def _pick_ref(d, ins):
    x, lab = ins[0], ins[1]
    M, N, bm, bn = d["M"], d["N"], d["bm"], d["bn"]
    if d["src"] == "scalar":
        lab = np.repeat(lab, bm)[:M]
    lab = lab.astype(np.int64)
    xt = _tile_in(_pad(x, M, bn), d["dt_tile"])
    e = _e_ref(d, xt)
    j = np.arange(bn)[None, :]
    L = lab[:, None]
    integer = d["dt_tile"] == "int32"
    if d["form"] == "mask":
        m = {"eq": j == L, "lt": j < L, "ne": (j != L) & (j < N), "ge": (j >= L) & (j < N)}[d["mask"]]
        if d["red"] == "max":
            p = np.where(m, e, -np.inf).max(axis=1)
        else:
            p = np.where(m, e, 0.0).sum(axis=1)
            if not integer:   # (exact in float32; rounded once into a 16-bit p)
                p = _conv(p, d["dt_tile"])
    else:
        ok = (lab >= 0) & (lab < N) if d["form"] == "gather" else lab != -100
        p = np.where(ok, e[np.arange(M), np.clip(lab, 0, bn - 1)], 0.0)
    mag = np.abs(e).sum(axis=1) if d["form"] == "mask" and d["red"] == "sum" else np.abs(p)
    y = _store(p, d["dt_out"]) if not integer or d["dt_out"] == "int32" else _conv(p, d["dt_out"])
    if integer:
        return [y], [_exact(y)]
    return [y], [Track(np.where(np.isfinite(mag), mag, 0.0), U32 * (bn + 2) + UNIT[d["dt_out"]])]


def _ifmap_ref(d, ins):
    x = ins[0]
    M, N, bm, bn, sh = d["M"], d["N"], d["bm"], d["bn"], d["shift"]
    integer = d["dt_tile"] == "int32"
    xt = _tile_in(_pad(x, M, bn), d["dt_tile"])
    j = np.broadcast_to(np.arange(bn)[None, :], xt.shape)

    def arm(which, v):
        k = d[which]
        if k == "zero":
            return np.zeros_like(v)
        if k == "x":
            return v
        return v * (-2 if which == "then" else 3) + 1

    def shifted(o):
        jj = np.clip(j + o, 0, bn - 1)
        return np.take_along_axis(xt, jj, axis=1)
    c = d["cond"]
    els = arm("else", xt)
    if c == "val":
        cond, then = xt > 0, arm("then", xt)
    elif c == "shift":
        cond, then = j + sh < N, shifted(sh) - xt
    elif c in ("back", "backneg"):
        cond, then = j >= sh, arm("then", shifted(-sh))
    else:
        ix = _pad(ins[1], M, bn).astype(np.int64)
        inside = (ix >= 0) & (ix < bn)
        g = np.take_along_axis(xt, np.clip(ix, 0, bn - 1), axis=1)
        cond, then = inside & (xt > 0 if c == "mixed" else True), arm("then", g)
    if d["nested"] and c != "idxneg":
        then = np.where(xt > 0, then, 0.0)
    y = np.where(cond, then, els)
    y = _store(_f32(y) if not integer else y, d["dt_tile"])[:M, :N]   # stored into the tile, then copied
    y = _store(y, d["dt_out"])
    return [y], [_exact(y)]   # (halves: every value exact, each conversion a deterministic rounding)


INT_BINARY = {"and": lambda x, c, dv: x & c, "or": lambda x, c, dv: x | c, "xor": lambda x, c, dv: x ^ c,
              "add": lambda x, c, dv: x + c, "sub": lambda x, c, dv: x - dv, "mul": lambda x, c, dv: x * c}


def _int_eval(d, x, dv):
    t = d["dt_tile"]
    b = BITS[t]
    for op in d["ops"]:
        n = op[0]
        c = op[1] if len(op) > 1 else None
        if n in ("fdivc", "fdivt", "modc", "modt"):
            q = c if n in ("fdivc", "modc") else dv
            q = np.broadcast_to(np.asarray(q, np.int64), x.shape)
            safe = np.where(q == 0, 1, q)
            if n.startswith("fdiv"):
                x = np.where(q == 0, 0, np.floor_divide(x, safe))
            else:
                x = np.where(q == 0, x, np.mod(x, safe))
        elif n in INT_BINARY:
            x = INT_BINARY[n](x, c, dv)
        elif n == "wrap":
            x = _wrap(x, t)
        elif n == "shl":
            x = x << (c % b)
        elif n == "shr":
            w = _wrap(x, t)
            x = (w >> (c % b)) if t != "uint8" else (w.astype(np.uint64) >> np.uint64(c % b)).astype(np.int64)
        else:
            x = ~x
    return x


def _int_ref(d, ins):
    M, N, bm, bn = d["M"], d["N"], d["bm"], d["bn"]
    x = _pad(ins[0], -(-M // bm) * bm, -(-N // bn) * bn).astype(np.int64)
    dv = _pad(ins[1], x.shape[0], x.shape[1]).astype(np.int64)
    y = _wrap(_int_eval(d, x, dv), d["dt_out"])[:M, :N].astype(np.float64)
    return [y], [_exact(y)]


def _let_eval(d, a, b):
    lt = d["lt"]
    outs = []
    if lt in FLOATS:
        h = _f32(a * b)
        for o in d["outs"]:
            if o == "half":
                outs.append(_f32(h * 0.5))
            elif o == "castsub":
                outs.append(_f32(_conv(h, lt) - h))
            elif o == "annot":
                outs.append(_conv(h, lt))
            elif o == "raw":
                outs.append(h)
            else:
                outs.append(_f32(_conv(_f32(h * 2.0), lt) * 0.25))
        return outs
    dd = (a - b).astype(np.int64)
    for o in d["outs"]:
        if o == "fdiv":
            outs.append(np.floor_divide(dd, 3))
        elif o == "mod":
            outs.append(np.mod(dd, -5))
        elif o == "castwrap":
            outs.append(np.floor_divide(_wrap(dd, lt), 2))
        elif o == "annot":
            outs.append(_wrap(dd, lt))
        elif o == "raw":
            outs.append(dd)
        elif o == "absdiff":
            outs.append(np.abs(dd))
        else:
            outs.append((dd > 100).astype(np.int64))
    return outs


def _let_ref(d, ins):
    a, b = (ins[0][:, 0], ins[0][:, 1]) if d["mode"] == "scalar" else ins
    ys = [_store(o, d["dt_out"]) for o in _let_eval(d, a, b)]
    if d["mode"] == "scalar":
        ys = [np.stack(ys, axis=1)]
    return ys, [_exact(y) for y in ys]


def _cast_eval(d, x):
    x0 = x
    for op in d["ops"]:
        n = op[0]
        with np.errstate(all="ignore"):
            if n == "scale":
                x = _f32(x * op[1])
            elif n == "add":
                x = _f32(x + float(np.float32(op[1])))
            elif n == "cast":
                x = _conv(x, op[1])
            elif n == "sub_x":
                x = _f32(x - x0)
            elif n == "abs":
                x = np.abs(x)
            else:
                x = np.where(np.isnan(x), np.nan, np.maximum(x, op[1]))
    return x


def _cast_ref(d, ins):
    xt = _tile_in(ins[0], d["dt_tile"])
    y = _store(_cast_eval(d, xt), d["dt_out"])
    return [y], [Track(np.zeros_like(y), 0.0, exact=True)]


def _rt_ref(d, ins):
    x = ins[0]
    M, N, bm, bn, n = d["M"], d["N"], d["bm"], d["bn"], d["n"]
    dt = d["dt_tile"]
    Mp, Np = -(-M // bm) * bm, -(-N // bn) * bn
    xt = _pad(x, Mp, Np)
    idx = np.arange(Mp)[:, None] if d["axis"] == 0 else np.arange(Np)[None, :]
    keep = np.broadcast_to(idx < n, xt.shape)   # (n <= 0: nothing read)
    t = _tile_in(np.where(keep, xt, 0.0), dt)
    if d["map"] == "affine":
        t = _store(t * 2 + 1 if dt == "int32" else _f32(t * 2 + 1), dt)
    elif d["map"] == "where":
        t = np.where(t > 0, t, 1.0)
    y = _store(t, d["dt_out"])
    if not d["whole"]:
        y = np.where(keep, y, np.nan)
    y = y[:M, :N]
    return [y], [_exact(y)]


def _atomic_ref(d, ins):
    if d["form"] == "tile":
        x, b = ins
        add = _tile_in(x, d["dt_tile"]).sum(axis=0) * d["scale"]
        dt = d["dt_out"]
        y = b + add
        if dt in ("float16", "bfloat16"):   # each add rounds to the dtype: exact while partial sums are
            mag = np.abs(b) + np.abs(_tile_in(x, d["dt_tile"])).sum(axis=0) * abs(d["scale"])
            return [y], [Track(mag, UNIT[dt] * (d["S"] + 1))]
        return [y], [_exact(y)]
    lab = ins[0].astype(np.int64)
    w = ins[1] if d["weighted"] else np.ones(lab.shape)
    y = ins[-1].copy()
    ok = (lab >= 0) & (lab < d["NB"])
    np.add.at(y, lab[ok], w[ok])
    return [y], [_exact(y)]


def _band_ref(d, ins):
    a, b = ins[0], ins[1]
    with np.errstate(all="ignore"):
        c = a @ b
    M, N = c.shape
    if d["which"] == "c":
        c = np.where(_band_mask(d, M, N), c, np.nan)
    y = _conv(c, d["dt_out"])
    return [y], [_exact(y)]


def _ub_ref(d, ins):
    x = _tile_in(ins[0], d["dt_tile"])
    cond = x > 0 if d["mk"] == "value" else ins[1] != 0
    y = _store(_store(np.where(cond, x * 2.0, -1.0), d["dt_tile"]), d["dt_out"])
    return [y], [_exact(y)]


# ---------------------------------------------------------------------------------------------
# Reduction

def valid(d):
    f = d["idiom"]
    dims = [d[n] for n in ("M", "N", "K", "B", "L", "NB", "S", "bm", "bn") if n in d]
    if any(v < 1 for v in dims):
        return False
    if f == "band" and (d["K"] % d["bk"] or d["hi"] <= d["lo"] or d["loop"] == "grid"
                        or any(d[b] % 16 for b in ("bm", "bn", "bk"))):
        return False
    if f != "band" and d["loop"] != "grid":
        return False
    ints = [dt in INTS for dt in (d["dt_in"], d["dt_tile"])]
    if f in ("int", "let"):
        if d["dt_in"] != d["dt_tile"] or (f == "let" and d["dt_in"] != d["lt"]) or (f == "int" and not all(ints)):
            return False
    elif f != "atomic" and (ints[0] != ints[1] or (ints[0] and d["dt_out"] not in ("int32", "float32"))):
        return False
    if d["idiom"] in ("pick", "ifmap") and d["N"] > d["bn"]:
        return False
    return True


def candidates(d):
    """Simpler variants: fewer operations / outputs, smaller shapes, no nesting / rectangle."""
    out = []

    def put(**kw):
        c = dict(d, **kw)
        if c != d and valid(c):
            out.append(c)
    for k in ("ops", "outs"):
        if len(d.get(k, ())) > 1:
            for i in range(len(d[k])):
                put(**{k: d[k][:i] + d[k][i + 1:]})
    for k in ("M", "N", "B", "L", "S"):
        if d.get(k, 1) > 1:
            put(**{k: 1})
            put(**{k: d[k] // 2})
    if d.get("nested"):
        put(nested=False)
    if d.get("rect"):
        put(rect=None)
    if d.get("loop") == "pipelined":
        put(loop="serial")
    return out
