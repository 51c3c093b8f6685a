"""Session 33 (h-avx2exp33): the AVX2 exp_chunk / exp_nonpos_chunk / exp2_chunk (tw_cpu/math.h) take
a one-multiply vector form for groups of 4 vectors whose values all have normal results and a
branch-free two-factor form for any other vector (a tail through a zero-padded vector). Checked here
through generated kernels, natively and in a child process compiled for x86-64-v3 (AVX2 + FMA):
softmax and log_softmax rows of 67 (a 64-float chunk: two groups; then a 3-float tail) against float64
with masked (-Inf) entries, an all -Inf row, NaN, +Inf and rows whose exp results are subnormal or
zero; a row map y = exp(x - 1) and y = exp2(x - 1) over every float class (the C++ tests Math.* check the
functions bit for bit on each instruction set) against float64 and bit for bit between the two
instruction sets. Correctness only: no timing."""

import numpy as np
import pytest

from test_cpu_exp_chunk import exp_map, op_zoo, softmax  # (examples/ and bench/ on sys.path)
from tw_test_util import avx2_child_npz

N = 67
M = 19  # two full blocks of 8 rows (the row pipeline) and a tail block of 3 (the statements as written)
KINDS = ("softmax", "log_softmax", "exp", "exp2")
CHUNK_FN = {"softmax": "exp_nonpos_chunk", "log_softmax": "exp_nonpos_chunk", "exp": "exp_chunk",
            "exp2": "exp2_chunk"}


def kernel(kind):
    """examples/softmax.py, the op zoo's log_softmax, test_cpu_exp_chunk's Y = f(X - 1)."""
    if kind == "softmax":
        return softmax.softmax(N)
    if kind == "log_softmax":
        return op_zoo.log_softmax(N)
    return exp_map(N, kind)


def _bits(u):
    return np.array(u, np.uint32).view(np.float32)


def inputs(kind):
    """M x N float32 rows, the same in every process."""
    rng = np.random.default_rng(33)
    x = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    if kind in ("exp", "exp2"):
        edges = [0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -86.0, 88.0, -87.33654, 88.72284, -103.97208, -104.0,
                 -176.0, 89.0, -125.0, 127.0, -126.0, -149.0, -149.5, -150.0, 128.0, 129.0, -254.0, 0.5, -2.5,
                 126.5, 3.4028235e38, -3.4028235e38, -1e30, np.inf, -np.inf]
        e = np.array(edges, np.float32)
        with np.errstate(over="ignore"):  # FLT_MAX's next is Inf
            e = np.concatenate([np.nextafter(e, np.float32(-np.inf)), e, np.nextafter(e, np.float32(np.inf)),
                                _bits([0x7FC00000, 0xFFC00000, 0x7FC001FF, 0x7F800001, 0xFF8001FF])])
        flat = x.reshape(-1)
        pos = rng.permutation(flat.size)[:e.size]  # each class once, somewhere (groups, vectors, tails)
        flat[pos] = e
        x[3, :] = np.resize(e, N)  # a whole row of them
        with np.errstate(over="ignore", invalid="ignore"):
            return x + np.float32(1)  # the kernel's argument is X - 1: these values where that is exact
    x[1, 5:40] = -np.inf           # masked entries
    x[2, :] = -np.inf              # an all -Inf row: NaN (x - max is -Inf - -Inf)
    x[4, 7] = np.nan               # NaN anywhere: a NaN row
    x[5, 60] = np.inf              # +Inf: NaN where x - max is Inf - Inf, 0 elsewhere
    x[6, :] = np.linspace(-200, 0, N, dtype=np.float32)   # results down to subnormal and 0
    x[9, ::3] = -1e30              # a masked -1e30 every third entry
    x[10, :] = -1e30
    x[10, 66] = 0.0                # the tail's last lane the only live one
    x[17, :] = np.float32(-87.5)   # the tail block: x - max = 0 everywhere
    x[18, :] = rng.uniform(-120, -80, N).astype(np.float32)
    return x


def reference(kind, x):
    with np.errstate(invalid="ignore", over="ignore"):
        x64 = x.astype(np.float64)  # (a signalling NaN: "invalid")
        if kind in ("exp", "exp2"):  # of the kernel's float32 argument
            a = (x - np.float32(1)).astype(np.float64)
            return np.exp(a) if kind == "exp" else np.exp2(a)
        s = x64 - x64.max(axis=1, keepdims=True)
        s[np.isnan(x64).any(axis=1)] = np.nan  # numpy's max propagates NaN, the kernel's too
        if kind == "softmax":
            return np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def results():
    """{kind: (output, kernel source)} in this process's instruction set."""
    out = {}
    for kind in KINDS:
        k = kernel(kind)
        out[kind] = (k(inputs(kind)), k.get_kernel_source())
    return out


def child_main(path):
    res = results()
    np.savez(path, **{kind: y for kind, (y, _) in res.items()},
             **{kind + "_src": np.array(src) for kind, (_, src) in res.items()})


def _close(kind, y, ref):
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(y), nan), np.argwhere(np.isnan(y) != nan)[:5]
    y, ref = y[~nan], ref[~nan]
    inf = np.isinf(ref) | (np.abs(ref) > np.finfo(np.float32).max)
    with np.errstate(over="ignore"):  # float64 results above FLT_MAX: Inf in float32
        assert np.array_equal(y[inf], ref[inf].astype(np.float32))
    y, ref = y[~inf].astype(np.float64), ref[~inf]
    if kind == "log_softmax":
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    else:  # exp / exp2: rel 2.5e-7 for normal results (math.h), 2^-148 for subnormal ones; softmax: sums
        rtol = 2.5e-7 if kind in ("exp", "exp2") else 1e-5
        np.testing.assert_allclose(y, ref, rtol=rtol, atol=2.0**-148 if kind != "softmax" else 1e-6)


@pytest.fixture(scope="module")
def native():
    return results()


@pytest.fixture(scope="module")
def avx2(tmp_path_factory):
    path = avx2_child_npz(tmp_path_factory.mktemp("avx2exp33"), "test_avx2exp33_s33")
    with np.load(path) as f:
        return {kind: (f[kind], str(f[kind + "_src"])) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_close_to_float64_native_and_avx2(kind, native, avx2):
    ref = reference(kind, inputs(kind))
    for name, res in (("native", native), ("x86-64-v3", avx2)):
        y, src = res[kind]
        assert CHUNK_FN[kind] + "(" in src, (name, kind)  # the chunk function under test is called
        _close(kind, y, ref)


@pytest.mark.parametrize("kind", ["exp", "exp2"])
def test_exp_bits_same_on_both_instruction_sets(kind, native, avx2):
    a, b = native[kind][0], avx2[kind][0]
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    assert np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))
