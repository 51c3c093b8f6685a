"""Session 32: an if in a T.Parallel map runs on ascend910b as on cpu (h-elif32; issue 13; docs/ascend.md
"Session 32: elif chains and arms of several stores in a map (h-elif32)"; hunt31 F4). serial_maps lowers the
if to stores of selects: an elif chain as nested selects (the second condition chosen only where the first is
false), an arm of several stores as one select per stored element, arms storing different tiles, an element an
arm leaves unwritten keeping its value, nested ifs, conditions on indices and on tile data; the untaken arm's
gather / int32 arithmetic kept in range along every level's condition. Each kernel runs on cpu and on ascend910b
(simulator, checker on: `prof["reports"] == []`) against numpy; shapes with tails (37 columns, 6 rows in
blocks of 4, one-element maps). Tolerances: exact everywhere (selects of inputs, small integers, halves and
doubling, exact in every dtype tested).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
R, B, C = 6, 4, 37  # 6 rows in blocks of 4 (a tail block), 37 columns (a tail of every vector repeat)


def _run(prim, target, out_idx, *args):
    k = tw.compile(prim, target=target, out_idx=out_idx)
    return k(*args) if target == "cpu" else run_checked(k, *args)


def _values(dtype, shape, seed):
    """Small integers and halves: exact in every dtype and through * 2 and - 1."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0 if dtype == "uint8" else -8, 9, shape)
    if dtype in ("int32", "int8", "uint8"):
        return v.astype(dtype)
    return (v / 2.0).astype(tw.testing.np_dtype(dtype))


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.astype(np.float64), want.astype(np.float64)), (got, want)


DTYPES = ["float32", "float16", "bfloat16", "int32", "int8", "uint8"]


# --------------------------------------------------------------------------- an elif chain: index masks and data
def _elif_chain(dt):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt)):
        with T.Kernel(T.ceildiv(R, B)) as bx:
            x = T.alloc_fragment((B, C), dt)
            y = T.alloc_fragment((B, C), dt)
            T.copy(X[bx * B, 0], x)
            for i, j in T.Parallel(B, C):
                if j < 3:
                    y[i, j] = x[i, j]
                elif x[i, j] > 1:  # only where j >= 3
                    y[i, j] = x[i, j] - 1
                elif j >= C - 2:
                    y[i, j] = 2
                else:
                    y[i, j] = x[i, j] * 2
            T.copy(y, Y[bx * B, 0])
    return k


def _elif_chain_ref(x):
    j = np.arange(C)[None, :]
    return np.where(j < 3, x, np.where(x > 1, x - 1, np.where(j >= C - 2, 2, x * 2))).astype(x.dtype)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("target", TARGETS)
def test_elif_chain(target, dt):
    x = _values(dt, (R, C), 1)
    _same(_run(_elif_chain(dt), target, [-1], x), _elif_chain_ref(x))


# --------------------------------------------------------------------------- arms of several stores, two tiles
def _two_tiles(dt):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Z: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt), W: T.Tensor((R, C), dt)):
        with T.Kernel(T.ceildiv(R, B)) as bx:
            x = T.alloc_fragment((B, C), dt)
            y = T.alloc_fragment((B, C), dt)
            z = T.alloc_fragment((B, C), dt)
            T.copy(X[bx * B, 0], x)
            T.copy(Z[bx * B, 0], z)
            for i, j in T.Parallel(B, C):
                if x[i, j] > 0:
                    y[i, j] = x[i, j] * 2
                    z[i, j] = x[i, j]  # the else arm leaves z: it keeps Z's value
                else:
                    y[i, j] = x[i, j] - 1
            T.copy(y, Y[bx * B, 0])
            T.copy(z, W[bx * B, 0])
    return k


@pytest.mark.parametrize("dt", ["float16", "int32", "uint8"])
@pytest.mark.parametrize("target", TARGETS)
def test_arm_of_two_stores_and_an_unwritten_element(target, dt):
    x, z = _values(dt, (R, C), 2), _values(dt, (R, C), 3)
    y, w = _run(_two_tiles(dt), target, [-2, -1], x, z)
    _same(y, np.where(x > 0, x * 2, x - 1).astype(x.dtype))
    _same(w, np.where(x > 0, x, z).astype(x.dtype))


