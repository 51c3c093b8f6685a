// Tile IR: the one intermediate representation every front end builds and every target lowers.
//
// Nodes are immutable after construction (passes build new nodes) and shared by pointer.
// Every node carries a Span: the user's source position, used by every error message.
// The text form is produced by print() and read back by parse() (ir/printer.h, ir/parser.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tw::ir {

// ---------------------------------------------------------------------------------------------
// The IR's lists, each defined once.
//
// Every enum of the IR is an X-macro list: the enum, its name table and its parser (name <-> enum)
// are generated from the same list (below and in ir.cpp), so a name can never drift from its
// enumerator, and the Python module exports the lists (bind_ir.cpp) for the front end's names.
// A new entry is one line here; -Wswitch then names every switch that must handle it (switches
// over these enums list every enumerator, never `default:`).

// X(enumerator, canonical name, bits, is_float, is_int)
#define TW_DTYPES(X)                       \
  X(f16, "float16", 16, true, false)       \
  X(bf16, "bfloat16", 16, true, false)     \
  X(f32, "float32", 32, true, false)       \
  X(f64, "float64", 64, true, false)       \
  X(i8, "int8", 8, false, true)            \
  X(i32, "int32", 32, false, true)         \
  X(i64, "int64", 64, false, true)         \
  X(u8, "uint8", 8, false, true)           \
  X(boolean, "bool", 1, false, false)

// X(enumerator): the name is the enumerator's spelling.
#define TW_SCOPES(X) X(global) X(shared) X(fragment) X(L1) X(L0A) X(L0B) X(L0C) X(UB)

// X(enumerator, node struct)
#define TW_EXPR_KINDS(X)                                                                        \
  X(IntImm, IntImmNode) X(FloatImm, FloatImmNode) X(Var, VarNode) X(Binary, BinaryNode)      \
  X(Unary, UnaryNode) X(Call, CallNode) X(Cast, CastNode) X(Select, SelectNode) X(Load, LoadNode)

// X(enumerator, node struct)
#define TW_STMT_KINDS(X)                                                                        \
  X(Seq, SeqNode) X(For, ForNode) X(If, IfNode) X(Let, LetNode) X(Store, StoreNode)          \
  X(Alloc, AllocNode) X(Copy, CopyNode) X(Gemm, GemmNode) X(Fill, FillNode)                  \
  X(Reduce, ReduceNode) X(CoreScope, CoreScopeNode) X(Sync, SyncNode)

// X(enumerator, text-form name, infix symbol ("" = printed as a call name(a, b)), precedence of
// the infix form (higher binds tighter, Python's order: or < and < not < comparisons < | < ^ < &
// < shifts < + - < * / // % < unary - ~ < kCallPrec = a call or an atom), Python ast class
// ("" = none), Python `operator` function ("" = none)). And/Or are the logical `and`/`or` on
// bools; BitAnd .. Shr are the bitwise operators and shifts on integers (docs/language.md).
#define TW_BINOPS(X)                                          \
  X(Add, "add", "+", 9, "Add", "add")                         \
  X(Sub, "sub", "-", 9, "Sub", "sub")                         \
  X(Mul, "mul", "*", 10, "Mult", "mul")                       \
  X(Div, "div", "/", 10, "Div", "truediv")                    \
  X(FloorDiv, "floordiv", "//", 10, "FloorDiv", "floordiv")   \
  X(CeilDiv, "ceildiv", "", 12, "", "")                       \
  X(Mod, "mod", "%", 10, "Mod", "mod")                        \
  X(Min, "min", "", 12, "", "")                               \
  X(Max, "max", "", 12, "", "")                               \
  X(EQ, "eq", "==", 4, "Eq", "eq")                            \
  X(NE, "ne", "!=", 4, "NotEq", "ne")                         \
  X(LT, "lt", "<", 4, "Lt", "lt")                             \
  X(LE, "le", "<=", 4, "LtE", "le")                           \
  X(GT, "gt", ">", 4, "Gt", "gt")                             \
  X(GE, "ge", ">=", 4, "GtE", "ge")                           \
  X(And, "and", "and", 2, "And", "")                          \
  X(Or, "or", "or", 1, "Or", "")                              \
  X(BitAnd, "bitand", "&", 7, "BitAnd", "and_")               \
  X(BitOr, "bitor", "|", 5, "BitOr", "or_")                   \
  X(BitXor, "bitxor", "^", 6, "BitXor", "xor")                \
  X(Shl, "shl", "<<", 8, "LShift", "lshift")                  \
  X(Shr, "shr", ">>", 8, "RShift", "rshift")

// Precedences of the text form beyond TW_BINOPS: `not x`, the unary `-x` and `~x` (and a negative
// literal), and a call or an atom (never parenthesised).
inline constexpr int kNotPrec = 3, kUnaryPrec = 11, kCallPrec = 12;

// X(enumerator, text-form name, prefix symbol of the text form). BitNot is `~` on integers.
#define TW_UNOPS(X) X(Neg, "neg", "-") X(Not, "not", "not ") X(BitNot, "bitnot", "~")

