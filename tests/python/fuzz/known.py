"""The one table of known open bugs the fuzzer's programs hit, and of documented limitations.

KNOWN_BUGS: open bugs, each with a predicate on the program description. A failure on the
entry's target, of one of its statuses, with its message, of a program matching the predicate is
counted as "known", not as a new failure. Delete an entry when its fix merges: the corpus then
checks the fix. Never narrow the grammar instead.

UNSUPPORTED: (target, predicate, reason) for programs the documentation says a target does not
support: there the target must raise a TilewrightError (a clear error); a crash, a hang or a
result is still checked like any other.
"""
import math
import re


def _blocks(extent, block):
    return math.ceil(extent / block) if extent > 0 else 0


def vector_tail_reaches_output(d):
    """A GM->UB copy reads past its tensor and those elements (which must read as 0) reach the
    output: a copy/map whose output covers positions outside the input, or a reduction over a
    dimension that is not a whole number of tiles."""
    if d["kind"] in ("copy", "map"):
        return d["MA"] < d["M"] + d["r0"] or (d["ndim"] == 2 and d["NA"] < d["N"] + d["c0"])
    if d["kind"] == "reduce":
        red, blk = (d["M"], d["bm"]) if d["dim"] == 0 else (d["N"], d["bn"])
        return red % blk != 0
    return False


def origin_past_end(d):
    """Some block's copy origin lies at or past the end of the input tensor."""
    if d["kind"] not in ("copy", "map"):
        return False
    rows = _blocks(d["M"], d["bm"])
    if rows and (rows - 1) * d["bm"] + d["r0"] >= d["MA"]:
        return True
    cols = _blocks(d["N"], d["bn"]) if d["ndim"] == 2 else 0
    return bool(cols) and (cols - 1) * d["bn"] + d["c0"] >= d["NA"]


def zero_extent(d):
    return any(d.get(n) == 0 for n in ("M", "N", "K", "MA", "NA"))


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


def int8_gemm_short_k(d):
    """An int8 gemm whose K tile is not a multiple of 32 (the int8 fractal's K)."""
    return d["kind"] == "gemm" and d["dt_in"] == "int8" and d["bk"] % 32 != 0


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
    ("origin-past-end", "ascend910b", ANY, None, origin_past_end,
     "copies whose origin lies past a tensor's end (simulator host-memory corruption: hangs, "
     "'double free or corruption' aborts)", True),
    ("zero-fill", "ascend910b", MISMATCH, None, vector_tail_reaches_output,
     "GM->UB tails are not zero-filled on the Vector side (stale UB after an earlier block)", False),
    ("m-zero", "ascend910b", ("error",), r"block_dim must be positive", zero_extent,
     "M=0 (an empty grid) rejected on Ascend", False),
    ("two-loop-reduce", "ascend910b", ("error",), r"'\w+_half_\d+' is used outside its scope",
     lambda d: d["kind"] == "reduce" and bool(d.get("sumsq")) and d["loop"] != "grid",
     "two serial loops each with a reduce_sum: the halving scratch tile (x_half_0) of the first loop is "
     "reused by the second outside its scope", False),
    ("column-slice", "ascend910b", ("error", "checker", "mismatch"), None, column_slice,
     "(K,1) column slices into 1-D tiles: 'UB rows are 16 B apart' errors, or CopyGmToUb rows 32 B apart "
     "overrunning the 1-D UB tile (checker: out of bounds)", False),
    # found by this fuzzer, not fixed here (lower_expert.cpp's vector dtype check; a design change)
    ("bf16-vector", "ascend910b", ("error",), r"on bfloat16: the Vector core has no bfloat16 arithmetic",
     vector_bf16, "a bfloat16 tile on the Vector side is rejected when filled (T.fill), reduced into or "
     "converted to/from anything but float32: the conversions/fill are not routed through float32", False),
    ("int8-sum-saturates", "ascend910b", MISMATCH, None, int8_sum,
     "T.reduce_sum on an int8 tile saturates at 127/-128 in the simulator, where the language (and the cpu "
     "target) wrap the int64 sum into int8 (seed 371: 127 instead of -94)", False),
    ("int8-gemm-k16", "ascend910b", ("checker",), r"out of bounds: .*\(L0B\)", int8_gemm_short_k,
     "an int8 gemm with a K tile of 16: the L0B tile is sized for K=16 but LoadL0 writes K rounded up to 32 "
     "(the int8 fractal), 2048 bytes into 1024 (checker: out of bounds; seed 100146)", False),
]

def _gemm(d, dtypes, pred):
    return d["kind"] == "gemm" and d["dt_in"] in dtypes and pred(d)


UNSUPPORTED = [
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
