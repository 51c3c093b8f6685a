"""hunt33's F1-F5 fixed (h-ascwrap33, docs/ascend.md "Session 33: integer arithmetic leaving its width"):
8-bit arithmetic stored or converted wider is computed in int32 (F1); int32 `//` / `%` by a scalar past int32
exact (F2), a dividend past int32 divided on the scalar unit where the result is stored; nested T.max / T.min
with such a scalar one clamp (F3); `c - x` without `-x` (F4); a float32 cast of int32 arithmetic with a
scalar past int32 computed on the scalar unit (F5). Each kernel on cpu and on ascend910b (simulator, checker
on: no report), against Python integers / int64 numpy wrapped at the store; results are exact (integers, or
float32 conversions of exact int64 values).
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
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
N = 11  # not a multiple of 8 (a tail)
X = np.array([I32_MIN, I32_MIN + 1, -70000, -5, -1, 0, 1, 7, 65535, I32_MAX - 1, I32_MAX], np.int32)
# (n, m, s): the let a = n * m + s past either end of int32 (just, far, 2^62), at its ends, inside
LETS = [(1, I32_MAX, 5), (1, I32_MIN, -5), (65536, 65536, 0), (65536, 65536, -1), (-65536, 65536, -1),
        (I32_MIN, I32_MIN, 0), (I32_MAX, I32_MIN, 0), (1, I32_MAX, 1), (1, I32_MIN, 0), (1, I32_MAX, 0),
        (1, 7, 0), (1, -3, 0), (1, 0, 0)]


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _f32(values):
    """float32 of exact integers, rounded once (via x86 long double, exact for int64)."""
    return np.array([np.float32(np.longdouble(np.int64(e))) for e in np.ravel(values).tolist()], np.float32)


def _py_floordiv(a, b):  # the language's integer // and %: floor, x // 0 == 0, x % 0 == x
    return 0 if b == 0 else a // b


def _py_mod(a, b):
    return a if b == 0 else a % b


def _let_kernel(form):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), n: T.int32, m: T.int32, s: T.int32, Y: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            y = T.alloc_fragment((N,), "int32")
            T.copy(X[0], x)
            a = n * m + s  # int64
            for j in T.Parallel(N):
                if form == "floordiv":
                    y[j] = x[j] // a
                elif form == "mod":
                    y[j] = x[j] % a
                elif form == "rfloordiv":
                    y[j] = a // x[j]
                elif form == "rmod":
                    y[j] = a % x[j]
                elif form == "div_lt":  # the quotient seen unwrapped
                    y[j] = T.where(x[j] // a < 0, 1, 0)
                elif form == "clamp":
                    y[j] = T.min(T.max(x[j], a), n)
                elif form == "clamp_rev":
                    y[j] = T.max(T.min(x[j], a), s)
                elif form == "max_max":
                    y[j] = T.max(T.max(x[j], a), s)
                elif form == "add_gt":  # the sum seen unwrapped
                    y[j] = T.where(x[j] + a > 0, 1, 0)
                elif form == "where_sum":  # the same sum seen (compared) and wrapped (stored)
                    y[j] = T.where(x[j] + a > 0, x[j] + a, 0)
                elif form == "mul_gt":
                    y[j] = T.where(x[j] * a > 0, 1, 0)
                elif form == "max_div":
                    y[j] = T.max(x[j], a) // 2
                else:  # "rsub"
                    y[j] = a - x[j]
            T.copy(y, Y[0])

    return main


def _let_want(form, x, n, m, s):
    a = n * m + s
    f = {"floordiv": lambda e: _py_floordiv(e, a), "mod": lambda e: _py_mod(e, a),
         "rfloordiv": lambda e: _py_floordiv(a, e), "rmod": lambda e: _py_mod(a, e),
         "div_lt": lambda e: int(_py_floordiv(e, a) < 0), "clamp": lambda e: min(max(e, a), n),
         "clamp_rev": lambda e: max(min(e, a), s), "max_max": lambda e: max(e, a, s), "rsub": lambda e: a - e,
         "add_gt": lambda e: int(e + a > 0), "where_sum": lambda e: e + a if e + a > 0 else 0, "mul_gt": lambda e: int(e * a > 0), "max_div": lambda e: max(e, a) // 2}[form]
    return _w32([f(e) for e in x.tolist()])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["floordiv", "mod", "rfloordiv", "rmod", "div_lt", "clamp", "clamp_rev", "max_max"])
def test_int32_map_with_an_int64_let(target, form):
    """F2 / F3: // and % either way round and nested max / min, the let past int32 or inside it."""
    k = _let_kernel(form)
    for n, m, s in LETS:
        got = run_on(k, target, [-1], X, n, m, s)
        np.testing.assert_array_equal(got, _let_want(form, X, n, m, s), err_msg=f"{form} a = {n * m + s}")


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_minus_tile_at_the_ends_of_int32(target):
    """F4: a - x where the value fits: no -x step (which leaves int32 at INT32_MIN)."""
    k = _let_kernel("rsub")
    for n, m, s, x in [(1, -1, 0, X), (1, I32_MAX, 0, X[X >= 0]), (1, I32_MIN, 0, X[X < 0]),
                       (1, I32_MAX, 3, X[X > 2]), (1, 0, 0, X[X > I32_MIN])]:
        x = np.resize(x, N).astype(np.int32)
        np.testing.assert_array_equal(run_on(k, target, [-1], x, n, m, s), _let_want("rsub", x, n, m, s))


