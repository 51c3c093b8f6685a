"""Session 25 (h-handoff13): a 16-bit Cube -> Vector hand-off, by the user's choice.

A user-written copy of a gemm result into a float16 / bfloat16 tile right after the gemm
(`T.copy(s, s16)`, s the float32 accumulator, s16 a tile the vector code reads) is the hand-off
itself: on ascend910b Fixpipe converts float32 -> float16 (quantPre=F322F16) or bfloat16 (F322BF16)
on its way to the GM workspace, and the Vector core reads 16-bit values. Before, the copy was the
error "no data path L0C -> UB". The compiler still never narrows on its own (session 24).

The conversion is round to nearest even, overflow to +-inf (IEEE 754; the simulator's Fixpipe and
the cpu target's cast). Exact data: the gemm sums two operand values (exact in float32, whatever
the Cube's order), so the float32 results are the targets below and cpu, ascend910b (checker on)
and numpy's own float32 -> float16 / bfloat16 cast must agree bit for bit (NaN by isnan): values
at and past 65504 (65519 -> 65504, 65520 -> inf), ties (2049 -> 2048, 2051 -> 2052), float16
subnormals and their ties (3 * 2^-25 -> 2^-23), -2^-25 -> -0.0, a NaN row; bfloat16: 257 -> 256,
259 -> 260, the largest bfloat16 plus half an ulp -> inf."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import pairwise  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
P = 8  # targets per row: column j sums operand columns 2 (j % P) and 2 (j % P) + 1
K, N = 2 * P, 2 * P  # columns P .. 2P - 1: the same sums scaled by 2^-14 (float16's subnormals)

# (hi, lo) pairs, rounded to the operand dtype; their sum is exact in float32 (asserted)
PAIRS = {
    "float16": [(65504, 0), (65504, 15), (65504, 16), (-65504, -16), (2048, 1), (2048, 3), (2048, 2.5),
                (1.0, 2.0 ** -11), (2.0 ** -11, 0), (3 * 2.0 ** -11, 0), (-(2.0 ** -11), 0), (-1.5, 0),
                (0.1, 0.2), (-0.0, 0), (60000, 5000), (2.0 ** -10, 2.0 ** -11)],
    "bfloat16": [(256, 1), (256, 3), (256, 2.5), (-256, -1), (3.3895313892515355e38, 2.0 ** 119),
                 (3.3895313892515355e38, 2.0 ** 118), (1.0, 2.0 ** -8), (1.0, 3 * 2.0 ** -9), (0.1, 0.2),
                 (-1.5, 0), (65504, 16), (1e-30, 1e-31), (-(2.0 ** -40), 0), (7.0, 2.0 ** -6),
                 (2.0 ** 100, 2.0 ** 92), (-3.0, 2.0 ** -7)],
}


def _gemm_cast(dt, target, M, out_dt, how="copy"):
    @T.prim_func
    def g(A: T.Tensor((M, K), dt), B: T.Tensor((N, K), dt), O: T.Tensor((M, N), out_dt)):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), dt)
            b = T.alloc_shared((N, K), dt)
            s = T.alloc_fragment((M, N), "float32")
            s16 = T.alloc_fragment((M, N), out_dt)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, s, transpose_B=True, clear_accum=True)
            if how == "copy":
                T.copy(s, s16)  # the user's narrowing: the hand-off carries out_dt
            elif how == "cast":
                for i, j in T.Parallel(M, N):
                    s16[i, j] = T.cast(s[i, j], out_dt)
            else:
                for i, j in T.Parallel(M, N):
                    s16[i, j] = s[i, j]  # converted by the store
            T.copy(s16, O)
    return tw.compile(g, target=target, out_idx=[-1])


def _operands(dt, M, seed):
    rng = np.random.default_rng(seed)
    pairs = PAIRS[dt]
    a = np.zeros((M, K), np.float64)
    for i in range(M):
        pick = rng.permutation(len(pairs))[:P]
        for p, x in enumerate(pick):
            a[i, 2 * p], a[i, 2 * p + 1] = pairs[x]
    if M > 1:
        a[M // 2, 0] = np.nan  # one NaN row (NaN * 0 makes every sum of the row NaN)
    b = np.zeros((N, K), np.float64)
    for j in range(N):
        b[j, 2 * (j % P)] = b[j, 2 * (j % P) + 1] = 1.0 if j < P else 2.0 ** -14
    return a.astype(np_dtype(dt)), b.astype(np_dtype(dt))  # (0.1, 0.2, 1e-30: their nearest dt values)


def _same_bits(x, y):
    x, y = np.asarray(x), np.asarray(y)
    nan = np.isnan(x.astype(np.float32))
    return np.array_equal(nan, np.isnan(y.astype(np.float32))) and np.array_equal(
        x.view(np.uint16)[~nan], y.view(np.uint16)[~nan])


# every pair of (M, how, dtype) values (tw_test_util.pairwise: 9 cases, not the 18 of the product;
# session 29, h-ci): every form at every M, each in both dtypes; float16 at M = 16 and 17 (its inf,
# -0 and subnormal results) in all three forms
@pytest.mark.parametrize("M,how,dt", pairwise([16, 17, 1], ["copy", "cast", "store"], ["float16", "bfloat16"]))
def test_fixpipe_narrowing_rounds_like_cpu(dt, M, how):
    """T.copy(s, s16), a T.Parallel map of T.cast(s[i, j], dt), or of the store's own conversion."""
    A, B = _operands(dt, M, seed=25 * M)
    s = A.astype(np.float64) @ B.astype(np.float64).T  # exact: two nonzero terms per sum
    assert np.array_equal(s.astype(np.float32).astype(np.float64), s, equal_nan=True)
    with np.errstate(over="ignore"):
        ref = s.astype(np.float32).astype(np_dtype(dt))  # numpy / ml_dtypes: round to nearest even, inf past the range
    if dt == "float16" and M > 1:  # the cases are there
        assert np.isinf(ref.astype(np.float32)).any() and (np.signbit(ref) & (ref == 0)).any()
        assert ((ref != 0) & (np.abs(ref.astype(np.float32)) < 2.0 ** -14)).any()  # subnormals
    out = {}
    for t in ("cpu", TARGET):
        k = _gemm_cast(dt, t, M, dt, how)
        out[t] = np.asarray(k(A, B) if t == "cpu" else run_checked(k, A, B))
        if t == TARGET:  # one hand-off, narrowed by Fixpipe
            prog = k.get_source("ascend_program")
            assert prog.count("FixpipeV220 workspace") == 1 and "quantPre=NoQuant" not in prog, prog
    for t, o in out.items():
        assert o.dtype == np_dtype(dt)
        bad = np.argwhere(o.view(np.uint16) != ref.view(np.uint16))
        bad = [b for b in bad if not (np.isnan(float(o[tuple(b)])) and np.isnan(float(ref[tuple(b)])))]
        assert not bad, f"{dt} M={M} on {t}: {len(bad)} of {ref.size} differ, e.g. " + ", ".join(
            f"s{tuple(int(v) for v in b)} = {s[tuple(b)]!r} -> {float(o[tuple(b)])!r} (ref {float(ref[tuple(b)])!r})"
            for b in bad[:4])
    assert _same_bits(out["cpu"], out[TARGET])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_the_hand_off_is_16_bit_in_the_program_and_in_ascendc(dt, tmp_path):
    """The program has one Fixpipe into the workspace with the narrowing mode; the AscendC source
    prints it as QuantMode_t and compiles against the stand-in headers (test_ascendc_compile)."""
    k = _gemm_cast(dt, TARGET, 32, dt)
    prog = k.get_source("ascend_program")
    mode = {"float16": "F322F16", "bfloat16": "F322BF16"}[dt]
    assert prog.count("FixpipeV220 workspace") == 1 and f"quantPre={mode}" in prog, prog
    src = k.get_source("ascendc")
    assert f"QuantMode_t::{mode}" in src
    import test_ascendc_compile
    rc, out = test_ascendc_compile.compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", out


