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


def vector_bf16(d):
    """bfloat16 on the Vector side other than a plain bfloat16 <-> float32 copy: a copy converting
    bfloat16 from/to float16 or int8, a bfloat16 tile that is mapped or reduced, a cast to bfloat16
    in a map."""
    if d["kind"] == "gemm":
        return False
    pairs = {(d["dt_in"], d["dt_tile"]), (d["dt_tile"], d["dt_out"])}
    if any(a != b and "bfloat16" in (a, b) and "float32" not in (a, b) for a, b in pairs):
        return True
    if d["dt_tile"] == "bfloat16" and d["kind"] in ("map", "reduce"):
        return True
    return any(op[0] == "cast" and op[1] == "bfloat16" for op in d.get("ops", []))


def int8_sum(d):
    """An int8 tile summed (reduce_sum, or the sum of squares of the second pass)."""
    return d["kind"] == "reduce" and d["dt_tile"] == "int8" and (d["op"] == "sum" or bool(d.get("sumsq")))


def column_slice(d):
    """A (rows, 1) column slice of a 2-D tensor copied into a 1-D tile."""
    return d["kind"] in ("copy", "map") and bool(d.get("col"))


MISMATCH = ("mismatch",)
ANY = ("mismatch", "checker", "error", "crash", "hang")

# (name, target, failure statuses it explains, message pattern (None: any), predicate,
# description, skip). skip=True: the bug corrupts or stops the worker (host memory, hangs), so the
# fuzzer does not run that target on matching programs at all (counted as "skipped"); a memory
# corruption could otherwise change later programs' results in the same worker.
KNOWN_BUGS = [
    # found by this fuzzer, not fixed here (lower_expert.cpp's vector dtype check; a design change)
    ("bf16-vector", "ascend910b", ("error",), r"on bfloat16: the Vector core has no bfloat16 arithmetic",
     vector_bf16, "a bfloat16 tile on the Vector side is rejected when filled (T.fill), reduced into or "
     "converted to/from anything but float32: the conversions/fill are not routed through float32", False),
    ("int8-sum-saturates", "ascend910b", MISMATCH, None, int8_sum,
     "T.reduce_sum on an int8 tile saturates at 127/-128 in the simulator, where the language (and the cpu "
     "target) wrap the int64 sum into int8 (seed 371: 127 instead of -94)", False),
]

def _gemm(d, dtypes, pred):
    return d["kind"] == "gemm" and d["dt_in"] in dtypes and pred(d)


UNSUPPORTED = [
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
