"""Session 35's portability hunt (h-port35, docs/testing.md "Session 35: port35"): 73 more user kernel forms written
for cpu first (tests/python/port35_kernels.py: cross / soft-capped / flash / T5-bias / ALiBi / strided / key-padding
attention, channels-last GroupNorm and InstanceNorm, BatchNorm training, weight-norm, (1 + w) RMSNorm, QK-norm,
GeGLU / ReGLU halves, ELU / SELU / QuickGELU / softplus(beta), tile-loop hardswish / Mish, KL / focal / cosine /
MSE / Huber / SmoothL1 / BCE(pos_weight) losses, pooling, im2col and conv2d by gemm, index_select / gather /
index_add / scatter-max / embedding backward, int8 quantization by round-half-even, fp16 <-> bf16 casts, Gumbel-max,
min-p, speculative decoding, paged reshape_and_cache and copy_blocks, chunked linear attention / RetNet, Adam /
AdamW / SGD / clip-grad-norm, mixed-dtype gemm epilogues) with only the target changed to ascend910b (simulator,
checker on), against float64 numpy / exact integers.

- (a) kernels: one per construct on ascend910b (in-process, cheap), at its first dtype and every shape; one on cpu
  (a g++ compile). `python tests/python/port35_kernels.py` runs every kernel, dtype and shape on both targets.
- (b) kernels: ascend910b's located error (the kernel's line and a hint); the form the hint names runs right.
- Findings: F1 and F3 fixed on h-port35, F2 on h-fixpipe36 (session 36), tested as they now behave.
"""
import pathlib
import re
import sys

import pytest

import tilewright as tw

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port35_kernels as P  # noqa: E402
from ascend_util import TARGET  # noqa: E402

# (a): a selection, one per construct (the probe runs all of them)
AGREE = ["cross_attn", "softcap_prefill", "flash_cross_attn", "t5_rel_bias_softmax", "alibi_bias_nonpow2",
         "strided_mask_softmax", "key_padding_softmax", "group_norm_nhwc", "batch_norm_train", "qk_norm",
         "geglu_split", "selu", "softplus_beta2", "mish_tileloop", "kl_div", "focal_loss", "cosine_sim_dim0",
         "huber_sum", "max_pool1d", "global_avg_pool", "conv2d_im2col_gemm", "index_select_dim1", "index_add_rows",
         "scatter_max_ties", "embedding_bwd_atomic", "quant_int8_per_channel_rne", "quant_int8_per_token_rne",
         "cast_bf16_to_fp16", "gumbel_max_uniform", "min_p_logits", "spec_decode_residual",
         "reshape_and_cache_paged", "copy_blocks", "linear_attn_state_fragment", "retnet_state",
         "adamw", "sgd_nesterov", "clip_grad_scale", "gemm_requant_int8",
         "gemm_swiglu_bf16"]


def _ascend_cases():
    return [pytest.param(name, P.CASES[name][1][0], shape, id=f"{name}-{'x'.join(map(str, shape))}")
            for name in AGREE for shape in P.CASES[name][2]]


@pytest.mark.parametrize("name, dt, shape", _ascend_cases())
def test_runs_on_ascend910b(name, dt, shape):
    P.check(name, dt, shape, TARGET)


# cpu: a gather / scatter with repeated indices (one g++ compile; the probe runs the rest)
def test_runs_on_cpu():
    P.check("scatter_max_ties", "float32", (7, 37, 13), "cpu")


