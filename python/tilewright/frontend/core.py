"""Shared machinery of both front-end styles: scopes and SSA naming, expression translation,
and the control-flow statements (assignments, for, if). Style-specific statements (tile ops)
are provided by subclasses through ``stmt_markers`` / ``value_markers`` tables.

Values the walker handles:
  * Python values from the enclosing scope or folded at parse time (int, float, bool, str, tuples,
    ``SymbolicDim``, modules and functions) -- compile-time constants;
  * IR expressions (``ir.Expr``) and buffers (``ir.Buffer``);
  * :class:`Operand`: a subscripted buffer whose meaning (element load or region) depends on
    where it is used.
"""
from __future__ import annotations

import ast
import math
import operator

from .. import dsl as _dsl
from ..errors import TilewrightError
from .source import Source

try:
    from .._C import ir
except ImportError as e:  # pragma: no cover - only when the extension is not built
    raise ImportError(f"tilewright's C++ extension (tilewright._C) is not built: {e}") from e


Expr = ir.Expr
Buffer = ir.Buffer

# The AST operator maps and the math functions, from the IR's lists (TW_BINOPS, TW_MATH_FNS in
# ir.h): ast class -> (IR operator name, the Python function that folds constants).
_BINOPS, _CMPOPS = {}, {}
for _name, _symbol, _py_ast, _py_op in ir.BINARY_OPS:
    if _py_op:  # arithmetic and comparisons (and/or are BoolOps, handled on their own)
        _cls = getattr(ast, _py_ast)
        (_CMPOPS if issubclass(_cls, ast.cmpop) else _BINOPS)[_cls] = (_name, getattr(operator, _py_op))
_MATH = tuple(_name for _name, _arity, _doc in ir.MATH_FUNCTIONS)
_MATH_ARITY = {_name: _arity for _name, _arity, _doc in ir.MATH_FUNCTIONS}
# Functions people reach for that the language does not have (port38 F2): the hint of the error at a use, the
# function written with the language's (every formula runs on both targets: test_port38_s38), or what to do instead.
_TRIG = ("the language has T.sin and T.cos but no inverse trigonometric functions (neither target implements them): "
         "compute the values on the host and pass them in as a tensor")
_MISSING_MATH = {
    **{f: _TRIG for f in ("asin", "acos", "atan", "atan2")},
    "tan": "write T.tan(x) as T.sin(x) / T.cos(x)",
    **{f: f"write T.{f}(x) as {v}" for f, v in (
        ("sinh", "(T.exp(x) - T.exp(-x)) * 0.5"), ("cosh", "(T.exp(x) + T.exp(-x)) * 0.5"),
        ("log1p", "T.log(1.0 + x) (absolute error ~1e-7 near 0)"), ("expm1", "T.exp(x) - 1.0"),
        ("log10", "T.log2(x) * 0.3010299956639812"), ("erfc", "1.0 - T.erf(x)"),
        ("softplus", "T.max(x, 0.0) + T.log(1.0 + T.exp(-T.abs(x)))"),
        ("sign", "T.where(x > 0, 1.0, T.where(x < 0, -1.0, 0.0))"), ("trunc", "T.where(x >= 0, T.floor(x), T.ceil(x))"),
        ("round", "T.floor(x + 0.5) (half up), or half to even for float32 |x| < 2^22: (x + 12582912.0) - 12582912.0"),
        ("isnan", "x != x"), ("isinf", "T.abs(x) == T.infinity(\"float32\")"))},
    "clamp": "write T.clamp(x, lo, hi) as T.min(T.max(x, lo), hi)",
    "fmod": "x % y is Python's modulo (the divisor's sign); C's fmod(x, y) is T.where(r != 0 and (r < 0) != (x < 0), "
            "r - y, r) with r = x % y",
}

_STMT_NAMES = {
    ast.While: "while", ast.Break: "break", ast.Continue: "continue", ast.FunctionDef: "def",
    ast.AsyncFunctionDef: "async def", ast.ClassDef: "class", ast.Try: "try", ast.Raise: "raise",
    ast.Import: "import", ast.ImportFrom: "import", ast.Global: "global", ast.Nonlocal: "nonlocal",
    ast.Delete: "del", ast.Assert: "assert", ast.AsyncFor: "async for", ast.AsyncWith: "async with",
}
if hasattr(ast, "Match"):  # Python >= 3.10
    _STMT_NAMES[ast.Match] = "match"


def _is_const(v):
    """A Python compile-time value usable in arithmetic."""
    return isinstance(v, (int, float, bool))


def _is_py_value(v):
    """A Python compile-time value that can be compared: numbers, strings (e.g. a dtype or a mode
    name passed to a @tw.jit function) and None."""
    return _is_const(v) or v is None or isinstance(v, str)


def _marker_name(v):
    return getattr(v, "__tw_marker__", None)


class Operand:
    """``buf[items]`` before we know whether it is an element access or a region.
    items: list of ("point", value, node) or ("slice", start, stop, node)."""

    def __init__(self, buffer, items, node):
        self.buffer = buffer
        self.items = items
        self.node = node

    @property
    def is_point(self):
        return all(it[0] == "point" for it in self.items)


class Binding:
    __slots__ = ("value", "kind", "node")

    def __init__(self, value, kind, node):
        self.value = value   # Python value, ir.Expr/Var, ir.Buffer
        self.kind = kind     # "const" "let" "loop" "block" "buffer" "param" "shape"
        self.node = node


