"""Session 38's portability hunt (h-port38, docs/testing.md "Session 38: port38"): more user kernel forms written for
cpu first (tests/python/port38_kernels.py) with only the target changed to ascend910b (simulator, checker on),
against float64 numpy / exact integers; the findings' minimal forms.
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
import port38_kernels as P  # noqa: E402
from port33_kernels import _erf  # noqa: E402


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed as message + hint; runs since session 40): an int32 comparison of a column of a 2-D tile in a 2-D map, the
# expert count of the aux-loss-free bias update T.where(ids[i, k] == e, 1.0, 0.0) (ids (Tn, K), k a serial loop's
# variable), was "'>>' by a per-element count: ShiftLeft/ShiftRight take one scalar count", hint "split longer
# formulas into tile ops": the user wrote no shift (legalize_vector's exact int32 comparison key, ids >> 8, computed
# per row). It became port34 F2's located "the per-row factor 'ids' is read down a column", whose hint (the column
# gathered into a 1-D tile) runs; since session 40 (h-math40) legalize_vector gathers the column itself.
def test_f1_int32_compare_of_a_column():
    P.check("aux_free_bias", "float32", (37, 2, 8), TARGET)
    P.check("aux_free_bias_col", "float32", (37, 2, 8), TARGET)


# F2 (fixed as hints; T.sin / T.cos fixed as functions in session 39): T.sin / T.cos (a snake activation, the diffusion
# timestep embedding) were "unknown function T.sin" with the hint "see the tilewright.language module". Functions people reach for that the language lacks
# now name what to write (frontend/core.py _MISSING_MATH); the formulas, checked here on both targets in one
# kernel (float32, edge values, infinities and NaN where the formula is meant for them).
# (name, the reference of the hinted formula, its inputs: "d" the data, "nz" |data| + 0.5, "all" data + inf / NaN,
# "inf" data + inf)
MISSING = [
    ("sinh", np.sinh, "d"), ("cosh", np.cosh, "d"), ("log1p", np.log1p, "nz"), ("expm1", np.expm1, "d"),
    ("log10", np.log10, "nz"), ("erfc", lambda X: 1 - _erf(X), "d"), ("softplus", lambda X: np.logaddexp(0, X), "d"),
    ("clamp", lambda X: np.clip(X, -1.0, 2.0), "all"), ("sign", np.sign, "inf"), ("trunc", np.trunc, "all"),
    ("round", lambda X: np.floor(X + 0.5), "d"), ("round_even", np.round, "d"),
    ("isnan", lambda X: np.isnan(X).astype(float), "all"), ("isinf", lambda X: np.isinf(X).astype(float), "all"),
]


def _missing(n):
    @T.prim_func
    def main(X: T.Tensor((3, n), "float32"), Y: T.Tensor((len(MISSING), n), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((3, n), "float32")
            y = T.alloc_fragment((len(MISSING), n), "float32")
            T.copy(X, x)
            for i in T.Parallel(n):
                y[0, i] = (T.exp(x[0, i]) - T.exp(-x[0, i])) * 0.5
                y[1, i] = (T.exp(x[0, i]) + T.exp(-x[0, i])) * 0.5
                y[2, i] = T.log(1.0 + x[1, i])
                y[3, i] = T.exp(x[0, i]) - 1.0
                y[4, i] = T.log2(x[1, i]) * 0.3010299956639812
                y[5, i] = 1.0 - T.erf(x[0, i])
                y[6, i] = T.max(x[0, i], 0.0) + T.log(1.0 + T.exp(-T.abs(x[0, i])))
                y[7, i] = T.min(T.max(x[2, i], -1.0), 2.0)
                y[8, i] = T.where(x[2, i] > 0, 1.0, T.where(x[2, i] < 0, -1.0, 0.0))
                y[9, i] = T.where(x[2, i] >= 0, T.floor(x[2, i]), T.ceil(x[2, i]))
                y[10, i] = T.floor(x[0, i] + 0.5)
                y[11, i] = (x[0, i] + 12582912.0) - 12582912.0
                y[12, i] = T.where(x[2, i] != x[2, i], 1.0, 0.0)
                y[13, i] = T.where(T.abs(x[2, i]) == T.infinity("float32"), 1.0, 0.0)
            T.copy(y, Y)
    return main


def test_f2_missing_functions_name_what_to_write():
    for name, hint in (("tan", r"T\.sin\(x\) / T\.cos\(x\)"), ("atan2", "no inverse trigonometric"),
                       ("log1p", r"write T\.log1p\(x\) as T\.log\(1\.0 \+ x\)"),
                       ("clamp", r"T\.min\(T\.max\(x, lo\), hi\)"), ("fmod", r"r = x % y"),
                       ("cbrt", r"see the tilewright\.language module")):
        with pytest.raises(tw.TilewrightError, match=rf"unknown function T\.{name}(?s:.*)hint: .*{hint}"):
            @T.prim_func
            def k(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
                with T.Kernel(1) as bx:
                    for i in T.Parallel(4):
                        if name == "tan":
                            Y[i] = T.tan(X[i])
                        elif name == "atan2":
                            Y[i] = T.atan2(X[i], X[i])
                        elif name == "log1p":
                            Y[i] = T.log1p(X[i])
                        elif name == "clamp":
                            Y[i] = T.clamp(X[i], 0.0, 1.0)
                        elif name == "fmod":
                            Y[i] = T.fmod(X[i], 2.0)
                        else:
                            Y[i] = T.cbrt(X[i])
    # T.sin / T.cos are functions since session 39 (h-math39): snake and the timestep embedding run (AGREE below)


def test_f2_the_hinted_formulas_run():
    rng = np.random.default_rng(38)
    d = np.concatenate([rng.standard_normal(13) * 3, [0.0, -0.0, 2.5, -2.5, 0.5, -1.5, 1e-8, 30.0, -30.0]])
    n = d.size + 3
    x = np.stack([np.append(d, [1.0, -1.0, 0.25]), np.append(np.abs(d) + 0.5, [1.0, 2.0, 3.0]),
                  np.append(d, [np.inf, -np.inf, np.nan])]).astype(np.float32)
    X = x.astype(np.float64)
    rows = {"d": X[0], "nz": X[1], "all": X[2], "inf": np.append(X[2][:-1], 0.0)}
    for t in ("cpu", TARGET):
        k = tw.compile(_missing(n), target=t, out_idx=[-1])
        got = k(x) if t == "cpu" else k.profile(x).outputs
        for r, (name, f, inp) in enumerate(MISSING):
            ref = f(rows[inp])
            g = got[r] if inp != "inf" else np.append(got[r][:-1], 0.0)  # sign's formula gives 0 at NaN
            np.testing.assert_allclose(g, ref, rtol=2e-6, atol=2e-6, equal_nan=True, err_msg=f"{t} {name}")


# F3 (fixed): torch.gather's index is int64 (torch.long): a (bm, K) int64 index tile in a 2-D map,
# x[i, T.where(ix[i, k] < 0, ix[i, k] + N, ix[i, k])], was "T.where selecting int64 values ...: Select takes float16
# or float32" on ascend910b, hint "select float32 values (T.cast the result to the integer type afterwards)", whose
# form is "conversion from int64 to float32: no Cast"; T.copy(ix, ix32) was "conversion from int64 to int32", its
# hint naming T.copy(lab, lab32) (1-D labels only). legalize_vector's narrow_int64_bounds now converts an int64
# value that reads two map indices too (the scalar unit, into a (rows, cols) int32 tile before the map).
def _gather64(M, N, K, form, bm=4):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Ix: T.Tensor((M, K), "int64"), Y: T.Tensor((M, K), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            ix = T.alloc_fragment((bm, K), "int64")
            i32 = T.alloc_fragment((bm, K), "int32")
            y = T.alloc_fragment((bm, K), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Ix[bx * bm, 0], ix)
            if form == "mod":
                for i, k in T.Parallel(bm, K):
                    y[i, k] = x[i, ix[i, k] % N]
            elif form == "copy":
                T.copy(ix, i32)
                for i, k in T.Parallel(bm, K):
                    y[i, k] = x[i, T.where(i32[i, k] < 0, i32[i, k] + N, i32[i, k])]
            else:
                for i, k in T.Parallel(bm, K):
                    y[i, k] = x[i, T.where(ix[i, k] < 0, ix[i, k] + N, ix[i, k])]
            T.copy(y, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("form", ["where", "mod", "copy"])
def test_f3_int64_index_tile_in_a_2d_map(form):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((13, 37)).astype(np.float32)
    ix = rng.integers(-37, 37, (13, 5)).astype(np.int64)
    ix[0, :2] = (-37, 36)
    p = tw.compile(_gather64(13, 37, 5, form), target=TARGET, out_idx=[-1]).profile(x, ix)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(p.outputs, np.take_along_axis(x, ix % 37, 1))
    if form == "where":
        P.check("gather_neg_i64", "bfloat16", (1, 1, 1), TARGET)


# F4 (fixed): a gemm both of whose operands the vector code writes, the accumulator read by vector code too (CLIP's
# logits: rows of X and W normalised in float32, rounded into the operands), was "gemm xn x wn -> acc: operands in
# shared / shared / fragment, expected L1 / L1 / L0C", hint "internal: infer_scope and split_cube_vector place gemm
# operands": with no Cube-only tile split_cube_vector took the kernel for a vector-only one. (One such operand ran.)
def _both_vector_operands(M, N, K):
    @T.prim_func
    def main(X: T.Tensor((M, K), "float16"), W: T.Tensor((N, K), "float16"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            xf = T.alloc_fragment((M, K), "float32")
            wf = T.alloc_fragment((N, K), "float32")
            xn = T.alloc_shared((M, K), "float16")
            wn = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(X, xf)
            T.copy(W, wf)
            for i, k in T.Parallel(M, K):
                xn[i, k] = T.cast(xf[i, k] * 0.5, "float16")
            for i, k in T.Parallel(N, K):
                wn[i, k] = T.cast(wf[i, k] + 1.0, "float16")
            T.clear(acc)
            T.gemm(xn, wn, acc, transpose_B=True)
            for i, j in T.Parallel(M, N):
                acc[i, j] = T.max(acc[i, j], 0.0)
            T.copy(acc, Y)
    return main


def test_f4_gemm_of_two_vector_written_operands():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 32)).astype(np.float16)
    w = rng.standard_normal((32, 32)).astype(np.float16)
    ref = np.maximum((x.astype(np.float64) * 0.5) @ (w.astype(np.float64) + 1.0).T, 0)
    p = tw.compile(_both_vector_operands(16, 32, 32), target=TARGET, out_idx=[-1]).profile(x, w)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_allclose(p.outputs, ref, rtol=2e-3, atol=2e-2)
    P.check("clip_logits_map", "bfloat16", (1, 1, 16, 16), TARGET)


# --------------------------------------------------------------------------------------------- the kernels
# (a) a selection, one per construct, on ascend910b at its first dtype and its first shape (the probe,
# `python tests/python/port38_kernels.py`, runs every kernel, dtype and shape on both targets)
AGREE = ["band_part", "stochastic_round", "margin_ranking", "welford", "safe_softmax", "eta_sampling", "inverse_cdf",
         "merge_states", "varlen_cu_seqlens", "chunked_local", "gqa_6_2", "group_limited_topk", "mx_shared_exp",
         "int4_sym_pack", "delta_rule_step", "rwkv4_wkv", "gather_neg", "channel_shuffle", "kth_value",
         "argsort_onehot", "seg_cumsum", "lora_linear", "mamba2_segsum", "welford_stream", "int4_sym_pack_u8",
         "clip_logits",  # clip_logits' let sc = T.exp(Ls[0]), used only in maps, runs on the Vector core (h-legalize38)
         "snake",  # T.sin (session 39, h-math39)
         # a per-row factor read down a column (timestep_emb's t = z[i, 0], sa[i, kb], h[i, k]) is gathered by
         # legalize_vector into a 1-D tile (session 40, h-math40; they were located errors, the _col forms their hints)
         "timestep_emb", "blockscaled_gemm", "blockscaled_gemm_col", "no_repeat_bigram", "no_repeat_bigram_col"]


@pytest.mark.parametrize("name", AGREE)
def test_runs_on_ascend910b(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], TARGET)


# (b) ascend910b's located error (the kernel's line and a hint); the form the hint names runs right
LOCATED = [
    ("block_scale_2d", "float16", (37, 45, 16), r"element store into tensor 'S' outside a T\.Parallel map",
     r"store into a tile .* and T\.copy the tile", "block_scale_2d_tile"),
    ("argsort_scatter", "float32", (13, 11, 1),
     r"stores into 'y' at the data-dependent index rk\[i_1, j_1\] \(a scatter\)", r"gather instead", "argsort_onehot"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port38_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)
