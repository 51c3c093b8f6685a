"""The tile-loops style (the seed's): plain ``for ... in range(...)`` loops around ``tw.output``,
``tw.accumulator``, ``tw.load``, ``tw.matmul`` and ``tw.store``. The loops stay serial loops in
the IR; the ``infer_grid`` pass later decides which ones form the launch grid."""
from __future__ import annotations

import ast

from .. import dsl as _dsl
from .core import Buffer, Expr, Parser, _is_const, _marker_name, ir


class TileLoopsParser(Parser):
    style = "tile loops"

    def __init__(self, fn, arg_specs=None, defining_locals=None):
        super().__init__(fn, defining_locals)
        self.arg_specs = arg_specs
        self.outputs = []
        self.returned = False
        self.stmt_markers = {"tw.store": self.op_store}
        self.value_markers = {"tw.output": self.op_output, "tw.accumulator": self.op_accumulator,
                              "tw.load": self.op_load}
        self.update_markers = {"tw.matmul": "accumulate it into an accumulator: acc += tw.matmul(a, b)"}

    def loop_kinds(self):
        return {"range": "serial"}

    # ------------------------------------------------------------------------------------------

    def spec_for(self, i, arg, ann):
        specs = self.arg_specs
        if specs is None:
            return ann
        if isinstance(specs, dict):
            return specs.get(arg.arg, ann)
        if isinstance(specs, (list, tuple)):
            return specs[i] if i < len(specs) else ann
        self.error(self.src.funcdef, f"arg_specs must be a dict or a list, got {type(specs).__name__}")

    def parse(self):
        fdef = self.src.funcdef
        anns = self.param_annotations()
        if isinstance(self.arg_specs, (list, tuple)) and len(self.arg_specs) > len(anns):
            self.error(fdef, f"{len(self.arg_specs)} argument specs given for {len(anns)} parameter(s)")
        inputs = []
        for i, (arg, ann, ann_node) in enumerate(anns):
            spec = self.spec_for(i, arg, ann)
            name = arg.arg
            if spec is None:
                self.error(arg, f"kernel parameter '{name}' needs an annotation or an argument spec",
                           f"e.g. {name}: tw.Tensor((M, K), 'float32')")
            if isinstance(spec, _dsl.Tensor):
                buf = self.tensor_param(name, spec, ann_node)
                self.bind(name, buf, "param", arg)
                inputs.append(buf)
            elif spec is int or spec is float or isinstance(spec, str):
                dt = "int32" if spec is int else "float32" if spec is float else self.dtype_of(spec, ann_node)
                v = ir.var(self.fresh(name), dt, self.span(arg))
                self.bind(name, v, "param", arg)
                inputs.append(v)
            elif _is_const(spec):
                self.bind(name, spec, "param", arg)  # a compile-time constant argument
            else:
                self.error(ann_node, f"unsupported spec for kernel parameter '{name}': {spec!r}",
                           "use tw.Tensor(shape, dtype), a dtype for a scalar, or a Python int constant")
        stmts = list(fdef.body)
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]
        body = self.body(stmts, fdef)
        if not self.outputs:
            self.error(fdef, "the kernel declares no output", "declare one: out = tw.output((M, N), dtype='float32')")
        params = [(p, False) for p in inputs] + [(o, True) for o in self.outputs]
        return ir.kernel(fdef.name, params, [], [], body, self.span(fdef))

    def at_top_level(self):
        return len(self.scopes) == 2 and self.loop_depth == 0

    # tw.* ops ----------------------------------------------------------------------------------

    def op_output(self, node, target):
        a = self.call_args(node, "tw.output", ["shape"], {"dtype": "float32"})
        if not self.at_top_level():
            self.error(node, "tw.output must be declared at the top level of the kernel, not inside a loop or if")
        shape_node = a["shape"]
        value = self.expr(shape_node)
        elts = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        if not isinstance(value, (tuple, list)):
            value = (value,)
        shape = []
        for i, d in enumerate(value):
            n = elts[i] if i < len(elts) else shape_node
            if isinstance(d, (str, _dsl.SymbolicDim)):
                dname = d if isinstance(d, str) else d.name
                if dname not in self.shape_vars:
                    self.error(n, f"output dimension '{dname}' is not a dimension of any input tensor",
                               "the runtime sizes outputs from the inputs' shapes; use a constant or an input's dim")
                shape.append(self.shape_vars[dname])
            else:
                shape.append(self.index_expr(d, n))
        dt = self.dtype_of(self.arg(a["dtype"]), a["dtype"] if isinstance(a["dtype"], ast.AST) else node)
        buf = ir.buffer(self.fresh(target.id), dt, shape, "global", self.span(node))
        self.outputs.append(buf)
        self.bind(target.id, buf, "buffer", target)

    def op_accumulator(self, node, target):
        a = self.call_args(node, "tw.accumulator", ["shape"], {"dtype": "float32"})
        shape = self.const_shape(a["shape"], f"the shape of '{target.id}'")
        dt = self.dtype_of(self.arg(a["dtype"]), a["dtype"] if isinstance(a["dtype"], ast.AST) else node)
        sp = self.span(node)
        buf = ir.buffer(self.fresh(target.id), dt, [ir.int_imm(d, "int32", sp) for d in shape], "fragment", sp)
        self.emit(ir.alloc(buf, sp))
        zero = ir.float_imm(0.0, dt, sp) if dt.startswith(("float", "bfloat")) else ir.int_imm(0, dt, sp)
        self.emit(ir.fill(self.full_region(buf, node), zero, sp))
        self.bind(target.id, buf, "buffer", target)

    def tensor_arg(self, node, what):
        v = self.expr(node)
        if isinstance(v, str):  # the seed's tw.load("A", ...): a parameter by name
            b = self.lookup_local(v)
            if b is None or not isinstance(b.value, Buffer):
                self.error(node, f"no tensor parameter named '{v}'")
            v = b.value
        if not isinstance(v, Buffer):
            self.error(node, f"{what} must be a tensor, got "
                             f"{'a scalar value' if isinstance(v, Expr) else self.describe(v)}")
        return v

    def origin(self, node, buf, what):
        v = self.expr(node)
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        if not isinstance(v, (tuple, list)):
            v = (v,)
        if len(v) != buf.ndim:
            self.error(node, f"{what} has {len(v)} coordinate(s) but '{buf.name}' has {buf.ndim} dimension(s)")
        return [self.index_expr(x, elts[i] if i < len(elts) else node) for i, x in enumerate(v)]

    def op_load(self, node, target):
        a = self.call_args(node, "tw.load", ["tensor", "origin", "shape"], {"dtype": None})
        src = self.tensor_arg(a["tensor"], "the tensor to load from")
        starts = self.origin(a["origin"], src, "the origin")
        shape = self.const_shape(a["shape"], f"the shape of '{target.id}'")
        if len(shape) != src.ndim:
            self.error(a["shape"], f"the tile shape has {len(shape)} dimension(s) but '{src.name}' has {src.ndim}")
        dt_v = self.arg(a["dtype"])
        dt = src.dtype if dt_v is None else self.dtype_of(dt_v, a["dtype"])
        sp = self.span(node)
        ext = [ir.int_imm(d, "int32", sp) for d in shape]
        buf = ir.buffer(self.fresh(target.id), dt, ext, "shared", sp)
        self.emit(ir.alloc(buf, sp))
        self.emit(ir.copy(ir.Region(src, starts, ext), self.full_region(buf, node), sp))
        self.bind(target.id, buf, "buffer", target)

    def op_store(self, node):
        a = self.call_args(node, "tw.store", ["tensor", "origin", "tile"])
        dst = self.tensor_arg(a["tensor"], "the tensor to store into")
        tile = self.expr(a["tile"])
        if not isinstance(tile, Buffer) or tile.scope == "global":
            self.error(a["tile"], "tw.store stores a tile (a tw.accumulator or a tw.load result)")
        starts = self.origin(a["origin"], dst, "the origin")
        ext = list(tile.shape)
        if len(ext) != dst.ndim:
            self.error(a["tile"], f"the tile '{tile.name}' has {len(ext)} dimension(s) but '{dst.name}' has {dst.ndim}")
        self.emit(ir.copy(self.full_region(tile, node), ir.Region(dst, starts, ext), self.span(node)))

    def aug_assign_buffer(self, acc, node):
        call = node.value
        m = _marker_name(self.expr(call.func)) if isinstance(call, ast.Call) else None
        if m != "tw.matmul" or not isinstance(node.op, ast.Add):
            self.error(node, f"'{acc.name}' is a tile; the only update of a whole tile is {acc.name} += tw.matmul(a, b)")
        if acc.scope != "fragment":
            self.error(node.target, f"tw.matmul accumulates into a tw.accumulator, and '{acc.name}' is not one")
        a = self.call_args(call, "tw.matmul", ["a", "b"], {"transpose_a": False, "transpose_b": False})
        tiles = []
        for k in ("a", "b"):
            t = self.expr(a[k])
            if not isinstance(t, Buffer) or t.ndim != 2:
                self.error(a[k], f"tw.matmul operand {k} must be a 2-D tile (e.g. from tw.load)")
            tiles.append(t)
        flags = []
        for k in ("transpose_a", "transpose_b"):
            v = self.arg(a[k])
            if not isinstance(v, bool):
                self.error(a[k] if isinstance(a[k], ast.AST) else call, f"{k} must be True or False")
            flags.append(v)
        self.emit(ir.gemm(self.full_region(tiles[0], node), self.full_region(tiles[1], node), self.full_region(acc, node),
                          flags[0], flags[1], False, self.span(node)))

    def stmt_Return(self, node):
        if not self.at_top_level():
            self.error(node, "'return' is only allowed at the end of the kernel, not inside a loop or if")
        if node.value is None:
            return
        v = self.expr(node.value)
        vals = v if isinstance(v, tuple) else (v,)
        for x in vals:
            if not isinstance(x, Buffer) or not any(x is o or x.name == o.name for o in self.outputs):
                self.error(node.value, "a tile-loops kernel returns its outputs (declared with tw.output)")
        self.returned = True

    def stmt(self, node):
        if self.returned:
            self.error(node, "statement after 'return'")
        super().stmt(node)
