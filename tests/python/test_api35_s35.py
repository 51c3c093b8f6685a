"""Session 35 API misuse hunt (h-api35). First: an `out_idx` output the kernel writes only with
T.atomic_add (a scatter-add, a histogram, split-K partials) starts at zero on cpu and ascend910b
(it was allocated uninitialised and came back as garbage plus the sum). Then findings F1.. of
docs/testing.md "Session 35: api35": each misuse is a TilewrightError at the user's line naming the fix."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)
import tilewright.language as T

sys.path.insert(0, os.path.dirname(__file__))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import located  # noqa: E402

HERE = os.path.abspath(__file__)
TARGETS = ["cpu", TARGET]


def scatter_add(rows, bd, dtype):
    """Out[Idx[t], :] += X[t, :] (MoE's combine): program (t, j) adds its block of row t."""
    tokens, d = T.symbolic("tokens"), T.symbolic("d")

    @T.prim_func
    def scatter(X: T.Tensor((tokens, d), dtype), Idx: T.Tensor((tokens,), "int32"),
                Out: T.Tensor((rows, d), dtype)):
        with T.Kernel(tokens, T.ceildiv(d, bd)) as (t, j):
            x = T.alloc_fragment((bd,), dtype)
            T.copy(X[t, j * bd:(j + 1) * bd], x)
            T.atomic_add(Out[Idx[t], j * bd], x)
    return scatter


def reference(x, idx, rows):
    out = np.zeros((rows, x.shape[1]), np.float64)
    np.add.at(out, idx, x.astype(np.float64))
    return out.astype(x.dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("tokens,rows,d,bd", [
    (13, 5, 37, 16),   # a column tail, 2.6 tokens per row, some rows (maybe) never hit
    (1, 1, 1, 16),     # one element
    (0, 3, 20, 16),    # no token: no program runs, the output is all zeros
    (7, 4, 0, 16),     # an empty feature dim (symbolic): an empty output
])
def test_an_output_written_only_by_atomic_add_starts_at_zero(target, dtype, tokens, rows, d, bd):
    rng = np.random.default_rng(tokens * 31 + d)
    x = rng.integers(-8, 8, size=(tokens, d)).astype(dtype)   # small integers: exact in any order
    idx = rng.integers(0, rows, size=tokens).astype(np.int32)
    k = tw.compile(scatter_add(rows, bd, dtype), target=target, out_idx=[-1])
    want = reference(x, idx, rows)
    for _ in range(3):  # each call starts from zero: nothing accumulates across calls
        got = k(x, idx)
        assert got.shape == (rows, d) and got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
    if target == TARGET:  # the checked simulation (profile) too, without a report
        np.testing.assert_array_equal(run_checked(k, x, idx), want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_accumulated_outputs_start_at_zero(dtype):
    tokens, rows, d = 11, 3, 21  # halves in [-4, 4): every partial sum (at most 11 terms) exact in 16 bits
    rng = np.random.default_rng(7)
    x = (rng.integers(-8, 8, size=(tokens, d)) / 2).astype(tw.testing.np_dtype(dtype))
    idx = rng.integers(0, rows, size=tokens).astype(np.int32)
    want = reference(x.astype(np.float64), idx, rows)
    for target in TARGETS:
        k = tw.compile(scatter_add(rows, 16, dtype), target=target, out_idx=[-1])
        for _ in range(2):
            got = k(x, idx)
            assert got.dtype == x.dtype
            np.testing.assert_array_equal(got.astype(np.float64), want)


def test_cpu_and_ascend910b_agree_with_random_float32_values():
    tokens, rows, d = 40, 6, 45
    x = tw.testing.randn((tokens, d), "float32", seed=5)
    idx = np.random.default_rng(5).integers(0, rows, size=tokens).astype(np.int32)
    want = reference(x.astype(np.float64), idx, rows)
    got = {t: tw.compile(scatter_add(rows, 16, "float32"), target=t, out_idx=[-1])(x, idx)
           for t in TARGETS}
    for t in TARGETS:  # float sums in any order: the stated tolerance (docs/language.md T.atomic_add)
        tw.testing.assert_close(got[t], want, atol=1e-5 * tokens, rtol=1e-5)
    tw.testing.assert_close(got["cpu"], got[TARGET], atol=1e-5 * tokens, rtol=1e-5)


def histogram(n, bins):
    @T.prim_func
    def hist(Idx: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(n) as b:
            T.atomic_add(H[Idx[b]], 1)
    return hist


@pytest.mark.parametrize("target", TARGETS)
def test_a_histogram_output_counts_from_zero(target):
    n, bins = 29, 11  # bins some indices never reach: those stay 0
    idx = np.random.default_rng(3).integers(0, bins - 3, size=n).astype(np.int32)
    k = tw.compile(histogram(n, bins), target=target, out_idx=[-1])
    for _ in range(2):
        np.testing.assert_array_equal(k(idx), np.bincount(idx, minlength=bins))


def test_only_accumulated_outputs_are_zeroed():
    """An output with an ordinary store stays uninitialised (no memset); an input the kernel adds
    into is the caller's accumulator (not zeroed: it keeps adding)."""
    n = 8

    @T.prim_func
    def store_then_add(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n,), "float32")
            T.copy(X, t)
            T.copy(t, Y)
            T.atomic_add(Y[0], t)

    src = tw.compile(store_then_add, out_idx=[-1]).get_source()
    assert "only T.atomic_add writes it" not in src
    k = tw.compile(scatter_add(5, 16, "float32"), out_idx=[-1])  # (the kernel of the tests above)
    assert "only T.atomic_add writes it" in k.get_source()
    acc = tw.compile(scatter_add(5, 16, "float32"))  # Out an input: the caller's accumulator
    x, idx = np.ones((4, 8), np.float32), np.array([0, 1, 4, 1], np.int32)
    out = np.full((5, 8), 10, np.float32)
    acc(x, idx, out)
    acc(x, idx, out)
    np.testing.assert_array_equal(out, 10 + 2 * reference(x, idx, 5))
    prog = tw.compile(scatter_add(5, 16, "float32"), target=TARGET, out_idx=[-1]).get_source("ascend_program")
    assert "out zeroed" in prog, prog


def test_f1_numpy_and_torch_dtypes_name_a_dtype():
    """T.Tensor / T.alloc_* / T.cast given np.float16, np.dtype("int32"), torch.float16 or ml_dtypes'
    bfloat16 were refused ("tensor dtype must be a name like 'float16'", no fix); they are that dtype."""
    torch = pytest.importorskip("torch")

    def kernel(dt, tile_dt):
        @T.prim_func
        def k(X: T.Tensor((5,), dt), Y: T.Tensor((5,), dt)):
            with T.Kernel(1) as b:
                t = T.alloc_fragment((5,), tile_dt)
                T.copy(X, t)
                for i in T.Parallel(5):
                    Y[i] = T.cast(t[i] * 2, dt)
        return k

    for dt, tile_dt, name in [(np.float16, np.float32, "float16"), (np.dtype("int32"), torch.int32, "int32"),
                              (torch.bfloat16, np.dtype("float32"), "bfloat16")]:
        x = np.arange(5).astype(tw.testing.np_dtype(name))
        y = tw.compile(kernel(dt, tile_dt), target=TARGET, out_idx=[-1])(x)  # (no host compile: quicker)
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y.astype(np.float64), 2 * np.arange(5))
    with pytest.raises(tw.TilewrightError, match="tensor dtype must be a name like 'float16', got <class 'float'>") as e:
        kernel(float, "float32")
    assert e.value.file == HERE and "a numpy dtype or a torch dtype" in e.value.hint


@tw.jit(out_idx=[-1])
def plus_one(N, B=4):
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, B)) as b:
            for i in T.Parallel(B):
                Y[b * B + i] = X[b * B + i] + 1
    return k


