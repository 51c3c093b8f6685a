"""handoff41 (session 41, issue 13): a Cube operand tile the vector code writes once before the key
loop (Q scaled after its copy) is handed to the Cube once, before the loop, on ascend910b: the loop
has no hand-off for it, so skew_cube_loops skews the Cube loop and rotate_vector_loops rotates the
vector loop as for a copied Q (deadlock40 P1: handed over every key block, they ran unpipelined).
Both targets against float64: float32 / float16, query tails, a grid of query blocks x heads with
more programs than the 910B's 24 AI Cores (each core's workspace slot reused block after block),
a query block whose run-time key count is 0 (the hand-off before the empty loop runs on both cores),
and q written again in the loop (not loop-invariant: handed over every key block, as before)."""
import re

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

BM, BN, D, H = 16, 16, 32, 2


def kernel(seq_q, seq_kv, dtype, target, again=False):
    # the key blocks of query block bx: Blocks[bx] (a run-time count; 0: an empty loop)

    @T.prim_func
    def main(Q: T.Tensor((H, seq_q, D), dtype), K: T.Tensor((H, seq_kv, D), dtype), V: T.Tensor((H, seq_kv, D), dtype),
             Blocks: T.Tensor((T.ceildiv(seq_q, BM),), "int32"), O: T.Tensor((H, seq_q, D), "float32")):
        with T.Kernel(T.ceildiv(seq_q, BM), H) as (bx, by):
            q = T.alloc_shared((BM, D), dtype)
            k = T.alloc_shared((BN, D), dtype)
            v = T.alloc_shared((BN, D), dtype)
            acc_s = T.alloc_fragment((BM, BN), "float32")
            p = T.alloc_fragment((BM, BN), dtype)
            acc_o = T.alloc_fragment((BM, D), "float32")
            T.copy(Q[by, bx * BM:(bx + 1) * BM, :], q)
            for i, d in T.Parallel(BM, D):  # Q scaled once a query block
                q[i, d] = q[i, d] * 0.5
            T.fill(acc_o, 0)
            n_kv = Blocks[bx]
            for t in T.serial(n_kv):
                if again:  # q written in the loop too: not loop-invariant
                    for i, d in T.Parallel(BM, D):
                        q[i, d] = q[i, d] * 0.5
                T.copy(K[by, t * BN:(t + 1) * BN, :], k)
                T.gemm(q, k, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(BM, BN):
                    p[i, j] = acc_s[i, j] * 0.25
                T.copy(V[by, t * BN:(t + 1) * BN, :], v)
                for i, d in T.Parallel(BM, D):
                    acc_o[i, d] = acc_o[i, d] * 0.75
                T.gemm(p, v, acc_o)
            T.copy(acc_o, O[by, bx * BM:(bx + 1) * BM, :])

    return tw.compile(main, out_idx=[4], target=target)


def reference(q, k, v, blocks, dtype, again):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    o = np.zeros(q.shape)
    for h in range(H):
        for b, n in enumerate(blocks):
            rows = slice(b * BM, (b + 1) * BM)
            qh = q[h, rows] * 0.5  # the scaled tile (exact in float16: a power of 2)
            for t in range(n):
                if again:
                    qh = qh * 0.5
                kt, vt = k[h, t * BN:(t + 1) * BN], v[h, t * BN:(t + 1) * BN]
                p = (qh @ kt.T) * 0.25
                if dtype == "float16":
                    p = p.astype(np.float16).astype(np.float64)  # the cast tile P
                o[h, rows] = o[h, rows] * 0.75 + p @ vt
    return o


CASES = [
    (37, 64, "float32", False),   # a query tail, four key blocks (deadlock40's form); query block 1: none
    (32, 80, "float16", False),   # whole query blocks, five key blocks
    (213, 48, "float32", False),  # 14 query blocks x 2 heads: 28 programs on 24 AI Cores
    (37, 64, "float32", True),    # q written in the loop too
]


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
@pytest.mark.parametrize("seq_q,seq_kv,dtype,again", CASES)
def test_scaled_q_against_float64(target, seq_q, seq_kv, dtype, again):
    rng = np.random.default_rng(41)
    q, k, v = (rng.standard_normal((H, s, D)).astype(dtype) for s in (seq_q, seq_kv, seq_kv))
    blocks = np.full((-(-seq_q // BM),), seq_kv // BN, np.int32)
    if seq_q == 37:
        blocks[1] = 0  # an empty key loop: the hand-off before it still runs on both cores
    out = kernel(seq_q, seq_kv, dtype, target, again)(q, k, v, blocks)
    tol = 2e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(out, reference(q, k, v, blocks, dtype, again), rtol=tol, atol=tol)


def scopes(text):
    """The Cube and the vector scope of a split kernel's text."""
    c, v = text.index("scope C {"), text.index("scope V {")
    return text[c:v], text[v:]


@pytest.mark.parametrize("again", [False, True])
def test_program_shape(again):
    """The hand-off of q (V: copy q_ub -> workspace; C: workspace -> q) is before the loops when q is
    loop-invariant, and both loops are then pipelined (the Cube loop skewed: `if t < n_kv`, the vector
    loop rotated: `if t_v >= 3`); written in the loop too, it is handed over in the loops, which stay
    as written (deadlock40's rule)."""
    text = kernel(37, 64, "float32", "ascend910b", again).get_ir("rotate_vector_loops")
    cube, vec = scopes(text)
    send = [m.start() for m in re.finditer(r"copy q_ub -> ws_\d+\[", vec)]
    recv = [m.start() for m in re.finditer(r"\] -> q\n", cube)]
    assert len(send) == 1 and len(recv) == 1, text
    loop_v, loop_c = vec.index("for t_v in"), cube.index("for t in")
    assert (send[0] > loop_v) == again and (recv[0] > loop_c) == again, text
    assert ("if t < " in cube) != again and ("if t_v >= 3 {" in vec) != again, text


def gemm_then_vector_loop(target):
    """The other direction: a gemm result made before the loop (on the Cube) that the loop's vector
    code reads every iteration and never writes: handed to the Vector core once, before the loop."""
    M, N, K, n = 32, 32, 16, 3

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), O: T.Tensor((2, n, M, N), "float32")):
        with T.Kernel(2) as bx:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared((K, N), "float32")
            c = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            T.fill(o, 0)
            for t in T.serial(n):
                for i, j in T.Parallel(M, N):
                    o[i, j] = o[i, j] + c[i, j] * (bx + 1)
                T.copy(o, O[bx, t, :, :])

    return tw.compile(main, out_idx=[2], target=target)


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_gemm_result_read_in_a_vector_loop(target):
    rng = np.random.default_rng(41)
    a, b = rng.standard_normal((32, 16)).astype("float32"), rng.standard_normal((16, 32)).astype("float32")
    kern = gemm_then_vector_loop(target)
    c = a.astype(np.float64) @ b
    ref = np.stack([np.stack([(t + 1) * (g + 1) * c for t in range(3)]) for g in range(2)])
    np.testing.assert_allclose(kern(a, b), ref, rtol=2e-5, atol=2e-5)
    if target == "ascend910b":
        _, vec = scopes(kern.get_ir("split_cube_vector"))
        assert vec.count("] -> c_ub") == 1 and vec.index("] -> c_ub") < vec.index("for t_v in"), vec