// Elementwise math functions: X(name, arity, takes ints (abs keeps an int type; the others convert
// an int argument to float32), the T.<name> docstring). The name is the enumerator, the text form
// and the DSL's T.<name>. A new function is one line here plus one row per target (see
// docs/architecture.md, "Adding an op").
#define TW_MATH_FNS(X)                                \
  X(exp, 1, false, "e**x")                            \
  X(exp2, 1, false, "2**x")                           \
  X(log, 1, false, "natural logarithm")               \
  X(log2, 1, false, "base-2 logarithm")               \
  X(sqrt, 1, false, "square root")                    \
  X(rsqrt, 1, false, "1 / sqrt(x)")                   \
  X(abs, 1, true, "absolute value")                   \
  X(tanh, 1, false, "hyperbolic tangent")             \
  X(erf, 1, false, "error function")                  \
  X(sigmoid, 1, false, "1 / (1 + exp(-x))")           \
  X(floor, 1, false, "round down")                    \
  X(ceil, 1, false, "round up")                       \
  X(pow, 2, false, "x ** y")                          \
  X(silu, 1, false, "x * sigmoid(x)")                  \
  X(fma, 3, false, "x * y + z rounded once (a fused multiply-add)") \
  X(sin, 1, false, "sine (|x| <= 400000; NaN beyond)")             \
  X(cos, 1, false, "cosine (|x| <= 400000; NaN beyond)")

// X(enumerator): the name is the enumerator's spelling.
#define TW_FOR_KINDS(X) X(serial) X(parallel) X(pipelined) X(unroll)
#define TW_REDUCE_KINDS(X) X(sum) X(max) X(min)
#define TW_CORE_KINDS(X) X(C) X(V)
#define TW_ASCEND_PIPES(X) X(S) X(V) X(M) X(MTE1) X(MTE2) X(MTE3) X(FIX) X(ALL)
#define TW_SYNC_KINDS(X) X(set_flag) X(wait_flag) X(pipe_barrier) X(set_cross_flag) X(wait_cross_flag)

// Helpers: the enumerator of an entry (first argument) followed by a comma, and the count.
#define TW_ENUMERATOR(e, ...) e,
#define TW_COUNT_ONE(...) +1

// The number of enumerators of an IR enum, and all of them in order: enum_count<MathFn>,
// for (MathFn f : all_of<MathFn>()).
template <class E>
struct EnumList;
template <class E>
inline constexpr size_t enum_count = EnumList<E>::values.size();
template <class E>
constexpr const auto& all_of() { return EnumList<E>::values; }

// ---------------------------------------------------------------------------------------------
// Source positions and errors

struct Span {
  std::string file;  // absolute path of the user's source file ("" when unknown)
  int line = 0;      // 1-based; 0 = unknown
  int col = 0;       // 1-based column of the construct; 0 = unknown
  bool known() const { return line > 0; }
};

// The single user-facing error type of the compiler. what() is the fully formatted message:
//   <file>:<line>:<col>: error: <message>
//       <source line>
//       ^
//   hint: <how to fix it>
class Error : public std::runtime_error {
 public:
  Error(std::string message, Span span = {}, std::string hint = {});
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  const Span& span() const { return span_; }

 private:
  std::string message_;
  Span span_;
  std::string hint_;
};

// Formats "file:line:col: error: msg" plus the source line and a caret (the file is read if present);
// `kind` replaces "error" (a compile note: "note").
std::string format_error(const std::string& message, const Span& span, const std::string& hint,
                         const char* kind = "error");

// ---------------------------------------------------------------------------------------------
// Data types

enum class DTypeCode : uint8_t { TW_DTYPES(TW_ENUMERATOR) };

struct DType {
  DTypeCode code = DTypeCode::f32;
  constexpr DType() = default;
  constexpr DType(DTypeCode c) : code(c) {}
  int bits() const;
  int bytes() const { return bits() == 1 ? 1 : bits() / 8; }
  bool is_float() const;  // f16 bf16 f32 f64
  bool is_int() const;    // i8 i32 i64 u8 (not bool)
  bool is_bool() const { return code == DTypeCode::boolean; }
  std::string_view name() const;  // canonical: float16 bfloat16 float32 float64 int8 int32 int64 uint8 bool
  friend bool operator==(DType a, DType b) { return a.code == b.code; }
  friend bool operator!=(DType a, DType b) { return a.code != b.code; }
};
// Accepts canonical names and the usual aliases (fp16, half, bf16, fp32, float, double, ...).
std::optional<DType> parse_dtype(std::string_view name);
// Result type of an arithmetic op on a and b: float beats int, wider beats narrower,
// f16 with bf16 gives f32, bool behaves as the narrowest int.
DType promote(DType a, DType b);

inline constexpr DType kIndexType{DTypeCode::i32};  // loop, block and shape variables

// ---------------------------------------------------------------------------------------------
// Memory scopes

enum class Scope : uint8_t { TW_SCOPES(TW_ENUMERATOR) };
std::string_view scope_name(Scope s);  // "global" "shared" "fragment" "L1" "L0A" "L0B" "L0C" "UB"
std::optional<Scope> parse_scope(std::string_view name);

