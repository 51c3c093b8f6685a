"""Session 34's review of h-wrap34, h-hunt34 and h-api34 (h-review34, docs/testing.md "Session 34: review34").

R1 (h-hunt34): a scalar-unit element read the expression may discard (an arm of T.if_then_else, the right side
of `and`) is hoisted and runs whatever the condition; its index past its dimension (paged decode's guarded
`T.if_then_else(j < n, table[b, j], 0)` at j = n) was a false out-of-bounds report. Such a read keeps the
buffer's flat bounds only; an unguarded one is still checked per dimension (the control).
F18 (h-api34): outputs written only through paths an analysis could miss still compile and run: under a
run-time `if`, through a Python alias, from a fragment after an in-place map, a tile-loops `tw.store` inside
an `if`. The check runs before the target is chosen, so ascend910b alone exercises it (cheap compiles).
Results are exact (integer data or copies), so no tolerance is needed.
"""
import pathlib
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402

TABLE = np.arange(6, dtype=np.int32).reshape(2, 3)


def _guarded_table_read(guarded):
    @T.prim_func
    def k(Table: T.Tensor((2, 3), "int32"), J: T.Tensor((1,), "int32"), Y: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((1,), "int32")
            if guarded:
                y[0] = T.if_then_else(J[0] < 3, Table[0, J[0]], -1)
            else:
                y[0] = Table[0, J[0]]
            T.copy(y, Y)
    return k


def test_r1_guarded_element_read_past_its_row_is_not_reported():
    for j, want in ((3, -1), (2, 2), (0, 0)):
        cpu = tw.compile(_guarded_table_read(True), out_idx=[-1])(TABLE, np.array([j], np.int32))
        prof = tw.compile(_guarded_table_read(True), target=TARGET, out_idx=[-1]).profile(TABLE, np.array([j], np.int32))
        assert prof["reports"] == [], prof["reports"]
        assert cpu.tolist() == [want] and prof.outputs.tolist() == [want]


def test_r1_control_unguarded_read_past_its_row_is_reported():
    prof = tw.compile(_guarded_table_read(False), target=TARGET, out_idx=[-1]).profile(TABLE, np.array([3], np.int32))
    assert any("index 3 of dimension 1 of tensor Table" in r for r in prof["reports"]), prof["reports"]


def test_r1_guarded_tile_read_past_its_row_is_not_reported():
    @T.prim_func
    def k(X: T.Tensor((2, 8), "int32"), Y: T.Tensor((10,), "int32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((2, 8), "int32")
            y = T.alloc_fragment((10,), "int32")
            T.copy(X, t)
            for j in T.serial(10):
                y[j] = T.if_then_else(j < 8, t[0, j], 7)
            T.copy(y, Y)
    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    prof = tw.compile(k, target=TARGET, out_idx=[-1]).profile(x)
    assert prof["reports"] == [], prof["reports"]
    assert prof.outputs.tolist() == list(range(8)) + [7, 7]


X16 = np.arange(256, dtype=np.float32).reshape(16, 16) - 100


def _runs(kernel, args, want, **kw):
    out = tw.compile(kernel, target=TARGET, **kw)(*args)
    np.testing.assert_array_equal(out, want)


def test_f18_output_written_under_run_time_if():
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), n: T.int32, Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            if n > 0:
                T.copy(X, Y)
    _runs(k, (X16, 1), X16, out_idx=[-1])


def test_f18_output_written_through_an_alias():
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            Z = Y
            T.copy(X, Z)
    _runs(k, (X16,), X16, out_idx=[-1])


def test_f18_output_copied_from_a_fragment_after_an_in_place_map():
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16, 16), "float32")
            T.copy(X, t)
            for i, j in T.Parallel(16, 16):
                t[i, j] = t[i, j] + 1
            T.copy(t, Y)
    _runs(k, (X16,), X16 + 1, out_idx=[-1])


def test_f18_tile_loops_store_inside_an_if():
    def k(X: tw.Tensor((16, 16), "float32")):
        out = tw.output((16, 16), dtype="float32")
        for i in range(2):
            t = tw.load(X, (i * 8, 0), (8, 16))
            if i >= 0:
                tw.store(out, (i * 8, 0), t)
        return out
    _runs(k, (X16,), X16)
