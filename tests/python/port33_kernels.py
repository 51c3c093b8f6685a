"""Session 33's portability hunt (h-port33, docs/testing.md "Session 33: port33"): kernels users write for
cpu first, as docs/language.md and the seed article teach (not bench/op_zoo.py's), each a `tw.jit` factory
taking the dtype, then the same factory with only the target changed to ascend910b.

CASES maps a name to make(dtype, shape, rng) -> (kernel factory call args, inputs, in-place indices, reference
outputs in float64 / exact integers). tests/python/test_port33_s33.py runs a selection; `python
port33_kernels.py [names]` runs every case on both targets and prints the outcome (the probe).
"""
import math

import numpy as np

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked

BM = 4  # rows per block: 13 rows leave a tail of 1

# Tolerances per output dtype, |got - ref| <= atol + rtol |ref| (ref in float64 from the inputs as given): float32
# math is within a few ulp (the cpu's vectorised exp/log/tanh 2 ulp), sums of n terms add 1e-6 n; float16 / bfloat16
# outputs are one rounding of the float32 value (2^-11 / 2^-8 relative) plus that.
TOL = {"float32": (1e-5, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def npdt(dt):
    return tw.testing.np_dtype(dt)


def randn(rng, shape, dt, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(npdt(dt))


def f64(a):
    return np.asarray(a).astype(np.float64)


# ----------------------------------------------------------------------------------------------- gated activations
@tw.jit(out_idx=[-1])
def glu(M, N, dt, gate, bm=BM):
    @T.prim_func
    def main(G: T.Tensor((M, N), dt), U: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            g = T.alloc_fragment((bm, N), dt)
            u = T.alloc_fragment((bm, N), dt)
            y = T.alloc_fragment((bm, N), dt)
            T.copy(G[bx * bm, 0], g)
            T.copy(U[bx * bm, 0], u)
            for i, j in T.Parallel(bm, N):
                if gate == "swiglu":
                    y[i, j] = T.silu(g[i, j]) * u[i, j]
                elif gate == "geglu":
                    y[i, j] = T.gelu(g[i, j]) * u[i, j]
                else:  # geglu with the tanh approximation (torch's approximate="tanh")
                    v = g[i, j]
                    y[i, j] = 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))) * u[i, j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _erf(x):
    return np.vectorize(math.erf)(x)


def _glu(gate):
    def make(dt, shape, rng):
        M, N = shape
        g, u = randn(rng, shape, dt, 2.0), randn(rng, shape, dt)
        G, U = f64(g), f64(u)
        if gate == "swiglu":
            ref = G / (1 + np.exp(-G)) * U
        elif gate == "geglu":
            ref = 0.5 * G * (1 + _erf(G / math.sqrt(2))) * U
        else:
            ref = 0.5 * G * (1 + np.tanh(0.7978845608028654 * (G + 0.044715 * G ** 3))) * U
        return glu, (M, N, dt, gate), [g, u], [ref]
    return make


# tile-loop style (the seed's): the same SwiGLU with tw.output / tw.load / tw.store
def swiglu_tl_factory(M, N, dt, bm=BM, bn=16):
    def swiglu_tl(G: tw.Tensor((M, N), dt), U: tw.Tensor((M, N), dt)):
        out = tw.output((M, N), dtype=dt)
        for by in range(tw.ceildiv(M, bm)):
            for bx in range(tw.ceildiv(N, bn)):
                g = tw.load(G, (by * bm, bx * bn), (bm, bn), dtype="float32")
                u = tw.load(U, (by * bm, bx * bn), (bm, bn), dtype="float32")
                acc = tw.accumulator((bm, bn), dtype="float32")
                for i in range(bm):
                    for j in range(bn):
                        acc[i, j] = g[i, j] / (1.0 + T.exp(-g[i, j])) * u[i, j]
                tw.store(out, (by * bm, bx * bn), acc)
        return out
    return swiglu_tl


def _swiglu_tl(dt, shape, rng):
    M, N = shape
    g, u = randn(rng, shape, dt, 2.0), randn(rng, shape, dt)
    return "tileloop", (swiglu_tl_factory, M, N, dt), [g, u], [f64(g) / (1 + np.exp(-f64(g))) * f64(u)]


# ----------------------------------------------------------------------------------------------- norms
@tw.jit(out_idx=[-1])
def group_norm(B, C, L, G, dt, eps=1e-5):
    Cg = C // G

    @T.prim_func
    def main(X: T.Tensor((B, C, L), dt), Gam: T.Tensor((C,), "float32"), Bet: T.Tensor((C,), "float32"),
             Y: T.Tensor((B, C, L), dt)):
        with T.Kernel(B, G) as (b, g):
            x = T.alloc_fragment((Cg, L), "float32")
            d = T.alloc_fragment((Cg, L), "float32")
            rs = T.alloc_fragment((Cg,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            gam = T.alloc_fragment((Cg,), "float32")
            bet = T.alloc_fragment((Cg,), "float32")
            y = T.alloc_fragment((Cg, L), dt)
            T.copy(X[b, g * Cg:(g + 1) * Cg, :], x)
            T.copy(Gam[g * Cg], gam)
            T.copy(Bet[g * Cg], bet)
            T.reduce_sum(x, rs, dim=1)
            T.reduce_sum(rs, tot, dim=0)
            mean = tot[0] / (Cg * L)
            for i, j in T.Parallel(Cg, L):
                d[i, j] = (x[i, j] - mean) * (x[i, j] - mean)
            T.reduce_sum(d, rs, dim=1)
            T.reduce_sum(rs, tot, dim=0)
            rstd = T.rsqrt(tot[0] / (Cg * L) + eps)
            for i, j in T.Parallel(Cg, L):
                y[i, j] = (x[i, j] - mean) * rstd * gam[i] + bet[i]
            T.copy(y, Y[b, g * Cg:(g + 1) * Cg, :])

    return main


def _group_norm(dt, shape, rng):
    B, C, L, G = shape
    x = randn(rng, (B, C, L), dt, 3.0)
    gam = rng.standard_normal(C).astype(np.float32)
    bet = rng.standard_normal(C).astype(np.float32)
    X = f64(x).reshape(B, G, -1)
    Xn = ((X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5)).reshape(B, C, L)
    return group_norm, (B, C, L, G, dt), [x, gam, bet], [Xn * gam[None, :, None] + bet[None, :, None]]


@tw.jit(out_idx=[-1])
def instance_norm(B, C, L, dt, bc=4, eps=1e-5):
    @T.prim_func
    def main(X: T.Tensor((B, C, L), dt), Y: T.Tensor((B, C, L), dt)):
        with T.Kernel(B, T.ceildiv(C, bc)) as (b, c):
            x = T.alloc_fragment((bc, L), "float32")
            s = T.alloc_fragment((bc,), "float32")
            q = T.alloc_fragment((bc,), "float32")
            y = T.alloc_fragment((bc, L), dt)
            T.copy(X[b, c * bc:(c + 1) * bc, :], x)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bc, L):
                y[i, j] = x[i, j] - s[i] / L  # y is scratch here: reused below
            for i, j in T.Parallel(bc, L):
                x[i, j] = x[i, j] - s[i] / L
            T.copy(x, y)
            for i, j in T.Parallel(bc, L):
                x[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x, q, dim=1)
            for i, j in T.Parallel(bc, L):
                y[i, j] = y[i, j] * T.rsqrt(q[i] / L + eps)
            T.copy(y, Y[b, c * bc:(c + 1) * bc, :])

    return main


def _instance_norm(dt, shape, rng):
    B, C, L = shape
    x = randn(rng, (B, C, L), dt, 2.0) + np.asarray(1.0, npdt(dt))
    X = f64(x)
    return instance_norm, (B, C, L, dt), [x], [(X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5)]


# ----------------------------------------------------------------------------------------------- int8 quantization
@tw.jit(out_idx=[1, 2])
def quantize_rows(M, N, dt, bm=BM):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            a = T.alloc_fragment((bm, N), "float32")
            amax = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            q = T.alloc_fragment((bm, N), "int8")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                a[i, j] = T.abs(x[i, j])
            T.reduce_max(a, amax, dim=1)
            for i in T.Parallel(bm):
                s[i] = T.max(amax[i], 1e-8) / 127.0
            for i, j in T.Parallel(bm, N):
                q[i, j] = T.cast(T.min(T.max(T.floor(x[i, j] / s[i] + 0.5), -127.0), 127.0), "int8")
            T.copy(q, Q[bx * bm, 0])
            T.copy(s, S[bx * bm])

    return main


def _quantize(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt, 3.0)
    if M > 2:
        x[2] = 0  # an all-zero row: scale 1e-8 / 127, q 0
    x32 = x.astype(np.float32)
    s = np.maximum(np.abs(x32).max(1), np.float32(1e-8)) / np.float32(127)
    q = np.clip(np.floor(x32 / s[:, None] + np.float32(0.5)), -127, 127).astype(np.int8)
    return quantize_rows, (M, N, dt), [x], [q, s.astype(np.float64)]


@tw.jit(out_idx=[-1])
def dequantize_rows(M, N, dt, bm=BM):
    @T.prim_func
    def main(Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            q = T.alloc_fragment((bm, N), "int8")
            s = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), dt)
            T.copy(Q[bx * bm, 0], q)
            T.copy(S[bx * bm], s)
            for i, j in T.Parallel(bm, N):
                y[i, j] = q[i, j] * s[i]
            T.copy(y, Y[bx * bm, 0])

    return main


def _dequantize(dt, shape, rng):
    M, N = shape
    q = rng.integers(-128, 128, shape).astype(np.int8)
    s = (rng.random(M) * 0.1 + 0.001).astype(np.float32)
    return dequantize_rows, (M, N, dt), [q, s], [f64(q) * f64(s)[:, None]]


@tw.jit(out_idx=[-1])
def dequant_matmul(M, N, K, dt, form, bm=16, bn=32, bk=16):
    """A (M, K) @ (W (K, N) int8 * Sc (N,) per output channel), W converted to dt in the K loop."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dt), W: T.Tensor((K, N), "int8"), Sc: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a_s = T.alloc_shared((bm, bk), dt)
            w_s = T.alloc_shared((bk, bn), "int8")
            w_h = T.alloc_shared((bk, bn), dt)
            acc = T.alloc_fragment((bm, bn), "float32")
            sc = T.alloc_fragment((bn,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(W[k * bk, bx * bn], w_s)
                if form == "copy":
                    T.copy(w_s, w_h)
                else:
                    for i, j in T.Parallel(bk, bn):
                        w_h[i, j] = T.cast(w_s[i, j], dt)
                T.gemm(a_s, w_h, acc)
            T.copy(Sc[bx * bn], sc)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = acc[i, j] * sc[j]
            T.copy(acc, C[by * bm, bx * bn])

    return main


def _dequant_mm(form):
    def make(dt, shape, rng):
        M, N, K = shape
        a = randn(rng, (M, K), dt)
        w = rng.integers(-127, 128, (K, N)).astype(np.int8)
        sc = (rng.random(N) * 0.02 + 0.001).astype(np.float32)
        return dequant_matmul, (M, N, K, dt, form), [a, w, sc], [(f64(a) @ f64(w)) * f64(sc)]
    return make


# ----------------------------------------------------------------------------------------------- gathers by ids
@tw.jit(out_idx=[-1])
def embedding(V, D, Tn, dt, idt, form):
    @T.prim_func
    def main(E: T.Tensor((V, D), dt), Ids: T.Tensor((Tn,), idt), O: T.Tensor((Tn, D), dt)):
        with T.Kernel(Tn) as t:
            if form == "tile":
                row = T.alloc_fragment((D,), dt)
                T.copy(E[Ids[t], :], row)
                T.copy(row, O[t, :])
            else:  # global -> global
                T.copy(E[Ids[t], :], O[t, :])

    return main


def _embedding(form, idt):
    def make(dt, shape, rng):
        V, D, Tn = shape
        e = randn(rng, (V, D), dt)
        ids = rng.integers(0, V, Tn).astype(npdt(idt))
        ids[0] = V - 1
        return embedding, (V, D, Tn, dt, idt, form), [e, ids], [f64(e)[ids.astype(np.int64)]]
    return make


@tw.jit(out_idx=[-1])
def repeat_kv(B, Hkv, rep, S, D, dt):
    @T.prim_func
    def main(K: T.Tensor((B, Hkv, S, D), dt), O: T.Tensor((B, Hkv * rep, S, D), dt)):
        with T.Kernel(B, Hkv * rep) as (b, h):
            t = T.alloc_fragment((S, D), dt)
            T.copy(K[b, h // rep, :, :], t)
            T.copy(t, O[b, h, :, :])

    return main


def _repeat_kv(dt, shape, rng):
    B, Hkv, rep, S, D = shape
    k = randn(rng, (B, Hkv, S, D), dt)
    return repeat_kv, (B, Hkv, rep, S, D, dt), [k], [np.repeat(f64(k), rep, axis=1)]


@tw.jit()
def kv_append(B, Smax, Tn, D, dt):
    """Cache[b, Pos[b]:Pos[b] + Tn] = New[b] (in place; rows past Smax are not written)."""
    @T.prim_func
    def main(Cache: T.Tensor((B, Smax, D), dt), New: T.Tensor((B, Tn, D), dt), Pos: T.Tensor((B,), "int32")):
        with T.Kernel(B) as b:
            t = T.alloc_fragment((Tn, D), dt)
            T.copy(New[b, :, :], t)
            T.copy(t, Cache[b, Pos[b], 0])

    return main


def _kv_append(dt, shape, rng):
    B, Smax, Tn, D = shape
    cache = randn(rng, (B, Smax, D), dt)
    new = randn(rng, (B, Tn, D), dt)
    pos = rng.integers(0, Smax, B).astype(np.int32)
    pos[0], pos[-1] = 0, Smax - 1
    ref = f64(cache)
    for b in range(B):
        n = min(Tn, Smax - pos[b])
        ref[b, pos[b]:pos[b] + n] = f64(new)[b, :n]
    return kv_append, (B, Smax, Tn, D, dt), [cache, new, pos], [ref]


# ----------------------------------------------------------------------------------------------- sampling / masks
@tw.jit(out_idx=[2, 3])
def argmax_sample(M, N, dt, bm=BM):
    """Greedy sampling: the token with the highest softmax(x / temperature) probability, and that probability."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), temp: T.float32, I: T.Tensor((M,), "int32"), P: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            pick = T.alloc_fragment((bm, N), "int32")
            idx = T.alloc_fragment((bm,), "int32")
            p = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / temp
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                pick[i, j] = T.where(x[i, j] == mx[i], j, N)
            T.reduce_min(pick, idx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i in T.Parallel(bm):
                p[i] = 1.0 / sm[i]
            T.copy(idx, I[bx * bm])
            T.copy(p, P[bx * bm])

    return main


def _argmax_sample(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt, 3.0)
    X = f64(x.astype(np.float32) / np.float32(0.7))
    e = np.exp(X - X.max(1, keepdims=True))
    return argmax_sample, (M, N, dt), [x, 0.7], [np.argmax(x.astype(np.float32), 1), 1 / e.sum(1)]


@tw.jit(out_idx=[-1])
def masked_softmax(M, N, dt, bm=BM):
    """torch's x.masked_fill(mask, -inf).softmax(-1); a fully masked row is NaN, as torch's."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Mk: T.Tensor((M, N), "bool"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mk = T.alloc_fragment((bm, N), "bool")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Mk[bx * bm, 0], mk)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.where(mk[i, j], -T.infinity("float32"), x[i, j])
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * bm, 0])

    return main


def _softmax64(s):
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


def _masked_softmax(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt, 2.0)
    mk = rng.random(shape) < 0.3
    mk[:, 0] = False
    if M > 1:
        mk[1] = True  # a fully masked row: NaN
    return masked_softmax, (M, N, dt), [x, mk], [_softmax64(np.where(mk, -np.inf, f64(x)))]


@tw.jit(out_idx=[-1])
def causal_alibi_softmax(H, S, dt, alibi, bm=BM):
    """Scores (H, S, S) with a causal mask built from the indices (j > row: -inf) and, with alibi, torch-style
    ALiBi bias slope[h] * (j - row), then softmax along the row."""
    @T.prim_func
    def main(X: T.Tensor((H, S, S), dt), Sl: T.Tensor((H,), "float32"), Y: T.Tensor((H, S, S), dt)):
        with T.Kernel(H, T.ceildiv(S, bm)) as (h, r):
            x = T.alloc_fragment((bm, S), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, S), dt)
            T.copy(X[h, r * bm:(r + 1) * bm, :], x)
            for i, j in T.Parallel(bm, S):
                if alibi:
                    x[i, j] = T.where(j > r * bm + i, -T.infinity("float32"),
                                      x[i, j] + Sl[h] * T.cast(j - (r * bm + i), "float32"))
                else:
                    x[i, j] = T.where(j > r * bm + i, -T.infinity("float32"), x[i, j])
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, S):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, S):
                y[i, j] = x[i, j] / sm[i]
            T.copy(y, Y[h, r * bm:(r + 1) * bm, :])

    return main


def _causal(alibi):
    def make(dt, shape, rng):
        H, S = shape
        x = randn(rng, (H, S, S), dt, 2.0)
        sl = (2.0 ** -np.arange(1, H + 1)).astype(np.float32)
        i, j = np.arange(S)[:, None], np.arange(S)[None, :]
        s = f64(x) + (sl[:, None, None] * (j - i) if alibi else 0)
        return causal_alibi_softmax, (H, S, dt, alibi), [x, sl], [_softmax64(np.where(j > i, -np.inf, s))]
    return make


@tw.jit(out_idx=[-1])
def rope_at_positions(Tn, D, P, dt, form="map"):
    """Half-split rotary embedding of each token at the position Pos[t], cos / sin tables (P, D / 2): `map` reads the
    second half at x[j + D / 2] in the map, `halves` copies the two halves into tiles of their own (the alignment
    error's hint)."""
    Hd = D // 2

    @T.prim_func
    def main(X: T.Tensor((Tn, D), dt), Pos: T.Tensor((Tn,), "int32"), Cs: T.Tensor((P, Hd), "float32"),
             Sn: T.Tensor((P, Hd), "float32"), Y: T.Tensor((Tn, D), dt)):
        with T.Kernel(Tn) as t:
            c = T.alloc_fragment((Hd,), "float32")
            s = T.alloc_fragment((Hd,), "float32")
            T.copy(Cs[Pos[t], :], c)
            T.copy(Sn[Pos[t], :], s)
            if form == "map":
                x = T.alloc_fragment((D,), "float32")
                y = T.alloc_fragment((D,), dt)
                T.copy(X[t, :], x)
                for j in T.Parallel(Hd):
                    y[j] = x[j] * c[j] - x[j + Hd] * s[j]
                    y[j + Hd] = x[j + Hd] * c[j] + x[j] * s[j]
                T.copy(y, Y[t, :])
            else:
                x1 = T.alloc_fragment((Hd,), "float32")
                x2 = T.alloc_fragment((Hd,), "float32")
                y1 = T.alloc_fragment((Hd,), dt)
                y2 = T.alloc_fragment((Hd,), dt)
                T.copy(X[t, 0:Hd], x1)
                T.copy(X[t, Hd:D], x2)
                for j in T.Parallel(Hd):
                    y1[j] = x1[j] * c[j] - x2[j] * s[j]
                    y2[j] = x2[j] * c[j] + x1[j] * s[j]
                T.copy(y1, Y[t, 0:Hd])
                T.copy(y2, Y[t, Hd:D])

    return main


def _rope(form):
    def make(dt, shape, rng):
        return _rope_case(dt, shape, rng, form)
    return make


def _rope_case(dt, shape, rng, form):
    Tn, D, P = shape
    Hd = D // 2
    x = randn(rng, (Tn, D), dt)
    pos = rng.integers(0, P, Tn).astype(np.int32)
    pos[0] = P - 1
    ang = np.arange(P)[:, None] * (10000.0 ** (-np.arange(Hd) / Hd))[None, :]
    cs, sn = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    X, C, S = f64(x), f64(cs)[pos], f64(sn)[pos]
    ref = np.concatenate([X[:, :Hd] * C - X[:, Hd:] * S, X[:, Hd:] * C + X[:, :Hd] * S], 1)
    return rope_at_positions, (Tn, D, P, dt, form), [x, pos, cs, sn], [ref]


# ----------------------------------------------------------------------------------------------- row reductions
@tw.jit(out_idx=[-1])
def row_stat(M, N, dt, stat, bm=BM):
    """logsumexp / unbiased variance (torch.var's correction=1) of each row."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            if stat == "logsumexp":
                T.reduce_max(x, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - r[i])
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(bm):
                    s[i] = T.log(s[i]) + r[i]
            else:
                T.reduce_sum(x, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = (x[i, j] - r[i] / N) * (x[i, j] - r[i] / N)
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(bm):
                    s[i] = s[i] / (N - 1)
            T.copy(s, Y[bx * bm])

    return main


def _row_stat(stat):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt, 3.0) + np.asarray(5.0, npdt(dt))
        X = f64(x)
        if stat == "logsumexp":
            ref = np.log(np.exp(X - X.max(1, keepdims=True)).sum(1)) + X.max(1)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):  # N = 1: 0 / 0, NaN as torch.var
                ref = X.var(1, ddof=1) if N > 1 else np.full(M, np.nan)
        return row_stat, (M, N, dt, stat), [x], [ref]
    return make


@tw.jit(out_idx=[-1])
def cosine_sim(M, N, dt, bm=BM, eps=1e-8):
    @T.prim_func
    def main(A: T.Tensor((M, N), dt), B: T.Tensor((M, N), dt), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), "float32")
            b = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            ab = T.alloc_fragment((bm,), "float32")
            aa = T.alloc_fragment((bm,), "float32")
            bb = T.alloc_fragment((bm,), "float32")
            T.copy(A[bx * bm, 0], a)
            T.copy(B[bx * bm, 0], b)
            for i, j in T.Parallel(bm, N):
                p[i, j] = a[i, j] * b[i, j]
            T.reduce_sum(p, ab, dim=1)
            for i, j in T.Parallel(bm, N):
                p[i, j] = a[i, j] * a[i, j]
            T.reduce_sum(p, aa, dim=1)
            for i, j in T.Parallel(bm, N):
                p[i, j] = b[i, j] * b[i, j]
            T.reduce_sum(p, bb, dim=1)
            for i in T.Parallel(bm):
                ab[i] = ab[i] / T.max(T.sqrt(aa[i] * bb[i]), eps)
            T.copy(ab, Y[bx * bm])

    return main


def _cosine(dt, shape, rng):
    M, N = shape
    a, b = randn(rng, shape, dt), randn(rng, shape, dt)
    A, Bm = f64(a), f64(b)
    ref = (A * Bm).sum(1) / np.maximum(np.sqrt((A * A).sum(1) * (Bm * Bm).sum(1)), 1e-8)
    return cosine_sim, (M, N, dt), [a, b], [ref]


@tw.jit(out_idx=[-1])
def pairwise_dist(M, N, K, dt, bm=16, bn=16):
    """torch.cdist(X, Y): sqrt(max(|x|^2 + |y|^2 - 2 x.y, 0)), x.y by a gemm with transpose_B."""
    @T.prim_func
    def main(X: T.Tensor((M, K), dt), Yt: T.Tensor((N, K), dt), D: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_shared((bm, K), dt)
            y = T.alloc_shared((bn, K), dt)
            acc = T.alloc_fragment((bm, bn), "float32")
            xf = T.alloc_fragment((bm, K), "float32")
            yf = T.alloc_fragment((bn, K), "float32")
            xx = T.alloc_fragment((bm,), "float32")
            yy = T.alloc_fragment((bn,), "float32")
            T.copy(X[by * bm, 0], x)
            T.copy(Yt[bx * bn, 0], y)
            T.gemm(x, y, acc, transpose_B=True, clear_accum=True)
            T.copy(X[by * bm, 0], xf)
            T.copy(Yt[bx * bn, 0], yf)
            for i, k in T.Parallel(bm, K):
                xf[i, k] = xf[i, k] * xf[i, k]
            for i, k in T.Parallel(bn, K):
                yf[i, k] = yf[i, k] * yf[i, k]
            T.reduce_sum(xf, xx, dim=1)
            T.reduce_sum(yf, yy, dim=1)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = T.sqrt(T.max(xx[i] + yy[j] - 2.0 * acc[i, j], 0.0))
            T.copy(acc, D[by * bm, bx * bn])

    return main


def _pairwise(dt, shape, rng):
    M, N, K = shape
    x, y = randn(rng, (M, K), dt), randn(rng, (N, K), dt)
    X, Y = f64(x), f64(y)
    return pairwise_dist, (M, N, K, dt), [x, y], [np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))]


@tw.jit(out_idx=[-1])
def mean_hw(B, Hh, W, dt):
    """x.mean(dim=(1, 2)) of (B, H, W)."""
    @T.prim_func
    def main(X: T.Tensor((B, Hh, W), dt), Y: T.Tensor((B,), "float32")):
        with T.Kernel(B) as b:
            x = T.alloc_fragment((Hh, W), "float32")
            r = T.alloc_fragment((Hh,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[b, :, :], x)
            T.reduce_sum(x, r, dim=1)
            T.reduce_sum(r, s, dim=0)
            s[0] = s[0] / (Hh * W)
            T.copy(s, Y[b])

    return main


def _mean_hw(dt, shape, rng):
    B, Hh, W = shape
    x = randn(rng, shape, dt)
    return mean_hw, (B, Hh, W, dt), [x], [f64(x).mean((1, 2))]


# ----------------------------------------------------------------------------------------------- elementwise
@tw.jit(out_idx=[-1])
def act(M, N, dt, kind, bm=BM):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), lo: T.float32, hi: T.float32, Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            y = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                v = x[i, j]
                if kind == "clamp":
                    y[i, j] = T.min(T.max(v, lo), hi)
                elif kind == "hardswish":
                    y[i, j] = v * T.min(T.max(v + 3.0, 0.0), 6.0) / 6.0
                elif kind == "softplus":  # torch's threshold 20
                    y[i, j] = T.where(v > 20.0, v, T.log(1.0 + T.exp(v)))
                else:  # mish
                    y[i, j] = v * T.tanh(T.where(v > 20.0, v, T.log(1.0 + T.exp(v))))
            T.copy(y, Y[bx * bm, 0])

    return main


def _act(kind):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt, 4.0)
        x.flat[:3] = [25.0, -30.0, 3.0][:x.size] if x.size >= 3 else x.flat[:3]
        X = f64(x)
        sp = np.where(X > 20, X, np.log1p(np.exp(X)))
        ref = {"clamp": np.clip(X, -1.5, 2.25), "hardswish": X * np.clip(X + 3, 0, 6) / 6,
               "softplus": sp, "mish": X * np.tanh(sp)}[kind]
        return act, (M, N, dt, kind), [x, -1.5, 2.25], [ref]
    return make


@tw.jit(out_idx=[-1])
def scan_rows(M, N, dt, op, bm=BM):
    """cumsum / cumprod along each row, one column at a time."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            for j in T.serial(1, N):
                for i in T.Parallel(bm):
                    if op == "cumsum":
                        x[i, j] = x[i, j] + x[i, j - 1]
                    else:
                        x[i, j] = x[i, j] * x[i, j - 1]
            T.copy(x, Y[bx * bm, 0])

    return main


def _scan(op):
    def make(dt, shape, rng):
        M, N = shape
        if dt == "int32":
            x = rng.integers(-50, 50, shape).astype(np.int32) if op == "cumsum" else rng.integers(-2, 3, shape).astype(np.int32)
        else:
            x = (randn(rng, shape, dt) if op == "cumsum" else (0.9 + 0.2 * rng.random(shape)).astype(npdt(dt)))
        X = f64(x)
        return scan_rows, (M, N, dt, op), [x], [np.cumsum(X, 1) if op == "cumsum" else np.cumprod(X, 1)]
    return make


@tw.jit(out_idx=[-1])
def shift_ops(M, N, dt, kind, bm=BM):
    """diff (x[j + 1] - x[j]) or reverse (x[N - 1 - j]) along each row."""
    No = N - 1 if kind == "diff" else N

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, No), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            y = T.alloc_fragment((bm, No), dt)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, No):
                if kind == "diff":
                    y[i, j] = x[i, j + 1] - x[i, j]
                else:
                    y[i, j] = x[i, N - 1 - j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _shift(kind):
    def make(dt, shape, rng):
        x = rng.integers(-100, 100, shape).astype(npdt(dt)) if dt in ("int32", "int8") else randn(rng, shape, dt)
        X = f64(x)
        return shift_ops, (*shape, dt, kind), [x], [X[:, 1:] - X[:, :-1] if kind == "diff" else X[:, ::-1]]
    return make


@tw.jit(out_idx=[-1])
def conv1d(M, N, dt, form, K=3, bm=BM):
    """A valid 1-D conv along each row with K taps from a tensor: `serial` / `unroll` shift the row tile by the tap
    (x[i, j + k]); `copies` copies each tap's shifted columns from global memory (the alignment error's hint)."""
    No = N - K + 1

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Wt: T.Tensor((K,), "float32"), Y: T.Tensor((M, No), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            xk = T.alloc_fragment((bm, No), dt)
            acc = T.alloc_fragment((bm, No), "float32")
            T.clear(acc)
            if form == "copies":
                for k in T.serial(K):
                    T.copy(X[bx * bm:(bx + 1) * bm, k:k + No], xk)
                    for i, j in T.Parallel(bm, No):
                        acc[i, j] = acc[i, j] + Wt[k] * xk[i, j]
            elif form == "unroll":
                T.copy(X[bx * bm, 0], x)
                for k in T.unroll(K):
                    for i, j in T.Parallel(bm, No):
                        acc[i, j] = acc[i, j] + Wt[k] * x[i, j + k]
            else:
                T.copy(X[bx * bm, 0], x)
                for k in T.serial(K):
                    for i, j in T.Parallel(bm, No):
                        acc[i, j] = acc[i, j] + Wt[k] * x[i, j + k]
            T.copy(acc, Y[bx * bm, 0])

    return main


def _conv(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt)
        w = np.array([0.25, -0.5, 1.0], np.float32)
        return conv1d, (M, N, dt, form), [x, w], [sum(f64(w)[k] * f64(x)[:, k:N - 2 + k] for k in range(3))]
    return make


@tw.jit(out_idx=[-1])
def transpose(M, N, dt, bm=BM):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((N, M), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            y = T.alloc_fragment((N, bm), dt)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                y[j, i] = x[i, j]
            T.copy(y, Y[0, bx * bm])

    return main


def _transpose(dt, shape, rng):
    x = rng.integers(-100, 100, shape).astype(npdt(dt)) if dt in ("int32", "int8") else randn(rng, shape, dt)
    return transpose, (*shape, dt), [x], [f64(x).T]


@tw.jit(out_idx=[1, 2])
def topk_rows(M, N, k, dt, bm=BM):
    """torch.topk(x, k): values descending, ties to the lowest index; k rounds of max / argmax / mask."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), V: T.Tensor((M, k), dt), I: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            pick = T.alloc_fragment((bm, N), "int32")
            idx = T.alloc_fragment((bm,), "int32")
            v = T.alloc_fragment((bm, k), dt)
            ix = T.alloc_fragment((bm, k), "int32")
            T.copy(X[bx * bm, 0], x)
            for t in T.serial(k):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, N):
                    pick[i, j] = T.where(x[i, j] == mx[i], j, N)
                T.reduce_min(pick, idx, dim=1)
                for i in T.Parallel(bm):
                    v[i, t] = mx[i]
                    ix[i, t] = idx[i]
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(j == idx[i], -T.infinity("float32"), x[i, j])
            T.copy(v, V[bx * bm, 0])
            T.copy(ix, I[bx * bm, 0])

    return main


def _topk(k):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt)
        X = f64(x)
        order = np.argsort(-X, axis=1, kind="stable")[:, :k]
        return topk_rows, (M, N, k, dt), [x], [np.take_along_axis(X, order, 1), order]
    return make


@tw.jit()
def histogram(Nn, nb, bs=16):
    """bincount: H[ids[e]] += 1 with T.atomic_add (H zeroed by the caller)."""
    @T.prim_func
    def main(Ids: T.Tensor((Nn,), "int32"), H: T.Tensor((nb,), "int32")):
        with T.Kernel(T.ceildiv(Nn, bs)) as bx:
            ids = T.alloc_fragment((bs,), "int32")
            T.copy(Ids[bx * bs], ids)
            for e in T.serial(bs):
                if bx * bs + e < Nn:
                    T.atomic_add(H[ids[e]], 1)

    return main


def _histogram(dt, shape, rng):
    Nn, nb = shape
    ids = rng.integers(0, nb, Nn).astype(np.int32)
    return histogram, (Nn, nb), [ids, np.zeros(nb, np.int32)], [np.bincount(ids, minlength=nb)]


# ----------------------------------------------------------------------------------------------- the table
# name -> (make, dtypes, shapes); the first shape is the usual one, the others the edges (1-element dims).
F3 = ("float32", "float16", "bfloat16")
CASES = {
    "swiglu": (_glu("swiglu"), F3, [(13, 37), (1, 1)]),
    "geglu": (_glu("geglu"), F3, [(13, 37)]),
    "geglu_tanh": (_glu("geglu_tanh"), F3, [(13, 37)]),
    "swiglu_tileloop": (_swiglu_tl, F3, [(13, 37), (1, 1)]),
    "group_norm": (_group_norm, ("float32", "bfloat16"), [(2, 6, 7, 3), (1, 1, 1, 1)]),
    "instance_norm": (_instance_norm, F3, [(2, 5, 9), (1, 1, 3)]),
    "quantize_int8": (_quantize, F3, [(13, 37), (1, 1)]),
    "dequantize_int8": (_dequantize, F3, [(13, 37), (1, 1)]),
    "dequant_matmul_copy": (_dequant_mm("copy"), ("float16", "bfloat16"), [(13, 37, 45), (1, 1, 1)]),
    "dequant_matmul_map": (_dequant_mm("map"), ("float16", "bfloat16"), [(13, 37, 45)]),
    "embedding_i32": (_embedding("tile", "int32"), F3, [(11, 37, 7), (1, 1, 1)]),
    "embedding_i64": (_embedding("tile", "int64"), ("float32", "bfloat16"), [(11, 37, 7)]),
    "embedding_gm2gm": (_embedding("gm", "int32"), ("float32", "float16"), [(11, 37, 7)]),
    "repeat_kv": (_repeat_kv, F3, [(2, 2, 3, 7, 5), (1, 1, 1, 1, 1)]),
    "kv_append": (_kv_append, ("float16", "bfloat16", "float32"), [(3, 9, 3, 5), (1, 1, 1, 1)]),
    "argmax_temperature": (_argmax_sample, F3, [(13, 37), (1, 1)]),
    "masked_fill_softmax": (_masked_softmax, F3, [(13, 37), (1, 1)]),
    "causal_softmax_iota": (_causal(False), F3, [(2, 13), (1, 1)]),
    "alibi_causal_softmax": (_causal(True), ("float32", "float16"), [(3, 13)]),
    "rope_positions": (_rope("map"), F3, [(5, 32, 11), (5, 12, 11), (1, 2, 1)]),
    "logsumexp": (_row_stat("logsumexp"), F3, [(13, 37), (1, 1)]),
    "var_unbiased": (_row_stat("var"), F3, [(13, 37), (1, 2)]),
    "cosine_similarity": (_cosine, F3, [(13, 37), (1, 1)]),
    "pairwise_dist": (_pairwise, ("float32", "float16"), [(13, 11, 7), (1, 1, 1)]),
    "mean_two_axes": (_mean_hw, F3, [(3, 5, 7), (1, 1, 1)]),
    "clamp": (_act("clamp"), F3, [(13, 37), (1, 1)]),
    "hardswish": (_act("hardswish"), F3, [(13, 37)]),
    "softplus": (_act("softplus"), F3, [(13, 37)]),
    "mish": (_act("mish"), F3, [(13, 37)]),
    "cumsum_rows": (_scan("cumsum"), ("float32", "int32"), [(13, 37), (1, 1)]),
    "cumprod_rows": (_scan("cumprod"), ("float32", "bfloat16", "int32"), [(13, 11)]),
    "diff_rows": (_shift("diff"), ("float32", "float16", "int32"), [(13, 37), (1, 2)]),
    "conv1d_rows": (_conv("serial"), ("float32", "float16"), [(13, 37), (1, 3)]),
    "reverse_rows": (_shift("reverse"), ("float32", "bfloat16", "int32", "int8"), [(13, 37), (1, 1)]),
    "transpose_tile": (_transpose, ("float32", "float16", "int32", "int8"), [(13, 37), (1, 1)]),
    "topk2": (_topk(2), ("float32", "float16"), [(13, 37), (1, 2)]),
    "topk3": (_topk(3), ("bfloat16",), [(13, 37)]),
    "topk4": (_topk(4), ("float32",), [(13, 37)]),
    "histogram_atomic": (_histogram, ("int32",), [(37, 5), (1, 1)]),
}


# ----------------------------------------------------------------------------------------------- the alternatives the errors name, and more forms
@tw.jit(out_idx=[-1])
def diff_two_copies(M, N, dt, bm=BM):
    """diff as the error's hint says: the shifted columns copied from global memory into a tile of their own."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N - 1), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N - 1), dt)
            b = T.alloc_fragment((bm, N - 1), dt)
            T.copy(X[bx * bm:(bx + 1) * bm, 0:N - 1], a)
            T.copy(X[bx * bm:(bx + 1) * bm, 1:N], b)
            for i, j in T.Parallel(bm, N - 1):
                b[i, j] = b[i, j] - a[i, j]
            T.copy(b, Y[bx * bm, 0])

    return main


def _diff2(dt, shape, rng):
    M, N = shape
    x = rng.integers(-100, 100, shape).astype(npdt(dt)) if dt == "int32" else randn(rng, shape, dt)
    return diff_two_copies, (M, N, dt), [x], [f64(x)[:, 1:] - f64(x)[:, :-1]]


@tw.jit(out_idx=[-1])
def transpose_cube(M, N, dt, bm=16):
    """The transpose the error's hint names: I @ x^T on the Cube (eye an identity shared tile)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((N, M), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            eye = T.alloc_shared((N, N), dt)
            x = T.alloc_shared((bm, N), dt)
            c = T.alloc_fragment((N, bm), "float32")
            for i, j in T.Parallel(N, N):
                eye[i, j] = T.where(i == j, 1, 0)
            T.copy(X[bx * bm, 0], x)
            T.gemm(eye, x, c, transpose_B=True, clear_accum=True)
            T.copy(c, Y[0, bx * bm])

    return main


def _transpose2(dt, shape, rng):
    x = randn(rng, shape, dt)
    return transpose_cube, (*shape, dt), [x], [f64(x).T]


@tw.jit(out_idx=[-1])
def reverse_via_int32(M, N, bm=BM):
    """int8 reverse as the error's hint says: gather from an int32 copy."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int8")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "int32")
            y = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                y[i, j] = x[i, N - 1 - j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _reverse2(dt, shape, rng):
    x = rng.integers(-128, 128, shape).astype(np.int8)
    return reverse_via_int32, shape, [x], [f64(x)[:, ::-1]]


@tw.jit(out_idx=[-1])
def silu_and_mul(M, N, dt, form, bm=BM):
    """vLLM's silu_and_mul: X (M, 2N) holds gate | up; `map` reads up at x[i, j + N] in the map, `copies` copies the
    halves into tiles of their own."""
    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, N), dt)
            if form == "map":
                x = T.alloc_fragment((bm, 2 * N), "float32")
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.silu(x[i, j]) * x[i, j + N]
            else:
                g = T.alloc_fragment((bm, N), "float32")
                u = T.alloc_fragment((bm, N), "float32")
                T.copy(X[bx * bm:(bx + 1) * bm, 0:N], g)
                T.copy(X[bx * bm:(bx + 1) * bm, N:2 * N], u)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.silu(g[i, j]) * u[i, j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _silu_and_mul(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, (M, 2 * N), dt)
        G, U = f64(x)[:, :N], f64(x)[:, N:]
        return silu_and_mul, (M, N, dt, form), [x], [G / (1 + np.exp(-G)) * U]
    return make


@tw.jit(out_idx=[-1])
def group_dequant_matmul(M, N, K, dt, gs=16, bm=16, bn=32):
    """GPTQ / AWQ style: int8 weights with a scale per group of gs rows of K and per column (Sc (K // gs, N));
    each K group's gemm is scaled and added into the result."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dt), W: T.Tensor((K, N), "int8"), Sc: T.Tensor((K // gs, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a_s = T.alloc_shared((bm, gs), dt)
            w_s = T.alloc_shared((gs, bn), "int8")
            w_h = T.alloc_shared((gs, bn), dt)
            part = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            sc = T.alloc_fragment((bn,), "float32")
            T.clear(acc)
            for k in T.serial(K // gs):
                T.copy(A[by * bm, k * gs], a_s)
                T.copy(W[k * gs, bx * bn], w_s)
                T.copy(w_s, w_h)
                T.gemm(a_s, w_h, part, clear_accum=True)
                T.copy(Sc[k, bx * bn], sc)
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + part[i, j] * sc[j]
            T.copy(acc, C[by * bm, bx * bn])

    return main


def _group_dq(dt, shape, rng):
    M, N, K = shape
    a = randn(rng, (M, K), dt)
    w = rng.integers(-127, 128, (K, N)).astype(np.int8)
    sc = (rng.random((K // 16, N)) * 0.02 + 0.001).astype(np.float32)
    ref = sum((f64(a)[:, g * 16:(g + 1) * 16] @ f64(w)[g * 16:(g + 1) * 16]) * f64(sc)[g] for g in range(K // 16))
    return group_dequant_matmul, (M, N, K, dt), [a, w, sc], [ref]


@tw.jit(out_idx=[-1])
def int4_unpack(M, N, form, bm=BM):
    """Two int4 values per uint8 byte (low nibble first), unpacked to float32 minus 8 (symmetric int4)."""
    @T.prim_func
    def main(Wp: T.Tensor((M, N), "uint8"), Y: T.Tensor((M, 2 * N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, 2 * N), "float32")
            if form == "uint8":
                w = T.alloc_fragment((bm, N), "uint8")
            else:  # the alternative: widen to int32 first
                w = T.alloc_fragment((bm, N), "int32")
            T.copy(Wp[bx * bm, 0], w)
            for i, j in T.Parallel(bm, N):
                y[i, 2 * j] = T.cast(w[i, j] & 15, "float32") - 8.0
                y[i, 2 * j + 1] = T.cast(w[i, j] >> 4, "float32") - 8.0
            T.copy(y, Y[bx * bm, 0])

    return main


def _int4(form):
    def make(dt, shape, rng):
        M, N = shape
        w = rng.integers(0, 256, shape).astype(np.uint8)
        W = w.astype(np.int64)
        ref = np.stack([W & 15, W >> 4], -1).reshape(M, 2 * N) - 8.0
        return int4_unpack, (M, N, form), [w], [ref]
    return make


@tw.jit(out_idx=[-1])
def alibi_slopes_inkernel(H, S, dt, bm=BM):
    """ALiBi with the slope computed in the kernel: 2^(-8 (h + 1) / H), a scalar let before the map."""
    @T.prim_func
    def main(X: T.Tensor((H, S, S), dt), Y: T.Tensor((H, S, S), "float32")):
        with T.Kernel(H, T.ceildiv(S, bm)) as (h, r):
            x = T.alloc_fragment((bm, S), "float32")
            T.copy(X[h, r * bm:(r + 1) * bm, :], x)
            slope = T.exp2(-8.0 * T.cast(h + 1, "float32") / H)
            for i, j in T.Parallel(bm, S):
                x[i, j] = x[i, j] + slope * T.cast(j - (r * bm + i), "float32")
            T.copy(x, Y[h, r * bm:(r + 1) * bm, :])

    return main


def _alibi_inkernel(dt, shape, rng):
    H, S = shape
    x = randn(rng, (H, S, S), dt)
    sl = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    return alibi_slopes_inkernel, (H, S, dt), [x], [f64(x) + sl[:, None, None] * (j - i)]


@tw.jit(out_idx=[-1])
def temp_per_row(M, N, dt, form, bm=BM):
    """Per-request temperatures: x / Tp[row]; `gm` reads the row's temperature from the tensor in the map (clamped
    to the last row for the tail block), `tile` copies the block's temperatures into a tile first (the error's hint)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Tp: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            tp = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Tp[bx * bm], tp)
            for i, j in T.Parallel(bm, N):
                if form == "gm":
                    x[i, j] = x[i, j] / Tp[T.min(bx * bm + i, M - 1)]
                else:
                    x[i, j] = x[i, j] / tp[i]
            T.copy(x, Y[bx * bm, 0])

    return main


def _temp_per_row(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt)
        tp = (0.5 + rng.random(M)).astype(np.float32)
        return temp_per_row, (M, N, dt, form), [x, tp], [f64(x) / f64(tp)[:, None]]
    return make


@tw.jit()
def weighted_histogram(Nn, nb, bs=16):
    """bincount(ids, weights): H[ids[e]] += w[e], float32 atomics."""
    @T.prim_func
    def main(Ids: T.Tensor((Nn,), "int32"), Wt: T.Tensor((Nn,), "float32"), H: T.Tensor((nb,), "float32")):
        with T.Kernel(T.ceildiv(Nn, bs)) as bx:
            ids = T.alloc_fragment((bs,), "int32")
            w = T.alloc_fragment((bs,), "float32")
            T.copy(Ids[bx * bs], ids)
            T.copy(Wt[bx * bs], w)
            for e in T.serial(bs):
                if bx * bs + e < Nn:
                    T.atomic_add(H[ids[e]], w[e])

    return main


def _whist(dt, shape, rng):
    Nn, nb = shape
    ids = rng.integers(0, nb, Nn).astype(np.int32)
    w = (rng.integers(-8, 8, Nn) / 4).astype(np.float32)
    return weighted_histogram, (Nn, nb), [ids, w, np.zeros(nb, np.float32)], [np.bincount(ids, w, minlength=nb)]


@tw.jit(out_idx=[-1])
def embedding_oob(V, D, Tn, dt):
    """Ids outside [0, V) (padding -1, V): the copy's rows outside the table read as 0 (docs: tails)."""
    @T.prim_func
    def main(E: T.Tensor((V, D), dt), Ids: T.Tensor((Tn,), "int32"), O: T.Tensor((Tn, D), dt)):
        with T.Kernel(Tn) as t:
            row = T.alloc_fragment((D,), dt)
            T.copy(E[Ids[t], :], row)
            T.copy(row, O[t, :])

    return main


def _emb_oob(dt, shape, rng):
    V, D, Tn = shape
    e = randn(rng, (V, D), dt)
    ids = rng.integers(0, V, Tn).astype(np.int32)
    ids[0], ids[1] = -1, V
    ref = np.where(((ids >= 0) & (ids < V))[:, None], f64(e)[np.clip(ids, 0, V - 1)], 0.0)
    return embedding_oob, (V, D, Tn, dt), [e, ids], [ref]


@tw.jit(out_idx=[-1])
def clamp_int(M, N, bm=BM):
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), lo: T.int32, hi: T.int32, Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.min(T.max(x[i, j], lo), hi)
            T.copy(x, Y[bx * bm, 0])

    return main


def _clamp_int(dt, shape, rng):
    x = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    return clamp_int, shape, [x, -1000, 2 ** 30], [np.clip(x.astype(np.int64), -1000, 2 ** 30)]


@tw.jit(out_idx=[-1])
def softmax_dim0(M, N, dt, bn=16):
    """softmax over dim 0 (down each column) of an (M, N) tensor, column blocks."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            x = T.alloc_fragment((M, bn), "float32")
            mx = T.alloc_fragment((bn,), "float32")
            sm = T.alloc_fragment((bn,), "float32")
            y = T.alloc_fragment((M, bn), dt)
            T.copy(X[0, bx * bn], x)
            T.reduce_max(x, mx, dim=0)
            for i, j in T.Parallel(M, bn):
                x[i, j] = T.exp(x[i, j] - mx[j])
            T.reduce_sum(x, sm, dim=0)
            for i, j in T.Parallel(M, bn):
                y[i, j] = x[i, j] / sm[j]
            T.copy(y, Y[0, bx * bn])

    return main


def _softmax0(dt, shape, rng):
    x = randn(rng, shape, dt)
    return softmax_dim0, (*shape, dt), [x], [_softmax64(f64(x).T).T]


CASES.update({
    "diff_two_copies": (_diff2, ("float32", "float16", "int32"), [(13, 37), (1, 2)]),
    "conv1d_copies": (_conv("copies"), ("float32", "float16"), [(13, 37), (1, 3)]),
    "conv1d_unrolled": (_conv("unroll"), ("float32", "float16"), [(13, 37), (1, 3)]),
    "rope_halves": (_rope("halves"), F3, [(5, 12, 11), (1, 2, 1)]),
    "transpose_cube": (_transpose2, ("float32", "float16", "bfloat16"), [(13, 37), (1, 1)]),
    "reverse_int8_via_int32": (_reverse2, ("int8",), [(13, 37), (1, 1)]),
    "silu_and_mul_map": (_silu_and_mul("map"), ("float32", "bfloat16"), [(13, 37), (3, 8)]),
    "silu_and_mul_copies": (_silu_and_mul("copies"), ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "group_dequant_matmul": (_group_dq, ("float16", "bfloat16"), [(13, 37, 48), (1, 1, 16)]),
    "int4_unpack_uint8": (_int4("uint8"), ("uint8",), [(13, 19)]),
    "int4_unpack_int32": (_int4("int32"), ("uint8",), [(13, 19), (1, 1)]),
    "alibi_slopes_inkernel": (_alibi_inkernel, ("float32",), [(3, 13)]),
    "temperature_per_row_gm": (_temp_per_row("gm"), ("float32", "float16"), [(13, 37)]),
    "temperature_per_row_tile": (_temp_per_row("tile"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "weighted_histogram": (_whist, ("float32",), [(37, 5), (1, 1)]),
    "embedding_oob_ids": (_emb_oob, ("float32", "float16"), [(11, 37, 7)]),
    "clamp_int32": (_clamp_int, ("int32",), [(13, 37), (1, 1)]),
    "softmax_dim0": (_softmax0, F3, [(13, 37), (1, 1)]),
    "var_unbiased_n1": (_row_stat("var"), ("float32",), [(3, 1)]),
})


@tw.jit(out_idx=[-1])
def w8a8_matmul(M, N, K, form, bm=16, bn=32, bk=32):
    """W8A8: int8 activations and weights, int32 accumulation, per-row and per-column scales, float16 out. `kn`: W as
    (K, N) like torch's x @ W; `nk`: W as (N, K) with transpose_B (nn.Linear's layout, the error's hint)."""
    wshape = (K, N) if form == "kn" else (N, K)

    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), W: T.Tensor(wshape, "int8"), Sa: T.Tensor((M,), "float32"),
             Sw: T.Tensor((N,), "float32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "int8")
            w = T.alloc_shared((bk, bn) if form == "kn" else (bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            sa = T.alloc_fragment((bm,), "float32")
            sw = T.alloc_fragment((bn,), "float32")
            c = T.alloc_fragment((bm, bn), "float16")
            T.clear(acc)
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, k * bk], a)
                if form == "kn":
                    T.copy(W[k * bk, bx * bn], w)
                    T.gemm(a, w, acc)
                else:
                    T.copy(W[bx * bn, k * bk], w)
                    T.gemm(a, w, acc, transpose_B=True)
            T.copy(Sa[by * bm], sa)
            T.copy(Sw[bx * bn], sw)
            for i, j in T.Parallel(bm, bn):
                c[i, j] = acc[i, j] * sa[i] * sw[j]
            T.copy(c, C[by * bm, bx * bn])

    return main


def _w8a8(form):
    def make(dt, shape, rng):
        M, N, K = shape
        a = rng.integers(-127, 128, (M, K)).astype(np.int8)
        w = rng.integers(-127, 128, (K, N)).astype(np.int8)
        sa = (rng.random(M) * 0.01).astype(np.float32)
        sw = (rng.random(N) * 0.01).astype(np.float32)
        ref = (a.astype(np.int64) @ w.astype(np.int64)) * f64(sa)[:, None] * f64(sw)[None, :]
        return w8a8_matmul, (M, N, K, form), [a, w if form == "kn" else np.ascontiguousarray(w.T), sa, sw], [ref]
    return make


CASES.update({
    "w8a8_matmul_kn": (_w8a8("kn"), ("float16",), [(13, 37, 45)]),
    "w8a8_matmul_nk": (_w8a8("nk"), ("float16",), [(13, 37, 45), (1, 1, 1)]),
})


def build(name, dt, shape, seed=0, cases=None):
    """(kernel_of(target), inputs, refs); cases: a table like CASES (port34_kernels.py passes its own)"""
    make = (cases or CASES)[name][0]
    fac, args, inputs, refs = make(dt, shape, np.random.default_rng(seed))
    if fac == "tileloop":
        tl = args[0](*args[1:])
        return (lambda target: tw.compile(tl, target=target)), inputs, refs
    return (lambda target: fac(*args, target=target)), inputs, refs


def assert_close_f32(got, ref):
    atol, rtol = TOL["float32"]
    np.testing.assert_allclose(f64(got), ref, atol=atol, rtol=rtol, equal_nan=True)


def run(name, dt, shape, target, cases=None):
    """The outputs on target (ascend910b: the simulator with the checker; a report raises AssertionError)."""
    kernel_of, inputs, refs = build(name, dt, shape, cases=cases)
    inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    k = kernel_of(target)
    if target == "cpu":
        out = k(*inputs)
    else:
        out = run_checked(k, *inputs)
    if out is None or (isinstance(out, (list, tuple)) and len(out) == 0):
        # in-place kernels: the written inputs (kv_append's cache, histogram's counts)
        out = [inputs[0]] if name == "kv_append" else [inputs[-1]]
    elif not isinstance(out, (list, tuple)):
        out = [out]
    return list(out), refs


def check(name, dt, shape, target, cases=None):
    outs, refs = run(name, dt, shape, target, cases)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        o = np.asarray(o)
        assert o.shape == r.shape, (o.shape, r.shape)
        if np.issubdtype(o.dtype, np.integer) or o.dtype == np.bool_:
            np.testing.assert_array_equal(o.astype(np.int64), np.asarray(r).astype(np.int64))
        else:
            atol, rtol = TOL[str(o.dtype) if str(o.dtype) in TOL else "float32"]
            if name in ("quantize_int8",) and o.dtype == np.float32:
                np.testing.assert_array_equal(o, r.astype(np.float32))
                continue
            np.testing.assert_allclose(f64(o), r, atol=atol, rtol=rtol, equal_nan=True)


def probe(names, cases=None, targets=("cpu", "ascend910b")):
    """Runs every dtype and shape of the named cases on the targets and prints each outcome."""
    cases = cases or CASES
    for name in names or list(cases):
        _, dts, shapes = cases[name]
        for dt in dts:
            for shape in shapes:
                for target in targets:
                    try:
                        check(name, dt, shape, target, cases)
                        print(f"OK   {name} {dt} {shape} {target}", flush=True)
                    except Exception as e:  # the probe prints every outcome
                        msg = str(e).strip().replace("\n", "\n       ")
                        print(f"FAIL {name} {dt} {shape} {target}: {type(e).__name__}: {msg[:1500]}", flush=True)


if __name__ == "__main__":
    import sys
    probe(sys.argv[1:])
