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


def grouped_reference(x, w, rows, block_expert, block_M):
    """float64 grouped GEMM: Y[s] = x[rows[s]] @ w[expert of s's block] (0 for padding rows);
    also the mask of the rows a kernel writes (blocks with an expert)."""
    tokens = x.shape[0]
    ref = np.zeros((rows.shape[0], w.shape[2]))
    written = np.zeros(rows.shape[0], bool)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for s, t in enumerate(rows.tolist()):
        e = int(block_expert[s // block_M])
        if e < 0:
            continue
        written[s] = True
        if t < tokens:
            ref[s] = x64[t] @ w64[e]
    return ref, written


# grouped_gemm unchanged on ascend910b: each gathered row is one Nd2Nz DataCopy into row r of the L1
# tile, each padding row one InitConstValue of that row. Tails in K (hidden 80, 65) and N (ffn 48,
# 33), one token, experts that get no token, top-k = every expert.
@pytest.mark.parametrize("tokens,hidden,ffn,experts,top_k,block_M,dtype", [
    (20, 64, 64, 4, 2, 16, "float16"), (37, 80, 48, 3, 1, 16, "float16"), (1, 64, 64, 4, 2, 16, "float16"),
    (20, 32, 48, 4, 4, 32, "float16"), (33, 65, 33, 5, 2, 16, "bfloat16"), (24, 128, 64, 4, 2, 16, "bfloat16"),
    (20, 64, 48, 4, 2, 16, "float32")])
def test_grouped_gemm_on_ascend_matches_cpu_and_float64(tokens, hidden, ffn, experts, top_k, block_M, dtype):
    from ascend_util import run_checked
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=tokens + hidden)
    if experts >= 4 and top_k < experts:
        logits[:, experts // 2:] -= 50.0  # the upper half of the experts get no token
    ids, _ = moe.topk_gating(tokens, experts, top_k)(logits)
    rows, block_expert, _ = moe.align_by_expert(tokens, experts, top_k, block_M)(ids)
    ref, written = grouped_reference(x, w, rows, block_expert, block_M)
    assert written.any()
    cpu = moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, dtype=dtype)(x, w, rows, block_expert)
    npu_k = moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, dtype=dtype, target="ascend910b")
    npu = run_checked(npu_k, x, w, rows, block_expert)
    assert_close(npu[written], ref[written], atol=1e-5, rtol=1e-5)
    assert_close(npu[written], cpu[written], atol=1e-5, rtol=1e-5)


# The serving form (bench/ascend.py's MoE case): gather_rows permutes the tokens into the sorted,
# padded order once, then grouped_gemm_sorted reads each row block as one tile (T.Pipelined K loop).
@pytest.mark.parametrize("tokens,hidden,ffn,experts,top_k,blocks,dtype,out_dtype", [
    (20, 64, 64, 4, 2, (16, 32, 32), "float16", "float32"), (37, 80, 48, 3, 1, (16, 32, 32), "float16", "float32"),
    (1, 64, 64, 4, 2, (16, 64, 64), "float16", "float16"), (33, 65, 33, 5, 2, (16, 32, 32), "bfloat16", "float32"),
    (50, 128, 96, 8, 2, (32, 64, 32), "float16", "float16"), (7, 64, 48, 4, 1, (16, 32, 32), "float32", "float32"),
    (129, 96, 80, 8, 2, (32, 64, 32), "float16", "float32"), (129, 72, 40, 8, 1, (16, 32, 16), "float32", "float32")])