// ---------------------------------------------------------------------------------------------
// Expressions

enum class ExprKind : uint8_t { TW_EXPR_KINDS(TW_ENUMERATOR) };
std::string_view exprkind_name(ExprKind k);  // "IntImm" "FloatImm" ...

// The tallest tree a node may root. Passes, printers, code generators and destructors recurse
// over the IR, so a node that would be taller (e.g. a 100,000-term sum built as a chain through the
// builders) is an Error when it is constructed, never a stack overflow later. A statement's height
// counts the expressions in it.
inline constexpr int kMaxIrHeight = 1000;

struct ExprNode {
  ExprKind kind;
  DType dtype;
  Span span;
  int height = 1;  // of the tree this node roots: 1 for a leaf (see kMaxIrHeight)
  ExprNode(ExprKind k, DType t, Span s) : kind(k), dtype(t), span(std::move(s)) {}
  virtual ~ExprNode() = default;
};
using Expr = std::shared_ptr<const ExprNode>;

// Heights of children (0 for a null one, the tallest of a list); node_height: 1 + the tallest
// child, or an Error at `at` when that is over kMaxIrHeight.
int height(const Expr& e);
int height(const std::vector<Expr>& v);
int node_height(std::initializer_list<int> children, const Span& at);

struct IntImmNode : ExprNode {
  int64_t value;
  IntImmNode(int64_t v, DType t, Span s) : ExprNode(ExprKind::IntImm, t, std::move(s)), value(v) {}
};
struct FloatImmNode : ExprNode {
  double value;
  FloatImmNode(double v, DType t, Span s) : ExprNode(ExprKind::FloatImm, t, std::move(s)), value(v) {}
};
// Variables are compared by identity (pointer), printed by name. Names are unique per kernel
// after the front end (it renames shadowed Python names).
struct VarNode : ExprNode {
  std::string name;
  VarNode(std::string n, DType t, Span s) : ExprNode(ExprKind::Var, t, std::move(s)), name(std::move(n)) {}
};
using Var = std::shared_ptr<const VarNode>;

// Div is true division (float operands; the front end casts ints), FloorDiv/Mod follow Python
// (floor) semantics on ints, CeilDiv is ceil(a / b) on ints. Comparisons and And/Or give bool.
// BitAnd/BitOr/BitXor/Shl/Shr (and UnOp::BitNot) take integer operands of one type t (b bits) and
// follow Python on t's two's complement bits: the count of a shift is taken modulo b (count &
// (b - 1), so a negative count -k shifts by b - k), `<<` gives a * 2^count (wrapped into t where t
// is stored, as every integer result), `>>` first wraps its left operand into t, then shifts
// arithmetically for signed t, logically for uint8.
enum class BinOp : uint8_t { TW_BINOPS(TW_ENUMERATOR) };
std::string_view binop_name(BinOp op);  // "add" "sub" ... as used by the text form
std::optional<BinOp> parse_binop(std::string_view name);
std::string_view binop_symbol(BinOp op);  // "+" "//" "and" ...; the name for ops printed as calls
int binop_prec(BinOp op);                 // of the infix form; kCallPrec for ops printed as calls
struct BinaryNode : ExprNode {
  BinOp op;
  Expr a, b;
  BinaryNode(BinOp o, Expr x, Expr y, DType t, Span s)
      : ExprNode(ExprKind::Binary, t, std::move(s)), op(o), a(std::move(x)), b(std::move(y)) {
    height = node_height({ir::height(a), ir::height(b)}, span);
  }
};

enum class UnOp : uint8_t { TW_UNOPS(TW_ENUMERATOR) };
std::string_view unop_name(UnOp op);  // "neg" "not" "bitnot"
std::string_view unop_symbol(UnOp op);  // "-" "not " "~": the prefix of the text form
std::optional<UnOp> parse_unop(std::string_view name);
struct UnaryNode : ExprNode {
  UnOp op;
  Expr a;
  UnaryNode(UnOp o, Expr x, DType t, Span s)
      : ExprNode(ExprKind::Unary, t, std::move(s)), op(o), a(std::move(x)) {
    height = node_height({ir::height(a)}, span);
  }
};

// Elementwise math (TW_MATH_FNS). All take and return the same float dtype except where noted;
// gelu is not a primitive: the DSL expands it (erf form) so every target shares one formula.
enum class MathFn : uint8_t { TW_MATH_FNS(TW_ENUMERATOR) };
std::string_view mathfn_name(MathFn f);
std::optional<MathFn> parse_mathfn(std::string_view name);
int mathfn_arity(MathFn f);
bool mathfn_takes_int(MathFn f);            // abs: an int argument keeps its type
std::string_view mathfn_doc(MathFn f);      // the T.<name> docstring
struct CallNode : ExprNode {
  MathFn fn;
  std::vector<Expr> args;
  CallNode(MathFn f, std::vector<Expr> a, DType t, Span s)
      : ExprNode(ExprKind::Call, t, std::move(s)), fn(f), args(std::move(a)) {
    height = node_height({ir::height(args)}, span);
  }
};

