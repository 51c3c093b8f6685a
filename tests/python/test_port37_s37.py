"""Session 37's portability hunt (h-port37, docs/testing.md "Session 37: port37"): more user kernel forms written for
cpu first (tests/python/port37_kernels.py) with only the target changed to ascend910b (simulator, checker on),
against float64 numpy / exact integers / ml_dtypes' float8; the findings' minimal forms.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
import port37_kernels as P  # noqa: E402


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed): a math call in a map over more than 2 dims (group RMSNorm's T.rsqrt(s[i, g] / C + eps) over (bm, G, C),
# gated RMSNorm's T.silu) was "T.rsqrt is not supported on Ascend vector units yet" with a hint naming rsqrt itself:
# expand_math only looked at 1-D / 2-D maps, legalize_vector runs the leading loops of a deeper one serially
# around the 2-D map of the last two, so that map's calls are expanded now.
def _nd_math(M, G, C, dt):
    @T.prim_func
    def main(X: T.Tensor((M, G, C), dt), S: T.Tensor((M, G), "float32"), Y: T.Tensor((M, G, C), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, G, C), "float32")
            s = T.alloc_fragment((M, G), "float32")
            y = T.alloc_fragment((M, G, C), "float32")
            T.copy(X, x)
            T.copy(S, s)
            for i, g, c in T.Parallel(M, G, C):
                y[i, g, c] = T.rsqrt(s[i, g]) * T.silu(x[i, g, c]) + T.tanh(x[i, g, c]) * T.sigmoid(s[i, g])
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_f1_math_in_a_3d_map(dt):
    rng = np.random.default_rng(37)
    x = rng.standard_normal((3, 2, 8)).astype(P.npdt(dt))
    s = (0.5 + rng.random((3, 2))).astype(np.float32)
    p = tw.compile(_nd_math(3, 2, 8, dt), target=TARGET, out_idx=[-1]).profile(x, s)
    assert p["reports"] == [], p["reports"]
    X, S = P.f64(x), P.f64(s)[..., None]
    ref = X / np.sqrt(S) / (1 + np.exp(-X)) + np.tanh(X) / (1 + np.exp(-S))
    np.testing.assert_allclose(p.outputs, ref, rtol=1e-4, atol=1e-5)
    P.check("group_rmsnorm", "float16", (13, 4, 16), TARGET)


def _rms3d_rowvec(M, G, C, hinted):
    """A 3-D map scaled by a math call of a per-row value r[i] (gated / 2-D layer norm's form). legalize_vector
    reads r[i] into a scalar per row there, so the call would be scalar code: on ascend910b it was a located error
    naming the call (verify_program; at integration of port37 with printer37, which prints at every compile)
    whose hint was the call computed over the vector in its own map first (`hinted`); since session 38
    (h-legalize38) lower_scalar_math writes that form itself (tests/python/test_legalize38_s38.py)."""
    bm = 4

    @T.prim_func
    def main(X: T.Tensor((M, G, C), "float32"), Y: T.Tensor((M, G, C), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, G, C), "float32")
            q = T.alloc_fragment((bm, G, C), "float32")
            y = T.alloc_fragment((bm, G, C), "float32")
            s = T.alloc_fragment((bm, G), "float32")
            r = T.alloc_fragment((bm,), "float32")
            rr = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0, 0], x)
            for i, g, c in T.Parallel(bm, G, C):
                q[i, g, c] = x[i, g, c] * x[i, g, c]
            T.reduce_sum(q, s, dim=2)
            T.reduce_sum(s, r, dim=1)
            if hinted:
                for i in T.Parallel(bm):
                    rr[i] = T.rsqrt(r[i] / (G * C) + 1e-5)
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * rr[i]
            else:
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.rsqrt(r[i] / (G * C) + 1e-5)
            T.copy(y, Y[bx * bm, 0, 0])
    return main


def test_f1_math_of_a_row_value_in_a_3d_map_runs_as_written_and_hinted():
    # was (session 37): "math function 'sqrt' of a scalar ... rr[i]" for the form as written
    M, G, C = 13, 3, 16
    x = np.random.default_rng(7).standard_normal((M, G, C)).astype(np.float32)
    X = P.f64(x)
    ref = X / np.sqrt((X * X).mean((1, 2), keepdims=True) + 1e-5)
    for hinted in (False, True):
        for t in ("cpu", TARGET):
            k = tw.compile(_rms3d_rowvec(M, G, C, hinted), target=t, out_idx=[-1])
            if t == "cpu":
                got = k(x)
            else:
                p = k.profile(x)
                assert p["reports"] == [], p["reports"]
                got = p.outputs
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=f"{t} hinted={hinted}")


# F2 (fixed): `if form in ("shift", "copy"):` on a @tw.jit argument was "unsupported comparison 'in' in a kernel" on
# both targets (`==` on the same values folds); `in` / `not in` of a Python value in a tuple or list of Python
# values now fold; on kernel values they are an error naming == ... or.
def _in_form(form):
    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                if form in ("double", "twice"):
                    Y[i] = X[i] * 2
                elif form not in ["neg"]:
                    Y[i] = X[i] + 1
                else:
                    Y[i] = -X[i]
    return main


def test_f2_in_on_compile_time_values():
    x = np.arange(-3, 5, dtype=np.int32)
    for form, want in (("twice", x * 2), ("plus", x + 1), ("neg", -x)):
        p = tw.compile(_in_form(form), target=TARGET, out_idx=[-1]).profile(x)
        assert p["reports"] == [], p["reports"]
        np.testing.assert_array_equal(p.outputs, want)
    with pytest.raises(tw.TilewrightError, match=r"'in' tests a Python value .* not kernel values") as e:
        @T.prim_func
        def bad(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    Y[i] = T.where(X[i] in (1, 2), 1, 0)
    assert "x == a or x == b" in str(e.value)


# F4 (fixed as message + hint): run-length encoding's `if i == 0 or x[i] != x[i - 1]:` in a serial loop is
# "index i - 1 of 'x' reaches -1" on both targets: `or` / `and` evaluate both operands in a kernel (cpu prints `|`,
# the simulator computes both), so the read of x[-1] runs. The hint was "check the loop extents", which does not
# lead to the fix; inside an operand of and / or it now says so and names the clamp, whose form runs.
def test_f4_guard_in_or():
    with pytest.raises(tw.TilewrightError, match=r"index i - 1 of 'x' reaches -1") as e:
        P.check("run_length_encode", "int32", (37,), TARGET)
    assert "evaluate both operands (no short circuit)" in str(e.value) and "x[T.max(i - 1, 0)]" in str(e.value)
    P.check("run_length_encode_clamped", "int32", (37,), TARGET)


# F3 (open, cpu): FP8 emulation by Veltkamp's split t = v * (2^s + 1), hi = t - (t - v) rounds v to mbits + 1 bits
# on ascend910b (each operation rounded, as the printed kernel's -ffp-contract=off), but the cpu target's g++
# contracts t - v into fma(v, 2^s + 1, -v) (-ffp-contract=fast, its vector loops rely on FMA): hi is v unrounded, a
# silent difference between the targets. The ladder form (binade steps, the 1.5 * 2^23 rounding) agrees on both.
def test_f3_veltkamp_split_on_ascend_and_the_ladder_on_both():
    P.check("fp8_e4m3_split", "float32", (13, 37), TARGET)
    P.check("fp8_e5m2_ladder", "bfloat16", (13, 37), "cpu")


@pytest.mark.xfail(strict=True, reason="port37 F3: the cpu target contracts t - (t - v) (-ffp-contract=fast)")
def test_f3_veltkamp_split_on_cpu():
    P.check("fp8_e4m3_split", "float32", (1, 1), "cpu")


# --------------------------------------------------------------------------------------------- the kernels
# (a) a selection, one per construct, on ascend910b at its first dtype and its first shape (the probe,
# `python tests/python/port37_kernels.py`, runs every kernel, dtype and shape on both targets)
AGREE = ["celu", "round", "logit", "layernorm_2d", "bn_running_update", "trace_batched",
         "router_sigmoid_bias_top2", "expert_choice", "capacity_drop", "lb_loss", "moe_combine", "fp8_e4m3_ladder",
         "nf4_gather", "smoothquant", "lion", "adafactor", "infonce", "max_unpool1d", "roi_align",
         "cross_attn_key_padding", "t5_bucket_select", "longformer_global", "diff_attn", "paged_prefill_chunk",
         "topk_repeated_argmax", "gated_rmsnorm"]


@pytest.mark.parametrize("name", AGREE)
def test_runs_on_ascend910b(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], TARGET)


# (b) ascend910b's located error (the kernel's line and a hint); the form the hint names runs right
LOCATED = [
    ("moving_avg", "float32", (13, 37), r"writes 'xp' at an element which starts 8 bytes into a 32 B block",
     r"shift by a multiple of 8 columns", "moving_avg_copies"),
    ("sobel", "float16", (13, 37), r"reads or writes 'x' at an element which starts 8 bytes into a 32 B block",
     r"copy the shifted columns from global memory into a tile of their own", "sobel_copies"),
    ("conv1d_dilated_taps", "float32", (2, 5, 37), r"the window starts 8 bytes into tile 'xp'",
     r"copy a window of the tensor that starts before it", "conv1d_dilated_gm"),
    ("cross_rows", "float32", (37,), r"tile 'a' is read down a column",
     r"gather the column into a row of a tile first", "cross_gather"),
    ("int4_u8_shift", "float16", (16, 32, 8), r"Ascend's Gather takes 16- and 32-bit elements, not uint8",
     r"T\.copy the data into one first", "int4_u8_copy"),
    ("group_int8_gemm", "int8", (17, 40, 64, 32), r"int8 KxN tile needs a transposing load",
     r"store B as NxK \(transpose_B=True\)", "group_int8_gemm_nk"),
    ("pixel_shuffle", "bfloat16", (3, 5, 7), r"reads 'x' at the index x\[a \* 2 \+ o % 2, o // 2\]",
     r"make the rows a serial loop around a 1-D map", "pixel_shuffle_rows"),
    ("compaction", "int32", (37,), r"copy UB->GM from pos\[37:\+1\]: the window starts 148 bytes into tile 'pos'",
     r"give the tile one row per window", "compaction_tile"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port37_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)


# F5 (fixed): T5's bucket bias read from a (16,) table tile at the bucket computed in the map, tb[bk[i, j]], in the
# vector part of a gemm kernel was "an access to 'tb' indexed by the row variable outside its first dim ... rows
# cannot be split between the two Vector cores" (hint: work row by row), though the index is a row tile's element,
# which each Vector core reads in its own rows; the same gather in a vector-only kernel ran (nf4_gather).
# split_cube_vector's row check no longer looks into row tiles' reads inside an index.
@pytest.mark.parametrize("dt, shape", [("float16", (2, 13, 37, 16)), ("bfloat16", (1, 1, 1, 16))])
def test_f5_table_gather_in_a_gemm_kernel(dt, shape):
    P.check("t5_bucket_gather", dt, shape, TARGET)
