"""Session 34's portability hunt (h-port34, docs/testing.md "Session 34: port34"): what users port after the first
hour, written for cpu first as docs/language.md teaches (not bench/op_zoo.py's), each a `tw.jit` factory taking the
dtype, then the same factory with only the target changed to ascend910b (simulator, checker on).

CASES maps a name to (make(dtype, shape, rng) -> (factory, args, inputs, float64 / exact references), dtypes,
shapes), as port33_kernels.py's; its runner (build / check / probe) runs them. `python port34_kernels.py [names]`
runs every case on both targets and prints the outcome (the probe).
"""
import math

import numpy as np

import tilewright as tw
import tilewright.language as T
import port33_kernels as P33
from port33_kernels import BM, f64, npdt, randn, _erf, _softmax64

F3 = ("float32", "float16", "bfloat16")
INV_SQRT2PI = 1.0 / math.sqrt(2 * math.pi)


# ----------------------------------------------------------------------------------------------- norms, backward
@tw.jit(out_idx=[3, 4])
def add_rmsnorm(M, N, dt, bm=BM, eps=1e-6):
    """vLLM's fused_add_rms_norm: h = x + residual (stored as the new residual), y = h * rsqrt(mean(h^2) + eps) * w."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), R: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), dt), Rout: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            h = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), dt)
            ho = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], h)
            T.copy(R[bx * bm, 0], r)
            T.copy(W, w)
            for i, j in T.Parallel(bm, N):
                h[i, j] = h[i, j] + r[i, j]
            T.copy(h, ho)
            for i, j in T.Parallel(bm, N):
                r[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(r, ss, dim=1)
            for i, j in T.Parallel(bm, N):
                y[i, j] = h[i, j] * T.rsqrt(ss[i] / N + eps) * w[j]
            T.copy(y, Y[bx * bm, 0])
            T.copy(ho, Rout[bx * bm, 0])

    return main


def _add_rmsnorm(dt, shape, rng):
    M, N = shape
    x, r = randn(rng, shape, dt), randn(rng, shape, dt)
    w = rng.standard_normal(N).astype(np.float32)
    h = f64(x) + f64(r)
    return add_rmsnorm, (M, N, dt), [x, r, w], [h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w, h]


@tw.jit(out_idx=[-1])
def norm_bwd(M, N, dt, kind, bm=BM):
    """dx of LayerNorm (kind "layer") or RMSNorm ("rms") from x, dy, the weight and the saved mean / rstd."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), DY: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             Mean: T.Tensor((M,), "float32"), Rstd: T.Tensor((M,), "float32"), DX: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            xh = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            rs = T.alloc_fragment((bm,), "float32")
            sg = T.alloc_fragment((bm,), "float32")
            sgx = T.alloc_fragment((bm,), "float32")
            dx = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], xh)
            T.copy(DY[bx * bm, 0], g)
            T.copy(W, w)
            T.copy(Mean[bx * bm], mu)
            T.copy(Rstd[bx * bm], rs)
            for i, j in T.Parallel(bm, N):
                xh[i, j] = (xh[i, j] - mu[i]) * rs[i]
                g[i, j] = g[i, j] * w[j]
                p[i, j] = g[i, j] * xh[i, j]
            T.reduce_sum(p, sgx, dim=1)
            if kind == "layer":
                T.reduce_sum(g, sg, dim=1)
                for i, j in T.Parallel(bm, N):
                    dx[i, j] = rs[i] * (g[i, j] - sg[i] / N - xh[i, j] * sgx[i] / N)
            else:
                for i, j in T.Parallel(bm, N):
                    dx[i, j] = rs[i] * (g[i, j] - xh[i, j] * sgx[i] / N)
            T.copy(dx, DX[bx * bm, 0])

    return main


def _norm_bwd(kind):
    def make(dt, shape, rng):
        M, N = shape
        x, dy = randn(rng, shape, dt, 2.0), randn(rng, shape, dt)
        w = rng.standard_normal(N).astype(np.float32)
        X, G = f64(x), f64(dy) * w
        if kind == "layer":
            mu = X.mean(1)
            rs = 1 / np.sqrt(X.var(1) + 1e-5)
        else:
            mu = np.zeros(M)
            rs = 1 / np.sqrt((X * X).mean(1) + 1e-6)
        mu, rs = mu.astype(np.float32), rs.astype(np.float32)
        xh = (X - f64(mu)[:, None]) * f64(rs)[:, None]
        sgx = (G * xh).mean(1, keepdims=True)
        if kind == "layer":
            ref = f64(rs)[:, None] * (G - G.mean(1, keepdims=True) - xh * sgx)
        else:
            ref = f64(rs)[:, None] * (G - xh * sgx)
        return norm_bwd, (M, N, dt, kind), [x, dy, w, mu, rs], [ref]
    return make


@tw.jit(out_idx=[4, 5])
def layer_norm_dw(M, N, dt, bn=16):
    """LayerNorm's dgamma / dbeta: column sums over every row of dy * xhat and of dy (column blocks, reduce dim 0)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), DY: T.Tensor((M, N), dt), Mean: T.Tensor((M,), "float32"),
             Rstd: T.Tensor((M,), "float32"), DW: T.Tensor((N,), "float32"), DB: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            x = T.alloc_fragment((M, bn), "float32")
            g = T.alloc_fragment((M, bn), "float32")
            mu = T.alloc_fragment((M,), "float32")
            rs = T.alloc_fragment((M,), "float32")
            dw = T.alloc_fragment((bn,), "float32")
            db = T.alloc_fragment((bn,), "float32")
            T.copy(X[0, bx * bn], x)
            T.copy(DY[0, bx * bn], g)
            T.copy(Mean, mu)
            T.copy(Rstd, rs)
            T.reduce_sum(g, db, dim=0)
            for i, j in T.Parallel(M, bn):
                x[i, j] = (x[i, j] - mu[i]) * rs[i] * g[i, j]
            T.reduce_sum(x, dw, dim=0)
            T.copy(dw, DW[bx * bn])
            T.copy(db, DB[bx * bn])

    return main


def _ln_dw(dt, shape, rng):
    M, N = shape
    x, dy = randn(rng, shape, dt, 2.0), randn(rng, shape, dt)
    mu = f64(x).mean(1).astype(np.float32)
    rs = (1 / np.sqrt(f64(x).var(1) + 1e-5)).astype(np.float32)
    xh = (f64(x) - f64(mu)[:, None]) * f64(rs)[:, None]
    return layer_norm_dw, (M, N, dt), [x, dy, mu, rs], [(f64(dy) * xh).sum(0), f64(dy).sum(0)]


@tw.jit(out_idx=[-1])
def softmax_bwd(M, N, dt, log, bm=BM):
    """dx of softmax (y = softmax(x): y * (dy - sum(dy * y))) or of log_softmax (y = log_softmax(x): dy - exp(y) sum(dy))."""
    @T.prim_func
    def main(Y: T.Tensor((M, N), dt), DY: T.Tensor((M, N), dt), DX: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            s = T.alloc_fragment((bm,), "float32")
            dx = T.alloc_fragment((bm, N), dt)
            T.copy(Y[bx * bm, 0], y)
            T.copy(DY[bx * bm, 0], g)
            if log:
                T.reduce_sum(g, s, dim=1)
                for i, j in T.Parallel(bm, N):
                    dx[i, j] = g[i, j] - T.exp(y[i, j]) * s[i]
            else:
                for i, j in T.Parallel(bm, N):
                    p[i, j] = g[i, j] * y[i, j]
                T.reduce_sum(p, s, dim=1)
                for i, j in T.Parallel(bm, N):
                    dx[i, j] = y[i, j] * (g[i, j] - s[i])
            T.copy(dx, DX[bx * bm, 0])

    return main


def _softmax_bwd(log):
    def make(dt, shape, rng):
        M, N = shape
        sm = _softmax64(rng.standard_normal(shape) * 2)
        y = (np.log(sm) if log else sm).astype(npdt(dt))
        dy = randn(rng, shape, dt)
        Y, G = f64(y), f64(dy)
        ref = G - np.exp(Y) * G.sum(1, keepdims=True) if log else Y * (G - (G * Y).sum(1, keepdims=True))
        return softmax_bwd, (M, N, dt, log), [y, dy], [ref]
    return make


@tw.jit(out_idx=[-1])
def act_bwd(M, N, dt, kind, bm=BM):
    """dx of GELU (erf), GELU (tanh), SiLU."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), DY: T.Tensor((M, N), dt), DX: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((bm, N), "float32")
            dx = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(DY[bx * bm, 0], g)
            for i, j in T.Parallel(bm, N):
                v = x[i, j]
                if kind == "gelu":
                    dx[i, j] = g[i, j] * (0.5 * (1.0 + T.erf(v * 0.7071067811865476))
                                          + v * T.exp(-0.5 * v * v) * INV_SQRT2PI)
                elif kind == "gelu_tanh":
                    t = T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))
                    dx[i, j] = g[i, j] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t)
                                          * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v))
                else:
                    s = T.sigmoid(v)
                    dx[i, j] = g[i, j] * s * (1.0 + v * (1.0 - s))
            T.copy(dx, DX[bx * bm, 0])

    return main


def _act_bwd(kind):
    def make(dt, shape, rng):
        M, N = shape
        x, dy = randn(rng, shape, dt, 3.0), randn(rng, shape, dt)
        X, G = f64(x), f64(dy)
        if kind == "gelu":
            d = 0.5 * (1 + _erf(X / math.sqrt(2))) + X * np.exp(-0.5 * X * X) * INV_SQRT2PI
        elif kind == "gelu_tanh":
            t = np.tanh(0.7978845608028654 * (X + 0.044715 * X ** 3))
            d = 0.5 * (1 + t) + 0.5 * X * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * X * X)
        else:
            s = 1 / (1 + np.exp(-X))
            d = s * (1 + X * (1 - s))
        return act_bwd, (M, N, dt, kind), [x, dy], [G * d]
    return make


@tw.jit(out_idx=[3, 4])
def swiglu_bwd(M, N, dt, bm=BM):
    """y = silu(g) * u: dg = dy * u * silu'(g), du = dy * silu(g)."""
    @T.prim_func
    def main(Gt: T.Tensor((M, N), dt), U: T.Tensor((M, N), dt), DY: T.Tensor((M, N), dt),
             DG: T.Tensor((M, N), dt), DU: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            g = T.alloc_fragment((bm, N), "float32")
            u = T.alloc_fragment((bm, N), "float32")
            d = T.alloc_fragment((bm, N), "float32")
            dg = T.alloc_fragment((bm, N), dt)
            du = T.alloc_fragment((bm, N), dt)
            T.copy(Gt[bx * bm, 0], g)
            T.copy(U[bx * bm, 0], u)
            T.copy(DY[bx * bm, 0], d)
            for i, j in T.Parallel(bm, N):
                s = T.sigmoid(g[i, j])
                dg[i, j] = d[i, j] * u[i, j] * s * (1.0 + g[i, j] * (1.0 - s))
                du[i, j] = d[i, j] * g[i, j] * s
            T.copy(dg, DG[bx * bm, 0])
            T.copy(du, DU[bx * bm, 0])

    return main


def _swiglu_bwd(dt, shape, rng):
    M, N = shape
    g, u, dy = randn(rng, shape, dt, 2.0), randn(rng, shape, dt), randn(rng, shape, dt)
    Gv, Uv, D = f64(g), f64(u), f64(dy)
    s = 1 / (1 + np.exp(-Gv))
    return swiglu_bwd, (M, N, dt), [g, u, dy], [D * Uv * s * (1 + Gv * (1 - s)), D * Gv * s]


# ----------------------------------------------------------------------------------------------- losses
@tw.jit(out_idx=[-1])
def cross_entropy(M, N, dt, idt, eps=0.1, bm=BM, lab_dt=None):
    """torch's F.cross_entropy(x, labels, label_smoothing=eps, ignore_index=-100, reduction="none") per row:
    lse - (1 - eps) x[label] - eps / N sum(x); 0 where label == -100. lab_dt: the labels' tile dtype (int32 for
    int64 labels: the copy converts them, the located error's hint)."""
    ldt = lab_dt or idt

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), L: T.Tensor((M,), idt), Loss: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            e = T.alloc_fragment((bm, N), "float32")
            lab = T.alloc_fragment((bm,), ldt)
            mx = T.alloc_fragment((bm,), "float32")
            se = T.alloc_fragment((bm,), "float32")
            sx = T.alloc_fragment((bm,), "float32")
            xl = T.alloc_fragment((bm,), "float32")
            loss = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(L[bx * bm], lab)
            T.reduce_max(x, mx, dim=1)
            T.reduce_sum(x, sx, dim=1)
            for i, j in T.Parallel(bm, N):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, se, dim=1)
            for i, j in T.Parallel(bm, N):
                e[i, j] = T.where(j == lab[i], x[i, j], 0.0)
            T.reduce_sum(e, xl, dim=1)
            for i in T.Parallel(bm):
                loss[i] = T.where(lab[i] == -100, 0.0,
                                  T.log(se[i]) + mx[i] - (1.0 - eps) * xl[i] - eps / N * sx[i])
            T.copy(loss, Loss[bx * bm])

    return main