struct CastNode : ExprNode {  // value converted to dtype (round to nearest even for floats)
  Expr value;
  CastNode(Expr v, DType t, Span s) : ExprNode(ExprKind::Cast, t, std::move(s)), value(std::move(v)) {
    height = node_height({ir::height(value)}, span);
  }
};

struct SelectNode : ExprNode {  // cond ? t : f   (T.where)
  Expr cond, t, f;
  SelectNode(Expr c, Expr x, Expr y, DType ty, Span s)
      : ExprNode(ExprKind::Select, ty, std::move(s)), cond(std::move(c)), t(std::move(x)), f(std::move(y)) {
    height = node_height({ir::height(cond), ir::height(t), ir::height(f)}, span);
  }
};

struct BufferNode;
using Buffer = std::shared_ptr<const BufferNode>;

struct LoadNode : ExprNode {  // buffer[indices...]
  Buffer buffer;
  std::vector<Expr> indices;
  LoadNode(Buffer b, std::vector<Expr> i, DType t, Span s);
};

// ---------------------------------------------------------------------------------------------
// Buffers

// Which user tile a compiler-made tile holds (BufferNode::part_of).
struct TilePart {
  std::string tile;        // the tile the kernel declares; empty: none (the kernel's own tile)
  int64_t row_parts = 1;   // its rows are split into this many parts (2: each Ascend AIV holds half)
};

// A tensor parameter (scope global) or a tile buffer allocated inside the kernel.
// Shapes of tile buffers are compile-time constants; global shapes may use shape variables.
// Layout is dense row-major.
struct BufferNode {
  std::string name;
  DType dtype;
  std::vector<Expr> shape;
  Scope scope;
  Span span;
  // A compiler-made temporary (Ascend legalize_vector): the user buffer (or tensor) it serves, which
  // messages name instead of it (capacity errors count its bytes with that buffer). Empty for
  // buffers the kernel declares.
  std::string temp_of;
  // Ascend multi_buffer: the leading dim holds this many copies of the tile (one per stage of a
  // T.Pipelined loop), which messages state instead of naming that dim. 0 for other buffers.
  int64_t stages = 0;
  // Ascend split_cube_vector (set there only): the user's tile this tile stands for, all of it or
  // each AIV's part of its rows (a mixed tile's Vector copy acc_ub, P V's partial acc_o_pv, a row
  // tile halved between the AIVs): messages name the user's tile at its declared shape.
  TilePart part_of;
  BufferNode(std::string n, DType t, std::vector<Expr> sh, Scope sc, Span s)
      : name(std::move(n)), dtype(t), shape(std::move(sh)), scope(sc), span(std::move(s)) {}
  int ndim() const { return static_cast<int>(shape.size()); }
  // Constant shape, or nullopt if any dim is symbolic.
  std::optional<std::vector<int64_t>> const_shape() const;
};

// A rectangular part of a buffer: starts[i] .. starts[i] + extents[i]. Extents are constants for
// tile ops. A Region whose rank is lower than its buffer's? Not allowed: rank always matches.
struct Region {
  Buffer buffer;
  std::vector<Expr> starts;
  std::vector<Expr> extents;
};
Region full_region(const Buffer& b);
// The dimensions of a gemm operand region that hold its matrix (docs/language.md "T.gemm"):
// {rows, cols}. cols is the last dimension. In a tile rows is the one before it; in a global
// tensor the last one before it whose extent is not 1, or the one before the last when all are 1
// (BSHD: Q[b, r0:r0 + M, h, 0:D], rows H * D elements apart). The verifier requires every other
// dimension to have extent 1. Needs rank >= 2.
std::pair<size_t, size_t> gemm_matrix_dims(const Region& r);
// A run-time extent of a copy (docs/language.md "Run-time extents"): on a global tensor's side of
// T.copy an extent may be min(C, e) (or min(e, C)) with a constant C >= 1. The copy covers C elements of that dim;
// those at index e or past it lie outside the copy's tensor region, as past a tail: they read as 0
// and are not written. e <= 0 copies nothing from the tensor. Tile sides always have constant extents.
struct RuntimeExtent {
  int64_t bound;  // C
  Expr value;     // e
};
std::optional<RuntimeExtent> runtime_extent(const Expr& extent);
// The constant extent, or the bound C of a run-time extent; nullopt for any other expression.
std::optional<int64_t> extent_bound(const Expr& extent);
// N-D windows (docs/language.md, T.copy): the non-unit extents `wide` of one side of a copy and
// `narrow` of the other (fewer dims) pair when narrow's first extent is the product of wide's first
// k + 1 and the rest are equal: returns k, the number of wide's leading dims flattened into
// narrow's first (its rows); nullopt when they do not pair (unknown extents, -1, never pair).
std::optional<size_t> flattened_dims(const std::vector<int64_t>& wide, const std::vector<int64_t>& narrow);
int height(const Region& r);  // of its tallest start or extent

// ---------------------------------------------------------------------------------------------
// Statements

