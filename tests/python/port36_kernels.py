"""Session 36's portability hunt (h-port36, docs/testing.md "Session 36: port36"): more user kernel forms, not
covered by port33_kernels.py / port34_kernels.py / port35_kernels.py (LLM inference: partial rotary, ALiBi /
sliding-window / sink decode attention, final-logit soft-capping, asymmetric KV-cache int8 quantisation per token
and per channel, per-token-group quantisation, clamped SwiGLU, presence / frequency penalties, logit bias, min
tokens, beam-search steps, typical acceptance, cross-entropy with ignore_index / soft targets / z-loss, token
log-probs, GRPO's KL and advantages, add + LayerNorm residual, layer scale; vision: depthwise conv2d, bilinear
resize, nearest upsampling, box IoU, soft-NMS, box decoding, image normalisation, BatchNorm eval, pixel norm; misc:
bincount, segment max, searchsorted, unique-consecutive, cumulative max, logcumsumexp, sorting small rows by rank,
clamp by tensors, EMA, lerp, remainder, nan_to_num), written for cpu first as docs/language.md teaches, each a
`tw.jit` factory, then the same factory with only the target changed to ascend910b (simulator, checker on).

CASES as in port35_kernels.py (whose check / probe take cases=); `python port36_kernels.py [--target=T] [names]`
runs every case (the probe).
"""
import functools
import math

import numpy as np

import tilewright as tw
import tilewright.language as T
import port35_kernels as P35
from port33_kernels import BM, f64, npdt, randn, _softmax64

F3 = ("float32", "float16", "bfloat16")
F2 = ("float32", "float16")
H16 = ("float16", "bfloat16")
NEG = -1e30
MAGIC = 12582912.0  # 1.5 * 2^23: (v + MAGIC) - MAGIC rounds half to even in float32


def _rne(v):
    return np.round(v)  # numpy rounds half to even


def _lse(s):
    m = s.max(-1, keepdims=True)
    return (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]


# ----------------------------------------------------------------------------------------------- rotary
@tw.jit(out_idx=[-1])
def rope_partial(Tn, H, D, R, P, dt):
    """Partial rotary (GPT-NeoX rotary_pct / Phi): the first R of D dims rotated by halves at Pos[t] (int32
    position ids, cos / sin cache (P, R / 2)), the other D - R dims passed through."""
    R2 = R // 2

    @T.prim_func
    def main(X: T.Tensor((Tn, H, D), dt), Pos: T.Tensor((Tn,), "int32"), Cs: T.Tensor((P, R2), "float32"),
             Sn: T.Tensor((P, R2), "float32"), Y: T.Tensor((Tn, H, D), dt)):
        with T.Kernel(Tn) as t:
            c = T.alloc_fragment((R2,), "float32")
            s = T.alloc_fragment((R2,), "float32")
            x1 = T.alloc_fragment((H, R2), "float32")
            x2 = T.alloc_fragment((H, R2), "float32")
            y1 = T.alloc_fragment((H, R2), dt)
            y2 = T.alloc_fragment((H, R2), dt)
            xp = T.alloc_fragment((H, D - R), dt)
            T.copy(Cs[Pos[t], :], c)
            T.copy(Sn[Pos[t], :], s)
            T.copy(X[t, :, 0:R2], x1)
            T.copy(X[t, :, R2:R], x2)
            T.copy(X[t, :, R:D], xp)
            for h, j in T.Parallel(H, R2):
                y1[h, j] = x1[h, j] * c[j] - x2[h, j] * s[j]
                y2[h, j] = x2[h, j] * c[j] + x1[h, j] * s[j]
            T.copy(y1, Y[t, :, 0:R2])
            T.copy(y2, Y[t, :, R2:R])
            T.copy(xp, Y[t, :, R:D])

    return main


def _rope_partial(dt, shape, rng):
    Tn, H, D, R, P = shape
    R2 = R // 2
    x = randn(rng, (Tn, H, D), dt)
    pos = rng.integers(0, P, Tn).astype(np.int32)
    ang = np.arange(P)[:, None] * (10000.0 ** (-np.arange(R2) / R2))[None, :]
    cs, sn = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    X = f64(x)
    C, S = f64(cs)[pos][:, None, :], f64(sn)[pos][:, None, :]
    a, b = X[..., :R2], X[..., R2:R]
    ref = np.concatenate([a * C - b * S, b * C + a * S, X[..., R:]], -1)
    return rope_partial, (Tn, H, D, R, P, dt), [x, pos, cs, sn], [ref]


# ----------------------------------------------------------------------------------------------- decode attention
@tw.jit(out_idx=[-1])
def decode_attn(B, H, L, D, dt, form, W=5):
    """Single-query decode attention of H heads over a sequence's first Len[b] cached keys (B, L, D), the heads as
    the gemm's rows: `alibi` adds slope[h] * (j - (len - 1)) (BLOOM at decode); `window` keeps only the last W
    keys (Mistral's sliding window); `sink` adds a per-head sink logit to the softmax's denominator (GPT-OSS)."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), dt), K: T.Tensor((B, L, D), dt), V: T.Tensor((B, L, D), dt),
             Sl: T.Tensor((H,), "float32"), Len: T.Tensor((B,), "int32"), O: T.Tensor((B, H, D), dt)):
        with T.Kernel(B) as b:
            q = T.alloc_shared((H, D), dt)
            k = T.alloc_shared((L, D), dt)
            v = T.alloc_shared((L, D), dt)
            s = T.alloc_fragment((H, L), "float32")
            p = T.alloc_shared((H, L), dt)
            sl = T.alloc_fragment((H,), "float32")
            mx = T.alloc_fragment((H,), "float32")
            sm = T.alloc_fragment((H,), "float32")
            acc = T.alloc_fragment((H, D), "float32")
            n = Len[b]
            T.copy(Q[b, 0, 0], q)
            T.copy(K[b, 0, 0], k)
            T.copy(V[b, 0, 0], v)
            T.copy(Sl, sl)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            for h, j in T.Parallel(H, L):
                if form == "alibi":
                    s[h, j] = T.where(j < n, s[h, j] * scale + sl[h] * (j - (n - 1)), NEG)
                elif form == "window":
                    s[h, j] = T.where(j < n and j >= n - W, s[h, j] * scale, NEG)
                else:
                    s[h, j] = T.where(j < n, s[h, j] * scale, NEG)
            T.reduce_max(s, mx, dim=1)
            if form == "sink":
                for h in T.Parallel(H):
                    mx[h] = T.max(mx[h], sl[h])
            for h, j in T.Parallel(H, L):
                s[h, j] = T.exp(s[h, j] - mx[h])
            T.reduce_sum(s, sm, dim=1)
            if form == "sink":
                for h in T.Parallel(H):
                    sm[h] = sm[h] + T.exp(sl[h] - mx[h])
            for h, j in T.Parallel(H, L):
                p[h, j] = s[h, j] / sm[h]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O[b, 0, 0])

    return main


def _decode_attn(form):
    def make(dt, shape, rng):
        B, H, L, D = shape
        q, k, v = randn(rng, (B, H, D), dt), randn(rng, (B, L, D), dt), randn(rng, (B, L, D), dt)
        sl = (rng.standard_normal(H) if form == "sink" else 2.0 ** (-8 * (np.arange(H) + 1) / H)).astype(np.float32)
        ln = rng.integers(1, L + 1, B).astype(np.int32)
        ln[0] = L
        s = np.einsum("bhd,bld->bhl", f64(q), f64(k)) / math.sqrt(D)
        j = np.arange(L)[None, None, :]
        n = ln[:, None, None]
        keep = j < n
        if form == "alibi":
            s = s + f64(sl)[None, :, None] * (j - (n - 1))
        if form == "window":
            keep = keep & (j >= n - 5)
        s = np.where(keep, s, -np.inf)
        if form == "sink":
            s = np.concatenate([s, np.broadcast_to(f64(sl)[None, :, None], (B, H, 1))], -1)
        p = _softmax64(s.reshape(-1, s.shape[-1])).reshape(s.shape)[..., :L]
        ref = np.einsum("bhl,bld->bhd", p, f64(v))
        # the probabilities are rounded to dt before P V, as users write them
        return decode_attn, (B, H, L, D, dt, form), [q, k, v, sl, ln], [ref], {"tol": (1e-2, 1e-2) if dt == "bfloat16" else (2e-3, 2e-3)}
    return make


# ----------------------------------------------------------------------------------------------- logits
@tw.jit(out_idx=[-1])
def logits_ops(M, V, dt, form, bm=BM, cap=30.0, fp=0.5, pp=0.25, eos=1):
    """Row-wise logit processors: `softcap` Gemma-2's final cap * tanh(x / cap) then log_softmax; `penalty`
    OpenAI's presence / frequency penalties x - fp * cnt - pp * (cnt > 0) from an int32 count tile; `min_tokens`
    EOS suppressed (-inf) in rows shorter than min_tokens 4; `entropy` the entropy of
    softmax(x / temp[row]) per row, stored in column 0 of the output."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Cnt: T.Tensor((M, V), "int32"), Ln: T.Tensor((M,), "int32"),
             Tp: T.Tensor((M,), "float32"), Y: T.Tensor((M, V), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            y = T.alloc_fragment((bm, V), "float32")
            c = T.alloc_fragment((bm, V), "int32")
            ln = T.alloc_fragment((bm,), "int32")
            tp = T.alloc_fragment((bm,), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Cnt[bx * bm, 0], c)
            T.copy(Ln[bx * bm], ln)
            T.copy(Tp[bx * bm], tp)
            if form == "softcap":
                for i, j in T.Parallel(bm, V):
                    x[i, j] = cap * T.tanh(x[i, j] / cap)
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, V):
                    y[i, j] = T.exp(x[i, j] - mx[i])
                T.reduce_sum(y, sm, dim=1)
                for i, j in T.Parallel(bm, V):
                    y[i, j] = x[i, j] - mx[i] - T.log(sm[i])
            elif form == "penalty":
                for i, j in T.Parallel(bm, V):
                    y[i, j] = x[i, j] - fp * c[i, j] - T.where(c[i, j] > 0, pp, 0.0)
            elif form == "min_tokens":
                for i, j in T.Parallel(bm, V):
                    y[i, j] = T.where(j == eos and ln[i] < 4, -T.infinity("float32"), x[i, j])
            else:
                for i, j in T.Parallel(bm, V):
                    x[i, j] = x[i, j] / tp[i]
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, V):
                    y[i, j] = T.exp(x[i, j] - mx[i])
                T.reduce_sum(y, sm, dim=1)
                for i, j in T.Parallel(bm, V):
                    y[i, j] = y[i, j] / sm[i] * (x[i, j] - mx[i] - T.log(sm[i]))
                T.reduce_sum(y, sm, dim=1)
                for i, j in T.Parallel(bm, V):
                    y[i, j] = T.where(j == 0, -sm[i], 0.0)
            T.copy(y, Y[bx * bm, 0])

    return main


def _logits(form):
    def make(dt, shape, rng):
        M, V = shape
        x = randn(rng, shape, dt, 3.0 if form != "softcap" else 40.0)
        cnt = rng.integers(0, 3, shape).astype(np.int32)
        ln = rng.integers(0, 8, M).astype(np.int32)
        cnt[:, 0] = rng.integers(0, 8, M)
        tp = rng.uniform(0.5, 2.0, M).astype(np.float32)
        X = f64(x)
        if form == "softcap":
            z = 30.0 * np.tanh(X / 30.0)
            ref = z - _lse(z)[:, None]
        elif form == "penalty":
            ref = X - 0.5 * cnt - 0.25 * (cnt > 0)
        elif form == "min_tokens":
            ref = np.where((np.arange(V)[None, :] == 1) & (ln < 4)[:, None], -np.inf, X)
        else:
            z = X / f64(tp)[:, None]
            lp = z - _lse(z)[:, None]
            ref = np.zeros(shape)
            ref[:, 0] = -(np.exp(lp) * lp).sum(1)
        return logits_ops, (M, V, dt, form), [x, cnt, ln, tp], [ref], ({"tol": (2e-5, 1e-4)} if form == "entropy" else {})
    return make


