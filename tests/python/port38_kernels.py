"""Session 38's portability hunt (h-port38, docs/testing.md "Session 38: port38"): more user kernel forms, not
covered by port33_kernels.py .. port37_kernels.py (element-wise: addcmul / addcdiv, hypot, log-cosh, learnable-beta
swish, where with row / column broadcasting, matrix band part, Horner polynomials, complex rotation by planes,
stochastic rounding, Gaussian / Poisson NLL, margin-ranking / hinge-embedding / soft-margin losses, a column mask;
rows: ScaleNorm, LayerNorm without bias, partial RMSNorm, Welford's chunked mean / variance, safe softmax over fully
masked rows, softmin, epsilon / eta sampling masks, inverse-CDF sampling with a uniform draw, classifier-free
guidance, contrastive decoding, Jensen-Shannon divergence, Pearson correlation, cosine embedding loss, router z-loss,
flash decoding's merge of two partial attention states, masked per-sequence perplexity; attention: packed varlen with
cu_seqlens read in the kernel, prefix-LM, chunked local (Llama 4), sigmoid attention, GQA with 6 query heads on 2 KV
heads, a per-head learned temperature; MoE / quantisation: group-limited top-k routing, the aux-loss-free bias
update, 2-D block scaling, MX-style shared exponents, int4 symmetric packing; recurrent decode steps: the delta
rule, gated linear attention with a per-key gate, RWKV-4's WKV; misc: gather along the last axis with negative
indices, roll, repeat_interleave, segmented cumsum, maxout, channel shuffle, diag_embed, the k-th value by rank
counting, argsort of small rows, interleaving two tensors, the diffusion timestep embedding), written for cpu first
as docs/language.md teaches, each a `tw.jit` factory, then the same factory with only the target changed to
ascend910b (simulator, checker on).

CASES as in port35_kernels.py (whose check / probe take cases=); `python port38_kernels.py [--target=T] [names]`
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


def _sigm(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lsm(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


# ----------------------------------------------------------------------------------------------- element-wise
HORNER = (0.5, -1.25, 0.75, 0.125, -0.0625)  # c0 + c1 x + ... + c4 x^4


@tw.jit(out_idx=[-1])
def ew38(M, N, dt, form, bm=BM):
    """Element-wise forms on a (bm, N) tile, y in float32: Z a second operand, W a per-column parameter (N,), R a
    per-row value (M,) (a label +-1, a flag)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Z: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             R: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            z = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            r = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Z[bx * bm, 0], z)
            T.copy(W, w)
            T.copy(R[bx * bm], r)
            for i, j in T.Parallel(bm, N):
                if form == "addcmul":
                    y[i, j] = x[i, j] + 0.5 * z[i, j] * w[j]
                elif form == "addcdiv":
                    y[i, j] = x[i, j] + 0.5 * z[i, j] / (T.abs(w[j]) + 0.5)
                elif form == "hypot":
                    y[i, j] = T.sqrt(x[i, j] * x[i, j] + z[i, j] * z[i, j])
                elif form == "log_cosh":
                    y[i, j] = T.abs(x[i, j] - z[i, j]) + T.log(1.0 + T.exp(-2.0 * T.abs(x[i, j] - z[i, j]))) \
                        - math.log(2.0)
                elif form == "swish_beta":
                    y[i, j] = x[i, j] * T.sigmoid(w[j] * x[i, j])
                elif form == "where_row":
                    y[i, j] = T.where(r[i] > 0, x[i, j], z[i, j])
                elif form == "where_col":
                    y[i, j] = T.where(w[j] > 0, x[i, j], 0.0)
                elif form == "where_mixed":
                    y[i, j] = T.where(x[i, j] > z[i, j], x[i, j], w[j])
                elif form == "band_part":
                    d = j - (bx * bm + i)
                    y[i, j] = T.where(d >= -2 and d <= 3, x[i, j], 0.0)
                elif form == "horner":
                    v = x[i, j]
                    y[i, j] = HORNER[0] + v * (HORNER[1] + v * (HORNER[2] + v * (HORNER[3] + v * HORNER[4])))
                elif form == "stochastic_round":
                    y[i, j] = T.floor(x[i, j] * 16.0 + z[i, j]) / 16.0
                elif form == "gaussian_nll":
                    var = T.max(w[j] * w[j] + 0.1, 1e-6)
                    y[i, j] = 0.5 * (T.log(var) + (x[i, j] - z[i, j]) * (x[i, j] - z[i, j]) / var)
                elif form == "poisson_nll":
                    y[i, j] = T.exp(x[i, j]) - T.abs(z[i, j]) * x[i, j]
                elif form == "margin_ranking":
                    y[i, j] = T.max(0.0, -r[i] * (x[i, j] - z[i, j]) + 0.25)
                elif form == "hinge_embedding":
                    y[i, j] = T.where(r[i] > 0, x[i, j], T.max(0.0, 1.0 - x[i, j]))
                elif form == "soft_margin":
                    y[i, j] = T.log(1.0 + T.exp(-r[i] * x[i, j]))
                elif form == "mask_col_fill":
                    y[i, j] = T.where(w[j] < 0, -10000.0, x[i, j])
                else:  # snake: x + sin^2(a x) / a
                    a = T.abs(w[j]) + 0.5
                    y[i, j] = x[i, j] + T.sin(a * x[i, j]) * T.sin(a * x[i, j]) / a
            T.copy(y, Y[bx * bm, 0])

    return main


def _ew(form):
    def make(dt, shape, rng):
        M, N = shape
        x, z = randn(rng, (M, N), dt, 1.5), randn(rng, (M, N), dt, 1.5)
        w = (rng.standard_normal(N) * 1.5).astype(np.float32)
        r = np.where(rng.random(M) < 0.5, -1.0, 1.0).astype(np.float32)
        if form == "stochastic_round":  # exact in float32: x * 16 a multiple of 1/4, u a multiple of 1/16
            x = (rng.integers(-64, 64, (M, N)) / 64).astype(npdt(dt))
            z = ((rng.integers(0, 8, (M, N)) + 0.5) / 8).astype(npdt(dt))
        X, Z, Wt, Rr = f64(x), f64(z), f64(w), f64(r)[:, None]
        row = np.arange(M)[:, None]
        col = np.arange(N)[None, :]
        a = np.abs(Wt) + 0.5
        var = Wt * Wt + 0.1
        ref = {
            "addcmul": lambda: X + 0.5 * Z * Wt,
            "addcdiv": lambda: X + 0.5 * Z / (np.abs(Wt) + 0.5),
            "hypot": lambda: np.hypot(X, Z),
            "log_cosh": lambda: np.log(np.cosh(X - Z)),
            "swish_beta": lambda: X * _sigm(Wt * X),
            "where_row": lambda: np.where(Rr > 0, X, Z),
            "where_col": lambda: np.where(Wt > 0, X, 0.0),
            "where_mixed": lambda: np.where(X > Z, X, np.broadcast_to(Wt, X.shape)),
            "band_part": lambda: np.where((col - row >= -2) & (col - row <= 3), X, 0.0),
            "horner": lambda: np.polyval(HORNER[::-1], X),
            "stochastic_round": lambda: np.floor(X * 16 + Z) / 16,
            "gaussian_nll": lambda: 0.5 * (np.log(var) + (X - Z) ** 2 / var),
            "poisson_nll": lambda: np.exp(X) - np.abs(Z) * X,
            "margin_ranking": lambda: np.maximum(0, -Rr * (X - Z) + 0.25),
            "hinge_embedding": lambda: np.where(Rr > 0, X, np.maximum(0, 1 - X)),
            "soft_margin": lambda: np.log1p(np.exp(-Rr * X)),
            "mask_col_fill": lambda: np.where(Wt < 0, -10000.0, X),
            "snake": lambda: X + np.sin(a * X) ** 2 / a,
        }[form]()
        extra = {"tol": (1e-5, 1e-4)} if form in ("log_cosh", "poisson_nll", "snake") else {}
        return ew38, (M, N, dt, form), [x, z, w, r], [ref], extra
    return make


