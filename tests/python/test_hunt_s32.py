"""Session 32's hunt (h-hunt32, docs/testing.md "Session 32: hunt32"): sessions 30-31's new code (the
one-hot pick as one element, the index masks `j == s` / `j < ln[i]`, gemm rectangles, lets holding
computed values, same-dtype casts, C divisions, if / else in maps, checked mode's unwritten-element
rule) and the examples at users' odd shapes, each on cpu and on ascend910b (simulator, checker on:
`prof["reports"] == []`) against numpy / Python integers.

Findings are strict xfails until the code they name is fixed (they flip then). All results here are
exact (integers, one picked element), so no tolerance is needed.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
_run = run_on


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _xfail(target, reason):
    """TARGETS with `target` a strict xfail for `reason` (a finding on that target)."""
    return [pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=reason)) if t == target else t for t in TARGETS]


# --------------------------------------------------------------------------- F1: int64 labels in the index mask
N1 = 37


@T.prim_func
def _pick_int64_labels(X: T.Tensor((6, N1), "float32"), L: T.Tensor((6,), "int64"), P: T.Tensor((6,), "float32")):
    with T.Kernel(6) as bx:  # one row per block: the label is a scalar-unit read (h-xent)
        x = T.alloc_fragment((1, N1), "float32")
        p = T.alloc_fragment((1, N1), "float32")
        lab = T.alloc_fragment((1,), "int64")
        d = T.alloc_fragment((1,), "float32")
        T.copy(L[bx], lab)
        T.copy(X[bx, 0], x)
        for i, j in T.Parallel(1, N1):
            p[i, j] = T.where(j == lab[i], x[i, j], 0.0)
        T.reduce_sum(p, d, dim=1)
        T.copy(d, P[bx])


F1 = ("(fixed in session 32 by the lead for the one-row map; several-row maps and j < lab[i] in session 33, "
      "h-labels33: tests/python/test_labels33_s33.py) hunt32 F1: PyTorch's int64 labels in the one-row pick `T.where(j == lab[i], x, 0)` are an error on "
      "ascend910b ('conversion from int32 to int64', at the map's `for` line, hint to compute in float16 / "
      "float32); the label is one scalar-unit read (int64 there) that the index mask could clamp")


@pytest.mark.parametrize("target", TARGETS)
def test_f1_int64_labels_in_the_index_mask(target):
    x = (np.arange(6 * N1, dtype=np.float32).reshape(6, N1) + 1) / 4
    lab = np.array([0, N1 - 1, N1, -1, 2 ** 32 + 3, -100], np.int64)  # 2^32 + 3 must not pick column 3
    want = np.array([x[r, l] if 0 <= l < N1 else 0.0 for r, l in enumerate(lab.tolist())], np.float32)
    np.testing.assert_array_equal(_run(_pick_int64_labels, target, [-1], x, lab), want)


# --------------------------------------------------------------------------- F2 / F3: a widened let in a map
N2 = 37


def _let_in_map(form):
    """y[j] = f(x[j], a) with a = n - s, a let whose value may leave int32 (widen_scalars gives it an
    int64 variable, h-sem31) used as the scalar operand of an int32 vector instruction."""

    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), n: T.int32, s: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            a = n - s
            for j in T.Parallel(N2):
                if form == "add":  # compile-time: chosen while parsing
                    y[j] = x[j] + a
                elif form == "fill":
                    y[j] = a
                elif form == "max":
                    y[j] = T.max(x[j], a)
                else:
                    y[j] = T.where(x[j] < a, 1, 0)
            T.copy(y, Y[0])

    return main


XI = (np.arange(N2, dtype=np.int32) - 18) * 1000
A_BIG = (2 ** 31 - 1, -5)  # a = 2^31 + 4
F2 = ("hunt32 F2: an int64 let (a = n - s past int32) as an int32 vector call's scalar: the printer writes "
      "static_cast<int32_t>(a) (wraps on the chip), the simulator saturates it to 2^31 - 1 (num::store of "
      "RVecCall's double scalar and the Duplicate's): a false `int32 overflow` report for x + a, whose wrapped "
      "result is right, and a silently wrong `y[j] = a` / `T.fill(y, a)` (2^31 - 1 instead of -2^31 + 4)")
F3 = ("hunt32 F3: `T.max(x[j], a)` / `x[j] < a` with an int64 let a = 2^31 + 4 on ascend910b compare with a "
      "converted to int32 (the compare's 8-bit split mixes the wrapped and the int64 a): cpu compares in "
      "int64 (x < a everywhere, max = a wrapped at the store)")


F2_ADD = ("x + a with a = 2^31 + 4 over x in [-18000, 18000]: the printed Adds of the wrapped a leaves int32 on "
          "the chip where x < -4 (and the language's x + a leaves it where x > -4): a true `int32 overflow` report "
          "under docs/ascend.md's rule (dav-c220 does not document it); h-ascint32 fixed F2's conversion, and "
          "test_ascint32_s32 checks the add where the Adds stays inside int32")


@pytest.mark.parametrize("target, form", [("cpu", "add"), (TARGET, "add"), ("cpu", "fill"), (TARGET, "fill")])
def test_f2_widened_let_as_a_vector_scalar(target, form):
    """add: was a false int32-overflow report (F2_ADD; since h-ascwrap33 the stored x + a is added modulo 2^32
    with no step leaving int32); fill (`y[j] = a`, a Duplicate; `T.fill(y, a)` the same): the simulator
    fills 2^31 - 1 where the printed static_cast<int32_t> fills -2^31 + 4, cpu's value (no report)."""
    n, s = A_BIG
    y = _run(_let_in_map(form), target, [-1], XI, n, s)
    want = XI.astype(np.int64) + (n - s) if form == "add" else np.full(N2, n - s)
    np.testing.assert_array_equal(y, _w32(want))


