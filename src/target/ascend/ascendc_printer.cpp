// AscendC printer. Targets the AscendC API of CANN 8.3.RC1 (dav-2201: 910B1..B4), written from
// the documented API names and parameter tables only.
//
// Choices (also in the generated README):
// - Kernel signature: one GM_ADDR per tensor parameter (program order), then `workspace` (the
//   program's GM workspace, nullptr when it has none), then `tiling` when the kernel has shape
//   variables or scalar parameters: a small struct in GM (`<name>_tiling_t`, printed identically in
//   the kernel and the host file) read field by field at kernel entry. No system workspace: the
//   printed kernels use basic APIs only (no Matmul/high-level API needs it).
// - Kernel type: Program::kernel_type as KERNEL_TYPE_<type> (MIX_1_2 as MIX_AIC_1_2);
//   resolve_cross_waits made a one-core-type kernel with cross-core flags MIX_AIC_1_0 / MIX_AIV_1_0.
// - Buffers: one TPipe per core type; per memory one TBuf (L1 -> TPosition::A1, L0A -> A2,
//   L0B -> B2, L0C -> CO1, UB -> VECCALC) of the pool size plan_memory recorded
//   (Program::pool_bytes; none when 0); every BufferDecl is a
//   LocalTensor at its planned byte offset inside that TBuf (Get<uint8_t>()[offset] then
//   ReinterpretCast<T>()) (select_vector_calls' scratch area is one of them). On the AIC, pipe.Destroy() follows the
//   InitBuffer calls (Program::tpipe_destroy): it takes the M_MTE1 events 0-2 that TPipe's
//   constructor sets, so the kernel's own flags may use every id.
// - Data moves: select_move_calls chose the calls (program.h "Call-level data moves"); each is
//   printed 1:1 with its fields (count guards, fill, barrier and LoadData loop are program
//   statements). A byte-level move reaching the printer is an internal error.
// - Counts: a call whose count may be <= 0 is guarded by a Program If statement (select_vector_calls,
//   select_move_calls): a count <= 0 means no call; the unsigned API fields would wrap.
// - Scalar arithmetic: ir::Expr printed as C++ on int32_t/int64_t with Python floor semantics for
//   // and % (tw_floordiv/tw_floormod helpers unless both sides are provably non-negative).
// - Vector calls (VecCallL2, VecCallL0, WholeReduce, Brcb): one call each, its arguments the
//   instruction's fields (select_vector_calls made every choice: level-2 or level-0, chunking, scratch
//   area, barriers, count guards). The high-level vector kinds are an internal error here.
// - CrossCoreWaitFlag: 8.3.RC1 declares template <modeId, pipe> with no defaults; on dav-2201 the
//   wait blocks the core's instruction issue whatever the template arguments (asc-devkit issue
//   #1613). The mode printed is the one resolve_cross_waits chose (that of the CrossCoreSetFlag
//   with the same id, default 2); a wait on pipe S is printed with PIPE_MTE2.
#include "target/ascend/ascendc_printer.h"

#include "ir/functor.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ir/printer.h"
#include "target/c_expr.h"
#include "target/ascend/pass_util.h"
#include "target/registry.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::DType;
using ir::DTypeCode;
using ir::Error;
using ir::Expr;
using ir::ExprKind;
using ir::Span;
using ir::arith::light::mul;  // folds 0 and 1 so printed offsets stay readable

// ---------------------------------------------------------------------------------------------
// Types and names

std::string ctype(DType t, const Span& s = {}) {
  switch (t.code) {
    case DTypeCode::f16: return "half";
    case DTypeCode::bf16: return "bfloat16_t";
    case DTypeCode::f32: return "float";
    case DTypeCode::i8: return "int8_t";
    case DTypeCode::i32: return "int32_t";
    case DTypeCode::i64: return "int64_t";
    case DTypeCode::u8: return "uint8_t";
    case DTypeCode::boolean: return "bool";
    case DTypeCode::f64: break;
  }
  throw Error("float64 has no AscendC type on the 910B", s, "use float32");
}

// Host-side storage type of a scalar in the tiling struct (no half/bfloat16 on the host).
std::string host_scalar_type(DType t) {
  if (t.code == DTypeCode::f16 || t.code == DTypeCode::bf16 || t.code == DTypeCode::f32) return "float";
  if (t.code == DTypeCode::f64) return "double";
  return ctype(t);
}

std::string short_dtype(DType t) {
  switch (t.code) {
    case DTypeCode::f16: return "f16";
    case DTypeCode::bf16: return "bf16";
    case DTypeCode::f32: return "f32";
    case DTypeCode::f64: return "f64";
    case DTypeCode::i8: return "i8";
    case DTypeCode::i32: return "i32";
    case DTypeCode::i64: return "i64";
    case DTypeCode::u8: return "u8";
    case DTypeCode::boolean: return "bool";
  }
  return "x";
}

std::string ident(const std::string& n) {
  static const std::unordered_set<std::string> reserved = {
      "auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete", "do",
      "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "new",
      "operator", "private", "public", "register", "return", "short", "signed", "sizeof", "static",
      "struct", "switch", "template", "this", "throw", "try", "typedef", "union", "unsigned", "using",
      "virtual", "void", "volatile", "while", "half", "pipe", "tiling", "workspace", "main"};
  std::string s;
  for (char c : n) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  if (reserved.count(s) || s.rfind("tw_", 0) == 0 || s.rfind("__", 0) == 0) s += "_";
  return s;
}

// "(a < b)" -> "a < b" when the outer parentheses enclose the whole string.
std::string strip_parens(const std::string& s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0 && i + 1 < s.size()) return s;
  }
  return s.substr(1, s.size() - 2);
}

std::string pipe_c(Pipe p) { return "PIPE_" + std::string(pipe_name(p)); }