def test_f2_an_autotune_sweep_that_runs_no_configuration_is_an_error_at_the_call(monkeypatch, tmp_path):
    """Every configuration failing (B=0: ceildiv by zero; B=-1: a negative grid), or prune() keeping
    none: the error had no location at all."""
    monkeypatch.setattr(sys.modules["tilewright.autotune"], "tune_dir", lambda: tmp_path / "tune")
    bad = tw.autotune(configs=[{"B": 0}, {"B": -1}], executor="inline", verbose=False)(plus_one)
    located(lambda: bad(16, target=TARGET), HERE, "@F2A", "no configuration could be run", "B=0", "B=-1")  # @F2A
    none = tw.autotune(configs=[{"B": 4}], executor="inline", verbose=False, prune=lambda cfgs, N: [])(plus_one)
    located(lambda: none(16, target=TARGET), HERE, "@F2B", "prune() removed every configuration", "keep at least one")  # @F2B


@T.prim_func
def doubled(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as b:
        for i in T.Parallel(8):
            Y[i] = X[i] * 2


def test_f3_tilewright_export_of_a_prim_func_or_a_factory_names_the_fix(tmp_path, capsys):
    """`tilewright export file.py:NAME` naming a @T.prim_func or a @tw.jit factory: the hint was the
    generic "SPECS = [kernel, (factory, (args...)), ...]"; it now says what to do with that object."""
    from tilewright import deploy
    for name, fix in [("doubled", "compile it first: tw.compile(doubled, out_idx=[...])"),
                      ("plus_one", "a spec (plus_one, (args...))")]:
        assert deploy.cli_export([f"{HERE}:{name}", "-o", str(tmp_path / "out")]) == 1
        err = capsys.readouterr().err
        assert "not a kernel, a spec" in err and fix in err, err


SCALE = 2.0


@tw.jit(out_idx=[-1], target=TARGET)
def scaled(N):
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as b:
            for i in T.Parallel(N):
                Y[i] = X[i] * SCALE
    return k


def test_f4_a_global_the_kernel_reads_is_read_when_its_factory_runs(monkeypatch):
    """Documented (docs/language.md "tw.jit and its cache"), not changed: the cached kernel keeps the
    value the global had when the factory first ran for these arguments; tw.clear_cache() rebuilds."""
    x = np.ones(3, np.float32)
    scaled.cache.clear()
    np.testing.assert_array_equal(scaled(3)(x), 2 * x)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    np.testing.assert_array_equal(scaled(3)(x), 2 * x)  # the cached kernel
    scaled.cache.clear()
    np.testing.assert_array_equal(scaled(3)(x), 3 * x)  # built again: reads 3.0