def _ce_ref(x, lab, eps):
    X = f64(x)
    N = X.shape[1]
    lse = np.log(np.exp(X - X.max(1, keepdims=True)).sum(1)) + X.max(1)
    xl = X[np.arange(len(X)), np.clip(lab, 0, N - 1)]
    return np.where(lab == -100, 0.0, lse - (1 - eps) * xl - eps / N * X.sum(1))


def _ce(idt, lab_dt=None):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt, 2.0)
        lab = rng.integers(0, N, M).astype(npdt(idt))
        lab[0] = N - 1
        if M > 2:
            lab[2] = -100
        return cross_entropy, (M, N, dt, idt, 0.1, BM, lab_dt), [x, lab], [_ce_ref(x, lab.astype(np.int64), 0.1)]
    return make


@tw.jit(out_idx=[-1])
def cross_entropy_bwd(M, N, dt, eps=0.1, bm=BM):
    """dx of the mean of cross_entropy over the non-ignored rows: (softmax - (1 - eps) onehot - eps / N) / count."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), L: T.Tensor((M,), "int32"), cnt: T.float32, DX: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            lab = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            se = T.alloc_fragment((bm,), "float32")
            dx = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(L[bx * bm], lab)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, se, dim=1)
            for i, j in T.Parallel(bm, N):
                dx[i, j] = T.where(lab[i] == -100, 0.0,
                                   (x[i, j] / se[i] - T.where(j == lab[i], 1.0 - eps, 0.0) - eps / N) / cnt)
            T.copy(dx, DX[bx * bm, 0])

    return main


def _ce_bwd(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt, 2.0)
    lab = rng.integers(0, N, M).astype(np.int32)
    if M > 2:
        lab[2] = -100
    cnt = float(max((lab != -100).sum(), 1))
    onehot = (np.arange(N)[None, :] == lab[:, None]) * 0.9
    ref = np.where((lab == -100)[:, None], 0.0, (_softmax64(f64(x)) - onehot - 0.1 / N) / cnt)
    return cross_entropy_bwd, (M, N, dt), [x, lab, cnt], [ref]


@tw.jit(out_idx=[-1])
def lse_middle(B, S, D, dt, bd=16):
    """torch.logsumexp(x, dim=1) of (B, S, D): an (S, bd) window per block, reductions along dim 0."""
    @T.prim_func
    def main(X: T.Tensor((B, S, D), dt), Y: T.Tensor((B, D), "float32")):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, d):
            x = T.alloc_fragment((S, bd), "float32")
            mx = T.alloc_fragment((bd,), "float32")
            s = T.alloc_fragment((bd,), "float32")
            T.copy(X[b, 0:S, d * bd:(d + 1) * bd], x)
            T.reduce_max(x, mx, dim=0)
            for i, j in T.Parallel(S, bd):
                x[i, j] = T.exp(x[i, j] - mx[j])
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(bd):
                s[j] = T.log(s[j]) + mx[j]
            T.copy(s, Y[b, d * bd])

    return main


def _lse_mid(dt, shape, rng):
    B, S, D = shape
    x = randn(rng, shape, dt, 3.0)
    X = f64(x)
    mx = X.max(1)
    return lse_middle, (B, S, D, dt), [x], [np.log(np.exp(X - mx[:, None, :]).sum(1)) + mx]


# ----------------------------------------------------------------------------------------------- sampling pieces
@tw.jit(out_idx=[-1])
def top_p_count(M, N, top_p, bm=BM):
    """Given probabilities sorted in descending order and their cumulative sums, how many to keep: the j with
    cum - p < top_p (the first always)."""
    @T.prim_func
    def main(P: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"), K: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            p = T.alloc_fragment((bm, N), "float32")
            c = T.alloc_fragment((bm, N), "float32")
            keep = T.alloc_fragment((bm, N), "int32")
            k = T.alloc_fragment((bm,), "int32")
            T.copy(P[bx * bm, 0], p)
            T.copy(C[bx * bm, 0], c)
            for i, j in T.Parallel(bm, N):
                keep[i, j] = T.where(c[i, j] - p[i, j] < top_p or j == 0, 1, 0)
            T.reduce_sum(keep, k, dim=1)
            T.copy(k, K[bx * bm])

    return main


def _top_p_count(dt, shape, rng):
    M, N = shape
    p = np.sort(_softmax64(rng.standard_normal(shape) * 2), 1)[:, ::-1].astype(np.float32)
    c = np.cumsum(p, 1, dtype=np.float32)
    keep = ((c - p) < np.float32(0.8)) | (np.arange(N) == 0)[None, :]
    return top_p_count, (M, N, 0.8), [p, c], [keep.sum(1)]


@tw.jit(out_idx=[-1])
def prob_filter(M, N, dt, kind, bm=BM):
    """Filtered and renormalised probabilities: `threshold` keeps p >= Th[row] (top-p's cutoff probability, from the
    sorted pass); `min_p` keeps p >= min_p * max(p)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Th: T.Tensor((M,), "float32"), min_p: T.float32,
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            th = T.alloc_fragment((bm,), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Th[bx * bm], th)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / s[i]
            if kind == "threshold":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(x[i, j] >= th[i], x[i, j], 0.0)
            else:
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(x[i, j] >= min_p * mx[i], x[i, j], 0.0)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * bm, 0])

    return main


def _prob_filter(kind):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt, 2.0)
        p32 = _softmax64(f64(x)).astype(np.float32)
        srt = np.sort(p32, 1)
        # keep the 3 largest: a threshold halfway to the 4th (no element within rounding of it)
        th = (srt[:, -min(3, N)] if N <= 3 else (srt[:, -3] + srt[:, -4]) / 2).astype(np.float32)
        keep = p32 >= (th[:, None] if kind == "threshold" else np.float32(0.1) * p32.max(1, keepdims=True))
        if N <= 3 and kind == "threshold":
            keep[:] = True
        q = np.where(keep, _softmax64(f64(x)), 0.0)
        return prob_filter, (M, N, dt, kind), [x, th, 0.1], [q / q.sum(1, keepdims=True)]
    return make


@tw.jit(out_idx=[-1])
def repetition_penalty(M, V, L, form):
    """HF's RepetitionPenaltyLogitsProcessor: for the tokens a row has seen, logit / pen if > 0 else logit * pen,
    once per token (torch.gather then scatter_). `gather_scatter`: gather the scores by ids, penalise, scatter them
    back; `mask`: mark the seen tokens in a 0 / 1 tile, then one map over the row."""
    @T.prim_func
    def main(X: T.Tensor((M, V), "float32"), Ids: T.Tensor((M, L), "int32"), pen: T.float32,
             Y: T.Tensor((M, V), "float32")):
        with T.Kernel(M) as r:
            x = T.alloc_fragment((V,), "float32")
            ids = T.alloc_fragment((L,), "int32")
            T.copy(X[r, :], x)
            T.copy(Ids[r, :], ids)
            if form == "gather_scatter":
                g = T.alloc_fragment((L,), "float32")
                for t in T.Parallel(L):
                    g[t] = x[ids[t]]
                for t in T.Parallel(L):
                    g[t] = T.where(g[t] > 0.0, g[t] / pen, g[t] * pen)
                for t in T.serial(L):
                    x[ids[t]] = g[t]
            else:
                seen = T.alloc_fragment((V,), "float32")
                T.clear(seen)
                for t in T.serial(L):
                    seen[ids[t]] = 1.0
                for v in T.Parallel(V):
                    x[v] = T.where(seen[v] > 0.0, T.where(x[v] > 0.0, x[v] / pen, x[v] * pen), x[v])
            T.copy(x, Y[r, :])

    return main


def _rep_pen(form):
    def make(dt, shape, rng):
        M, V, L = shape
        x = randn(rng, (M, V), "float32", 2.0)
        ids = rng.integers(0, V, (M, L)).astype(np.int32)
        ids[0, -1] = ids[0, 0]  # a repeated token: penalised once
        ref = f64(x)
        for r in range(M):
            s = np.unique(ids[r])
            ref[r, s] = np.where(ref[r, s] > 0, ref[r, s] / f64(np.float32(1.3)), ref[r, s] * f64(np.float32(1.3)))
        return repetition_penalty, (M, V, L, form), [x, ids, 1.3], [ref]
    return make


# ----------------------------------------------------------------------------------------------- quantization
@tw.jit(out_idx=[-1])
def kv_quant_head(Tn, H, D, dt):
    """KV-cache int8 quantization with a static scale per head: q = clamp(round_half_up(x / s[h]), -128, 127)."""
    @T.prim_func
    def main(X: T.Tensor((Tn, H, D), dt), S: T.Tensor((H,), "float32"), Q: T.Tensor((Tn, H, D), "int8")):
        with T.Kernel(Tn) as t:
            x = T.alloc_fragment((H, D), "float32")
            s = T.alloc_fragment((H,), "float32")
            q = T.alloc_fragment((H, D), "int8")
            T.copy(X[t, :, :], x)
            T.copy(S, s)
            for h, d in T.Parallel(H, D):
                q[h, d] = T.cast(T.min(T.max(T.floor(x[h, d] / s[h] + 0.5), -128.0), 127.0), "int8")
            T.copy(q, Q[t, :, :])

    return main


def _kv_quant(dt, shape, rng):
    Tn, H, D = shape
    x = randn(rng, shape, dt, 2.0)
    s = (0.005 + rng.random(H) * 0.02).astype(np.float32)
    q = np.clip(np.floor(x.astype(np.float32) / s[None, :, None] + np.float32(0.5)), -128, 127).astype(np.int8)
    return kv_quant_head, (Tn, H, D, dt), [x, s], [q]


@tw.jit(out_idx=[-1])
def kv_dequant_head(Tn, H, D, dt):
    @T.prim_func
    def main(Q: T.Tensor((Tn, H, D), "int8"), S: T.Tensor((H,), "float32"), Y: T.Tensor((Tn, H, D), dt)):
        with T.Kernel(Tn) as t:
            q = T.alloc_fragment((H, D), "int8")
            s = T.alloc_fragment((H,), "float32")
            y = T.alloc_fragment((H, D), dt)
            T.copy(Q[t, :, :], q)
            T.copy(S, s)
            for h, d in T.Parallel(H, D):
                y[h, d] = q[h, d] * s[h]
            T.copy(y, Y[t, :, :])

    return main


def _kv_dequant(dt, shape, rng):
    Tn, H, D = shape
    q = rng.integers(-128, 128, shape).astype(np.int8)
    s = (0.005 + rng.random(H) * 0.02).astype(np.float32)
    return kv_dequant_head, (Tn, H, D, dt), [q, s], [f64(q) * f64(s)[None, :, None]]


