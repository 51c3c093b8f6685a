// Python bindings of the Tile IR (module tilewright._C.ir).
//
// Mechanical by design: node classes expose their fields read-only, builder functions forward to
// ir.h, statement constructors call the node constructors. Dtypes, scopes, loop kinds and
// operators cross the boundary as their text-form names; spans as (file, line, col) tuples.
// tw::ir::Error becomes tilewright.TilewrightError through the translator in module.cpp.
#include "python/bind_ir.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <tuple>
#include <variant>

#include "tilewright/ir.h"

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace tw::ir;

namespace {

// ---------------------------------------------------------------------------------------------
// Conversions between Python-side names/tuples and IR values

using PySpan = std::tuple<std::string, int, int>;  // (file, line, col)
using OptSpan = std::optional<PySpan>;

Span to_span(const OptSpan& s) {
  if (!s) return {};
  return Span{std::get<0>(*s), std::get<1>(*s), std::get<2>(*s)};
}
PySpan from_span(const Span& s) { return {s.file, s.line, s.col}; }

DType to_dtype(const std::string& name, const Span& s = {}) {
  if (auto t = parse_dtype(name)) return *t;
  throw Error("unknown dtype '" + name + "'", s,
              "use one of float16, bfloat16, float32, float64, int8, int32, int64, uint8, bool");
}

Scope to_scope(const std::string& name, const Span& s = {}) {
  if (auto sc = parse_scope(name)) return *sc;
  throw Error("unknown memory scope '" + name + "'", s, "use one of global shared fragment L1 L0A L0B L0C UB");
}

BinOp to_binop(const std::string& s, const Span& sp) {
  if (auto op = parse_binop(s)) return *op;
  throw Error("unknown binary operator '" + s + "'", sp);
}
UnOp to_unop(const std::string& s, const Span& sp) {
  if (auto op = parse_unop(s)) return *op;
  throw Error("unknown unary operator '" + s + "' (neg or not)", sp);
}
MathFn to_mathfn(const std::string& s, const Span& sp) {
  if (auto f = parse_mathfn(s)) return *f;
  throw Error("unknown math function '" + s + "'", sp);
}
ForKind to_forkind(const std::string& s, const Span& sp) {
  if (auto k = parse_forkind(s)) return *k;
  throw Error("unknown loop kind '" + s + "' (serial parallel pipelined unroll)", sp);
}
CoreKind to_corekind(const std::string& s, const Span& sp) {
  if (auto k = parse_corekind(s)) return *k;
  throw Error("unknown core scope '" + s + "'", sp, "T.Scope(\"C\") (Cube core) or T.Scope(\"V\") (Vector core)");
}
AscendPipe to_pipe(const std::string& s, const Span& sp) {
  if (auto p = parse_pipe(s)) return *p;
  throw Error("unknown pipe '" + s + "'", sp, "pipes: S V M MTE1 MTE2 MTE3 FIX ALL");
}
SyncKind to_synckind(const std::string& s, const Span& sp) {
  if (auto k = parse_synckind(s)) return *k;
  throw Error("unknown synchronisation '" + s + "'", sp);
}
ReduceKind to_reducekind(const std::string& s, const Span& sp) {
  if (auto k = parse_reducekind(s)) return *k;
  throw Error("unknown reduction '" + s + "' (sum max min)", sp);
}

// A compact one-line rendering for __repr__ (debugging only; the text form is ir/printer.h).
void repr_expr(std::ostream& os, const Expr& e) {
  if (!e) { os << "None"; return; }
  switch (e->kind) {
    case ExprKind::IntImm: os << static_cast<const IntImmNode*>(e.get())->value; return;
    case ExprKind::FloatImm: os << static_cast<const FloatImmNode*>(e.get())->value; return;
    case ExprKind::Var: os << static_cast<const VarNode*>(e.get())->name; return;
    case ExprKind::Binary: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      os << binop_name(n->op) << "(";
      repr_expr(os, n->a); os << ", "; repr_expr(os, n->b); os << ")";
      return;
    }
    case ExprKind::Unary: {
      auto* n = static_cast<const UnaryNode*>(e.get());
      os << unop_name(n->op) << "("; repr_expr(os, n->a); os << ")";
      return;
    }
    case ExprKind::Call: {
      auto* n = static_cast<const CallNode*>(e.get());
      os << mathfn_name(n->fn) << "(";
      for (size_t i = 0; i < n->args.size(); ++i) { if (i) os << ", "; repr_expr(os, n->args[i]); }
      os << ")";
      return;
    }
    case ExprKind::Cast: {
      auto* n = static_cast<const CastNode*>(e.get());
      os << "cast<" << n->dtype.name() << ">("; repr_expr(os, n->value); os << ")";
      return;
    }
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(e.get());
      os << "select("; repr_expr(os, n->cond); os << ", "; repr_expr(os, n->t); os << ", "; repr_expr(os, n->f); os << ")";
      return;
    }
    case ExprKind::Load: {
      auto* n = static_cast<const LoadNode*>(e.get());
      os << n->buffer->name << "[";
      for (size_t i = 0; i < n->indices.size(); ++i) { if (i) os << ", "; repr_expr(os, n->indices[i]); }
      os << "]";
      return;
    }
  }
}
std::string expr_repr(const Expr& e) {
  std::ostringstream os;
  repr_expr(os, e);
  os << ": " << e->dtype.name();
  return os.str();
}

}  // namespace

