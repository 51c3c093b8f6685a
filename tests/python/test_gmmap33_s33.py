"""Session 33 (h-gmmap33): T.Parallel maps over global tensors on ascend910b (port33 F9 / F10 / F11).

The automatic Ascend pipeline stages a map that stores into a global tensor itself (stage_global_maps:
the windows it reads copied into fragment tiles, the map on the tiles, the stored window copied out,
in chunks that fit the UB), so docs/language.md's first kernel and its Operators / Functions /
conversions examples run by changing only the target. Every form is run on cpu and on ascend910b (the
simulator with the checker: no report) against numpy on exact values (small integers and halves, exact
in every dtype), at 1, 7, 37, 1000 and 65537 elements and 13 x 37; forms that cannot be staged are
errors naming the access and the form that runs.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, exact_values, run_checked_partial, run_on  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16", "int32", "int8"]


def npdt(dt):
    return tw.testing.np_dtype(dt)


def ref_of(v, dt):
    """float64 / int64 values as dt stores them (ints wrap, floats round once)."""
    return np.asarray(v).astype(npdt(dt))


def gm_map(form, n, dt):
    """A 1-D map over global tensors of n elements (the shift form: n - 1 outputs)."""
    m = n - 1 if form == "shift" else n

    @T.prim_func
    def main(A: T.Tensor((n,), dt), B: T.Tensor((n,), dt), C: T.Tensor((m,), dt)):
        with T.Kernel(1) as bx:
            if form == "add":  # docs/language.md's first kernel, one block
                for i in T.Parallel(n):
                    C[i] = A[i] + B[i]
            elif form == "let":  # port33 F9: a let in the body
                for i in T.Parallel(n):
                    x = A[i] - B[i]
                    C[i] = x * x + x
            elif form == "where":
                for i in T.Parallel(n):
                    C[i] = T.where(A[i] > B[i], A[i], B[i] * 2)
            elif form == "inplace":  # reads and writes one global tensor
                T.copy(A, C)
                for i in T.Parallel(n):
                    C[i] = C[i] * 2 + B[i]
            else:  # a read at a shifted index, in bounds: the copy window covers it
                for i in T.Parallel(n - 1):
                    C[i] = A[i + 1] - A[i]

    return main


def numpy_ref(form, a, b, dt):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if form == "add":
        r = a64 + b64
    elif form == "let":
        r = (a64 - b64) ** 2 + (a64 - b64)
    elif form == "where":
        r = np.where(a64 > b64, a64, b64 * 2)
    elif form == "inplace":
        r = a64 * 2 + b64
    else:
        r = a64[1:] - a64[:-1]
    return ref_of(r.astype(np.int64) if dt.startswith("int") else r, dt)


def check(form, n, dt):
    rng = np.random.default_rng(n)
    a, b = exact_values(n, dt, rng), exact_values(n, dt, rng)
    ref = numpy_ref(form, a, b, dt)
    for target in ("cpu", TARGET):
        got = run_on(gm_map(form, n, dt), target, [-1], a, b)
        np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64), err_msg=f"{form} {dt} {target}")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("form", ["add", "let", "where", "inplace", "shift"])
def test_forms(form, dt):
    check(form, 37, dt)


@pytest.mark.parametrize("form, n, dt", [("add", 1, "float32"), ("let", 1, "int8"), ("add", 7, "float16"),
                                         ("shift", 7, "int32"), ("inplace", 1000, "bfloat16"),
                                         ("add", 65537, "float32"), ("inplace", 65537, "int8"),
                                         ("shift", 65537, "float16")])
def test_sizes(form, n, dt):
    """Tails, one element and more than one chunk (65537 elements: 17 chunks of 4096, the last one element)."""
    check(form, n, dt)


N = T.symbolic("N")


@T.prim_func
def guarded_add(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, 64)) as bx:  # a run-time extent; the guard keeps cpu's unmasked stores in bounds
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]


def test_run_time_extent_guarded_blocks():
    kernels = {t: tw.compile(guarded_add, target=t, out_idx=[-1]) for t in ("cpu", TARGET)}
    for n in (1, 7, 1000, 65537):
        rng = np.random.default_rng(n)
        a, b = exact_values(n, "float32", rng), exact_values(n, "float32", rng)
        np.testing.assert_array_equal(kernels["cpu"](a, b), a + b)
        prof = kernels[TARGET].profile(a, b)
        assert prof["reports"] == [], prof["reports"]
        np.testing.assert_array_equal(prof.outputs, a + b)


def map_2d(M, Nc, dt):
    """Y[i, j] = X[i, j] * W[j] + R[i] over global tensors, then the row sums of Y read back from Y."""
    acc = "int32" if dt.startswith("int") else "float32"

    @T.prim_func
    def main(X: T.Tensor((M, Nc), dt), W: T.Tensor((Nc,), dt), R: T.Tensor((M,), dt), Y: T.Tensor((M, Nc), dt),
             S: T.Tensor((M,), acc)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(M, Nc):
                Y[i, j] = X[i, j] * W[j] + R[i]
            y = T.alloc_fragment((M, Nc), acc)
            s = T.alloc_fragment((M,), acc)
            T.copy(Y, y)
            T.reduce_sum(y, s, dim=1)
            T.copy(s, S)

    return main


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
def test_2d_map_and_a_reduction_afterwards(dt):
    rng = np.random.default_rng(5)
    x, w, r = exact_values((13, 37), dt, rng), exact_values(37, dt, rng), exact_values(13, dt, rng)
    y = ref_of(x.astype(np.float64) * w.astype(np.float64) + r.astype(np.float64)[:, None], dt)
    s = y.astype(np.float64).sum(1)
    for target in ("cpu", TARGET):
        gy, gs = run_on(map_2d(13, 37, dt), target, [-2, -1], x, w, r)
        np.testing.assert_array_equal(gy.astype(np.float64), y.astype(np.float64), err_msg=target)
        np.testing.assert_array_equal(gs.astype(np.float64), s, err_msg=target)


def scale_rows(M, Nc, dt):
    @T.prim_func
    def main(X: T.Tensor((M, Nc), dt), W: T.Tensor((Nc,), dt), R: T.Tensor((M,), dt), Y: T.Tensor((M, Nc), dt)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(M, Nc):
                Y[i, j] = X[i, j] * W[j] + R[i]

    return main


@pytest.mark.parametrize("M, Nc, dt", [(300, 301, "float32"), (3, 20001, "float16"), (70000, 1, "float32")])
def test_2d_chunks(M, Nc, dt):
    """Chunks of rows, of columns (a row wider than a chunk) and of a column (its tiles' rows padded to 32 B)."""
    rng = np.random.default_rng(M)
    x, w, r = exact_values((M, Nc), dt, rng), exact_values(Nc, dt, rng), exact_values(M, dt, rng)
    ref = ref_of(x.astype(np.float64) * w.astype(np.float64) + r.astype(np.float64)[:, None], dt)
    for target in ("cpu", TARGET):
        got = run_on(scale_rows(M, Nc, dt), target, [-1], x, w, r)
        np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64), err_msg=target)


