"""The one table of known open bugs the fuzzer's programs hit, and of documented limitations.

KNOWN_BUGS: open bugs, each with a predicate on the program description. A failure on the
entry's target, of one of its statuses, with its message, of a program matching the predicate is
counted as "known", not as a new failure. Delete an entry when its fix merges: the corpus then
checks the fix. Never narrow the grammar instead.

UNSUPPORTED: (target, predicate, reason) for programs the documentation says a target does not
support: there the target must raise a TilewrightError (a clear error); a crash, a hang or a
result is still checked like any other.

EXPECTED_REPORTS: programs on which the documentation says a target's checker reports (a case the
target cannot run exactly, reported at the line): there the report is the expected outcome, and a
clean run is an error.
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


def bit_ops_left(ops):
    """The op names of an idiom int program after adjacent `~` pairs cancel (the compiler folds ~(~x) to x:
    hunt33 F11, seed 335010 ran right where this rule expected an error)."""
    left = []
    for op in ops:
        if op[0] == "inv" and left and left[-1] == "inv":
            left.pop()
        else:
            left.append(op[0])
    return left


UNSUPPORTED = [
    ("ascend910b", lambda d: d["kind"] == "idiom" and d["idiom"] == "int" and d.get("mode") == "map"
     and d["dt_tile"] != "int32" and any(n in ("shl", "shr", "inv") for n in bit_ops_left(d["ops"])),
     "`~` and shifts on int8 / uint8 tile data in a map: a TilewrightError at the line naming the alternative "
     "(docs/language.md \"Bitwise operators and shifts\")"),
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
    ("ascend910b", lambda d: d["kind"] == "gather" and d.get("gaxis") == 0,
     "a gather along a tile's leading dim: the vector Gather reads along the last dim (docs/language.md "
     "\"Gathers\")"),
    ("ascend910b", lambda d: d.get("gform") == "clamp0",
     "a gather along a tile's leading dim (at clamped indices): the vector Gather reads along the last dim"),
    ("cpu", lambda d: d.get("gform") == "oob1",
     "a gather index outside the tile: on cpu a TilewrightError at the access's line (docs/language.md "
     "\"Tails and out-of-range accesses\")"),
    ("ascend910b", lambda d: d.get("gform") in ("trans", "stride0"),
     "a T.Parallel read of a tile transposed (x[j, i]) or at a strided row (x[2 * i + 1, j]): Ascend gathers "
     "along the last dim, an error at the line naming the fix"),
    ("ascend910b", lambda d: d["kind"] == "llm" and d["llm"] == "rope" and not d["inter"]
     and (d["D"] // 2 * 4 % 32 or d["D"] // 2 * _esize(d["dt_out"]) % 32),
     "RoPE's half-split map on tiles whose half row does not start on a 32 B block (the float32 x tile or "
     "the output-dtype y tile): the Vector core's operands start on 32 B blocks (docs/llm-kernels.md \"RoPE\")"),
    ("ascend910b", lambda d: _gemm(d, ("float32",), lambda d: d["ta"]),
     "a float32 A stored KxM (transpose_A): the 32-bit transposing load exists only into L0B"),
]


def _esize(dtype):
    return {"int8": 1, "float16": 2, "bfloat16": 2, "float32": 4}[dtype]


def _c0(dtype):
    """Elements of `dtype` in one 32 B block: the column strip of an Nz L1 tile (C0)."""
    return 32 // {"int8": 1, "float16": 2, "bfloat16": 2, "float32": 4}[dtype]


def _blocks(off, step, width, count):
    """(start, width) of the `count` blocks of a region that starts at `off` and moves by `step`."""
    return [(j * step + off, width) for j in range(count)]


def strip_starts(d):
    """[(start, width, cols)] of a ninth-stream gemm's GM -> L1 operand windows (Ascend copies
    every operand into L1) that start, at run time, inside a C0 strip before the tensor's column 0
    and reach into it (s < 0, s % C0 != 0, s + width > 0), for operands whose rows the copy reads
    (some row block overlaps the tensor); cols is the tensor's last dimension."""
    starts = d.get("starts")
    if d["kind"] != "gemm" or not starts:
        return []
    nm, nn = -(-d["M"] // d["bm"]), -(-d["N"] // d["bn"])
    if not nm * nn:   # an empty grid copies nothing
        return []
    c0 = _c0(d["dt_in"])
    whole = d.get("wholek")
    kb = (1, d["K"]) if whole else (-(-d["K"] // d["bk"]), d["bk"])   # (blocks, width) along K
    dims = {   # the run-time start's name -> (blocks of (start, width), the tensor's size there)
        "m": (_blocks(starts.get("ra", 0), d["bm"], d["bm"], nm), d["M"]),
        "n": (_blocks(starts.get("nb", 0), d["bn"], d["bn"], nn), d["N"]),
        "ka": (_blocks(starts.get("ka", 0), d["bk"], kb[1], kb[0]), d["K"]),
        "kb": (_blocks(starts.get("kb", 0), d["bk"], kb[1], kb[0]), d["K"]),
    }
    # (rows, cols, the run-time start of the columns) of op A's and op B's tensors
    ops = [("ka", "m", "ra") if d["ta"] else ("m", "ka", "ka"), ("n", "kb", "kb") if d["tb"] else ("kb", "n", "nb")]
    out = []
    for rows, cols, name in ops:
        if name not in starts:
            continue
        (rblocks, rsize), (cblocks, csize) = dims[rows], dims[cols]
        if not any(r < rsize and r + w > 0 for r, w in rblocks):
            continue
        out += [(c, w, csize) for c, w in cblocks if c < 0 and c % c0 and c + w > 0]
    return out


def strip_start_before_l1(d):
    """A ninth-stream gemm with an operand window of strip_starts: Ascend's GM -> L1 copy cannot
    clip it (docs/ascend.md "Session 20: negative run-time column starts of L1 copies"); the checker
    reports it at the copy's or gemm's line, also when the start is whole tensor rows before column 0
    ("source rows start at column c ... before column 0", fuzz9 F1, fixed by h-ascfix9)."""
    return bool(strip_starts(d))


# (name, target, predicate, report pattern, description): programs on which the target's checker
# must report (the documented located report of a case the target cannot run exactly). Reports that
# all match the pattern are "ok"; no report is an "error" (the case went unreported), another
# report a "checker" failure, a disagreement still a "mismatch".
EXPECTED_REPORTS = [
    ("strip_start_before_l1", "ascend910b", strip_start_before_l1, r"out of bounds: source (reads bytes|row)",
     "a run-time column start inside a C0 strip before the tensor, on a GM -> L1 copy (a gemm operand)"),
    ("gather_index_outside_tile", "ascend910b", lambda d: d.get("gform") == "oob1", r"out of bounds: Gather srcOffset",
     "a gather index outside the tile's dimension: a simulator report at the line (docs/language.md \"Gathers\")"),
]


def expected_report(d, target, reports=None):
    """The name of the entry of EXPECTED_REPORTS that `d` on `target` matches (and, given the
    checker's `reports`, that every report matches), or None."""
    for name, tgt, pred, pattern, _ in EXPECTED_REPORTS:
        if tgt == target and pred(d) and (reports is None or all(re.search(pattern, r) for r in reports)):
            return name
    return None


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
