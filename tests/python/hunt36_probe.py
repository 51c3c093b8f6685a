"""hunt36's probes (issue 13; docs/testing.md "Session 36: hunt36"), run by hand:

    cd tests/python && ../../.venv/bin/python hunt36_probe.py [NAME-SUBSTRING ...]
    TW_BOUNDS_CHECK=1 ../../.venv/bin/python hunt36_probe.py atomic wrapped index_mask   # checked cpu code

Each probe builds kernels the way docs/ and examples/ write them, runs them on cpu and on ascend910b (the
simulator's checker on: a report is a finding) and compares with numpy / exact Python integers: one line per
case, "ok" or ERROR / CRASH / REPORT / WRONG with the details. Families: outputs only T.atomic_add writes,
more than five Cube / vector hand-offs (an MLP written out), wrapped int32 hashes, index-mask bool lets, NaN
through row-max consumers (mark_nan_unobserved), scalar hashes and int64 scalars."""
import os, sys, traceback
import numpy as np
import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

ASC = "ascend910b"
PROBES = []
_GEN = [0]


def exec_src(src, name="make"):
    """Writes src into a module file (the front end reads kernels' source) and returns its `name`."""
    import importlib.util, tempfile
    _GEN[0] += 1
    d = os.path.join(tempfile.gettempdir(), "hunt36_gen")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"g{os.getpid()}_{_GEN[0]}.py")
    with open(path, "w") as f:
        f.write("import tilewright.language as T\n" + src)
    spec = importlib.util.spec_from_file_location(f"g{os.getpid()}_{_GEN[0]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def probe(f):
    PROBES.append(f)
    return f


def worst(got, ref, tol):
    got = np.asarray(got, np.float64); ref = np.asarray(ref, np.float64).reshape(got.shape)
    atol, rtol = tol
    ok = (np.isnan(got) & np.isnan(ref)) | (np.isinf(got) & (got == ref))
    err = np.abs(got - ref) / (atol + rtol * np.abs(ref) + 1e-300)
    err = np.where(ok, 0.0, err); err = np.where(np.isnan(err), np.inf, err)
    return float(err.max()) if err.size else 0.0


def run(name, prim, out_idx, args, ref, tol=(0, 0), targets=("cpu", ASC), outs=None):
    """Returns a verdict string; prints it."""
    verdict = []
    res = {}
    refs = ref if isinstance(ref, list) else [ref]
    for t in targets:
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        try:
            k = tw.compile(prim, target=t, out_idx=out_idx)
            if t == "cpu":
                r = k(*a); reps = []
            else:
                p = k.profile(*a); r = p.outputs; reps = list(p["reports"])
            got = outs(r, a) if outs else (list(r) if isinstance(r, (list, tuple)) else [r])
        except tw.TilewrightError as e:
            verdict.append(f"{t}: ERROR {str(e).strip().splitlines()[0][:300]}")
            continue
        except Exception as e:
            verdict.append(f"{t}: CRASH {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc()
            continue
        res[t] = got
        w = max(worst(g, rf, tol) for g, rf in zip(got, refs))
        if reps:
            verdict.append(f"{t}: REPORT {reps[0][:300]}")
        if w > 1:
            verdict.append(f"{t}: WRONG {w:.3g}x tol")
    v = "; ".join(verdict) or "ok"
    print(f"{name}: {v}", flush=True)
    return v


# --------------------------------------------------------------------------- atomic_add outputs
@probe
def atomic_two_outputs():
    n, bm = 37, 16
    @T.prim_func
    def k(X: T.Tensor((n,), "float32"), S: T.Tensor((1,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, bm)) as b:
            t = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[b * bm], t)
            T.reduce_sum(t, s, dim=0)
            T.atomic_add(S[0], s[0])
            T.copy(t, Y[b * bm])
    x = np.arange(n, dtype=np.float32)
    run("atomic_two_outputs", k, [-2, -1], [x], [np.array([x.sum()]), x])


@probe
def atomic_convert_16bit():
    for dt in ("float16", "bfloat16"):
        M, N, S, bm = 17, 33, 3, 16
        @T.prim_func
        def k(X: T.Tensor((S, M, N), "float32"), Y: T.Tensor((M, N), dt)):
            with T.Kernel(T.ceildiv(M, bm), S) as (i, s):
                t = T.alloc_fragment((bm, N), "float32")
                T.copy(X[s, i * bm, 0], t)
                T.atomic_add(Y[i * bm, 0], t)
        x = (np.random.default_rng(1).integers(-4, 4, (S, M, N)) / 2).astype(np.float32)
        run(f"atomic_convert_{dt}", k, [-1], [x], x.sum(0))


@probe
def atomic_guarded():
    n, nv = 20, 13
    @T.prim_func
    def k(X: T.Tensor((n,), "int32"), Y: T.Tensor((4,), "int32")):
        with T.Kernel(n) as b:
            if b < nv:
                T.atomic_add(Y[X[b]], b)
    x = np.random.default_rng(2).integers(0, 4, n).astype(np.int32)
    ref = np.zeros(4); np.add.at(ref, x[:nv], np.arange(nv))
    run("atomic_guarded", k, [-1], [x], ref)


@probe
def atomic_serial_loop_scalar():
    n, bins = 50, 7
    @T.prim_func
    def k(X: T.Tensor((n,), "int32"), W: T.Tensor((n,), "float32"), H: T.Tensor((bins,), "float32")):
        with T.Kernel(5) as b:
            for i in T.serial(n // 5):
                T.atomic_add(H[X[b * (n // 5) + i]], W[b * (n // 5) + i])
    rng = np.random.default_rng(3)
    x = rng.integers(0, bins, n).astype(np.int32); w = rng.integers(-3, 4, n).astype(np.float32)
    ref = np.zeros(bins); np.add.at(ref, x, w)
    run("atomic_serial_loop_scalar", k, [-1], [x, w], ref)


@probe
def atomic_splitk_gemm_outidx():
    for dt, acc in (("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"), ("int8", "int32")):
        M, N, K, bm, bn, bk, parts = 33, 17, 100, 32, 32, 32, 3
        kp = -(-(-(-K // parts)) // bk) * bk   # a multiple of bk: parts do not overlap
        @T.prim_func
        def k(A: T.Tensor((M, K), dt), B: T.Tensor((N, K), dt), C: T.Tensor((M, N), acc)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), parts) as (bx, by, p):
                a = T.alloc_shared((bm, bk), dt)
                bb = T.alloc_shared((bn, bk), dt)
                c = T.alloc_fragment((bm, bn), acc)
                T.clear(c)
                for kk in T.serial(T.ceildiv(kp, bk)):
                    T.copy(A[by * bm, p * kp + kk * bk], a)
                    T.copy(B[bx * bn, p * kp + kk * bk], bb)
                    T.gemm(a, bb, c, transpose_B=True)
                T.atomic_add(C[by * bm, bx * bn], c)
        rng = np.random.default_rng(4)
        if dt == "int8":
            a = rng.integers(-4, 5, (M, K)).astype(np.int8); b = rng.integers(-4, 5, (N, K)).astype(np.int8)
        else:
            a = (rng.integers(-4, 5, (M, K)) / 2).astype(np_dtype(dt)); b = (rng.integers(-4, 5, (N, K)) / 2).astype(np_dtype(dt))
        run(f"atomic_splitk_gemm_{dt}", k, [-1], [a, b], a.astype(np.float64) @ b.astype(np.float64).T)


@probe
def atomic_jit_outidx():
    @tw.jit(out_idx=[-1])
    def fac(n, rows, target="cpu"):
        @T.prim_func
        def k(I: T.Tensor((n,), "int32"), H: T.Tensor((rows, 3), "int32")):
            with T.Kernel(n) as b:
                t = T.alloc_fragment((3,), "int32")
                T.fill(t, 1)
                T.atomic_add(H[I[b], 0], t)
        return k
    idx = np.random.default_rng(5).integers(0, 6, 40).astype(np.int32)
    ref = np.zeros((6, 3)); np.add.at(ref, idx, 1)
    for t in ("cpu", ASC):
        kk = fac(40, 6, target=t)
        r1 = kk(idx); r2 = kk(idx)
        print(f"atomic_jit_outidx {t}:", "ok" if (np.array_equal(r1, ref) and np.array_equal(r2, ref)) else f"WRONG {r1} {r2}")


@probe
def atomic_pipelined():
    M, K, bk = 9, 1000, 64
    @T.prim_func
    def k(X: T.Tensor((M, K), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(K, bk)) as b:
            t = T.alloc_fragment((M, bk), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.copy(X[0, b * bk], t)
            T.reduce_sum(t, s, dim=1)
            T.atomic_add(Y[0], s)
    x = (np.random.default_rng(6).integers(-4, 4, (M, K)) / 4).astype(np.float32)
    run("atomic_colsum_tail", k, [-1], [x], x.sum(1))


@probe
def atomic_symbolic_empty():
    n = T.symbolic("n")
    @T.prim_func
    def k(X: T.Tensor((n, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(n) as b:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X[b, 0], t)
            T.atomic_add(Y[0], t)
    for nn in (0, 1, 3):
        x = np.ones((nn, 8), np.float32)
        run(f"atomic_symbolic_empty n={nn}", k, [-1], [x], x.sum(0))


# --------------------------------------------------------------------------- > 5 hand-offs
def mlp_ref(x, w, L):
    h = x.astype(np.float64)
    for l in range(L):
        h = h @ w[l].astype(np.float64)
        if l < L - 1:
            h = np.maximum(h, 0) * 0.5
            h = h.astype(x.dtype).astype(np.float64)
    return h

def mlp_text(L, M, D, bm, dt, looped):
    """mlp with the layers written out (L copies in the source: the hand-offs are 2L distinct statements)."""
    body = []
    for l in range(L):
        body += [f"                T.copy(W[{l}, 0, 0], ws)", "                T.gemm(xs, ws, acc, clear_accum=True)"]
        if l < L - 1:
            body += ["                for i, j in T.Parallel(bm, D):",
                     "                    h[i, j] = T.max(acc[i, j], 0.0) * 0.5",
                     "                T.copy(h, xs)"]
    src = f"""
def make(L, M, D, bm, dt, looped):
    @T.prim_func
    def k(X: T.Tensor((M, D), dt), W: T.Tensor((L, D, D), dt), Y: T.Tensor((M, D), "float32")):
        with T.Kernel(1 if looped else T.ceildiv(M, bm)) as b:
            xs = T.alloc_shared((bm, D), dt)
            ws = T.alloc_shared((D, D), dt)
            acc = T.alloc_fragment((bm, D), "float32")
            h = T.alloc_fragment((bm, D), "float32")
            for r in T.serial(T.ceildiv(M, bm) if looped else 1):
                row = (r if looped else b) * bm
                T.copy(X[row, 0], xs)
""" + "\n".join(body) + """
                T.copy(acc, Y[row, 0])
    return k
"""
    return exec_src(src)(L, M, D, bm, dt, looped)

@probe
def handoffs_written_out():
    rng = np.random.default_rng(8)
    for L in (3, 4, 6, 8):
        for dt in ("float16", "bfloat16"):
            for looped in (False, True):
                M, D, bm = 37, 32, 16
                x = (rng.integers(-4, 5, (M, D)) / 4).astype(np_dtype(dt))
                w = (rng.integers(-4, 5, (L, D, D)) / 8).astype(np_dtype(dt))
                k = mlp_text(L, M, D, bm, dt, looped)
                v = run(f"handoffs_written_out L={L} {dt} looped={looped}", k, [-1], [x, w], mlp_ref(x, w, L), tol=(2e-2, 2e-2))
                if v == "ok":
                    prog = tw.compile(k, target=ASC, out_idx=[-1]).get_source("ascend_program")
                    import re
                    ids = sorted(set(re.findall(r"(?:CrossCoreSetFlag|cross_set|SetFlag)\S*\s*(\d+)", prog)))
                    print("   cross ids:", ids[:20], " lines with 'cross':", sum("ross" in ln for ln in prog.splitlines()))


# --------------------------------------------------------------------------- NaN through max reductions
def nan_kernel(form, M, N, bm, dt, keep_max):
    """A row max and its consumer `form`; keep_max: the max is an output too (Mx), else only Y sees it."""
    @T.prim_func
    def k(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt), Mx: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            m = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, m, dim=1)
            if form == "softmax":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, s, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] / s[i]
            elif form == "argmax":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(x[i, j] == m[i], j * 1.0, N * 1.0)
            elif form == "maxnorm":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] / T.max(m[i], 1.0)
            elif form == "softmax_nomx":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, s, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(s[i] > 0, x[i, j] / s[i], 0.0)
            elif form == "shift_exp_clamp":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.min(T.exp(x[i, j] - m[i]), 0.5)
            elif form == "twomax":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_max(x, s, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * bm, 0])
            if keep_max:
                T.copy(m, Mx[bx * bm])
    return k

@probe
def nan_max():
    for form in ("softmax", "argmax", "maxnorm", "softmax_nomx", "shift_exp_clamp", "twomax"):
        for dt in ("float32", "float16"):
            M, N, bm = 9, 37, 4
            rng = np.random.default_rng(9)
            x = (rng.integers(-8, 9, (M, N)) / 4).astype(np_dtype(dt))
            x[1, 3] = np.nan; x[4, :] = np.nan; x[6, 36] = np.nan; x[7, 0] = np.inf; x[8, 5] = -np.inf
            f = x.astype(np.float64)
            with np.errstate(all="ignore"):
                m = f.max(axis=1)
                e = np.exp(f - m[:, None])
                if form in ("softmax", "softmax_nomx"):
                    sm = e.sum(1, keepdims=True)
                    y = e / sm if form == "softmax" else np.where(sm > 0, e / sm, 0.0)
                elif form == "argmax":
                    y = np.where(f == m[:, None], np.arange(N)[None, :] * 1.0, N * 1.0)
                elif form == "maxnorm":
                    y = f / np.maximum(m, 1.0)[:, None]
                elif form == "shift_exp_clamp":
                    y = np.minimum(e, 0.5)
                else:
                    y = e / e.max(1, keepdims=True)
            for keep in (False, True):
                if keep:
                    run(f"nan_max {form} {dt} max out", nan_kernel(form, M, N, bm, dt, True), [1, 2], [x], [y, m],
                        tol=(2e-3, 2e-3))
                else:
                    run(f"nan_max {form} {dt}", nan_kernel(form, M, N, bm, dt, False), [1], [x, np.zeros(M, np.float32)],
                        [y], tol=(2e-3, 2e-3))


# --------------------------------------------------------------------------- scalar hashes, int64 scalars
@probe
def scalar_hash_index():
    B, N = 37, 1024
    @T.prim_func
    def k(X: T.Tensor((B, N), "float32"), seed: T.int32, Y: T.Tensor((B,), "float32"), J: T.Tensor((B,), "int32")):
        with T.Kernel(B) as b:
            h = (b * 1103515245 + seed) & 1023
            Y[b] = X[b, h]
            J[b] = b * 1103515245 + seed
    x = np.random.default_rng(10).standard_normal((B, N)).astype(np.float32)
    for seed in (12345, -2**31, 2**31 - 1):
        hh = [((bb * 1103515245 + seed) & 1023) for bb in range(B)]
        jj = [((bb * 1103515245 + seed + 2**31) % 2**32) - 2**31 for bb in range(B)]
        run(f"scalar_hash_index seed={seed}", k, [2, 3], [x, seed], [x[np.arange(B), hh], np.array(jj)])

@probe
def int64_scalar_times_tile():
    M, N = 5, 19
    @T.prim_func
    def k(X: T.Tensor((M, N), "int32"), c: T.int64, Y: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((M, N), "int32")
            T.copy(X, t)
            for i, j in T.Parallel(M, N):
                t[i, j] = t[i, j] * c + 7
            T.copy(t, Y)
    x = hash_inputs(M, N, 11)
    for c in (3, 1103515245, -2**40 + 5, 2**31, 65536):
        run(f"int64_scalar c={c}", k, [-1], [x, c], w32(i64(x) * c + 7))

@probe
def hash_dropout_serial_rows():
    """dropout written the docs' way: a per-element hash from the global index and a seed, keep if the low bits < p."""
    M, N, bm = 33, 100, 16
    @T.prim_func
    def k(X: T.Tensor((M, N), "float16"), seed: T.int32, Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float16")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                hsh = ((bx * bm + i) * N + j) * 1103515245 + seed
                x[i, j] = T.where((hsh >> 8) & 255 < 128, x[i, j] * 2.0, 0.0)
            T.copy(x, Y[bx * bm, 0])
    x = (np.random.default_rng(12).integers(-8, 9, (M, N)) / 4).astype(np.float16)
    for seed in (0, 987654321, -5):
        i, j = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
        hsh = (i.astype(object) * N + j) * 1103515245 + seed
        keep = np.vectorize(lambda v: ((v >> 8) & 255) < 128)(hsh).astype(bool)
        run(f"hash_dropout seed={seed}", k, [-1], [x, seed], np.where(keep, x.astype(np.float64) * 2, 0.0))


if __name__ == "__main__":
    sel = sys.argv[1:]
    for f in PROBES:
        if not sel or any(s in f.__name__ for s in sel):
            try:
                f()
            except Exception:
                print(f.__name__, "PROBE CRASH"); traceback.print_exc()
