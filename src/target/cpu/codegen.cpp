// The CPU code generator: Tile IR kernel -> one C++ translation unit (see codegen.h).
//
// Structure: CodeGen walks the kernel once. Statements dispatch on StmtKind to one emit_*
// method each; expressions go through the scalar-C printer both backends share (target/c_expr.h),
// whose CPU hooks are the expr_* methods. Index arithmetic of tile ops
// (region starts, strides, clipped ranges) is ir::Expr built with ir/arith's builders (see `Idx`
// below), constants folded so that tile-to-tile copies come out with literal bounds and no checks.
// What to fuse and which tiles to read in place is decided by the passes before it (codegen.h);
// emit_seq, emit_alloc and the fused emitters read their annotations. A copy is printed as a
// fast path (both regions inside their buffers) and a masked path (tails), the guard between them
// folded away where the bounds are constants: that is how a copy is spelled in C++, not a choice
// between programs (each path computes the same result), so it stays here.
#include "target/cpu/codegen.h"
#include "target/cpu/prefetch_gathers.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/arith.h"
#include "ir/functor.h"
#include "target/c_expr.h"
#include "target/cpu/tile_facts.h"
#include "target/cpu/math_fns.h"
#include "target/cpu/pipeline_rows.h"
#include "transform/check_bounds.h"
#include "transform/hoist_map_invariants.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {


// ---------------------------------------------------------------------------------------------
// Types

// How a dtype is stored in memory (buffers, scalar parameters).
std::string storage_type(DType t) {
  switch (t.code) {
    case DTypeCode::f16: return "tw_cpu::f16";
    case DTypeCode::bf16: return "tw_cpu::bf16";
    case DTypeCode::f32: return "float";
    case DTypeCode::f64: return "double";
    case DTypeCode::i8: return "int8_t";
    case DTypeCode::i32: return "int32_t";
    case DTypeCode::i64: return "int64_t";
    case DTypeCode::u8: return "uint8_t";
    case DTypeCode::boolean: return "bool";
  }
  return "float";
}

// How a value of a dtype is held while computing: half types in float, every integer in int64_t
// (index arithmetic never overflows; stores narrow with modular wrap-around, as int32 would).
std::string compute_type(DType t) {
  if (t.code == DTypeCode::f64) return "double";
  if (t.is_float()) return "float";
  if (t.is_bool()) return "bool";
  return "int64_t";
}

// Storage value (C++ expression `s` of storage_type(t)) -> compute value. A bool is read as its
// byte (tw_cpu::load_bool): g++ has no vector type for bool loads, which left every loop reading
// a bool tile or tensor (a mask) scalar.
std::string widen(DType t, const std::string& s) {
  if (t.is_bool()) return "tw_cpu::load_bool(" + s + ")";
  if (storage_type(t) == compute_type(t)) return s;
  if (t.is_int()) return "(int64_t)" + s;
  return "tw_cpu::convert<" + compute_type(t) + ">(" + s + ")";
}

// Compute value of dtype `from` -> storage value of dtype `to` (round to nearest even for floats).
std::string narrow(DType to, DType from, const std::string& s) {
  if (storage_type(to) == compute_type(from)) return s;
  return "tw_cpu::convert<" + storage_type(to) + ">(" + s + ")";
}

// The CPU dialect of the shared scalar-C printer (target/c_expr.h): the runtime header has
// tw_udiv/tw_umod and tw_fmod (tw_cpu/abi.h); negative literals are parenthesised.
constexpr target::CDialect kCpuDialect{
    .paren_negative_ints = true, .has_udiv = true, .has_fmod = true, .printer = "CPU code generator"};

// A float32 literal holds the value rounded to float (its 9 digits read back exactly); one past
// float's range (1e39) rounds to +-inf and is printed as the infinity.
std::string float_lit(double v, DType t) {
  bool dbl = t.code == DTypeCode::f64;
  if (!dbl) v = static_cast<double>(static_cast<float>(v));
  if (std::isnan(v)) return target::c_nan(dbl);
  if (std::isinf(v)) {
    std::string s = dbl ? "__builtin_inf()" : "__builtin_inff()";
    return v < 0 ? "(-" + s + ")" : s;
  }
  std::string s = target::c_float_digits(v, dbl);
  return std::signbit(v) ? "(" + s + ")" : s;
}

// The identity a float sum starts from: -0.0, IEEE's additive identity (x + -0.0 is x bit for bit
// for every x, +0.0 and NaN included), so a sum of -0.0 values is -0.0 as on ascend910b; +0.0
// would turn it into +0.0. (An empty sum is +0.0: T.clear's fill, never a reduction's start.)
std::string sum_identity(DType t) { return float_lit(-0.0, t); }

// ---------------------------------------------------------------------------------------------
// Index arithmetic of the generated code (region starts, strides, clipped ranges, offsets):
// ir::Expr built with arith's light builders, which keep the form the emitter wrote (the printed
// C++ shows each formula); two constant operands fold to one literal (arith's folded builders),
// so tile-to-tile copies come out with literal bounds and no checks. Signs are ir::is_nonneg's
// (CodeGen::nonneg); values the generated code already holds (hoisted locals, loop counters,
// runtime calls) are CodeGen::code variables. The shared scalar-C printer prints them.

using Idx = Expr;
std::optional<int64_t> cst(const Idx& e) { return as_const_int(e); }
Idx ic(int64_t v) { return int_imm(v); }
bool both_const(const Idx& a, const Idx& b) { return cst(a) && cst(b); }
Idx add(const Idx& a, const Idx& b) { return both_const(a, b) ? arith::add(a, b) : arith::light::add(a, b); }
Idx sub(const Idx& a, const Idx& b) { return both_const(a, b) ? arith::sub(a, b) : arith::light::sub(a, b); }
Idx mul(const Idx& a, const Idx& b) { return both_const(a, b) ? arith::mul(a, b) : arith::light::mul(a, b); }
Idx neg(const Idx& a) { return cst(a) ? arith::simplify(unary(UnOp::Neg, a)) : unary(UnOp::Neg, a); }
Idx imin(const Idx& a, const Idx& b) { return both_const(a, b) ? arith::min(a, b) : binary(BinOp::Min, a, b); }

// ---------------------------------------------------------------------------------------------
// Names

bool is_reserved_word(const std::string& s) {
  static const std::unordered_set<std::string> kWords{
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
      "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval",
      "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
      "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
      "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
      "uint32_t", "uint64_t", "intptr_t", "uintptr_t", "size_t", "TwArgs", "NULL", "main", "assert", "errno"};
  return kWords.count(s) > 0;
}

// A C identifier for a user name; never one of the generator's own (tw_*), a keyword or a macro
// of <stdint.h>.
std::string sanitize(const std::string& name) {
  std::string s;
  for (char ch : name) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  bool upper = std::none_of(s.begin(), s.end(), [](char ch) { return std::islower(static_cast<unsigned char>(ch)); });
  bool macro_like = upper && s.find('_') != std::string::npos;
  if (s.rfind("tw_", 0) == 0 || s.rfind("TW_", 0) == 0 || s.rfind("__", 0) == 0 ||
      (s[0] == '_' && s.size() > 1 && std::isupper(static_cast<unsigned char>(s[1]))) || is_reserved_word(s) ||
      macro_like)
    s += "_";
  return s;
}

bool contains_loop(const Stmt& s) {
  bool found = false;
  for_each_stmt(s, [&](const Stmt& x) { found |= x && x->kind == StmtKind::For; });
  return found;
}

// ---------------------------------------------------------------------------------------------
// Regions of tile ops, viewed as int64 arithmetic in the generated code.

struct RegionView {
  std::string buf;  // C name of the buffer
  DType dtype;
  std::vector<Idx> start, ext, shape, stride;
  std::vector<int> dims;  // the dims with extent != 1, outermost first
  // a run-time extent min(C, e) (ir.h): ext is C, limit e (null for other dims); indices at
  // start + e or past it lie outside the region as past the buffer's end
  std::vector<Idx> limit;
  int rank() const { return static_cast<int>(start.size()); }
  // start + ext <= shape, when provable at generation time
  bool fits_above(int d) const {
    auto end = cst(add(start[d], ext[d])), size = cst(shape[d]);
    return end && size && *end <= *size;
  }
  bool overflows_above(int d) const {
    auto end = cst(add(start[d], ext[d])), size = cst(shape[d]);
    return end && size && *end > *size;
  }
};

// Lane-wise combine of two float32 vectors for a reduction: a sum adds; max/min propagate NaN
// (docs/language.md): `b != b ? b : (b > a ? b : a)`, a max (vmaxps keeps a NaN accumulator) and
// one unordered compare + blend that lets a NaN element in; b is the element or the other group.
// nan = false (a reduction annotated @nan_unobserved: no output sees its NaN, transform/
// nan_unobserved.h): the max alone, `b > a ? b : a`.
std::string vec_combine(ReduceKind kind, const std::string& a, const std::string& b, bool nan) {
  if (kind == ReduceKind::sum) return a + " + " + b;
  std::string m = b + (kind == ReduceKind::max ? " > " : " < ") + a + " ? " + b + " : " + a;
  return nan ? b + " != " + b + " ? " + b + " : (" + m + ")" : m;
}
// The scalar combine of a float32 reduction's tail element b into a (tw_max / tw_min: NaN propagates).
std::string scalar_combine(ReduceKind kind, const std::string& a, const std::string& b) {
  if (kind == ReduceKind::sum) return a + " + " + b;
  return std::string(kind == ReduceKind::max ? "tw_max(" : "tw_min(") + a + ", " + b + ")";
}
bool nan_checked(const ReduceNode& r) {
  return std::none_of(r.annotations.begin(), r.annotations.end(),
                      [](const ir::Annotation& a) { return a.name == "nan_unobserved"; });
}

// The lanes of the vector accumulator v combined into one float (tw_cpu::simd::fold_*: by halves).
std::string vec_fold_lanes(ReduceKind kind, const std::string& v) {
  const char* f = kind == ReduceKind::sum ? "fold_sum" : kind == ReduceKind::max ? "fold_max" : "fold_min";
  return std::string("tw_cpu::simd::") + f + "(" + v + ")";
}

// ---------------------------------------------------------------------------------------------
// The generator

class CodeGen {
 public:
  CodeGen(const Kernel& k, bool bounds_check)
      : k_(k), bounds_check_(bounds_check), unproved_(transform::check_bounds(k)) {}
  std::string run();

 private:
  // --- output
  void line(const std::string& s) { out_ += std::string(2 * indent_, ' ') + s + "\n"; }
  void open(const std::string& head) { line(head.empty() ? "{" : head + " {"); ++indent_; }
  void close() { --indent_; line("}"); }
  // `} else {` of the innermost open block
  void open_else() { --indent_; line("} else {"); ++indent_; }
  // opens `if (c0 && c1 ...)` when there are conditions; returns whether a block was opened
  bool open_if_all(const std::vector<std::string>& conds) {
    if (conds.empty()) return false;
    open("if (" + conj(conds) + ")");
    return true;
  }
  static std::string conj(const std::vector<std::string>& conds) {
    std::string c;
    for (const auto& x : conds) c += (c.empty() ? "" : " && ") + x;
    return c;
  }
  std::string line_comment(const Span& s) const { return s.known() ? "// line " + std::to_string(s.line) + ": " : "// "; }

  // --- names
  std::string name_for(const void* key, const std::string& hint) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string base = sanitize(hint), s = base;
    for (int i = 1; used_.count(s); ++i) s = base + "_" + std::to_string(i);
    used_.insert(s);
    names_[key] = s;
    return s;
  }
  std::string bind(const Var& v, bool nonneg) {
    bound_.insert(v.get());
    if (nonneg) nonneg_.insert(v.get());
    else nonneg_.erase(v.get());
    return name_for(v.get(), v->name);
  }
  std::string buf_name(const Buffer& b) {
    if (!declared_.count(b.get()))
      throw Error("buffer '" + b->name + "' is used but neither a kernel parameter nor allocated before this use",
                  b->span, "allocate it with T.alloc_shared / T.alloc_fragment before the op that uses it");
    return name_for(b.get(), b->name);
  }

  // --- prologue shared by tw_grid and tw_block
  void emit_params(bool tensors);

  // --- statements: one method per StmtKind
  void emit(const Stmt& s);
  void emit_one(const Stmt& s);
  void emit_seq(const SeqNode& n);
  void emit_for(const ForNode& n);
  void emit_if(const IfNode& n);
  void emit_let(const LetNode& n);
  void emit_store(const StoreNode& n);
  void emit_alloc(const AllocNode& n);
  void emit_copy(const CopyNode& n);
  bool open_inside_source(const CopyNode& n, const std::string& what, RegionView& s, Idx& sb, int& opened);
  void emit_prefetch_copy(const CopyNode& n);
  void emit_slice_source(const CopyNode& n);
  // before a gemm call: the strip r of a tile with a next source (@prefetch_slices) prefetched there
  void emit_slice_prefetch(const Region& r);
  // the arguments next_b, next_ldb of a gemm call reading a strip r of such a tile ("" if none)
  std::string slice_next(const Region& r);
  void emit_atomic_add(const CopyNode& n);
  void check_same_shape(const RegionView& s, const RegionView& d, const CopyNode& n);
  void emit_gemm(const GemmNode& n);
  bool emit_row_keep_map(const Stmt& s);
  void emit_fill(const FillNode& n);
  void emit_reduce(const ReduceNode& n);
  // map + copy-out fusion (fuse_map_copy_out.h); false: `map` has no @fuse_copy_out
  bool emit_map_copy_out(const Stmt& map, const Stmt& copy);
  struct CopyOutPlan {
    const StoreNode* st;
    const ForNode* outer;
    const ForNode* inner;
    const CopyNode* cp;
    RegionView d;
    std::vector<int> td;
    int64_t e0, e1;
  };
  // the fused pair's pieces when `map` has @fuse_copy_out, else nullopt
  std::optional<CopyOutPlan> plan_map_copy_out(const Stmt& map, const Stmt& copy);
  // the map's store when `map` has @fuse_reduce (fuse_map_reduce.h), else null
  const StoreNode* plan_map_reduce(const Stmt& map, const Stmt& reduce) const;
  // row passes skewed by one row in one loop (see emit_row_pipeline); statements consumed, 0 if none
  size_t emit_row_pipeline(const SeqNode& n, size_t k);
  // statements [from, to) of a sequence, each fused with the next where possible
  void emit_range(const SeqNode& n, size_t from, size_t to);
  // map + row reduction fusion (fuse_map_reduce.h); false: `map` has no @fuse_reduce
  bool emit_map_reduce(const Stmt& map, const Stmt& reduce);
  // A fused row map's value with its per-row parts as variables (row_parts in the .cpp)
  Expr row_parts(const StoreNode& st, const ForNode& outer, const ForNode& inner,
                 const std::set<const BufferNode*>& written, std::vector<std::pair<Var, Expr>>& parts);
  void emit_row_parts(const std::vector<std::pair<Var, Expr>>& parts);
  // float32 row reduction of ptr[q .. n) into the vectors tw_v0..tw_v3 (four at a time, then
  // one into tw_v0; q is left at the scalar tail), and their lane-wise fold into tw_v0
  void emit_vec_reduce(ReduceKind kind, bool nan, const std::string& ptr, const std::string& n, const std::string& q,
                       const std::string& acc = "tw_v");
  void emit_vec_fold(ReduceKind kind, const std::string& acc = "tw_v");
  // a float32 row sum longer than kSumBlock: fold the vectors acc0..acc3 (one block's partial
  // sums) into the double d and clear them (docs/language.md "T.reduce_sum": the accuracy)
  void emit_sum_block_flush(const std::string& acc, const std::string& d);
  // one chunk of a fused row map: dst[j - tw_j0] = value for j in [tw_j0, tw_j0 + tw_jn)
  // (nonpos: the value is exp of an argument proven <= 0 or NaN, row_max_shifted: its chunk form
  // without the upper clamp where math_fns.h names one)
  void emit_chunk_map(const std::string& dst, const ForNode& inner, DType dst_dtype, const Expr& value,
                      bool nonpos = false);
  // one chunk of a fused map + row reduction (emit_map_reduce, emit_row_pipeline): the map's values
  // into tw_c[0, tw_jn), reduced into acc0..acc3 as emit_vec_reduce and the scalar tail into tail
  // (keep: the chunk is the tile's, read later; else a local buffer, and a sum of a product is
  // accumulated with one fma per element, the product written nowhere)
  void emit_chunk_map_reduce(const ForNode& inner, DType dt, const Expr& value, bool nonpos, ReduceKind kind,
                             bool nan, bool keep, const std::string& acc, const std::string& tail);

  // --- checked mode (TW_BOUNDS_CHECK=1): each tile has a written flag per element (`<tile>_w`,
  // same layout), clear at its allocation. After each statement emit_written sets the flags of
  // the elements it wrote (a tile -> tile copy copies the source's); a copy or atomic_add into a
  // global tensor first tests the flags of the elements it moves (those inside both buffers); a
  // tile load is tested where its value leaves the block: the value of a store into a global
  // tensor (the load itself, converted at most: computed values are compute), an index, and a
  // condition or loop bound outside T.Parallel loops (scalar control flow), and any read outside
  // T.Parallel loops (a let, an element statement: the scalar unit's GetValue on ascend910b, which
  // the simulator reports). Compute reads in maps are not tested, as the ascend910b simulator's
  // rule (docs/ascend.md "Session 30: unwritten tile bytes reaching GM"). tw_cpu/check.h
  // written_at throws UninitError.
  struct Flags {
    std::string w, shape;  // C names: the flags, the tile's shape
    size_t rank;
  };
  std::unordered_map<const void*, Flags> flags_;
  const Flags* flags_of(const Buffer& b) const {
    auto it = flags_.find(b.get());
    return it == flags_.end() ? nullptr : &it->second;
  }
  void emit_written(const Stmt& s);
  // the flags of the region's elements inside its tile set (a fill, a gemm's C, a copy's destination)
  void emit_mark(const Region& r);
  void emit_copy_written(const CopyNode& n);
  // tile b's linear index `at`, tested written (how: where the value goes, for the report)
  std::string written_at(const Buffer& b, const std::string& at, const Span& span, const std::string& how) const;
  // printing an index / a condition or loop bound outside T.Parallel (their tile loads are tested)
  mutable int index_depth_ = 0, control_depth_ = 0;
  int parallel_depth_ = 0;
  // the load whose value a store into a global tensor stores (tested), and that tensor's words
  const LoadNode* leaving_load_ = nullptr;
  std::string leaving_how_;

  // --- expressions: the shared scalar-C printer (target/c_expr.h) in the CPU dialect; its hooks
  // are the expr_* methods (what the CPU spells its own way). Values are in compute_type(e->dtype).
  struct CpuExprs final : target::CExprPrinter {
    explicit CpuExprs(CodeGen& g) : CExprPrinter(kCpuDialect), g(g) {}
    CodeGen& g;
    std::string var(const VarNode& n) const override { return g.expr_var(n); }
    // block, shape and loop variables (with a non-negative start) are non-negative
    bool nonneg_var(const VarNode* v) const override { return g.var_nonneg(v); }
    // scalar parameters (not shape variables) and lets of data (CodeGen::data_vars_)
    std::optional<long double> data_var(const VarNode& v) const override {
      auto it = g.data_vars_.find(&v);
      return it == g.data_vars_.end() ? std::nullopt : std::optional<long double>(it->second);
    }
    std::string float_literal(double v, DType t) const override { return float_lit(v, t); }
    std::string load(const LoadNode& n) const override { return g.expr_load(n); }
    std::string call(const CallNode& n) const override { return g.expr_call(n); }
    std::string cast(const CastNode& n) const override { return g.expr_cast(n); }
    std::string select(const SelectNode& n) const override { return g.expr_select(n); }
    bool eager_logic(const BinaryNode& n) const override { return g.eager_safe(n.b); }
  };
  const CpuExprs exprs_{*this};
  std::string expr(const Expr& e) const { return exprs_.print(e); }
  std::string expr_var(const VarNode& n) const;
  std::string expr_call(const CallNode& n) const;
  std::string expr_cast(const CastNode& n) const;
  std::string expr_select(const SelectNode& n) const;
  // Can e be evaluated whether or not its value is used (no load from a global tensor, no integer
  // division)? Both arms of a select, the right operand of `and` / `or`.
  bool eager_safe(const Expr& e) const;
  std::string expr_load(const LoadNode& n);

  // Sign analysis for the fast forms of floordiv / ceildiv / mod (CExprPrinter::nonneg).
  bool nonneg(const Expr& e) const { return exprs_.nonneg(e); }
  bool var_nonneg(const VarNode* v) const {
    auto it = code_.find(v);
    return it != code_.end() ? it->second.nonneg : nonneg_.count(v) > 0;
  }
  // A kernel expression as index arithmetic: a constant folded to its literal; one of another
  // integer type than int64 as its C text (the generated code computes every integer in int64_t).
  Idx idx(const Expr& e) const {
    if (auto c = as_const_int(e)) return ic(*c);
    return e->dtype == kIndexType ? e : code(expr(e), nonneg(e));
  }
  // e known non-negative (sizes, extents): e, or e's C text as a value of that sign
  Idx nonneg_idx(const Idx& e) const { return nonneg(e) ? e : code(expr(e), true); }
  // A value the generated code holds under the C text `text` (a local, a loop counter, a call).
  Idx code(const std::string& text, bool nonneg) const {
    Var v = var(text);
    code_.emplace(v.get(), Code{v, text, nonneg});
    return v;
  }
  Idx imax(const Idx& a, const Idx& b) const {
    if (both_const(a, b)) return arith::max(a, b);
    if (cst(a) == 0 && nonneg(b)) return b;
    if (cst(b) == 0 && nonneg(a)) return a;
    return binary(BinOp::Max, a, b);
  }
  // The same value in the generated code: the same literal or the same C text.
  bool same(const Idx& a, const Idx& b) const {
    auto ca = cst(a), cb = cst(b);
    return ca ? (cb && *ca == *cb) : (!cb && expr(a) == expr(b));
  }
  // Appends the run-time conditions (C++ expressions) for the whole region lying inside its
  // buffer; *never = true when it provably does not.
  void inside_conds(const RegionView& v, std::vector<std::string>& out, bool* never = nullptr) const;
  Idx linear_index(const Buffer& b, const std::vector<Expr>& indices, const Span& at, bool checked);
  Idx checked_index(const Idx& i, const Idx& extent, const Buffer& b, size_t dim, const Span& at);
  std::vector<Idx> shape_of(const Buffer& b);
  RegionView view(const Region& r);
  // Hoists non-constant region starts into named locals (prefix p) and returns the base offset.
  Idx hoist_starts(RegionView& v, const std::string& p);
  Idx offset(const RegionView& v, const Idx& base, int upto_loop) const;
  // Valid loop range [lo, hi) of loop dim k of v (elements inside the buffer).
  Idx range_lo(const RegionView& v, int d) const { return nonneg(v.start[d]) ? ic(0) : imax(ic(0), neg(v.start[d])); }
  Idx range_hi(const RegionView& v, int d) const {
    Idx hi = v.fits_above(d) ? v.ext[d] : imin(v.ext[d], sub(v.shape[d], v.start[d]));
    return v.limit[d] ? imin(hi, v.limit[d]) : hi;
  }
  // Conditions (C++ strings) that the unit dims of v are inside the buffer; sets never if one fails statically.
  std::vector<std::string> unit_dims_inside(const RegionView& v, bool& never) const;
  // v in a local `name` (declared here) unless it is constant
  Idx hoist(const Idx& v, const std::string& name) {
    if (cst(v)) return v;
    line("const int64_t " + name + " = " + expr(v) + ";");
    return code(name, nonneg(v));
  }

  const Kernel& k_;
  const bool bounds_check_;
  // checked: the out_idx outputs an atomic add must check for the runtime's fill (not zeroed ones)
  std::unordered_set<const void*> checked_adds_;
  // Tile accesses check_bounds could not prove in bounds: their indices are always checked.
  const std::unordered_set<const void*> unproved_;
  std::string out_;
  int indent_ = 0;
  std::unordered_map<const void*, std::string> names_;
  std::set<std::string> used_;
  std::unordered_set<const void*> bound_, nonneg_, declared_;
  // the variables holding data, with a bound on their magnitude (CExprPrinter::data_var): integer
  // scalar parameters (their dtype's range: an int64 one may be any int64) and lets whose value is
  // not index arithmetic (the bound of the value as computed: `h = a[0] * a[1]` of int32 past 2^31)
  std::unordered_map<const void*, long double> data_vars_;
  // the variables made by code(): their C text and sign
  struct Code {
    Var var;
    std::string text;
    bool nonneg;
  };
  mutable std::unordered_map<const VarNode*, Code> code_;
  int loop_depth_ = 0;  // loops of the kernel body around the statement being emitted
  // tiles whose copies are elided: the C names of the view's pointer and leading dim
  // live: for a tile read only by gemm, two int64_t locals (rows, cols) bounding its part that
  // the last copy filled from inside the source; everything past them is zero, so the gemm
  // multiplies only that part (a tail block of a matvec or a small-K matmul does not pay for
  // its padding). Empty for row views.
  struct View {
    std::string ptr, ld;
    int64_t cols;
    // the element type ptr points to: the tile's, or for a widening row view (a bfloat16 /
    // float16 tensor viewed as a float32 tile, view_rows) the tensor's; its readers widen each
    // element with tw_cpu::convert<float>, as the copy would (exact). The masked path copies the
    // tensor's values unconverted into `shadow` (a tile of that type) and points the view at it.
    DType dt;
    std::string shadow;
    std::string pf;
    std::string live_r, live_c;
    int64_t rows = 0;
    // gemm operands: where the view lies in its tensor's rows: column col of rows `width` long
    // (col = -1 when the tile itself is read), for the gemm runtime's whole-row GEMV (gemm.h)
    std::string col, width;
    // tiles copied @prefetch_slices: the next iteration's source (null: none) and its leading dim
    std::string nx, nx_ld;
  };
  // the statement setting a gemm operand view's col/width to the source region s (or to "the
  // tile itself" when s is null or its columns are not its tensor's last dimension)
  void set_view_col(const View& v, const RegionView* s, const std::string& cond = "");
  std::unordered_set<const void*> elidable_, live_tiles_;
  // row views (view_rows): the tiles that have one, and those whose view is live now
  std::unordered_set<const void*> row_views_, live_views_;
  // the row views of a float32 tile copied from a bfloat16 / float16 tensor: that dtype (widening views)
  std::unordered_map<const void*, DType> widened_;
  // the row views at the kernel's top level (the others are in loop bodies: no next-block prefetch)
  std::unordered_set<const void*> top_row_views_;
  // 1-D grid with row views: the block this thread is expected to run next is bx + tw_step (the
  // step between its last two blocks), and each view also holds that block's source address
  // (pf), prefetched into L2 by the pass that ends the view
  bool prefetch_next_ = false;
  // prefetches of the next block's source of the tile t written by a fused pass (chunk tw_j0 of
  // row `row`, tw_jn elements), when t's view is live and has a source address for it
  void emit_prefetch_next(const Buffer& t, const std::string& row);
  std::unordered_map<const void*, View> views_;
  // accumulator tiles computed in place in their copy-out's window (@gemm_out): the copy, and
  // from the tile's clear on, the name of its "nothing written yet" flag and whether the window
  // may fall back to the tile at run time (a start not provably >= 0, a unit dim maybe outside)
  struct OutView {
    const CopyNode* copy = nullptr;
    std::string fresh;
    bool fallback = false;
  };
  std::unordered_map<const void*, OutView> out_views_;
  void emit_out_view(const FillNode& n, OutView& o);
  // emitting a loop's next-iteration prefetches (prefetch_gathers): its copies only prefetch
  bool prefetching_ = false;
  // the tiles some copy into which is @prefetch_slices; emitting next_page_slices: its copies
  // only set their tile's next source
  std::unordered_set<const void*> slice_tiles_;
  bool slicing_ = false;
};