@tw.jit(out_idx=[2, 3])
def kv_quant_dynamic(Tn, H, D, dt):
    """Per token and head: s = amax / 127, q = round(x / s) (symmetric int8), the scales out as float32."""
    @T.prim_func
    def main(X: T.Tensor((Tn, H, D), dt), dummy: T.int32, Q: T.Tensor((Tn, H, D), "int8"),
             S: T.Tensor((Tn, H), "float32")):
        with T.Kernel(Tn) as t:
            x = T.alloc_fragment((H, D), "float32")
            a = T.alloc_fragment((H, D), "float32")
            s = T.alloc_fragment((H,), "float32")
            q = T.alloc_fragment((H, D), "int8")
            T.copy(X[t, :, :], x)
            for h, d in T.Parallel(H, D):
                a[h, d] = T.abs(x[h, d])
            T.reduce_max(a, s, dim=1)
            for h in T.Parallel(H):
                s[h] = T.max(s[h], 1e-6) / 127.0
            for h, d in T.Parallel(H, D):
                q[h, d] = T.cast(T.floor(x[h, d] / s[h] + 0.5), "int8")
            T.copy(q, Q[t, :, :])
            T.copy(s, S[t, :])

    return main


def _kv_quant_dyn(dt, shape, rng):
    Tn, H, D = shape
    x = randn(rng, shape, dt, 2.0)
    x32 = x.astype(np.float32)
    s = np.maximum(np.abs(x32).max(2), np.float32(1e-6)) / np.float32(127)
    q = np.floor(x32 / s[:, :, None] + np.float32(0.5)).astype(np.int8)
    return kv_quant_dynamic, (Tn, H, D, dt), [x, 0], [q, f64(s)]