enum class StmtKind : uint8_t { TW_STMT_KINDS(TW_ENUMERATOR) };
std::string_view stmtkind_name(StmtKind k);  // "Seq" "For" ...

// A decision a pass recorded on a statement for a later stage to carry out (the cpu target's
// fusion and view passes for codegen_cpu, docs/architecture.md "Annotations"): a name and integer
// arguments, printed `@name` or `@name(1, 2)` before the statement (and before its span) and read
// back by the parser. The verifier accepts the names of kAnnotations on the statements it lists
// there. An annotation is a promise the pass that wrote it proved; a pass that rebuilds an
// annotated node (Mutator) drops it, so the passes that write them run last in their pipeline.
// Except a reduction's @nan_unobserved, a promise about values that rebuilds keep
// (transform/nan_unobserved.h).
struct Annotation {
  std::string name;
  std::vector<int64_t> args;
  bool operator==(const Annotation&) const = default;
};
// The annotations the verifier accepts: on which statement kind, with how many arguments, and
// the kind of the statement that must follow in the same sequence (a fused pair), if any.
struct AnnotationInfo {
  std::string_view name;
  StmtKind on;
  int nargs;
  std::optional<StmtKind> next;
};
extern const std::vector<AnnotationInfo> kAnnotations;

struct StmtNode {
  StmtKind kind;
  Span span;
  int height = 1;  // of the tree this node roots, expressions included (see kMaxIrHeight)
  std::vector<Annotation> annotations;  // see Annotation; empty unless a pass decided something here
  StmtNode(StmtKind k, Span s) : kind(k), span(std::move(s)) {}
  virtual ~StmtNode() = default;
};
using Stmt = std::shared_ptr<const StmtNode>;
int height(const Stmt& s);
int height(const std::vector<Stmt>& v);

struct SeqNode : StmtNode {
  std::vector<Stmt> body;
  SeqNode(std::vector<Stmt> b, Span s) : StmtNode(StmtKind::Seq, std::move(s)), body(std::move(b)) {
    height = node_height({ir::height(body)}, span);
  }
};

// The one form of a body (of a loop, an if's branches, a core scope, a kernel): a sequence of one
// statement is that statement, as the front end builds it, so IR parsed from text and IR built by
// the front end or a pass are the same tree. The constructors of those nodes apply it; a pass
// reads a body's statements with stmts_of, whichever form it has.
Stmt body_form(Stmt s);
// The statements of a body: a sequence's items, or the statement itself (none for null).
std::vector<Stmt> stmts_of(const Stmt& s);

// serial: ordinary loop. parallel: iterations independent, an elementwise map over a tile
// (T.Parallel; nested parallel loops form one multi-dimensional map). pipelined: serial loop whose
// copies may be overlapped with compute using num_stages buffers. unroll: fully unrolled.
enum class ForKind : uint8_t { TW_FOR_KINDS(TW_ENUMERATOR) };
std::string_view forkind_name(ForKind k);
std::optional<ForKind> parse_forkind(std::string_view name);
// user_extent (text `for j in parallel(0, 8192, user=...)`; null where every iteration is the
// user's): a T.Parallel loop an Ascend pass padded past the iterations the user's loop makes
// (split_cols' last column block, which overhangs the row: user_extent = min(Cb, N - offset)). Its
// first user_extent iterations are the user's, the others padding: a staged window of a map's element
// reads is checked only over the part the user's iterations read (CopyNode::used), the padding's
// elements keep the copy's clipping (read as 0, never stored).
struct ForNode : StmtNode {
  Var var;
  Expr min, extent;
  ForKind for_kind;
  int num_stages;  // pipelined only (>= 1); 0 otherwise
  Stmt body;
  Expr user_extent;
  ForNode(Var v, Expr mn, Expr ext, ForKind fk, int stages, Stmt b, Span s, Expr user = nullptr)
      : StmtNode(StmtKind::For, std::move(s)), var(std::move(v)), min(std::move(mn)),
        extent(std::move(ext)), for_kind(fk), num_stages(stages), body(body_form(std::move(b))),
        user_extent(std::move(user)) {
    height = node_height({ir::height(min), ir::height(extent), ir::height(body), ir::height(user_extent)}, span);
  }
};

struct IfNode : StmtNode {
  Expr cond;
  Stmt then_body;
  Stmt else_body;  // may be null
  IfNode(Expr c, Stmt t, Stmt e, Span s)
      : StmtNode(StmtKind::If, std::move(s)), cond(std::move(c)), then_body(body_form(std::move(t))), else_body(body_form(std::move(e))) {
    height = node_height({ir::height(cond), ir::height(then_body), ir::height(else_body)}, span);
  }
};

// Binds var (immutable) for the rest of the enclosing Seq.
struct LetNode : StmtNode {
  Var var;
  Expr value;
  LetNode(Var v, Expr x, Span s) : StmtNode(StmtKind::Let, std::move(s)), var(std::move(v)), value(std::move(x)) {
    height = node_height({ir::height(value)}, span);
  }
};