def _cast_kernel(form):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), n: T.int32, m: T.int32, Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            y = T.alloc_fragment((N,), "float32")
            T.copy(X[0], x)
            for j in T.Parallel(N):
                if form == "index":
                    y[j] = T.cast(n * m + j, "float32")
                elif form == "data":
                    y[j] = T.cast(x[j] - n * m, "float32")
                else:  # "stored": converted by the store
                    y[j] = x[j] + n * m
            T.copy(y, Y[0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["index", "data", "stored"])
def test_float_cast_of_a_wide_sum(target, form):
    """F5: int64 n * m plus the index or tile data, converted to float32 once (round to nearest even)."""
    k = _cast_kernel(form)
    idx = np.arange(N, dtype=np.int64)
    for n, m in [(65536, 65536), (2 ** 31 - 1, 2 ** 31 - 1), (-65536, 65537), (3, 5), (2 ** 20 + 1, 2 ** 12 + 1)]:
        v = {"index": n * m + idx, "data": X.astype(np.int64) - n * m, "stored": X.astype(np.int64) + n * m}[form]
        want = _f32(v)
        np.testing.assert_array_equal(run_on(k, target, [-1], X, n, m), want, err_msg=f"{form} n={n} m={m}")


R8, C8 = 2, 9
FORMS8 = ["mul_add", "let", "cast", "floordiv"]


def _int8_kernel(src, dst):
    @T.prim_func
    def main(X: T.Tensor((R8, C8), src), Z: T.Tensor((4, R8, C8), dst)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R8, C8), src)
            z = T.alloc_fragment((4, R8, C8), dst)
            T.copy(X, y)
            for i, j in T.Parallel(R8, C8):
                z[0, i, j] = y[i, j] * 20 + 2 ** 24 + 1
                w = y[i, j] * 131072 + 3
                z[1, i, j] = w - y[i, j]
                z[2, i, j] = T.cast(y[i, j] * 65537 + 2 ** 25 + 1, dst)
                z[3, i, j] = (y[i, j] * 1000003) // 7  # by a constant, past 2^24
            T.copy(z, Z)

    return main


