// Tile IR: data types, errors, and the expression builders with their typing rules.
#include "tilewright/ir.h"

#include <algorithm>
#include <array>
#include <limits>
#include <fstream>
#include <sstream>

namespace tw::ir {

// ---------------------------------------------------------------------------------------------
// Errors

static std::string read_source_line(const std::string& file, int line) {
  if (file.empty() || line <= 0) return {};
  std::ifstream in(file);
  std::string text;
  for (int i = 1; i <= line && std::getline(in, text); ++i) {
    if (i == line) return text;
  }
  return {};
}

std::string format_error(const std::string& message, const Span& span, const std::string& hint, const char* kind) {
  std::ostringstream os;
  if (span.known()) {
    os << (span.file.empty() ? "<kernel>" : span.file) << ":" << span.line;
    if (span.col > 0) os << ":" << span.col;
    os << ": ";
  }
  os << kind << ": " << message;
  std::string src = read_source_line(span.file, span.line);
  if (!src.empty()) {
    os << "\n    " << src << "\n    ";
    for (int i = 1; i < span.col && i <= static_cast<int>(src.size()); ++i) os << (src[i - 1] == '\t' ? '\t' : ' ');
    os << "^";
  }
  if (!hint.empty()) os << "\n  hint: " << hint;
  return os.str();
}

Error::Error(std::string message, Span span, std::string hint)
    : std::runtime_error(format_error(message, span, hint)),
      message_(std::move(message)),
      span_(std::move(span)),
      hint_(std::move(hint)) {}

// ---------------------------------------------------------------------------------------------
// Data types

namespace {
struct DTypeInfo {
  DTypeCode code;
  std::string_view name;
  int bits;
  bool is_float, is_int;
};
#define TW_DTYPE_ROW(e, name, bits, is_float, is_int) {DTypeCode::e, name, bits, is_float, is_int},
constexpr std::array<DTypeInfo, enum_count<DTypeCode>> kDTypes{{TW_DTYPES(TW_DTYPE_ROW)}};
#undef TW_DTYPE_ROW
const DTypeInfo& info(DTypeCode c) { return kDTypes[static_cast<size_t>(c)]; }
}  // namespace

int DType::bits() const { return info(code).bits; }
bool DType::is_float() const { return info(code).is_float; }
bool DType::is_int() const { return info(code).is_int; }
std::string_view DType::name() const { return info(code).name; }

std::optional<DType> parse_dtype(std::string_view n) {
  for (const auto& d : kDTypes)
    if (d.name == n) return DType(d.code);
  struct Alias { std::string_view a; DTypeCode c; };
  static constexpr Alias aliases[] = {
      {"fp16", DTypeCode::f16}, {"half", DTypeCode::f16}, {"float16_t", DTypeCode::f16},
      {"bf16", DTypeCode::bf16}, {"fp32", DTypeCode::f32}, {"float", DTypeCode::f32},
      {"fp64", DTypeCode::f64}, {"double", DTypeCode::f64}, {"int", DTypeCode::i32},
      {"bool_", DTypeCode::boolean}, {"boolean", DTypeCode::boolean}};
  for (const auto& a : aliases)
    if (a.a == n) return DType(a.c);
  return std::nullopt;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a.is_bool()) return b;
  if (b.is_bool()) return a;
  if (a.is_float() != b.is_float()) return a.is_float() ? a : b;
  if (a.is_float()) {  // both float
    if (a.bits() == b.bits()) return DTypeCode::f32;  // f16 with bf16
    return a.bits() > b.bits() ? a : b;
  }
  // both int: wider wins; u8 with i8 -> i32
  if (a.bits() == b.bits()) return DTypeCode::i32;
  return a.bits() > b.bits() ? a : b;
}

// ---------------------------------------------------------------------------------------------
// Names of enums (one table each; the text form uses them)