@tw.jit(out_idx=[-2, -1])
def beam_step(M, V, dt, form, alpha=0.8, bm=BM):
    """One beam-search step: log_softmax of each beam's logits plus the beam's running score, normalised by
    HF's length penalty ((5 + len) / 6)^alpha... as ((len + 1)^alpha) here (len per beam), the best candidate's
    score and its token (the first index of the max); `pow` T.pow(len + 1, alpha), `explog` T.exp(alpha * T.log(len + 1))."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Sc: T.Tensor((M,), "float32"), Ln: T.Tensor((M,), "int32"),
             Best: T.Tensor((M,), "float32"), Tok: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            e = T.alloc_fragment((bm, V), "float32")
            ix = T.alloc_fragment((bm, V), "int32")
            sc = T.alloc_fragment((bm,), "float32")
            ln = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            tk = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Sc[bx * bm], sc)
            T.copy(Ln[bx * bm], ln)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, sm, dim=1)
            for i, j in T.Parallel(bm, V):
                if form == "pow":
                    x[i, j] = (x[i, j] - mx[i] - T.log(sm[i]) + sc[i]) / T.pow(T.cast(ln[i] + 1, "float32"), alpha)
                else:
                    x[i, j] = (x[i, j] - mx[i] - T.log(sm[i]) + sc[i]) / T.exp(alpha * T.log(T.cast(ln[i] + 1, "float32")))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                ix[i, j] = T.where(x[i, j] == mx[i], j, V)
            T.reduce_min(ix, tk, dim=1)
            T.copy(mx, Best[bx * bm])
            T.copy(tk, Tok[bx * bm])

    return main


def _beam(form):
    return lambda dt, shape, rng: _beam_make(form, dt, shape, rng)


def _beam_make(form, dt, shape, rng):
    M, V = shape
    x = randn(rng, shape, dt, 2.0)
    sc = (-rng.uniform(0, 5, M)).astype(np.float32)
    ln = rng.integers(1, 9, M).astype(np.int32)
    X = f64(x)
    z = (X - _lse(X)[:, None] + f64(sc)[:, None]) / ((ln + 1.0) ** 0.8)[:, None]
    return beam_step, (M, V, dt, form), [x, sc, ln], [z.max(1), z.argmax(1)]


@tw.jit(out_idx=[-1])
def typical_accept(M, V, dt, eps=0.3, delta=0.09, bm=BM):
    """Medusa's typical acceptance: p = softmax(target logits), H = -sum p log p per row, draft token tok[i]
    accepted (1) when p[i, tok[i]] > min(eps, delta * exp(-H)); the token's probability gathered by j == tok[i]."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Tok: T.Tensor((M,), "int32"), A: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            e = T.alloc_fragment((bm, V), "float32")
            g = T.alloc_fragment((bm, V), "float32")
            tk = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            h = T.alloc_fragment((bm,), "float32")
            pt = T.alloc_fragment((bm,), "float32")
            a = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Tok[bx * bm], tk)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, sm, dim=1)
            for i, j in T.Parallel(bm, V):
                g[i, j] = -(e[i, j] / sm[i]) * (x[i, j] - mx[i] - T.log(sm[i]))
                e[i, j] = T.where(j == tk[i], e[i, j] / sm[i], 0.0)
            T.reduce_sum(g, h, dim=1)
            T.reduce_sum(e, pt, dim=1)
            for i in T.Parallel(bm):
                a[i] = T.where(pt[i] > T.min(eps, delta * T.exp(-h[i])), 1, 0)
            T.copy(a, A[bx * bm])

    return main


def _typical(dt, shape, rng):
    M, V = shape
    for seed in range(50):
        x = randn(np.random.default_rng(seed), shape, dt, 2.0)
        X = f64(x)
        lp = X - _lse(X)[:, None]
        p = np.exp(lp)
        h = -(p * lp).sum(1)
        tok = rng.integers(0, V, M).astype(np.int32)
        pt = p[np.arange(M), tok]
        th = np.minimum(0.3, 0.09 * np.exp(-h))
        if np.all(np.abs(pt - th) > 1e-4 * (1 + th)):
            break
    return typical_accept, (M, V, dt), [x, tok], [(pt > th).astype(np.int32)]


# ----------------------------------------------------------------------------------------------- losses
@tw.jit(out_idx=[-2, -1])
def ce_rows(M, V, dt, form, bm=BM, zc=1e-4, ign=-100):
    """Per-row cross-entropy variants: `ignore` labels with ignore_index -100 give 0; in every form the block's loss
    sum and its count of labels other than -100 go to a (2,) total by atomic_add (mean = sum / count on the host);
    `soft` -sum t log_softmax(x)
    with soft targets (mixup / distillation); `zloss` PaLM's z-loss zc * lse^2 added to the CE; `logprob` the
    chosen token's log-probability (RL's token log-probs)."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Lb: T.Tensor((M,), "int32"), Tg: T.Tensor((M, V), dt),
             L: T.Tensor((M,), "float32"), Tot: T.Tensor((2,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            e = T.alloc_fragment((bm, V), "float32")
            t = T.alloc_fragment((bm, V), "float32")
            lb = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            xl = T.alloc_fragment((bm,), "float32")
            lo = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Lb[bx * bm], lb)
            T.copy(Tg[bx * bm, 0], t)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, sm, dim=1)
            if form == "soft":
                for i, j in T.Parallel(bm, V):
                    e[i, j] = -t[i, j] * (x[i, j] - mx[i] - T.log(sm[i]))
                T.reduce_sum(e, lo, dim=1)
            else:
                for i, j in T.Parallel(bm, V):
                    e[i, j] = T.where(j == lb[i], x[i, j], 0.0)
                T.reduce_sum(e, xl, dim=1)
                for i in T.Parallel(bm):
                    if form == "ignore":
                        lo[i] = T.where(lb[i] == ign, 0.0, mx[i] + T.log(sm[i]) - xl[i])
                    elif form == "zloss":
                        lo[i] = mx[i] + T.log(sm[i]) - xl[i] + zc * (mx[i] + T.log(sm[i])) * (mx[i] + T.log(sm[i]))
                    else:
                        lo[i] = xl[i] - mx[i] - T.log(sm[i])
            T.copy(lo, L[bx * bm])
            for i in T.serial(bm):
                if bx * bm + i < M:
                    T.atomic_add(Tot[0], lo[i])
                    T.atomic_add(Tot[1], T.where(lb[i] == ign, 0.0, 1.0))

    return main


def _ce(form):
    def make(dt, shape, rng):
        M, V = shape
        x = randn(rng, shape, dt, 2.0)
        lb = rng.integers(0, V, M).astype(np.int32)
        if form == "ignore":
            lb[::3] = -100
        t = rng.uniform(0, 1, shape)
        t = (t / t.sum(1, keepdims=True)).astype(npdt(dt))
        X = f64(x)
        lse = _lse(X)
        xl = X[np.arange(M), np.clip(lb, 0, V - 1)]
        if form == "soft":
            ref = -(f64(t) * (X - lse[:, None])).sum(1)
        elif form == "ignore":
            ref = np.where(lb == -100, 0.0, lse - xl)
        elif form == "zloss":
            ref = lse - xl + 1e-4 * lse * lse
        else:
            ref = xl - lse
        tot = np.array([ref.sum(), (lb != -100).sum()])
        return ce_rows, (M, V, dt, form), [x, lb, t], [ref, tot], {"tol": (1e-5 * V, 1e-4)}
    return make


@tw.jit(out_idx=[-1])
def grpo_kl(M, N, dt, bm=BM):
    """GRPO's per-token KL estimator k3 = exp(r - l) - (r - l) - 1 (r, l the reference / policy token log-probs),
    masked by the completion mask, its mean per sequence (sum / max(count, 1))."""
    @T.prim_func
    def main(Lp: T.Tensor((M, N), dt), Rp: T.Tensor((M, N), dt), Mk: T.Tensor((M, N), "int32"),
             K: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            lp = T.alloc_fragment((bm, N), "float32")
            rp = T.alloc_fragment((bm, N), "float32")
            mk = T.alloc_fragment((bm, N), "int32")
            k = T.alloc_fragment((bm, N), "float32")
            c = T.alloc_fragment((bm, N), "float32")
            ks = T.alloc_fragment((bm,), "float32")
            cs = T.alloc_fragment((bm,), "float32")
            T.copy(Lp[bx * bm, 0], lp)
            T.copy(Rp[bx * bm, 0], rp)
            T.copy(Mk[bx * bm, 0], mk)
            for i, j in T.Parallel(bm, N):
                k[i, j] = T.where(mk[i, j] != 0, T.exp(rp[i, j] - lp[i, j]) - (rp[i, j] - lp[i, j]) - 1.0, 0.0)
                c[i, j] = T.cast(mk[i, j], "float32")
            T.reduce_sum(k, ks, dim=1)
            T.reduce_sum(c, cs, dim=1)
            for i in T.Parallel(bm):
                ks[i] = ks[i] / T.max(cs[i], 1.0)
            T.copy(ks, K[bx * bm])

    return main


def _grpo_kl(dt, shape, rng):
    M, N = shape
    lp = (-rng.uniform(0, 3, shape)).astype(npdt(dt))
    rp = (f64(lp) + rng.standard_normal(shape) * 0.3).astype(npdt(dt))
    mk = (rng.uniform(size=shape) < 0.7).astype(np.int32)
    d = f64(rp) - f64(lp)
    k = np.where(mk != 0, np.exp(d) - d - 1, 0)
    return grpo_kl, (M, N, dt), [lp, rp, mk], [k.sum(1) / np.maximum(mk.sum(1), 1)], {"tol": (1e-5 * N, 1e-4)}


@tw.jit(out_idx=[-1])
def grpo_adv(B, G, bm=BM, eps=1e-4):
    """GRPO's group advantages: each prompt's G rewards normalised, (r - mean) / (std + eps), std unbiased."""
    @T.prim_func
    def main(R: T.Tensor((B, G), "float32"), A: T.Tensor((B, G), "float32")):
        with T.Kernel(T.ceildiv(B, bm)) as bx:
            r = T.alloc_fragment((bm, G), "float32")
            d = T.alloc_fragment((bm, G), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            sd = T.alloc_fragment((bm,), "float32")
            T.copy(R[bx * bm, 0], r)
            T.reduce_sum(r, mu, dim=1)
            for i, j in T.Parallel(bm, G):
                d[i, j] = (r[i, j] - mu[i] / G) * (r[i, j] - mu[i] / G)
            T.reduce_sum(d, sd, dim=1)
            for i, j in T.Parallel(bm, G):
                d[i, j] = (r[i, j] - mu[i] / G) / (T.sqrt(sd[i] / (G - 1)) + eps)
            T.copy(d, A[bx * bm, 0])

    return main


def _grpo_adv(dt, shape, rng):
    r = (rng.uniform(size=shape) < 0.5).astype(np.float32) + rng.standard_normal(shape).astype(np.float32) * 0.1
    R = f64(r)
    return grpo_adv, shape, [r], [(R - R.mean(1, keepdims=True)) / (R.std(1, ddof=1, keepdims=True) + 1e-4)]


# ----------------------------------------------------------------------------------------------- KV-cache quantisation
@tw.jit(out_idx=[-3, -2, -1])
def kv_quant_asym(M, N, dt, form, bm=BM, bn=16):
    """Asymmetric int8 KV-cache quantisation (KIVI: keys per channel, values per token): s = (max - min) / 255,
    zp = round_half_even(-min / s) - 128, q = clamp(round_half_even(x / s) + zp, -128, 127); `token` one (s, zp)
    per row, `channel` per column (min / max down the rows, column blocks of bn)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Q: T.Tensor((M, N), "int8"), S: T.Tensor((M if form == "token" else N,), "float32"),
             Z: T.Tensor((M if form == "token" else N,), "float32")):
        if form == "token":
            with T.Kernel(T.ceildiv(M, bm)) as bx:
                x = T.alloc_fragment((bm, N), "float32")
                q = T.alloc_fragment((bm, N), "int8")
                lo = T.alloc_fragment((bm,), "float32")
                hi = T.alloc_fragment((bm,), "float32")
                T.copy(X[bx * bm, 0], x)
                T.reduce_min(x, lo, dim=1)
                T.reduce_max(x, hi, dim=1)
                for i in T.Parallel(bm):
                    hi[i] = T.max(hi[i] - lo[i], 1e-8) / 255.0
                    lo[i] = ((-lo[i] / hi[i] + MAGIC) - MAGIC) - 128.0
                for i, j in T.Parallel(bm, N):
                    q[i, j] = T.max(T.min((x[i, j] / hi[i] + MAGIC) - MAGIC + lo[i], 127.0), -128.0)
                T.copy(q, Q[bx * bm, 0])
                T.copy(hi, S[bx * bm])
                T.copy(lo, Z[bx * bm])
        else:
            with T.Kernel(T.ceildiv(N, bn)) as by:
                x = T.alloc_fragment((M, bn), "float32")
                q = T.alloc_fragment((M, bn), "int8")
                lo = T.alloc_fragment((bn,), "float32")
                hi = T.alloc_fragment((bn,), "float32")
                T.copy(X[0, by * bn], x)
                T.reduce_min(x, lo, dim=0)
                T.reduce_max(x, hi, dim=0)
                for j in T.Parallel(bn):
                    hi[j] = T.max(hi[j] - lo[j], 1e-8) / 255.0
                    lo[j] = ((-lo[j] / hi[j] + MAGIC) - MAGIC) - 128.0
                for i, j in T.Parallel(M, bn):
                    q[i, j] = T.max(T.min((x[i, j] / hi[j] + MAGIC) - MAGIC + lo[j], 127.0), -128.0)
                T.copy(q, Q[0, by * bn])
                T.copy(hi, S[by * bn])
                T.copy(lo, Z[by * bn])

    return main