@tw.jit(out_idx=[-1])
def int4_dequant(K, N, G, dt, form):
    """4-bit weights with a scale and a zero point per group of G rows of K: w = (q - z) * s.
    `awq`: 8 nibbles per int32 along N (QW (K, N / 8), nibble j % 8 of QW[k, j // 8]); `gptq`: along K
    (QW (K / 8, N), nibble k % 8 of QW[k // 8, n]); `gptq_rows`: the gptq layout, a serial loop over the rows of K
    around a 1-D map."""
    qshape = (K, N // 8) if form == "awq" else (K // 8, N)

    @T.prim_func
    def main(QW: T.Tensor(qshape, "int32"), S: T.Tensor((K // G, N), dt), Z: T.Tensor((K // G, N), "int32"),
             W: T.Tensor((K, N), dt)):
        with T.Kernel(K // G) as g:
            s = T.alloc_fragment((N,), "float32")
            z = T.alloc_fragment((N,), "int32")
            w = T.alloc_fragment((G, N), dt)
            T.copy(S[g, :], s)
            T.copy(Z[g, :], z)
            if form == "awq":
                q = T.alloc_fragment((G, N // 8), "int32")
                T.copy(QW[g * G, 0], q)
                for i, j in T.Parallel(G, N):
                    w[i, j] = T.cast(((q[i, j // 8] >> ((j % 8) * 4)) & 15) - z[j], "float32") * s[j]
            else:
                q = T.alloc_fragment((G // 8, N), "int32")
                T.copy(QW[g * (G // 8), 0], q)
                if form == "gptq":
                    for i, j in T.Parallel(G, N):
                        w[i, j] = T.cast(((q[i // 8, j] >> ((i % 8) * 4)) & 15) - z[j], "float32") * s[j]
                else:
                    for i in T.serial(G):
                        for j in T.Parallel(N):
                            w[i, j] = T.cast(((q[i // 8, j] >> ((i % 8) * 4)) & 15) - z[j], "float32") * s[j]
            T.copy(w, W[g * G, 0])

    return main


def _int4(form):
    def make(dt, shape, rng):
        K, N, G = shape
        nib = rng.integers(0, 16, (K, N)).astype(np.int64)
        if form == "awq":
            qw = (nib.reshape(K, N // 8, 8) << (4 * np.arange(8))).sum(-1)
        else:
            qw = (nib.reshape(K // 8, 8, N) << (4 * np.arange(8))[None, :, None]).sum(1)
        qw = qw.astype(np.uint32).view(np.int32)
        s = (0.01 + rng.random((K // G, N)) * 0.05).astype(npdt(dt))
        z = rng.integers(0, 16, (K // G, N)).astype(np.int32)
        ref = (nib - np.repeat(z, G, 0)) * np.repeat(f64(s), G, 0)
        return int4_dequant, (K, N, G, dt, form), [qw, s, z], [ref]
    return make


# ----------------------------------------------------------------------------------------------- conv / scan
@tw.jit(out_idx=[-1])
def causal_conv1d(B, D, L, Wk, dt, form, bd=4):
    """Mamba's depthwise causal conv1d + SiLU: y[b, d, l] = silu(bias[d] + sum_k w[d, k] x[b, d, l - Wk + 1 + k]).
    `shift`: the window with Wk - 1 columns of left padding (a negative origin reads zeros), taps as shifted reads;
    `copies`: one copy per tap at origin l - Wk + 1 + k; `copies_wcol`: that, with the tap's column of weights
    first copied into a 1-D tile (wk[i] = w[i, k]) and used as wk[i]."""
    @T.prim_func
    def main(X: T.Tensor((B, D, L), dt), Wt: T.Tensor((D, Wk), "float32"), Bias: T.Tensor((D,), "float32"),
             Y: T.Tensor((B, D, L), dt)):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, dd):
            w = T.alloc_fragment((bd, Wk), "float32")
            bias = T.alloc_fragment((bd,), "float32")
            acc = T.alloc_fragment((bd, L), "float32")
            y = T.alloc_fragment((bd, L), dt)
            T.copy(Wt[dd * bd, 0], w)
            T.copy(Bias[dd * bd], bias)
            for i, l in T.Parallel(bd, L):
                acc[i, l] = bias[i]
            if form == "shift":
                xp = T.alloc_fragment((bd, L + Wk - 1), "float32")
                T.copy(X[b, dd * bd, 1 - Wk], xp)
                for k in T.serial(Wk):
                    for i, l in T.Parallel(bd, L):
                        acc[i, l] = acc[i, l] + w[i, k] * xp[i, l + k]
            else:
                xs = T.alloc_fragment((bd, L), "float32")
                wk = T.alloc_fragment((bd,), "float32")
                for k in T.serial(Wk):
                    T.copy(X[b, dd * bd, k + 1 - Wk], xs)
                    if form == "copies":
                        for i, l in T.Parallel(bd, L):
                            acc[i, l] = acc[i, l] + w[i, k] * xs[i, l]
                    else:  # "copies_wcol": the tap's weights first copied into a 1-D tile
                        for i in T.Parallel(bd):
                            wk[i] = w[i, k]
                        for i, l in T.Parallel(bd, L):
                            acc[i, l] = acc[i, l] + wk[i] * xs[i, l]
            for i, l in T.Parallel(bd, L):
                y[i, l] = T.silu(acc[i, l])
            T.copy(y, Y[b, dd * bd, 0])

    return main


def _cconv(form):
    def make(dt, shape, rng):
        B, D, L, Wk = shape
        x = randn(rng, (B, D, L), dt)
        w = rng.standard_normal((D, Wk)).astype(np.float32)
        bias = rng.standard_normal(D).astype(np.float32)
        xp = np.concatenate([np.zeros((B, D, Wk - 1)), f64(x)], 2)
        acc = bias[None, :, None] + sum(w[None, :, k:k + 1] * xp[:, :, k:k + L] for k in range(Wk))
        return causal_conv1d, (B, D, L, Wk, dt, form), [x, w, bias], [acc / (1 + np.exp(-acc))]
    return make


@tw.jit(out_idx=[3, 4])
def conv_state_update(B, D, Wk, dt, bd=4):
    """Mamba's causal_conv1d_update (decode): the state (B, D, Wk) shifts left by one, x enters at the end,
    y = silu(sum_k w[d, k] state[d, k] + bias[d]); the new state out."""
    @T.prim_func
    def main(St: T.Tensor((B, D, Wk), dt), X: T.Tensor((B, D), dt), Wt: T.Tensor((D, Wk), "float32"),
             Y: T.Tensor((B, D), dt), Sout: T.Tensor((B, D, Wk), dt)):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, dd):
            st = T.alloc_fragment((bd, Wk), "float32")
            ns = T.alloc_fragment((bd, Wk), "float32")
            w = T.alloc_fragment((bd, Wk), "float32")
            x = T.alloc_fragment((bd,), "float32")
            s = T.alloc_fragment((bd,), "float32")
            y = T.alloc_fragment((bd,), dt)
            T.copy(St[b, dd * bd:(dd + 1) * bd, :], st)
            T.copy(X[b, dd * bd], x)
            T.copy(Wt[dd * bd, 0], w)
            for i, k in T.Parallel(bd, Wk):
                ns[i, k] = T.where(k == Wk - 1, x[i], st[i, T.min(k + 1, Wk - 1)])
            for i, k in T.Parallel(bd, Wk):
                st[i, k] = ns[i, k] * w[i, k]
            T.reduce_sum(st, s, dim=1)
            for i in T.Parallel(bd):
                y[i] = T.silu(s[i])
            T.copy(y, Y[b, dd * bd])
            T.copy(ns, Sout[b, dd * bd:(dd + 1) * bd, :])

    return main


def _conv_update(dt, shape, rng):
    B, D, Wk = shape
    st, x = randn(rng, (B, D, Wk), dt), randn(rng, (B, D), dt)
    w = rng.standard_normal((D, Wk)).astype(np.float32)
    ns = np.concatenate([f64(st)[:, :, 1:], f64(x)[:, :, None]], 2)
    a = (ns * w[None]).sum(2)
    return conv_state_update, (B, D, Wk, dt), [st, x, w], [a / (1 + np.exp(-a)), ns]


@tw.jit(out_idx=[8, 9])
def ssm_step(B, D, Ns, dt, bd=4):
    """Mamba's selective_state_update (decode): delta = softplus(dt + dt_bias), h = exp(delta A) h + delta B x,
    y = sum_n h C + Dv x; the new state and y out."""
    @T.prim_func
    def main(Hs: T.Tensor((B, D, Ns), "float32"), X: T.Tensor((B, D), dt), Dt: T.Tensor((B, D), dt),
             Db: T.Tensor((D,), "float32"), A: T.Tensor((D, Ns), "float32"), Bm: T.Tensor((B, Ns), dt),
             Cm: T.Tensor((B, Ns), dt), Dv: T.Tensor((D,), "float32"), Y: T.Tensor((B, D), dt),
             Hout: T.Tensor((B, D, Ns), "float32")):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, dd):
            h = T.alloc_fragment((bd, Ns), "float32")
            a = T.alloc_fragment((bd, Ns), "float32")
            p = T.alloc_fragment((bd, Ns), "float32")
            bv = T.alloc_fragment((Ns,), "float32")
            cv = T.alloc_fragment((Ns,), "float32")
            x = T.alloc_fragment((bd,), "float32")
            de = T.alloc_fragment((bd,), "float32")
            db = T.alloc_fragment((bd,), "float32")
            dv = T.alloc_fragment((bd,), "float32")
            s = T.alloc_fragment((bd,), "float32")
            y = T.alloc_fragment((bd,), dt)
            T.copy(Hs[b, dd * bd:(dd + 1) * bd, :], h)
            T.copy(A[dd * bd, 0], a)
            T.copy(Bm[b, :], bv)
            T.copy(Cm[b, :], cv)
            T.copy(X[b, dd * bd], x)
            T.copy(Dt[b, dd * bd], de)
            T.copy(Db[dd * bd], db)
            T.copy(Dv[dd * bd], dv)
            for i in T.Parallel(bd):
                de[i] = T.where(de[i] + db[i] > 20.0, de[i] + db[i], T.log(1.0 + T.exp(de[i] + db[i])))
            for i, n in T.Parallel(bd, Ns):
                h[i, n] = T.exp(de[i] * a[i, n]) * h[i, n] + de[i] * bv[n] * x[i]
                p[i, n] = h[i, n] * cv[n]
            T.reduce_sum(p, s, dim=1)
            for i in T.Parallel(bd):
                y[i] = s[i] + dv[i] * x[i]
            T.copy(y, Y[b, dd * bd])
            T.copy(h, Hout[b, dd * bd:(dd + 1) * bd, :])

    return main


def _ssm_step(dt, shape, rng):
    B, D, Ns = shape
    h = rng.standard_normal((B, D, Ns)).astype(np.float32)
    x, dtv = randn(rng, (B, D), dt), randn(rng, (B, D), dt)
    db = rng.standard_normal(D).astype(np.float32)
    a = -np.exp(rng.standard_normal((D, Ns))).astype(np.float32)
    bm, cm = randn(rng, (B, Ns), dt), randn(rng, (B, Ns), dt)
    dv = rng.standard_normal(D).astype(np.float32)
    z = f64(dtv) + db
    de = np.where(z > 20, z, np.log1p(np.exp(z)))
    hn = np.exp(de[:, :, None] * a) * h + de[:, :, None] * f64(bm)[:, None, :] * f64(x)[:, :, None]
    y = (hn * f64(cm)[:, None, :]).sum(2) + dv * f64(x)
    return ssm_step, (B, D, Ns, dt), [h, x, dtv, db, a, bm, cm, dv], [y, hn]


# ----------------------------------------------------------------------------------------------- rotary
@tw.jit(out_idx=[-1])
def rope_heads(Tn, H, D, P, dt, idt, form):
    """Rotary embedding of (Tn, H, D) at Pos[t] (torch's int64 position_ids or int32), cos / sin cache (P, D / 2).
    `neox`: rotate halves, read as x[h, j + D / 2]; `neox_halves`: the halves copied into tiles of their own;
    `gptj`: interleaved pairs, x[h, 2 j] and x[h, 2 j + 1]."""
    Hd = D // 2

    @T.prim_func
    def main(X: T.Tensor((Tn, H, D), dt), Pos: T.Tensor((Tn,), idt), Cs: T.Tensor((P, Hd), "float32"),
             Sn: T.Tensor((P, Hd), "float32"), Y: T.Tensor((Tn, H, D), dt)):
        with T.Kernel(Tn) as t:
            c = T.alloc_fragment((Hd,), "float32")
            s = T.alloc_fragment((Hd,), "float32")
            T.copy(Cs[Pos[t], :], c)
            T.copy(Sn[Pos[t], :], s)
            if form == "neox_halves":
                x1 = T.alloc_fragment((H, Hd), "float32")
                x2 = T.alloc_fragment((H, Hd), "float32")
                y1 = T.alloc_fragment((H, Hd), dt)
                y2 = T.alloc_fragment((H, Hd), dt)
                T.copy(X[t, :, 0:Hd], x1)
                T.copy(X[t, :, Hd:D], x2)
                for h, j in T.Parallel(H, Hd):
                    y1[h, j] = x1[h, j] * c[j] - x2[h, j] * s[j]
                    y2[h, j] = x2[h, j] * c[j] + x1[h, j] * s[j]
                T.copy(y1, Y[t, :, 0:Hd])
                T.copy(y2, Y[t, :, Hd:D])
            else:
                x = T.alloc_fragment((H, D), "float32")
                y = T.alloc_fragment((H, D), dt)
                T.copy(X[t, :, :], x)
                if form == "neox":
                    for h, j in T.Parallel(H, Hd):
                        y[h, j] = x[h, j] * c[j] - x[h, j + Hd] * s[j]
                        y[h, j + Hd] = x[h, j + Hd] * c[j] + x[h, j] * s[j]
                else:
                    for h, j in T.Parallel(H, Hd):
                        y[h, 2 * j] = x[h, 2 * j] * c[j] - x[h, 2 * j + 1] * s[j]
                        y[h, 2 * j + 1] = x[h, 2 * j + 1] * c[j] + x[h, 2 * j] * s[j]
                T.copy(y, Y[t, :, :])

    return main


def _rope_heads(form, idt):
    def make(dt, shape, rng):
        Tn, H, D, P = shape
        Hd = D // 2
        x = randn(rng, (Tn, H, D), dt)
        pos = rng.integers(0, P, Tn).astype(npdt(idt))
        pos[0] = P - 1
        ang = np.arange(P)[:, None] * (10000.0 ** (-np.arange(Hd) / Hd))[None, :]
        cs, sn = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        X = f64(x)
        C, S = f64(cs)[pos.astype(np.int64)][:, None, :], f64(sn)[pos.astype(np.int64)][:, None, :]
        if form == "gptj":
            a, b = X[..., 0::2], X[..., 1::2]
            ref = np.stack([a * C - b * S, b * C + a * S], -1).reshape(Tn, H, D)
        else:
            a, b = X[..., :Hd], X[..., Hd:]
            ref = np.concatenate([a * C - b * S, b * C + a * S], -1)
        return rope_heads, (Tn, H, D, P, dt, idt, form), [x, pos, cs, sn], [ref]
    return make


YARN = dict(base=10000.0, scale=4.0, orig=64, beta_fast=32.0, beta_slow=1.0)


def _yarn_low_high(D):
    def dim(rot):
        return D * math.log(YARN["orig"] / (rot * 2 * math.pi)) / (2 * math.log(YARN["base"]))
    return max(math.floor(dim(YARN["beta_fast"])), 0), min(math.ceil(dim(YARN["beta_slow"])), D - 1)


@tw.jit(out_idx=[-1])
def rotary_angles(P, D, form, bp=4):
    """The rotary cache's angle table (P, D / 2), pos * inv_freq: `plain` inv_freq = base^(-2j / D); `yarn`:
    YaRN's blend of interpolated and extrapolated frequencies by a linear ramp over the dims (DeepSeek / HF's
    _yarn_find_correction_range, computed at compile time), positions from a grid of row blocks."""
    Hd = D // 2
    low, high = _yarn_low_high(D)
    span = max(high - low, 0.001)
    lb = math.log2(YARN["base"])

    @T.prim_func
    def main(Pos: T.Tensor((P,), "float32"), A: T.Tensor((P, Hd), "float32")):
        with T.Kernel(T.ceildiv(P, bp)) as bx:
            p = T.alloc_fragment((bp,), "float32")
            f = T.alloc_fragment((Hd,), "float32")
            a = T.alloc_fragment((bp, Hd), "float32")
            T.copy(Pos[bx * bp], p)
            for j in T.Parallel(Hd):
                if form == "plain":
                    f[j] = T.exp2(-lb * (2.0 * j) / D)
                else:
                    ex = T.exp2(-lb * (2.0 * j) / D)
                    m = 1.0 - T.min(T.max((j - low) / span, 0.0), 1.0)
                    f[j] = ex / YARN["scale"] * (1.0 - m) + ex * m
            for i, j in T.Parallel(bp, Hd):
                a[i, j] = p[i] * f[j]
            T.copy(a, A[bx * bp, 0])

    return main


def _rot_angles(form):
    def make(dt, shape, rng):
        P, D = shape
        Hd = D // 2
        pos = np.arange(P).astype(np.float32)
        ex = YARN["base"] ** (-(2.0 * np.arange(Hd)) / D)
        if form == "plain":
            f = ex
        else:
            low, high = _yarn_low_high(D)
            ramp = np.clip((np.arange(Hd) - low) / max(high - low, 0.001), 0, 1)
            m = 1 - ramp
            f = ex / YARN["scale"] * (1 - m) + ex * m
        return rotary_angles, (P, D, form), [pos], [pos[:, None] * f[None, :]]
    return make


# ----------------------------------------------------------------------------------------------- gathers, scatters
@tw.jit(out_idx=[-1])
def embedding_bag(V, D, Nn, Bg, dt, mode):
    """torch's F.embedding_bag(ids, table, offsets, mode): each bag sums (or averages) the rows of its ids in
    [Off[b], Off[b + 1]); an empty bag is 0."""
    @T.prim_func
    def main(E: T.Tensor((V, D), dt), Ids: T.Tensor((Nn,), "int32"), Off: T.Tensor((Bg + 1,), "int32"),
             O: T.Tensor((Bg, D), "float32")):
        with T.Kernel(Bg) as b:
            row = T.alloc_fragment((D,), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for e in T.serial(Off[b], Off[b + 1]):
                T.copy(E[Ids[e], :], row)
                for d in T.Parallel(D):
                    acc[d] = acc[d] + row[d]
            if mode == "mean":
                for d in T.Parallel(D):
                    acc[d] = acc[d] / T.max(Off[b + 1] - Off[b], 1)
            T.copy(acc, O[b, :])

    return main


def _emb_bag(mode):
    def make(dt, shape, rng):
        V, D, Nn, Bg = shape
        e = randn(rng, (V, D), dt)
        ids = rng.integers(0, V, Nn).astype(np.int32)
        cuts = np.sort(rng.integers(0, Nn + 1, Bg - 1)) if Bg > 1 else np.zeros(0, np.int64)
        off = np.concatenate([[0], cuts, [Nn]]).astype(np.int32)
        if Bg > 2:
            off[2] = off[1]  # an empty bag
        ref = np.zeros((Bg, D))
        for b in range(Bg):
            rows = f64(e)[ids[off[b]:off[b + 1]]]
            ref[b] = rows.sum(0) / (max(len(rows), 1) if mode == "mean" else 1)
        return embedding_bag, (V, D, Nn, Bg, dt, mode), [e, ids, off], [ref]
    return make


@tw.jit()
def segment_sum(Nn, D, S, form):
    """Rows of V summed per segment [Off[s], Off[s + 1]) (`offsets`), or index_add by a segment id per row with
    float atomics (`atomic`); O (given zero) is written in place."""
    @T.prim_func
    def main(Vv: T.Tensor((Nn, D), "float32"), Off: T.Tensor((S + 1,), "int32"), Sid: T.Tensor((Nn,), "int32"),
             O: T.Tensor((S, D), "float32")):
        with T.Kernel(S if form == "offsets" else Nn) as bx:
            row = T.alloc_fragment((D,), "float32")
            if form == "offsets":
                acc = T.alloc_fragment((D,), "float32")
                T.clear(acc)
                for e in T.serial(Off[bx], Off[bx + 1]):
                    T.copy(Vv[e, :], row)
                    for d in T.Parallel(D):
                        acc[d] = acc[d] + row[d]
                T.copy(acc, O[bx, :])
            else:
                T.copy(Vv[bx, :], row)
                T.atomic_add(O[Sid[bx], :], row)

    return main


def _segsum(form):
    def make(dt, shape, rng):
        Nn, D, S = shape
        v = (rng.integers(-8, 8, (Nn, D)) / 4).astype(np.float32)  # sums exact in any order
        sid = np.sort(rng.integers(0, S, Nn)).astype(np.int32)
        off = np.searchsorted(sid, np.arange(S + 1)).astype(np.int32)
        ref = np.zeros((S, D))
        np.add.at(ref, sid, f64(v))
        ins = [v, off, sid, np.zeros((S, D), np.float32)]
        return segment_sum, (Nn, D, S, form), ins, [ref]
    return make


@tw.jit(out_idx=[-1])
def gather_dim1(M, N, K, dt, bm=BM):
    """torch.gather(x, 1, idx): Y[i, k] = X[i, Idx[i, k]]."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Idx: T.Tensor((M, K), "int32"), Y: T.Tensor((M, K), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            ix = T.alloc_fragment((bm, K), "int32")
            y = T.alloc_fragment((bm, K), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Idx[bx * bm, 0], ix)
            for i, k in T.Parallel(bm, K):
                y[i, k] = x[i, ix[i, k]]
            T.copy(y, Y[bx * bm, 0])

    return main


def _gather1(dt, shape, rng):
    M, N, K = shape
    x = randn(rng, (M, N), dt)
    ix = rng.integers(0, N, (M, K)).astype(np.int32)
    return gather_dim1, (M, N, K, dt), [x, ix], [np.take_along_axis(f64(x), ix, 1)]


@tw.jit(out_idx=[-1])
def one_hot(M, C, dt, bm=BM):
    """F.one_hot(labels, C) as dt, a row of zeros for label -100."""
    @T.prim_func
    def main(L: T.Tensor((M,), "int32"), Y: T.Tensor((M, C), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            lab = T.alloc_fragment((bm,), "int32")
            y = T.alloc_fragment((bm, C), dt)
            T.copy(L[bx * bm], lab)
            for i, j in T.Parallel(bm, C):
                y[i, j] = T.where(j == lab[i], 1.0, 0.0)
            T.copy(y, Y[bx * bm, 0])

    return main


def _one_hot(dt, shape, rng):
    M, C = shape
    lab = rng.integers(0, C, M).astype(np.int32)
    if M > 1:
        lab[1] = -100
    return one_hot, (M, C, dt), [lab], [(np.arange(C)[None, :] == lab[:, None]).astype(np.float64)]


# ----------------------------------------------------------------------------------------------- masks
@tw.jit(out_idx=[-1])
def masked_fill(M, N, dt, mdt, bm=BM):
    """x.masked_fill(mask, value): a bool mask, or a uint8 one (torch's .to(torch.uint8)) compared with 0."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Mk: T.Tensor((M, N), mdt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            mk = T.alloc_fragment((bm, N), mdt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Mk[bx * bm, 0], mk)
            for i, j in T.Parallel(bm, N):
                if mdt == "bool":
                    x[i, j] = T.where(mk[i, j], -7, x[i, j])
                else:
                    x[i, j] = T.where(mk[i, j] != 0, -7, x[i, j])
            T.copy(x, Y[bx * bm, 0])

    return main


def _masked_fill(mdt):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt, 3.0) if dt != "int32" else rng.integers(-1000, 1000, shape).astype(np.int32)
        mk = rng.random(shape) < 0.4
        ref = np.where(mk, -7.0, f64(x))
        return masked_fill, (M, N, dt, mdt), [x, mk.astype(npdt(mdt))], [ref]
    return make


@tw.jit(out_idx=[-1])
def tri(B, S, N, dt, upper, diag, bm=BM):
    """torch.tril(x, diag) / torch.triu(x, diag) of a batch (B, S, N)."""
    @T.prim_func
    def main(X: T.Tensor((B, S, N), dt), Y: T.Tensor((B, S, N), dt)):
        with T.Kernel(B, T.ceildiv(S, bm)) as (b, r):
            x = T.alloc_fragment((bm, N), dt)
            T.copy(X[b, r * bm:(r + 1) * bm, :], x)
            for i, j in T.Parallel(bm, N):
                if upper:
                    x[i, j] = T.where(j - (r * bm + i) >= diag, x[i, j], 0)
                else:
                    x[i, j] = T.where(j - (r * bm + i) <= diag, x[i, j], 0)
            T.copy(x, Y[b, r * bm:(r + 1) * bm, :])

    return main


def _tri(upper, diag):
    def make(dt, shape, rng):
        B, S, N = shape
        x = randn(rng, shape, dt) if dt != "int32" else rng.integers(-99, 99, shape).astype(np.int32)
        ref = (np.triu if upper else np.tril)(f64(x), diag)
        return tri, (B, S, N, dt, upper, diag), [x], [ref]
    return make


@tw.jit(out_idx=[-1])
def dropout(M, N, dt, mdt, p, bm=BM):
    """Dropout with a given keep mask (bool, or uint8 0 / 1 multiplied in): y = x * mask / (1 - p)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Mk: T.Tensor((M, N), mdt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            mk = T.alloc_fragment((bm, N), mdt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Mk[bx * bm, 0], mk)
            for i, j in T.Parallel(bm, N):
                if mdt == "bool":
                    x[i, j] = T.where(mk[i, j], x[i, j] * (1.0 / (1.0 - p)), 0.0)
                else:
                    x[i, j] = x[i, j] * mk[i, j] * (1.0 / (1.0 - p))
            T.copy(x, Y[bx * bm, 0])

    return main


def _dropout(mdt):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt)
        mk = rng.random(shape) > 0.3
        return dropout, (*shape, dt, mdt, 0.3), [x, mk.astype(npdt(mdt))], [np.where(mk, f64(x) / 0.7, 0.0)]
    return make


# ----------------------------------------------------------------------------------------------- scans, histograms
@tw.jit(out_idx=[-1])
def prefix_2d(M, N, dt, form, bn=16):
    """`cols`: cumsum along dim 0 in column blocks (a row loop of row maps); `table`: the summed-area table (2-D
    inclusive prefix sum) in one block: down the columns, then along the rows."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(N, bn) if form == "cols" else 1) as bx:
            x = T.alloc_fragment((M, bn if form == "cols" else N), dt)
            T.copy(X[0, bx * bn], x)
            for i in T.serial(1, M):
                for j in T.Parallel(bn if form == "cols" else N):
                    x[i, j] = x[i, j] + x[i - 1, j]
            if form == "table":
                for j in T.serial(1, N):
                    for i in T.Parallel(M):
                        x[i, j] = x[i, j] + x[i, j - 1]
            T.copy(x, Y[0, bx * bn])

    return main


def _prefix2d(form):
    def make(dt, shape, rng):
        x = rng.integers(-50, 50, shape).astype(npdt(dt))
        ref = np.cumsum(f64(x), 0)
        if form == "table":
            ref = np.cumsum(ref, 1)
        return prefix_2d, (*shape, dt, form), [x], [ref]
    return make


@tw.jit()
def histc(Nn, bins, lo, hi, bs=16):
    """torch.histc(x, bins, min=lo, max=hi): int32 counts by atomics, x == hi in the last bin, outside ignored."""
    @T.prim_func
    def main(X: T.Tensor((Nn,), "float32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(Nn, bs)) as bx:
            x = T.alloc_fragment((bs,), "float32")
            b = T.alloc_fragment((bs,), "int32")
            T.copy(X[bx * bs], x)
            for e in T.Parallel(bs):
                b[e] = T.where(x[e] < lo or x[e] > hi, -1,
                               T.min(T.cast(T.floor((x[e] - lo) * (bins / (hi - lo))), "int32"), bins - 1))
            for e in T.serial(bs):
                if bx * bs + e < Nn and b[e] >= 0:
                    T.atomic_add(H[b[e]], 1)

    return main


def _histc(dt, shape, rng):
    Nn, bins = shape
    x = (rng.integers(-12, 13, Nn) / 4).astype(np.float32)  # on the bin edges too
    x[0] = 2.0
    ref = np.zeros(bins, np.int64)
    for v in x:
        if -2.0 <= v <= 2.0:
            ref[min(int(np.floor((np.float32(v) + np.float32(2.0)) * np.float32(bins / 4.0))), bins - 1)] += 1
    return histc, (Nn, bins, -2.0, 2.0), [x, np.zeros(bins, np.int32)], [ref]


@tw.jit(out_idx=[-1])
def count_nonzero(M, N, dt, bm=BM):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), C: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            nz = T.alloc_fragment((bm, N), "int32")
            c = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                nz[i, j] = T.where(x[i, j] != 0, 1, 0)
            T.reduce_sum(nz, c, dim=1)
            T.copy(c, C[bx * bm])

    return main


def _count_nz(dt, shape, rng):
    x = rng.integers(-2, 3, shape).astype(npdt(dt))
    return count_nonzero, (*shape, dt), [x], [(x != 0).sum(1)]


# ----------------------------------------------------------------------------------------------- layout ops
@tw.jit(out_idx=[-1])
def transpose_3d(B, M, N, dt, form="map", bm=BM):
    """x.transpose(1, 2) of (B, M, N): an element transpose of each (bm, N) tile, in a 2-D map (`map`) or in a
    serial element loop (`elements`, the located error's hint for any dtype)."""
    @T.prim_func
    def main(X: T.Tensor((B, M, N), dt), Y: T.Tensor((B, N, M), dt)):
        with T.Kernel(B, T.ceildiv(M, bm)) as (b, r):
            x = T.alloc_fragment((bm, N), dt)
            y = T.alloc_fragment((N, bm), dt)
            T.copy(X[b, r * bm:(r + 1) * bm, :], x)
            if form == "map":
                for i, j in T.Parallel(bm, N):
                    y[j, i] = x[i, j]
            else:
                for i in T.serial(bm):
                    for j in T.serial(N):
                        y[j, i] = x[i, j]
            T.copy(y, Y[b, :, r * bm:(r + 1) * bm])

    return main


def _transpose3(form):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt) if dt != "int32" else rng.integers(-99, 99, shape).astype(np.int32)
        return transpose_3d, (*shape, dt, form), [x], [f64(x).transpose(0, 2, 1)]
    return make


@tw.jit(out_idx=[-1])
def permute_0213(B, S, H, D, dt, bs=4):
    """(B, S, H, D) -> (B, H, S, D) (heads first, attention's layout): strided windows copied through a tile."""
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), dt), Y: T.Tensor((B, H, S, D), dt)):
        with T.Kernel(B * H, T.ceildiv(S, bs)) as (bh, s):
            t = T.alloc_fragment((bs, D), dt)
            T.copy(X[bh // H, s * bs:(s + 1) * bs, bh % H, :], t)
            T.copy(t, Y[bh // H, bh % H, s * bs:(s + 1) * bs, :])

    return main


def _permute(dt, shape, rng):
    x = randn(rng, shape, dt)
    return permute_0213, (*shape, dt), [x], [f64(x).transpose(0, 2, 1, 3)]


@tw.jit(out_idx=[-1])
def flip_dim1(B, S, D, dt, form):
    """torch.flip(x, [1]) of (B, S, D): `map` reads x[S - 1 - i, j] in a 2-D map, `rows` in a serial loop over the
    rows around a 1-D map (the located error's hint)."""
    @T.prim_func
    def main(X: T.Tensor((B, S, D), dt), Y: T.Tensor((B, S, D), dt)):
        with T.Kernel(B) as b:
            x = T.alloc_fragment((S, D), dt)
            y = T.alloc_fragment((S, D), dt)
            T.copy(X[b, :, :], x)
            if form == "map":
                for i, j in T.Parallel(S, D):
                    y[i, j] = x[S - 1 - i, j]
            else:
                for i in T.serial(S):
                    for j in T.Parallel(D):
                        y[i, j] = x[S - 1 - i, j]
            T.copy(y, Y[b, :, :])

    return main


def _flip(form):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt)
        return flip_dim1, (*shape, dt, form), [x], [f64(x)[:, ::-1, :]]
    return make


@tw.jit(out_idx=[-1])
def concat_last(M, N1, N2, dt, form, bm=BM):
    """torch.cat([a, b], dim=-1): `tile` copies both into one tile (b at column N1), `gm` copies each tile to its
    columns of the output, `map` selects by the column index (b read at j - N1)."""
    @T.prim_func
    def main(A: T.Tensor((M, N1), dt), Bt: T.Tensor((M, N2), dt), O: T.Tensor((M, N1 + N2), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N1), dt)
            b = T.alloc_fragment((bm, N2), dt)
            T.copy(A[bx * bm, 0], a)
            T.copy(Bt[bx * bm, 0], b)
            if form == "gm":
                T.copy(a, O[bx * bm, 0])
                T.copy(b, O[bx * bm, N1])
            else:
                o = T.alloc_fragment((bm, N1 + N2), dt)
                if form == "tile":
                    T.copy(a, o[:, 0:N1])
                    T.copy(b, o[:, N1:N1 + N2])
                else:
                    for i, j in T.Parallel(bm, N1 + N2):
                        o[i, j] = T.where(j < N1, a[i, T.min(j, N1 - 1)], b[i, T.max(j - N1, 0)])
                T.copy(o, O[bx * bm, 0])

    return main


def _concat(form):
    def make(dt, shape, rng):
        M, N1, N2 = shape
        a, b = randn(rng, (M, N1), dt), randn(rng, (M, N2), dt)
        return concat_last, (M, N1, N2, dt, form), [a, b], [np.concatenate([f64(a), f64(b)], 1)]
    return make


@tw.jit(out_idx=[1, 2])
def split_last(M, N, dt, bm=BM):
    """x.chunk(2, dim=-1): the second half copied from its columns of X."""
    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dt), Y1: T.Tensor((M, N), dt), Y2: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), dt)
            b = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], a)
            T.copy(X[bx * bm, N], b)
            T.copy(a, Y1[bx * bm, 0])
            T.copy(b, Y2[bx * bm, 0])

    return main


def _split(dt, shape, rng):
    M, N = shape
    x = randn(rng, (M, 2 * N), dt)
    return split_last, (M, N, dt), [x], [f64(x)[:, :N], f64(x)[:, N:]]


@tw.jit(out_idx=[-1])
def pad_last(M, N, left, right, dt, form, value=0.0, bm=BM):
    """F.pad(x, (left, right), value=value): `origin` copies X at column -left into the wider tile (zeros outside X)
    and sets the pad columns; `map` selects by the column index (x read at j - left)."""
    W = N + left + right

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, W), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, W), dt)
            if form == "origin":
                T.copy(X[bx * bm, -left], y)
                for i, j in T.Parallel(bm, W):
                    y[i, j] = T.where(j < left or j >= N + left, value, y[i, j])
            else:
                x = T.alloc_fragment((bm, N), dt)
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, W):
                    y[i, j] = T.where(j >= left and j < N + left, x[i, T.min(T.max(j - left, 0), N - 1)], value)
            T.copy(y, Y[bx * bm, 0])

    return main


def _pad(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt)
        return pad_last, (M, N, 3, 2, dt, form, -1.5), [x], [np.pad(f64(x), ((0, 0), (3, 2)), constant_values=-1.5)]
    return make


@tw.jit(out_idx=[-1])
def strided_slice(M, N, dt, form, bm=BM):
    """`cols`: x[:, 1::2] by a map reading x[i, 2 j + 1]; `rows`: x[::2, :] by a copy of each row 2 i."""
    No = N // 2 if form == "cols" else N
    Mo = (M + 1) // 2 if form == "rows" else M

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((Mo, No), dt)):
        with T.Kernel(T.ceildiv(Mo, bm)) as bx:
            y = T.alloc_fragment((bm, No), dt)
            if form == "cols":
                x = T.alloc_fragment((bm, N), dt)
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, No):
                    y[i, j] = x[i, 2 * j + 1]
            else:
                for i in T.serial(bm):
                    T.copy(X[2 * (bx * bm + i), :], y[i, :])
            T.copy(y, Y[bx * bm, 0])

    return main


def _strided(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, shape, dt)
        return strided_slice, (M, N, dt, form), [x], [f64(x)[:, 1::2] if form == "cols" else f64(x)[::2, :]]
    return make


# ----------------------------------------------------------------------------------------------- reductions to scalars
@tw.jit()
def reduce_all(M, N, dt, kind, bm=BM):
    """x.sum() by float atomics of each block's partial (`sum_atomic`, S must be zero), x.abs().max() (an fp8 amax)
    and x.mean() in one block looping over row blocks (`amax_loop`, `mean_loop`); S (given zero) written in place."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), S: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(M, bm) if kind == "sum_atomic" else 1) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            if kind == "sum_atomic":
                T.copy(X[bx * bm, 0], x)
                T.reduce_sum(x, r, dim=1)
                T.reduce_sum(r, tot, dim=0)
                T.atomic_add(S[0], tot[0])
            else:
                acc = T.alloc_fragment((1,), "float32")
                T.clear(acc)
                for blk in T.serial(T.ceildiv(M, bm)):
                    T.copy(X[blk * bm, 0], x)
                    if kind == "amax_loop":
                        for i, j in T.Parallel(bm, N):
                            x[i, j] = T.abs(x[i, j])
                        T.reduce_max(x, r, dim=1)
                        T.reduce_max(r, tot, dim=0)
                        acc[0] = T.max(acc[0], tot[0])
                    else:
                        T.reduce_sum(x, r, dim=1)
                        T.reduce_sum(r, tot, dim=0)
                        acc[0] = acc[0] + tot[0]
                if kind == "mean_loop":
                    acc[0] = acc[0] / (M * N)
                T.copy(acc, S)

    return main


def _reduce_all(kind):
    def make(dt, shape, rng):
        x = randn(rng, shape, dt)
        X = f64(x)
        ref = {"sum_atomic": X.sum(), "amax_loop": np.abs(X).max(), "mean_loop": X.mean()}[kind]
        ins = [x, np.zeros(1, np.float32)]
        return reduce_all, (*shape, dt, kind), ins, [np.array([ref])]
    return make


# ----------------------------------------------------------------------------------------------- mixed dtypes
@tw.jit(out_idx=[-1])
def linear_mixed(M, N, K, odt, bm=16, bn=16, bk=16):
    """float16 x @ W^T (nn.Linear's (N, K) weight) + float32 bias, float32 accumulation, bfloat16 (or odt) out."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K), "float16"), Bi: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), odt)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            w = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            bias = T.alloc_fragment((bn,), "float32")
            c = T.alloc_fragment((bm, bn), odt)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(W[bx * bn, k * bk], w)
                T.gemm(a, w, acc, transpose_B=True)
            T.copy(Bi[bx * bn], bias)
            for i, j in T.Parallel(bm, bn):
                c[i, j] = acc[i, j] + bias[j]
            T.copy(c, C[by * bm, bx * bn])

    return main


def _linear_mixed(dt, shape, rng):
    M, N, K = shape
    a, w = randn(rng, (M, K), "float16"), randn(rng, (N, K), "float16")
    bias = rng.standard_normal(N).astype(np.float32)
    return linear_mixed, (M, N, K, dt), [a, w, bias], [f64(a) @ f64(w).T + bias]


@tw.jit(out_idx=[-1])
def layer_norm_mixed(M, N, idt, odt, bm=BM, eps=1e-5):
    """LayerNorm with float16 input, float32 statistics, bfloat16 output (AMP's mixed forward)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), idt), W: T.Tensor((N,), "float32"), Bi: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), odt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            d = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            bi = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            v = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), odt)
            T.copy(X[bx * bm, 0], x)
            T.copy(W, w)
            T.copy(Bi, bi)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, N):
                d[i, j] = (x[i, j] - s[i] / N) * (x[i, j] - s[i] / N)
            T.reduce_sum(d, v, dim=1)
            for i, j in T.Parallel(bm, N):
                y[i, j] = (x[i, j] - s[i] / N) * T.rsqrt(v[i] / N + eps) * w[j] + bi[j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _ln_mixed(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, "float16", 2.0)
    w, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    X = f64(x)
    ref = (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5) * w + b
    return layer_norm_mixed, (M, N, "float16", dt), [x, w, b], [ref]


# ----------------------------------------------------------------------------------------------- decode-time pieces
@tw.jit(out_idx=[-1])
def gemv(N, K, dt, bn=4):
    """Decode's y = W @ x (W (N, K) float16, x (K,)): a map by the column vector x[k], a row sum, float32 out."""
    @T.prim_func
    def main(W: T.Tensor((N, K), dt), X: T.Tensor((K,), dt), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            w = T.alloc_fragment((bn, K), "float32")
            x = T.alloc_fragment((K,), "float32")
            y = T.alloc_fragment((bn,), "float32")
            T.copy(W[bx * bn, 0], w)
            T.copy(X, x)
            for i, k in T.Parallel(bn, K):
                w[i, k] = w[i, k] * x[k]
            T.reduce_sum(w, y, dim=1)
            T.copy(y, Y[bx * bn])

    return main


def _gemv(dt, shape, rng):
    N, K = shape
    w, x = randn(rng, (N, K), dt), randn(rng, (K,), dt)
    return gemv, (N, K, dt), [w, x], [f64(w) @ f64(x)]


@tw.jit()
def reshape_and_cache(Tn, H, D, NS, dt):
    """vLLM's reshape_and_cache: Cache[Slot[t]] = K[t] for int64 slots, a padded token (slot -1) skipped; in place."""
    @T.prim_func
    def main(Kt: T.Tensor((Tn, H, D), dt), Slot: T.Tensor((Tn,), "int64"), Cache: T.Tensor((NS, H, D), dt)):
        with T.Kernel(Tn) as t:
            k = T.alloc_fragment((H, D), dt)
            T.copy(Kt[t, :, :], k)
            if Slot[t] >= 0:
                T.copy(k, Cache[Slot[t], :, :])

    return main


def _reshape_cache(dt, shape, rng):
    Tn, H, D, NS = shape
    k = randn(rng, (Tn, H, D), dt)
    slot = rng.permutation(NS)[:Tn].astype(np.int64)
    slot[-1] = -1
    cache = randn(rng, (NS, H, D), dt)
    ref = f64(cache)
    for t in range(Tn):
        if slot[t] >= 0:
            ref[slot[t]] = f64(k)[t]
    return reshape_and_cache, (Tn, H, D, NS, dt), [k, slot, cache], [ref]


@tw.jit(out_idx=[-1])
def paged_gather(NB, BS, D, MB, dt):
    """A sequence's K rows gathered from a paged cache (NB blocks of BS rows) through its block table (int32)."""
    @T.prim_func
    def main(Cache: T.Tensor((NB, BS, D), dt), BT: T.Tensor((MB,), "int32"), O: T.Tensor((MB * BS, D), dt)):
        with T.Kernel(MB) as b:
            t = T.alloc_fragment((BS, D), dt)
            T.copy(Cache[BT[b], :, :], t)
            T.copy(t, O[b * BS, 0])

    return main


def _paged(dt, shape, rng):
    NB, BS, D, MB = shape
    cache = randn(rng, (NB, BS, D), dt)
    bt = rng.permutation(NB)[:MB].astype(np.int32)
    return paged_gather, (NB, BS, D, MB, dt), [cache, bt], [f64(cache)[bt].reshape(MB * BS, D)]


@tw.jit(out_idx=[-1])
def masked_mean_pool(B, S, D, dt, bd=16):
    """Sentence embeddings: sum over S of x * mask / max(sum(mask), 1), mask (B, S) int32 0 / 1."""
    @T.prim_func
    def main(X: T.Tensor((B, S, D), dt), Mk: T.Tensor((B, S), "int32"), Y: T.Tensor((B, D), "float32")):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, dd):
            x = T.alloc_fragment((S, bd), "float32")
            m = T.alloc_fragment((S,), "float32")
            c = T.alloc_fragment((1,), "float32")
            y = T.alloc_fragment((bd,), "float32")
            T.copy(X[b, 0:S, dd * bd:(dd + 1) * bd], x)
            T.copy(Mk[b, :], m)
            for s, d in T.Parallel(S, bd):
                x[s, d] = x[s, d] * m[s]
            T.reduce_sum(x, y, dim=0)
            T.reduce_sum(m, c, dim=0)
            for d in T.Parallel(bd):
                y[d] = y[d] / T.max(c[0], 1.0)
            T.copy(y, Y[b, dd * bd])

    return main


def _mean_pool(dt, shape, rng):
    B, S, D = shape
    x = randn(rng, shape, dt)
    mk = (rng.random((B, S)) < 0.7).astype(np.int32)
    mk[:, 0] = 1
    return masked_mean_pool, (B, S, D, dt), [x, mk], [(f64(x) * mk[:, :, None]).sum(1) / np.maximum(mk.sum(1), 1)[:, None]]


@tw.jit(out_idx=[-1])
def ssm_scan(B, L, D, Ns, dt, bd=4):
    """Mamba's selective scan over L (one step per time, the state in a tile): h = exp(delta A) h + delta B_t x_t,
    y_t = h . C_t; y stored row by row into an (L, bd) tile."""
    @T.prim_func
    def main(X: T.Tensor((B, L, D), dt), De: T.Tensor((B, L, D), "float32"), A: T.Tensor((D, Ns), "float32"),
             Bm: T.Tensor((B, L, Ns), "float32"), Cm: T.Tensor((B, L, Ns), "float32"), Y: T.Tensor((B, L, D), dt)):
        with T.Kernel(B, T.ceildiv(D, bd)) as (b, dd):
            h = T.alloc_fragment((bd, Ns), "float32")
            a = T.alloc_fragment((bd, Ns), "float32")
            p = T.alloc_fragment((bd, Ns), "float32")
            bv = T.alloc_fragment((Ns,), "float32")
            cv = T.alloc_fragment((Ns,), "float32")
            x = T.alloc_fragment((bd,), "float32")
            de = T.alloc_fragment((bd,), "float32")
            s = T.alloc_fragment((bd,), "float32")
            y = T.alloc_fragment((L, bd), dt)
            T.copy(A[dd * bd, 0], a)
            T.clear(h)
            for t in T.serial(L):
                T.copy(X[b, t, dd * bd], x)
                T.copy(De[b, t, dd * bd], de)
                T.copy(Bm[b, t, :], bv)
                T.copy(Cm[b, t, :], cv)
                for i, n in T.Parallel(bd, Ns):
                    h[i, n] = T.exp(de[i] * a[i, n]) * h[i, n] + de[i] * bv[n] * x[i]
                    p[i, n] = h[i, n] * cv[n]
                T.reduce_sum(p, s, dim=1)
                for i in T.Parallel(bd):
                    y[t, i] = s[i]
            T.copy(y, Y[b, 0, dd * bd])

    return main


def _ssm_scan(dt, shape, rng):
    B, L, D, Ns = shape
    x = randn(rng, (B, L, D), dt)
    de = (rng.random((B, L, D)) * 0.5).astype(np.float32)
    a = -np.exp(rng.standard_normal((D, Ns))).astype(np.float32)
    bm, cm = (rng.standard_normal((B, L, Ns)).astype(np.float32) for _ in range(2))
    h = np.zeros((B, D, Ns))
    y = np.zeros((B, L, D))
    for t in range(L):
        h = np.exp(f64(de)[:, t, :, None] * a) * h + f64(de)[:, t, :, None] * bm[:, t, None, :] * f64(x)[:, t, :, None]
        y[:, t] = (h * cm[:, t, None, :]).sum(-1)
    return ssm_scan, (B, L, D, Ns, dt), [x, de, a, bm, cm], [y]


# ----------------------------------------------------------------------------------------------- long rows in chunks
@tw.jit(out_idx=[-1])
def rmsnorm_chunked(M, N, dt, bm=BM, bn=16, eps=1e-6):
    """RMSNorm of rows longer than one tile: the sum of squares accumulated over column chunks
    (T.reduce_sum(..., clear=False); the tail chunk's columns past N read as 0), then a second pass."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            w = T.alloc_fragment((bn,), "float32")
            ss = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, bn), dt)
            T.clear(ss)
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, ss, dim=1, clear=False)
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, c * bn], x)
                T.copy(W[c * bn], w)
                for i, j in T.Parallel(bm, bn):
                    y[i, j] = x[i, j] * T.rsqrt(ss[i] / N + eps) * w[j]
                T.copy(y, Y[bx * bm, c * bn])

    return main


def _rms_chunked(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt)
    w = rng.standard_normal(N).astype(np.float32)
    X = f64(x)
    return rmsnorm_chunked, (M, N, dt), [x, w], [X / np.sqrt((X * X).mean(1, keepdims=True) + 1e-6) * w]


@tw.jit(out_idx=[2, 3])
def ce_argmax_chunked(M, N, dt, bm=BM, bn=16):
    """A large vocabulary in column chunks: the online logsumexp (running max, rescaled running sum; the tail's
    columns past N masked to -inf by the index) for cross-entropy at the labels, and the running argmax (greedy
    sampling: a chunk's lowest index of its max, kept where the chunk's max is larger)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), L: T.Tensor((M,), "int32"), Loss: T.Tensor((M,), "float32"),
             Am: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            pick = T.alloc_fragment((bm, bn), "int32")
            lab = T.alloc_fragment((bm,), "int32")
            cm = T.alloc_fragment((bm,), "float32")
            cs = T.alloc_fragment((bm,), "float32")
            cx = T.alloc_fragment((bm,), "float32")
            ci = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            se = T.alloc_fragment((bm,), "float32")
            xl = T.alloc_fragment((bm,), "float32")
            am = T.alloc_fragment((bm,), "int32")
            T.copy(L[bx * bm], lab)
            T.fill(mx, -T.infinity("float32"))
            T.clear(se)
            T.clear(xl)
            T.clear(am)
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(c * bn + j < N, x[i, j], -T.infinity("float32"))
                T.reduce_max(x, cm, dim=1)
                for i, j in T.Parallel(bm, bn):
                    pick[i, j] = T.where(x[i, j] == cm[i], c * bn + j, N)
                T.reduce_min(pick, ci, dim=1)
                for i in T.Parallel(bm):
                    am[i] = T.where(cm[i] > mx[i], ci[i], am[i])
                    cm[i] = T.max(cm[i], mx[i])
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(c * bn + j == lab[i], x[i, j], 0.0)
                T.reduce_sum(x, cx, dim=1)
                for i in T.Parallel(bm):
                    xl[i] = xl[i] + cx[i]
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(c * bn + j < N, T.exp(x[i, j] - cm[i]), 0.0)
                T.reduce_sum(x, cs, dim=1)
                for i in T.Parallel(bm):
                    se[i] = se[i] * T.exp(mx[i] - cm[i]) + cs[i]
                    mx[i] = cm[i]
            for i in T.Parallel(bm):
                cx[i] = T.log(se[i]) + mx[i] - xl[i]
            T.copy(cx, Loss[bx * bm])
            T.copy(am, Am[bx * bm])

    return main


def _ce_chunked(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt, 3.0)
    lab = rng.integers(0, N, M).astype(np.int32)
    X = f64(x)
    lse = np.log(np.exp(X - X.max(1, keepdims=True)).sum(1)) + X.max(1)
    return ce_argmax_chunked, (M, N, dt), [x, lab], [lse - X[np.arange(M), lab], np.argmax(x.astype(np.float32), 1)]


@tw.jit(out_idx=[-1])
def attn_mask_softmax(S, dt, kind, W=3, bm=BM):
    """Scores (S, S) masked, then softmax: `window` keeps |i - j| <= W (local attention, T.abs of an index
    difference; `window_and` as two conditions), `document` keeps the keys of the query's document (seg[i] == seg[j], seg ids int32)."""
    @T.prim_func
    def main(X: T.Tensor((S, S), dt), Seg: T.Tensor((S,), "int32"), Y: T.Tensor((S, S), "float32")):
        with T.Kernel(T.ceildiv(S, bm)) as r:
            x = T.alloc_fragment((bm, S), "float32")
            sq = T.alloc_fragment((bm,), "int32")
            sk = T.alloc_fragment((S,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(X[r * bm, 0], x)
            T.copy(Seg[r * bm], sq)
            T.copy(Seg, sk)
            for i, j in T.Parallel(bm, S):
                if kind == "window":
                    x[i, j] = T.where(T.abs(r * bm + i - j) <= W, x[i, j], -T.infinity("float32"))
                elif kind == "window_and":  # the located error's hint: two affine conditions joined with `and`
                    x[i, j] = T.where(r * bm + i - j <= W and j - (r * bm + i) <= W, x[i, j], -T.infinity("float32"))
                else:
                    x[i, j] = T.where(sq[i] == sk[j], x[i, j], -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, S):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, S):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[r * bm, 0])

    return main


def _attn_mask(kind):
    def make(dt, shape, rng):
        (S,) = shape
        x = randn(rng, (S, S), dt, 2.0)
        seg = np.sort(rng.integers(0, 3, S)).astype(np.int32)
        i, j = np.arange(S)[:, None], np.arange(S)[None, :]
        keep = np.abs(i - j) <= 3 if kind != "document" else seg[:, None] == seg[None, :]
        return attn_mask_softmax, (S, dt, kind), [x, seg], [_softmax64(np.where(keep, f64(x), -np.inf))]
    return make


# ----------------------------------------------------------------------------------------------- in-kernel rng, pow
@tw.jit(out_idx=[-1])
def hash_dropout(M, N, bm=BM, keep=22938):
    """Dropout whose mask an in-kernel hash makes (an LCG of the element's index and a seed, stored into an int32
    tile: the language wraps it modulo 2^32 on store), then bits 16..30 compared with keep / 32768 = 0.7."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), seed: T.int32, Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            h = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                h[i, j] = ((bx * bm + i) * N + j) * 1103515245 + seed
            for i, j in T.Parallel(bm, N):
                h[i, j] = (h[i, j] >> 16) & 32767
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.where(h[i, j] < keep, x[i, j] * (1.0 / 0.7), 0.0)
            T.copy(x, Y[bx * bm, 0])

    return main


def _hash_dropout(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, "float32")
    idx = np.arange(M * N, dtype=np.int64).reshape(M, N)
    h = ((idx * 1103515245 + 12345) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)
    return hash_dropout, (M, N), [x, 12345], [np.where(((h >> 16) & 32767) < 22938, f64(x) / f64(np.float32(0.7)), 0.0)]


@tw.jit(out_idx=[-1])
def pow_tiles(M, N, dt, form, bm=BM):
    """x ** y elementwise with both tiles (x > 0): `pow` as T.pow(x, y), `exp_log` as T.exp(y * T.log(x))."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Yp: T.Tensor((M, N), dt), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Yp[bx * bm, 0], y)
            for i, j in T.Parallel(bm, N):
                if form == "pow":
                    x[i, j] = T.pow(x[i, j], y[i, j])
                else:
                    x[i, j] = T.exp(y[i, j] * T.log(x[i, j]))
            T.copy(x, Z[bx * bm, 0])

    return main


def _pow(form):
    def make(dt, shape, rng):
        x = (rng.random(shape) * 3 + 0.1).astype(npdt(dt))
        y = (rng.random(shape) * 4 - 2).astype(npdt(dt))
        return pow_tiles, (*shape, dt, form), [x, y], [f64(x) ** f64(y)]
    return make


# ----------------------------------------------------------------------------------------------- tile-loop style
def dropout_tl_factory(M, N, dt, bm=BM, bn=16):
    """The seed's style: dropout with a uint8 keep mask, loaded as float32."""
    def dropout_tl(X: tw.Tensor((M, N), dt), Mk: tw.Tensor((M, N), "uint8")):
        out = tw.output((M, N), dtype=dt)
        for by in range(tw.ceildiv(M, bm)):
            for bx in range(tw.ceildiv(N, bn)):
                x = tw.load(X, (by * bm, bx * bn), (bm, bn), dtype="float32")
                m = tw.load(Mk, (by * bm, bx * bn), (bm, bn), dtype="float32")
                acc = tw.accumulator((bm, bn), dtype="float32")
                for i in range(bm):
                    for j in range(bn):
                        acc[i, j] = x[i, j] * m[i, j] * (1.0 / 0.7)
                tw.store(out, (by * bm, bx * bn), acc)
        return out
    return dropout_tl


def _dropout_tl(dt, shape, rng):
    x = randn(rng, shape, dt)
    mk = rng.random(shape) > 0.3
    return "tileloop", (dropout_tl_factory, *shape, dt), [x, mk.astype(np.uint8)], [np.where(mk, f64(x) / 0.7, 0.0)]


def tril_tl_factory(M, N, dt, bm=BM, bn=16):
    """torch.tril in the seed's style: the element's global row and column from the block loops' variables."""
    def tril_tl(X: tw.Tensor((M, N), dt)):
        out = tw.output((M, N), dtype=dt)
        for by in range(tw.ceildiv(M, bm)):
            for bx in range(tw.ceildiv(N, bn)):
                x = tw.load(X, (by * bm, bx * bn), (bm, bn), dtype="float32")
                acc = tw.accumulator((bm, bn), dtype="float32")
                for i in range(bm):
                    for j in range(bn):
                        acc[i, j] = T.where(bx * bn + j <= by * bm + i, x[i, j], 0.0)
                tw.store(out, (by * bm, bx * bn), acc)
        return out
    return tril_tl


def _tril_tl(dt, shape, rng):
    x = randn(rng, shape, dt)
    return "tileloop", (tril_tl_factory, *shape, dt), [x], [np.tril(f64(x))]


def rmsnorm_tl_factory(M, N, dt, bm=BM):
    """RMSNorm in the seed's style: the row's sum of squares by a nest of range loops (a running sum), then the
    scaled row."""
    def rmsnorm_tl(X: tw.Tensor((M, N), dt), W: tw.Tensor((N,), "float32")):
        out = tw.output((M, N), dtype=dt)
        for by in range(tw.ceildiv(M, bm)):
            x = tw.load(X, (by * bm, 0), (bm, N), dtype="float32")
            w = tw.load(W, (0,), (N,))
            ss = tw.accumulator((bm,), dtype="float32")
            acc = tw.accumulator((bm, N), dtype="float32")
            for i in range(bm):
                for j in range(N):
                    ss[i] = ss[i] + x[i, j] * x[i, j]
            for i in range(bm):
                for j in range(N):
                    acc[i, j] = x[i, j] * T.rsqrt(ss[i] / N + 1e-6) * w[j]
            tw.store(out, (by * bm, 0), acc)
        return out
    return rmsnorm_tl


def _rmsnorm_tl(dt, shape, rng):
    M, N = shape
    x = randn(rng, shape, dt)
    w = rng.standard_normal(N).astype(np.float32)
    X = f64(x)
    return "tileloop", (rmsnorm_tl_factory, M, N, dt), [x, w], [X / np.sqrt((X * X).mean(1, keepdims=True) + 1e-6) * w]


CASES = {
    "add_rmsnorm": (_add_rmsnorm, F3, [(13, 37), (1, 1)]),
    "layer_norm_bwd": (_norm_bwd("layer"), F3, [(13, 37), (1, 2)]),
    "rms_norm_bwd": (_norm_bwd("rms"), F3, [(13, 37), (1, 1)]),
    "layer_norm_dw": (_ln_dw, ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "softmax_bwd": (_softmax_bwd(False), F3, [(13, 37), (1, 1)]),
    "log_softmax_bwd": (_softmax_bwd(True), F3, [(13, 37), (1, 1)]),
    "gelu_bwd": (_act_bwd("gelu"), F3, [(13, 37), (1, 1)]),
    "gelu_tanh_bwd": (_act_bwd("gelu_tanh"), F3, [(13, 37)]),
    "silu_bwd": (_act_bwd("silu"), F3, [(13, 37), (1, 1)]),
    "swiglu_bwd": (_swiglu_bwd, F3, [(13, 37)]),
    "cross_entropy_ls_i32": (_ce("int32"), F3, [(13, 37), (1, 1)]),
    "cross_entropy_ls_i64": (_ce("int64"), ("float32", "bfloat16"), [(13, 37)]),
    "cross_entropy_ls_i64_to_i32": (_ce("int64", "int32"), ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "cross_entropy_bwd": (_ce_bwd, F3, [(13, 37), (1, 1)]),
    "logsumexp_dim1": (_lse_mid, F3, [(3, 13, 37), (1, 1, 1)]),
    "top_p_count": (_top_p_count, ("float32",), [(13, 37), (1, 1)]),
    "top_p_threshold": (_prob_filter("threshold"), F3, [(13, 37), (1, 1)]),
    "min_p": (_prob_filter("min_p"), F3, [(13, 37), (1, 1)]),
    "repetition_penalty_scatter": (_rep_pen("gather_scatter"), ("float32",), [(3, 37, 5), (1, 1, 1)]),
    "repetition_penalty_mask": (_rep_pen("mask"), ("float32",), [(3, 37, 5), (1, 1, 1)]),
    "kv_quant_int8_head": (_kv_quant, F3, [(5, 3, 37), (1, 1, 1)]),
    "kv_dequant_int8_head": (_kv_dequant, F3, [(5, 3, 37), (1, 1, 1)]),
    "kv_quant_int8_dynamic": (_kv_quant_dyn, F3, [(5, 3, 37), (1, 1, 1)]),
    "awq_int4_dequant": (_int4("awq"), ("float16", "bfloat16"), [(48, 40, 16), (8, 8, 8)]),
    "gptq_int4_dequant": (_int4("gptq"), ("float16", "bfloat16"), [(48, 40, 16), (8, 8, 8)]),
    "gptq_int4_dequant_rows": (_int4("gptq_rows"), ("float16", "bfloat16"), [(48, 40, 16), (8, 8, 8)]),
    "causal_conv1d_shift": (_cconv("shift"), ("float32", "float16"), [(2, 9, 37, 4), (1, 1, 1, 4)]),
    "causal_conv1d_copies": (_cconv("copies"), ("float32", "float16"), [(2, 9, 37, 4), (1, 1, 1, 4)]),
    "causal_conv1d_copies_wcol": (_cconv("copies_wcol"), ("float32", "float16"), [(2, 9, 37, 4), (1, 1, 1, 4)]),
    "conv_state_update": (_conv_update, F3, [(2, 9, 4), (1, 1, 4)]),
    "ssm_step": (_ssm_step, F3, [(2, 9, 16), (1, 1, 1)]),
    "rope_pos_ids_i64": (_rope_heads("neox", "int64"), F3, [(5, 3, 16, 11), (1, 1, 2, 1)]),
    "rope_halves_i64": (_rope_heads("neox_halves", "int64"), F3, [(5, 3, 16, 11), (1, 1, 2, 1)]),
    "rope_gptj": (_rope_heads("gptj", "int32"), ("float32", "float16"), [(5, 3, 16, 11)]),
    "rotary_angles": (_rot_angles("plain"), ("float32",), [(13, 32), (1, 2)]),
    "yarn_angles": (_rot_angles("yarn"), ("float32",), [(13, 32), (1, 2)]),
    "embedding_bag_sum": (_emb_bag("sum"), F3, [(11, 37, 9, 4), (1, 1, 1, 1)]),
    "embedding_bag_mean": (_emb_bag("mean"), ("float32",), [(11, 37, 9, 4), (1, 1, 1, 1)]),
    "segment_sum_offsets": (_segsum("offsets"), ("float32",), [(13, 37, 4), (1, 1, 1)]),
    "index_add_atomic": (_segsum("atomic"), ("float32",), [(13, 37, 4), (1, 1, 1)]),
    "gather_dim1": (_gather1, ("float32", "float16", "int32"), [(13, 37, 5), (1, 1, 1)]),
    "one_hot": (_one_hot, ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "masked_fill_bool": (_masked_fill("bool"), ("float32", "float16", "bfloat16", "int32"), [(13, 37), (1, 1)]),
    "masked_fill_uint8": (_masked_fill("uint8"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "tril": (_tri(False, 0), ("float32", "float16", "int32"), [(2, 13, 37), (1, 1, 1)]),
    "triu_diag1": (_tri(True, 1), ("float32", "bfloat16"), [(2, 13, 37), (1, 1, 1)]),
    "dropout_bool": (_dropout("bool"), F3, [(13, 37), (1, 1)]),
    "dropout_uint8": (_dropout("uint8"), F3, [(13, 37), (1, 1)]),
    "cumsum_dim0": (_prefix2d("cols"), ("float32", "int32"), [(13, 37), (2, 1)]),
    "prefix_sum_2d": (_prefix2d("table"), ("float32", "int32"), [(13, 37), (2, 2)]),
    "histc": (_histc, ("float32",), [(37, 5), (1, 1)]),
    "count_nonzero": (_count_nz, ("float32", "int32"), [(13, 37), (1, 1)]),
    "transpose_3d": (_transpose3("map"), ("float32", "float16"), [(2, 13, 37)]),
    "transpose_3d_elements": (_transpose3("elements"), ("float32", "float16", "int32"), [(2, 13, 37), (1, 1, 1)]),
    "flip_dim1": (_flip("map"), ("float32", "bfloat16"), [(2, 13, 37), (1, 1, 1)]),
    "flip_dim1_rows": (_flip("rows"), ("float32", "bfloat16"), [(2, 13, 37), (1, 1, 1)]),
    "permute_0213": (_permute, F3, [(2, 7, 3, 37), (1, 1, 1, 1)]),
    "concat_tile": (_concat("tile"), ("float32", "float16"), [(13, 37, 5), (1, 1, 1)]),
    "concat_gm": (_concat("gm"), ("float32", "float16"), [(13, 37, 5), (1, 1, 1)]),
    "concat_map": (_concat("map"), ("float32", "float16"), [(13, 37, 5), (1, 1, 1)]),
    "split_last": (_split, ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "pad_origin": (_pad("origin"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "pad_map": (_pad("map"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "slice_cols_step2": (_strided("cols"), ("float32", "float16"), [(13, 37), (1, 2)]),
    "slice_rows_step2": (_strided("rows"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "sum_all_atomic": (_reduce_all("sum_atomic"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "amax_all": (_reduce_all("amax_loop"), F3, [(13, 37), (1, 1)]),
    "mean_all": (_reduce_all("mean_loop"), ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "linear_f16_bf16out": (_linear_mixed, ("bfloat16", "float32"), [(13, 37, 45), (1, 1, 1)]),
    "layer_norm_f16_bf16out": (_ln_mixed, ("bfloat16",), [(13, 37), (1, 2)]),
    "dropout_tileloop": (_dropout_tl, ("float32", "float16"), [(13, 37), (1, 1)]),
    "tril_tileloop": (_tril_tl, ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "rmsnorm_tileloop": (_rmsnorm_tl, ("float32", "float16"), [(13, 37), (13, 1)]),
    "gemv_decode": (_gemv, ("float16", "bfloat16"), [(13, 45), (1, 1)]),
    "reshape_and_cache_i64": (_reshape_cache, F3, [(5, 3, 37, 9), (1, 1, 1, 2)]),
    "paged_kv_gather": (_paged, F3, [(7, 5, 37, 3), (1, 1, 1, 1)]),
    "masked_mean_pool": (_mean_pool, F3, [(2, 13, 37), (1, 1, 1)]),
    "ssm_scan": (_ssm_scan, ("float32", "bfloat16"), [(2, 9, 9, 16), (1, 1, 1, 1)]),
    "rmsnorm_chunked": (_rms_chunked, F3, [(13, 37), (1, 1)]),
    "ce_argmax_chunked": (_ce_chunked, ("float32", "bfloat16"), [(13, 37), (1, 1)]),
    "window_mask_softmax": (_attn_mask("window"), ("float32", "float16"), [(13,), (1,)]),
    "window_mask_softmax_and": (_attn_mask("window_and"), ("float32", "float16"), [(13,), (1,)]),
    "hash_dropout": (_hash_dropout, ("float32",), [(13, 37), (1, 1)]),
    "pow_tiles": (_pow("pow"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "pow_tiles_exp_log": (_pow("exp_log"), ("float32", "float16"), [(13, 37), (1, 1)]),
    "document_mask_softmax": (_attn_mask("document"), ("float32", "bfloat16"), [(13,), (1,)]),
}


def check(name, dt, shape, target):
    P33.check(name, dt, shape, target, CASES)


if __name__ == "__main__":
    import sys
    args = sys.argv[1:]
    targets = ("cpu", "ascend910b")
    if args and args[0].startswith("--target="):  # e.g. --target=ascend910b
        targets, args = tuple(args[0].split("=", 1)[1].split(",")), args[1:]
    P33.probe(args, CASES, targets)
