"""Session 34's hunt (h-hunt34, docs/testing.md "Session 34: hunt34"): the LLM kernels of examples/ and users'
adaptations of them (ALiBi, softcapping, a sliding window and int8 KV with per-token scales in paged decode;
RMSNorm fused with the residual; SwiGLU after two gemms; partial and rotate-half RoPE; MoE with empty experts,
ties and top-k = experts; varlen with empty sequences; masks with all-hidden rows) at users' odd shapes, cpu
against ascend910b (simulator, checker on) against float64: all agreed. The findings are about inputs out of
range: the simulator's checker bounds an element access by the whole buffer's bytes, not by each dimension, so
an index past its dimension but inside the buffer is read (or written) silently on ascend910b, where the cpu
target reports it at the line (always for tiles, under TW_BOUNDS_CHECK=1 for tensors).

Each finding is a strict xfail on ascend910b (it flips when fixed) beside an in-range control. Results are exact
integers, so no tolerance is needed.
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


# --------------------------------------------------------------------------- F1: GM element index past its dimension
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


F1 = ("hunt34 F1: an element read of a GM tensor at an index past its dimension but inside the tensor "
      "(Table[0, 3] of a (2, 3) table; A[0, j + n] of a (2, 8) tensor at n = 3) is not reported by the simulator: "
      "the scalar read returns Table[1, 0] (paged decode with a context length past its block-table row reads the "
      "next sequence's page numbers), the map read clips to 0; cpu under TW_BOUNDS_CHECK=1 reports 'index 3 is out "
      "of bounds for dimension 1' at the line. The checker bounds GM operands by the tensor's bytes only")


def test_f1_control_in_range_table_read():
    table = np.arange(6, dtype=np.int32).reshape(2, 3)
    out, reports = _profile(_table_read(), [2], table, np.array([2], np.int32))
    assert reports == [] and out.tolist() == [2]


@pytest.mark.xfail(strict=True, reason=F1)
def test_f1_table_read_past_its_row_is_reported():
    table = np.arange(6, dtype=np.int32).reshape(2, 3)
    _, reports = _profile(_table_read(), [2], table, np.array([3], np.int32))
    assert _out_of_bounds(reports)


@pytest.mark.xfail(strict=True, reason=F1)
def test_f1_map_read_past_its_row_is_reported():
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    _, reports = _profile(_row_read(), [2], a, np.array([3], np.int32))
    assert _out_of_bounds(reports)


def test_f1_control_in_range_map_read():
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


F2 = ("hunt34 F2: a scalar read or store of a UB tile at a run-time column past the row (a[0, 9] of a (2, 8) int32 "
      "tile) is not reported by the simulator: it reads / writes a[1, 1] silently; docs/language.md promises the "
      "simulator reports a tile index not proved inside the tile, and cpu always reports 'index 9 is out of bounds "
      "for dimension 1 of 'a''. ScalarLoad / ScalarStore carry only the tile's end (docs/ascend.md \"Bounds\")")


@pytest.mark.parametrize("store", [False, True], ids=["read", "store"])
@pytest.mark.xfail(strict=True, reason=F2)
def test_f2_tile_index_past_its_row_is_reported(store):
    a = np.arange(16, dtype=np.int32).reshape(2, 8)
    _, reports = _profile(_tile_access(store), [2], a, np.array([9], np.int32))
    assert _out_of_bounds(reports)


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
