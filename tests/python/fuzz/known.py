"""The one table of known open bugs the fuzzer's programs hit, and of documented limitations.

KNOWN_BUGS: open bugs, each with a predicate on the program description. A failure on the
entry's target, of one of its statuses, with its message, of a program matching the predicate is
counted as "known", not as a new failure. Delete an entry when its fix merges: the corpus then
checks the fix. Never narrow the grammar instead.

UNSUPPORTED: (target, predicate, reason) for programs the documentation says a target does not
support: there the target must raise a TilewrightError (a clear error); a crash, a hang or a
result is still checked like any other.
"""
import re


def column_slice(d):
    """A (rows, 1) column slice of a 2-D tensor copied into a 1-D tile of more than one element,
    unless the tensor has a constant single column (then the column is contiguous: Ascend copies it)."""
    return d["kind"] in ("copy", "map") and bool(d.get("col")) and d["bm"] > 1 and (d["sym"] or d["NA"] > 1)


MISMATCH = ("mismatch",)
ANY = ("mismatch", "checker", "error", "crash", "hang")

# (name, target, failure statuses it explains, message pattern (None: any), predicate,
# description, skip). skip=True: the bug corrupts or stops the worker (host memory, hangs), so the
# fuzzer does not run that target on matching programs at all (counted as "skipped"); a memory
# corruption could otherwise change later programs' results in the same worker.
KNOWN_BUGS = [
]


def _gemm(d, dtypes, pred):
    return d["kind"] == "gemm" and d["dt_in"] in dtypes and pred(d)


def rt_bound_one(d):
    """A run-time extent along a dimension whose tile block is 1 (docs/ascend.md "Run-time extents")."""
    rt = d.get("rt")
    return bool(rt) and (d["bm"] if rt["axis"] == 0 else d["bn"]) == 1


UNSUPPORTED = [
    ("ascend910b", rt_bound_one,
     "a run-time extent of bound 1 (a dimension the window drops): on Ascend a run-time extent is one of "
     "the copy's rows or columns (the error names the fix: an if)"),
    ("ascend910b", column_slice,
     "a tensor column copied into a 1-D tile: DataCopyPad starts every UB row on a 32 B boundary, so the "
     "column cannot land compact in a 1-D tile (the error suggests a (K, 1) tile)"),
    ("ascend910b", lambda d: d["kind"] == "gemm" and d["accum"] == "init",
     "a gemm accumulator loaded from global memory: the 910B has no GM->L0C path "
     "(the automatic pipeline does not route it through UB and GM)"),
    ("ascend910b", lambda d: _gemm(d, ("int8",), lambda d: d["ta"] or not d["tb"]),
     "an int8 gemm operand that needs a transposing L1->L0 load (A stored KxM, B stored KxN): "
     "LoadData transposes 16-bit types only"),
    ("ascend910b", lambda d: _gemm(d, ("int8",), lambda d: d["dt_out"] != "int32" and not d["epilogue"]
                                   and d["accum"] != "add"),
     "an int32 accumulator stored into a float32 tensor by the Cube (no vector epilogue): Fixpipe "
     "converts int32 only to int32 (the automatic pipeline does not route the conversion through UB)"),
    ("ascend910b", lambda d: d["kind"] == "gather" and d["dt_in"] == "int8",
     "a gather from an int8 tile: dav-c220's Gather has no 8-bit form (docs/ascend.md \"Gathers\")"),
    ("ascend910b", lambda d: _gemm(d, ("float32",), lambda d: d["ta"]),
     "a float32 A stored KxM (transpose_A): the 32-bit transposing load exists only into L0B"),
]


def known_bug(d, target, status, message=""):
    """The name of the first known bug of `target` explaining a `status` failure of `d` with this
    message, or None."""
    for name, tgt, statuses, pattern, pred, _, _ in KNOWN_BUGS:
        if tgt == target and status in statuses and (pattern is None or re.search(pattern, message or "")) \
                and pred(d):
            return name
    return None


def skipped_targets(d):
    """{target: bug name} of the targets not to run on `d` (bugs with skip=True)."""
    out = {}
    for name, tgt, _, _, pred, _, skip in KNOWN_BUGS:
        if skip and tgt not in out and pred(d):
            out[tgt] = name
    return out


def unsupported(d, target):
    for tgt, pred, reason in UNSUPPORTED:
        if tgt == target and pred(d):
            return reason
    return None