def test_float32_copy_is_an_exact_hand_off():
    """A copy into a float32 tile: the same hand-off without conversion (NoQuant), values unchanged."""
    A, B = _operands("float16", 16, seed=3)
    s = (A.astype(np.float64) @ B.astype(np.float64).T).astype(np.float32)
    k = _gemm_cast("float16", TARGET, 16, "float32")
    assert "quantPre=NoQuant" in k.get_source("ascend_program")
    np.testing.assert_array_equal(run_checked(k, A, B), s)
    np.testing.assert_array_equal(_gemm_cast("float16", "cpu", 16, "float32")(A, B), s)


def _example():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tw_fa_example_s25", ROOT / "examples" / "flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("S,D", [(200, 64), (64, 128)])
def test_flash_attention_narrow_handoffs(causal, S, D):
    """examples/flash_attention.py narrow_handoffs=True, float16, 64 x 64 blocks (S 200: a key
    tail), normal data: cpu and ascend910b against float64 (atol 1e-2: the scores are rounded to
    float16, |s| * 2^-11, before the softmax) and against each other (atol 2e-3: a float32 score
    summed in another order can round to the neighbouring float16). The hand-offs are 16-bit."""
    fa = _example()
    rng = np.random.default_rng(S + causal)
    q, k, v = (rng.standard_normal((1, 2, S, D)).astype(np.float16) for _ in range(3))
    ref = fa.reference(q, k, v, causal)
    out = {}
    for t in ("cpu", TARGET):
        kern = fa.flash_attention(1, 2, S, D, causal, dtype="float16", narrow_handoffs=True, target=t)
        out[t] = np.asarray(kern(q, k, v) if t == "cpu" else run_checked(kern, q, k, v), np.float64)
        np.testing.assert_allclose(out[t], ref, atol=1e-2, rtol=0, err_msg=f"{t} causal={causal}")
        if t == TARGET:
            assert kern.get_source("ascend_program").count("quantPre=F322F16") >= 2  # S and P V
    np.testing.assert_allclose(out["cpu"], out[TARGET], atol=2e-3, rtol=0)


def test_flash_attention_narrow_scores_past_65504_are_the_users_inf():
    """The opt-in's known cost: a score above 65504 is inf in the float16 tile, on both targets
    alike (here q . k up to 69696: NaN rows from inf - inf in the softmax)."""
    fa = _example()
    rng = np.random.default_rng(11)
    q, k = ((62 + rng.integers(0, 5, (1, 1, 128, 64))) / 2 for _ in range(2))
    v = rng.integers(-8, 9, (1, 1, 128, 64)) / 2
    q, k, v = (x.astype(np.float16) for x in (q, k, v))
    out = {}
    for t in ("cpu", TARGET):
        kern = fa.flash_attention(1, 1, 128, 64, False, dtype="float16", narrow_handoffs=True, target=t)
        out[t] = np.asarray(kern(q, k, v) if t == "cpu" else run_checked(kern, q, k, v), np.float64)
    assert np.isnan(out["cpu"]).any()
    assert np.array_equal(np.isnan(out["cpu"]), np.isnan(out[TARGET]))