# ----------------------------------------------------------------------------------------------- rows
@tw.jit(out_idx=[-2, -1])
def row38(M, N, dt, form, bm=BM, eps=1e-5):
    """Row-wise forms on a (bm, N) tile: X, Z (M, N), W (N,) a weight, U, V (M,) per-row values (uniform draws,
    lengths, labels, log-sum-exps); outputs Y (M, N) and R (M,) in float32."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Z: T.Tensor((M, N), dt), W: T.Tensor((N,), "float32"),
             U: T.Tensor((M,), "float32"), V: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32"),
             R: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            z = T.alloc_fragment((bm, N), "float32")
            e = T.alloc_fragment((bm, N), "float32")
            f = T.alloc_fragment((bm, N), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            u = T.alloc_fragment((bm,), "float32")
            v = T.alloc_fragment((bm,), "float32")
            a = T.alloc_fragment((bm,), "float32")
            b = T.alloc_fragment((bm,), "float32")
            c = T.alloc_fragment((bm,), "float32")
            r = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Z[bx * bm, 0], z)
            T.copy(W, w)
            T.copy(U[bx * bm], u)
            T.copy(V[bx * bm], v)
            if form == "scalenorm":  # g x / max(||x||, eps), g = sqrt(N)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(e, a, dim=1)
                for i in T.Parallel(bm):
                    r[i] = T.max(T.sqrt(a[i]), eps)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = x[i, j] * math.sqrt(N) / r[i]
            elif form == "layernorm_nobias":
                T.reduce_sum(x, a, dim=1)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = x[i, j] - a[i] / N
                    f[i, j] = e[i, j] * e[i, j]
                T.reduce_sum(f, b, dim=1)
                for i in T.Parallel(bm):
                    r[i] = T.rsqrt(b[i] / N + eps)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = e[i, j] * r[i] * w[j]
            elif form == "prmsnorm":  # RMS of the first P = ceil(N / 4) channels scales the whole row
                P = (N + 3) // 4
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.where(j < P, x[i, j] * x[i, j], 0.0)
                T.reduce_sum(e, a, dim=1)
                for i in T.Parallel(bm):
                    r[i] = T.sqrt(a[i] / P + eps)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = x[i, j] / r[i] * w[j]
            elif form == "welford":  # chunks of 8 columns merged by Chan's parallel update (mean a, M2 b, count)
                C = 8
                T.clear(a)
                T.clear(b)
                ch = T.alloc_fragment((bm, C), "float32")
                cm = T.alloc_fragment((bm,), "float32")
                cq = T.alloc_fragment((bm,), "float32")
                for k in T.serial(N // C):
                    for i, jj in T.Parallel(bm, C):
                        ch[i, jj] = x[i, k * C + jj]
                    T.reduce_sum(ch, cm, dim=1)
                    for i, jj in T.Parallel(bm, C):
                        ch[i, jj] = (ch[i, jj] - cm[i] / C) * (ch[i, jj] - cm[i] / C)
                    T.reduce_sum(ch, cq, dim=1)
                    for i in T.Parallel(bm):
                        d = cm[i] / C - a[i]
                        b[i] = b[i] + cq[i] + d * d * (k * C) * C / (k * C + C)
                        a[i] = a[i] + d * C / (k * C + C)
                for i in T.Parallel(bm):
                    r[i] = b[i] / N
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (x[i, j] - a[i]) * T.rsqrt(r[i] + eps)
            elif form in ("safe_softmax", "softmin"):
                for i, j in T.Parallel(bm, N):
                    if form == "softmin":
                        e[i, j] = -x[i, j]
                    else:
                        e[i, j] = T.where(z[i, j] > 0, x[i, j], -T.infinity("float32"))
                T.reduce_max(e, a, dim=1)
                for i, j in T.Parallel(bm, N):
                    f[i, j] = T.where(e[i, j] == -T.infinity("float32"), 0.0, T.exp(e[i, j] - a[i]))
                T.reduce_sum(f, b, dim=1)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.where(b[i] > 0, f[i, j] / b[i], 0.0)
                for i in T.Parallel(bm):
                    r[i] = b[i]
            elif form in ("eps_sampling", "eta_sampling", "contrastive", "cfg", "router_z"):
                T.reduce_max(x, a, dim=1)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp(x[i, j] - a[i])
                T.reduce_sum(e, b, dim=1)
                if form == "eps_sampling":  # keep p >= 0.03 and the argmax
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = T.where(e[i, j] / b[i] >= 0.03 or x[i, j] == a[i], x[i, j], NEG)
                    for i in T.Parallel(bm):
                        r[i] = a[i] + T.log(b[i])
                elif form == "eta_sampling":  # eps_t = min(eta, sqrt(eta) exp(-H)), eta = 0.02
                    for i, j in T.Parallel(bm, N):
                        f[i, j] = e[i, j] / b[i] * (x[i, j] - a[i] - T.log(b[i]))
                    T.reduce_sum(f, c, dim=1)
                    for i in T.Parallel(bm):
                        r[i] = T.min(0.02, math.sqrt(0.02) * T.exp(c[i]))
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = T.where(e[i, j] / b[i] > r[i] or x[i, j] == a[i], x[i, j], NEG)
                elif form == "router_z":  # mean over rows is the caller's; per row lse^2 and the probabilities
                    for i in T.Parallel(bm):
                        r[i] = (a[i] + T.log(b[i])) * (a[i] + T.log(b[i]))
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = e[i, j] / b[i]
                else:  # the second distribution z (amateur / unconditional)
                    T.reduce_max(z, c, dim=1)
                    for i, j in T.Parallel(bm, N):
                        f[i, j] = T.exp(z[i, j] - c[i])
                    T.reduce_sum(f, r, dim=1)
                    if form == "contrastive":  # lp_e - lp_a where p_e >= 0.1 max p_e (Li et al.)
                        for i, j in T.Parallel(bm, N):
                            y[i, j] = T.where(x[i, j] >= a[i] + math.log(0.1),
                                              (x[i, j] - a[i] - T.log(b[i])) - (z[i, j] - c[i] - T.log(r[i])), NEG)
                    else:  # classifier-free guidance in log-prob space, scale 1.5
                        for i, j in T.Parallel(bm, N):
                            y[i, j] = (z[i, j] - c[i] - T.log(r[i])) + 1.5 * ((x[i, j] - a[i] - T.log(b[i]))
                                                                          - (z[i, j] - c[i] - T.log(r[i])))
                    for i in T.Parallel(bm):
                        r[i] = a[i] + T.log(b[i])
            elif form == "inverse_cdf":  # token = #{j : cumsum(p)_j < u * total}
                T.reduce_max(x, a, dim=1)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp(x[i, j] - a[i])
                T.reduce_sum(e, b, dim=1)
                T.clear(c)
                T.clear(r)
                for j in T.serial(N):
                    for i in T.Parallel(bm):
                        c[i] = c[i] + e[i, j]
                        r[i] = r[i] + T.where(c[i] < u[i] * b[i], 1.0, 0.0)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = e[i, j] / b[i]
            elif form == "js_div":  # JS(p || q) of softmax rows; y = the mixture m
                T.reduce_max(x, a, dim=1)
                T.reduce_max(z, c, dim=1)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp(x[i, j] - a[i])
                    f[i, j] = T.exp(z[i, j] - c[i])
                T.reduce_sum(e, b, dim=1)
                T.reduce_sum(f, r, dim=1)
                for i, j in T.Parallel(bm, N):
                    e[i, j] = e[i, j] / b[i]
                    f[i, j] = f[i, j] / r[i]
                    y[i, j] = 0.5 * (e[i, j] + f[i, j])
                    e[i, j] = 0.5 * e[i, j] * T.log(e[i, j] / y[i, j]) + 0.5 * f[i, j] * T.log(f[i, j] / y[i, j])
                T.reduce_sum(e, r, dim=1)
            elif form in ("pearson", "cosine_embedding"):
                if form == "pearson":
                    T.reduce_sum(x, a, dim=1)
                    T.reduce_sum(z, c, dim=1)
                    for i, j in T.Parallel(bm, N):
                        x[i, j] = x[i, j] - a[i] / N
                        z[i, j] = z[i, j] - c[i] / N
                for i, j in T.Parallel(bm, N):
                    e[i, j] = x[i, j] * z[i, j]
                    f[i, j] = x[i, j] * x[i, j]
                    y[i, j] = z[i, j] * z[i, j]
                T.reduce_sum(e, a, dim=1)
                T.reduce_sum(f, b, dim=1)
                T.reduce_sum(y, c, dim=1)
                for i in T.Parallel(bm):
                    r[i] = a[i] / T.sqrt(T.max(b[i] * c[i], 1e-16))
                if form == "cosine_embedding":  # label u = +-1, margin 0.1
                    for i in T.Parallel(bm):
                        r[i] = T.where(u[i] > 0, 1.0 - r[i], T.max(0.0, r[i] - 0.1))
                for i, j in T.Parallel(bm, N):
                    y[i, j] = x[i, j] * T.rsqrt(T.max(b[i], 1e-12))
            elif form == "merge_states":  # flash decoding: two partial outputs with their lse (u, v)
                for i in T.Parallel(bm):
                    a[i] = T.max(u[i], v[i])
                    b[i] = T.exp(u[i] - a[i])
                    c[i] = T.exp(v[i] - a[i])
                    r[i] = a[i] + T.log(b[i] + c[i])
                for i, j in T.Parallel(bm, N):
                    y[i, j] = (x[i, j] * b[i] + z[i, j] * c[i]) / (b[i] + c[i])
            else:  # "seq_ppl": per-token log-probs x, the first U[i] tokens count: exp(-mean)
                for i, j in T.Parallel(bm, N):
                    y[i, j] = T.where(j < u[i], x[i, j], 0.0)
                T.reduce_sum(y, a, dim=1)
                for i in T.Parallel(bm):
                    r[i] = T.exp(-a[i] / T.max(u[i], 1.0))
            T.copy(y, Y[bx * bm, 0])
            T.copy(r, R[bx * bm])

    return main


def _row(form):
    def make(dt, shape, rng):
        M, N = shape
        x, z = randn(rng, (M, N), dt, 2.0), randn(rng, (M, N), dt, 2.0)
        w = (1.0 + 0.5 * rng.standard_normal(N)).astype(np.float32)
        u = rng.random(M).astype(np.float32)
        v = rng.standard_normal(M).astype(np.float32)
        if form == "safe_softmax":
            z = randn(rng, (M, N), dt)
            z[::3] = -1  # every third row fully masked
        if form == "cosine_embedding":
            u = np.where(rng.random(M) < 0.5, -1.0, 1.0).astype(np.float32)
        if form == "merge_states":
            u = (rng.standard_normal(M) * 3).astype(np.float32)
        if form == "seq_ppl":
            x = (-np.abs(f64(x))).astype(npdt(dt))
            u = rng.integers(0, N + 1, M).astype(np.float32)
        X, Z, Wt, Uu, Vv = f64(x), f64(z), f64(w), f64(u), f64(v)
        if form == "scalenorm":
            n = np.maximum(np.sqrt((X * X).sum(1)), 1e-5)
            refs = [X * math.sqrt(N) / n[:, None], n]
        elif form == "layernorm_nobias":
            rs = 1 / np.sqrt(X.var(1) + 1e-5)
            refs = [(X - X.mean(1, keepdims=True)) * rs[:, None] * Wt, rs]
        elif form == "prmsnorm":
            P = (N + 3) // 4
            rr = np.sqrt((X[:, :P] ** 2).mean(1) + 1e-5)
            refs = [X / rr[:, None] * Wt, rr]
        elif form == "welford":
            var = X.var(1)
            refs = [(X - X.mean(1, keepdims=True)) / np.sqrt(var + 1e-5)[:, None], var]
        elif form in ("safe_softmax", "softmin"):
            s = -X if form == "softmin" else np.where(Z > 0, X, -np.inf)
            m = s.max(1, keepdims=True)
            with np.errstate(invalid="ignore"):
                ee = np.where(np.isinf(s), 0, np.exp(s - np.where(np.isinf(m), 0, m)))
            sm = ee.sum(1)
            refs = [np.where(sm[:, None] > 0, ee / np.where(sm > 0, sm, 1)[:, None], 0), sm]
        elif form in ("eps_sampling", "eta_sampling", "router_z"):
            lp = _lsm(X)
            p = np.exp(lp)
            lse = X.max(1) + np.log(np.exp(X - X.max(1, keepdims=True)).sum(1))
            am = X == X.max(1, keepdims=True)
            if form == "eps_sampling":
                refs = [np.where((p >= 0.03) | am, X, NEG), lse]
            elif form == "eta_sampling":
                H = -(p * lp).sum(1)
                et = np.minimum(0.02, math.sqrt(0.02) * np.exp(-H))
                refs = [np.where((p > et[:, None]) | am, X, NEG), et]
            else:
                refs = [p, lse ** 2]
        elif form in ("contrastive", "cfg"):
            le, la = _lsm(X), _lsm(Z)
            lse = X.max(1) + np.log(np.exp(X - X.max(1, keepdims=True)).sum(1))
            if form == "contrastive":
                y = np.where(X >= X.max(1, keepdims=True) + math.log(0.1), le - la, NEG)
            else:
                y = la + 1.5 * (le - la)
            refs = [y, lse]
        elif form == "inverse_cdf":
            p = _softmax64(X)
            e = np.exp(X - X.max(1, keepdims=True))
            cs = np.cumsum(e, 1)
            refs = [p, (cs < Uu[:, None] * e.sum(1, keepdims=True)).sum(1)]
        elif form == "js_div":
            p, q = _softmax64(X), _softmax64(Z)
            m = 0.5 * (p + q)
            refs = [m, 0.5 * (p * np.log(p / m)).sum(1) + 0.5 * (q * np.log(q / m)).sum(1)]
        elif form in ("pearson", "cosine_embedding"):
            if form == "pearson":
                X, Z = X - X.mean(1, keepdims=True), Z - Z.mean(1, keepdims=True)
            cs = (X * Z).sum(1) / np.sqrt(np.maximum((X * X).sum(1) * (Z * Z).sum(1), 1e-16))
            if form == "cosine_embedding":
                cs = np.where(Uu > 0, 1 - cs, np.maximum(0, cs - 0.1))
            refs = [X / np.sqrt(np.maximum((X * X).sum(1, keepdims=True), 1e-12)), cs]
        elif form == "merge_states":
            m = np.maximum(Uu, Vv)
            b, c = np.exp(Uu - m), np.exp(Vv - m)
            refs = [(X * b[:, None] + Z * c[:, None]) / (b + c)[:, None], m + np.log(b + c)]
        else:
            keep = np.arange(N)[None, :] < Uu[:, None]
            y = np.where(keep, X, 0)
            refs = [y, np.exp(-y.sum(1) / np.maximum(Uu, 1))]
        extra = {"tol": (1e-5, 1e-4)}
        if form in ("contrastive", "cfg", "js_div"):
            extra = {"tol": (3e-5, 1e-4)}
        return row38, (M, N, dt, form), [x, z, w, u, v], refs, extra
    return make


# ----------------------------------------------------------------------------------------------- attention
@tw.jit(out_idx=[-1])
def attn38(B, S, D, nseg, dt, form, C=8, bq=16):
    """Self-attention over all S keys in one tile (S = Q K^T / sqrt(D), probabilities rounded to dt, P V):
    `varlen` packed sequences (B = 1), Cu (nseg + 1,) the cu_seqlens read in the kernel, causal within a sequence;
    `prefix_lm` bidirectional over the first Ln[b] tokens, causal after; `chunked` Llama 4's chunked local attention
    (causal within chunks of C); `sigmoid` sigmoid attention (Ramapuram et al.): sigmoid(s - log S), no
    normalisation; `head_temp` a learned temperature per head Tp[b] (the rows' scale), causal."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((B, S, D), dt), K: T.Tensor((B, S, D), dt), V: T.Tensor((B, S, D), dt),
             Cu: T.Tensor((nseg + 1,), "int32"), Ln: T.Tensor((B,), "int32"), Tp: T.Tensor((B,), "float32"),
             O: T.Tensor((B, S, D), dt)):
        with T.Kernel(T.ceildiv(S, bq), B) as (bx, b):
            q = T.alloc_shared((bq, D), dt)
            k = T.alloc_shared((S, D), dt)
            v = T.alloc_shared((S, D), dt)
            s = T.alloc_fragment((bq, S), "float32")
            p = T.alloc_shared((bq, S), dt)
            sq = T.alloc_fragment((bq,), "int32")
            sk = T.alloc_fragment((S,), "int32")
            mx = T.alloc_fragment((bq,), "float32")
            sm = T.alloc_fragment((bq,), "float32")
            acc = T.alloc_fragment((bq, D), "float32")
            T.copy(Q[b, bx * bq, 0], q)
            T.copy(K[b, 0, 0], k)
            T.copy(V[b, 0, 0], v)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            if form == "varlen":
                T.clear(sq)
                T.clear(sk)
                for t in T.serial(1, nseg):
                    for i in T.Parallel(bq):
                        sq[i] = sq[i] + T.where(bx * bq + i >= Cu[t], 1, 0)
                    for j in T.Parallel(S):
                        sk[j] = sk[j] + T.where(j >= Cu[t], 1, 0)
                for i, j in T.Parallel(bq, S):
                    s[i, j] = T.where(sq[i] == sk[j] and j <= bx * bq + i, s[i, j] * scale, NEG)
            elif form == "prefix_lm":
                n = Ln[b]
                for i, j in T.Parallel(bq, S):
                    s[i, j] = T.where(j <= bx * bq + i or j < n, s[i, j] * scale, NEG)
            elif form == "chunked":
                for i, j in T.Parallel(bq, S):
                    s[i, j] = T.where(j <= bx * bq + i and j // C == (bx * bq + i) // C, s[i, j] * scale, NEG)
            elif form == "head_temp":
                tp = Tp[b]
                for i, j in T.Parallel(bq, S):
                    s[i, j] = T.where(j <= bx * bq + i, s[i, j] * scale / tp, NEG)
            if form == "sigmoid":
                for i, j in T.Parallel(bq, S):
                    p[i, j] = T.sigmoid(s[i, j] * scale - math.log(S))
            else:
                T.reduce_max(s, mx, dim=1)
                for i, j in T.Parallel(bq, S):
                    s[i, j] = T.exp(s[i, j] - mx[i])
                T.reduce_sum(s, sm, dim=1)
                for i, j in T.Parallel(bq, S):
                    p[i, j] = s[i, j] / sm[i]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O[b, bx * bq, 0])

    return main