// Each table is generated from its list in ir.h, so entry i names enumerator i.
namespace {
template <class E, size_t N>
std::string_view enum_name(const std::array<std::string_view, N>& names, E e) {
  static_assert(N == enum_count<E>);
  return names[static_cast<size_t>(e)];
}
template <class E, size_t N>
std::optional<E> enum_parse(const std::array<std::string_view, N>& names, std::string_view s) {
  static_assert(N == enum_count<E>);
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}
#define TW_SPELLING(e, ...) #e,
#define TW_SECOND(e, x, ...) x,
#define TW_THIRD(e, x, y, ...) y,
#define TW_FOURTH(e, x, y, z, ...) z,
constexpr std::array<std::string_view, enum_count<Scope>> kScopeNames{TW_SCOPES(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<ExprKind>> kExprKindNames{TW_EXPR_KINDS(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<StmtKind>> kStmtKindNames{TW_STMT_KINDS(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<BinOp>> kBinOpNames{TW_BINOPS(TW_SECOND)};
constexpr std::array<std::string_view, enum_count<BinOp>> kBinOpSymbols{TW_BINOPS(TW_THIRD)};
constexpr std::array<int, enum_count<BinOp>> kBinOpPrec{TW_BINOPS(TW_FOURTH)};
constexpr std::array<std::string_view, enum_count<UnOp>> kUnOpNames{TW_UNOPS(TW_SECOND)};
constexpr std::array<std::string_view, enum_count<UnOp>> kUnOpSymbols{TW_UNOPS(TW_THIRD)};
constexpr std::array<std::string_view, enum_count<MathFn>> kMathNames{TW_MATH_FNS(TW_SPELLING)};
constexpr std::array<int, enum_count<MathFn>> kMathArity{TW_MATH_FNS(TW_SECOND)};
constexpr std::array<bool, enum_count<MathFn>> kMathTakesInt{TW_MATH_FNS(TW_THIRD)};
constexpr std::array<std::string_view, enum_count<MathFn>> kMathDocs{TW_MATH_FNS(TW_FOURTH)};
constexpr std::array<std::string_view, enum_count<ForKind>> kForKindNames{TW_FOR_KINDS(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<ReduceKind>> kReduceNames{TW_REDUCE_KINDS(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<CoreKind>> kCoreNames{TW_CORE_KINDS(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<AscendPipe>> kPipeNames{TW_ASCEND_PIPES(TW_SPELLING)};
constexpr std::array<std::string_view, enum_count<SyncKind>> kSyncNames{TW_SYNC_KINDS(TW_SPELLING)};
#undef TW_SPELLING
#undef TW_SECOND
#undef TW_THIRD
#undef TW_FOURTH
}  // namespace

std::string_view scope_name(Scope s) { return enum_name(kScopeNames, s); }
std::optional<Scope> parse_scope(std::string_view n) { return enum_parse<Scope>(kScopeNames, n); }
std::string_view exprkind_name(ExprKind k) { return enum_name(kExprKindNames, k); }
std::string_view stmtkind_name(StmtKind k) { return enum_name(kStmtKindNames, k); }
std::string_view binop_name(BinOp op) { return enum_name(kBinOpNames, op); }
std::optional<BinOp> parse_binop(std::string_view n) { return enum_parse<BinOp>(kBinOpNames, n); }
std::string_view binop_symbol(BinOp op) {
  std::string_view sym = enum_name(kBinOpSymbols, op);
  return sym.empty() ? binop_name(op) : sym;
}
int binop_prec(BinOp op) { return kBinOpPrec[static_cast<size_t>(op)]; }
std::string_view unop_name(UnOp op) { return enum_name(kUnOpNames, op); }
std::optional<UnOp> parse_unop(std::string_view n) { return enum_parse<UnOp>(kUnOpNames, n); }
std::string_view unop_symbol(UnOp op) { return enum_name(kUnOpSymbols, op); }
std::string_view mathfn_name(MathFn f) { return enum_name(kMathNames, f); }
std::optional<MathFn> parse_mathfn(std::string_view n) { return enum_parse<MathFn>(kMathNames, n); }
int mathfn_arity(MathFn f) { return kMathArity[static_cast<size_t>(f)]; }
bool mathfn_takes_int(MathFn f) { return kMathTakesInt[static_cast<size_t>(f)]; }
std::string_view mathfn_doc(MathFn f) { return enum_name(kMathDocs, f); }
std::string_view forkind_name(ForKind k) { return enum_name(kForKindNames, k); }
std::optional<ForKind> parse_forkind(std::string_view n) { return enum_parse<ForKind>(kForKindNames, n); }
std::string_view reducekind_name(ReduceKind k) { return enum_name(kReduceNames, k); }
std::optional<ReduceKind> parse_reducekind(std::string_view n) { return enum_parse<ReduceKind>(kReduceNames, n); }
std::string_view corekind_name(CoreKind c) { return enum_name(kCoreNames, c); }
std::optional<CoreKind> parse_corekind(std::string_view n) { return enum_parse<CoreKind>(kCoreNames, n); }
std::string_view pipe_name(AscendPipe p) { return enum_name(kPipeNames, p); }
std::optional<AscendPipe> parse_pipe(std::string_view n) { return enum_parse<AscendPipe>(kPipeNames, n); }
std::string_view synckind_name(SyncKind k) { return enum_name(kSyncNames, k); }
std::optional<SyncKind> parse_synckind(std::string_view n) { return enum_parse<SyncKind>(kSyncNames, n); }

// ---------------------------------------------------------------------------------------------
// Nodes

LoadNode::LoadNode(Buffer b, std::vector<Expr> i, DType t, Span s)
    : ExprNode(ExprKind::Load, t, std::move(s)), buffer(std::move(b)), indices(std::move(i)) {
  height = node_height({ir::height(indices)}, span);
}

// The cpu target's decisions (src/target/cpu/: each name's meaning is in the pass that writes it).
const std::vector<AnnotationInfo> kAnnotations = {
    {"fuse_copy_out", StmtKind::For, 0, StmtKind::Copy},  // fuse_map_copy_out
    {"fuse_reduce", StmtKind::For, 1, StmtKind::Reduce},  // fuse_map_reduce
    {"gemm_view", StmtKind::Alloc, 1, std::nullopt},     // view_gemm_operands
    {"gemm_out", StmtKind::Alloc, 1, std::nullopt},      // view_gemm_operands
    {"row_view", StmtKind::Alloc, 2, std::nullopt},      // view_rows
    {"row_pipeline", StmtKind::Copy, 1, std::nullopt},   // pipeline_rows
    {"prefetch_next", StmtKind::Copy, 1, std::nullopt},  // prefetch_gathers
    {"prefetch_slices", StmtKind::Copy, 1, std::nullopt},  // prefetch_gathers
    {"nan_unobserved", StmtKind::Reduce, 0, std::nullopt},  // mark_nan_unobserved (kept by rebuilds)
};

namespace {
template <class T>
Stmt copy_node(const Stmt& s, Annotation& a) {
  auto c = std::make_shared<T>(*as<T>(s));
  c->annotations.push_back(std::move(a));
  return c;
}
}  // namespace

Stmt with_annotation(const Stmt& s, Annotation a) {
  switch (s->kind) {
    case StmtKind::Seq: return copy_node<SeqNode>(s, a);
    case StmtKind::For: return copy_node<ForNode>(s, a);
    case StmtKind::If: return copy_node<IfNode>(s, a);
    case StmtKind::Let: return copy_node<LetNode>(s, a);
    case StmtKind::Store: return copy_node<StoreNode>(s, a);
    case StmtKind::Alloc: return copy_node<AllocNode>(s, a);
    case StmtKind::Copy: return copy_node<CopyNode>(s, a);
    case StmtKind::Gemm: return copy_node<GemmNode>(s, a);
    case StmtKind::Fill: return copy_node<FillNode>(s, a);
    case StmtKind::Reduce: return copy_node<ReduceNode>(s, a);
    case StmtKind::CoreScope: return copy_node<CoreScopeNode>(s, a);
    case StmtKind::Sync: return copy_node<SyncNode>(s, a);
  }
  return s;
}

Stmt body_form(Stmt s) {
  while (s && s->kind == StmtKind::Seq && s->annotations.empty() && as<SeqNode>(s)->body.size() == 1)
    s = as<SeqNode>(s)->body[0];
  return s;
}

std::vector<Stmt> stmts_of(const Stmt& s) {
  if (!s) return {};
  if (s->kind == StmtKind::Seq) return as<SeqNode>(s)->body;
  return {s};
}

const Annotation* find_annotation(const Stmt& s, std::string_view name) {
  if (!s) return nullptr;
  for (const auto& a : s->annotations)
    if (a.name == name) return &a;
  return nullptr;
}

int height(const Expr& e) { return e ? e->height : 0; }
int height(const Stmt& s) { return s ? s->height : 0; }
int height(const std::vector<Expr>& v) {
  int h = 0;
  for (const auto& e : v) h = std::max(h, height(e));
  return h;
}
int height(const std::vector<Stmt>& v) {
  int h = 0;
  for (const auto& s : v) h = std::max(h, height(s));
  return h;
}
std::optional<RuntimeExtent> runtime_extent(const Expr& extent) {
  if (!extent || extent->kind != ExprKind::Binary) return std::nullopt;
  auto* b = as<BinaryNode>(extent);
  if (b->op != BinOp::Min) return std::nullopt;
  auto ca = as_const_int(b->a), cb = as_const_int(b->b);
  if (ca.has_value() == cb.has_value()) return std::nullopt;  // min(C, e) or min(e, C) (simplify's order)
  int64_t c = ca ? *ca : *cb;
  if (c < 1) return std::nullopt;
  return RuntimeExtent{c, ca ? b->b : b->a};
}

std::optional<int64_t> extent_bound(const Expr& extent) {
  if (auto c = as_const_int(extent)) return c;
  if (auto r = runtime_extent(extent)) return r->bound;
  return std::nullopt;
}

int height(const Region& r) { return std::max(height(r.starts), height(r.extents)); }

int node_height(std::initializer_list<int> children, const Span& at) {
  int h = 0;
  for (int c : children) h = std::max(h, c);
  if (h >= kMaxIrHeight)
    throw Error("the IR is nested more than " + std::to_string(kMaxIrHeight) +
                    " levels deep here (an expression, or statements with the expressions in them)",
                at,
                "split deep expressions with intermediate variables (let) or build long sums and products as "
                "balanced trees; compiler passes recurse over the IR");
  return h + 1;
}

std::optional<std::vector<int64_t>> BufferNode::const_shape() const {
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    auto v = as_const_int(d);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<size_t> flattened_dims(const std::vector<int64_t>& wide, const std::vector<int64_t>& narrow) {
  if (narrow.empty() || wide.size() <= narrow.size()) return std::nullopt;
  size_t k = wide.size() - narrow.size();
  int64_t flat = 1;
  for (size_t j = 0; j <= k; ++j) {
    if (wide[j] < 0) return std::nullopt;
    flat *= wide[j];
  }
  if (narrow[0] < 0 || flat != narrow[0]) return std::nullopt;
  for (size_t j = 1; j < narrow.size(); ++j)
    if (narrow[j] < 0 || wide[k + j] != narrow[j]) return std::nullopt;
  return k;
}

Region full_region(const Buffer& b) {
  Region r{b, {}, {}};
  for (const auto& d : b->shape) {
    r.starts.push_back(int_imm(0));
    r.extents.push_back(d);
  }
  return r;
}

std::pair<size_t, size_t> gemm_matrix_dims(const Region& r) {
  const size_t n = r.extents.size(), cols = n - 1;
  if (r.buffer->scope != Scope::global) return {n - 2, cols};
  for (size_t d = cols; d-- > 0;)
    if (as_const_int(r.extents[d]) != 1) return {d, cols};
  return {n - 2, cols};
}

std::vector<Var> KernelNode::shape_vars() const {
  std::vector<Var> out;
  auto add = [&](const Expr& e, auto&& self) -> void {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::Var: {
        auto v = std::static_pointer_cast<const VarNode>(e);
        for (const auto& o : out)
          if (o == v) return;
        out.push_back(v);
        return;
      }
      case ExprKind::Binary: {
        auto* b = static_cast<const BinaryNode*>(e.get());
        self(b->a, self);
        self(b->b, self);
        return;
      }
      case ExprKind::Unary: self(static_cast<const UnaryNode*>(e.get())->a, self); return;
      case ExprKind::Cast: self(static_cast<const CastNode*>(e.get())->value, self); return;
      case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Call: case ExprKind::Select:
      case ExprKind::Load:
        return;
    }
  };
  for (const auto& p : params)
    if (p.buffer)
      for (const auto& d : p.buffer->shape) add(d, add);
  return out;
}

Kernel with_outputs(const Kernel& k, const std::vector<int>& indices) {
  std::vector<Param> params = k->params;
  for (int i : indices) {
    if (i < 0 || i >= static_cast<int>(params.size()))
      throw Error("output index " + std::to_string(i) + " is out of range for kernel '" + k->name + "' with " +
                      std::to_string(params.size()) + " parameters",
                  k->span);
    if (!params[i].buffer)
      throw Error("parameter '" + params[i].name() + "' of kernel '" + k->name + "' is a scalar and cannot be an output",
                  k->span, "out_idx must name tensor parameters");
    params[i].is_output = true;
  }
  return std::make_shared<KernelNode>(k->name, params, k->block_vars, k->grid, k->body, k->span, k->sub_block_var);
}

// ---------------------------------------------------------------------------------------------
// Builders

Expr int_imm(int64_t v, DType t, Span s) {
  if (!t.is_int() && !t.is_bool()) throw Error("int_imm needs an integer dtype, got " + std::string(t.name()), s);
  return std::make_shared<IntImmNode>(v, t, std::move(s));
}
Expr float_imm(double v, DType t, Span s) {
  if (!t.is_float()) throw Error("float_imm needs a float dtype, got " + std::string(t.name()), s);
  return std::make_shared<FloatImmNode>(v, t, std::move(s));
}
Var var(std::string name, DType t, Span s) { return std::make_shared<VarNode>(std::move(name), t, std::move(s)); }

namespace {
bool is_literal(const Expr& e) { return e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm; }

// A literal adopts the type of the other operand when that loses nothing essential
// (an int literal next to any number, a float literal next to a float).
Expr retype_literal(const Expr& lit, DType t) {
  if (lit->dtype == t) return lit;
  if (lit->kind == ExprKind::IntImm) {
    int64_t v = static_cast<const IntImmNode*>(lit.get())->value;
    if (t.is_float()) return float_imm(static_cast<double>(v), t, lit->span);
    return int_imm(v, t, lit->span);
  }
  double v = static_cast<const FloatImmNode*>(lit.get())->value;
  return float_imm(v, t, lit->span);
}

void unify(Expr& a, Expr& b) {
  if (a->dtype == b->dtype) return;
  bool la = is_literal(a), lb = is_literal(b);
  if (la && !lb && !(a->kind == ExprKind::FloatImm && !b->dtype.is_float())) { a = retype_literal(a, b->dtype); return; }
  if (lb && !la && !(b->kind == ExprKind::FloatImm && !a->dtype.is_float())) { b = retype_literal(b, a->dtype); return; }
  DType t = promote(a->dtype, b->dtype);
  if (a->dtype != t) a = is_literal(a) ? retype_literal(a, t) : cast(a, t, a->span);
  if (b->dtype != t) b = is_literal(b) ? retype_literal(b, t) : cast(b, t, b->span);
}

bool is_compare(BinOp op) { return op >= BinOp::EQ && op <= BinOp::GE; }
bool is_bitwise(BinOp op) { return op >= BinOp::BitAnd && op <= BinOp::Shr; }

void check_bitwise(std::string_view what, DType t, const Span& s) {
  if (t.is_int()) return;
  throw Error(std::string(what) + " needs integer operands, got " + std::string(t.name()), s,
              t.is_bool() ? "on bools use and / or / not (or & | ^ ~ between bool values in Python)"
                          : "bitwise operators and shifts act on integers (int8, uint8, int32, int64); "
                            "convert first, e.g. T.cast(x, \"int32\")");
}
}  // namespace

Expr binary(BinOp op, Expr a, Expr b, Span s) {
  if (!a || !b) throw Error("binary operation on a missing operand", s);
  if (op == BinOp::And || op == BinOp::Or) {
    if (!a->dtype.is_bool() || !b->dtype.is_bool())
      throw Error(std::string("'") + std::string(binop_name(op)) + "' needs bool operands, got " +
                      std::string(a->dtype.name()) + " and " + std::string(b->dtype.name()),
                  s, "compare values first, e.g. (i < n) and (j < m)");
    return std::make_shared<BinaryNode>(op, std::move(a), std::move(b), DTypeCode::boolean, std::move(s));
  }
  unify(a, b);
  DType t = a->dtype;
  if (op == BinOp::Div && !t.is_float()) {
    // True division of ints yields float32, as in Python.
    a = cast(a, DTypeCode::f32, a->span);
    b = cast(b, DTypeCode::f32, b->span);
    t = DTypeCode::f32;
  }
  if ((op == BinOp::FloorDiv || op == BinOp::CeilDiv || op == BinOp::Mod) && !t.is_int())
    if (op != BinOp::Mod || !t.is_float())
      throw Error(std::string(binop_name(op)) + " needs integer operands, got " + std::string(t.name()), s);
  if (is_bitwise(op)) check_bitwise("'" + std::string(binop_symbol(op)) + "'", t, s);
  if (is_compare(op)) t = DTypeCode::boolean;
  return std::make_shared<BinaryNode>(op, std::move(a), std::move(b), t, std::move(s));
}

Expr unary(UnOp op, Expr a, Span s) {
  if (op == UnOp::Not && !a->dtype.is_bool())
    throw Error("'not' needs a bool operand, got " + std::string(a->dtype.name()), s);
  if (op == UnOp::BitNot) check_bitwise("'~'", a->dtype, s);
  DType t = a->dtype;
  return std::make_shared<UnaryNode>(op, std::move(a), t, std::move(s));
}

Expr call(MathFn fn, std::vector<Expr> args, Span s) {
  size_t want = static_cast<size_t>(mathfn_arity(fn));
  if (args.size() != want)
    throw Error(std::string(mathfn_name(fn)) + " takes " + std::to_string(want) + " argument(s), got " +
                    std::to_string(args.size()),
                s);
  if (mathfn_takes_int(fn) && args[0]->dtype.is_int())
    return std::make_shared<CallNode>(fn, std::move(args), args[0]->dtype, std::move(s));
  // one type for all the arguments (fma's three: pairwise until they agree; types only rise)
  for (int pass = 0; pass < 3; ++pass)
    for (size_t i = 1; i < args.size(); ++i) unify(args[0], args[i]);
  for (auto& a : args)
    if (!a->dtype.is_float()) a = is_literal(a) ? retype_literal(a, DTypeCode::f32) : cast(a, DTypeCode::f32, a->span);
  DType t = args[0]->dtype;
  return std::make_shared<CallNode>(fn, std::move(args), t, std::move(s));
}

bool computed_wider(const Expr& v) {
  const DType t = v->dtype;
  const bool narrow_int = t.is_int() && t.code != DTypeCode::i64;
  const bool half = t.code == DTypeCode::f16 || t.code == DTypeCode::bf16;
  if (!narrow_int && !half) return false;
  switch (v->kind) {
    case ExprKind::Binary: case ExprKind::Unary: case ExprKind::Call: return true;
    case ExprKind::Select: {
      auto* n = static_cast<const SelectNode*>(v.get());
      return computed_wider(n->t) || computed_wider(n->f);
    }
    default: return false;  // a load, a variable, a constant or a cast holds a value of its dtype
  }
}

Expr cast(Expr v, DType t, Span s) {
  if (v->dtype == t) return v;  // the passes' cast; the language's T.cast keeps a conversion (bind_ir: convert)
  // an integer constant converts to an integer type now, modulo 2^bits as at run time (docs/language.md
  // "Dtype conversions"): a target then never converts it itself (ascend910b's Duplicate and Cast saturate)
  if (v->kind == ExprKind::IntImm && t.is_int())
    return int_imm(wrap_int(static_cast<const IntImmNode*>(v.get())->value, t), t, std::move(s));
  return std::make_shared<CastNode>(std::move(v), t, std::move(s));
}

Expr select(Expr c, Expr t, Expr f, Span s) {
  if (!c->dtype.is_bool())
    throw Error("the condition of where() must be bool, got " + std::string(c->dtype.name()), s,
                "use a comparison, e.g. T.where(x > 0, x, 0)");
  unify(t, f);
  DType ty = t->dtype;
  return std::make_shared<SelectNode>(std::move(c), std::move(t), std::move(f), ty, std::move(s));
}

Expr load(Buffer b, std::vector<Expr> indices, Span s) {
  if (static_cast<int>(indices.size()) != b->ndim())
    throw Error("buffer '" + b->name + "' has " + std::to_string(b->ndim()) + " dimension(s) but is indexed with " +
                    std::to_string(indices.size()),
                s);
  for (const auto& i : indices)
    if (!i->dtype.is_int())
      throw Error("index into '" + b->name + "' must be an integer, got " + std::string(i->dtype.name()), s);
  DType t = b->dtype;
  return std::make_shared<LoadNode>(std::move(b), std::move(indices), t, std::move(s));
}

Buffer buffer(std::string name, DType t, std::vector<Expr> shape, Scope scope, Span s) {
  for (const auto& d : shape) {
    if (!d->dtype.is_int())
      throw Error("dimension of '" + name + "' must be an integer, got " + std::string(d->dtype.name()), s);
    auto c = as_const_int(d);
    if (c && *c <= 0)
      throw Error("dimension of '" + name + "' must be positive, got " + std::to_string(*c), s);
    if (!c && scope != Scope::global)
      throw Error("tile buffer '" + name + "' must have a constant shape", s,
                  "tile sizes are compile-time constants; pass them as Python ints to the @tw.jit function");
  }
  return std::make_shared<BufferNode>(std::move(name), t, std::move(shape), scope, std::move(s));
}

// Python (floor) division and modulo; nullopt on division by zero or overflow.
namespace {
std::optional<int64_t> floordiv_checked(int64_t a, int64_t b) {
  if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

int shift_count(int64_t count, DType t) {
  const int bits = t.is_int() ? t.bits() : 64;
  return static_cast<int>(static_cast<uint64_t>(count) & static_cast<uint64_t>(bits - 1));
}

int64_t wrap_int(int64_t v, DType t) {
  switch (t.code) {
    case DTypeCode::i8: return static_cast<int8_t>(v);
    case DTypeCode::u8: return static_cast<uint8_t>(v);
    case DTypeCode::i32: return static_cast<int32_t>(v);
    case DTypeCode::boolean: return v != 0;
    case DTypeCode::i64: case DTypeCode::f16: case DTypeCode::bf16: case DTypeCode::f32: case DTypeCode::f64:
      return v;
  }
  return v;  // not reached: the switch lists every enumerator
}

std::optional<int64_t> fold_int_binary(BinOp op, int64_t a, int64_t b, DType t) {
  int64_t r = 0;
  switch (op) {
    case BinOp::Add: if (__builtin_add_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::Sub: if (__builtin_sub_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::Mul: if (__builtin_mul_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::FloorDiv: return floordiv_checked(a, b);
    case BinOp::CeilDiv: {
      if (a == std::numeric_limits<int64_t>::min()) return std::nullopt;
      auto q = floordiv_checked(-a, b);
      if (!q) return std::nullopt;
      return -*q;
    }
    case BinOp::Mod: {
      auto q = floordiv_checked(a, b);
      if (!q) return std::nullopt;
      return a - *q * b;
    }
    case BinOp::Min: return a < b ? a : b;
    case BinOp::Max: return a > b ? a : b;
    case BinOp::EQ: return a == b;
    case BinOp::NE: return a != b;
    case BinOp::LT: return a < b;
    case BinOp::LE: return a <= b;
    case BinOp::GT: return a > b;
    case BinOp::GE: return a >= b;
    case BinOp::BitAnd: return a & b;
    case BinOp::BitOr: return a | b;
    case BinOp::BitXor: return a ^ b;
    case BinOp::Shl: return static_cast<int64_t>(static_cast<uint64_t>(a) << shift_count(b, t));
    case BinOp::Shr: return wrap_int(a, t) >> shift_count(b, t);  // arithmetic (C++20); uint8 wraps to >= 0
    case BinOp::Div: case BinOp::And: case BinOp::Or: return std::nullopt;
  }
  return std::nullopt;  // not reached: the switch lists every enumerator
}

std::optional<int64_t> as_const_int(const Expr& e) {
  if (!e) return std::nullopt;
  switch (e->kind) {
    case ExprKind::IntImm: return static_cast<const IntImmNode*>(e.get())->value;
    case ExprKind::Cast: {
      auto* c = static_cast<const CastNode*>(e.get());
      if (!c->dtype.is_int()) return std::nullopt;
      auto v = as_const_int(c->value);  // modulo 2^bits, as the conversion at run time
      if (!v) return std::nullopt;
      return wrap_int(*v, c->dtype);
    }
    case ExprKind::Unary: {
      auto* u = static_cast<const UnaryNode*>(e.get());
      auto v = as_const_int(u->a);
      if (!v) return std::nullopt;
      switch (u->op) {
        case UnOp::BitNot: return ~*v;
        case UnOp::Neg: if (*v == std::numeric_limits<int64_t>::min()) return std::nullopt; return -*v;
        case UnOp::Not: return std::nullopt;
      }
      return std::nullopt;  // not reached: the switch lists every enumerator
    }
    case ExprKind::Binary: {
      auto* b = static_cast<const BinaryNode*>(e.get());
      if (!b->dtype.is_int()) return std::nullopt;
      auto x = as_const_int(b->a), y = as_const_int(b->b);
      if (!x || !y) return std::nullopt;
      return fold_int_binary(b->op, *x, *y, b->dtype);
    }
    case ExprKind::FloatImm: case ExprKind::Var: case ExprKind::Call: case ExprKind::Select: case ExprKind::Load:
      return std::nullopt;
  }
  return std::nullopt;  // not reached: the switch lists every enumerator
}

}  // namespace tw::ir
