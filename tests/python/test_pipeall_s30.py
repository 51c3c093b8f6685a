"""PIPE_ALLs from event ids (issue 13, session 30, h-pipeall).

On the AIC a FIX -> MTE2 order (a FixPipe result in the workspace read back by a copy) is relayed
through MTE1: WaitFlag<FIX_MTE1>, SetFlag<MTE1_MTE2>, WaitFlag<MTE1_MTE2> at the wait point. In
the llm fuzz stream's skewed attention loops two such relayed pairs wait at the same place; each
took its own MTE1_MTE2 id for the second flag, the ids ran out, and the relay became a
`PipeBarrier<PIPE_ALL>`; the covering retry then widened the wrong pipe pair (FIX -> MTE1, where
the relay's first flag had found an id). Now relays waited at the same places share the second
flag (MTE1 waits both FIX_MTE1 flags, then one MTE1_MTE2 pair). The kernel is the llm stream's
seed 3005 (online-softmax attention with an additive mask, head dim 32, float16 in, bfloat16 out):
3 -> 2 PIPE_ALL lines in its program; cpu and ascend910b against float64, checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

M_, N_ = T.symbolic("M"), T.symbolic("N")


@T.prim_func
def attention(Q: T.Tensor((M_, 32), "float16"), K: T.Tensor((N_, 32), "float16"), V: T.Tensor((N_, 32), "float16"),
              Mk: T.Tensor((M_, N_), "float32"), O: T.Tensor((M_, 32), "bfloat16")):
    with T.Kernel(T.ceildiv(M_, 16)) as by:
        s = T.alloc_fragment((16, 32), "float32")
        q = T.alloc_shared((16, 32), "float16")
        kt = T.alloc_shared((32, 32), "float16")
        vt = T.alloc_shared((32, 32), "float16")
        p = T.alloc_fragment((16, 32), "float16")
        acc = T.alloc_fragment((16, 32), "float32")
        mk = T.alloc_fragment((16, 32), "float32")
        m = T.alloc_fragment((16,), "float32")
        mp = T.alloc_fragment((16,), "float32")
        sc = T.alloc_fragment((16,), "float32")
        l = T.alloc_fragment((16,), "float32")
        rs = T.alloc_fragment((16,), "float32")
        T.copy(Q[by * 16, 0], q)
        T.fill(m, -3.4028234663852886e+38)
        T.fill(l, 0)
        T.fill(acc, 0)
        for k in T.serial(T.ceildiv(N_, 32)):
            T.copy(K[k * 32, 0], kt)
            T.gemm(q, kt, s, transpose_B=True, clear_accum=True)
            T.copy(Mk[by * 16, k * 32], mk)
            for i, j in T.Parallel(16, 32):
                s[i, j] = T.where(k * 32 + j < N_, s[i, j] + mk[i, j], -T.infinity("float32"))
            T.copy(m, mp)
            T.reduce_max(s, m, dim=1, clear=False)
            for i in T.Parallel(16):
                sc[i] = T.exp(mp[i] - m[i])
            for i, j in T.Parallel(16, 32):
                s[i, j] = T.exp(s[i, j] - m[i])
            T.reduce_sum(s, rs, dim=1)
            for i in T.Parallel(16):
                l[i] = l[i] * sc[i] + rs[i]
            for i, j in T.Parallel(16, 32):
                acc[i, j] = acc[i, j] * sc[i]
            T.copy(V[k * 32, 0], vt)
            T.copy(s, p)
            T.gemm(p, vt, acc)
        for i, j in T.Parallel(16, 32):
            acc[i, j] = T.where(l[i] == 0, 0.0, acc[i, j] / l[i])
        T.copy(acc, O[by * 16, 0])


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_relays_waited_at_one_place_share_their_second_flag(target):
    """M 17, N 33: a row tail and a key tail (a last key block of one key). Tolerance: P is rounded
    to float16 before the second gemm and O to bfloat16 (2^-8 relative), scores O(1)."""
    M, N = 17, 33
    rng = np.random.default_rng(3005)
    q = rng.standard_normal((M, 32)).astype(np.float16)
    k = rng.standard_normal((N, 32)).astype(np.float16)
    v = rng.standard_normal((N, 32)).astype(np.float16)
    mask = np.where(rng.random((M, N)) < 0.2, -1e4, 0.0).astype(np.float32)
    kern = tw.compile(attention, target=target, out_idx=[-1])
    if target == "cpu":
        o = kern(q, k, v, mask)
    else:
        prog = kern.get_source("ascend_program")
        assert prog.count("PipeBarrier<ALL>") == 2, prog  # 3 before session 30
        prof = kern.profile(q, k, v, mask)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        o = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    s = q.astype(np.float64) @ k.astype(np.float64).T + mask
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(np.asarray(o, np.float64), ref, atol=2e-2, rtol=2e-2)