// AscendC's KERNEL_TYPE_* spelling of the program's kernel type.
const char* kernel_type_c(KernelType t) {
  switch (t) {
    case KernelType::AIC_ONLY: return "KERNEL_TYPE_AIC_ONLY";
    case KernelType::AIV_ONLY: return "KERNEL_TYPE_AIV_ONLY";
    case KernelType::MIX_1_2: return "KERNEL_TYPE_MIX_AIC_1_2";
    case KernelType::MIX_AIC_1_0: return "KERNEL_TYPE_MIX_AIC_1_0";
    case KernelType::MIX_AIV_1_0: return "KERNEL_TYPE_MIX_AIV_1_0";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Expression helpers

// e / d when it is exact by construction (constant factors), else nullopt.
std::optional<Expr> div_exact(const Expr& e, int64_t d) {
  if (d == 1) return e;
  if (auto c = ir::as_const_int(e)) {
    if (*c % d == 0) return ir::int_imm(*c / d, e->dtype);
    return std::nullopt;
  }
  if (e->kind != ExprKind::Binary) return std::nullopt;
  auto* b = as<ir::BinaryNode>(e);
  switch (b->op) {
    case BinOp::Add:
    case BinOp::Sub: {
      auto x = div_exact(b->a, d), y = div_exact(b->b, d);
      if (!x || !y) return std::nullopt;
      return ir::binary(b->op, *x, *y);
    }
    case BinOp::Mul: {
      if (auto x = div_exact(b->b, d)) {
        if (auto c = ir::as_const_int(*x); c && *c == 1) return b->a;
        return mul(b->a, *x);
      }
      if (auto x = div_exact(b->a, d)) {
        if (auto c = ir::as_const_int(*x); c && *c == 1) return b->b;
        return mul(*x, b->b);
      }
      return std::nullopt;
    }
    case BinOp::Div:
    case BinOp::FloorDiv:
    case BinOp::CeilDiv:
    case BinOp::Mod:
    case BinOp::Min:
    case BinOp::Max:
    case BinOp::EQ:
    case BinOp::NE:
    case BinOp::LT:
    case BinOp::LE:
    case BinOp::GT:
    case BinOp::GE:
    case BinOp::And:
    case BinOp::Or:
    case BinOp::BitAnd:
    case BinOp::BitOr:
    case BinOp::BitXor:
    case BinOp::Shl:
    case BinOp::Shr: return std::nullopt;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Expression printing

// The shared scalar-C printer (target/c_expr.h) in the AscendC dialect: no zero-guarded unsigned
// division and no float modulo (the helpers() below are all the printed code has), no loads or
// math calls in scalar expressions, casts as static_cast to the AscendC type; `//`, `%` and ceildiv
// with C's / and % exactly where widen_scalars decided (Program::c_divisions), else tw_floordiv /
// tw_floormod / tw_ceildiv.
class ExprPrinter final : public target::CExprPrinter {
 public:
  explicit ExprPrinter(const Program& p)
      : CExprPrinter({.paren_negative_ints = false, .has_udiv = false, .has_fmod = false, .has_fminmax = true,
                      .printer = "AscendC printer"}),
        p_(p) {}
  void bind(const ir::Var& v) { names_[v.get()] = ident(v->name); }
  // v holds data (a scalar parameter, a GetValue, a let of data) of magnitude at most `bound` (data_var)
  void bind_data(const ir::Var& v, long double bound) {
    bind(v);
    data_[v.get()] = bound;
  }
  // The shape variables (indices) and the scalar parameters (integers: data of their dtype's range).
  void bind_params(const Program& p) {
    for (const auto& v : p.shape_vars) bind(v);
    for (const auto& k : p.params)
      if (!k.is_tensor && k.var && !bound(k.var)) bind_data(k.var, dtype_range(k.var->dtype));
  }
  static long double dtype_range(DType t) {
    return t.is_int() ? std::ldexp(1.0L, t.code == DTypeCode::u8 ? 8 : t.bits() - 1) : std::ldexp(1.0L, 63);
  }
  bool bound(const ir::Var& v) const { return names_.count(v.get()) > 0; }
  const std::string& name(const ir::Var& v) const { return names_.at(v.get()); }

 private:
  std::optional<long double> data_var(const ir::VarNode& v) const override {
    auto it = data_.find(&v);
    return it == data_.end() ? std::nullopt : std::optional<long double>(it->second);
  }
  std::string var(const ir::VarNode& v) const override {
    auto it = names_.find(&v);
    if (it == names_.end())
      throw Error("variable '" + v.name + "' is not bound in the Ascend program (not a block index, loop, Let, "
                  "scalar parameter or shape variable)",
                  v.span);
    return it->second;
  }
  bool c_division(const ir::BinaryNode& n) const override { return p_.c_division(&n); }
  std::string float_literal(double v, DType t) const override {
    bool dbl = t.code == DTypeCode::f64;
    if (std::isnan(v)) return target::c_nan(dbl);
    if (std::isinf(v)) return std::string(v < 0 ? "(-" : "(") + (dbl ? "__builtin_huge_val())" : "__builtin_huge_valf())");
    return target::c_float_digits(v, dbl);
  }
  std::string load(const ir::LoadNode& n) const override {
    throw Error("a tensor load in a scalar expression is not supported by the AscendC printer", n.span);
  }
  std::string call(const ir::CallNode& n) const override {
    throw Error("internal: the AscendC printer got math function '" + std::string(ir::mathfn_name(n.fn)) +
                    "' in a scalar expression (lower_scalar_math computes those, verify_program reports the rest)",
                n.span);
  }
  // A float into an integer type saturates, NaN giving 0 (docs/language.md "Dtype conversions"; the
  // simulator's scalar unit computes the same): tw_f2i, as a bare static_cast would be undefined there.
  std::string cast(const ir::CastNode& c) const override {
    std::string v = print(c.value);
    if (c.value->dtype.is_float() && c.dtype.is_int()) {
      auto [lo, hi] = int_range(c.dtype);
      v = "tw_f2i(static_cast<float>(" + v + "), " + lo + ", " + hi + ")";
    }
    // an integer into bfloat16 rounds once (session 32): tw_i2bf, the float the simulator's num::int_to_bf16_f32 gives
    if (!c.value->dtype.is_float() && c.dtype.code == DTypeCode::bf16) v = "tw_i2bf(static_cast<int64_t>(" + v + "))";
    return "static_cast<" + ctype(c.dtype, c.span) + ">(" + v + ")";
  }
  static std::pair<std::string, std::string> int_range(DType t) {
    switch (t.code) {
      case DTypeCode::i8: return {"-128", "127"};
      case DTypeCode::u8: return {"0", "255"};
      case DTypeCode::i32: return {"(-2147483647 - 1)", "2147483647"};
      default: return {"(-9223372036854775807LL - 1)", "9223372036854775807LL"};
    }
  }

  const Program& p_;
  std::unordered_map<const ir::ExprNode*, std::string> names_;
  std::unordered_map<const ir::ExprNode*, long double> data_;  // bind_data
};

// Index helpers with Python floor semantics, printed into both files.
std::string helpers(const std::string& qual) {
  std::string q = qual + " ";
  // never trapping, as the simulator and the cpu target: a // 0 == 0, a % 0 == a, INT64_MIN // -1 wraps
  return q + "int64_t tw_floordiv(int64_t a, int64_t b)\n{\n"
             "  if (b == 0) return 0;\n  if (b == -1) return (int64_t)(0ull - (uint64_t)a);\n  int64_t q = a / b;\n"
             "  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}\n" +
         q + "int64_t tw_floormod(int64_t a, int64_t b)\n{\n"
             "  if (b == 0) return a;\n  if (b == -1) return 0;\n  int64_t r = a % b;\n"
             "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}\n" +
         // a float truncated into [lo, hi], NaN 0 (the scalar T.cast of a float to an integer type)
         q + "int64_t tw_f2i(float x, int64_t lo, int64_t hi)\n{\n"
             "  return x != x ? 0 : x <= (float)lo ? lo : x >= (float)hi ? hi : (int64_t)x;\n}\n" +
         // an integer as a float whose bfloat16 rounding is the integer's (num::int_to_bf16_f32): its top 24
         // bits, the lowest one set when a bit below them is (round to odd), so float -> bfloat16 rounds once
         q + "float tw_i2bf(int64_t x)\n{\n"
             "  uint64_t a = x < 0 ? 0ull - (uint64_t)x : (uint64_t)x, m = a;\n  float p = 1.0f;\n"
             "  while (m >= (1ull << 24)) { m = (m >> 1) | (m & 1ull); p *= 2.0f; }\n"
             "  return x < 0 ? -((float)m * p) : (float)m * p;\n}\n" +
         q + "int64_t tw_ceildiv(int64_t a, int64_t b) { return -tw_floordiv(-a, b); }\n" +
         q + "int64_t tw_min(int64_t a, int64_t b) { return b < a ? b : a; }\n" +
         q + "int64_t tw_max(int64_t a, int64_t b) { return a < b ? b : a; }\n" +
         // float scalars (T.max / T.min of two scalars): NaN when either operand is (numpy's rule);
         // the simulator's scalar unit evaluates exactly these (simulator/machine.cpp)
         q + "float tw_fmin(float a, float b) { return a != a ? a : b != b ? b : b < a ? b : a; }\n" +
         q + "float tw_fmax(float a, float b) { return a != a ? a : b != b ? b : a < b ? b : a; }\n";
}

// ---------------------------------------------------------------------------------------------
// Output lines

struct Lines {
  std::vector<std::string> out;
  int indent = 0;
  std::string tag;  // " // line N" for API calls of the current instruction
  void line(const std::string& s) { out.push_back(s.empty() ? s : std::string(indent * 2, ' ') + s); }
  void call(const std::string& s) { line(s + tag); }
  void open(const std::string& s) {
    line(s.empty() ? "{" : s + " {");
    ++indent;
  }
  void close(const std::string& s = "}") {
    --indent;
    line(s);
  }
};

// ---------------------------------------------------------------------------------------------
// Program analysis

void for_each_instr(const StmtPtr& s, const std::function<void(const Instr&)>& f) {
  if (!s) return;
  if (s->kind == StmtKind::Instr) f(s->instr);
  for (const auto& b : s->body) for_each_instr(b, f);
  for_each_instr(s->else_body, f);
}

// ---------------------------------------------------------------------------------------------
// The kernel printer

class KernelPrinter {
 public:
  explicit KernelPrinter(const Program& p) : p_(p), ep_(p) {}

  std::string run();

  // Used by the host printer too.
  std::string tiling_struct() const;
  bool has_tiling() const;
  std::string tiling_name() const { return ident(p_.name) + "_tiling_t"; }

 private:
  // operands
  std::string gm_view(int param, DType t) const;
  std::string gm(const GmRef& r, DType t) const;
  std::string loc(const LocalRef& r, DType t, const std::string& extra = "") const;
  std::string loc_int16(const LocalRef& r) const;
  std::string tensor_view(const LocalRef& r, DType t) const;  // the buffer as a LocalTensor<t>, no offset
  std::string elem(const Expr& off_bytes, int64_t eb) const;
  std::string ex(const Expr& e) const { return ep_.print(e); }
  // DataCopyExtParams{blockCount, blockLen, srcStride, dstStride, rsv} of either DataCopyPad direction.
  template <class C>
  std::string ext_params(const C& c) const {
    return "DataCopyExtParams{static_cast<uint16_t>(" + ex(c.blockCount) + "), static_cast<uint32_t>(" + ex(c.blockLen) +
           "), static_cast<uint32_t>(" + ex(c.srcStride) + "), static_cast<uint32_t>(" + ex(c.dstStride) + "), 0}";
  }
  // v converted to t as a T.cast is (ExprPrinter::cast: tw_f2i, tw_i2bf), as the simulator's ScalarStore converts
  std::string scalar(const Expr& v, DType t) const {
    if (v->dtype != t) return ex(std::make_shared<ir::CastNode>(v, t, span_));
    return "static_cast<" + ctype(t, span_) + ">(" + ex(v) + ")";
  }
  const BufferDecl& buffer(const LocalRef& r) const;

  // statements
  void stmt(const StmtPtr& s, bool top);
  void seq_body(const StmtPtr& s);
  void instr(const Instr& in);
  void core(CoreType c, const StmtPtr& body);
  void buffers(CoreType c);

  // A call taking a parameter struct: `{ Type tw_p; tw_p.field = value; ... call(..., tw_p); }`,
  // one line per field in the order given.
  void params_call(const std::string& type, std::initializer_list<std::pair<const char*, std::string>> fields,
                   const std::string& call) {
    L_.open("");
    L_.line(type + " tw_p;");
    for (const auto& [name, value] : fields) L_.line("tw_p." + std::string(name) + " = " + value + ";");
    L_.call(call);
    L_.close();
  }
  std::string vec_args(VecApi api, DType t, DType st, const LocalRef& dst, const LocalRef& src0, const LocalRef& src1,
                       const Expr& scalar, RoundMode round, CmpMode cmp, const LocalRef& sel) const;

 public:
  // one emitter per Instr kind
  void emit(const CopyGmToL1& c);
  void emit(const CopyGmToUb& c);
  void emit(const CopyUbToGm& c);
  void emit(const CopyUbToUb& c);
  void emit(const LoadL0& c);
  void emit(const Mmad& c);
  void emit(const Fixpipe& c);
  [[noreturn]] void byte_level(const InstrOp& op) const;
  void emit(const InitConstValue& c);
  void emit(const DataCopyNd2Nz& c);
  void emit(const DataCopyPadGmToUb& c);
  void emit(const DataCopyPadUbToGm& c);
  void emit(const DataCopyUbToUb& c);
  void emit(const LoadData2D& c);
  void emit(const LoadData3DV2& c);
  void emit(const FixpipeV220& c);
  void emit(const FixpipeL1& c);
  void emit(const VecCallL2& c);
  void emit(const VecCallL0& c);
  void emit(const WholeReduce& c);
  void emit(const Brcb& c);
  void emit(const Gather& c);
  void emit(const ScalarLoad& c);
  void emit(const ScalarStore& c);
  void emit(const SetAtomic& c);
  template <class T>
  void emit(const T& x) {
    throw Error("internal: the AscendC printer met the high-level vector instruction " + std::string(instr_name(InstrOp(x))) +
                    ": run select_vector_calls first",
                span_);
  }
  void emit(const SetFlag& c);
  void emit(const WaitFlag& c);
  void emit(const PipeBarrier& c);
  void emit(const CrossCoreSetFlag& c);
  void emit(const CrossCoreWaitFlag& c);

 private:
  const Program& p_;
  ExprPrinter ep_;
  Lines L_;
  Span span_;                                  // of the instruction being printed
  std::set<std::pair<int, DTypeCode>> views_;  // (param or -1, dtype) GM views
};

const BufferDecl& KernelPrinter::buffer(const LocalRef& r) const {
  if (r.buffer < 0 || r.buffer >= static_cast<int>(p_.buffers.size()))
    throw Error("internal: instruction refers to buffer #" + std::to_string(r.buffer) + ", the program has " +
                    std::to_string(p_.buffers.size()),
                span_);
  return p_.buffers[r.buffer];
}

std::string KernelPrinter::elem(const Expr& off, int64_t eb) const {
  if (!off) return "0";
  if (auto d = div_exact(off, eb)) return ex(*d);
  return "(" + ex(off) + ") / " + std::to_string(eb);
}

std::string KernelPrinter::gm_view(int param, DType t) const {
  if (param < 0) return "workspace_gm_" + short_dtype(t);
  const auto& k = p_.params.at(param);
  return ident(k.name) + (k.dtype == t ? "_gm" : "_gm_" + short_dtype(t));
}

std::string KernelPrinter::gm(const GmRef& r, DType t) const {
  if (r.param >= static_cast<int>(p_.params.size()) || (r.param >= 0 && !p_.params[r.param].is_tensor))
    throw Error("internal: GM operand refers to parameter #" + std::to_string(r.param) + ", which is not a tensor", span_);
  std::string i = elem(r.offset, t.bytes());
  std::string v = gm_view(r.param, t);
  return i == "0" ? v : v + "[" + i + "]";
}

std::string KernelPrinter::loc(const LocalRef& r, DType t, const std::string& extra) const {
  const BufferDecl& b = buffer(r);
  std::string base = ident(b.name);
  if (b.dtype != t) base += ".ReinterpretCast<" + ctype(t, span_) + ">()";
  std::string i = elem(r.offset, t.bytes());
  if (!extra.empty()) i = i == "0" ? extra : i + " + " + extra;
  return i == "0" ? base : base + "[" + i + "]";
}

// The int16_t view of a UB operand (And / Or lanes: program.h vec_api_lane_bytes).
std::string KernelPrinter::loc_int16(const LocalRef& r) const {
  std::string base = ident(buffer(r).name) + ".ReinterpretCast<int16_t>()";
  std::string i = elem(r.offset, 2);
  return i == "0" ? base : base + "[" + i + "]";
}

bool KernelPrinter::has_tiling() const {
  if (!p_.shape_vars.empty()) return true;
  for (const auto& k : p_.params)
    if (!k.is_tensor) return true;
  return false;
}

std::string KernelPrinter::tiling_struct() const {
  std::ostringstream os;
  os << "// Shape variables and scalar parameters, passed in GM (the `tiling` argument).\n";
  os << "struct " << tiling_name() << " {\n";
  for (const auto& v : p_.shape_vars) os << "  int64_t " << ident(v->name) << ";\n";
  for (const auto& k : p_.params)
    if (!k.is_tensor) os << "  " << host_scalar_type(k.dtype) << " " << ident(k.name) << ";\n";
  os << "};\n";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Statements

void KernelPrinter::seq_body(const StmtPtr& s) {
  if (s && s->kind == StmtKind::Seq)
    for (const auto& b : s->body) stmt(b, false);
  else
    stmt(s, false);
}

void KernelPrinter::stmt(const StmtPtr& s, bool top) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::Seq: {
      bool has_let = std::any_of(s->body.begin(), s->body.end(), [](const StmtPtr& b) {
        return b && (b->kind == StmtKind::Let ||
                     (b->kind == StmtKind::Instr && std::holds_alternative<ScalarLoad>(b->instr.op)));
      });
      if (has_let && !top) L_.open("");
      for (const auto& b : s->body) stmt(b, false);
      if (has_let && !top) L_.close();
      break;
    }
    case StmtKind::For: {
      ep_.bind(s->var);
      std::string v = ep_.name(s->var), t = ctype(s->var->dtype, s->span);
      L_.open("for (" + t + " " + v + " = 0; " + v + " < " + ex(s->value) + "; ++" + v + ")");
      seq_body(s->body.at(0));
      L_.close();
      break;
    }
    case StmtKind::If: {
      L_.open("if (" + strip_parens(ex(s->value)) + ")");
      seq_body(s->body.at(0));
      if (s->else_body) {
        L_.close("} else {");
        ++L_.indent;
        seq_body(s->else_body);
      }
      L_.close();
      break;
    }
    case StmtKind::Let: {
      std::string v = ex(s->value);
      if (auto b = ep_.data_bound(s->value)) ep_.bind_data(s->var, *b);
      else ep_.bind(s->var);
      L_.line("const " + ctype(s->var->dtype, s->span) + " " + ep_.name(s->var) + " = " + v + ";");
      break;
    }
    case StmtKind::Instr: instr(s->instr); break;
  }
}

void KernelPrinter::instr(const Instr& in) {
  span_ = in.span;
  L_.tag = in.span.known() ? "  // line " + std::to_string(in.span.line) : "";
  std::visit([this](const auto& op) { emit(op); }, in.op);
  L_.tag.clear();
}

// ---------------------------------------------------------------------------------------------
// Emitters: moves

// select_move_calls replaced every byte-level move with the calls below.
void KernelPrinter::byte_level(const InstrOp& op) const {
  throw Error("internal: the AscendC printer got the byte-level move " + std::string(instr_name(op)) +
                  "; run select_move_calls first (it replaces it with the AscendC calls it prints as)",
              span_);
}
void KernelPrinter::emit(const CopyGmToL1& c) { byte_level(c); }
void KernelPrinter::emit(const CopyGmToUb& c) { byte_level(c); }
void KernelPrinter::emit(const CopyUbToGm& c) { byte_level(c); }
void KernelPrinter::emit(const CopyUbToUb& c) { byte_level(c); }
void KernelPrinter::emit(const LoadL0& c) { byte_level(c); }
void KernelPrinter::emit(const Fixpipe& c) { byte_level(c); }

// Call-level moves: one AscendC call each, its fields printed as they are.
void KernelPrinter::emit(const InitConstValue& c) {
  std::string F = ctype(c.dtype, span_);
  L_.call("InitConstValue(" + loc(c.dst, c.dtype) + ", InitConstValueParams<" + F + ">{" + ex(c.repeatTimes) +
          ", static_cast<uint16_t>(" + ex(c.blockNum) + "), " + ex(c.dstGap) + ", static_cast<" + F + ">(" +
          ex(c.initValue) + ")});");
}

void KernelPrinter::emit(const DataCopyNd2Nz& c) {
  params_call("Nd2NzParams", {
                  {"ndNum", ex(c.ndNum)},
                  {"nValue", ex(c.nValue)},
                  {"dValue", ex(c.dValue)},
                  {"srcNdMatrixStride", ex(c.srcNdMatrixStride)},
                  {"srcDValue", ex(c.srcDValue)},
                  {"dstNzC0Stride", ex(c.dstNzC0Stride)},
                  {"dstNzNStride", ex(c.dstNzNStride)},
                  {"dstNzMatrixStride", ex(c.dstNzMatrixStride)}},
              "DataCopy(" + loc(c.dst, c.dtype) + ", " + gm(c.src, c.dtype) + ", tw_p);");
}

void KernelPrinter::emit(const DataCopyPadGmToUb& c) {
  std::string T = ctype(c.dtype, span_);
  std::string right = c.isPad ? "static_cast<uint8_t>(" + ex(c.rightPadding) + ")" : ex(c.rightPadding);
  L_.call("DataCopyPad(" + loc(c.dst, c.dtype) + ", " + gm(c.src, c.dtype) + ", " + ext_params(c) + ", DataCopyPadExtParams<" + T + ">{" +
          (c.isPad ? "true" : "false") + ", " + ex(c.leftPadding) + ", " + right + ", static_cast<" + T + ">(" +
          ex(c.paddingValue) + ")});");
}

void KernelPrinter::emit(const DataCopyPadUbToGm& c) {
  L_.call("DataCopyPad(" + gm(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", " + ext_params(c) + ");");
}

void KernelPrinter::emit(const DataCopyUbToUb& c) {
  L_.call("DataCopy(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", DataCopyParams{static_cast<uint16_t>(" +
          ex(c.blockCount) + "), static_cast<uint16_t>(" + ex(c.blockLen) + "), static_cast<uint16_t>(" + ex(c.srcStride) +
          "), static_cast<uint16_t>(" + ex(c.dstStride) + ")});");
}

void KernelPrinter::emit(const LoadData2D& c) {
  params_call("LoadData2DParams", {
                  {"startIndex", ex(c.startIndex)},
                  {"repeatTimes", ex(c.repeatTimes)},
                  {"srcStride", ex(c.srcStride)},
                  {"sid", ex(c.sid)},
                  {"dstGap", ex(c.dstGap)},
                  {"ifTranspose", (c.ifTranspose ? "true" : "false")}},
              "LoadData(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", tw_p);");
}

void KernelPrinter::emit(const LoadData3DV2& c) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  params_call("LoadData3DParamsV2<" + ctype(c.dtype, span_) + ">", {
                  {"l1H", ex(c.l1H)},
                  {"l1W", ex(c.l1W)},
                  {"channelSize", ex(c.channelSize)},
                  {"kExtension", ex(c.kExtension)},
                  {"mExtension", ex(c.mExtension)},
                  {"kStartPt", ex(c.kStartPt)},
                  {"mStartPt", ex(c.mStartPt)},
                  {"strideW", std::to_string(c.strideW)},
                  {"strideH", std::to_string(c.strideH)},
                  {"filterW", std::to_string(c.filterW)},
                  {"filterH", std::to_string(c.filterH)},
                  {"dilationFilterW", std::to_string(c.dilationFilterW)},
                  {"dilationFilterH", std::to_string(c.dilationFilterH)},
                  {"enTranspose", b(c.enTranspose)},
                  {"enSmallK", b(c.enSmallK)},
                  {"filterSizeW", b(c.filterSizeW)},
                  {"filterSizeH", b(c.filterSizeH)},
                  {"fMatrixCtrl", b(c.fMatrixCtrl)}},
              "LoadData(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", tw_p);");
}

void KernelPrinter::emit(const Mmad& c) {
  params_call("MmadParams", {
                  {"m", ex(c.m)},
                  {"n", ex(c.n)},
                  {"k", ex(c.k)},
                  {"cmatrixInitVal", ex(c.init)},
                  {"cmatrixSource", "false"},
                  {"isBias", "false"}},
              "Mmad(" + loc(c.c, c.acc_dtype) + ", " + loc(c.a, c.in_dtype) + ", " + loc(c.b, c.in_dtype) + ", tw_p);");
}

void KernelPrinter::emit(const FixpipeV220& c) {
  params_call("FixpipeParamsV220", {
                  {"nSize", ex(c.nSize)},
                  {"mSize", ex(c.mSize)},
                  {"srcStride", ex(c.srcStride)},
                  {"dstStride", ex(c.dstStride)},
                  {"quantPre", "QuantMode_t::" + std::string(quant_mode_name(c.quantPre))},
                  {"reluEn", (c.reluEn ? "true" : "false")},
                  {"ndNum", ex(c.ndNum)}},
              "Fixpipe<" + ctype(c.dst_dtype, span_) + ", " + ctype(c.src_dtype, span_) + ", CFG_ROW_MAJOR>(" +
                  gm(c.dst, c.dst_dtype) + ", " + loc(c.src, c.src_dtype) + ", tw_p);");
}

void KernelPrinter::emit(const FixpipeL1& c) {
  params_call("FixpipeParamsV220", {
                  {"nSize", ex(c.nSize)},
                  {"mSize", ex(c.mSize)},
                  {"srcStride", ex(c.srcStride)},
                  {"dstStride", ex(c.dstStride)},
                  {"quantPre", "QuantMode_t::" + std::string(quant_mode_name(c.quantPre))}},
              "Fixpipe<" + ctype(c.dst_dtype, span_) + ", " + ctype(c.src_dtype, span_) + ", CFG_NZ>(" +
                  loc(c.dst, c.dst_dtype) + ", " + loc(c.src, c.src_dtype) + ", tw_p);");
}

// ---------------------------------------------------------------------------------------------
// Emitters: vector

// The AscendC function of an API (SelectScalar is Select with SELMODE::VSEL_TENSOR_SCALAR_MODE).
static std::string call_name(VecApi api) { return api == VecApi::SelectScalar ? "Select" : std::string(vec_api_name(api)); }

// The arguments before the count / mask of an elementwise call (program.h, VecApi).
std::string KernelPrinter::vec_args(VecApi api, DType t, DType st, const LocalRef& dst, const LocalRef& src0,
                                    const LocalRef& src1, const Expr& s, RoundMode round, CmpMode cmp,
                                    const LocalRef& sel) const {
  const DType u8{ir::DTypeCode::u8};
  std::string mode = ", CMPMODE::" + std::string(cmp_mode_name(cmp));
  if (api == VecApi::Compare) return loc(dst, u8) + ", " + loc(src0, st) + ", " + loc(src1, st) + mode;
  if (api == VecApi::CompareScalar) return loc(dst, u8) + ", " + loc(src0, st) + ", " + scalar(s, vec_scalar_dtype(api, t, st)) + mode;
  if (api == VecApi::Select)
    return loc(dst, t) + ", " + loc(sel, u8) + ", " + loc(src0, t) + ", " + loc(src1, t) + ", SELMODE::VSEL_TENSOR_TENSOR_MODE";
  if (api == VecApi::SelectScalar)
    return loc(dst, t) + ", " + loc(sel, u8) + ", " + loc(src0, t) + ", " + scalar(s, vec_scalar_dtype(api, t, st)) + ", SELMODE::VSEL_TENSOR_SCALAR_MODE";
  if (api == VecApi::And || api == VecApi::Or) return loc_int16(dst) + ", " + loc_int16(src0) + ", " + loc_int16(src1);
  std::string a = loc(dst, t);
  if (api == VecApi::Duplicate || api == VecApi::CreateVecIndex) return a + ", " + scalar(s, vec_scalar_dtype(api, t, st));
  a += ", " + loc(src0, st);
  if (api == VecApi::Cast) return a + ", RoundMode::" + std::string(round_mode_name(round));
  if (vec_api_sources(api) == 2) return a + ", " + loc(src1, t);
  if (vec_api_has_scalar(api)) return a + ", " + scalar(s, vec_scalar_dtype(api, t, st));
  return a;
}

void KernelPrinter::emit(const VecCallL2& c) {
  L_.call(call_name(c.api) + "(" + vec_args(c.api, c.dtype, c.src_dtype, c.dst, c.src0, c.src1, c.scalar, c.round, c.cmp, c.sel) +
          ", " + ex(c.count) + ");");
}

void KernelPrinter::emit(const VecCallL0& c) {
  std::string params;
  switch (vec_api_sources(c.api)) {
    case 2:
      params = "BinaryRepeatParams(" + ex(c.dst_blk) + ", " + ex(c.src0_blk) + ", " + ex(c.src1_blk) + ", " + ex(c.dst_rep) +
               ", " + ex(c.src0_rep) + ", " + ex(c.src1_rep) + ")";
      break;
    case 1: params = "UnaryRepeatParams(" + ex(c.dst_blk) + ", " + ex(c.src0_blk) + ", " + ex(c.dst_rep) + ", " + ex(c.src0_rep) + ")"; break;
    default: params = ex(c.dst_blk) + ", " + ex(c.dst_rep); break;
  }
  L_.call(call_name(c.api) + "(" + vec_args(c.api, c.dtype, c.src_dtype, c.dst, c.src0, c.src1, c.scalar, c.round, c.cmp, LocalRef{}) +
          ", " + ex(c.mask) + ", " + ex(c.repeat) + ", " + params + ");");
}

void KernelPrinter::emit(const WholeReduce& c) {
  L_.call("WholeReduce" + std::string(reduce_op_name(c.op)) + "(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", " +
          ex(c.mask) + ", " + ex(c.repeat) + ", " + ex(c.dst_rep) + ", " + ex(c.src_blk) + ", " + ex(c.src_rep) +
          (c.op == ReduceOp::Sum ? "" : ", ReduceOrder::ORDER_ONLY_VALUE") + ");");
}

// GlobalTensor::GetValue (pipe S): the element index into the view of the load's dtype.
// LocalTensor::GetValue (pipe S) for a UB source: the element index into the buffer's view.
void KernelPrinter::emit(const ScalarLoad& c) {
  bool ub = c.ub.buffer >= 0;
  std::string idx = elem(ub ? c.ub.offset : c.src.offset, c.dtype.bytes());
  std::string src = ub ? tensor_view(c.ub, c.dtype) : gm_view(c.src.param, c.dtype);
  ep_.bind_data(c.var, ExprPrinter::dtype_range(c.var->dtype));
  L_.call("const " + ctype(c.var->dtype, span_) + " " + ep_.name(c.var) + " = " + src + ".GetValue(" + idx + ");");
}

// LocalTensor::SetValue (pipe S): the element index into the buffer's view, the value cast to it.
void KernelPrinter::emit(const ScalarStore& c) {
  L_.call(tensor_view(c.dst, c.dtype) + ".SetValue(" + elem(c.dst.offset, c.dtype.bytes()) + ", " + scalar(c.value, c.dtype) +
          ");");
}

std::string KernelPrinter::tensor_view(const LocalRef& r, DType t) const {
  const BufferDecl& b = buffer(r);
  return b.dtype == t ? ident(b.name) : ident(b.name) + ".ReinterpretCast<" + ctype(t, span_) + ">()";
}

// SetAtomicAdd<T>() / SetAtomicNone() (kernel_operator_set_atomic_intf.h; program.h SetAtomic).
void KernelPrinter::emit(const SetAtomic& c) {
  L_.call(c.add ? "SetAtomicAdd<" + ctype(*c.add, span_) + ">();" : std::string("SetAtomicNone();"));
}

void KernelPrinter::emit(const Brcb& c) {
  L_.call("Brcb(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", static_cast<uint8_t>(" + ex(c.repeat) +
          "), BrcbRepeatParams(" + ex(c.dst_blk) + ", " + ex(c.dst_rep) + "));");
}

// Gather(dst, src, srcOffset, srcBaseAddr, count): the offsets are the uint32 view of their tile
// (Gather.md: LocalTensor<uint32_t> srcOffset).
void KernelPrinter::emit(const Gather& c) {
  std::string off = ident(buffer(c.offset).name) + ".ReinterpretCast<uint32_t>()";
  if (std::string i = elem(c.offset.offset, 4); i != "0") off += "[" + i + "]";
  L_.call("Gather(" + loc(c.dst, c.dtype) + ", " + loc(c.src, c.dtype) + ", " + off +
          ", static_cast<uint32_t>(" + ex(c.base) + "), static_cast<uint32_t>(" + ex(c.count) + "));");
}

// ---------------------------------------------------------------------------------------------
// Emitters: synchronisation

void KernelPrinter::emit(const SetFlag& c) {
  L_.call("SetFlag<HardEvent::" + std::string(pipe_name(c.src)) + "_" + std::string(pipe_name(c.dst)) + ">(" + ex(c.event) + ");");
}
void KernelPrinter::emit(const WaitFlag& c) {
  L_.call("WaitFlag<HardEvent::" + std::string(pipe_name(c.src)) + "_" + std::string(pipe_name(c.dst)) + ">(" + ex(c.event) + ");");
}
void KernelPrinter::emit(const PipeBarrier& c) { L_.call("PipeBarrier<" + pipe_c(c.pipe) + ">();"); }
void KernelPrinter::emit(const CrossCoreSetFlag& c) {
  if (c.pipe == Pipe::S || c.pipe == Pipe::ALL)
    throw Error("CrossCoreSetFlag on pipe " + std::string(pipe_name(c.pipe)) + ": AscendC does not accept PIPE_S/PIPE_ALL", span_);
  L_.call("CrossCoreSetFlag<" + std::to_string(c.mode) + ", " + pipe_c(c.pipe) + ">(" + ex(c.id) + ");");
}
void KernelPrinter::emit(const CrossCoreWaitFlag& c) {
  if (!c.mode)
    throw Error("internal: the AscendC printer got a CrossCoreWaitFlag without a mode: run resolve_cross_waits first",
                span_);
  // AscendC has no PIPE_S / PIPE_ALL wait; on dav-2201 every wait blocks the core's issue (see the top).
  Pipe p = c.pipe == Pipe::S || c.pipe == Pipe::ALL ? Pipe::MTE2 : c.pipe;
  L_.call("CrossCoreWaitFlag<" + std::to_string(*c.mode) + ", " + pipe_c(p) + ">(" + ex(c.id) + ");");
}

// ---------------------------------------------------------------------------------------------
// Cores and the whole kernel

void KernelPrinter::buffers(CoreType c) {
  struct MemInfo {
    Mem mem;
    const char* pos;
    const char* var;
  };
  static const MemInfo mems[] = {{Mem::L1, "A1", "tw_l1"},
                                 {Mem::L0A, "A2", "tw_l0a"},
                                 {Mem::L0B, "B2", "tw_l0b"},
                                 {Mem::L0C, "CO1", "tw_l0c"},
                                 {Mem::UB, "VECCALC", "tw_ub"}};
  L_.line("TPipe pipe;");
  for (const auto& m : mems) {
    int64_t pool = p_.pool(c, m.mem);
    if (pool == 0) {
      for (const auto& b : p_.buffers)
        if (b.core == c && b.mem == m.mem && b.bytes > 0)
          throw Error("internal: the AscendC printer got buffer '" + b.name + "' without a pool: run plan_memory first", b.span);
      continue;
    }
    L_.line(std::string("TBuf<TPosition::") + m.pos + "> " + m.var + "_buf;");
    L_.line(std::string("pipe.InitBuffer(") + m.var + "_buf, " + std::to_string(pool) + ");");
    L_.line(std::string("LocalTensor<uint8_t> ") + m.var + " = " + m.var + "_buf.Get<uint8_t>();");
    for (const auto& b : p_.buffers) {
      if (b.core != c || b.mem != m.mem) continue;
      std::string shape;
      for (size_t i = 0; i < b.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(b.shape[i]);
      L_.line("LocalTensor<" + ctype(b.dtype, b.span) + "> " + ident(b.name) + " = " + m.var + "[" +
              std::to_string(b.offset) + "].ReinterpretCast<" + ctype(b.dtype, b.span) + ">();  // " +
              std::string(mem_name(b.mem)) + " @" + std::to_string(b.offset) + " +" + std::to_string(b.bytes) + " " +
              std::string(b.dtype.name()) + " " + std::string(format_name(b.format)) + " [" + shape + "]" +
              (b.span.known() ? ", line " + std::to_string(b.span.line) : ""));
    }
  }
  if (c == CoreType::AIC && p_.tpipe_destroy)
    L_.line("pipe.Destroy();  // consumes the M_MTE1 events 0-2 TPipe's constructor sets on the AIC");
}

void KernelPrinter::core(CoreType c, const StmtPtr& body) {
  bool aic = c == CoreType::AIC;
  L_.open(aic ? "if ASCEND_IS_AIC" : "if ASCEND_IS_AIV");
  std::string bi = p_.block_idx ? ep_.name(p_.block_idx) : "block_idx";
  if (aic || !runs_aic(p_.kernel_type)) {
    L_.line("const int32_t " + bi + " = GetBlockIdx();");
  } else {
    L_.line("const int32_t " + bi + " = GetBlockIdx() / 2;");
  }
  if (!aic && p_.sub_block_idx) {
    std::string sb = ep_.name(p_.sub_block_idx);
    L_.line(!runs_aic(p_.kernel_type) ? "const int32_t " + sb + " = 0;" : "const int32_t " + sb + " = GetSubBlockIdx();");
  }
  buffers(c);
  L_.line("");
  stmt(body, true);
  L_.close();
}

std::string KernelPrinter::run() {
  if (p_.name.empty()) throw Error("the Ascend program has no name", p_.span);
  bool want_aic = runs_aic(p_.kernel_type), want_aiv = runs_aiv(p_.kernel_type);
  if (want_aic && !p_.aic)
    throw Error("kernel '" + p_.name + "' is " + std::string(kernel_type_name(p_.kernel_type)) + " but has no AIC code", p_.span);
  if (want_aiv && !p_.aiv)
    throw Error("kernel '" + p_.name + "' is " + std::string(kernel_type_name(p_.kernel_type)) + " but has no AIV code", p_.span);

  // Bind the variables every part of the kernel sees.
  if (p_.block_idx) ep_.bind(p_.block_idx);
  if (p_.sub_block_idx) ep_.bind(p_.sub_block_idx);
  ep_.bind_params(p_);

  // GM views (param, dtype): one GlobalTensor declaration per pair the calls use.
  for (size_t i = 0; i < p_.params.size(); ++i)
    if (p_.params[i].is_tensor) views_.insert({static_cast<int>(i), p_.params[i].dtype.code});
  auto scan = [&](const Instr& in) {
    std::visit(Overload{[&](const DataCopyNd2Nz& c) { views_.insert({c.src.param, c.dtype.code}); },
                        [&](const DataCopyPadGmToUb& c) { views_.insert({c.src.param, c.dtype.code}); },
                        [&](const DataCopyPadUbToGm& c) { views_.insert({c.dst.param, c.dtype.code}); },
                        [&](const FixpipeV220& c) { views_.insert({c.dst.param, c.dst_dtype.code}); },
                        [&](const ScalarLoad& c) {
                          if (c.ub.buffer < 0) views_.insert({c.src.param, c.dtype.code});
                        },
                        [](const auto&) {}},
               in.op);
  };
  for_each_instr(want_aic ? p_.aic : nullptr, scan);
  for_each_instr(want_aiv ? p_.aiv : nullptr, scan);

  std::ostringstream os;
  os << "// " << p_.name << ": AscendC kernel generated by Tilewright from the Ascend program.\n"
     << "// API: AscendC of " << kAscendCCannVersion << ", NPU arch 2201 (Ascend910B1..B4).\n"
     << "// Kernel type " << kernel_type_name(p_.kernel_type) << "; `// line N` = the kernel source line of each call.\n"
     << "// Do not edit: regenerate from the Tilewright kernel.\n";
  for (const auto& n : p_.notes)
    os << "// Note" << (n.span.known() ? " (line " + std::to_string(n.span.line) + ")" : std::string()) << ": " << n.message
       << "\n";
  os << "#include \"kernel_operator.h\"\n\n";
  // Float scalars are not contracted (no fused multiply-add): each operation rounded, as the simulator
  // computes them (bisheng is clang-based; the CMake file also passes -ffp-contract=off, which clang
  // needs under -ffp-contract=fast, where it ignores the pragma).
  os << "#if defined(__clang__)\n#pragma clang fp contract(off)\n#endif\n\nusing namespace AscendC;\n\n";
  os << "namespace {\n" << helpers("__aicore__ inline") << "}  // namespace\n\n";
  if (has_tiling()) os << tiling_struct() << "\n";

  std::string sig;
  for (const auto& k : p_.params)
    if (k.is_tensor) sig += "GM_ADDR " + ident(k.name) + ", ";
  sig += "GM_ADDR workspace";
  if (has_tiling()) sig += ", GM_ADDR tiling";
  os << "extern \"C\" __global__ __aicore__ void " << ident(p_.name) << "(" << sig << ")\n{\n";
  L_.indent = 1;
  L_.line(std::string("KERNEL_TASK_TYPE_DEFAULT(") + kernel_type_c(p_.kernel_type) + ");");
  if (has_tiling()) {
    L_.line("__gm__ const " + tiling_name() + "* tw_tiling = reinterpret_cast<__gm__ const " + tiling_name() + "*>(tiling);");
    for (const auto& v : p_.shape_vars)
      L_.line("const " + ctype(v->dtype) + " " + ep_.name(v) + " = static_cast<" + ctype(v->dtype) + ">(tw_tiling->" +
              ident(v->name) + ");");
    for (const auto& k : p_.params)
      if (!k.is_tensor && k.var)
        L_.line("const " + ctype(k.dtype) + " " + ep_.name(k.var) + " = static_cast<" + ctype(k.dtype) + ">(tw_tiling->" +
                ident(k.name) + ");");
  }
  for (const auto& [param, code] : views_) {
    DType t(code);
    std::string T = ctype(t), v = gm_view(param, t);
    std::string arg = param < 0 ? "workspace" : ident(p_.params[param].name);
    L_.line("GlobalTensor<" + T + "> " + v + ";");
    L_.line(v + ".SetGlobalBuffer(reinterpret_cast<__gm__ " + T + "*>(" + arg + "));");
  }
  if (want_aic) core(CoreType::AIC, p_.aic);
  if (want_aiv) core(CoreType::AIV, p_.aiv);
  for (const auto& l : L_.out) os << l << "\n";
  os << "}\n";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Host launcher, CMake, README

std::string print_host(const Program& p, const KernelPrinter& kp) {
  ExprPrinter ep(p);
  ep.bind_params(p);
  std::string name = ident(p.name);
  std::ostringstream os;
  os << "// Host launcher for the AscendC kernel " << p.name << ", generated by Tilewright (" << kAscendCCannVersion << ").\n"
     << "// Usage: " << name << "_host [dir=DIR] [device=N]";
  for (const auto& v : p.shape_vars) os << " " << v->name << "=INT";
  for (const auto& k : p.params)
    if (!k.is_tensor) os << " " << k.name << "=VALUE";
  os << "\n// Reads every input tensor from DIR/<param>.bin (raw, row-major), writes every output to\n"
     << "// DIR/<param>.bin. The kernel is launched with ACLRT_LAUNCH_KERNEL from the header\n"
     << "// aclrtlaunch_" << name << ".h that ascendc_library() generates.\n"
     << "#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n#include <fstream>\n"
     << "#include <string>\n#include <vector>\n\n#include \"acl/acl.h\"\n#include \"aclrtlaunch_" << name << ".h\"\n\n"
     << "#define TW_CHECK(call)                                                                  \\\n"
     << "  do {                                                                                \\\n"
     << "    aclError tw_err = (call);                                                         \\\n"
     << "    if (tw_err != ACL_SUCCESS) {                                                      \\\n"
     << "      std::fprintf(stderr, \"%s failed with %d at line %d\\n\", #call, static_cast<int>(tw_err), __LINE__); \\\n"
     << "      std::exit(1);                                                                   \\\n"
     << "    }                                                                                 \\\n"
     << "  } while (0)\n\n";
  os << helpers("static inline") << "\n";
  if (kp.has_tiling()) os << kp.tiling_struct() << "\n";
  os << "static const char* tw_arg(int argc, char** argv, const char* key, const char* fallback)\n{\n"
     << "  size_t n = std::strlen(key);\n"
     << "  for (int i = 1; i < argc; ++i)\n"
     << "    if (std::strncmp(argv[i], key, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;\n"
     << "  if (!fallback) {\n    std::fprintf(stderr, \"missing argument %s=...\\n\", key);\n    std::exit(2);\n  }\n"
     << "  return fallback;\n}\n\n"
     << "static void tw_read(const std::string& path, std::vector<uint8_t>& buf)\n{\n"
     << "  std::ifstream f(path, std::ios::binary);\n"
     << "  if (!f.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()))) {\n"
     << "    std::fprintf(stderr, \"cannot read %zu bytes from %s\\n\", buf.size(), path.c_str());\n    std::exit(3);\n  }\n}\n\n"
     << "static void tw_write(const std::string& path, const std::vector<uint8_t>& buf)\n{\n"
     << "  std::ofstream f(path, std::ios::binary);\n"
     << "  if (!f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()))) {\n"
     << "    std::fprintf(stderr, \"cannot write %s\\n\", path.c_str());\n    std::exit(3);\n  }\n}\n\n";
  os << "int main(int argc, char** argv)\n{\n"
     << "  const std::string dir = tw_arg(argc, argv, \"dir\", \".\");\n"
     << "  const int32_t device = std::atoi(tw_arg(argc, argv, \"device\", \"0\"));\n";
  for (const auto& v : p.shape_vars)
    os << "  const int64_t " << ep.name(v) << " = std::atoll(tw_arg(argc, argv, \"" << v->name << "\", nullptr));\n";
  for (const auto& k : p.params)
    if (!k.is_tensor && k.var) {
      bool fl = k.dtype.is_float();
      os << "  const " << host_scalar_type(k.dtype) << " " << ep.name(k.var) << " = static_cast<" << host_scalar_type(k.dtype)
         << ">(" << (fl ? "std::atof" : "std::atoll") << "(tw_arg(argc, argv, \"" << k.name << "\", nullptr)));\n";
    }
  os << "  const uint32_t block_dim = static_cast<uint32_t>(" << (p.block_dim ? ep.print(p.block_dim) : "1") << ");\n"
     << "  const size_t workspace_bytes = static_cast<size_t>(" << (p.workspace_bytes ? ep.print(p.workspace_bytes) : "0")
     << ");\n\n"
     << "  TW_CHECK(aclInit(nullptr));\n  TW_CHECK(aclrtSetDevice(device));\n"
     << "  aclrtStream stream = nullptr;\n  TW_CHECK(aclrtCreateStream(&stream));\n\n";
  std::string args;
  for (const auto& k : p.params) {
    if (!k.is_tensor) continue;
    std::string n = ident(k.name);
    std::string bytes = "static_cast<size_t>(" + std::to_string(k.dtype.bytes()) + ")";
    for (const auto& d : k.shape) bytes += " * static_cast<size_t>(" + ep.print(d) + ")";
    os << "  // " << k.name << ": " << k.dtype.name() << (k.is_output ? ", output" : ", input") << "\n"
       << "  std::vector<uint8_t> " << n << "_host(" << bytes << ");\n"
       << "  void* " << n << "_dev = nullptr;\n"
       << "  TW_CHECK(aclrtMalloc(&" << n << "_dev, " << n << "_host.size() + 32, ACL_MEM_MALLOC_HUGE_FIRST));\n";
    if (k.is_output)
      os << "  TW_CHECK(aclrtMemset(" << n << "_dev, " << n << "_host.size() + 32, 0, " << n << "_host.size() + 32));\n";
    else
      os << "  tw_read(dir + \"/" << k.name << ".bin\", " << n << "_host);\n"
         << "  TW_CHECK(aclrtMemcpy(" << n << "_dev, " << n << "_host.size(), " << n << "_host.data(), " << n
         << "_host.size(), ACL_MEMCPY_HOST_TO_DEVICE));\n";
    args += n + "_dev, ";
  }
  os << "  void* workspace_dev = nullptr;\n"
     << "  if (workspace_bytes > 0) TW_CHECK(aclrtMalloc(&workspace_dev, workspace_bytes, ACL_MEM_MALLOC_HUGE_FIRST));\n";
  args += "workspace_dev";
  if (kp.has_tiling()) {
    os << "  " << kp.tiling_name() << " tiling_host{};\n";
    for (const auto& v : p.shape_vars) os << "  tiling_host." << ident(v->name) << " = " << ep.name(v) << ";\n";
    for (const auto& k : p.params)
      if (!k.is_tensor && k.var) os << "  tiling_host." << ident(k.name) << " = " << ep.name(k.var) << ";\n";
    os << "  void* tiling_dev = nullptr;\n"
       << "  TW_CHECK(aclrtMalloc(&tiling_dev, sizeof(tiling_host), ACL_MEM_MALLOC_HUGE_FIRST));\n"
       << "  TW_CHECK(aclrtMemcpy(tiling_dev, sizeof(tiling_host), &tiling_host, sizeof(tiling_host), "
          "ACL_MEMCPY_HOST_TO_DEVICE));\n";
    args += ", tiling_dev";
  }
  os << "\n  ACLRT_LAUNCH_KERNEL(" << name << ")(block_dim, stream, " << args << ");\n"
     << "  TW_CHECK(aclrtSynchronizeStream(stream));\n\n";
  for (const auto& k : p.params) {
    if (!k.is_tensor || !k.is_output) continue;
    std::string n = ident(k.name);
    os << "  TW_CHECK(aclrtMemcpy(" << n << "_host.data(), " << n << "_host.size(), " << n << "_dev, " << n
       << "_host.size(), ACL_MEMCPY_DEVICE_TO_HOST));\n"
       << "  tw_write(dir + \"/" << k.name << ".bin\", " << n << "_host);\n";
  }
  for (const auto& k : p.params)
    if (k.is_tensor) os << "  TW_CHECK(aclrtFree(" << ident(k.name) << "_dev));\n";
  os << "  if (workspace_dev) TW_CHECK(aclrtFree(workspace_dev));\n";
  if (kp.has_tiling()) os << "  TW_CHECK(aclrtFree(tiling_dev));\n";
  os << "  TW_CHECK(aclrtDestroyStream(stream));\n  TW_CHECK(aclrtResetDevice(device));\n  TW_CHECK(aclFinalize());\n"
     << "  return 0;\n}\n";
  return os.str();
}

std::string print_cmake(const Program& p) {
  std::string n = ident(p.name);
  std::ostringstream os;
  os << "# CMake project for the AscendC kernel " << p.name << ", generated by Tilewright for " << kAscendCCannVersion << ".\n"
     << "# Build: cmake -B build -DSOC_VERSION=Ascend910B2 && cmake --build build\n"
     << "cmake_minimum_required(VERSION 3.16)\n"
     << "project(" << n << " LANGUAGES CXX)\n\n"
     << "set(SOC_VERSION \"Ascend910B2\" CACHE STRING \"Ascend910B1 | Ascend910B2 | Ascend910B3 | Ascend910B4\")\n"
     << "if(DEFINED ENV{ASCEND_HOME_PATH})\n"
     << "  set(TW_CANN_DEFAULT \"$ENV{ASCEND_HOME_PATH}\")\n"
     << "else()\n"
     << "  set(TW_CANN_DEFAULT \"/usr/local/Ascend/ascend-toolkit/latest\")\n"
     << "endif()\n"
     << "set(ASCEND_CANN_PACKAGE_PATH \"${TW_CANN_DEFAULT}\" CACHE PATH \"CANN installation (" << kAscendCCannVersion << ")\")\n"
     << "if(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)\n"
     << "  set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)\n"
     << "elseif(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)\n"
     << "  set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)\n"
     << "else()\n"
     << "  message(FATAL_ERROR \"ascendc_kernel_cmake not found under ${ASCEND_CANN_PACKAGE_PATH}: install CANN and set "
        "ASCEND_CANN_PACKAGE_PATH\")\n"
     << "endif()\n"
     << "include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)\n\n"
     << "# The kernel (bisheng, NPU arch dav-2201); also generates aclrtlaunch_" << n << ".h.\n"
     << "ascendc_library(" << n << "_kernel STATIC " << n << "_kernel.cpp)\n"
     << "# Float scalar operations each rounded, not fused (as Tilewright's simulator computes them).\n"
     << "ascendc_compile_options(" << n << "_kernel PRIVATE -ffp-contract=off)\n\n"
     << "add_executable(" << n << "_host main.cpp)\n"
     << "target_compile_options(" << n << "_host PRIVATE -O2 -std=c++17)\n"
     << "target_include_directories(" << n << "_host PRIVATE ${ASCEND_CANN_PACKAGE_PATH}/include)\n"
     << "target_link_directories(" << n << "_host PRIVATE ${ASCEND_CANN_PACKAGE_PATH}/lib64)\n"
     << "target_link_libraries(" << n << "_host PRIVATE " << n << "_kernel ascendcl)\n";
  return os.str();
}

std::string print_readme(const Program& p, const KernelPrinter& kp) {
  std::string n = ident(p.name);
  std::ostringstream os;
  os << "# " << p.name << " (AscendC, generated by Tilewright)\n\n"
     << "Kernel type `" << kernel_type_name(p.kernel_type) << "`, AscendC API of **" << kAscendCCannVersion
     << "**, NPU arch 2201 (Ascend 910B1–B4).\n\n"
     << "Files: `" << n << "_kernel.cpp` (the kernel), `main.cpp` (ACL host launcher), `CMakeLists.txt`.\n\n"
     << "## Build\n\n"
     << "```\nsource /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
     << "cmake -B build -DSOC_VERSION=Ascend910B2 -DASCEND_CANN_PACKAGE_PATH=$ASCEND_HOME_PATH\n"
     << "cmake --build build -j\n```\n\n"
     << "`ascendc_library()` compiles the kernel with bisheng for the chosen SoC and generates\n"
     << "`aclrtlaunch_" << n << ".h`, which `main.cpp` uses to launch it with\n"
     << "`ACLRT_LAUNCH_KERNEL(" << n << ")(blockDim, stream, args...)`.\n"
     << "To compile the kernel alone: `bisheng --npu-arch=dav-2201 -O3 -std=c++17 -ffp-contract=off -xasc -c " << n
     << "_kernel.cpp -I$ASCEND_HOME_PATH/include ...`\n"
     << "(older toolkits: `--cce-aicore-arch=dav-c220`).\n\n"
     << "## Run\n\n"
     << "```\n./build/" << n << "_host dir=data";
  for (const auto& v : p.shape_vars) os << " " << v->name << "=...";
  for (const auto& k : p.params)
    if (!k.is_tensor) os << " " << k.name << "=...";
  os << "\n```\n\nInputs are read from `data/<name>.bin` (raw little-endian, row-major):\n\n";
  for (const auto& k : p.params) {
    if (!k.is_tensor) continue;
    os << "- `" << k.name << "` " << k.dtype.name() << " [";
    for (size_t i = 0; i < k.shape.size(); ++i) os << (i ? ", " : "") << ir::print(k.shape[i]);
    os << "]" << (k.is_output ? " — output, written to `data/" + k.name + ".bin`" : " — input")
       << (k.zeroed ? "; the kernel only adds into it (T.atomic_add): zero it before every launch (main.cpp does)" : "")
       << "\n";
  }
  os << "\n## Interface\n\n"
     << "`" << n << "(";
  for (const auto& k : p.params)
    if (k.is_tensor) os << "GM_ADDR " << ident(k.name) << ", ";
  os << "GM_ADDR workspace" << (kp.has_tiling() ? ", GM_ADDR tiling" : "") << ")`\n\n"
     << "- `workspace`: the kernel's own GM workspace (" << (p.workspace_bytes ? ir::print(p.workspace_bytes) : "0")
     << " bytes; no system workspace: only basic AscendC APIs are used).\n";
  if (kp.has_tiling())
    os << "- `tiling`: a `" << kp.tiling_name() << "` in GM with the shape variables and scalar parameters.\n";
  os << "- Launched on `block_dim = " << (p.block_dim ? ir::print(p.block_dim) : "1") << "` blocks"
     << (p.kernel_type == KernelType::MIX_1_2 ? " (each: 1 AIC + 2 AIV)" : "") << ".\n\n"
     << "Every buffer is a statically placed `LocalTensor` inside one `TBuf` per memory; all\n"
     << "synchronisation (SetFlag/WaitFlag, PipeBarrier, CrossCoreSetFlag/WaitFlag) is explicit, as in the\n"
     << "Tilewright program the simulator ran.\n";
  return os.str();
}

}  // namespace

std::string print_ascendc_kernel(const Program& p) { return KernelPrinter(p).run(); }

AscendCProject print_ascendc(const Program& p) {
  KernelPrinter kp(p);
  AscendCProject out;
  out.kernel_file = ident(p.name) + "_kernel.cpp";
  out.kernel_cpp = kp.run();
  out.host_cpp = print_host(p, kp);
  out.cmake = print_cmake(p);
  out.readme = print_readme(p, kp);
  return out;
}

}  // namespace tw::ascend