@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_gather_rows_then_grouped_gemm_sorted(tokens, hidden, ffn, experts, top_k, blocks, dtype, out_dtype, target):
    from ascend_util import run_checked
    block_M, block_N, block_K = blocks
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=tokens + 7)
    if experts >= 4:
        logits[:, experts // 2:] -= 50.0  # the upper half of the experts get no token
    ids, _ = moe.topk_gating(tokens, experts, top_k)(logits)
    rows, block_expert, _ = moe.align_by_expert(tokens, experts, top_k, block_M)(ids)
    n_rows = rows.shape[0]
    run = (lambda k, *a: k(*a)) if target == "cpu" else run_checked
    g = moe.gather_rows(tokens, hidden, n_rows, block_R=4, block_H=64, dtype=dtype, target=target)
    xs = run(g, x, rows)
    want = np.zeros((n_rows, hidden), x.dtype)
    want[rows < tokens] = x[rows[rows < tokens]]
    np.testing.assert_array_equal(xs.view(np.uint16) if dtype != "float32" else xs,
                                  want.view(np.uint16) if dtype != "float32" else want)
    k = moe.grouped_gemm_sorted(n_rows, hidden, ffn, experts, block_M=block_M, block_N=block_N, block_K=block_K,
                                dtype=dtype, out_dtype=out_dtype, target=target)
    y = run(k, xs, w, block_expert)
    ref, written = grouped_reference(x, w, rows, block_expert, block_M)
    assert_close(y[written], ref[written])
    if target != "cpu":  # differential: the same kernel on cpu
        cpu = moe.grouped_gemm_sorted(n_rows, hidden, ffn, experts, block_M=block_M, block_N=block_N,
                                      block_K=block_K, dtype=dtype, out_dtype=out_dtype)(xs, w, block_expert)
        assert_close(y[written], cpu[written])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gathered_rows_of_a_128_row_block_are_not_fenced(dtype):
    """grouped_gemm with block_M 128: the row copies of different iterations of the gather loop
    write disjoint rows of the L1 tile (row r: r * 32 bytes into each strip), and insert_sync
    proves it for all 128 iterations (it stopped at 64 before): no PipeBarrier<PIPE_MTE2> after a
    row's DataCopy or a padding row's InitConstValue (the one left fences a tail row's zeroing
    before its copy). The checker agrees (run_checked), and the result matches cpu and float64
    (150 tokens: a partial last row block per expert, experts without tokens)."""
    from ascend_util import run_checked
    tokens, hidden, ffn, experts, top_k, block_M = 150, 80, 48, 4, 2, 128
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=3)
    logits[:, 3] -= 50.0  # expert 3 gets no token
    ids, _ = moe.topk_gating(tokens, experts, top_k)(logits)
    rows, block_expert, _ = moe.align_by_expert(tokens, experts, top_k, block_M)(ids)
    k = moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, block_N=32, block_K=32, dtype=dtype,
                         target="ascend910b")
    prog = k.get_source("ascend_program")
    lines = prog.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.strip().startswith("for r in range(128)"))
    depth = len(lines[top]) - len(lines[top].lstrip())
    body = []
    for ln in lines[top + 1:]:
        if len(ln) - len(ln.lstrip()) <= depth:
            break
        body.append(ln.strip())
    # (the row copy's address reads t from GM: widen_scalars computes it in int64, `cast<int64>(r * 32)`)
    assert sum(ln.startswith(("MTE2 DataCopyNd2Nz a[cast<int64>(r * 32) + ", "MTE2 InitConstValue a[r * "))
               for ln in body) == 3, prog
    fences = [i for i, ln in enumerate(body) if ln.startswith("MTE2 PipeBarrier<MTE2>")]
    # the one fence left: a tail row's zeroing before its copy (the row copy, padding rows: none)
    assert len(fences) == 1 and body[fences[0] - 1].startswith("MTE2 InitConstValue a[r * "), prog
    assert "dstGap=127" not in body[fences[0] - 1], prog
    npu = run_checked(k, x, w, rows, block_expert)
    cpu = moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, block_N=32, block_K=32,
                           dtype=dtype)(x, w, rows, block_expert)
    ref, written = grouped_reference(x, w, rows, block_expert, block_M)
    assert_close(npu[written], ref[written], atol=1e-5, rtol=1e-5)
    assert_close(npu[written], cpu[written], atol=1e-5, rtol=1e-5)