def _int8_want(x, dst):
    v = x.astype(np.int64)
    r = np.stack([v * 20 + 2 ** 24 + 1, v * 131072 + 3 - v, v * 65537 + 2 ** 25 + 1, (v * 1000003) // 7])
    return _w32(r) if dst == "int32" else _f32(r).reshape(r.shape)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("src,dst", [("int8", "int32"), ("uint8", "int32"), ("int8", "float32")])
def test_8bit_arithmetic_past_2_24_stored_wider(target, src, dst):
    """F1: 8-bit arithmetic past 2^24 stored into int32 / float32 (directly, through a let, a T.cast, a //):
    exact (int32), not float32-rounded."""
    lo, hi = (-128, 127) if src == "int8" else (0, 255)
    x = np.linspace(lo, hi, R8 * C8).round().astype(src).reshape(R8, C8)
    np.testing.assert_array_equal(run_on(_int8_kernel(src, dst), target, [-1], x), _int8_want(x, dst))


@pytest.mark.parametrize("form, fits, past", [
    ("add_gt", (65536, 32767, 0), (65536, 32768, 0)),  # x + a: 2^31 - 65536 + x fits, 2^31 + x does not (x >= 0)
    ("where_sum", (65536, 32767, 0), (65536, 32768, 0)),
    ("mul_gt", (1, 1000, 0), (65536, 32768, 0)),      # x * a: a = 2^31 past int32, x != 0
])
def test_value_past_int32_seen_unwrapped_is_a_report(form, fits, past):
    """x + a, x * a compared (seen unwrapped; where_sum: the same sum also stored, built apart) where the value
    leaves int32: the simulator's int32 overflow report at the line (no silent wrapped value); where it fits, exact,
    no report. (T.max(x, a) // 2 is exact since h-wrap34: test_max_past_int32_divided_is_exact.)"""
    k = tw.compile(_let_kernel(form), target=TARGET, out_idx=[-1])
    x = np.resize(np.array([0, 1, 3, 7], np.int32), N)
    prof = k.profile(x, *fits)
    assert prof["reports"] == []
    np.testing.assert_array_equal(prof.outputs, _let_want(form, x, *fits))
    prof = k.profile(x, *past)
    assert any("int32 overflow" in r for r in prof["reports"]), prof["reports"]


def test_max_past_int32_divided_is_exact():
    """T.max(x, a) // 2 with a = 2^31 past int32 (the quotient 2^30 fits): the store computed on the scalar unit
    in int64 since h-wrap34 (it was the unwrapped value's int32 overflow report above), exact, no report."""
    k = tw.compile(_let_kernel("max_div"), target=TARGET, out_idx=[-1])
    x = np.resize(np.array([0, 1, 3, 7, -5], np.int32), N)
    for args in ((1, I32_MAX, 0), (1, I32_MAX, 1), (65536, 65536, -3)):
        prof = k.profile(x, *args)
        assert prof["reports"] == [], prof["reports"]
        np.testing.assert_array_equal(prof.outputs, _let_want("max_div", x, *args))


R2, C2 = 3, 10


def _rows_kernel():
    @T.prim_func
    def main(X: T.Tensor((R2, C2), "int32"), V: T.Tensor((R2,), "int32"), n: T.int32, m: T.int32,
             Y: T.Tensor((6, R2, C2), "int32"), Z: T.Tensor((R2, C2), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R2, C2), "int32")
            v = T.alloc_fragment((R2,), "int32")
            y = T.alloc_fragment((6, R2, C2), "int32")
            z = T.alloc_fragment((R2, C2), "float32")
            T.copy(X, x)
            T.copy(V, v)
            a = n * m
            for i, j in T.Parallel(R2, C2):
                y[0, i, j] = v[i] % a
                y[1, i, j] = x[i, j] // a
                y[2, i, j] = a - v[i]
                y[3, i, j] = T.min(T.max(v[i], a), m)
                y[4, i, j] = a // v[i]
                y[5, i, j] = x[i, j] % a
                z[i, j] = T.cast(v[i] * a + j - i, "float32")
            T.copy(y, Y)
            T.copy(z, Z)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_row_vectors_in_a_two_dim_map(target):
    """F2-F5's lowerings on row vectors (v[i]) and tiles of a 2-D map, the element loop over both indices."""
    x = np.random.default_rng(33).integers(I32_MIN, I32_MAX + 1, (R2, C2)).astype(np.int32)
    v = np.array([-7, 0, I32_MAX], np.int32)
    k = _rows_kernel()
    for n, m in [(65536, 65536), (-65536, 65537), (3, 5), (1, I32_MIN), (I32_MAX, I32_MAX)]:
        a = n * m
        y, z = run_on(k, target, [-2, -1], x, v, n, m)
        vi = [[int(v[i])] * C2 for i in range(R2)]
        want = [[[_py_mod(e, a) for e in r] for r in vi], [[_py_floordiv(int(e), a) for e in r] for r in x],
                [[a - e for e in r] for r in vi], [[min(max(e, a), m) for e in r] for r in vi],
                [[_py_floordiv(a, e) for e in r] for r in vi], [[_py_mod(int(e), a) for e in r] for r in x]]
        np.testing.assert_array_equal(y, _w32(want), err_msg=f"a = {a}")
        w64 = [(int(v[i]) * a + j - i + 2 ** 63) % 2 ** 64 - 2 ** 63 for i in range(R2) for j in range(C2)]  # int64 wraps
        np.testing.assert_array_equal(z, _f32(w64).reshape(R2, C2))
