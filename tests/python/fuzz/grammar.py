"""The fuzzer's program grammar: a program description (a JSON-able dict) drawn from a seed, and
the Tilewright kernel source that it denotes.

Five kinds of programs, each one explicit-style kernel as docs/language.md teaches:

* ``copy``   A --T.copy--> tile --T.copy--> B: casts between float32/float16/bfloat16/int8 on
  either copy, tile origins with offsets (``A[by * bm + r0, bx * bn + c0]``), an input smaller or
  larger than the output (tails, origins past the end), 1-D or 2-D.
* ``map``    a copy with ``T.Parallel`` maps on the tile in between: either one fused expression
  or one map per operation; a second input tile added elementwise; data-dependent selects
  (``T.where`` on the tile's own values or the second tile's); int32 tiles with ``//``, ``%``,
  shifts, ``~`` and bitwise ``& | ^`` (Python semantics: floor division, arithmetic shifts).
* ``reduce`` ``T.reduce_sum/max/min`` over rows or columns, the reduced dimension either in one
  tile or walked by a serial/pipelined loop merging with ``clear=False``.
* ``gather`` a map reading a tile at data-dependent indices from an int32 index tensor: a row
  gather ``y[i, j] = x[i, ix[i, j]]`` or a flat one ``y[i] = x[i, lab[i]]`` (one element per row,
  cross-entropy's label logit), indices anywhere in the tile (its zero-filled tail included).
* ``gemm``   ``T.gemm`` with transposes, a serial/pipelined K loop, an accumulator cleared or
  loaded from an input C0, an optional ``T.Parallel`` epilogue, a cast on the way out.

Blocks are walked by the launch grid (``loop == "grid"``) or by a serial/pipelined loop inside
each block. Dimensions are compile-time constants or ``T.symbolic`` (then the shapes live only in
the description, and programs that differ only in shapes share one compiled kernel: the source
text is the same). Sizes include 1-element dimensions, tails in both dimensions and tiles larger
than the tensor.

``generate(seed)`` is deterministic. The structure (kind, dtypes, blocks, loops, operations) is
drawn from ``seed // GROUP`` and the shapes from ``seed``, so GROUP consecutive seeds with
symbolic dimensions reuse one compiled kernel. The later additions (int32 tiles, selects,
integer operations) are drawn from a third stream, ``extension-<seed // GROUP>``, so the programs
drawn before them are unchanged. A fourth pair of streams (``extension2-<seed // GROUP>`` for the
structure, ``extension2-shape-<seed>`` for values) adds, to programs drawn before them:

* run-time extents: copy/map rows or columns ``T.min(b, n - start)`` with ``n = Lens[0]`` read from
  an int32 tensor (0, negative, inside and past the tensor), on the load and (or not) the store;
* N-D GM windows: a 3-D input with a unit dim (``A[h, rows, cols]`` or ``A[rows, h, cols]``) into a
  2-D tile;
* ``T.atomic_add`` as the store (B an input added into, 1 to 3 grid blocks adding the same tile);
* serial / pipelined loops of 1, 2, 5 or 7 steps (a tail in the last);
* symbolic dimensions of 0.

A fifth stream (``extension3-<seed // GROUP>``) adds **tile windows**: a row reduction (dim 1, no
second pass) whose tile has ``pad`` more columns than its block, filled before the loop with a value
that takes part in every block's reduction (1 for sums, -3.5 / 3.5 for max / min; -7 / 7 on int8),
each block loaded into the window ``x[0:bm, 0:bn]`` (on Ascend a window that ends inside a 32 B
block is staged: a load straight into it would overwrite the filled columns); with a serial or
pipelined loop the tile is allocated and filled before the loop.

A sixth stream (``extension4-<seed // GROUP>``, values from ``extension4-shape-<seed>``) adds
**origins before the tensor** (session 16): a copy/map's load origin ``A[by * bm + r0, bx * bn + c0]``
with a negative ``r0`` and / or ``c0`` (inside the first 32 B block, whole blocks, a whole tile or
more), as causal and sliding-window kernels compute ``bx * B - 64``: the rows and columns before 0
read as zeros.

A seventh stream (``extension5-<seed // GROUP>``, values from ``extension5-shape-<seed>``) adds
**stores before the tensor** (session 17): a copy/map's store origin ``B[by * bm - s0, bx * bn - s1]``
(not an atomic add, not a run-time extent's store) with ``s0`` and / or ``s1`` drawn as the sixth
stream's offsets, a gemm's ``C[by * bm - s0, bx * bn - s1]`` with multiples of 16 (16, 32, the
block): the rows and columns before 0 are not written, and the tile rows / columns past the
output's end land inside it (the reference computes the tile over the whole blocks).

An eighth stream (``extension6-<seed // GROUP>``) adds **gemm operands straight from global
tensors** (session 19): A, B or both passed to ``T.gemm`` as slices of the tensors
(``A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk]``) instead of staged tiles, as cpu kernels write
them (on Ascend stage_gemm_operands stages them), or (``wholek``, constant shapes) one gemm over the
whole K of both slices without a K loop; half of the ``wholek`` programs (``longk``, session 19)
draw K past one staged chunk (64 KiB of A and B tiles: Ascend walks K in pipelined chunks, the last
a run-time tail), with at most 2 x 2 blocks and no epilogue. A gemm region was not clipped on cpu
then (session 19), so M, N and K are rounded up to whole blocks (0 stays 0) and run-time extents are
not drawn with it (the ninth stream's starts now reach outside the tensors).

A ninth stream (``extension7-<seed // GROUP>`` for the structure, ``extension7-shape-<seed>`` for
values; session 21) adds **run-time starts** and **BSHD gemm regions**:

* a copy/map's load origin plus ``int32`` scalar parameters ``ro`` / ``co``
  (``A[by * bm + r0 + ro, bx * bn + c0 + co]``): run-time row / column starts, negative (inside the
  first 32 B block, whole blocks, the tile or more: wholly before the tensor), 0, or at / past the
  end (GM -> UB copies, zeros outside the tensor);
* a gemm's operand regions at run-time starts: scalar parameters ``ra`` (A's rows, M), ``ka`` (A's
  K), ``kb`` (B's K), ``nb`` (B's columns, N) added to the regions' starts, for staged operands
  (GM -> L1 copies into the shared tiles) and for operands read by ``T.gemm`` from the tensors
  (the eighth stream's ``gm``, ``wholek``), partly or wholly outside the tensor (zeros there);
* BSHD operands: A and / or B a 4-D tensor ``(Bt, rows, H, cols)`` whose matrix is
  ``X[b, r:r + e, h, c:c + f]`` (rows H x cols elements apart), staged or read in place.

A tenth stream (``extension8-<seed // GROUP>``; session 21) adds **bands** to gemms without the
ninth stream's constructs: ``c_band`` or ``a_band`` of a global band of diagonals ``LO <= col - row
< HI`` of C (of op(A): its columns are K), written per block relative to the regions' first
elements (``c_band=(LO + by * bm - bx * bn, HI + by * bm - bx * bn)``, ``a_band=(LO + by * bm -
k * bk, ...)``: run-time expressions of the block's position). An ``a_band`` program's op(A) is 0
outside the band (the promise); a ``c_band`` program's C outside the band is undefined.

An eleventh stream (``extension9-<seed // GROUP>``; session 21) makes 30% of the 2-D gather
programs gather along the tile's **leading** dim, ``y[i, j] = x[ix[i, j], j]`` (indices in
``[0, bm)``): cpu runs it; on Ascend it is a documented error at the line (Gather works along the
last dim).

A twelfth stream (``extension10-<seed // GROUP>``, values from ``extension10-shape-<seed>``;
session 21) adds **run-time store starts** to 20% of the copy/map programs whose store is a plain
``T.copy`` at the block's origin (no atomic add, run-time extent store or seventh-stream shift):
``B[by * bm + so, bx * bn + sc]`` with ``int32`` scalar parameters (negative: the rows / columns
before 0 are not written; positive: the output's first rows / columns are never written).

A thirteenth stream (``extension11-<seed // GROUP>``, values from ``extension11-shape-<seed>``;
session 22) gives 60% of the gather programs and 30% of the plain copies (no other stream's
construct) a **gather form** (``GFORMS``): strided reads ``y[i, j] = x[i, s * j + c]`` (``stride1``,
A (M, NS) with NS about s * N) and ``x[s * i + c, j]`` (``stride0``), a transposed read ``x[j, i]``
(``trans``), 1-D gathers ``y[i] = x[ix[i]]`` from a tile spanning A (``flat1``), at clamped indices
``x[T.min(T.max(ix[i], 0), bn - 1)]`` drawn 5 below 0 to 5 past the tile (``clamp1``), the same
along a leading dim (``clamp0``), and one index outside the tile (``oob1``: on cpu a
TilewrightError at the line, on ascend910b the simulator's report). The strided forms have
constant shapes (B's strided dim is no dimension of an input).

A fourteenth stream (``extension12-<seed // GROUP>``) puts **special values** in the inputs of 25%
of the programs with float inputs: ``special`` lists which of inf, -inf, NaN, -0.0, the dtype's
smallest subnormal and huge magnitudes (2^100; 2^14 for float16) replace about 30% of the float
input elements (reference.inputs, positions and values from their own numpy stream, so the other
inputs stay). Huge values only where no sum of them can overflow in another order (not in gemms,
sums or atomic adds); subnormals not in bfloat16 gemms (cpu's vdpbf16ps reads them as 0, documented);
on integer map / reduce tiles and atomic adds into integer tensors only -0.0 and subnormals (inf and
NaN convert to undefined integers, whose sums may leave the type: an int32-overflow report).
The kernel source is the one without them.

A fifteenth stream (``extension13-<seed // GROUP>``, values from ``extension13-shape-<seed>``) makes
half of the grid-walked maps and reductions without another stream's construct **3-D**: (H, rows,
cols) tensors, (bh, bm, bn) tiles on a 3-D grid, ``T.Parallel(bh, bm, bn)`` maps, reductions over
axis 2 or 1 of the tile.

A sixteenth stream (``extension14-pick-<seed // GROUP>`` picks 4% of the copy groups, about 0.8% of
the programs; the other kinds keep their coverage; structure from
``extension14-<seed // GROUP>``, values from ``extension14-shape-<seed>``; session 23) replaces those
programs by **LLM-kernel forms** (kind ``llm``, fuzz/llm.py, with their own reference and
tolerances): an online masked softmax over key blocks (running max from -inf or float32's lowest,
rescaled running sums, ``T.where`` / additive / causal masks, fully masked rows, the guarded final
divide), a two-gemm attention chain (S = Q K^T, P = softmax, O += P V) with tails in M, N and the
head dim, paged reads (a block table read by scalar reads, a GM window at that page), scatter-adds
with ``T.atomic_add`` at indexed rows (MoE combine) and RoPE's rotate-half / interleaved pair maps.
``python -m fuzz --stream llm`` runs only these.

A seventeenth stream (``extension15-pick-<seed // GROUP>`` picks 3% of the copy groups the sixteenth
left, about 0.7% of the programs; structure from ``extension15-<seed // GROUP>``, values from
``extension15-shape-<seed>``; session 24) replaces those programs by more **LLM-kernel forms** (kind
``llm2``, fuzz/llm2.py, with their own reference and a tolerance per output): flash-decoding's
split-KV combine (log-sum-exps with empty splits at ``-inf``, partial outputs in an N-D window),
grouped-query attention's ``h // G`` kv head in BSHD and paged 4-D windows, layer / rms norm with
float32 statistics and a weight row, top-k gating with ties and a softmax over the selected, and
cumsum scans carried across a serial / pipelined block loop. ``python -m fuzz --stream llm2`` runs
only these.
"""
import random

