"""deadlock40 (session 40, issue 13): a kernel whose Q K^T operand tile is written by a vector map
after its copy (q = q * scale) hands q to the Cube inside the key loop, which leaves the Cube loop
unskewed (skew_cube_loops); rotate_vector_loops still ran the vector loop's P V tail 3 iterations
late, and with two workspace slots the Cube's P V(j) then waited for the vector code to read P V(j - 2)
while the vector code waited for S(j + 1): a deadlock on ascend910b from the third key block on
(masked40 F1). The vector loop now stays unrotated when its head waits for a Cube tile of an
unskewed Cube loop. Both targets against float64, odd query counts (tails along M)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

BM, BN, D = 16, 16, 32


def kernel(seq_q, seq_kv, dtype, written, target):
    n_kv = seq_kv // BN

    @T.prim_func
    def main(Q: T.Tensor((seq_q, D), dtype), K: T.Tensor((seq_kv, D), dtype), V: T.Tensor((seq_kv, D), dtype),
             O: T.Tensor((seq_q, D), "float32")):
        with T.Kernel(T.ceildiv(seq_q, BM)) as bx:
            q = T.alloc_shared((BM, D), dtype)
            k = T.alloc_shared((BN, D), dtype)
            v = T.alloc_shared((BN, D), dtype)
            acc_s = T.alloc_fragment((BM, BN), "float32")
            p = T.alloc_fragment((BM, BN), dtype)
            acc_o = T.alloc_fragment((BM, D), "float32")
            T.copy(Q[bx * BM:(bx + 1) * BM, :], q)
            if written == "q":  # the tile written by a vector map after its copy, then a gemm operand
                for i, d in T.Parallel(BM, D):
                    q[i, d] = q[i, d] * 0.5
            T.fill(acc_o, 0)
            for t in T.serial(n_kv):
                T.copy(K[t * BN:(t + 1) * BN, :], k)
                if written == "k":
                    for j, d in T.Parallel(BN, D):
                        k[j, d] = k[j, d] * 0.5
                T.gemm(q, k, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(BM, BN):
                    p[i, j] = acc_s[i, j] * 0.25
                T.copy(V[t * BN:(t + 1) * BN, :], v)
                if written == "v":
                    for j, d in T.Parallel(BN, D):
                        v[j, d] = v[j, d] * 0.5
                for i, d in T.Parallel(BM, D):
                    acc_o[i, d] = acc_o[i, d] * 0.75
                T.gemm(p, v, acc_o)
            T.copy(acc_o, O[bx * BM:(bx + 1) * BM, :])

    return tw.compile(main, out_idx=[3], target=target)


def reference(q, k, v, dtype, written):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if written == "q":
        q = q * 0.5
    o = np.zeros((q.shape[0], D))
    for t in range(k.shape[0] // BN):
        kt, vt = k[t * BN:(t + 1) * BN], v[t * BN:(t + 1) * BN]
        if written == "k":
            kt = kt * 0.5
        if written == "v":
            vt = vt * 0.5
        p = (q @ kt.T) * 0.25
        if dtype == "float16":
            p = p.astype(np.float16).astype(np.float64)  # the cast tile P
        o = o * 0.75 + p @ vt
    return o


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
@pytest.mark.parametrize("seq_q,seq_kv,dtype,written", [
    (37, 64, "float32", "q"),  # masked40 F1's form: a query tail, four key blocks
    (32, 64, "float32", "q"),  # whole query blocks: the same deadlock (the key blocks decide)
    (37, 64, "float16", "q"),
    (37, 64, "float32", "k"),  # neighbours: k or v written in the loop instead
    (37, 64, "float32", "v"),
])
def test_vector_written_gemm_operand_with_a_key_loop(target, seq_q, seq_kv, dtype, written):
    rng = np.random.default_rng(40)
    q, k, v = (rng.standard_normal((s, D)).astype(dtype) for s in (seq_q, seq_kv, seq_kv))
    out = kernel(seq_q, seq_kv, dtype, written, target)(q, k, v)
    tol = 2e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(out, reference(q, k, v, dtype, written), rtol=tol, atol=tol)
