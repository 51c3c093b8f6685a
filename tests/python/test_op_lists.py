"""The DSL's per-op names come from the IR's lists (the X-macros of include/tilewright/ir.h,
exported by tilewright._C.ir), and language.py and frontend/ do not import each other."""
import ast
import pathlib

import pytest

import tilewright.language as T
from tilewright import TilewrightError
from tilewright._C import ascend, ir
from tilewright.frontend import core, explicit

PKG = pathlib.Path(T.__file__).resolve().parent


def test_every_math_function_is_a_marker_with_its_docstring():
    names = [n for n, _, _ in ir.MATH_FUNCTIONS]
    assert {"exp", "sigmoid", "pow", "abs"} <= set(names)
    for name, arity, doc in ir.MATH_FUNCTIONS:
        fn = getattr(T, name)
        assert fn.__tw_marker__ == f"T.{name}"
        assert fn.__doc__ == doc and doc
        assert name in T.__all__
        assert arity == {"pow": 2, "fma": 3}.get(name, 1)
        assert getattr(core.Parser, f"call_{name}")
        with pytest.raises(TilewrightError, match=f"T.{name} can only be used inside a kernel"):
            fn(1.0)


def test_dtypes_and_operator_maps_come_from_the_lists():
    assert ir.DTYPES == ("float16", "bfloat16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool")
    for d in ir.DTYPES:
        assert getattr(T, d) == d and isinstance(getattr(T, d), T.DType) and d in T.__all__
    assert core._BINOPS[ast.Add][0] == "add" and core._BINOPS[ast.FloorDiv][0] == "floordiv"
    assert core._BINOPS[ast.Div][1](7, 2) == 3.5
    assert core._CMPOPS[ast.LtE][0] == "le" and core._CMPOPS[ast.NotEq][1](1, 2) is True
    assert {name for name, *_ in ir.BINARY_OPS} == {
        "add", "sub", "mul", "div", "floordiv", "ceildiv", "mod", "min", "max",
        "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "bitand", "bitor", "bitxor", "shl", "shr"}
    assert core._BINOPS[ast.LShift][0] == "shl" and core._BINOPS[ast.BitXor][1](6, 3) == 5
    assert ir.UNARY_OPS == ("neg", "not", "bitnot")
    # every IR operator with a Python operator is in one of the maps
    mapped = {v[0] for v in core._BINOPS.values()} | {v[0] for v in core._CMPOPS.values()}
    assert mapped == {name for name, _, _, py_op in ir.BINARY_OPS if py_op}
    assert ir.REDUCE_KINDS == ("sum", "max", "min")
    assert ir.FOR_KINDS == ("serial", "parallel", "pipelined", "unroll")


def test_expert_tile_math_ops_are_the_vector_instructions():
    # target/ascend/math_fns.h: the math functions the Vector unit computes in one instruction
    assert ascend.VECTOR_MATH_FUNCTIONS == ("exp", "log", "sqrt", "rsqrt", "abs")
    assert explicit._MATH_UNARY == ascend.VECTOR_MATH_FUNCTIONS


def _imports(path):
    """Every module a file imports, at module level or inside functions, as written."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = "." * node.level + (node.module or "")
            out.add(mod)
            out |= {mod + a.name if mod.endswith(".") else f"{mod}.{a.name}" for a in node.names}
    return out


def test_language_and_frontend_do_not_import_each_other():
    lang = _imports(PKG / "language.py")
    assert not any("frontend" in m for m in lang), lang
    for f in sorted((PKG / "frontend").glob("*.py")):
        mods = _imports(f)
        assert not any(m.endswith("language") for m in mods), (f.name, mods)
