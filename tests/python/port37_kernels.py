"""Session 37's portability hunt (h-port37, docs/testing.md "Session 37: port37"): more user kernel forms, not
covered by port33_kernels.py .. port36_kernels.py (element-wise activations and float tricks people port from
torch: squared ReLU, hard sigmoid, softsign, CELU, log-sigmoid, PReLU, fmod, round-half-even, frac, xlogy,
heaviside, copysign, softshrink, tanhshrink, RReLU eval, logit; norms: group RMSNorm, gated RMSNorm, weight
standardisation, BatchNorm running-stat update, DeepNorm, LayerNorm over two dims; MoE: biased sigmoid routing,
expert-choice routing, capacity-factor drop, the load-balancing loss, shared-expert gating, top-k combine;
quantisation: FP8 e4m3 / e5m2 emulation, int4 two per byte with zero points, per-group int8 gemm, NF4 lookup,
SmoothQuant; optimizers and losses: Lion, Adafactor, RMSprop, Adagrad, InfoNCE, triplet margin, dice, multi-margin;
signal / vision: dilated conv1d, max-unpool, RoI align, Sobel, pixel shuffle, framing, overlap-add; attention:
StreamingLLM sink + window decode, cross-attention with a key padding mask, T5 buckets computed in the kernel,
Longformer local + global masks, differential attention, paged prefill over a chunked context; misc: compaction,
top-k by repeated argmax, run-length encoding, reverse cumsum, cross product, batched trace, moving average),
written for cpu first as docs/language.md teaches, each a `tw.jit` factory, then the same factory with only the
target changed to ascend910b (simulator, checker on).

CASES as in port35_kernels.py (whose check / probe take cases=); `python port37_kernels.py [--target=T] [names]`
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


def _sigm(x):
    return 1.0 / (1.0 + np.exp(-x))


# ----------------------------------------------------------------------------------------------- element-wise
@tw.jit(out_idx=[-1])
def ew37(M, N, dt, form, bm=BM):
    """torch element-wise functions on a (bm, N) tile, y in float32; W a per-column parameter (PReLU's weight),
    Z a second operand (fmod's divisor, xlogy's y, heaviside's values, copysign's sign source)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Z: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            z = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Z[bx * bm, 0], z)
            T.copy(W, w)
            for i, j in T.Parallel(bm, N):
                if form == "squared_relu":
                    y[i, j] = T.max(x[i, j], 0.0) * T.max(x[i, j], 0.0)
                elif form == "hardsigmoid":
                    y[i, j] = T.min(T.max(x[i, j] / 6.0 + 0.5, 0.0), 1.0)
                elif form == "softsign":
                    y[i, j] = x[i, j] / (1.0 + T.abs(x[i, j]))
                elif form == "celu":
                    y[i, j] = T.max(x[i, j], 0.0) + T.min(1.5 * (T.exp(x[i, j] / 1.5) - 1.0), 0.0)
                elif form == "logsigmoid":
                    y[i, j] = T.min(x[i, j], 0.0) - T.log(1.0 + T.exp(-T.abs(x[i, j])))
                elif form == "prelu":
                    y[i, j] = T.where(x[i, j] > 0, x[i, j], w[j] * x[i, j])
                elif form == "fmod":
                    r = x[i, j] % z[i, j]
                    y[i, j] = T.where(r != 0 and (r < 0) != (x[i, j] < 0), r - z[i, j], r)
                elif form == "round":
                    y[i, j] = T.where(T.abs(x[i, j]) < 4194304.0, (x[i, j] + MAGIC) - MAGIC, x[i, j])
                elif form == "frac":
                    y[i, j] = T.where(x[i, j] >= 0, x[i, j] - T.floor(x[i, j]), x[i, j] - T.ceil(x[i, j]))
                elif form == "xlogy":
                    y[i, j] = T.where(x[i, j] == 0, 0.0, x[i, j] * T.log(T.abs(z[i, j]) + 0.5))
                elif form == "heaviside":
                    y[i, j] = T.where(x[i, j] > 0, 1.0, T.where(x[i, j] == 0, z[i, j], 0.0))
                elif form == "copysign":
                    y[i, j] = T.where(z[i, j] < 0, -T.abs(x[i, j]), T.abs(x[i, j]))
                elif form == "softshrink":
                    y[i, j] = T.where(x[i, j] > 0.5, x[i, j] - 0.5, T.where(x[i, j] < -0.5, x[i, j] + 0.5, 0.0))
                elif form == "tanhshrink":
                    y[i, j] = x[i, j] - T.tanh(x[i, j])
                elif form == "rrelu_eval":
                    y[i, j] = T.where(x[i, j] >= 0, x[i, j], x[i, j] * ((1.0 / 8 + 1.0 / 3) / 2))
                else:  # logit with eps
                    p = T.min(T.max(T.sigmoid(x[i, j]), 1e-3), 1.0 - 1e-3)
                    y[i, j] = T.log(p / (1.0 - p))
            T.copy(y, Y[bx * bm, 0])

    return main


def _ew(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, (M, N), dt, 2.0)
        if form in ("round", "frac"):
            x = (rng.integers(-40, 40, (M, N)) / 4 + rng.choice([0, 0.3], (M, N))).astype(npdt(dt))
        if form in ("heaviside", "fmod"):
            x.flat[::3] = 0
        z = randn(rng, (M, N), dt, 2.0)
        if form == "fmod":
            z = (np.where(z >= 0, 1, -1) * (0.5 + np.abs(f64(z)))).astype(npdt(dt))
        w = rng.standard_normal(N).astype(np.float32) * 0.25
        X, Z = f64(x), f64(z)
        ref = {
            "squared_relu": np.maximum(X, 0) ** 2,
            "hardsigmoid": np.clip(X / 6 + 0.5, 0, 1),
            "softsign": X / (1 + np.abs(X)),
            "celu": np.maximum(X, 0) + np.minimum(1.5 * np.expm1(X / 1.5), 0),
            "logsigmoid": -np.logaddexp(0, -X),
            "prelu": np.where(X > 0, X, f64(w) * X),
            "round": np.round(X),
            "frac": X - np.trunc(X),
            "xlogy": np.where(X == 0, 0, X * np.log(np.abs(Z) + 0.5)),
            "heaviside": np.heaviside(X, Z),
            "copysign": np.copysign(X, np.where(Z < 0, -1.0, 1.0)),
            "softshrink": np.where(X > 0.5, X - 0.5, np.where(X < -0.5, X + 0.5, 0)),
            "tanhshrink": X - np.tanh(X),
            "rrelu_eval": np.where(X >= 0, X, X * (1 / 8 + 1 / 3) / 2),
            "logit": np.log(np.clip(_sigm(X), 1e-3, 1 - 1e-3) / (1 - np.clip(_sigm(X), 1e-3, 1 - 1e-3))),
        }
        if form == "fmod":  # x % z then corrected: fmod up to the rounding of x % z (numpy's float32 remainder)
            ref = np.fmod(X, Z)
            return ew37, (M, N, dt, form), [x, z, w], [ref], {"tol": (2e-6, 1e-5)}
        extra = {"tol": (1e-5, 1e-4)} if form in ("tanhshrink", "logit") else {}
        return ew37, (M, N, dt, form), [x, z, w], [ref[form]], extra
    return make


# ----------------------------------------------------------------------------------------------- norms
@tw.jit(out_idx=[-1])
def group_rmsnorm(M, G, C, dt, form, bm=BM, eps=1e-6):
    """RMSNorm over groups of C channels of a row (M, G, C), a weight per channel (G, C): `group`; `gated` Mamba-2's
    gated RMSNorm over the row (G groups as one): rmsnorm(x * silu(z)) * w; `ln2d` LayerNorm over the last two
    dims (normalized_shape=(G, C)) with weight and bias."""
    @T.prim_func
    def main(X: T.Tensor((M, G, C), dt), Z: T.Tensor((M, G, C), dt), W: T.Tensor((G, C), dt),
             B: T.Tensor((G, C), dt), Y: T.Tensor((M, G, C), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, G, C), "float32")
            z = T.alloc_fragment((bm, G, C), "float32")
            q = T.alloc_fragment((bm, G, C), "float32")
            w = T.alloc_fragment((G, C), "float32")
            b = T.alloc_fragment((G, C), "float32")
            y = T.alloc_fragment((bm, G, C), dt)
            s = T.alloc_fragment((bm, G), "float32")
            r = T.alloc_fragment((bm,), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0, 0], x)
            T.copy(Z[bx * bm, 0, 0], z)
            T.copy(W, w)
            T.copy(B, b)
            if form == "group":
                for i, g, c in T.Parallel(bm, G, C):
                    q[i, g, c] = x[i, g, c] * x[i, g, c]
                T.reduce_sum(q, s, dim=2)
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.rsqrt(s[i, g] / C + eps) * w[g, c]
            elif form == "gated":
                for i, g, c in T.Parallel(bm, G, C):
                    x[i, g, c] = x[i, g, c] * T.silu(z[i, g, c])
                    q[i, g, c] = x[i, g, c] * x[i, g, c]
                T.reduce_sum(q, s, dim=2)
                T.reduce_sum(s, r, dim=1)
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.rsqrt(r[i] / (G * C) + eps) * w[g, c]
            else:
                T.reduce_sum(x, s, dim=2)
                T.reduce_sum(s, mu, dim=1)
                for i, g, c in T.Parallel(bm, G, C):
                    x[i, g, c] = x[i, g, c] - mu[i] / (G * C)
                    q[i, g, c] = x[i, g, c] * x[i, g, c]
                T.reduce_sum(q, s, dim=2)
                T.reduce_sum(s, r, dim=1)
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.rsqrt(r[i] / (G * C) + 1e-5) * w[g, c] + b[g, c]
            T.copy(y, Y[bx * bm, 0, 0])

    return main


def _grms(form):
    def make(dt, shape, rng):
        M, G, C = shape
        x, z = randn(rng, (M, G, C), dt), randn(rng, (M, G, C), dt)
        w, b = randn(rng, (G, C), dt, 0.5), randn(rng, (G, C), dt, 0.5)
        X, Z, Wt, Bt = f64(x), f64(z), f64(w), f64(b)
        if form == "group":
            ref = X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * Wt
        elif form == "gated":
            h = X * Z * _sigm(Z)
            ref = h / np.sqrt((h * h).mean((1, 2), keepdims=True) + 1e-6) * Wt
        else:
            mu, var = X.mean((1, 2), keepdims=True), X.var((1, 2), keepdims=True)
            ref = (X - mu) / np.sqrt(var + 1e-5) * Wt + Bt
        return group_rmsnorm, (M, G, C, dt, form), [x, z, w, b], [ref]
    return make