from . import chain, hunt, idiom, llm, llm2, scal, skip, wide

FLOATS = ("float32", "float16", "bfloat16")
DTYPES = FLOATS + ("int8",)
MAP_DTYPES = DTYPES + ("int32",)   # copies and maps also carry int32 (tensors and tiles)
GROUP = 5  # consecutive seeds sharing one structure

# elementwise operations of maps: name -> constants they may take
FLOAT_A = (0.5, 1.5, 2.0, -1.0, 0.25)
FLOAT_B = (0.0, 0.25, -1.0, 2.0)
INT_A = (2, -1, 3)
INT_B = (0, 1, -2)
BOUND_LIMIT = 1000.0  # |values| stay below this (fp16 max is 65504): no overflow to compare
EXP_LIMIT = 6.0       # exp only on values bounded by this
INPUT_BOUND = 4.0     # inputs: multiples of 1/2 in [-4, 4] (float) or ints in [-8, 8] (int8)
INT_INPUT_BOUND = 8.0


def is_int(dtype):
    return dtype.startswith("int")


def _dim(rng, block, allow_zero):
    """A dimension for a tile of `block`: 1, tails either side of the block, several blocks with
    a tail, smaller than the tile, or anything up to 70."""
    choice = rng.random()
    if allow_zero and choice < 0.02:
        return 0
    if choice < 0.12:
        return 1
    if choice < 0.3:
        return max(1, block - 1)
    if choice < 0.4:
        return block
    if choice < 0.52:
        return block + 1
    if choice < 0.64:
        return 2 * block + rng.choice((1, 3, block // 2 or 1))
    if choice < 0.76:
        return max(1, block // 2)
    return rng.randint(1, 70)


def _block(rng, choices=(1, 2, 4, 8, 16, 32, 64), weights=(1, 1, 3, 4, 4, 2, 1)):
    return rng.choices(choices, weights)[0]


def _ops(rng, dtype, n, with_second, bound=None, limit=BOUND_LIMIT):
    """n map operations on a `dtype` tile whose values are bounded by `bound` (default: the
    inputs' bound), keeping |values| below `limit`."""
    integer = is_int(dtype)
    if bound is None:
        bound = INT_INPUT_BOUND if integer else INPUT_BOUND
    ops = []
    names = ["axpb", "max", "min", "abs", "sq"] + ([] if integer else ["exp", "cast"]) + (["add2"] if with_second else [])
    while len(ops) < n:
        name = rng.choice(names)
        if name == "axpb":
            a, b = (rng.choice(INT_A), rng.choice(INT_B)) if integer else (rng.choice(FLOAT_A), rng.choice(FLOAT_B))
            op, nb = ["axpb", a, b], bound * abs(a) + abs(b)
        elif name in ("max", "min"):
            c = rng.choice((0, 1, -2)) if integer else rng.choice((0.0, -0.5, 1.0))
            op, nb = [name, c], max(bound, abs(c))
        elif name == "abs":
            op, nb = ["abs"], bound
        elif name == "sq":
            op, nb = ["sq"], bound * bound
        elif name == "exp":
            if bound > EXP_LIMIT:
                continue
            op, nb = ["exp"], 2.718281828459045 ** bound
        elif name == "cast":
            op, nb = ["cast", rng.choice(("float16", "bfloat16"))], bound
        else:  # add2: + the second input's tile
            op, nb = ["add2"], bound + (INT_INPUT_BOUND if integer else INPUT_BOUND)
        if dtype == "int8" and nb > 100:   # int8 tiles wrap: keep the arithmetic inside int8
            continue
        if nb > limit:
            continue
        ops.append(op)
        bound = nb
    return ops


# the integer operations of int32 map tiles: name -> constants (divisors, shift counts, masks)
INT_OPS = {"fdiv": (3, -2, 7, 1), "mod": (3, -2, 7), "shl": (1, 3), "shr": (1, 2), "inv": (None,),
           "band": (5, -4, 0x0F0F), "bor": (5, -4, 0x0F0F), "bxor": (5, -4, 0x0F0F)}
SELECT_C = {"float": (0.3, -0.7, 1.1), "int": (0, 1, -2)}


def _int_op(rng, bound):
    """An int32 map operation and the bound of its result (|values| < 2^15 on every path)."""
    name = rng.choice(sorted(INT_OPS))
    c = rng.choice(INT_OPS[name])
    if name in ("fdiv", "mod", "shr"):
        nb = bound if name != "mod" else abs(c)
    elif name == "shl":
        nb = bound * 2 ** c
    elif name == "inv":
        nb = bound + 1
    else:   # bitwise with a constant: |x op c| <= max(|x|, |c|) rounded up to a power of two
        nb = 2.0 ** max(int(bound).bit_length(), abs(c).bit_length()) * 2
    return ([name] if c is None else [name, c]), nb


def _extension_ops(xrng, dtype, with_second, bound, limit=BOUND_LIMIT):
    """Operations appended to a map from the extension stream: a data-dependent select (any
    tile type) and, on int32 tiles, integer operations."""
    ops = []
    integer = is_int(dtype)
    for _ in range(xrng.choice((0, 1, 1, 2))):
        r = xrng.random()
        if dtype == "int32" and r < 0.6:
            op, nb = _int_op(xrng, bound)
        elif with_second and r < 0.8:
            op, nb = ["where2", xrng.choice(SELECT_C["int" if integer else "float"])], \
                max(bound, INT_INPUT_BOUND if integer else INPUT_BOUND)
        else:
            a = xrng.choice(INT_A if integer else FLOAT_A)
            op, nb = ["where", xrng.choice(SELECT_C["int" if integer else "float"]), a], bound * max(1, abs(a))
        if nb > limit or (dtype == "int8" and nb > 100):
            continue
        ops.append(op)
        bound = nb
    return ops


def _bound(ops, dtype):
    """The bound of a map's values after `ops` (as _ops tracks it)."""
    integer = is_int(dtype)
    b = INT_INPUT_BOUND if integer else INPUT_BOUND
    for op in ops:
        n = op[0]
        if n == "axpb":
            b = b * abs(op[1]) + abs(op[2])
        elif n in ("max", "min"):
            b = max(b, abs(op[1]))
        elif n == "sq":
            b = b * b
        elif n == "exp":
            b = 2.718281828459045 ** b
        elif n == "add2":
            b = b + (INT_INPUT_BOUND if integer else INPUT_BOUND)
    return b


def generate(seed):
    """The program description of `seed` (a dict of JSON values)."""
    srng = random.Random(f"structure-{seed // GROUP}")
    rng = random.Random(f"shape-{seed}")
    xrng = random.Random(f"extension-{seed // GROUP}")
    kind = srng.choices(("copy", "map", "reduce", "gemm"), (25, 30, 20, 25))[0]
    sym = srng.random() < 0.75
    d = {"seed": seed, "kind": kind, "sym": sym}
    if kind in ("copy", "map"):
        d["ndim"] = 1 if srng.random() < 0.2 else 2
        d["dt_in"] = srng.choice(DTYPES)
        d["dt_tile"] = srng.choice(DTYPES) if kind == "copy" or srng.random() < 0.2 else srng.choice(FLOATS)
        d["dt_out"] = srng.choice(DTYPES)
        d["bm"], d["bn"] = _block(srng), (_block(srng) if d["ndim"] == 2 else 1)
        d["loop"] = srng.choice(("grid", "grid", "serial", "pipelined"))
        d["stages"] = srng.choice((2, 3))
        d["r0"] = srng.choice((0, 0, 0, 1, 3))
        # 1-D: either a 1-D input or one column c0 of a 2-D input (a (rows, 1) slice into a 1-D tile)
        d["col"] = d["ndim"] == 1 and srng.random() < 0.4
        d["c0"] = srng.choice((0, 0, 0, 1, 5)) if d["ndim"] == 2 or d["col"] else 0
        int32 = xrng.random() < 0.2   # int32 tensors and tile (extension stream)
        if int32:
            d["dt_tile"] = "int32"
            d["dt_in"] = xrng.choice(("int32", "int32", d["dt_in"]))
            d["dt_out"] = xrng.choice(("int32", "int32", d["dt_out"]))
        if kind == "map":
            d["second"] = srng.random() < 0.3
            d["ops"] = _ops(srng, d["dt_tile"], srng.randint(1, 4), d["second"])
            d["fused"] = srng.random() < 0.5
            d["ops"] += _extension_ops(xrng, d["dt_tile"], d["second"], _bound(d["ops"], d["dt_tile"]))
        d["M"] = _dim(rng, d["bm"], sym)
        d["N"] = _dim(rng, d["bn"], sym) if d["ndim"] == 2 else 1
        if sym:   # a symbolic output dimension must be one of an input: A and B share M, N
            d["MA"], d["NA"] = d["M"], d["N"]
        else:
            d["MA"] = max(1, d["M"] + d["r0"] + rng.choice((0, 0, 0, -1, -3, 2)))
            d["NA"] = max(1, d["N"] + d["c0"] + rng.choice((0, 0, 0, -1, 2))) if d["ndim"] == 2 else 1
        if d["col"]:
            d["NA"] = d["c0"] + 1 + rng.choice((0, 0, 2))
    elif kind == "reduce":
        d["dt_in"] = srng.choice(DTYPES)
        d["dt_tile"] = srng.choice(FLOATS + FLOATS + ("int8",))
        d["dt_out"] = srng.choice(DTYPES)
        d["op"] = srng.choice(("sum", "max", "min"))
        d["dim"] = srng.choice((0, 1))
        wide = ((1, 2, 4, 8, 16, 32, 64, 128), (1, 1, 3, 4, 4, 2, 2, 1))  # 128: rows folded in halves
        d["bm"], d["bn"] = _block(srng, *wide), _block(srng, *wide)
        d["loop"] = srng.choice(("grid", "serial", "pipelined"))
        d["stages"] = srng.choice((2, 3))
        d["M"] = _dim(rng, d["bm"], sym)
        d["N"] = _dim(rng, d["bn"], sym)
        if d["loop"] == "grid":   # one tile spans the reduced dimension
            red = "M" if d["dim"] == 0 else "N"
            blk = "bm" if d["dim"] == 0 else "bn"
            d[blk] = max(d[blk], 1)
            d[red] = min(d[red], d[blk]) if d[red] else d[red]
        # a second pass (a second loop) summing the squares into a second output B2
        d["sumsq"] = srng.random() < 0.3
    elif kind == "gemm" and xrng.random() < 0.25:   # a gather program (extension stream)
        d["kind"] = "gather"
        d["loop"] = "grid"
        d["ndim"] = xrng.choice((1, 2))
        d["dt_in"] = d["dt_tile"] = d["dt_out"] = xrng.choice(MAP_DTYPES)
        d["bm"], d["bn"] = _block(xrng), _block(xrng, (1, 2, 4, 8, 16, 32, 64, 128), (1, 1, 2, 3, 4, 3, 2, 1))
        d["M"] = _dim(rng, d["bm"], sym)
        d["N"] = _dim(rng, d["bn"], sym)
        if d["ndim"] == 1:   # the flat form reads whole rows: one tile spans N
            d["N"] = min(d["N"], d["bn"]) if d["N"] else d["N"]
    else:  # gemm
        d["dt_in"] = srng.choice(DTYPES)
        integer = is_int(d["dt_in"])
        d["dt_out"] = srng.choice(("int32", "float32")) if integer else srng.choice(FLOATS)
        d["ta"], d["tb"] = srng.random() < 0.3, srng.random() < 0.3
        d["bm"] = _block(srng, (16, 32, 64), (4, 3, 1))
        d["bn"] = _block(srng, (16, 32, 64), (4, 3, 1))
        d["bk"] = _block(srng, (16, 32, 64), (4, 3, 1))
        d["loop"] = srng.choice(("serial", "pipelined"))
        d["stages"] = srng.choice((2, 3))
        # C = A B + C0: C0 loaded into the accumulator before the K loop ("init") or added after it
        d["accum"] = srng.choices(("", "init", "add"), (6, 2, 2))[0]
        # the accumulator is bounded by 64 * 70 (|a b| <= 16 or 64, K <= 70ish): no exp/sq there
        d["epilogue"] = (_ops(srng, acc_dtype(d), 1, False, bound=5000.0, limit=1e6) if srng.random() < 0.3 else [])
        d["M"] = _dim(rng, d["bm"], sym)
        d["N"] = _dim(rng, d["bn"], sym)
        d["K"] = max(1, _dim(rng, d["bk"], False))
    _extension2(d, seed)
    _extension3(d, seed)
    _extension4(d, seed)
    _extension5(d, seed)
    _extension6(d, seed)
    _extension7(d, seed)
    _extension8(d, seed)
    if d["kind"] == "gather" and d["ndim"] == 2 and random.Random(f"extension9-{seed // GROUP}").random() < 0.3:
        d["gaxis"] = 0   # the eleventh stream: a gather along the tile's leading dim
    _extension10(d, seed)
    _extension11(d, seed)
    _extension12(d, seed)
    _extension13(d, seed)
    if d["kind"] == "copy" and random.Random(f"extension14-pick-{seed // GROUP}").random() < llm.LLM_P:
        return llm.generate(seed)   # the sixteenth stream: an LLM-kernel form (fuzz/llm.py)
    if d["kind"] == "copy" and random.Random(f"extension15-pick-{seed // GROUP}").random() < llm2.LLM2_P:
        return llm2.generate(seed)   # the seventeenth stream (fuzz/llm2.py)
    return d


# the thirteenth stream's gather forms (module docstring)
GFORMS = ("stride1", "stride0", "trans", "flat1", "clamp1", "clamp0", "oob1")


def _extension11(d, seed):
    """The thirteenth stream's gather forms (module docstring), set on `d` in place."""
    grng = random.Random(f"extension11-{seed // GROUP}")
    vrng = random.Random(f"extension11-shape-{seed}")
    r = grng.random()
    plain_copy = d["kind"] == "copy" and not d.get("col") and not any(
        k in d for k in ("nd", "rt", "atomic", "starts", "s0", "s1"))
    if not ((d["kind"] == "gather" and r < 0.6) or (plain_copy and r < 0.3)):
        return
    if d["kind"] == "copy":   # a plain copy becomes a gather of its input dtype
        for k in ("r0", "c0", "col", "MA", "NA", "stages"):
            d.pop(k, None)
        d.update(kind="gather", loop="grid", dt_tile=d["dt_in"], dt_out=d["dt_in"])
    f = grng.choice(GFORMS)
    d["gform"] = f
    d.pop("gaxis", None)
    if f in ("stride1", "stride0"):
        d["ndim"] = 2
        s = grng.choice((2, 3, 4))
        d["stride"] = [s, grng.randrange(s)]
        d["sym"] = False   # B's N (M) is no dimension of an input: constant shapes (positive)
        d["M"], d["N"] = max(d["M"], 1), max(d["N"], 1)
        if f == "stride0":   # the tile's rows are s times the block's: keep it small
            d["bm"] = min(d["bm"], 16)
        big, blk = ("NS", d["N"]) if f == "stride1" else ("MS", d["M"])
        d[big] = max(1, s * blk + vrng.choice((0, 0, -1, -s, 3)))
    elif f == "trans":
        d["ndim"] = 2
        d["N"] = max(d["N"], 0)
    else:   # 1-D: one tile x of bn elements spans A (N <= bn), gathered at Idx's indices
        d["ndim"] = 1
        d["N"] = min(max(d["N"], 1), d["bn"])
        if f == "oob1":   # an index outside the tile: an error / a report at the line
            d["M"] = max(d["M"], 1)
            d["oob"] = [vrng.randrange(d["M"]), vrng.choice((-1, -3, d["bn"], d["bn"] + 2))]
    if f == "clamp0":
        d["ndim"] = 2


SPECIAL_P = 0.3   # the fraction of input elements replaced by special values (fourteenth stream)


def _extension12(d, seed):
    """The fourteenth stream's special input values (module docstring), set on `d` in place: which
    values (the elements and positions come from the stream `extension12-data-<seed>` in inputs())."""
    wrng = random.Random(f"extension12-{seed // GROUP}")
    if d["dt_in"] not in FLOATS or wrng.random() >= 0.25 or d.get("band"):   # (an a_band's A is 0 off the band)
        return
    # (a bfloat16 gemm on cpu reads subnormals as 0: vdpbf16ps, docs/language.md)
    vals = ["inf", "-inf", "nan", "-0"] + ([] if d["kind"] == "gemm" and d["dt_in"] == "bfloat16" else ["denorm"])
    if (d["kind"] in ("map", "reduce") and is_int(d["dt_tile"])) or (d.get("atomic") and is_int(d["dt_out"])):
        # arithmetic (or an atomic add) on the undefined integers that inf / NaN convert to may overflow
        # (a checker report: the simulator does not guess what the chip stores then)
        d["special"] = wrng.sample(["-0", "denorm"], wrng.randint(1, 2))
        return
    ops = {op[0] for op in d.get("ops", []) + d.get("epilogue", [])}
    # huge magnitudes where no sum of them can overflow differently in another order
    if d["kind"] in ("copy", "gather") or (d["kind"] == "reduce" and d["op"] != "sum" and not d.get("sumsq")) \
            or (d["kind"] == "map" and not d.get("atomic")):
        vals += ["huge", "-huge"]
    d["special"] = wrng.sample(vals, wrng.randint(1, len(vals)))


def _extension13(d, seed):
    """The fifteenth stream's 3-D tiles (module docstring), set on `d` in place."""
    trng = random.Random(f"extension13-{seed // GROUP}")
    vrng = random.Random(f"extension13-shape-{seed}")
    plain = not any(k in d for k in ("nd", "rt", "atomic", "starts", "s0", "s1", "gform", "pad"))
    if d["kind"] == "map" and plain and d["ndim"] == 2 and d["loop"] == "grid" and d["r0"] >= 0 \
            and d["c0"] >= 0 and trng.random() < 0.5:
        pass
    elif d["kind"] == "reduce" and plain and d["loop"] == "grid" and not d.get("sumsq") and trng.random() < 0.5:
        pass
    else:
        return
    bh = trng.choice((1, 2, 3, 4))
    d["d3"] = {"bh": bh}
    d["H"] = vrng.choice((1, bh, bh + 1, 2 * bh + 1, max(1, bh - 1)))


def _extension10(d, seed):
    """The twelfth stream's run-time store starts (module docstring), added to `d` in place."""
    wrng = random.Random(f"extension10-{seed // GROUP}")
    vrng = random.Random(f"extension10-shape-{seed}")
    if (d["kind"] not in ("copy", "map") or d.get("col") or d.get("atomic") or d.get("rt", {}).get("store")
            or d.get("s0") or d.get("s1") or wrng.random() >= 0.2):
        return
    axes = ("so",) if d["ndim"] == 1 else wrng.choice((("so",), ("sc",), ("so", "sc")))
    for a in axes:
        blk, size = (d["bm"], d["M"]) if a == "so" else (d["bn"], d["N"])
        d.setdefault("starts", {})[a] = vrng.choice((0, -1, -3, -8, -16, -blk, -blk - 5, 1, 5, blk, size, -size - blk))


def _extension8(d, seed):
    """The tenth stream's bands (module docstring), added to `d` in place."""
    brng = random.Random(f"extension8-{seed // GROUP}")
    if d["kind"] != "gemm" or "starts" in d or "bshd" in d or brng.random() >= 0.25:
        return
    lo = brng.choice((-64, -16, -5, 0, 3))
    d["band"] = [brng.choice(("a", "c")), lo, lo + brng.choice((1, 8, 16, 33, 64, 200))]


def _start(vrng, blk, size):
    """A run-time start offset for a block of `blk` along a tensor dimension of `size`: 0, small,
    negative (inside one 32 B block, whole blocks, the block, wholly before: by a block, by one
    element, ending at 0), at or past the end."""
    return vrng.choice((0, 0, 1, 5, -1, -3, -8, -16, -32, -blk, -blk - 5, size, size + 3, -size - blk,
                        -size - 1, -size))


def _extension7(d, seed):
    """The ninth stream's constructs (module docstring), added to `d` in place."""
    wrng = random.Random(f"extension7-{seed // GROUP}")
    vrng = random.Random(f"extension7-shape-{seed}")
    k = d["kind"]
    if k in ("copy", "map") and not d.get("col") and wrng.random() < 0.2:
        axes = ("ro",) if d["ndim"] == 1 else wrng.choice((("ro",), ("co",), ("ro", "co")))
        size = {"ro": d["MA"], "co": d["NA"]}
        d["starts"] = {a: _start(vrng, d["bm"] if a == "ro" else d["bn"], size[a]) for a in axes}
    elif k == "gemm" and not d.get("rt") and wrng.random() < 0.35:
        axes = [a for a in ("ra", "ka", "kb", "nb") if wrng.random() < 0.5] or [wrng.choice(("ra", "ka", "kb", "nb"))]
        blk = {"ra": d["bm"], "ka": d["bk"], "kb": d["bk"], "nb": d["bn"]}
        size = {"ra": d["M"], "ka": d["K"], "kb": d["K"], "nb": d["N"]}
        d["starts"] = {a: _start(vrng, blk[a], size[a]) for a in axes}
        if wrng.random() < 0.3:   # A's and B's K starts the same (the usual window of a K loop)
            d["starts"]["ka"] = d["starts"]["kb"] = d["starts"].get("ka", 0)
        # BSHD operands: [b, Bt, h, H] of the 4-D tensor (Bt, rows, H, cols) holding the matrix at [b, :, h, :]
        bshd = {}
        for op in wrng.choice(((), ("a",), ("b",), ("a", "b"))):
            b, h = wrng.choice((0, 1)), wrng.choice((0, 1, 2))
            bshd[op] = [b, b + wrng.choice((1, 2)), h, h + wrng.choice((1, 2))]
        if bshd:
            d["bshd"] = bshd


def _extension6(d, seed):
    """The eighth stream's constructs (module docstring), added to `d` in place."""
    grng = random.Random(f"extension6-{seed // GROUP}")
    if d["kind"] != "gemm" or d.get("rt") or grng.random() >= 0.3:
        return
    # wholek: no K loop, one gemm over K (a constant) of both tensors' slices, walked by the
    # compiler (on Ascend in pipelined chunks when the staged tiles pass 64 KiB)
    d["wholek"] = not d["sym"] and grng.random() < 0.5
    d["gm"] = "ab" if d["wholek"] else grng.choice(("a", "b", "ab"))
    for dim, blk in (("M", "bm"), ("N", "bn"), ("K", "bk")):
        d[dim] = -(-d[dim] // d[blk]) * d[blk]
    # longk (wholek only, drawn last so the draws above stay): K past one staged chunk (Ascend
    # walks it in pipelined chunks, the last one a run-time tail), at most 2 x 2 blocks and no
    # epilogue (its bound assumes K <= 70) to keep the run short
    if d["wholek"] and grng.random() < 0.5:
        kc = longk_chunk(d)
        extra = grng.choice((1, kc // 2 + 5, kc + 1))
        d["K"] = -(-(kc + extra) // d["bk"]) * d["bk"]
        d["M"], d["N"] = min(d["M"], 2 * d["bm"]), min(d["N"], 2 * d["bn"])
        d["epilogue"] = []
        d["longk"] = True


def longk_chunk(d):
    """stage_gemm_operands's K chunk for a wholek program (docs/ascend.md "Gemm operands in global
    tensors"): the largest multiple of the K fractal whose staged A and B tiles fit 64 KiB."""
    es = {"int8": 1, "float16": 2, "bfloat16": 2, "float32": 4}[d["dt_in"]]
    kg = max(16, 32 // es)
    per_k = (-(-d["bm"] // 16) * 16 + -(-d["bn"] // 16) * 16) * es
    return max(kg, 65536 // per_k // kg * kg)


def _extension5(d, seed):
    """The seventh stream's constructs (module docstring), added to `d` in place."""
    wrng = random.Random(f"extension5-{seed // GROUP}")
    vrng = random.Random(f"extension5-shape-{seed}")
    if (d["kind"] not in ("copy", "map", "gemm") or d.get("atomic") or d.get("rt", {}).get("store")
            or wrng.random() >= 0.25):
        return
    axes = ("s0",) if d.get("ndim") == 1 else wrng.choice((("s0",), ("s1",), ("s0", "s1")))
    for a in axes:
        blk = d["bm"] if a == "s0" else d["bn"]
        # a gemm's result leaves L0C in whole 16 x 16 fractals (Fixpipe): multiples of 16 only
        d[a] = vrng.choice((16, 32, blk) if d["kind"] == "gemm" else (1, 3, 8, 16, blk, blk + 5))


def _extension4(d, seed):
    """The sixth stream's constructs (module docstring), added to `d` in place."""
    wrng = random.Random(f"extension4-{seed // GROUP}")
    vrng = random.Random(f"extension4-shape-{seed}")
    if d["kind"] not in ("copy", "map") or d.get("col") or wrng.random() >= 0.25:
        return
    axes = ("r0",) if d["ndim"] == 1 else wrng.choice((("r0",), ("c0",), ("r0", "c0")))
    for a in axes:
        blk = d["bm"] if a == "r0" else d["bn"]
        d[a] = -vrng.choice((1, 3, 8, 16, blk, blk + 5))


def _extension3(d, seed):
    """The fifth stream's constructs (module docstring), added to `d` in place."""
    zrng = random.Random(f"extension3-{seed // GROUP}")
    if d["kind"] == "reduce" and d["dim"] == 1 and not d.get("sumsq") and zrng.random() < 0.8:
        d["pad"] = zrng.choice((1, 3, 7, 9, 16))


ATOMIC_DTYPES = ("float32", "float16", "bfloat16", "int32")


def _trips(d, vrng, blk):
    """A looped dimension walked in 1, 2, 5 or 7 steps of `blk`, a tail in the last."""
    return (vrng.choice((1, 2, 5, 7)) - 1) * blk + vrng.randint(1, blk)


def _extension2(d, seed):
    """The fourth stream's constructs (module docstring), added to `d` in place."""
    yrng = random.Random(f"extension2-{seed // GROUP}")
    vrng = random.Random(f"extension2-shape-{seed}")
    k = d["kind"]
    if k in ("copy", "map") and not d.get("col"):
        if d["ndim"] == 2 and yrng.random() < 0.2:
            d["nd"] = {"pos": yrng.choice((0, 1)), "h": yrng.choice((0, 1, 2))}
            d["H"] = d["nd"]["h"] + 1 + vrng.randint(0, 2)
        if yrng.random() < 0.15:
            d["atomic"] = yrng.choice((1, 2, 3))
            if d["dt_out"] not in ATOMIC_DTYPES:
                d["dt_out"] = yrng.choice(ATOMIC_DTYPES)
        if yrng.random() < 0.3:
            axis = 0 if d["ndim"] == 1 else yrng.choice((0, 1))
            d["rt"] = {"axis": axis, "store": not d.get("atomic") and yrng.random() < 0.6}
    if k == "gemm" and yrng.random() < 0.25:   # A's rows (M) or B's columns (N) at run time
        d["rt"] = {"axis": yrng.choice((0, 1)), "store": yrng.random() < 0.6}
    loop_dim = {"copy": "M" if d.get("ndim") == 1 else "N", "map": "M" if d.get("ndim") == 1 else "N",
                "reduce": "M" if d.get("dim") == 0 else "N", "gemm": "K"}.get(k)
    changed = None
    if loop_dim and d["loop"] != "grid" and yrng.random() < 0.35:
        blk = {"M": d["bm"], "N": d["bn"], "K": d.get("bk")}[loop_dim]
        d[loop_dim] = changed = _trips(d, vrng, blk)
    if d["sym"] and k != "gather" and vrng.random() < 0.06:
        d[vrng.choice(("M", "N") if d.get("ndim", 2) == 2 else ("M",))] = 0
        changed = True
    if k in ("copy", "map") and changed is not None:   # A's dims follow B's (as generate() draws them)
        if d["sym"]:
            d["MA"] = d["M"]
            d["NA"] = d["NA"] if d.get("col") else d["N"]
        elif loop_dim == "M":
            d["MA"] = max(1, d["M"] + d["r0"])
        else:
            d["NA"] = max(1, d["N"] + d["c0"])
    if "rt" in d:
        size = d["M"] if d["rt"]["axis"] == 0 else d["N"]
        d["n"] = vrng.choice((0, 1, size, max(0, size - 1), size // 2, size + 3, -2))


# ---------------------------------------------------------------------------------------------
# Source text

def acc_dtype(d):
    return "int32" if is_int(d["dt_in"]) else "float32"


def tensors(d):
    """[(name, shape (names or ints), dtype, is_output)] of the kernel's parameters, in order."""
    k = d["kind"]
    if k == "llm":
        return llm.tensors(d)
    if k == "llm2":
        return llm2.tensors(d)
    if k == "skip":
        return skip.tensors(d)
    if k == "hunt":
        return hunt.tensors(d)
    if k == "chain":
        return chain.tensors(d)
    if k == "scal":
        return scal.tensors(d)
    if k == "wide":
        return wide.tensors(d)
    if k == "idiom":
        return idiom.tensors(d)
    if d.get("d3"):   # 3-D tiles (fifteenth stream): (H, rows, cols) tensors
        if k == "reduce":
            return [("A", ("H", "M", "N"), d["dt_in"], False),
                    ("B", ("H", "M") if d["dim"] == 1 else ("H", "N"), d["dt_out"], True)]
        a = ("H",) + (("M", "N") if d["sym"] else ("MA", "NA"))
        ins = [("A", a, d["dt_in"])] + ([("A2", a, d["dt_in"])] if d["second"] else [])
        return [t + (False,) for t in ins] + [("B", ("H", "M", "N"), d["dt_out"], True)]
    if k in ("copy", "map"):
        a_dims = ("M", "N") if d["sym"] else ("MA", "NA")
        if d.get("nd"):   # a unit dim h of H before the rows or between rows and columns
            a_dims = ("H",) + a_dims if d["nd"]["pos"] == 0 else (a_dims[0], "H", a_dims[1])
        if d.get("col"):
            ins = [("A", (a_dims[0], "NA"), d["dt_in"])]
            out = ("B", ("M",), d["dt_out"])
        elif d["ndim"] == 1:
            ins = [("A", a_dims[:1], d["dt_in"])]
            out = ("B", ("M",), d["dt_out"])
        else:
            ins = [("A", a_dims, d["dt_in"])]
            out = ("B", ("M", "N"), d["dt_out"])
        if k == "map" and d["second"]:
            ins.append(("A2", ins[0][1], d["dt_in"]))
        if "rt" in d:
            ins.append(("Lens", (1,), "int32"))
        ins += _scalars(d)
        return [t + (False,) for t in ins] + [out + (not d.get("atomic"),)]
    if k == "reduce":
        out = ("N",) if d["dim"] == 0 else ("M",)
        return [("A", ("M", "N"), d["dt_in"], False), ("B", out, d["dt_out"], True)] + \
            ([("B2", out, d["dt_out"], True)] if d.get("sumsq") else [])
    if k == "gather":
        f = d.get("gform")
        if f:   # the thirteenth stream's forms
            a = {"stride1": ("M", "NS"), "stride0": ("MS", "N"), "trans": ("N", "M")}.get(f)
            if d["ndim"] == 1:
                return [("A", ("N",), d["dt_in"], False), ("Idx", ("M",), "int32", False),
                        ("B", ("M",), d["dt_in"], True)]
            ins = [("A", a, d["dt_in"], False)] if a else [("A", ("M", "N"), d["dt_in"], False),
                                                          ("Idx", ("M", "N"), "int32", False)]
            return ins + [("B", ("M", "N"), d["dt_in"], True)]
        if d["ndim"] == 1:
            return [("A", ("M", "N"), d["dt_in"], False), ("Idx", ("M",), "int32", False),
                    ("B", ("M",), d["dt_in"], True)]
        return [("A", ("M", "N"), d["dt_in"], False), ("Idx", ("M", "N"), "int32", False),
                ("B", ("M", "N"), d["dt_in"], True)]
    a = ("K", "M") if d["ta"] else ("M", "K")
    b = ("N", "K") if d["tb"] else ("K", "N")
    bshd = d.get("bshd", {})   # a 4-D (Bt, rows, H, cols) tensor (ninth stream)
    if "a" in bshd:
        a = (bshd["a"][1], a[0], bshd["a"][3], a[1])
    if "b" in bshd:
        b = (bshd["b"][1], b[0], bshd["b"][3], b[1])
    ts = [("A", a, d["dt_in"], False), ("B", b, d["dt_in"], False)]
    if d["accum"]:
        ts.append(("C0", ("M", "N"), acc_dtype(d), False))
    if "rt" in d:
        ts.append(("Lens", (1,), "int32", False))
    return ts + [t + (False,) for t in _scalars(d)] + [("C", ("M", "N"), d["dt_out"], True)]


def _scalars(d):
    """The ninth stream's int32 scalar parameters (run-time starts), shape ()."""
    return [(name, (), "int32") for name in sorted(d.get("starts", {}))]


def shape_of(d, dims):
    return tuple(d[n] if isinstance(n, str) else n for n in dims)


def _lit(v):
    return repr(float(v)) if isinstance(v, float) else repr(int(v))


# the source text of each map operation on the value `x` (and `y`, the second input's element)
OP_SOURCE = {
    "axpb": lambda op, x, y: f"{x} * {_lit(op[1])} + {_lit(op[2])}",
    "max": lambda op, x, y: f"T.max({x}, {_lit(op[1])})",
    "min": lambda op, x, y: f"T.min({x}, {_lit(op[1])})",
    "abs": lambda op, x, y: f"T.abs({x})",
    "sq": lambda op, x, y: f"{x} * {x}",
    "exp": lambda op, x, y: f"T.exp({x})",
    "cast": lambda op, x, y: f"T.cast({x}, {op[1]!r})",
    "add2": lambda op, x, y: f"{x} + {y}",
    "where": lambda op, x, y: f"T.where({x} > {_lit(op[1])}, {x}, {x} * {_lit(op[2])})",
    "where2": lambda op, x, y: f"T.where({y} > {_lit(op[1])}, {x}, {y})",
    "fdiv": lambda op, x, y: f"{x} // {_lit(op[1])}",
    "mod": lambda op, x, y: f"{x} % {_lit(op[1])}",
    "shl": lambda op, x, y: f"{x} << {_lit(op[1])}",
    "shr": lambda op, x, y: f"{x} >> {_lit(op[1])}",
    "inv": lambda op, x, y: f"~{x}",
    "band": lambda op, x, y: f"{x} & {_lit(op[1])}",
    "bor": lambda op, x, y: f"{x} | {_lit(op[1])}",
    "bxor": lambda op, x, y: f"{x} ^ {_lit(op[1])}",
}


def _expr(op, x, y):
    return OP_SOURCE[op[0]](op, x, y)


def _map_lines(ops, fused, tile, idx, second, extents):
    """The T.Parallel loop(s) applying `ops` to `tile`."""
    head = f"for {', '.join(idx)} in T.Parallel({', '.join(str(e) for e in extents)}):"
    at = f"{tile}[{', '.join(idx)}]"
    y = f"{second}[{', '.join(idx)}]" if second else None
    if fused:
        e = at
        for op in ops:
            e = _expr(op, f"({e})" if e != at else e, y)
        return [head, f"    {at} = {e}"]
    lines = []
    for op in ops:
        lines += [head, f"    {at} = {_expr(op, at, y)}"]
    return lines


def _loop(d, var, extent):
    if d["loop"] == "pipelined":
        return f"for {var} in T.Pipelined({extent}, num_stages={d['stages']}):"
    return f"for {var} in T.serial({extent}):"


def _dimtext(d, name):
    if not isinstance(name, str):
        return str(name)
    return name if d["sym"] else str(d[name])


def _body(d):
    k = d["kind"]
    dim = lambda n: _dimtext(d, n)  # noqa: E731
    bm, bn = d["bm"], d.get("bn")
    lines = []
    if d.get("d3"):
        return _d3_body(d, dim)
    if k in ("copy", "map"):
        one = d["ndim"] == 1
        shape = f"({bm},)" if one else f"({bm}, {bn})"
        idx = ("i",) if one else ("i", "j")
        ext = (bm,) if one else (bm, bn)
        r0 = f" + {d['r0']}" if d["r0"] else ""
        c0 = f" + {d['c0']}" if d["c0"] else ""
        starts = d.get("starts", {})   # run-time starts, scalar parameters (ninth stream)
        r0 += " + ro" if "ro" in starts else ""
        c0 += " + co" if "co" in starts else ""
        s0 = f" - {d['s0']}" if d.get("s0") else ""   # a store origin before the tensor (seventh stream)
        s1 = f" - {d['s1']}" if d.get("s1") else ""
        s0 += " + so" if "so" in starts else ""   # run-time store starts (twelfth stream)
        s1 += " + sc" if "sc" in starts else ""
        if one:
            grid = f"T.Kernel(T.ceildiv({dim('M')}, {bm})) as by" if d["loop"] == "grid" else "T.Kernel(1) as bz"
            src, dst = f"[by * {bm}{r0}]", f"[by * {bm}{s0}]"
            if d.get("col"):
                src = f"[by * {bm}{r0}:by * {bm}{r0} + {bm}, {d['c0']}]"
        else:
            grid = (f"T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('M')}, {bm})) as (bx, by)"
                    if d["loop"] == "grid" else f"T.Kernel(T.ceildiv({dim('M')}, {bm})) as by")
            src, dst = f"[by * {bm}{r0}, bx * {bn}{c0}]", f"[by * {bm}{s0}, bx * {bn}{s1}]"
        if d.get("atomic", 1) > 1:   # S blocks of a last grid dim add the same tile
            head, names = grid[:grid.rindex(") as ")], grid[grid.rindex(") as ") + 5:]
            grid = f"{head}, {d['atomic']}) as ({names.strip('()')}, s)"
        lines.append(f"with {grid}:")
        body = [f"x = T.alloc_fragment({shape}, {d['dt_tile']!r})"]
        second = k == "map" and d["second"]
        if second:
            body.append(f"y = T.alloc_fragment({shape}, {d['dt_tile']!r})")
        rt = d.get("rt")
        if rt or d.get("nd"):   # explicit slices: a run-time extent `cnt`, a unit dim h
            ri = [f"by * {bm}{r0}", "cnt" if rt and rt["axis"] == 0 else str(bm)]
            ci = [f"bx * {bn}{c0}", "cnt" if rt and rt["axis"] == 1 else str(bn)]
            idxs = [f"{ri[0]}:{ri[0]} + {ri[1]}"] + ([] if one else [f"{ci[0]}:{ci[0]} + {ci[1]}"])
            if d.get("nd"):
                idxs.insert(0 if d["nd"]["pos"] == 0 else 1, str(d["nd"]["h"]))
            src = f"[{', '.join(idxs)}]"
        if rt:
            body.append("n = Lens[0]")
        inner = []
        if rt:
            var, blk = ("by", bm) if rt["axis"] == 0 else ("bx", bn)
            inner.append(f"cnt = T.min({blk}, n - {var} * {blk})")
        inner.append(f"T.copy(A{src}, x)")
        if second:
            inner.append(f"T.copy(A2{src}, y)")
        if k == "map":
            inner += _map_lines(d["ops"], d["fused"], "x", idx, "y" if second else None, ext)
        if d.get("atomic"):
            inner.append(f"T.atomic_add(B{dst}, x)")
        elif rt and rt["store"]:
            tile = "x[0:cnt]" if one else ("x[0:cnt, :]" if rt["axis"] == 0 else "x[:, 0:cnt]")
            rows = f"by * {bm}:by * {bm} + " + ("cnt" if rt["axis"] == 0 else str(bm))
            cols = "" if one else f", bx * {bn}:bx * {bn} + " + ("cnt" if rt["axis"] == 1 else str(bn))
            inner.append(f"T.copy({tile}, B[{rows}{cols}])")
        else:
            inner.append(f"T.copy(x, B{dst})")
        if d["loop"] == "grid":
            body += inner
        else:
            var, extent = ("by", f"T.ceildiv({dim('M')}, {bm})") if one else ("bx", f"T.ceildiv({dim('N')}, {bn})")
            body.append(_loop(d, var, extent))
            body += ["    " + s for s in inner]
        return lines + ["    " + s for s in body]
    if k == "reduce":
        dt = d["dt_tile"]
        fn = f"T.reduce_{d['op']}"
        if d["dim"] == 1:   # one value per row; blocks of rows on the grid
            grid, kept, red_ext, red_blk = f"T.Kernel(T.ceildiv({dim('M')}, {bm})) as by", bm, dim("N"), bn
            src = lambda c: f"A[by * {bm}, {c}]"  # noqa: E731
            dst = lambda out: f"{out}[by * {bm}]"  # noqa: E731
        else:
            grid, kept, red_ext, red_blk = f"T.Kernel(T.ceildiv({dim('N')}, {bn})) as bx", bn, dim("M"), bm
            src = lambda r: f"A[{r}, bx * {bn}]"  # noqa: E731
            dst = lambda out: f"{out}[bx * {bn}]"  # noqa: E731
        pad = d.get("pad", 0)
        body = [f"x = T.alloc_fragment(({bm}, {bn + pad}), {dt!r})", f"r = T.alloc_fragment(({kept},), {dt!r})"]
        if d.get("sumsq"):
            body.append(f"r2 = T.alloc_fragment(({kept},), {dt!r})")
        xw = "x"
        if pad:   # a wider tile: its columns past the block hold the identity, the blocks land in a window
            body.append(f"T.fill(x, {_lit(pad_value(d['op'], dt))})")
            xw = f"x[0:{bm}, 0:{bn}]"

        def one_pass(fn, r, var, pre):
            if d["loop"] == "grid":
                return [f"T.copy({src(0)}, {xw})"] + pre + [f"{fn}(x, {r}, dim={d['dim']})"]
            return ([f"T.fill({r}, {reduce_identity_text(fn[len('T.reduce_'):], dt)})",
                     _loop(d, var, f"T.ceildiv({red_ext}, {red_blk})"), f"    T.copy({src(f'{var} * {red_blk}')}, {xw})"]
                    + ["    " + s for s in pre] + [f"    {fn}(x, {r}, dim={d['dim']}, clear=False)"])

        body += one_pass(fn, "r", "k", [])
        body.append(f"T.copy(r, {dst('B')})")
        if d.get("sumsq"):
            body += one_pass("T.reduce_sum", "r2", "k2", _map_lines([["sq"]], True, "x", ("i", "j"), None, (bm, bn)))
            body.append(f"T.copy(r2, {dst('B2')})")
        return [f"with {grid}:"] + ["    " + s for s in body]
    if k == "gather":
        dt = d["dt_in"]
        if d.get("gform"):
            return _gform_body(d, dim)
        if d["ndim"] == 1:
            body = [f"x = T.alloc_fragment(({bm}, {bn}), {dt!r})", f"ix = T.alloc_fragment(({bm},), 'int32')",
                    f"y = T.alloc_fragment(({bm},), {dt!r})", f"T.copy(A[by * {bm}, 0], x)",
                    f"T.copy(Idx[by * {bm}], ix)", f"for i in T.Parallel({bm}):", "    y[i] = x[i, ix[i]]",
                    f"T.copy(y, B[by * {bm}])"]
            return [f"with T.Kernel(T.ceildiv({dim('M')}, {bm})) as by:"] + ["    " + s for s in body]
        body = [f"x = T.alloc_fragment(({bm}, {bn}), {dt!r})", f"ix = T.alloc_fragment(({bm}, {bn}), 'int32')",
                f"y = T.alloc_fragment(({bm}, {bn}), {dt!r})", f"T.copy(A[by * {bm}, bx * {bn}], x)",
                f"T.copy(Idx[by * {bm}, bx * {bn}], ix)", f"for i, j in T.Parallel({bm}, {bn}):",
                "    y[i, j] = " + ("x[ix[i, j], j]" if d.get("gaxis") == 0 else "x[i, ix[i, j]]"),
                f"T.copy(y, B[by * {bm}, bx * {bn}])"]
        return [f"with T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('M')}, {bm})) as (bx, by):"] + \
            ["    " + s for s in body]
    # gemm
    bk = d["bk"]
    adt, acc = d["dt_in"], acc_dtype(d)
    a_shape = f"({bk}, {bm})" if d["ta"] else f"({bm}, {bk})"
    b_shape = f"({bn}, {bk})" if d["tb"] else f"({bk}, {bn})"
    a_src = f"A[k * {bk}, by * {bm}]" if d["ta"] else f"A[by * {bm}, k * {bk}]"
    b_src = f"B[bx * {bn}, k * {bk}]" if d["tb"] else f"B[k * {bk}, bx * {bn}]"
    rt = d.get("rt")
    if rt:   # explicit slices, `cnt` rows of A (columns of B) at run time
        sl = lambda st, e: f"{st}:{st} + {e}"  # noqa: E731
        am, bnn = sl(f"by * {bm}", "cnt" if rt["axis"] == 0 else bm), sl(f"bx * {bn}", "cnt" if rt["axis"] == 1 else bn)
        kk = sl(f"k * {bk}", bk)
        a_src = f"A[{kk}, {am}]" if d["ta"] else f"A[{am}, {kk}]"
        b_src = f"B[{bnn}, {kk}]" if d["tb"] else f"B[{kk}, {bnn}]"
    gm = d.get("gm", "")   # operands read by the gemm straight from the tensor (eighth stream)
    if gm:
        sl = lambda v, b: f"{v} * {b}:({v} + 1) * {b}"  # noqa: E731
        a_gm = f"A[{sl('k', bk)}, {sl('by', bm)}]" if d["ta"] else f"A[{sl('by', bm)}, {sl('k', bk)}]"
        b_gm = f"B[{sl('bx', bn)}, {sl('k', bk)}]" if d["tb"] else f"B[{sl('k', bk)}, {sl('bx', bn)}]"
    if "starts" in d or "bshd" in d:   # run-time starts, BSHD operands (ninth stream)
        a_src = a_gm = _operand(d, "a", True)
        b_src = b_gm = _operand(d, "b", True)
    flags = "".join([", transpose_A=True" if d["ta"] else "", ", transpose_B=True" if d["tb"] else ""])
    if d.get("band"):   # a band of the global diagonals, relative to the block's regions (tenth stream)
        op, lo, hi = d["band"]
        rel = f" + by * {bm} - bx * {bn}" if op == "c" else (f" + by * {bm}" if d.get("wholek") else f" + by * {bm} - k * {bk}")
        flags += f", {op}_band=({lo}{rel}, {hi}{rel})"
    body = ([] if "a" in gm else [f"a = T.alloc_shared({a_shape}, {adt!r})"]) + \
        ([] if "b" in gm else [f"b = T.alloc_shared({b_shape}, {adt!r})"]) + \
        [f"acc = T.alloc_fragment(({bm}, {bn}), {acc!r})"]
    if d["accum"] == "add":
        body.append(f"c0 = T.alloc_fragment(({bm}, {bn}), {acc!r})")
    if rt:
        var, blk = ("by", bm) if rt["axis"] == 0 else ("bx", bn)
        body += ["n = Lens[0]", f"cnt = T.min({blk}, n - {var} * {blk})"]
    body.append(f"T.copy(C0[by * {bm}, bx * {bn}], acc)" if d["accum"] == "init" else "T.clear(acc)")
    if d.get("wholek"):   # one gemm over the whole K of the tensors' slices (constant K)
        kk = f"0:{dim('K')}"
        a_gm = f"A[{kk}, {sl('by', bm)}]" if d["ta"] else f"A[{sl('by', bm)}, {kk}]"
        b_gm = f"B[{sl('bx', bn)}, {kk}]" if d["tb"] else f"B[{kk}, {sl('bx', bn)}]"
        if "starts" in d or "bshd" in d:
            a_gm, b_gm = _operand(d, "a", False), _operand(d, "b", False)
        body.append(f"T.gemm({a_gm}, {b_gm}, acc{flags})")
    else:
        body.append(_loop(d, "k", f"T.ceildiv({dim('K')}, {bk})"))
        body += ([] if "a" in gm else [f"    T.copy({a_src}, a)"]) + ([] if "b" in gm else [f"    T.copy({b_src}, b)"])
        body.append(f"    T.gemm({a_gm if 'a' in gm else 'a'}, {b_gm if 'b' in gm else 'b'}, acc{flags})")
    if d["accum"] == "add":
        body.append(f"T.copy(C0[by * {bm}, bx * {bn}], c0)")
        body += _map_lines([["add2"]], True, "acc", ("i", "j"), "c0", (bm, bn))
    if d["epilogue"]:
        body += _map_lines(d["epilogue"], True, "acc", ("i", "j"), None, (bm, bn))
    if rt and rt["store"]:
        tile = "acc[0:cnt, :]" if rt["axis"] == 0 else "acc[:, 0:cnt]"
        rows = f"by * {bm}:by * {bm} + " + ("cnt" if rt["axis"] == 0 else str(bm))
        cols = f"bx * {bn}:bx * {bn} + " + ("cnt" if rt["axis"] == 1 else str(bn))
        body.append(f"T.copy({tile}, C[{rows}, {cols}])")
    else:
        s0 = f" - {d['s0']}" if d.get("s0") else ""   # a store origin before the tensor (seventh stream)
        s1 = f" - {d['s1']}" if d.get("s1") else ""
        body.append(f"T.copy(acc, C[by * {bm}{s0}, bx * {bn}{s1}])")
    return [f"with T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('M')}, {bm})) as (bx, by):"] + ["    " + s for s in body]


def _d3_body(d, dim):
    """The kernel body of a fifteenth-stream program: a map or a reduction of a 3-D tile."""
    dt, bh, bm, bn = d["dt_tile"], d["d3"]["bh"], d["bm"], d["bn"]
    shape = f"({bh}, {bm}, {bn})"
    if d["kind"] == "map":
        r0 = f" + {d['r0']}" if d["r0"] else ""
        c0 = f" + {d['c0']}" if d["c0"] else ""
        src = f"[bz * {bh}, by * {bm}{r0}, bx * {bn}{c0}]"
        body = [f"x = T.alloc_fragment({shape}, {dt!r})"] + ([f"y = T.alloc_fragment({shape}, {dt!r})"] if d["second"] else [])
        body.append(f"T.copy(A{src}, x)")
        if d["second"]:
            body.append(f"T.copy(A2{src}, y)")
        body += _map_lines(d["ops"], d["fused"], "x", ("h", "i", "j"), "y" if d["second"] else None, (bh, bm, bn))
        body.append(f"T.copy(x, B[bz * {bh}, by * {bm}, bx * {bn}])")
        grid = f"T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('M')}, {bm}), T.ceildiv({dim('H')}, {bh})) as (bx, by, bz)"
        return [f"with {grid}:"] + ["    " + s for s in body]
    if d["dim"] == 1:   # reduce the last dim: blocks of (h, rows)
        grid, kept, src, dst = (f"T.Kernel(T.ceildiv({dim('M')}, {bm}), T.ceildiv({dim('H')}, {bh})) as (by, bz)", bm,
                                f"A[bz * {bh}, by * {bm}, 0]", f"B[bz * {bh}, by * {bm}]")
    else:
        grid, kept, src, dst = (f"T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('H')}, {bh})) as (bx, bz)", bn,
                                f"A[bz * {bh}, 0, bx * {bn}]", f"B[bz * {bh}, bx * {bn}]")
    body = [f"x = T.alloc_fragment({shape}, {dt!r})", f"r = T.alloc_fragment(({bh}, {kept}), {dt!r})",
            f"T.copy({src}, x)", f"T.reduce_{d['op']}(x, r, dim={d['dim'] + 1})", f"T.copy(r, {dst})"]
    return [f"with {grid}:"] + ["    " + s for s in body]


def _gform_body(d, dim):
    """The kernel body of a thirteenth-stream gather form."""
    dt, f, bm, bn = d["dt_in"], d["gform"], d["bm"], d["bn"]
    if d["ndim"] == 1:   # y[i] = x[ix[i]]: x one tile of A's N <= bn elements
        at = "ix[i]" if f != "clamp1" else f"T.min(T.max(ix[i], 0), {bn - 1})"
        body = [f"x = T.alloc_fragment(({bn},), {dt!r})", f"ix = T.alloc_fragment(({bm},), 'int32')",
                f"y = T.alloc_fragment(({bm},), {dt!r})", "T.copy(A[0], x)", f"T.copy(Idx[by * {bm}], ix)",
                f"for i in T.Parallel({bm}):", f"    y[i] = x[{at}]", f"T.copy(y, B[by * {bm}])"]
        return [f"with T.Kernel(T.ceildiv({dim('M')}, {bm})) as by:"] + ["    " + s for s in body]
    if f in ("stride1", "stride0"):
        s, c = d["stride"]
        e = f"{s} * {'j' if f == 'stride1' else 'i'}" + (f" + {c}" if c else "")
        xs, load, read = (((bm, s * bn), f"A[by * {bm}, bx * {s * bn}]", f"x[i, {e}]") if f == "stride1" else
                          ((s * bm, bn), f"A[by * {s * bm}, bx * {bn}]", f"x[{e}, j]"))
        body = [f"x = T.alloc_fragment({xs}, {dt!r})", f"T.copy({load}, x)"]
    elif f == "trans":
        body = [f"x = T.alloc_fragment(({bn}, {bm}), {dt!r})", f"T.copy(A[bx * {bn}, by * {bm}], x)"]
        read = "x[j, i]"
    else:   # clamp0: a leading-dim gather at clamped indices
        body = [f"x = T.alloc_fragment(({bm}, {bn}), {dt!r})", f"ix = T.alloc_fragment(({bm}, {bn}), 'int32')",
                f"T.copy(A[by * {bm}, bx * {bn}], x)", f"T.copy(Idx[by * {bm}, bx * {bn}], ix)"]
        read = f"x[T.min(T.max(ix[i, j], 0), {bm - 1}), j]"
    body += [f"y = T.alloc_fragment(({bm}, {bn}), {dt!r})", f"for i, j in T.Parallel({bm}, {bn}):",
             f"    y[i, j] = {read}", f"T.copy(y, B[by * {bm}, bx * {bn}])"]
    return [f"with T.Kernel(T.ceildiv({dim('N')}, {bn}), T.ceildiv({dim('M')}, {bm})) as (bx, by):"] + \
        ["    " + s for s in body]


def _operand(d, op, step):
    """The region text of gemm operand `op` ("a" or "b") of a ninth-stream program: K step k's
    block (`step`) or the whole K, each start plus its run-time start if drawn, a BSHD tensor's
    matrix at [b, :, h, :]."""
    starts = d.get("starts", {})
    kdim = (f"k * {d['bk']}", str(d["bk"])) if step else ("0", _dimtext(d, "K"))
    if op == "a":
        other, name, k_rows, (o_off, k_off) = (f"by * {d['bm']}", str(d["bm"])), "A", d["ta"], ("ra", "ka")
    else:
        other, name, k_rows, (o_off, k_off) = (f"bx * {d['bn']}", str(d["bn"])), "B", not d["tb"], ("nb", "kb")

    def sl(base, off):
        st = base[0]
        if off in starts:
            st = off if st == "0" else f"{st} + {off}"
        return f"{st}:{st} + {base[1]}"
    ko, oo = sl(kdim, k_off), sl(other, o_off)
    rows, cols = (ko, oo) if k_rows else (oo, ko)
    if op in d.get("bshd", {}):
        b, _, h, _ = d["bshd"][op]
        return f"{name}[{b}, {rows}, {h}, {cols}]"
    return f"{name}[{rows}, {cols}]"


def pad_value(op, dtype):
    """The value a tile window program fills its tile's extra columns with: it takes part in every
    block's reduction (not the identity, so a load that overwrote it shows)."""
    if op == "sum":
        return 1.0
    v = 7.0 if is_int(dtype) else 3.5
    return -v if op == "max" else v


def reduce_identity_text(op, dtype):
    if op == "sum":
        return "0"
    if is_int(dtype):
        return "-128" if op == "max" else "127"
    return f"-T.infinity({dtype!r})" if op == "max" else f"T.infinity({dtype!r})"


KERNEL_NAME = "fuzz_kernel"


def source(d):
    """The kernel module's source text: imports, symbolic dimensions, one @T.prim_func named
    KERNEL_NAME. The seed is in the description, not in the text (so programs that differ only
    in their symbolic shapes have the same text and share a compiled kernel)."""
    if d["kind"] == "llm":
        return llm.source(d)
    if d["kind"] == "llm2":
        return llm2.source(d)
    if d["kind"] == "skip":
        return skip.source(d)
    if d["kind"] == "hunt":
        return hunt.source(d)
    if d["kind"] == "chain":
        return chain.source(d)
    if d["kind"] == "scal":
        return scal.source(d)
    if d["kind"] == "wide":
        return wide.source(d)
    if d["kind"] == "idiom":
        return idiom.source(d)
    ts = tensors(d)
    names = sorted({n for _, shape, _, _ in ts for n in shape if isinstance(n, str)})
    lines = ["import tilewright.language as T", ""]
    if d["sym"]:
        lines += [f"{n} = T.symbolic({n!r})" for n in names] + [""]
    params = []
    for name, shape, dt, _ in ts:
        if shape == ():   # a scalar parameter
            params.append(f"{name}: T.{dt}")
            continue
        dims = ", ".join(_dimtext(d, n) for n in shape) + ("," if len(shape) == 1 else "")
        params.append(f"{name}: T.Tensor(({dims}), {dt!r})")
    lines += ["", "@T.prim_func", f"def {KERNEL_NAME}({', '.join(params)}):"]
    lines += ["    " + s for s in _body(d)]
    return "\n".join(lines) + "\n"


def out_index(d):
    return [i for i, t in enumerate(tensors(d)) if t[3]]


def checked(d):
    """The tensors compared with the reference: the outputs, or the tensor added into in place."""
    ts = tensors(d)
    return [t for t in ts if t[3]] or [t for t in ts if t[0] == "B"]