// ---------------------------------------------------------------------------------------------
// Kernel

constexpr const char* kPreamble = R"(#include <tw_cpu/abi.h>
#include <tw_cpu/tw_cpu.h>

namespace {
// Index helpers: Python floor semantics for // and % (fast paths are emitted inline when both
// operands are known non-negative), min/max as selects so loops vectorise.
inline int64_t tw_min(int64_t a, int64_t b) { return b < a ? b : a; }
inline int64_t tw_max(int64_t a, int64_t b) { return a < b ? b : a; }
// float min/max propagate NaN in either operand (numpy's np.minimum/np.maximum, docs/language.md):
// the select (vminps/vmaxps keeps a) and one unordered compare + blend for b
inline float tw_min(float a, float b) { return b != b ? b : (b < a ? b : a); }
inline float tw_max(float a, float b) { return b != b ? b : (a < b ? b : a); }
inline double tw_min(double a, double b) { return b != b ? b : (b < a ? b : a); }
inline double tw_max(double a, double b) { return b != b ? b : (a < b ? b : a); }
template <class T>
inline T tw_select(bool c, T a, T b) { return c ? a : b; }  // both arms already evaluated
// float arms as a bit select: g++ does not if-convert a float ?: whose arms hold arithmetic
// without masked vector operations (AVX2, SSE2), which left such loops scalar there
template <>
inline float tw_select<float>(bool c, float a, float b) { return tw_cpu::detail::fsel(c, a, b); }
template <>
inline double tw_select<double>(bool c, double a, double b) { return tw_cpu::detail::dsel(c, a, b); }
inline int64_t tw_abs(int64_t a) { return a < 0 ? -a : a; }
// Defined for every operand, never a trap: a // 0 == 0 and a % 0 == a (so a == (a // b) * b + a % b
// still holds), INT64_MIN // -1 wraps to INT64_MIN and INT64_MIN % -1 == 0.
inline int64_t tw_neg(int64_t a) { return static_cast<int64_t>(0ull - static_cast<uint64_t>(a)); }
inline int64_t tw_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return tw_neg(a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t tw_floormod(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline int64_t tw_ceildiv(int64_t a, int64_t b) { return b == 0 ? 0 : tw_neg(tw_floordiv(tw_neg(a), b)); }
// Non-negative operands (the fast forms): only the divisor 0 needs care.
inline int64_t tw_udiv(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
inline int64_t tw_umod(int64_t a, int64_t b) { return b == 0 ? a : a % b; }
// numpy's np.remainder: fmod, plus b where the signs differ, a zero with b's sign
inline float tw_fmod(float a, float b) {
  float r = __builtin_fmodf(a, b);
  if (r == 0.0f) return __builtin_copysignf(0.0f, b);
  return (r < 0.0f) != (b < 0.0f) ? r + b : r;
}
inline double tw_fmod(double a, double b) {
  double r = __builtin_fmod(a, b);
  if (r == 0.0) return __builtin_copysign(0.0, b);
  return (r < 0.0) != (b < 0.0) ? r + b : r;
}
}  // namespace
)";

std::string CodeGen::run() {
  const auto& k = *k_;
  if (k.block_vars.empty() && !k.grid.empty())
    throw Error("kernel '" + k.name + "' has grid extents but no block variables", k.span);
  if (k.block_vars.size() > 3)
    throw Error("kernel '" + k.name + "' has a " + std::to_string(k.block_vars.size()) +
                    "-D grid; the CPU target supports at most 3 block dimensions",
                k.span, "fold the extra dimensions into one block index");
  if (k.block_vars.size() != k.grid.size())
    throw Error("kernel '" + k.name + "' has " + std::to_string(k.block_vars.size()) + " block variables but " +
                    std::to_string(k.grid.size()) + " grid extents",
                k.span);
  // Reserve the names of the interface so no user name takes them.
  for (const char* r : {"tw_args", "tw_ext", "tw_bx", "tw_by", "tw_bz"}) used_.insert(r);
  // the views the passes decided (view_gemm_operands, view_rows); checked mode (TW_BOUNDS_CHECK)
  // reads every tile element through its checked index: no row views
  for_each_stmt(k_->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Copy && find_annotation(s, "prefetch_slices"))
      slice_tiles_.insert(as<CopyNode>(s)->dst.buffer.get());
    if (s->kind != StmtKind::Alloc) return;
    const void* b = as<AllocNode>(s)->buffer.get();
    if (const Annotation* a = find_annotation(s, "gemm_view")) {
      elidable_.insert(b);
      if (a->args.at(0)) live_tiles_.insert(b);
    }
    if (find_annotation(s, "gemm_out")) out_views_[b];
    if (const Annotation* a = find_annotation(s, "row_view"); a && !bounds_check_) {
      row_views_.insert(b);
      if (a->args.at(0)) top_row_views_.insert(b);
      if (a->args.at(1)) widened_.emplace(b, DType{});  // the dtype: its copy's source's (below)
    }
  });
  if (!widened_.empty())
    for_each_stmt(k_->body, [&](const Stmt& s) {
      if (s->kind != StmtKind::Copy) return;
      if (auto it = widened_.find(as<CopyNode>(s)->dst.buffer.get()); it != widened_.end())
        it->second = as<CopyNode>(s)->src.buffer->dtype;
    });
  if (!out_views_.empty())
    for_each_stmt(k_->body, [&](const Stmt& s) {
      if (s->kind != StmtKind::Copy) return;
      if (auto it = out_views_.find(as<CopyNode>(s)->src.buffer.get()); it != out_views_.end())
        it->second.copy = as<CopyNode>(s);
    });
  out_ += "// Generated by Tilewright (target cpu) for kernel '" + k.name + "'. Do not edit.\n";
  if (bounds_check_ || !unproved_.empty())
    out_ += std::string("#include <tw_cpu/check.h>  // ") +
            (bounds_check_ ? "TW_BOUNDS_CHECK=1" : "tile indices not proved in bounds") + "\n";
  out_ += kPreamble;
  out_ += "\nextern \"C\" int tw_abi_version(void) { return TW_CPU_ABI_VERSION; }\n\n";

  out_ += "extern \"C\" void tw_grid(const TwArgs* tw_args, int64_t tw_ext[3]) {\n";
  indent_ = 1;
  emit_params(/*tensors=*/false);
  // An output the kernel only adds into (T.atomic_add) starts at zero, before any block runs
  // (transform::globals_accumulated: the runtime allocated it, garbage + the sum otherwise).
  const auto accumulated = transform::globals_accumulated(k_);
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (bounds_check_ && p.is_output && p.buffer && !accumulated.count(p.buffer.get()))
      checked_adds_.insert(p.buffer.get());  // its adds check for the runtime's fill (tw_cpu/check.h AddCheck)
    if (!p.is_output || !p.buffer || !accumulated.count(p.buffer.get())) continue;
    std::string bytes = std::to_string(p.buffer->dtype.bytes());
    for (const auto& d : p.buffer->shape) bytes += " * (size_t)(" + expr(d) + ")";
    line("__builtin_memset(tw_args->params[" + std::to_string(i) + "], 0, " + bytes + ");  // " + p.buffer->name +
         ": only T.atomic_add writes it");
  }
  if (!elidable_.empty())  // gemm may cache packed views of inputs: valid for one launch only
    line("tw_cpu::new_launch();");
  for (size_t i = 0; i < 3; ++i)
    line("tw_ext[" + std::to_string(i) + "] = " + (i < k.grid.size() ? expr(k.grid[i]) : std::string("1")) + ";");
  indent_ = 0;
  out_ += "}\n\n";

  if (!checked_adds_.empty())  // read and reset by the runtime around each launch (runtime/cpu_launch.cpp)
    out_ += "extern \"C\" tw_cpu::AddCheck tw_add_check = {-1, 0, 0, 0, nullptr, 0};\n\n";
  out_ += "extern \"C\" void tw_block(const TwArgs* tw_args, int64_t tw_bx, int64_t tw_by, int64_t tw_bz) {\n";
  indent_ = 1;
  emit_params(/*tensors=*/true);
  static const char* kBlockArgs[3] = {"tw_bx", "tw_by", "tw_bz"};
  for (size_t i = 0; i < 3; ++i) {
    if (i < k.block_vars.size())
      line("const int64_t " + bind(k.block_vars[i], true) + " = " + kBlockArgs[i] + ";");
    else
      line(std::string("(void)") + kBlockArgs[i] + ";");
  }
  prefetch_next_ = !top_row_views_.empty() && k.block_vars.size() == 1;
  if (prefetch_next_) {
    line("static thread_local int64_t tw_last_block = -1;  // blocks are handed out in order: predict the next");
    line("int64_t tw_step = tw_bx - tw_last_block;");
    line("tw_step = (tw_step >= 1 && tw_step <= 8) ? tw_step : 1;");
    line("tw_last_block = tw_bx;");
  }
  emit(k.body);
  indent_ = 0;
  out_ += "}\n";
  return out_;
}