@tw.jit(out_idx=[-1])
def weight_std(Co, K, dt, bm=BM, eps=1e-5):
    """Weight standardisation (BiT's StdConv2d) of a conv weight viewed as (Co, Cin * kh * kw): each output
    channel's row to zero mean, unit (biased) variance."""
    @T.prim_func
    def main(Wt: T.Tensor((Co, K), dt), Y: T.Tensor((Co, K), dt)):
        with T.Kernel(T.ceildiv(Co, bm)) as bx:
            w = T.alloc_fragment((bm, K), "float32")
            sq = T.alloc_fragment((bm, K), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            var = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, K), dt)
            T.copy(Wt[bx * bm, 0], w)
            T.reduce_sum(w, mu, dim=1)
            for i, j in T.Parallel(bm, K):
                w[i, j] = w[i, j] - mu[i] / K
                sq[i, j] = w[i, j] * w[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i, j in T.Parallel(bm, K):
                y[i, j] = w[i, j] / T.sqrt(var[i] / K + eps)
            T.copy(y, Y[bx * bm, 0])

    return main


def _wstd(dt, shape, rng):
    Co, K = shape
    w = randn(rng, (Co, K), dt)
    W = f64(w)
    ref = (W - W.mean(1, keepdims=True)) / np.sqrt(W.var(1, keepdims=True) + 1e-5)
    return weight_std, (Co, K, dt), [w], [ref]


@tw.jit(out_idx=[-2, -1])
def bn_running(Nb, C, dt, bc=16, mom=0.1):
    """BatchNorm training's statistics of a (N, C) batch per column block: the batch mean and biased variance
    (returned), and the running mean / variance updated in place with the unbiased variance (momentum 0.1)."""
    @T.prim_func
    def main(X: T.Tensor((Nb, C), dt), Rm: T.Tensor((C,), "float32"), Rv: T.Tensor((C,), "float32"),
             Mu: T.Tensor((C,), "float32"), Var: T.Tensor((C,), "float32")):
        with T.Kernel(T.ceildiv(C, bc)) as by:
            x = T.alloc_fragment((Nb, bc), "float32")
            sq = T.alloc_fragment((Nb, bc), "float32")
            mu = T.alloc_fragment((bc,), "float32")
            var = T.alloc_fragment((bc,), "float32")
            rm = T.alloc_fragment((bc,), "float32")
            rv = T.alloc_fragment((bc,), "float32")
            T.copy(X[0, by * bc], x)
            T.copy(Rm[by * bc], rm)
            T.copy(Rv[by * bc], rv)
            T.reduce_sum(x, mu, dim=0)
            for j in T.Parallel(bc):
                mu[j] = mu[j] / Nb
            for i, j in T.Parallel(Nb, bc):
                sq[i, j] = (x[i, j] - mu[j]) * (x[i, j] - mu[j])
            T.reduce_sum(sq, var, dim=0)
            for j in T.Parallel(bc):
                rm[j] = (1.0 - mom) * rm[j] + mom * mu[j]
                rv[j] = (1.0 - mom) * rv[j] + mom * var[j] / max(Nb - 1, 1)
                var[j] = var[j] / Nb
            T.copy(rm, Rm[by * bc])
            T.copy(rv, Rv[by * bc])
            T.copy(mu, Mu[by * bc])
            T.copy(var, Var[by * bc])

    return main


def _bn_running(dt, shape, rng):
    Nb, C = shape
    x = randn(rng, (Nb, C), dt)
    rm, rv = rng.standard_normal(C).astype(np.float32), (0.5 + rng.random(C)).astype(np.float32)
    X = f64(x)
    mu, ssq = X.mean(0), ((X - X.mean(0)) ** 2).sum(0)
    rm2 = 0.9 * f64(rm) + 0.1 * mu
    rv2 = 0.9 * f64(rv) + 0.1 * ssq / max(Nb - 1, 1)
    return bn_running, (Nb, C, dt), [x, rm, rv], [mu, ssq / Nb, rm2, rv2], {"inplace": (1, 2)}


@tw.jit(out_idx=[-1])
def deepnorm(M, N, dt, alpha=2.5, bm=BM):
    """DeepNorm's post-LN residual: LayerNorm(alpha * x + f(x)) with weight and bias."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Fx: T.Tensor((M, N), dt), W: T.Tensor((N,), dt), B: T.Tensor((N,), dt),
             Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            f = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            b = T.alloc_fragment((N,), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            var = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Fx[bx * bm, 0], f)
            T.copy(W, w)
            T.copy(B, b)
            for i, j in T.Parallel(bm, N):
                x[i, j] = alpha * x[i, j] + f[i, j]
            T.reduce_sum(x, mu, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] - mu[i] / N
                f[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(f, var, dim=1)
            for i, j in T.Parallel(bm, N):
                y[i, j] = x[i, j] * T.rsqrt(var[i] / N + 1e-5) * w[j] + b[j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _deepnorm(dt, shape, rng):
    M, N = shape
    x, fx, w, b = randn(rng, (M, N), dt), randn(rng, (M, N), dt), randn(rng, (N,), dt), randn(rng, (N,), dt)
    h = 2.5 * f64(x) + f64(fx)
    ref = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + 1e-5) * f64(w) + f64(b)
    return deepnorm, (M, N, dt), [x, fx, w, b], [ref]


# ----------------------------------------------------------------------------------------------- misc row ops
@tw.jit(out_idx=[-1])
def row_scan37(M, N, dt, form, bm=BM, W=3):
    """`rev_cumsum` torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]) written as a serial loop from the last
    column down; `excl_cumsum` the exclusive cumsum (a shifted running sum); `moving_avg` a causal moving average
    of W taps (zero history) by shifted reads of a left-padded tile."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            xp = T.alloc_fragment((bm, N + W - 1), "float32")
            T.copy(X[bx * bm, 0], x)
            if form == "rev_cumsum":
                T.copy(x, y)
                for k in T.serial(N - 1):
                    for i in T.Parallel(bm):
                        y[i, N - 2 - k] = y[i, N - 2 - k] + y[i, N - 1 - k]
            elif form == "ma_copies":  # the hint: each tap a tile copied from X at its column shift
                x1 = T.alloc_fragment((bm, N), "float32")
                x2 = T.alloc_fragment((bm, N), "float32")
                T.copy(X[bx * bm, -1], x1)
                T.copy(X[bx * bm, -2], x2)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (x2[i, j] + x1[i, j] + x[i, j]) / W
            elif form == "excl_cumsum":
                T.clear(y)
                for j in T.serial(1, N):
                    for i in T.Parallel(bm):
                        y[i, j] = y[i, j - 1] + x[i, j - 1]
            else:
                T.clear(xp)
                T.copy(x, xp[:, W - 1:N + W - 1])
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (xp[i, j] + xp[i, j + 1] + xp[i, j + 2]) / W
            T.copy(y, Y[bx * bm, 0])

    return main


def _row_scan(form):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, (M, N), dt)
        X = f64(x)
        if form == "rev_cumsum":
            ref = np.flip(np.cumsum(np.flip(X, 1), 1), 1)
        elif form == "excl_cumsum":
            ref = np.cumsum(X, 1) - X
        else:  # moving_avg, ma_copies
            xp = np.concatenate([np.zeros((M, 2)), X], 1)
            ref = (xp[:, :-2] + xp[:, 1:-1] + xp[:, 2:]) / 3
        return row_scan37, (M, N, dt, form), [x], [ref], {"tol": (1e-5 * N, 1e-4)}
    return make


@tw.jit(out_idx=[-1])
def cross3(N, dt, form, bn=16):
    """torch.cross of (N, 3) vectors: `rows` element reads by constant column in a 1-D map over the rows,
    `soa` the same on a (3, N) structure-of-arrays layout."""
    shp = (3, N) if form == "soa" else (N, 3)

    @T.prim_func
    def main(A: T.Tensor(shp, dt), B: T.Tensor(shp, dt), C: T.Tensor(shp, dt)):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            if form == "gather":  # the hint of the rows form's error: each column gathered into a row first
                a = T.alloc_fragment((bn, 3), "float32")
                b = T.alloc_fragment((bn, 3), "float32")
                at = T.alloc_fragment((3, bn), "float32")
                bt = T.alloc_fragment((3, bn), "float32")
                ct = T.alloc_fragment((3, bn), "float32")
                c = T.alloc_fragment((bn, 3), dt)
                T.copy(A[bx * bn, 0], a)
                T.copy(B[bx * bn, 0], b)
                for k in T.serial(3):
                    for i in T.Parallel(bn):
                        at[k, i] = a[i, k]
                        bt[k, i] = b[i, k]
                for i in T.Parallel(bn):
                    ct[0, i] = at[1, i] * bt[2, i] - at[2, i] * bt[1, i]
                    ct[1, i] = at[2, i] * bt[0, i] - at[0, i] * bt[2, i]
                    ct[2, i] = at[0, i] * bt[1, i] - at[1, i] * bt[0, i]
                for k in T.serial(3):
                    for i in T.Parallel(bn):
                        c[i, k] = ct[k, i]
                T.copy(c, C[bx * bn, 0])
            elif form == "rows":
                a = T.alloc_fragment((bn, 3), "float32")
                b = T.alloc_fragment((bn, 3), "float32")
                c = T.alloc_fragment((bn, 3), dt)
                T.copy(A[bx * bn, 0], a)
                T.copy(B[bx * bn, 0], b)
                for i in T.Parallel(bn):
                    c[i, 0] = a[i, 1] * b[i, 2] - a[i, 2] * b[i, 1]
                    c[i, 1] = a[i, 2] * b[i, 0] - a[i, 0] * b[i, 2]
                    c[i, 2] = a[i, 0] * b[i, 1] - a[i, 1] * b[i, 0]
                T.copy(c, C[bx * bn, 0])
            else:
                a = T.alloc_fragment((3, bn), "float32")
                b = T.alloc_fragment((3, bn), "float32")
                c = T.alloc_fragment((3, bn), dt)
                T.copy(A[0, bx * bn], a)
                T.copy(B[0, bx * bn], b)
                for i in T.Parallel(bn):
                    c[0, i] = a[1, i] * b[2, i] - a[2, i] * b[1, i]
                    c[1, i] = a[2, i] * b[0, i] - a[0, i] * b[2, i]
                    c[2, i] = a[0, i] * b[1, i] - a[1, i] * b[0, i]
                T.copy(c, C[0, bx * bn])

    return main


def _cross3(form):
    def make(dt, shape, rng):
        (N,) = shape
        a, b = randn(rng, (N, 3), dt), randn(rng, (N, 3), dt)
        ref = np.cross(f64(a), f64(b))
        if form == "soa":
            a, b, ref = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T), ref.T
        return cross3, (N, dt, form), [a, b], [ref]
    return make


@tw.jit(out_idx=[-1])
def trace_batched(Bt, D, dt):
    """torch.diagonal(x, dim1=1, dim2=2).sum(-1) of (B, D, D): the diagonal picked by T.where(i == j) and a sum of
    the whole tile (two reductions)."""
    @T.prim_func
    def main(X: T.Tensor((Bt, D, D), dt), Y: T.Tensor((Bt,), "float32")):
        with T.Kernel(Bt) as b:
            x = T.alloc_fragment((D, D), "float32")
            r = T.alloc_fragment((D,), "float32")
            t = T.alloc_fragment((1,), "float32")
            T.copy(X[b, 0, 0], x)
            for i, j in T.Parallel(D, D):
                x[i, j] = T.where(i == j, x[i, j], 0.0)
            T.reduce_sum(x, r, dim=1)
            T.reduce_sum(r, t, dim=0)
            T.copy(t, Y[b:b + 1])

    return main


def _trace(dt, shape, rng):
    Bt, D = shape
    x = randn(rng, (Bt, D, D), dt)
    return trace_batched, (Bt, D, dt), [x], [np.trace(f64(x), axis1=1, axis2=2)]


