"""examples/moe.py: top-k gating, the counting sort by expert, the grouped GEMM and the combine,
against a float64 reference: one token, token counts that are not multiples of the row block,
top-1 and top-k = every expert, experts that get no token, tied router scores (the lower expert id
wins), fp32/bf16/fp16 activations."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import moe  # noqa: E402


@pytest.mark.parametrize("tokens,hidden,ffn,experts,top_k", [
    (100, 96, 80, 8, 2), (1, 64, 64, 4, 2), (37, 65, 33, 3, 1), (20, 32, 48, 4, 4), (70, 128, 64, 16, 3)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_moe_matches_reference(tokens, hidden, ffn, experts, top_k, dtype):
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=tokens)
    out, ids, weights = moe.moe(x, logits, w, top_k)
    ref, ref_ids, ref_w = moe.reference(x, logits, w, top_k)
    np.testing.assert_array_equal(ids, ref_ids)
    assert_close(weights, ref_w, atol=1e-6, rtol=1e-5)
    assert_close(out, ref)


def test_experts_without_tokens_and_ties():
    tokens, experts = 40, 8
    x, logits, w = moe.inputs(tokens, 32, 32, experts, seed=5)
    logits[:, 4:] -= 50.0          # experts 4..7 never chosen
    logits[::3, 1] = logits[::3, 0]  # ties between experts 0 and 1 on every third token
    out, ids, weights = moe.moe(x, logits, w, 2)
    ref, ref_ids, ref_w = moe.reference(x, logits, w, 2)
    np.testing.assert_array_equal(ids, ref_ids)
    assert (ids < 4).all()
    assert_close(out, ref)


@pytest.mark.parametrize("tokens,experts,top_k,block_M", [(100, 8, 2, 32), (1, 4, 1, 16), (33, 5, 5, 8)])
def test_align_by_expert_is_a_padded_counting_sort(tokens, experts, top_k, block_M):
    rng = np.random.default_rng(tokens)
    ids = np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)]).astype(np.int32)
    rows, block_expert, slot = moe.align_by_expert(tokens, experts, top_k, block_M)(ids)
    assert rows.shape[0] == moe.padded_rows(tokens, experts, top_k, block_M)
    # every (token, k) pair sits at its slot, in its expert's run, in token order within the run
    for t in range(tokens):
        for k in range(top_k):
            s = slot[t, k]
            assert rows[s] == t and block_expert[s // block_M] == ids[t, k]
    used = set(slot.ravel().tolist())
    assert len(used) == tokens * top_k
    assert all(rows[s] == tokens for s in range(rows.shape[0]) if s not in used)  # padding
    runs = [e for e in block_expert.tolist() if e >= 0]
    assert runs == sorted(runs)
    counts = np.bincount(ids.ravel(), minlength=experts)
    assert [runs.count(e) for e in range(experts)] == [-(-c // block_M) for c in counts]


@pytest.mark.parametrize("tokens,experts,top_k,block_M", [(100, 8, 2, 32), (1, 4, 1, 16), (33, 5, 5, 8)])
def test_align_by_expert_on_ascend_matches_cpu(tokens, experts, top_k, block_M):
    """The counting sort on ascend910b: scalar reads and element stores of UB tiles (GetValue /
    SetValue on the Vector core's scalar unit), bit for bit the cpu result, no checker report."""
    rng = np.random.default_rng(tokens)
    ids = np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)]).astype(np.int32)
    cpu = moe.align_by_expert(tokens, experts, top_k, block_M)(ids)
    k = moe.align_by_expert(tokens, experts, top_k, block_M, target="ascend910b")
    prof = k.profile(ids)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    for got, want in zip(prof.outputs, cpu):
        np.testing.assert_array_equal(got, want)