struct StoreNode : StmtNode {  // buffer[indices] = value  (value converted to the buffer's dtype)
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  StoreNode(Buffer b, std::vector<Expr> i, Expr v, Span s)
      : StmtNode(StmtKind::Store, std::move(s)), buffer(std::move(b)), indices(std::move(i)), value(std::move(v)) {
    height = node_height({ir::height(indices), ir::height(value)}, span);
  }
};

// Declares a tile buffer, live for the rest of the enclosing Seq. Contents start undefined.
struct AllocNode : StmtNode {
  Buffer buffer;
  AllocNode(Buffer b, Span s) : StmtNode(StmtKind::Alloc, std::move(s)), buffer(std::move(b)) {}
};

// Tile ops ------------------------------------------------------------------------------------

// dst = convert(src). The two regions must have the same shape once dims of extent 1 are
// dropped. Elements of src outside its buffer read as 0; elements of dst outside its buffer are
// not written: this is how tails are handled.
// atomic (T.atomic_add(dst, src), text `atomic_add src -> dst`): dst += convert(src) instead, each
// element's read-add-write atomic with respect to the other blocks of the launch (dst a global
// tensor, src a tile; the sum is rounded once to dst's dtype; docs/language.md "T.atomic_add").
// checked (text `checked_copy src -> dst`; the Ascend passes that stage a map's element reads of a
// global tensor, stage_global_maps and legalize_vector, set it): src is a window of a global tensor
// the map reads element by element, which the language does not clip: the copy still clips it, and
// the Ascend simulator reports a window not proved inside its tensor that leaves a dimension
// (select_instructions' window checks), where a T.copy the user writes is clipped without a report.
// A checked store (stage_global_maps' copy out of a map's element stores, hunt35 F1) is the same
// with the tensor's window as dst.
// used (checked and preload only; text `checked_copy src -> dst used [e0, e1]`; empty: the whole window): per dim
// of the tensor's window, how many of the window's leading elements the user's iterations read (a padded loop's
// ForNode::user_extent): the elements after them are padding, clipped without a report.
// preload (text `preload_copy src -> dst`; stage_global_maps sets it on both copies of a map's stores that
// may skip elements of their window: under an `if`, an else branch, constant indices merged): the copy in
// is the preload (the window's elements the map does not store keep the tensor's), and the copy out is
// checked element by element: the Ascend simulator reports an element of the window outside the tensor
// that no longer holds what the preload put there (the map stored it), at the map's line; its `used` as a
// checked copy's.
struct CopyNode : StmtNode {
  Region src, dst;
  bool atomic = false;
  bool checked = false;
  std::vector<Expr> used;
  bool preload = false;
  CopyNode(Region a, Region b, Span s, bool at = false, bool chk = false, std::vector<Expr> u = {}, bool pre = false)
      : StmtNode(StmtKind::Copy, std::move(s)), src(std::move(a)), dst(std::move(b)), atomic(at), checked(chk),
        used(std::move(u)), preload(pre) {
    height = node_height({ir::height(src), ir::height(dst), ir::height(used)}, span);
  }
};

// C = (clear ? 0 : C) + op(A) * op(B); A, B, C are 2-D regions; op transposes when trans_*.
// Accumulation in C's dtype (float32 for float inputs, int32 for int8 inputs).
// band (T.gemm's a_band / c_band, text `band_a=(lo, hi)` / `band_c=(lo, hi)`; docs/language.md
// "Bands"), a performance hint over the diagonals d = column - row, lo <= d < hi (int
// expressions): a: op(A)[i, k] is 0 outside the band (the program's promise; its terms may be
// skipped); c: only C's elements inside the band are needed (the others may be left unwritten).
// The band may be met with a rectangle of the same matrix (T.gemm's rows / cols, text
// `rows=(r0, r1)` / `cols=(c0, c1)`; "Bands"): rows r0 <= row < r1, columns c0 <= column < c1 of
// op(A) (band a: A is 0 outside the band or outside the rectangle) or of C (band c); a null pair:
// every row (column).
enum class GemmBand : uint8_t { none, a, c };
struct GemmNode : StmtNode {
  Region a, b, c;
  bool trans_a, trans_b, clear;
  GemmBand band;
  Expr band_lo, band_hi;  // null without a band
  Expr rows_lo, rows_hi, cols_lo, cols_hi;  // null: the band is not limited to rows (columns)
  GemmNode(Region x, Region y, Region z, bool ta, bool tb, bool cl, Span s, GemmBand bd = GemmBand::none,
           Expr lo = nullptr, Expr hi = nullptr, Expr r0 = nullptr, Expr r1 = nullptr, Expr c0 = nullptr,
           Expr c1 = nullptr)
      : StmtNode(StmtKind::Gemm, std::move(s)), a(std::move(x)), b(std::move(y)), c(std::move(z)),
        trans_a(ta), trans_b(tb), clear(cl), band(bd), band_lo(std::move(lo)), band_hi(std::move(hi)),
        rows_lo(std::move(r0)), rows_hi(std::move(r1)), cols_lo(std::move(c0)), cols_hi(std::move(c1)) {
    height = node_height({ir::height(a), ir::height(b), ir::height(c), ir::height(band_lo), ir::height(band_hi),
                          ir::height(rows_lo), ir::height(rows_hi), ir::height(cols_lo), ir::height(cols_hi)},
                         span);
  }
};