# --------------------------------------------------------------------------------------------- (b) located errors
# name, dtype, shape, what the error says, what its hint says, the kernel that does what the hint says
LOCATED = [
    ("max_pool2d_map", "float32", (3, 13, 37), r"reads 'x' at the index x\[i \* 2, j \* 2\]",
     r"for r in T\.serial\(R\): for j in T\.Parallel\(C\)", "max_pool2d_rows"),
    ("gather_dim0", "bfloat16", (13, 37, 5), r"reads 'x' at the index x\[ix\[k, j\], j\]",
     r"for r in T\.serial\(R\): for j in T\.Parallel\(C\)", "gather_dim0_rows"),
    ("gather_dim0_gm", "int32", (13, 37, 5), r"data-dependent or strided read of a global tensor",
     r"copy the rows it reads into a tile first", "gather_dim0_rows"),
    ("avg_pool2d_pad", "float16", (3, 13, 37), r"reads or writes 'x' at an element which starts 4 bytes into a 32 B",
     r"copy the shifted columns from global memory into a tile of their own", "avg_pool2d_pad_copies"),
    ("spec_decode_accept", "float32", (3, 5, 37), r"element store into tensor 'N' outside a T\.Parallel map",
     r"store into a tile .* and T\.copy the tile to the tensor", "spec_decode_accept_tile"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port35_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed): the 3x3 average pool's taps x[i, j + 1] of a (H + 2, W + 2) tile at H = W = 1: the extent-1 loops
# became `let i = 0` / `let j = 0`, and the compiler left an offset reading a let to the checker, so the kernel
# compiled (the printer would emit it) and the simulator reported "misaligned: src1 address 4 in UB" at run time,
# with no hint; at every other size it is the located compile-time error. A let bound to a constant is now that
# constant: the same located error and hint at 1 x 1, and the hint's form runs.
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_f1_unit_image_misaligned_tap_is_located(dt):
    with pytest.raises(tw.TilewrightError, match=r"reads or writes 'x' at an element which starts 4 bytes into a "
                                                 r"32 B block of UB; on Ascend") as e:
        P.check("avg_pool2d_pad", dt, (1, 1, 1), TARGET)
    assert "port35_kernels.py:" in str(e.value) and "copy the shifted columns" in str(e.value)
    P.check("avg_pool2d_pad_copies", dt, (1, 1, 1), TARGET)


# F2 (fixed, medium: an error whose hint did not lead to a form that runs): chunked causal linear attention / RetNet
# with the feature map (phi = elu + 1) or the decays computed in the kernel (q k^T masked within a chunk, + q S from
# the earlier chunks' state, S += k^T v, the gemm operands rounded to 16 bits) was "more than 5 hand-offs between the
# Cube and the vector code"; h-port35 rewrote the hint (the forms linear_attn_state_fragment / retnet_state in
# AGREE run), h-handoff35 let hand-offs take a pair of flag ids in turn, and the form as written then stopped at
# "the accumulator 'st' is read before any gemm wrote it" (T.copy(st, stsh) of the accumulator cleared before the
# chunk loop). h-fixpipe36: such a clear runs where it stands (a gemm of zero tiles), so the form as written runs
# (test_fixpipe36_s36.py: both dtypes, more shapes, cpu == ascend910b).
@pytest.mark.parametrize("name", ["linear_attn_chunked", "retnet_chunked"])
def test_f2_chunked_linear_attention(name):
    P.check(name, "float16", (2, 37, 16), TARGET)


# F3 (fixed): in that form, zeroing the state's shared tile by T.clear(stsh) before the chunk loop (the loop's vector
# code writes stsh) put the clear on the Cube (L1) and built a hand-off from L1 to the vector side for the loop's
# entry; the verifier then said "there is no data path L1 -> global on the Ascend 910B" at the loop, with a hint
# listing the chip's data paths. split_cube_vector now says which tile and why, with the hint that runs (a cleared
# fragment copied in); one chunk (no loop-carried value) runs as before. Session 36 (h-fixpipe36): at D = 16 the
# copy T.copy(st, stsh) is whole 16 x 16 fractals, so it stays on the Cube (Fixpipe L0C -> L1) and no vector code
# writes stsh: the form runs; at D = 24 (not whole fractals) the copy is still vector code, and the error stands.
def test_f3_cube_cleared_operand_in_a_vector_loop():
    with pytest.raises(tw.TilewrightError, match=r"tile 'stsh' holds its value on the Cube \(a gemm operand in L1") as e:
        P.check("linear_attn_state_clear", "float16", (2, 37, 24), TARGET)
    assert "port35_kernels.py:" in str(e.value) and "T.clear a float32 fragment and T.copy it into 'stsh'" in str(e.value)
    P.check("linear_attn_state_fragment", "float16", (2, 37, 24), TARGET)
    P.check("linear_attn_state_clear", "float16", (2, 37, 16), TARGET)
    P.check("linear_attn_state_clear", "float16", (1, 1, 16), TARGET)
