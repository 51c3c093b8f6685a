"""Session 33's portability hunt (h-port33, docs/testing.md "Session 33: port33"): kernels users write for cpu
first (tests/python/port33_kernels.py: SwiGLU / GeGLU, group and instance norm, int8 quantize / dequantize and
dequant matmuls, embeddings by int32 / int64 ids, repeat_kv, KV-cache append, sampling, masked / causal / ALiBi
softmax, RoPE at positions, row statistics, activations, scans, top-k, histograms, ...) with only the target
changed to ascend910b (simulator, checker on), against float64 numpy / exact integers (TOL in port33_kernels.py).

- (a) kernels: every dtype and shape on ascend910b (in-process, cheap), the first dtype and shape on cpu too (a
  g++ compile each); `python tests/python/port33_kernels.py` runs the whole matrix on both targets.
- (b) kernels: ascend910b's located error (the kernel's line and a hint); the alternative the hint names runs right
  on both targets (the probe runs the (b) kernels on cpu too).
- Findings: strict xfails (port33 F1..F3) that flip when fixed.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port33_kernels as P  # noqa: E402
from ascend_util import TARGET, run_checked, run_on  # noqa: E402

# (a): run and agree on both targets
AGREE = ["swiglu", "geglu", "geglu_tanh", "swiglu_tileloop", "group_norm", "instance_norm", "quantize_int8",
         "dequantize_int8", "dequant_matmul_copy", "dequant_matmul_map", "group_dequant_matmul", "embedding_i32",
         "embedding_i64", "embedding_gm2gm", "embedding_oob_ids", "repeat_kv", "kv_append", "argmax_temperature",
         "masked_fill_softmax", "causal_softmax_iota", "alibi_causal_softmax", "alibi_slopes_inkernel",
         "logsumexp", "var_unbiased", "var_unbiased_n1", "cosine_similarity", "pairwise_dist", "mean_two_axes",
         "softmax_dim0", "clamp", "clamp_int32", "hardswish", "softplus", "mish", "cumsum_rows", "cumprod_rows",
         "reverse_rows", "topk2", "topk3", "topk4", "histogram_atomic", "weighted_histogram",
         # the alternatives that the (b) errors name
         "diff_two_copies", "conv1d_copies", "rope_halves", "transpose_cube", "reverse_int8_via_int32",
         "silu_and_mul_copies", "int4_unpack_int32", "w8a8_matmul_nk", "temperature_per_row_tile"]
# cases of AGREE that are (b) on ascend910b at some dtype / shape: (name, dtype, shape)
AGREE_EXCEPT = {("reverse_rows", "int8"), ("cumsum_rows", (1, 1))}


def _ascend_cases():
    out = []
    for name in AGREE:
        _, dts, shapes = P.CASES[name]
        for dt in dts:
            for shape in shapes:
                if (name, dt) in AGREE_EXCEPT or (name, shape) in AGREE_EXCEPT:
                    continue
                out.append(pytest.param(name, dt, shape, id=f"{name}-{dt}-{'x'.join(map(str, shape))}"))
    return out


@pytest.mark.parametrize("name, dt, shape", _ascend_cases())
def test_runs_on_ascend910b(name, dt, shape):
    P.check(name, dt, shape, TARGET)


# cpu: the first dtype and shape of the (a) kernels with a construct of their own (a g++ compile each; the alternatives
# run on cpu in test_located_error_and_its_alternative; `python tests/python/port33_kernels.py` runs every kernel,
# dtype and shape on both targets)
CPU = ["swiglu_tileloop", "group_norm", "quantize_int8", "dequantize_int8", "dequant_matmul_map", "group_dequant_matmul",
       "embedding_i64", "embedding_oob_ids", "repeat_kv", "kv_append", "argmax_temperature", "masked_fill_softmax",
       "causal_softmax_iota", "alibi_slopes_inkernel", "logsumexp", "var_unbiased", "pairwise_dist", "softmax_dim0",
       "clamp_int32", "mish", "cumprod_rows", "reverse_rows", "topk2", "histogram_atomic"]


@pytest.mark.parametrize("name", CPU)
def test_runs_on_cpu(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], "cpu")


# --------------------------------------------------------------------------------------------- (b) located errors
# name, dtype, shape, what the error says, what its hint says, the kernel that does what the hint says
LOCATED = [
    ("diff_rows", "float32", (13, 37), r"starts 4 bytes into a 32 B block", "copy the shifted columns", "diff_two_copies"),
    ("rope_positions", "float16", (5, 12, 11), r"starts 24 bytes into a 32 B block", "copy the shifted columns",
     "rope_halves"),
    ("silu_and_mul_map", "bfloat16", (13, 37), r"starts 20 bytes into a 32 B block", "copy the shifted columns",
     "silu_and_mul_copies"),
    ("transpose_tile", "float16", (13, 37), r"transposed", r"T\.gemm\(eye, x_shared", "transpose_cube"),
    ("reverse_rows", "int8", (13, 37), r"Gather takes 16- and 32-bit elements, not int8", "T.copy the data",
     "reverse_int8_via_int32"),
    ("int4_unpack_uint8", "uint8", (13, 19), r"'>>' on uint8 tile data", r'T\.cast\(x, "int32"\)', "int4_unpack_int32"),
    ("w8a8_matmul_kn", "float16", (13, 37, 45), r"int8 KxN tile needs a transposing load", r"transpose_B=True",
     "w8a8_matmul_nk"),
    ("temperature_per_row_gm", "float32", (13, 37), r"strided read of a global tensor has no vector instruction",
     r"copy the rows it reads into a tile first", "temperature_per_row_tile"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port33_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    _, dts, shapes = P.CASES[alt]
    adt = dt if dt in dts else dts[0]
    ashape = shape if shape in shapes else shapes[0]
    for target in ("cpu", TARGET):
        P.check(alt, adt, ashape, target)


# The int32 transpose: the error's hint says int32 tiles have no route, yet a serial element loop (the scalar
# unit) runs on both targets.
M, N, BM = 13, 37, 4


@T.prim_func
def _transpose_elements(X: T.Tensor((M, N), "int32"), Y: T.Tensor((N, M), "int32")):
    with T.Kernel(T.ceildiv(M, BM)) as bx:
        x = T.alloc_fragment((BM, N), "int32")
        y = T.alloc_fragment((N, BM), "int32")
        T.copy(X[bx * BM, 0], x)
        for i in T.serial(BM):
            for j in T.serial(N):
                y[j, i] = x[i, j]
        T.copy(y, Y[0, bx * BM])


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_int32_transpose_by_elements(target):
    x = np.arange(M * N, dtype=np.int32).reshape(M, N) - 100
    np.testing.assert_array_equal(run_on(_transpose_elements, target, [-1], x), x.T)


# --------------------------------------------------------------------------------------------- findings
F1 = ("(fixed in session 33 by the lead) port33 F1: a map operand shifted by a loop variable with constant bounds (x[i, j + k], k in T.serial(3) / "
      "T.unroll(3): a 1-D conv) compiles on ascend910b and every run is the checker's `misaligned` report; a "
      "constant shift is a located error (select_instructions.cpp map_operand_aligned: mod32 gives up on k * 4)")


@pytest.mark.parametrize("name", ["conv1d_rows", "conv1d_unrolled"])
def test_f1_shift_by_a_loop_variable(name):
    """Either runs right or is a located error naming the fix that works (conv1d_copies)."""
    try:
        P.check(name, "float32", (13, 37), TARGET)
    except tw.TilewrightError as e:
        assert "port33_kernels.py:" in str(e) and "copy the shifted columns" in str(e), str(e)


def test_f1_runs_on_cpu():
    for name in ("conv1d_rows", "conv1d_unrolled"):
        P.check(name, "float32", (13, 37), "cpu")


F2 = ("(fixed in session 33 by the lead) port33 F2: the map-operand alignment error names compiler-renamed loop variables ('x'[i_4, j_4 + 37]) where "
      "the source says x[i, j + N] (select_instructions.cpp map_operand_aligned prints the lowered indices)")


def test_f2_error_names_the_users_variables():
    with pytest.raises(tw.TilewrightError) as e:
        P.check("silu_and_mul_map", "float32", (13, 37), TARGET)
    first = str(e.value).splitlines()[0]
    assert not re.search(r"\b[a-z]+_\d+\b", first), first


F3 = ("(fixed in session 33 by the lead) port33 F3: `y[j, i] = x[i, j]` in a map is 'T.Parallel reads 'y' transposed' (y is stored), and the hint says "
      "int32 / uint8 tiles have no route though a serial element loop runs (legalize_vector.cpp shape_of_load)")


def test_f3_transpose_store_message():
    with pytest.raises(tw.TilewrightError) as e:
        P.check("transpose_tile", "int32", (13, 37), TARGET)
    msg = str(e.value)
    assert "reads 'y'" not in msg and "T.serial" in msg, msg


F4 = ("port33 F4: an argmax into an int64 tensor (torch's index dtype) is an error on ascend910b in every form, even "
      "the scalar unit's element store idx64[i] = idx[i] in a serial loop ('conversion from int32 to int64: dav-c220 "
      "has no Cast'), whose hint (float16 / float32, or the cpu target) is no working alternative")


@pytest.mark.parametrize("target", ["cpu", TARGET])  # F4 fixed by h-int64out33 (an element loop on the scalar unit)
def test_f4_argmax_into_int64(target):
    from test_int64out33_s33 import _argmax_int64  # the kernel with its forms (this one: the serial element stores)
    x = np.random.default_rng(4).integers(-3, 4, (M, N)).astype(np.float32)  # ties: the lowest index
    np.testing.assert_array_equal(run_on(_argmax_int64(M, N, "serial", BM), target, [-1], x), np.argmax(x, 1))


F5 = ("(hint fixed in session 33 by the lead) port33 F5: a float64 map on ascend910b is 'vector op on float64', hint 'use float32 tiles (T.cast(x, \"float32\"))'; "
      "a float32 tile copied from the float64 tensor is then 'conversion from float64 to float32: dav-c220 has no Cast' "
      "at the copy: the hint is no working alternative (only the host's conversion is)")


@T.prim_func
def _float64_rows_in_float32(X: T.Tensor((M, N), "float64"), Y: T.Tensor((M,), "float32")):
    with T.Kernel(T.ceildiv(M, BM)) as bx:
        x = T.alloc_fragment((BM, N), "float32")  # the hint's float32 tile
        y = T.alloc_fragment((BM,), "float32")
        T.copy(X[bx * BM, 0], x)
        T.reduce_sum(x, y, dim=1)
        T.copy(y, Y[bx * BM])


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_f5_float64_data_in_float32_tiles(target):
    """cpu converts; ascend910b has no float64 -> float32 Cast: the error's hint names the host's conversion (the
    lead's fix of F5's hint, session 33)."""
    x = np.random.default_rng(5).integers(-8, 8, (M, N)) / 4.0  # float64, exact in float32 sums
    if target == "cpu":
        np.testing.assert_array_equal(run_on(_float64_rows_in_float32, target, [-1], x), x.sum(1).astype(np.float32))
        return
    with pytest.raises(tw.TilewrightError) as e:
        run_on(_float64_rows_in_float32, target, [-1], x)
    assert "test_port33_s33.py:" in str(e.value) and "x.astype(np.float32)" in str(e.value), str(e.value)


# --------------------------------------------------------------------------------------------- F6: tile-loop style
def _softmax_tileloop(split):
    def softmax_tl(X: tw.Tensor((M, N), "float32")):
        out = tw.output((M, N), dtype="float32")
        for by in range(tw.ceildiv(M, BM)):
            x = tw.load(X, (by * BM, 0), (BM, N))
            e = tw.accumulator((BM, N), dtype="float32")
            mx = tw.accumulator((BM,), dtype="float32")
            sm = tw.accumulator((BM,), dtype="float32")
            for i in range(BM):
                mx[i] = -T.infinity("float32")
                for j in range(N):
                    mx[i] = T.max(mx[i], x[i, j])
            for i in range(BM):
                for j in range(N):
                    e[i, j] = T.exp(x[i, j] - mx[i])
                    if not split:  # the running sum in the same nest
                        sm[i] = sm[i] + e[i, j]
            if split:
                for i in range(BM):
                    for j in range(N):
                        sm[i] = sm[i] + e[i, j]
            for i in range(BM):
                for j in range(N):
                    e[i, j] = e[i, j] / sm[i]
            tw.store(out, (by * BM, 0), e)
        return out
    return softmax_tl


def _softmax_ref(x):
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_tileloop_softmax_split_nests(target):
    """The form that runs on ascend910b: the exp in an element-wise nest of its own (a map), the sum in another."""
    x = np.random.default_rng(6).standard_normal((M, N)).astype(np.float32)
    k = tw.compile(_softmax_tileloop(True), target=target)
    P.assert_close_f32(k(x) if target == "cpu" else run_checked(k, x), _softmax_ref(x))


F6 = ("(fixed in session 33 by the lead) port33 F6: a tile-loop softmax nest that stores e = exp(x - mx) and sums sm += e is, on ascend910b, 'element "
      "store ... computes exp(x[i_1, j_1] - mx[i_1]) on the scalar unit', hint 'a T.Parallel map' (not in the tile-loop "
      "vocabulary); splitting the nest works and the hint should say so")


def test_f6_tileloop_mixed_nest():
    """Either runs right or names the tile-loop fix (a nest of its own), not T.Parallel."""
    x = np.random.default_rng(6).standard_normal((M, N)).astype(np.float32)
    try:
        k = tw.compile(_softmax_tileloop(False), target=TARGET)
        P.assert_close_f32(run_checked(k, x), _softmax_ref(x))
    except tw.TilewrightError as e:
        assert "a loop nest of its own" in str(e) and "_1" not in str(e).split("hint:")[0], str(e)


# --------------------------------------------------------------------------------------------- F7 / F8: hints
UM, UN = 5, 7


def _upsample(form):
    @T.prim_func
    def main(X: T.Tensor((UM, UN), "float32"), Y: T.Tensor((2 * UM, 2 * UN), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((UM, UN), "float32")
            y = T.alloc_fragment((2 * UM, 2 * UN), "float32")
            T.copy(X, x)
            if form == "map":
                for i, j in T.Parallel(2 * UM, 2 * UN):
                    y[i, j] = x[i // 2, j // 2]
            else:  # the form that runs on ascend910b: the row index a serial loop's
                for r in T.serial(2 * UM):
                    for j in T.Parallel(2 * UN):
                        y[r, j] = x[r // 2, j // 2]
            T.copy(y, Y)

    return main


def _pad(form):
    @T.prim_func
    def main(X: T.Tensor((UM, UN), "float32"), Y: T.Tensor((UM + 2, UN + 2), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((UM + 2, UN + 2), "float32")
            if form == "window":
                T.clear(t)
                T.copy(X, t[1:UM + 1, 1:UN + 1])
            else:  # a window of X starting before it: zeros there (docs/language.md "Tails")
                T.copy(X[-1, -1], t)
            T.copy(t, Y)

    return main


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("kernel, ref", [(_upsample("rows"), lambda x: x.repeat(2, 0).repeat(2, 1)),
                                         (_pad("origin"), lambda x: np.pad(x, 1))], ids=["upsample_rows", "pad_origin"])
def test_upsample_and_pad_forms_that_run(kernel, ref, target):
    x = np.random.default_rng(7).standard_normal((UM, UN)).astype(np.float32)
    np.testing.assert_array_equal(run_on(kernel, target, [-1], x), ref(x))


def test_f7_f8_run_on_cpu():
    x = np.random.default_rng(7).standard_normal((UM, UN)).astype(np.float32)
    np.testing.assert_array_equal(run_on(_upsample("map"), "cpu", [-1], x), x.repeat(2, 0).repeat(2, 1))
    np.testing.assert_array_equal(run_on(_pad("window"), "cpu", [-1], x), np.pad(x, 1))


F7 = ("(fixed in session 33 by the lead) port33 F7: y[i, j] = x[i // 2, j // 2] (nearest upsampling) is 'Ascend gathers along the last dim', hint "
      "x[i, idx[i, j]]; the serial loop over rows that runs is not named")
F8 = ("(fixed in session 33 by the lead) port33 F8: zero padding by T.copy(X, t[1:M + 1, 1:N + 1]) is the misaligned-window error, hint 'whole rows', "
      "which cannot pad; a window of X with a negative origin (zeros outside) runs and is not named")


def test_f7_upsample_hint():
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_upsample("map"), target=TARGET, out_idx=[-1])
    assert "T.serial" in str(e.value), str(e.value)


def test_f8_pad_hint():
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_pad("window"), target=TARGET, out_idx=[-1])
    hint = str(e.value).split("hint:")[-1]
    assert re.search(r"negative|before the tensor|\[-1", hint), str(e.value)


# --------------------------------------------------------------------------------------------- F9: maps over GM
@T.prim_func
def _gm_map_with_let(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(8):
            x = X[i]
            Y[i] = T.exp(x) + x * 2.0


@T.prim_func
def _tile_map_with_let(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        xt = T.alloc_fragment((8,), "float32")
        yt = T.alloc_fragment((8,), "float32")
        T.copy(X, xt)
        for i in T.Parallel(8):
            x = xt[i]
            yt[i] = T.exp(x) + x * 2.0
        T.copy(yt, Y)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_map_with_a_let_on_tiles(target):
    x = np.linspace(-3, 3, 8).astype(np.float32)
    P.assert_close_f32(run_on(_tile_map_with_let, target, [-1], x), np.exp(x.astype(np.float64)) + 2.0 * x)


def test_f9_runs_on_cpu():
    x = np.linspace(-3, 3, 8).astype(np.float32)
    P.assert_close_f32(run_on(_gm_map_with_let, "cpu", [-1], x), np.exp(x.astype(np.float64)) + 2.0 * x)


# port33 F9 (fixed by h-gmmap33): the map over global tensors with a let was 'not a vector instruction: it contains
# a let' on ascend910b (the cause was the map on GM); stage_global_maps stages such maps, so it runs.
def test_f9_gm_map_with_a_let_runs_on_ascend():
    x = np.linspace(-3, 3, 8).astype(np.float32)
    P.assert_close_f32(run_on(_gm_map_with_let, TARGET, [-1], x), np.exp(x.astype(np.float64)) + 2.0 * x)


# --------------------------------------------------------------------------------------------- F10: maps over GM
@T.prim_func
def _add_in_gm(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
    with T.Kernel(T.ceildiv(128, 64)) as bx:  # docs/language.md's first kernel, as written there
        for i in T.Parallel(64):
            C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]


# port33 F10 (fixed by h-gmmap33): docs/language.md's first kernel, a map reading and writing global tensors, runs
# on ascend910b (stage_global_maps).
@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_f10_map_over_global_tensors(target):
    a = np.arange(128, dtype=np.float32)
    b = np.ones(128, np.float32)
    np.testing.assert_array_equal(run_on(_add_in_gm, target, [-1], a, b), a + 1)


# --------------------------------------------------------------------------------------------- F11: a per-row store in a 2-D map
def _row_means(form):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Mu: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            mu = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            if form == "2d":  # every j stores the same value
                for i, j in T.Parallel(M, N):
                    mu[i] = s[i] / N
            else:
                for i in T.Parallel(M):
                    mu[i] = s[i] / N
            T.copy(mu, Mu)

    return main


@pytest.mark.parametrize("target, form", [("cpu", "1d"), (TARGET, "1d")])
def test_row_means(target, form):
    x = np.random.default_rng(11).standard_normal((M, N)).astype(np.float32)
    P.assert_close_f32(run_on(_row_means(form), target, [-1], x), x.astype(np.float64).mean(1))


# port33 F11 (the hint fixed by h-gmmap33): `mu[i] = s[i] / N` in a 2-D map runs on cpu and is on ascend910b 'does
# not use every loop index'; the hint now names the 1-D map over i that runs (test_row_means).
# Since session 41 (h-selfread41) the one error of transform/independent_maps.h on both targets: every j stores mu[i].
def test_f11_per_row_store_in_a_2d_map():
    """The same located error on both targets; its hint names the 1-D map."""
    msgs = []
    for target in ("cpu", TARGET):
        with pytest.raises(tw.TilewrightError) as e:
            tw.compile(_row_means("2d"), target=target, out_idx=[-1])
        msgs.append(str(e.value))
        assert "does not use every loop index" in msgs[-1] and "T.Parallel(" in msgs[-1].split("hint:")[-1], msgs[-1]
    assert msgs[0] == msgs[1], msgs