@T.prim_func
def _fill_with_a_difference(n: T.int32, s: T.int32, Y: T.Tensor((16,), "int32")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((16,), "int32")
        T.fill(y, n - s)  # no let: printed Duplicate(y, static_cast<int32_t>((int64_t)n - (int64_t)s), 16)
        T.copy(y, Y[0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n, s", [A_BIG, (-2 ** 31, 5)])
def test_f2_fill_with_a_difference_past_int32(target, n, s):
    np.testing.assert_array_equal(_run(_fill_with_a_difference, target, [-1], n, s), _w32(np.full(16, n - s)))


@T.prim_func
def _max_with_a_constant_past_int32(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8,), "int32")
        y = T.alloc_fragment((8,), "int32")
        T.copy(X[0], x)
        for j in T.Parallel(8):
            y[j] = T.max(x[j], 3000000000)  # printed Maxs(y, x, static_cast<int32_t>(3000000000)): wraps
        T.copy(y, Y[0])


@pytest.mark.parametrize("target", TARGETS)
def test_f2_max_with_a_constant_past_int32(target):
    x = np.array([-2 ** 31, -5, 0, 7, 2 ** 30, 2 ** 31 - 1, -2 ** 30, 100], np.int32)
    np.testing.assert_array_equal(_run(_max_with_a_constant_past_int32, target, [-1], x), _w32(np.full(8, 3000000000)))


def _bit_mask(form):
    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "int32")
            y = T.alloc_fragment((8,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(8):
                if form == "and":  # printed Duplicate(y, static_cast<int32_t>(4294967295LL)), then And: -1
                    y[j] = x[j] & 0xFFFFFFFF
                elif form == "xor":
                    y[j] = x[j] ^ (1 << 31)
                elif form == "or":
                    y[j] = x[j] | 0x80000000
                else:
                    y[j] = 0x80000000  # T.fill(y, 0x80000000) converts while parsing and is right
            T.copy(y, Y[0])

    return main


@pytest.mark.parametrize("form", ["and", "xor", "or", "store"])
@pytest.mark.parametrize("target", TARGETS)
def test_f2_bit_masks_of_32_bits(target, form):
    """The everyday masks of int32 bits: the simulator turns 0xFFFFFFFF / 0x80000000 into 0x7FFFFFFF."""
    x = np.array([-2 ** 31, -5, 0, 7, 2 ** 30, 2 ** 31 - 1, -2 ** 30, 100], np.int32)
    v = x.astype(np.int64)
    want = {"and": v & 0xFFFFFFFF, "xor": v ^ (1 << 31), "or": v | 0x80000000, "store": 0 * v + 0x80000000}[form]
    np.testing.assert_array_equal(_run(_bit_mask(form), target, [-1], x), _w32(want))


@pytest.mark.parametrize("form", ["max", "lt"])
@pytest.mark.parametrize("target", TARGETS)
def test_f3_widened_let_compared_in_a_map(target, form):
    n, s = A_BIG
    a = n - s
    want = _w32(np.maximum(XI.astype(np.int64), a)) if form == "max" else (XI < a).astype(np.int32)
    np.testing.assert_array_equal(_run(_let_in_map(form), target, [-1], XI, n, s), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["add", "fill", "max", "lt"])
def test_let_inside_int32_in_a_map(target, form):
    """The same kernels where a stays inside int32 (70000 - 1): both targets agree with int64 numpy."""
    a = 70000 - 1
    want = {"add": _w32(XI.astype(np.int64) + a), "fill": np.full(N2, a), "max": np.maximum(XI, a), "lt": (XI < a).astype(np.int32)}[form]
    np.testing.assert_array_equal(_run(_let_in_map(form), target, [-1], XI, 70000, 1), want)


# --------------------------------------------------------------------------- F4: `x % 0 == x` taken as >= 0 on cpu
MZ = T.symbolic("MZ")


@T.prim_func
def _mod_then_div(X: T.Tensor((MZ,), "int32"), a: T.int32, Y: T.Tensor((4, 2), "int64")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((4, 2), "int64")
        for k in T.serial(4):
            y[k, 0] = (a % k) // 2  # k = 0: a % 0 == a (docs/language.md), then a floor division
            y[k, 1] = (a % MZ) // 3  # a dimension of 0
        T.copy(y, Y[0, 0])


F4 = ("(fixed in session 32 by the lead) hunt32 F4: cpu prints `(a % k) // 2` with C's truncating / because ir::is_nonneg calls `a % b` >= 0 "
      "whenever b >= 0, but `a % 0 == a` (docs/language.md): a = -7, k = 0 gives -3, not -4 (ascend910b's "
      "widen_scalars also asks its range analysis, and is right)")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a", [-7, -1, -2 ** 31])
def test_f4_a_remainder_by_zero_floor_divided(target, a):
    def mod(x, b):
        return x if b == 0 else x % b
    want = np.array([[mod(a, k) // 2, mod(a, 0) // 3] for k in range(4)], np.int64)
    y = _run(_mod_then_div, target, [-1], np.zeros(0, np.int32), a)
    np.testing.assert_array_equal(y, want)


# --------------------------------------------------------------------------- F5: a same-width cast taken as >= 0 on cpu
MW, ZW = T.symbolic("MW"), T.symbolic("ZW")


@T.prim_func
def _wrapped_sum_divided(X: T.Tensor((MW, ZW), "int8"), Y: T.Tensor((2,), "int64")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((2,), "int64")
        y[0] = T.cast(MW + MW, "int32") // 4  # the cast wraps (h-sem31 keeps it): negative past 2^30
        y[1] = T.ceildiv(T.cast(MW + MW, "int32"), 4)
        T.copy(y, Y[0])


F5 = ("(fixed in session 32 by the lead) hunt32 F5: cpu prints `T.cast(M + M, 'int32') // 4` with C's truncating / because ir::is_nonneg takes a "
      "cast to an as-wide integer type of a value >= 0 as >= 0, but since h-sem31 such a cast of arithmetic "
      "computed wider wraps: M = 2^30 + 5 gives -536870909, not -536870910 (ascend910b is right)")


@pytest.mark.parametrize("target", TARGETS)
def test_f5_a_wrapping_cast_floor_divided(target):
    m = 2 ** 30 + 5  # a tensor of m x 0 elements: the dimension without the memory
    s = int(_w32(2 * m))
    y = _run(_wrapped_sum_divided, target, [-1], np.zeros((m, 0), np.int8))
    np.testing.assert_array_equal(y, np.array([s // 4, -((-s) // 4)], np.int64))



@T.prim_func
def _copy_at_a_wrapped_quotient(D: T.Tensor((MW, ZW), "int8"), X: T.Tensor((8, 4), "float32"),
                                Y: T.Tensor((2, 4), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((2, 4), "float32")
        T.copy(X[T.cast(MW + MW, "int32") // 4 + 536870912, 0], x)  # M = 2^30 + 5: row 2
        T.copy(x, Y[0, 0])


@pytest.mark.parametrize("target", TARGETS)
def test_f5_copy_at_a_wrapped_quotient(target):
    """F5 in a copy's start: cpu copies rows 3, 4 instead of 2, 3."""
    x = np.arange(32, dtype=np.float32).reshape(8, 4) + 1
    y = _run(_copy_at_a_wrapped_quotient, target, [-1], np.zeros((2 ** 30 + 5, 0), np.int8), x)
    np.testing.assert_array_equal(y, x[2:4])

# --------------------------------------------------------------------------- F6: a copy start `a % k` taken as >= 0
@T.prim_func
def _copy_at_a_remainder(X: T.Tensor((8, 8), "float32"), a: T.int32, Y: T.Tensor((2, 4, 8), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((4, 8), "float32")
        for k in T.serial(2):
            T.copy(X[a % k, 0], x)  # k = 0: the start is a (a % 0 == a); rows outside X read as 0
            T.copy(x, Y[k, 0, 0])


@T.prim_func
def _copy_out_at_a_remainder(X: T.Tensor((4, 8), "float32"), a: T.int32, Y: T.Tensor((8, 8), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((4, 8), "float32")
        T.copy(X[0, 0], x)
        for k in T.serial(1):
            T.copy(x, Y[a % k, 0])  # a % 0 == a: rows before Y are not written


def _copy_at_a_remainder_ref(x, a):
    out = np.zeros((2, 4, 8), np.float32)
    for k in range(2):
        s = a if k == 0 else a % k
        for r in range(4):
            if 0 <= s + r < 8:
                out[k, r] = x[s + r]
    return out


F6 = ("(fixed in session 32 by the lead) hunt32 F6: a copy starting at row `a % k` (k a loop variable, 0 on the first trip; a < 0) is taken as "
      "starting at row >= 0 (ir::is_nonneg's Mod rule, F4), so the copy is not clipped before the tensor: cpu reads "
      "before X (garbage; a = -10^8 is a segmentation fault of the process), ascend910b's printed DataCopyPad reads "
      "before X (the simulator's out-of-bounds report); a copy out to `Y[a % k, 0]` writes before Y (heap corruption: "
      "glibc aborts the process at a = -2)")

_F6_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, {here!r})
import tilewright as tw
from test_hunt_s32 import _copy_at_a_remainder, _copy_at_a_remainder_ref, _copy_out_at_a_remainder
x = np.arange(64, dtype=np.float32).reshape(8, 8) + 1
for a in (-2, -100000000):
    y = tw.compile(_copy_at_a_remainder, target="cpu", out_idx=[-1])(x, a)
    np.testing.assert_array_equal(y, _copy_at_a_remainder_ref(x, a))
    y = np.zeros((8, 8), np.float32)  # an output's unwritten elements are unspecified: pass zeros
    tw.compile(_copy_out_at_a_remainder, target="cpu")(x[:4].copy(), a, y)
    np.testing.assert_array_equal(y[:2], x[2:4] if a == -2 else 0 * x[:2])  # a = -2: rows 2, 3 land on 0, 1
    np.testing.assert_array_equal(y[2:], 0 * x[2:])
print("ok")
"""


def test_f6_copy_at_a_remainder_cpu():
    """In a child process: the kernel's out-of-bounds read may end the process (SIGSEGV)."""
    import subprocess
    here = str(pathlib.Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", _F6_SCRIPT.format(here=here)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])


def test_f6_copy_at_a_remainder_ascend():
    x = np.arange(64, dtype=np.float32).reshape(8, 8) + 1
    y = _run(_copy_at_a_remainder, TARGET, [-1], x, -2)
    np.testing.assert_array_equal(y, _copy_at_a_remainder_ref(x, -2))


@pytest.mark.parametrize("target", TARGETS)
def test_copy_at_a_remainder_of_a_positive_value(target):
    x = np.arange(64, dtype=np.float32).reshape(8, 8) + 1
    np.testing.assert_array_equal(_run(_copy_at_a_remainder, target, [-1], x, 3), _copy_at_a_remainder_ref(x, 3))


# --------------------------------------------------------------------------- F7: a same-dtype bfloat16 cast in a map
@T.prim_func
def _bf16_round_in_a_map(X: T.Tensor((16,), "bfloat16"), Y: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((16,), "bfloat16")
        y = T.alloc_fragment((16,), "float32")
        T.copy(X[0], x)
        for j in T.Parallel(16):
            y[j] = T.cast(T.cast(x[j] + 1.0, "bfloat16"), "float32")  # round x + 1 to bfloat16, once
        T.copy(y, Y[0])


F7 = ("(fixed in session 32, h-bfcast32) hunt32 F7: a rounding to bfloat16 inside a map converts nothing on ascend910b: `T.cast(T.cast(x, "
      "'bfloat16'), 'float32')` of float32 data and `T.cast(x + 1.0, 'bfloat16')` of bfloat16 data (printed: Cast to "
      "float32, Adds; no float32 -> bfloat16 Cast): 257 stays 257 where cpu rounds it to 256 (float16 rounds right); "
      "h-sem31's open note, h-bfcast32's task")


@T.prim_func
def _f32_through_bf16_in_a_map(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((16,), "float32")
        y = T.alloc_fragment((16,), "float32")
        T.copy(X[0], x)
        for j in T.Parallel(16):
            y[j] = T.cast(T.cast(x[j], "bfloat16"), "float32")  # float32 rounded to bfloat16
        T.copy(y, Y[0])


@pytest.mark.parametrize("target", TARGETS)
def test_f7_float32_rounded_to_bfloat16_in_a_map(target):
    x = np.array([257, 259, 1.00390625, 1.01171875, -257, 65520, 2049, 2051, -0.0, np.inf, 1 / 3, 7] + [1.5] * 4,
                 np.float32)
    want = x.astype(tw.testing.np_dtype("bfloat16")).astype(np.float32)  # 257 -> 256 (ties to even), 259 -> 260
    np.testing.assert_array_equal(_run(_f32_through_bf16_in_a_map, target, [-1], x), want)


@pytest.mark.parametrize("target", TARGETS)
def test_f7_bfloat16_same_dtype_cast_in_a_map(target):
    x = np.array([256, 512, -256, 1, 255, 3, 1024, 0] * 2, np.float32)
    xb = x.astype(tw.testing.np_dtype("bfloat16"))
    want = (x + 1).astype(tw.testing.np_dtype("bfloat16")).astype(np.float32)  # 257 -> 256, 513 -> 512
    np.testing.assert_array_equal(_run(_bf16_round_in_a_map, target, [-1], xb), want)


# --------------------------------------------------------------------------- F8: an unstored shift in an int32 map
def _shift_then(form):
    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "int32")
            y = T.alloc_fragment((8,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(8):
                if form == "div":  # compile-time: chosen while parsing
                    y[j] = (x[j] << 4) // 3  # x << 4 is x * 16 until stored (docs/language.md)
                else:
                    y[j] = T.where((x[j] << 4) > 0, 1, 0)
            T.copy(y, Y[0])

    return main


F8 = ("hunt32 F8: an unstored `x << 4` of int32 tile data in a map is x * 16 in int64 until stored (docs/language.md "
      "'Bitwise operators and shifts'; cpu), but ascend910b shifts in int32 and wraps: (x << 4) // 3 of 2^28 - 1 is -6 "
      "(cpu 1431655760), (x << 4) > 0 is 0; no `int32 overflow` report (Adds / Muls leaving int32 have one)")


@pytest.mark.parametrize("form", ["div", "gt"])
@pytest.mark.parametrize("target", TARGETS)
def test_f8_unstored_shift_in_an_int32_map(target, form):
    """Fixed: ascend910b computes the unstored `x << 4` as x * 16 (session 34; h-ascint32 made it a located
    error): the int64 value where it fits in int32, the simulator's `int32 overflow` report where it does not
    (cpu computes the int64 value)."""
    x = np.array([2 ** 27 - 1, 2 ** 26, -2 ** 27, -2 ** 27 + 1, 5, -5, 0, 123456], np.int32)
    v = x.astype(np.int64) << 4
    want = _w32(v // 3) if form == "div" else (v > 0).astype(np.int32)
    np.testing.assert_array_equal(_run(_shift_then(form), target, [-1], x), want)
    if target == TARGET:  # 2^28 - 1 << 4 leaves int32: the language's value is not an int32 Mul's
        big = np.array([2 ** 28 - 1, 2 ** 30, 5, -5, 0, 1, 2, 3], np.int32)
        prof = tw.compile(_shift_then(form), target=target, out_idx=[-1]).profile(big)
        assert any("int32 overflow" in r and "test_hunt_s32.py" in r for r in prof["reports"]), prof["reports"]


@pytest.mark.parametrize("target", TARGETS)
def test_stored_shift_in_an_int32_map_wraps_on_both(target):
    """The store wraps on both targets: `y = x << 4`, then `y // 3` in a second map agree."""

    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "int32")
            y = T.alloc_fragment((8,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(8):
                y[j] = x[j] << 4
            for j in T.Parallel(8):
                y[j] = y[j] // 3
            T.copy(y, Y[0])

    x = np.array([2 ** 28 - 1, 2 ** 27, -2 ** 27 - 1, 2 ** 30, 5, -5, 0, 123456789], np.int32)
    np.testing.assert_array_equal(_run(main, target, [-1], x), _w32(x.astype(np.int64) << 4) // 3)