struct FillNode : StmtNode {  // every element of dst = value
  Region dst;
  Expr value;
  FillNode(Region d, Expr v, Span s) : StmtNode(StmtKind::Fill, std::move(s)), dst(std::move(d)), value(std::move(v)) {
    height = node_height({ir::height(dst), ir::height(value)}, span);
  }
};

// dst = reduce(src, axis) (clear) or dst = combine(dst, reduce(src, axis)) (merge).
// dst's shape is src's shape with `axis` removed.
enum class ReduceKind : uint8_t { TW_REDUCE_KINDS(TW_ENUMERATOR) };
std::string_view reducekind_name(ReduceKind k);
std::optional<ReduceKind> parse_reducekind(std::string_view name);
struct ReduceNode : StmtNode {
  Buffer src, dst;
  ReduceKind reduce_kind;
  int axis;
  bool clear;
  ReduceNode(Buffer a, Buffer b, ReduceKind rk, int ax, bool cl, Span s)
      : StmtNode(StmtKind::Reduce, std::move(s)), src(std::move(a)), dst(std::move(b)), reduce_kind(rk),
        axis(ax), clear(cl) {}
};

// Ascend expert mode ---------------------------------------------------------------------------
// Only valid in kernels launched with T.Kernel(n, is_npu=True) (KernelNode::sub_block_var set).
// Facts: shared/ascend-910b.md. Every other target rejects these nodes.

// The part of an AI Core a block of code runs on: C = the Cube core (AIC), V = the Vector cores
// (AIV). Code outside any CoreScope is scalar code that both run.
enum class CoreKind : uint8_t { TW_CORE_KINDS(TW_ENUMERATOR) };
std::string_view corekind_name(CoreKind c);  // "C" "V"
std::optional<CoreKind> parse_corekind(std::string_view name);

// `with T.Scope("C"):` / `with T.Scope("V"):`. Scopes do not nest.
struct CoreScopeNode : StmtNode {
  CoreKind core;
  Stmt body;
  CoreScopeNode(CoreKind c, Stmt b, Span s) : StmtNode(StmtKind::CoreScope, std::move(s)), core(c), body(body_form(std::move(b))) {
    height = node_height({ir::height(body)}, span);
  }
};

// Ascend pipes (AscendC PIPE_*). ALL is only valid for pipe_barrier.
enum class AscendPipe : uint8_t { TW_ASCEND_PIPES(TW_ENUMERATOR) };
std::string_view pipe_name(AscendPipe p);  // "S" "V" "M" "MTE1" "MTE2" "MTE3" "FIX" "ALL"
std::optional<AscendPipe> parse_pipe(std::string_view name);

// Synchronisation, emitted exactly as written (expert mode has no automatic sync):
//   set_flag(pipe -> dst_pipe, id) / wait_flag(pipe -> dst_pipe, id)   event id 0..7
//   pipe_barrier(pipe)                                                  id unset
//   set_cross_flag(mode, pipe, id)                                      mode 0..2, id 0..15
//   wait_cross_flag(id, pipe)                                           pipe S unless given
enum class SyncKind : uint8_t { TW_SYNC_KINDS(TW_ENUMERATOR) };
std::string_view synckind_name(SyncKind k);
std::optional<SyncKind> parse_synckind(std::string_view name);
struct SyncNode : StmtNode {
  SyncKind sync;
  AscendPipe pipe;      // set/wait_flag: the source pipe; barrier, cross flags: the pipe
  AscendPipe dst_pipe;  // set/wait_flag only (S otherwise)
  int mode;             // set_cross_flag only (0 otherwise)
  Expr id;              // event / cross-core flag id; null for pipe_barrier
  SyncNode(SyncKind k, AscendPipe p, AscendPipe d, int m, Expr i, Span s)
      : StmtNode(StmtKind::Sync, std::move(s)), sync(k), pipe(p), dst_pipe(d), mode(m), id(std::move(i)) {
    height = node_height({ir::height(id)}, span);
  }
};

// ---------------------------------------------------------------------------------------------
// Kernels

// A kernel parameter: a global tensor, or a scalar. Outputs are tensors the runtime allocates
// and returns. Shape variables are the Vars found in tensor shapes; they are bound from the
// actual arguments at call time.
struct Param {
  Buffer buffer;  // set for tensors
  Var scalar;     // set for scalars
  bool is_output = false;
  const std::string& name() const { return buffer ? buffer->name : scalar->name; }
};

