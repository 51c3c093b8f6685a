"""The Tilewright DSL vocabulary: ``import tilewright.language as T``.

Nothing here computes anything on data. The names are *markers*: the front end
(:mod:`tilewright.frontend`) reads the kernel's Python source, recognises calls to these objects
and builds the Tile IR. Calling a marker outside a kernel raises :class:`TilewrightError`.

A few names are ordinary values that kernels use at definition time:

* :class:`Tensor` (alias :data:`Buffer`): a parameter annotation ``T.Tensor((M, K), "float16")``.
* :func:`symbolic`: a symbolic dimension, ``M = T.symbolic("M")``; shapes may also name a
  dimension with a string, ``T.Tensor(("M", 64), dtype)``.
* dtype names: ``T.float16`` ... ``T.bool``. They are strings (``T.float16 == "float16"``); inside a
  kernel, calling one is a cast: ``T.float32(x)``.
* :func:`ceildiv`, :func:`min`, :func:`max` also work on plain Python ints (so grid sizes can be
  computed in Python); on anything else they are markers like the rest.

Vocabulary (inside ``@T.prim_func``)::

    with T.Kernel(gx, gy, threads=128) as (bx, by):     # launch grid, 1-3 dims
    A_s = T.alloc_shared((bm, bk), dtype)                # block staging tile
    C_f = T.alloc_fragment((bm, bn), accum_dtype)        # block working tile
    T.copy(A[by * bm, k * bk], A_s)                      # tile-origin slice: extent from the other side
    T.copy(A[0:bm, 0:bk], A_s)                           # explicit slices
    T.gemm(A_s, B_s, C_f, transpose_A=False, transpose_B=False, clear_accum=False)
    T.fill(C_f, 0) ; T.clear(C_f)
    T.reduce_sum(src, dst, dim=-1, clear=True)           # also reduce_max / reduce_min
    for k in T.Pipelined(n, num_stages=3):               # also T.Pipelined(start, stop, num_stages=)
    for i, j in T.Parallel(bm, bn):                      # elementwise map over a tile
    for i in T.serial(n) / T.unroll(n) / range(n):
    T.exp / exp2 / log / log2 / sqrt / rsqrt / abs / tanh / erf / sigmoid / floor / ceil / pow / silu / sin / cos
    T.gelu(x)  T.where(c, a, b)  T.if_then_else(c, a, b)  T.cast(x, dtype)  T.infinity(dtype)

Ascend expert mode (docs/language.md, "Ascend expert mode")::

    with T.Kernel(n, is_npu=True) as (cid, vid):         # cid: AI Core index, vid: AIV 0/1
    A_l1 = T.alloc_L1((bm, bk), dtype)                   # also alloc_L0A / L0B / L0C / UB
    with T.Scope("C"):  /  with T.Scope("V"):            # Cube-core / Vector-core code
    T.copy(src, dst)                                     # GM->L1, L1->L0A/L0B, L0C->GM, GM<->UB, UB->UB
    T.mma(A_l0a, B_l0b, C_l0c, init=(k == 0))            # L0A x L0B -> L0C
    T.gemm(A_l1, B_l1, C_l0c, clear_accum=...)           # on L1 operands: LoadL0 + Mmad
    T.add/sub/mul/div/max/min(dst, a, b_or_scalar)       # b may be rowvec[:, None] (row broadcast)
    T.exp/log/sqrt/rsqrt/abs/relu/reciprocal(dst, src)   # 2 arguments: a tile op; T.exp(x): a value
    T.cast(dst, src, round="none")  T.fill(dst, v)  T.reduce_sum/max/min(src, dst, dim=1)
    T.set_flag("MTE2", "MTE1", 0)  T.wait_flag("MTE2", "MTE1", 0)  T.pipe_barrier("V")
    T.set_cross_flag(2, "FIX", 0)  T.wait_cross_flag(0)
"""
from __future__ import annotations

import builtins as _builtins

from ._C import ir as _ir
from .dsl import DType, SymbolicDim, Tensor, _outside_kernel, symbolic
from .errors import TilewrightError, user_location
from .prim_func import PrimFunc, prim_func

__all__ = [
    "prim_func", "PrimFunc", "Tensor", "Buffer", "symbolic", "SymbolicDim", "DType", "Kernel",
    "alloc_shared", "alloc_fragment", "alloc_local", "alloc_L1", "alloc_L0A", "alloc_L0B", "alloc_L0C",
    "alloc_UB", "copy", "atomic_add", "gemm", "fill", "clear", "reduce_sum", "reduce_max", "reduce_min",
    "Pipelined", "Parallel", "serial", "unroll", "ceildiv", "min", "max",
    "gelu", "where", "if_then_else", "cast", "infinity",
    # Ascend expert mode
    "Scope", "mma", "add", "sub", "mul", "div", "relu", "reciprocal",
    "set_flag", "wait_flag", "pipe_barrier", "set_cross_flag", "wait_cross_flag",
]


# ---------------------------------------------------------------------------------------------
# Values usable at definition time: DType, SymbolicDim, symbolic, Tensor (tilewright/dsl.py, where
# the front end recognises them) and prim_func (tilewright/prim_func.py).

