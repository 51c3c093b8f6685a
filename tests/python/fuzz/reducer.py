"""Delta reduction of a failing program description to a minimal one that fails the same way.

Greedy: from the failing description, try every simplification of one field (drop a map
operation, float32 instead of another dtype, no transpose, no accumulation, the launch grid
instead of a loop, constant instead of symbolic shapes, offsets 0, smaller shapes and tiles,
1-D, one run-time start fewer or 0, a 2-D operand instead of a BSHD one, no band, fewer special
input values, a 2-D tile instead of a 3-D one); keep the
first that still fails with the same status on the same target with the same message
(runner.signature) and is not explained by a known bug, and start again, until no
simplification keeps the failure or the run budget is spent. Each candidate runs through the
same isolated workers as the fuzzer.
"""
from . import chain, grammar, hunt, idiom, known, llm, llm2, scal, skip, wide
from .runner import signature

SMALL_DIMS = (1, 2, 3)


def _valid(d):
    k = d["kind"]
    if k == "llm":
        return llm.valid(d)
    if k == "llm2":
        return llm2.valid(d)
    if k == "skip":
        return skip.valid(d)
    if k == "wide":
        return wide.valid(d)
    if k == "idiom":
        return idiom.valid(d)
    if k == "hunt":
        return hunt.valid(d)
    if k == "chain":
        return chain.valid(d)
    if k == "scal":
        return scal.valid(d)
    dims = [d[n] for n in ("M", "N", "K", "MA", "NA") if n in d]
    if any(v < 0 for v in dims) or (not d["sym"] and 0 in dims):
        return False   # constant grid extents must be positive; only symbolic dims may be 0
    if k in ("copy", "map"):
        if d["ndim"] == 1 and (d["bn"] != 1 or d["N"] != 1):
            return False
        if d.get("col") and (d["ndim"] != 1 or d["NA"] <= d["c0"]):
            return False
        if d["ndim"] == 1 and not d.get("col") and (d["NA"] != 1 or d["c0"] != 0):
            return False
        if d["sym"] and (d["MA"] != d["M"] or (d["NA"] != d["N"] and not d.get("col"))):
            return False
        if k == "map":
            if not d["ops"]:
                return False
            if not d["second"] and any(op[0] == "add2" for op in d["ops"]):
                return False
            if grammar.is_int(d["dt_tile"]) and any(op[0] in ("exp", "cast") or isinstance(op[-1], float)
                                                    for op in d["ops"]):
                return False
            if d["dt_tile"] != "int32" and any(op[0] in grammar.INT_OPS for op in d["ops"]):
                return False
    if k == "gather" and d["ndim"] == 1 and d["N"] > d["bn"]:
        return False
    if d.get("gform") == "oob1" and d["oob"][0] >= d["M"]:   # the index outside the tile is one B row's
        return False
    if d.get("gform") in ("stride1", "stride0") and d["sym"]:
        return False
    if k == "reduce" and d["loop"] == "grid":
        red, blk = (d["M"], d["bm"]) if d["dim"] == 0 else (d["N"], d["bn"])
        if red > blk:
            return False
    if k == "gemm":
        integer = grammar.is_int(d["dt_in"])
        if d["dt_out"] not in (("int32", "float32") if integer else grammar.FLOATS):
            return False
        if integer and any(isinstance(op[-1], float) for op in d["epilogue"]):
            return False
        # gemm operands read from the tensors (grammar's eighth stream): whole blocks, no run-time
        # extents (cpu does not clip a gemm region)
        if d.get("gm") and (d.get("rt") or any(d[n] % d[b] for n, b in (("M", "bm"), ("N", "bn"), ("K", "bk")))):
            return False
    return True


def _set(d, **kw):
    """A copy of `d` with the fields of `kw` set (a None value removes the field)."""
    c = dict(d)
    for key, value in kw.items():
        if value is None:
            c.pop(key, None)
        else:
            c[key] = value
    return c


