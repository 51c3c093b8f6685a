"""Session 33 (h-labels33, issue 13): PyTorch's int64 labels and lengths on ascend910b as on cpu.

`T.where(j == lab[i], x[i, j], 0)`, `j < lab[i]`, `<=`, `>=`, `!=` with an int64 `lab` tile (labels copied
from an int64 tensor, or read from the tensor in the map), in maps of one and of several rows, and the op
zoo's gather `x[i, T.min(T.max(lab[i], 0), N - 1)]`: legalize_vector's narrow_int64_bounds clamps each int64
value in int64 to one past either end of the compared index's range (of the gathered dimension) and converts
it to int32 on the scalar unit, before the map (docs/ascend.md "Session 33: PyTorch's int64 labels in maps").
Each kernel runs on cpu and on ascend910b (simulator, checker on: no report) and is compared with numpy:
exactly for picks and masks, within float32 tolerances for the cross-entropy losses. Labels cover the row's
ends, one past them, -100 (PyTorch's ignore_index) and values whose int32 truncation lands inside the row.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

N = 37  # 4 whole 32 B blocks of float32 and a 5-element tail
I64 = np.iinfo(np.int64)
LABELS = [0, N - 1, N, -1, -100, 2 ** 31, -2 ** 31 - 1, 2 ** 32 + 3, 2 ** 62, I64.min, I64.max, N // 2,
          2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1]
OPS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "ge": np.greater_equal}


def _labels(M):
    return np.array([LABELS[r % len(LABELS)] for r in range(M)], np.int64)


def _run(prim, target, outs, *args):
    k = tw.compile(prim, target=target, out_idx=outs)
    return k(*args) if target == "cpu" else run_checked(k, *args)


def _masks(R, from_tensor):
    """Five masks of one row block of R rows (a tail block when M % R != 0): p_op[i, j] = x[i, j] where
    `j op lab[i]`, else 0; the labels copied into an int64 tile, or (from_tensor) read from L in the map."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int64"), Peq: T.Tensor((M, N), "float32"),
             Pne: T.Tensor((M, N), "float32"), Plt: T.Tensor((M, N), "float32"), Ple: T.Tensor((M, N), "float32"),
             Pge: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            lab = T.alloc_fragment((R,), "int64")
            peq = T.alloc_fragment((R, N), "float32")
            pne = T.alloc_fragment((R, N), "float32")
            plt = T.alloc_fragment((R, N), "float32")
            ple = T.alloc_fragment((R, N), "float32")
            pge = T.alloc_fragment((R, N), "float32")
            T.copy(X[bx * R, 0], x)
            T.copy(L[bx * R], lab)
            for i, j in T.Parallel(R, N):
                if from_tensor:  # compile-time: chosen while parsing
                    peq[i, j] = T.where(j == L[bx * R + i], x[i, j], 0.0)
                    plt[i, j] = T.where(j < L[bx * R + i], x[i, j], 0.0)
                else:
                    peq[i, j] = T.where(j == lab[i], x[i, j], 0.0)
                    plt[i, j] = T.where(j < lab[i], x[i, j], 0.0)
                pne[i, j] = T.where(j != lab[i], x[i, j], 0.0)
                ple[i, j] = T.where(lab[i] >= j, x[i, j], 0.0)  # (the label on the left)
                pge[i, j] = T.where(j >= lab[i], x[i, j], 0.0)
            T.copy(peq, Peq[bx * R, 0])
            T.copy(pne, Pne[bx * R, 0])
            T.copy(plt, Plt[bx * R, 0])
            T.copy(ple, Ple[bx * R, 0])
            T.copy(pge, Pge[bx * R, 0])

    return main


@pytest.mark.parametrize("R, M, from_tensor", [(1, len(LABELS), False), (3, 17, False), (8, 19, False),
                                                (64, 79, False), (1, 6, True), (3, 10, True)])
def test_int64_label_masks(R, M, from_tensor):
    """One row per block (the index mask: fills around the label's columns) and R rows per block (each row's
    label clamped and converted to int32 on the scalar unit, then compared as int32 labels), with tails.
    from_tensor: `j == L[bx * R + i]` and `j < L[...]` read the labels in the map (copied into a UB tile
    first: the copy stops at the tensor's end, the tail block's rows past M read no memory)."""
    x = (np.arange(M * N, dtype=np.float32).reshape(M, N) + 1) / 4
    lab = _labels(M)
    j = np.arange(N)[None, :]
    for target in ("cpu", TARGET):
        got = _run(_masks(R, from_tensor), target, [-5, -4, -3, -2, -1], x, lab)
        for (name, op), g in zip(OPS.items(), got):
            want = np.where(op(j, lab[:, None]), x, 0).astype(np.float32)
            np.testing.assert_array_equal(g, want, err_msg=f"{target} R={R} j {name} lab[i]")