void CodeGen::emit_params(bool tensors) {
  const auto& k = *k_;
  auto svars = k.shape_vars();
  for (size_t i = 0; i < svars.size(); ++i)
    line("[[maybe_unused]] const int64_t " + bind(svars[i], true) + " = tw_args->shape_vars[" + std::to_string(i) +
         "];");
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    std::string slot = "tw_args->params[" + std::to_string(i) + "]";
    if (p.buffer) {
      if (p.buffer->scope != Scope::global)
        throw Error("parameter '" + p.buffer->name + "' must be a global tensor, not " +
                        std::string(scope_name(p.buffer->scope)),
                    p.buffer->span);
      declared_.insert(p.buffer.get());
      std::string n = name_for(p.buffer.get(), p.buffer->name);
      if (tensors) line(storage_type(p.buffer->dtype) + "* __restrict " + n + " = (" + storage_type(p.buffer->dtype) + "*)" + slot + ";");
    } else if (p.scalar) {
      bool is_shape_var = false;
      for (const auto& sv : svars) is_shape_var |= sv == p.scalar;
      if (is_shape_var) continue;  // bound above
      DType t = p.scalar->dtype;
      if (t.is_int()) data_vars_[p.scalar.get()] = std::ldexp(1.0L, t.code == DTypeCode::u8 ? 8 : t.bits() - 1);
      line("[[maybe_unused]] const " + compute_type(t) + " " + bind(p.scalar, false) + " = " +
           widen(t, "*(const " + storage_type(t) + "*)" + slot) + ";");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Statements

void CodeGen::emit(const Stmt& s) {
  if (!s) return;
  emit_one(s);
  if (bounds_check_ && !prefetching_ && !slicing_) emit_written(s);
}

void CodeGen::emit_one(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::Seq: return emit_seq(*as<SeqNode>(s));
    case StmtKind::For: return emit_row_keep_map(s) ? void() : emit_for(*as<ForNode>(s));
    case StmtKind::If: return emit_if(*as<IfNode>(s));
    case StmtKind::Let: return emit_let(*as<LetNode>(s));
    case StmtKind::Store: return emit_store(*as<StoreNode>(s));
    case StmtKind::Alloc: return emit_alloc(*as<AllocNode>(s));
    case StmtKind::Copy: return emit_copy(*as<CopyNode>(s));
    case StmtKind::Gemm: return emit_gemm(*as<GemmNode>(s));
    case StmtKind::Fill: return emit_fill(*as<FillNode>(s));
    case StmtKind::Reduce: return emit_reduce(*as<ReduceNode>(s));
    case StmtKind::CoreScope:
    case StmtKind::Sync:
      throw Error("expert-mode synchronisation is Ascend-only: T.Scope, flags and barriers have no meaning on the "
                  "cpu target",
                  s->span, "compile this kernel for an ascend910b target, or write it without is_npu=True");
  }
}

void CodeGen::emit_seq(const SeqNode& n) {
  for (size_t k = 0; k < n.body.size(); ++k) {
    // checked mode emits each statement on its own (emit_written follows each)
    if (size_t used = bounds_check_ ? 0 : emit_row_pipeline(n, k)) {
      k += used - 1;
      continue;
    }
    const Stmt& s = n.body[k];
    if (k + 1 < n.body.size() && !bounds_check_ &&
        (emit_map_copy_out(s, n.body[k + 1]) || emit_map_reduce(s, n.body[k + 1])))
      ++k;
    else emit(s);
    // a full-tile map overwrote a tile read through a view: later reads use the tile
    if (const StoreNode* st = full_tile_map(s)) live_views_.erase(st->buffer.get());
  }
}

void CodeGen::emit_range(const SeqNode& n, size_t from, size_t to) {
  for (size_t k = from; k < to; ++k) {
    const Stmt& s = n.body[k];
    if (k + 1 < to && (emit_map_copy_out(s, n.body[k + 1]) || emit_map_reduce(s, n.body[k + 1]))) ++k;
    else emit(s);
    // a full-tile map overwrote a tile read through a view: later reads use the tile
    if (const StoreNode* st = full_tile_map(s)) live_views_.erase(st->buffer.get());
  }
}

// serial / pipelined: plain loop; unroll: #pragma GCC unroll; parallel: plain nested loops, the
// innermost marked ivdep (a T.Parallel body is an elementwise map: iterations are independent).
void CodeGen::emit_for(const ForNode& n) {
  const bool control = bounds_check_ && parallel_depth_ == 0;  // its bounds: scalar control flow
  control_depth_ += control;
  Idx mn = idx(n.min), ext = idx(n.extent);
  switch (n.for_kind) {
    case ForKind::serial: break;
    case ForKind::pipelined:
      line("// pipelined(num_stages=" + std::to_string(n.num_stages) +
           "): no asynchronous copies on a CPU, runs as a serial loop");
      break;
    case ForKind::unroll:
      line(cst(ext) ? "#pragma GCC unroll " + std::to_string(std::clamp<int64_t>(*cst(ext), 1, 65534))
                 : std::string("#pragma GCC unroll 8  // extent not constant: partial unroll"));
      break;
    case ForKind::parallel:
      if (!contains_loop(n.body)) line("#pragma GCC ivdep");
      break;
  }
  std::string v = bind(n.var, nonneg(mn));
  Idx end = add(mn, ext);
  if (cst(end)) {
    open("for (int64_t " + v + " = " + expr(mn) + "; " + v + " < " + expr(end) + "; ++" + v + ")");
  } else {  // evaluate the bound once
    std::string e = name_for(&n, v + "_end");
    open("for (int64_t " + v + " = " + expr(mn) + ", " + e + " = " + expr(end) + "; " + v + " < " + e + "; ++" + v + ")");
  }
  control_depth_ -= control;
  ++loop_depth_;
  if (!prefetching_)
    if (Stmt next = next_iteration_prefetches(n)) {
      line("// the next iteration's gathered copy sources, prefetched into L2 (prefetch_gathers)");
      prefetching_ = true;
      emit(next);
      prefetching_ = false;
    }
  if (!prefetching_ && !slicing_)
    if (Stmt next = next_page_slices(n, code("tw_cpu::simd::kSliceLead32", true))) {
      line("// the next iteration's sources of the tiles gemms read in strips (prefetch_gathers @prefetch_slices)");
      std::string reset;
      for_each_stmt(next, [&](const Stmt& s) {
        if (s->kind == StmtKind::Copy) reset += views_.at(as<CopyNode>(s)->dst.buffer.get()).nx + " = nullptr; ";
      });
      line(reset.substr(0, reset.size() - 1));
      slicing_ = true;
      emit(next);
      slicing_ = false;
    }
  parallel_depth_ += n.for_kind == ForKind::parallel;
  emit(n.body);
  parallel_depth_ -= n.for_kind == ForKind::parallel;
  --loop_depth_;
  close();
}

// A map keeping its tile's rows where a row condition holds (tile_facts.h row_keep_map: `t[i,
// j] = T.where(p, t[i, j], e)`) writes only the rows where p fails: `for i: if (!p) for j: t[i,
// j] = e`. The kept rows were copies of themselves (paged decode's V mask: a full pass over the
// tile every step, of which only the last step's tail rows change). Not while t is read through
// a view (the map would be what fills the tile) nor in checked mode.
bool CodeGen::emit_row_keep_map(const Stmt& s) {
  const SelectNode* sel = row_keep_map(s);
  if (!sel || bounds_check_) return false;
  const StoreNode* st = full_tile_map(s);
  if (live_views_.count(st->buffer.get()) || row_views_.count(st->buffer.get())) return false;
  const auto& outer = *as<ForNode>(s);
  const auto& inner = *as<ForNode>(outer.body);
  line(line_comment(st->span) + "map keeping the rows of " + st->buffer->name + " where the condition holds: only the others are written");
  Stmt fill = std::make_shared<ForNode>(inner.var, inner.min, inner.extent, inner.for_kind, inner.num_stages,
                                        std::make_shared<StoreNode>(st->buffer, st->indices, sel->f, st->span), inner.span);
  Stmt row = std::make_shared<IfNode>(unary(UnOp::Not, sel->cond, sel->cond->span), fill, nullptr, st->span);
  emit_for(ForNode(outer.var, outer.min, outer.extent, ForKind::serial, 0, row, outer.span));
  return true;
}

void CodeGen::emit_if(const IfNode& n) {
  const bool control = bounds_check_ && parallel_depth_ == 0;  // scalar control flow
  control_depth_ += control;
  std::string cond = expr(n.cond);
  control_depth_ -= control;
  open("if (" + cond + ")");
  emit(n.then_body);
  if (n.else_body) {
    open_else();
    emit(n.else_body);
  }
  close();
}

void CodeGen::emit_let(const LetNode& n) {
  std::string value = expr(n.value);
  bool nn = n.value->dtype.is_int() && nonneg(n.value);
  if (auto b = exprs_.data_bound(n.value)) data_vars_[n.var.get()] = *b;
  else data_vars_.erase(n.var.get());
  line("const " + compute_type(n.var->dtype) + " " + bind(n.var, nn) + " = " + value + ";");
}

void CodeGen::emit_store(const StoreNode& n) {
  if (static_cast<int>(n.indices.size()) != n.buffer->ndim())
    throw Error("store into '" + n.buffer->name + "' uses " + std::to_string(n.indices.size()) +
                    " indices, the buffer has " + std::to_string(n.buffer->ndim()) + " dimension(s)",
                n.span);
  std::string b = buf_name(n.buffer);
  index_depth_ += bounds_check_;
  std::string at = expr(linear_index(n.buffer, n.indices, n.span, bounds_check_ || unproved_.count(&n)));
  index_depth_ -= bounds_check_;
  if (bounds_check_ && n.buffer->scope == Scope::global) {  // a tile element stored as it is leaves the block
    Expr v = n.value;
    while (v->kind == ExprKind::Cast) v = as<CastNode>(v)->value;
    if (v->kind == ExprKind::Load) {
      leaving_load_ = as<LoadNode>(v);
      leaving_how_ = "stored into tensor '" + n.buffer->name + "'";
    }
  }
  std::string value = expr(n.value);
  leaving_load_ = nullptr;
  line(b + "[" + at + "] = " + narrow(n.buffer->dtype, n.value->dtype, value) + ";");
  // a store into a tile read through a view is the one of a map overwriting it (view_rows):
  // later reads, in this map's next statements too, read the tile
  live_views_.erase(n.buffer.get());
}

void CodeGen::emit_alloc(const AllocNode& n) {
  const Buffer& b = n.buffer;
  if (b->scope == Scope::global)
    throw Error("cannot allocate the global buffer '" + b->name + "' inside a kernel", n.span,
                "declare it as a kernel parameter (an output) instead");
  if (b->scope != Scope::shared && b->scope != Scope::fragment)
    throw Error("tile buffer '" + b->name + "' has the Ascend scope " + std::string(scope_name(b->scope)) +
                    ", which the cpu target does not have",
                n.span, "use T.alloc_shared / T.alloc_fragment, or compile for an ascend910b target");
  auto shape = b->const_shape();
  if (!shape) throw Error("tile buffer '" + b->name + "' must have a constant shape", n.span);
  int64_t numel = 1;
  std::string dims;
  for (int64_t d : *shape) {
    numel *= d;
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  }
  declared_.insert(b.get());
  std::string name = name_for(b.get(), b->name);
  line("alignas(64) " + storage_type(b->dtype) + " " + name + "[" + std::to_string(numel) + "];  " +
       line_comment(n.span) + std::string(scope_name(b->scope)) + " [" + dims + "]");
  if (bounds_check_) {
    Flags f{name_for(reinterpret_cast<const char*>(b.get()) + 1, name + "_w"),
            name_for(reinterpret_cast<const char*>(b.get()) + 2, name + "_shape"), shape->size()};
    line("uint8_t " + f.w + "[" + std::to_string(numel) + "] = {};  // checked mode: " + name +
         "'s elements written (tw_cpu/check.h written_at)");
    line("static const int64_t " + f.shape + "[] = {" + (dims.empty() ? "1" : dims) + "};");
    flags_[b.get()] = f;
  }
  bool row_view = row_views_.count(b.get()) > 0;
  if ((elidable_.count(b.get()) || row_view) && shape->size() == 2) {
    // read only by gemm (or, view_rows, only read until a map overwrites it), written by one
    // copy from a global tensor: a view
    View v{name_for(&n, name + "_p"), name_for(reinterpret_cast<const char*>(&n) + 1, name + "_ld"), (*shape)[1], b->dtype};
    std::string init = name;
    if (auto w = widened_.find(b.get()); w != widened_.end()) {
      v.dt = w->second;
      v.shadow = name_for(reinterpret_cast<const char*>(&n) + 9, name + "_w");
      line("alignas(64) " + storage_type(v.dt) + " " + v.shadow + "[" + std::to_string(numel) + "];  // " + name +
           "'s source values, unconverted, when its copy takes the masked path (read widened)");
      init = v.shadow;
    }
    line("[[maybe_unused]] const " + storage_type(v.dt) + "* " + v.ptr + " = " + init + ";  // copies into " + name +
         " are elided when in bounds: " + (row_view ? "reads" : "gemm reads") + " (" + v.ptr + ", " + v.ld + ")" +
         (v.shadow.empty() ? "" : ", each element widened to float32 where read"));
    line("[[maybe_unused]] int64_t " + v.ld + " = " + std::to_string(v.cols) + ";");
    if (elidable_.count(b.get())) {
      v.col = name_for(reinterpret_cast<const char*>(&n) + 5, name + "_col");
      v.width = name_for(reinterpret_cast<const char*>(&n) + 6, name + "_width");
      line("[[maybe_unused]] int64_t " + v.col + " = -1, " + v.width + " = 0;  // " + name +
           " is columns [col, col + " + std::to_string(v.cols) + ") of rows `width` long (-1: the tile)");
    }
    if (elidable_.count(b.get()) && slice_tiles_.count(b.get())) {
      v.nx = name_for(reinterpret_cast<const char*>(&n) + 7, name + "_nx");
      v.nx_ld = name_for(reinterpret_cast<const char*>(&n) + 8, name + "_nx_ld");
      line("[[maybe_unused]] const " + storage_type(b->dtype) + "* " + v.nx + " = nullptr;  // the next page's source (" +
           "prefetch_gathers @prefetch_slices): its strips are prefetched before each gemm call");
      line("[[maybe_unused]] int64_t " + v.nx_ld + " = 0;");
    }
    if (live_tiles_.count(b.get())) {
      v.rows = (*shape)[0];
      v.live_r = name_for(reinterpret_cast<const char*>(&n) + 3, name + "_rows");
      v.live_c = name_for(reinterpret_cast<const char*>(&n) + 4, name + "_cols");
      line("[[maybe_unused]] int64_t " + v.live_r + " = " + std::to_string(v.rows) + ", " + v.live_c + " = " +
           std::to_string(v.cols) + ";  // " + name + " is zero past these (set by its copy)");
    }
    if (row_view && prefetch_next_ && top_row_views_.count(b.get())) {
      v.pf = name_for(reinterpret_cast<const char*>(&n) + 2, name + "_next");
      line("[[maybe_unused]] const char* " + v.pf + " = (const char*)" + name +
           ";  // the next block's source (prefetched; the tile itself after a masked copy)");
    }
    views_[b.get()] = v;
  }
}

void CodeGen::set_view_col(const View& v, const RegionView* s, const std::string& cond) {
  if (v.col.empty()) return;
  const int last = s ? s->rank() - 1 : -1;
  if (!s || s->dims.empty() || s->dims.back() != last) {
    line(v.col + " = -1; " + v.width + " = 0;");
    return;
  }
  const std::string col = expr(s->start[last]), width = expr(s->shape[last]);
  if (cond.empty()) line(v.col + " = " + col + "; " + v.width + " = " + width + ";");
  else line(v.col + " = " + cond + " ? (int64_t)(" + col + ") : -1; " + v.width + " = " + width + ";");
}

// A copy or atomic_add moves between regions of the same shape once unit dimensions are dropped.
void CodeGen::check_same_shape(const RegionView& s, const RegionView& d, const CopyNode& n) {
  const std::string what = n.atomic ? "T.atomic_add" : "copy";
  if (s.dims.size() != d.dims.size())
    throw Error(what + " from a region with " + std::to_string(s.dims.size()) + " non-unit dimension(s) of '" +
                    n.src.buffer->name + "' into one with " + std::to_string(d.dims.size()) + " of '" +
                    n.dst.buffer->name + "'",
                n.span, "the two regions must have the same shape once dimensions of extent 1 are dropped");
  for (size_t k = 0; k < s.dims.size(); ++k)
    if (!same(s.ext[s.dims[k]], d.ext[d.dims[k]]))
      throw Error(what + " between regions of different shapes: extent " + expr(s.ext[s.dims[k]]) + " of '" +
                      n.src.buffer->name + "' vs " + expr(d.ext[d.dims[k]]) + " of '" + n.dst.buffer->name + "'",
                  n.span, "the two regions must have the same shape once dimensions of extent 1 are dropped");
}

// T.atomic_add: dst += convert(src) element by element with tw_cpu::atomic_add (types.h), over the
// elements inside both regions' buffers (a source element outside reads 0: adding it changes
// nothing; a destination element outside is not written).
void CodeGen::emit_atomic_add(const CopyNode& n) {
  RegionView s = view(n.src), d = view(n.dst);
  check_same_shape(s, d, n);
  const int nl = static_cast<int>(s.dims.size());
  line(line_comment(n.span) + "atomic_add " + n.src.buffer->name + " -> " + n.dst.buffer->name);
  open("");
  Idx sb = hoist(hoist_starts(s, "tw_s"), "tw_sb"), db = hoist(hoist_starts(d, "tw_d"), "tw_db");
  bool dst_never = false, src_never = false;
  std::vector<std::string> conds = unit_dims_inside(d, dst_never);
  for (auto& c : unit_dims_inside(s, src_never)) conds.push_back(c);
  if (dst_never || src_never) {
    line("// a unit dimension of a region lies outside its buffer: nothing to add");
    close();
    return;
  }
  int opened = open_if_all(conds) ? 1 : 0;
  auto loopv = [](int k) { return "tw_i" + std::to_string(k); };
  for (int k = 0; k < nl; ++k) {
    Idx lo = imax(range_lo(d, d.dims[k]), range_lo(s, s.dims[k]));
    Idx hi = imin(range_hi(d, d.dims[k]), range_hi(s, s.dims[k]));
    open("for (int64_t " + loopv(k) + " = " + expr(lo) + "; " + loopv(k) + " < " + expr(hi) + "; ++" + loopv(k) + ")");
    ++opened;
  }
  std::string val = s.buf + "[" + expr(offset(s, sb, nl)) + "]";
  if (s.dtype != d.dtype) val = "tw_cpu::convert<" + storage_type(d.dtype) + ">(" + val + ")";
  const std::string at = "&" + d.buf + "[" + expr(offset(d, db, nl)) + "], " + val;
  if (checked_adds_.count(n.dst.buffer.get()))  // an element nothing wrote holds the runtime's fill
    line("tw_cpu::atomic_add_checked(" + at + ", tw_add_check, " + std::to_string(n.span.line) + ", " +
         std::to_string(n.span.col) + ");");
  else
    line("tw_cpu::atomic_add(" + at + ");");
  for (int j = 0; j < opened; ++j) close();
  close();
}

// copy(src -> dst): both regions are viewed with their unit dims dropped; the remaining dims
// are paired in order. Fast path: both regions inside their buffers (checked at run time on the
// region corners unless provable here): unchecked loops, memcpy rows when the dtypes match and
// rows are contiguous. Masked path: the loops run over the destination's valid range only;
// elements whose source lies outside the source buffer are written as 0.
// A copy of next_iteration_prefetches: every cache line of its source rows requested into L2
// (prefetcht1), when the region lies inside its tensor (the copy's masked path reads the rest
// as zeros); nothing is written.
// The shared start of both: a scope with the source's starts hoisted (sb) and, when the region is
// not provably inside its tensor, an if on it (opened: 1). False when it provably lies outside:
// the scope is closed again and nothing is emitted.
bool CodeGen::open_inside_source(const CopyNode& n, const std::string& what, RegionView& s, Idx& sb,
                                 int& opened) {
  line(line_comment(n.span) + what + " of copy " + n.src.buffer->name + " -> " + n.dst.buffer->name);
  open("");
  sb = hoist(hoist_starts(s, "tw_s"), "tw_sb");
  std::vector<std::string> conds;
  bool never = false;
  inside_conds(s, conds, &never);
  if (never) {
    line("// the region lies outside its tensor: nothing to prefetch");
    close();
    return false;
  }
  opened = open_if_all(conds) ? 1 : 0;
  return true;
}

void CodeGen::emit_prefetch_copy(const CopyNode& n) {
  RegionView s = view(n.src);
  Idx sb;
  int opened = 0;
  if (!open_inside_source(n, "prefetch the source", s, sb, opened)) return;
  const int nl = static_cast<int>(s.dims.size());
  const bool rows = nl > 0 && s.dims.back() == s.rank() - 1;  // contiguous innermost dim
  const int loops = rows ? nl - 1 : nl;
  for (int k = 0; k < loops; ++k) {
    std::string v = "tw_i" + std::to_string(k);
    open("for (int64_t " + v + " = 0; " + v + " < " + expr(s.ext[s.dims[k]]) + "; ++" + v + ")");
  }
  Idx off = offset(s, sb, loops);
  std::string at = "(uintptr_t)(" + (cst(off) == 0 ? s.buf : s.buf + " + " + expr(off)) + ")";
  if (rows) {
    line("const uintptr_t tw_pa = " + at + ";");
    line("for (uintptr_t tw_l = tw_pa & ~(uintptr_t)63; tw_l < tw_pa + " + expr(s.ext[s.dims.back()]) + " * sizeof(" +
         storage_type(s.dtype) + "); tw_l += 64) __builtin_prefetch((const void*)tw_l, 0, 2);");
  } else {
    line("__builtin_prefetch((const void*)" + at + ", 0, 2);");
  }
  for (int k = 0; k < loops + opened; ++k) close();
  close();
}

// A copy of next_page_slices: its tile's next source set to the region's start when the region
// lies inside its tensor (else it stays null: nothing is prefetched).
void CodeGen::emit_slice_source(const CopyNode& n) {
  const View& v = views_.at(n.dst.buffer.get());
  RegionView s = view(n.src);
  RegionView d = view(n.dst);
  Idx sb;
  int opened = 0;
  if (!open_inside_source(n, "the next source", s, sb, opened)) return;
  line(v.nx + " = " + (cst(sb) == 0 ? s.buf : s.buf + " + " + expr(sb)) + ";");
  line(v.nx_ld + " = " + (cst(d.ext[0]) != 1 ? expr(s.stride[s.dims[0]]) : std::to_string(v.cols)) + ";");
  for (int k = 0; k < opened; ++k) close();
  close();
}

std::string CodeGen::slice_next(const Region& r) {
  auto it = views_.find(r.buffer.get());
  if (it == views_.end() || it->second.nx.empty()) return "";
  const View& w = it->second;
  RegionView v = view(r);
  auto cols = cst(v.ext[1]);
  if (!cols || *cols >= w.cols) return "";  // a whole-tile reader: left to the hardware (prefetch_gathers.h)
  Idx off = add(mul(v.start[0], code(w.nx_ld, true)), v.start[1]);
  return ", /*next_b=*/" + w.nx + " ? " + w.nx + " + " + expr(off) + " : nullptr, /*next_ldb=*/" + w.nx_ld;
}

void CodeGen::emit_slice_prefetch(const Region& r) {
  auto it = views_.find(r.buffer.get());
  if (it == views_.end() || it->second.nx.empty()) return;
  const View& w = it->second;
  RegionView v = view(r);
  auto cols = cst(v.ext[1]);
  if (!cols || *cols >= w.cols) return;  // a whole-tile reader: left to the hardware (prefetch_gathers.h)
  Idx off = add(mul(v.start[0], code(w.nx_ld, true)), v.start[1]);
  open("if (" + w.nx + ")");
  line("// " + r.buffer->name + "'s strip of the next page, prefetched into L2 (prefetch_gathers @prefetch_slices)");
  open("for (int64_t tw_r = 0; tw_r < " + expr(v.ext[0]) + "; ++tw_r)");
  line("const uintptr_t tw_pa = (uintptr_t)(" + w.nx + " + " + expr(off) + " + tw_r * " + w.nx_ld + ");");
  line("for (uintptr_t tw_l = tw_pa & ~(uintptr_t)63; tw_l < tw_pa + " + std::to_string(*cols) + " * sizeof(" +
       storage_type(v.dtype) + "); tw_l += 64) __builtin_prefetch((const void*)tw_l, 0, 2);");
  close();
  close();
}

void CodeGen::emit_copy(const CopyNode& n) {
  if (prefetching_) return emit_prefetch_copy(n);
  if (slicing_) return emit_slice_source(n);
  if (n.atomic) return emit_atomic_add(n);
  if (auto it = out_views_.find(n.src.buffer.get()); it != out_views_.end() && !it->second.fresh.empty()) {
    // the gemms computed the tile in its window (@gemm_out): no copy, unless none ran
    const OutView o = it->second;
    const View v = views_.at(n.src.buffer.get());
    out_views_.erase(it);
    views_.erase(n.src.buffer.get());
    line(line_comment(n.span) + "copy " + n.src.buffer->name + " -> " + n.dst.buffer->name + ": computed in place by its gemms");
    open("if (" + o.fresh + ")");  // no gemm ran: the window holds the clear's zeros
    open("for (int64_t tw_i = 0; tw_i < " + v.live_r + "; ++tw_i)");
    line("for (int64_t tw_j = 0; tw_j < " + v.live_c + "; ++tw_j) " + v.ptr + "[tw_i * " + v.ld + " + tw_j] = 0;");
    close();
    close();
    if (!o.fallback) return;
    open("if (" + v.ptr + " == " + buf_name(n.src.buffer) + ")");  // the window was not in place: copy the tile
    emit_copy(n);
    close();
    return;
  }
  RegionView s = view(n.src), d = view(n.dst);
  check_same_shape(s, d, n);
  const int nl = static_cast<int>(s.dims.size());
  if (auto it = views_.find(n.dst.buffer.get()); it != views_.end() && !it->second.shadow.empty()) {
    d.buf = it->second.shadow;  // a widening row view: the masked path copies the values unconverted
    d.dtype = it->second.dt;
  }

  line(line_comment(n.span) + "copy " + n.src.buffer->name + " -> " + n.dst.buffer->name);
  open("");
  Idx sb = hoist_starts(s, "tw_s"), db = hoist_starts(d, "tw_d");
  sb = hoist(sb, "tw_sb");
  db = hoist(db, "tw_db");
  std::vector<Idx> ext;
  for (int k = 0; k < nl; ++k) ext.push_back(s.ext[s.dims[k]]);
  auto loopv = [](int k) { return "tw_i" + std::to_string(k); };
  bool same_type = s.dtype == d.dtype;
  auto assign = [&](const Idx& doff, const Idx& soff) {
    std::string val = s.buf + "[" + expr(soff) + "]";
    if (!same_type) val = "tw_cpu::convert<" + storage_type(d.dtype) + ">(" + val + ")";
    return d.buf + "[" + expr(doff) + "] = " + val + ";";
  };

  // Fast-path condition: every dim of both regions inside its buffer.
  std::vector<std::string> conds;
  bool never_fast = false;
  inside_conds(s, conds, &never_fast);
  inside_conds(d, conds, &never_fast);

  auto vit = views_.find(n.dst.buffer.get());
  const View* view_of_dst = vit == views_.end() ? nullptr : &vit->second;
  auto emit_fast = [&] {
    if (view_of_dst) {
      // elided: the gemm reads the tensor in place (innermost dim contiguous, checked by view_gemm_operands)
      std::string ld = std::to_string(view_of_dst->cols);
      if (cst(d.ext[0]) != 1) ld = expr(s.stride[s.dims[0]]);
      line("// elided: " + n.dst.buffer->name + " is only read (" + (row_views_.count(n.dst.buffer.get()) ? "loads, reductions" : "by gemm") +
           "), from " + n.src.buffer->name + " in place");
      line(view_of_dst->ptr + " = " + (cst(sb) == 0 ? s.buf : s.buf + " + " + expr(sb)) + ";");
      line(view_of_dst->ld + " = " + ld + ";");
      set_view_col(*view_of_dst, &s);
      if (!view_of_dst->live_r.empty())
        line(view_of_dst->live_r + " = " + std::to_string(view_of_dst->rows) + "; " + view_of_dst->live_c + " = " +
             std::to_string(view_of_dst->cols) + ";");
      if (!view_of_dst->pf.empty()) {
        // the same region for block bx + tw_step (addresses past the tensor are never loaded:
        // prefetches do not fault)
        const Var& bv = k_->block_vars[0];
        std::string saved = names_.at(bv.get());
        names_[bv.get()] = "(" + saved + " + tw_step)";
        RegionView sn = view(n.src);
        Idx nb = hoist_starts(sn, "tw_ns");
        names_[bv.get()] = saved;
        line(view_of_dst->pf + " = (const char*)((uintptr_t)" + s.buf + " + (uintptr_t)(" + expr(nb) + ") * sizeof(" +
             storage_type(s.dtype) + "));");
      }
      return;
    }
    // rows are contiguous in both buffers when the innermost looped dim is the last dim of each
    bool contiguous = nl > 0 && s.dims.back() == s.rank() - 1 && d.dims.back() == d.rank() - 1;
    bool rows = contiguous && same_type;
    // tile -> large global tensor (>= 8 MiB, known at run time): streaming stores, see simd.h; the
    // rows of a converting copy (float32 tile -> bfloat16 tensor) through a chunk buffer (stream_values)
    bool stream = contiguous && n.dst.buffer->scope == Scope::global && n.src.buffer->scope != Scope::global;
    int loops = rows || stream ? nl - 1 : nl;
    if (stream) {
      Idx numel = ic(1);
      for (const auto& x : d.shape) numel = mul(numel, x);
      line("const bool tw_nt = " + expr(numel) + " * (int64_t)sizeof(" + storage_type(d.dtype) + ") >= (int64_t(8) << 20);");
    }
    for (int k = 0; k < loops; ++k) {
      if (k == nl - 1) line("#pragma GCC ivdep");
      open("for (int64_t " + loopv(k) + " = 0; " + loopv(k) + " < " + expr(ext[k]) + "; ++" + loopv(k) + ")");
    }
    auto ptr = [this](const std::string& b, const Idx& off) { return cst(off) == 0 ? b : b + " + " + expr(off); };
    if (rows) {
      std::string args = ptr(d.buf, offset(d, db, nl - 1)) + ", " + ptr(s.buf, offset(s, sb, nl - 1)) + ", " +
                         expr(ext[nl - 1]) + " * sizeof(" + storage_type(d.dtype) + ")";
      if (stream) line("if (tw_nt) tw_cpu::simd::stream_copy(" + args + "); else __builtin_memcpy(" + args + ");");
      else line("__builtin_memcpy(" + args + ");");
    } else if (stream) {
      std::string i = loopv(nl - 1);
      open("if (tw_nt)");
      line("const " + storage_type(s.dtype) + "* const tw_sr = " + ptr(s.buf, offset(s, sb, nl - 1)) + ";");
      line("tw_cpu::simd::stream_values(" + ptr(d.buf, offset(d, db, nl - 1)) + ", " + expr(ext[nl - 1]) +
           ", [&](int64_t tw_k) { return tw_cpu::convert<" + storage_type(d.dtype) + ">(tw_sr[tw_k]); });");
      open_else();
      line("#pragma GCC ivdep");
      open("for (int64_t " + i + " = 0; " + i + " < " + expr(ext[nl - 1]) + "; ++" + i + ")");
      line(assign(offset(d, db, nl), offset(s, sb, nl)));
      close();
      close();
    } else {
      line(assign(offset(d, db, nl), offset(s, sb, nl)));
    }
    for (int k = 0; k < loops; ++k) close();
    if (stream) line("if (tw_nt) tw_cpu::simd::stream_fence();");
  };

  auto emit_masked = [&] {
    bool dst_never = false, src_never = false;
    auto dcond = unit_dims_inside(d, dst_never);
    auto scond = unit_dims_inside(s, src_never);
    if (dst_never) {
      line("// the destination region lies outside its buffer: nothing to write");
      return;
    }
    std::string zero = storage_type(d.dtype) + "{}";
    std::vector<Idx> dlo, dhi, slo, shi;
    for (int k = 0; k < nl; ++k) {
      auto h = [&](const Idx& v, const std::string& nm) { return hoist(v, nm + std::to_string(k)); };
      dlo.push_back(h(range_lo(d, d.dims[k]), "tw_dlo"));
      dhi.push_back(h(range_hi(d, d.dims[k]), "tw_dhi"));
      slo.push_back(h(range_lo(s, s.dims[k]), "tw_slo"));
      shi.push_back(h(range_hi(s, s.dims[k]), "tw_shi"));
    }
    int opened = open_if_all(dcond) ? 1 : 0;
    // ok: "source row inside its buffer" so far (a C++ bool expression, "" = statically true)
    std::vector<std::string> okc = scond;
    if (src_never) okc.insert(okc.begin(), "false");
    std::string ok = conj(okc);
    if (!ok.empty() && ok != "false") {
      line("const bool tw_ok = " + ok + ";");
      ok = "tw_ok";
    }
    if (view_of_dst && !view_of_dst->live_r.empty()) {
      // the full tile is written: rows/cols past the source's end (or all of it when a unit dim
      // of the source lies outside) are zeros
      std::string live[2] = {std::to_string(view_of_dst->rows), std::to_string(view_of_dst->cols)};
      for (int k = 0; k < nl; ++k) live[d.dims[k]] = expr(imax(ic(0), imin(shi[k], dhi[k])));
      for (std::string& l : live)
        if (ok == "false") l = "0";
        else if (!ok.empty()) l = "(" + ok + " ? " + l + " : 0)";
      line(view_of_dst->live_r + " = " + live[0] + "; " + view_of_dst->live_c + " = " + live[1] + ";");
      bool src_from_start = true;  // the source region starts inside its tensor: no leading zeros
      for (int k = 0; k < nl; ++k) src_from_start = src_from_start && cst(slo[k]) && *cst(slo[k]) == 0;
      if (src_from_start) {
        // nothing reads the tile past its live part: the gemm reads that part of the source in place
        line("// elided: the gemm reads the live part of " + n.src.buffer->name + " in place");
        std::string ld = cst(d.ext[0]) != 1 ? expr(s.stride[s.dims[0]]) : std::to_string(view_of_dst->cols);
        line(view_of_dst->ptr + " = " + view_of_dst->live_r + " > 0 && " + view_of_dst->live_c + " > 0 ? " +
             (cst(sb) == 0 ? s.buf : s.buf + " + " + expr(sb)) + " : " + d.buf + ";");
        line(view_of_dst->ld + " = " + ld + ";");
        set_view_col(*view_of_dst, &s, view_of_dst->live_r + " > 0 && " + view_of_dst->live_c + " > 0");
        for (int j = 0; j < opened; ++j) close();
        return;
      }
    }
    for (int k = 0; k + 1 < nl; ++k) {
      open("for (int64_t " + loopv(k) + " = " + expr(dlo[k]) + "; " + loopv(k) + " < " + expr(dhi[k]) + "; ++" + loopv(k) + ")");
      ++opened;
      std::string c = ok;
      if (!cst(slo[k]) || *cst(slo[k]) > 0) c += (c.empty() ? "" : " && ") + loopv(k) + " >= " + expr(slo[k]);
      if (!same(shi[k], ext[k])) c += (c.empty() ? "" : " && ") + loopv(k) + " < " + expr(shi[k]);
      if (c != ok) {
        line("const bool tw_ok" + std::to_string(k) + " = " + c + ";");
        ok = "tw_ok" + std::to_string(k);
      }
    }
    if (nl == 0) {
      std::string val = s.buf + "[" + expr(sb) + "]";
      if (!same_type) val = "tw_cpu::convert<" + storage_type(d.dtype) + ">(" + val + ")";
      line(d.buf + "[" + expr(db) + "] = " + (ok.empty() ? val : ok + " ? " + val + " : " + zero) + ";");
    } else {
      int k = nl - 1;
      std::string i = loopv(k);
      Idx doff = offset(d, db, nl), soff = offset(s, sb, nl);
      auto loop = [&](const std::string& lo, const std::string& hi, const std::string& body) {
        line("#pragma GCC ivdep");
        line("for (int64_t " + i + " = " + lo + "; " + i + " < " + hi + "; ++" + i + ") " + body);
      };
      bool src_full = (cst(slo[k]) && *cst(slo[k]) == 0) && same(shi[k], ext[k]);
      if (src_full && ok.empty()) {
        loop(expr(dlo[k]), expr(dhi[k]), assign(doff, soff));
      } else {
        // [dlo, c0) zeros, [c0, c1) copied, [c1, dhi) zeros
        Idx c0i = imax(dlo[k], imin(slo[k], dhi[k]));
        std::string c0 = expr(c0i);
        std::string c1 = expr(imax(cst(c0i) ? c0i : code("tw_c0", true), imin(shi[k], dhi[k])));
        if (ok == "false") {
          loop(expr(dlo[k]), expr(dhi[k]), d.buf + "[" + expr(doff) + "] = " + zero + ";");
        } else {
          line("const int64_t tw_c0 = " + (ok.empty() ? c0 : ok + " ? " + c0 + " : " + expr(dhi[k])) + ";");
          line("const int64_t tw_c1 = " + (ok.empty() ? c1 : ok + " ? " + c1 + " : " + expr(dhi[k])) + ";");
          loop(expr(dlo[k]), "tw_c0", d.buf + "[" + expr(doff) + "] = " + zero + ";");
          loop("tw_c0", "tw_c1", assign(doff, soff));
          loop("tw_c1", expr(dhi[k]), d.buf + "[" + expr(doff) + "] = " + zero + ";");
        }
      }
    }
    for (int j = 0; j < opened; ++j) close();
    if (view_of_dst) {
      line(view_of_dst->ptr + " = " + d.buf + ";");
      line(view_of_dst->ld + " = " + std::to_string(view_of_dst->cols) + ";");
      set_view_col(*view_of_dst, nullptr);
    }
  };

  if (never_fast) {
    line("// masked path: a region crosses its buffer's edge (tails)");
    emit_masked();
  } else if (conds.empty()) {
    line("// fast path: both regions are inside their buffers");
    emit_fast();
  } else {
    open_if_all(conds);
    line("// fast path: both regions are inside their buffers");
    emit_fast();
    open_else();
    line("// masked path (tails): source elements outside the source read 0, destination elements outside are skipped");
    emit_masked();
    close();
  }
  close();
  if (row_views_.count(n.dst.buffer.get())) live_views_.insert(n.dst.buffer.get());
}

void CodeGen::emit_prefetch_next(const Buffer& t, const std::string& row) {
  auto it = views_.find(t.get());
  if (!live_views_.count(t.get()) || it == views_.end() || it->second.pf.empty()) return;
  const View& v = it->second;
  std::string es = "sizeof(" + storage_type(v.dt) + ")";
  line("for (int64_t tw_b = 0; tw_b < tw_jn * (int64_t)" + es + "; tw_b += 64) __builtin_prefetch(" +
       v.pf + " + (" + row + " * " + v.ld + " + tw_j0) * (int64_t)" + es + " + tw_b, 0, 2);");
}

std::optional<CodeGen::CopyOutPlan> CodeGen::plan_map_copy_out(const Stmt& map_s, const Stmt& copy_s) {
  if (!find_annotation(map_s, "fuse_copy_out")) return std::nullopt;
  const StoreNode* stp = full_tile_map(map_s);
  auto bad = [&]() {
    return Error("@fuse_copy_out on a statement that is not a full-tile map followed by the copy of its whole tile",
                 map_s->span, "remove the annotation: the pass fuse_map_copy_out writes it where it holds");
  };
  if (!stp || copy_s->kind != StmtKind::Copy) throw bad();
  const auto& outer = *as<ForNode>(map_s);
  const auto& inner = *as<ForNode>(outer.body);
  const auto& cp = *as<CopyNode>(copy_s);
  auto shape = *stp->buffer->const_shape();
  // the destination: tile dims with extent != 1 paired in order with the region's
  RegionView d = view(cp.dst);
  std::vector<int> td;
  for (int k = 0; k < 2; ++k)
    if (shape[k] != 1) td.push_back(k);
  if (td.size() != d.dims.size() || td.empty()) throw bad();
  return CopyOutPlan{stp, &outer, &inner, &cp, d, td, shape[0], shape[1]};
}

// The per-row parts of a fused row map's value (transform::replace_invariants with the row
// variable: log(row_sum[i]) in log-softmax's last map) as float variables, to be computed once
// per row where the row is bound (emit_row_parts): g++ moves them out of the vectorised column
// loop but not out of the chunk loop around it, so they were computed once per chunk of
// kOutChunk. `written`: buffers whose elements for the row are not final when the row starts.
Expr CodeGen::row_parts(const StoreNode& st, const ForNode& outer, const ForNode& inner,
                        const std::set<const BufferNode*>& written, std::vector<std::pair<Var, Expr>>& parts) {
  return transform::replace_invariants(st.value, outer.var.get(), inner.var.get(), written, [&](const Expr& x) {
    for (const auto& [v, e] : parts)
      if (structural_equal(e, x)) return Expr(v);
    Var v = ir::var("tw_row" + std::to_string(parts.size()), x->dtype, x->span);
    parts.emplace_back(v, x);
    return Expr(v);
  });
}

// The C type of a per-row part (row_parts: float32 or float64 values)
static std::string row_part_type(const Expr& e) { return e->dtype.code == DTypeCode::f64 ? "double" : "float"; }

void CodeGen::emit_row_parts(const std::vector<std::pair<Var, Expr>>& parts) {
  for (const auto& [v, e] : parts) line("const " + row_part_type(e) + " " + bind(v, false) + " = " + expr(e) + ";  // once per row");
}

bool CodeGen::emit_map_copy_out(const Stmt& map_s, const Stmt& copy_s) {
  auto plan = plan_map_copy_out(map_s, copy_s);
  if (!plan) return false;
  const auto& st = *plan->st;
  const auto& outer = *plan->outer;
  const auto& inner = *plan->inner;
  const auto& cp = *plan->cp;
  const Buffer& t = st.buffer;
  RegionView d = plan->d;
  const std::vector<int>& td = plan->td;
  const std::optional<int64_t> e0 = plan->e0, e1 = plan->e1;
  std::vector<std::string> conds;
  // the output's element type: float, or bfloat16 / float16 (each chunk converted as the copy
  // converts, tw_cpu::convert, by store_chunk)
  const std::string ot = storage_type(cp.dst.buffer->dtype);

  line(line_comment(cp.span) + "map into " + t->name + " fused with copy " + t->name + " -> " + cp.dst.buffer->name +
       ": rows computed in chunks and stored to " + cp.dst.buffer->name + " directly");
  open("");
  Idx db = hoist_starts(d, "tw_d");
  db = hoist(db, "tw_db");
  inside_conds(d, conds);  // the plan ruled out regions provably outside
  open_if_all(conds);
  Idx numel = ic(1);
  for (const auto& x : d.shape) numel = mul(numel, x);
  line("const bool tw_nt = " + expr(numel) + " * (int64_t)sizeof(" + ot + ") >= (int64_t(8) << 20);  // streaming stores");
  std::string C = std::to_string(kOutChunk), E1 = std::to_string(*e1);
  std::string vi = bind(outer.var, true);
  open("for (int64_t " + vi + " = 0; " + vi + " < " + std::to_string(*e0) + "; ++" + vi + ")");
  std::vector<std::pair<Var, Expr>> parts;
  const Expr value = row_parts(st, outer, inner, {t.get()}, parts);
  emit_row_parts(parts);
  Idx row = td.size() == 2 ? add(db, mul(code(vi, true), d.stride[d.dims[0]])) : db;
  line(ot + "* const tw_out = " + (cst(row) == 0 ? d.buf : d.buf + " + " + expr(row)) + ";");
  // with streaming stores the chunks start at cache line boundaries of the output (kStreamBytes): a
  // short first chunk up to the first one (ordinary stores), then aligned chunks
  line("const int64_t tw_h = tw_nt ? tw_min(" + E1 + ", (int64_t)((-(uintptr_t)tw_out & (tw_cpu::simd::kStreamBytes - 1)) / "
       "sizeof(" + ot + "))) : 0;");
  line("int64_t tw_jn = 0;");
  open("for (int64_t tw_j0 = 0; tw_j0 < " + E1 + "; tw_j0 += tw_jn)");
  line("alignas(64) float tw_buf[" + C + "];");
  line("tw_jn = tw_j0 < tw_h ? tw_h - tw_j0 : tw_min(" + C + ", " + E1 + " - tw_j0);");
  emit_prefetch_next(t, vi);
  emit_chunk_map("tw_buf", inner, t->dtype, value);
  line("tw_cpu::simd::store_chunk(tw_out + tw_j0, tw_buf, tw_jn, tw_nt);");
  close();
  close();
  line("if (tw_nt) tw_cpu::simd::stream_fence();");
  if (!conds.empty()) {
    open_else();
    line("// tail: the map and the copy as written");
    emit(map_s);
    emit(copy_s);
    close();
  }
  close();
  return true;
}

// A full-tile float32 map into t followed by a float32 reduce of t over its rows, fused by
// fuse_map_reduce: each row is computed in chunks of kOutChunk elements and each chunk is reduced
// while in L1 (four vector accumulators, as emit_reduce). The chunk is written to t when the
// annotation says t is read later, else only to a local buffer.
const StoreNode* CodeGen::plan_map_reduce(const Stmt& map_s, const Stmt& red_s) const {
  if (!find_annotation(map_s, "fuse_reduce")) return nullptr;
  const StoreNode* st = full_tile_map(map_s);
  if (!st || red_s->kind != StmtKind::Reduce || as<ReduceNode>(red_s)->src != st->buffer ||
      as<ReduceNode>(red_s)->axis != 1)
    throw Error("@fuse_reduce on a statement that is not a full-tile map followed by a row reduction of its tile",
                map_s->span, "remove the annotation: the pass fuse_map_reduce writes it where it holds");
  return st;
}

bool CodeGen::emit_map_reduce(const Stmt& map_s, const Stmt& red_s) {
  const StoreNode* st = plan_map_reduce(map_s, red_s);
  if (!st) return false;
  const auto& rd = *as<ReduceNode>(red_s);
  const Buffer& t = st->buffer;
  auto shape = *t->const_shape();
  const auto& outer = *as<ForNode>(map_s);
  const auto& inner = *as<ForNode>(outer.body);
  const bool keep = find_annotation(map_s, "fuse_reduce")->args.at(0) != 0;
  const int64_t E0 = shape[0], E1 = shape[1];
  std::string C = std::to_string(kOutChunk), E1s = std::to_string(E1);
  std::string tn = buf_name(t), dn = buf_name(rd.dst);
  const char* kname = rd.reduce_kind == ReduceKind::sum ? "sum" : rd.reduce_kind == ReduceKind::max ? "max" : "min";
  std::string neutral = rd.reduce_kind == ReduceKind::sum   ? sum_identity(DType(DTypeCode::f32))
                        : rd.reduce_kind == ReduceKind::max ? float_lit(-INFINITY, DType(DTypeCode::f32))
                                                            : float_lit(INFINITY, DType(DTypeCode::f32));
  auto combine = [&](const std::string& a, const std::string& b) { return scalar_combine(rd.reduce_kind, a, b); };
  line(line_comment(rd.span) + "map into " + t->name + " fused with reduce_" + kname + " " + t->name + " -> " +
       rd.dst->name + (keep ? "" : " (" + t->name + " itself is not written: nothing reads it later)"));
  open("");
  line("using tw_cpu::simd::vf;");
  line("const vf tw_z = tw_cpu::simd::splat(" + neutral + ");");
  std::string vi = bind(outer.var, true);
  open("for (int64_t " + vi + " = 0; " + vi + " < " + std::to_string(E0) + "; ++" + vi + ")");
  std::vector<std::pair<Var, Expr>> parts;
  const Expr value = row_parts(*st, outer, inner, {t.get(), rd.dst.get()}, parts);
  emit_row_parts(parts);
  line("vf tw_v0 = tw_z, tw_v1 = tw_z, tw_v2 = tw_z, tw_v3 = tw_z;");
  line("float tw_acc = " + neutral + ";");
  const bool blocked = rd.reduce_kind == ReduceKind::sum && E1 > kSumBlock;
  if (blocked)
    line("double tw_d = " + sum_identity(DType(DTypeCode::f64)) + ";  // the sum of the blocks of " +
         std::to_string(kSumBlock) + " elements");
  if (!keep) line("alignas(64) float tw_buf[" + C + "];");
  open("for (int64_t tw_j0 = 0; tw_j0 < " + E1s + "; tw_j0 += " + C + ")");
  line("const int64_t tw_jn = " + ((E1 % kOutChunk == 0) ? C : "tw_min(" + C + ", " + E1s + " - tw_j0)") + ";");
  emit_prefetch_next(t, vi);
  if (auto it = views_.find(t.get()); it != views_.end() && live_views_.count(t.get()) && it->second.pf.empty()) {
    const View& v = it->second;  // rows read in place with no next-block prefetch: the stream ahead (kAheadBytes)
    const std::string es = "(int64_t)sizeof(" + storage_type(v.dt) + ")";
    line("if constexpr (tw_cpu::simd::kAheadBytes > 0) for (int64_t tw_b = 0; tw_b < tw_jn * " + es +
         "; tw_b += 64) __builtin_prefetch((const char*)(" + v.ptr + " + " + vi + " * " + v.ld +
         " + tw_j0) + tw_cpu::simd::kAheadBytes + tw_b, 0, 2);");
  }
  std::string chunk = keep ? tn + " + " + vi + " * " + E1s + " + tw_j0" : "tw_buf";
  line("float* const tw_c = " + chunk + ";");
  emit_chunk_map_reduce(inner, t->dtype, value, false, rd.reduce_kind, nan_checked(rd), keep, "tw_v", "tw_acc");
  if (blocked) {
    open("if ((tw_j0 + " + C + ") % " + std::to_string(kSumBlock) + " == 0)");
    emit_sum_block_flush("tw_v", "tw_d");
    close();
  }
  close();
  emit_vec_fold(rd.reduce_kind);
  line("float tw_r = " + vec_fold_lanes(rd.reduce_kind, "tw_v0") + ";");
  if (blocked) line("tw_r = (float)(tw_d + (double)tw_r);");
  line("tw_r = " + combine("tw_r", "tw_acc") + ";");
  std::string at = dn + "[" + vi + "]";
  line(at + " = " + (rd.clear ? "tw_r" : combine(at, "tw_r")) + ";");
  close();
  close();
  return true;
}

// ---------------------------------------------------------------------------------------------
// Row pipeline
//
// The run of row passes that pipeline_rows found (@row_pipeline(n) on its copy-out, the n
// statements ending there) is emitted skewed by one row in one loop: step s runs pass k on row
// s - k, all passes chunk by chunk (kOutChunk elements) side by side, the copy-out's full chunks
// in rotated order (kRotChunks: no 4 KiB aliasing of its stores with the other passes' loads).
// Tails (destination rows outside the tensor) run the statements as written.

static const char* chunk_call(const Expr& value, DType dst_dtype);

// A load in `value` whose indices mention the column variable and not the row's: a per-column
// operand, the same vector for every row (layer_norm's W and B, rms_norm's W).
static bool reads_column_operand(const Expr& value, const VarNode* row, const VarNode* col) {
  bool found = false;
  for_each_expr(value, [&](const Expr& e) {
    if (found || !e || e->kind != ExprKind::Load) return;
    bool r = false, c = false;
    for (const Expr& ix : as<LoadNode>(e)->indices)
      for_each_expr(ix, [&](const Expr& x) {
        if (x && x->kind == ExprKind::Var) r = r || x.get() == row, c = c || x.get() == col;
      });
    found = c && !r;
  });
  return found;
}

// An earlier pass of a row pipeline, as row_max_shifted sees it: its row max (null if it is not a
// max reduction), the buffers its map and reduction write, and those its per-row scalar maps
// (run after it) write.
struct RowMax {
  const ReduceNode* max;
  std::vector<const BufferNode*> written, after;
};

// A pipeline map whose value is exp(B[i, j] - m[i]) (m[i] or m[i, 0], i / j the map's row and
// column, float32), where an earlier pass reduced B's rows into m by max (clear or not: m[i] >=
// every B[i, j] that is not NaN) and no pass from that one on rewrote B or m: its argument is <= 0,
// -Inf or NaN, and exp's upper clamp changes nothing (exp_nonpos_chunk: the same bits; softmax's
// and log_softmax's exp pass).
static bool row_max_shifted(const StoreNode& st, const ForNode& outer, const ForNode& inner,
                            const std::vector<RowMax>& before) {
  const CallNode* call = st.value->kind == ExprKind::Call ? as<CallNode>(st.value) : nullptr;
  if (!call || call->fn != MathFn::exp || call->args.size() != 1) return false;
  const Expr& a = call->args[0];
  const BinaryNode* sub = a->kind == ExprKind::Binary ? as<BinaryNode>(a) : nullptr;
  if (!sub || sub->op != BinOp::Sub || a->dtype != DType(DTypeCode::f32)) return false;
  auto is_var = [](const Expr& e, const ForNode& f) { return e->kind == ExprKind::Var && e.get() == f.var.get(); };
  const LoadNode* x = sub->a->kind == ExprKind::Load ? as<LoadNode>(sub->a) : nullptr;
  const LoadNode* m = sub->b->kind == ExprKind::Load ? as<LoadNode>(sub->b) : nullptr;
  if (!x || !m || x->dtype != a->dtype || m->dtype != a->dtype || x->indices.size() != 2 ||
      !is_var(x->indices[0], outer) || !is_var(x->indices[1], inner) || m->indices.empty() || m->indices.size() > 2 ||
      !is_var(m->indices[0], outer))
    return false;
  if (m->indices.size() == 2 && !(m->indices[1]->kind == ExprKind::IntImm && as<IntImmNode>(m->indices[1])->value == 0))
    return false;
  // the last pass before this one that writes B or m must be the max of B's rows into m
  auto has = [&](const std::vector<const BufferNode*>& v) {
    return std::count(v.begin(), v.end(), x->buffer.get()) || std::count(v.begin(), v.end(), m->buffer.get());
  };
  for (size_t u = before.size(); u-- > 0;) {
    const RowMax& p = before[u];
    if (has(p.after)) return false;
    if (p.max && p.max->src == x->buffer && p.max->dst == m->buffer && p.max->axis == 1) return true;
    if (has(p.written)) return false;
  }
  return false;
}

size_t CodeGen::emit_row_pipeline(const SeqNode& n, size_t k0) {
  size_t len = 0;  // the statements of the run starting at k0
  for (size_t j = k0; j < n.body.size() && !len; ++j)
    if (const Annotation* a = find_annotation(n.body[j], "row_pipeline"); a && j + 1 - k0 == size_t(a->args.at(0)))
      len = j + 1 - k0;
  if (!len) return 0;
  enum Kind { kReduce, kMapReduce, kMapCopy };
  struct Stage {
    Kind kind;
    const ReduceNode* rd = nullptr;  // kReduce, kMapReduce
    const StoreNode* st = nullptr;   // kMapReduce, kMapCopy
    const ForNode* outer = nullptr;
    const ForNode* inner = nullptr;
    Stmt map = nullptr;  // kMapReduce: the map statement (its @fuse_reduce)
    Expr value = nullptr;  // the map's value, its per-row parts as variables (row_parts)
    std::vector<const ForNode*> row_maps;  // per-row scalar maps after this pass (row_scalar_map)
    bool nonpos = false;  // the map's value is exp(B[i, j] - m[i]), m an earlier pass's row max of B
  };
  std::vector<Stage> stages;
  std::optional<CopyOutPlan> cpl;
  size_t k = k0;
  while (k < k0 + len && !cpl) {
    const Stmt& s = n.body[k];
    const ForNode* rm = nullptr;
    if (!stages.empty()) rm = row_scalar_map(s, (*(stages[0].st ? stages[0].st->buffer : stages[0].rd->src)->const_shape())[0]);
    if (rm) {
      stages.back().row_maps.push_back(rm);
      ++k;
    } else if (s->kind == StmtKind::Reduce) {
      stages.push_back({kReduce, as<ReduceNode>(s)});
      ++k;
    } else if (k + 1 < k0 + len && (cpl = plan_map_copy_out(s, n.body[k + 1]))) {
      stages.push_back({kMapCopy, nullptr, cpl->st, cpl->outer, cpl->inner});
      k += 2;
    } else if (const StoreNode* st = k + 1 < k0 + len ? plan_map_reduce(s, n.body[k + 1]) : nullptr) {
      const auto* outer = as<ForNode>(s);
      stages.push_back({kMapReduce, as<ReduceNode>(n.body[k + 1]), st, outer, as<ForNode>(outer->body), s});
      k += 2;
    } else {
      break;
    }
  }
  if (!cpl || k != k0 + len)
    throw Error("@row_pipeline on a copy that does not end a run of row reductions and fused maps, the last "
                "one fused with this copy",
                n.body[k0 + len - 1]->span, "remove the annotation: the pass pipeline_rows writes it where it holds");
  auto shape = *(stages[0].st ? stages[0].st->buffer : stages[0].rd->src)->const_shape();
  const int64_t E0 = shape[0], E1 = shape[1];

  const int K = static_cast<int>(stages.size());
  for (int q = 0; q < K; ++q) {
    std::vector<RowMax> before;
    for (int u = 0; u < q; ++u) {
      const Stage& g = stages[u];
      RowMax p{g.rd && g.rd->reduce_kind == ReduceKind::max ? g.rd : nullptr, {}, {}};
      if (g.st) p.written.push_back(g.st->buffer.get());
      if (g.rd) p.written.push_back(g.rd->dst.get());
      for (const ForNode* m : g.row_maps)
        for (const auto& c : stmts_of(m->body)) p.after.push_back(as<StoreNode>(c)->buffer.get());
      before.push_back(p);
    }
    if (stages[q].st) stages[q].nonpos = row_max_shifted(*stages[q].st, *stages[q].outer, *stages[q].inner, before);
  }
  const std::string C = std::to_string(kOutChunk), E0s = std::to_string(E0), E1s = std::to_string(E1);
  const std::string R = std::to_string(kRotChunks);
  line(line_comment(cpl->cp->span) + "row pipeline: " + std::to_string(K) +
       " row passes skewed by one row (pass k on row s - k at step s), chunk by chunk side by side");
  open("");
  RegionView d = cpl->d;
  Idx db = hoist_starts(d, "tw_d");
  db = hoist(db, "tw_db");
  std::vector<std::string> conds;
  inside_conds(d, conds);  // the plan ruled out regions provably outside
  open_if_all(conds);
  const auto views_before = live_views_;
  Idx numel = ic(1);
  for (const auto& x : d.shape) numel = mul(numel, x);
  // the output's element type: float, or bfloat16 / float16 (a converting copy-out: each chunk
  // converted as the copy converts, tw_cpu::convert, by store_chunk)
  const std::string ot = storage_type(cpl->cp->dst.buffer->dtype);
  const bool conv = cpl->cp->dst.buffer->dtype != cpl->st->buffer->dtype;
  line("const bool tw_nt = " + expr(numel) + " * (int64_t)sizeof(" + ot + ") >= (int64_t(8) << 20);  // streaming stores");
  line("using tw_cpu::simd::vf;");
  std::vector<std::string> rows(K), pre(K), neutral(K);
  // The copy-out's full chunks are rotated (kRotChunks) in a pipeline with an arithmetic-bound
  // pass (a map with an in-place chunk function), where the loads that 4K-alias its stores stall
  // the core; the memory-bound norms keep the row order (rotated, rms_norm ran 14% slower from
  // memory on the AVX2 proxy and no faster natively; docs/performance.md, session 18).
  bool hot = false;
  // In the memory-bound norms (no such pass) whose copy-out map reads a per-column operand (W, B),
  // the copy-out takes its rows in pairs, at every other step, both rows chunk by chunk side by
  // side: the second row reads the operand's chunk from L1, where one row per step read it from L2
  // each time (the rows streamed between two steps evict it; each 16 KiB operand stream cost
  // layer_norm ~10% of its time from memory on a Zen 4 core; docs/performance.md, session 25). The
  // same values in the same order per row: the same bits. Not with per-row parts (their variables
  // are per row). With AVX-512 and AVX2 (if constexpr tw_cpu::simd::kPairRows: session 25's AVX2
  // build ran 12% slower paired, session 34's 15-17% faster, layer_norm from memory): elsewhere one
  // row per step.
  bool pair = false;
  open("for (int64_t tw_s = 0; tw_s < " + std::to_string(E0 + K - 1) + "; ++tw_s)");
  for (int q = 0; q < K; ++q) {
    const Stage& g = stages[q];
    pre[q] = "tw_p" + std::to_string(q) + "_";
    rows[q] = pre[q] + "i";
    line("const int64_t " + rows[q] + " = tw_s - " + std::to_string(q) + ";");
    line("const bool " + pre[q] + "on = " + rows[q] + " >= 0 && " + rows[q] + " < " + E0s + ";");
    if (g.rd) {
      ReduceKind rk = g.rd->reduce_kind;
      neutral[q] = rk == ReduceKind::sum   ? sum_identity(DType(DTypeCode::f32))
                   : rk == ReduceKind::max ? float_lit(-INFINITY, DType(DTypeCode::f32))
                                           : float_lit(INFINITY, DType(DTypeCode::f32));
      line("vf " + pre[q] + "v0 = tw_cpu::simd::splat(" + neutral[q] + "), " + pre[q] + "v1 = " + pre[q] + "v0, " +
           pre[q] + "v2 = " + pre[q] + "v0, " + pre[q] + "v3 = " + pre[q] + "v0;");
      line("float " + pre[q] + "acc = " + neutral[q] + ";");
      if (rk == ReduceKind::sum && E1 > kSumBlock)
        line("double " + pre[q] + "d = " + sum_identity(DType(DTypeCode::f64)) + ";  // the sum of the blocks");
    }
    bool no_parts = true;
    if (g.st) {  // per-row parts of the map, from what the passes before it finished on this row
      // (the reductions of the passes before it are final on this row; no part reads a tile the
      // run maps into, whose reads the view state of the emission order would misprint here)
      std::set<const BufferNode*> unfinished;
      for (int u = 0; u < K; ++u) {
        if (stages[u].st) unfinished.insert(stages[u].st->buffer.get());
        if (stages[u].rd && u >= q) unfinished.insert(stages[u].rd->dst.get());
        for (const ForNode* m : stages[u].row_maps)
          for (const auto& c : stmts_of(m->body))
            if (u >= q) unfinished.insert(as<StoreNode>(c)->buffer.get());
      }
      std::vector<std::pair<Var, Expr>> parts;
      stages[q].value = row_parts(*g.st, *g.outer, *g.inner, unfinished, parts);
      no_parts = parts.empty();
      if (!parts.empty()) {
        for (const auto& [v, e] : parts)
          line(row_part_type(e) + " " + bind(v, false) + " = 0;");
        open("if (" + pre[q] + "on)");
        line("const int64_t " + bind(g.outer->var, true) + " = " + rows[q] + ";");
        for (const auto& [v, e] : parts) line(bind(v, false) + " = " + expr(e) + ";  // once per row");
        close();
      }
    }
    if (g.kind == kMapCopy) {
      for (int u = 0; u <= q; ++u)  // the copy-out is the last pass: every value is known here
        hot = hot || (stages[u].st && chunk_call(stages[u].value, stages[u].st->buffer->dtype));
      pair = !hot && no_parts && reads_column_operand(stages[q].value, g.outer->var.get(), g.inner->var.get());
      // its full chunks start at a cache line boundary of the output (tw_h, kStreamBytes), in rotated order (kRotChunks)
      auto out_row = [&](const std::string& sfx, const std::string& r, const std::string& on) {
        Idx row = add(db, mul(code(r, true), d.stride[d.dims[0]]));
        line(ot + "* const tw_out" + sfx + " = " + on + " ? " + d.buf + " + " + expr(row) + " : " + d.buf + ";");
        line("const int64_t tw_h" + sfx + " = tw_nt ? tw_min(" + E1s + ", (int64_t)((-(uintptr_t)tw_out" + sfx +
             " & (tw_cpu::simd::kStreamBytes - 1)) / sizeof(" + ot + "))) : 0;");
        line("const int64_t tw_nf" + sfx + " = (" + E1s + " - tw_h" + sfx + ") / " + C + ";  // full chunks");
      };
      out_row("", rows[q], pre[q] + "on");
      if (pair) {  // rows r - 1 and r at odd r (the last row alone at an even last r), r = this pass's row
        for (int u = 0; u < 2; ++u) {
          const std::string U = std::to_string(u), r = pre[q] + "r" + U;
          line("const int64_t " + r + " = " + rows[q] + (u ? "" : " - 1") + ";");
          line("const bool " + pre[q] + "on" + U + " = " + r + " >= 0 && " + r + " < " + E0s + " && ((" + rows[q] +
               " & 1) != 0" + (u ? " || " + rows[q] + " == " + std::to_string(E0 - 1) : "") + ");");
          out_row(U, r, pre[q] + "on" + U);
        }
        line("const int64_t tw_nfp = tw_max(" + pre[q] + "on0 ? tw_nf0 : 0, " + pre[q] + "on1 ? tw_nf1 : 0);");
      }
      line("int64_t tw_ck = 0;  // full chunks done");
    }
  }
  // The next block's prefetch of a tile read in place (view_rows) goes with the first map + reduce
  // pass whose map is an in-place chunk function (exp, exp2) and reads that view: the
  // arithmetic-bound pass, whose memory is otherwise idle. Else each map pass that ends a view
  // issues it (emit_prefetch_next), as outside the pipeline. log_softmax's prefetch moved from its
  // copy-out (beside the streaming stores) to its exp pass: 0.72 -> 0.63 TSC cycles per element
  // from memory on a Zen 4 core (docs/performance.md, session 18); layer_norm and rms_norm, with
  // no such pass, ran 4-6% slower with it in an earlier pass, so they keep it in the copy-out.
  Buffer pf_view;
  int pf_q = -1;
  for (int q = 0; q < K && pf_q < 0; ++q) {
    const Stage& g = stages[q];
    if (g.kind != kMapReduce || !chunk_call(g.value, g.st->buffer->dtype)) continue;
    for_each_expr(g.inner->body, [&](const Expr& e) {
      if (pf_q >= 0 || !e || e->kind != ExprKind::Load) return;
      const Buffer& b = as<LoadNode>(e)->buffer;
      auto it = views_.find(b.get());
      bool written_before = false;  // an earlier pass's map overwrote the tile: no view left here
      for (int u = 0; u < q; ++u) written_before = written_before || (stages[u].st && stages[u].st->buffer == b);
      if (live_views_.count(b.get()) && it != views_.end() && !it->second.pf.empty() && !written_before)
        pf_view = b, pf_q = q;
    });
  }
  if (hot) line("const int64_t tw_rot = tw_nf > " + R + " ? " + R + " : tw_nf / 2;  // the first chunk: half a 4 KiB page on");
  // A tile that a map + reduce pass writes (@fuse_reduce(keep)) only for the later passes of this
  // run, the copy-out's tile (fuse_map_copy_out: nothing reads it after the copy), lives in a ring
  // of its first R rows: pass q writes row i at step i + q and the last reader reads it at step
  // i + K - 1, so R = K - q rows hold every row still to be read. The same values in the same order
  // (the same bits); the rows the run touches stay in L1 / L2 whatever block_M is, where the whole
  // tile (block_M rows of 16 KiB in softmax 8192 x 4096) streamed through L2: softmax took 8-10%
  // more time at block_M 16 than at 8 from memory on a Sapphire Rapids core (docs/performance.md,
  // "Session 39: ... (h-rows39)"). Not with pairs (the copy-out reads two rows a step).
  const Buffer& ring_t = cpl->st->buffer;
  int ring_q = -1;
  for (int q = 0; q < K - 1; ++q) {
    const Stage& g = stages[q];
    if (g.kind == kMapReduce && g.st->buffer == ring_t) {
      if (ring_q >= 0 || find_annotation(g.map, "fuse_reduce")->args.at(0) == 0) ring_q = -2;
      else if (ring_q == -1) ring_q = q;
    }
  }
  const int64_t ring_rows = ring_q >= 0 ? K - ring_q : 0;
  bool ring = ring_q >= 0 && !pair && E0 > ring_rows;
  for (int q = 0; q < K && ring; ++q)
    for (const ForNode* m : stages[q].row_maps)
      for_each_expr(m->body, [&](const Expr& e) {
        if (e && e->kind == ExprKind::Load && as<LoadNode>(e)->buffer == ring_t) ring = false;
      });
  const std::string ring_r = std::to_string(ring_rows);
  auto ring_row = [&](const std::string& row) { return "(" + row + " % " + ring_r + ")"; };
  std::optional<View> ring_saved;
  if (auto it = views_.find(ring_t.get()); ring && it != views_.end()) ring_saved = it->second;
  auto read_ring = [&](const std::string& row) {  // the tile's loads of this pass read its ring row
    if (!ring) return;
    View v{};
    v.ptr = "(" + buf_name(ring_t) + " + " + ring_row(row) + " * " + E1s + ")";
    v.ld = "0";
    v.cols = E1;
    v.dt = ring_t->dtype;
    views_[ring_t.get()] = v;
    live_views_.insert(ring_t.get());
  };
  // the copy-out pass's chunk [tw_j0, tw_j0 + tw_jn) of its row (a full chunk when jn is the literal C)
  // A full chunk (full: jn is the literal C) without streaming stores is computed into the output
  // directly, not into the buffer and copied: one store per vector instead of two (a Zen 4 core
  // takes two cycles per 512-bit store). With streaming stores it goes through the buffer,
  // streamed in address order with no alignment test (stream_chunk; docs/performance.md, session 18):
  // in a pipeline with an arithmetic-bound pass from registers (stream_chunk64: g++ drops the
  // buffer; softmax 5-7% faster from memory on AVX2, 3-6% natively, on a Zen 4 core), in the
  // memory-bound norms each vector reloaded from the buffer before its store (stream_chunk: they
  // ran 12-16% slower from registers; docs/performance.md, session 19).
  static_assert(kOutChunk == 64, "stream_chunk64 streams 64 floats");
  auto copy_chunk = [&](const Stage& g, const std::string& jn, bool full, const std::string& row) {
    line("const int64_t tw_jn = " + jn + ";");
    line("const int64_t " + bind(g.outer->var, true) + " = " + row + ";");
    if (g.st->buffer != pf_view) emit_prefetch_next(g.st->buffer, row);
    if (conv) {  // a converting copy-out: the chunk through the buffer, converted by store_chunk(64)
      line("alignas(64) float tw_buf[" + C + "];");
      emit_chunk_map("tw_buf", *g.inner, g.st->buffer->dtype, g.value, g.nonpos);
      line(full ? "tw_cpu::simd::store_chunk64(tw_out + tw_j0, tw_buf, tw_nt);"
                : "tw_cpu::simd::store_chunk(tw_out + tw_j0, tw_buf, tw_jn, tw_nt);");
      return;
    }
    if (full) {
      open("if (!tw_nt)");
      line("float* const tw_o = tw_out + tw_j0;");
      emit_chunk_map("tw_o", *g.inner, g.st->buffer->dtype, g.value, g.nonpos);
      open_else();
    }
    line("alignas(64) float tw_buf[" + C + "];");
    emit_chunk_map("tw_buf", *g.inner, g.st->buffer->dtype, g.value, g.nonpos);
    if (full) {  // streaming: tw_out + tw_j0 is vector aligned (tw_h)
      line(hot ? "tw_cpu::simd::stream_chunk64(tw_out + tw_j0, tw_buf);"
               : "tw_cpu::simd::stream_chunk(tw_out + tw_j0, tw_buf, tw_jn);");
      close();
    } else {
      line("tw_cpu::simd::store_chunk(tw_out + tw_j0, tw_buf, tw_jn, tw_nt);");
    }
  };
  open("for (int64_t tw_j0 = 0; tw_j0 < " + E1s + "; tw_j0 += " + C + ")");
  line("const int64_t tw_jn = " + ((E1 % kOutChunk == 0) ? C : "tw_min(" + C + ", " + E1s + " - tw_j0)") + ";");
  for (int q = 0; q < K; ++q) {
    const Stage& g = stages[q];
    if (ring && q > ring_q) read_ring(rows[q]);
    if (g.kind == kMapCopy && pair) {  // the pair's rows, chunk tw_ck of each side by side
      open("if constexpr (tw_cpu::simd::kPairRows)");
      open("if (tw_ck < tw_nfp)");
      for (int u = 0; u < 2; ++u) {
        const std::string U = std::to_string(u);
        open("if (" + pre[q] + "on" + U + " && tw_ck < tw_nf" + U + ")");
        line(ot + "* const tw_out = tw_out" + U + ";");
        line("const int64_t tw_j0 = tw_h" + U + " + tw_ck * " + C + ";  // row order: no arithmetic-bound pass");
        copy_chunk(g, C, true, pre[q] + "r" + U);
        close();
      }
      line("++tw_ck;");
      close();
      open_else();  // one row per step
    }
    if (g.kind == kMapCopy) {  // full chunks from the first cache line boundary of the output row, rotated
      open("if (" + pre[q] + "on && tw_ck < tw_nf)");
      if (hot) {
        line("int64_t tw_cc = tw_ck + tw_rot;");
        line("if (tw_cc >= tw_nf) tw_cc -= tw_nf;");
        line("const int64_t tw_j0 = tw_h + tw_cc * " + C + ";");
      } else {
        line("const int64_t tw_j0 = tw_h + tw_ck * " + C + ";  // row order: no arithmetic-bound pass");
      }
      copy_chunk(g, C, true, rows[K - 1]);
      line("++tw_ck;");
      close();
      if (pair) close();  // if constexpr
      continue;
    }
    open("if (" + pre[q] + "on)");
    std::string tail_elem = "tw_c[tw_q]";
    if (g.kind == kReduce) {
      const Buffer& src = g.rd->src;
      std::string ptr = buf_name(src) + " + " + rows[q] + " * " + E1s;
      DType et = src->dtype;  // the elements' type: a widening view's are widened where read
      if (live_views_.count(src.get())) {  // rows read in place (view_rows)
        const View& v = views_.at(src.get());
        ptr = v.ptr + " + " + rows[q] + " * " + v.ld;
        et = v.dt;
      }
      line("const " + storage_type(et) + "* const tw_c = " + ptr + " + tw_j0;");
      tail_elem = widen(et, "tw_c[tw_q]");
    } else {  // map + reduce: the chunk is computed, written to the tile when read later, and reduced
      const Buffer& t = g.st->buffer;
      line("const int64_t " + bind(g.outer->var, true) + " = " + rows[q] + ";");
      if (q == pf_q) emit_prefetch_next(pf_view, rows[q]);
      else if (t != pf_view) emit_prefetch_next(t, rows[q]);
      // the tile is written only when a later statement reads it (@fuse_reduce(keep)), as in
      // emit_map_reduce: else the chunk stays in a local buffer and the tile's rows are not
      // written to the cache for nothing
      const bool keep = find_annotation(g.map, "fuse_reduce")->args.at(0) != 0;
      if (keep) {
        line("float* const tw_c = " + buf_name(t) + " + " + (ring && q == ring_q ? ring_row(rows[q]) : rows[q]) + " * " + E1s +
             " + tw_j0;");
      } else {
        line("alignas(64) float tw_buf[" + C + "];");
        line("float* const tw_c = tw_buf;");
      }
      emit_chunk_map_reduce(*g.inner, t->dtype, g.value, g.nonpos, g.rd->reduce_kind, nan_checked(*g.rd), keep, pre[q] + "v",
                            pre[q] + "acc");
      live_views_.erase(t.get());  // the map overwrote the tile: later passes read the tile
    }
    if (g.kind == kReduce) {
      line("int64_t tw_q = 0;");
      emit_vec_reduce(g.rd->reduce_kind, nan_checked(*g.rd), "tw_c", "tw_jn", "tw_q", pre[q] + "v");
      line("for (; tw_q < tw_jn; ++tw_q) " + pre[q] + "acc = " + scalar_combine(g.rd->reduce_kind, pre[q] + "acc", tail_elem) + ";");
    }
    if (g.rd->reduce_kind == ReduceKind::sum && E1 > kSumBlock) {
      open("if ((tw_j0 + " + C + ") % " + std::to_string(kSumBlock) + " == 0)");
      emit_sum_block_flush(pre[q] + "v", pre[q] + "d");
      close();
    }
    close();
  }
  close();  // chunks
  if (pair) open("if constexpr (tw_cpu::simd::kPairRows)");
  for (int u = 0; u < (pair ? 3 : 1); ++u) {  // with pairs: the pair's rows, then (else) the one row
    if (pair && u == 2) open_else();
    const std::string U = pair && u < 2 ? std::to_string(u) : "";
    open("if (" + pre[K - 1] + "on" + U + ")");
    line("// the head of the row up to the output's first cache line boundary (< 1 line), then the tail (< 1 chunk)");
    if (!U.empty()) line(ot + "* const tw_out = tw_out" + U + ";");
    read_ring(rows[K - 1]);
    open("for (int tw_k = 0; tw_k < 2; ++tw_k)");
    line("const int64_t tw_j0 = tw_k == 0 ? 0 : tw_h" + U + " + tw_nf" + U + " * " + C + ";");
    copy_chunk(stages[K - 1], "tw_k == 0 ? tw_h" + U + " : " + E1s + " - tw_j0", false, U.empty() ? rows[K - 1] : pre[K - 1] + "r" + U);
    close();
    close();
  }
  if (pair) close();
  for (int q = 0; q < K; ++q) {
    const Stage& g = stages[q];
    if (!g.rd) continue;
    open("if (" + pre[q] + "on)");
    emit_vec_fold(g.rd->reduce_kind, pre[q] + "v");
    line("float tw_r = " + vec_fold_lanes(g.rd->reduce_kind, pre[q] + "v0") + ";");
    if (g.rd->reduce_kind == ReduceKind::sum && E1 > kSumBlock) line("tw_r = (float)(" + pre[q] + "d + (double)tw_r);");
    line("tw_r = " + scalar_combine(g.rd->reduce_kind, "tw_r", pre[q] + "acc") + ";");
    std::string at = buf_name(g.rd->dst) + "[" + rows[q] + "]";
    line(at + " = " + (g.rd->clear ? "tw_r" : scalar_combine(g.rd->reduce_kind, at, "tw_r")) + ";");
    for (const ForNode* m : g.row_maps) {  // the per-row maps after this pass, on the row it finished
      line(line_comment(m->span) + "per-row map on the row pass " + std::to_string(q) + " finished");
      open("");
      line("const int64_t " + bind(m->var, true) + " = " + rows[q] + ";");
      emit(m->body);
      close();
    }
    close();
  }
  close();  // steps
  if (ring) {  // the tile's view (if any) as before the run; the run's end erases it below
    if (ring_saved) views_[ring_t.get()] = *ring_saved;
    else views_.erase(ring_t.get());
  }
  line("if (tw_nt) tw_cpu::simd::stream_fence();");
  if (!conds.empty()) {
    open_else();
    line("// tail: the statements as written");
    const auto views_after = live_views_;
    live_views_ = views_before;
    emit_range(n, k0, k);
    live_views_ = views_after;
    close();
  }
  // the copy-out's map overwrote its tile too
  live_views_.erase(cpl->st->buffer.get());
  close();
  return k - k0;
}

// One chunk of a fused row map (map + copy-out, map + reduce, the row pipeline's maps). A float32
// value that is a math function with a chunk form (math_fns.h: exp, exp2) of a float32 argument
// computes the argument into a local chunk, then calls the function from it into the destination:
// on AVX-512 a vector form g++ cannot derive from the scalar one (vscalefps; the same bits,
// tw_cpu/math.h).
// The chunk function of a fused row map's value (exp_chunk, exp2_chunk), null if none.
static const char* chunk_call(const Expr& value, DType dst_dtype) {
  const DType f32(DTypeCode::f32);
  const CallNode* call = value->kind == ExprKind::Call ? as<CallNode>(value) : nullptr;
  return call && dst_dtype == f32 && call->dtype == f32 && call->args.size() == 1 && call->args[0]->dtype == f32
             ? math_pattern(call->fn).chunk
             : nullptr;
}

void CodeGen::emit_chunk_map(const std::string& dst, const ForNode& inner, DType dst_dtype, const Expr& value,
                             bool nonpos) {
  const char* chunk_fn = chunk_call(value, dst_dtype);
  if (chunk_fn && nonpos && math_pattern(as<CallNode>(value)->fn).nonpos) chunk_fn = math_pattern(as<CallNode>(value)->fn).nonpos;
  const Expr& v = chunk_fn ? as<CallNode>(value)->args[0] : value;
  std::string vj = bind(inner.var, true);
  // with a chunk function, the argument goes into a local buffer that g++ keeps in registers (it
  // does not escape), and the function writes dst from it: one store per vector, not the
  // argument's store, its reload and the result's store over it (softmax -7% cycles per element
  // on a Zen 4 core; docs/performance.md, session 21)
  if (chunk_fn) {
    open("");
    line("alignas(64) float tw_a[" + std::to_string(kOutChunk) + "];  // the argument (in registers)");
  }
  const std::string to = chunk_fn ? std::string("tw_a") : dst;
  line("#pragma GCC ivdep");
  open("for (int64_t " + vj + " = tw_j0; " + vj + " < tw_j0 + tw_jn; ++" + vj + ")");
  line(to + "[" + vj + " - tw_j0] = " + narrow(dst_dtype, v->dtype, expr(v)) + ";");
  close();
  if (chunk_fn) {
    line(std::string(chunk_fn) + "(" + dst + ", tw_a, tw_jn);");
    close();
  }
}

// With a chunk function (exp, exp2: an arithmetic-bound map) the chunk goes in sub-chunks of four
// vectors, each mapped and reduced before the next: the same vectors into the same accumulators in
// the same order (every sub-chunk but the last is one step of emit_vec_reduce's four-vector loop),
// so the same bits. With AVX-512 that is the whole 64-float chunk; with AVX2 (8 lanes, 16 ymm
// registers) a chunk's argument and result were 16 vectors computed before their sum, which g++
// kept on the stack: softmax 8192 x 4096 4-9% and log_softmax 0-4% less time on a Zen 4 core at
// -march=x86-64-v3 (docs/performance.md "Session 34: ... (h-avx2rows34)").
//
// A sum of a float32 product a * b whose values feed only the reduction (not keep: the tile is read
// nowhere else) accumulates each product with one fma: a reduction's order and rounding are the
// target's (docs/language.md "T.reduce_sum"), the elementwise arithmetic a kernel writes is rounded
// op by op (kernels are compiled with -ffp-contract=off). The factors go into local chunks (b's
// only when it differs from a: `d * d` is one chunk), each vector into its accumulator by
// tw_cpu::simd::fma, the same accumulators in the same order as the rounded product's sum.
// rms_norm's and layer_norm's sums of squares (docs/performance.md, session 38).
void CodeGen::emit_chunk_map_reduce(const ForNode& inner, DType dt, const Expr& value, bool nonpos, ReduceKind kind,
                                    bool nan, bool keep, const std::string& acc, const std::string& tail) {
  const auto* mul = value->kind == ExprKind::Binary ? as<BinaryNode>(value) : nullptr;
  const DType f32(DTypeCode::f32);
  if (!keep && kind == ReduceKind::sum && mul && mul->op == BinOp::Mul && dt == f32 && mul->dtype == f32 &&
      mul->a->dtype == f32 && mul->b->dtype == f32) {
    const bool square = ir::structural_equal(mul->a, mul->b);
    emit_chunk_map("tw_c", inner, dt, mul->a);
    std::string b = "tw_c";
    if (!square) {
      line("alignas(64) float tw_cb[" + std::to_string(kOutChunk) + "];  // the second factor");
      emit_chunk_map("tw_cb", inner, dt, mul->b);
      b = "tw_cb";
    }
    line("int64_t tw_q = 0;");
    auto ld = [&](const std::string& p, const std::string& at) { return "tw_cpu::simd::loadu(" + p + " + " + at + ")"; };
    open("for (; tw_q + 4 * tw_cpu::simd::kVF <= tw_jn; tw_q += 4 * tw_cpu::simd::kVF)");
    for (int u = 0; u < 4; ++u) {
      const std::string at = "tw_q + " + std::to_string(u) + " * tw_cpu::simd::kVF", v = acc + std::to_string(u);
      line(v + " = tw_cpu::simd::fma(" + ld("tw_c", at) + ", " + ld(b, at) + ", " + v + ");");
    }
    close();
    open("for (; tw_q + tw_cpu::simd::kVF <= tw_jn; tw_q += tw_cpu::simd::kVF)");
    line(acc + "0 = tw_cpu::simd::fma(" + ld("tw_c", "tw_q") + ", " + ld(b, "tw_q") + ", " + acc + "0);");
    close();
    line("for (; tw_q < tw_jn; ++tw_q) " + tail + " = tw_cpu::detail::fmadd(tw_c[tw_q], " + b + "[tw_q], " + tail + ");");
    return;
  }
  const bool sub = chunk_call(value, dt) != nullptr;
  if (sub) {
    open("for (int64_t tw_u = 0; tw_u < tw_jn; tw_u += 4 * tw_cpu::simd::kVF)");
    line("const int64_t tw_ju = tw_j0 + tw_u, tw_un = tw_min((int64_t)(4 * tw_cpu::simd::kVF), tw_jn - tw_u);");
    line("float* const tw_cu = tw_c + tw_u;");
    open("");
    line("const int64_t tw_j0 = tw_ju, tw_jn = tw_un;  // the sub-chunk");
  }
  const std::string c = sub ? "tw_cu" : "tw_c";
  emit_chunk_map(c, inner, dt, value, nonpos);
  line("int64_t tw_q = 0;");
  emit_vec_reduce(kind, nan, c, "tw_jn", "tw_q", acc);
  line("for (; tw_q < tw_jn; ++tw_q) " + tail + " = " + scalar_combine(kind, tail, c + "[tw_q]") + ";");
  if (sub) close(), close();
}

void CodeGen::emit_vec_reduce(ReduceKind kind, bool nan, const std::string& ptr, const std::string& n, const std::string& q,
                              const std::string& acc) {
  open("for (; " + q + " + 4 * tw_cpu::simd::kVF <= " + n + "; " + q + " += 4 * tw_cpu::simd::kVF)");
  for (int u = 0; u < 4; ++u) {
    std::string v = acc + std::to_string(u);
    line("{ const vf tw_x = tw_cpu::simd::loadu(" + ptr + " + " + q + " + " + std::to_string(u) +
         " * tw_cpu::simd::kVF); " + v + " = " + vec_combine(kind, v, "tw_x", nan) + "; }");
  }
  close();
  open("for (; " + q + " + tw_cpu::simd::kVF <= " + n + "; " + q + " += tw_cpu::simd::kVF)");
  line("const vf tw_x = tw_cpu::simd::loadu(" + ptr + " + " + q + ");");
  line(acc + "0 = " + vec_combine(kind, acc + "0", "tw_x", nan) + ";");
  close();
}

void CodeGen::emit_sum_block_flush(const std::string& acc, const std::string& d) {
  emit_vec_fold(ReduceKind::sum, acc);
  line(d + " += (double)tw_cpu::simd::fold_sum(" + acc + "0);");
  line(acc + "0 = " + acc + "1 = " + acc + "2 = " + acc + "3 = tw_cpu::simd::splat(" +
       sum_identity(DType(DTypeCode::f32)) + ");");
}

void CodeGen::emit_vec_fold(ReduceKind kind, const std::string& acc) {
  std::string v0 = acc + "0", v1 = acc + "1", v2 = acc + "2", v3 = acc + "3";
  line(v0 + " = " + vec_combine(kind, v0, v1, true) + ";");
  line(v2 + " = " + vec_combine(kind, v2, v3, true) + ";");
  line(v0 + " = " + vec_combine(kind, v0, v2, true) + ";");
}

// gemm: the last two dims of each region are the matrix (rows, cols), or in a global tensor the
// last and any other (gemm_matrix_dims); the other dims must have extent 1. The pointer is the
// region's first element, the leading dimension the rows' stride (the buffer's row length unless
// a global tensor's rows lie further out), so gemm works in place on tiles and on global tensors
// alike.
void CodeGen::emit_gemm(const GemmNode& n) {
  struct Mat { std::string ptr; Idx rows, cols, ld; int rd, cd; };  // rd, cd: the region's matrix dims
  auto mat = [&](const Region& r, const char* what) {
    if (r.buffer->ndim() < 2)
      throw Error(std::string("gemm operand ") + what + " ('" + r.buffer->name + "') must be a 2-D region", n.span);
    RegionView v = view(r);
    int rk = v.rank();
    // gemm does not clip tile regions: one check_bounds did not prove inside its tile has its
    // first and last index checked (global operands are clipped below).
    if (unproved_.count(&n) && r.buffer->scope != Scope::global)
      for (int d = 0; d < rk; ++d)
        for (const Idx& i : {v.start[d], add(v.start[d], sub(v.ext[d], ic(1)))})
          line("(void)" + expr(checked_index(i, v.shape[d], r.buffer, d, n.span)) + ";");
    // the matrix's dims (ir.h gemm_matrix_dims): a global tensor's rows may lie further out
    // (BSHD), a strided view: ld is the rows' stride
    auto [rows, cols] = gemm_matrix_dims(r);
    const int rd = static_cast<int>(rows), cd = static_cast<int>(cols);
    for (int d = 0; d < rk; ++d)
      if (d != rd && d != cd && cst(v.ext[d]) != 1)
        throw Error(std::string("gemm operand ") + what + " ('" + r.buffer->name +
                        "') must have extent 1 in all but its last two dimensions",
                    n.span, "select one matrix of a batch with a region of extent 1");
    if (auto it = views_.find(r.buffer.get()); it != views_.end()) {
      Idx ld = code(it->second.ld, true);
      Idx off = add(mul(v.start[0], ld), v.start[1]);
      return Mat{cst(off) == 0 ? it->second.ptr : "(" + it->second.ptr + " + " + expr(off) + ")", v.ext[0], v.ext[1], ld,
                 0, 1};
    }
    Idx off = ic(0);
    for (int d = 0; d < rk; ++d) off = add(off, mul(v.start[d], v.stride[d]));
    return Mat{cst(off) == 0 ? v.buf : "(" + v.buf + " + " + expr(off) + ")", v.ext[rd], v.ext[cd], v.stride[rd], rd, cd};
  };
  DType ta = n.a.buffer->dtype, tb = n.b.buffer->dtype, tc = n.c.buffer->dtype;
  bool float_ok = ta == tb && (ta.code == DTypeCode::f32 || ta.code == DTypeCode::f16 || ta.code == DTypeCode::bf16) &&
                  tc.code == DTypeCode::f32;
  bool int_ok = ta == tb && ta.code == DTypeCode::i8 && tc.code == DTypeCode::i32;
  if (!float_ok && !int_ok)
    throw Error("gemm on the CPU supports A, B in float32/float16/bfloat16 with C float32, or A, B int8 with C "
                "int32; got A " + std::string(ta.name()) + ", B " + std::string(tb.name()) + ", C " +
                    std::string(tc.name()),
                n.span, "accumulate into a float32 (or int32) fragment and cast when copying out");
  Mat a = mat(n.a, "A"), b = mat(n.b, "B"), c = mat(n.c, "C");
  Idx M = n.trans_a ? a.cols : a.rows, Ka = n.trans_a ? a.rows : a.cols;
  Idx Kb = n.trans_b ? b.cols : b.rows, N = n.trans_b ? b.rows : b.cols;
  auto check = [&](const Idx& x, const Idx& y, const char* what) {
    if (cst(x) && cst(y) && *cst(x) != *cst(y))
      throw Error(std::string("gemm shapes do not match: ") + what + " is " + expr(x) + " in one operand and " + expr(y) +
                      " in another",
                  n.span);
  };
  check(Ka, Kb, "K");
  check(M, c.rows, "M");
  check(N, c.cols, "N");
  // operands that are whole tiles with live extents (see View): multiply only their live part.
  // Past it A's rows/cols and B's are zero, so the dropped terms add nothing; C's rows/cols
  // past the live M, N keep their value (+= 0), or are cleared here when the gemm overwrites C.
  auto live = [&](const Region& r, bool trans) -> std::pair<std::string, std::string> {
    auto it = views_.find(r.buffer.get());
    if (it == views_.end() || it->second.live_r.empty()) return {};  // @gemm_view(0): not read whole
    const View& v = it->second;
    return trans ? std::pair{v.live_c, v.live_r} : std::pair{v.live_r, v.live_c};
  };
  auto [a_m, a_k] = live(n.a, n.trans_a);
  auto [b_k, b_n] = live(n.b, n.trans_b);
  // C computed in place (@gemm_out): its rows/cols inside the tensor, and its flag "nothing
  // written yet" (the clear folded into the first gemm, which then overwrites)
  std::string c_m, c_n, fresh;
  if (auto it = out_views_.find(n.c.buffer.get()); it != out_views_.end() && !it->second.fresh.empty()) {
    c_m = views_.at(n.c.buffer.get()).live_r;
    c_n = views_.at(n.c.buffer.get()).live_c;
    fresh = it->second.fresh;
  }
  auto trim = [this](const Idx& full, const std::string& x, const std::string& y) {
    std::string e = expr(full);
    for (const std::string* l : {&x, &y})
      if (!l->empty()) e = "(" + *l + " < " + e + " ? " + *l + " : " + e + ")";
    return e;
  };
  std::string Ms = trim(M, a_m, c_m), Ns = trim(N, b_n, c_n), Ks = trim(Ka, a_k, b_k);
  // C = A * B on a shrunk M or N: clear C, then accumulate (its rows/cols past the live part read 0)
  std::string shrunk;
  const std::string full_m = c_m.empty() ? expr(M) : c_m, full_n = c_n.empty() ? expr(N) : c_n;
  line(line_comment(n.span) + "gemm " + n.c.buffer->name + (n.clear ? " = " : " += ") + n.a.buffer->name +
       (n.trans_a ? "^T" : "") + " * " + n.b.buffer->name + (n.trans_b ? "^T" : ""));
  // A global operand region check_bounds did not prove inside its tensor reads zeros outside it
  // (docs/language.md T.gemm, as T.copy): the product runs on the part inside, [lo, hi) of op(A)'s
  // rows (M) and cols (K), op(B)'s rows (K, met with A's) and cols (N). The rows of C outside
  // [m0, m1) and cols outside [n0, n1) get nothing (cleared when the gemm overwrites C), and an
  // empty part (also: a leading unit dim outside the tensor) multiplies nothing.
  struct Clip { bool on = false; Idx lo[2], hi[2]; std::vector<std::string> conds; bool never = false; };
  auto clip = [&](const Region& r, const Mat& x, bool trans) {
    Clip c;
    if (r.buffer->scope != Scope::global || !unproved_.count(&r)) return c;
    RegionView v = view(r);
    c.on = true;
    c.conds = unit_dims_inside(v, c.never);
    for (int q = 0; q < 2; ++q) {  // q: op's rows, cols
      const int d = (q == 0) != trans ? x.rd : x.cd;
      c.lo[q] = range_lo(v, d);
      c.hi[q] = range_hi(v, d);
    }
    return c;
  };
  const Clip ca = clip(n.a, a, n.trans_a), cb = clip(n.b, b, n.trans_b);
  // the skipped terms (tw_cpu/gemm_zero.h): op(A)'s and op(B)'s live ranges and first live
  // elements; a float gemm whose operands may be trimmed at run time, bands excluded (a band is
  // the user's promise that A, or P, is 0 outside it)
  const bool zero_terms = float_ok && n.band == GemmBand::none &&
                          (!a_m.empty() || !a_k.empty() || !b_k.empty() || !b_n.empty() || ca.on || cb.on);
  std::string zero_args;
  if (zero_terms) {
    auto lesser = [](std::string x, const std::string& y) { return y.empty() ? x : "(" + y + " < " + x + " ? " + y + " : " + x + ")"; };
    // one operand: its live [r0, r1) x [k0, k1) in op() coordinates (q = 0: op's rows) and the
    // pointer to its first live element (formed only when that element exists)
    auto operand = [&](const Region& r, const Mat& x, const Clip& cl, bool trans, const Idx& rows, const Idx& cols,
                       const std::string& l0, const std::string& l1) {
      if (!cl.on)
        return x.ptr + ", " + expr(x.ld) + ", " + (trans ? "true" : "false") + ", 0, " + lesser(expr(rows), l0) +
               ", 0, " + lesser(expr(cols), l1);
      std::string lo0 = expr(cl.lo[0]), lo1 = expr(cl.lo[1]), hi0 = lesser(expr(cl.hi[0]), l0),
                  hi1 = lesser(expr(cl.hi[1]), l1);
      std::string inside = cl.never ? "false" : hi0 + " > " + lo0 + " && " + hi1 + " > " + lo1;
      for (const std::string& cond : cl.conds) inside += " && (" + cond + ")";
      RegionView v = view(r);
      Idx off = add(mul(trans ? cl.lo[1] : cl.lo[0], x.ld), trans ? cl.lo[0] : cl.lo[1]);
      for (int d = 0; d < v.rank(); ++d) off = add(off, mul(v.start[d], v.stride[d]));
      const std::string first = "(" + inside + " ? " + v.buf + " + " + expr(off) + " : " + v.buf + ")";
      return first + ", " + expr(x.ld) + ", " + (trans ? "true" : "false") + ", " + lo0 + ", (" + inside + " ? " +
             hi0 + " : " + lo0 + "), " + lo1 + ", " + hi1;
    };
    zero_args = operand(n.a, a, ca, n.trans_a, M, Ka, a_m, a_k) + ", " + operand(n.b, b, cb, n.trans_b, Kb, N, b_k, b_n);
  }
  const std::string c_whole = c.ptr;  // C's first element (the clipped product's may lie past it)
  // clipped: "nothing to multiply"; the band's offset in the clipped product, its rectangle's rows' and cols'
  std::string none, band_shift, row_shift, col_shift;
  const bool block = ca.on || cb.on || ((n.clear || !fresh.empty()) && (!a_m.empty() || !b_n.empty()));
  if (ca.on || cb.on) {
    open("");
    line("// " + std::string(ca.on ? n.a.buffer->name : "") + (ca.on && cb.on ? ", " : "") +
         (cb.on ? n.b.buffer->name : "") + " clipped to the tensor (outside reads as 0)");
    // min(e, hi), e a bound of the full extent (hi <= the full extent: range_hi)
    auto lower = [&](const std::string& e, const Idx& full, const Idx& hi) {
      return e == expr(full) ? expr(hi) : "(" + expr(hi) + " < " + e + " ? " + expr(hi) + " : " + e + ")";
    };
    const Idx m0 = hoist(ca.on ? ca.lo[0] : ic(0), "tw_gm0"), n0 = hoist(cb.on ? cb.lo[1] : ic(0), "tw_gn0");
    const Idx k0 = hoist(ca.on && cb.on && expr(ca.lo[1]) != expr(cb.lo[0]) ? imax(ca.lo[1], cb.lo[0])
                         : ca.on ? ca.lo[1] : cb.lo[0], "tw_gk0");
    line("const int64_t tw_gm1 = " + (ca.on ? lower(Ms, M, ca.hi[0]) : Ms) + ";");
    line("const int64_t tw_gn1 = " + (cb.on ? lower(Ns, N, cb.hi[1]) : Ns) + ";");
    const Idx k_hi = ca.on && cb.on && expr(ca.hi[1]) != expr(cb.hi[0]) ? imin(ca.hi[1], cb.hi[0])
                     : ca.on ? ca.hi[1] : cb.hi[0];
    line("const int64_t tw_gk1 = " + lower(Ks, Ka, k_hi) + ";");
    std::string empty = "tw_gm1 <= " + expr(m0) + " || tw_gn1 <= " + expr(n0) + " || tw_gk1 <= " + expr(k0);
    if (ca.never || cb.never) empty = "true";
    for (const Clip* c : {&ca, &cb})
      for (const std::string& cond : c->conds) empty += " || !(" + cond + ")";
    none = "tw_gnone";
    line("const bool " + none + " = " + empty + ";");
    if (n.clear || !fresh.empty()) {
      shrunk = "tw_gshrunk";
      std::string cond = none + " || tw_gm1 < " + full_m + " || tw_gn1 < " + full_n;
      if (cst(m0) != 0) cond += " || " + expr(m0) + " > 0";
      if (cst(n0) != 0) cond += " || " + expr(n0) + " > 0";
      line("const bool " + shrunk + " = " + (n.clear ? cond : fresh + " && (" + cond + ")") + ";");
    }
    auto diff = [&](const std::string& hi, const Idx& lo) { return cst(lo) == 0 ? hi : "(" + hi + " - " + expr(lo) + ")"; };
    Ms = diff("tw_gm1", m0);
    Ns = diff("tw_gn1", n0);
    Ks = diff("tw_gk1", k0);
    // the operands' and C's first element in the clipped product (a pointer only formed when it lies inside)
    auto at = [&](Mat& x, const Region& r, const Clip& c, bool trans, const Idx& q0, const Idx& q1) {
      const Idx row = trans ? q1 : q0, col = trans ? q0 : q1;
      if (!c.on) {
        Idx off = add(mul(row, x.ld), col);
        if (cst(off) != 0) x.ptr = "(" + x.ptr + " + " + expr(off) + ")";
        return;
      }
      RegionView v = view(r);
      Idx off = add(mul(row, x.ld), col);  // ld: the rows' stride
      for (int d = 0; d < v.rank(); ++d) off = add(off, mul(v.start[d], v.stride[d]));
      x.ptr = cst(off) == 0 ? v.buf : "(" + v.buf + " + " + expr(off) + ")";
    };
    at(a, n.a, ca, n.trans_a, m0, k0);
    at(b, n.b, cb, n.trans_b, k0, n0);
    Idx c_off = add(mul(m0, c.ld), n0);
    if (cst(c_off) != 0) c.ptr = "(" + c.ptr + " + " + expr(c_off) + ")";
    // the band's diagonal (k - i for a_band, j - i for c_band) in the clipped product's indices
    const Idx shift = sub(n.band == GemmBand::a ? k0 : n0, m0);
    if (cst(shift) != 0) band_shift = " - (" + expr(shift) + ")";
    if (cst(m0) != 0) row_shift = " - (" + expr(m0) + ")";  // rows: op(A)'s and C's; cols: op(A)'s k or C's
    if (const Idx& c0 = n.band == GemmBand::a ? k0 : n0; cst(c0) != 0) col_shift = " - (" + expr(c0) + ")";
  } else if (block) {
    open("");
    Ms = expr(hoist(code(Ms, true), "tw_gm"));
    Ns = expr(hoist(code(Ns, true), "tw_gn"));
    shrunk = "tw_gshrunk";
    const std::string cond = Ms + " < " + full_m + " || " + Ns + " < " + full_n;
    line("const bool " + shrunk + " = " + (n.clear ? cond : fresh + " && (" + cond + ")") + ";");
  }
  // A viewed in place in a tensor the kernel never writes: its packed form can be reused by
  // later calls on the same rows (the tile itself, after a masked copy, is refilled: not stable)
  // (the same for B: its packed panels are then shared by the blocks of one launch)
  std::string stable, a_st = "false", b_st = "false";
  if (auto it = views_.find(n.a.buffer.get()); it != views_.end())
    a_st = it->second.ptr + " != " + buf_name(n.a.buffer);
  if (auto it = views_.find(n.b.buffer.get()); it != views_.end())
    b_st = it->second.ptr + " != " + buf_name(n.b.buffer);
  // B's place in its tensor's rows (a strip of them: the runtime may stream whole rows, gemm.h)
  std::string b_col;
  if (auto it = views_.find(n.b.buffer.get()); it != views_.end() && !n.trans_b && !it->second.col.empty())
    b_col = ", /*b_col=*/" + it->second.col + ", /*b_width=*/" + it->second.width;
  if (a_st != "false" || b_st != "false" || !b_col.empty()) stable = ", /*a_stable=*/" + a_st;
  if (b_st != "false" || !b_col.empty()) stable += ", /*b_stable=*/" + b_st;
  stable += b_col;
  std::string accumulate = n.clear ? (shrunk.empty() ? "false" : shrunk)
                           : fresh.empty() ? "true"
                           : shrunk.empty() ? "!" + fresh
                                            : "!" + fresh + " || " + shrunk;
  // the next page's strip: B's passed to the call (prefetched during it, spread over gemm_small's
  // loops: gemm.h), A's prefetched here
  emit_slice_prefetch(n.a);
  const std::string next_b = slice_next(n.b);
  if (!next_b.empty()) {
    if (stable.empty()) stable = ", /*a_stable=*/" + a_st;
    if (b_st == "false" && b_col.empty()) stable += ", /*b_stable=*/" + b_st;
    if (b_col.empty()) stable += ", /*b_col=*/-1, /*b_width=*/0";
    stable += next_b;
  }
  // the band's rectangle (T.gemm's rows / cols; gemm.h Band, tw_cpu/check.h): ", r0, r1, c0, c1" with
  // the shifts given (the clipped product's) or "" without one
  auto rect = [&](const std::string& rs, const std::string& cs, const std::string& type, const std::string& all) {
    if (!n.rows_lo && !n.cols_lo) return std::string();
    auto pair = [&](const Expr& lo, const Expr& hi, const std::string& sh) {
      return lo ? "(" + type + ")(" + expr(lo) + sh + "), (" + type + ")(" + expr(hi) + sh + ")" : "0, " + all;
    };
    return ", " + pair(n.rows_lo, n.rows_hi, rs) + ", " + pair(n.cols_lo, n.cols_hi, cs);
  };
  // checked mode computes a c_band product whole (then marks C outside the band, below)
  if (n.band != GemmBand::none && !(bounds_check_ && n.band == GemmBand::c)) {  // T.gemm's a_band / c_band: the last argument (gemm.h Band)
    if (stable.empty()) stable = ", /*a_stable=*/" + a_st;
    if (stable.find("b_stable") == std::string::npos) stable += ", /*b_stable=*/" + b_st;
    if (stable.find("b_col") == std::string::npos) stable += ", /*b_col=*/-1, /*b_width=*/0";
    if (next_b.empty()) stable += ", /*next_b=*/(const " + storage_type(tb) + "*)nullptr, /*next_ldb=*/0";
    stable += ", tw_cpu::Band{" + std::string(n.band == GemmBand::a ? "1" : "2") + ", (long)(" + expr(n.band_lo) +
              band_shift + "), (long)(" + expr(n.band_hi) + band_shift + ")" +
              rect(row_shift, col_shift, "long", "tw_cpu::Band::kAll") + "}";
  }
  if (!shrunk.empty()) {
    open("if (" + shrunk + ")");
    open("for (int64_t tw_i = 0; tw_i < " + full_m + "; ++tw_i)");
    line("for (int64_t tw_j = 0; tw_j < " + full_n + "; ++tw_j) " + c_whole + "[tw_i * " + expr(c.ld) + " + tw_j] = 0;");
    close();
    close();
  }
  // checked mode verifies the band's promise (tw_cpu/check.h): lo <= hi; a_band: op(A)'s live part
  // is exactly 0 outside the band (else a located error); c_band: C's elements outside it are NaN
  const std::string at = std::to_string(n.span.line) + ", " + std::to_string(n.span.col);
  const bool check_band = bounds_check_ && n.band != GemmBand::none;
  const std::string band_lo = check_band ? "(int64_t)(" + expr(n.band_lo) + ")" : "";
  const std::string band_hi = check_band ? "(int64_t)(" + expr(n.band_hi) + ")" : "";
  const std::string guard = none.empty() ? "" : "if (!" + none + ") ";
  for (auto [lo, hi, what] : {std::tuple{n.rows_lo, n.rows_hi, "rows"}, std::tuple{n.cols_lo, n.cols_hi, "cols"}})
    if (bounds_check_ && lo)  // the rectangle's lo <= hi
      line("tw_cpu::check_band((int64_t)(" + expr(lo) + "), (int64_t)(" + expr(hi) + "), " + at + ", \"" + what +
           "\", \"" + n.a.buffer->name + "\");");
  if (bounds_check_ && n.band == GemmBand::a)
    line(guard + "tw_cpu::check_band_a((int64_t)(" + Ms + "), (int64_t)(" + Ks + "), " + a.ptr + ", " + expr(a.ld) +
         ", " + (n.trans_a ? "true" : "false") + ", (int64_t)(" + expr(n.band_lo) + band_shift + "), (int64_t)(" +
         expr(n.band_hi) + band_shift + "), " + at + ", \"" + n.a.buffer->name + "\"" +
         rect(row_shift, col_shift, "int64_t", "tw_cpu::kNoLimit") + ");");
  if (bounds_check_ && n.band == GemmBand::c)
    line("tw_cpu::check_band(" + band_lo + ", " + band_hi + ", " + at + ", \"c_band\", \"" + n.a.buffer->name + "\");");
  line(guard + kGemmCall + Ms + ", " + Ns + ", " + Ks + ", " + a.ptr + ", " + expr(a.ld) + ", " +
       (n.trans_a ? "true" : "false") + ", " + b.ptr + ", " + expr(b.ld) + ", " + (n.trans_b ? "true" : "false") + ", " +
       c.ptr + ", " + expr(c.ld) + ", /*accumulate=*/" + accumulate + stable + ");");
  if (zero_terms)
    line("tw_cpu::gemm_zero_terms((int64_t)(" + full_m + "), (int64_t)(" + full_n + "), (int64_t)(" + expr(Ka) + "), " +
         zero_args + ", " + c_whole + ", " + expr(c.ld) + ");");
  if (bounds_check_ && n.band == GemmBand::c)
    line("tw_cpu::poison_outside_band((int64_t)(" + full_m + "), (int64_t)(" + full_n + "), " + c_whole + ", " +
         expr(c.ld) + ", " + band_lo + ", " + band_hi + rect("", "", "int64_t", "tw_cpu::kNoLimit") + ");");
  if (block) close();
  if (!fresh.empty()) line(fresh + " = false;");
}

// fill: the value is converted once; loops over the part of the region inside the buffer.
void CodeGen::emit_fill(const FillNode& n) {
  if (auto it = out_views_.find(n.dst.buffer.get()); it != out_views_.end() && it->second.copy)
    return emit_out_view(n, it->second);
  RegionView d = view(n.dst);
  line(line_comment(n.span) + "fill " + n.dst.buffer->name);
  open("");
  line("const " + storage_type(d.dtype) + " tw_v = " + narrow(d.dtype, n.value->dtype, expr(n.value)) + ";");
  Idx db = hoist_starts(d, "tw_d");
  db = hoist(db, "tw_db");
  bool never = false;
  auto cond = unit_dims_inside(d, never);
  if (never) {
    line("// the region lies outside its buffer: nothing to write");
    close();
    return;
  }
  int opened = open_if_all(cond) ? 1 : 0;
  const int nl = static_cast<int>(d.dims.size());
  for (int k = 0; k < nl; ++k) {
    std::string i = "tw_i" + std::to_string(k);
    if (k == nl - 1) line("#pragma GCC ivdep");
    open("for (int64_t " + i + " = " + expr(range_lo(d, d.dims[k])) + "; " + i + " < " + expr(range_hi(d, d.dims[k])) +
         "; ++" + i + ")");
    ++opened;
  }
  line(d.buf + "[" + expr(offset(d, db, nl)) + "] = tw_v;");
  for (int j = 0; j < opened; ++j) close();
  close();
}

// The clear of an accumulator tile computed in place (@gemm_out): the tile becomes a view of its
// copy-out's window (pointer, leading dim, rows and cols inside the tensor: a ragged last block
// computes only those), and the clear a flag that makes the first gemm overwrite instead of
// accumulate. A window whose start may be negative or whose unit dims may lie outside the tensor
// keeps the tile at run time (the copy-out then copies it).
void CodeGen::emit_out_view(const FillNode& n, OutView& o) {
  const Buffer& t = n.dst.buffer;
  const auto shape = *t->const_shape();
  const std::string name = buf_name(t);
  const void* key = o.copy;
  View v{name_for(key, name + "_p"), name_for(reinterpret_cast<const char*>(key) + 1, name + "_ld"), shape[1], t->dtype};
  v.rows = shape[0];
  v.live_r = name_for(reinterpret_cast<const char*>(key) + 2, name + "_rows");
  v.live_c = name_for(reinterpret_cast<const char*>(key) + 3, name + "_cols");
  o.fresh = name_for(reinterpret_cast<const char*>(key) + 4, name + "_fresh");
  line(line_comment(n.span) + "fill " + name + ": " + name + " is computed in place in " + o.copy->dst.buffer->name +
       " (its gemms accumulate into the window of its copy-out; the first one overwrites)");
  line(storage_type(t->dtype) + "* " + v.ptr + " = " + name + ";");
  line("int64_t " + v.ld + " = " + std::to_string(shape[1]) + ", " + v.live_r + " = " + std::to_string(shape[0]) + ", " +
       v.live_c + " = " + std::to_string(shape[1]) + ";");
  line("bool " + o.fresh + " = true;  // nothing written yet");
  RegionView d = view(o.copy->dst);
  bool never = false;
  std::vector<std::string> conds = unit_dims_inside(d, never);
  if (!never) {
    open("");
    Idx db = hoist_starts(d, "tw_d");
    db = hoist(db, "tw_db");
    conds = unit_dims_inside(d, never);
    for (int k : d.dims)
      if (!nonneg(d.start[k])) conds.push_back(expr(d.start[k]) + " >= 0");
    o.fallback = !conds.empty();
    int opened = open_if_all(conds) ? 1 : 0;
    // the tile's rows and cols: the region's non-unit dims in order (a 1-row or 1-col tile has one)
    auto live = [&](int k) { return expr(imax(ic(0), range_hi(d, k))); };
    std::string ld = "1", rows = "1", cols = "1";
    size_t next = 0;
    if (shape[0] != 1) {
      ld = expr(d.stride[d.dims[next]]);
      rows = live(d.dims[next++]);
    }
    if (shape[1] != 1) cols = live(d.dims[next]);
    line(v.ptr + " = " + (cst(db) == 0 ? d.buf : d.buf + " + " + expr(db)) + ";");
    line(v.ld + " = " + ld + "; " + v.live_r + " = " + rows + "; " + v.live_c + " = " + cols + ";");
    for (int j = 0; j < opened; ++j) close();
    close();
  } else {
    o.fallback = true;
  }
  views_[t.get()] = v;
}

// reduce over `axis` of a tile: src viewed as [outer, R, inner]. inner == 1 (the last axis):
// rows shorter than 16 one accumulator per row, vectorised across the rows; float32 rows use
// four independent vector accumulators; other types 16 partial accumulators per row so the
// loop vectorises, then a tree; otherwise (inner > 1) a row of accumulators updated
// elementwise, four rows per pass. Accumulators are float (double for f64) or int64_t.
void CodeGen::emit_reduce(const ReduceNode& n) {
  auto ss = n.src->const_shape(), ds = n.dst->const_shape();
  if (!ss || !ds)
    throw Error("reduce needs tile buffers with constant shapes ('" + (ss ? n.dst->name : n.src->name) + "' is not one)",
                n.span, "copy the data into a fragment first");
  if (n.axis < 0 || n.axis >= n.src->ndim())
    throw Error("reduce axis " + std::to_string(n.axis) + " is out of range for '" + n.src->name + "' with " +
                    std::to_string(n.src->ndim()) + " dimension(s)",
                n.span);
  int64_t outer = 1, R = (*ss)[n.axis], inner = 1;
  for (int d = 0; d < n.axis; ++d) outer *= (*ss)[d];
  for (int d = n.axis + 1; d < n.src->ndim(); ++d) inner *= (*ss)[d];
  std::vector<int64_t> want = *ss, keep = *ss;
  want.erase(want.begin() + n.axis);
  keep[n.axis] = 1;
  if (*ds != want && *ds != keep)
    throw Error("reduce over axis " + std::to_string(n.axis) + " of '" + n.src->name +
                    "' needs a destination of its shape without that axis; '" + n.dst->name + "' has another shape",
                n.span);
  DType st = n.src->dtype, dt = n.dst->dtype;
  // the type of the elements read: the tile's, or a widening row view's source dtype (view_rows:
  // each element widened where read, simd.h loadu(const bf16*) for whole vectors)
  const bool viewed = live_views_.count(n.src.get()) > 0;
  const DType vt = viewed ? views_.at(n.src.get()).dt : st;
  DType acc_t = st.code == DTypeCode::f64 ? DType(DTypeCode::f64) : st.is_float() ? DType(DTypeCode::f32) : DType(DTypeCode::i64);
  std::string A = compute_type(acc_t);
  std::string neutral;
  auto combine = [&](const std::string& x, const std::string& y) {
    switch (n.reduce_kind) {
      case ReduceKind::sum: return x + " + " + y;
      case ReduceKind::max: return "tw_max(" + x + ", " + y + ")";
      case ReduceKind::min: return "tw_min(" + x + ", " + y + ")";
    }
    return x;
  };
  switch (n.reduce_kind) {
    case ReduceKind::sum: neutral = acc_t.is_float() ? sum_identity(acc_t) : "0"; break;
    case ReduceKind::max: neutral = acc_t.is_float() ? float_lit(-INFINITY, acc_t) : "(-9223372036854775807LL - 1)"; break;
    case ReduceKind::min: neutral = acc_t.is_float() ? float_lit(INFINITY, acc_t) : "9223372036854775807LL"; break;
  }
  std::string src = buf_name(n.src), dst = buf_name(n.dst);
  auto load = [&](const std::string& b, DType t, const std::string& at) {
    std::string v = widen(t, b + "[" + at + "]");
    return compute_type(t) == A ? v : "(" + A + ")" + v;
  };
  auto store = [&](const std::string& at, const std::string& acc) {
    std::string v = n.clear ? acc : combine(load(dst, dt, at), acc);
    line(dst + "[" + at + "] = " + (storage_type(dt) == A ? v : "tw_cpu::convert<" + storage_type(dt) + ">(" + v + ")") + ";");
  };
  line(line_comment(n.span) + "reduce_" + std::string(reducekind_name(n.reduce_kind)) + " " + n.src->name +
       " -> " + n.dst->name + " over axis " + std::to_string(n.axis) + (n.clear ? "" : " (merge)"));
  open("");
  constexpr int kParts = 16;
  // float32-accumulated sums longer than a block are summed in blocks (kSumBlock elements along
  // a row, kSumRows rows down a column), the blocks' sums added in double: the error is that of
  // one block at any length (docs/language.md "T.reduce_sum")
  const bool fsum = n.reduce_kind == ReduceKind::sum && acc_t.code == DTypeCode::f32;
  const bool blocked = fsum && inner == 1 && R > kSumBlock;
  const std::string B_s = std::to_string(kSumBlock);
  if (inner == 1 && R < kParts && outer >= 2) {
    // short rows (a narrow softmax's [8, 1] tile): one accumulator per row, the rows combined
    // column by column, so that g++ vectorises across the rows (per row the order is unchanged)
    std::string O = std::to_string(outer), row = "tw_o * " + std::to_string(R);
    if (live_views_.count(n.src.get())) {  // rows read in place (view_rows)
      const View& v = views_.at(n.src.get());
      src = v.ptr;
      row = "tw_o * " + v.ld;
    }
    line("alignas(64) " + A + " tw_acc[" + O + "];");
    line("#pragma GCC ivdep");
    line("for (int64_t tw_o = 0; tw_o < " + O + "; ++tw_o) tw_acc[tw_o] = " + neutral + ";");
    open("for (int64_t tw_r = 0; tw_r < " + std::to_string(R) + "; ++tw_r)");
    line("#pragma GCC ivdep");
    line("for (int64_t tw_o = 0; tw_o < " + O + "; ++tw_o) tw_acc[tw_o] = " +
         combine("tw_acc[tw_o]", load(src, vt, row + " + tw_r")) + ";");
    close();
    line("#pragma GCC ivdep");
    open("for (int64_t tw_o = 0; tw_o < " + O + "; ++tw_o)");
    store("tw_o", "tw_acc[tw_o]");
    close();
    close();
    return;
  }
  open("for (int64_t tw_o = 0; tw_o < " + std::to_string(outer) + "; ++tw_o)");
  if (inner == 1) {
    std::string row = "tw_o * " + std::to_string(R);
    if (live_views_.count(n.src.get())) {  // rows read in place (view_rows)
      const View& v = views_.at(n.src.get());
      src = v.ptr;
      row = "tw_o * " + v.ld;
    }
    if (st.code == DTypeCode::f32 && R >= kParts) {
      // float32: the tw_cpu::simd vector type (native width), four independent accumulators so
      // that the loop is bound by loads, not by the latency of one add / max chain; they are
      // combined lane-wise, then the lanes, then the scalar tail. (g++ does not vectorise the
      // select form of max/min without -ffast-math; a sum in one vector is latency-bound.)
      // max/min: `x > acc ? x : acc` per lane in any grouping gives the same value (NaN
      // elements never replace an accumulator); a sum is regrouped (more partial sums than a
      // single chain: no less accurate).
      std::string R_s = std::to_string(R);
      line("using tw_cpu::simd::vf;");
      line("const vf tw_z = tw_cpu::simd::splat(" + neutral + ");");
      line("vf tw_v0 = tw_z, tw_v1 = tw_z, tw_v2 = tw_z, tw_v3 = tw_z;");
      line("const " + storage_type(vt) + "* tw_row = " + src + " + " + row + ";");
      line("int64_t tw_r = 0;");
      if (blocked) {  // blocks of kSumBlock elements, their sums added in double
        line("double tw_d = " + sum_identity(DType(DTypeCode::f64)) + ";");
        open("for (int64_t tw_b = 0; tw_b < " + R_s + "; tw_b += " + B_s + ")");
        line("const int64_t tw_be = tw_min(tw_b + " + B_s + ", (int64_t)" + R_s + ");");
        emit_vec_reduce(n.reduce_kind, nan_checked(n), "tw_row", "tw_be", "tw_r");
        emit_sum_block_flush("tw_v", "tw_d");
        close();
        line(A + " tw_acc = (float)tw_d;");
      } else {
        emit_vec_reduce(n.reduce_kind, nan_checked(n), "tw_row", R_s, "tw_r");
        emit_vec_fold(n.reduce_kind);
        line(A + " tw_acc = " + vec_fold_lanes(n.reduce_kind, "tw_v0") + ";");
      }
      line("for (; tw_r < " + R_s + "; ++tw_r) tw_acc = " + combine("tw_acc", widen(vt, "tw_row[tw_r]")) + ";");
      store("tw_o", "tw_acc");
    } else if (R >= 2 * kParts) {
      line(A + " tw_p[" + std::to_string(kParts) + "];");
      line("for (int tw_j = 0; tw_j < " + std::to_string(kParts) + "; ++tw_j) tw_p[tw_j] = " + neutral + ";");
      line("int64_t tw_r = 0;");
      std::string end = std::to_string(R);
      if (blocked) {  // blocks of kSumBlock elements, their sums added in double
        line("double tw_d = " + sum_identity(DType(DTypeCode::f64)) + ";");
        open("for (int64_t tw_b = 0; tw_b < " + end + "; tw_b += " + B_s + ")");
        line("const int64_t tw_be = tw_min(tw_b + " + B_s + ", (int64_t)" + end + ");");
        line("for (int tw_j = 0; tw_j < " + std::to_string(kParts) + "; ++tw_j) tw_p[tw_j] = " + neutral + ";");
        end = "tw_be";
      }
      open("for (; tw_r + " + std::to_string(kParts) + " <= " + end + "; tw_r += " + std::to_string(kParts) + ")");
      line("#pragma GCC unroll " + std::to_string(kParts));
      line("for (int tw_j = 0; tw_j < " + std::to_string(kParts) + "; ++tw_j) tw_p[tw_j] = " +
           combine("tw_p[tw_j]", load(src, vt, row + " + tw_r + tw_j")) + ";");
      close();
      line("for (; tw_r < " + end + "; ++tw_r) tw_p[0] = " + combine("tw_p[0]", load(src, vt, row + " + tw_r")) + ";");
      for (int w = kParts / 2; w >= 1; w /= 2)
        line("for (int tw_j = 0; tw_j < " + std::to_string(w) + "; ++tw_j) tw_p[tw_j] = " +
             combine("tw_p[tw_j]", "tw_p[tw_j + " + std::to_string(w) + "]") + ";");
      if (blocked) {
        line("tw_d += (double)tw_p[0];");
        close();
      }
      store("tw_o", blocked ? "(float)tw_d" : "tw_p[0]");
    } else {
      line(A + " tw_acc = " + neutral + ";");
      line("for (int64_t tw_r = 0; tw_r < " + std::to_string(R) + "; ++tw_r) tw_acc = " +
           combine("tw_acc", load(src, vt, row + " + tw_r")) + ";");
      store("tw_o", "tw_acc");
    }
  } else {
    // A row of accumulators (L1-resident) updated row by row: the rows are read in address order
    // (in place from the source tensor when the tile is a live view), four rows per pass over
    // the accumulators so that each accumulator vector is loaded and stored once per four rows;
    // per element the rows are still combined in order (the same result as row by row).
    // (Software prefetches of the rows ahead measured no gain, or a loss, on Zen 4.)
    // float32 rows of 256 B to 4 KiB read in place that lie back to back in the source (the
    // view's leading dimension is the tile's width) are walked one row a step instead: one
    // ascending stream, which the hardware prefetcher follows across 4 KiB pages, where four-row
    // passes are interleaved streams that start cold on every page (docs/performance.md, session
    // 21 h-avx2mid9). The empty asm after each row keeps g++ from unroll-and-jamming two rows into
    // one step (two streams again). The loads are 64-byte aligned (a scalar head up to the rows'
    // first line boundary: 512-bit loads that cross lines cost the lone stream 40-80%), and the
    // accumulators lie at the rows' page offset + 2 KiB (the same offset mod 64, and far from
    // the rows' low 12 address bits, where a step's stores and the next step's loads would alias).
    std::string I = std::to_string(inner), R_s = std::to_string(R);
    std::string base = "(tw_o * " + R_s + ")";
    std::string ld = I;
    if (viewed) {  // 2-D tile: outer == 1
      const View& v = views_.at(n.src.get());
      src = v.ptr;
      ld = v.ld;
    }
    const bool one_row = viewed && vt.code == DTypeCode::f32 && inner >= 64 && inner <= 1024;
    if (one_row) {
      line("alignas(4096) unsigned char tw_accb[" + I + " * sizeof(float) + 4096];");
      line("float* const tw_acc = (float*)(tw_accb + (((uintptr_t)" + src + " + 2048) & 4095));");
    } else {
      line("alignas(64) " + A + " tw_acc[" + I + "];");
    }
    const bool cblocked = fsum && R > kSumRows;
    std::string end = R_s;
    if (cblocked) {  // blocks of kSumRows rows, their sums added in double
      line("int64_t tw_r = 0;");
      line("double tw_tot[" + I + "];");
      line("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j) tw_tot[tw_j] = " + sum_identity(DType(DTypeCode::f64)) +
           ";");
      open("for (int64_t tw_b = 0; tw_b < " + R_s + "; tw_b += " + std::to_string(kSumRows) + ")");
      line("const int64_t tw_re = tw_min(tw_b + " + std::to_string(kSumRows) + ", (int64_t)" + R_s + ");");
      end = "tw_re";
    }
    line("#pragma GCC ivdep");
    line("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j) tw_acc[tw_j] = " + neutral + ";");
    if (!cblocked) line("int64_t tw_r = 0;");
    auto row_ptr = [&](const std::string& r) { return src + " + (" + base + " + " + r + ") * " + ld; };
    if (one_row) {
      open("if (" + ld + " == " + I + ")");
      line("const int64_t tw_h = tw_min((int64_t)(((64 - ((uintptr_t)" + src + " & 63)) & 63) / sizeof(float)), (int64_t)" + I + ");");
      open("for (; tw_r < " + end + "; ++tw_r)");
      line("const float* const tw_p0 = " + row_ptr("tw_r") + ";");
      line("for (int64_t tw_j = 0; tw_j < tw_h; ++tw_j) tw_acc[tw_j] = " + combine("tw_acc[tw_j]", "tw_p0[tw_j]") + ";");
      line("#pragma GCC ivdep");
      line("for (int64_t tw_j = tw_h; tw_j < " + I + "; ++tw_j) tw_acc[tw_j] = " + combine("tw_acc[tw_j]", "tw_p0[tw_j]") + ";");
      line("__asm__ volatile(\"\" ::: \"memory\");  // one stream: no unroll-and-jam of the rows");
      close();
      close();
    }
    constexpr int kRows = 4;
    if (R >= kRows) {
      open("for (; tw_r + " + std::to_string(kRows) + " <= " + end + "; tw_r += " + std::to_string(kRows) + ")");
      std::string comb = "tw_acc[tw_j]";
      for (int u = 0; u < kRows; ++u) {
        std::string p = "tw_p" + std::to_string(u);
        line("const " + storage_type(vt) + "* const " + p + " = " + row_ptr("tw_r + " + std::to_string(u)) + ";");
        comb = combine(comb, load(p, vt, "tw_j"));
      }
      line("#pragma GCC ivdep");
      line("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j) tw_acc[tw_j] = " + comb + ";");
      close();
    }
    if (R % kRows != 0) {
      open("for (; tw_r < " + end + "; ++tw_r)");
      line("const " + storage_type(vt) + "* const tw_p0 = " + row_ptr("tw_r") + ";");
      line("#pragma GCC ivdep");
      line("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j) tw_acc[tw_j] = " + combine("tw_acc[tw_j]", load("tw_p0", vt, "tw_j")) + ";");
      close();
    }
    if (cblocked) {
      line("#pragma GCC ivdep");
      line("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j) tw_tot[tw_j] += (double)tw_acc[tw_j];");
      close();
    }
    line("#pragma GCC ivdep");
    open("for (int64_t tw_j = 0; tw_j < " + I + "; ++tw_j)");
    store("tw_o * " + I + " + tw_j", cblocked ? "(float)tw_tot[tw_j]" : "tw_acc[tw_j]");
    close();
  }
  close();
  close();
}

// ---------------------------------------------------------------------------------------------
// Regions and indices

std::vector<Idx> CodeGen::shape_of(const Buffer& b) {
  std::vector<Idx> out;
  for (const auto& d : b->shape) {
    out.push_back(nonneg_idx(idx(d)));  // sizes
  }
  return out;
}

// Checked: each index goes through tw_cpu::checked_index (TW_BOUNDS_CHECK=1, or a tile access
// check_bounds did not prove in bounds).
Idx CodeGen::linear_index(const Buffer& b, const std::vector<Expr>& indices, const Span& at, bool checked) {
  auto shape = shape_of(b);
  if (indices.empty()) return ic(0);
  auto index = [&](size_t d) {
    Idx i = idx(indices[d]);
    return checked ? checked_index(i, shape[d], b, d, at) : i;
  };
  Idx acc = index(0);
  for (size_t d = 1; d < indices.size(); ++d) acc = add(mul(acc, shape[d]), index(d));
  return acc;
}

// The buffer name is an identifier (verified), so it is a safe string literal.
Idx CodeGen::checked_index(const Idx& i, const Idx& extent, const Buffer& b, size_t dim, const Span& at) {
  return code("tw_cpu::checked_index(" + expr(i) + ", " + expr(extent) + ", " + std::to_string(at.line) + ", " +
                  std::to_string(at.col) + ", \"" + b->name + "\", " + std::to_string(dim) + ")",
              nonneg(i));
}

RegionView CodeGen::view(const Region& r) {
  const Buffer& b = r.buffer;
  if (static_cast<int>(r.starts.size()) != b->ndim() || r.extents.size() != r.starts.size())
    throw Error("region of '" + b->name + "' has " + std::to_string(r.starts.size()) + " start(s) and " +
                    std::to_string(r.extents.size()) + " extent(s) for a " + std::to_string(b->ndim()) + "-D buffer",
                b->span);
  RegionView v;
  v.buf = buf_name(b);
  v.dtype = b->dtype;
  v.shape = shape_of(b);
  for (int d = 0; d < b->ndim(); ++d) {
    v.start.push_back(idx(r.starts[d]));
    auto rt = runtime_extent(r.extents[d]);
    v.limit.push_back(rt ? idx(rt->value) : Idx{});
    Idx e = rt ? ic(rt->bound) : idx(r.extents[d]);
    if (cst(e) && *cst(e) <= 0)
      throw Error("region of '" + b->name + "' has extent " + expr(e) + " in dimension " + std::to_string(d), b->span);
    v.ext.push_back(nonneg_idx(e));
    if (cst(e) != 1) v.dims.push_back(d);
  }
  v.stride.assign(b->ndim(), ic(1));
  for (int d = b->ndim() - 2; d >= 0; --d) v.stride[d] = mul(v.stride[d + 1], v.shape[d + 1]);
  return v;
}

Idx CodeGen::hoist_starts(RegionView& v, const std::string& p) {
  Idx base = ic(0);
  for (int d = 0; d < v.rank(); ++d) {
    v.start[d] = hoist(v.start[d], p + std::to_string(d));
    base = add(base, mul(v.start[d], v.stride[d]));
  }
  return base;
}

Idx CodeGen::offset(const RegionView& v, const Idx& base, int upto_loop) const {
  Idx off = base;
  for (int k = 0; k < upto_loop; ++k) off = add(off, mul(code("tw_i" + std::to_string(k), true), v.stride[v.dims[k]]));
  return off;
}

void CodeGen::inside_conds(const RegionView& v, std::vector<std::string>& out, bool* never) const {
  for (int d = 0; d < v.rank(); ++d) {
    if (never && ((cst(v.start[d]) && *cst(v.start[d]) < 0) || v.overflows_above(d))) *never = true;
    if (!nonneg(v.start[d])) out.push_back(expr(v.start[d]) + " >= 0");
    if (!v.overflows_above(d) && !v.fits_above(d))
      out.push_back(expr(add(v.start[d], v.ext[d])) + " <= " + expr(v.shape[d]));
    if (v.limit[d]) out.push_back(expr(v.limit[d]) + " >= " + expr(v.ext[d]));  // the run-time extent is whole
  }
}

std::vector<std::string> CodeGen::unit_dims_inside(const RegionView& v, bool& never) const {
  std::vector<std::string> out;
  for (int d = 0; d < v.rank(); ++d) {
    if (cst(v.ext[d]) != 1) continue;
    const Idx& st = v.start[d];
    if (cst(st) && *cst(st) < 0) never = true;
    if (!nonneg(st)) out.push_back(expr(st) + " >= 0");
    if (v.overflows_above(d)) never = true;
    else if (!v.fits_above(d)) out.push_back(expr(st) + " < " + expr(v.shape[d]));
    if (v.limit[d]) out.push_back(expr(v.limit[d]) + " >= 1");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Expressions

std::string CodeGen::expr_var(const VarNode& n) const {
  if (auto it = code_.find(&n); it != code_.end()) return it->second.text;
  if (!bound_.count(&n))
    throw Error("variable '" + n.name + "' is used outside the scope that defines it", n.span);
  return names_.at(&n);
}

// Math functions: the pattern of the function's row in target/cpu/math_fns.h, with the arguments
// for $0 / $1.
std::string CodeGen::expr_call(const CallNode& n) const {
  std::vector<std::string> args;
  for (const auto& a : n.args) args.push_back(expr(a));
  std::string pattern;
  if (n.fn == MathFn::abs && n.dtype.is_int()) pattern = "tw_abs($0)";
  else if (!n.dtype.is_float())
    throw Error(std::string(mathfn_name(n.fn)) + " needs a float argument, got " + std::string(n.dtype.name()), n.span);
  else pattern = n.dtype.code == DTypeCode::f64 ? math_pattern(n.fn).f64 : math_pattern(n.fn).f32;
  // x ** 0.5 is sqrt(x) and x ** -0.5 is 1 / sqrt(x) (docs/language.md, as numpy's and torch's sqrt and
  // ascend910b give: -0.0 -> -0.0 / -inf, -inf -> NaN; C's pow gives +0.0 / +inf, +inf / +0.0)
  if (n.fn == MathFn::pow && n.args.size() == 2 && n.args[1]->kind == ExprKind::FloatImm) {
    const double e = as<FloatImmNode>(n.args[1])->value;
    const bool f64 = n.dtype.code == DTypeCode::f64;
    if (e == 0.5 || e == -0.5) pattern = f64 ? math_pattern(MathFn::sqrt).f64 : math_pattern(MathFn::sqrt).f32;
    if (e == -0.5) pattern = f64 ? "(1.0 / " + pattern + ")" : "(1.0f / " + pattern + ")";
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '$' && i + 1 < pattern.size()) {
      size_t k = static_cast<size_t>(pattern[++i] - '0');
      if (k >= args.size()) throw Error("internal: math pattern argument out of range", n.span);
      out += args[k];
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// A cast rounds through the target's storage type, then holds the value in its compute type.
std::string CodeGen::expr_cast(const CastNode& n) const {
  std::string v = expr(n.value);
  DType to = n.dtype, from = n.value->dtype;
  std::string st = storage_type(to), ct = compute_type(to);
  if (to.is_int() && (from.is_int() || from.is_bool())) {
    // int -> int: a no-op when the target holds every value of the source, else wrap around; a bool's
    // 0 / 1 as int64_t, the integers' compute type (C++ computes `bool - 127` in 32-bit int: hunt37 F2)
    if (from.is_bool()) return "(int64_t)(" + v + ")";
    bool widening = to.code == DTypeCode::i64 ||
                    (to.code == DTypeCode::i32 && (from.code == DTypeCode::i8 || from.code == DTypeCode::u8));
    return widening ? v : "(int64_t)(" + st + ")" + v;
  }
  if (st == ct) return ct == compute_type(from) ? v : "tw_cpu::convert<" + ct + ">(" + v + ")";
  return "tw_cpu::convert<" + ct + ">(tw_cpu::convert<" + st + ">(" + v + "))";
}

// A global tensor's load often sits behind a guard of its index (a where(), an `and`); an integer
// division by a value the guard excludes (0) is defined (tw_udiv) but not free. Tile loads are
// inside their tile (check_bounds) or checked.
bool CodeGen::eager_safe(const Expr& x) const {
  // checked mode tests the tile loads of an index or a condition: only those of the arm taken
  if (bounds_check_ && (index_depth_ || control_depth_)) return false;
  struct Safe : Visitor {
    bool ok = true;
    using Visitor::visit;
    void visit(const Expr& e) override {
      if (!e) return;
      if (e->kind == ExprKind::Load && as<LoadNode>(e)->buffer->scope == Scope::global) ok = false;
      if (e->kind == ExprKind::Binary && !e->dtype.is_float()) {
        BinOp op = as<BinaryNode>(e)->op;
        if (op == BinOp::FloorDiv || op == BinOp::CeilDiv || op == BinOp::Mod || op == BinOp::Div) ok = false;
      }
      Visitor::visit(e);
    }
  } safe;
  safe.visit(x);
  return safe.ok;
}

// Both arms are evaluated (tw_select is a function) when that cannot fault (eager_safe). Then
// g++ if-converts and vectorises loops around it; otherwise a plain (lazy) ?: is emitted.
std::string CodeGen::expr_select(const SelectNode& n) const {
  if (!eager_safe(n.t) || !eager_safe(n.f)) return exprs_.lazy_select(n);
  std::string c = expr(n.cond), t = expr(n.t), f = expr(n.f);
  return "tw_select<" + compute_type(n.dtype) + ">(" + c + ", " + t + ", " + f + ")";
}

std::string CodeGen::expr_load(const LoadNode& n) {
  if (static_cast<int>(n.indices.size()) != n.buffer->ndim())
    throw Error("load from '" + n.buffer->name + "' uses " + std::to_string(n.indices.size()) +
                    " indices, the buffer has " + std::to_string(n.buffer->ndim()) + " dimension(s)",
                n.span);
  std::string b = buf_name(n.buffer);
  const bool checked = bounds_check_ || unproved_.count(&n);
  if (live_views_.count(n.buffer.get()) && !bounds_check_) {  // read in place (view_rows)
    const View& v = views_.at(n.buffer.get());
    auto shape = shape_of(n.buffer);
    Idx r = idx(n.indices[0]), c = idx(n.indices[1]);
    if (checked) r = checked_index(r, shape[0], n.buffer, 0, n.span), c = checked_index(c, shape[1], n.buffer, 1, n.span);
    Idx at = add(mul(r, code(v.ld, true)), c);
    return widen(v.dt, v.ptr + "[" + expr(at) + "]");  // a widening view: convert<float>, as its copy
  }
  index_depth_ += bounds_check_;
  std::string at = expr(linear_index(n.buffer, n.indices, n.span, checked));
  index_depth_ -= bounds_check_;
  if (bounds_check_ && flags_of(n.buffer)) {
    const std::string how = &n == leaving_load_ ? leaving_how_
                            : index_depth_      ? "read as an index"
                            : control_depth_    ? "read by a condition or a loop bound"
                            : parallel_depth_ == 0 ? "read outside a T.Parallel map (a let or an element statement)"
                                                   : "";
    if (!how.empty()) at = written_at(n.buffer, at, n.span, how);
  }
  return widen(n.buffer->dtype, b + "[" + at + "]");
}

// ---------------------------------------------------------------------------------------------
// Checked mode's written flags (see Flags in the class)

std::string CodeGen::written_at(const Buffer& b, const std::string& at, const Span& span, const std::string& how) const {
  const Flags& f = *flags_of(b);
  return "tw_cpu::written_at(" + f.w + ", " + at + ", " + std::to_string(span.line) + ", " + std::to_string(span.col) +
         ", \"" + b->name + "\", " + f.shape + ", " + std::to_string(f.rank) + ", \"" + how + "\")";
}

void CodeGen::emit_written(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::Store: {
      const auto& n = *as<StoreNode>(s);
      if (const Flags* f = flags_of(n.buffer))
        line(f->w + "[" + expr(linear_index(n.buffer, n.indices, n.span, true)) + "] = 1;");
      return;
    }
    case StmtKind::Fill: return emit_mark(as<FillNode>(s)->dst);
    case StmtKind::Gemm: return emit_mark(as<GemmNode>(s)->c);
    case StmtKind::Reduce:
      if (const Flags* f = flags_of(as<ReduceNode>(s)->dst)) line("__builtin_memset(" + f->w + ", 1, sizeof " + f->w + ");");
      return;
    case StmtKind::Copy: return emit_copy_written(*as<CopyNode>(s));
    default: return;
  }
}

void CodeGen::emit_mark(const Region& r) {
  const Flags* f = flags_of(r.buffer);
  if (!f) return;
  RegionView d = view(r);
  bool never = false;
  std::vector<std::string> conds = unit_dims_inside(d, never);
  if (never) return;
  line("// checked mode: " + r.buffer->name + "'s elements written");
  open("");
  Idx db = hoist(hoist_starts(d, "tw_d"), "tw_db");
  int opened = open_if_all(conds) ? 1 : 0;
  const int nl = static_cast<int>(d.dims.size());
  for (int k = 0; k < nl; ++k, ++opened) {
    std::string i = "tw_i" + std::to_string(k);
    open("for (int64_t " + i + " = " + expr(range_lo(d, d.dims[k])) + "; " + i + " < " + expr(range_hi(d, d.dims[k])) +
         "; ++" + i + ")");
  }
  line(f->w + "[" + expr(offset(d, db, nl)) + "] = 1;");
  for (int j = 0; j < opened; ++j) close();
  close();
}

// The destination's elements inside its tile are written (a value copied, or 0 where the source
// lies outside its buffer); then over the elements inside both buffers: a tile destination takes
// the source tile's flags, a global one tests them.
void CodeGen::emit_copy_written(const CopyNode& n) {
  const Flags* sf = flags_of(n.src.buffer);
  const Flags* df = flags_of(n.dst.buffer);
  if (df) emit_mark(n.dst);
  if (!sf) return;
  RegionView s = view(n.src), d = view(n.dst);
  bool dst_never = false, src_never = false;
  std::vector<std::string> conds = unit_dims_inside(d, dst_never);
  for (auto& c : unit_dims_inside(s, src_never)) conds.push_back(c);
  if (dst_never || src_never) return;
  line("// checked mode: " + std::string(df ? "the written flags of " + n.src.buffer->name + " copied"
                                            : "the elements of " + n.src.buffer->name + " copied out were written"));
  open("");
  Idx sb = hoist(hoist_starts(s, "tw_s"), "tw_sb"), db = hoist(hoist_starts(d, "tw_d"), "tw_db");
  int opened = open_if_all(conds) ? 1 : 0;
  const int nl = static_cast<int>(s.dims.size());
  for (int k = 0; k < nl; ++k, ++opened) {
    std::string i = "tw_i" + std::to_string(k);
    Idx lo = imax(range_lo(d, d.dims[k]), range_lo(s, s.dims[k]));
    Idx hi = imin(range_hi(d, d.dims[k]), range_hi(s, s.dims[k]));
    open("for (int64_t " + i + " = " + expr(lo) + "; " + i + " < " + expr(hi) + "; ++" + i + ")");
  }
  const std::string at = expr(offset(s, sb, nl));
  if (df)
    line(df->w + "[" + expr(offset(d, db, nl)) + "] = " + sf->w + "[" + at + "];");
  else
    line("(void)" + written_at(n.src.buffer, at, n.span,
                               std::string(n.atomic ? "added (T.atomic_add) into" : "copied out to") + " tensor '" +
                                   n.dst.buffer->name + "'") +
         ";");
  for (int j = 0; j < opened; ++j) close();
  close();
}

}  // namespace

std::string codegen_cpu(const ir::Kernel& k, bool bounds_check) {
  if (!k) throw Error("codegen_cpu: no kernel");
  return CodeGen(k, bounds_check).run();
}

}  // namespace tw::cpu