def _attn38(form):
    def make(dt, shape, rng):
        B, S, D, nseg = shape
        q, k, v = randn(rng, (B, S, D), dt), randn(rng, (B, S, D), dt), randn(rng, (B, S, D), dt)
        cut = np.sort(rng.choice(np.arange(1, S), nseg - 1, replace=False)) if nseg > 1 else np.zeros(0, int)
        cu = np.concatenate([[0], cut, [S]]).astype(np.int32)
        ln = rng.integers(0, S + 1, B).astype(np.int32)
        tp = (0.5 + rng.random(B)).astype(np.float32)
        i = np.arange(S)[:, None]
        j = np.arange(S)[None, :]
        s = np.einsum("bqd,bkd->bqk", f64(q), f64(k)) / math.sqrt(D)
        causal = np.broadcast_to(j <= i, (B, S, S))
        if form == "varlen":
            seg = np.searchsorted(cu, np.arange(S), side="right") - 1
            keep = causal & (seg[:, None] == seg[None, :])[None]
        elif form == "prefix_lm":
            keep = causal | (j[None] < ln[:, None, None])
        elif form == "chunked":
            keep = causal & ((i // 8) == (j // 8))[None]
        elif form == "head_temp":
            s = s / f64(tp)[:, None, None]
            keep = causal
        else:
            keep = np.ones((B, S, S), bool)
        if form == "sigmoid":
            p = _sigm(s - math.log(S))
        else:
            s = np.where(keep, s, -np.inf)
            p = _softmax64(s.reshape(-1, S)).reshape(s.shape)
        ref = np.einsum("bqk,bkd->bqd", p, f64(v))
        tol = (1e-2, 1e-2) if dt == "bfloat16" else (2e-3, 2e-3)
        return attn38, (B, S, D, nseg, dt, form), [q, k, v, cu, ln, tp], [ref], {"tol": tol}
    return make


@tw.jit(out_idx=[-1])
def gqa38(B, Hq, Hkv, S, D, dt, bq=16):
    """Causal GQA with Hq query heads on Hkv KV heads (Hq / Hkv = 3: not a multiple of 8), one (b, h) per block
    row, the KV head h // (Hq // Hkv) copied in the kernel."""
    scale = 1.0 / math.sqrt(D)
    G = Hq // Hkv

    @T.prim_func
    def main(Q: T.Tensor((B, Hq, S, D), dt), K: T.Tensor((B, Hkv, S, D), dt), V: T.Tensor((B, Hkv, S, D), dt),
             O: T.Tensor((B, Hq, S, D), dt)):
        with T.Kernel(T.ceildiv(S, bq), B * Hq) as (bx, bh):
            q = T.alloc_shared((bq, D), dt)
            k = T.alloc_shared((S, D), dt)
            v = T.alloc_shared((S, D), dt)
            s = T.alloc_fragment((bq, S), "float32")
            p = T.alloc_shared((bq, S), dt)
            mx = T.alloc_fragment((bq,), "float32")
            sm = T.alloc_fragment((bq,), "float32")
            acc = T.alloc_fragment((bq, D), "float32")
            b = bh // Hq
            h = bh % Hq
            T.copy(Q[b, h, bx * bq, 0], q)
            T.copy(K[b, h // G, 0, 0], k)
            T.copy(V[b, h // G, 0, 0], v)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            for i, j in T.Parallel(bq, S):
                s[i, j] = T.where(j <= bx * bq + i, s[i, j] * scale, NEG)
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(bq, S):
                s[i, j] = T.exp(s[i, j] - mx[i])
            T.reduce_sum(s, sm, dim=1)
            for i, j in T.Parallel(bq, S):
                p[i, j] = s[i, j] / sm[i]
            T.clear(acc)
            T.gemm(p, v, acc)
            T.copy(acc, O[b, h, bx * bq, 0])

    return main


def _gqa(dt, shape, rng):
    B, Hq, Hkv, S, D = shape
    q, k, v = randn(rng, (B, Hq, S, D), dt), randn(rng, (B, Hkv, S, D), dt), randn(rng, (B, Hkv, S, D), dt)
    K, V = np.repeat(f64(k), Hq // Hkv, 1), np.repeat(f64(v), Hq // Hkv, 1)
    s = np.einsum("bhqd,bhkd->bhqk", f64(q), K) / math.sqrt(D)
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = _softmax64(s.reshape(-1, S)).reshape(s.shape)
    tol = (1e-2, 1e-2) if dt == "bfloat16" else (2e-3, 2e-3)
    return gqa38, (B, Hq, Hkv, S, D, dt), [q, k, v], [np.einsum("bhqk,bhkd->bhqd", p, V)], {"tol": tol}


# ----------------------------------------------------------------------------------------------- MoE / quantisation
@tw.jit(out_idx=[-1])
def group_topk(Tn, G, gs, kg, k, dt, bm=BM):
    """DeepSeek-style group-limited routing: s = sigmoid(x), selection scores s + bias (the aux-loss-free bias),
    the kg groups of highest max score by rank counting, then the top k experts of those groups by repeated argmax;
    weights s of the chosen experts normalised over them, 0 elsewhere. X (Tn, G, gs): the router logits viewed
    per group."""
    @T.prim_func
    def main(X: T.Tensor((Tn, G, gs), dt), Bias: T.Tensor((G, gs), "float32"), Wt: T.Tensor((Tn, G, gs), "float32")):
        with T.Kernel(T.ceildiv(Tn, bm)) as bx:
            s = T.alloc_fragment((bm, G, gs), "float32")
            m = T.alloc_fragment((bm, G, gs), "float32")
            sel = T.alloc_fragment((bm, G, gs), "float32")
            bias = T.alloc_fragment((G, gs), "float32")
            gsc = T.alloc_fragment((bm, G), "float32")
            rk3 = T.alloc_fragment((bm, G, G), "float32")
            rk = T.alloc_fragment((bm, G), "float32")
            mg = T.alloc_fragment((bm, G), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            tot = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0, 0], s)
            T.copy(Bias, bias)
            for i, g, c in T.Parallel(bm, G, gs):
                s[i, g, c] = T.sigmoid(s[i, g, c])
                m[i, g, c] = s[i, g, c] + bias[g, c]
            T.reduce_max(m, gsc, dim=2)
            for i, g, h in T.Parallel(bm, G, G):
                rk3[i, g, h] = T.where(gsc[i, h] > gsc[i, g] or (gsc[i, h] == gsc[i, g] and h < g), 1.0, 0.0)
            T.reduce_sum(rk3, rk, dim=2)
            for i, g, c in T.Parallel(bm, G, gs):
                m[i, g, c] = T.where(rk[i, g] < kg, m[i, g, c], NEG)
            T.clear(sel)
            for t in T.serial(k):
                T.reduce_max(m, mg, dim=2)
                T.reduce_max(mg, mx, dim=1)
                for i, g, c in T.Parallel(bm, G, gs):
                    sel[i, g, c] = T.where(m[i, g, c] == mx[i], 1.0, sel[i, g, c])
                    m[i, g, c] = T.where(m[i, g, c] == mx[i], 2 * NEG, m[i, g, c])
            for i, g, c in T.Parallel(bm, G, gs):
                s[i, g, c] = s[i, g, c] * sel[i, g, c]
            T.reduce_sum(s, mg, dim=2)
            T.reduce_sum(mg, tot, dim=1)
            for i, g, c in T.Parallel(bm, G, gs):
                s[i, g, c] = s[i, g, c] / tot[i]
            T.copy(s, Wt[bx * bm, 0, 0])

    return main


def _group_topk(dt, shape, rng):
    Tn, G, gs, kg, k = shape
    x = randn(rng, (Tn, G, gs), dt, 2.0)
    bias = (rng.standard_normal((G, gs)) * 0.1).astype(np.float32)
    s = _sigm(f64(x))
    m = s + f64(bias)
    gsc = m.max(2)
    ref = np.zeros_like(s)
    for t in range(Tn):
        groups = np.argsort(-gsc[t], kind="stable")[:kg]
        mm = np.full((G, gs), -np.inf)
        mm[groups] = m[t, groups]
        top = np.argsort(-mm.ravel(), kind="stable")[:k]
        w = np.zeros(G * gs)
        w[top] = s[t].ravel()[top]
        ref[t] = (w / w.sum()).reshape(G, gs)
    return group_topk, (Tn, G, gs, kg, k, dt), [x, bias], [ref]


@tw.jit(out_idx=[-1])
def aux_free_bias(Tn, K, E, dt, form, u=1e-3):
    """DeepSeek-V3's auxiliary-loss-free balancing step: load_e = #tokens routed to e (Ids (Tn, K) the top-k ids),
    bias_e += u * sign(mean load - load_e); `col` gathers the k-th id column into a 1-D tile first (F1's hint)."""
    @T.prim_func
    def main(Ids: T.Tensor((Tn, K), "int32"), Bias: T.Tensor((E,), "float32"), Nb: T.Tensor((E,), "float32")):
        with T.Kernel(1) as bx:
            ids = T.alloc_fragment((Tn, K), "int32")
            col = T.alloc_fragment((Tn,), "int32")
            oh = T.alloc_fragment((Tn, E), "float32")
            load = T.alloc_fragment((E,), "float32")
            b = T.alloc_fragment((E,), "float32")
            T.copy(Ids, ids)
            T.copy(Bias, b)
            T.clear(oh)
            for kk in T.serial(K):
                if form == "col":
                    for i in T.Parallel(Tn):
                        col[i] = ids[i, kk]
                    for i, e in T.Parallel(Tn, E):
                        oh[i, e] = oh[i, e] + T.where(col[i] == e, 1.0, 0.0)
                else:
                    for i, e in T.Parallel(Tn, E):
                        oh[i, e] = oh[i, e] + T.where(ids[i, kk] == e, 1.0, 0.0)
            T.reduce_sum(oh, load, dim=0)
            for e in T.Parallel(E):
                d = Tn * K / E - load[e]
                b[e] = b[e] + u * T.where(d > 0, 1.0, T.where(d < 0, -1.0, 0.0))
            T.copy(b, Nb)

    return main


def _aux_free(form):
    def make(dt, shape, rng):
        Tn, K, E = shape
        ids = np.stack([rng.choice(E, K, replace=False) for _ in range(Tn)]).astype(np.int32)
        bias = (rng.standard_normal(E) * 0.01).astype(np.float32)
        load = np.bincount(ids.ravel(), minlength=E)
        return aux_free_bias, (Tn, K, E, dt, form), [ids, bias], [f64(bias) + 1e-3 * np.sign(Tn * K / E - load)]
    return make


@tw.jit(out_idx=[-2, -1])
def block_scale(M, N, dt, blk, form):
    """FP8-style block-wise scaling (DeepSeek-V3's 128 x 128 weight blocks; blk here): s = amax(|x| of the block) /
    448, y = x / s; one block per grid cell, the tails masked by index; the scale stored by the scalar unit
    (`elem`) or through a (1, 1) tile (`tile`, the hint of ascend910b's error)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), "float32"),
             S: T.Tensor((T.ceildiv(M, blk), T.ceildiv(N, blk)), "float32")):
        with T.Kernel(T.ceildiv(M, blk), T.ceildiv(N, blk)) as (bx, by):
            x = T.alloc_fragment((blk, blk), "float32")
            ax = T.alloc_fragment((blk, blk), "float32")
            rm = T.alloc_fragment((blk,), "float32")
            am = T.alloc_fragment((1,), "float32")
            st = T.alloc_fragment((1, 1), "float32")
            T.copy(X[bx * blk, by * blk], x)
            for i, j in T.Parallel(blk, blk):
                ax[i, j] = T.where(bx * blk + i < M and by * blk + j < N, T.abs(x[i, j]), 0.0)
            T.reduce_max(ax, rm, dim=1)
            T.reduce_max(rm, am, dim=0)
            for i, j in T.Parallel(blk, blk):
                x[i, j] = x[i, j] / (T.max(am[0], 1e-12) / 448.0)
            if form == "tile":
                for i, j in T.Parallel(1, 1):
                    st[i, j] = T.max(am[0], 1e-12) / 448.0
                T.copy(st, S[bx, by])
            else:
                S[bx, by] = T.max(am[0], 1e-12) / 448.0
            T.copy(x, Y[bx * blk, by * blk])

    return main


def _block_scale(form):
    return lambda dt, shape, rng: _block_scale_make(dt, shape, rng, form)


def _block_scale_make(dt, shape, rng, form):
    M, N, blk = shape
    x = randn(rng, (M, N), dt, 3.0)
    X = f64(x)
    nb, nc = -(-M // blk), -(-N // blk)
    s = np.zeros((nb, nc))
    y = np.zeros_like(X)
    for a in range(nb):
        for c in range(nc):
            blkx = X[a * blk:(a + 1) * blk, c * blk:(c + 1) * blk]
            s[a, c] = max(np.abs(blkx).max(), 1e-12) / 448
            y[a * blk:(a + 1) * blk, c * blk:(c + 1) * blk] = blkx / np.float32(s[a, c])
    return block_scale, (M, N, dt, blk, form), [x], [y, s]


@tw.jit(out_idx=[-1])
def mx_scale(M, N, dt, bm=BM):
    """MX-style shared exponents (OCP microscaling, int8 elements): per block of 32 along the row e = floor(log2(
    amax)) - 6, q = clamp(floor(x / 2^e + 0.5), -127, 127), y = q 2^e (fake quantisation)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), N // 32) as (bx, by):
            x = T.alloc_fragment((bm, 32), "float32")
            ax = T.alloc_fragment((bm, 32), "float32")
            am = T.alloc_fragment((bm,), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, by * 32], x)
            for i, j in T.Parallel(bm, 32):
                ax[i, j] = T.abs(x[i, j])
            T.reduce_max(ax, am, dim=1)
            for i in T.Parallel(bm):
                sc[i] = T.exp2(T.floor(T.log2(T.max(am[i], 1e-30))) - 6.0)
            for i, j in T.Parallel(bm, 32):
                x[i, j] = T.min(T.max(T.floor(x[i, j] / sc[i] + 0.5), -127.0), 127.0) * sc[i]
            T.copy(x, Y[bx * bm, by * 32])

    return main


def _mx(dt, shape, rng):
    M, N = shape
    x = randn(rng, (M, N), dt, 3.0)
    X = f64(x).reshape(M, N // 32, 32)
    sc = np.exp2(np.floor(np.log2(np.maximum(np.abs(X).max(2, keepdims=True), 1e-30))) - 6)
    return mx_scale, (M, N, dt), [x], [(np.clip(np.floor(X / sc + 0.5), -127, 127) * sc).reshape(M, N)]


@tw.jit(out_idx=[-2, -1])
def int4_pack(M, N, dt, odt, bm=BM):
    """Symmetric int4 quantisation per row (s = amax / 7, q = clamp(floor(x / s + 0.5), -8, 7)) packed two per
    byte, P[i, j] = (q[i, 2j] & 15) | (q[i, 2j + 1] & 15) << 4 (the byte in an int32, or a uint8: torch.uint8's
    packed weight, computed in int32 and cast), S the row scales."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), P: T.Tensor((M, N // 2), odt), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            ax = T.alloc_fragment((bm, N), "float32")
            q = T.alloc_fragment((bm, N), "int32")
            p = T.alloc_fragment((bm, N // 2), odt)
            am = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                ax[i, j] = T.abs(x[i, j])
            T.reduce_max(ax, am, dim=1)
            for i in T.Parallel(bm):
                am[i] = T.max(am[i], 1e-8) / 7.0
            for i, j in T.Parallel(bm, N):
                q[i, j] = T.cast(T.min(T.max(T.floor(x[i, j] / am[i] + 0.5), -8.0), 7.0), "int32")
            for i, j in T.Parallel(bm, N // 2):
                p[i, j] = T.cast((q[i, 2 * j] & 15) | ((q[i, 2 * j + 1] & 15) << 4), odt)
            T.copy(p, P[bx * bm, 0])
            T.copy(am, S[bx * bm])

    return main


def _int4_pack(odt):
    def make(dt, shape, rng):
        M, N = shape
        x = randn(rng, (M, N), dt, 2.0)
        x32 = x.astype(np.float32)
        s = np.maximum(np.abs(x32).max(1), np.float32(1e-8)) / np.float32(7)
        q = np.clip(np.floor(x32 / s[:, None] + np.float32(0.5)), -8, 7).astype(np.int64)
        return int4_pack, (M, N, dt, odt), [x], [(q[:, 0::2] & 15) | ((q[:, 1::2] & 15) << 4), f64(s)]
    return make


# ----------------------------------------------------------------------------------------------- recurrent decode steps
@tw.jit(out_idx=[-2, -1])
def rec38(BH, dk, dv, dt, form):
    """One decode step of a matrix-state recurrence per (batch, head), the state S (dk, dv) in float32: `delta` the
    delta rule S += beta k (v - S^T k)^T; `gla` gated linear attention S = exp(g) (per key dim) * S + k v^T; then
    o = S^T q."""
    @T.prim_func
    def main(Qv: T.Tensor((BH, dk), dt), Kv: T.Tensor((BH, dk), dt), Vv: T.Tensor((BH, dv), dt),
             G: T.Tensor((BH, dk), "float32"), Beta: T.Tensor((BH,), "float32"), S0: T.Tensor((BH, dk, dv), "float32"),
             O: T.Tensor((BH, dv), "float32"), S1: T.Tensor((BH, dk, dv), "float32")):
        with T.Kernel(BH) as bh:
            st = T.alloc_fragment((dk, dv), "float32")
            tmp = T.alloc_fragment((dk, dv), "float32")
            q = T.alloc_fragment((dk,), "float32")
            k = T.alloc_fragment((dk,), "float32")
            g = T.alloc_fragment((dk,), "float32")
            v = T.alloc_fragment((dv,), "float32")
            kv = T.alloc_fragment((dv,), "float32")
            o = T.alloc_fragment((dv,), "float32")
            T.copy(S0[bh, 0, 0], st)
            T.copy(Qv[bh, :], q)
            T.copy(Kv[bh, :], k)
            T.copy(Vv[bh, :], v)
            T.copy(G[bh, :], g)
            if form == "delta":
                beta = Beta[bh]
                for d, e in T.Parallel(dk, dv):
                    tmp[d, e] = st[d, e] * k[d]
                T.reduce_sum(tmp, kv, dim=0)
                for d, e in T.Parallel(dk, dv):
                    st[d, e] = st[d, e] + beta * k[d] * (v[e] - kv[e])
            else:
                for d, e in T.Parallel(dk, dv):
                    st[d, e] = T.exp(g[d]) * st[d, e] + k[d] * v[e]
            for d, e in T.Parallel(dk, dv):
                tmp[d, e] = st[d, e] * q[d]
            T.reduce_sum(tmp, o, dim=0)
            T.copy(o, O[bh, :])
            T.copy(st, S1[bh, 0, 0])

    return main


def _rec(form):
    def make(dt, shape, rng):
        BH, dk, dv = shape
        q, k, v = randn(rng, (BH, dk), dt), randn(rng, (BH, dk), dt, 0.3), randn(rng, (BH, dv), dt)
        g = (-np.abs(rng.standard_normal((BH, dk))) * 0.2).astype(np.float32)
        beta = rng.random(BH).astype(np.float32)
        s0 = rng.standard_normal((BH, dk, dv)).astype(np.float32)
        Q, K, V, S = f64(q), f64(k), f64(v), f64(s0)
        if form == "delta":
            kv = np.einsum("bde,bd->be", S, K)
            S = S + f64(beta)[:, None, None] * K[:, :, None] * (V - kv)[:, None, :]
        else:
            S = np.exp(f64(g))[:, :, None] * S + K[:, :, None] * V[:, None, :]
        return rec38, (BH, dk, dv, dt, form), [q, k, v, g, beta, s0], [np.einsum("bde,bd->be", S, Q), S], \
            {"tol": (1e-4, 1e-4)}
    return make


@tw.jit(out_idx=[-4, -3, -2, -1])
def rwkv4_wkv(Bn, C, dt, bm=BM):
    """RWKV-4's WKV decode step with the (aa, bb, pp) state in its overflow-safe form, per (batch, channel);
    W the (negative) decay, Uf the bonus per channel."""
    @T.prim_func
    def main(W: T.Tensor((C,), "float32"), Uf: T.Tensor((C,), "float32"), K: T.Tensor((Bn, C), dt),
             V: T.Tensor((Bn, C), dt), A: T.Tensor((Bn, C), "float32"), Bb: T.Tensor((Bn, C), "float32"),
             Pp: T.Tensor((Bn, C), "float32"), Y: T.Tensor((Bn, C), "float32"), A1: T.Tensor((Bn, C), "float32"),
             B1: T.Tensor((Bn, C), "float32"), P1: T.Tensor((Bn, C), "float32")):
        with T.Kernel(T.ceildiv(Bn, bm)) as bx:
            w = T.alloc_fragment((C,), "float32")
            u = T.alloc_fragment((C,), "float32")
            k = T.alloc_fragment((bm, C), "float32")
            v = T.alloc_fragment((bm, C), "float32")
            aa = T.alloc_fragment((bm, C), "float32")
            bb = T.alloc_fragment((bm, C), "float32")
            pp = T.alloc_fragment((bm, C), "float32")
            y = T.alloc_fragment((bm, C), "float32")
            T.copy(W, w)
            T.copy(Uf, u)
            T.copy(K[bx * bm, 0], k)
            T.copy(V[bx * bm, 0], v)
            T.copy(A[bx * bm, 0], aa)
            T.copy(Bb[bx * bm, 0], bb)
            T.copy(Pp[bx * bm, 0], pp)
            for i, j in T.Parallel(bm, C):
                ww = u[j] + k[i, j]
                p = T.max(pp[i, j], ww)
                e1 = T.exp(pp[i, j] - p)
                e2 = T.exp(ww - p)
                y[i, j] = (e1 * aa[i, j] + e2 * v[i, j]) / (e1 * bb[i, j] + e2)
                ww2 = w[j] + pp[i, j]
                p2 = T.max(ww2, k[i, j])
                f1 = T.exp(ww2 - p2)
                f2 = T.exp(k[i, j] - p2)
                aa[i, j] = f1 * aa[i, j] + f2 * v[i, j]
                bb[i, j] = f1 * bb[i, j] + f2
                pp[i, j] = p2
            T.copy(y, Y[bx * bm, 0])
            T.copy(aa, A1[bx * bm, 0])
            T.copy(bb, B1[bx * bm, 0])
            T.copy(pp, P1[bx * bm, 0])

    return main


def _rwkv(dt, shape, rng):
    Bn, C = shape
    w = -np.exp(rng.standard_normal(C)).astype(np.float32)
    u = rng.standard_normal(C).astype(np.float32)
    k, v = randn(rng, (Bn, C), dt), randn(rng, (Bn, C), dt)
    aa = rng.standard_normal((Bn, C)).astype(np.float32)
    bb = (0.5 + rng.random((Bn, C))).astype(np.float32)
    pp = rng.standard_normal((Bn, C)).astype(np.float32)
    Wd, U, K, V, AA, BB, PP = map(f64, (w, u, k, v, aa, bb, pp))
    ww = U + K
    p = np.maximum(PP, ww)
    e1, e2 = np.exp(PP - p), np.exp(ww - p)
    y = (e1 * AA + e2 * V) / (e1 * BB + e2)
    ww = Wd + PP
    p = np.maximum(ww, K)
    e1, e2 = np.exp(ww - p), np.exp(K - p)
    return rwkv4_wkv, (Bn, C, dt), [w, u, k, v, aa, bb, pp], [y, e1 * AA + e2 * V, e1 * BB + e2, p], \
        {"tol": (2e-5, 1e-4)}


# ----------------------------------------------------------------------------------------------- index / misc
def _idx_out(M, N, K, form):
    return {"gather_neg": (M, K), "repeat_interleave": (M, 2 * N), "interleave": (M, 2 * N), "maxout": (M, N // K),
            "diag_embed": (M, N, N), "kth_value": (M,), "timestep_emb": (M, N)}.get(form, (M, N))


@tw.jit(out_idx=[-1])
def idx38(M, N, K, dt, form, bm=BM):
    """Index forms on (bm, N) tiles: `gather_neg` y[i, k] = x[i, idx[i, k]] with Python's negative indices;
    `roll` torch.roll(x, 3, -1); `repeat_interleave` (2, dim -1); `interleave` a and b alternately (torch.stack((a,
    b), -1).flatten(-2)); `channel_shuffle` (K groups); `maxout` (max of K consecutive); `diag_embed`; `kth_value`
    (the K-th smallest by rank counting); `argsort_scatter` / `argsort_onehot` (ascending, ties by index: the rank of
    each element, then the index stored at its rank / gathered by comparing ranks); `seg_cumsum` a cumsum that
    restarts where F[i, j] != 0; `timestep_emb` the diffusion sinusoidal embedding of t = Z[i, 0] ([cos, sin]
    halves)."""
    out = _idx_out(M, N, K, form)
    odt = "int32" if form.startswith("argsort") else "float32"
    H = N // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Z: T.Tensor((M, N), dt), Ix: T.Tensor((M, K), "int32"),
             F: T.Tensor((M, N), "int32"), Y: T.Tensor(out, odt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            z = T.alloc_fragment((bm, N), "float32")
            ix = T.alloc_fragment((bm, K), "int32")
            f = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Z[bx * bm, 0], z)
            T.copy(Ix[bx * bm, 0], ix)
            T.copy(F[bx * bm, 0], f)
            if form == "gather_neg":
                y = T.alloc_fragment((bm, K), "float32")
                for i, k in T.Parallel(bm, K):
                    y[i, k] = x[i, T.where(ix[i, k] < 0, ix[i, k] + N, ix[i, k])]
                T.copy(y, Y[bx * bm, 0])
            elif form in ("repeat_interleave", "interleave"):
                y = T.alloc_fragment((bm, 2 * N), "float32")
                for i, j in T.Parallel(bm, 2 * N):
                    if form == "interleave":
                        y[i, j] = T.where(j % 2 == 0, x[i, j // 2], z[i, j // 2])
                    else:
                        y[i, j] = x[i, j // 2]
                T.copy(y, Y[bx * bm, 0])
            elif form == "maxout":
                y = T.alloc_fragment((bm, N // K), "float32")
                T.fill(y, -T.infinity("float32"))
                for kk in T.serial(K):
                    for i, g in T.Parallel(bm, N // K):
                        y[i, g] = T.max(y[i, g], x[i, g * K + kk])
                T.copy(y, Y[bx * bm, 0])
            elif form == "diag_embed":
                y = T.alloc_fragment((bm, N, N), "float32")
                for i, j, k in T.Parallel(bm, N, N):
                    y[i, j, k] = T.where(j == k, x[i, j], 0.0)
                T.copy(y, Y[bx * bm, 0, 0])
            elif form in ("kth_value", "argsort_scatter", "argsort_onehot"):
                c3 = T.alloc_fragment((bm, N, N), "int32")
                rk = T.alloc_fragment((bm, N), "int32")
                for i, j, k in T.Parallel(bm, N, N):
                    c3[i, j, k] = T.where(x[i, k] < x[i, j] or (x[i, k] == x[i, j] and k < j), 1, 0)
                T.reduce_sum(c3, rk, dim=2)
                if form == "kth_value":
                    y = T.alloc_fragment((bm, N), "float32")
                    kv = T.alloc_fragment((bm,), "float32")
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = T.where(rk[i, j] == K - 1, x[i, j], 0.0)
                    T.reduce_sum(y, kv, dim=1)
                    T.copy(kv, Y[bx * bm])
                elif form == "argsort_scatter":
                    y = T.alloc_fragment((bm, N), "int32")
                    for i, j in T.Parallel(bm, N):
                        y[i, rk[i, j]] = j
                    T.copy(y, Y[bx * bm, 0])
                else:
                    y = T.alloc_fragment((bm, N), "int32")
                    for i, r, j in T.Parallel(bm, N, N):
                        c3[i, r, j] = T.where(rk[i, j] == r, j, 0)
                    T.reduce_sum(c3, y, dim=2)
                    T.copy(y, Y[bx * bm, 0])
            else:
                y = T.alloc_fragment((bm, N), "float32")
                if form == "roll":
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = x[i, (j + N - 3 % N) % N]
                elif form == "channel_shuffle":
                    for i, j in T.Parallel(bm, N):
                        y[i, j] = x[i, (j % K) * (N // K) + j // K]
                elif form == "seg_cumsum":
                    acc = T.alloc_fragment((bm,), "float32")
                    T.clear(acc)
                    for j in T.serial(N):
                        for i in T.Parallel(bm):
                            acc[i] = T.where(f[i, j] != 0, x[i, j], acc[i] + x[i, j])
                            y[i, j] = acc[i]
                else:  # timestep_emb
                    for i, j in T.Parallel(bm, N):
                        fr = T.exp(-math.log(10000.0) * (j % H) / H)
                        y[i, j] = T.where(j < H, T.cos(z[i, 0] * fr), T.sin(z[i, 0] * fr))
                T.copy(y, Y[bx * bm, 0])

    return main


def _idx(form):
    def make(dt, shape, rng):
        M, N, K = shape
        x, z = randn(rng, (M, N), dt), randn(rng, (M, N), dt)
        ix = rng.integers(-N, N, (M, K)).astype(np.int32)
        fl = (rng.random((M, N)) < 0.3).astype(np.int32)
        if form.startswith("argsort") or form == "kth_value":  # ties on purpose (by index)
            x = (rng.integers(-4, 5, (M, N)) * 0.5).astype(npdt(dt))
        if form == "timestep_emb":
            z = (rng.random((M, N)) * 1000).astype(np.float32).astype(npdt(dt))
        X, Z = f64(x), f64(z)
        if form == "gather_neg":
            ref = np.take_along_axis(X, np.where(ix < 0, ix + N, ix), 1)
        elif form == "roll":
            ref = np.roll(X, 3, -1)
        elif form == "repeat_interleave":
            ref = np.repeat(X, 2, -1)
        elif form == "interleave":
            ref = np.stack((X, Z), -1).reshape(M, 2 * N)
        elif form == "channel_shuffle":
            ref = X.reshape(M, K, N // K).transpose(0, 2, 1).reshape(M, N)
        elif form == "maxout":
            ref = X.reshape(M, N // K, K).max(-1)
        elif form == "diag_embed":
            ref = X[:, :, None] * np.eye(N)[None]
        elif form == "kth_value":
            ref = np.sort(X, 1)[:, K - 1]
        elif form.startswith("argsort"):
            ref = np.argsort(X, 1, kind="stable")
        elif form == "seg_cumsum":
            ref = np.zeros_like(X)
            for i in range(M):
                a = 0.0
                for j in range(N):
                    a = X[i, j] if fl[i, j] else a + X[i, j]
                    ref[i, j] = a
        else:
            # The angle as the kernel computes it in float32 (port38 M1: with float64's angle, z up to 1000 is off by
            # ~1000 * 2^-24 rad, 3.9e-5 in the sine): the exponent's float32 operations, exp rounded to float32, the
            # product rounded. What the reference does not model is bounded elementwise: T.exp's error (cpu's
            # documented rel 2.5e-7; the simulator's float64 exp rounded once, 2^-24) and the product's rounding of
            # it move t by <= |t| * (2.5e-7 + 2^-24 + 2^-24) < |t| * 2^-21; sin / cos are 1.53e-7 off for
            # |t| <= 400000 (docs/language.md), under 2^-22; so |out - ref| <= |t| * 2^-21 + 2^-22.
            H = N // 2
            f32 = np.float32
            a = f32(-math.log(10000.0)) * (np.arange(N) % H).astype(f32) / f32(H)
            fr = np.exp(a.astype(np.float64)).astype(f32)
            t = (Z[:, :1] * fr.astype(np.float64)).astype(f32).astype(np.float64)
            ref = np.where(np.arange(N) < H, np.cos(t), np.sin(t))
            return idx38, (M, N, K, dt, form), [x, z, ix, fl], [ref], {"bound": np.abs(t) * 2.0**-21 + 2.0**-22}
        return idx38, (M, N, K, dt, form), [x, z, ix, fl], [ref]
    return make


CASES = {
    # element-wise
    **{f: (_ew(f), F3, [(13, 37), (1, 1)]) for f in (
        "addcmul", "addcdiv", "hypot", "log_cosh", "swish_beta", "where_row", "where_col", "where_mixed",
        "band_part", "horner", "stochastic_round", "gaussian_nll", "poisson_nll", "margin_ranking",
        "hinge_embedding", "soft_margin", "mask_col_fill", "snake")},
    # rows
    **{f: (_row(f), F3, [(13, 37), (1, 1)]) for f in (
        "scalenorm", "layernorm_nobias", "prmsnorm", "safe_softmax", "softmin", "eps_sampling", "eta_sampling",
        "contrastive", "cfg", "router_z", "inverse_cdf", "js_div", "pearson", "cosine_embedding", "merge_states",
        "seq_ppl")},
    "welford": (_row("welford"), F3, [(13, 40), (1, 8)]),
    # attention
    "varlen_cu_seqlens": (_attn38("varlen"), H16, [(1, 45, 16, 4), (1, 2, 16, 2)]),
    "prefix_lm": (_attn38("prefix_lm"), H16, [(2, 37, 16, 1), (1, 1, 16, 1)]),
    "chunked_local": (_attn38("chunked"), H16, [(2, 37, 16, 1), (1, 1, 16, 1)]),
    "sigmoid_attn": (_attn38("sigmoid"), H16, [(2, 37, 16, 1), (1, 1, 16, 1)]),
    "head_temp": (_attn38("head_temp"), H16, [(2, 37, 16, 1), (1, 1, 16, 1)]),
    "gqa_6_2": (_gqa, H16, [(2, 6, 2, 37, 16), (1, 3, 1, 1, 16)]),
    # MoE / quantisation
    "group_limited_topk": (_group_topk, F3, [(13, 4, 4, 2, 3), (1, 2, 1, 1, 1)]),
    "aux_free_bias": (_aux_free("map"), ("float32",), [(37, 2, 8), (1, 1, 2)]),
    "aux_free_bias_col": (_aux_free("col"), ("float32",), [(37, 2, 8), (1, 1, 2)]),
    "block_scale_2d": (_block_scale("elem"), F3, [(37, 45, 16), (1, 1, 16)]),
    "block_scale_2d_tile": (_block_scale("tile"), F3, [(37, 45, 16), (1, 1, 16)]),
    "mx_shared_exp": (_mx, F3, [(13, 64), (1, 32)]),
    "int4_sym_pack": (_int4_pack("int32"), F3, [(13, 38), (1, 2)]),
    # recurrent decode steps
    "delta_rule_step": (_rec("delta"), F3, [(3, 16, 24), (1, 1, 1)]),
    "gla_step": (_rec("gla"), F3, [(3, 16, 24), (1, 1, 1)]),
    "rwkv4_wkv": (_rwkv, F3, [(13, 37), (1, 1)]),
    # index / misc
    "gather_neg": (_idx("gather_neg"), F3, [(13, 37, 5), (1, 1, 1)]),
    "roll": (_idx("roll"), F3, [(13, 37, 1), (1, 1, 1)]),
    "repeat_interleave": (_idx("repeat_interleave"), F3, [(13, 37, 1), (1, 1, 1)]),
    "interleave": (_idx("interleave"), F3, [(13, 37, 1), (1, 1, 1)]),
    "channel_shuffle": (_idx("channel_shuffle"), F3, [(13, 36, 4), (1, 2, 2)]),
    "maxout": (_idx("maxout"), F3, [(13, 36, 3), (1, 3, 3)]),
    "diag_embed": (_idx("diag_embed"), F3, [(13, 9, 1), (1, 1, 1)]),
    "kth_value": (_idx("kth_value"), F3, [(13, 11, 3), (1, 1, 1)]),
    "argsort_scatter": (_idx("argsort_scatter"), F3, [(13, 11, 1), (1, 1, 1)]),
    "argsort_onehot": (_idx("argsort_onehot"), F3, [(13, 11, 1), (1, 1, 1)]),
    "seg_cumsum": (_idx("seg_cumsum"), ("float32",), [(13, 37, 1), (1, 1, 1)]),
    "timestep_emb": (_idx("timestep_emb"), ("float32",), [(13, 32, 1), (1, 2, 1)]),
}


# ------------------------------------------------------------------------------------- gemms, decode masks, scans
@tw.jit(out_idx=[-1])
def blockscaled_gemm(M, N, K, dt, form, bm=16, bn=32, bk=32):
    """DeepSeek-V3's block-scaled gemm (fp8 in the original; dt here): A (M, K) with a scale per token and K block
    Sa (M, K / bk), B (N, K) with a scale per (N, K) block Sb (N / bn, K / bk); each K block's product scaled
    and added: acc += (a b^T) * Sa[i, kb] * Sb[nb, kb]. `map` reads sa[i, kb] of the (bm, K / bk) tile in the map;
    `col` copies the column into a 1-D tile first."""
    KB = K // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), dt), B: T.Tensor((N, K), dt), Sa: T.Tensor((M, KB), "float32"),
             Sb: T.Tensor((N // bn, KB), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), dt)
            b = T.alloc_shared((bn, bk), dt)
            c = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            sa = T.alloc_fragment((bm, KB), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            T.copy(Sa[by * bm, 0], sa)
            T.clear(acc)
            for kb in T.serial(KB):
                T.copy(A[by * bm, kb * bk], a)
                T.copy(B[bx * bn, kb * bk], b)
                T.clear(c)
                T.gemm(a, b, c, transpose_B=True)
                sb = Sb[bx, kb]
                if form == "col":
                    for i in T.Parallel(bm):
                        sc[i] = sa[i, kb]
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] = acc[i, j] + c[i, j] * sc[i] * sb
                else:
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] = acc[i, j] + c[i, j] * sa[i, kb] * sb
            T.copy(acc, C[by * bm, bx * bn])

    return main


def _bsgemm(form):
    def make(dt, shape, rng):
        M, N, K = shape
        a, b = randn(rng, (M, K), dt), randn(rng, (N, K), dt)
        sa = (0.5 + rng.random((M, K // 32))).astype(np.float32)
        sb = (0.5 + rng.random((N // 32, K // 32))).astype(np.float32)
        A, Bm = f64(a).reshape(M, K // 32, 32), f64(b).reshape(N, K // 32, 32)
        part = np.einsum("mkd,nkd->mnk", A, Bm)
        ref = (part * f64(sa)[:, None, :] * np.repeat(f64(sb), 32, 0)[None]).sum(-1)
        return blockscaled_gemm, (M, N, K, dt, form), [a, b, sa, sb], [ref], {"tol": (1e-3, 1e-3)}
    return make


@tw.jit(out_idx=[-1])
def lora_clip(M, N, K, r, dt, form, bm=16, bn=32):
    """Two-gemm forms: `lora` y = x W^T + s (x A^T) B^T (the low-rank product rounded to dt between the gemms, s =
    2); `clip` CLIP's logits exp(t) * normalize(x) normalize(w)^T (rows of X and W normalised in float32, rounded to
    dt before the gemm), t a learned log-scale read from a tensor, exp(t) a let (`clip`) or in the map (`clip_map`,
    the hint of ascend910b's error)."""
    @T.prim_func
    def main(X: T.Tensor((M, K), dt), W: T.Tensor((N, K), dt), A: T.Tensor((r, K), dt), Bt: T.Tensor((N, r), dt),
             Ls: T.Tensor((1,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_shared((bm, K), dt)
            w = T.alloc_shared((bn, K), dt)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, 0], x)
            T.copy(W[bx * bn, 0], w)
            T.clear(acc)
            if form == "lora":
                a = T.alloc_shared((r, K), dt)
                bt = T.alloc_shared((bn, r), dt)
                xa = T.alloc_fragment((bm, r), "float32")
                xah = T.alloc_shared((bm, r), dt)
                T.copy(A, a)
                T.copy(Bt[bx * bn, 0], bt)
                T.gemm(x, w, acc, transpose_B=True)
                T.clear(xa)
                T.gemm(x, a, xa, transpose_B=True)
                for i, j in T.Parallel(bm, r):
                    xah[i, j] = T.cast(xa[i, j] * 2.0, dt)
                T.gemm(xah, bt, acc, transpose_B=True)
            else:
                xf = T.alloc_fragment((bm, K), "float32")
                wf = T.alloc_fragment((bn, K), "float32")
                sq = T.alloc_fragment((bm, K), "float32")
                sw = T.alloc_fragment((bn, K), "float32")
                nx = T.alloc_fragment((bm,), "float32")
                nw = T.alloc_fragment((bn,), "float32")
                xn = T.alloc_shared((bm, K), dt)
                wn = T.alloc_shared((bn, K), dt)
                T.copy(x, xf)
                T.copy(w, wf)
                for i, k in T.Parallel(bm, K):
                    sq[i, k] = xf[i, k] * xf[i, k]
                for i, k in T.Parallel(bn, K):
                    sw[i, k] = wf[i, k] * wf[i, k]
                T.reduce_sum(sq, nx, dim=1)
                T.reduce_sum(sw, nw, dim=1)
                for i in T.Parallel(bm):
                    nx[i] = T.rsqrt(T.max(nx[i], 1e-12))
                for i in T.Parallel(bn):
                    nw[i] = T.rsqrt(T.max(nw[i], 1e-12))
                for i, k in T.Parallel(bm, K):
                    xn[i, k] = T.cast(xf[i, k] * nx[i], dt)
                for i, k in T.Parallel(bn, K):
                    wn[i, k] = T.cast(wf[i, k] * nw[i], dt)
                T.gemm(xn, wn, acc, transpose_B=True)
                if form == "clip_map":
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] = acc[i, j] * T.exp(Ls[0])
                else:
                    sc = T.exp(Ls[0])
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] = acc[i, j] * sc
            T.copy(acc, Y[by * bm, bx * bn])

    return main


def _lora_clip(form):
    def make(dt, shape, rng):
        M, N, K, r = shape
        x, w = randn(rng, (M, K), dt), randn(rng, (N, K), dt, 0.3)
        a, bt = randn(rng, (r, K), dt, 0.3), randn(rng, (N, r), dt, 0.3)
        ls = np.array([math.log(10.0)], np.float32)
        X, Wm = f64(x), f64(w)
        if form == "lora":
            ref = X @ Wm.T + 2.0 * (X @ f64(a).T) @ f64(bt).T
        else:
            xn = X / np.sqrt(np.maximum((X * X).sum(1, keepdims=True), 1e-12))
            wn = Wm / np.sqrt(np.maximum((Wm * Wm).sum(1, keepdims=True), 1e-12))
            ref = 10.0 * xn @ wn.T
        tol = (3e-2, 2e-2) if dt == "bfloat16" else (4e-3, 3e-3)
        return lora_clip, (M, N, K, r, dt, form), [x, w, a, bt, ls], [ref], {"tol": tol}
    return make


@tw.jit(out_idx=[-1])
def no_repeat_bigram(Bn, L, V, form, bm=BM):
    """HF's no_repeat_ngram_size=2 on a decode step: ban token v where some t has h[t] == h[L-1] and h[t+1] == v
    (H (Bn, L) the history, int32); `map` reads h[i, t], h[i, t + 1] of the (bm, L) tile in the (bm, V) map; `col`
    copies the two columns into 1-D tiles first (F1's hint)."""
    @T.prim_func
    def main(X: T.Tensor((Bn, V), "float32"), H: T.Tensor((Bn, L), "int32"), Y: T.Tensor((Bn, V), "float32")):
        with T.Kernel(T.ceildiv(Bn, bm)) as bx:
            x = T.alloc_fragment((bm, V), "float32")
            h = T.alloc_fragment((bm, L), "int32")
            last = T.alloc_fragment((bm,), "int32")
            c0 = T.alloc_fragment((bm,), "int32")
            c1 = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(H[bx * bm, 0], h)
            for i in T.Parallel(bm):
                last[i] = h[i, L - 1]
            for t in T.serial(L - 1):
                if form == "col":
                    for i in T.Parallel(bm):
                        c0[i] = h[i, t]
                        c1[i] = h[i, t + 1]
                    for i, v in T.Parallel(bm, V):
                        x[i, v] = T.where(c0[i] == last[i] and c1[i] == v, NEG, x[i, v])
                else:
                    for i, v in T.Parallel(bm, V):
                        x[i, v] = T.where(h[i, t] == last[i] and h[i, t + 1] == v, NEG, x[i, v])
            T.copy(x, Y[bx * bm, 0])

    return main


def _no_repeat(form):
    def make(dt, shape, rng):
        Bn, L, V = shape
        x = rng.standard_normal((Bn, V)).astype(np.float32)
        h = rng.integers(0, min(V, 5), (Bn, L)).astype(np.int32)
        ref = f64(x).copy()
        for b in range(Bn):
            for t in range(L - 1):
                if h[b, t] == h[b, L - 1]:
                    ref[b, h[b, t + 1]] = NEG
        return no_repeat_bigram, (Bn, L, V, form), [x, h], [ref]
    return make


@tw.jit(out_idx=[-1])
def scan38(M, L, dt, form, bm=BM):
    """`segsum` Mamba-2's exp(segsum): Y[i, a, b] = exp(cs[a] - cs[b]) for a >= b else 0, cs the row's cumsum of
    X (the log decays), (M, L, L); `welford_stream` a streaming mean / variance over the row's L values, one step
    per column (Welford's update), Y[i, 0, :] = the running means, Y[i, 1, :] the running population variances."""
    @T.prim_func
    def main(X: T.Tensor((M, L), dt), Y: T.Tensor((M, L, L), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, L), "float32")
            y = T.alloc_fragment((bm, L, L), "float32")
            T.copy(X[bx * bm, 0], x)
            if form == "segsum":
                for t in T.serial(1, L):
                    for i in T.Parallel(bm):
                        x[i, t] = x[i, t] + x[i, t - 1]
                for i, a, b in T.Parallel(bm, L, L):
                    y[i, a, b] = T.where(a >= b, T.exp(x[i, a] - x[i, b]), 0.0)
            else:
                mean = T.alloc_fragment((bm,), "float32")
                m2 = T.alloc_fragment((bm,), "float32")
                T.clear(mean)
                T.clear(m2)
                T.clear(y)
                for t in T.serial(L):
                    for i in T.Parallel(bm):
                        d = x[i, t] - mean[i]
                        mean[i] = mean[i] + d / (t + 1)
                        m2[i] = m2[i] + d * (x[i, t] - mean[i])
                        y[i, 0, t] = mean[i]
                        y[i, 1, t] = m2[i] / (t + 1)
            T.copy(y, Y[bx * bm, 0, 0])

    return main


def _scan(form):
    def make(dt, shape, rng):
        M, L = shape
        x = randn(rng, (M, L), dt, 0.5)
        if form == "segsum":
            x = (-np.abs(f64(x))).astype(npdt(dt))
        X = f64(x)
        ref = np.zeros((M, L, L))
        if form == "segsum":
            cs = np.cumsum(X, 1)
            ref = np.where(np.tril(np.ones((L, L), bool))[None], np.exp(cs[:, :, None] - cs[:, None, :]), 0.0)
        else:
            n = np.arange(1, L + 1)
            mean = np.cumsum(X, 1) / n
            ref[:, 0] = mean
            ref[:, 1] = np.cumsum(X * X, 1) / n - mean ** 2
        return scan38, (M, L, dt, form), [x], [ref], {"tol": (2e-5, 1e-4)}
    return make


@tw.jit(out_idx=[-1])
def gather_i64(M, N, K, dt, bm=BM):
    """gather along the last axis with torch.long (int64) indices, negative ones wrapped (Python's rule)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Ix: T.Tensor((M, K), "int64"), Y: T.Tensor((M, K), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            ix = T.alloc_fragment((bm, K), "int64")
            y = T.alloc_fragment((bm, K), dt)
            T.copy(X[bx * bm, 0], x)
            T.copy(Ix[bx * bm, 0], ix)
            for i, k in T.Parallel(bm, K):
                y[i, k] = x[i, T.where(ix[i, k] < 0, ix[i, k] + N, ix[i, k])]
            T.copy(y, Y[bx * bm, 0])

    return main


def _gather_i64(dt, shape, rng):
    M, N, K = shape
    x = randn(rng, (M, N), dt)
    ix = rng.integers(-N, N, (M, K)).astype(np.int64)
    return gather_i64, (M, N, K, dt), [x, ix], [np.take_along_axis(f64(x), np.where(ix < 0, ix + N, ix), 1)]


CASES.update({
    "blockscaled_gemm": (_bsgemm("map"), H16, [(37, 64, 96), (1, 32, 32)]),
    "blockscaled_gemm_col": (_bsgemm("col"), H16, [(37, 64, 96), (1, 32, 32)]),
    "lora_linear": (_lora_clip("lora"), H16, [(37, 40, 32, 16), (1, 1, 16, 16)]),
    "clip_logits": (_lora_clip("clip"), H16, [(37, 40, 32, 16), (1, 1, 16, 16)]),
    "clip_logits_map": (_lora_clip("clip_map"), H16, [(37, 40, 32, 16), (1, 1, 16, 16)]),
    "no_repeat_bigram": (_no_repeat("map"), ("float32",), [(13, 9, 37), (1, 2, 1)]),
    "no_repeat_bigram_col": (_no_repeat("col"), ("float32",), [(13, 9, 37), (1, 2, 1)]),
    "mamba2_segsum": (_scan("segsum"), F3, [(13, 9), (1, 2)]),
    "welford_stream": (_scan("welford_stream"), F3, [(13, 9), (1, 2)]),
    "gather_neg_i64": (_gather_i64, F3, [(13, 37, 5), (1, 1, 1)]),
    "int4_sym_pack_u8": (_int4_pack("uint8"), F3, [(13, 38), (1, 2)]),
})

check = functools.partial(P35.check, cases=CASES)
run = functools.partial(P35.run, cases=CASES)


if __name__ == "__main__":
    import sys
    args = sys.argv[1:]
    targets = ("cpu", "ascend910b")
    if args and args[0].startswith("--target="):
        targets, args = tuple(args[0].split("=", 1)[1].split(",")), args[1:]
    P35.probe(args, targets, cases=CASES)