@T.prim_func
def columns(A: T.Tensor((37, 3), "float32"), C: T.Tensor((37, 3), "float32")):
    with T.Kernel(1) as bx:
        T.copy(A, C)
        for i in T.Parallel(37):  # two columns of C stored, the one between them kept (one tile spans them)
            C[i, 0] = A[i, 0] * 2
            C[i, 2] = A[i, 1] + A[i, 2]


def test_stores_into_columns_of_one_tensor():
    a = exact_values((37, 3), "float32", np.random.default_rng(2))
    ref = a.copy()
    ref[:, 0] = a[:, 0] * 2
    ref[:, 2] = a[:, 1] + a[:, 2]
    for target in ("cpu", TARGET):
        np.testing.assert_array_equal(run_on(columns, target, [-1], a), ref, err_msg=target)


@T.prim_func
def scalar_factor(X: T.Tensor((37,), "float32"), S: T.Tensor((2,), "float32"), Y: T.Tensor((37,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(37):  # an element free of the loop variables: a one-element tile
            Y[i] = X[i] * S[1]


@T.prim_func
def row_loop(X: T.Tensor((5, 37), "float32"), Y: T.Tensor((5, 37), "float32")):
    with T.Kernel(1) as bx:
        for r in T.serial(5):  # a map over one row of the tensors per iteration
            for j in T.Parallel(37):
                Y[r, j] = X[r, j] * 2


def test_a_scalar_factor_and_a_row_loop():
    x, s = exact_values(37, "float32", np.random.default_rng(4)), np.array([2.0, 3.0], np.float32)
    x2 = exact_values((5, 37), "float32", np.random.default_rng(6))
    for target in ("cpu", TARGET):
        np.testing.assert_array_equal(run_on(scalar_factor, target, [-1], x, s), x * 3, err_msg=target)
        np.testing.assert_array_equal(run_on(row_loop, target, [-1], x2), x2 * 2, err_msg=target)


# ----------------------------------------------------------------------------------------------- forms not staged
def unstaged(form):
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), Ix: T.Tensor((16,), "int32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            if form == "scatter":
                for i in T.Parallel(16):
                    C[Ix[i]] = A[i]
            elif form == "gather":
                for i in T.Parallel(16):
                    C[i] = A[Ix[i]]
            elif form == "stride":
                for i in T.Parallel(8):
                    C[i] = A[2 * i]
            else:  # reads elements other iterations write
                T.copy(A, C)
                for i in T.Parallel(15):
                    C[i] = C[i + 1]

    return main


@pytest.mark.parametrize("form, message, hint", [
    ("scatter", "data-dependent index (a scatter)", "gather instead"),
    ("gather", "T.Parallel read A[Ix[i]] of global tensor 'A'", "copy the rows it reads into a tile first"),
    ("stride", "T.Parallel read A[i * 2] of global tensor 'A'", "copy the rows it reads into a tile first"),
    ("overlap", "stores into 'C' at C[i] and reads it at C[i + 1]", "T.copy(C, C_old)"),  # h-selfread41: every target
])
def test_forms_not_staged_name_the_access_and_the_form_that_runs(form, message, hint):
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(unstaged(form), target=TARGET, out_idx=[-1])
    text = str(e.value)
    assert message in text and hint in text.split("hint:")[-1], text
    assert re.search(r"\.py:\d+:\d+: error", text), text


def gather_from_a_tile(form):
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), Ix: T.Tensor((16,), "int32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16,), "float32")
            T.copy(A, t)
            if form == "gather":
                for i in T.Parallel(16):
                    C[i] = t[Ix[i]]
            else:
                for i in T.Parallel(8):
                    C[i] = t[2 * i]

    return main


@pytest.mark.parametrize("form", ["gather", "stride"])
def test_the_hints_form_runs(form):
    """The hint's rewrite of a data-dependent or strided read: the tensor copied into a tile, the map reading it."""
    a = np.arange(16, dtype=np.float32) * 0.5
    ix = np.random.default_rng(3).permutation(16).astype(np.int32)
    for target in ("cpu", TARGET):
        if form == "stride" and target != "cpu":  # the map writes C[0:8] of 16: the rest is the unwritten report
            got = run_checked_partial(tw.compile(gather_from_a_tile(form), target=target, out_idx=[-1]), a, ix)
        elif form == "stride":  # so is it in cpu's checked mode (TW_BOUNDS_CHECK=1): C passed in
            got = np.zeros(16, np.float32)
            tw.compile(gather_from_a_tile(form), target="cpu")(a, ix, got)
        else:
            got = run_on(gather_from_a_tile(form), target, [-1], a, ix)
        ref = a[ix] if form == "gather" else a[0::2]
        np.testing.assert_array_equal(got[:ref.size], ref, err_msg=target)


def test_per_row_store_into_a_global_tensor_in_a_2d_map_names_the_1d_map():
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), Mu: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(4, 8):
                Mu[i] = X[i, 0]

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, target=TARGET, out_idx=[-1])
    assert "does not use every loop index" in str(e.value) and "T.Parallel(M): Mu[i]" in str(e.value), str(e.value)


# ----------------------------------------------------------------------------------------------- docs/language.md
# The examples that stay cpu-only, each for a documented reason (port33 F10's count: 15 of 30 ran before
# stage_global_maps, 23 now): the error (or the failed assertion) each gives with the target changed.
CPU_ONLY = {
    "language:tile-buffers": "expected an error",  # T.alloc_UB on cpu is the error the example shows
    "language:t-gemm-a-b-c-transpose-a-false-transpose-b-false-clear-accum-false": "int8 KxN tile",
    "language:t-fill-region-value-and-t-clear-region": "not on a 32 B block",
    "language:loops-2": "element store into tensor 'B' outside a T.Parallel map",
    "language:values-assignment-and-if": "element store into tensor 'B' outside a T.Parallel map",
    "language:operators": "'>>' on uint8 tile data",
    "language:the-tw-kernel-object": "",  # asserts k.target == "cpu"
}


def test_docs_language_examples_on_ascend910b(tmp_path, monkeypatch):
    """docs/language.md's examples with only the default target of tw.compile / tw.jit changed."""
    import importlib

    import test_docs
    jit_mod = importlib.import_module("tilewright.jit")
    compile_, jit_ = jit_mod.compile, jit_mod.jit

    def ascend(t):
        return TARGET if t == "cpu" else t

    monkeypatch.setattr(tw, "compile", lambda fn=None, *, target="cpu", out_idx=None: compile_(fn, target=ascend(target),
                                                                                                out_idx=out_idx))
    monkeypatch.setattr(tw, "jit", lambda fn=None, *, out_idx=None, target="cpu": jit_(fn, out_idx=out_idx,
                                                                                        target=ascend(target)))
    ran, failed = [], {}
    for tid, name, line, code in test_docs.BLOCKS:
        if name != "language.md":
            continue
        path = tmp_path / f"block_{line}.py"
        src = "\n" * (line - 1) + code
        path.write_text(src, encoding="utf-8")
        try:
            exec(compile(src, str(path), "exec"), {"__name__": "__docs__", "__file__": str(path)})  # noqa: S102
            ran.append(tid)
        except (tw.TilewrightError, AssertionError) as e:
            failed[tid] = str(e)
    assert sorted(failed) == sorted(CPU_ONLY), {k: v[:300] for k, v in failed.items()}
    for tid, text in CPU_ONLY.items():
        assert text in failed[tid], failed[tid][:300]
    assert "language:a-first-kernel" in ran and "language:functions-2" in ran and len(ran) >= 23, ran


def test_expert_map_over_global_tensors_with_a_let_names_the_global_buffer():
    """Expert kernels are not staged: their map over GM is the scope error, also with a let (port33 F9's order)."""
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                for i in T.Parallel(8):
                    x = X[i]
                    Y[i] = T.exp(x) + x * 2.0

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, target=TARGET, out_idx=[-1])
    assert "global buffer 'Y'" in str(e.value) and "copy the data into UB" in str(e.value), str(e.value)
