"""Session 39 (h-unwritten39, issue 13; robust38 F7): elements of an out_idx output that no store of
the kernel writes are reported -- by the ascend910b simulator's checker (`unwritten output`, any
functional run) and by cpu's checked mode (TW_BOUNDS_CHECK=1: fill, run, confirm) -- naming the same
first element and count. docs/ascend.md "Session 39: output elements nothing wrote", docs/testing.md."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.errors import TilewrightError
from tw_test_util import bounds_checked_child, unchecked_code_only

TARGET = "ascend910b"


def gap():
    """F7: 2 blocks each copy a tile 4 columns wide to Y[0, bx * 8]: columns 4..7 and 12..15 unwritten."""
    @T.prim_func
    def gap(X: T.Tensor((8, 16), "float32"), Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(2) as bx:
            t = T.alloc_fragment((8, 4), "float32")
            T.copy(X[0, bx * 8], t)
            T.copy(t, Y[0, bx * 8])
    return gap


def tail():
    """A grid of N // 16 blocks of 16 columns (not the ceiling): the last 8 columns of 40 unwritten."""
    @T.prim_func
    def tail(X: T.Tensor((10, 40), "float16"), Y: T.Tensor((10, 40), "float16")):
        with T.Kernel(40 // 16) as bx:
            t = T.alloc_fragment((10, 16), "float16")
            T.copy(X[0, bx * 16], t)
            T.copy(t, Y[0, bx * 16])
    return tail


def extent():
    """Rows < n of a run-time argument written: the rest is uninitialised memory for the caller."""
    @T.prim_func
    def extent(X: T.Tensor((6, 5), "int8"), n: T.int32, Y: T.Tensor((6, 5), "int8")):
        with T.Kernel(6) as b:
            if b < n:
                for j in T.Parallel(5):
                    Y[b, j] = X[b, j]
    return extent


def two_outputs():
    """Two outputs: the first (int8) written whole, the second (bfloat16) every other row."""
    @T.prim_func
    def two(X: T.Tensor((4, 9), "float32"), A: T.Tensor((4, 9), "int8"), B: T.Tensor((4, 9), "bfloat16")):
        with T.Kernel(4) as r:
            for j in T.Parallel(9):
                A[r, j] = T.cast(X[r, j], "int8")
            if r % 2 == 0:
                for j in T.Parallel(9):
                    B[r, j] = T.cast(X[r, j], "bfloat16")
    return two


def gemm_half():
    """A gemm (Fixpipe on ascend910b) whose one block stores rows 0..15 of a 32-row C."""
    @T.prim_func
    def gemm_half(A: T.Tensor((32, 16), "float16"), B: T.Tensor((16, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 32), "float16")
            c = T.alloc_fragment((16, 32), "float32")
            T.clear(c)
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.gemm(a, b, c)
            T.copy(c, C[0, 0])
    return gemm_half


def whole():
    """Writes every element: odd shape, tails in both dims (no report)."""
    @T.prim_func
    def whole(X: T.Tensor((7, 13), "float32"), Y: T.Tensor((7, 13), "float32")):
        with T.Kernel(T.ceildiv(13, 8), T.ceildiv(7, 4)) as (bx, by):
            t = T.alloc_fragment((4, 8), "float32")
            T.copy(X[by * 4, bx * 8], t)
            for i, j in T.Parallel(4, 8):
                t[i, j] = t[i, j] * 2
            T.copy(t, Y[by * 4, bx * 8])
    return whole


def add_only():
    """An output only T.atomic_add writes starts at zero (api35): written, no report."""
    @T.prim_func
    def add_only(X: T.Tensor((6, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(6) as r:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X[r, 0], t)
            T.atomic_add(Y[0], t)
    return add_only


def _x(shape, dtype, seed=0):
    return tw.testing.randn(shape, dtype, seed=seed)


# (factory, inputs, (tensor, first element, unwritten count) or None)
CASES = {
    "gap": (gap, lambda: [_x((8, 16), "float32")], ("Y", "[0, 4]", 64)),
    "tail": (tail, lambda: [_x((10, 40), "float16")], ("Y", "[0, 32]", 80)),
    "extent": (extent, lambda: [np.arange(30, dtype=np.int8).reshape(6, 5), 4], ("Y", "[4, 0]", 10)),
    "extent_all": (extent, lambda: [np.arange(30, dtype=np.int8).reshape(6, 5), 6], None),
    "two": (two_outputs, lambda: [_x((4, 9), "float32") * 4], ("B", "[1, 0]", 18)),
    "gemm": (gemm_half, lambda: [_x((32, 16), "float16"), _x((16, 32), "float16", 1)], ("C", "[16, 0]", 512)),
    "whole": (whole, lambda: [_x((7, 13), "float32")], None),
    "add_only": (add_only, lambda: [_x((6, 8), "float32")], None),
}


def run_case(name, target):
    """'ok' (no report; the written part checked against numpy by the caller) or the error's first line."""
    factory, inputs, _ = CASES[name]
    n_out = 2 if name == "two" else 1
    k = tw.compile(factory(), target=target, out_idx=list(range(-n_out, 0)))
    try:
        k(*inputs())
    except TilewrightError as e:
        return e.message.splitlines()[0] if target == "cpu" else e.message
    return "ok"


def _check(text, expect):
    if expect is None:
        assert text == "ok", text
        return
    tensor, element, count = expect
    assert f"element {element} of output '{tensor}'" in text, text
    more = f"and {count - 1} more" if count > 1 else "of its"
    assert more in text, text
    assert "out_idx" in text


@pytest.mark.parametrize("name", list(CASES))
def test_ascend910b_reports_output_elements_nothing_wrote(name):
    text = run_case(name, TARGET)
    _check(text, CASES[name][2])
    if CASES[name][2] is not None:
        assert "unwritten output" in text, text


def test_cpu_checked_mode_reports_the_same_element(tmp_path):
    """One checked child runs every case on cpu (the kernels compile once per suite cache)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import test_unwritten39_s39 as m\n"
            "for name in m.CASES: print(name, '|', m.run_case(name, 'cpu'))\n")
    lines = bounds_checked_child(code, tmp_path)
    got = dict(line.split(" | ", 1) for line in lines)
    for name, (_, _, expect) in CASES.items():
        _check(got[name], expect)


@unchecked_code_only
def test_values_where_written_and_unchecked_cpu_is_unchanged():
    """The written part is right (cpu's checked child checks no report for these); plain cpu (no TW_BOUNDS_CHECK) reports nothing (an out_idx
    output is uninitialised there, as torch.empty)."""
    x = np.arange(30, dtype=np.int8).reshape(6, 5)
    y = tw.compile(extent(), target="cpu", out_idx=[-1])(x, 4)
    np.testing.assert_array_equal(y[:4], x[:4])
    x = _x((7, 13), "float32")
    np.testing.assert_array_equal(tw.compile(whole(), target=TARGET, out_idx=[-1])(x), x * 2)
    x = _x((6, 8), "float32")
    tw.testing.assert_close(tw.compile(add_only(), target=TARGET, out_idx=[-1])(x), x.astype(np.float64).sum(0),
                            atol=1e-5, rtol=1e-5)


def test_atomic_add_into_elements_nothing_wrote_is_reported_on_ascend910b():
    """An output written by stores and by T.atomic_add is not zeroed: an add before any store adds into garbage
    (the simulator's report at the add). (A store first, then the add, is right, but the Ascend lowering orders
    the two MTE3 copies with no barrier: unwritten39 F1, a same-pipe hazard.)"""
    @T.prim_func
    def add_first(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            T.atomic_add(Y[0], t)
            T.copy(t, Y)

    x = _x((8,), "float32")
    with pytest.raises(TilewrightError, match=r"atomic add into element \[0\] of output 'Y' and 7 more, which nothing"):
        tw.compile(add_first, target=TARGET, out_idx=[-1])(x)
    rep = tw.compile(gap(), target=TARGET, out_idx=[-1]).profile(_x((8, 16), "float32"), functional=False)
    assert not any("unwritten output" in r for r in rep["reports"]), rep["reports"]  # timing-only: not checked