# ----------------------------------------------------------------------------------------------- MoE
@tw.jit(out_idx=[-2, -1])
def router_topk(Tn, E, dt, K=2, bm=BM, rsf=2.5):
    """DeepSeek-V3's router: s = sigmoid(logits); the top-K experts chosen by s + bias (repeated argmax: the row max,
    its first index, then that column masked out), weights s at those experts normalised to sum 1, times the routed
    scaling factor; ids and weights stored by column k of (bm, K) tiles."""
    @T.prim_func
    def main(X: T.Tensor((Tn, E), dt), Bs: T.Tensor((E,), "float32"), Idx: T.Tensor((Tn, K), "int32"),
             Wt: T.Tensor((Tn, K), "float32")):
        with T.Kernel(T.ceildiv(Tn, bm)) as bx:
            s = T.alloc_fragment((bm, E), "float32")
            sel = T.alloc_fragment((bm, E), "float32")
            pick = T.alloc_fragment((bm, E), "int32")
            tmp = T.alloc_fragment((bm, E), "float32")
            b = T.alloc_fragment((E,), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            am = T.alloc_fragment((bm,), "int32")
            wv = T.alloc_fragment((bm,), "float32")
            tot = T.alloc_fragment((bm,), "float32")
            idx = T.alloc_fragment((bm, K), "int32")
            wt = T.alloc_fragment((bm, K), "float32")
            T.copy(X[bx * bm, 0], s)
            T.copy(Bs, b)
            for i, j in T.Parallel(bm, E):
                s[i, j] = T.sigmoid(s[i, j])
                sel[i, j] = s[i, j] + b[j]
            T.clear(tot)
            for k in T.serial(K):
                T.reduce_max(sel, mx, dim=1)
                for i, j in T.Parallel(bm, E):
                    pick[i, j] = T.where(sel[i, j] == mx[i], j, E)
                T.reduce_min(pick, am, dim=1)
                for i, j in T.Parallel(bm, E):
                    tmp[i, j] = T.where(j == am[i], s[i, j], 0.0)
                    sel[i, j] = T.where(j == am[i], NEG, sel[i, j])
                T.reduce_sum(tmp, wv, dim=1)
                for i in T.Parallel(bm):
                    idx[i, k] = am[i]
                    wt[i, k] = wv[i]
                    tot[i] = tot[i] + wv[i]
            for i, k in T.Parallel(bm, K):
                wt[i, k] = wt[i, k] / tot[i] * rsf
            T.copy(idx, Idx[bx * bm, 0])
            T.copy(wt, Wt[bx * bm, 0])

    return main


def _router(dt, shape, rng):
    Tn, E = shape
    x = randn(rng, (Tn, E), dt)
    bs = (rng.standard_normal(E) * 0.1).astype(np.float32)
    s = _sigm(f64(x).astype(np.float32).astype(np.float64))
    sel = s + f64(bs)
    K = min(2, E)
    idx = np.argsort(-sel, axis=1, kind="stable")[:, :K]
    w = np.take_along_axis(s, idx, 1)
    return router_topk, (Tn, E, dt, K), [x, bs], [idx, w / w.sum(1, keepdims=True) * 2.5]


@tw.jit(out_idx=[-2, -1])
def expert_choice(Tn, E, C, dt):
    """Expert-choice routing (Zhou et al.): token-to-expert probabilities softmax(x) over E per token, then each
    expert takes its top-C tokens (repeated argmax down the columns, reduce over dim 0), ids and gates stored as
    row c of (C, E) tiles."""
    @T.prim_func
    def main(X: T.Tensor((Tn, E), dt), Ids: T.Tensor((C, E), "int32"), G: T.Tensor((C, E), "float32")):
        with T.Kernel(1) as bx:
            p = T.alloc_fragment((Tn, E), "float32")
            pick = T.alloc_fragment((Tn, E), "int32")
            mx = T.alloc_fragment((Tn,), "float32")
            sm = T.alloc_fragment((Tn,), "float32")
            cm = T.alloc_fragment((E,), "float32")
            am = T.alloc_fragment((E,), "int32")
            ids = T.alloc_fragment((C, E), "int32")
            g = T.alloc_fragment((C, E), "float32")
            T.copy(X, p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(Tn, E):
                p[i, j] = T.exp(p[i, j] - mx[i])
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(Tn, E):
                p[i, j] = p[i, j] / sm[i]
            for c in T.serial(C):
                T.reduce_max(p, cm, dim=0)
                for i, j in T.Parallel(Tn, E):
                    pick[i, j] = T.where(p[i, j] == cm[j], i, Tn)
                T.reduce_min(pick, am, dim=0)
                for j in T.Parallel(E):
                    ids[c, j] = am[j]
                    g[c, j] = cm[j]
                for i, j in T.Parallel(Tn, E):
                    p[i, j] = T.where(i == am[j], -1.0, p[i, j])
            T.copy(ids, Ids)
            T.copy(g, G)

    return main


def _expert_choice(dt, shape, rng):
    Tn, E, C = shape
    x = randn(rng, (Tn, E), dt)
    p = _softmax64(f64(x))
    ids = np.argsort(-p, axis=0, kind="stable")[:C]
    return expert_choice, (Tn, E, C, dt), [x], [ids, np.take_along_axis(p, ids, 0)]


@tw.jit(out_idx=[-1])
def capacity_drop(Tn, E, cap):
    """Switch's capacity factor: each token's slot in its (top-1) expert = how many earlier tokens chose it (a
    cumsum of the one-hot down the tokens: a serial loop over rows), -1 where the slot is past the capacity."""
    @T.prim_func
    def main(Ids: T.Tensor((Tn,), "int32"), Pos: T.Tensor((Tn,), "int32")):
        with T.Kernel(1) as bx:
            ids = T.alloc_fragment((Tn,), "int32")
            oh = T.alloc_fragment((Tn, E), "int32")
            cs = T.alloc_fragment((Tn, E), "int32")
            pos = T.alloc_fragment((Tn,), "int32")
            T.copy(Ids, ids)
            for i, j in T.Parallel(Tn, E):
                oh[i, j] = T.where(ids[i] == j, 1, 0)
            T.copy(oh, cs)
            for r in T.serial(1, Tn):
                for j in T.Parallel(E):
                    cs[r, j] = cs[r, j] + cs[r - 1, j]
            for i, j in T.Parallel(Tn, E):
                cs[i, j] = (cs[i, j] - 1) * oh[i, j]
            T.reduce_sum(cs, pos, dim=1)
            for i in T.Parallel(Tn):
                pos[i] = T.where(pos[i] < cap, pos[i], -1)
            T.copy(pos, Pos)

    return main


def _capacity(dt, shape, rng):
    Tn, E, cap = shape
    ids = rng.integers(0, E, Tn).astype(np.int32)
    seen = np.zeros(E, np.int64)
    ref = np.empty(Tn, np.int64)
    for t, e in enumerate(ids):
        ref[t] = seen[e] if seen[e] < cap else -1
        seen[e] += 1
    return capacity_drop, (Tn, E, cap), [ids], [ref]


@tw.jit(out_idx=[-1])
def lb_loss(Tn, E, dt):
    """Switch Transformer's auxiliary load-balancing loss E * sum_e f_e * P_e: f_e the fraction of tokens whose
    argmax is e, P_e the mean router probability of e (softmax per token), one block, a (1,) output."""
    @T.prim_func
    def main(X: T.Tensor((Tn, E), dt), L: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            p = T.alloc_fragment((Tn, E), "float32")
            oh = T.alloc_fragment((Tn, E), "float32")
            mx = T.alloc_fragment((Tn,), "float32")
            sm = T.alloc_fragment((Tn,), "float32")
            f = T.alloc_fragment((E,), "float32")
            pm = T.alloc_fragment((E,), "float32")
            l = T.alloc_fragment((1,), "float32")
            T.copy(X, p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(Tn, E):
                oh[i, j] = T.where(p[i, j] == mx[i], 1.0, 0.0)
                p[i, j] = T.exp(p[i, j] - mx[i])
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(Tn, E):
                p[i, j] = p[i, j] / sm[i]
            T.reduce_sum(oh, f, dim=0)
            T.reduce_sum(p, pm, dim=0)
            for j in T.Parallel(E):
                f[j] = f[j] * pm[j] * (E / (Tn * Tn))
            T.reduce_sum(f, l, dim=0)
            T.copy(l, L)

    return main


def _lb_loss(dt, shape, rng):
    Tn, E = shape
    x = randn(rng, (Tn, E), dt)
    X = f64(x)
    p = _softmax64(X)
    f = np.bincount(X.argmax(1), minlength=E) / Tn
    return lb_loss, (Tn, E, dt), [x], [np.array([E * (f * p.mean(0)).sum()])]


@tw.jit(out_idx=[-1])
def shared_expert(Tn, D, dt, bm=BM):
    """Qwen2-MoE's shared expert: y = routed + sigmoid(x . w_gate) * shared, the gate a per-token dot product
    (a row sum), all (T, D)."""
    @T.prim_func
    def main(X: T.Tensor((Tn, D), dt), Wg: T.Tensor((D,), dt), R: T.Tensor((Tn, D), dt), S: T.Tensor((Tn, D), dt),
             Y: T.Tensor((Tn, D), dt)):
        with T.Kernel(T.ceildiv(Tn, bm)) as bx:
            x = T.alloc_fragment((bm, D), "float32")
            r = T.alloc_fragment((bm, D), "float32")
            s = T.alloc_fragment((bm, D), "float32")
            w = T.alloc_fragment((D,), "float32")
            g = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, D), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(R[bx * bm, 0], r)
            T.copy(S[bx * bm, 0], s)
            T.copy(Wg, w)
            for i, j in T.Parallel(bm, D):
                x[i, j] = x[i, j] * w[j]
            T.reduce_sum(x, g, dim=1)
            for i, j in T.Parallel(bm, D):
                y[i, j] = r[i, j] + T.sigmoid(g[i]) * s[i, j]
            T.copy(y, Y[bx * bm, 0])

    return main


def _shared(dt, shape, rng):
    Tn, D = shape
    x, wg, r, s = randn(rng, (Tn, D), dt), randn(rng, (D,), dt, 0.2), randn(rng, (Tn, D), dt), randn(rng, (Tn, D), dt)
    g = _sigm(f64(x) @ f64(wg))
    return shared_expert, (Tn, D, dt), [x, wg, r, s], [f64(r) + g[:, None] * f64(s)]


@tw.jit(out_idx=[-1])
def moe_combine(Tn, K, NE, D, dt):
    """The MoE combine: out[t] = sum_k w[t, k] * Ye[idx[t, k]], a row of the expert outputs gathered by a scalar
    index read in a serial loop over k, the weight a scalar read of a float tensor."""
    @T.prim_func
    def main(Ye: T.Tensor((NE, D), dt), Idx: T.Tensor((Tn, K), "int32"), Wt: T.Tensor((Tn, K), "float32"),
             Y: T.Tensor((Tn, D), dt)):
        with T.Kernel(Tn) as t:
            row = T.alloc_fragment((D,), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for k in T.serial(K):
                T.copy(Ye[Idx[t, k], :], row)
                for d in T.Parallel(D):
                    acc[d] = acc[d] + Wt[t, k] * row[d]
            T.copy(acc, Y[t, :])

    return main


def _combine(dt, shape, rng):
    Tn, K, NE, D = shape
    ye = randn(rng, (NE, D), dt)
    idx = rng.integers(0, NE, (Tn, K)).astype(np.int32)
    wt = rng.random((Tn, K)).astype(np.float32)
    ref = (f64(ye)[idx] * f64(wt)[..., None]).sum(1)
    return moe_combine, (Tn, K, NE, D, dt), [ye, idx, wt], [ref]


# ----------------------------------------------------------------------------------------------- quantisation
FP8 = {"e4m3": (3, 448.0, -6, 9), "e5m2": (2, 57344.0, -14, 16)}  # mantissa bits, max, min normal exp, sub step


@tw.jit(out_idx=[-1])
def fp8_emulate(M, N, dt, fmt, form, bm=BM):
    """FP8 fake quantisation (Transformer Engine's recipe emulated): v = x / scale saturated to +-max, rounded to
    the format's grid: normal values to mbits + 1 significant bits by Veltkamp's split (t = v * (2^s + 1),
    hi = t - (t - v)), subnormals to the fixed step by the 1.5 * 2^23 trick (`split`); or (`ladder`) the grid's
    step of v's binade from a table Lad (2, NB) of binade thresholds and steps (a serial loop of T.where over
    the binades, the entries scalar reads), v rounded to a multiple of it by the 1.5 * 2^23 trick; then times the
    scale."""
    mb, fmax, emin, sub = FP8[fmt]
    cst = float(2 ** (23 - mb) + 1)
    nb = int(math.log2(fmax)) - emin

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), S: T.Tensor((1,), "float32"), Lad: T.Tensor((2, nb), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            sc = S[0]
            T.copy(X[bx * bm, 0], x)
            if form == "ladder":
                st = T.alloc_fragment((bm, N), "float32")
                T.fill(st, 2.0 ** -sub)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.min(T.max(x[i, j] / sc, -fmax), fmax)
                for e in T.serial(nb):
                    for i, j in T.Parallel(bm, N):
                        st[i, j] = T.where(T.abs(x[i, j]) >= Lad[0, e], Lad[1, e], st[i, j])
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (((x[i, j] / st[i, j] + MAGIC) - MAGIC) * st[i, j]) * sc
            else:
                for i, j in T.Parallel(bm, N):
                    v = T.min(T.max(x[i, j] / sc, -fmax), fmax)
                    t = v * cst
                    hi = t - (t - v)
                    lo = ((v * (2.0 ** sub) + MAGIC) - MAGIC) * (2.0 ** -sub)
                    y[i, j] = T.where(T.abs(v) < 2.0 ** emin, lo, hi) * sc
            T.copy(y, Y[bx * bm, 0])

    return main


def _fp8(fmt, form):
    def make(dt, shape, rng):
        import ml_dtypes
        M, N = shape
        x = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-12, 10, (M, N)))).astype(npdt(dt))
        sc = np.array([0.75 if fmt == "e4m3" else 0.5], np.float32)
        v = np.clip(f64(x).astype(np.float32) / sc[0], -FP8[fmt][1], FP8[fmt][1])
        q = v.astype(ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2)
        mb, fmax, emin, sub = FP8[fmt]
        e = np.arange(emin + 1, int(math.log2(fmax)) + 1)
        lad = np.stack([np.exp2(e), np.exp2(e - mb)]).astype(np.float32)
        return fp8_emulate, (M, N, dt, fmt, form), [x, sc, lad], [(q.astype(np.float32) * sc[0]).astype(np.float64)]
    return make


@tw.jit(out_idx=[-1])
def int4_u8(K, N, G, dt, form):
    """AWQ-style 4-bit weights packed two per byte along N (uint8 Q (K, N / 2): column 2c in the low nibble, 2c + 1
    in the high), zero points packed the same way per group of G rows, scales (K / G, N): w = (q - z) * s.
    `shift` unpacks with (q >> 4 * (j % 2)) & 15; `divmod` with q // 16 and q % 16; `copy` the shift form on int32
    tiles the bytes are copied into (the hint of the others' error on ascend910b)."""
    @T.prim_func
    def main(Q: T.Tensor((K, N // 2), "uint8"), Zp: T.Tensor((K // G, N // 2), "uint8"),
             S: T.Tensor((K // G, N), dt), W: T.Tensor((K, N), dt)):
        with T.Kernel(K // G) as g:
            q = T.alloc_fragment((G, N // 2), "int32" if form == "copy" else "uint8")
            z = T.alloc_fragment((N // 2,), "int32" if form == "copy" else "uint8")
            s = T.alloc_fragment((N,), "float32")
            w = T.alloc_fragment((G, N), dt)
            T.copy(Q[g * G, 0], q)
            T.copy(Zp[g, :], z)
            T.copy(S[g, :], s)
            for i, j in T.Parallel(G, N):
                if form in ("shift", "copy"):
                    w[i, j] = T.cast(((q[i, j // 2] >> (4 * (j % 2))) & 15) - ((z[j // 2] >> (4 * (j % 2))) & 15),
                                     "float32") * s[j]
                else:
                    w[i, j] = T.cast(T.where(j % 2 == 0, q[i, j // 2] % 16, q[i, j // 2] // 16)
                                     - T.where(j % 2 == 0, z[j // 2] % 16, z[j // 2] // 16), "float32") * s[j]
            T.copy(w, W[g * G, 0])

    return main


def _int4_u8(form):
    def make(dt, shape, rng):
        K, N, G = shape
        nib = rng.integers(0, 16, (K, N))
        zn = rng.integers(0, 16, (K // G, N))
        q = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
        zp = (zn[:, 0::2] | (zn[:, 1::2] << 4)).astype(np.uint8)
        s = (0.01 + rng.random((K // G, N)) * 0.05).astype(npdt(dt))
        ref = (nib - np.repeat(zn, G, 0)) * np.repeat(f64(s), G, 0)
        return int4_u8, (K, N, G, dt, form), [q, zp, s], [ref]
    return make


@tw.jit(out_idx=[-1])
def group_int8_gemm(M, N, K, G, form, bm=16, bn=32):
    """Per-group int8 gemm (W8A8 with a scale per group of G along K on both sides): each group's int32 product
    from its own gemm, scaled by sa[m, g] * sb[g, n] into a float32 accumulator. `kn`: B as (K, N); `nk`: as
    (N, K) with transpose_B (the hint of kn's error), sa's column gathered into a 1-D tile per group (the hint of
    the next)."""
    bshape = (K, N) if form == "kn" else (N, K)

    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor(bshape, "int8"), Sa: T.Tensor((M, K // G), "float32"),
             Sb: T.Tensor((K // G, N), "float32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, G), "int8")
            b = T.alloc_shared((G, bn) if form == "kn" else (bn, G), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            out = T.alloc_fragment((bm, bn), "float32")
            sa = T.alloc_fragment((bm, K // G), "float32")
            sav = T.alloc_fragment((bm,), "float32")
            sb = T.alloc_fragment((K // G, bn), "float32")
            c = T.alloc_fragment((bm, bn), "float16")
            T.copy(Sa[by * bm, 0], sa)
            T.copy(Sb[0, bx * bn], sb)
            T.clear(out)
            for g in T.serial(K // G):
                T.copy(A[by * bm, g * G], a)
                T.clear(acc)
                if form == "kn":
                    T.copy(B[g * G, bx * bn], b)
                    T.gemm(a, b, acc)
                else:
                    T.copy(B[bx * bn, g * G], b)
                    T.gemm(a, b, acc, transpose_B=True)
                if form == "kn":
                    for i, j in T.Parallel(bm, bn):
                        out[i, j] = out[i, j] + acc[i, j] * sa[i, g] * sb[g, j]
                else:  # the hint of sa[i, g]'s error: the column gathered into a 1-D tile first
                    for i in T.Parallel(bm):
                        sav[i] = sa[i, g]
                    for i, j in T.Parallel(bm, bn):
                        out[i, j] = out[i, j] + acc[i, j] * sav[i] * sb[g, j]
            T.copy(out, c)
            T.copy(c, C[by * bm, bx * bn])

    return main


def _gi8(form):
    return lambda dt, shape, rng: _gi8_make(dt, shape, rng, form)


def _gi8_make(dt, shape, rng, form):
    M, N, K, G = shape
    a = rng.integers(-127, 128, (M, K)).astype(np.int8)
    b = rng.integers(-127, 128, (K, N)).astype(np.int8)
    sa = (rng.random((M, K // G)) * 0.01).astype(np.float32)
    sb = (rng.random((K // G, N)) * 0.01).astype(np.float32)
    ref = sum((a[:, g * G:(g + 1) * G].astype(np.int64) @ b[g * G:(g + 1) * G].astype(np.int64)) * f64(sa)[:, g:g + 1]
              * f64(sb)[g][None, :] for g in range(K // G))
    return group_int8_gemm, (M, N, K, G, form), [a, b if form == "kn" else np.ascontiguousarray(b.T), sa, sb], [ref]


@tw.jit(out_idx=[-1])
def nf4_dequant(M, N, Bz, dt, form, bm=BM):
    """QLoRA's NF4 dequantisation of unpacked codes (M, N) uint8: w = code[q] * absmax[block of Bz along N];
    `gather` reads the 16-entry codebook tile at the code, `select` a serial loop over the 16 codes with a
    T.where per code (the codebook entry a scalar read)."""
    @T.prim_func
    def main(Q: T.Tensor((M, N), "uint8"), Code: T.Tensor((16,), "float32"), Am: T.Tensor((M, N // Bz), "float32"),
             W: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            q = T.alloc_fragment((bm, N), "uint8")
            code = T.alloc_fragment((16,), "float32")
            am = T.alloc_fragment((bm, N // Bz), "float32")
            v = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((bm, N), dt)
            T.copy(Q[bx * bm, 0], q)
            T.copy(Code, code)
            T.copy(Am[bx * bm, 0], am)
            if form == "gather":
                for i, j in T.Parallel(bm, N):
                    w[i, j] = code[q[i, j]] * am[i, j // Bz]
            else:
                T.clear(v)
                for k in T.serial(16):
                    for i, j in T.Parallel(bm, N):
                        v[i, j] = T.where(q[i, j] == k, Code[k], v[i, j])
                for i, j in T.Parallel(bm, N):
                    w[i, j] = v[i, j] * am[i, j // Bz]
            T.copy(w, W[bx * bm, 0])

    return main


NF4 = [-1.0, -0.6961928, -0.5250731, -0.3949175, -0.2844414, -0.1847734, -0.0910500, 0.0, 0.0795803, 0.1609302,
       0.2461123, 0.3379152, 0.4407098, 0.5626170, 0.7229568, 1.0]


def _nf4(form):
    def make(dt, shape, rng):
        M, N, Bz = shape
        q = rng.integers(0, 16, (M, N)).astype(np.uint8)
        code = np.array(NF4, np.float32)
        am = (0.1 + rng.random((M, N // Bz))).astype(np.float32)
        ref = f64(code)[q] * np.repeat(f64(am), Bz, 1)
        return nf4_dequant, (M, N, Bz, dt, form), [q, code, am], [ref]
    return make


@tw.jit(out_idx=[-2, -1])
def smoothquant(M, N, dt, bm=BM):
    """SmoothQuant's activation side: x / smooth[j], then dynamic per-token symmetric int8 (scale = absmax / 127,
    q = round-half-even(x / scale) by the 1.5 * 2^23 trick, clamped)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Sm: T.Tensor((N,), "float32"), Q: T.Tensor((M, N), "int8"),
             Sc: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            a = T.alloc_fragment((bm, N), "float32")
            sm = T.alloc_fragment((N,), "float32")
            amax = T.alloc_fragment((bm,), "float32")
            q = T.alloc_fragment((bm, N), "int8")
            T.copy(X[bx * bm, 0], x)
            T.copy(Sm, sm)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / sm[j]
                a[i, j] = T.abs(x[i, j])
            T.reduce_max(a, amax, dim=1)
            for i in T.Parallel(bm):
                amax[i] = T.max(amax[i], 1e-8) / 127.0
            for i, j in T.Parallel(bm, N):
                q[i, j] = T.cast(T.min(T.max((x[i, j] / amax[i] + MAGIC) - MAGIC, -127.0), 127.0), "int8")
            T.copy(q, Q[bx * bm, 0])
            T.copy(amax, Sc[bx * bm])

    return main


def _smoothquant(dt, shape, rng):
    M, N = shape
    x = randn(rng, (M, N), dt)
    sm = (0.5 + rng.random(N)).astype(np.float32)
    xs = x.astype(np.float32) / sm  # float32 as the kernel: every step one correctly rounded operation
    sc = np.maximum(np.abs(xs).max(1), np.float32(1e-8)) / np.float32(127)
    q = np.clip(np.round(xs / sc[:, None]), -127, 127)
    return smoothquant, (M, N, dt), [x, sm], [q, f64(sc)]


# ----------------------------------------------------------------------------------------------- optimizers
@tw.jit
def lion_step(M, N, dt, lr=1e-2, b1=0.9, b2=0.99, wd=0.1, bm=BM):
    """Lion (Chen et al.): update = sign(b1 * m + (1 - b1) * g); p = p * (1 - lr * wd) - lr * update;
    m = b2 * m + (1 - b2) * g; p (dt) and m (float32) in place."""
    @T.prim_func
    def main(P: T.Tensor((M, N), dt), Mo: T.Tensor((M, N), "float32"), G: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            p = T.alloc_fragment((bm, N), "float32")
            m = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((bm, N), "float32")
            po = T.alloc_fragment((bm, N), dt)
            T.copy(P[bx * bm, 0], p)
            T.copy(Mo[bx * bm, 0], m)
            T.copy(G[bx * bm, 0], g)
            for i, j in T.Parallel(bm, N):
                c = b1 * m[i, j] + (1.0 - b1) * g[i, j]
                po[i, j] = p[i, j] * (1.0 - lr * wd) - lr * T.where(c > 0, 1.0, T.where(c < 0, -1.0, 0.0))
                m[i, j] = b2 * m[i, j] + (1.0 - b2) * g[i, j]
            T.copy(po, P[bx * bm, 0])
            T.copy(m, Mo[bx * bm, 0])

    return main


def _lion(dt, shape, rng):
    M, N = shape
    p, g = randn(rng, (M, N), dt), randn(rng, (M, N), dt)
    m = rng.standard_normal((M, N)).astype(np.float32)
    m.flat[::5] = 0
    g.flat[::5] = 0
    c = 0.9 * f64(m) + 0.1 * f64(g)
    return lion_step, (M, N, dt), [p, m, g], [f64(p) * (1 - 1e-3) - 1e-2 * np.sign(c), 0.99 * f64(m) + 0.01 * f64(g)], \
        {"inplace": (0, 1)}


@tw.jit(out_idx=[-1])
def adafactor(R, C, b2=0.8, eps=1e-30, d=1.0):
    """Adafactor's factored second moment of a (R, C) gradient, one block: row and column means of g^2 + eps
    folded into the running r (R,) and c (C,) in place; u = g / sqrt(r_i * c_j / mean(r)), then clipped to RMS d
    (u / max(1, rms(u) / d))."""
    @T.prim_func
    def main(G: T.Tensor((R, C), "float32"), Vr: T.Tensor((R,), "float32"), Vc: T.Tensor((C,), "float32"),
             U: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            g = T.alloc_fragment((R, C), "float32")
            sq = T.alloc_fragment((R, C), "float32")
            r = T.alloc_fragment((R,), "float32")
            c = T.alloc_fragment((C,), "float32")
            rs = T.alloc_fragment((R,), "float32")
            cs = T.alloc_fragment((C,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.copy(G, g)
            T.copy(Vr, r)
            T.copy(Vc, c)
            for i, j in T.Parallel(R, C):
                sq[i, j] = g[i, j] * g[i, j] + eps
            T.reduce_sum(sq, rs, dim=1)
            T.reduce_sum(sq, cs, dim=0)
            for i in T.Parallel(R):
                r[i] = b2 * r[i] + (1.0 - b2) * rs[i] / C
            for j in T.Parallel(C):
                c[j] = b2 * c[j] + (1.0 - b2) * cs[j] / R
            T.reduce_sum(r, tot, dim=0)
            for i, j in T.Parallel(R, C):
                g[i, j] = g[i, j] * T.rsqrt(r[i] * c[j] / (tot[0] / R))
                sq[i, j] = g[i, j] * g[i, j]
            T.reduce_sum(sq, rs, dim=1)
            T.reduce_sum(rs, tot, dim=0)
            for i, j in T.Parallel(R, C):
                g[i, j] = g[i, j] / T.max(T.sqrt(tot[0] / (R * C)) / d, 1.0)
            T.copy(g, U)
            T.copy(r, Vr)
            T.copy(c, Vc)

    return main


def _adafactor(dt, shape, rng):
    R, C = shape
    g = rng.standard_normal((R, C)).astype(np.float32)
    vr, vc = rng.random(R).astype(np.float32), rng.random(C).astype(np.float32)
    sq = f64(g) ** 2 + 1e-30
    r = 0.8 * f64(vr) + 0.2 * sq.mean(1)
    c = 0.8 * f64(vc) + 0.2 * sq.mean(0)
    u = f64(g) / np.sqrt(r[:, None] * c[None, :] / r.mean())
    u = u / max(np.sqrt((u * u).mean()), 1.0)
    return adafactor, (R, C), [g, vr, vc], [u, r, c], {"inplace": (1, 2)}


@tw.jit
def opt2(M, N, form, lr=1e-2, a=0.9, eps=1e-8, bm=BM):
    """`rmsprop`: v = a v + (1 - a) g^2, p -= lr g / (sqrt(v) + eps); `adagrad`: s += g^2, p -= lr g / (sqrt(s) +
    eps); float32 p and state in place."""
    @T.prim_func
    def main(P: T.Tensor((M, N), "float32"), V: T.Tensor((M, N), "float32"), G: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            p = T.alloc_fragment((bm, N), "float32")
            v = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((bm, N), "float32")
            T.copy(P[bx * bm, 0], p)
            T.copy(V[bx * bm, 0], v)
            T.copy(G[bx * bm, 0], g)
            for i, j in T.Parallel(bm, N):
                if form == "rmsprop":
                    v[i, j] = a * v[i, j] + (1.0 - a) * g[i, j] * g[i, j]
                else:
                    v[i, j] = v[i, j] + g[i, j] * g[i, j]
                p[i, j] = p[i, j] - lr * g[i, j] / (T.sqrt(v[i, j]) + eps)
            T.copy(p, P[bx * bm, 0])
            T.copy(v, V[bx * bm, 0])

    return main


def _opt2(form):
    def make(dt, shape, rng):
        M, N = shape
        p, g = randn(rng, (M, N), "float32"), randn(rng, (M, N), "float32")
        v = rng.random((M, N)).astype(np.float32)
        v2 = 0.9 * f64(v) + 0.1 * f64(g) ** 2 if form == "rmsprop" else f64(v) + f64(g) ** 2
        return opt2, (M, N, form), [p, v, g], [f64(p) - 1e-2 * f64(g) / (np.sqrt(v2) + 1e-8), v2], {"inplace": (0, 1)}
    return make


# ----------------------------------------------------------------------------------------------- losses
@tw.jit(out_idx=[-1])
def infonce(B, D, dt, tau=0.07, bb=16):
    """InfoNCE / CLIP's one-directional contrastive loss: logits = Q K^T / tau (a gemm over one (16, D) block, the
    B <= 16 rows a tail), per row logsumexp over the B keys minus the diagonal (the positive pair)."""
    @T.prim_func
    def main(Q: T.Tensor((B, D), dt), K: T.Tensor((B, D), dt), L: T.Tensor((B,), "float32")):
        with T.Kernel(1) as bx:
            q = T.alloc_shared((bb, D), dt)
            k = T.alloc_shared((bb, D), dt)
            s = T.alloc_fragment((bb, bb), "float32")
            dg = T.alloc_fragment((bb, bb), "float32")
            mx = T.alloc_fragment((bb,), "float32")
            sm = T.alloc_fragment((bb,), "float32")
            pos = T.alloc_fragment((bb,), "float32")
            T.copy(Q[0, 0], q)
            T.copy(K[0, 0], k)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            for i, j in T.Parallel(bb, bb):
                s[i, j] = T.where(j < B, s[i, j] / tau, NEG)
                dg[i, j] = T.where(i == j, s[i, j], 0.0)
            T.reduce_sum(dg, pos, dim=1)
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(bb, bb):
                s[i, j] = T.exp(s[i, j] - mx[i])
            T.reduce_sum(s, sm, dim=1)
            for i in T.Parallel(bb):
                pos[i] = mx[i] + T.log(sm[i]) - pos[i]
            T.copy(pos, L[0])

    return main


def _infonce(dt, shape, rng):
    B, D = shape
    q, k = randn(rng, (B, D), dt, 0.3), randn(rng, (B, D), dt, 0.3)
    s = f64(q) @ f64(k).T / 0.07
    m = s.max(1, keepdims=True)
    ref = (m[:, 0] + np.log(np.exp(s - m).sum(1))) - np.diag(s)
    return infonce, (B, D, dt), [q, k], [ref], {"tol": (2e-4 * D, 1e-4)}


@tw.jit(out_idx=[-1])
def loss_rows(M, N, dt, form, bm=BM, margin=1.0):
    """Per-row losses, float32 (M,) out: `triplet` torch's triplet_margin_loss (pairwise_distance with eps 1e-6,
    margin 1, reduction none) of anchors X, positives P, negatives Q; `dice` 1 - (2 sum(p t) + 1) / (sum p + sum t
    + 1), p = sigmoid(X), targets P; `multi_margin` torch's multi_margin_loss: sum_{j != y} max(0, 1 - x[y] +
    x[j]) / N with int32 labels Y."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), P: T.Tensor((M, N), dt), Q: T.Tensor((M, N), dt), Y: T.Tensor((M,), "int32"),
             L: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            q = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm,), "int32")
            a = T.alloc_fragment((bm,), "float32")
            b = T.alloc_fragment((bm,), "float32")
            c = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(P[bx * bm, 0], p)
            T.copy(Q[bx * bm, 0], q)
            T.copy(Y[bx * bm], y)
            if form == "triplet":
                for i, j in T.Parallel(bm, N):
                    p[i, j] = (x[i, j] - p[i, j] + 1e-6) * (x[i, j] - p[i, j] + 1e-6)
                    q[i, j] = (x[i, j] - q[i, j] + 1e-6) * (x[i, j] - q[i, j] + 1e-6)
                T.reduce_sum(p, a, dim=1)
                T.reduce_sum(q, b, dim=1)
                for i in T.Parallel(bm):
                    l[i] = T.max(T.sqrt(a[i]) - T.sqrt(b[i]) + margin, 0.0)
            elif form == "dice":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.sigmoid(x[i, j])
                    q[i, j] = x[i, j] * p[i, j]
                T.reduce_sum(q, a, dim=1)
                T.reduce_sum(x, b, dim=1)
                T.reduce_sum(p, c, dim=1)
                for i in T.Parallel(bm):
                    l[i] = 1.0 - (2.0 * a[i] + 1.0) / (b[i] + c[i] + 1.0)
            else:
                for i, j in T.Parallel(bm, N):
                    q[i, j] = T.where(j == y[i], x[i, j], 0.0)
                T.reduce_sum(q, a, dim=1)
                for i, j in T.Parallel(bm, N):
                    q[i, j] = T.where(j == y[i], 0.0, T.max(1.0 - a[i] + x[i, j], 0.0))
                T.reduce_sum(q, b, dim=1)
                for i in T.Parallel(bm):
                    l[i] = b[i] / N
            T.copy(l, L[bx * bm])

    return main


def _loss_rows(form):
    def make(dt, shape, rng):
        M, N = shape
        x, p, q = randn(rng, (M, N), dt), randn(rng, (M, N), dt), randn(rng, (M, N), dt)
        y = rng.integers(0, N, M).astype(np.int32)
        X, Pp, Q = f64(x), f64(p), f64(q)
        if form == "triplet":
            ref = np.maximum(np.linalg.norm(X - Pp + 1e-6, axis=1) - np.linalg.norm(X - Q + 1e-6, axis=1) + 1, 0)
        elif form == "dice":
            p = (rng.random((M, N)) < 0.4).astype(npdt(dt))
            s = _sigm(X)
            ref = 1 - (2 * (s * f64(p)).sum(1) + 1) / (s.sum(1) + f64(p).sum(1) + 1)
        else:
            xy = X[np.arange(M), y][:, None]
            h = np.maximum(1 - xy + X, 0)
            h[np.arange(M), y] = 0
            ref = h.sum(1) / N
        return loss_rows, (M, N, dt, form), [x, p, q, y], [ref], {"tol": (1e-5 * N, 1e-4)}
    return make


# ----------------------------------------------------------------------------------------------- signal / vision
@tw.jit(out_idx=[-1])
def conv1d_dil(B, C, L, dt, form, d=2):
    """Depthwise conv1d, 3 taps at dilation d, 'same' zero padding d: the row padded in a cleared tile, then
    y[c, t] = sum_k w[c, k] * xp[c, t + k d]. `taps` reads the weight tile w[c, k] by constant column; `cols`
    copies each tap's weights into a 1-D tile first."""
    @T.prim_func
    def main(X: T.Tensor((B, C, L), dt), Wt: T.Tensor((C, 3), "float32"), Y: T.Tensor((B, C, L), dt)):
        with T.Kernel(B) as b:
            xp = T.alloc_fragment((C, L + 2 * d), "float32")
            w = T.alloc_fragment((C, 3), "float32")
            w0 = T.alloc_fragment((C,), "float32")
            w1 = T.alloc_fragment((C,), "float32")
            w2 = T.alloc_fragment((C,), "float32")
            y = T.alloc_fragment((C, L), dt)
            T.copy(Wt, w)
            if form != "gm":
                T.clear(xp)
                T.copy(X[b, :, :], xp[:, d:d + L])
            if form == "gm":  # the hint: a tile per tap, copied from a window of X starting before / past it
                xa = T.alloc_fragment((C, L), "float32")
                xb = T.alloc_fragment((C, L), "float32")
                xc = T.alloc_fragment((C, L), "float32")
                T.copy(X[b, 0, -d], xa)
                T.copy(X[b, 0, 0], xb)
                T.copy(X[b, 0, d], xc)
                for c in T.Parallel(C):
                    w0[c] = w[c, 0]
                    w1[c] = w[c, 1]
                    w2[c] = w[c, 2]
                for c, t in T.Parallel(C, L):
                    y[c, t] = w0[c] * xa[c, t] + w1[c] * xb[c, t] + w2[c] * xc[c, t]
            elif form == "taps":
                for c, t in T.Parallel(C, L):
                    y[c, t] = w[c, 0] * xp[c, t] + w[c, 1] * xp[c, t + d] + w[c, 2] * xp[c, t + 2 * d]
            else:
                for c in T.Parallel(C):
                    w0[c] = w[c, 0]
                    w1[c] = w[c, 1]
                    w2[c] = w[c, 2]
                for c, t in T.Parallel(C, L):
                    y[c, t] = w0[c] * xp[c, t] + w1[c] * xp[c, t + d] + w2[c] * xp[c, t + 2 * d]
            T.copy(y, Y[b, :, :])

    return main


def _conv1d_dil(form):
    def make(dt, shape, rng):
        B, C, L = shape
        x = randn(rng, (B, C, L), dt)
        w = rng.standard_normal((C, 3)).astype(np.float32)
        xp = np.pad(f64(x), ((0, 0), (0, 0), (2, 2)))
        ref = sum(f64(w)[None, :, k:k + 1] * xp[:, :, 2 * k:2 * k + L] for k in range(3))
        return conv1d_dil, (B, C, L, dt, form), [x, w], [ref]
    return make


@tw.jit(out_idx=[-1])
def max_unpool1d(M, N, dt, bm=BM):
    """torch.nn.MaxUnpool1d(2): out[i, idx[i, j]] = x[i, j] (idx in {2j, 2j + 1}), zeros elsewhere, written as a
    gather over the output: out[i, o] = x[i, o // 2] where idx[i, o // 2] == o."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Ix: T.Tensor((M, N), "int32"), Y: T.Tensor((M, 2 * N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            ix = T.alloc_fragment((bm, N), "int32")
            y = T.alloc_fragment((bm, 2 * N), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Ix[bx * bm, 0], ix)
            for i, o in T.Parallel(bm, 2 * N):
                y[i, o] = T.where(ix[i, o // 2] == o, x[i, o // 2], 0.0)
            T.copy(y, Y[bx * bm, 0])

    return main


def _unpool(dt, shape, rng):
    M, N = shape
    x = randn(rng, (M, N), dt)
    ix = (2 * np.arange(N)[None, :] + rng.integers(0, 2, (M, N))).astype(np.int32)
    ref = np.zeros((M, 2 * N))
    np.put_along_axis(ref, ix.astype(np.int64), f64(x), 1)
    return max_unpool1d, (M, N, dt), [x, ix], [ref]


@tw.jit(out_idx=[-1])
def unpool_rows(M, N, dt, bm=BM):
    """MaxUnpool1d(2) by the two phases: the even outputs y[i, 2j] and the odd y[i, 2j + 1] from x[i, j], each a
    strided store into a (bm, N, 2) tile."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Ix: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N, 2), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            ix = T.alloc_fragment((bm, N), "int32")
            y = T.alloc_fragment((bm, N, 2), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Ix[bx * bm, 0], ix)
            for i, j, r in T.Parallel(bm, N, 2):
                y[i, j, r] = T.where(ix[i, j] == 2 * j + r, x[i, j], 0.0)
            T.copy(y, Y[bx * bm, 0, 0])

    return main


def _unpool_rows(dt, shape, rng):
    fac, args, inputs, refs = _unpool(dt, shape, rng)
    return unpool_rows, args, inputs, [refs[0].reshape(shape[0], shape[1], 2)]


@tw.jit(out_idx=[-1])
def sobel(H, W, dt, form, bm=BM):
    """Sobel gradient magnitude sqrt(gx^2 + gy^2) of a (H, W) image over its valid (H - 2, W - 2) region: bm + 2
    rows per block (a halo of 2), the 3x3 taps as shifted reads of the tile (`shift`), or (`copies`, the hint)
    the three column shifts as tiles of their own copied from X at columns 0, 1, 2, rows shifted in the map."""
    @T.prim_func
    def main(X: T.Tensor((H, W), dt), Y: T.Tensor((H - 2, W - 2), "float32")):
        with T.Kernel(T.ceildiv(H - 2, bm)) as bx:
            x = T.alloc_fragment((bm + 2, W), "float32")
            x0 = T.alloc_fragment((bm + 2, W - 2), "float32")
            x1 = T.alloc_fragment((bm + 2, W - 2), "float32")
            x2 = T.alloc_fragment((bm + 2, W - 2), "float32")
            y = T.alloc_fragment((bm, W - 2), "float32")
            if form == "copies":
                T.copy(X[bx * bm, 0], x0)
                T.copy(X[bx * bm, 1], x1)
                T.copy(X[bx * bm, 2], x2)
                for i, j in T.Parallel(bm, W - 2):
                    gx = (x2[i, j] + 2.0 * x2[i + 1, j] + x2[i + 2, j]) - (x0[i, j] + 2.0 * x0[i + 1, j] + x0[i + 2, j])
                    gy = (x0[i + 2, j] + 2.0 * x1[i + 2, j] + x2[i + 2, j]) - (x0[i, j] + 2.0 * x1[i, j] + x2[i, j])
                    y[i, j] = T.sqrt(gx * gx + gy * gy)
            else:
                T.copy(X[bx * bm, 0], x)
                for i, j in T.Parallel(bm, W - 2):
                    gx = ((x[i, j + 2] + 2.0 * x[i + 1, j + 2] + x[i + 2, j + 2])
                          - (x[i, j] + 2.0 * x[i + 1, j] + x[i + 2, j]))
                    gy = ((x[i + 2, j] + 2.0 * x[i + 2, j + 1] + x[i + 2, j + 2])
                          - (x[i, j] + 2.0 * x[i, j + 1] + x[i, j + 2]))
                    y[i, j] = T.sqrt(gx * gx + gy * gy)
            T.copy(y, Y[bx * bm, 0])

    return main


def _sobel(form):
    return lambda dt, shape, rng: _sobel_make(dt, shape, rng, form)


def _sobel_make(dt, shape, rng, form):
    H, W = shape
    x = randn(rng, (H, W), dt)
    X = f64(x)
    s = lambda a, b: X[a:H - 2 + a, b:W - 2 + b]  # noqa: E731
    gx = (s(0, 2) + 2 * s(1, 2) + s(2, 2)) - (s(0, 0) + 2 * s(1, 0) + s(2, 0))
    gy = (s(2, 0) + 2 * s(2, 1) + s(2, 2)) - (s(0, 0) + 2 * s(0, 1) + s(0, 2))
    return sobel, (H, W, dt, form), [x], [np.sqrt(gx * gx + gy * gy)]


@tw.jit(out_idx=[-1])
def pixel_shuffle(C, H, W, dt, form, r=2):
    """torch.nn.PixelShuffle(2) of (C * 4, H, W) to (C, 2H, 2W): per (c, h) the 4 input rows to 2 output rows,
    y[a, o] = x[a * r + o % r, o // r] (`map`); `rows` (the hint): the output rows a serial loop, each a T.where of
    the two input rows 2a, 2a + 1 read at o // 2."""
    @T.prim_func
    def main(X: T.Tensor((C * r * r, H, W), dt), Y: T.Tensor((C, H * r, W * r), dt)):
        with T.Kernel(H, C) as (h, c):
            x = T.alloc_fragment((r * r, W), dt)
            y = T.alloc_fragment((r, W * r), dt)
            T.copy(X[c * r * r:(c + 1) * r * r, h, :], x)
            if form == "map":
                for a, o in T.Parallel(r, W * r):
                    y[a, o] = x[a * r + o % r, o // r]
            else:
                for a in T.serial(r):
                    for o in T.Parallel(W * r):
                        y[a, o] = T.where(o % 2 == 0, x[a * r, o // r], x[a * r + 1, o // r])
            T.copy(y, Y[c, h * r:(h + 1) * r, :])

    return main


def _pshuf(form):
    return lambda dt, shape, rng: _pshuf_make(dt, shape, rng, form)


def _pshuf_make(dt, shape, rng, form):
    C, H, W = shape
    x = randn(rng, (C * 4, H, W), dt)
    ref = f64(x).reshape(C, 2, 2, H, W).transpose(0, 3, 1, 4, 2).reshape(C, H * 2, W * 2)
    return pixel_shuffle, (C, H, W, dt, form), [x], [ref]


@tw.jit(out_idx=[-1])
def frames(B, L, NF, NFFT, HOP, dt, form):
    """STFT framing and its inverse: `frame` frames[b, f, :] = x[b, f * hop:f * hop + nfft] * win (a copy per
    frame into a row of a (NF, NFFT) tile); `ola` overlap-add y[b, f * hop + k] += fr[b, f, k] * win[k] into a
    (L,) tile, a serial loop over frames."""
    ishape = (B, L) if form == "frame" else (B, NF, NFFT)
    oshape = (B, NF, NFFT) if form == "frame" else (B, L)

    @T.prim_func
    def main(X: T.Tensor(ishape, dt), Wn: T.Tensor((NFFT,), "float32"), Y: T.Tensor(oshape, "float32")):
        with T.Kernel(B) as b:
            fr = T.alloc_fragment((NF, NFFT), "float32")
            w = T.alloc_fragment((NFFT,), "float32")
            y = T.alloc_fragment((L,), "float32")
            T.copy(Wn, w)
            if form == "frame":
                for f in T.serial(NF):
                    T.copy(X[b, f * HOP:f * HOP + NFFT], fr[f, :])
                for f, k in T.Parallel(NF, NFFT):
                    fr[f, k] = fr[f, k] * w[k]
                T.copy(fr, Y[b, :, :])
            else:
                T.copy(X[b, :, :], fr)
                T.clear(y)
                for f in T.serial(NF):
                    for k in T.Parallel(NFFT):
                        y[f * HOP + k] = y[f * HOP + k] + fr[f, k] * w[k]
                T.copy(y, Y[b, :])

    return main


def _frames(form):
    def make(dt, shape, rng):
        B, NF, NFFT, HOP = shape
        L = (NF - 1) * HOP + NFFT
        w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(NFFT) / NFFT)).astype(np.float32)
        if form == "frame":
            x = randn(rng, (B, L), dt)
            ref = np.stack([f64(x)[:, f * HOP:f * HOP + NFFT] for f in range(NF)], 1) * f64(w)
        else:
            x = randn(rng, (B, NF, NFFT), dt)
            ref = np.zeros((B, L))
            for f in range(NF):
                ref[:, f * HOP:f * HOP + NFFT] += f64(x)[:, f] * f64(w)
        return frames, (B, L, NF, NFFT, HOP, dt, form), [x, w], [ref]
    return make


@tw.jit(out_idx=[-1])
def roi_align(H, W, C, R, P, dt):
    """RoIAlign (aligned=True, one sample per bin) on an NHWC feature map: per RoI (y0, x0, y1, x1) and bin (p, q)
    the sample point's 4 bilinear taps, each a row of C channels copied from F[y, x, :] at scalar indices computed
    from the RoI, the weights scalar float math."""
    @T.prim_func
    def main(F: T.Tensor((H, W, C), dt), Rois: T.Tensor((R, 4), "float32"), Y: T.Tensor((R, P, P, C), "float32")):
        with T.Kernel(R) as r:
            t00 = T.alloc_fragment((C,), "float32")
            t01 = T.alloc_fragment((C,), "float32")
            t10 = T.alloc_fragment((C,), "float32")
            t11 = T.alloc_fragment((C,), "float32")
            o = T.alloc_fragment((C,), "float32")
            for p in T.serial(P):
                for q in T.serial(P):
                    yy = T.min(T.max(Rois[r, 0] + (p + 0.5) * (Rois[r, 2] - Rois[r, 0]) / P - 0.5, 0.0), H - 1.0)
                    xx = T.min(T.max(Rois[r, 1] + (q + 0.5) * (Rois[r, 3] - Rois[r, 1]) / P - 0.5, 0.0), W - 1.0)
                    y0 = T.cast(T.floor(yy), "int32")
                    x0 = T.cast(T.floor(xx), "int32")
                    y1 = T.min(y0 + 1, H - 1)
                    x1 = T.min(x0 + 1, W - 1)
                    ly = yy - y0
                    lx = xx - x0
                    T.copy(F[y0, x0, :], t00)
                    T.copy(F[y0, x1, :], t01)
                    T.copy(F[y1, x0, :], t10)
                    T.copy(F[y1, x1, :], t11)
                    for c in T.Parallel(C):
                        o[c] = ((1.0 - ly) * ((1.0 - lx) * t00[c] + lx * t01[c])
                                + ly * ((1.0 - lx) * t10[c] + lx * t11[c]))
                    T.copy(o, Y[r, p, q, :])

    return main


def _roi(dt, shape, rng):
    H, W, C, R, P = shape
    f = randn(rng, (H, W, C), dt)
    y0, x0 = rng.random(R) * (H - 1), rng.random(R) * (W - 1)
    rois = np.stack([y0, x0, y0 + rng.random(R) * (H - y0), x0 + rng.random(R) * (W - x0)], 1).astype(np.float32)
    F, Rr = f64(f), f64(rois)
    ref = np.zeros((R, P, P, C))
    for r in range(R):
        for p in range(P):
            for q in range(P):
                yy = min(max(Rr[r, 0] + (p + 0.5) * (Rr[r, 2] - Rr[r, 0]) / P - 0.5, 0), H - 1)
                xx = min(max(Rr[r, 1] + (q + 0.5) * (Rr[r, 3] - Rr[r, 1]) / P - 0.5, 0), W - 1)
                a, b = int(np.floor(yy)), int(np.floor(xx))
                a1, b1 = min(a + 1, H - 1), min(b + 1, W - 1)
                ly, lx = yy - a, xx - b
                ref[r, p, q] = ((1 - ly) * ((1 - lx) * F[a, b] + lx * F[a, b1])
                                + ly * ((1 - lx) * F[a1, b] + lx * F[a1, b1]))
    return roi_align, (H, W, C, R, P, dt), [f, rois], [ref], {"tol": (1e-4, 1e-4)}


# ----------------------------------------------------------------------------------------------- attention
def _t5_bucket(rel, nb=16, me=4, md=32):
    h = nb // 2
    ret = (rel > 0) * h
    n = np.abs(rel)
    large = me + (np.log(np.maximum(n, 1) / me) / math.log(md / me) * (h - me)).astype(np.int64)
    return ret + np.where(n < me, n, np.minimum(large, h - 1))


@tw.jit(out_idx=[-1])
def attn37(B, Sq, Sk, D, dt, form, W=3, bq=16):
    """Attention of all Sk keys in one tile (S = Q K^T / sqrt(D), softmax, P V; probabilities rounded to dt):
    `kpm` cross-attention with a key padding mask Ak (B, Sk) int32 (0: padded); `t5_select` T5's bidirectional
    relative-position bucket of j - i computed in the kernel (16 buckets, max distance 32), its bias from a (16,)
    table by a serial loop of T.where over the buckets; `t5_gather` the table tile read at the bucket (tb[bk[i, j]]);
    `longformer` local (|i - j| <= W) plus global tokens (Ak[b, j] != 0 flags) both ways; `streaming` StreamingLLM
    decode (the rows are heads at one position): keys j == 0 (the sink token) or Ln[b] - W <= j < Ln[b]."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((B, Sq, D), dt), K: T.Tensor((B, Sk, D), dt), V: T.Tensor((B, Sk, D), dt),
             Ak: T.Tensor((B, Sk), "int32"), Ln: T.Tensor((B,), "int32"), Tb: T.Tensor((16,), "float32"),
             O: T.Tensor((B, Sq, D), dt)):
        with T.Kernel(T.ceildiv(Sq, bq), B) as (bx, b):
            q = T.alloc_shared((bq, D), dt)
            k = T.alloc_shared((Sk, D), dt)
            v = T.alloc_shared((Sk, D), dt)
            s = T.alloc_fragment((bq, Sk), "float32")
            bias = T.alloc_fragment((bq, Sk), "float32")
            bk = T.alloc_fragment((bq, Sk), "int32")
            p = T.alloc_shared((bq, Sk), dt)
            ak = T.alloc_fragment((Sk,), "int32")
            aq = T.alloc_fragment((bq,), "int32")
            tb = T.alloc_fragment((16,), "float32")
            mx = T.alloc_fragment((bq,), "float32")
            sm = T.alloc_fragment((bq,), "float32")
            acc = T.alloc_fragment((bq, D), "float32")
            n = Ln[b]
            T.copy(Q[b, bx * bq, 0], q)
            T.copy(K[b, 0, 0], k)
            T.copy(V[b, 0, 0], v)
            T.copy(Ak[b, :], ak)
            T.copy(Ak[b, bx * bq], aq)
            T.copy(Tb, tb)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            if form == "kpm":
                for i, j in T.Parallel(bq, Sk):
                    s[i, j] = T.where(ak[j] != 0, s[i, j] * scale, NEG)
            elif form == "longformer":
                for i, j in T.Parallel(bq, Sk):
                    s[i, j] = T.where(T.abs(bx * bq + i - j) <= W or ak[j] != 0 or aq[i] != 0, s[i, j] * scale, NEG)
            elif form == "streaming":
                for i, j in T.Parallel(bq, Sk):
                    s[i, j] = T.where(j == 0 or (j < n and j >= n - W), s[i, j] * scale, NEG)
            else:
                for i, j in T.Parallel(bq, Sk):
                    rel = j - (bx * bq + i)
                    na = T.abs(rel)
                    lg = 4 + T.cast(T.log(T.cast(T.max(na, 1), "float32") / 4.0) / math.log(8.0) * 4.0, "int32")
                    bk[i, j] = T.where(rel > 0, 8, 0) + T.where(na < 4, na, T.min(lg, 7))
                if form == "t5_gather":
                    for i, j in T.Parallel(bq, Sk):
                        s[i, j] = s[i, j] * scale + tb[bk[i, j]]
                else:
                    T.clear(bias)
                    for u in T.serial(16):
                        for i, j in T.Parallel(bq, Sk):
                            bias[i, j] = T.where(bk[i, j] == u, Tb[u], bias[i, j])
                    for i, j in T.Parallel(bq, Sk):
                        s[i, j] = s[i, j] * scale + bias[i, j]
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(bq, Sk):
                s[i, j] = T.exp(s[i, j] - mx[i])
            T.reduce_sum(s, sm, dim=1)
            for i, j in T.Parallel(bq, Sk):
                p[i, j] = s[i, j] / sm[i]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O[b, bx * bq, 0])

    return main


def _attn37(form):
    def make(dt, shape, rng):
        B, Sq, Sk, D = shape
        if form == "longformer":
            Sq = Sk
        q, k, v = randn(rng, (B, Sq, D), dt), randn(rng, (B, Sk, D), dt), randn(rng, (B, Sk, D), dt)
        ak = (rng.random((B, Sk)) < (0.7 if form == "kpm" else 0.15)).astype(np.int32)
        ak[:, 0] = 1
        ln = rng.integers(1, Sk + 1, B).astype(np.int32)
        ln[0] = Sk
        tb = rng.standard_normal(16).astype(np.float32)
        i = np.arange(Sq)[:, None]
        j = np.arange(Sk)[None, :]
        s = np.einsum("bqd,bkd->bqk", f64(q), f64(k)) / math.sqrt(D)
        keep = np.ones((B, Sq, Sk), bool)
        if form == "kpm":
            keep = np.broadcast_to(ak[:, None, :] != 0, keep.shape)
        elif form == "longformer":
            keep = (np.abs(i - j)[None] <= 3) | (ak[:, None, :] != 0) | (ak[:, :, None] != 0)
        elif form == "streaming":
            n = ln[:, None, None]
            keep = (j[None] == 0) | ((j[None] < n) & (j[None] >= n - 3))
        else:
            s = s + f64(tb)[_t5_bucket(j - i)][None]
        s = np.where(keep, s, -np.inf)
        p = _softmax64(s.reshape(-1, Sk)).reshape(s.shape)
        ref = np.einsum("bqk,bkd->bqd", p, f64(v))
        tol = (1e-2, 1e-2) if dt == "bfloat16" else (2e-3, 2e-3)
        return attn37, (B, Sq, Sk, D, dt, form), [q, k, v, ak, ln, tb], [ref], {"tol": tol}
    return make


@tw.jit(out_idx=[-1])
def diff_attn(B, S, D, dt, lam=0.6, bq=16):
    """Differential attention (Ye et al.): (softmax(Q1 K1^T / sqrt(D)) - lam softmax(Q2 K2^T / sqrt(D))) V, causal,
    the difference rounded to dt before P V."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q1: T.Tensor((B, S, D), dt), K1: T.Tensor((B, S, D), dt), Q2: T.Tensor((B, S, D), dt),
             K2: T.Tensor((B, S, D), dt), V: T.Tensor((B, S, D), dt), O: T.Tensor((B, S, D), dt)):
        with T.Kernel(T.ceildiv(S, bq), B) as (bx, b):
            q1 = T.alloc_shared((bq, D), dt)
            q2 = T.alloc_shared((bq, D), dt)
            k1 = T.alloc_shared((S, D), dt)
            k2 = T.alloc_shared((S, D), dt)
            v = T.alloc_shared((S, D), dt)
            s1 = T.alloc_fragment((bq, S), "float32")
            s2 = T.alloc_fragment((bq, S), "float32")
            p = T.alloc_shared((bq, S), dt)
            m1 = T.alloc_fragment((bq,), "float32")
            m2 = T.alloc_fragment((bq,), "float32")
            z1 = T.alloc_fragment((bq,), "float32")
            z2 = T.alloc_fragment((bq,), "float32")
            acc = T.alloc_fragment((bq, D), "float32")
            T.copy(Q1[b, bx * bq, 0], q1)
            T.copy(Q2[b, bx * bq, 0], q2)
            T.copy(K1[b, 0, 0], k1)
            T.copy(K2[b, 0, 0], k2)
            T.copy(V[b, 0, 0], v)
            T.clear(s1)
            T.clear(s2)
            T.gemm(q1, k1, s1, transpose_B=True)
            T.gemm(q2, k2, s2, transpose_B=True)
            for i, j in T.Parallel(bq, S):
                s1[i, j] = T.where(j <= bx * bq + i, s1[i, j] * scale, NEG)
                s2[i, j] = T.where(j <= bx * bq + i, s2[i, j] * scale, NEG)
            T.reduce_max(s1, m1, dim=1)
            T.reduce_max(s2, m2, dim=1)
            for i, j in T.Parallel(bq, S):
                s1[i, j] = T.exp(s1[i, j] - m1[i])
                s2[i, j] = T.exp(s2[i, j] - m2[i])
            T.reduce_sum(s1, z1, dim=1)
            T.reduce_sum(s2, z2, dim=1)
            for i, j in T.Parallel(bq, S):
                p[i, j] = s1[i, j] / z1[i] - lam * s2[i, j] / z2[i]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O[b, bx * bq, 0])

    return main


def _diff_attn(dt, shape, rng):
    B, S, D = shape
    q1, k1, q2, k2, v = (randn(rng, (B, S, D), dt) for _ in range(5))
    mask = np.tril(np.ones((S, S), bool))

    def sm(q, k):
        s = np.where(mask, np.einsum("bqd,bkd->bqk", f64(q), f64(k)) / math.sqrt(D), -np.inf)
        return _softmax64(s.reshape(-1, S)).reshape(s.shape)
    ref = np.einsum("bqk,bkd->bqd", sm(q1, k1) - 0.6 * sm(q2, k2), f64(v))
    tol = (1.6e-2, 1.6e-2) if dt == "bfloat16" else (2e-3, 2e-3)
    return diff_attn, (B, S, D, dt), [q1, k1, q2, k2, v], [ref], {"tol": tol}


@tw.jit(out_idx=[-1])
def paged_prefill(NB, BS, D, MB, Cq, dt):
    """Chunked prefill over a paged KV cache: a chunk of Cq new queries at positions Ctx[0] .. Ctx[0] + Cq - 1
    attends to the MB pages of its block table (context and the chunk's own keys already written), causal by
    absolute position; the pages copied one by one into a (MB * BS, D) tile at scalar block indices."""
    L = MB * BS
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((Cq, D), dt), KC: T.Tensor((NB, BS, D), dt), VC: T.Tensor((NB, BS, D), dt),
             Bt: T.Tensor((MB,), "int32"), Ctx: T.Tensor((1,), "int32"), O: T.Tensor((Cq, D), dt)):
        with T.Kernel(1) as bx:
            q = T.alloc_shared((Cq, D), dt)
            k = T.alloc_shared((L, D), dt)
            v = T.alloc_shared((L, D), dt)
            s = T.alloc_fragment((Cq, L), "float32")
            p = T.alloc_shared((Cq, L), dt)
            mx = T.alloc_fragment((Cq,), "float32")
            sm = T.alloc_fragment((Cq,), "float32")
            acc = T.alloc_fragment((Cq, D), "float32")
            c0 = Ctx[0]
            T.copy(Q, q)
            for m in T.serial(MB):
                T.copy(KC[Bt[m], :, :], k[m * BS:(m + 1) * BS, :])
                T.copy(VC[Bt[m], :, :], v[m * BS:(m + 1) * BS, :])
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            for i, j in T.Parallel(Cq, L):
                s[i, j] = T.where(j <= c0 + i, s[i, j] * scale, NEG)
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(Cq, L):
                s[i, j] = T.exp(s[i, j] - mx[i])
            T.reduce_sum(s, sm, dim=1)
            for i, j in T.Parallel(Cq, L):
                p[i, j] = s[i, j] / sm[i]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O)

    return main


def _paged_prefill(dt, shape, rng):
    NB, BS, D, MB, Cq, c0 = shape
    q = randn(rng, (Cq, D), dt)
    kc, vc = randn(rng, (NB, BS, D), dt), randn(rng, (NB, BS, D), dt)
    bt = rng.permutation(NB)[:MB].astype(np.int32)
    K, V = f64(kc)[bt].reshape(-1, D), f64(vc)[bt].reshape(-1, D)
    s = f64(q) @ K.T / math.sqrt(D)
    s = np.where(np.arange(MB * BS)[None, :] <= c0 + np.arange(Cq)[:, None], s, -np.inf)
    ref = _softmax64(s) @ V
    tol = (1e-2, 1e-2) if dt == "bfloat16" else (2e-3, 2e-3)
    return paged_prefill, (NB, BS, D, MB, Cq, dt), [q, kc, vc, bt, np.array([c0], np.int32)], [ref], {"tol": tol}


# ----------------------------------------------------------------------------------------------- misc
@tw.jit(out_idx=[-2, -1])
def compact(N, dt, form):
    """Stream compaction (torch.masked_select / nonzero's values): the exclusive prefix sum of the keep flags
    (a serial scalar loop over a 1-D tile), then each kept x[i] stored to Y[pos[i]] in a serial loop with an `if`
    on the flag; the count returned (`slice`: copied from pos[N:N + 1]; `tile`, the hint: from a (1,) tile).
    Y's tail past the count is zeros."""
    @T.prim_func
    def main(X: T.Tensor((N,), dt), Keep: T.Tensor((N,), "int32"), Y: T.Tensor((N,), dt),
             Cnt: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:
            kp = T.alloc_fragment((N,), "int32")
            pos = T.alloc_fragment((N + 1,), "int32")
            x = T.alloc_fragment((N,), dt)
            y = T.alloc_fragment((N,), dt)
            T.copy(Keep, kp)
            T.copy(X, x)
            T.clear(y)
            pos[0] = 0
            for i in T.serial(N):
                pos[i + 1] = pos[i] + kp[i]
            for i in T.serial(N):
                if kp[i] != 0:
                    y[pos[i]] = x[i]
            T.copy(y, Y)
            if form == "slice":
                T.copy(pos[N:N + 1], Cnt)
            else:
                cnt = T.alloc_fragment((1,), "int32")
                cnt[0] = pos[N]
                T.copy(cnt, Cnt)

    return main


def _compact(form):
    return lambda dt, shape, rng: _compact_make(dt, shape, rng, form)


def _compact_make(dt, shape, rng, form):
    (N,) = shape
    x = randn(rng, (N,), dt) if dt != "int32" else rng.integers(-50, 50, N).astype(np.int32)
    keep = (rng.random(N) < 0.5).astype(np.int32)
    y = np.zeros(N)
    sel = f64(x)[keep != 0]
    y[:len(sel)] = sel
    return compact, (N, dt, form), [x, keep], [y, np.array([len(sel)])]


@tw.jit(out_idx=[-2, -1])
def topk_argmax(M, N, K, dt, bm=BM):
    """torch.topk(x, K) (sorted, ties to the lower index) by K repeated argmaxes: the row max, the first index
    holding it, that element masked to -inf; values and indices stored by column k of (bm, K) tiles."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), V: T.Tensor((M, K), dt), I: T.Tensor((M, K), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            pick = T.alloc_fragment((bm, N), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            am = T.alloc_fragment((bm,), "int32")
            v = T.alloc_fragment((bm, K), dt)
            ix = T.alloc_fragment((bm, K), "int32")
            T.copy(X[bx * bm, 0], x)
            for k in T.serial(K):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, N):
                    pick[i, j] = T.where(x[i, j] == mx[i], j, N)
                T.reduce_min(pick, am, dim=1)
                for i in T.Parallel(bm):
                    v[i, k] = mx[i]
                    ix[i, k] = am[i]
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(j == am[i], -T.infinity("float32"), x[i, j])
            T.copy(v, V[bx * bm, 0])
            T.copy(ix, I[bx * bm, 0])

    return main


def _topk_argmax(dt, shape, rng):
    M, N, K = shape
    x = rng.integers(-6, 7, (M, N)).astype(npdt(dt))  # many ties
    idx = np.argsort(-f64(x), axis=1, kind="stable")[:, :K]
    return topk_argmax, (M, N, K, dt), [x, ], [np.take_along_axis(f64(x), idx, 1), idx]


@tw.jit(out_idx=[-3, -2, -1])
def rle(N, form):
    """Run-length encoding of an int32 sequence (torch.unique_consecutive(return_counts=True)): a run starts where
    x[i] != x[i - 1] (`or`: `i == 0 or x[i] != x[i - 1]`, which reads x[-1]: `or` evaluates both operands, an error
    on both targets; `clamped`, its hint: x[T.max(i - 1, 0)]); its value and its start stored in a serial scalar
    loop, lengths from the next start."""
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Val: T.Tensor((N,), "int32"), Len: T.Tensor((N,), "int32"),
             Cnt: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            st = T.alloc_fragment((N + 1,), "int32")
            val = T.alloc_fragment((N,), "int32")
            ln = T.alloc_fragment((N,), "int32")
            c = T.alloc_fragment((1,), "int32")
            T.copy(X, x)
            T.clear(val)
            T.clear(ln)
            c[0] = 0
            for i in T.serial(N):
                if i == 0 or x[i] != x[(i - 1) if form == "or" else T.max(i - 1, 0)]:
                    val[c[0]] = x[i]
                    st[c[0]] = i
                    c[0] = c[0] + 1
            st[c[0]] = N
            for r in T.serial(N):
                if r < c[0]:
                    ln[r] = st[r + 1] - st[r]
            T.copy(val, Val)
            T.copy(ln, Len)
            T.copy(c, Cnt)

    return main


def _rle(form):
    return lambda dt, shape, rng: _rle_make(dt, shape, rng, form)


def _rle_make(dt, shape, rng, form):
    (N,) = shape
    x = np.repeat(rng.integers(-3, 4, N), rng.integers(1, 4, N))[:N].astype(np.int32)
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    lens = np.diff(np.r_[starts, N])
    val, ln = np.zeros(N, np.int64), np.zeros(N, np.int64)
    val[:len(starts)], ln[:len(starts)] = x[starts], lens
    return rle, (N, form), [x], [val, ln, np.array([len(starts)])]


CASES = {
    # element-wise
    **{f: (_ew(f), F3, [(13, 37), (1, 1)]) for f in (
        "squared_relu", "hardsigmoid", "softsign", "celu", "logsigmoid", "prelu", "round", "frac", "xlogy",
        "heaviside", "copysign", "softshrink", "tanhshrink", "rrelu_eval", "logit")},
    "fmod": (_ew("fmod"), ("float32",), [(13, 37), (1, 1)]),
    # norms
    "group_rmsnorm": (_grms("group"), F3, [(13, 4, 16), (1, 1, 8)]),
    "gated_rmsnorm": (_grms("gated"), F3, [(13, 4, 16), (1, 1, 8)]),
    "layernorm_2d": (_grms("ln2d"), F3, [(13, 3, 16), (1, 1, 8)]),
    "weight_standardize": (_wstd, F3, [(13, 37), (1, 1)]),
    "bn_running_update": (_bn_running, F3, [(13, 37), (2, 1)]),
    "deepnorm": (_deepnorm, F3, [(13, 37), (1, 1)]),
    # misc
    "reverse_cumsum": (_row_scan("rev_cumsum"), F3, [(13, 37), (1, 2)]),
    "exclusive_cumsum": (_row_scan("excl_cumsum"), F3, [(13, 37), (1, 2)]),
    "moving_avg": (_row_scan("moving_avg"), F3, [(13, 37), (1, 1)]),
    "moving_avg_copies": (_row_scan("ma_copies"), F3, [(13, 37), (1, 1)]),
    "cross_rows": (_cross3("rows"), F3, [(37,), (1,)]),
    "cross_soa": (_cross3("soa"), F3, [(37,), (1,)]),
    "cross_gather": (_cross3("gather"), F3, [(37,), (1,)]),
    "trace_batched": (_trace, F3, [(3, 13), (1, 1)]),
    # MoE
    "router_sigmoid_bias_top2": (_router, F3, [(13, 8), (1, 2)]),
    "expert_choice": (_expert_choice, F3, [(13, 8, 3), (2, 1, 1)]),
    "capacity_drop": (_capacity, ("int32",), [(37, 5, 6), (2, 1, 1)]),
    "lb_loss": (_lb_loss, F3, [(13, 8), (1, 1)]),
    "shared_expert_gate": (_shared, F3, [(13, 37), (1, 1)]),
    "moe_combine": (_combine, F3, [(5, 2, 7, 37), (1, 1, 1, 1)]),
    # quantisation
    "fp8_e4m3_split": (_fp8("e4m3", "split"), F3, [(13, 37), (1, 1)]),
    "fp8_e5m2_split": (_fp8("e5m2", "split"), F3, [(13, 37), (1, 1)]),
    "fp8_e4m3_ladder": (_fp8("e4m3", "ladder"), F3, [(13, 37), (1, 1)]),
    "fp8_e5m2_ladder": (_fp8("e5m2", "ladder"), F3, [(13, 37), (1, 1)]),
    "int4_u8_shift": (_int4_u8("shift"), F2, [(16, 32, 8), (8, 2, 8)]),
    "int4_u8_divmod": (_int4_u8("divmod"), F2, [(16, 32, 8), (8, 2, 8)]),
    "int4_u8_copy": (_int4_u8("copy"), F2, [(16, 32, 8), (8, 2, 8)]),
    "group_int8_gemm": (_gi8("kn"), ("int8",), [(17, 40, 64, 32), (1, 1, 32, 32)]),
    "group_int8_gemm_nk": (_gi8("nk"), ("int8",), [(17, 40, 64, 32), (1, 1, 32, 32)]),
    "nf4_gather": (_nf4("gather"), H16, [(13, 64, 16), (1, 16, 16)]),
    "nf4_select": (_nf4("select"), H16, [(13, 64, 16), (1, 16, 16)]),
    "smoothquant": (_smoothquant, F3, [(13, 37), (1, 1)]),
    # optimizers and losses
    "lion": (_lion, F3, [(13, 37), (1, 1)]),
    "adafactor": (_adafactor, ("float32",), [(13, 37), (1, 1)]),
    "rmsprop": (_opt2("rmsprop"), ("float32",), [(13, 37), (1, 1)]),
    "adagrad": (_opt2("adagrad"), ("float32",), [(13, 37), (1, 1)]),
    "infonce": (_infonce, H16, [(13, 32), (1, 16)]),
    "triplet_margin": (_loss_rows("triplet"), F3, [(13, 37), (1, 1)]),
    "dice_loss": (_loss_rows("dice"), F3, [(13, 37), (1, 1)]),
    "multi_margin": (_loss_rows("multi_margin"), F3, [(13, 37), (1, 1)]),
    # signal / vision
    "conv1d_dilated_taps": (_conv1d_dil("taps"), F3, [(2, 5, 37), (1, 1, 1)]),
    "conv1d_dilated_cols": (_conv1d_dil("cols"), F3, [(2, 5, 37), (1, 1, 1)]),
    "conv1d_dilated_gm": (_conv1d_dil("gm"), F3, [(2, 5, 37), (1, 1, 1)]),
    "max_unpool1d": (_unpool, F3, [(13, 19), (1, 1)]),
    "max_unpool1d_phases": (_unpool_rows, F3, [(13, 19), (1, 1)]),
    "sobel": (_sobel("shift"), F3, [(13, 37), (3, 3)]),
    "sobel_copies": (_sobel("copies"), F3, [(13, 37), (3, 3)]),
    "pixel_shuffle": (_pshuf("map"), F3, [(3, 5, 7), (1, 1, 1)]),
    "pixel_shuffle_rows": (_pshuf("rows"), F3, [(3, 5, 7), (1, 1, 1)]),
    "stft_frames": (_frames("frame"), F3, [(2, 5, 16, 4), (1, 1, 8, 8)]),
    "overlap_add": (_frames("ola"), F3, [(2, 5, 16, 4), (1, 1, 8, 8)]),
    "roi_align": (_roi, F2, [(7, 9, 16, 3, 2), (1, 1, 8, 1, 1)]),
    # attention
    "cross_attn_key_padding": (_attn37("kpm"), H16, [(2, 13, 37, 16), (1, 1, 1, 16)]),
    "t5_bucket_select": (_attn37("t5_select"), H16, [(2, 13, 37, 16), (1, 1, 1, 16)]),
    "t5_bucket_gather": (_attn37("t5_gather"), H16, [(2, 13, 37, 16), (1, 1, 1, 16)]),
    "longformer_global": (_attn37("longformer"), H16, [(2, 37, 37, 16), (1, 1, 1, 16)]),
    "streaming_sink_decode": (_attn37("streaming"), H16, [(2, 8, 37, 16), (1, 1, 1, 16)]),
    "diff_attn": (_diff_attn, H16, [(2, 37, 16), (1, 1, 16)]),
    "paged_prefill_chunk": (_paged_prefill, H16, [(9, 16, 16, 3, 13, 30), (2, 16, 16, 1, 1, 0)]),
    # misc
    "compaction": (_compact("slice"), ("float32", "int32"), [(37,), (1,)]),
    "compaction_tile": (_compact("tile"), ("float32", "int32"), [(37,), (1,)]),
    "topk_repeated_argmax": (_topk_argmax, F3, [(13, 37, 5), (1, 1, 1)]),
    "run_length_encode": (_rle("or"), ("int32",), [(37,), (1,)]),
    "run_length_encode_clamped": (_rle("clamped"), ("int32",), [(37,), (1,)]),
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
