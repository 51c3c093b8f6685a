"""Session 33's hunt (h-hunt33, docs/testing.md "Session 33: hunt33"): session 32's new code (int32 vector-call
scalars past int32, clamped compares / max / min with them, 8-bit arithmetic computed in float32, lets
materialised before a store, if / elif in maps, int64 labels in the one-row pick, wide 16-bit rows) at users'
odd values, each kernel on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against
numpy / Python integers.

Each finding is a strict xfail on the target where it fails (it flips when fixed). All results here are exact
integers, so no tolerance is needed.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _cases(forms, reason):
    """(target, form) pairs: every form on ascend910b (a strict xfail for `reason`), the first on cpu too (the
    control; the other forms' cpu kernels add compile time, not coverage)."""
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []  # None: fixed, a regression test
    return [("cpu", forms[0])] + [pytest.param(TARGET, f, marks=marks) for f in forms]


# --------------------------------------------------------------------------- F1: 8-bit arithmetic past 2^24
R1, C1 = 2, 19


def _int8_to_int32(add):
    @T.prim_func
    def k(X: T.Tensor((R1, C1), "int8"), Z: T.Tensor((R1, C1), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R1, C1), "int8")
            z = T.alloc_fragment((R1, C1), "int32")
            T.copy(X, y)
            for i, j in T.Parallel(R1, C1):
                z[i, j] = y[i, j] * 20 + add  # past 2^24: not exact in float32
            T.copy(z, Z)
    return k


F1 = ("hunt33 F1: int8 map arithmetic past 2^24 stored into an int32 tile (`z = y * 20 + 2**24 + 1`, y int8) is "
      "computed in float32 on ascend910b and rounded silently (16777097 -> 16777096); docs/ascend.md promises a "
      "located error when a bound cannot keep the float32 value below 2^24 (legalize_vector's 8-bit bound)")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f1_int8_arithmetic_past_2_24_into_int32(target):
    x = (np.arange(R1 * C1).reshape(R1, C1) * 7 % 255 - 127).astype(np.int8)
    add = 2 ** 24 + 1
    z = run_on(_int8_to_int32(add), target, [1], x)
    np.testing.assert_array_equal(z, _w32(x.astype(np.int64) * 20 + add))


# --------------------------------------------------------------------------- F2 / F3: an int64 let's `//`, `%`, nested max / min
N2 = 8
X2 = np.array([-2 ** 31, -70000, -5, -1, 0, 7, 65535, 2 ** 31 - 1], np.int32)


def _let_op(form):
    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), n: T.int32, s: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            a = n - s  # int64 (widen_scalars): past int32 at (2^31 - 1, -5)
            for j in T.Parallel(N2):
                if form == "floordiv":
                    y[j] = x[j] // a
                elif form == "mod":
                    y[j] = x[j] % a
                elif form == "rfloordiv":
                    y[j] = a // T.max(x[j], 1)
                else:  # "clamp": T.max with a, then T.min with n
                    y[j] = T.min(T.max(x[j], a), n)
            T.copy(y, Y[0])
    return main


def _let_op_want(form, n, s):
    a = n - s
    f = {"floordiv": lambda e: e // a, "mod": lambda e: e % a, "rfloordiv": lambda e: a // max(e, 1),
         "clamp": lambda e: min(max(e, a), n)}[form]
    return _w32([f(e) for e in X2.tolist()])


F2 = ("hunt33 F2: `x[j] // a`, `x[j] % a` and `a // x[j]` with an int64 let a = n - s past int32 (2^31 + 4) are "
      "silently wrong on ascend910b (-5 // a gives 0, not -1; -5 % a gives -5, not 2^31 - 1): the divisor is the "
      "static_cast<int32_t> of a (wrapped to -2^31 + 4), no report; cpu divides in int64")
F3 = ("hunt33 F3: `T.min(T.max(x[j], a), n)` with an int64 let a = 2^31 + 4 gives the wrapped a (-2^31 + 4) on "
      "ascend910b, not n (2^31 - 1), silently: h-ascint32 fixed a single T.max / T.min with such a scalar, the "
      "nested one still uses the wrapped a")


@pytest.mark.parametrize("target, form", _cases(["floordiv", "mod", "rfloordiv"], None))  # fixed by h-ascwrap33
def test_f2_int64_let_divisor_in_an_int32_map(target, form):
    n, s = 2 ** 31 - 1, -5
    np.testing.assert_array_equal(run_on(_let_op(form), target, [-1], X2, n, s), _let_op_want(form, n, s))


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f3_nested_max_min_with_an_int64_let(target):
    n, s = 2 ** 31 - 1, -5
    np.testing.assert_array_equal(run_on(_let_op("clamp"), target, [-1], X2, n, s), _let_op_want("clamp", n, s))


