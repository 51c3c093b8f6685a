"""The explicit style (as in tilelang): ``@T.prim_func`` with ``with T.Kernel(...) as (bx, by):``,
tile buffers, tile ops and T.* loops."""
from __future__ import annotations

import ast

from .. import language as _lang
from .core import Buffer, Expr, Operand, Parser, _is_const, _marker_name, ir

_ALLOC_SCOPES = {
    "T.alloc_shared": "shared", "T.alloc_fragment": "fragment", "T.alloc_local": "fragment",
    "T.alloc_L1": "L1", "T.alloc_L0A": "L0A", "T.alloc_L0B": "L0B", "T.alloc_L0C": "L0C", "T.alloc_UB": "UB",
}
_LOOPS = {"range": "serial", "T.serial": "serial", "T.Pipelined": "pipelined", "T.Parallel": "parallel",
          "T.unroll": "unroll"}


class PrimFuncParser(Parser):
    style = "T.prim_func"

    def __init__(self, fn, out_idx=None):
        super().__init__(fn)
        self.out_idx = out_idx
        self.stmt_markers = {
            "T.copy": self.op_copy, "T.gemm": self.op_gemm, "T.fill": self.op_fill, "T.clear": self.op_clear,
            "T.reduce_sum": lambda n: self.op_reduce(n, "sum"), "T.reduce_max": lambda n: self.op_reduce(n, "max"),
            "T.reduce_min": lambda n: self.op_reduce(n, "min"),
        }
        self.value_markers = {name: (lambda s: lambda n, t: self.op_alloc(n, t, s))(scope)
                              for name, scope in _ALLOC_SCOPES.items()}

    def loop_kinds(self):
        return _LOOPS

    # ------------------------------------------------------------------------------------------

    def parse(self):
        fdef = self.src.funcdef
        params = []
        for arg, ann, ann_node in self.param_annotations():
            params.append(self.param(arg, ann, ann_node))
        outs = self.output_indices(len(params), fdef)
        params = [(obj, i in outs) for i, obj in enumerate(params)]

        stmts = list(fdef.body)
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]
        stmts = [s for s in stmts if not isinstance(s, ast.Pass)]
        if len(stmts) != 1 or not self.is_kernel_with(stmts[0]):
            where = next((s for s in stmts if not self.is_kernel_with(s)), fdef)
            self.error(where, "the body of a T.prim_func must be a single 'with T.Kernel(...) as ...:' block",
                       "put every statement inside: with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):")
        with_node = stmts[0]
        block_vars, grid = self.kernel_launch(with_node)
        body = self.body(with_node.body, with_node)
        return ir.kernel(fdef.name, params, block_vars, grid, body, self.span(fdef))

    def param(self, arg, ann, node):
        name = arg.arg
        if ann is None:
            self.error(arg, f"kernel parameter '{name}' needs an annotation",
                       f"e.g. {name}: T.Tensor((M, K), 'float16'), or {name}: T.int32 for a scalar")
        if isinstance(ann, _lang.Tensor):
            buf = self.tensor_param(name, ann, node)
            self.bind(name, buf, "param", arg)
            return buf
        if ann is int or ann is float or isinstance(ann, str):
            dt = "int32" if ann is int else "float32" if ann is float else self.dtype_of(ann, node)
            v = ir.var(self.fresh(name), dt, self.span(arg))
            self.bind(name, v, "param", arg)
            return v
        self.error(node, f"unsupported annotation for kernel parameter '{name}': {ann!r}",
                   "use T.Tensor(shape, dtype) for tensors or a dtype (T.int32, T.float32) for scalars")

    def output_indices(self, n, node):
        if self.out_idx is None:
            return set()
        idx = [self.out_idx] if isinstance(self.out_idx, int) else list(self.out_idx)
        out = set()
        for i in idx:
            if not isinstance(i, int) or not -n <= i < n:
                self.error(node, f"out_idx {i!r} is not a parameter index (the kernel has {n} parameters)")
            out.add(i % n)
        return out

    def is_kernel_with(self, node):
        if not isinstance(node, ast.With) or len(node.items) != 1:
            return False
        ce = node.items[0].context_expr
        return isinstance(ce, ast.Call) and _marker_name(self.expr(ce.func)) == "T.Kernel"

    def kernel_launch(self, node):
        item = node.items[0]
        call = item.context_expr
        for kw in call.keywords:
            if kw.arg == "threads":
                continue  # accepted for tilelang compatibility; see T.Kernel's docstring
            if kw.arg == "is_npu":
                if self.arg(kw.value):
                    self.error(kw, "T.Kernel(is_npu=True) (Ascend expert mode) is not yet supported",
                               "remove is_npu; the Ascend pipeline maps portable kernels to the NPU itself")
                continue
            self.error(kw, f"T.Kernel() got an unexpected keyword argument '{kw.arg}'",
                       "T.Kernel(*grid, threads=None)")
        if not 1 <= len(call.args) <= 3:
            self.error(call, f"T.Kernel takes 1 to 3 grid extents, got {len(call.args)}")
        grid = []
        for a in call.args:
            if isinstance(a, ast.Starred):
                self.error(a, "'*' arguments are not supported in T.Kernel()")
            e = self.index_expr(self.value(a), a)
            c = ir.as_const_int(e)
            if c is not None and c <= 0:
                self.error(a, f"a grid extent must be positive, got {c}")
            grid.append(e)
        tgt = item.optional_vars
        if tgt is None:
            names = [None] * len(grid)
        else:
            names = tgt.elts if isinstance(tgt, (ast.Tuple, ast.List)) else [tgt]
            if len(names) != len(grid):
                self.error(tgt, f"the grid has {len(grid)} dimension(s) but {len(names)} block index name(s)")
        self.push_scope()  # block indices live in the kernel body's scope
        block_vars = []
        for i, n in enumerate(names):
            if n is not None and not isinstance(n, ast.Name):
                self.error(n, "a block index must be a plain name")
            base = n.id if n is not None else ("bx", "by", "bz")[i]
            v = ir.var(self.fresh(base), "int32", self.span(n if n is not None else call))
            if n is not None:
                self.bind(n.id, v, "block", n)
            block_vars.append(v)
        return block_vars, grid

    # Tile ops ----------------------------------------------------------------------------------

    def op_alloc(self, node, target, scope):
        name = _marker_name(self.expr(node.func))
        a = self.call_args(node, name, ["shape", "dtype"])
        shape_node = a["shape"]
        shape = self.const_shape(shape_node, f"the shape of '{target.id}'")
        dt = self.dtype_of(self.arg(a["dtype"]), a["dtype"])
        sp = self.span(node)
        buf = ir.buffer(self.fresh(target.id), dt, [ir.int_imm(d, "int32", sp) for d in shape], scope, sp)
        self.emit(ir.alloc(buf, sp))
        self.bind(target.id, buf, "buffer", target)

    def operand_value(self, node):
        v = self.expr(node)
        if isinstance(v, (Buffer, Operand)):
            return v
        self.error(node, "expected a buffer or a buffer slice here, got "
                         f"{'a scalar value' if isinstance(v, Expr) else self.describe(v)}")

    def op_copy(self, node):
        a = self.call_args(node, "T.copy", ["src", "dst"])
        src, dst = self.operand_value(a["src"]), self.operand_value(a["dst"])
        src_point = isinstance(src, Operand) and src.is_point
        dst_point = isinstance(dst, Operand) and dst.is_point
        if src_point and dst_point:
            self.error(node, "T.copy needs the extent of at least one side",
                       "make one side a whole buffer or an explicit slice, e.g. T.copy(A[i:i + bm, k:k + bk], A_s)")
        if src_point:
            d = self.region(dst, a["dst"], None, "the destination")
            s = self.region(src, a["src"], d.extents, "the source")
        else:
            s = self.region(src, a["src"], None, "the source")
            d = self.region(dst, a["dst"], s.extents, "the destination")
        self.emit(ir.copy(s, d, self.span(node)))

    def flag(self, x, what):
        v = self.arg(x)
        if not isinstance(v, bool) and not (isinstance(v, int) and v in (0, 1)):
            self.error(x if isinstance(x, ast.AST) else None, f"{what} must be a compile-time True/False, got {v!r}")
        return bool(v)

    def op_gemm(self, node):
        a = self.call_args(node, "T.gemm", ["A", "B", "C"],
                           {"transpose_A": False, "transpose_B": False, "clear_accum": False})
        regions = []
        for k in ("A", "B", "C"):
            v = self.operand_value(a[k])
            if isinstance(v, Operand) and v.is_point:
                self.error(a[k], f"gemm operand {k} must be a whole buffer or an explicit slice")
            r = self.region(v, a[k], None, f"gemm operand {k}")
            if len(r.extents) != 2:
                self.error(a[k], f"gemm operand {k} must be 2-D, got {len(r.extents)} dimension(s)")
            regions.append(r)
        ta = self.flag(a["transpose_A"], "transpose_A")
        tb = self.flag(a["transpose_B"], "transpose_B")
        cl = self.flag(a["clear_accum"], "clear_accum")
        self.emit(ir.gemm(regions[0], regions[1], regions[2], ta, tb, cl, self.span(node)))

    def fill_value(self, value, dtype, node):
        sp = self.span(node)
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, float)):
            if dtype.startswith(("float", "bfloat")):
                return ir.float_imm(float(value), dtype, sp)
            if float(value) != int(value):
                self.error(node, f"cannot fill a {dtype} buffer with {value!r}")
            return ir.int_imm(int(value), dtype, sp)
        return ir.cast(self.to_ir(value, node), dtype, sp)

    def op_fill(self, node):
        a = self.call_args(node, "T.fill", ["buffer", "value"])
        v = self.operand_value(a["buffer"])
        if isinstance(v, Operand) and v.is_point:
            self.error(a["buffer"], "T.fill needs a whole buffer or an explicit slice")
        r = self.region(v, a["buffer"], None, "the fill destination")
        self.emit(ir.fill(r, self.fill_value(self.arg(a["value"]), r.buffer.dtype, a["value"]), self.span(node)))

    def op_clear(self, node):
        a = self.call_args(node, "T.clear", ["buffer"])
        v = self.operand_value(a["buffer"])
        if isinstance(v, Operand) and v.is_point:
            self.error(a["buffer"], "T.clear needs a whole buffer or an explicit slice")
        r = self.region(v, a["buffer"], None, "the buffer to clear")
        self.emit(ir.fill(r, self.fill_value(0, r.buffer.dtype, node), self.span(node)))

    def op_reduce(self, node, kind):
        name = f"T.reduce_{kind}"
        a = self.call_args(node, name, ["src", "dst"], {"dim": -1, "clear": True})
        bufs = []
        for k in ("src", "dst"):
            v = self.expr(a[k])
            if not isinstance(v, Buffer):
                self.error(a[k], f"{name}: {k} must be a whole tile buffer")
            bufs.append(v)
        src, dst = bufs
        dim_node = a["dim"] if isinstance(a["dim"], ast.AST) else node
        dim = self.const_int(self.arg(a["dim"]), dim_node, "dim")
        if not -src.ndim <= dim < src.ndim:
            self.error(dim_node, f"{name}: dim {dim} is out of range for the {src.ndim}-D buffer '{src.name}'")
        axis = dim % src.ndim
        ss, ds = src.const_shape(), dst.const_shape()
        if ss is not None and ds is not None:
            want = ss[:axis] + ss[axis + 1:] or [1]
            if list(ds) != list(want):
                self.error(node, f"{name}: '{dst.name}' has shape {tuple(ds)} but reducing '{src.name}' "
                                 f"{tuple(ss)} over dim {axis} gives {tuple(want)}")
        cl = self.flag(a["clear"], "clear")
        self.emit(ir.reduce(src, dst, kind, axis, cl, self.span(node)))