# T.float16 ... T.bool: one per dtype of the IR (TW_DTYPES in ir.h).
for _name in _ir.DTYPES:
    globals()[_name] = DType(_name)

Buffer = Tensor  # tilelang spelling


# ---------------------------------------------------------------------------------------------
# Markers

def _marker(name: str, doc: str, prefix: str = "T."):
    def fn(*args, **kwargs):
        _outside_kernel(f"{prefix}{name}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__module__ = __name__
    fn.__tw_marker__ = prefix + name
    return fn


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, _builtins.bool)


Kernel = _marker("Kernel", """``with T.Kernel(*grid, threads=None) as (bx, by, ...)``: the launch grid (1-3 dims).

``threads`` is accepted for tilelang compatibility and ignored: on Tilewright's targets a block
runs on one core (a CPU thread or an Ascend AI core); parallelism inside a block comes from tile
ops and ``T.Parallel`` maps, which the backends vectorise, so a thread count has no meaning.
``T.Kernel(n, is_npu=True) as (cid, vid)``: Ascend expert mode. ``n`` blocks, one per AI Core;
``cid`` is the block index, ``vid`` the sub-block index (0 or 1: which of the AI Core's two Vector
cores runs the code; 0 on the Cube core). Code goes inside ``with T.Scope("C")`` /
``with T.Scope("V")``.""")

alloc_shared = _marker("alloc_shared", "A block staging tile (scope shared): ``T.alloc_shared(shape, dtype)``.")
alloc_fragment = _marker("alloc_fragment", "A block working tile (scope fragment): ``T.alloc_fragment(shape, dtype)``.")
alloc_local = _marker("alloc_local", "A small per-block scratch tile; same as alloc_fragment (scope fragment).")
alloc_L1 = _marker("alloc_L1", "Ascend expert mode: a tile in L1.")
alloc_L0A = _marker("alloc_L0A", "Ascend expert mode: a tile in L0A.")
alloc_L0B = _marker("alloc_L0B", "Ascend expert mode: a tile in L0B.")
alloc_L0C = _marker("alloc_L0C", "Ascend expert mode: a tile in L0C.")
alloc_UB = _marker("alloc_UB", "Ascend expert mode: a tile in the Unified Buffer.")

copy = _marker("copy", """``T.copy(src, dst)``: copy a region with conversion to dst's dtype.

src/dst are buffers (whole), explicit slices ``A[a:b, c:d]`` or tile origins ``A[i, j]`` whose
extent is taken from the other side. Out-of-range source elements read as 0, out-of-range
destination elements are not written.""")
atomic_add = _marker("atomic_add", """``T.atomic_add(dst, value)``: ``dst += value`` atomically with respect to the other blocks.

dst is a global tensor region (a whole tensor, an explicit slice or a tile origin ``C[i * bm, j * bn]``
whose extent is taken from the value, as T.copy's destination); value a tile (or tile slice) converted
to dst's dtype, or a scalar added into the one element dst names. Elements outside dst's tensor are
not written. dst's dtype: float32, float16, bfloat16 or int32. The order in which blocks add is not
fixed: float results can differ in the last bits from run to run (docs/language.md).""")
gemm = _marker("gemm", """``T.gemm(A, B, C, transpose_A=False, transpose_B=False, clear_accum=False, a_band=None,
c_band=None, rows=None, cols=None)``: C (+)= op(A) @ op(B). A band ``(lo, hi)`` (integers, run-time values
allowed) names the diagonals lo <= column - row < hi (docs/language.md "Bands"), a performance hint:
``a_band``, op(A) is zero outside it (its terms may be skipped: P @ V); ``c_band``, only C's elements
inside it are needed (the others may be left unwritten: Q @ K^T before a mask that hides them).
``rows=(r0, r1)`` / ``cols=(c0, c1)`` meet the band with a rectangle of the same matrix (op(A) for
``a_band``, C for ``c_band``): the promise then holds outside the band or outside the rectangle.""")
fill = _marker("fill", "``T.fill(buf, value)``: set every element.")
clear = _marker("clear", "``T.clear(buf)``: fill with 0.")
reduce_sum = _marker("reduce_sum", "``T.reduce_sum(src, dst, dim=-1, clear=True)``.")
reduce_max = _marker("reduce_max", "``T.reduce_max(src, dst, dim=-1, clear=True)``.")
reduce_min = _marker("reduce_min", "``T.reduce_min(src, dst, dim=-1, clear=True)``.")

use_swizzle = _marker("use_swizzle", """``T.use_swizzle(panel_size, order="row", enable=True)``: tilelang's hint to launch
blocks in panels for a GPU's L2 reuse. Accepted and ignored: block order never changes results,
and Tilewright's grids run on a thread pool (cpu) or one block per AI Core (Ascend).""")

