"""Session 34's hunt (h-hunt34, docs/testing.md "Session 34: hunt34"): the LLM kernels of examples/ and users'
adaptations of them (ALiBi, softcapping, a sliding window and int8 KV with per-token scales in paged decode;
RMSNorm fused with the residual; SwiGLU after two gemms; partial and rotate-half RoPE; MoE with empty experts,
ties and top-k = experts; varlen with empty sequences; masks with all-hidden rows) at users' odd shapes, cpu
against ascend910b (simulator, checker on) against float64: all agreed. The findings are about inputs out of
range: the simulator's checker bounds an element access by the whole buffer's bytes, not by each dimension, so
an index past its dimension but inside the buffer was read (or written) silently on ascend910b, where the cpu
target reports it at the line (always for tiles, under TW_BOUNDS_CHECK=1 for tensors). F1 / F2 (scalar-unit
accesses) are fixed here (program.h DimIndex: the simulator checks each index against its dimension); F3 (a
map's element read of a tensor) by h-bounds35 (a checked staged copy: ir.h CopyNode::checked). Each has an in-range
control. Results are exact integers, so no tolerance is needed.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


def _profile(prim, out_idx, *inputs):
    """(outputs, reports) of prim run in the simulator with the checker."""
    prof = tw.compile(prim, target=TARGET, out_idx=out_idx).profile(*inputs)
    return prof.outputs, prof["reports"]


def _out_of_bounds(reports):
    return any("out of bounds" in r for r in reports)


# --------------------------------------------------------------------------- F1 / F3: GM element index past its dimension
def _table_read():
    """paged decode's `page = block_tables[b, j]` with j read from the input (a context length past the row)."""
    @T.prim_func
    def k(Table: T.Tensor((2, 3), "int32"), J: T.Tensor((1,), "int32"), Y: T.Tensor((1,), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((1,), "int32")
            y[0] = Table[0, J[0]]
            T.copy(y, Y)
    return k


def _row_read():
    """y[j] = A[0, j + n]: a map reading a tensor row at a run-time offset."""
    @T.prim_func
    def k(A: T.Tensor((2, 8), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8,), "float32")
            n = N[0]
            for j in T.Parallel(8):
                y[j] = A[0, j + n]
            T.copy(y, Y)
    return k


# hunt34 F1 (fixed by h-hunt34): a scalar read of a GM tensor at an index past its dimension but inside the tensor
# (Table[0, 3] of a (2, 3) table) returned Table[1, 0] on ascend910b without a report (paged decode with a context
# length past its block-table row read the next sequence's page numbers); cpu reports it under TW_BOUNDS_CHECK=1.
# hunt34 F3 (fixed by h-bounds35): a map's element read of a GM tensor at a run-time offset past its dimension
# (A[0, j + n] of a (2, 8) tensor at n = 3) was clipped to 0 on ascend910b without a report (legalize_vector staged
# it as a copy of the window, whose clipping hid the elements outside); cpu reads the next row, and reports 'index 8
# is out of bounds for dimension 1' under TW_BOUNDS_CHECK=1. The staged copy is checked now (ir.h CopyNode::checked).


def test_f1_control_in_range_table_read():
    table = np.arange(6, dtype=np.int32).reshape(2, 3)
    out, reports = _profile(_table_read(), [2], table, np.array([2], np.int32))
    assert reports == [] and out.tolist() == [2]


def test_f1_table_read_past_its_row_is_reported():  # F1, fixed by h-hunt34
    table = np.arange(6, dtype=np.int32).reshape(2, 3)
    _, reports = _profile(_table_read(), [2], table, np.array([3], np.int32))
    assert _out_of_bounds(reports) and "index 3 of dimension 1 of tensor Table, which has 3" in reports[0], reports


def test_f3_map_read_past_its_row_is_reported():  # F3, fixed by h-bounds35
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    _, reports = _profile(_row_read(), [2], a, np.array([3], np.int32))
    assert _out_of_bounds(reports) and "index 8 of dimension 1 of tensor A, which has 8" in reports[0], reports


def test_f3_control_in_range_map_read():
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    out, reports = _profile(_row_read(), [2], a, np.array([0], np.int32))
    assert reports == [] and out.tolist() == a[0].tolist()


# --------------------------------------------------------------------------- F2: tile index past its dimension
def _tile_access(store):
    @T.prim_func
    def k(A: T.Tensor((2, 8), "int32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((2, 8), "int32")
            T.copy(A, a)
            if store:
                a[0, N[0]] = 99
            else:
                a[1, 0] = a[0, N[0]]
            T.copy(a, Y)
    return k


# hunt34 F2 (fixed by h-hunt34): a scalar read or store of a UB tile at a run-time column past the row (a[0, 9] of a
# (2, 8) int32 tile) read / wrote a[1, 1] on ascend910b without a report, where docs/language.md promises the
# simulator reports a tile index not proved inside the tile (cpu always reports it); ScalarLoad / ScalarStore
# carried only the tile's end.


@pytest.mark.parametrize("store", [False, True], ids=["read", "store"])
def test_f2_tile_index_past_its_row_is_reported(store):  # F2, fixed by h-hunt34
    a = np.arange(16, dtype=np.int32).reshape(2, 8)
    out, reports = _profile(_tile_access(store), [2], a, np.array([9], np.int32))
    what = "SetValue writes" if store else "GetValue reads"
    assert _out_of_bounds(reports) and f"{what} index 9 of dimension 1 of tile a, which has 8" in reports[0], reports
    if store:
        assert np.array_equal(out, a)  # the store is not executed: a[1, 1] keeps its value


@pytest.mark.parametrize("store", [False, True], ids=["read", "store"])
def test_f2_control_in_range_tile_index(store):
    a = np.arange(16, dtype=np.int32).reshape(2, 8)
    want = a.copy()
    if store:
        want[0, 7] = 99
    else:
        want[1, 0] = a[0, 7]
    out, reports = _profile(_tile_access(store), [2], a, np.array([7], np.int32))
    assert reports == [] and np.array_equal(out, want)