def candidates(d):
    """Simpler variants of `d`, simplest changes first."""
    k = d["kind"]
    out = {"llm": llm.candidates, "llm2": llm2.candidates, "skip": skip.candidates,
           "wide": wide.candidates, "idiom": idiom.candidates, "hunt": hunt.candidates,
           "chain": chain.candidates, "scal": scal.candidates}.get(k, lambda d: [])(d)
    if k == "map":
        for i in range(len(d["ops"])):
            out.append(_set(d, ops=d["ops"][:i] + d["ops"][i + 1:]))
        if d["second"]:
            out.append(_set(d, second=False))
        if d["fused"]:
            out.append(_set(d, fused=False))
    if k == "map" and len(d["ops"]) == 1 and d["ops"][0][0] in ("abs",):
        out.append(_set(d, kind="copy", ops=None, second=None, fused=None))
    if k == "gemm":
        if d["epilogue"]:
            out.append(_set(d, epilogue=[]))
        if d["accum"]:
            out.append(_set(d, accum=""))
        for f in ("ta", "tb"):
            if d[f]:
                out.append(_set(d, **{f: False}))
        if d.get("gm") == "ab":   # one operand staged by the kernel, or both
            out += [_set(d, gm="a", wholek=None), _set(d, gm="b", wholek=None)]
        if d.get("wholek"):
            out.append(_set(d, wholek=False))
        if d.get("gm"):
            out.append(_set(d, gm=None, wholek=None))
    if d.get("band"):   # the tenth stream's band
        out.append(_set(d, band=None))
    for key in sorted(d.get("starts", {})):   # the ninth stream's run-time starts: one fewer, or 0
        rest = {k: v for k, v in d["starts"].items() if k != key}
        out.append(_set(d, starts=rest or None))
        if d["starts"][key]:
            out.append(_set(d, starts=dict(d["starts"], **{key: 0})))
    for op in sorted(d.get("bshd", {})):   # a 2-D operand instead of a BSHD one
        rest = {k: v for k, v in d["bshd"].items() if k != op}
        out.append(_set(d, bshd=rest or None))
    if d.get("special"):   # the fourteenth stream's values: none, or one fewer
        out.append(_set(d, special=None))
        if len(d["special"]) > 1:
            out += [_set(d, special=[v for v in d["special"] if v != w]) for w in d["special"]]
    if d.get("d3"):   # a 2-D tile instead of the fifteenth stream's 3-D one
        out.append(_set(d, d3=None, H=None))
    if d.get("sumsq"):
        out.append(_set(d, sumsq=False))
    for f in ("dt_in", "dt_tile", "dt_out"):
        if f in d and d[f] not in ("float32",):
            out.append(_set(d, **{f: "float32"}))
    if d["loop"] == "pipelined":
        out.append(_set(d, loop="serial"))
    if d["loop"] != "grid" and k != "gemm":
        out.append(_set(d, loop="grid"))
    if d.get("stages", 2) != 2:
        out.append(_set(d, stages=2))
    if d["sym"]:
        out.append(_set(d, sym=False))
    for f in ("r0", "c0"):
        if d.get(f):
            out.append(_set(d, **{f: 0}))
            if f == "c0" and d.get("col"):
                out[-1]["NA"] = d["NA"] - d["c0"]
    if k in ("copy", "map") and d["ndim"] == 2:
        out.append(_set(d, ndim=1, bn=1, N=1, NA=1, c0=0, col=False))
    if d.get("col"):
        out.append(_set(d, col=False, NA=1, c0=0))
        if d["NA"] > d["c0"] + 1:
            out.append(_set(d, NA=d["c0"] + 1))
    for n in ("M", "N", "K", "MA", "NA"):
        if n not in d:
            continue
        v = d[n]
        for smaller in sorted({*SMALL_DIMS, v // 2, v - 1}):
            if 0 <= smaller < v:
                c = _set(d, **{n: smaller})
                if d["kind"] in ("copy", "map") and d["sym"] and n in ("M", "N"):
                    c["MA" if n == "M" else "NA"] = smaller
                out.append(c)
    for b in ("bm", "bn", "bk"):
        if b in d and d[b] > 1:
            step = 16 if k == "gemm" else 1
            if d[b] // 2 >= step:
                out.append(_set(d, **{b: d[b] // 2}))
    return [c for c in out if c != d and _valid(c)]


def reduce(d, result, run, budget=80):
    """The smallest description found that fails like `result` (a failure of `d`), and the
    number of runs used. `run(desc) -> result` runs one program (isolated)."""
    status, target, want = signature(result)
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for c in candidates(d):
            if known.known_bug(c, target, status, result["detail"]):
                continue
            runs += 1
            if signature(run(c)) == (status, target, want):
                d, progress = c, True
                break
            if runs >= budget:
                break
    return d, runs