def _xent(Nc, R, dtype, form):
    """loss[r] = logsumexp(X[r, :]) - X[r, lab[r]] with int64 labels, R rows per block; the pick as the
    masked sum `T.where(j == lab[i], x, 0)` (pick) or bench/op_zoo.py's gather of the clamped label (gather)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, Nc), dtype), Lab: T.Tensor((M,), "int64"), L: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, Nc), "float32")
            p = T.alloc_fragment((R, Nc), "float32")
            lab = T.alloc_fragment((R,), "int64")
            mx = T.alloc_fragment((R,), "float32")
            s = T.alloc_fragment((R,), "float32")
            xl = T.alloc_fragment((R,), "float32")
            T.copy(Lab[bx * R], lab)
            T.copy(X[bx * R, 0], x)
            T.reduce_max(x, mx, dim=1)
            if form == "pick":
                for i, j in T.Parallel(R, Nc):
                    p[i, j] = T.where(j == lab[i], x[i, j], 0.0)
                T.reduce_sum(p, xl, dim=1)
            else:
                for i in T.Parallel(R):
                    xl[i] = x[i, T.min(T.max(lab[i], 0), Nc - 1)]
            for i, j in T.Parallel(R, Nc):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(R):
                s[i] = mx[i] + T.log(s[i]) - xl[i]
            T.copy(s, L[bx * R])

    return main


def _xent_ref(x, lab, clamp):
    xf = x.astype(np.float64)
    m = xf.max(1)
    lse = np.log(np.exp(xf - m[:, None]).sum(1)) + m
    Nc = x.shape[1]
    if clamp:
        return lse - xf[np.arange(len(lab)), np.clip(lab, 0, Nc - 1)]
    inside = (lab >= 0) & (lab < Nc)
    return lse - np.where(inside, xf[np.arange(len(lab)), np.clip(lab, 0, Nc - 1)], 0.0)


@pytest.mark.parametrize("Nc, R, dtype, form, M", [
    (301, 1, "float32", "pick", 15),     # one row per block: the index mask (h-xent's form)
    (301, 4, "bfloat16", "pick", 15),    # several rows: int32 labels from the scalar unit, a tail block of 3
    (301, 8, "float32", "gather", 15),   # bench/op_zoo.py's cross_entropy with PyTorch's labels
    (40001, 1, "float32", "pick", 3),    # a row in column blocks: the label in the first, the last, past it
])
def test_cross_entropy_with_int64_labels(Nc, R, dtype, form, M):
    rng = np.random.default_rng(Nc + R)
    x = randn((M, Nc), dtype, scale=3.0, seed=rng)
    lab = np.array([Nc - 1, 3, Nc, -100, 2 ** 32 + 3, 0, Nc // 2, -1, 2 ** 62, 7, Nc - 2, I64.min, 1, 2, 5][:M],
                   np.int64)
    ref = _xent_ref(x, lab, form == "gather")
    got = {t: np.asarray(_run(_xent(Nc, R, dtype, form), t, [-1], x.copy(), lab.copy()), np.float64)
           for t in ("cpu", TARGET)}
    for t, g in got.items():  # float32 arithmetic over the row (bfloat16 inputs are exact in float32)
        assert_close(g, ref, atol=1e-3, rtol=1e-5, msg=f"cross_entropy {t} {M}x{Nc} {dtype} {form}")
    assert_close(got[TARGET], got["cpu"], atol=1e-3, rtol=1e-5, msg="ascend910b vs cpu")
    if R == 1 and form == "pick":  # still the index mask of one kept column: no comparison per element
        src = tw.compile(_xent(Nc, R, dtype, form), target=TARGET, out_idx=[-1]).get_source()
        line = next(n for n, t in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
                    if "p[i, j] = T.where(j == lab[i], x[i, j], 0.0)" in t)
        assert not [t for t in src.splitlines() if ("Compare" in t or "Select(" in t) and t.endswith(f"// line {line}")]


def test_int64_scalar_length():
    """`j < n` with an int64 scalar (a length past int32 or far below 0): clamped where it is used."""
    R = 3

    @T.prim_func
    def main(X: T.Tensor((R, N), "float32"), n: T.int64, P: T.Tensor((R, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, N), "float32")
            p = T.alloc_fragment((R, N), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(R, N):
                p[i, j] = T.where(j < n, x[i, j], 0.0)
            T.copy(p, P[0, 0])

    x = (np.arange(R * N, dtype=np.float32).reshape(R, N) + 1) / 4
    for n in (5, N, 2 ** 32 + 3, -2 ** 40):
        want = np.where(np.arange(N)[None, :] < n, x, 0).astype(np.float32)
        for target in ("cpu", TARGET):
            np.testing.assert_array_equal(_run(main, target, [-1], x, n), want, err_msg=f"{target} n={n}")


def _halves(form):
    """p[i, j] = x[i, j] where j // 2 == the label (no column-index comparison: the labels must be int32),
    the int64 labels converted into an int32 tile by `form`; "none": compared as int64 (the error)."""
    R = 3
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int64"), P: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            p = T.alloc_fragment((R, N), "float32")
            lab = T.alloc_fragment((R,), "int64")
            lab32 = T.alloc_fragment((R,), "int32")
            T.copy(X[bx * R, 0], x)
            if form == "tensor":  # from the int64 tensor straight into the int32 tile
                T.copy(L[bx * R], lab32)
            else:
                T.copy(L[bx * R], lab)
                if form == "copy":
                    T.copy(lab, lab32)
                if form == "cast":
                    for i in T.Parallel(R):
                        lab32[i] = T.cast(lab[i], "int32")
            for i, j in T.Parallel(R, N):
                if form == "none":
                    p[i, j] = T.where(j // 2 == lab[i], x[i, j], 0.0)  # @HALVES
                else:
                    p[i, j] = T.where(j // 2 == lab32[i], x[i, j], 0.0)
            T.copy(p, P[bx * R, 0])

    return main


@pytest.mark.parametrize("form", ["tensor", "copy", "cast"])
def test_int64_labels_converted_to_int32(form):
    """The conversion wraps on both targets (the scalar unit's static_cast, as cpu's): 2^32 + 3 -> 3."""
    M = 7
    x = (np.arange(M * N, dtype=np.float32).reshape(M, N) + 1) / 4
    lab = np.array([1, 2 ** 32 + 3, 18, -2 ** 32 + 7, 19, -1, 2 ** 31 + 2], np.int64)
    wrapped = ((lab + 2 ** 31) % 2 ** 32) - 2 ** 31
    want = np.where(np.arange(N)[None, :] // 2 == wrapped[:, None], x, 0).astype(np.float32)
    for target in ("cpu", TARGET):
        np.testing.assert_array_equal(_run(_halves(form), target, [-1], x, lab), want, err_msg=f"{target} {form}")


def test_other_int64_uses_name_the_int32_tile():
    """An int64 label compared with something other than the column index is an error at its line whose
    hint names the conversion into an int32 tile (test_int64_labels_converted_to_int32 runs it)."""
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_halves("none"), target=TARGET, out_idx=[-1])
    line = next(n for n, t in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1) if "# @HALVES" in t)
    assert e.value.line == line
    assert "no int64 data" in e.value.hint and "T.copy(lab, lab32)" in e.value.hint, e.value.hint


def _xent_grad(R, form):
    """cross_entropy's gradient softmax - one_hot(label) (grad), and a one-hot kept where the label is (one):
    T.where(j == lab[i], a, b) with a tile value on the untaken side (a comparison, not a mask)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int64"), G: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            p = T.alloc_fragment((R, N), "float32")
            g = T.alloc_fragment((R, N), "float32")
            lab = T.alloc_fragment((R,), "int64")
            T.copy(L[bx * R], lab)
            T.copy(X[bx * R, 0], p)
            for i, j in T.Parallel(R, N):
                if form == "grad":
                    g[i, j] = T.where(j == lab[i], p[i, j] - 1.0, p[i, j])
                else:
                    g[i, j] = T.where(j == lab[i], 1.0, p[i, j])
            T.copy(g, G[bx * R, 0])

    return main


@pytest.mark.parametrize("R", [1, 3])
def test_cross_entropy_gradient_with_int64_labels(R):
    """hunt33 F10's forms (session 33's hunt): one row per block and three."""
    M = 7
    x = ((np.arange(M * N).reshape(M, N) % 11) + 1).astype(np.float32) / 16
    lab = _labels(M)
    hit = np.arange(N)[None, :] == lab[:, None]
    for form, want in (("grad", np.where(hit, x - 1, x)), ("one", np.where(hit, 1.0, x))):
        for target in ("cpu", TARGET):
            np.testing.assert_array_equal(_run(_xent_grad(R, form), target, [-1], x, lab), want.astype(np.float32),
                                          err_msg=f"{target} R={R} {form}")