# --------------------------------------------------------------------------- a store reading the arm's earlier store
@T.prim_func
def _sequential(X: T.Tensor((R, C), "float32"), Y0: T.Tensor((R, C), "float32"), Y: T.Tensor((R, C), "float32"),
                Z: T.Tensor((R, C), "float32")):
    with T.Kernel(T.ceildiv(R, B)) as bx:
        x = T.alloc_fragment((B, C), "float32")
        y = T.alloc_fragment((B, C), "float32")
        z = T.alloc_fragment((B, C), "float32")
        T.copy(X[bx * B, 0], x)
        T.copy(Y0[bx * B, 0], y)
        for i, j in T.Parallel(B, C):
            if j % 3 == 0:
                y[i, j] = x[i, j] + 1.0
                z[i, j] = y[i, j] * 2.0  # the y just stored
            elif x[i, j] < 0.0:
                z[i, j] = y[i, j]  # y as it was (Y0)
                y[i, j] = 0.0
            else:
                z[i, j] = x[i, j]
        T.copy(y, Y[bx * B, 0])
        T.copy(z, Z[bx * B, 0])


@pytest.mark.parametrize("target", TARGETS)
def test_stores_in_order_within_an_arm(target):
    x, y0 = _values("float32", (R, C), 4), _values("float32", (R, C), 5)
    y, z = _run(_sequential, target, [-2, -1], x, y0)
    m = (np.arange(C) % 3 == 0)[None, :]
    _same(y, np.where(m, x + 1, np.where(x < 0, 0, y0)).astype(np.float32))
    _same(z, np.where(m, (x + 1) * 2, np.where(x < 0, y0, x)).astype(np.float32))


# --------------------------------------------------------------------------- nested ifs; an if without else inside
def _nested(dt):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt)):
        with T.Kernel(T.ceildiv(R, B)) as bx:
            x = T.alloc_fragment((B, C), dt)
            y = T.alloc_fragment((B, C), dt)
            T.copy(X[bx * B, 0], x)
            T.copy(X[bx * B, 0], y)
            for i, j in T.Parallel(B, C):
                if i % 2 == 0:
                    if x[i, j] > 0:
                        y[i, j] = x[i, j] * 2
                    else:
                        y[i, j] = 1
                else:
                    if j > C - 5:  # no else: y keeps x
                        y[i, j] = 0
            T.copy(y, Y[bx * B, 0])
    return k


@pytest.mark.parametrize("dt", ["bfloat16", "int32"])
@pytest.mark.parametrize("target", TARGETS)
def test_nested_ifs(target, dt):
    x = _values(dt, (R, C), 6)
    i = (np.arange(R) % B)[:, None]
    j = np.arange(C)[None, :]
    want = np.where(i % 2 == 0, np.where(x > 0, x * 2, 1), np.where(j > C - 5, 0, x)).astype(x.dtype)
    _same(_run(_nested(dt), target, [-1], x), want)


@T.prim_func
def _bf16_masks(X: T.Tensor((R, C), "bfloat16"), Z0: T.Tensor((R, C), "bfloat16"), Y: T.Tensor((R, C), "bfloat16"),
                Z: T.Tensor((R, C), "bfloat16")):
    with T.Kernel(T.ceildiv(R, B)) as bx:
        y = T.alloc_fragment((B, C), "bfloat16")
        z = T.alloc_fragment((B, C), "bfloat16")
        T.copy(X[bx * B, 0], y)
        T.copy(Z0[bx * B, 0], z)
        for i, j in T.Parallel(B, C):
            if i + j > 6:
                if j >= 7:  # y = where(i + j > 6 and j >= 7, ...): one mask (bfloat16 masks do not nest)
                    y[i, j] = -0.5
            else:
                if j < 2:  # z = where(i + j <= 6 and j < 2, ...)
                    z[i, j] = 1.5
        T.copy(y, Y[bx * B, 0])
        T.copy(z, Z[bx * B, 0])


@pytest.mark.parametrize("target", TARGETS)
def test_nested_index_masks_of_bfloat16(target):
    x, z0 = _values("bfloat16", (R, C), 10), _values("bfloat16", (R, C), 11)
    i = (np.arange(R) % B)[:, None]
    j = np.arange(C)[None, :]
    y, z = _run(_bf16_masks, target, [-2, -1], x, z0)
    _same(y, np.where((i + j > 6) & (j >= 7), -0.5, x.astype(np.float32)).astype(x.dtype))
    _same(z, np.where((i + j <= 6) & (j < 2), 1.5, z0.astype(np.float32)).astype(x.dtype))