def _kvq_ref(x, ax):
    xf = x.astype(np.float32)
    lo, hi = xf.min(ax), xf.max(ax)
    s = (np.maximum(hi - lo, np.float32(1e-8)) / np.float32(255)).astype(np.float32)
    z = (_rne(f64((-lo / s).astype(np.float32))) - 128).astype(np.float32)
    sb = s[:, None] if ax == 1 else s[None, :]
    zb = z[:, None] if ax == 1 else z[None, :]
    v = (xf / sb).astype(np.float32)
    return np.clip(_rne(f64(v)) + zb, -128, 127), f64(s), f64(z)


def _kvq(form):
    def make(dt, shape, rng):
        x = (randn(rng, shape, "float32", 2.0) + 0.5).astype(npdt(dt))
        q, s, z = _kvq_ref(x, 1 if form == "token" else 0)
        return kv_quant_asym, (*shape, dt, form), [x], [q, s, z]
    return make


@tw.jit(out_idx=[-1])
def kv_dequant_asym(M, N, dt, form, bm=BM):
    """The dequantisation: x = (q - zp) * s, (s, zp) per row (`token`) or per column (`channel`), out in dt."""
    @T.prim_func
    def main(Q: T.Tensor((M, N), "int8"), S: T.Tensor((M if form == "token" else N,), "float32"),
             Z: T.Tensor((M if form == "token" else N,), "float32"), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            q = T.alloc_fragment((bm, N), "int8")
            y = T.alloc_fragment((bm, N), dt)
            if form == "token":
                s = T.alloc_fragment((bm,), "float32")
                z = T.alloc_fragment((bm,), "float32")
                T.copy(S[bx * bm], s)
                T.copy(Z[bx * bm], z)
                T.copy(Q[bx * bm, 0], q)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (T.cast(q[i, j], "float32") - z[i]) * s[i]
            else:
                s = T.alloc_fragment((N,), "float32")
                z = T.alloc_fragment((N,), "float32")
                T.copy(S, s)
                T.copy(Z, z)
                T.copy(Q[bx * bm, 0], q)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (T.cast(q[i, j], "float32") - z[j]) * s[j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _kvdq(form):
    def make(dt, shape, rng):
        M, N = shape
        q = rng.integers(-128, 128, shape).astype(np.int8)
        n = M if form == "token" else N
        s = rng.uniform(0.01, 0.1, n).astype(np.float32)
        z = rng.integers(-20, 20, n).astype(np.float32)
        sb, zb = (f64(s)[:, None], f64(z)[:, None]) if form == "token" else (f64(s)[None], f64(z)[None])
        return kv_dequant_asym, (M, N, dt, form), [q, s, z], [(f64(q) - zb) * sb]
    return make


@tw.jit(out_idx=[-2, -1])
def group_quant(M, NG, G, dt, form, bm=BM):
    """Per-token-group int8 quantisation (DeepSeek-V3's activations, groups of G columns): s = amax(|x|) / 127 per
    (row, group), q = round_half_even(x / s). `tile3d` the (M, NG, G) view reduced over its last dim in one
    (bm, NG, G) tile; `groups` a serial loop over groups, each a (bm, G) window, the scales stored as a column
    of S from the 1-D tile; `groups_col` the scales copied into a (bm, 1) column tile first (ascend910b's hint)."""
    @T.prim_func
    def main(X: T.Tensor((M, NG, G), dt), Q: T.Tensor((M, NG, G), "int8"), S: T.Tensor((M, NG), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            if form == "tile3d":
                x = T.alloc_fragment((bm, NG, G), "float32")
                a = T.alloc_fragment((bm, NG, G), "float32")
                q = T.alloc_fragment((bm, NG, G), "int8")
                am = T.alloc_fragment((bm, NG), "float32")
                T.copy(X[bx * bm, 0, 0], x)
                for i, g, j in T.Parallel(bm, NG, G):
                    a[i, g, j] = T.abs(x[i, g, j])
                T.reduce_max(a, am, dim=2)
                for i, g in T.Parallel(bm, NG):
                    am[i, g] = T.max(am[i, g], 1e-8) / 127.0
                for i, g, j in T.Parallel(bm, NG, G):
                    q[i, g, j] = T.max(T.min((x[i, g, j] / am[i, g] + MAGIC) - MAGIC, 127.0), -128.0)
                T.copy(q, Q[bx * bm, 0, 0])
                T.copy(am, S[bx * bm, 0])
            else:
                for g in T.serial(NG):
                    x = T.alloc_fragment((bm, G), "float32")
                    a = T.alloc_fragment((bm, G), "float32")
                    q = T.alloc_fragment((bm, G), "int8")
                    am = T.alloc_fragment((bm,), "float32")
                    T.copy(X[bx * bm:(bx + 1) * bm, g, :], x)
                    for i, j in T.Parallel(bm, G):
                        a[i, j] = T.abs(x[i, j])
                    T.reduce_max(a, am, dim=1)
                    for i in T.Parallel(bm):
                        am[i] = T.max(am[i], 1e-8) / 127.0
                    for i, j in T.Parallel(bm, G):
                        q[i, j] = T.max(T.min((x[i, j] / am[i] + MAGIC) - MAGIC, 127.0), -128.0)
                    T.copy(q, Q[bx * bm:(bx + 1) * bm, g, :])
                    if form == "groups":
                        T.copy(am, S[bx * bm:(bx + 1) * bm, g])
                    else:
                        ac = T.alloc_fragment((bm, 1), "float32")
                        T.copy(am, ac)
                        T.copy(ac, S[bx * bm:(bx + 1) * bm, g:g + 1])

    return main


def _gq(form):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt, 3.0)
        xf = x.astype(np.float32)
        s = (np.maximum(np.abs(xf).max(2), np.float32(1e-8)) / np.float32(127)).astype(np.float32)
        v = (xf / s[..., None]).astype(np.float32)
        return group_quant, (*shape, dt, form), [x], [np.clip(_rne(f64(v)), -128, 127), f64(s)]
    return make


# ----------------------------------------------------------------------------------------------- gated / residual
@tw.jit(out_idx=[-1])
def swiglu_clamp(M, N, dt, form, lim=7.0, alpha=1.702, bm=BM):
    """GPT-OSS's clamped SwiGLU: gate = min(g, 7), up = clamp(u, -7, 7), y = gate * sigmoid(1.702 gate) * (up + 1);
    `halves` g, u the halves of the (M, 2N) projection (copied into tiles of their own), `interleaved` g, u the
    even / odd columns (GPT-OSS's layout, x[i, 2 j] and x[i, 2 j + 1])."""
    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, N), dt)
            if form == "halves":
                g = T.alloc_fragment((bm, N), "float32")
                u = T.alloc_fragment((bm, N), "float32")
                T.copy(X[bx * bm:(bx + 1) * bm, 0:N], g)
                T.copy(X[bx * bm:(bx + 1) * bm, N:2 * N], u)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.min(g[i, j], lim) * T.sigmoid(alpha * T.min(g[i, j], lim)) * (T.max(T.min(u[i, j], lim), -lim) + 1.0)
            else:
                x = T.alloc_fragment((bm, 2 * N), "float32")
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.min(x[i, 2 * j], lim) * T.sigmoid(alpha * T.min(x[i, 2 * j], lim)) * (T.max(T.min(x[i, 2 * j + 1], lim), -lim) + 1.0)
            T.copy(y, Y[bx * bm, 0])

    return main


def _swiglu_clamp(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, (M, 2 * N), dt, 5.0)
        X = f64(x)
        g, u = (X[:, :N], X[:, N:]) if form == "halves" else (X[:, 0::2], X[:, 1::2])
        g = np.minimum(g, 7.0)
        return swiglu_clamp, (M, N, dt, form), [x], [g / (1 + np.exp(-1.702 * g)) * (np.clip(u, -7, 7) + 1)]
    return make


@tw.jit(out_idx=[-2, -1])
def add_layernorm(M, N, dt, bm=BM, eps=1e-5):
    """Pre-LN's fused add + LayerNorm: r = x + residual (out, dt), y = (r - mean) / sqrt(var + eps) * w + b."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Rs: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             Bi: T.Tensor((N,), "float32"), Ro: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm, N), "float32")
            ro = T.alloc_fragment((bm, N), dt)
            d = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm, N), dt)
            w = T.alloc_fragment((N,), "float32")
            bi = T.alloc_fragment((N,), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            va = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Rs[bx * bm, 0], r)
            T.copy(W, w)
            T.copy(Bi, bi)
            for i, j in T.Parallel(bm, N):
                ro[i, j] = x[i, j] + r[i, j]
            for i, j in T.Parallel(bm, N):
                r[i, j] = ro[i, j]
            T.reduce_sum(r, mu, dim=1)
            for i, j in T.Parallel(bm, N):
                d[i, j] = (r[i, j] - mu[i] / N) * (r[i, j] - mu[i] / N)
            T.reduce_sum(d, va, dim=1)
            for i, j in T.Parallel(bm, N):
                y[i, j] = (r[i, j] - mu[i] / N) * T.rsqrt(va[i] / N + eps) * w[j] + bi[j]
            T.copy(ro, Ro[bx * bm, 0])
            T.copy(y, Y[bx * bm, 0])

    return main


def _add_ln(dt, shape, rng):
    M, N = shape
    x, rs = randn(rng, shape, dt), randn(rng, shape, dt)
    w, b = rng.uniform(0.5, 1.5, N).astype(np.float32), randn(rng, N, "float32")
    ro = (x.astype(np.float32) + rs.astype(np.float32)).astype(npdt(dt))
    R = f64(ro)
    mu = R.mean(1, keepdims=True)
    y = (R - mu) / np.sqrt(((R - mu) ** 2).mean(1, keepdims=True) + 1e-5) * f64(w) + f64(b)
    return add_layernorm, (M, N, dt), [x, rs, w, b], [f64(ro), y]


@tw.jit(out_idx=[-1])
def layer_scale(M, N, dt, bm=BM):
    """CaiT / ConvNeXt layer scale in the residual: y = x + gamma[j] * f[i, j]."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Fx: T.Tensor((M, N), dt), Gm: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            f = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((N,), "float32")
            y = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Fx[bx * bm, 0], f)
            T.copy(Gm, g)
            for i, j in T.Parallel(bm, N):
                y[i, j] = x[i, j] + g[j] * f[i, j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _layer_scale(dt, shape, rng):
    x, f = randn(rng, shape, dt), randn(rng, shape, dt)
    g = (rng.uniform(0, 1, shape[1]) * 1e-1).astype(np.float32)
    return layer_scale, (*shape, dt), [x, f, g], [f64(x) + f64(g) * f64(f)]


@tw.jit(out_idx=[-1])
def logit_bias(M, V, K, dt):
    """OpenAI's logit_bias: logits[b, Ids[b, k]] += Bias[b, k] for K (token, bias) pairs per row (distinct
    tokens), one row per block: the row in a tile, K element updates at ids read from a tile."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Ids: T.Tensor((M, K), "int32"), Bs: T.Tensor((M, K), "float32"),
             Y: T.Tensor((M, V), dt)):
        with T.Kernel(M) as b:
            x = T.alloc_fragment((V,), "float32")
            ids = T.alloc_fragment((K,), "int32")
            bs = T.alloc_fragment((K,), "float32")
            y = T.alloc_fragment((V,), dt)
            T.copy(X[b, 0], x)
            T.copy(Ids[b, 0], ids)
            T.copy(Bs[b, 0], bs)
            for k in T.serial(K):
                x[ids[k]] = x[ids[k]] + bs[k]
            T.copy(x, y)
            T.copy(y, Y[b, 0])

    return main


def _logit_bias(dt, shape, rng):
    M, V, K = shape
    x = randn(rng, (M, V), dt, 2.0)
    ids = np.stack([rng.permutation(V)[:K] for _ in range(M)]).astype(np.int32)
    bs = rng.uniform(-5, 5, (M, K)).astype(np.float32)
    ref = f64(x.astype(np.float32)).copy()
    for b in range(M):
        ref[b, ids[b]] = f64((x[b, ids[b]].astype(np.float32) + bs[b]).astype(np.float32))
    return logit_bias, (M, V, K, dt), [x, ids, bs], [ref]


@tw.jit(out_idx=[-1])
def exp_race(M, V, dt, bm=BM):
    """vLLM's sampling without a cumsum: argmax(p / q) with q ~ Exp(1) given (the exponential race), p the
    softmax; the first index of the max."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Qn: T.Tensor((M, V), "float32"), Tok: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            q = T.alloc_fragment((bm, V), "float32")
            ix = T.alloc_fragment((bm, V), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            tk = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Qn[bx * bm, 0], q)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, V):
                x[i, j] = x[i, j] / sm[i] / q[i, j]
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, V):
                ix[i, j] = T.where(x[i, j] == mx[i], j, V)
            T.reduce_min(ix, tk, dim=1)
            T.copy(tk, Tok[bx * bm])

    return main


