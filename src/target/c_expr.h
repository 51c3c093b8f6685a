// The scalar-C expression printer both backends share: a Tile IR scalar expression printed as
// one C/C++ expression (the CPU code generator's C++, the AscendC printer's kernel and host files).
//
// The shared rules live here: one case per ExprKind, constant integer arithmetic folded to a
// literal, bool literals, every binary and unary operator's spelling, Python floor semantics of
// `//`, `%` and ceildiv through the helper functions tw_floordiv / tw_floormod / tw_ceildiv (the
// plain C operator when both operands are provably non-negative), tw_min / tw_max, the bitwise
// operators and shifts without undefined behaviour (`<<` on uint64_t, `>>` on the operand cast to
// its type, the count masked to the width or folded: ir.h's semantics). A target is
// a subclass that spells what differs (its hooks below): variables, literals' fine print, loads,
// math calls, casts, select, which divisions print with C's / and % (c_division), and which
// optional helper functions its generated code has (CDialect). It decides nothing about the
// program: the same expression always prints the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "tilewright/ir.h"

namespace tw::target {

// What the generated code of a target offers beyond the helpers every target has (tw_floordiv,
// tw_floormod, tw_ceildiv, tw_min, tw_max, each on int64_t).
struct CDialect {
  // Negative integer literals in parentheses ("(-5)") or bare ("-5").
  bool paren_negative_ints = false;
  // tw_udiv(a, b) / tw_umod(a, b): division of non-negative values that yields 0 for b == 0.
  // With them, the fast (non-negative) forms of //, % and ceildiv guard a divisor that is not a
  // positive constant; without them they are the plain C operators.
  bool has_udiv = false;
  // tw_fmod(a, b): float modulo with Python semantics. Without it a float `%` is an error.
  bool has_fmod = false;
  // tw_fmin(a, b) / tw_fmax(a, b): a float min / max of scalars on float operands, NaN when either
  // is NaN (docs/language.md T.max / T.min). Without them a float min / max prints tw_min / tw_max
  // (the target's own, which must keep that rule).
  bool has_fminmax = false;
  // Named in errors: "... is not supported by the <printer>".
  const char* printer = "C printer";
};

class CExprPrinter {
 public:
  explicit CExprPrinter(CDialect d) : d_(d) {}
  virtual ~CExprPrinter() = default;
  CExprPrinter(const CExprPrinter&) = delete;
  CExprPrinter& operator=(const CExprPrinter&) = delete;

  // The C expression of e. Throws ir::Error (at e's span) for what the target cannot spell.
  std::string print(const ir::Expr& e) const;
  // Is e provably >= 0? Constants, and what ir::is_nonneg derives from the variables the target
  // knows to be non-negative (nonneg_var).
  bool nonneg(const ir::Expr& e) const;
  // The lazy select `(c ? t : f)`: only the chosen arm is evaluated.
  std::string lazy_select(const ir::SelectNode& n) const;
  // A bound on |e| as the generated code computes it when e is data (a let of it holds a value
  // that + - * may carry past int64: data_var), or nullopt when e is index arithmetic.
  std::optional<long double> data_bound(const ir::Expr& e) const;

 protected:
  // --- hooks: what a target spells its own way (each gets the node; print() its operands)
  virtual std::string var(const ir::VarNode& n) const = 0;
  // The variables the target knows to be >= 0 (nonneg, c_division's default). Default: none.
  virtual bool nonneg_var(const ir::VarNode*) const { return false; }
  // A variable holding data (a scalar parameter, a let of a tensor element): a bound on its
  // magnitude. nullopt (the default, every variable): an index variable (block, loop, shape index)
  // under the generated code's convention: an int64 one below 2^31, and arithmetic of index
  // variables and int32 literals never leaves int64 (it keeps C's signed form).
  virtual std::optional<long double> data_var(const ir::VarNode&) const { return std::nullopt; }
  virtual std::string float_literal(double v, ir::DType t) const = 0;
  virtual std::string load(const ir::LoadNode& n) const = 0;
  virtual std::string call(const ir::CallNode& n) const = 0;
  virtual std::string cast(const ir::CastNode& n) const = 0;
  // Default: lazy_select.
  virtual std::string select(const ir::SelectNode& n) const { return lazy_select(n); }
  // May `a and b` / `a or b` evaluate both operands (`&` / `|`, no branch: loops around it can be
  // vectorised)? Default: no, `&&` / `||` (the right operand may guard an out-of-range read).
  virtual bool eager_logic(const ir::BinaryNode&) const { return false; }
  // Does integer `//`, `%` or ceildiv n print with C's truncating / and % (its fast forms)? Only
  // where both operands are >= 0, where truncation and the language's floor agree. Default: both
  // operands provably non-negative (nonneg). The AscendC printer reads the decision from the
  // program (Program::c_divisions, made by widen_scalars), so the simulator sees it too.
  virtual bool c_division(const ir::BinaryNode& n) const { return nonneg(n.a) && nonneg(n.b); }

 private:
  std::string binary(const ir::BinaryNode& n) const;
  std::string unary(const ir::UnaryNode& n) const;
  // What binary() decides with, of each node once per top-level print (one bottom-up pass, linear
  // in the expression's size): its constant value (ir::as_const_int), a bound on |e| as the
  // generated code computes it (unwrapped, in int64), and whether it is index arithmetic (index
  // variables and int32 literals combined by operators).
  struct Facts {
    std::optional<int64_t> cst;
    long double mag;
    bool index;
  };
  const Facts& facts(const ir::Expr& e) const;
  Facts compute_facts(const ir::Expr& e) const;
  // Scopes the memo of facts to one top-level print (its nodes are held, so no address is reused).
  struct MemoScope {
    explicit MemoScope(const CExprPrinter& p) : p(p) { ++p.depth_; }
    ~MemoScope() {
      if (--p.depth_ == 0) p.memo_.clear();
    }
    MemoScope(const MemoScope&) = delete;
    MemoScope& operator=(const MemoScope&) = delete;
    const CExprPrinter& p;
  };

  CDialect d_;
  mutable std::unordered_map<const ir::ExprNode*, std::pair<ir::Expr, Facts>> memo_;
  mutable int depth_ = 0;
};

// An integer literal of dialect d: suffix LL outside the int32 range.
std::string c_int_literal(int64_t v, const CDialect& d);
// The digits of a finite float literal: "%.9g" with suffix f (float) or "%.17g" (double), with
// ".0" added when the digits alone would read as an integer. Not negative-wrapped.
std::string c_float_digits(double v, bool dbl);
// NaN of a C float or double: __builtin_nanf("") / __builtin_nan("").
std::string c_nan(bool dbl);

}  // namespace tw::target