def test_on_ascend_combine_matches_cpu():
    tokens, ffn, top_k = 20, 48, 2
    x, logits, w = moe.inputs(tokens, 32, ffn, 4, seed=2)
    _, ids, weights = moe.moe(x, logits, w, top_k, block_M=16)
    rows, _, slot = moe.align_by_expert(tokens, 4, top_k, 16)(ids)
    y = np.random.default_rng(3).standard_normal((rows.shape[0], ffn)).astype(np.float32)
    cpu = moe.combine(tokens, ffn, top_k, rows.shape[0])(y, slot, weights)
    npu = moe.combine(tokens, ffn, top_k, rows.shape[0], target="ascend910b")(y, slot, weights)
    assert_close(npu, cpu)


@pytest.mark.parametrize("tokens,experts,top_k", [(100, 8, 2), (1, 4, 2), (37, 3, 1), (20, 4, 4), (70, 16, 3)])
def test_topk_gating_on_ascend_matches_cpu_and_float64(tokens, experts, top_k):
    """The gating kernel unchanged on ascend910b (the expert index as a value, int32 T.where on the
    probabilities, an int32 row min): ids exact against the float64 reference and cpu, weights
    within float32 rounding; the simulator's checker reports nothing."""
    from ascend_util import run_checked
    x, logits, w = moe.inputs(tokens, 32, 32, experts, seed=tokens)
    if tokens > 1:
        logits[::3, 1] = logits[::3, 0]  # ties: the lower expert id first
    _, ref_ids, ref_w = moe.reference(x, logits, w, top_k)
    ids_cpu, w_cpu = moe.topk_gating(tokens, experts, top_k)(logits)
    ids, wts = run_checked(moe.topk_gating(tokens, experts, top_k, target="ascend910b"), logits)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(ids, ids_cpu)
    assert_close(wts, ref_w, atol=1e-6, rtol=1e-5)
    assert_close(wts, w_cpu, atol=1e-6, rtol=1e-5)



@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
@pytest.mark.parametrize("tokens,ffn,experts,top_k,dtype", [
    (20, 48, 4, 2, "float32"), (1, 300, 3, 3, "float32"), (37, 65, 5, 4, "float16"), (9, 33, 4, 2, "bfloat16")])
def test_scatter_add_combine_matches_the_gather(target, tokens, ffn, experts, top_k, dtype):
    """combine_atomic (program (n block, t, k) adds w * Y[slot] into out[t] with T.atomic_add) against
    the deterministic gather combine: the k adds into a row come in any order, so float32 agrees to
    rounding (atol 1e-6, rtol 1e-5) and 16-bit outputs to one rounding per add."""
    x, logits, w = moe.inputs(tokens, 32, ffn, experts, seed=tokens)
    _, ids, weights = moe.moe(x, logits, w, top_k, block_M=16)
    rows, _, slot = moe.align_by_expert(tokens, experts, top_k, 16)(ids)
    y = np.random.default_rng(3).standard_normal((rows.shape[0], ffn)).astype(np.float32)
    gather = moe.combine(tokens, ffn, top_k, rows.shape[0], dtype=dtype)(y, slot, weights)
    out = np.zeros((tokens, ffn), gather.dtype)
    k = moe.combine_atomic(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target)
    if target == "cpu":
        k(y, slot, weights, out)
    else:
        prof = k.profile(y, slot, weights, out)
        assert prof["reports"] == [], "\n".join(prof["reports"])
    ref = sum(weights[:, kk:kk + 1].astype(np.float64) * y[slot[:, kk]].astype(np.float64) for kk in range(top_k))
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == "float32" else dict(atol=1e-2 * top_k, rtol=1e-2 * top_k)
    assert_close(out, ref, **tol)
    assert_close(out, gather, **tol)


def test_moe_with_the_scatter_add_combine():
    x, logits, w = moe.inputs(40, 64, 48, 6, seed=8)
    out, _, _ = moe.moe(x, logits, w, 2, atomic_combine=True)
    ref, _, _ = moe.reference(x, logits, w, 2)
    assert_close(out, ref)