def test_grouped_gemm_sorted_at_issue_13s_size_is_bound_by_the_cube():
    """bench/ascend.py's MoE case (8 experts, top-2, 4096 tokens, hidden 4096, ffn 14336, fp16,
    blocks 128/256/128, timing-only, deterministic): the grid's order (map_grid's panels of 4 row
    blocks, by fastest) keeps each expert's W (112 MiB) in the 192 MiB L2 while its row blocks run,
    so W comes from HBM about once: the bytes over HBM stay near the compulsory ones (W, Xs, Y) and
    the Cube, not HBM, bounds the kernel (90.9% and 1.33 GB in session 12; floors with margin)."""
    tokens, hidden, ffn, experts, top_k, bm = 4096, 4096, 14336, 8, 2, 128
    logits = np.random.default_rng(0).standard_normal((tokens, experts)).astype(np.float32)
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :top_k].astype(np.int32)
    rows, block_expert, _ = moe.align_by_expert(tokens, experts, top_k, bm)(ids)
    n_rows = rows.shape[0]
    k = moe.grouped_gemm_sorted(n_rows, hidden, ffn, experts, block_M=bm, block_N=256, block_K=128,
                                target="ascend910b")
    xs, w = np.zeros((n_rows, hidden), np.float16), np.zeros((experts, hidden, ffn), np.float16)
    p = k.profile(xs, w, block_expert, functional=False, check=False)
    compulsory = w.nbytes + xs.nbytes + n_rows * ffn * 2
    assert p["hbm_bytes"] <= 1.25 * compulsory, (p["hbm_bytes"] / compulsory, p["summary"])
    assert p["cube_utilisation"] >= 0.80, p["summary"]


