"""Tilewright's differential fuzzer.

Random tile programs from a small grammar (``generate``) are written as real Tilewright kernel
source (``source``), compiled through the normal front end for ``cpu`` and for ``ascend910b``
(the simulator, checker on) in worker subprocesses (``runner``), and compared with a float64
numpy reference computed from the same program description (``reference``). A failure is reduced
to a minimal program by delta reduction over the description (``reducer``). Known open bugs are
listed in one table (``known``). The LLM-kernel forms (online softmax, attention chain, paged reads,
scatter-add, RoPE) have their grammar, reference and tolerances in one module (``llm``), the
session 24 forms (split-KV combine, GQA, norms, top-k gating, cumsum) theirs in ``llm2``, the session
25 skipped-work programs (grids of many programs most of which skip their work by a length read
from a tensor; tiles of many rows) theirs in ``skip`` (only by ``--stream skip``), the session 26 wide programs (tiles past the UB: rows in
groups, rows in column blocks, copies of more than 4095 rows, pipelined stages retried, column chunks
written by the user) theirs in ``wide`` (only by ``--stream wide``), the session 32 idioms (label
masks and one-hot picks, if / else in maps, integer operators on 8-bit tiles, lets leaving their dtype,
T.cast chains, run-time extent lets, atomic adds, gemm bands with rectangles, selects near the UB
limit) theirs in ``idiom`` (only by ``--stream idiom``).

Command line: ``python -m fuzz [-n N] [--seed S] [--jobs J] [--stream llm|llm2|skip|wide|idiom]`` from tests/python
(``make fuzz``).
The test: tests/python/test_fuzz.py. Documentation: docs/testing.md.
"""
