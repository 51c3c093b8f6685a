"""Session 27 (h-rowloop16): row loops of one-row maps in Cube + Vector kernels.

A per-token loop over the (token, head) rows of a gemm result, `for t in T.serial(qlen): for i, c in
T.Parallel(G, N): s[t * G + i, c] = ..`, and the per-token store `T.copy(s[t * G:(t + 1) * G, :], Out[..])`
(speculative decoding's verification step written per token, hunt15 F2). With one head (G = 1) and an
even token count the split between the two Vector cores takes the token loop for a row loop; its
one-row map `T.Parallel(1, N)` at row t + i is that loop's own row t (the unit loop is inlined). Each
case: cpu and ascend910b (simulator, checker on: reports == []) against float64 numpy.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from ascend_util import TARGET, run_checked  # noqa: E402


@tw.jit(out_idx=[-1])
def token_rows(batch, qlen, G, K, N, dtype="float16"):
    """s = q k^T over R = qlen * G rows (token t, head g at t * G + g); token t keeps the columns
    c <= N - qlen + t (scaled by 0.5), the others are 0; each token's rows stored by their own copy."""
    R = qlen * G

    @T.prim_func
    def main(Q: T.Tensor((batch, qlen, G, K), dtype), Kt: T.Tensor((batch, N, K), dtype),
             Out: T.Tensor((batch, qlen, G, N), "float32")):
        with T.Kernel(batch) as b:
            q = T.alloc_shared((R, K), dtype)
            k = T.alloc_shared((N, K), dtype)
            s = T.alloc_fragment((R, N), "float32")
            for t in T.serial(qlen):
                T.copy(Q[b, t, :, :], q[t * G:(t + 1) * G, :])
            T.copy(Kt[b, :, :], k)
            T.gemm(q, k, s, transpose_B=True, clear_accum=True)
            for t in T.serial(qlen):
                for i, c in T.Parallel(G, N):
                    s[t * G + i, c] = T.where(c <= N - qlen + t, s[t * G + i, c] * 0.5, 0)
            for t in T.serial(qlen):
                T.copy(s[t * G:(t + 1) * G, :], Out[b, t, :, :])

    return main


def reference(q, k):
    s = np.einsum("btgk,bnk->btgn", q.astype(np.float64), k.astype(np.float64)) * 0.5
    qlen, N = q.shape[1], k.shape[1]
    keep = np.arange(N)[None, :] <= N - qlen + np.arange(qlen)[:, None]  # (token, column)
    return np.where(keep[None, :, None, :], s, 0.0)


# (qlen, G): G = 1 with odd and even token counts (even ones split the rows between the AIVs), G = 2
CASES = [(1, 1), (2, 1), (3, 1), (4, 1), (8, 1), (2, 2)]


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("qlen,G", CASES, ids=[f"qlen{c[0]}-g{c[1]}" for c in CASES])
def test_token_row_loop(qlen, G, target):
    batch, K, N = 2, 16, 24  # N: 24 columns, not a power of two
    rng = np.random.default_rng(2716)
    q = randn((batch, qlen, G, K), "float16", seed=rng)
    k = randn((batch, N, K), "float16", seed=rng)
    kern = token_rows(batch, qlen, G, K, N, target=target)
    out = kern(q, k) if target == "cpu" else run_checked(kern, q, k)
    atol, rtol = TOLERANCES["float16"]
    assert_close(np.asarray(out, np.float64), reference(q, k), atol=atol, rtol=rtol, msg=f"qlen {qlen} G {G} {target}")
