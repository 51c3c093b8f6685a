"""polish35 (session 35): small user-facing fixes left by session 35's helpers.

1. hunt35 F3's remainder: postponed annotations (`from __future__ import annotations`) of a
   TILE-LOOPS kernel name the defining factory's locals (h-hunt35 fixed @T.prim_func only).
"""
import importlib.util

import numpy as np
import pytest

import tilewright as tw

ASC = "ascend910b"

# --------------------------------------------------------------------------- 1: tile-loops postponed annotations
# The module is written twice, with and without the future import: Python evaluates the annotations at the
# definition without it, and leaves them as strings for Tilewright's front end with it. The globals named like
# the factory's locals must not be what the annotations see.
TILE_LOOPS_FACTORIES = '''
import tilewright as tw

shape = "a global the annotations must not see"
dtype = "a global the annotations must not see"
M = 4


def compiled(N, dtype="float32", target="cpu"):
    shape = (N, 8)  # used only in the annotation: no closure cell

    @tw.compile(target=target)
    def copy_rows(A: tw.Tensor(shape, dtype)):
        out = tw.output((N, 8), dtype="float16")
        for by in range(N // 4):
            t = tw.load(A, (by * 4, 0), (4, 8))
            tw.store(out, (by * 4, 0), t)
        return out
    return copy_rows


@tw.jit
def jitted(N, dtype="float32"):
    def copy_rows(A: tw.Tensor((N, 8), dtype)):  # dtype: the factory's parameter, only in the annotation
        out = tw.output((N, 8), dtype="float16")
        for by in range(N // 4):
            t = tw.load(A, (by * 4, 0), (4, 8))
            tw.store(out, (by * 4, 0), t)
        return out
    return copy_rows


@tw.jit
def jitted_derived(N):
    rows = (N, 8)  # a derived local: gone when the returned function is parsed

    def copy_rows(A: tw.Tensor(rows, "float16")):
        out = tw.output((N, 8), dtype="float16")
        for by in range(N // 4):
            t = tw.load(A, (by * 4, 0), (4, 8))
            tw.store(out, (by * 4, 0), t)
        return out
    return copy_rows


def module_level(A: tw.Tensor((M, 8), "float16")):  # M: the module's global, whoever compiles it
    out = tw.output((M, 8), dtype="float16")
    t = tw.load(A, (0, 0), (M, 8))
    tw.store(out, (0, 0), t)
    return out
'''


def _load(tmp_path, postponed):
    name = f"tw_polish35_tile_loops_{int(postponed)}"
    path = tmp_path / f"{name}.py"
    path.write_text(("from __future__ import annotations\n" if postponed else "") + TILE_LOOPS_FACTORIES)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(kernel, *inputs):
    if kernel.target == "cpu":
        return kernel(*inputs)
    prof = kernel.profile(*inputs)
    assert prof["reports"] == []
    return prof.outputs


@pytest.mark.parametrize("postponed", [True, False], ids=["future-annotations", "eager"])
def test_tile_loops_annotations_name_factory_locals(tmp_path, postponed):
    mod = _load(tmp_path, postponed)
    a = (np.arange(12 * 8) % 251).astype(np.float16).reshape(12, 8)
    targets = ["cpu", ASC] if postponed else [ASC]  # the front end's fix: cpu compiled once
    for target in targets:
        out = _run(mod.compiled(12, "float16", target=target), a)
        assert out.dtype == np.float16 and np.array_equal(out, a)
    assert np.array_equal(_run(mod.jitted(12, "float16", target=ASC), a), a)
    # tw.compile elsewhere of a module-level kernel: its annotations see the module, not the caller's M
    M = 2  # noqa: F841 - the caller's local that must not be seen
    assert np.array_equal(_run(tw.compile(mod.module_level, target=ASC), a[:4]), a[:4])
    if not postponed:
        assert np.array_equal(_run(mod.jitted_derived(12, target=ASC), a), a)
        return
    # a derived local of a @tw.jit factory is gone when its tile-loops function is parsed: the error says so
    with pytest.raises(tw.TilewrightError) as e:
        mod.jitted_derived(12, target=ASC)
    line = 1 + (tmp_path / "tw_polish35_tile_loops_1.py").read_text().splitlines().index(
        '    def copy_rows(A: tw.Tensor(rows, "float16")):')
    assert "name 'rows' is not defined" in e.value.message and e.value.line == line
    assert "only its parameters" in e.value.hint and "tw.Tensor((N, 8), dtype)" in e.value.hint