void bind_ir(nb::module_& m) {
  m.doc() = "Tile IR builder (see include/tilewright/ir.h). Dtypes, scopes and ops are passed by name; "
            "spans as (file, line, col) tuples.";

  // ------------------------------------------------------------------------------------------
  // Expressions
  nb::class_<ExprNode>(m, "Expr")
      .def_prop_ro("dtype", [](const ExprNode& e) { return std::string(e.dtype.name()); })
      .def_prop_ro("kind", [](const ExprNode& e) { return std::string(exprkind_name(e.kind)); })
      .def_prop_ro("span", [](const ExprNode& e) { return from_span(e.span); })
      .def("__repr__", [](std::shared_ptr<const ExprNode> e) { return expr_repr(e); });
  nb::class_<IntImmNode, ExprNode>(m, "IntImm").def_ro("value", &IntImmNode::value);
  nb::class_<FloatImmNode, ExprNode>(m, "FloatImm").def_ro("value", &FloatImmNode::value);
  nb::class_<VarNode, ExprNode>(m, "Var").def_ro("name", &VarNode::name);
  nb::class_<BinaryNode, ExprNode>(m, "Binary")
      .def_prop_ro("op", [](const BinaryNode& n) { return std::string(binop_name(n.op)); })
      .def_ro("a", &BinaryNode::a)
      .def_ro("b", &BinaryNode::b);
  nb::class_<UnaryNode, ExprNode>(m, "Unary")
      .def_prop_ro("op", [](const UnaryNode& n) { return std::string(unop_name(n.op)); })
      .def_ro("a", &UnaryNode::a);
  nb::class_<CallNode, ExprNode>(m, "Call")
      .def_prop_ro("fn", [](const CallNode& n) { return std::string(mathfn_name(n.fn)); })
      .def_ro("args", &CallNode::args);
  nb::class_<CastNode, ExprNode>(m, "Cast").def_ro("value", &CastNode::value);
  nb::class_<SelectNode, ExprNode>(m, "Select")
      .def_ro("cond", &SelectNode::cond)
      .def_ro("t", &SelectNode::t)
      .def_ro("f", &SelectNode::f);
  nb::class_<LoadNode, ExprNode>(m, "Load").def_ro("buffer", &LoadNode::buffer).def_ro("indices", &LoadNode::indices);

  // ------------------------------------------------------------------------------------------
  // Buffers and regions
  nb::class_<BufferNode>(m, "Buffer")
      .def_ro("name", &BufferNode::name)
      .def_prop_ro("dtype", [](const BufferNode& b) { return std::string(b.dtype.name()); })
      .def_ro("shape", &BufferNode::shape)
      .def_prop_ro("scope", [](const BufferNode& b) { return std::string(scope_name(b.scope)); })
      .def_prop_ro("ndim", &BufferNode::ndim)
      .def_prop_ro("span", [](const BufferNode& b) { return from_span(b.span); })
      .def("const_shape", &BufferNode::const_shape)
      .def("__repr__", [](const BufferNode& b) {
        std::ostringstream os;
        os << "Buffer(" << b.name << ", " << b.dtype.name() << "[";
        for (size_t i = 0; i < b.shape.size(); ++i) { if (i) os << ", "; repr_expr(os, b.shape[i]); }
        os << "], " << scope_name(b.scope) << ")";
        return os.str();
      });

  nb::class_<Region>(m, "Region")
      .def(nb::init<Buffer, std::vector<Expr>, std::vector<Expr>>(), "buffer"_a, "starts"_a, "extents"_a)
      .def_ro("buffer", &Region::buffer)
      .def_ro("starts", &Region::starts)
      .def_ro("extents", &Region::extents);
  m.def("full_region", &full_region, "buffer"_a);

  // ------------------------------------------------------------------------------------------
  // Statements
  nb::class_<StmtNode>(m, "Stmt")
      .def_prop_ro("kind", [](const StmtNode& s) { return std::string(stmtkind_name(s.kind)); })
      .def_prop_ro("span", [](const StmtNode& s) { return from_span(s.span); })
      .def("__repr__", [](const StmtNode& s) { return std::string("<Stmt ") + std::string(stmtkind_name(s.kind)) + ">"; });
  nb::class_<SeqNode, StmtNode>(m, "Seq").def_ro("body", &SeqNode::body);
  nb::class_<ForNode, StmtNode>(m, "For")
      .def_ro("var", &ForNode::var)
      .def_ro("min", &ForNode::min)
      .def_ro("extent", &ForNode::extent)
      .def_prop_ro("for_kind", [](const ForNode& n) { return std::string(forkind_name(n.for_kind)); })
      .def_ro("num_stages", &ForNode::num_stages)
      .def_ro("body", &ForNode::body);
  nb::class_<IfNode, StmtNode>(m, "If")
      .def_ro("cond", &IfNode::cond)
      .def_ro("then_body", &IfNode::then_body)
      .def_ro("else_body", &IfNode::else_body);
  nb::class_<LetNode, StmtNode>(m, "Let").def_ro("var", &LetNode::var).def_ro("value", &LetNode::value);
  nb::class_<StoreNode, StmtNode>(m, "Store")
      .def_ro("buffer", &StoreNode::buffer)
      .def_ro("indices", &StoreNode::indices)
      .def_ro("value", &StoreNode::value);
  nb::class_<AllocNode, StmtNode>(m, "Alloc").def_ro("buffer", &AllocNode::buffer);
  nb::class_<CopyNode, StmtNode>(m, "Copy")
      .def_ro("src", &CopyNode::src)
      .def_ro("dst", &CopyNode::dst)
      .def_ro("atomic", &CopyNode::atomic);
  nb::class_<GemmNode, StmtNode>(m, "Gemm")
      .def_ro("a", &GemmNode::a)
      .def_ro("b", &GemmNode::b)
      .def_ro("c", &GemmNode::c)
      .def_ro("trans_a", &GemmNode::trans_a)
      .def_ro("trans_b", &GemmNode::trans_b)
      .def_ro("clear", &GemmNode::clear)
      .def_prop_ro("band", [](const GemmNode& n) {
        return std::string(n.band == GemmBand::a ? "a" : n.band == GemmBand::c ? "c" : "");
      })
      .def_ro("band_lo", &GemmNode::band_lo)
      .def_ro("band_hi", &GemmNode::band_hi)
      .def_ro("rows_lo", &GemmNode::rows_lo)
      .def_ro("rows_hi", &GemmNode::rows_hi)
      .def_ro("cols_lo", &GemmNode::cols_lo)
      .def_ro("cols_hi", &GemmNode::cols_hi);
  nb::class_<FillNode, StmtNode>(m, "Fill").def_ro("dst", &FillNode::dst).def_ro("value", &FillNode::value);
  nb::class_<ReduceNode, StmtNode>(m, "Reduce")
      .def_ro("src", &ReduceNode::src)
      .def_ro("dst", &ReduceNode::dst)
      .def_prop_ro("reduce_kind", [](const ReduceNode& n) { return std::string(reducekind_name(n.reduce_kind)); })
      .def_ro("axis", &ReduceNode::axis)
      .def_ro("clear", &ReduceNode::clear);

  nb::class_<CoreScopeNode, StmtNode>(m, "CoreScope")
      .def_prop_ro("core", [](const CoreScopeNode& n) { return std::string(corekind_name(n.core)); })
      .def_ro("body", &CoreScopeNode::body);
  nb::class_<SyncNode, StmtNode>(m, "Sync")
      .def_prop_ro("sync", [](const SyncNode& n) { return std::string(synckind_name(n.sync)); })
      .def_prop_ro("pipe", [](const SyncNode& n) { return std::string(pipe_name(n.pipe)); })
      .def_prop_ro("dst_pipe", [](const SyncNode& n) { return std::string(pipe_name(n.dst_pipe)); })
      .def_ro("mode", &SyncNode::mode)
      .def_ro("id", &SyncNode::id);

  // ------------------------------------------------------------------------------------------
  // Kernels
  nb::class_<Param>(m, "Param")
      .def_ro("buffer", &Param::buffer)
      .def_ro("scalar", &Param::scalar)
      .def_ro("is_output", &Param::is_output)
      .def_prop_ro("name", [](const Param& p) { return p.name(); });
  nb::class_<KernelNode>(m, "Kernel")
      .def_ro("name", &KernelNode::name)
      .def_ro("params", &KernelNode::params)
      .def_ro("block_vars", &KernelNode::block_vars)
      .def_ro("grid", &KernelNode::grid)
      .def_ro("body", &KernelNode::body)
      .def_ro("sub_block_var", &KernelNode::sub_block_var)
      .def_prop_ro("is_npu", &KernelNode::is_npu)
      .def_prop_ro("span", [](const KernelNode& k) { return from_span(k.span); })
      .def("shape_vars", &KernelNode::shape_vars)
      .def("__repr__", [](const KernelNode& k) { return "<Kernel " + k.name + ">"; });

  // ------------------------------------------------------------------------------------------
  // Names
  m.def("canonical_dtype", [](const std::string& n) -> std::optional<std::string> {
    if (auto t = parse_dtype(n)) return std::string(t->name());
    return std::nullopt;
  }, "name"_a, "Canonical dtype name for a name or alias, or None if unknown.");
  m.def("promote", [](const std::string& a, const std::string& b) {
    return std::string(promote(to_dtype(a), to_dtype(b)).name());
  }, "a"_a, "b"_a);
  m.def("format_error", [](const std::string& msg, const OptSpan& s, const std::string& hint) {
    return format_error(msg, to_span(s), hint);
  }, "message"_a, "span"_a = nb::none(), "hint"_a = "");

  // ------------------------------------------------------------------------------------------
  // The IR's lists (ir.h), from which the front end takes its per-op names (T.exp, the AST
  // operator maps, ...): tuples in enum order.
  {
    nb::list math, binops, unops, reduce_kinds, for_kinds, dtypes, scopes;
    for (MathFn f : all_of<MathFn>())  // (name, arity, docstring)
      math.append(nb::make_tuple(std::string(mathfn_name(f)), mathfn_arity(f), std::string(mathfn_doc(f))));
#define TW_PY_BINOP(e, name, symbol, prec, py_ast, py_operator) \
  binops.append(nb::make_tuple(std::string(name), std::string(symbol), std::string(py_ast), std::string(py_operator)));
    TW_BINOPS(TW_PY_BINOP)  // (name, infix symbol or "", Python ast class or "", operator function or "")
#undef TW_PY_BINOP
    for (UnOp op : all_of<UnOp>()) unops.append(std::string(unop_name(op)));
    for (ReduceKind k : all_of<ReduceKind>()) reduce_kinds.append(std::string(reducekind_name(k)));
    for (ForKind k : all_of<ForKind>()) for_kinds.append(std::string(forkind_name(k)));
    for (DTypeCode c : all_of<DTypeCode>()) dtypes.append(std::string(DType(c).name()));
    for (Scope sc : all_of<Scope>()) scopes.append(std::string(scope_name(sc)));
    nb::object tuple = nb::module_::import_("builtins").attr("tuple");
    m.attr("MATH_FUNCTIONS") = tuple(math);
    m.attr("BINARY_OPS") = tuple(binops);
    m.attr("UNARY_OPS") = tuple(unops);
    m.attr("REDUCE_KINDS") = tuple(reduce_kinds);
    m.attr("FOR_KINDS") = tuple(for_kinds);
    m.attr("DTYPES") = tuple(dtypes);
    m.attr("SCOPES") = tuple(scopes);
  }

  // ------------------------------------------------------------------------------------------
  // Expression builders (ir.h)
  m.def("int_imm", [](int64_t v, const std::string& t, const OptSpan& s) {
    Span sp = to_span(s);
    return int_imm(v, to_dtype(t, sp), sp);
  }, "value"_a, "dtype"_a = "int32", "span"_a = nb::none());
  m.def("float_imm", [](double v, const std::string& t, const OptSpan& s) {
    Span sp = to_span(s);
    return float_imm(v, to_dtype(t, sp), sp);
  }, "value"_a, "dtype"_a = "float32", "span"_a = nb::none());
  m.def("var", [](std::string name, const std::string& t, const OptSpan& s) {
    Span sp = to_span(s);
    return var(std::move(name), to_dtype(t, sp), sp);
  }, "name"_a, "dtype"_a = "int32", "span"_a = nb::none());
  m.def("binary", [](const std::string& op, Expr a, Expr b, const OptSpan& s) {
    Span sp = to_span(s);
    return binary(to_binop(op, sp), std::move(a), std::move(b), sp);
  }, "op"_a, "a"_a, "b"_a, "span"_a = nb::none());
  m.def("unary", [](const std::string& op, Expr a, const OptSpan& s) {
    Span sp = to_span(s);
    return unary(to_unop(op, sp), std::move(a), sp);
  }, "op"_a, "a"_a, "span"_a = nb::none());
  m.def("call", [](const std::string& fn, std::vector<Expr> args, const OptSpan& s) {
    Span sp = to_span(s);
    return call(to_mathfn(fn, sp), std::move(args), sp);
  }, "fn"_a, "args"_a, "span"_a = nb::none());
  m.def("cast", [](Expr v, const std::string& t, const OptSpan& s) {
    Span sp = to_span(s);
    DType to = to_dtype(t, sp);
    // T.cast / `x: dtype = ...` (docs/language.md "Dtype conversions"): arithmetic already of `to` may hold a
    // wider value (computed_wider), which the conversion wraps / rounds: kept (the simplifier keeps it too)
    if (v->dtype == to && computed_wider(v)) return Expr(std::make_shared<CastNode>(std::move(v), to, sp));
    return cast(std::move(v), to, sp);
  }, "value"_a, "dtype"_a, "span"_a = nb::none());
  m.def("computed_wider", [](const Expr& v) { return computed_wider(v); }, "value"_a);
  m.def("select", [](Expr c, Expr t, Expr f, const OptSpan& s) {
    return select(std::move(c), std::move(t), std::move(f), to_span(s));
  }, "cond"_a, "t"_a, "f"_a, "span"_a = nb::none());
  m.def("load", [](Buffer b, std::vector<Expr> idx, const OptSpan& s) {
    return load(std::move(b), std::move(idx), to_span(s));
  }, "buffer"_a, "indices"_a, "span"_a = nb::none());
  m.def("buffer", [](std::string name, const std::string& t, std::vector<Expr> shape, const std::string& scope,
                     const OptSpan& s) {
    Span sp = to_span(s);
    return buffer(std::move(name), to_dtype(t, sp), std::move(shape), to_scope(scope, sp), sp);
  }, "name"_a, "dtype"_a, "shape"_a, "scope"_a = "global", "span"_a = nb::none());
  m.def("as_const_int", &as_const_int, "expr"_a);

  // ------------------------------------------------------------------------------------------
  // Statement constructors
  m.def("seq", [](std::vector<Stmt> body, const OptSpan& s) -> Stmt {
    return std::make_shared<SeqNode>(std::move(body), to_span(s));
  }, "body"_a, "span"_a = nb::none());
  m.def("for_", [](Var v, Expr mn, Expr ext, const std::string& kind, int stages, Stmt body, const OptSpan& s) -> Stmt {
    Span sp = to_span(s);
    return std::make_shared<ForNode>(std::move(v), std::move(mn), std::move(ext), to_forkind(kind, sp), stages,
                                     std::move(body), sp);
  }, "var"_a, "min"_a, "extent"_a, "kind"_a = "serial", "num_stages"_a = 0, "body"_a, "span"_a = nb::none());
  m.def("if_", [](Expr c, Stmt t, std::optional<Stmt> e, const OptSpan& s) -> Stmt {
    return std::make_shared<IfNode>(std::move(c), std::move(t), e ? std::move(*e) : Stmt{}, to_span(s));
  }, "cond"_a, "then_body"_a, "else_body"_a = nb::none(), "span"_a = nb::none());
  m.def("let", [](Var v, Expr x, const OptSpan& s) -> Stmt {
    return std::make_shared<LetNode>(std::move(v), std::move(x), to_span(s));
  }, "var"_a, "value"_a, "span"_a = nb::none());
  m.def("store", [](Buffer b, std::vector<Expr> idx, Expr v, const OptSpan& s) -> Stmt {
    return std::make_shared<StoreNode>(std::move(b), std::move(idx), std::move(v), to_span(s));
  }, "buffer"_a, "indices"_a, "value"_a, "span"_a = nb::none());
  m.def("alloc", [](Buffer b, const OptSpan& s) -> Stmt {
    return std::make_shared<AllocNode>(std::move(b), to_span(s));
  }, "buffer"_a, "span"_a = nb::none());
  m.def("copy", [](Region src, Region dst, const OptSpan& s, bool atomic) -> Stmt {
    return std::make_shared<CopyNode>(std::move(src), std::move(dst), to_span(s), atomic);
  }, "src"_a, "dst"_a, "span"_a = nb::none(), "atomic"_a = false);
  m.def("gemm", [](Region a, Region b, Region c, bool ta, bool tb, bool clear, const OptSpan& s,
                   const std::string& band, std::optional<Expr> lo, std::optional<Expr> hi, std::optional<Expr> r0,
                   std::optional<Expr> r1, std::optional<Expr> c0, std::optional<Expr> c1) -> Stmt {
    if (band != "" && band != "a" && band != "c")
      throw std::invalid_argument("gemm: band must be '', 'a' or 'c', got '" + band + "'");
    if (band != "" && (!lo || !hi)) throw std::invalid_argument("gemm: a band needs both bounds");
    if (band == "" && (r0 || r1 || c0 || c1)) throw std::invalid_argument("gemm: rows / cols limit a band");
    if (bool(r0) != bool(r1) || bool(c0) != bool(c1))
      throw std::invalid_argument("gemm: rows / cols need both bounds");
    auto get = [](const std::optional<Expr>& e) { return e ? *e : nullptr; };
    return std::make_shared<GemmNode>(std::move(a), std::move(b), std::move(c), ta, tb, clear, to_span(s),
                                      band == "a" ? GemmBand::a : band == "c" ? GemmBand::c : GemmBand::none,
                                      band == "" ? nullptr : *lo, band == "" ? nullptr : *hi, get(r0), get(r1),
                                      get(c0), get(c1));
  }, "a"_a, "b"_a, "c"_a, "trans_a"_a = false, "trans_b"_a = false, "clear"_a = false, "span"_a = nb::none(),
     "band"_a = "", "band_lo"_a = nb::none(), "band_hi"_a = nb::none(), "rows_lo"_a = nb::none(),
     "rows_hi"_a = nb::none(), "cols_lo"_a = nb::none(), "cols_hi"_a = nb::none());
  m.def("fill", [](Region dst, Expr v, const OptSpan& s) -> Stmt {
    return std::make_shared<FillNode>(std::move(dst), std::move(v), to_span(s));
  }, "dst"_a, "value"_a, "span"_a = nb::none());
  m.def("reduce", [](Buffer src, Buffer dst, const std::string& kind, int axis, bool clear, const OptSpan& s) -> Stmt {
    Span sp = to_span(s);
    return std::make_shared<ReduceNode>(std::move(src), std::move(dst), to_reducekind(kind, sp), axis, clear, sp);
  }, "src"_a, "dst"_a, "kind"_a, "axis"_a, "clear"_a = true, "span"_a = nb::none());

  m.def("core_scope", [](const std::string& core, Stmt body, const OptSpan& s) -> Stmt {
    Span sp = to_span(s);
    return std::make_shared<CoreScopeNode>(to_corekind(core, sp), std::move(body), sp);
  }, "core"_a, "body"_a, "span"_a = nb::none());
  m.def("sync", [](const std::string& kind, const std::string& pipe, const std::string& dst_pipe, int mode,
                   std::optional<Expr> id, const OptSpan& s) -> Stmt {
    Span sp = to_span(s);
    return std::make_shared<SyncNode>(to_synckind(kind, sp), to_pipe(pipe, sp), to_pipe(dst_pipe, sp), mode,
                                      id ? std::move(*id) : Expr{}, sp);
  }, "kind"_a, "pipe"_a = "S", "dst_pipe"_a = "S", "mode"_a = 0, "id"_a = nb::none(), "span"_a = nb::none());

  // params: (buffer or scalar var, is_output)
  m.def("kernel", [](std::string name, const std::vector<std::pair<std::variant<Buffer, Var>, bool>>& params,
                     std::vector<Var> block_vars, std::vector<Expr> grid, Stmt body, const OptSpan& s,
                     std::optional<Var> sub_block_var) -> Kernel {
    std::vector<Param> ps;
    for (const auto& [obj, out] : params) {
      Param p;
      if (std::holds_alternative<Buffer>(obj)) p.buffer = std::get<Buffer>(obj);
      else p.scalar = std::get<Var>(obj);
      p.is_output = out;
      ps.push_back(std::move(p));
    }
    return std::make_shared<KernelNode>(std::move(name), std::move(ps), std::move(block_vars), std::move(grid),
                                        std::move(body), to_span(s), sub_block_var ? std::move(*sub_block_var) : Var{});
  }, "name"_a, "params"_a, "block_vars"_a, "grid"_a, "body"_a, "span"_a = nb::none(), "sub_block_var"_a = nb::none());

  // ------------------------------------------------------------------------------------------
  // Text form (ir/printer.h, ir/parser.h) and verifier (ir/verifier.h)
  m.def("print_kernel", [](const Kernel& k, bool spans) { return print(k, PrintOptions{spans}); },
        "kernel"_a, "spans"_a = false);
  m.def("print_stmt", [](const Stmt& s, bool spans) { return print(s, PrintOptions{spans}); },
        "stmt"_a, "spans"_a = false);
  m.def("print_expr", [](const Expr& e) { return print(e); }, "expr"_a);
  m.def("extent_bound", &extent_bound, "extent"_a);
  m.def("parse_kernel", [](const std::string& text, const std::string& filename) { return parse_kernel(text, filename); },
        "text"_a, "filename"_a = "<text>");
  m.def("verify", [](const Kernel& k) { verify(k); }, "kernel"_a);
}