Pipelined = _marker("Pipelined", "``for k in T.Pipelined(n, num_stages=2)`` or ``T.Pipelined(start, stop, num_stages=)``.")
Parallel = _marker("Parallel", "``for i, j in T.Parallel(m, n)``: an elementwise map over a tile.")
serial = _marker("serial", "``for i in T.serial(n)`` / ``T.serial(start, stop)``: a sequential loop.")
unroll = _marker("unroll", "``for i in T.unroll(n)``: a fully unrolled loop (constant trip count).")

# Ascend expert mode --------------------------------------------------------------------------
Scope = _marker("Scope", """``with T.Scope("C"):`` (code of the Cube core, AIC) / ``with T.Scope("V"):`` (code of the
Vector cores, AIV), in a ``T.Kernel(n, is_npu=True)`` kernel. Scopes do not nest.""")
mma = _marker("mma", """``T.mma(A_l0a, B_l0b, C_l0c, init=False)``: C (+)= A @ B on L0 operands (one Mmad). ``init``
(True, False or a condition such as ``k == 0``) clears C first.""")
add = _marker("add", "``T.add(dst, a, b)``: dst = a + b elementwise (b: tile, scalar, or rowvec[:, None]).")
sub = _marker("sub", "``T.sub(dst, a, b)``: dst = a - b elementwise (b: tile, scalar, or rowvec[:, None]).")
mul = _marker("mul", "``T.mul(dst, a, b)``: dst = a * b elementwise (b: tile, scalar, or rowvec[:, None]).")
div = _marker("div", "``T.div(dst, a, b)``: dst = a / b elementwise (b: tile, scalar, or rowvec[:, None]).")
relu = _marker("relu", "``T.relu(dst, src)``: dst = max(src, 0) elementwise.")
reciprocal = _marker("reciprocal", "``T.reciprocal(dst, src)``: dst = 1 / src elementwise.")
set_flag = _marker("set_flag", """``T.set_flag(src_pipe, dst_pipe, event_id)``: when every earlier instruction of src_pipe
has finished, set the flag (AscendC SetFlag<HardEvent::SRC_DST>). Pipes: "MTE1" "MTE2" "MTE3" "M"
"V" "FIX" "S"; event ids 0..7.""")
wait_flag = _marker("wait_flag", "``T.wait_flag(src_pipe, dst_pipe, event_id)``: dst_pipe waits for the flag, then clears it.")
pipe_barrier = _marker("pipe_barrier", "``T.pipe_barrier(pipe)``: earlier instructions of pipe (or \"ALL\") finish before later ones.")
set_cross_flag = _marker("set_cross_flag", """``T.set_cross_flag(mode, pipe, flag_id)``: cross-core flag (CrossCoreSetFlag<mode, pipe>):
mode 0 all cores of one type, 1 the two AIVs of an AI Core, 2 AIC <-> its two AIVs; ids 0..10 (the 910B).""")
wait_cross_flag = _marker("wait_cross_flag", "``T.wait_cross_flag(flag_id, pipe=\"S\")``: wait for a cross-core flag (CrossCoreWaitFlag).")

# T.exp, T.sigmoid, ...: one marker per elementwise math function of the IR (TW_MATH_FNS in ir.h),
# with its docstring from there.
for _name, _arity, _doc in _ir.MATH_FUNCTIONS:
    globals()[_name] = _marker(_name, _doc)
__all__ += [_name for _name, _arity, _doc in _ir.MATH_FUNCTIONS] + list(_ir.DTYPES)
gelu = _marker("gelu", """``T.gelu(x)``: the exact (erf) GELU, expanded by the front end to
``0.5 * x * (1 + erf(x / sqrt(2)))`` so every target computes the same formula.""")
where = _marker("where", "``T.where(cond, a, b)``: a if cond else b, elementwise.")
if_then_else = _marker("if_then_else", "Same as T.where.")
cast = _marker("cast", """``T.cast(x, dtype)``: convert a value (round to nearest even for float results, truncate
for integer results). As a statement ``T.cast(dst, src, round="none")`` converts a tile (Ascend
expert mode on UB): round "none" (as above), or for float -> int "trunc", "floor", "ceil".""")
infinity = _marker("infinity", "``T.infinity(dtype)``: +inf of a float dtype (use -T.infinity(dtype) for -inf).")


def ceildiv(a, b):
    """ceil(a / b) on integers. Works on Python ints anywhere; a marker inside kernels."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:  # ZeroDivisionError leaked from here (api34 F14)
            raise TilewrightError(f"T.ceildiv({a}, 0): division by zero", *user_location(),
                                  hint="check the block size (or divisor) passed in: it must be a positive int")
        return -(-a // b)
    _outside_kernel("T.ceildiv on non-constant values")


def min(a, b):  # noqa: A001
    """Minimum. Works on Python numbers anywhere; a marker inside kernels."""
    if _number(a) and _number(b):
        return a if a <= b else b
    _outside_kernel("T.min on non-constant values")


def max(a, b):  # noqa: A001
    """Maximum. Works on Python numbers anywhere; a marker inside kernels."""
    if _number(a) and _number(b):
        return a if a >= b else b
    _outside_kernel("T.max on non-constant values")


ceildiv.__tw_marker__ = "T.ceildiv"
min.__tw_marker__ = "T.min"
max.__tw_marker__ = "T.max"
