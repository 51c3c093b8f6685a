"""Session 35's bounds checks on ascend910b (h-bounds35, docs/testing.md "Session 35: bounds35").

1. hunt34 F3: a T.Parallel map's element read of a tensor at a run-time offset past its dimension was staged as a
   copy of the window it covers, whose clipping read zeros there without a report. The staged copy is now a
   checked copy (ir.h CopyNode::checked): the simulator reports a window that leaves a dimension (index, dimension,
   tensor, the kernel's line) wherever the compiler did not prove it inside; both staging passes (legalize_vector
   for a map storing into a tile, stage_global_maps for one storing into a tensor). A read the map may discard (a
   T.if_then_else arm, under an `if`) and a T.copy the kernel writes stay clipped without a report.
2. review34's open note: a guarded scalar read hoisted out of its T.if_then_else ran whatever the condition and read
   past the tensor's last byte (the flat bound's false report); its index is now clamped into the tensor.
Results are exact (integer-valued data, copies), so no tolerance is needed; the in-range controls and the guarded
forms run on cpu too (the same values).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402

A = np.arange(16, dtype=np.float32).reshape(2, 8)


def _profile(prim, *inputs):
    prof = tw.compile(prim, target=TARGET, out_idx=[-1]).profile(*inputs)
    return prof.outputs, prof["reports"]


def _cpu(prim, *inputs):
    return tw.compile(prim, out_idx=[-1])(*inputs)


def _oob(reports):
    return [r for r in reports if "out of bounds" in r]


def _map_read(kind):
    """y[j] = A[.., ..] at a run-time offset n, the map storing into a tile (legalize_vector's staging) or a
    tensor (stage_global_maps'), guarded or not."""
    @T.prim_func
    def k(A: T.Tensor((2, 8), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8,), "float32")
            n = N[0]
            if kind == "tile":
                for j in T.Parallel(8):
                    y[j] = A[0, j + n]
            elif kind == "row":
                for j in T.Parallel(8):
                    y[j] = A[n, j]
            elif kind == "guarded":
                for j in T.Parallel(8):
                    y[j] = T.if_then_else(j + n < 8, A[0, j + n], 0.0)
            if kind == "tensor":
                for j in T.Parallel(8):
                    Y[j] = A[0, j + n] * 2.0
            elif kind == "tensor_if":
                for j in T.Parallel(8):
                    if j + n < 8:
                        Y[j] = A[0, j + n]
                    else:
                        Y[j] = -1.0
            else:
                T.copy(y, Y)
    return k


@pytest.mark.parametrize("n, index", [(3, 8), (8, 8), (100, 100), (-2, -2)])
def test_map_read_past_its_row_is_reported(n, index):
    _, reports = _profile(_map_read("tile"), A, np.array([n], np.int32))
    oob = _oob(reports)
    assert oob and f"index {index} of dimension 1 of tensor A, which has 8" in oob[0], reports
    assert "test_bounds35_s35.py:" in oob[0] and "T.if_then_else" in oob[0]  # the kernel's line, the hint


def test_map_read_of_a_row_past_the_tensor_is_reported():  # the copy moves nothing: the tail fill carries the check
    _, reports = _profile(_map_read("row"), A, np.array([2], np.int32))
    assert _oob(reports) and "index 2 of dimension 0 of tensor A, which has 2" in _oob(reports)[0], reports


def test_map_into_a_tensor_reading_past_its_row_is_reported():
    _, reports = _profile(_map_read("tensor"), A, np.array([3], np.int32))
    assert _oob(reports) and "index 8 of dimension 1 of tensor A" in _oob(reports)[0], reports


@pytest.mark.parametrize("kind", ["tile", "row", "tensor"])
def test_control_in_range_map_reads(kind):
    n = 1 if kind == "row" else 0
    want = A[1] if kind == "row" else A[0] * (2 if kind == "tensor" else 1)
    out, reports = _profile(_map_read(kind), A, np.array([n], np.int32))
    assert reports == [] and out.tolist() == want.tolist()
    assert _cpu(_map_read(kind), A, np.array([n], np.int32)).tolist() == want.tolist()


@pytest.mark.parametrize("kind, other", [("guarded", 0.0), ("tensor_if", -1.0)])
def test_guarded_map_read_past_its_row_is_not_reported(kind, other):
    want = [3, 4, 5, 6, 7] + [other] * 3
    out, reports = _profile(_map_read(kind), A, np.array([3], np.int32))
    assert reports == [] and out.tolist() == want, reports
    assert _cpu(_map_read(kind), A, np.array([3], np.int32)).tolist() == want


def test_user_copy_of_a_window_past_the_tensor_stays_clipped():
    @T.prim_func
    def k(A: T.Tensor((2, 8), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8,), "float32")
            T.copy(A[0, N[0]:N[0] + 8], y)
            T.copy(y, Y)
    want = [3, 4, 5, 6, 7, 0, 0, 0]
    out, reports = _profile(k, A, np.array([3], np.int32))
    assert reports == [] and out.tolist() == want, reports
    assert _cpu(k, A, np.array([3], np.int32)).tolist() == want


TABLE = np.arange(6, dtype=np.int32).reshape(2, 3)


def _table_read(guarded):
    """review34's note: y[0] = T.if_then_else(j < 3, Table[1, j], 0) at j = 3 reads past the tensor's last byte."""
    @T.prim_func
    def k(Table: T.Tensor((2, 3), "int32"), J: T.Tensor((1,), "int32"), Y: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((1,), "int32")
            j = J[0]
            if guarded:
                y[0] = T.if_then_else(j < 3, Table[1, j], 0)
            else:
                y[0] = Table[1, j]
            T.copy(y, Y)
    return k


def test_guarded_scalar_read_past_the_tensor_is_clamped():
    kernel = tw.compile(_table_read(True), target=TARGET, out_idx=[-1])
    cpu = tw.compile(_table_read(True), out_idx=[-1])
    for j, want in ((3, 0), (7, 0), (2, 5), (0, 3)):
        prof = kernel.profile(TABLE, np.array([j], np.int32))
        assert prof["reports"] == [], prof["reports"]
        assert prof.outputs.tolist() == [want] and cpu(TABLE, np.array([j], np.int32)).tolist() == [want]
    get = [ln for ln in kernel.get_kernel_source().splitlines() if "Table_gm.GetValue" in ln]
    assert get and all("tw_min" in ln for ln in get), get  # the printed read is the clamped one


def test_control_unguarded_scalar_read_past_the_tensor_is_reported():
    _, reports = _profile(_table_read(False), TABLE, np.array([3], np.int32))
    assert _oob(reports) and "of GM tensor Table, which has 24 bytes" in _oob(reports)[0], reports  # past its last byte
