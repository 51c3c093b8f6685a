"""Session 36's portability hunt (h-port36, docs/testing.md "Session 36: port36"): review35 R2's unit-dim tiles,
then more user kernel forms written for cpu first (tests/python/port36_kernels.py) with only the target changed to
ascend910b (simulator, checker on), against float64 numpy / exact integers.
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
import port36_kernels as P  # noqa: E402


# --------------------------------------------------------------------------------------------- review35 R2
# An elif chain in a 2-D map storing into a tile with a unit dim, y[0, i, j] of (1, m, n) or y[i, 0, j] of
# (m, 1, n), was "this T.Parallel body is not a vector instruction: an if inside a map" on ascend910b (int32;
# serial_maps read the store as strided), whose hint was what the kernel already did; into an (m, n) tile it
# compiled. The serial-loop form ran as a scalar element loop; it is a map now.
def _chain(M, N, dt, form):
    shp = (M, 1, N) if form == "mid" else (1, M, N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), n: T.int32, Y: T.Tensor(shp, dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            y = T.alloc_fragment(shp, dt)
            T.copy(X, x)
            if form == "mid":
                for i, j in T.Parallel(M, N):
                    if j < 1 and i < n:
                        y[i, 0, j] = x[i, j] + 1
                    elif j < 3 and i < n:
                        y[i, 0, j] = x[i, j] * 2
                    else:
                        y[i, 0, j] = x[i, j]
            elif form == "serial":
                for i in T.serial(M):
                    for j in T.serial(N):
                        if j < 1 and i < n:
                            y[0, i, j] = x[i, j] + 1
                        elif j < 3:
                            y[0, i, j] = x[i, j] * 2
                        else:
                            y[0, i, j] = x[i, j]
            else:
                for i, j in T.Parallel(M, N):
                    if j < 1 and i < n:
                        y[0, i, j] = x[i, j] + 1
                    elif j < 3 and i < n:
                        y[0, i, j] = x[i, j] * 2
                    else:
                        y[0, i, j] = x[i, j]
            T.copy(y, Y)

    return main


def _chain_ref(x, n, form):
    i, j = np.indices(x.shape)
    xf = x.astype(np.float64)
    first = (j < 1) & (i < n)
    second = (j < 3) & ((i < n) | (form == "serial"))
    y = np.where(first, xf + 1, np.where(second, xf * 2, xf))
    return y[:, None, :] if form == "mid" else y[None]


@pytest.mark.parametrize("form", ["lead", "mid", "serial"])
@pytest.mark.parametrize("dt", ["int32", "float16"])
def test_r2_unit_dim_tile_elif_chain(form, dt):
    for M, N in [(5, 19), (1, 1)]:
        x = (np.arange(M * N).reshape(M, N) % 23 - 11).astype(dt)
        p = tw.compile(_chain(M, N, dt, form), target=TARGET, out_idx=[-1]).profile(x, 3)
        assert p["reports"] == [], p["reports"]
        np.testing.assert_array_equal(p.outputs.astype(np.float64), _chain_ref(x, 3, form))


def test_r2_unit_dim_tile_elif_chain_cpu():
    x = (np.arange(95).reshape(5, 19) % 23 - 11).astype("int32")
    got = tw.compile(_chain(5, 19, "int32", "mid"), target="cpu", out_idx=[-1])(x, 3)
    np.testing.assert_array_equal(got, _chain_ref(x, 3, "mid"))


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed): a tile copied in and never read (a factory's form that does not use it: decode attention's slopes
# in its sliding-window form), then the vector code's hand-off copy of a gemm result: plan_memory gave both tiles
# the same UB bytes (the dead one's life ends at its copy), and insert_sync dropped the MTE2 -> MTE2 dependence
# as implied through the CrossCoreWaitFlag<MTE2> between them, which blocks later MTE2 instructions but does not
# wait for earlier ones; the checker reported "same-pipe hazard ... add PipeBarrier<PIPE_MTE2>". A same-pipe link
# through a cross-core flag no longer stands for a barrier.
@T.prim_func
def _dead_then_handoff(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
                       S: T.Tensor((8,), "float32"), Y: T.Tensor((16, 16), "float16")):
    with T.Kernel(1) as bx:
        a = T.alloc_shared((16, 16), "float16")
        b = T.alloc_shared((16, 16), "float16")
        acc = T.alloc_fragment((16, 16), "float32")
        sd = T.alloc_fragment((8,), "float32")
        y = T.alloc_fragment((16, 16), "float16")
        T.copy(A, a)
        T.copy(B, b)
        T.copy(S, sd)
        T.clear(acc)
        T.gemm(a, b, acc)
        for i, j in T.Parallel(16, 16):
            y[i, j] = acc[i, j] * 2.0
        T.copy(y, Y)


def test_f1_dead_tile_before_a_handoff_copy():
    x = (np.arange(256).reshape(16, 16) % 7).astype(np.float16)
    p = tw.compile(_dead_then_handoff, target=TARGET, out_idx=[-1]).profile(x, x, np.ones(8, np.float32))
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(p.outputs, (x.astype(np.float32) @ x.astype(np.float32) * 2).astype(np.float16))


# F2 (fixed): a compile-time `if form == ...:` choosing between two `with T.Kernel(...)` blocks (a factory whose
# forms launch different grids: per-token vs per-channel KV quantisation) was "the body of a T.prim_func must be
# a single 'with T.Kernel(...)' block" on both targets (port34 noted it), though the same `if` inside a kernel
# is folded. The body's compile-time ifs are now folded first; an `if` on a kernel value there is still the error.
def test_f2_compile_time_if_around_kernels():
    P.check("kv_quant_asym_channel", "float16", (13, 37), TARGET)
    P.check("kv_quant_asym_token", "float32", (1, 1), "cpu")

    with pytest.raises(tw.TilewrightError, match=r"must be a single 'with T\.Kernel"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32"), n: T.int32, Y: T.Tensor((8,), "float32")):
            if n > 0:
                with T.Kernel(1) as bx:
                    T.copy(X, Y)


# --------------------------------------------------------------------------------------------- the kernels
# (a) a selection, one per construct, on ascend910b at its first dtype and its tail shape (the probe,
# `python tests/python/port36_kernels.py`, runs every kernel, dtype and shape on both targets)
AGREE = ["rope_partial", "decode_alibi", "decode_window", "decode_sink", "softcap_logits", "presence_freq_penalty",
         "entropy_temp", "beam_step", "typical_accept", "ce_ignore_index", "ce_soft_targets", "grpo_kl_k3",
         "kv_quant_asym_token", "kv_quant_asym_channel", "kv_dequant_asym_channel", "group_quant_3d",
         "swiglu_clamp_interleaved", "add_layernorm", "logit_bias", "exp_race_sample", "top_k_mask",
         "top_p_sorted_cumsum", "gemm_geglu_cat", "dwconv_nhwc_rows", "bilinear_resize", "upsample2x_rows", "box_iou",
         "soft_nms_step", "box_decode_gather", "image_norm_u8", "bn_eval_nchw", "pixel_norm", "bincount_rows",
         "segment_max", "searchsorted_left", "unique_consec_shift", "cummax_dim1", "cummax_dim0",
         "logcumsumexp_dim0", "sort_rows_rank", "expert_offsets", "remainder_float", "nan_to_num", "argmin_first",
         "ema_inplace", "int_floordiv_remainder"]


@pytest.mark.parametrize("name", AGREE)
def test_runs_on_ascend910b(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], TARGET)


# cpu: one g++ compile (the probe runs the rest)
def test_runs_on_cpu():
    P.check("sort_rows_rank", "int32", (5, 9), "cpu")


# (b) ascend910b's located error (the kernel's line and a hint); the form the hint names runs right
LOCATED = [
    ("group_quant_loop", "float16", (13, 3, 8), r"a column of a tensor cannot fill or come from a 1-D tile",
     r"declare the tile as a column", "group_quant_loop_col"),
    ("upsample2x_map", "float32", (2, 5, 7), r"reads 'x' at the index x\[i // 2, j // 2\]",
     r"for r in T\.serial\(R\): for j in T\.Parallel\(C\)", "upsample2x_rows"),
]


# A per-row factor read down a column (outer product a[i, 0] * b[0, j]; F3's box decoding a[i, 0] + a[i, 2] in a
# (bn, 4) map) was a located error, its hint the column gathered into a 1-D tile (outer_product_gather) / a row
# (box_decode_gather, in AGREE); since session 40 (h-math40) legalize_vector gathers the column itself.
@pytest.mark.parametrize("name, dt, shape", [("outer_product", "bfloat16", (1, 5)), ("outer_product", "float32", (13, 37)),
                                             ("outer_product_gather", "bfloat16", (1, 5)), ("box_decode_rows", "float32", (37,))])
def test_column_read_as_a_per_row_factor_runs(name, dt, shape):
    P.check(name, dt, shape, TARGET)


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port36_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)


# F5 (fixed): T.pow(x, c) of a constant non-integer c (HF's length penalty (len + 1) ** 0.8) was "T.pow with
# exponent 0.8 is not supported on Ascend vector units yet" (hint T.exp(y * T.log(x)), which runs); expand_math
# now writes it exp(c * log(x)) in float32, -x or 0 at x = -inf (log(-inf) is NaN): pow's value at +-0, +-inf,
# negatives and NaN as well. Against numpy's float64 power rounded to the dtype (cpu's powf agrees).
def _pow(c, dt, n):
    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), dt)
            T.copy(X, x)
            for i in T.Parallel(n):
                y[i] = T.pow(x[i], c)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("dt, rtol", [("float32", 2e-6), ("float16", 1e-3)])
def test_f5_pow_of_a_non_integer_constant(dt, rtol):
    x = np.array([2.5, 0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-3, 0.3, 7.0, 123.0, 6e4, -6e4],
                 np.float64).astype(dt)
    for c in (0.8, -1.5, 1.0 / 3):
        p = tw.compile(_pow(c, dt, len(x)), target=TARGET, out_idx=[-1]).profile(x)
        assert p["reports"] == [], p["reports"]
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.float64), c).astype(dt).astype(np.float64)
        got = p.outputs.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
        assert np.array_equal(np.signbit(got[np.isfinite(got)]), np.signbit(want[np.isfinite(want)]))
