"""Session 30's hunt (h-hunt30, docs/testing.md "Session 30: the language at users' shapes (h-hunt30)"): the
general language of docs/language.md as a user porting a numpy / PyTorch model op by op writes it, at the
shapes and values the docs' examples do not use: int8 / uint8 `//` and `%` by a tile holding 0 and -1 (with
INT8_MIN // -1), int32 shifts by a per-element count >= 32 and negative, Python literals outside a narrow
operand's range (`x_int8 > 200`, `x_uint8 > -1`), bool tiles in arithmetic through `T.cast`, reductions over
each dim of a 3-D tile, a masked running row max over zero columns, a `T.Pipelined` loop of 0 iterations at
run time, one compiled kernel called with M = 0, 1 and 2^k + 1 rows, gathers at indices outside the tile;
each on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against numpy / Python integers.

Findings (F1.. of /work/hunt30-findings.md): F1, F2, F3 and F5 were in the Ascend lowering (src/target/ascend):
fixed on h-ascfix, their tests (strict xfails until then) pass on both targets. F6 (docs), F7 (the error for an
int16 argument, src/python/bind_runtime.cpp) and F8 (a cpu tile read past the tile at a scalar parameter's index,
src/target/cpu/alias_tile_copies.cpp) were fixed on the branch; their tests guard the fixes.

Tolerances: every result here is exact (integers, selects, maxima, float32 values that are sums of small
integers)."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(prim, target, out_idx, *args):
    k = tw.compile(prim, target=target, out_idx=out_idx)
    return k(*args) if target == "cpu" else run_checked(k, *args)


# --------------------------------------------------------------------------- integers
N = 13


@T.prim_func
def _divmod_i8(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8"), Q: T.Tensor((N,), "int8"),
               R: T.Tensor((N,), "int8")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((N,), "int8")
        b = T.alloc_fragment((N,), "int8")
        q = T.alloc_fragment((N,), "int8")
        r = T.alloc_fragment((N,), "int8")
        T.copy(A, a)
        T.copy(B, b)
        for i in T.Parallel(N):
            q[i] = a[i] // b[i]
            r[i] = a[i] % b[i]
        T.copy(q, Q)
        T.copy(r, R)


@pytest.mark.parametrize("target", TARGETS)
def test_int8_floor_div_and_mod_by_a_tile(target):
    """Python's // and % (the sign of the divisor), x // 0 == 0 and x % 0 == x, INT8_MIN // -1 wraps."""
    rng = np.random.default_rng(8)
    a = rng.integers(-128, 128, N).astype(np.int8)
    b = rng.integers(-5, 6, N).astype(np.int8)
    a[:3], b[:3] = [-128, 7, -7], [-1, 0, 2]
    x, y = a.astype(np.int64), b.astype(np.int64)
    ys = np.where(y == 0, 1, y)
    q, r = _run(_divmod_i8, target, [2, 3], a, b)
    assert np.array_equal(q, np.where(y == 0, 0, x // ys).astype(np.int8))
    assert np.array_equal(r, np.where(y == 0, x, x % ys).astype(np.int8))


@T.prim_func
def _shifts(A: T.Tensor((N,), "int32"), S: T.Tensor((N,), "int32"), L: T.Tensor((N,), "int32"),
            Rr: T.Tensor((N,), "int32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((N,), "int32")
        s = T.alloc_fragment((N,), "int32")
        lo = T.alloc_fragment((N,), "int32")
        r = T.alloc_fragment((N,), "int32")
        T.copy(A, a)
        T.copy(S, s)
        for i in T.Parallel(N):
            lo[i] = a[i] << s[i]
            r[i] = a[i] >> s[i]
        T.copy(lo, L)
        T.copy(r, Rr)


@pytest.mark.parametrize("target", TARGETS)
def test_shift_counts_past_the_width_and_negative(target):
    """The count modulo 32 (x << 32 == x, x >> -1 == x >> 31), per element."""
    rng = np.random.default_rng(5)
    a = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    s = rng.integers(-40, 70, N).astype(np.int32)
    s[:5] = [32, 33, -1, 64, 31]
    x, c = a.astype(np.int64), s.astype(np.int64) & 31
    lo, r = _run(_shifts, target, [2, 3], a, s)
    assert np.array_equal(lo, (x << c).astype(np.int32)) and np.array_equal(r, (x >> c).astype(np.int32))


@T.prim_func
def _literals(A: T.Tensor((N,), "int8"), U: T.Tensor((N,), "uint8"), M: T.Tensor((N,), "bool"),
              O: T.Tensor((N, 4), "int32"), K: T.Tensor((N,), "int32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((N,), "int8")
        u = T.alloc_fragment((N,), "uint8")
        m = T.alloc_fragment((N,), "bool")
        o = T.alloc_fragment((N, 4), "int32")
        c = T.alloc_fragment((N,), "int32")
        T.copy(A, a)
        T.copy(U, u)
        T.copy(M, m)
        for i in T.Parallel(N):
            o[i, 0] = T.where(a[i] > 200, 1, 0)
            o[i, 1] = T.where(u[i] > -1, 1, 0)
            o[i, 2] = a[i] + 300
            o[i, 3] = u[i] - 255
            c[i] = T.cast(m[i], "int32") * 2 + 1
        T.copy(o, O)
        T.copy(c, K)


@pytest.mark.parametrize("target", TARGETS)
def test_literals_outside_a_narrow_operands_range_and_bool_arithmetic(target):
    """A literal adopts the other operand's dtype, but its value is compared / added as written (int8 > 200 is
    never true, uint8 > -1 always); a bool tile in arithmetic through T.cast (the form ascend910b runs)."""
    rng = np.random.default_rng(6)
    a = rng.integers(-128, 128, N).astype(np.int8)
    u = rng.integers(0, 256, N).astype(np.uint8)
    m = rng.random(N) < 0.5
    a[:2], u[:2] = [-128, 127], [0, 255]
    x, y = a.astype(np.int64), u.astype(np.int64)
    ref = np.stack([x > 200, y > -1, x + 300, y - 255], 1).astype(np.int32)
    o, c = _run(_literals, target, [3, 4], a, u, m)
    assert np.array_equal(o, ref) and np.array_equal(c, m * 2 + 1)


# --------------------------------------------------------------------------- reductions and loops
@T.prim_func
def _reduce3(X: T.Tensor((3, 5, 7), "int32"), S0: T.Tensor((5, 7), "int32"), M1: T.Tensor((3, 7), "int32"),
             N2: T.Tensor((3, 5), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 5, 7), "int32")
        s0 = T.alloc_fragment((5, 7), "int32")
        m1 = T.alloc_fragment((3, 7), "int32")
        n2 = T.alloc_fragment((3, 5), "int32")
        T.copy(X, x)
        T.reduce_sum(x, s0, dim=0)
        T.reduce_max(x, m1, dim=1)
        T.reduce_min(x, n2, dim=2)
        T.copy(s0, S0)
        T.copy(m1, M1)
        T.copy(n2, N2)


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_over_each_dim_of_a_3d_tile(target):
    x = np.random.default_rng(1).integers(-9, 10, (3, 5, 7)).astype(np.int32)
    s0, m1, n2 = _run(_reduce3, target, [1, 2, 3], x)
    assert np.array_equal(s0, x.sum(0)) and np.array_equal(m1, x.max(1)) and np.array_equal(n2, x.min(2))


_C = T.symbolic("C")


@T.prim_func
def _masked_rowmax(X: T.Tensor((3, _C), "float32"), n: T.int32, Y: T.Tensor((3,), "float32"),
                   S: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 16), "float32")
        y = T.alloc_fragment((3,), "float32")
        t = T.alloc_fragment((1, 16), "float32")
        acc = T.alloc_fragment((16,), "float32")
        T.fill(y, -T.infinity("float32"))
        for k in T.serial(T.ceildiv(_C, 16)):
            T.copy(X[0, k * 16], x)
            for i, j in T.Parallel(3, 16):
                x[i, j] = T.where(k * 16 + j < _C, x[i, j], -T.infinity("float32"))
            T.reduce_max(x, y, dim=1, clear=False)
        T.clear(acc)
        for r in T.Pipelined(n, num_stages=3):
            T.copy(X[r, 0], t)
            for j in T.Parallel(16):
                acc[j] = acc[j] + t[0, j]
        T.copy(y, Y)
        T.copy(acc, S)


@pytest.mark.parametrize("target", TARGETS)
def test_running_row_max_over_zero_columns_and_a_pipelined_loop_of_zero_trips(target):
    """C = 0: no key chunk, the maxima stay -inf (numpy's max with initial=-inf); n = 0: no iteration."""
    for cols, n in ((0, 0), (17, 2)):
        x = np.random.default_rng(cols).integers(-5, 6, (3, cols)).astype(np.float32)
        y, s = _run(_masked_rowmax, target, [2, 3], x, n)
        want = np.zeros(16, np.float32)
        want[:min(cols, 16)] = x[:n, :16].sum(0)
        assert np.array_equal(y, x.max(1, initial=-np.inf)) and np.array_equal(s, want)


_M = T.symbolic("M")


@T.prim_func
def _rowscale(X: T.Tensor((_M, 12), "float32"), Y: T.Tensor((_M, 12), "float32"), S: T.Tensor((_M,), "float32")):
    with T.Kernel(T.ceildiv(_M, 8)) as bx:
        x = T.alloc_fragment((8, 12), "float32")
        r = T.alloc_fragment((8,), "float32")
        T.copy(X[bx * 8, 0], x)
        T.reduce_max(x, r, dim=1)
        for i, j in T.Parallel(8, 12):
            x[i, j] = x[i, j] * 2.0 - r[i]
        T.copy(x, Y[bx * 8, 0])
        T.copy(r, S[bx * 8])


@pytest.mark.parametrize("target", TARGETS)
def test_one_kernel_many_row_counts_and_a_strided_view(target):
    """One compiled kernel, M = 0 (an empty grid: empty outputs), 1, 17 (2^4 + 1), and a column-strided view."""
    k = tw.compile(_rowscale, target=target, out_idx=[1, 2])
    rng = np.random.default_rng(3)
    base = rng.integers(-8, 9, (17, 24)).astype(np.float32)
    for x in (base[:0, :12], base[:1, :12], base[:, ::2]):
        y, s = k(x) if target == "cpu" else run_checked(k, x)
        xc = np.ascontiguousarray(x)
        assert y.shape == xc.shape and s.shape == (len(xc),)
        if len(xc):
            assert np.array_equal(s, xc.max(1)) and np.array_equal(y, xc * 2 - xc.max(1, keepdims=True))


@T.prim_func
def _gather(X: T.Tensor((10,), "float32"), I: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((10,), "float32")
        idx = T.alloc_fragment((8,), "int32")
        y = T.alloc_fragment((8,), "float32")
        T.copy(X, x)
        T.copy(I, idx)
        for j in T.Parallel(8):
            y[j] = x[idx[j]]  # @GATHER
        T.copy(y, Y)


_GATHER_LINE = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if s.endswith("# @GATHER"))


def _gather_outcome(target, bad):
    """'error' (cpu's TilewrightError at the gather's line), 'report' (the checker's, at the line) or the output."""
    x = np.arange(10, dtype=np.float32) + 100
    idx = np.array([0, 1, 2, 3, 4, 5, 6, bad], np.int32)
    k = tw.compile(_gather, target=target, out_idx=[-1])
    if target == "cpu":
        with pytest.raises(tw.TilewrightError) as e:
            k(x, idx)
        assert e.value.line == _GATHER_LINE and f"index {bad} is out of bounds" in e.value.message
        return "error"
    prof = k.profile(x, idx)
    if prof["reports"]:
        assert f":{_GATHER_LINE}:" in prof["reports"][0]
        return "report"
    return prof.outputs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bad", [-1, 10])
def test_gather_index_outside_the_tile(target, bad):
    """docs/language.md "Gathers": cpu raises at the line, ascend910b's checker reports it there."""
    got = _gather_outcome(target, bad)
    assert isinstance(got, str) and got in ("error", "report"), f"no error / report; the output: {got}"


@pytest.mark.parametrize("bad", [2 ** 30 + 3, -2 ** 31])
def test_f2_gather_index_past_2_30_is_reported(bad):
    """hunt30 F2, fixed on h-ascfix: the byte offset idx << 2 wrapped in int32 (x[3] with no report); the index is
    clamped before it is scaled, so it stays outside the tile."""
    got = _gather_outcome(TARGET, bad)
    assert isinstance(got, str) and got == "report", f"no report; the output: {got}"


@T.prim_func
def _column_at(X: T.Tensor((4, 8), "float32"), n: T.int32, Y: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((4, 8), "float32")
        y = T.alloc_fragment((4,), "float32")
        T.copy(X, x)
        for i in T.Parallel(4):
            y[i] = x[i, n] * 2.0  # @COLUMN_AT
        T.copy(y, Y)


_COLUMN_AT_LINE = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if s.endswith("# @COLUMN_AT"))


@pytest.mark.parametrize("target", TARGETS)
def test_f8_a_tile_read_at_a_scalar_parameter_past_the_tile(target):
    """hunt30 F8, fixed (src/target/cpu/alias_tile_copies.cpp): `y[i] = x[i, n]` of a tile copied whole from a
    tensor read the tensor in place on cpu, unchecked: n = 8 of an 8-column tile gave the next row's first
    element, no error. The tile keeps its copy now when a load of it is not proved inside, and the load is
    checked as docs/language.md "Tails and out-of-range accesses" says; ascend910b's checker reports it."""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(_run(_column_at, target, [-1], x, 7), x[:, 7] * 2)
    k = tw.compile(_column_at, target=target, out_idx=[-1])
    if target == "cpu":
        with pytest.raises(tw.TilewrightError) as e:
            k(x, 8)
        assert e.value.line == _COLUMN_AT_LINE and "index 8 is out of bounds for dimension 1 of 'x'" in e.value.message
    else:
        reports = k.profile(x, 8)["reports"]
        assert reports and f":{_COLUMN_AT_LINE}: out of bounds" in reports[0]


# --------------------------------------------------------------------------- findings in the Ascend lowering
@T.prim_func
def _column_clamp(A: T.Tensor((8,), "float32"), C: T.Tensor((8, 2), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((8,), "float32")
        c = T.alloc_fragment((8, 2), "float32")
        T.copy(A, a)
        for i in T.Parallel(8):
            c[i, 0] = T.max(T.min(a[i], 1.0), -1.0)
            c[i, 1] = a[i] + 1.0
        T.copy(c, C)


_CLAMP_IN = np.array([np.nan, 1.0, -0.0, np.inf, -np.inf, 3.0, -0.5, 0.5], np.float32)
_CLAMP_WANT = np.stack([np.maximum(np.minimum(_CLAMP_IN, 1), -1), _CLAMP_IN + 1], 1)


def test_column_store_of_a_compound_map_on_cpu():
    assert np.array_equal(_run(_column_clamp, "cpu", [-1], _CLAMP_IN), _CLAMP_WANT, equal_nan=True)


def test_f1_column_store_of_a_compound_map():
    assert np.array_equal(_run(_column_clamp, TARGET, [-1], _CLAMP_IN), _CLAMP_WANT, equal_nan=True)


@T.prim_func
def _scalar_abs(n: T.int32, O: T.Tensor((8,), "int32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((8,), "int32")
        T.clear(t)
        a = n - 100
        t[2] = T.max(a, -a)  # runs on the scalar unit of both targets
        t[3] = abs(a)
        T.copy(t, O)


def test_integer_abs_in_an_element_store_on_cpu():
    assert np.array_equal(_run(_scalar_abs, "cpu", [-1], 3), [0, 0, 97, 97, 0, 0, 0, 0])


def test_f3_integer_abs_in_an_element_store():
    assert np.array_equal(_run(_scalar_abs, TARGET, [-1], 3), [0, 0, 97, 97, 0, 0, 0, 0])


@T.prim_func
def _relu_if(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8,), "float32")
        y = T.alloc_fragment((8,), "float32")
        T.copy(X, x)
        for i in T.Parallel(8):
            if x[i] > 0.0:
                y[i] = x[i]
            else:
                y[i] = 0.0
        T.copy(y, Y)


_RELU_IN = np.array([-2.0, -0.5, 0.0, 0.5, 3.0, -np.inf, np.inf, 7.0], np.float32)


def test_if_else_inside_a_map_on_cpu():
    assert np.array_equal(_run(_relu_if, "cpu", [-1], _RELU_IN), np.maximum(_RELU_IN, 0))


def test_f5_if_else_inside_a_map():
    assert np.array_equal(_run(_relu_if, TARGET, [-1], _RELU_IN), np.maximum(_RELU_IN, 0))


# --------------------------------------------------------------------------- F6: the docs' promise
def test_f6_serial_loop_inside_a_map_is_the_documented_error():
    """docs/language.md "Loops" (fixed on h-hunt30): only T.Parallel loops nest inside a map; a serial loop there
    is an error at the loop naming the fix (it said loops nest freely but for tile ops)."""
    with pytest.raises(tw.TilewrightError) as e:
        @T.prim_func
        def serial_in_map(X: T.Tensor((8, 5), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                y = T.alloc_fragment((8,), "float32")
                T.clear(y)
                for i in T.Parallel(8):
                    for k in T.serial(5):
                        y[i] = y[i] + X[i, k]
                T.copy(y, Y)
        tw.compile(serial_in_map)
    assert "serial loop over 'k' is not allowed inside a parallel loop" in e.value.message
    assert e.value.source_line.strip() == "for k in T.serial(5):" and "move this loop outside" in e.value.hint
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text()
    assert "no serial loops" in doc and "nest freely, with one\nexception" not in doc


# --------------------------------------------------------------------------- F7: an array of a dtype Tilewright lacks
def test_f7_an_int16_argument_names_its_dtype():
    """torch.int16 / numpy.int16 (a PyTorch model's token ids, audio samples) at the call: the message named
    "DLPack code 0, 16 bits"; it names int16 now, and the hint the conversion."""
    k = tw.compile(_divmod_i8, out_idx=[2, 3])
    b = np.ones(N, np.int8)
    with pytest.raises(tw.TilewrightError) as e:
        k(np.ones(N, np.int16), b)
    assert "argument 0 ('A') of kernel '_divmod_i8': unsupported array dtype int16 (DLPack code 0, 16 bits)" \
        in e.value.message
    assert "a.astype(numpy.int32)" in e.value.hint and e.value.file == __file__
    with pytest.raises(tw.TilewrightError, match="unsupported array dtype uint32"):
        k(b, np.ones(N, np.uint32))