struct KernelNode {
  std::string name;
  std::vector<Param> params;
  std::vector<Var> block_vars;  // 0-3 block indices (bx, by, bz); empty = not yet known (tile loops)
  std::vector<Expr> grid;       // extents, same length as block_vars
  Stmt body;
  Span span;  // the kernel's def line
  // Ascend expert mode (T.Kernel(n, is_npu=True) as (cid, vid)): the sub-block index (0 or 1: which
  // of the two AIVs of an AI Core runs the code; 0 on the AIC). Null for every other kernel.
  Var sub_block_var;
  KernelNode(std::string n, std::vector<Param> p, std::vector<Var> bv, std::vector<Expr> g, Stmt b, Span s,
             Var sub = nullptr)
      : name(std::move(n)), params(std::move(p)), block_vars(std::move(bv)), grid(std::move(g)),
        body(body_form(std::move(b))), span(std::move(s)), sub_block_var(std::move(sub)) {}
  bool is_npu() const { return sub_block_var != nullptr; }
  // Shape variables in order of first appearance in the tensor parameters' shapes.
  std::vector<Var> shape_vars() const;
};
using Kernel = std::shared_ptr<const KernelNode>;

// The same kernel with the tensor parameters at `indices` marked as outputs (tw.jit's out_idx).
Kernel with_outputs(const Kernel& k, const std::vector<int>& indices);

// A copy of s (same children) with annotation a added after its own.
Stmt with_annotation(const Stmt& s, Annotation a);
// s's annotation called name, or null.
const Annotation* find_annotation(const Stmt& s, std::string_view name);

// Downcast to the node type a `kind` names: as<BinaryNode>(e), as<ForNode>(s).
template <class T>
const T* as(const Expr& e) { return static_cast<const T*>(e.get()); }
template <class T>
const T* as(const Stmt& s) { return static_cast<const T*>(s.get()); }

// ---------------------------------------------------------------------------------------------
// Builders: the only way front ends create expressions. They check operand types and apply the
// promotion rules (a literal adopts the other operand's type), throwing Error at `span`.

Expr int_imm(int64_t v, DType t = kIndexType, Span s = {});
Expr float_imm(double v, DType t = DTypeCode::f32, Span s = {});
Var var(std::string name, DType t = kIndexType, Span s = {});
Expr binary(BinOp op, Expr a, Expr b, Span s = {});
Expr unary(UnOp op, Expr a, Span s = {});
Expr call(MathFn fn, std::vector<Expr> args, Span s = {});
Expr cast(Expr v, DType t, Span s = {});
// Whether v's value may lie outside its own dtype until it is stored or converted: integer arithmetic of a
// dtype narrower than int64 (computed in int64) and float16 / bfloat16 arithmetic (computed in float32),
// docs/language.md "Dtype conversions". A cast to v's own dtype is then a real conversion, kept by the
// language's T.cast (the Python binding) and by the simplifier (cast() above, the passes' cast, elides every
// same-dtype cast); over a load, a variable, a constant or a cast it is no conversion.
bool computed_wider(const Expr& v);
Expr select(Expr cond, Expr t, Expr f, Span s = {});
Expr load(Buffer b, std::vector<Expr> indices, Span s = {});
Buffer buffer(std::string name, DType t, std::vector<Expr> shape, Scope scope, Span s = {});

// a op b on int64 with Python semantics (floor division/modulo; comparisons give 0/1), or nullopt
// when the result is not an int64 (division by zero, overflow) or op is not integer arithmetic.
// t is the operation's integer type, which the shifts need (BinaryNode above); the other
// operators compute on int64 whatever t is.
std::optional<int64_t> fold_int_binary(BinOp op, int64_t a, int64_t b, DType t = DTypeCode::i64);
// The shift count of a shift on type t: count modulo t's bit width.
int shift_count(int64_t count, DType t);
// v wrapped into the integer type t (two's complement), as a store of v into t does.
int64_t wrap_int(int64_t v, DType t);

// Constant value of an integer expression after folding, or nullopt (also on overflow and
// division by zero: never a trap).
std::optional<int64_t> as_const_int(const Expr& e);

// ---------------------------------------------------------------------------------------------
// The enumerators of each list, in order (enum_count, all_of).

#define TW_ENUM_LIST(E, LIST)                                  \
  template <>                                                  \
  struct EnumList<E> {                                         \
    using enum E;                                              \
    static constexpr std::array<E, 0 LIST(TW_COUNT_ONE)> values{LIST(TW_ENUMERATOR)}; \
  };
TW_ENUM_LIST(DTypeCode, TW_DTYPES)
TW_ENUM_LIST(Scope, TW_SCOPES)
TW_ENUM_LIST(ExprKind, TW_EXPR_KINDS)
TW_ENUM_LIST(StmtKind, TW_STMT_KINDS)
TW_ENUM_LIST(BinOp, TW_BINOPS)
TW_ENUM_LIST(UnOp, TW_UNOPS)
TW_ENUM_LIST(MathFn, TW_MATH_FNS)
TW_ENUM_LIST(ForKind, TW_FOR_KINDS)
TW_ENUM_LIST(ReduceKind, TW_REDUCE_KINDS)
TW_ENUM_LIST(CoreKind, TW_CORE_KINDS)
TW_ENUM_LIST(AscendPipe, TW_ASCEND_PIPES)
TW_ENUM_LIST(SyncKind, TW_SYNC_KINDS)
#undef TW_ENUM_LIST

}  // namespace tw::ir