class Parser:
    """Walks one kernel function. Subclasses fill ``stmt_markers`` (marker name -> handler(call))
    and ``value_markers`` (marker name -> handler(call, target_name_node))."""

    style = ""  # "T.prim_func" or "tile loops", for messages

    def __init__(self, fn, defining_locals=None):
        self.src = Source(fn, defining_locals)
        self.fn = self.src.fn  # past decorators that keep __wrapped__
        self.scopes = [{}]           # innermost last: name -> Binding
        self.dead = {}               # names assigned in closed inner blocks -> node
        self.let_values = {}         # IR name of a let variable -> its value (run-time extents' bounds)
        self.used_names = set()      # IR names already taken (vars and buffers)
        self.shape_vars = {}         # symbolic dim name -> ir.Var
        self.blocks = []             # stack of statement lists being built
        self.loop_depth = 0
        self.parallel_depth = 0  # T.Parallel loops around the statement being parsed
        self.stmt_markers = {}
        self.value_markers = {}
        self.update_markers = {}     # marker name -> hint (markers only valid as `x += marker(...)`)

    # ------------------------------------------------------------------------------------------
    # Errors, spans, names

    def span(self, node):
        return self.src.span(node)

    def error(self, node, message, hint=""):
        self.src.error(node, message, hint)

    def fresh(self, base):
        """A unique IR name derived from a Python name (shadowed names get _1, _2, ...)."""
        if base not in self.used_names:
            self.used_names.add(base)
            return base
        i = 1
        while f"{base}_{i}" in self.used_names:
            i += 1
        name = f"{base}_{i}"
        self.used_names.add(name)
        return name

    def emit(self, stmt):
        self.blocks[-1].append(stmt)

    # ------------------------------------------------------------------------------------------
    # Scopes

    def push_scope(self):
        self.scopes.append({})

    def pop_scope(self):
        closed = self.scopes.pop()
        for name, b in closed.items():
            if not any(name in s for s in self.scopes):
                self.dead[name] = b.node

    def lookup_local(self, name):
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return None

    def bind(self, name, value, kind, node):
        self.scopes[-1][name] = Binding(value, kind, node)
        self.dead.pop(name, None)

    def check_assignable(self, name, node):
        """Python names are immutable values in a kernel: re-binding creates a new SSA value in
        the same block; re-binding a name of an enclosing block (a loop-carried or branch-carried
        value) cannot be expressed and is an error."""
        b = self.lookup_local(name)
        if b is None:
            return
        if b.kind in ("loop", "block"):
            what = "loop variable" if b.kind == "loop" else "block index"
            self.error(node, f"cannot assign to {what} '{name}'",
                       "loop variables and block indices are read-only; use a new name")
        if b.kind in ("param", "shape"):
            self.error(node, f"cannot assign to kernel parameter '{name}'",
                       "to write a tensor parameter, store into its elements (A[i, j] = ...) or T.copy into it")
        if name not in self.scopes[-1]:
            self.error(node, f"cannot re-assign '{name}' here: it was defined outside this loop/if block",
                       "scalars in a kernel are immutable values, not variables; to carry a value across "
                       "iterations or out of a branch, keep it in a buffer, e.g. acc = T.alloc_fragment((1,), "
                       "dtype) and acc[0] += ...")

    def lookup(self, name, node):
        b = self.lookup_local(name)
        if b is not None:
            return b.value
        if name in self.dead:
            self.error(node, f"'{name}' is not visible here: it was assigned inside a loop or if block that has ended",
                       "define it before the block, or keep the value in a buffer")
        found, value = self.src.lookup_python(name)
        if not found:
            self.error(node, f"name '{name}' is not defined",
                       "a postponed annotation (from __future__ import annotations) sees the module's globals, the "
                       "names the body uses and the locals of the function that defines the kernel; a tile-loops "
                       "function that a @tw.jit factory returns is parsed after the factory returned, so of its "
                       "locals only its parameters: write the annotation with those (tw.Tensor((N, 8), dtype))"
                       if self.src.in_annotations else "")
        return value

    # ------------------------------------------------------------------------------------------
    # Conversions

    def dtype_of(self, value, node, what="dtype"):
        value = _dsl.dtype_name(value) or value  # numpy / torch dtypes by their name (api35 F1)
        if not isinstance(value, str):
            self.error(node, f"{what} must be a dtype name such as 'float16' or T.float16, got {value!r}")
        canon = ir.canonical_dtype(value)
        if canon is None:
            self.error(node, f"unknown dtype '{value}'",
                       "use one of float16, bfloat16, float32, float64, int8, int32, int64, uint8, bool")
        return canon

    def int_imm(self, value, dtype, node):
        """An integer literal from a Python int: an error at `node` when it does not fit int64."""
        if not -(1 << 63) <= value < (1 << 63):
            self.error(node, f"integer {_num_text(value)} does not fit in 64 bits",
                       "kernel integers are int32/int64; use a float for larger magnitudes")
        return ir.int_imm(value, dtype, self.span(node))

    def shape_var(self, name, node):
        v = self.shape_vars.get(name)
        if v is None:
            v = ir.var(self.fresh(name), "int32", self.span(node))
            self.shape_vars[name] = v
        return v

    def to_ir(self, value, node):
        """A value as an IR expression (Python numbers become literals)."""
        if isinstance(value, Expr):
            return value
        sp = self.span(node)
        if isinstance(value, bool):
            return ir.int_imm(int(value), "bool", sp)
        if isinstance(value, int):
            return self.int_imm(value, "int32", node)
        if isinstance(value, float):
            return ir.float_imm(value, "float32", sp)
        if isinstance(value, _dsl.SymbolicDim):
            if value.name not in self.shape_vars:
                self.error(node, f"symbolic dimension '{value.name}' is not a dimension of any tensor parameter",
                           "use it in a parameter's shape, e.g. A: T.Tensor((M, K), dtype)")
            return self.shape_vars[value.name]
        if isinstance(value, str) and value in self.shape_vars:  # a dimension named by a string
            return self.shape_vars[value]
        if isinstance(value, Operand):
            return self.load_operand(value)
        if isinstance(value, Buffer):
            self.error(node, f"buffer '{value.name}' used as a scalar value",
                       f"index it, e.g. {value.name}[i, j], or pass it to a tile op")
        self.error(node, f"{self.describe(value)} cannot be used as a kernel value")

    def describe(self, v):
        if _marker_name(v):
            return f"'{_marker_name(v)}'"
        if isinstance(v, type(ast)):
            return f"module '{v.__name__}'"
        if callable(v):
            return f"Python function '{getattr(v, '__name__', v)}'"
        return f"Python value {v!r} ({type(v).__name__})"

    def index_expr(self, value, node):
        e = self.to_ir(value, node)
        if e.dtype not in ("int32", "int64", "int8", "uint8"):
            self.error(node, f"an index must be an integer, got {e.dtype}", "use T.cast(x, 'int32') or //")
        return e

    def const_int(self, value, node, what):
        """A compile-time integer (Python int or a constant IR expression)."""
        if isinstance(value, bool):
            self.error(node, f"{what} must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, Expr):
            c = ir.as_const_int(value)
            if c is not None:
                return c
            self.error(node, f"{what} must be a compile-time constant, got the kernel value '{value!r}'",
                       "tile sizes are Python ints from the enclosing scope (e.g. arguments of the @tw.jit function)")
        if isinstance(value, _dsl.SymbolicDim):
            self.error(node, f"{what} must be a compile-time constant, but '{value.name}' is symbolic",
                       "tile sizes cannot be symbolic; use a Python int (e.g. a block size)")
        self.error(node, f"{what} must be an integer, got {self.describe(value)}")

    def const_shape(self, node, what):
        """A tuple of compile-time ints from a shape expression (a tuple/list, or one int)."""
        value = self.expr(node)
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else None
        if not isinstance(value, (tuple, list)):
            value, elts = (value,), [node]
        if len(value) == 0:
            self.error(node, f"{what} must have at least one dimension")
        out = []
        for i, v in enumerate(value):
            n = elts[i] if elts and i < len(elts) else node
            c = self.const_int(v, n, f"dimension {i} of {what}")
            if c <= 0:
                self.error(n, f"dimension {i} of {what} must be positive, got {_num_text(c)}")
            if c >= 1 << 63:
                self.error(n, f"dimension {i} of {what} does not fit in 64 bits (it has {c.bit_length()} bits)",
                           "check how the shape is computed")
            out.append(c)
        return tuple(out)

    def const_value(self, node, what):
        v = self.expr(node)
        if isinstance(v, Expr):
            c = ir.as_const_int(v)
            if c is None:
                self.error(node, f"{what} must be a compile-time constant")
            return c
        return v

    # ------------------------------------------------------------------------------------------
    # Expressions

    def expr(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.error(node, f"unsupported expression ({type(node).__name__}) in a kernel",
                       "kernels use arithmetic, comparisons, calls to T.* functions and buffer indexing")
        return method(node)

    def value(self, node):
        """An expression used as a scalar: Operands become loads."""
        v = self.expr(node)
        if isinstance(v, Operand):
            return self.load_operand(v)
        return v

    def expr_Constant(self, node):
        if isinstance(node.value, (int, float, bool, str)) or node.value is None:
            return node.value
        self.error(node, f"unsupported constant {node.value!r}")

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.value(e) if not isinstance(e, ast.Starred) else self.error(e, "'*' unpacking is not supported")
                     for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        if isinstance(base, Buffer):
            if node.attr == "shape":
                return tuple(ir.as_const_int(d) if ir.as_const_int(d) is not None else d for d in base.shape)
            if node.attr == "dtype":
                return base.dtype
            if node.attr == "ndim":
                return base.ndim
            self.error(node, f"buffers have no attribute '{node.attr}' in a kernel (shape, dtype, ndim)")
        if isinstance(base, (Expr, Operand)):
            self.error(node, f"kernel values have no attribute '{node.attr}'")
        if not hasattr(base, node.attr):
            module = getattr(base, "__name__", "")
            if module in ("tilewright.language", "tilewright"):
                prefix = "T" if module == "tilewright.language" else "tw"
                self.error(node, f"unknown function {prefix}.{node.attr}",
                           (_MISSING_MATH.get(node.attr) if prefix == "T" else None)
                           or f"see the {module} module for the DSL vocabulary")
            self.error(node, f"{self.describe(base)} has no attribute '{node.attr}'")
        return getattr(base, node.attr)

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, Buffer):
            return self.operand(base, node)
        if isinstance(base, (tuple, list, dict, str)):
            idx = self.expr(node.slice)
            if isinstance(idx, (Expr, Operand)):
                self.error(node.slice, "a Python tuple can only be indexed with a compile-time constant")
            try:
                return base[idx]
            except (IndexError, KeyError, TypeError) as e:
                self.error(node, f"cannot index {base!r} with {idx!r}: {e}")
        if isinstance(base, Operand):  # A[i][0]: its repr was '<...core.Operand object at 0x...>' (robust38)
            self.error(node, f"an element of '{base.buffer.name}' cannot be indexed again",
                       f"index every dimension in one subscript: {base.buffer.name}[i, j]")
        if isinstance(base, Expr):
            self.error(node, "a scalar value cannot be indexed")
        self.error(node, f"{self.describe(base)} cannot be indexed",
                   "a Python value is read at compile time; pass an array the kernel reads as a tensor parameter")

    def expr_Slice(self, node):
        self.error(node, "a slice is only allowed in a buffer subscript")

    def operand(self, buf, node):
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice):
                if e.step is not None:
                    step = self.const_value(e.step, "a slice step")
                    if step != 1:
                        self.error(e.step, "slices with a step are not supported")
                start = self.value(e.lower) if e.lower is not None else None
                stop = self.value(e.upper) if e.upper is not None else None
                items.append(("slice", start, stop, e))
            else:
                items.append(("point", self.value(e), e))
        if len(items) != buf.ndim:
            self.error(node, f"buffer '{buf.name}' has {buf.ndim} dimension(s) but is indexed with {len(items)}")
        return Operand(buf, items, node)

    def load_operand(self, op):
        if not op.is_point:
            self.error(op.node, f"a slice of '{op.buffer.name}' is a region, not a value",
                       "slices are operands of T.copy / T.gemm / T.fill; index single elements with A[i, j]")
        idx = [self.index_expr(v, n) for _, v, n in op.items]
        return ir.load(op.buffer, idx, self.span(op.node))

    def full_region(self, buf, node):
        """The whole of ``buf`` as a region (its zero starts carry the span of ``node``)."""
        sp = self.span(node)
        return ir.Region(buf, [ir.int_imm(0, "int32", sp) for _ in range(buf.ndim)], list(buf.shape))

    def region(self, v, node, other_extents=None, what="operand"):
        """An ir.Region from a buffer, an explicit slice, or a tile origin (extents from the other side)."""
        sp = self.span(node)
        if isinstance(v, Buffer):
            return self.full_region(v, node)
        if not isinstance(v, Operand):
            self.error(node, f"{what} must be a buffer or a buffer slice, got {self.describe(v) if not isinstance(v, Expr) else 'a scalar value'}")
        buf = v.buffer
        starts, extents = [], []
        if v.is_point:
            if other_extents is None:
                self.error(node, f"cannot tell the extent of '{buf.name}[...]' here",
                           f"write explicit slices, e.g. {buf.name}[i:i + n, j:j + m]")
            ext = list(other_extents)
            while len(ext) > buf.ndim and ir.as_const_int(ext[0]) == 1:
                ext.pop(0)
            if len(ext) > buf.ndim:
                self.error(node, f"'{buf.name}' has {buf.ndim} dimension(s) but the other operand has {len(ext)}")
            ext = [ir.int_imm(1, "int32", sp)] * (buf.ndim - len(ext)) + ext
            for (_, val, n), e in zip(v.items, ext):
                starts.append(self.index_expr(val, n))
                extents.append(e)
            return ir.Region(buf, starts, extents)
        for i, it in enumerate(v.items):
            if it[0] == "point":
                starts.append(self.index_expr(it[1], it[2]))
                extents.append(ir.int_imm(1, "int32", sp))
                continue
            _, start, stop, n = it
            start_v = 0 if start is None else start
            stop_v = buf.shape[i] if stop is None else stop
            if isinstance(stop_v, Expr) and ir.as_const_int(stop_v) is not None:
                stop_v = ir.as_const_int(stop_v)
            starts.append(self.index_expr(start_v, n))
            extents.append(self.index_expr(self.difference(stop_v, start_v, n), n))
        return ir.Region(buf, starts, extents)

    # Arithmetic with Python folding ------------------------------------------------------------

    def difference(self, stop, start, node):
        """stop - start, as a Python int when the two differ by a constant (A[i*b:(i+1)*b]), as the
        addends of stop that start lacks when start's are among them (A[r0:r0 + rows] -> rows)."""
        fa, fb = _affine(stop), _affine(start)
        if fa is not None and fb is not None:
            terms = dict(fa[0])
            for k, c in fb[0].items():
                terms[k] = terms.get(k, 0) - c
            if all(c == 0 for c in terms.values()):
                return fa[1] - fb[1]
        rest = _addends(stop)
        for a in _addends(start):
            key = _addend_key(a)
            hit = next((i for i, r in enumerate(rest) if _addend_key(r) == key), None)
            if hit is None:
                return self.arith("sub", stop, start, node)
            rest.pop(hit)
        out = 0
        for r in rest:
            out = self.arith("add", out, r, node)
        return out

    def extent_bound(self, e):
        """A constant upper bound of a run-time extent (docs/language.md "Run-time extents"), through
        T.min / T.max, + and the lets it reads; None when there is none."""
        if isinstance(e, int) and not isinstance(e, bool):
            return e
        if not isinstance(e, Expr):
            return None
        c = ir.as_const_int(e)
        if c is not None:
            return c
        if e.kind == "Var":
            v = self.let_values.get(e.name)
            return None if v is None else self.extent_bound(v)
        if e.kind == "Cast" and e.dtype in ("int32", "int64"):
            return self.extent_bound(e.value)
        if e.kind == "Binary" and e.op in ("min", "max", "add"):
            a, b = self.extent_bound(e.a), self.extent_bound(e.b)
            if e.op == "min":
                return b if a is None else a if b is None else min(a, b)
            if a is not None and b is not None:
                return max(a, b) if e.op == "max" else a + b
        return None

    def runtime_extents(self, s, d, nodes, op):
        """T.copy's regions with run-time extents made explicit (ir.h, RuntimeExtent): on a tensor's
        side min(C, e) with C the extent's constant bound; a tile's side takes the bound itself
        (its window has constant extents; the rows past e are the tail)."""
        regions, rt = [s, d], [False, False]
        for k, r in enumerate(regions):
            ext = list(r.extents)
            for i, e in enumerate(ext):
                if ir.as_const_int(e) is not None:
                    continue
                c = self.extent_bound(e)
                sp = self.span(nodes[k])
                if c is None:
                    self.error(nodes[k], f"{op}: the extent {ir.print_expr(e)} of '{r.buffer.name}' in dimension {i} "
                                         "is neither a constant nor bounded by one",
                               "bound a run-time extent by the tile's size: rows = T.min(block_M, n - r0), then "
                               "X[r0:r0 + rows, :] (docs/language.md \"Run-time extents\")")
                if c < 1:
                    self.error(nodes[k], f"{op}: the run-time extent {ir.print_expr(e)} of '{r.buffer.name}' is "
                                         f"bounded by {c}: it never copies anything",
                               "bound it by the tile's size, e.g. T.min(block_M, n - r0)")
                rt[k] = True
                if r.buffer.scope != "global":
                    ext[i] = ir.int_imm(c, "int32", sp)
                elif not (e.kind == "Binary" and e.op == "min" and c in (ir.as_const_int(e.a), ir.as_const_int(e.b))):
                    ext[i] = ir.binary("min", ir.int_imm(c, e.dtype, sp), e, sp)
            regions[k] = ir.Region(r.buffer, list(r.starts), ext)
        for k in (0, 1):
            other = regions[1 - k]
            if rt[k] and regions[k].buffer.scope != "global" and not rt[1 - k] and other.buffer.scope == "global":
                self.error(nodes[k], f"{op}: the run-time extent of tile '{regions[k].buffer.name}' has no "
                                     f"counterpart on tensor '{other.buffer.name}'",
                           "write the run-time extent on the tensor's slice too: T.copy(o[0:rows, :], "
                           "Out[r0:r0 + rows, :]) (docs/language.md \"Run-time extents\")")
            if rt[k] and regions[k].buffer.scope != "global" and other.buffer.scope != "global":
                self.error(nodes[k], f"{op}: a run-time extent needs a tensor on one side; "
                                     f"'{regions[0].buffer.name}' and '{regions[1].buffer.name}' are tiles",
                           "copy the whole tiles (or constant slices) and mask the rows with T.where")
        for k in (0, 1):
            r, other = regions[k], regions[1 - k]
            if r.buffer.scope != "global" or other.buffer.scope == "global":
                continue
            tile_max = max([ir.as_const_int(x) for x in other.extents] + [1])
            for e in r.extents:
                c = ir.extent_bound(e) if ir.as_const_int(e) is None else None
                if c is not None and c > tile_max:
                    self.error(nodes[k], f"{op}: the run-time extent {ir.print_expr(e)} of '{r.buffer.name}' can "
                                         f"reach {c}, more than the tile window of '{other.buffer.name}' holds",
                               f"bound it by the tile's size: T.min({tile_max}, ...)")
        return regions

    def arith(self, op, a, b, node):
        pyop = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
                "floordiv": operator.floordiv, "mod": operator.mod, "min": min, "max": max,
                "ceildiv": lambda x, y: -(-x // y), "bitand": operator.and_, "bitor": operator.or_,
                "bitxor": operator.xor, "shl": operator.lshift, "shr": operator.rshift}.get(op)
        if pyop is not None and _is_const(a) and _is_const(b):
            if op == "shl" and _int_const(b) is not None and _int_const(b) > 64:
                self.error(node, f"the constant {a} << {b} does not fit in 64 bits",
                           "integer constants in kernels are 64-bit")
            try:
                return pyop(a, b)
            except ZeroDivisionError:
                self.error(node, "division by zero")
            except (TypeError, ValueError) as e:  # a float operand of a bitwise operator, a negative count
                self.error(node, f"cannot compute the constant: {e}")
        if op == "div":  # true division: an int literal becomes a float literal (i / 2 -> i / 2.0)
            a = float(a) if _int_const(a) is not None else a
            b = float(b) if _int_const(b) is not None else b
        # Integer identities keep index arithmetic readable (x + 0, x * 1, x // 1).
        ia, ib = _int_const(a), _int_const(b)
        if (op == "add" and ia == 0) or (op == "mul" and ia == 1):
            return b
        if (op in ("add", "sub") and ib == 0) or (op in ("mul", "floordiv", "ceildiv") and ib == 1):
            return a
        return ir.binary(op, self.to_ir(a, node), self.to_ir(b, node), self.span(node))

    def const_pow(self, a, b, node):
        """a ** b of two compile-time numbers: an int result must fit in 64 bits (checked before
        computing it: 10 ** 10 ** 9 would run for minutes), a float one must be finite and real."""
        ia, ib = _int_const(a), _int_const(b)
        text = f"({_num_text(a)}) ** {_num_text(b)}" if a < 0 else f"{_num_text(a)} ** {_num_text(b)}"
        if ia is not None and ib is not None and ib > 0 and abs(ia) > 1 and (abs(ia).bit_length() - 1) * ib > 64:
            self.error(node, f"the constant {text} does not fit in 64 bits",
                       "integer constants in kernels are 64-bit; use a float (e.g. 10.0 ** 20)")
        try:
            v = a ** b
        except (OverflowError, ZeroDivisionError) as e:
            self.error(node, f"the constant {text} cannot be computed ({e})")
        if isinstance(v, complex) or (isinstance(v, float) and not math.isfinite(v)):
            self.error(node, f"the constant {text} is not a finite real number")
        return v

    def expr_BinOp(self, node):
        a, b = self.value(node.left), self.value(node.right)
        t = type(node.op)
        if t in (ast.BitAnd, ast.BitOr, ast.BitXor) and not (_is_const(a) and _is_const(b)):
            ea, eb = self.to_ir(a, node.left), self.to_ir(b, node.right)
            if ea.dtype == "bool" and eb.dtype == "bool":  # logic on bools: and / or / !=
                name = {ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "ne"}[t]
                return ir.binary(name, ea, eb, self.span(node))
        if t in _BINOPS:
            return self.arith(_BINOPS[t][0], a, b, node)
        if t is ast.Pow:
            if _is_const(a) and _is_const(b):
                return self.const_pow(a, b, node)
            return ir.call("pow", [self.to_ir(a, node.left), self.to_ir(b, node.right)], self.span(node))
        self.error(node, f"unsupported operator '{_op_symbol(node.op)}' in a kernel")

    def expr_UnaryOp(self, node):
        a = self.value(node.operand)
        t = type(node.op)
        if _is_const(a):
            if t is ast.Invert and isinstance(a, float):  # Python's TypeError leaked (h-rel17 F2)
                self.error(node, f"'~' of the float constant {a}", "'~' inverts the bits of an integer")
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[t](a)
        e = self.to_ir(a, node.operand)
        if t is ast.UAdd:
            return e
        if t is ast.USub:
            if e.kind == "FloatImm":
                return ir.float_imm(-e.value, e.dtype, self.span(node))
            if e.kind == "IntImm":
                return self.int_imm(-e.value, e.dtype, node)
            return ir.unary("neg", e, self.span(node))
        if t is ast.Not or (t is ast.Invert and e.dtype == "bool"):
            return ir.unary("not", e, self.span(node))
        return ir.unary("bitnot", e, self.span(node))  # ~ on an integer (a float is an error there)

    def expr_BoolOp(self, node):
        vals = [self.value(v) for v in node.values]
        if all(_is_const(v) for v in vals):
            r = vals[0]
            for v in vals[1:]:
                r = (r and v) if isinstance(node.op, ast.And) else (r or v)
            return r
        op = "and" if isinstance(node.op, ast.And) else "or"
        out = self.to_ir(vals[0], node.values[0])
        for v, n in zip(vals[1:], node.values[1:]):
            out = ir.binary(op, out, self.to_ir(v, n), self.span(node))
        return out

    def expr_Compare(self, node):
        left = self.value(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.value(comp)
            if isinstance(op, (ast.Is, ast.IsNot)):  # `window is not None` on a @tw.jit argument
                if not (_is_py_value(left) and _is_py_value(right)):
                    self.error(node, f"'{_op_symbol(op)}' compares Python values only (e.g. a @tw.jit argument "
                                     "with None), not kernel values", "use == or != on kernel values")
                r = (left is right) == isinstance(op, ast.Is)
            elif isinstance(op, (ast.In, ast.NotIn)):  # `form in ("a", "b")` on a @tw.jit argument (port37 F2)
                if not (_is_py_value(left) and isinstance(right, tuple) and all(_is_py_value(v) for v in right)):
                    self.error(node, f"'{_op_symbol(op)}' tests a Python value against a tuple or list of Python "
                                     "values only (e.g. a @tw.jit argument), not kernel values",
                               "compare kernel values with == and combine them with or: x == a or x == b")
                r = (left in right) == isinstance(op, ast.In)
            elif type(op) not in _CMPOPS:
                self.error(node, f"unsupported comparison '{_op_symbol(op)}' in a kernel")
            elif _is_py_value(left) and _is_py_value(right):
                r = _CMPOPS[type(op)][1](left, right)
            else:
                r = ir.binary(_CMPOPS[type(op)][0], self.to_ir(left, node.left), self.to_ir(right, comp), self.span(node))
            if result is None:
                result = r
            elif _is_const(result) and _is_const(r):
                result = result and r
            else:
                result = ir.binary("and", self.to_ir(result, node), self.to_ir(r, node), self.span(node))
            left = right
        return result

    def expr_IfExp(self, node):
        c = self.value(node.test)
        if _is_const(c):
            return self.value(node.body) if c else self.value(node.orelse)
        return ir.select(self.to_ir(c, node.test), self.to_ir(self.value(node.body), node.body),
                         self.to_ir(self.value(node.orelse), node.orelse), self.span(node))

    # Calls -------------------------------------------------------------------------------------

    def call_args(self, node, name, params, defaults=None):
        """Bind a call's arguments to ``params`` (required, in order) and ``defaults`` (optional,
        by keyword or position). Returns name -> AST node (or the default Python value)."""
        defaults = dict(defaults or {})
        names = list(params) + list(defaults)
        out = {}
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.error(a, f"'*' arguments are not supported in {name}()")
        if len(node.args) > len(names):
            self.error(node, f"{name}() takes at most {len(names)} argument(s) ({', '.join(names)}), "
                             f"got {len(node.args)}")
        for pname, a in zip(names, node.args):
            out[pname] = a
        for kw in node.keywords:
            if kw.arg is None:
                self.error(kw, f"'**' arguments are not supported in {name}()")
            if kw.arg not in names:
                self.error(kw, f"{name}() got an unexpected keyword argument '{kw.arg}'",
                           f"its arguments are: {', '.join(names)}")
            if kw.arg in out:
                self.error(kw, f"{name}() got multiple values for argument '{kw.arg}'")
            out[kw.arg] = kw.value
        missing = [p for p in params if p not in out]
        if missing:
            self.error(node, f"{name}() missing required argument(s): {', '.join(missing)} "
                             f"(takes {', '.join(names)})")
        for k, v in defaults.items():
            out.setdefault(k, v)
        return out

    def arg(self, x):
        """Evaluate a bound argument (an AST node) or pass a default through."""
        return self.value(x) if isinstance(x, ast.AST) else x

    def expr_Call(self, node):
        fn = self.expr(node.func)
        m = _marker_name(fn)
        if m is not None:
            handler = getattr(self, "call_" + m.split(".", 1)[1], None) if m.startswith("T.") else None
            if handler is not None and m.split(".", 1)[1] in _EXPR_MARKERS:
                return handler(node)
            if m in self.value_markers or m in self.stmt_markers or m in self.update_markers:
                self.error(node, f"{m} cannot be used inside an expression",
                           self.update_markers.get(m, "use it as a statement (or as the right side of a plain "
                                                          "assignment, for allocations)"))
            self.error(node, f"{m} is not part of the {self.style} style")
        if isinstance(fn, _dsl.DType):  # T.float32(x): a cast
            a = self.call_args(node, f"T.{fn}", ["x"])
            return self.convert(self.to_ir(self.arg(a["x"]), node), str(fn), self.span(node))
        if any(fn is f for f in (min, max, abs, pow)):
            args = [self.value(a) for a in node.args]
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                self.error(node, f"{fn.__name__}() in a kernel takes positional arguments only")
            if fn is abs and len(args) != 1:
                self.error(node, f"abs() takes 1 argument, got {len(args)}")
            if fn is pow and len(args) != 2:
                self.error(node, f"pow() takes 2 arguments in a kernel, got {len(args)}")
            if fn in (min, max) and len(args) < 2:
                self.error(node, f"{fn.__name__}() takes at least 2 arguments in a kernel")
            if all(_is_const(a) for a in args):
                # pow through const_pow: its range checks (10 ** 10 ** 9 would run for minutes)
                return self.const_pow(args[0], args[1], node) if fn is pow else fn(*args)
            if fn is abs:
                return ir.call("abs", [self.to_ir(args[0], node)], self.span(node))
            if fn is pow:
                return ir.call("pow", [self.to_ir(a, node) for a in args], self.span(node))
            out = args[0]
            for a in args[1:]:
                out = self.arith(fn.__name__, out, a, node)
            return out
        if fn is range:
            self.error(node, "range() can only be used as the iterable of a for loop")
        if isinstance(fn, (Expr, Buffer, Operand)):
            self.error(node, "a kernel value is not callable")
        if not callable(fn):
            self.error(node, f"{self.describe(fn)} is not callable")
        # A Python function applied to compile-time constants is evaluated now (constant folding).
        args = [self.value(a) for a in node.args if not isinstance(a, ast.Starred) or self.error(a, "'*' not supported")]
        kwargs = {kw.arg: self.value(kw.value) for kw in node.keywords
                  if kw.arg is not None or self.error(kw, "'**' not supported")}
        if any(isinstance(v, (Expr, Buffer, Operand)) for v in list(args) + list(kwargs.values())):
            name = getattr(fn, "__name__", "function")
            hint = "use T.cast(x, dtype) to convert kernel values" if fn in (int, float, bool) else \
                "only T.* functions can take kernel values; Python functions run at compile time on constants"
            self.error(node, f"cannot call Python function '{name}' on kernel values", hint)
        try:
            return fn(*args, **kwargs)
        except TilewrightError:
            raise
        except Exception as e:  # noqa: BLE001 - report the user's failing constant expression
            self.error(node, f"evaluating this compile-time expression failed: {type(e).__name__}: {e}")

    # Expression markers (T.*) ------------------------------------------------------------------

    def call_ceildiv(self, node):
        a = self.call_args(node, "T.ceildiv", ["a", "b"])
        return self.arith("ceildiv", self.arg(a["a"]), self.arg(a["b"]), node)

    def _minmax(self, node, op):
        args = [self.value(x) for x in node.args]
        if node.keywords or len(args) < 2:
            self.error(node, f"T.{op}() takes 2 or more positional arguments")
        out = args[0]
        for x in args[1:]:
            out = self.arith(op, out, x, node)
        return out

    def call_min(self, node):
        return self._minmax(node, "min")

    def call_max(self, node):
        return self._minmax(node, "max")

    def _math(self, node, fn):
        params = ["x", "y", "z"][:_MATH_ARITY[fn]]
        a = self.call_args(node, f"T.{fn}", params)
        return ir.call(fn, [self.to_ir(self.arg(a[p]), a[p]) for p in params], self.span(node))

    def call_gelu(self, node):
        # Exact GELU in its erf form, expanded here so every target computes one formula:
        #   gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)))
        a = self.call_args(node, "T.gelu", ["x"])
        x = self.to_ir(self.arg(a["x"]), a["x"])
        sp = self.span(node)
        inner = ir.call("erf", [ir.binary("mul", x, ir.float_imm(1.0 / math.sqrt(2.0), "float32", sp), sp)], sp)
        return ir.binary("mul", ir.binary("mul", ir.float_imm(0.5, "float32", sp), x, sp),
                         ir.binary("add", ir.float_imm(1.0, "float32", sp), inner, sp), sp)

    def call_where(self, node, name="T.where"):
        a = self.call_args(node, name, ["cond", "a", "b"])
        c = self.arg(a["cond"])
        if _is_const(c):
            return self.arg(a["a"]) if c else self.arg(a["b"])
        return ir.select(self.to_ir(c, a["cond"]), self.to_ir(self.arg(a["a"]), a["a"]),
                         self.to_ir(self.arg(a["b"]), a["b"]), self.span(node))

    def call_if_then_else(self, node):
        return self.call_where(node, "T.if_then_else")

    def call_cast(self, node):
        a = self.call_args(node, "T.cast", ["x", "dtype"])
        dt = self.dtype_of(self.arg(a["dtype"]), a["dtype"])
        return self.convert(self.to_ir(self.arg(a["x"]), a["x"]), dt, self.span(node))

    def convert(self, v, dt, span):
        """T.cast / T.float32(x) / `x: dtype = ...`: v converted to dt (docs/language.md "Dtype conversions").
        ir.cast converts arithmetic of dt itself too (it may hold a wider value); a let's name whose value is such
        arithmetic holds that wider value (an int64 / float32 variable on every target): widened first, so the
        conversion to dt is one the IR keeps. So is such a name as a value of a T.where (session 32: the where of
        a float16 let h, `T.cast(T.where(c, h, x), "float16")`, did not round)."""
        return ir.cast(self.widened(v, span)[0], dt, span)

    def widened(self, v, span):
        """(v, False), or (v with a let's name bound to arithmetic, also as a T.where's value, cast to the wider
        dtype it holds (int64 / float32), True)."""
        e = v
        while e.kind == "Var" and e.name in self.let_values:
            e = self.let_values[e.name]
        if e is not v and ir.computed_wider(e):
            return ir.cast(v, "float32" if e.dtype in ("float16", "bfloat16") else "int64", span), True
        if v.kind == "Select":
            (t, wt), (f, wf) = self.widened(v.t, span), self.widened(v.f, span)
            if wt or wf:
                return ir.select(v.cond, t, f, span), True
        return v, False

    def call_infinity(self, node):
        a = self.call_args(node, "T.infinity", ["dtype"])
        dt = self.dtype_of(self.arg(a["dtype"]), a["dtype"])
        if dt not in ("float16", "bfloat16", "float32", "float64"):
            self.error(node, f"T.infinity needs a float dtype, got {dt}")
        return ir.float_imm(math.inf, dt, self.span(node))

    # ------------------------------------------------------------------------------------------
    # Statements

    def body(self, stmts, node, new_scope=True):
        """Translate a statement list into one IR statement: a sequence, which the node the body
        goes into (loop, if, core scope, kernel) keeps as its one statement when it holds only one
        (ir::body_form, the same for IR parsed from text)."""
        if new_scope:
            self.push_scope()
        self.blocks.append([])
        for s in stmts:
            self.stmt(s)
        out = self.blocks.pop()
        if new_scope:
            self.pop_scope()
        return ir.seq(out, self.span(node))

    def stmt(self, node):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            kw = _STMT_NAMES.get(type(node), type(node).__name__)
            hint = {"while": "use a for loop over range(n) / T.serial(n) with a compile-time or symbolic bound",
                    "break": "loops in a kernel always run their full trip count; guard the body with if",
                    "continue": "guard the rest of the loop body with an if"}.get(kw, "")
            self.error(node, f"unsupported statement '{kw}' in a kernel", hint)
        method(node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return  # docstring / comment string
        if isinstance(v, ast.Call):
            fn = self.expr(v.func)
            m = _marker_name(fn)
            if m in self.stmt_markers:
                self.stmt_markers[m](v)
                return
            if m in self.value_markers:
                self.error(v, f"the result of {m}(...) must be assigned to a name", f"e.g. x = {m}(...)")
            if m is not None and m.split(".", 1)[1] not in _EXPR_MARKERS:
                self.error(v, f"{m} is not part of the {self.style} style")
        self.error(node, "this expression statement has no effect",
                   "assign its value to a name, or store it into a buffer element")

    def stmt_Assign(self, node):
        if len(node.targets) != 1:
            self.error(node, "chained assignment (a = b = ...) is not supported")
        self.assign(node.targets[0], node.value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            self.error(node, "a declaration without a value is not supported")
        ann = self.expr(node.annotation)
        dt = self.dtype_of(ann, node.annotation, "the annotation")
        if not isinstance(node.target, ast.Name):
            self.error(node.target, "only a plain name can be annotated")
        v = self.to_ir(self.value(node.value), node.value)
        self.assign_name(node.target, self.convert(v, dt, self.span(node.value)), node)

    def assign(self, target, value_node, node):
        if isinstance(target, ast.Name):
            if isinstance(value_node, ast.Call):
                m = _marker_name(self.expr(value_node.func))
                if m in self.value_markers:
                    self.check_assignable(target.id, target)
                    self.value_markers[m](value_node, target)
                    return
            self.assign_name(target, self.expr(value_node), node)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value_node, (ast.Tuple, ast.List)) or len(value_node.elts) != len(target.elts):
                v = self.expr(value_node)
                if isinstance(v, (tuple, list)) and len(v) == len(target.elts):
                    for t, x in zip(target.elts, v):
                        if not isinstance(t, ast.Name):
                            self.error(t, "only names can be unpacked into")
                        self.assign_name(t, x, node)
                    return
                self.error(node, "tuple assignment needs a tuple of the same length on the right")
            values = [self.expr(v) for v in value_node.elts]  # evaluate all first (a, b = b, a)
            for t, v in zip(target.elts, values):
                if not isinstance(t, ast.Name):
                    self.error(t, "only names can be unpacked into")
                self.assign_name(t, v, node)
            return
        if isinstance(target, ast.Subscript):
            self.store(target, self.value(value_node), node)
            return
        self.error(target, f"cannot assign to this kind of target ({type(target).__name__})")

    def assign_name(self, target, value, node):
        name = target.id
        self.check_assignable(name, target)
        if isinstance(value, Operand):
            value = self.load_operand(value)
        if isinstance(value, Expr):
            v = ir.var(self.fresh(name), value.dtype, self.span(target))
            self.let_values[v.name] = value
            self.emit(ir.let(v, value, self.span(node)))
            self.bind(name, v, "let", target)
        elif isinstance(value, Buffer):
            self.bind(name, value, "buffer", target)
        else:
            self.bind(name, value, "const", target)

    def store(self, target, value, node):
        base = self.expr(target.value)
        if not isinstance(base, Buffer):
            self.error(target, "only buffer elements can be assigned to")
        op = self.operand(base, target)
        if not op.is_point:
            self.error(target, "assigning to a slice is not supported",
                       "use T.fill(buf[a:b, c:d], v) or T.copy(src, buf[a:b, c:d]), or a T.Parallel loop")
        idx = [self.index_expr(v, n) for _, v, n in op.items]
        self.emit(ir.store(base, idx, self.to_ir(value, node.value if hasattr(node, "value") else node),
                           self.span(node)))

    def stmt_AugAssign(self, node):
        t = type(node.op)
        if t not in _BINOPS:
            self.error(node, f"unsupported augmented assignment '{_op_symbol(node.op)}='")
        op = _BINOPS[t][0]
        target = node.target
        if isinstance(target, ast.Name):
            cur = self.lookup(target.id, target)
            if isinstance(cur, Buffer):
                self.aug_assign_buffer(cur, node)
                return
            self.assign_name(target, self.arith(op, cur, self.value(node.value), node), node)
            return
        if isinstance(target, ast.Subscript):
            base = self.expr(target.value)
            if not isinstance(base, Buffer):
                self.error(target, "only buffer elements can be assigned to")
            cur = self.operand(base, target)
            self.store(target, self.arith(op, self.load_operand(cur), self.value(node.value), node), node)
            return
        self.error(target, "unsupported target of an augmented assignment")

    def aug_assign_buffer(self, buf, node):
        self.error(node, f"'{buf.name}' is a whole buffer; '+=' on it is not supported",
                   f"update elements in a loop: for i, j in T.Parallel(...): {buf.name}[i, j] += ...")

    def stmt_If(self, node):
        c = self.value(node.test)
        if _is_const(c) or c is None:
            # A compile-time condition selects a branch now; its names stay visible after it.
            self.blocks.append([])
            for s in (node.body if c else node.orelse):
                self.stmt(s)
            for s in self.blocks.pop():
                self.emit(s)
            return
        cond = self.to_ir(c, node.test)
        if cond.dtype != "bool":
            self.error(node.test, f"an if condition must be bool, got {cond.dtype}", "compare it, e.g. if x != 0:")
        then_s = self.body(node.body, node)
        else_s = self.body(node.orelse, node.orelse[0]) if node.orelse else None
        self.emit(ir.if_(cond, then_s, else_s, self.span(node)))

    # Loops -------------------------------------------------------------------------------------

    def loop_spec(self, node):
        """(kind, [(start, stop, step)], num_stages) from a for-loop iterable."""
        it = node.iter
        if not isinstance(it, ast.Call):
            self.error(it, "a kernel for loop must iterate over range(...) or a T.* loop "
                           "(T.serial, T.Pipelined, T.Parallel, T.unroll)")
        fn = self.expr(it.func)
        m = _marker_name(fn)
        name = "range" if fn is range else m
        kinds = self.loop_kinds()
        if name not in kinds:
            self.error(it, f"cannot loop over {name or self.describe(fn)}(...) in the {self.style} style",
                       f"use one of: {', '.join(kinds)}")
        kind = kinds[name]
        if kind == "parallel":
            if it.keywords:
                self.error(it.keywords[0], f"T.Parallel() got an unexpected keyword argument '{it.keywords[0].arg}'")
            if not it.args:
                self.error(it, "T.Parallel() needs at least one extent")
            return kind, [(0, self.value(a), 1, a) for a in it.args], 0
        stages = 0
        if kind == "pipelined":
            a = self.call_args(it, name, ["start_or_n"], {"stop": None, "num_stages": 2})
            pos = [a["start_or_n"], a["stop"]]
            stages = self.const_int(self.arg(a["num_stages"]), a["num_stages"] if isinstance(a["num_stages"], ast.AST) else it, "num_stages")
            if stages < 1:
                self.error(it, f"num_stages must be at least 1, got {stages}")
            if stages >= 2 ** 31:  # the IR's bound (a few dozen) is the verifier's; this one fits its int
                self.error(it, f"num_stages={stages} is out of range", "2 or 3 stages (double or triple buffering)")
            step = 1
        else:
            a = self.call_args(it, name, ["start_or_n"], {"stop": None, "step": 1})
            pos = [a["start_or_n"], a["stop"]]
            step_node = a["step"] if isinstance(a["step"], ast.AST) else it
            step = self.const_int(self.arg(a["step"]), step_node, "the loop step")
            if step <= 0:
                self.error(step_node, f"the loop step must be a positive constant, got {step}")
        if pos[1] is None:
            start, stop = 0, self.arg(pos[0])
        else:
            start, stop = self.arg(pos[0]), self.arg(pos[1])
        return kind, [(start, stop, step, it)], stages

    def loop_kinds(self):
        return {"range": "serial"}

    def stmt_For(self, node):
        if node.orelse:
            self.error(node.orelse[0], "for ... else is not supported")
        kind, dims, stages = self.loop_spec(node)
        t = node.target
        names = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if len(names) != len(dims):
            self.error(t, f"the loop has {len(dims)} dimension(s) but {len(names)} loop variable(s)")
        for n in names:
            if not isinstance(n, ast.Name):
                self.error(n, "a loop variable must be a plain name")
        self.push_scope()
        loops = []
        for n, (start, stop, step, dnode) in zip(names, dims):
            outer = self.lookup_local(n.id)
            if outer is not None and outer.kind in ("loop", "block"):
                self.error(n, f"loop variable '{n.id}' shadows an enclosing loop variable or block index",
                           "use a different name")
            for v, what in ((start, "start"), (stop, "stop")):
                if not _is_const(v):
                    e = self.to_ir(v, dnode)
                    if e.dtype not in ("int32", "int64", "int8", "uint8"):
                        self.error(dnode, f"the loop {what} must be an integer, got {e.dtype}")
                elif isinstance(v, float):
                    self.error(dnode, f"the loop {what} must be an integer, got {v!r}")
            sp = self.span(n)
            var = ir.var(self.fresh(n.id), "int32", sp)
            if step == 1:
                extent = self.arith("sub", stop, start, dnode)
                value = var
                minv = start
            else:
                extent = self.arith("ceildiv", self.arith("sub", stop, start, dnode), step, dnode)
                minv = 0
                value = self.arith("add", start, self.arith("mul", var, step, n), n)
            if _is_const(extent) and extent <= 0:
                self.error(dnode, f"the loop has no iterations (extent {extent})")
            loops.append((var, self.to_ir(minv, dnode), self.to_ir(extent, dnode)))
            self.bind(n.id, value, "loop", n)
        self.loop_depth += 1
        self.parallel_depth += kind == "parallel"
        body = self.body(node.body, node, new_scope=False)
        self.parallel_depth -= kind == "parallel"
        self.loop_depth -= 1
        self.pop_scope()
        for var, mn, ext in reversed(loops):
            body = ir.for_(var, mn, ext, kind, stages, body, self.span(node))
        self.emit(body)

    def stmt_With(self, node):
        self.error(node, "'with' is only used for 'with T.Kernel(...) as ...:' at the top of a T.prim_func")

    def stmt_Return(self, node):
        self.error(node, "'return' is not allowed in a kernel body")

    # Parameters --------------------------------------------------------------------------------

    def param_annotations(self):
        """[(arg node, annotation value, annotation node)] for the kernel's parameters."""
        fdef = self.src.funcdef
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            self.error(fdef, "kernel parameters must be plain positional parameters (no *args, **kwargs, "
                             "keyword-only or positional-only markers)")
        if a.defaults:
            self.error(a.defaults[0], "kernel parameters cannot have default values")
        anns = getattr(self.fn, "__annotations__", {}) or {}
        out = []
        for arg in a.args:
            ann = anns.get(arg.arg)
            # a postponed annotation (a string of source) is evaluated here; a string that is a dtype
            # name ("float16", T.float16, a factory's dtype argument) is the annotation itself
            if isinstance(ann, str) and arg.annotation is not None and ir.canonical_dtype(ann) is None:
                self.src.in_annotations = True
                try:
                    ann = self.expr(arg.annotation)
                finally:
                    self.src.in_annotations = False
            out.append((arg, ann, arg.annotation if arg.annotation is not None else arg))
        return out

    def tensor_param(self, name, tensor, node, is_output=False):
        shape = []
        for d in tensor.shape:
            if isinstance(d, int):
                if d <= 0:
                    self.error(node, f"dimension of '{name}' must be positive, got {d}")
                if d >= 2 ** 63:
                    self.error(node, f"dimension of '{name}' does not fit in 64 bits (it has {d.bit_length()} bits)",
                               "check how the shape is computed")
                shape.append(ir.int_imm(d, "int32", self.span(node)))
            else:
                shape.append(self.shape_var(d.name if isinstance(d, _dsl.SymbolicDim) else d, node))
        dt = self.dtype_of(tensor.dtype, node)
        return ir.buffer(self.fresh(name), dt, shape, "global", self.span(node))


_EXPR_MARKERS = {"ceildiv", "min", "max", "gelu", "where", "if_then_else", "cast", "infinity", *_MATH}
for _fn in _MATH:
    setattr(Parser, "call_" + _fn, (lambda f: lambda self, node: self._math(node, f))(_fn))


def _num_text(v):
    """A number for a message: huge ints (str() refuses over 4300 digits) by their size."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"<a {v.bit_length()}-bit integer>"
    return repr(v)


def _int_const(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _affine(e):
    """(terms, constant) with e == sum(coef * term) + constant over integer expressions, or None.
    Terms are variables (by name; names are unique per kernel) or other subexpressions (by text)."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return {}, e
    if not isinstance(e, Expr) or e.dtype not in ("int32", "int64"):
        return None
    if e.kind == "IntImm":
        return {}, e.value
    if e.kind == "Var":
        return {("v", e.name): 1}, 0
    if e.kind == "Unary" and e.op == "neg":
        a = _affine(e.a)
        return None if a is None else ({k: -c for k, c in a[0].items()}, -a[1])
    if e.kind == "Binary" and e.op in ("add", "sub", "mul"):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        if e.op == "mul":
            if a[0] and b[0]:
                return {("e", ir.print_expr(e)): 1}, 0
            k, (terms, c) = (a[1], b) if not a[0] else (b[1], a)
            return {t: k * v for t, v in terms.items()}, k * c
        sign = 1 if e.op == "add" else -1
        terms = dict(a[0])
        for t, v in b[0].items():
            terms[t] = terms.get(t, 0) + sign * v
        return terms, a[1] + sign * b[1]
    return {("e", ir.print_expr(e)): 1}, 0


def _addends(e):
    """The terms of e's top-level + chain, left to right ([e] when it is not a sum)."""
    if isinstance(e, Expr) and e.kind == "Binary" and e.op == "add":
        return _addends(e.a) + _addends(e.b)
    return [e]


def _addend_key(e):
    return ("c", e) if isinstance(e, (int, float)) else ("e", ir.print_expr(e)) if isinstance(e, Expr) else ("o", id(e))


def _op_symbol(op):
    return {ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitXor: "^", ast.BitAnd: "&",
            ast.BitOr: "|", ast.MatMult: "@", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
            ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
            ast.FloorDiv: "//", ast.Mod: "%", ast.Invert: "~"}.get(type(op), type(op).__name__)
