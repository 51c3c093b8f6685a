"""The differential fuzzer (tests/python/fuzz/, docs/testing.md): a fixed-seed corpus of 500
random tile programs, each run on cpu and on ascend910b (simulator, checker on) and compared with
a float64 reference, plus tests of the fuzzer's own parts (the generator covers the grammar, the
reference and comparison catch a wrong answer, a crash or a hang of a worker is recorded and does
not stop the run, the reducer finds a minimal program). `make fuzz` runs 10,000 programs."""
import io
import signal

import numpy as np
import pytest

from fuzz import grammar, known, llm, llm2, reducer, runner, skip, wide
from fuzz.__main__ import report
from fuzz.reference import compare, inputs, reference

CORPUS_SEED, CORPUS_N = 0, 500


def test_corpus():
    """500 programs: no disagreement, checker report, unexpected error, crash or hang."""
    descs = [grammar.generate(s) for s in range(CORPUS_SEED, CORPUS_SEED + CORPUS_N)]
    results = runner.run_programs(descs, jobs=2, timeout=120.0)
    assert len(results) == CORPUS_N
    bad = [i for i, r in results.items() if r["status"] in runner.FAILURES]
    if bad:
        out = io.StringIO()
        report(descs, results, budget=25, max_reduce=3, out=out)
        pytest.fail(f"{len(bad)} of {CORPUS_N} fuzz programs failed:\n{out.getvalue()}")
    ok = sum(r["status"] == "ok" for r in results.values())
    assert ok >= CORPUS_N // 2, f"only {ok} programs ran clean on both targets"


def test_llm_corpus():
    """20 programs of the sixteenth stream (fuzz/llm.py; seeds 0-19: RoPE, online softmax, scatter-add,
    paged reads) on both targets; the attention chain runs in test_fuzz_findings_s23.py (F2's cases)
    and in `make fuzz` (the corpus above holds no LLM group: they would add a third to its time)."""
    descs = [llm.generate(s) for s in range(20)]
    assert {d["llm"] for d in descs} == {"rope", "osm", "scatter", "paged"}
    results = runner.run_programs(descs, jobs=2, timeout=120.0)
    bad = {descs[i]["seed"]: r for i, r in results.items() if r["status"] in runner.FAILURES}
    assert not bad, bad


