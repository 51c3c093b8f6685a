"""review36: adversarial checks of session 36's compiler changes (issue 13: Ascend trust).

h-range36 (legalize_vector's range_of) drops the int32-overflow protection where it proves a product or sum fits,
and compares / selects int32 values in float32 where it proves them below 2^24: a wrong interval is a silent wrong
answer. These kernels aim at each rule's edge (int8 / uint8 chains, >> and % of negatives, & with a negative mask,
// by a negative constant, clamps with run-time bounds, a loop-carried tile, a tile written in a branch, narrowing
casts, a sum proven past int32, compares and selects of values past 2^24, full-int32 clamps that make the signed
16-bit pieces of two tiles take their extreme halves) on cpu and on ascend910b (simulator, checker on: no report)
against numpy's values under the language's rules (int64 arithmetic, wrapped on store)."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
I32 = np.iinfo(np.int32)


def _w32(v):
    return (((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31).astype(np.int32)


def _clamped(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32"), O: T.Tensor((3, N), "int32")):
        with T.Kernel(1) as bx:
            o = T.alloc_fragment((3, N), "int32")
            for j in T.Parallel(N):
                a = T.min(T.max(X[j], -2147483648), 2147483647)  # proven [INT32_MIN, INT32_MAX]
                b = T.min(T.max(Y[j], -2147483648), 2147483647)
                o[0, j] = a * b  # two proven tiles: the signed 16-bit pieces of both (20 calls)
                o[1, j] = a + b  # a sum proven past int32: modulo 2^32
                o[2, j] = a * 30001 - b  # a 16-bit constant times a proven tile: its halves
            T.copy(o, O)

    return main


def test_full_int32_clamps_through_the_pieces():
    """Pieces at their extremes: 0x7FFF8000 has hi = 2^15 with lo = -2^15, 0x80007FFF hi = -2^15 with lo = 2^15 - 1."""
    N = 16
    edges = [0x7FFF8000, 0x80008000 - 2 ** 32, 0x80007FFF - 2 ** 32, I32.min, I32.max, -1, 1, 0, 32768, -32768,
             65535, -65536, 0x7FFF7FFF, 0x8000, 0x18000, -0x7FFF8000]
    x = np.array(edges, np.int64).astype(np.int32)
    kernels = {t: tw.compile(_clamped(N), target=t, out_idx=[-1]) for t in TARGETS}
    for shift in (0, 1, 2, 5, 9):  # every pair of edges meets in one of the shifts' columns
        y = np.roll(x, shift)
        X, Y = x.astype(np.int64), y.astype(np.int64)
        want = np.stack([_w32(X * Y), _w32(X + Y), _w32(_w32(X * 30001).astype(np.int64) - Y)])
        for t, k in kernels.items():
            got = k(x, y) if t == "cpu" else k.profile(x, y)
            if t != "cpu":
                assert got["reports"] == [], got["reports"]
                got = got.outputs
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{t} shift {shift}")


R = 10


def _edges(M, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((M, K), "uint8"), X: T.Tensor((M, K), "int32"), lo: T.int32,
             hi: T.int32, Y: T.Tensor((R, M, K), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R, M, K), "int32")
            t = T.alloc_fragment((M, K), "int32")
            u = T.alloc_fragment((M, K), "int32")
            T.copy(A, t)
            T.copy(B, u)
            for r in T.serial(3):
                for i, j in T.Parallel(M, K):
                    t[i, j] = t[i, j] * 3 + 1  # loop-carried: its range grows per iteration (nothing proven)
            if lo > 0:
                T.copy(A, u)  # u: uint8 values, or int8 ones written in a branch
            for i, j in T.Parallel(M, K):
                a = T.cast(A[i, j], "int32")
                b = T.cast(B[i, j], "int32")
                y[0, i, j] = a * a * a * a * 127 + 1  # int8 chain: 2^28 * 127 wraps
                y[1, i, j] = T.where(a * a * a * b > 16777216 + 1, a * a * a * b + 1, -1)  # compare, select past 2^24
                y[2, i, j] = (X[i, j] >> 7) % -1000 * 2147  # >> of negatives, % by a negative constant
                y[3, i, j] = ((X[i, j] & -65536) // -3) * 7 + b  # & with a negative mask, // by a negative constant
                y[4, i, j] = T.min(T.max(X[i, j], lo), hi) * 65537 + 3  # a clamp with run-time bounds
                y[5, i, j] = T.where(t[i, j] > 16777217, t[i, j] * 5 + 1, 7)
                y[6, i, j] = T.where(u[i, j] != 300, u[i, j] * 16777215 + 3, 0)
                y[7, i, j] = T.cast(T.cast(X[i, j], "int8"), "int32") * T.cast(T.cast(X[i, j] >> 8, "uint8"), "int32") * 65599
                y[8, i, j] = (b * 255 * 255 * 255) + (a * 16777216)  # uint8 255 chain, a sum proven past int32
                y[9, i, j] = T.cast((a * 2 + 1) * 8388608 == -1065353216, "int32")  # == of a value past 2^24
            T.copy(y, Y)

    return main


def _edges_expected(a, b, x, lo, hi):
    A, B, X = a.astype(np.int64), b.astype(np.int64), x.astype(np.int64)
    t = A.copy()
    for _ in range(3):
        t = _w32(t * 3 + 1).astype(np.int64)
    u = A if lo > 0 else B
    p = A * A * A * B
    rows = [A ** 4 * 127 + 1, np.where(p > 16777217, p + 1, -1), ((X >> 7) % -1000) * 2147, ((X & -65536) // -3) * 7 + B,
            np.minimum(np.maximum(X, lo), hi) * 65537 + 3, np.where(t > 16777217, t * 5 + 1, 7),
            np.where(u != 300, u * 16777215 + 3, 0), ((X + 128) % 256 - 128) * ((X >> 8) % 256) * 65599,
            B * 255 ** 3 + A * 16777216, ((A * 2 + 1) * 8388608 == -1065353216).astype(np.int64)]
    return np.stack([_w32(r) for r in rows])


@pytest.mark.parametrize("target", TARGETS)
def test_range_rules_at_their_edges(target):
    M, K = 3, 37
    rng = np.random.default_rng(367)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    a.flat[:4] = [-128, 127, -1, 0]
    b = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b.flat[:3] = [255, 0, 254]
    x = rng.integers(I32.min, I32.max, (M, K), dtype=np.int64).astype(np.int32)
    x.flat[:6] = np.array([I32.min, I32.max, -1, -128, 127 * 256 + 5, -65537]).astype(np.int32)
    k = tw.compile(_edges(M, K), target=target, out_idx=[-1])
    for lo, hi in [(-5, 1000000), (5, I32.max), (I32.min, I32.min)]:
        if target == "cpu":
            got = k(a, b, x, lo, hi)
        else:
            prof = k.profile(a, b, x, lo, hi)
            assert prof["reports"] == [], prof["reports"]
            got = prof.outputs
        np.testing.assert_array_equal(np.asarray(got), _edges_expected(a, b, x, lo, hi), err_msg=f"{target} {lo} {hi}")


def _lcg(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), X: T.Tensor((N,), "int32"), Y: T.Tensor((5, N), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((5, N), "int32")
            for j in T.Parallel(N):
                a = T.cast(A[j], "int32")
                y[0, j] = a * 6364136223846793005  # a proven small operand times a literal past 2^40: halves
                y[1, j] = X[j] * 6364136223846793005 + 1442695040888963407  # nothing proven: signed pieces
                y[2, j] = X[j] * -6364136223846793005
                y[3, j] = T.min(T.max(X[j], -2147483648), 2147483647) * 6364136223846793005  # both proven
                y[4, j] = X[j] * 2654435761
            T.copy(y, Y)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_products_by_literals_past_int32(target):
    """review36 R1 (hunt36 F3 in range36's wrapped_mul_pieces): a 64-bit LCG's multiplier is taken modulo 2^32
    before its pieces / halves are cut (its high piece was 97109012204693: `int32 overflow` inside the pieces)."""
    N = 21
    rng = np.random.default_rng(368)
    a = rng.integers(-128, 128, N).astype(np.int8)
    a[:2] = [-128, 127]
    x = np.array([0x7FFF8000, 0x80008000 - 2 ** 32, 0x80007FFF - 2 ** 32, I32.min, I32.max, -1, 1, 0, 32768, -32768] +
                 list(rng.integers(I32.min, I32.max, N - 10)), np.int64).astype(np.int32)
    L = 6364136223846793005
    rows = [[int(v) * L for v in a], [int(v) * L + 1442695040888963407 for v in x], [int(v) * -L for v in x],
            [int(v) * L for v in x], [int(v) * 2654435761 for v in x]]
    want = np.array([[(v + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in r] for r in rows], np.int64).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(run_on(_lcg(N), target, [-1], a, x)), want, err_msg=target)


def _clear_after(S, variant, dtype, acc_dtype):
    M = N = K = 16

    @T.prim_func
    def main(A: T.Tensor((S, M, K), dtype), B: T.Tensor((S, N, K), dtype), Y: T.Tensor((S, M, N), acc_dtype)):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), dtype)
            b = T.alloc_shared((N, K), dtype)
            acc = T.alloc_fragment((M, N), acc_dtype)
            T.clear(acc)
            for s in T.serial(S):
                T.copy(A[s, :, :], a)
                T.copy(B[s, :, :], b)
                T.gemm(a, b, acc, transpose_B=True)
                T.copy(acc, Y[s, :, :])
                if variant == 0:
                    T.clear(acc)  # at the end of the body: the next iteration's gemm starts from zero
                else:
                    for r in T.serial(1):
                        T.clear(acc)  # in an inner loop after the gemm

    return main


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("dtype,acc", [("float16", "float32"), ("int8", "int32")])
def test_clear_after_the_gemm_in_a_loop(variant, dtype, acc):
    """review36 R2: `gemm; copy out; clear` in one serial body: each iteration's copy is that iteration's product
    only (the clear was deferred to the next gemm, already expanded with init on the first iteration: silent sums)."""
    S = 3
    rng = np.random.default_rng(369)
    a = rng.integers(-3, 4, (S, 16, 16)).astype(dtype)
    b = rng.integers(-3, 4, (S, 16, 16)).astype(dtype)
    want = np.einsum("smk,snk->smn", a.astype(np.float64), b.astype(np.float64)).astype(acc)
    for target in TARGETS:
        got = run_on(_clear_after(S, variant, dtype, acc), target, [-1], a, b)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=target)


def _state_also_stored(S, dt):
    @T.prim_func
    def main(A: T.Tensor((S, 16, 32), dt), B: T.Tensor((S, 32, 16), dt), E: T.Tensor((S, 16, 16), dt),
             P: T.Tensor((S, 16, 16), dt), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 32), dt)
            b = T.alloc_shared((32, 16), dt)
            e = T.alloc_shared((16, 16), dt)
            p = T.alloc_shared((16, 16), dt)
            c = T.alloc_fragment((16, 16), "float32")
            d = T.alloc_fragment((16, 16), "float32")
            T.clear(d)
            for s in T.serial(S):
                T.copy(A[s, :, :], a)
                T.copy(B[s, :, :], b)
                T.copy(E[s, :, :], e)
                T.gemm(a, b, c, clear_accum=True)
                T.copy(c, p)  # whole fractals, float32 -> 16-bit: a Fixpipe L0C -> L1 candidate
                T.copy(p, P[s, :, :])  # ... but the operand is also stored to a tensor
                T.gemm(p, e, d)
            T.copy(d, Y)

    return main


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_a_fixpipe_operand_also_copied_to_a_tensor(dt):
    """review36 R3 (h-fixpipe36): an operand a copy to a tensor also reads stays where that copy can read it (it
    went to L1 only: 'there is no data path L1 -> global')."""
    import ml_dtypes

    S = 3
    tdt = np.float16 if dt == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(3610)
    a = rng.integers(-8, 9, (S, 16, 32)).astype(tdt)
    b = (rng.integers(-8, 9, (S, 32, 16)) * 0.37).astype(tdt)
    e = rng.integers(-3, 4, (S, 16, 16)).astype(tdt)
    p = np.einsum("smk,skn->smn", a.astype(np.float64), b.astype(np.float64)).astype(np.float32).astype(tdt)
    y = np.einsum("smn,snk->mk", p.astype(np.float64), e.astype(np.float64)).astype(np.float32)
    for target in TARGETS:
        k = tw.compile(_state_also_stored(S, dt), target=target, out_idx=[-1])
        got_p = np.zeros((S, 16, 16), tdt)
        if target == "cpu":
            got = k(a, b, e, got_p)
        else:
            prof = k.profile(a, b, e, got_p)
            assert prof["reports"] == [], prof["reports"]
            got = prof.outputs
        np.testing.assert_array_equal(np.asarray(got), y, err_msg=target)
        if target == "cpu":  # (the simulator's profile returns only the out_idx output)
            np.testing.assert_array_equal(got_p.astype(np.float32), p.astype(np.float32))


def _conditional_clear(S, form):
    M = N = K = 16

    @T.prim_func
    def main(A: T.Tensor((S, M, K), "float16"), B: T.Tensor((S, K, N), "float16"), Y: T.Tensor((S, M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for s in T.serial(S):
                T.copy(A[s, :, :], a)
                T.copy(B[s, :, :], b)
                if s % 2 == 0:
                    T.clear(acc)  # a clear on even iterations only
                if form == 0:
                    T.gemm(a, b, acc)  # unconditional
                else:
                    if s < 100:
                        T.gemm(a, b, acc)  # in another if of the same depth
                T.copy(acc, Y[s, :, :])

    return main


@pytest.mark.parametrize("form", [0, 1])
def test_a_conditional_clear_before_the_gemm(form):
    """review36 R4: the clear of even iterations only; the gemm folded it into its init on every iteration (odd ones
    lost the sum, no report). It now runs at its branch's end where no gemm of the branch took it."""
    S = 4
    rng = np.random.default_rng(3611)
    a = rng.integers(-3, 4, (S, 16, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (S, 16, 16)).astype(np.float16)
    p = np.einsum("smk,skn->smn", a.astype(np.float64), b.astype(np.float64))
    want = np.stack([p[0], p[0] + p[1], p[2], p[2] + p[3]]).astype(np.float32)
    for target in TARGETS:
        np.testing.assert_array_equal(np.asarray(run_on(_conditional_clear(S, form), target, [-1], a, b)), want, err_msg=target)


@T.prim_func
def _window_clear(A: T.Tensor((2, 32, 16), "float16"), B: T.Tensor((2, 16, 16), "float16"), Y: T.Tensor((32, 16), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_shared((32, 16), "float16")
        b = T.alloc_shared((16, 16), "float16")
        acc = T.alloc_fragment((32, 16), "float32")
        T.clear(acc)
        T.copy(A[0, :, :], a)
        T.copy(B[0, :, :], b)
        T.gemm(a, b, acc)
        T.fill(acc[0:16, :], 0)  # the top half only
        T.copy(A[1, :, :], a)
        T.copy(B[1, :, :], b)
        T.gemm(a, b, acc)
        T.copy(acc, Y)


def test_a_window_cleared_before_a_whole_gemm():
    """review36 R5: a clear of part of the accumulator was folded into the next gemm's init, which clears all of it
    (the bottom half lost its first product, no report); it now runs where it stands."""
    rng = np.random.default_rng(3612)
    a = rng.integers(-3, 4, (2, 32, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (2, 16, 16)).astype(np.float16)
    p = np.einsum("smk,skn->smn", a.astype(np.float64), b.astype(np.float64))
    want = p[1].copy()
    want[16:] += p[0][16:]
    for target in TARGETS:
        np.testing.assert_array_equal(np.asarray(run_on(_window_clear, target, [-1], a, b)), want.astype(np.float32), err_msg=target)
