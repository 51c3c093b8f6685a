"""Session 24 (h-ascbf12): the Cube -> Vector score hand-off keeps the user's dtype.

Until session 24 a looped Cube -> Vector hand-off of a float32 tile computed by a gemm of float16
operands (flash attention's scores S = Q K^T, and each key block's P V) went through the GM
workspace in float16: a score above 65504 became inf there, the softmax's s - max was inf - inf =
NaN, and the kernel returned NaN where cpu (and float64) give finite values. The program never
asked for float16 scores: the compiler must not narrow a tile when the narrowing can change the
answer, and whether it can is not decidable from the program (it depends on the data), so the
hand-off keeps the tile's dtype (float32) for every operand dtype; a user who wants a narrower
hand-off writes the cast.

Data: Q, K entries in 62 .. 66 by halves (exact in float16 and bfloat16), head dim 16: the raw
scores q . k lie in 61504 .. 69696 (many above float16's 65504; exact in float32), and the kernel
scales them by 2^-10 on the vector side, so the softmax has weights of every size. V in
[-4, 4] by halves. Checked on cpu and ascend910b (simulator, checker on) against a float64 model
of the program (online softmax over key blocks of 16, P rounded to the input dtype per block, as
the program's T.copy(s, p) does): atol 1e-5 + rtol 1e-3. N spans 1 .. 3 key blocks with tails;
causal (key <= query + N - M) and not; float16 and bfloat16. Plus examples/flash_attention.py
(128 x 128 blocks, head dim 64, S 256: two key blocks) with such scores in float16."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import pairwise  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BM, BN, D = 16, 16, 16
SCALE = 2.0 ** -10


def _attention(dt, target, M, N, causal):
    """Flash attention's online softmax written plainly, scores scaled on the vector side."""
    off = N - M  # causal: query i sees keys 0 .. i + off

    @T.prim_func
    def attn(Q: T.Tensor((M, D), dt), K: T.Tensor((N, D), dt), V: T.Tensor((N, D), dt),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, BM)) as by:
            s = T.alloc_fragment((BM, BN), "float32")
            q = T.alloc_shared((BM, D), dt)
            kt = T.alloc_shared((BN, D), dt)
            vt = T.alloc_shared((BN, D), dt)
            p = T.alloc_fragment((BM, BN), dt)
            acc = T.alloc_fragment((BM, D), "float32")
            m = T.alloc_fragment((BM,), "float32")
            mp = T.alloc_fragment((BM,), "float32")
            sc = T.alloc_fragment((BM,), "float32")
            l = T.alloc_fragment((BM,), "float32")
            rs = T.alloc_fragment((BM,), "float32")
            T.copy(Q[by * BM, 0], q)
            T.fill(m, -3.4028234663852886e38)
            T.fill(l, 0)
            T.fill(acc, 0)
            for k in T.serial(T.ceildiv(N, BN)):
                T.copy(K[k * BN, 0], kt)
                T.gemm(q, kt, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(BM, BN):
                    if causal:
                        s[i, j] = T.where((k * BN + j < N) & (k * BN + j <= by * BM + i + off), s[i, j] * SCALE,
                                          -T.infinity("float32"))
                    else:
                        s[i, j] = T.where(k * BN + j < N, s[i, j] * SCALE, -T.infinity("float32"))
                T.copy(m, mp)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(BM):
                    sc[i] = T.exp(mp[i] - m[i])
                for i, j in T.Parallel(BM, BN):
                    s[i, j] = T.exp(s[i, j] - m[i])
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(BM):
                    l[i] = l[i] * sc[i] + rs[i]
                for i, j in T.Parallel(BM, D):
                    acc[i, j] = acc[i, j] * sc[i]
                T.copy(V[k * BN, 0], vt)
                T.copy(s, p)
                T.gemm(p, vt, acc)
            for i, j in T.Parallel(BM, D):
                acc[i, j] = T.where(l[i] == 0, 0.0, acc[i, j] / l[i])
            T.copy(acc, O[by * BM, 0])
    return tw.compile(attn, target=target, out_idx=[-1])


def _model(q, k, v, dt, causal):
    """float64 online softmax over key blocks of BN, P rounded (via float32) to dt per block."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    M, N = q.shape[0], k.shape[0]
    m, l, acc = np.full(M, -np.inf), np.zeros(M), np.zeros((M, v.shape[1]))
    for b in range(0, N, BN):
        s = q @ k[b:b + BN].T * SCALE
        if causal:
            s = np.where(np.arange(b, min(b + BN, N))[None, :] <= np.arange(M)[:, None] + (N - M), s, -np.inf)
        mn = np.maximum(m, s.max(axis=1))
        sc = np.where(np.isneginf(mn), 1.0, np.exp(m - mn))
        p = np.where(np.isneginf(s), 0.0, np.exp(s - mn[:, None]))
        l = l * sc + p.sum(axis=1)
        acc = acc * sc[:, None] + p.astype(np.float32).astype(np_dtype(dt)).astype(np.float64) @ v[b:b + BN]
        m = mn
    return acc / l[:, None]


def _inputs(M, N, dt, seed):
    rng = np.random.default_rng(seed)
    big = lambda shape: (124 + rng.integers(0, 9, shape)) / 2  # noqa: E731  62 .. 66 by halves
    return [big((M, D)).astype(np_dtype(dt)), big((N, D)).astype(np_dtype(dt)),
            (rng.integers(-8, 9, (N, D)) / 2).astype(np_dtype(dt))]


# every pair of (shape, causal, dtype) values (tw_test_util.pairwise: 10 cases, not the 20 of the
# product; session 29, h-ci): every shape both causal and not and in both dtypes
@pytest.mark.parametrize("MN,causal,dt", pairwise([(16, 16), (16, 17), (32, 40), (17, 48), (1, 33)], [False, True],
                                                  ["float16", "bfloat16"]))
def test_scores_above_float16_range_stay_finite(dt, causal, MN):
    M, N = MN
    q, k, v = _inputs(M, N, dt, seed=24 * N + M)
    raw = q.astype(np.float64) @ k.astype(np.float64).T
    assert raw.max() > 65504  # the data this test is about: scores float16 cannot hold
    ref = _model(q, k, v, dt, causal)
    for target in ("cpu", TARGET):
        kern = _attention(dt, target, M, N, causal)
        out = np.asarray(kern(q, k, v) if target == "cpu" else run_checked(kern, q, k, v), np.float64)
        assert np.isfinite(out).all(), f"{dt} M={M} N={N} causal={causal} on {target}: {np.isnan(out).sum()} NaN"
        tol = 1e-5 + 1e-3 * np.abs(ref)
        bad = np.argwhere(np.abs(out - ref) > tol)
        assert len(bad) == 0, f"attention {dt} M={M} N={N} causal={causal} on {target}: {len(bad)} of {ref.size} " \
            "off, e.g. " + ", ".join(f"O{tuple(int(x) for x in b)} = {out[tuple(b)]:.6g} (model {ref[tuple(b)]:.6g})"
                                     for b in bad[:4])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_no_hand_off_is_narrowed(dt):
    """Every Cube -> Vector hand-off (Fixpipe L0C -> GM workspace) keeps float32: no quantPre
    narrowing to the operands' dtype in the program."""
    src = _attention(dt, TARGET, 32, 40, False).get_source("ascend_program")
    assert src.count("FixpipeV220 workspace") >= 2  # the scores and each block's P V
    assert "quantPre=F322F16" not in src and "quantPre=F322BF16" not in src


def _example():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tw_fa_example_s24", ROOT / "examples" / "flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_example_float16_large_scores(causal):
    """examples/flash_attention.py, float16, 128 x 128 blocks, head dim 64, S 256 (two key blocks):
    q . k up to 64 * 33^2 = 69696 (the example scales on the vector side, after the hand-off)."""
    fa = _example()
    B, H, S, Dh = 1, 1, 256, 64
    rng = np.random.default_rng(7 + causal)
    q, k = ((62 + rng.integers(0, 5, (B, H, S, Dh))) / 2 for _ in range(2))  # 31 .. 33 by halves
    v = rng.integers(-8, 9, (B, H, S, Dh)) / 2
    q, k, v = (x.astype(np.float16) for x in (q, k, v))
    assert (q[0, 0].astype(np.float64) @ k[0, 0].astype(np.float64).T).max() > 65504
    ref = fa.reference(q, k, v, causal)
    for target in ("cpu", TARGET):
        kern = fa.flash_attention(B, H, S, Dh, causal, block_M=128, block_N=128, dtype="float16", target=target)
        out = np.asarray(kern(q, k, v) if target == "cpu" else run_checked(kern, q, k, v), np.float64)
        assert np.isfinite(out).all(), f"causal={causal} on {target}: {np.isnan(out).sum()} NaN"
        # float16 output and P: 2^-11 relative of the output's scale (|v| <= 4) per rounding
        np.testing.assert_allclose(out, ref, atol=4 * 2.0 ** -9, rtol=0, err_msg=f"causal={causal} on {target}")