def test_generator_covers_the_grammar():
    descs = [grammar.generate(s) for s in range(CORPUS_SEED, CORPUS_SEED + CORPUS_N)]
    assert grammar.generate(123) == grammar.generate(123)
    seen = lambda f: {f(d) for d in descs}  # noqa: E731
    assert seen(lambda d: d["kind"]) == {"copy", "map", "reduce", "gemm", "gather"}   # (no LLM group: test_llm_*)
    assert seen(lambda d: (d["kind"], d.get("ndim"))) >= {("gather", 1), ("gather", 2)}
    assert seen(lambda d: d["sym"]) == {True, False}
    assert seen(lambda d: d["loop"]) == {"grid", "serial", "pipelined"}
    assert seen(lambda d: d["dt_in"]) == set(grammar.MAP_DTYPES)
    assert {"float32", "float16", "bfloat16", "int8", "int32"} <= seen(lambda d: d.get("dt_tile"))
    assert seen(lambda d: (d.get("ta"), d.get("tb"))) >= {(True, True), (False, False), (True, False), (False, True)}
    assert seen(lambda d: d.get("accum")) >= {"", "init", "add"}
    assert seen(lambda d: d.get("op")) >= {"sum", "max", "min"}
    assert seen(lambda d: d.get("dim")) >= {0, 1}
    assert seen(lambda d: d.get("fused")) >= {True, False}
    ops = {op[0] for d in descs for op in d.get("ops", []) + d.get("epilogue", [])}
    assert ops >= {"axpb", "max", "min", "abs", "sq", "exp", "cast", "add2", "where", "where2", "fdiv", "mod", "inv"}
    assert ops <= set(grammar.OP_SOURCE)
    many = [grammar.generate(s) for s in range(5000)]   # the rarer integer operations
    many = [d for d in many if d["kind"] != "llm"]
    assert {op[0] for d in many for op in d.get("ops", [])} == set(grammar.OP_SOURCE)
    assert any(d["M"] == 1 for d in descs) and any(d.get("N") == 1 and d.get("ndim", 2) == 2 for d in descs)
    assert any(d["M"] % d["bm"] and d.get("N", 1) % d.get("bn", 1) for d in descs)  # tails in both dims
    assert any(d["M"] < d["bm"] for d in descs)                                      # tile larger than tensor
    assert any(d.get("r0") or d.get("c0") for d in descs)                            # offsets
    assert any(d.get("col") for d in descs) and any(d.get("sumsq") for d in descs)
    # the fourth stream: run-time extents (both axes, empty ones), N-D windows, atomic adds, loops of
    # 1 / 2 / 5 / 7 steps, symbolic dimensions of 0
    assert seen(lambda d: d["kind"] if "rt" in d else None) >= {"copy", "map", "gemm"}
    assert seen(lambda d: d.get("rt", {}).get("axis")) >= {0, 1}
    assert seen(lambda d: d.get("rt", {}).get("store")) >= {True, False}
    assert {d["n"] for d in descs if "rt" in d} >= {0, -2, 1}
    assert seen(lambda d: d.get("atomic")) >= {1, 2, 3}
    assert seen(lambda d: d.get("nd", {}).get("pos")) >= {0, 1}
    assert any(d["sym"] and 0 in (d["M"], d.get("N")) for d in descs)
    # the seventh stream: store origins before the tensor (rows, columns, inside a 32 B block)
    assert any(d.get("s0") for d in descs) and any(d.get("s1") for d in descs)
    assert any(d.get("s1") in (1, 3) for d in descs)
    # the eighth stream: gemm operands straight from the tensors, whole blocks
    assert seen(lambda d: d.get("gm")) >= {"a", "b", "ab"} and any(d.get("wholek") for d in many)
    assert all(d[n] % d[b] == 0 for d in descs if d.get("gm") for n, b in (("M", "bm"), ("N", "bn"), ("K", "bk")))
    # ... and wholek programs whose K passes one staged chunk (Ascend walks it in chunks with a tail)
    longk = [d for d in (grammar.generate(s) for s in range(20000)) if d.get("longk")]   # 10 groups
    assert longk and all(d["wholek"] and d["K"] > grammar.longk_chunk(d) and not d["epilogue"] for d in longk)
    assert {d["dt_in"] for d in longk} == set(grammar.DTYPES)
    # the ninth stream: run-time starts (scalar parameters) of copies/maps and of gemm operand
    # regions (negative, inside a 32 B block, wholly before, past the end), BSHD gemm operands
    assert {a for d in many for a in d.get("starts", {})} == {"ro", "co", "ra", "ka", "kb", "nb", "so", "sc"}
    vals = {v for d in many for v in d.get("starts", {}).values()}
    assert {-1, -3, -8, -16, 0, 1, 5} <= vals and any(v < -40 for v in vals)
    assert {d["kind"] for d in descs if "starts" in d} == {"copy", "map", "gemm"}
    assert seen(lambda d: tuple(sorted(d.get("bshd", {})))) >= {(), ("a",), ("b",), ("a", "b")}
    assert any(d.get("bshd") and d.get("gm") for d in many) and any(d.get("starts") and d.get("wholek") for d in many)
    assert any(known.strip_start_before_l1(d) for d in descs)
    # the tenth stream: a_band / c_band of gemms (a global band, run-time per block)
    assert {(d["band"][0], d["ta"]) for d in many if d.get("band")} == {("a", False), ("a", True), ("c", False), ("c", True)}
    assert any(d.get("band") and d.get("gm") for d in descs) and grammar.generate(7895)["band"] and grammar.generate(7895)["wholek"]
    # the twelfth stream: run-time store starts of copies / maps, before and after the origin
    ss = [v for d in many for k, v in d.get("starts", {}).items() if k in ("so", "sc")]
    assert min(ss) < -16 and max(ss) > 16 and 0 in ss
    # the eleventh stream: gathers along the tile's leading dim
    assert any(d.get("gaxis") == 0 for d in many) and all(d["kind"] == "gather" for d in many if "gaxis" in d)
    # the thirteenth stream: gather forms; the fourteenth: special input values; the fifteenth: 3-D tiles
    assert {d.get("gform") for d in many} == set(grammar.GFORMS) | {None}
    assert {s for d in many for s in d.get("special", [])} == {"inf", "-inf", "nan", "-0", "denorm", "huge", "-huge"}
    assert {d["kind"] for d in many if d.get("special")} == {"copy", "map", "reduce", "gather", "gemm"}
    assert {(d["kind"], d.get("dim")) for d in many if d.get("d3")} == {("map", None), ("reduce", 0), ("reduce", 1)}
    steps = lambda d: -(-d["K"] // d["bk"])  # noqa: E731
    assert {steps(d) for d in descs if d["kind"] == "gemm" and d["loop"] == "pipelined"} >= {1, 2, 5, 7}
    # programs with symbolic shapes share their source (one compile for several shapes)
    assert len({grammar.source(d) for d in descs}) < 0.7 * len(descs)


def test_llm_stream_covers_its_forms():
    """The sixteenth stream (fuzz/llm.py): every form and variant is drawn, only in the picked groups
    (the programs of the other groups are those of the fifteen streams), with tails."""
    picked = [s for s in range(5000) if grammar.generate(s)["kind"] == "llm"]
    assert 0.003 * 5000 < len(picked) < 0.02 * 5000 and all(grammar.generate(s) == llm.generate(s) for s in picked[:50])
    ds = [llm.generate(s) for s in range(3000)]
    seen = lambda f: {f(d) for d in ds}  # noqa: E731
    assert seen(lambda d: d["llm"]) == set(llm.FORMS)
    sm = [d for d in ds if d["llm"] in ("osm", "attn")]
    masks = ("none", "where", "add", "causal")
    assert {(d["llm"], d["mask"]) for d in sm} == {(f, m) for f in ("osm", "attn") for m in masks}
    assert {(d["init"], d["hide"], d["exp"], d["final"]) for d in sm} == {
        (i, h, e, f) for i in ("-inf", "lowest") for h in llm.HIDES for e in ("exp", "exp2") for f in ("where", "eps")}
    assert any(d["M"] % d["bm"] and d["N"] % d["bn"] for d in sm) and any(d.get("D", 16) % 16 for d in sm)
    assert any(d.get("pvis") == 0.0 for d in sm) and any(d.get("off", 0) < 0 for d in sm)   # fully masked rows
    assert seen(lambda d: d.get("form")) >= {"src", "dst"} and seen(lambda d: d.get("inter")) >= {True, False}
    assert {n for d in ds if d["llm"] == "paged" for n in d["lens"]} >= {0, 1}
    for d in ds[:150]:   # every program's reference is finite where defined, its tolerance finite
        (ref,), tr = reference(d)
        atol, _ = llm.tolerance(tr, d["dt_out"])
        assert np.all(np.isfinite(np.broadcast_to(atol, ref.shape))), d


@pytest.mark.parametrize("form", ["osm", "attn", "paged", "scatter", "rope"])
def test_llm_reference_catches_a_wrong_answer(form):
    """Each form's comparison passes its own reference and fails it with one element moved by more
    than the tolerance (or a defined element turned NaN)."""
    d = next(llm.generate(s) for s in range(0, 2000, 5) if llm.generate(s)["llm"] == form)
    (ref,), _ = reference(d)
    got = np.where(np.isnan(ref), 0.0, ref)
    assert compare(d, [got]) is None
    idx = tuple(np.argwhere(~np.isnan(ref))[0])
    bad = got.copy()
    bad[idx] += 0.5 + abs(bad[idx])
    assert compare(d, [bad]) is not None
    bad[idx] = np.nan
    assert compare(d, [bad]) is not None


def test_llm2_corpus():
    """6 programs of the seventeenth stream (fuzz/llm2.py; seeds 0, 1, 5, 6, 10, 11: rms norm, the split-KV
    combine, a cumsum scan over a 3-stage pipelined loop) on both targets; `python -m fuzz --stream llm2`
    runs the rest (GQA, top-k: a few seconds of compiling each)."""
    descs = [llm2.generate(s) for s in (0, 1, 5, 6, 10, 11)]
    assert {d["llm2"] for d in descs} == {"norm", "combine", "cumsum"}
    results = runner.run_programs(descs, jobs=2, timeout=120.0)
    bad = {descs[i]["seed"]: r for i, r in results.items() if r["status"] in runner.FAILURES}
    assert not bad, bad


def test_llm2_stream_covers_its_forms():
    """The seventeenth stream: only in its picked groups (every other program is unchanged: those
    groups were copies), every form and variant drawn, with tails, 1-element and empty dims."""
    gen = [grammar.generate(s) for s in range(0, 30000, grammar.GROUP)]   # a program of each group
    picked = [d for d in gen if d["kind"] == "llm2"]
    assert 0.002 * len(gen) < len(picked) < 0.02 * len(gen) and all(d == llm2.generate(d["seed"]) for d in picked[:30])
    assert not any(d["kind"] == "llm2" for d in gen[:CORPUS_N // grammar.GROUP])   # (test_corpus's time stays)
    ds = [llm2.generate(s) for s in range(1500)]
    seen = lambda f: {f(d) for d in ds}  # noqa: E731
    assert seen(lambda d: d["llm2"]) == set(llm2.FORMS)
    assert seen(lambda d: (d["llm2"], d["loop"], d.get("stages"))) >= {
        (f, lp, st) for f in ("combine", "gqa", "cumsum", "split") for lp in ("serial", "pipelined") for st in (2, 3)}
    assert any(d["llm2"] == "split" and d["NS"] * d["KB"] * d["bn"] >= d["N"] + d["KB"] * d["bn"] for d in ds)
    assert seen(lambda d: (d.get("layout"), d.get("KVH"), d.get("G"))) >= {("bshd", 1, 4), ("paged", 2, 3), ("paged", 1, 1)}
    assert seen(lambda d: (d.get("norm"), d.get("bias"), d.get("stats"))) >= {
        ("layer", True, True), ("layer", False, False), ("rms", False, True)}
    assert seen(lambda d: (d.get("K"), d.get("store"), d.get("ties"))) >= {
        (k, st, t) for k in (1, 2, 3, 4) for st in ("col", "where") for t in (True, False)}
    assert seen(lambda d: (d.get("axis"), d.get("maxred"), d.get("big"), d.get("pempty"))) >= {
        (None, True, True, 1.0), (None, False, False, 0.3), (0, None, None, None), (1, None, None, None)}
    assert any(d["sym"] and 0 in (d["M"], d.get("N")) for d in ds)
    assert any(d["M"] == 1 for d in ds) and any(d.get("N") == 1 for d in ds)
    assert any(d["M"] % d["bm"] and d.get("N", 1) % d.get("bn", 1) for d in ds)
    for d in ds[:60]:   # every reference finite where defined, every tolerance finite
        refs, trs = reference(d)
        for r, tr, (_, _, dt, _) in zip(refs, trs, grammar.checked(d)):
            atol, _ = llm2.tolerance(tr, dt)
            assert np.all(np.isfinite(np.broadcast_to(atol, r.shape))) and not np.isnan(r).any(), d


@pytest.mark.parametrize("form", list(llm2.FORMS))
def test_llm2_reference_catches_a_wrong_answer(form):
    """Each form's comparison passes its own reference and fails it with one element of any output
    moved by more than the tolerance (an id by one), or turned NaN."""
    d = next(llm2.generate(s) for s in range(0, 3000, 5) if llm2.generate(s)["llm2"] == form
             and llm2.generate(s)["M"] > 0 and llm2.generate(s).get("N", 1) > 0)
    refs, _ = reference(d)
    got = [np.array(r) for r in refs]
    assert compare(d, got) is None
    for k, r in enumerate(refs):
        idx = tuple(np.argwhere(np.isfinite(r))[0])
        bad = [g.copy() for g in got]
        bad[k][idx] += 1.0 if grammar.checked(d)[k][2] == "int32" else 0.5 + abs(bad[k][idx])
        assert compare(d, bad) is not None, (k, d)
        bad[k][idx] = np.nan
        assert compare(d, bad) is not None, (k, d)


def test_reducer_simplifies_the_llm2_forms():
    """The seventeenth stream's candidates are valid and simpler; a loop stays a loop."""
    for s in range(0, 400, 5):
        d = llm2.generate(s)
        cands = reducer.candidates(d)
        assert all(llm2.valid(c) and c != d for c in cands)
        if d["llm2"] in ("combine", "gqa", "cumsum", "split"):
            assert all(c["loop"] in ("serial", "pipelined") for c in cands)
        if d["llm2"] == "gqa" and d["layout"] == "paged":
            assert any(c["layout"] == "bshd" for c in cands)


SKIP_CORPUS = (0, 1, 5, 6, 20, 21, 25, 26)


def test_skip_corpus():
    """8 programs of the eighteenth stream (fuzz/skip.py; 4 groups, 2 seeds each sharing a kernel, most
    programs skipped: a gemm of 17-row tiles over 299 programs, a pipelined gemm -> epilogue over 1815, flash-style
    S = Q K^T, P V with a key loop of run-time extent over 1022, a vector loop of run-time extent over 1458
    sequences) on both targets; `python -m fuzz --stream skip` runs the rest."""
    descs = [skip.generate(s) for s in SKIP_CORPUS]
    assert {d["skip"] for d in descs} >= {"rows", "epi", "flash", "vec"}
    results = runner.run_programs(descs, jobs=2, timeout=120.0)
    bad = {descs[i]["seed"]: r for i, r in results.items() if r["status"] in runner.FAILURES}
    assert not bad, bad


def test_skip_stream_covers_its_forms():
    """The eighteenth stream: not drawn by grammar.generate (the other streams' programs are unchanged);
    every form, condition, length pattern and loop drawn; grids of 100-2000 programs; copies of more than
    4095 rows; atomic adds; a group shares its kernel's text."""
    assert not any(grammar.generate(s)["kind"] == "skip" for s in range(0, 30000, grammar.GROUP))
    ds = [skip.generate(s) for s in range(1500)]
    seen = lambda f: {f(d) for d in ds}  # noqa: E731
    assert seen(lambda d: d["skip"]) == set(skip.FORMS)
    assert seen(lambda d: (d["skip"], d["cond"])) >= {(f, c) for f in ("epi", "pro", "flash", "vec") for c in skip.CONDS}
    assert seen(lambda d: (d["skip"], d["loop"], d["stages"])) >= {
        (f, lp, st) for f in ("epi", "pro", "flash", "vec") for lp in ("serial", "pipelined") for st in (2, 3)}
    assert seen(lambda d: d["lens"]) == set(skip.LENS)
    assert seen(lambda d: (d["skip"], d["atomic"])) >= {("epi", True), ("vec", True), ("epi", False)}
    assert seen(lambda d: d.get("R")) >= {1, 1024, 4095, 4096, 4097, 6000}
    grids = [d["NB"] * d["B"] if d["skip"] != "vec" else -(-d["D"] // d["bd"]) * d["B"] for d in ds if "B" in d]
    assert min(grids) >= 100 and max(grids) >= 1000 and max(grids) <= 2000
    for d in ds[:100]:   # a group shares its text; every tolerance finite; the lengths in range
        assert grammar.source(d) == grammar.source(skip.generate(d["seed"] // grammar.GROUP * grammar.GROUP))
        refs, trs = reference(d)
        for r, tr, (_, _, dt, _) in zip(refs, trs, grammar.checked(d)):
            atol, _ = llm2.tolerance(tr, dt)
            assert np.all(np.isfinite(np.broadcast_to(atol, r.shape))), d
        lens = inputs(d)[grammar.out_index(d)[0] - 1 if grammar.out_index(d) else -2]
        assert lens.dtype == np.int32 and lens.min() >= 0


@pytest.mark.parametrize("form", list(skip.FORMS))
def test_skip_reference_catches_a_wrong_answer(form):
    """Each form's comparison passes its own reference and fails it with one written element moved by
    more than the tolerance, or turned NaN; a program that skips nothing it should leaves no NaN."""
    d = next(d for d in map(skip.generate, range(0, 3000, 5)) if d["skip"] == form
             and not np.isnan(reference(d)[0][0]).all())
    refs, _ = reference(d)
    got = [np.where(np.isnan(r), 0.0, r) for r in refs]
    assert compare(d, got) is None
    idx = tuple(np.argwhere(np.isfinite(refs[0]))[0])
    bad = [g.copy() for g in got]
    bad[0][idx] += 0.5 + abs(bad[0][idx])
    assert compare(d, bad) is not None, d
    bad[0][idx] = np.nan
    assert compare(d, bad) is not None, d


def test_reducer_simplifies_the_skip_forms():
    for s in range(0, 400, 5):
        d = skip.generate(s)
        cands = reducer.candidates(d)
        assert all(skip.valid(c) and c != d for c in cands)
        assert all(c["loop"] in ("serial", "pipelined") for c in cands)


WIDE_CORPUS = (55, 105, 145, 265, 410)


def test_wide_corpus():
    """5 programs of the nineteenth stream (fuzz/wide.py) on both targets: 12 rows of 9110 (row sums;
    the rows in groups), rms_norm of a 151936-wide row (column blocks), 4096-row tiles over 12287 rows
    (row sums; copies of more than 4095 rows at a row tail), a log-sum-exp over a user's loop of
    333-column chunks of 46365, a 3-stage pipelined gemm prologue at K = 203; `python -m fuzz
    --stream wide` runs the rest."""
    descs = [wide.generate(s) for s in WIDE_CORPUS]
    assert {d["wide"] for d in descs} == set(wide.FORMS) and {"group", "wide", "tall"} <= {d.get("shape") for d in descs}
    results = runner.run_programs(descs, jobs=2, timeout=120.0)
    bad = {descs[i]["seed"]: r for i, r in results.items() if r["status"] in runner.FAILURES}
    assert not bad, bad


def _ub_bytes(d):
    """The bytes of one float32 tile of a wide program's block (a UB row is a 32 B block at least)."""
    cols = d["bn"] if d["wide"] == "chunk" else d["N"]
    return d["bm"] * -(-cols * 4 // 32) * 32


def test_wide_stream_covers_its_forms():
    """The nineteenth stream: not drawn by grammar.generate (the other streams' programs are unchanged);
    every form, shape class, row computation, op, dtype and loop drawn; tiles past the UB (rows in groups,
    rows of more than 49088 float32, more than 4095 rows), widths up to 152065; a group shares its kernel's
    text; every tolerance finite."""
    assert not any(grammar.generate(s)["kind"] == "wide" for s in range(0, 30000, grammar.GROUP))
    ds = [wide.generate(s) for s in range(0, 3000, grammar.GROUP)]
    seen = lambda f: {f(d) for d in ds}  # noqa: E731
    assert seen(lambda d: d["wide"]) == set(wide.FORMS)
    assert seen(lambda d: d.get("shape")) >= set(wide.SHAPES)
    assert seen(lambda d: (d["wide"], d.get("red"))) >= {("row", r) for r in wide.REDS} | {("chunk", r) for r in wide.CHUNK_REDS}
    assert {op[0] for d in ds for op in d.get("ops", ())} == set(wide.OPS)
    assert seen(lambda d: (d["wide"], d["loop"], d["stages"])) >= {("chunk", "serial", 2), ("chunk", "pipelined", 3),
                                                                  ("gemm", "pipelined", 4)}
    assert seen(lambda d: d.get("mode")) >= {"staged", "global"}
    assert seen(lambda d: d["dt_in"]) == set(llm.FLOATS) and seen(lambda d: d["dt_out"]) == set(llm.FLOATS)
    assert seen(lambda d: d["cond"]) == {None, 0, 1, 2}
    rows = [d for d in ds if d["wide"] == "row"]
    assert max(d["N"] for d in rows) >= 150000 and max(d["bm"] for d in rows) > 4095
    assert sum(_ub_bytes(d) > 196352 for d in rows) > len(rows) // 2
    assert any(d["wide"] == "chunk" and d["N"] % d["bn"] for d in ds) and any(d["M"] % d["bm"] for d in ds)
    assert all(d["M"] * d["N"] <= max(wide.MAX_ELEMS, d["bm"] * d["N"]) for d in ds if d["wide"] != "gemm")
    for d in ds[:120]:
        assert grammar.source(d) == grammar.source(wide.generate(d["seed"] + 1))   # (a group shares its text)
        refs, trs = reference(d)
        for r, tr, (_, _, dt, _) in zip(refs, trs, grammar.checked(d)):
            atol, _ = llm2.tolerance(tr, dt)
            assert np.all(np.isfinite(np.broadcast_to(atol, r.shape))), d


@pytest.mark.parametrize("form", ["row", "chunk", "gemm", "argmax", "sum"])
def test_wide_reference_catches_a_wrong_answer(form):
    """Each form's comparison passes its own reference and fails it with one written element moved by
    more than the tolerance, or turned NaN (argmax: an id one off; an exact row sum: 0.5 off)."""
    pick = {"argmax": lambda d: d.get("red") == "argmax", "sum": lambda d: d.get("red") == "sum" and not d["ops"]}
    d = next(d for d in map(wide.generate, range(0, 5000, 5)) if pick.get(form, lambda d: d["wide"] == form)(d)
             and d["cond"] is None)
    refs, _ = reference(d)
    got = [np.where(np.isnan(r), 0.0, r) for r in refs]
    assert compare(d, got) is None
    for k in range(len(refs)):
        idx = tuple(np.argwhere(np.isfinite(refs[k]))[0])
        bad = [g.copy() for g in got]
        bad[k][idx] += 1.0 if form == "argmax" else 0.5 + abs(bad[k][idx])
        assert compare(d, bad) is not None, d
        bad[k][idx] = np.nan
        assert compare(d, bad) is not None, d


def test_reducer_simplifies_the_wide_forms():
    for s in range(0, 600, 5):
        d = wide.generate(s)
        cands = reducer.candidates(d)
        assert all(wide.valid(c) and c != d for c in cands)
        if d["cond"] is not None:
            assert any(c["cond"] is None for c in cands)


def test_source_is_a_real_kernel():
    """The generated text goes through the normal front end, from a file: an error quotes the
    kernel's own line (here the documented GM->L0C limitation of Ascend)."""
    import tilewright as tw
    d = grammar.generate(0)
    d.update(kind="gemm", dt_in="float16", dt_out="float32", accum="init", epilogue=[], ta=False, tb=False, sym=False)
    text = grammar.source(d)
    fn = runner.Compiled().prim_func(text)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(fn, target="ascend910b", out_idx=grammar.out_index(d))
    assert e.value.source_line.strip().startswith("T.copy(C0[")
    assert text.splitlines()[e.value.line - 1] == e.value.source_line
    assert open(e.value.file).read() == text


def test_reference_of_a_copy_with_offset_and_cast():
    d = {"seed": 1, "kind": "copy", "sym": False, "ndim": 2, "dt_in": "float32", "dt_tile": "int8",
         "dt_out": "float16", "bm": 4, "bn": 4, "loop": "grid", "stages": 2, "r0": 1, "c0": 2,
         "M": 5, "N": 3, "MA": 5, "NA": 6}
    (out,), _ = reference(d)
    (a,) = inputs(d)
    expect = np.zeros((5, 3))
    expect[:4, :] = np.trunc(a[1:5, 2:5])      # row 4 reads past A's end: 0
    assert np.array_equal(out, expect)
    assert compare(d, [expect.astype(np.float16)]) is None
    wrong = expect.copy()
    wrong[4, 0] = 7.0                           # a stale value in the tail
    problem = compare(d, [wrong.astype(np.float16)])
    assert problem and "1 of 15 elements off" in problem and "(4, 0)" in problem


def test_reference_of_run_time_extents_atomic_adds_and_nd_windows():
    """A run-time row count n (rows at n or past it read 0; a store of `cnt` rows leaves the rest
    undefined), a unit dim h of a 3-D input, T.atomic_add of the tile S times into B."""
    base = {"seed": 3, "kind": "copy", "sym": False, "ndim": 2, "dt_in": "float32", "dt_tile": "float32",
            "dt_out": "float32", "bm": 4, "bn": 4, "loop": "grid", "stages": 2, "r0": 0, "c0": 0,
            "M": 6, "N": 3, "MA": 6, "NA": 3}
    d = dict(base, rt={"axis": 0, "store": False}, n=5)
    a, lens = inputs(d)
    assert lens.tolist() == [5] and "cnt = T.min(4, n - by * 4)" in grammar.source(d)
    (out,), _ = reference(d)
    assert np.array_equal(out[:5], a[:5]) and not out[5:].any()
    d = dict(d, rt={"axis": 1, "store": True}, n=2)
    (out,), _ = reference(d)
    assert np.array_equal(out[:, :2], a[:, :2]) and np.isnan(out[:, 2:]).all()
    assert "T.copy(x[:, 0:cnt], B[by * 4:by * 4 + 4, bx * 4:bx * 4 + cnt])" in grammar.source(d)
    d = dict(base, nd={"pos": 1, "h": 1}, H=3)
    a3, = inputs(d)
    assert a3.shape == (6, 3, 3) and "A[by * 4:by * 4 + 4, 1, bx * 4:bx * 4 + 4]" in grammar.source(d)
    (out,), _ = reference(d)
    assert np.array_equal(out, a3[:, 1, :])
    d = dict(base, atomic=3, dt_out="float16")
    a, b = inputs(d)
    (out,), _ = reference(d)
    assert np.array_equal(out, b.astype(np.float64) + 3 * a) and "as (bx, by, s)" in grammar.source(d)
    assert [t[0] for t in grammar.checked(d)] == ["B"] and grammar.out_index(d) == []


def test_reference_of_run_time_starts_and_bshd_gemm_operands():
    """The ninth stream: a copy's load origin plus scalar parameters (zeros outside the tensor);
    gemm regions at run-time starts of a BSHD A (rows H x K apart) and a 2-D B, zeros outside;
    the Ascend report expected of a window starting inside a C0 strip before column 0."""
    d = {"seed": 4, "kind": "copy", "sym": False, "ndim": 2, "dt_in": "float32", "dt_tile": "float32",
         "dt_out": "float32", "bm": 4, "bn": 4, "loop": "grid", "stages": 2, "r0": 1, "c0": 0,
         "M": 5, "N": 6, "MA": 6, "NA": 6, "starts": {"ro": -3, "co": 2}}
    a, ro, co = inputs(d)
    assert (ro, co) == (2, -3) or (ro, co) == (-3, 2)
    assert "A[by * 4 + 1 + ro, bx * 4 + co]" in grammar.source(d) and "co: T.int32, ro: T.int32" in grammar.source(d)
    (out,), _ = reference(d)
    full = np.zeros((5 + 8, 6 + 8))
    full[4:10, 4:10] = a                   # a at offset 4: A[i + 1 - 3, j + 2]
    assert np.array_equal(out, full[4 + 1 - 3:4 + 1 - 3 + 5, 4 + 2:4 + 2 + 6])
    g = {"seed": 5, "kind": "gemm", "sym": False, "dt_in": "float16", "dt_out": "float32", "ta": False, "tb": False,
         "bm": 16, "bn": 16, "bk": 16, "loop": "serial", "stages": 2, "accum": "", "epilogue": [],
         "M": 20, "N": 17, "K": 24, "starts": {"ra": -5, "ka": 3, "nb": -16}, "bshd": {"a": [1, 2, 2, 3]}}
    a4, b, ka, nb, ra = inputs(g)
    assert a4.shape == (2, 20, 3, 24) and (ka, nb, ra) == (3, -16, -5)
    src = grammar.source(g)
    assert "T.copy(A[1, by * 16 + ra:by * 16 + ra + 16, 2, k * 16 + ka:k * 16 + ka + 16], a)" in src
    assert "T.copy(B[k * 16:k * 16 + 16, bx * 16 + nb:bx * 16 + nb + 16], b)" in src
    (out,), _ = reference(g)
    pa = np.zeros((32 + 40, 32 + 40))
    pa[20:40, 20:44] = a4[1, :, 2, :]
    pb = np.zeros((32 + 40, 32 + 40))
    pb[20:44, 20:37] = b
    wa = pa[20 - 5:20 - 5 + 20, 20 + 3:20 + 3 + 32]          # rows ra.., K blocks ka.. (2 blocks of 16)
    wb = pb[20:20 + 32, 20 - 16:20 - 16 + 17]
    assert np.array_equal(out, wa.astype(np.float64) @ wb)
    assert not known.strip_start_before_l1(g)             # -16 is a whole float16 strip: clipped exactly
    assert known.strip_start_before_l1(dict(g, starts={"nb": -3}))
    assert known.strip_start_before_l1(dict(g, starts={"nb": -19}))   # its second block starts at -3
    assert not known.strip_start_before_l1(dict(g, starts={"nb": -19}, N=16))   # one block, wholly before
    assert not known.strip_start_before_l1(dict(g, starts={"nb": -3, "kb": 40}))   # B's rows all past K


def test_reference_of_run_time_store_starts():
    """B[by * bm + so, bx * bn + sc] = tile: rows / columns moved before 0 are dropped, the output's
    first rows / columns past a positive start never written (undefined)."""
    d = {"seed": 8, "kind": "copy", "sym": False, "ndim": 2, "dt_in": "float32", "dt_tile": "float32",
         "dt_out": "float32", "bm": 4, "bn": 4, "loop": "grid", "stages": 2, "r0": 0, "c0": 0,
         "M": 6, "N": 7, "MA": 8, "NA": 7, "starts": {"so": -3, "sc": 2}}
    a, sc, so = inputs(d)
    assert (sc, so) == (2, -3) and "T.copy(x, B[by * 4 + so, bx * 4 + sc])" in grammar.source(d)
    (out,), _ = reference(d)
    tiles = np.zeros((8, 8))
    tiles[:8, :7] = a                     # whole blocks, A's rows 6-7 (past B's M) included
    assert np.isnan(out[:, :2]).all() and np.isnan(out[5:, :]).all()
    assert np.array_equal(out[:5, 2:], tiles[3:8, 0:5])


def test_reference_of_a_gather_along_the_leading_dim():
    """y[i, j] = x[ix[i, j], j] of each block's tile, rows past A's end reading 0."""
    d = {"seed": 7, "kind": "gather", "sym": False, "loop": "grid", "ndim": 2, "dt_in": "float32",
         "dt_tile": "float32", "dt_out": "float32", "bm": 4, "bn": 8, "M": 6, "N": 5, "gaxis": 0}
    a, idx = inputs(d)
    assert idx.min() >= 0 and idx.max() < 4 and "y[i, j] = x[ix[i, j], j]" in grammar.source(d)
    (out,), _ = reference(d)
    expect = [[a[i // 4 * 4 + idx[i, j], j] if i // 4 * 4 + idx[i, j] < 6 else 0.0 for j in range(5)] for i in range(6)]
    assert np.array_equal(out, expect)
    assert known.unsupported(d, "ascend910b") and not known.unsupported(d, "cpu")


def test_reference_of_gather_forms():
    """The thirteenth stream: strided reads along either dim, a transposed read, 1-D gathers at
    indices, clamped or (oob1) outside the tile."""
    base = {"seed": 3, "kind": "gather", "sym": False, "loop": "grid", "ndim": 2, "dt_in": "float32",
            "dt_tile": "float32", "dt_out": "float32", "bm": 4, "bn": 4, "M": 5, "N": 6}
    d = dict(base, gform="stride1", stride=[3, 1], NS=16)
    (a,) = inputs(d)
    assert a.shape == (5, 16) and "y[i, j] = x[i, 3 * j + 1]" in grammar.source(d)
    (out,), _ = reference(d)
    assert np.array_equal(out, np.concatenate([a[:, 1::3], np.zeros((5, 1))], axis=1))   # column 16: past A
    d = dict(base, gform="stride0", stride=[2, 0], MS=9)
    (a,) = inputs(d)
    assert "y[i, j] = x[2 * i, j]" in grammar.source(d) and known.unsupported(d, "ascend910b")
    (out,), _ = reference(d)
    assert np.array_equal(out, a[0::2])
    d = dict(base, gform="trans")
    (a,) = inputs(d)
    assert a.shape == (6, 5) and "y[i, j] = x[j, i]" in grammar.source(d)
    assert np.array_equal(reference(d)[0][0], a.T)
    one = dict(base, ndim=1, bm=8, bn=8, M=9, N=5)
    for f in ("flat1", "clamp1"):
        d = dict(one, gform=f)
        a, idx = inputs(d)
        lo, hi = (0, 8) if f == "flat1" else (-5, 13)
        assert idx.min() >= lo and idx.max() < hi
        c = np.clip(idx, 0, 7)
        assert np.array_equal(reference(d)[0][0], np.where(c < 5, a[np.minimum(c, 4)], 0.0))
    assert "T.min(T.max(ix[i], 0), 7)" in grammar.source(dict(one, gform="clamp1"))
    d = dict(one, gform="oob1", oob=[2, 9])
    assert inputs(d)[1][2] == 9 and known.unsupported(d, "cpu")
    assert known.expected_report(d, "ascend910b", ["k.py:9: out of bounds: Gather srcOffset[2] = 36"])


def test_reference_of_special_values():
    """The fourteenth stream: inf, NaN, -0, subnormals and huge values in the inputs (the source is
    the one without them); a NaN the reference computes is a value the output must hold, not an
    undefined element; an inf must be met exactly."""
    d = {"seed": 11, "kind": "map", "sym": False, "ndim": 1, "dt_in": "float32", "dt_tile": "float32",
         "dt_out": "float32", "bm": 8, "bn": 1, "loop": "grid", "stages": 2, "r0": 0, "c0": 0, "col": False,
         "second": False, "ops": [["axpb", 2.0, 0.0]], "fused": True, "M": 256, "MA": 256, "NA": 1}
    plain = inputs(d)[0]
    s = dict(d, special=["nan", "inf", "-0", "denorm", "huge"])
    a = inputs(s)[0]
    assert grammar.source(s) == grammar.source(d) and np.isnan(a).any() and np.isinf(a).any()
    assert (a == 2.0 ** 100).any() and (a == 2.0 ** -149).any() and 0.6 < (a == plain).mean() < 0.8
    (ref,), _ = reference(s)
    with np.errstate(all="ignore"):
        assert compare(s, [(a * 2).astype(np.float32)]) is None   # 2^101 fits float32
    nan = np.isnan(a)
    wrong = (a * 2).astype(np.float32)
    wrong[np.argmax(nan)] = 0.0
    assert "expected" in compare(s, [wrong])                    # a NaN became 0
    wrong = (a * 2).astype(np.float32)
    wrong[np.argmax(np.isinf(a))] = 1e30
    assert "expected" in compare(s, [wrong])                    # an inf became finite
    # a fused map computes in float32: (2^100)^2 overflows to inf before the * 0.25
    f = dict(s, special=["huge"], ops=[["sq"], ["axpb", 0.25, 0.0]])
    (ref,), _ = reference(f)
    assert np.isinf(ref[inputs(f)[0] == 2.0 ** 100]).all()
    # a NaN converted into an integer tile is undefined, not a NaN to match
    i = dict(s, dt_tile="int32")
    (ref,), _ = reference(i)
    assert np.isnan(ref[np.isnan(a)]).all() and compare(i, [np.where(np.isnan(ref), 7.0, ref).astype(np.float32)]) is None
    # NaN through max / min is numpy's on both targets (session 22, h-nan10): no known bug explains a mismatch
    assert not known.known_bug(dict(s, ops=[["max", 0.0]]), "ascend910b", "mismatch")
    # a copy keeps -0.0 (checked), an integer tile turns it into +0
    c = dict(s, kind="copy", special=["-0"])
    c.pop("ops")
    a = inputs(c)[0]
    assert np.signbit(a[a == 0]).any() and compare(c, [np.abs(a)]) and compare(c, [a]) is None
    r = reference(dict(c, dt_tile="int32"))[0][0]
    assert not np.signbit(r[r == 0]).any()


def test_reducer_simplifies_the_new_streams():
    """Special values one fewer or none, a 2-D tile for a 3-D one; an out-of-range index stays in B."""
    d = {"seed": 9, "kind": "reduce", "sym": False, "dt_in": "float32", "dt_tile": "float32", "dt_out": "float32",
         "op": "max", "dim": 1, "bm": 4, "bn": 8, "loop": "grid", "stages": 2, "M": 5, "N": 6, "sumsq": False,
         "d3": {"bh": 2}, "H": 3, "special": ["nan", "inf"]}
    cands = reducer.candidates(d)
    assert {tuple(c.get("special", ())) for c in cands} >= {(), ("nan",), ("inf",)}
    assert any("d3" not in c and "H" not in c for c in cands)
    g = {"seed": 3, "kind": "gather", "sym": False, "loop": "grid", "ndim": 1, "dt_in": "float32",
         "dt_tile": "float32", "dt_out": "float32", "bm": 8, "bn": 8, "M": 9, "N": 5, "gform": "oob1", "oob": [6, 9]}
    assert all(c["M"] > 6 for c in reducer.candidates(g))


def test_reference_of_3d_tiles():
    """The fifteenth stream: a map of (bh, bm, bn) tiles of 3-D tensors, a reduction of them over
    axis 1 or 2 (the tile's rows past the tensor reading 0 take part in max / min)."""
    d = {"seed": 5, "kind": "map", "sym": False, "ndim": 2, "dt_in": "float32", "dt_tile": "float32",
         "dt_out": "float32", "bm": 4, "bn": 4, "loop": "grid", "stages": 2, "r0": 1, "c0": 0, "col": False,
         "second": False, "ops": [["abs"]], "fused": True, "M": 5, "N": 6, "MA": 6, "NA": 6,
         "d3": {"bh": 2}, "H": 3}
    (a,) = inputs(d)
    src = grammar.source(d)
    assert a.shape == (3, 6, 6) and "for h, i, j in T.Parallel(2, 4, 4):" in src
    assert "T.copy(A[bz * 2, by * 4 + 1, bx * 4], x)" in src
    assert np.array_equal(reference(d)[0][0], np.abs(a[:, 1:6, :]))
    r = {"seed": 5, "kind": "reduce", "sym": False, "dt_in": "float32", "dt_tile": "float32", "dt_out": "float32",
         "op": "max", "dim": 0, "bm": 8, "bn": 4, "loop": "grid", "stages": 2, "M": 5, "N": 6, "sumsq": False,
         "d3": {"bh": 2}, "H": 3}
    (a,) = inputs(r)
    assert "T.reduce_max(x, r, dim=1)" in grammar.source(r)
    assert np.array_equal(reference(r)[0][0], np.maximum(a.max(axis=1), 0.0))   # 3 zero rows of the tile
    r = dict(r, dim=1, op="sum", bn=8)
    assert "T.reduce_sum(x, r, dim=2)" in grammar.source(r)
    assert np.array_equal(reference(r)[0][0], a.astype(np.float64).sum(axis=2))


def test_reference_of_gemm_bands():
    """The tenth stream: an a_band program's op(A) is 0 outside the global band (the promise the
    gemm may rely on), a c_band program's C outside it is undefined (NaN in the reference)."""
    g = {"seed": 6, "kind": "gemm", "sym": False, "dt_in": "float32", "dt_out": "float32", "ta": True, "tb": False,
         "bm": 16, "bn": 16, "bk": 16, "loop": "serial", "stages": 2, "accum": "", "epilogue": [],
         "M": 20, "N": 17, "K": 24, "band": ["a", -5, 3]}
    a, b = inputs(g)
    diag = np.arange(24)[:, None] - np.arange(20)[None, :]     # A is K x M: op(A)[i, k] = A[k, i], k - i
    assert not a[(diag < -5) | (diag >= 3)].any() and a[(diag >= -5) & (diag < 3)].any()
    assert "a_band=(-5 + by * 16 - k * 16, 3 + by * 16 - k * 16)" in grammar.source(g)
    (out,), _ = reference(g)
    assert np.array_equal(out, a.T.astype(np.float64) @ b)
    c = dict(g, ta=False, band=["c", 0, 4])
    a, b = inputs(c)
    assert "c_band=(0 + by * 16 - bx * 16, 4 + by * 16 - bx * 16)" in grammar.source(c)
    (out,), _ = reference(c)
    diag = np.arange(17)[None, :] - np.arange(20)[:, None]
    inside = (diag >= 0) & (diag < 4)
    assert np.array_equal(out[inside], (a.astype(np.float64) @ b)[inside]) and np.isnan(out[~inside]).all()


def test_reference_of_integer_operations_and_selects():
    """The reference's int32 operations are Python's (floor division, modulo with the divisor's
    sign, arithmetic shifts, two's complement bitwise), checked element by element."""
    from fuzz.reference import OP_VALUE
    xs = np.arange(-40, 41, dtype=np.float64)
    for name, consts in grammar.INT_OPS.items():
        for c in consts:
            op = [name] if c is None else [name, c]
            src = grammar.OP_SOURCE[name](op, "v", None)
            expect = [eval(src, {"v": int(v)}) for v in xs]   # noqa: S307 (our own text)
            assert np.array_equal(OP_VALUE[name](op, xs, None, "int32"), expect), src
    y = xs[::-1]
    for op in (["where", 0.3, -1.0], ["where2", 1.1]):
        src = grammar.OP_SOURCE[op[0]](op, "x", "y")
        assert src.startswith("T.where(")
    assert np.array_equal(OP_VALUE["where"](["where", 0.3, -1.0], xs, None, "float32"), np.where(xs > 0.3, xs, -xs))
    assert np.array_equal(OP_VALUE["where2"](["where2", 1.1], xs, y, "float32"), np.where(y > 1.1, xs, y))


def test_reference_of_a_blocked_reduction():
    """clear=False merges block by block, the zero-filled tail included (it matters for max)."""
    d = {"seed": 2, "kind": "reduce", "sym": False, "dt_in": "float32", "dt_tile": "float32", "dt_out": "float32",
         "op": "max", "dim": 1, "bm": 4, "bn": 4, "loop": "serial", "stages": 2, "M": 3, "N": 6}
    (out,), _ = reference(d)
    (a,) = inputs(d)
    padded = np.concatenate([a, np.zeros((3, 2), np.float32)], axis=1)
    assert np.array_equal(out, padded.max(axis=1))


def test_worker_crash_and_hang_are_recorded():
    with runner.Isolated(timeout=5.0) as iso:
        r = iso.request({"crash": True})
        assert r["status"] == "crash" and signal.Signals.SIGSEGV.name in r["detail"]
        r = iso.request({"hang": True})
        assert r["status"] == "hang"
        d = grammar.generate(3)
        iso.timeout = 120.0
        assert iso.run(d)["status"] in ("ok", "known")   # a fresh worker takes over


def test_unsupported_programs_must_be_rejected_clearly():
    d = grammar.generate(0)
    d.update(kind="gemm", dt_in="float32", dt_out="float32", accum="init", epilogue=[], ta=False, tb=False)
    assert known.unsupported(d, "ascend910b")
    status, detail = runner.run_target(d, "ascend910b", runner.Compiled())
    assert status == "ok", detail


def test_reducer_finds_the_minimal_program():
    """A fake failure (any map containing exp on a float16 tile) reduces to one exp, small shapes."""
    d = grammar.generate(0)
    d.update(kind="map", ndim=2, dt_in="bfloat16", dt_tile="float16", dt_out="int8", bm=16, bn=8, loop="pipelined",
             stages=3, r0=3, c0=1, sym=False, second=True, fused=True, M=40, N=17, MA=44, NA=18,
             ops=[["axpb", 1.5, 0.25], ["exp"], ["add2"], ["max", 1.0]])
    for key in ("ta", "tb", "bk", "K", "accum", "epilogue"):
        d.pop(key, None)

    def fake_run(c):
        hit = c["kind"] == "map" and c["dt_tile"] == "float16" and any(op[0] == "exp" for op in c["ops"])
        return {"status": "mismatch" if hit else "ok", "target": "cpu" if hit else None, "detail": "B: off"}

    small, runs = reducer.reduce(d, fake_run(d), fake_run, budget=500)
    assert small["ops"] == [["exp"]] and small["dt_tile"] == "float16"
    assert small["M"] == 1 and small["N"] == 1 and not small["second"] and small["loop"] == "grid"
    assert small["dt_in"] == "float32" and small["dt_out"] == "float32" and small["r0"] == 0
    assert runs < 500
