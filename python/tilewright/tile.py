"""The tile-loops vocabulary (the seed's style): ``output``, ``accumulator``, ``load``,
``matmul``, ``store``, plus ``Tensor`` and ``ceildiv`` (re-exported from ``tilewright``)::

    def matmul(A: tw.Tensor((M, K), "float32"), B: tw.Tensor((K, N), "float32")):
        out = tw.output((M, N), dtype="float32")            # an output parameter
        for by in range(tw.ceildiv(M, bm)):
            for bx in range(tw.ceildiv(N, bn)):
                acc = tw.accumulator((bm, bn), dtype="float32")   # a fragment tile, zeroed
                for k in range(tw.ceildiv(K, bk)):
                    a = tw.load(A, (by * bm, k * bk), (bm, bk))   # a shared tile; OOB reads 0
                    b = tw.load(B, (k * bk, bx * bn), (bk, bn))
                    acc += tw.matmul(a, b)                        # gemm, accumulate
                tw.store(out, (by * bm, bx * bn), acc)            # copy; OOB writes skipped
        return out

The loops are ordinary serial loops in the IR; the compiler pass ``infer_grid`` decides which of
them form the launch grid. Like ``tilewright.language``, these functions are markers read by the
front end (:func:`tilewright.frontend.parse_tile_loops`) and are not executed.
"""
from __future__ import annotations

from .language import SymbolicDim, Tensor, _marker, ceildiv, symbolic

__all__ = ["Tensor", "output", "accumulator", "load", "matmul", "store", "ceildiv", "symbolic", "SymbolicDim"]

output = _marker("output", """``out = tw.output(shape, dtype="float32")``: declare an output tensor of the kernel
(allocated by the runtime and returned). Must be at the top level of the function.""", "tw.")
accumulator = _marker("accumulator", """``acc = tw.accumulator(shape, dtype="float32")``: a block working tile
(scope fragment) set to zero where it is declared. The shape must be constant.""", "tw.")
load = _marker("load", """``t = tw.load(X, origin, shape, dtype=None)``: a staging tile (scope shared) filled from
``X[origin[0]:origin[0]+shape[0], ...]``; elements outside X read as 0. ``dtype`` converts on load.""", "tw.")
matmul = _marker("matmul", """``acc += tw.matmul(a, b, transpose_a=False, transpose_b=False)``: accumulate a @ b into
an accumulator (a gemm).""", "tw.")
store = _marker("store", """``tw.store(out, origin, tile)``: copy ``tile`` into ``out`` at ``origin``; elements outside
``out`` are skipped (tails).""", "tw.")