# --------------------------------------------------------------------------- F4: `a - x[j]` at x = INT32_MIN
def _rsub():
    return _minus_scalar("rsub")  # F9's factory: `a - x[j]`


F4 = ("hunt33 F4: `y[j] = a - x[j]` (int32, a = -1) at x = -2^31 gives 2^31 - 1, inside int32, but ascend910b "
      "prints it as Muls(x, -1) then Adds(a) and the simulator reports `int32 overflow: int32 Muls gives 2147483648`: "
      "a report the program cannot avoid (its value fits); the lowering of a scalar minus a tile could avoid -x")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f4_scalar_minus_int32_min_is_no_overflow(target):
    x = np.array([-2 ** 31, -2 ** 31 + 1, -5, -1, 0, 7, 100, 2 ** 31 - 1], np.int32)
    a = -1
    np.testing.assert_array_equal(run_on(_rsub(), target, [-1], x, a), _w32(a - x.astype(np.int64)))


# --------------------------------------------------------------------------- F5: a cast of scalar arithmetic plus the map index
def _cast_product_plus_index():
    @T.prim_func
    def k(n: T.int32, m: T.int32, Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((4,), "float32")
            for q in T.Parallel(4):
                y[q] = T.cast(n * m + q, "float32")  # n * m is int64 in the language
            T.copy(y, Y)
    return k


F5 = ("hunt33 F5: `y[q] = T.cast(n * m + q, \"float32\")` in a map with int32 parameters whose product leaves "
      "int32 (65536 * 65536) gives q (0, 1, 2, 3) on ascend910b, silently: the product becomes the int32 vector "
      "call's scalar (static_cast<int32_t>, wrapped to 0) and the index add runs in int32; cpu gives 2^32 + q "
      "rounded to float32. `T.cast(n * m, ...)` alone, a serial loop, T.fill and a let are right")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f5_cast_of_a_wide_product_plus_the_index(target):
    n, m = 65536, 65536
    want = (np.float64(n * m) + np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(run_on(_cast_product_plus_index(), target, [-1], n, m), want)


# --------------------------------------------------------------------------- F6: int64 labels' error names no working fix
def _label_mask(form):
    @T.prim_func
    def k(X: T.Tensor((4, 37), "float32"), L: T.Tensor((4,), "int64"), Q: T.Tensor((4, 37), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((2, 37), "float32")
            p = T.alloc_fragment((2, 37), "float32")
            lab = T.alloc_fragment((2,), "int64")
            T.copy(L[bx * 2], lab)
            T.copy(X[bx * 2, 0], x)
            for i, j in T.Parallel(2, 37):
                if form == "lt":
                    p[i, j] = T.where(j < lab[i], x[i, j], 0.0)
                else:  # the pick in a two-row map
                    p[i, j] = T.where(j == lab[i], x[i, j], 0.0)
            T.copy(p, Q[bx * 2, 0])
    return k


F6 = ("(fixed in session 33 by h-labels33: the forms run) hunt33 F6: PyTorch's int64 labels in a several-row map (`j == lab[i]`) or in `j < lab[i]` are the error "
      "'conversion from int32 to int64: dav-c220 has no Cast' at the map's line with the hint 'compute the value "
      "in a dtype that has one (float16 / float32), or convert on the cpu target', which is no fix for labels; "
      "`T.copy(L, lab_int32)` is the same error. What works: `lab[i] = T.cast(L[r + i], \"int32\")` in a serial "
      "loop (the CHANGELOG's 'read the labels into an int32 tile'); the hint should say that")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["lt", "eq"])
def test_f6_int64_labels_in_a_two_row_map(target, form):
    """Fixed by h-labels33 (session 33): the forms run (the int64 label clamped past the compared range on the scalar
    unit, then the int32 index mask), exact against numpy on both targets."""
    x = (np.arange(4 * 37, dtype=np.float32).reshape(4, 37) + 1) / 4
    lab = np.array([0, 36, 2 ** 32 + 3, -100], np.int64)
    j = np.arange(37)[None, :]
    m = (j < lab[:, None]) if form == "lt" else (j == lab[:, None])
    np.testing.assert_array_equal(run_on(_label_mask(form), target, [-1], x, lab), np.where(m, x, 0).astype(np.float32))


# --------------------------------------------------------------------------- F7: a scalar read of a gemm result's second half
@T.prim_func
def _gemm_then_scalar_read(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
                           Y: T.Tensor((2,), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_shared((16, 16), "float16")
        b = T.alloc_shared((16, 16), "float16")
        c = T.alloc_fragment((16, 16), "float32")
        o = T.alloc_fragment((2,), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        T.gemm(a, b, c)
        o[0] = c[0, 0]
        o[1] = c[15, 15]  # a valid index of the user's 16 x 16 tile
        T.copy(o, Y)


F7 = ("hunt33 F7: a scalar read `o[1] = c[15, 15]` of a 16 x 16 gemm result on ascend910b is the error 'index 15 "
      "is out of bounds for dimension 0 of tile 'c_ub' (shape 8x16)', hint 'tile indices run from 0 to size-1': "
      "the index is valid for the user's tile; the rows were split between the two Vector cores (c_ub is each "
      "core's half, rows >= 8 fail, c[7, 3] works). It should run (the row's core reads it) or be the row-locality "
      "error a map gets ('... rows cannot be split between the two Vector cores', with its hint)")


# F7 fixed by h-int64out33 (a row tile read outside a map at another row stays whole on both AIVs)
def test_f7_scalar_read_of_a_gemm_results_second_half():
    """ascend910b only: cpu's gemm compile costs about 2 minutes of a loaded CI core, and cpu gemm results are
    checked elsewhere (test_rect_s31); the reference is float64 numpy."""
    target = TARGET
    import tilewright as tw
    a = (np.arange(256).reshape(16, 16) % 5 - 2).astype(np.float16)
    b = (np.arange(256).reshape(16, 16) % 3 - 1).astype(np.float16)
    c = a.astype(np.float32) @ b.astype(np.float32)
    try:
        got = run_on(_gemm_then_scalar_read, target, [-1], a, b)
    except tw.TilewrightError as e:  # a located error naming the real limit is a fix too
        assert "c_ub" not in str(e) and "Vector cores" in str(e), str(e)
        return
    np.testing.assert_array_equal(got, np.array([c[0, 0], c[15, 15]], np.float32))


# --------------------------------------------------------------------------- F8: an unstored bitwise op with an int64 let, compared
def _bitwise_let(form):
    """int32 maps with the int64 let a = n - s (2^31 + 4 at the tests' n, s); "serial_floordiv" is F2's `//` in a
    T.serial loop of element stores."""
    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), n: T.int32, s: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            a = n - s  # int64: 2^31 + 4
            if form == "serial_floordiv":
                for q in T.serial(N2):
                    y[q] = x[q] // a
            else:
                for j in T.Parallel(N2):
                    if form == "xor_lt":
                        y[j] = T.where((x[j] ^ a) < 0, 1, 0)
                    elif form == "or_gt":
                        y[j] = T.where((x[j] | a) > 0, 1, 0)
                    else:  # "xor_floordiv"
                        y[j] = (x[j] ^ a) // 2
            T.copy(y, Y[0])
    return main


F8 = ("(fixed in session 34 by h-wrap34) hunt33 F8: a comparison or `//` of an unstored `x[j] ^ a` / `x[j] | a` / `x[j] & a` with an int64 let "
      "a = 2^31 + 4 sees the int32 bits on ascend910b (`(x ^ a) < 0` is 0 for x = -5, `(x | a) > 0` is 0 for x = 7, "
      "`(-5 ^ a) // 2` is 1073741823), silently; docs/language.md: such a comparison / `//` sees the int64 value "
      "(cpu does). hunt32 F8's located error covers shifts and constants, not a let's wide scalar")


@pytest.mark.parametrize("target, form", _cases(["xor_lt", "or_gt", "xor_floordiv"], None))  # fixed by h-wrap34
def test_f8_unstored_bitwise_with_an_int64_let(target, form):
    n, s = 2 ** 31 - 1, -5
    a = n - s
    f = {"xor_lt": lambda e: int((e ^ a) < 0), "or_gt": lambda e: int((e | a) > 0),
         "xor_floordiv": lambda e: (e ^ a) // 2}[form]
    np.testing.assert_array_equal(run_on(_bitwise_let(form), target, [-1], X2, n, s), _w32([f(e) for e in X2.tolist()]))


# --------------------------------------------------------------------------- F5 (more forms): a wide scalar product plus the index
def _wide_product_plus_index(form):
    @T.prim_func
    def k(n: T.int32, m: T.int32, Y: T.Tensor((4,), "float32"), Z: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((4,), "float32")
            z = T.alloc_fragment((4,), "int32")
            T.fill(y, 0.0)
            T.fill(z, 0)
            for q in T.Parallel(4):
                if form == "store":  # stored into a float32 tile: converted from the int64 value
                    y[q] = n * m + q
                else:  # "floordiv": the int64 value divided
                    z[q] = (n * m + q) // 65536
            T.copy(y, Y)
            T.copy(z, Z)
    return k


F5B = ("(fixed in session 34 by h-wrap34) hunt33 F5 (more forms): with int32 parameters n = m = 65536, `y[q] = n * m + q` into a float32 tile gives "
       "q and `z[q] = (n * m + q) // 65536` gives 0 on ascend910b (cpu 2^32 + q, 65536), silently; at n = 2^31 - 1, "
       "m = 1 both report an int32 overflow the program does not have (its int64 value is converted / divided). "
       "`T.where(n * m + q > 0, 1, 0)` is right")


@pytest.mark.parametrize("target, form", _cases(["store", "floordiv"], None))  # store: h-ascwrap33, floordiv: h-wrap34
def test_f5b_wide_product_plus_index_stored_or_divided(target, form):
    n = m = 65536
    v = [n * m + q for q in range(4)]
    y, z = run_on(_wide_product_plus_index(form), target, [-2, -1], n, m)
    if form == "store":
        np.testing.assert_array_equal(y, np.array(v, np.float64).astype(np.float32))
    else:
        np.testing.assert_array_equal(z, _w32([e // 65536 for e in v]))


# --------------------------------------------------------------------------- F9: `x[j] - a` with a = INT32_MIN
def _minus_scalar(form):
    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), a: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(N2):
                if form == "rsub":  # F4
                    y[j] = a - x[j]
                elif form == "param":
                    y[j] = x[j] - a
                else:  # "const"
                    y[j] = x[j] - (-2147483648)
            T.copy(y, Y[0])
    return main


F9 = ("(fixed in session 34 by h-wrap34) hunt33 F9: `y[j] = x[j] - a` (int32, a = -2^31 a parameter, or the constant -2147483648) over x < 0: every "
      "value fits int32 (x + 2^31), but ascend910b prints Adds(x, -a) with -a = static_cast<int32_t>(2^31) = -2^31 "
      "and the simulator reports `int32 overflow: int32 Adds gives -2147483653`: a report the program cannot avoid "
      "(as F4's a - x[j]); a Duplicate + Sub, or Adds of -a only where -a fits, would not leave int32")


@pytest.mark.parametrize("target, form", _cases(["param", "const"], None))  # fixed by h-wrap34
def test_f9_minus_int32_min_is_no_overflow(target, form):
    x = np.array([-5, -1, -2 ** 31 + 3, -100, -7, -2 ** 30, -2, 0], np.int32)
    a = -2 ** 31
    np.testing.assert_array_equal(run_on(_minus_scalar(form), target, [-1], x, a), _w32(x.astype(np.int64) - a))


# --------------------------------------------------------------------------- F10: cross-entropy's gradient with int64 labels, one row
N10 = 37


@T.prim_func
def _xent_grad_int64(X: T.Tensor((6, N10), "float32"), L: T.Tensor((6,), "int64"), G: T.Tensor((6, N10), "float32")):
    with T.Kernel(6) as bx:  # one row per block, as the forward pick that runs since session 32
        p = T.alloc_fragment((1, N10), "float32")
        g = T.alloc_fragment((1, N10), "float32")
        lab = T.alloc_fragment((1,), "int64")
        T.copy(L[bx], lab)
        T.copy(X[bx, 0], p)
        for i, j in T.Parallel(1, N10):
            g[i, j] = T.where(j == lab[i], p[i, j] - 1.0, p[i, j])  # softmax - one_hot(label)
        T.copy(g, G[bx, 0])


F10 = ("(fixed in session 33 by h-labels33) hunt33 F10: cross-entropy's gradient `g = T.where(j == lab[i], p[i, j] - 1.0, p[i, j])` with PyTorch's int64 "
       "labels in a one-row map is 'conversion from int32 to int64: dav-c220 has no Cast' on ascend910b (int32 labels "
       "run; the forward pick `T.where(j == lab[i], x, 0)` runs with int64 labels since session 32, and so does "
       "`T.where(j == lab[i], 1.0, 0.0)`): the label's scalar-unit read covers a select whose untaken value is 0 only")


@pytest.mark.parametrize("target", TARGETS)
def test_f10_xent_gradient_with_int64_labels(target):
    x = ((np.arange(6 * N10).reshape(6, N10) % 11) + 1).astype(np.float32) / 16
    lab = np.array([0, N10 - 1, N10, -1, 2 ** 32 + 3, 5], np.int64)
    m = np.arange(N10)[None, :] == lab[:, None]
    np.testing.assert_array_equal(run_on(_xent_grad_int64, target, [-1], x, lab), np.where(m, x - 1, x))


# --------------------------------------------------------------------------- F11: the fuzzer's oracle for `~~x` on 8-bit tiles
@T.prim_func
def _double_invert_uint8(X: T.Tensor((1, 1), "uint8"), Y: T.Tensor((1, 1), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((1, 1), "uint8")
        y = T.alloc_fragment((1, 1), "int32")
        T.copy(X[0, 0], x)
        for i, j in T.Parallel(1, 1):
            y[i, j] = ~(~(x[i, j]))  # folds to x: runs on ascend910b
        T.copy(y, Y[0, 0])


F11 = ("(fixed in session 33 by the lead: known.bit_ops_left cancels adjacent `~` pairs) hunt33 F11 (the fuzzer, not the compiler): the idiom stream's seed 335010 draws `y = ~(~x)` on a uint8 tile; "
       "fuzz/known.py's UNSUPPORTED rule expects ascend910b's located error for any `inv` on 8-bit tile data, but "
       "the double inversion folds to x and runs (right): `python -m fuzz --stream idiom --seed 335010 -n 1` "
       "fails with 'expected a TilewrightError ... but the program ran'. The rule should not match an even run "
       "of `inv` alone (or accept a run whose result is right)")


def test_f11_fuzz_oracle_double_inversion():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from fuzz import known
    x = np.array([[200]], np.uint8)
    assert run_on(_double_invert_uint8, TARGET, [-1], x).tolist() == [[200]]  # it runs, right
    d = {"seed": 335010, "kind": "idiom", "idiom": "int", "sym": False, "loop": "grid", "dt_in": "uint8",
         "dt_tile": "uint8", "dt_out": "int32", "big": False, "bm": 1, "bn": 1, "M": 1, "N": 1, "mode": "map",
         "ops": [["inv"], ["inv"]]}
    assert known.unsupported(d, TARGET) is None


# --------------------------------------------------------------------------- F12: a let in an if arm read after the arm's store
R12, C12 = 3, 37


def _let_clobbered_in_an_arm(dt):
    @T.prim_func
    def k(X: T.Tensor((R12, C12), dt), Y: T.Tensor((R12, C12), dt), Z: T.Tensor((R12, C12), dt)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R12, C12), dt)
            z = T.alloc_fragment((R12, C12), dt)
            T.copy(X, y)
            T.copy(X, z)
            for i, j in T.Parallel(R12, C12):
                if j < 7:
                    t = y[i, j] * 2  # y's value before the arm's store
                    y[i, j] = 1
                    z[i, j] = t
            T.copy(y, Y)
            T.copy(z, Z)
    return k


F12 = ("(fixed in session 33 by h-elifcond33) hunt33 F12: session 32's two map features do not combine on ascend910b: a let in an if arm that reads a "
       "tile the arm then stores (`if j < 7: t = y * 2; y = 1; z = t`) is the error 'this T.Parallel body is not a "
       "vector instruction: it contains a let (one store per vector instruction is needed)' at the let, whose hint "
       "(one vector instruction per store) is no fix; with an elif arm it is 'an if inside a map ... no store of the "
       "if before its last writes a tile the condition or a let reads'. Outside an if the same statements run since "
       "h-letfix32 (the let materialised into a temporary), and an if with lets runs since h-elif32")


@pytest.mark.parametrize("target", TARGETS)
def test_f12_let_clobbered_inside_an_if_arm(target):
    x = (np.arange(R12 * C12).reshape(R12, C12) % 9 - 4).astype(np.float32)
    y, z = run_on(_let_clobbered_in_an_arm("float32"), target, [1, 2], x)
    j = np.arange(C12)[None, :]
    np.testing.assert_array_equal(y, np.where(j < 7, 1, x))
    np.testing.assert_array_equal(z, np.where(j < 7, x * 2, x))


# --------------------------------------------------------------------------- F2 (a serial loop): serial_maps makes it a map
F2S = ("(fixed in session 33 by h-ascwrap33) hunt33 F2 (a serial loop): `for q in T.serial(N): y[q] = x[q] // a` with the int64 let a = 2^31 + 4 is F2 on "
       "ascend910b (the loop of element stores becomes a vector map): -5 // a gives 0, not -1; one element statement "
       "`y[2] = x[2] // a` (the scalar unit, int64) is right")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f2_serial_loop_of_element_stores(target):
    n, s = 2 ** 31 - 1, -5
    got = run_on(_bitwise_let("serial_floordiv"), target, [-1], X2, n, s)
    np.testing.assert_array_equal(got, _w32([e // (n - s) for e in X2.tolist()]))
