"""Session 34's portability hunt (h-port34, docs/testing.md "Session 34: port34"): what users port after the first
hour, written for cpu first (tests/python/port34_kernels.py: fused residual + RMSNorm, norm / softmax / activation
backwards, cross-entropy with label smoothing and ignore_index, top-p / min-p pieces, repetition penalty, KV-cache
int8, AWQ / GPTQ int4 dequant, Mamba's causal conv and state step, RoPE at int64 position ids, YaRN angles,
embedding bags, segment sums, masks, scans, histograms, layout ops, reductions to scalars, mixed dtypes) with only
the target changed to ascend910b (simulator, checker on), against float64 numpy / exact integers.

- (a) kernels: a representative selection on ascend910b (in-process, cheap) at every dtype and shape; two on cpu
  (a g++ compile each). `python tests/python/port34_kernels.py` runs every kernel, dtype and shape on both targets.
- (b) kernels: ascend910b's located error (the kernel's line and a hint); the form the hint names runs right.
- Findings: F1-F5, fixed on this branch, tested as they now behave; F6 fixed by h-mul35 (session 35).
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port34_kernels as P  # noqa: E402
from ascend_util import TARGET, run_checked  # noqa: E402

# (a): a selection, one per construct (the probe runs all 86 kernels)
AGREE = ["add_rmsnorm", "layer_norm_bwd", "layer_norm_dw", "log_softmax_bwd", "gelu_bwd", "swiglu_bwd",
         "cross_entropy_ls_i32", "cross_entropy_ls_i64_to_i32", "cross_entropy_bwd", "logsumexp_dim1", "top_p_count",
         "min_p", "repetition_penalty_scatter", "repetition_penalty_mask", "kv_quant_int8_dynamic",
         "awq_int4_dequant", "gptq_int4_dequant_rows", "causal_conv1d_copies_wcol", "conv_state_update", "ssm_step",
         "rope_gptj", "rope_halves_i64", "yarn_angles", "embedding_bag_mean", "segment_sum_offsets",
         "index_add_atomic", "gather_dim1", "masked_fill_uint8", "triu_diag1", "dropout_uint8", "prefix_sum_2d",
         "histc", "transpose_3d_elements", "permute_0213", "concat_gm", "concat_map", "split_last", "pad_origin",
         "slice_cols_step2", "slice_rows_step2", "sum_all_atomic", "amax_all", "linear_f16_bf16out",
         "layer_norm_f16_bf16out", "dropout_tileloop", "tril_tileloop", "rmsnorm_tileloop", "reshape_and_cache_i64",
         "paged_kv_gather", "ssm_scan", "rmsnorm_chunked", "ce_argmax_chunked", "document_mask_softmax"]


def _ascend_cases():
    return [pytest.param(name, dt, shape, id=f"{name}-{dt}-{'x'.join(map(str, shape))}")
            for name in AGREE for dt in P.CASES[name][1] for shape in P.CASES[name][2]]


@pytest.mark.parametrize("name, dt, shape", _ascend_cases())
def test_runs_on_ascend910b(name, dt, shape):
    P.check(name, dt, shape, TARGET)


# cpu: F1's kernel and a gather / scatter one (a g++ compile each; the probe runs the rest)
@pytest.mark.parametrize("name", ["top_p_count", "repetition_penalty_scatter"])
def test_runs_on_cpu(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], "cpu")


# --------------------------------------------------------------------------------------------- (b) located errors
# name, dtype, shape, what the error says, what its hint says, the kernel that does what the hint says
LOCATED = [
    ("cross_entropy_ls_i64", "float32", (13, 37), r"conversion from int64 to float32", r"T\.copy\(lab, lab32\)",
     "cross_entropy_ls_i64_to_i32"),
    ("rope_pos_ids_i64", "float16", (5, 3, 16, 11), r"writes 'y' at an element which starts 16 bytes into a 32 B block",
     "compute those columns in a tile of their own and copy it to global memory", "rope_halves_i64"),
    ("causal_conv1d_shift", "float32", (2, 9, 37, 4), r"starts 4 bytes into a 32 B block of UB when k = 1",
     "copy the shifted columns", "causal_conv1d_copies"),
    # (port34 F2, the tap's weights w[i, k] read as a per-row factor in the copies form, was a located error whose
    # hint, causal_conv1d_copies_wcol, ran; since session 40 (h-math40) legalize_vector gathers the column itself)
    # port34 F3 (fixed): GPTQ's q[i // 8, j] in a 2-D map
    ("gptq_int4_dequant", "bfloat16", (48, 40, 16), r"reads 'q' at a row computed from the map's row index \(i // 8\)",
     r"for i in T\.serial\(R\): for j in T\.Parallel\(C\)", "gptq_int4_dequant_rows"),
    ("transpose_3d", "float16", (2, 13, 37), r"writes 'y' transposed", r"for i in T\.serial\(R\): for j in T\.serial",
     "transpose_3d_elements"),
    ("window_mask_softmax", "float16", (13,), r"T\.where condition abs\(.*\) <= 3: not affine", r"joined with 'and'",
     "window_mask_softmax_and"),
    ("flip_dim1", "bfloat16", (2, 13, 37), r"reads 'x' at a row computed from the map's row index \(12 - i\)",
     r"for i in T\.serial\(R\): for j in T\.Parallel\(C\)", "flip_dim1_rows"),
    ("pow_tiles", "float32", (13, 37), r"T\.pow with exponent y\[i, j\] is not supported", r"T\.exp\(y \* T\.log\(x\)\)",
     "pow_tiles_exp_log"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port34_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed): T.where(data condition or / and index condition, ...) crashed ascend910b's compiler (a segfault:
# legalize_vector's index_mask kept a reference into the node list that materialize grew)
@tw.jit(out_idx=[-1])
def _data_and_index(M, N, dt, op):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((M, N), dt)
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                if op == "or":
                    y[i, j] = T.where(x[i, j] < 0.5 or j == 0, 1, 0)
                else:
                    y[i, j] = T.where(x[i, j] < 0.5 and j > 2, 1, 0)
            T.copy(y, Y)

    return main


@pytest.mark.parametrize("op", ["or", "and"])
@pytest.mark.parametrize("dt", ["int32", "float32"])
def test_f1_data_and_index_condition(op, dt):
    M, N = 5, 11
    x = np.random.default_rng(1).random((M, N)).astype(np.float32)
    j = np.arange(N)[None, :]
    ref = ((x < 0.5) | (j == 0)) if op == "or" else ((x < 0.5) & (j > 2))
    out = run_checked(_data_and_index(M, N, dt, op, target=TARGET), x)
    np.testing.assert_array_equal(out, ref.astype(out.dtype))


# F4 (fixed): a tile copied into a window of a wider tile at a column off the 32 B grid (torch.cat along the last
# dim: T.copy(b, o[:, N1:N1 + N2])) was "this T.Parallel map reads or writes 'o' ...", though the statement is a
# T.copy, with a hint about reading shifted columns, which cannot build the concatenated tile. A misaligned
# destination's error now names the copy too, and its hint the forms that run: each tile copied to its columns of
# the output (concat_gm), or a map selecting by the column (concat_map).
def test_f4_concat_window_hint():
    with pytest.raises(tw.TilewrightError, match=r"map \(or T\.copy between tiles\) writes 'o' at an element which "
                                                 r"starts 20 bytes") as e:
        P.check("concat_tile", "float32", (13, 37, 5), TARGET)
    assert re.search(r"copy it to global memory at their column.*selects by the column", str(e.value)), str(e.value)
    for alt in ("concat_gm", "concat_map"):
        P.check(alt, "float32", (13, 37, 5), TARGET)


# F5 (fixed): a tile-loop nest that is an element-wise map ran as one at N = 37, but with a (bm, 1) tile (N = 1)
# simplify made the j loop of extent 1 a `let j = 0` before serial_maps, the nest stayed serial and the rsqrt was
# "element store into tile 'acc' computes rsqrt on the scalar unit", whose hint (a nest of its own) it already was;
# serial_maps reads such lets heading the nest's body as the loops they were.
@pytest.mark.parametrize("shape", [(1, 1), (2, 1)])
def test_f5_tileloop_map_with_unit_inner_extent(shape):
    P.check("rmsnorm_tileloop", "float32", shape, TARGET)


# F6 (fixed by h-mul35): an in-kernel hash RNG for a dropout mask, `h[i, j] = idx * 1103515245 + seed` stored into
# an int32 tile, is well defined in the language (int32 arithmetic wraps modulo 2^32 on store; cpu runs it); every
# ascend910b run was the simulator's `int32 overflow` report at the Muls. The wrapped product (and the sum with it)
# is computed modulo 2^32 from 16-bit pieces whose products fit int32 (docs/ascend.md "int32 overflow").
def test_f6_hash_dropout():
    P.check("hash_dropout", "float32", (13, 37), TARGET)