@T.prim_func
def _int8_mask_fill(X: T.Tensor((B, C), "int8"), Y: T.Tensor((B, C), "int8")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((B, C), "int8")
        T.copy(X, y)
        for i, j in T.Parallel(B, C):
            y[i, j] = T.where(j > C - 5, 0, y[i, j])
        T.copy(y, Y)


def test_int8_in_place_index_mask_fill():
    """`if j > C - 5: y[i, j] = 0` (no else) of an int8 tile is this select; nested_ifs runs bfloat16 / int32."""
    x = _values("int8", (B, C), 8)
    want = np.where(np.arange(C)[None, :] > C - 5, 0, x).astype(np.int8)
    _same(run_checked(tw.compile(_int8_mask_fill, target=TARGET, out_idx=[-1]), x), want)


@T.prim_func
def _let_then_store(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((8,), "float32")
        z = T.alloc_fragment((8,), "float32")
        T.copy(X, y)
        for i in T.Parallel(8):
            t = y[i] * 2.0  # the value of y here, on cpu
            y[i] = 1.0
            z[i] = t
        T.copy(y, Y)
        T.copy(z, Z)


def test_let_reading_a_tile_stored_after_it():
    """No if: the lowering above keeps such lets out (the if stays an error); this is the map body's own case."""
    x = np.arange(8, dtype=np.float32)
    y, z = run_checked(tw.compile(_let_then_store, target=TARGET, out_idx=[-2, -1]), x)
    _same(z, x * 2)


# --------------------------------------------------------------------------- guards along the chain
@T.prim_func
def _gather_chain(X: T.Tensor((16,), "float32"), I: T.Tensor((9,), "int32"), Y: T.Tensor((9,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((16,), "float32")
        ix = T.alloc_fragment((9,), "int32")
        y = T.alloc_fragment((9,), "float32")
        T.copy(X, x)
        T.copy(I, ix)
        for i in T.Parallel(9):
            if ix[i] < 0:
                y[i] = -1.0
            elif ix[i] >= 16:  # ix < 0 here too selects its index into range: the first condition guards
                y[i] = -2.0
            else:
                y[i] = x[ix[i]]
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_guarded_by_an_elif_chain(target):
    x = np.arange(16, dtype=np.float32) + 0.5
    ix = np.array([0, 15, -1, 16, 7, -2 ** 31, 2 ** 31 - 1, 3, -16], np.int32)
    want = np.where(ix < 0, -1.0, np.where(ix >= 16, -2.0, x[np.clip(ix, 0, 15)])).astype(np.float32)
    _same(_run(_gather_chain, target, [-1], x, ix), want)


@T.prim_func
def _collatz(A: T.Tensor((7,), "int32"), Y: T.Tensor((7,), "int32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((7,), "int32")
        y = T.alloc_fragment((7,), "int32")
        T.copy(A, a)
        for i in T.Parallel(7):
            if a[i] % 2 == 0:
                y[i] = a[i] // 2
            elif a[i] < 715827882:  # 3 a + 1 stays in int32
                y[i] = a[i] * 3 + 1
            else:
                y[i] = -1
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)
def test_int32_arm_not_taken_does_not_overflow(target):
    """The even 2^31 - 2 and the odd 2^31 - 1 never compute 3 a + 1 on cpu: no overflow report on ascend910b."""
    a = np.array([6, 7, 2 ** 31 - 2, 2 ** 31 - 1, -5, 0, 715827881], np.int32)
    want = [v // 2 if v % 2 == 0 else (3 * v + 1 if v < 715827882 else -1) for v in a.tolist()]
    assert _run(_collatz, target, [-1], a).tolist() == want


# --------------------------------------------------------------------------- lets; strided stores; a row bound from data
@T.prim_func
def _lets(X: T.Tensor((16,), "float32"), I: T.Tensor((9,), "int32"), Y: T.Tensor((9,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((16,), "float32")
        ix = T.alloc_fragment((9,), "int32")
        y = T.alloc_fragment((9,), "float32")
        T.copy(X, x)
        T.copy(I, ix)
        for i in T.Parallel(9):
            k = ix[i]  # a let of the map: the gather x[k] below is guarded through it
            if k < 0 or k >= 16:
                y[i] = -1.0
            else:
                v = x[k] * 2.0  # a let of the arm
                y[i] = v + 1.0
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)
def test_lets_in_the_map_and_in_an_arm(target):
    x = np.arange(16, dtype=np.float32) - 4.5
    ix = np.array([0, 15, -1, 16, 7, -2 ** 31, 2 ** 31 - 1, 3, -16], np.int32)
    want = np.where((ix < 0) | (ix >= 16), -1.0, x[np.clip(ix, 0, 15)] * 2 + 1).astype(np.float32)
    _same(_run(_lets, target, [-1], x, ix), want)


@T.prim_func
def _strided(X: T.Tensor((3, 9), "float32"), L: T.Tensor((3,), "int32"), Y: T.Tensor((3, 18), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 9), "float32")
        lim = T.alloc_fragment((3,), "int32")
        y = T.alloc_fragment((3, 18), "float32")
        T.copy(X, x)
        T.copy(L, lim)
        for i, j in T.Parallel(3, 9):
            if x[i, j] > 0:  # interleaved stores, both elements in each arm
                y[i, 2 * j] = x[i, j]
                y[i, 2 * j + 1] = 1.0
            else:
                y[i, 2 * j] = 0.0
                y[i, 2 * j + 1] = -1.0
        for i, j in T.Parallel(3, 9):
            if j < lim[i]:  # a bound read from a tile, no else: a select (x keeps its value elsewhere)
                x[i, j] = -x[i, j]
        T.copy(y, Y)
        T.copy(x, X)


@T.prim_func
def _strided_in_order(X: T.Tensor((3, 9), "float32"), Y: T.Tensor((3, 18), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 9), "float32")
        y = T.alloc_fragment((3, 18), "float32")
        T.copy(X, x)
        for i, j in T.Parallel(3, 9):
            if x[i, j] > 0:
                y[i, 2 * j] = x[i, j]
                y[i, 2 * j + 1] = y[i, 2 * j] + 1.0  # the element just stored: the stores run in order
            else:
                y[i, 2 * j] = 0.0
                y[i, 2 * j + 1] = -1.0
        T.copy(y, Y)


def test_strided_stores_in_order_name_the_rewrite():
    """In order, each arm's store of y[i, 2 * j] is a store of it: twice at a strided index, not a vector store
    on ascend910b; the error is the if's (cpu runs it)."""
    x = _values("float32", (3, 9), 9)
    want = np.empty((3, 18), np.float32)
    want[:, 0::2], want[:, 1::2] = np.where(x > 0, x, 0), np.where(x > 0, x + 1, -1)
    _same(_run(_strided_in_order, "cpu", [-1], x), want)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_strided_in_order, target=TARGET, out_idx=[-1])
    assert "an if inside a map" in e.value.message and "T.where" in e.value.hint
    assert "if x[i, j] > 0:" in e.value.source_line


@pytest.mark.parametrize("target", TARGETS)
def test_strided_stores_and_a_bound_from_a_tile(target):
    x = _values("float32", (3, 9), 7)
    lim = np.array([0, 4, 9], np.int32)
    x0 = x.copy()
    args = [x, lim]
    k = tw.compile(_strided, target=target, out_idx=[-1])
    y = k(*args) if target == "cpu" else run_checked(k, *args)
    want = np.empty((3, 18), np.float32)
    want[:, 0::2], want[:, 1::2] = np.where(x0 > 0, x0, 0), np.where(x0 > 0, 1, -1)
    _same(y, want)
    _same(x, np.where(np.arange(9)[None, :] < lim[:, None], -x0, x0).astype(np.float32))


# --------------------------------------------------------------------------- one element; hunt31 F4's form (elif, two stores)
@T.prim_func
def _one(X: T.Tensor((1,), "float32"), Y: T.Tensor((1,), "float32"), Z: T.Tensor((1,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((1,), "float32")
        y = T.alloc_fragment((1,), "float32")
        z = T.alloc_fragment((1,), "float32")
        T.copy(X, x)
        for i in T.Parallel(1):
            if x[i] > 1.0:
                y[i] = 1.0
                z[i] = x[i]
            elif x[i] > 0.0:
                y[i] = 2.0
                z[i] = -x[i]
            else:
                y[i] = 3.0
                z[i] = 0.0
        T.copy(y, Y)
        T.copy(z, Z)


@pytest.mark.parametrize("v", [2.0, 0.5, -1.0])
@pytest.mark.parametrize("target", TARGETS)
def test_one_element_elif_of_two_stores(target, v):
    y, z = _run(_one, target, [-2, -1], np.array([v], np.float32))
    assert (y[0], z[0]) == ((1.0, v) if v > 1 else (2.0, -v) if v > 0 else (3.0, 0.0))


# --------------------------------------------------------------------------- conditions and lets on tiles the if stores (errors until elifcond33)
def _cond_kernel(form):
    """`if x[i] > 0: x[i] = 0.0; y[i] = ...`: form "first" stores y = 1 (the select of x goes last), "in order" y =
    x + 1 (the x just stored: in order, the condition would see it), "tile" the same after the condition is
    computed into a tile first (the hint's rewrite)."""
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            y = T.alloc_fragment((8,), "float32")
            m = T.alloc_fragment((8,), "int32")
            T.copy(X, x)
            T.fill(y, 0.0)
            for i in T.Parallel(8):
                m[i] = T.where(x[i] > 0.0, 1, 0)
            for i in T.Parallel(8):
                if form == "first":
                    if x[i] > 0.0:
                        x[i] = 0.0
                        y[i] = 1.0
                elif form == "in order":
                    if x[i] > 0.0:
                        x[i] = 0.0
                        y[i] = x[i] + 1.0
                else:
                    if m[i] == 1:
                        x[i] = 0.0
                        y[i] = x[i] + 1.0
            T.copy(x, Y)
            T.copy(y, Z)
    return k


@T.prim_func
def _let_overwritten(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        y = T.alloc_fragment((8,), "float32")
        z = T.alloc_fragment((8,), "float32")
        T.copy(X, y)
        T.fill(z, 0.0)
        for i in T.Parallel(8):
            t = y[i] * 2.0  # y before the if: its store below comes before z's
            if i % 2 == 0:
                y[i] = 1.0
                z[i] = t
        T.copy(y, Y)
        T.copy(z, Z)


@T.prim_func
def _unwritten(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8,), "float32")
        y = T.alloc_fragment((8,), "float32")
        z = T.alloc_fragment((8,), "float32")
        T.copy(X, x)
        for i in T.Parallel(8):
            if x[i] > 0.0:
                y[i] = 1.0
                z[i] = 2.0  # the else arm leaves z unwritten, copied out
            else:
                y[i] = 3.0
        T.copy(y, Y)
        T.copy(z, Z)


def test_an_element_no_arm_writes_is_an_uninitialised_read():
    """The element an arm leaves keeps its value: never written, the checker reports it reaching GM (as checked
    mode does on cpu); y, written by both arms, is right."""
    x = np.arange(8, dtype=np.float32) - 3.5
    prof = tw.compile(_unwritten, target=TARGET, out_idx=[-2, -1]).profile(x)
    assert len(prof["reports"]) == 1 and "uninitialised read" in prof["reports"][0] and "tile z" in prof["reports"][0]
    _same(prof.outputs[0], np.where(x > 0, 1, 3).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_let_on_a_tile_stored_before_the_last_store(target):
    """An error on ascend910b until elifcond33 (the let is now bound before the if's stores)."""
    x = np.arange(8, dtype=np.float32) + 0.5
    y, z = _run(_let_overwritten, target, [-2, -1], x)
    even = np.arange(8) % 2 == 0
    _same(y, np.where(even, 1, x).astype(np.float32))
    _same(z, np.where(even, 2 * x, 0).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_condition_on_a_tile_an_earlier_store_writes(target):
    """Where a store must come first (y reads the x just stored) the condition is bound before the if's stores
    (an error on ascend910b until elifcond33); the condition computed into a tile first and, where the order is
    free, the store of the tile the condition reads going last give the same."""
    x = np.array([1.5, -2.0, 0.0, 3.0, -0.5, 4.0, -6.0, 0.5], np.float32)
    want = (np.where(x > 0, 0, x).astype(np.float32), (x > 0).astype(np.float32))
    for form in ("in order", "tile", "first"):
        for got, w in zip(_run(_cond_kernel(form), target, [-2, -1], x.copy()), want):
            _same(got, w)