def test_grouped_gemm_on_ascend_gathers_rows_into_l1():
    """The printed AscendC: one DataCopy (Nd2Nz) per gathered row at row r of the L1 tile (r * 32
    bytes into each strip) and one InitConstValue per padding row (16 strips' blocks skipped)."""
    k = moe.grouped_gemm(20, 64, 64, 4, 2, block_M=16, dtype="float16", target="ascend910b")
    prog = k.get_source("ascend_program")
    # t comes from GM (not provably >= 0): a row before row 0 would be skipped, as on cpu; t is any
    # int32, so `0 - t` is computed in int64 (widen_scalars, session 29)
    assert ("DataCopyNd2Nz a[cast<int64>(r * 32) + min(max(0i64 - cast<int64>(t), 0i64), 1i64) * 32i64] <- X["
            in prog), prog
    assert ("nValue=max(min(20i64 - cast<int64>(t), 1i64) - min(max(0i64 - cast<int64>(t), 0i64), 1i64), 0i64) "
            "dValue=64" in prog), prog
    assert "InitConstValue a[r * 32] float16 repeatTimes=4 blockNum=1 dstGap=15 initValue=0.0f16" in prog, prog
    src = k.get_source("ascendc")
    assert "InitConstValueParams<half>{4, 1, 15," in src.replace("static_cast<uint16_t>(", "").replace(")", ""), src


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_l1_row_blocks_keep_each_other(dtype):
    """Two row blocks of one L1 tile copied from different tensors, the lower one second and with a
    K tail: its tail fill zeroes only its own rows, not the block copied before it."""
    import tilewright as tw
    import tilewright.language as T
    from ascend_util import run_checked

    @T.prim_func
    def k(X: T.Tensor((16, 40), dtype), Z: T.Tensor((8, 40), dtype), W: T.Tensor((48, 32), dtype),
          Y: T.Tensor((24, 32), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((24, 48), dtype)
            b = T.alloc_shared((48, 32), dtype)
            acc = T.alloc_fragment((24, 32), "float32")
            T.copy(Z[0:8, 0:48], a[16:24, :])
            T.copy(X[0:16, 0:48], a[0:16, :])
            T.copy(W, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc, Y)

    from tilewright.testing import randn
    rng = np.random.default_rng(9)
    x, z, w = randn((16, 40), dtype, seed=rng), randn((8, 40), dtype, seed=rng), randn((48, 32), dtype, seed=rng)
    ref = np.concatenate([x, z]).astype(np.float64)[:, :40] @ w.astype(np.float64)[:40]
    got = run_checked(tw.compile(k, out_idx=[-1], target="ascend910b"), x, z, w)
    assert_close(got, ref, atol=1e-4, rtol=1e-4)
    assert_close(tw.compile(k, out_idx=[-1])(x, z, w), ref, atol=1e-4, rtol=1e-4)


def test_l1_row_windows_out_of_reach_are_located_errors():
    """A row of an L1 tile indexed by a value read from GM (not provably inside the tile), and a
    fill of half a C0 strip, are errors at the user's line naming what to write instead."""
    import tilewright as tw
    import tilewright.language as T

    @T.prim_func
    def by_value(X: T.Tensor((8, 64), "float16"), W: T.Tensor((64, 64), "float16"), Idx: T.Tensor((4,), "int32"),
                 Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((16, 64), "float32")
            T.fill(a, 0)
            i = Idx[bx]
            T.copy(X[0, :], a[i, :])
            T.copy(W, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc, Y)

    with pytest.raises(tw.TilewrightError, match=r"test_moe\.py:\d+:\d+: error: copy GM->L1 into a\[i.*not provably "
                                                 r"inside it(.|\n)*for r in T\.serial\(16\)"):
        tw.compile(by_value, target="ascend910b")

    @T.prim_func
    def half_strip(X: T.Tensor((16, 64), "float16"), W: T.Tensor((64, 64), "float16"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((16, 64), "float32")
            T.copy(X, a)
            T.fill(a[3, 0:8], 0)
            T.copy(W, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc, Y)

    with pytest.raises(tw.TilewrightError, match=r"test_moe\.py:\d+:\d+: error: T\.fill of a\[3.*whole C0 strips"):
        tw.compile(half_strip, target="ascend910b")


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
    rounding (atol 1e-6, rtol 1e-5) and 16-bit outputs to one rounding per add. out is its out_idx
    output, which starts at zero on every call (h-api35): a second call does not add to the first's."""
    x, logits, w = moe.inputs(tokens, 32, ffn, experts, seed=tokens)
    _, ids, weights = moe.moe(x, logits, w, top_k, block_M=16)
    rows, _, slot = moe.align_by_expert(tokens, experts, top_k, 16)(ids)
    y = np.random.default_rng(3).standard_normal((rows.shape[0], ffn)).astype(np.float32)
    gather = moe.combine(tokens, ffn, top_k, rows.shape[0], dtype=dtype)(y, slot, weights)
    k = moe.combine_atomic(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target)
    ref = sum(weights[:, kk:kk + 1].astype(np.float64) * y[slot[:, kk]].astype(np.float64) for kk in range(top_k))
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == "float32" else dict(atol=1e-2 * top_k, rtol=1e-2 * top_k)
    for _ in range(2):  # the second call starts from zero too
        if target == "cpu":
            out = k(y, slot, weights)
        else:
            prof = k.profile(y, slot, weights)
            assert prof["reports"] == [], "\n".join(prof["reports"])
            out = prof.outputs
        assert out.dtype == gather.dtype and out.shape == (tokens, ffn)
        assert_close(out, ref, **tol)
        assert_close(out, gather, **tol)


def test_moe_with_the_scatter_add_combine():
    x, logits, w = moe.inputs(40, 64, 48, 6, seed=8)
    out, _, _ = moe.moe(x, logits, w, 2, atomic_combine=True)
    ref, _, _ = moe.reference(x, logits, w, 2)
    assert_close(out, ref)