def _exp_race(dt, shape, rng):
    x = randn(rng, shape, dt, 2.0)
    q = rng.exponential(1.0, shape).astype(np.float32)
    r = _softmax64(f64(x)) / f64(q)
    srt = np.sort(r, 1)
    assert shape[1] == 1 or np.all(srt[:, -1] - srt[:, -2] > 1e-4 * srt[:, -1])
    return exp_race, (*shape, dt), [x, q], [r.argmax(1)]


@tw.jit(out_idx=[-1])
def top_k_mask(M, V, dt, K=3, bm=BM):
    """Top-k filtering by K rounds of a row max: the k-th largest logit found by masking each round's max
    (distinct values), then logits below it set to -inf."""
    @T.prim_func
    def main(X: T.Tensor((M, V), dt), Y: T.Tensor((M, V), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            w = T.alloc_fragment((bm, V), "float32")
            y = T.alloc_fragment((bm, V), dt)
            mx = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(x, w)
            for k in T.serial(K):
                T.reduce_max(w, mx, dim=1)
                if k < K - 1:
                    for i, j in T.Parallel(bm, V):
                        w[i, j] = T.where(w[i, j] >= mx[i], NEG, w[i, j])
            for i, j in T.Parallel(bm, V):
                y[i, j] = T.where(x[i, j] >= mx[i], x[i, j], -T.infinity(dt))
            T.copy(y, Y[bx * bm, 0])

    return main


def _top_k(dt, shape, rng):
    M, V = shape
    x = np.stack([rng.permutation(V) for _ in range(M)]).astype(np.float64) * 0.25 - V / 8
    x = x.astype(npdt(dt))
    X = f64(x)
    kth = np.sort(X, 1)[:, max(V - 3, 0)] if V >= 3 else X.min(1)
    return top_k_mask, (*shape, dt), [x], [np.where(X >= kth[:, None], X, -np.inf)]


@tw.jit(out_idx=[-1])
def gemm_geglu_cat(M, N, K, dt, bm=16, bn=16, bk=16):
    """A fused gate / up projection with the two weights concatenated as one matrix (HF's gate_up_proj,
    (K, 2 ceil(N / bn) bn), the blocks padded): one gemm of a (bm, 2 bn) block of [Wg | Wu] columns (the host interleaves the blocks: block b of
    the gate, then block b of the up), float32 accumulation, GeGLU (tanh GELU) on the accumulator's halves read
    as acc[i, j] and acc[i, j + bn]."""
    @T.prim_func
    def main(X: T.Tensor((M, K), dt), W: T.Tensor((K, 2 * T.ceildiv(N, bn) * bn), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_shared((bm, bk), dt)
            w = T.alloc_shared((bk, 2 * bn), dt)
            acc = T.alloc_fragment((bm, 2 * bn), "float32")
            y = T.alloc_fragment((bm, bn), dt)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(X[by * bm, k * bk], x)
                T.copy(W[k * bk, bx * 2 * bn], w)
                T.gemm(x, w, acc)
            for i, j in T.Parallel(bm, bn):
                y[i, j] = 0.5 * acc[i, j] * (1.0 + T.tanh(0.7978845608028654 * (acc[i, j] + 0.044715 * acc[i, j] * acc[i, j] * acc[i, j]))) * acc[i, j + bn]
            T.copy(y, Y[by * bm, bx * bn])

    return main


def _gemm_geglu(dt, shape, rng):
    M, N, K = shape
    bn = 16
    nb = -(-N // bn)
    x, wg, wu = randn(rng, (M, K), dt), randn(rng, (K, nb * bn), dt, 0.3), randn(rng, (K, nb * bn), dt, 0.3)
    wg[:, N:] = 0
    wu[:, N:] = 0
    w = np.concatenate([np.concatenate([wg[:, b * bn:(b + 1) * bn], wu[:, b * bn:(b + 1) * bn]], 1) for b in range(nb)], 1)
    G, U = f64(x) @ f64(wg[:, :N]), f64(x) @ f64(wu[:, :N])
    ref = 0.5 * G * (1 + np.tanh(0.7978845608028654 * (G + 0.044715 * G ** 3))) * U
    return gemm_geglu_cat, (M, N, K, dt), [x, w], [ref], {"tol": (2e-2, 2e-2)}


@tw.jit(out_idx=[-1])
def top_p_sorted(M, V, dt, top_p=0.8, bm=BM):
    """Top-p over probabilities already sorted descending per row (HF's TopPLogitsWarper after torch.sort): the
    inclusive cumsum by a serial loop over columns (a column map each), tokens whose cumsum before them reaches
    top_p zeroed, the first always kept, the rest renormalised."""
    @T.prim_func
    def main(P: T.Tensor((M, V), dt), Y: T.Tensor((M, V), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            p = T.alloc_fragment((bm, V), "float32")
            c = T.alloc_fragment((bm, V), "float32")
            y = T.alloc_fragment((bm, V), dt)
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(P[bx * bm, 0], p)
            T.copy(p, c)
            for j in T.serial(1, V):
                for i in T.Parallel(bm):
                    c[i, j] = c[i, j - 1] + p[i, j]
            for i, j in T.Parallel(bm, V):
                p[i, j] = T.where(j == 0 or c[i, j] - p[i, j] < top_p, p[i, j], 0.0)
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(bm, V):
                y[i, j] = p[i, j] / sm[i]
            T.copy(y, Y[bx * bm, 0])

    return main


def _top_p_sorted(dt, shape, rng):
    for seed in range(50):
        p = -np.sort(-_softmax64(np.random.default_rng(seed).standard_normal(shape) * 2), 1)
        p = p.astype(npdt(dt))
        P = f64(p)
        before = np.cumsum(P, 1) - P
        if np.all(np.abs(before - 0.8) > 1e-3):
            break
    keep = (np.arange(shape[1])[None] == 0) | (before < 0.8)
    k = np.where(keep, P, 0)
    return top_p_sorted, (*shape, dt), [p], [k / k.sum(1, keepdims=True)]


# ----------------------------------------------------------------------------------------------- vision
@tw.jit(out_idx=[-1])
def dwconv_nhwc(H, W, C, dt, form):
    """Depthwise 3x3 valid conv2d of a channels-last (H, W, C) image + bias (MobileNet / ConvNeXt), one output row
    per block: `rows` the three input rows in tiles, the tap b read as r[w + b, c] (a shift by whole rows of C);
    `copies` one (Wo, C) copy from global memory per tap."""
    Ho, Wo = H - 2, W - 2

    @T.prim_func
    def main(X: T.Tensor((H, W, C), dt), Wt: T.Tensor((9, C), "float32"), Bi: T.Tensor((C,), "float32"),
             Y: T.Tensor((Ho, Wo, C), dt)):
        with T.Kernel(Ho) as oh:
            w = T.alloc_fragment((9, C), "float32")
            acc = T.alloc_fragment((Wo, C), "float32")
            y = T.alloc_fragment((Wo, C), dt)
            bi = T.alloc_fragment((C,), "float32")
            T.copy(Wt, w)
            T.copy(Bi, bi)
            for p, c in T.Parallel(Wo, C):
                acc[p, c] = bi[c]
            if form == "rows":
                r = T.alloc_fragment((W, C), "float32")
                for a in T.serial(3):
                    T.copy(X[oh + a, 0, 0], r)
                    for b in T.serial(3):
                        for p, c in T.Parallel(Wo, C):
                            acc[p, c] += r[p + b, c] * w[a * 3 + b, c]
            else:
                t = T.alloc_fragment((Wo, C), "float32")
                for a in T.serial(3):
                    for b in T.serial(3):
                        T.copy(X[oh + a, b, 0], t)
                        for p, c in T.Parallel(Wo, C):
                            acc[p, c] += t[p, c] * w[a * 3 + b, c]
            T.copy(acc, y)
            T.copy(y, Y[oh, 0, 0])

    return main


def _dwconv(form):
    def make(dt, shape, rng):
        H, W, C = shape
        x = randn(rng, shape, dt)
        w, b = randn(rng, (9, C), "float32"), randn(rng, C, "float32")
        X = f64(x)
        ref = np.zeros((H - 2, W - 2, C)) + f64(b)
        for a in range(3):
            for bb in range(3):
                ref += X[a:a + H - 2, bb:bb + W - 2] * f64(w)[a * 3 + bb]
        return dwconv_nhwc, (H, W, C, dt, form), [x, w, b], [ref], {"tol": (1e-4, 1e-4)}
    return make


@tw.jit(out_idx=[-1])
def bilinear(C, H, W, Ho, Wo, dt):
    """F.interpolate(mode="bilinear", align_corners=False) of (C, H, W), one output row per block: the source rows
    y0, y1 and weight wy of the row, the columns x0, x1 and weights wx (host-computed index tables, as
    torchvision's kernels take them) gathered from the two rows' tiles."""
    @T.prim_func
    def main(X: T.Tensor((C, H, W), dt), Y0: T.Tensor((Ho,), "int32"), Y1: T.Tensor((Ho,), "int32"),
             Wy: T.Tensor((Ho,), "float32"), X0: T.Tensor((Wo,), "int32"), X1: T.Tensor((Wo,), "int32"),
             Wx: T.Tensor((Wo,), "float32"), Out: T.Tensor((C, Ho, Wo), dt)):
        with T.Kernel(Ho, C) as (oh, c):
            r0 = T.alloc_fragment((W,), "float32")
            r1 = T.alloc_fragment((W,), "float32")
            x0 = T.alloc_fragment((Wo,), "int32")
            x1 = T.alloc_fragment((Wo,), "int32")
            wx = T.alloc_fragment((Wo,), "float32")
            o = T.alloc_fragment((Wo,), dt)
            wy = Wy[oh]
            T.copy(X[c, Y0[oh], 0], r0)
            T.copy(X[c, Y1[oh], 0], r1)
            T.copy(X0, x0)
            T.copy(X1, x1)
            T.copy(Wx, wx)
            for j in T.Parallel(Wo):
                o[j] = (1.0 - wy) * ((1.0 - wx[j]) * r0[x0[j]] + wx[j] * r0[x1[j]]) + \
                    wy * ((1.0 - wx[j]) * r1[x0[j]] + wx[j] * r1[x1[j]])
            T.copy(o, Out[c, oh, 0])

    return main


def _bil_tab(n, no):
    src = np.maximum((np.arange(no) + 0.5) * (n / no) - 0.5, 0)
    i0 = np.minimum(np.floor(src).astype(np.int32), n - 1)
    i1 = np.minimum(i0 + 1, n - 1).astype(np.int32)
    return i0, i1, (src - i0).astype(np.float32)


def _bilinear(dt, shape, rng):
    C, H, W, Ho, Wo = shape
    x = randn(rng, (C, H, W), dt)
    y0, y1, wy = _bil_tab(H, Ho)
    x0, x1, wx = _bil_tab(W, Wo)
    X = f64(x)
    WY, WX = f64(wy)[:, None], f64(wx)[None, :]
    ref = (1 - WY) * ((1 - WX) * X[:, y0][:, :, x0] + WX * X[:, y0][:, :, x1]) + \
        WY * ((1 - WX) * X[:, y1][:, :, x0] + WX * X[:, y1][:, :, x1])
    return bilinear, (C, H, W, Ho, Wo, dt), [x, y0, y1, wy, x0, x1, wx], [ref]


@tw.jit(out_idx=[-1])
def upsample2x(C, H, W, dt, form):
    """F.interpolate(scale_factor=2, mode="nearest") of (C, H, W), one channel per block: `map` y[i, j] =
    x[i // 2, j // 2] in a 2-D map; `rows` a serial loop over output rows around a 1-D map reading x[r // 2, j // 2]."""
    @T.prim_func
    def main(X: T.Tensor((C, H, W), dt), Y: T.Tensor((C, 2 * H, 2 * W), dt)):
        with T.Kernel(C) as c:
            x = T.alloc_fragment((H, W), dt)
            y = T.alloc_fragment((2 * H, 2 * W), dt)
            T.copy(X[c, 0, 0], x)
            if form == "map":
                for i, j in T.Parallel(2 * H, 2 * W):
                    y[i, j] = x[i // 2, j // 2]
            else:
                for r in T.serial(2 * H):
                    for j in T.Parallel(2 * W):
                        y[r, j] = x[r // 2, j // 2]
            T.copy(y, Y[c, 0, 0])

    return main


def _up2(form):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt)
        return upsample2x, (*shape, dt, form), [x], [f64(x).repeat(2, 1).repeat(2, 2)]
    return make


@tw.jit(out_idx=[-1])
def box_iou(N, M, dt, bm=BM):
    """torchvision's box_iou of (N, 4) and (M, 4) xyxy boxes, given as coordinate rows (4, N) / (4, M) (the layout
    a kernel reads contiguously): rows of A against all of B, areas and the intersection in one map."""
    @T.prim_func
    def main(A: T.Tensor((4, N), dt), Bx: T.Tensor((4, M), dt), Iou: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, bm)) as bx:
            a = T.alloc_fragment((4, bm), "float32")
            b = T.alloc_fragment((4, M), "float32")
            o = T.alloc_fragment((bm, M), "float32")
            T.copy(A[0, bx * bm], a)
            T.copy(Bx, b)
            for i, j in T.Parallel(bm, M):
                o[i, j] = T.max(T.min(a[2, i], b[2, j]) - T.max(a[0, i], b[0, j]), 0.0) * \
                    T.max(T.min(a[3, i], b[3, j]) - T.max(a[1, i], b[1, j]), 0.0)
            for i, j in T.Parallel(bm, M):
                o[i, j] = o[i, j] / ((a[2, i] - a[0, i]) * (a[3, i] - a[1, i]) + (b[2, j] - b[0, j]) * (b[3, j] - b[1, j]) - o[i, j])
            T.copy(o, Iou[bx * bm, 0])

    return main


def _boxes(rng, n, dt):
    xy = rng.uniform(0, 10, (2, n))
    wh = rng.uniform(1, 5, (2, n))
    return np.concatenate([xy, xy + wh]).astype(npdt(dt))


def _iou_ref(a, b):
    A, B = f64(a)[:, :, None], f64(b)[:, None, :]
    inter = np.maximum(np.minimum(A[2], B[2]) - np.maximum(A[0], B[0]), 0) * \
        np.maximum(np.minimum(A[3], B[3]) - np.maximum(A[1], B[1]), 0)
    return inter / ((A[2] - A[0]) * (A[3] - A[1]) + (B[2] - B[0]) * (B[3] - B[1]) - inter)


def _box_iou(dt, shape, rng):
    N, M = shape
    a, b = _boxes(rng, N, dt), _boxes(rng, M, dt)
    return box_iou, (N, M, dt), [a, b], [_iou_ref(a, b)]


@tw.jit(out_idx=[-1])
def soft_nms_step(N, dt, sigma=0.5, bn=16):
    """One soft-NMS step (Gaussian): scores of every box decayed by exp(-iou^2 / sigma) against box 0 (the current
    best, its coordinates read as scalars of the (4, N) tensor); box 0's own score kept."""
    @T.prim_func
    def main(Bx: T.Tensor((4, N), dt), S: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            b = T.alloc_fragment((4, bn), "float32")
            s = T.alloc_fragment((bn,), "float32")
            x0 = T.cast(Bx[0, 0], "float32")
            y0 = T.cast(Bx[1, 0], "float32")
            x1 = T.cast(Bx[2, 0], "float32")
            y1 = T.cast(Bx[3, 0], "float32")
            T.copy(Bx[0, bx * bn], b)
            T.copy(S[bx * bn], s)
            for j in T.Parallel(bn):
                inter = T.max(T.min(x1, b[2, j]) - T.max(x0, b[0, j]), 0.0) * T.max(T.min(y1, b[3, j]) - T.max(y0, b[1, j]), 0.0)
                iou = inter / ((x1 - x0) * (y1 - y0) + (b[2, j] - b[0, j]) * (b[3, j] - b[1, j]) - inter)
                s[j] = T.where(bx * bn + j == 0, s[j], s[j] * T.exp(-(iou * iou) / sigma))
            T.copy(s, Y[bx * bn])

    return main


def _soft_nms(dt, shape, rng):
    N, = shape
    b = _boxes(rng, N, dt)
    b[:, 1:2] = (f64(b[:, 0:1]) + 0.5).astype(npdt(dt))
    s = rng.uniform(0, 1, N).astype(np.float32)
    iou = _iou_ref(b[:, :1], b)[0]
    ref = np.where(np.arange(N) == 0, f64(s), f64(s) * np.exp(-(iou ** 2) / 0.5))
    return soft_nms_step, (N, dt), [b, s], [ref]


@tw.jit(out_idx=[-1])
def box_decode(N, dt, form, bn=16, clip=math.log(1000.0 / 16)):
    """torchvision's BoxCoder.decode (weights 1): anchors and deltas to xyxy boxes, dw / dh clamped at
    log(1000 / 16). `rows` (N, 4) tensors as users hold them, the coordinates read by constant column;
    `gather` the same with each column gathered into a row of a (8, bn) tile first (ascend910b's hint), centres
    and half sizes as 1-D rows, the (bn, 4) boxes selected by column from them; `coords` the (4, N) layout."""
    @T.prim_func
    def main(An: T.Tensor((4, N) if form == "coords" else (N, 4), dt), Dl: T.Tensor((4, N) if form == "coords" else (N, 4), dt),
             Bo: T.Tensor((4, N) if form == "coords" else (N, 4), dt)):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            if form == "rows":
                a = T.alloc_fragment((bn, 4), "float32")
                d = T.alloc_fragment((bn, 4), "float32")
                o = T.alloc_fragment((bn, 4), dt)
                T.copy(An[bx * bn, 0], a)
                T.copy(Dl[bx * bn, 0], d)
                for i, k in T.Parallel(bn, 4):
                    o[i, k] = T.where(k % 2 == 0,
                                      (a[i, 0] + a[i, 2]) * 0.5 + d[i, 0] * (a[i, 2] - a[i, 0]),
                                      (a[i, 1] + a[i, 3]) * 0.5 + d[i, 1] * (a[i, 3] - a[i, 1])) + \
                        T.where(k < 2, -0.5, 0.5) * T.where(k % 2 == 0, T.exp(T.min(d[i, 2], clip)) * (a[i, 2] - a[i, 0]),
                                                            T.exp(T.min(d[i, 3], clip)) * (a[i, 3] - a[i, 1]))
                T.copy(o, Bo[bx * bn, 0])
            elif form == "gather":
                a = T.alloc_fragment((bn, 4), "float32")
                d = T.alloc_fragment((bn, 4), "float32")
                o = T.alloc_fragment((bn, 4), dt)
                c = T.alloc_fragment((8, bn), "float32")
                T.copy(An[bx * bn, 0], a)
                T.copy(Dl[bx * bn, 0], d)
                for i in T.Parallel(bn):
                    c[0, i] = a[i, 0]
                for i in T.Parallel(bn):
                    c[1, i] = a[i, 1]
                for i in T.Parallel(bn):
                    c[2, i] = a[i, 2]
                for i in T.Parallel(bn):
                    c[3, i] = a[i, 3]
                for i in T.Parallel(bn):
                    c[4, i] = d[i, 0]
                for i in T.Parallel(bn):
                    c[5, i] = d[i, 1]
                for i in T.Parallel(bn):
                    c[6, i] = d[i, 2]
                for i in T.Parallel(bn):
                    c[7, i] = d[i, 3]
                e = T.alloc_fragment((4, bn), "float32")
                for i in T.Parallel(bn):
                    e[0, i] = (c[0, i] + c[2, i]) * 0.5 + c[4, i] * (c[2, i] - c[0, i])
                for i in T.Parallel(bn):
                    e[1, i] = (c[1, i] + c[3, i]) * 0.5 + c[5, i] * (c[3, i] - c[1, i])
                for i in T.Parallel(bn):
                    e[2, i] = T.exp(T.min(c[6, i], clip)) * (c[2, i] - c[0, i]) * 0.5
                for i in T.Parallel(bn):
                    e[3, i] = T.exp(T.min(c[7, i], clip)) * (c[3, i] - c[1, i]) * 0.5
                for i, k in T.Parallel(bn, 4):
                    o[i, k] = T.where(k == 0, e[0, i] - e[2, i], T.where(k == 1, e[1, i] - e[3, i],
                                      T.where(k == 2, e[0, i] + e[2, i], e[1, i] + e[3, i])))
                T.copy(o, Bo[bx * bn, 0])
            else:
                a = T.alloc_fragment((4, bn), "float32")
                d = T.alloc_fragment((4, bn), "float32")
                o = T.alloc_fragment((4, bn), dt)
                T.copy(An[0, bx * bn], a)
                T.copy(Dl[0, bx * bn], d)
                for k, i in T.Parallel(4, bn):
                    o[k, i] = T.where(k % 2 == 0,
                                      (a[0, i] + a[2, i]) * 0.5 + d[0, i] * (a[2, i] - a[0, i]),
                                      (a[1, i] + a[3, i]) * 0.5 + d[1, i] * (a[3, i] - a[1, i])) + \
                        T.where(k < 2, -0.5, 0.5) * T.where(k % 2 == 0, T.exp(T.min(d[2, i], clip)) * (a[2, i] - a[0, i]),
                                                            T.exp(T.min(d[3, i], clip)) * (a[3, i] - a[1, i]))
                T.copy(o, Bo[0, bx * bn])

    return main


def _box_decode(form):
    def make(dt, shape, rng):
        N, = shape
        an = _boxes(rng, N, dt)
        dl = (rng.standard_normal((4, N)) * 0.5).astype(npdt(dt))
        dl[2:, 0] = 6.0
        A, D = f64(an), f64(dl)
        w, h = A[2] - A[0], A[3] - A[1]
        cx, cy = A[0] + 0.5 * w + D[0] * w, A[1] + 0.5 * h + D[1] * h
        pw, ph = np.exp(np.minimum(D[2], math.log(1000.0 / 16))) * w, np.exp(np.minimum(D[3], math.log(1000.0 / 16))) * h
        ref = np.stack([cx - 0.5 * pw, cy - 0.5 * ph, cx + 0.5 * pw, cy + 0.5 * ph])
        if form != "coords":
            an, dl, ref = np.ascontiguousarray(an.T), np.ascontiguousarray(dl.T), ref.T
        return box_decode, (N, dt, form), [an, dl], [ref], {"tol": (1e-4, 1e-4) if dt == "float32" else (2e-2, 4e-3)}
    return make


@tw.jit(out_idx=[-1])
def image_norm(C, L, src, bl=64):
    """torchvision's ToTensor + Normalize on an image of uint8 (or int32) pixels (C, H * W): (x / 255 - mean[c]) /
    std[c], one channel row block per block, float32 out."""
    @T.prim_func
    def main(X: T.Tensor((C, L), src), Mu: T.Tensor((C,), "float32"), Sd: T.Tensor((C,), "float32"),
             Y: T.Tensor((C, L), "float32")):
        with T.Kernel(T.ceildiv(L, bl)) as bx:
            x = T.alloc_fragment((C, bl), src)
            y = T.alloc_fragment((C, bl), "float32")
            mu = T.alloc_fragment((C,), "float32")
            sd = T.alloc_fragment((C,), "float32")
            T.copy(X[0, bx * bl], x)
            T.copy(Mu, mu)
            T.copy(Sd, sd)
            for c, j in T.Parallel(C, bl):
                y[c, j] = (T.cast(x[c, j], "float32") / 255.0 - mu[c]) / sd[c]
            T.copy(y, Y[0, bx * bl])

    return main


def _image_norm(src):
    def make(dt, shape, rng):
        C, L = shape
        x = rng.integers(0, 256, shape).astype(npdt(src))
        mu = np.array([0.485, 0.456, 0.406] * 2, np.float32)[:C]
        sd = np.array([0.229, 0.224, 0.225] * 2, np.float32)[:C]
        ref = (f64(x) / 255.0 - f64(mu)[:, None]) / f64(sd)[:, None]
        return image_norm, (C, L, src), [x, mu, sd], [ref]
    return make


@tw.jit(out_idx=[-1])
def bn_eval_nchw(B, C, L, dt, eps=1e-5):
    """BatchNorm2d in eval mode on NCHW (B, C, H * W): (x - running_mean[c]) * rsqrt(running_var[c] + eps) * w[c] +
    b[c], one (batch, channel) row per block with the channel's four statistics read as scalars."""
    @T.prim_func
    def main(X: T.Tensor((B, C, L), dt), Rm: T.Tensor((C,), "float32"), Rv: T.Tensor((C,), "float32"),
             W: T.Tensor((C,), "float32"), Bi: T.Tensor((C,), "float32"), Y: T.Tensor((B, C, L), dt)):
        with T.Kernel(C, B) as (c, b):
            x = T.alloc_fragment((L,), "float32")
            y = T.alloc_fragment((L,), dt)
            sc = W[c] * T.rsqrt(Rv[c] + eps)
            sh = Bi[c] - Rm[c] * sc
            T.copy(X[b, c, 0], x)
            for j in T.Parallel(L):
                y[j] = x[j] * sc + sh
            T.copy(y, Y[b, c, 0])

    return main


def _bn_eval(dt, shape, rng):
    B, C, L = shape
    x = randn(rng, shape, dt)
    rm, rv = randn(rng, C, "float32"), rng.uniform(0.5, 2, C).astype(np.float32)
    w, b = rng.uniform(0.5, 1.5, C).astype(np.float32), randn(rng, C, "float32")
    sc = f64(w) / np.sqrt(f64(rv) + 1e-5)
    ref = (f64(x) - f64(rm)[None, :, None]) * sc[None, :, None] + f64(b)[None, :, None]
    return bn_eval_nchw, (B, C, L, dt), [x, rm, rv, w, b], [ref]


@tw.jit(out_idx=[-1])
def pixel_norm(C, L, dt, bl=16, eps=1e-8):
    """StyleGAN's pixel norm of (C, H * W): x / sqrt(mean over channels of x^2 + eps), a column reduction."""
    @T.prim_func
    def main(X: T.Tensor((C, L), dt), Y: T.Tensor((C, L), dt)):
        with T.Kernel(T.ceildiv(L, bl)) as bx:
            x = T.alloc_fragment((C, bl), "float32")
            q = T.alloc_fragment((C, bl), "float32")
            y = T.alloc_fragment((C, bl), dt)
            ss = T.alloc_fragment((bl,), "float32")
            T.copy(X[0, bx * bl], x)
            for c, j in T.Parallel(C, bl):
                q[c, j] = x[c, j] * x[c, j]
            T.reduce_sum(q, ss, dim=0)
            for c, j in T.Parallel(C, bl):
                y[c, j] = x[c, j] * T.rsqrt(ss[j] / C + eps)
            T.copy(y, Y[0, bx * bl])

    return main


def _pixel_norm(dt, shape, rng):
    x = randn(rng, shape, dt)
    X = f64(x)
    return pixel_norm, (*shape, dt), [x], [X / np.sqrt((X * X).mean(0, keepdims=True) + 1e-8)]


# ----------------------------------------------------------------------------------------------- counting / searching
@tw.jit(out_idx=[-1])
def bincount_rows(M, N, NB, bm=BM):
    """torch.bincount of each row of int32 values in [0, NB) (minlength NB), by comparison: a (bm, NB, N) map of
    x[i, j] == b reduced over its last dim."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Cn: T.Tensor((M, NB), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "int32")
            e = T.alloc_fragment((bm, NB, N), "int32")
            c = T.alloc_fragment((bm, NB), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, b, j in T.Parallel(bm, NB, N):
                e[i, b, j] = T.where(x[i, j] == b, 1, 0)
            T.reduce_sum(e, c, dim=2)
            T.copy(c, Cn[bx * bm, 0])

    return main


def _bincount_rows(dt, shape, rng):
    M, N, NB = shape
    x = rng.integers(0, NB, (M, N)).astype(np.int32)
    return bincount_rows, shape, [x], [np.stack([np.bincount(r, minlength=NB) for r in x])]


@tw.jit(out_idx=[-1])
def segment_max(NS, N, D, dt):
    """torch.segment_reduce(data, "max", offsets=...) over sorted segments (rows Off[s] .. Off[s + 1] of (N, D)),
    empty segments -inf: one segment per block, a serial loop of row copies with a run-time trip count."""
    @T.prim_func
    def main(X: T.Tensor((N, D), dt), Off: T.Tensor((NS + 1,), "int32"), Y: T.Tensor((NS, D), dt)):
        with T.Kernel(NS) as s:
            r = T.alloc_fragment((D,), "float32")
            m = T.alloc_fragment((D,), "float32")
            y = T.alloc_fragment((D,), dt)
            T.fill(m, -T.infinity("float32"))
            for k in T.serial(Off[s], Off[s + 1]):
                T.copy(X[k, 0], r)
                for j in T.Parallel(D):
                    m[j] = T.max(m[j], r[j])
            T.copy(m, y)
            T.copy(y, Y[s, 0])

    return main


def _segment_max(dt, shape, rng):
    NS, N, D = shape
    x = randn(rng, (N, D), dt)
    cuts = np.sort(rng.integers(0, N + 1, NS - 1))
    off = np.concatenate([[0], cuts, [N]]).astype(np.int32)
    if NS > 1:
        off[1] = 0  # an empty segment
    ref = np.stack([f64(x[off[s]:off[s + 1]]).max(0) if off[s + 1] > off[s] else np.full(D, -np.inf) for s in range(NS)])
    return segment_max, (NS, N, D, dt), [x, off], [ref]


@tw.jit(out_idx=[-1])
def searchsorted(M, N, NB, dt, right, bm=BM):
    """torch.searchsorted(boundaries, q, right=...) / torch.bucketize of a (M, N) query tile against NB sorted
    boundaries: the count of boundaries < q (left) or <= q (right), a serial loop over the boundaries reading
    each as a scalar of a tile."""
    @T.prim_func
    def main(Q: T.Tensor((M, N), dt), Bd: T.Tensor((NB,), dt), Ix: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            q = T.alloc_fragment((bm, N), "float32")
            b = T.alloc_fragment((NB,), "float32")
            c = T.alloc_fragment((bm, N), "int32")
            T.copy(Q[bx * bm, 0], q)
            T.copy(Bd, b)
            T.clear(c)
            for k in T.serial(NB):
                for i, j in T.Parallel(bm, N):
                    if right:
                        c[i, j] = c[i, j] + T.where(b[k] <= q[i, j], 1, 0)
                    else:
                        c[i, j] = c[i, j] + T.where(b[k] < q[i, j], 1, 0)
            T.copy(c, Ix[bx * bm, 0])

    return main


def _searchsorted(right):
    def make(dt, shape, rng):
        M, N, NB = shape
        bd = np.sort(rng.integers(-8, 8, NB)).astype(npdt(dt))
        q = rng.integers(-10, 10, (M, N)).astype(npdt(dt))
        return searchsorted, (M, N, NB, dt, right), [q, bd], [np.searchsorted(f64(bd), f64(q), side="right" if right else "left")]
    return make


@tw.jit(out_idx=[-2, -1])
def unique_consec(M, N, dt, form, bm=BM):
    """torch.unique_consecutive's keep mask per row (1 where x[i, j] != x[i, j - 1], column 0 kept) and the count
    of runs: `shift` reads x[i, j - 1] of the row tile (j >= 1); `copies` copies columns 1.. and 0..N-2 from global
    memory into tiles of their own and stores the mask's columns 1.. at column 1 of the output."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), K: T.Tensor((M, N), "int32"), Cn: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            k = T.alloc_fragment((bm, N), "int32")
            cn = T.alloc_fragment((bm,), "int32")
            if form == "shift":
                x = T.alloc_fragment((bm, N), dt)
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    k[i, j] = T.where(j == 0, 1, T.where(x[i, j] != x[i, T.max(j - 1, 0)], 1, 0))
            else:
                a = T.alloc_fragment((bm, N - 1), dt)
                p = T.alloc_fragment((bm, N - 1), dt)
                kk = T.alloc_fragment((bm, N - 1), "int32")
                T.copy(X[bx * bm, 1], a)
                T.copy(X[bx * bm, 0], p)
                for i, j in T.Parallel(bm, N - 1):
                    kk[i, j] = T.where(a[i, j] != p[i, j], 1, 0)
                for i, j in T.Parallel(bm, N):
                    k[i, j] = 1
                T.copy(kk, K[bx * bm, 1])
            T.reduce_sum(k if form == "shift" else kk, cn, dim=1)
            if form == "shift":
                T.copy(k, K[bx * bm, 0])
            else:
                for i in T.Parallel(bm):
                    cn[i] = cn[i] + 1
                T.copy(k[:, 0:1], K[bx * bm, 0])
            T.copy(cn, Cn[bx * bm])

    return main


def _unique_consec(form):
    def make(dt, shape, rng):
        M, N = shape
        x = rng.integers(0, 3, shape).astype(npdt(dt))
        keep = np.ones(shape, np.int64)
        keep[:, 1:] = x[:, 1:] != x[:, :-1]
        return unique_consec, (M, N, dt, form), [x], [keep, keep.sum(1)]
    return make


# ----------------------------------------------------------------------------------------------- scans / sorting
@tw.jit(out_idx=[-1])
def cummax1(M, N, dt, bm=BM):
    """torch.cummax(x, dim=1).values: a serial loop over columns on a (bm, N) tile, y[i, j] = max(y[i, j - 1],
    x[i, j]) a column map."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            for j in T.serial(1, N):
                for i in T.Parallel(bm):
                    x[i, j] = T.max(x[i, j], x[i, j - 1])
            T.copy(x, Y[bx * bm, 0])

    return main


@tw.jit(out_idx=[-1])
def cummax0(M, N, dt, bn=16):
    """torch.cummax(x, dim=0).values: a serial loop over the rows of a column block, each row a vector max with
    the previous."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(N, bn)) as by:
            x = T.alloc_fragment((M, bn), dt)
            T.copy(X[0, by * bn], x)
            for r in T.serial(1, M):
                for j in T.Parallel(bn):
                    x[r, j] = T.max(x[r, j], x[r - 1, j])
            T.copy(x, Y[0, by * bn])

    return main


def _cummax(form):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt)
        return (cummax1 if form == "dim1" else cummax0), (*shape, dt), [x], [np.maximum.accumulate(f64(x), axis=1 if form == "dim1" else 0)]
    return make


@tw.jit(out_idx=[-1])
def logcumsumexp0(M, N, dt, bn=16):
    """torch.logcumsumexp(x, dim=0): a serial loop over rows of a column block, y[r] = m + log(exp(y[r-1] - m) +
    exp(x[r] - m)), m = max(y[r - 1], x[r])."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(N, bn)) as by:
            x = T.alloc_fragment((M, bn), "float32")
            y = T.alloc_fragment((M, bn), dt)
            T.copy(X[0, by * bn], x)
            for r in T.serial(1, M):
                for j in T.Parallel(bn):
                    x[r, j] = T.max(x[r - 1, j], x[r, j]) + T.log(T.exp(x[r - 1, j] - T.max(x[r - 1, j], x[r, j])) +
                                                              T.exp(x[r, j] - T.max(x[r - 1, j], x[r, j])))
            T.copy(x, y)
            T.copy(y, Y[0, by * bn])

    return main


def _lcse(dt, shape, rng):
    x = randn(rng, shape, dt, 3.0)
    return logcumsumexp0, (*shape, dt), [x], [np.logaddexp.accumulate(f64(x), axis=0)], {"tol": (1e-5 * shape[0], 1e-4)}


@tw.jit(out_idx=[-2, -1])
def sort_rows(M, N, dt, bm=BM):
    """torch.sort of short rows (ascending, stable) by ranks: rank[i, j] = #{k: x[i, k] < x[i, j] or (x[i, k] ==
    x[i, j] and k < j)} from a (bm, N, N) map, then y[i, r] = sum_j where(rank[i, j] == r, x[i, j], 0) and the
    indices alike."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt), I: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            e = T.alloc_fragment((bm, N, N), "int32")
            rk = T.alloc_fragment((bm, N), "int32")
            v = T.alloc_fragment((bm, N, N), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            yo = T.alloc_fragment((bm, N), dt)
            ix = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j, k in T.Parallel(bm, N, N):
                e[i, j, k] = T.where(x[i, k] < x[i, j] or (x[i, k] == x[i, j] and k < j), 1, 0)
            T.reduce_sum(e, rk, dim=2)
            for i, r, j in T.Parallel(bm, N, N):
                v[i, r, j] = T.where(rk[i, j] == r, x[i, j], 0.0)
                e[i, r, j] = T.where(rk[i, j] == r, j, 0)
            T.reduce_sum(v, y, dim=2)
            T.reduce_sum(e, ix, dim=2)
            T.copy(y, yo)
            T.copy(yo, Y[bx * bm, 0])
            T.copy(ix, I[bx * bm, 0])

    return main


def _sort_rows(dt, shape, rng):
    x = rng.integers(-4, 5, shape).astype(npdt(dt))
    ix = np.argsort(f64(x), axis=1, kind="stable")
    return sort_rows, (*shape, dt), [x], [np.take_along_axis(f64(x), ix, 1), ix]


@tw.jit(out_idx=[-1])
def expert_offsets(E):
    """MoE's token offsets per expert: the exclusive prefix sum of int32 counts (E,) into (E + 1,), a serial scalar
    loop in one block."""
    @T.prim_func
    def main(Cn: T.Tensor((E,), "int32"), Off: T.Tensor((E + 1,), "int32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((E,), "int32")
            o = T.alloc_fragment((E + 1,), "int32")
            T.copy(Cn, c)
            o[0] = 0
            for e in T.serial(E):
                o[e + 1] = o[e] + c[e]
            T.copy(o, Off)

    return main


def _expert_offsets(dt, shape, rng):
    E, = shape
    c = rng.integers(0, 20, E).astype(np.int32)
    return expert_offsets, shape, [c], [np.concatenate([[0], np.cumsum(c)])]


# ----------------------------------------------------------------------------------------------- element-wise
@tw.jit(out_idx=[-1])
def ew(M, N, dt, kind, bm=BM, d=0.999):
    """Element-wise forms users port: `clamp_t` torch.clamp(x, lo[j], hi[j]) by tensors; `lerp` torch.lerp(a, b,
    w) with a weight tensor; `remainder` x % y with tensors (Python's sign, floats); `nan_to_num` torch.nan_to_num
    (NaN 0, +-inf the dtype's max / min); `logaddexp`; `outer` torch.outer(a, b), a the first column of A read as a[i, 0]
    (`outer_v`: gathered into a 1-D tile first, ascend910b's hint);
    `sign_mul` torch.sign(b) * |a|; `count_range` per-row count of lo[j] <= x < hi[j] (column 0);
    `l2norm` F.normalize(x, dim=-1, eps=1e-12); `argmin` the first index of each row's min (column 0)."""
    big = float(np.finfo(npdt(dt)).max) if dt != "bfloat16" else 3.3895313892515355e38

    @T.prim_func
    def main(A: T.Tensor((M, N), dt), Bt: T.Tensor((M, N), dt), Lo: T.Tensor((N,), dt), Hi: T.Tensor((N,), dt),
             Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), "float32")
            b = T.alloc_fragment((bm, N), "float32")
            lo = T.alloc_fragment((N,), "float32")
            hi = T.alloc_fragment((N,), "float32")
            r = T.alloc_fragment((bm,), "float32")
            ri = T.alloc_fragment((bm,), "int32")
            t = T.alloc_fragment((bm, N), "float32")
            ti = T.alloc_fragment((bm, N), "int32")
            y = T.alloc_fragment((bm, N), dt)
            T.copy(A[bx * bm, 0], a)
            T.copy(Bt[bx * bm, 0], b)
            T.copy(Lo, lo)
            T.copy(Hi, hi)
            if kind == "clamp_t":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.min(T.max(a[i, j], lo[j]), hi[j])
            elif kind == "lerp":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = a[i, j] + lo[j] * (b[i, j] - a[i, j])
            elif kind == "remainder":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = a[i, j] % b[i, j]
            elif kind == "nan_to_num":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.where(a[i, j] != a[i, j], 0.0, T.max(T.min(a[i, j], big), -big))
            elif kind == "logaddexp":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.max(a[i, j], b[i, j]) + T.log(1.0 + T.exp(-T.abs(a[i, j] - b[i, j])))
            elif kind == "outer":
                for i, j in T.Parallel(bm, N):
                    t[i, j] = a[i, 0] * lo[j]
                T.copy(t, y)
            elif kind == "outer_v":
                for i in T.Parallel(bm):
                    r[i] = a[i, 0]
                for i, j in T.Parallel(bm, N):
                    t[i, j] = r[i] * lo[j]
                T.copy(t, y)
            elif kind == "sign_mul":
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.abs(a[i, j]) * T.where(b[i, j] > 0, 1.0, T.where(b[i, j] < 0, -1.0, 0.0))
            elif kind == "count_range":
                for i, j in T.Parallel(bm, N):
                    t[i, j] = T.where(lo[j] <= a[i, j] and a[i, j] < hi[j], 1.0, 0.0)
                T.reduce_sum(t, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.where(j == 0, r[i], 0.0)
            elif kind == "l2norm":
                for i, j in T.Parallel(bm, N):
                    t[i, j] = a[i, j] * a[i, j]
                T.reduce_sum(t, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = a[i, j] / T.max(T.sqrt(r[i]), 1e-12)
            else:
                T.reduce_min(a, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    ti[i, j] = T.where(a[i, j] == r[i], j, N)
                T.reduce_min(ti, ri, dim=1)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.where(j == 0, T.cast(ri[i], "float32"), 0.0)
            T.copy(y, Y[bx * bm, 0])

    return main


def _ew(kind):
    def make(dt, shape, rng):
        M, N = shape
        a, b = randn(rng, shape, dt, 3.0), randn(rng, shape, dt, 3.0)
        lo = randn(rng, N, dt)
        hi = (f64(lo) + rng.uniform(0, 2, N)).astype(npdt(dt))
        A, B, LO, HI = f64(a), f64(b), f64(lo), f64(hi)
        extra = {}
        if kind == "clamp_t":
            ref = np.minimum(np.maximum(A, LO), HI)
        elif kind == "lerp":
            lo = rng.uniform(0, 1, N).astype(npdt(dt))
            ref = A + f64(lo) * (B - A)
            extra = {"tol": (1e-5, 1e-4)}
        elif kind == "remainder":
            b = np.where(np.abs(f64(b)) < 0.5, 1.5, f64(b)).astype(npdt(dt))
            ref = f64(np.remainder(a.astype(np.float32), b.astype(np.float32)))
        elif kind == "nan_to_num":
            flat = a.reshape(-1)
            flat[0::5] = np.nan
            flat[1::7] = np.inf
            flat[2::7] = -np.inf
            mx = float(np.finfo(npdt(dt)).max) if dt != "bfloat16" else 3.3895313892515355e38
            ref = np.nan_to_num(f64(a), nan=0.0, posinf=mx, neginf=-mx)
        elif kind == "logaddexp":
            ref = np.logaddexp(A, B)
        elif kind in ("outer", "outer_v"):
            ref = A[:, :1] * LO[None, :]
        elif kind == "sign_mul":
            b.reshape(-1)[::4] = 0
            ref = np.abs(A) * np.sign(f64(b))
        elif kind == "count_range":
            ref = np.zeros(shape)
            ref[:, 0] = ((LO <= A) & (A < HI)).sum(1)
        elif kind == "l2norm":
            ref = A / np.maximum(np.sqrt((A * A).sum(1, keepdims=True)), 1e-12)
        else:
            a = rng.integers(-3, 4, shape).astype(npdt(dt))
            ref = np.zeros(shape)
            ref[:, 0] = f64(a).argmin(1)
        return ew, (M, N, dt, kind), [a, b, lo, hi], [ref], extra
    return make


@tw.jit()
def ema_update(M, N, bm=BM, d=0.999):
    """A model EMA's in-place update (timm's ModelEmaV2): ema = d * ema + (1 - d) * p, ema float32 written back."""
    @T.prim_func
    def main(E: T.Tensor((M, N), "float32"), P: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            e = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            T.copy(E[bx * bm, 0], e)
            T.copy(P[bx * bm, 0], p)
            for i, j in T.Parallel(bm, N):
                e[i, j] = d * e[i, j] + (1.0 - d) * p[i, j]
            T.copy(e, E[bx * bm, 0])

    return main


def _ema(dt, shape, rng):
    e, p = randn(rng, shape, "float32"), randn(rng, shape, "float32")
    return ema_update, shape, [e, p], [0.999 * f64(e) + (1 - 0.999) * f64(p)], {"inplace": (0,)}


@tw.jit(out_idx=[-1])
def int_floordiv(M, N, bm=BM):
    """torch.div(a, b, rounding_mode="floor") and torch.remainder on int32 tensors with negative values (Python's
    signs), a * 0 + floordiv and remainder packed as q * 1000 + r (|r| < 1000)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), Bt: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), "int32")
            b = T.alloc_fragment((bm, N), "int32")
            y = T.alloc_fragment((bm, N), "int32")
            T.copy(A[bx * bm, 0], a)
            T.copy(Bt[bx * bm, 0], b)
            for i, j in T.Parallel(bm, N):
                y[i, j] = (a[i, j] // b[i, j]) * 1000 + a[i, j] % b[i, j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _int_floordiv(dt, shape, rng):
    a = rng.integers(-5000, 5000, shape).astype(np.int32)
    b = rng.integers(1, 200, shape).astype(np.int32) * rng.choice([-1, 1], shape).astype(np.int32)
    return int_floordiv, shape, [a, b], [(a.astype(np.int64) // b) * 1000 + a.astype(np.int64) % b]


CASES = {
    # LLM inference
    "rope_partial": (_rope_partial, F3, [(5, 3, 32, 16, 11), (1, 1, 4, 2, 1)]),
    "decode_alibi": (_decode_attn("alibi"), H16, [(3, 5, 37, 16), (1, 1, 1, 16)]),
    "decode_window": (_decode_attn("window"), H16, [(3, 5, 37, 16), (1, 1, 1, 16)]),
    "decode_sink": (_decode_attn("sink"), H16, [(3, 5, 37, 16), (1, 1, 1, 16)]),
    "softcap_logits": (_logits("softcap"), F3, [(13, 37), (1, 1)]),
    "presence_freq_penalty": (_logits("penalty"), F3, [(13, 37), (1, 1)]),
    "min_tokens_eos": (_logits("min_tokens"), F3, [(13, 37), (1, 2)]),
    "entropy_temp": (_logits("entropy"), F3, [(13, 37), (1, 1)]),
    "beam_step": (_beam("pow"), F3, [(13, 37), (1, 1)]),
    "beam_step_explog": (_beam("explog"), F3, [(13, 37), (1, 1)]),
    "typical_accept": (_typical, F3, [(13, 37), (1, 1)]),
    "ce_ignore_index": (_ce("ignore"), F3, [(13, 37), (1, 1)]),
    "ce_soft_targets": (_ce("soft"), F3, [(13, 37), (1, 1)]),
    "ce_z_loss": (_ce("zloss"), F3, [(13, 37), (1, 1)]),
    "token_logprobs": (_ce("logprob"), F3, [(13, 37), (1, 1)]),
    "grpo_kl_k3": (_grpo_kl, F3, [(13, 37), (1, 1)]),
    "grpo_advantage": (_grpo_adv, ("float32",), [(13, 7), (1, 2)]),
    "kv_quant_asym_token": (_kvq("token"), F3, [(13, 37), (1, 1)]),
    "kv_quant_asym_channel": (_kvq("channel"), F3, [(13, 37), (1, 1)]),
    "kv_dequant_asym_token": (_kvdq("token"), F3, [(13, 37), (1, 1)]),
    "kv_dequant_asym_channel": (_kvdq("channel"), F3, [(13, 37), (1, 1)]),
    "group_quant_3d": (_gq("tile3d"), F3, [(13, 3, 8), (1, 1, 1)]),
    "group_quant_loop": (_gq("groups"), F3, [(13, 3, 8), (1, 1, 1)]),
    "group_quant_loop_col": (_gq("groups_col"), F3, [(13, 3, 8), (1, 1, 1)]),
    "swiglu_clamp_halves": (_swiglu_clamp("halves"), F3, [(13, 37), (1, 1)]),
    "swiglu_clamp_interleaved": (_swiglu_clamp("interleaved"), F3, [(13, 37), (1, 1)]),
    "add_layernorm": (_add_ln, F3, [(13, 37), (1, 1)]),
    "layer_scale": (_layer_scale, F3, [(13, 37), (1, 1)]),
    "logit_bias": (_logit_bias, F3, [(3, 37, 5), (1, 1, 1)]),
    "exp_race_sample": (_exp_race, F3, [(13, 37), (1, 1)]),
    "top_k_mask": (_top_k, F3, [(13, 37), (1, 2)]),
    "top_p_sorted_cumsum": (_top_p_sorted, F3, [(13, 37), (2, 2)]),
    "gemm_geglu_cat": (_gemm_geglu, H16, [(13, 37, 45), (1, 1, 1)]),
    # vision
    "dwconv_nhwc_rows": (_dwconv("rows"), F2, [(5, 9, 37), (3, 3, 1)]),
    "dwconv_nhwc_copies": (_dwconv("copies"), F3, [(5, 9, 37), (3, 3, 1)]),
    "bilinear_resize": (_bilinear, F3, [(2, 5, 7, 9, 13), (1, 1, 1, 1, 1)]),
    "upsample2x_map": (_up2("map"), F2, [(2, 5, 7), (1, 1, 1)]),
    "upsample2x_rows": (_up2("rows"), F2, [(2, 5, 7), (1, 1, 1)]),
    "box_iou": (_box_iou, F3, [(13, 37), (1, 1)]),
    "soft_nms_step": (_soft_nms, F3, [(37,), (1,)]),
    "box_decode_rows": (_box_decode("rows"), F3, [(37,), (1,)]),
    "box_decode_gather": (_box_decode("gather"), F3, [(37,), (1,)]),
    "box_decode_coords": (_box_decode("coords"), F3, [(37,), (1,)]),
    "image_norm_u8": (_image_norm("uint8"), ("float32",), [(3, 100), (1, 1)]),
    "image_norm_i32": (_image_norm("int32"), ("float32",), [(3, 100), (1, 1)]),
    "bn_eval_nchw": (_bn_eval, F3, [(2, 3, 37), (1, 1, 1)]),
    "pixel_norm": (_pixel_norm, F3, [(13, 37), (1, 1)]),
    # counting, searching, scans, sorting
    "bincount_rows": (_bincount_rows, ("int32",), [(5, 37, 6), (1, 1, 1)]),
    "segment_max": (_segment_max, F3, [(5, 23, 37), (1, 1, 1)]),
    "searchsorted_left": (_searchsorted(False), ("float32", "int32"), [(13, 37, 9), (1, 1, 1)]),
    "bucketize_right": (_searchsorted(True), ("float32", "int32"), [(13, 37, 9), (1, 1, 1)]),
    "unique_consec_shift": (_unique_consec("shift"), ("int32", "float32"), [(13, 37), (1, 2)]),
    "unique_consec_copies": (_unique_consec("copies"), ("int32", "float32"), [(13, 37), (1, 2)]),
    "cummax_dim1": (_cummax("dim1"), F3, [(13, 37), (2, 2)]),
    "cummax_dim0": (_cummax("dim0"), F3, [(13, 37), (2, 1)]),
    "logcumsumexp_dim0": (_lcse, F3, [(13, 37), (2, 1)]),
    "sort_rows_rank": (_sort_rows, ("float32", "int32"), [(5, 9), (1, 1)]),
    "expert_offsets": (_expert_offsets, ("int32",), [(37,), (1,)]),
    # element-wise
    "clamp_tensors": (_ew("clamp_t"), F3, [(13, 37), (1, 1)]),
    "lerp_tensor_weight": (_ew("lerp"), F3, [(13, 37), (1, 1)]),
    "remainder_float": (_ew("remainder"), F3, [(13, 37), (1, 1)]),
    "nan_to_num": (_ew("nan_to_num"), F3, [(13, 37), (1, 1)]),
    "logaddexp": (_ew("logaddexp"), F3, [(13, 37), (1, 1)]),
    "outer_product": (_ew("outer"), F3, [(13, 37), (1, 1)]),
    "outer_product_gather": (_ew("outer_v"), F3, [(13, 37), (1, 1)]),
    "sign_mul": (_ew("sign_mul"), F3, [(13, 37), (1, 1)]),
    "count_in_range": (_ew("count_range"), F3, [(13, 37), (1, 1)]),
    "l2_normalize": (_ew("l2norm"), F3, [(13, 37), (1, 1)]),
    "argmin_first": (_ew("argmin"), F3, [(13, 37), (1, 1)]),
    "ema_inplace": (_ema, ("float32",), [(13, 37), (1, 1)]),
    "int_floordiv_remainder": (_int_floordiv, ("int32",), [(13, 37), (1, 1)]),
}

check = functools.partial(P35.check, cases=CASES)
run = functools.partial(P35.run, cases=CASES)


if __name__ == "__main__":
    import sys
    args = sys.argv[1:]
    targets = ("cpu", "ascend910b")
    if args and args[0].startswith("--target="):
        targets, args = tuple(args[0].split("=", 1)[1].split(",")), args[1:]
    P35.probe(args, targets, cases=CASES)
