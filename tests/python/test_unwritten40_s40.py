"""Session 40 (h-unwritten40, issue 13): a T.atomic_add into elements of an out_idx output that nothing
wrote before it (an output the kernel also writes another way is not zeroed: the sum adds onto whatever
the memory held) is reported on both targets, at the add's line, naming the same element and count:
the ascend910b simulator at the add (session 39), cpu's checked mode (TW_BOUNDS_CHECK=1: the add finds
the runtime's fill in both checked launches). An output only T.atomic_add writes starts at zero and an
input the kernel adds into is the caller's: neither is reported. docs/language.md "T.atomic_add",
docs/testing.md "Session 40: atomic adds into unwritten output elements"."""
import inspect

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.errors import TilewrightError
from tw_test_util import bounds_checked, bounds_checked_child

TARGET = "ascend910b"


def store_and_add(dtype, rows, store_after):
    """Rows 0 .. rows - 1 of Y stored, then all 4 rows added into (the rows past them get garbage + x), then
    (store_after) every row stored."""
    @T.prim_func
    def main(X: T.Tensor((4, 6), dtype), Y: T.Tensor((4, 6), dtype)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((4, 6), dtype)
            T.copy(X, t)
            if rows > 0:
                T.copy(t[0:rows, 0:6], Y[0:rows, 0:6])
            T.atomic_add(Y[0, 0], t)
            if store_after:
                T.copy(t, Y)
    return main


def add_only(dtype):
    """Only T.atomic_add writes Y (3 blocks): it starts at zero, no report."""
    @T.prim_func
    def add_only(X: T.Tensor((3, 6), dtype), Y: T.Tensor((6,), dtype)):
        with T.Kernel(3) as r:
            t = T.alloc_fragment((6,), dtype)
            T.copy(X[r, 0], t)
            T.atomic_add(Y[0], t)
    return add_only


DTYPES = ["float32", "float16", "bfloat16", "int32"]
# name -> (factory, input shape, out_idx, (first element, count) or None, reference)
CASES = {
    "add_first": (lambda dt: store_and_add(dt, 0, True), (4, 6), [-1], ("[0, 0]", 24), lambda x: x),
    "add_gap": (lambda dt: store_and_add(dt, 2, False), (4, 6), [-1], ("[2, 0]", 12), None),
    "store_then_add": (lambda dt: store_and_add(dt, 4, False), (4, 6), [-1], None, lambda x: 2 * x),
    "add_only": (add_only, (3, 6), [-1], None, lambda x: x.sum(0)),
    "accumulator": (add_only, (3, 6), None, None, lambda x: x.sum(0)),  # Y passed in (zeros): the caller's
}


def _x(shape, dtype):
    if dtype == "int32":
        return np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape) - 7
    return tw.testing.randn(shape, dtype, seed=40)


def add_line(name):
    src, first = inspect.getsourcelines(add_only if name in ("add_only", "accumulator") else store_and_add)
    return first + next(i for i, s in enumerate(src) if "T.atomic_add(" in s)


def run_case(name, dtype, target):
    """'ok' (the values checked against numpy in float64) or 'line | message' of the report."""
    factory, shape, out_idx, _, ref = CASES[name]
    k = tw.compile(factory(dtype), target=target, out_idx=out_idx)
    x = _x(shape, dtype)
    try:
        if out_idx is None:
            y = np.zeros(shape[1:], x.dtype)
            k(x, y)
        else:
            y = k(x)
    except TilewrightError as e:
        return f"{e.line} | {' '.join(e.message.split())}"  # the simulator's report: several lines
    want = ref(x.astype(np.float64))
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "int32": 0}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), want, atol=tol * 3, rtol=tol)
    return "ok"


def _check(text, name):
    expect = CASES[name][3]
    if expect is None:
        assert text == "ok", text
        return
    element, count = expect
    line, message = text.split(" | ", 1)
    assert int(line) == add_line(name), (text, add_line(name))
    more = f" and {count - 1} more" if count > 1 else ""
    assert f"atomic add into element {element} of output 'Y'{more}, which nothing wrote before" in message, message


# the gap in every dtype atomic_add takes, the other forms in one or two
COMBOS = [("add_gap", dt) for dt in DTYPES] + [("add_first", "float32"), ("store_then_add", "float32"),
                                               ("store_then_add", "bfloat16"), ("add_only", "float32"),
                                               ("accumulator", "int32")]


@pytest.mark.parametrize("name,dtype", COMBOS)
def test_ascend910b(name, dtype):
    _check(run_case(name, dtype, TARGET), name)


def test_cpu_checked_mode_reports_the_same(tmp_path):
    """One checked child runs every combination on cpu."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import test_unwritten40_s40 as m\n"
            "for name, dt in m.COMBOS: print(name, dt, '|', m.run_case(name, dt, 'cpu'))\n")
    lines = bounds_checked_child(code, tmp_path)
    got = {tuple(line.split(" | ", 1)[0].split()): line.split(" | ", 1)[1] for line in lines}
    assert len(got) == len(COMBOS), lines
    for (name, dt), text in got.items():
        _check(text, name)


def test_unchecked_cpu_does_not_check():
    """Plain cpu (no TW_BOUNDS_CHECK) neither fills nor checks: the adds into an uninitialised output run as
    written (the elements stored last are right)."""
    if bounds_checked():
        pytest.skip("this process runs checked code: the add is reported (test_cpu_checked_mode_reports_the_same)")
    x = _x((4, 6), "float32")
    np.testing.assert_array_equal(tw.compile(store_and_add("float32", 0, True), out_idx=[-1])(x), x)
