#include "target/ascend/widen_scalars.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "ir/functor.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::DType;
using ir::DTypeCode;
using ir::Expr;
using ir::ExprKind;
using I128 = __int128;

constexpr I128 kI64Min = std::numeric_limits<int64_t>::min(), kI64Max = std::numeric_limits<int64_t>::max();
constexpr I128 kI32Min = std::numeric_limits<int32_t>::min(), kI32Max = std::numeric_limits<int32_t>::max();

// The values an integer expression may take (a sound bound), in int64 (a bound outside it: any int64,
// the computation may wrap).
struct Range {
  I128 lo = kI64Min, hi = kI64Max;
  static Range of(I128 lo, I128 hi) {
    if (lo < kI64Min || hi > kI64Max) return {};
    return {lo, hi};
  }
  bool fits32() const { return lo >= kI32Min && hi <= kI32Max; }
};

Range hull(const Range& a, const Range& b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
// Two sound bounds of one value: both hold (an empty meet is dead code: either bound is then true).
Range meet(const Range& a, const Range& b) {
  Range r{std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
  return r.lo <= r.hi ? r : b;
}

Range dtype_range(DType t) {
  switch (t.code) {
    case DTypeCode::boolean: return {0, 1};
    case DTypeCode::i8: return {-128, 127};
    case DTypeCode::u8: return {0, 255};
    case DTypeCode::i32: return {kI32Min, kI32Max};
    default: return {};
  }
}

I128 floor_div(I128 a, I128 c) {  // c > 0
  I128 q = a / c;
  return (a % c != 0 && a < 0) ? q - 1 : q;
}
I128 abs128(I128 x) { return x < 0 ? -x : x; }
// a & b where either side is non-negative: in [0, the smaller non-negative side's hi]; else any
Range and_range(const Range& a, const Range& b) {
  if (a.lo < 0 && b.lo < 0) return {};
  return {0, a.lo >= 0 && b.lo >= 0 ? std::min(a.hi, b.hi) : a.lo >= 0 ? a.hi : b.hi};
}
bool bitwise(BinOp op) {
  return op == BinOp::BitAnd || op == BinOp::BitOr || op == BinOp::BitXor || op == BinOp::Shl || op == BinOp::Shr;
}

// One expression's rewrite: the expression, its range (integers), and whether the printed C++ holds
// it in a type narrower than 64 bits (`int` after the usual promotions).
struct Out {
  Expr e;
  Range r;
  bool narrow = false;
};

// Relational bounds of the grid-stride loop map_grid creates (session 30, h-widen2): intervals alone
// see `t * s` of `for t in range(ceildiv(x, s))` as t's bound times s's, far above the product's.
// A Stride is recorded for t when s's range is >= 0 and no variable of x or s is assigned inside the
// loop (so x and s hold the values the extent was computed from at every use in the body).
//   Rule 1 (`t * s`, `s * t`: s structurally the extent's divisor): the value is in [0, x.hi - 1].
//     Proof: s == 0 makes the extent ceildiv(x, 0) == 0 (x // 0 == 0, the language's rule, which
//     the simulator and tw_ceildiv follow): the body never runs. s >= 1: every iteration has
//     0 <= t <= ceildiv(x, s) - 1 < x / s (ceil(q) < q + 1), so 0 <= t * s < x, i.e. <= x - 1.
//   Rule 2 (`base + t * s`, `t * s + base`, with x structurally `y - base`): the value is in
//     [base.lo, y.hi - 1]. Proof: Rule 1 pointwise, with x == y - base exactly (the ranges of y and
//     base keep y - base inside int64, checked where the loop starts: no wrap), gives
//     base <= base + t * s <= base + (y - base) - 1 == y - 1. map_grid's loop is exactly this:
//     `for t in range(ceildiv(nblocks - cid, block_dim))`, `blk = cid + t * block_dim`, so blk
//     stays below nblocks (ceildiv(M, 8) <= 2^28 for an int32 M) and `blk * 8` below 2^31.
struct Stride {
  Expr s, x;        // the extent's divisor and dividend (as the loop was before this pass)
  Range xr;         // x's range
  bool sub = false;  // x is `y - base` without int64 wrap: yr is y's range
  Range yr;
};

class Widen {
 public:
  std::unordered_map<const ir::VarNode*, Range> vars;
  std::unordered_map<const ir::VarNode*, Stride> strides;  // the grid-stride loop variables in scope
  // The variables ir::is_nonneg may take as >= 0 (the C divisions' sign proof): loop, block and
  // sub-block indices, shape variables, and lets whose value it proves >= 0.
  std::unordered_set<const ir::VarNode*> nonneg;
  // Program::c_divisions: the `//`, `%` and ceildiv nodes printed with C's / and %.
  std::unordered_map<const ir::ExprNode*, Expr> divisions;
  bool host = false;  // visiting a host expression (block_dim, workspace_bytes, shapes): printed unchanged

  bool is_nonneg(const Expr& e) const {
    return ir::is_nonneg(e, [this](const ir::VarNode* v) { return nonneg.count(v) > 0; });
  }
  std::unordered_map<const ir::VarNode*, Expr> wide_lets;  // a let's variable -> its wider one (rewrite, Let)

  Expr expr(const Expr& e) { return e ? visit(e).e : e; }

  Out visit(const Expr& e) {
    const bool ints = e->dtype.is_int() || e->dtype.is_bool();
    switch (e->kind) {
      case ExprKind::IntImm: {
        I128 v = ir::as<ir::IntImmNode>(e)->value;
        return {e, {v, v}, v >= kI32Min && v <= kI32Max};
      }
      case ExprKind::FloatImm: return {e, {}, false};
      case ExprKind::Var: {
        auto* v = ir::as<ir::VarNode>(e);
        if (auto wl = wide_lets.find(v); wl != wide_lets.end()) return visit(wl->second);
        auto it = vars.find(v);
        Range r = it != vars.end() ? it->second : dtype_range(e->dtype);
        return {e, r, ints && e->dtype.code != DTypeCode::i64};
      }
      case ExprKind::Cast: {
        auto* c = ir::as<ir::CastNode>(e);
        Out v = visit(c->value);
        Expr n = v.e == c->value ? e
                 : v.e->dtype == e->dtype ? std::make_shared<ir::CastNode>(v.e, e->dtype, e->span)  // a same-dtype cast wraps
                                          : ir::cast(v.e, e->dtype, e->span);
        if (!ints) return {n, {}, false};
        Range t = dtype_range(e->dtype);
        bool inside = (c->value->dtype.is_int() || c->value->dtype.is_bool()) && v.r.lo >= t.lo && v.r.hi <= t.hi;
        return {n, inside ? v.r : t, e->dtype.code != DTypeCode::i64};
      }
      case ExprKind::Unary: return unary(e);
      case ExprKind::Binary: return binary(e);
      case ExprKind::Select: {
        auto* s = ir::as<ir::SelectNode>(e);
        Out c = visit(s->cond), t = visit(s->t), f = visit(s->f);
        Expr n = c.e == s->cond && t.e == s->t && f.e == s->f ? e : ir::select(c.e, t.e, f.e, e->span);
        if (!ints) return {n, {}, false};
        return {n, hull(t.r, f.r), t.narrow && f.narrow};
      }
      case ExprKind::Call: case ExprKind::Load:  // not printed in scalar expressions (the printer's error)
        return {e, dtype_range(e->dtype), false};
    }
    return {e, {}, false};
  }

 private:
  static Expr widened(const Expr& x) { return ir::cast(x, DTypeCode::i64, x->span); }
  // A rewritten operand of `>>` (which wraps its operand into the node's type first, and takes the
  // count modulo that type's width): back in the operand's own type. (&, |, ^, ~ and << of a
  // widened operand stay in int64 instead: binary / unary below.)
  static Expr retyped(const Expr& x, const Expr& orig) {
    return x->dtype == orig->dtype ? x : ir::cast(x, orig->dtype, x->span);
  }

  // m is `t * s` or `s * t` of a stride loop variable t and its divisor s: t's Stride (else null).
  const Stride* stride_of(const Expr& m) const {
    if (m->kind != ExprKind::Binary) return nullptr;
    auto* b = ir::as<ir::BinaryNode>(m);
    if (b->op != BinOp::Mul) return nullptr;
    for (const auto& [t, s] : {std::pair{b->a, b->b}, std::pair{b->b, b->a}}) {
      if (t->kind != ExprKind::Var) continue;
      auto it = strides.find(ir::as<ir::VarNode>(t));
      if (it != strides.end() && ir::structural_equal(s, it->second.s)) return &it->second;
    }
    return nullptr;
  }

  // d (a rewritten `//`, `%` or ceildiv of integers, its dividend's range ra) as the printed C++
  // computes it: with C's truncating / and % when its divisor is a positive constant and its dividend
  // provably >= 0 (truncation and floor agree there), recorded in divisions; else through tw_floordiv /
  // tw_floormod / tw_ceildiv. The sign proof: ir::is_nonneg over the variables in `nonneg` (the
  // printer's own rule before session 31) and the range's lo >= 0 (which sees what is_nonneg does not:
  // `a % b` of a b >= 0 is a when b is 0, a let wraps into its type). The simulator checks it as the
  // node runs: a negative dividend is a report.
  // In a host expression (host: printed as it is, not rewritten) the node marked is the original, e.
  Expr division(const Expr& d, const Range& ra, const Expr& e) {
    const Expr& m = host ? e : d;
    auto* b = ir::as<ir::BinaryNode>(m);
    const auto c = ir::as_const_int(b->b);
    if (c && *c > 0 && ra.lo >= 0 && is_nonneg(b->a)) divisions.emplace(m.get(), m);
    return d;
  }

  // Rule 2 for n = `base + t * s` / `t * s + base` (ranges ra, rb of n's operands), else any.
  Range grid_stride(const ir::BinaryNode* n, const Range& ra, const Range& rb) const {
    for (int side = 0; side < 2; ++side) {
      const Expr& base = side ? n->b : n->a;
      const Stride* f = stride_of(side ? n->a : n->b);
      if (!f || !f->sub || !ir::structural_equal(ir::as<ir::BinaryNode>(f->x)->b, base)) continue;
      return {(side ? rb : ra).lo, f->yr.hi - 1};
    }
    return {};
  }

  Out unary(const Expr& e) {
    auto* u = ir::as<ir::UnaryNode>(e);
    Out a = visit(u->a);
    // the types as ir::unary gives them (the program text reads back to the same nodes: program_parser.h)
    auto rebuild = [&](const Expr& x) {
      if (x == u->a) return e;
      return ir::unary(u->op, x, e->span);  // ~ of a widened operand stays in int64 (as on cpu; a store keeps the low bits)
    };
    if (!e->dtype.is_int() && !e->dtype.is_bool()) return {rebuild(a.e), {}, false};
    switch (u->op) {
      case ir::UnOp::Not: return {rebuild(a.e), {0, 1}, true};
      case ir::UnOp::BitNot: {
        return {rebuild(a.e), Range::of(-a.r.hi - 1, -a.r.lo - 1), a.narrow};
      }
      case ir::UnOp::Neg: {
        Range r = Range::of(-a.r.hi, -a.r.lo);
        if (a.narrow && !r.fits32()) return {rebuild(widened(a.e)), r, false};
        return {rebuild(a.e), r, a.narrow};
      }
    }
    return {rebuild(a.e), {}, false};
  }

  Out binary(const Expr& e) {
    auto* n = ir::as<ir::BinaryNode>(e);
    const bool ints = n->a->dtype.is_int() || n->a->dtype.is_bool();
    if (e->dtype.is_int())  // constant arithmetic prints as its literal (c_expr.cpp folds it)
      if (auto c = ir::as_const_int(e)) return {e, {*c, *c}, *c >= kI32Min && *c <= kI32Max};
    Out a = visit(n->a), b = visit(n->b);
    const auto divisor = ir::as_const_int(n->b);
    // the types as ir::binary gives them: an operand widened to int64 makes the other one int64 too
    // (a literal keeps its digits), except under >> (retyped)
    auto rebuild = [&](const Expr& x, const Expr& y) {
      if (x == n->a && y == n->b) return e;
      if (n->op == BinOp::Shr) return ir::binary(n->op, retyped(x, n->a), retyped(y, n->b), e->span);
      return ir::binary(n->op, x, y, e->span);
    };
    if (!ints) return {rebuild(a.e, b.e), {}, false};
    // &, |, ^ and << of a widened operand stay in int64, as the cpu target computes them (an unstored
    // `(a * c) | 0` compared or divided sees the int64 value; a store keeps the low bits, the same
    // either way); a shift count is taken modulo the node's width t first (docs/language.md), so
    // `x << n` of a widened x becomes `x << (n & (bits(t) - 1))` in int64
    if (n->op != BinOp::Shr && bitwise(n->op) && (a.e->dtype != n->a->dtype || b.e->dtype != n->b->dtype)) {
      if (n->op != BinOp::Shl) {
        Expr r = ir::binary(n->op, a.e, b.e, e->span);
        Range rr = n->op == BinOp::BitAnd ? and_range(a.r, b.r) : Range{};
        return {r, rr, r->dtype.code != DTypeCode::i64 && a.narrow && b.narrow};
      }
      const int bits = e->dtype.is_int() ? e->dtype.bits() : 64;
      Expr count = divisor ? ir::int_imm(ir::shift_count(*divisor, e->dtype), b.e->dtype, e->span)
                           : ir::binary(BinOp::BitAnd, retyped(b.e, n->b), ir::int_imm(bits - 1, n->b->dtype, e->span), e->span);
      Expr x = a.e->dtype.code == DTypeCode::i64 ? a.e : widened(a.e);
      return {ir::binary(BinOp::Shl, x, count, e->span), {}, false};
    }
    if (bitwise(n->op)) {  // a widened operand of >> is retyped back: its value wrapped into the operand's type
      if (a.e->dtype != n->a->dtype) a = {a.e, dtype_range(n->a->dtype), n->a->dtype.code != DTypeCode::i64};
      if (b.e->dtype != n->b->dtype) b = {b.e, dtype_range(n->b->dtype), n->b->dtype.code != DTypeCode::i64};
    }
    const Range &ra = a.r, &rb = b.r;
    const bool narrow = a.narrow && b.narrow;
    const bool pos = divisor && *divisor > 0;
    // The operand to widen: the one that is not a literal (a cast literal prints the same digits).
    auto widen = [&](Range r) -> Out {
      if (a.e->kind == ExprKind::IntImm) return {rebuild(a.e, widened(b.e)), r, false};
      return {rebuild(widened(a.e), b.e), r, false};
    };
    auto checked = [&](Range r) -> Out {
      if (narrow && !r.fits32()) return widen(r);
      return {rebuild(a.e, b.e), r, narrow};
    };
    switch (n->op) {
      case BinOp::Add: return checked(meet(Range::of(ra.lo + rb.lo, ra.hi + rb.hi), grid_stride(n, ra, rb)));
      case BinOp::Sub: return checked(Range::of(ra.lo - rb.hi, ra.hi - rb.lo));
      case BinOp::Mul: {
        I128 p[] = {ra.lo * rb.lo, ra.lo * rb.hi, ra.hi * rb.lo, ra.hi * rb.hi};
        Range r = Range::of(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
        if (const Stride* f = stride_of(e)) r = meet(r, {0, std::max<I128>(0, f->xr.hi - 1)});  // Rule 1
        return checked(r);
      }
      case BinOp::CeilDiv: {
        // printed (a + b - 1) / b when both operands are non-negative: the dividend's sum in int32 too
        Range r = pos ? Range{-floor_div(-ra.lo, *divisor), -floor_div(-ra.hi, *divisor)}  // ceil(x / c) = -floor(-x / c)
                      : Range::of(-std::max(abs128(ra.lo), abs128(ra.hi)), std::max(abs128(ra.lo), abs128(ra.hi)));
        if (narrow && !Range::of(ra.lo, ra.hi + rb.hi - 1).fits32()) {
          // Rule 3: the dividend's sum in int64, the quotient cast back to the node's type when its range
          // fits there (an exact conversion): ceildiv(M, 8) of an int32 M is in [0, 2^28], so the
          // expressions around it stay in int32 instead of taking int64 operands from it
          Out w = widen(r);
          w.e = division(w.e, ra, e);
          const Range t = dtype_range(e->dtype);
          if (r.lo >= t.lo && r.hi <= t.hi) return {ir::cast(w.e, e->dtype, e->span), r, true};
          return w;
        }
        return {division(rebuild(a.e, b.e), ra, e), r, narrow};
      }
      case BinOp::FloorDiv: {
        if (pos) return {division(rebuild(a.e, b.e), ra, e), {floor_div(ra.lo, *divisor), floor_div(ra.hi, *divisor)}, narrow};
        I128 m = std::max(abs128(ra.lo), abs128(ra.hi));  // |a // b| <= |a| (b == 0: 0)
        return {division(rebuild(a.e, b.e), ra, e), Range::of(-m, m), narrow};
      }
      case BinOp::Mod: {
        if (pos) return {division(rebuild(a.e, b.e), ra, e), ra.lo >= 0 && ra.hi < *divisor ? ra : Range{0, *divisor - 1}, narrow};
        I128 m = std::max(abs128(rb.lo), abs128(rb.hi));  // |a % b| < |b|; a % 0 == a
        return {division(rebuild(a.e, b.e), ra, e), hull(ra, Range::of(-m, m)), narrow};
      }
      case BinOp::Min: return {rebuild(a.e, b.e), {std::min(ra.lo, rb.lo), std::min(ra.hi, rb.hi)}, false};
      case BinOp::Max: return {rebuild(a.e, b.e), {std::max(ra.lo, rb.lo), std::max(ra.hi, rb.hi)}, false};
      case BinOp::EQ: case BinOp::NE: case BinOp::LT: case BinOp::LE: case BinOp::GT: case BinOp::GE:
      case BinOp::And: case BinOp::Or:
        return {rebuild(a.e, b.e), {0, 1}, true};
      case BinOp::BitAnd: case BinOp::BitOr: case BinOp::BitXor: {
        Range r;
        if (n->op == BinOp::BitAnd && (ra.lo >= 0 || rb.lo >= 0))
          r = and_range(ra, rb);
        else if (ra.fits32() && rb.fits32())
          r = {kI32Min, kI32Max};  // two's complement bits of int32 values stay in int32
        return {rebuild(a.e, b.e), r, narrow};
      }
      case BinOp::Shl: {  // printed through uint64_t: an int64 value
        Range r;
        if (divisor && ra.fits32()) {
          int k = ir::shift_count(*divisor, e->dtype);
          if (k <= 31) r = Range::of(ra.lo * (I128(1) << k), ra.hi * (I128(1) << k));
        }
        return {rebuild(a.e, b.e), r, false};
      }
      case BinOp::Shr:  // the operand wrapped into the node's type, then shifted: inside that type
        return {rebuild(a.e, b.e), dtype_range(e->dtype), false};
      case BinOp::Div:  // true division is float (ir::binary; the verifier rejects an integer one)
        return {rebuild(a.e, b.e), {}, false};
    }
    return {rebuild(a.e, b.e), {}, false};
  }
};

// Every expression field of a call-level instruction (the pass runs after select_move_calls).
template <class F>
struct Fields {
  F& f;
  void operator()(Expr& e) const { f(e); }
  void operator()(LocalRef& r) const { f(r.offset); }
  void operator()(GmRef& r) const { f(r.offset); }
  void operator()(std::vector<DimIndex>& dims) const {
    for (auto& d : dims) {
      f(d.index), f(d.extent);
      if (d.used) f(d.used);
    }
  }
  void operator()(WindowCheck& w) const {
    (*this)(w.dims);
    if (w.tile.offset) (*this)(w.tile);
  }
  template <class... X>
  void all(X&... x) const { ((*this)(x), ...); }
};

template <class F>
void map_fields(InstrOp& op, F&& fn, const ir::Span& span) {
  Fields<F> f{fn};
  std::visit(Overload{
      [&](InitConstValue& c) { f.all(c.dst, c.repeatTimes, c.blockNum, c.dstGap, c.initValue); },
      [&](DataCopyNd2Nz& c) {
        f.all(c.src, c.dst, c.ndNum, c.nValue, c.dValue, c.srcNdMatrixStride, c.srcDValue, c.dstNzC0Stride,
              c.dstNzNStride, c.dstNzMatrixStride, c.col_start);
      },
      [&](DataCopyPadGmToUb& c) {
        f.all(c.src, c.dst, c.blockCount, c.blockLen, c.srcStride, c.dstStride, c.leftPadding, c.rightPadding,
              c.paddingValue);
      },
      [&](DataCopyPadUbToGm& c) { f.all(c.src, c.dst, c.blockCount, c.blockLen, c.srcStride, c.dstStride, c.window); },
      [&](DataCopyUbToUb& c) { f.all(c.src, c.dst, c.blockCount, c.blockLen, c.srcStride, c.dstStride); },
      [&](LoadData2D& c) { f.all(c.src, c.dst, c.startIndex, c.repeatTimes, c.srcStride, c.sid, c.dstGap); },
      [&](LoadData3DV2& c) {
        f.all(c.src, c.dst, c.l1H, c.l1W, c.channelSize, c.kExtension, c.mExtension, c.kStartPt, c.mStartPt);
      },
      [&](FixpipeV220& c) { f.all(c.src, c.dst, c.nSize, c.mSize, c.srcStride, c.dstStride, c.ndNum); },
      [&](FixpipeL1& c) { f.all(c.src, c.dst, c.nSize, c.mSize, c.srcStride, c.dstStride); },
      [&](Mmad& c) { f.all(c.a, c.b, c.c, c.m, c.n, c.k, c.init); },
      [&](VecCallL2& c) { f.all(c.dst, c.src0, c.src1, c.scalar, c.count, c.sel, c.window); },
      [&](VecCallL0& c) {
        f.all(c.dst, c.src0, c.src1, c.scalar, c.mask, c.repeat, c.dst_blk, c.src0_blk, c.src1_blk, c.dst_rep,
              c.src0_rep, c.src1_rep, c.window);
      },
      [&](WholeReduce& c) { f.all(c.dst, c.src, c.mask, c.repeat, c.dst_rep, c.src_blk, c.src_rep); },
      [&](Brcb& c) { f.all(c.dst, c.src, c.repeat, c.dst_blk, c.dst_rep); },
      [&](Gather& c) { f.all(c.dst, c.src, c.offset, c.base, c.count, c.src_elems); },
      [&](ScalarLoad& c) { f.all(c.src, c.ub, c.dims); },
      [&](ScalarStore& c) { f.all(c.dst, c.value, c.dims); },
      [&](SetFlag& c) { f.all(c.event); },
      [&](WaitFlag& c) { f.all(c.event); },
      [&](CrossCoreSetFlag& c) { f.all(c.id); },
      [&](CrossCoreWaitFlag& c) { f.all(c.id); },
      [](SetAtomic&) {},
      [](PipeBarrier&) {},
      [&](auto& c) {
        throw ir::Error("internal: widen_scalars got the instruction " + std::string(instr_name(InstrOp(c))) +
                            "; it runs after select_vector_calls and select_move_calls",
                        span);
      }},
             op);
}

// The variables a statement assigns (loops, lets, scalar loads), nested ones included.
void assigned(const StmtPtr& s, std::unordered_set<const ir::VarNode*>& out) {
  if (!s) return;
  if (s->var) out.insert(s->var.get());
  if (s->kind == StmtKind::Instr)
    if (auto* l = std::get_if<ScalarLoad>(&s->instr.op)) out.insert(l->var.get());
  for (const auto& b : s->body) assigned(b, out);
  assigned(s->else_body, out);
}

// The Stride of loop s (`for t in range(ceildiv(x, s))`, s >= 0, x and s invariant in the body), if any.
std::optional<Stride> stride(const StmtPtr& s, Widen& w) {
  if (s->value->kind != ExprKind::Binary) return std::nullopt;
  auto* c = ir::as<ir::BinaryNode>(s->value);
  if (c->op != BinOp::CeilDiv || !c->a->dtype.is_int() || w.visit(c->b).r.lo < 0) return std::nullopt;
  std::unordered_set<const ir::VarNode*> set;
  for (const auto& b : s->body) assigned(b, set);
  bool invariant = true;
  ir::for_each_expr(s->value, [&](const Expr& e) {
    if (e->kind == ExprKind::Var && set.count(ir::as<ir::VarNode>(e))) invariant = false;
  });
  if (!invariant) return std::nullopt;
  Stride f{c->b, c->a, w.visit(c->a).r};
  if (c->a->kind == ExprKind::Binary && ir::as<ir::BinaryNode>(c->a)->op == BinOp::Sub) {
    auto* d = ir::as<ir::BinaryNode>(c->a);
    Range y = w.visit(d->a).r, base = w.visit(d->b).r;
    f.sub = y.lo - base.hi >= kI64Min && y.hi - base.lo <= kI64Max;  // y - base exact in int64
    f.yr = y;
  }
  return f;
}

StmtPtr rewrite(const StmtPtr& s, Widen& w) {
  if (!s) return s;
  auto n = std::make_shared<Stmt>(*s);
  switch (s->kind) {
    case StmtKind::Seq:
      for (auto& b : n->body) b = rewrite(b, w);
      break;
    case StmtKind::For: {
      Out ext = w.visit(s->value);
      n->value = ext.e;
      Range loop = dtype_range(s->var->dtype);  // the printed index's type
      w.vars[s->var.get()] = {0, std::max<I128>(0, std::min(ext.r.hi, loop.hi) - 1)};
      w.nonneg.insert(s->var.get());
      w.strides.erase(s->var.get());
      if (auto f = stride(s, w)) w.strides[s->var.get()] = *f;
      for (auto& b : n->body) b = rewrite(b, w);
      w.strides.erase(s->var.get());
      break;
    }
    case StmtKind::If:
      n->value = w.expr(s->value);
      for (auto& b : n->body) b = rewrite(b, w);
      n->else_body = rewrite(s->else_body, w);
      break;
    case StmtKind::Let: {
      Out v = w.visit(s->value);
      n->value = v.e;
      // A let holds the value computed (docs/language.md "Dtype conversions": integers in int64, float16 /
      // bfloat16 in float32), as the cpu target's `const int64_t` / `const float` let does; the printed
      // `const T v = ...` (and the simulator) convert to the variable's type, so a let whose value may leave
      // its dtype gets an int64 / float32 variable instead (its uses read that one: Widen::visit).
      const DType t = s->var->dtype;
      const bool ints = s->value->dtype.is_int() || s->value->dtype.is_bool();
      Range tr = dtype_range(t);
      bool fits = ints && v.r.lo >= tr.lo && v.r.hi <= tr.hi;
      DType wide = t;
      if (t.is_int() && t.code != DTypeCode::i64 && !fits) wide = DTypeCode::i64;
      if ((t.code == DTypeCode::f16 || t.code == DTypeCode::bf16) && (ir::computed_wider(v.e) || v.e->dtype != t))
        wide = DTypeCode::f32;
      if (wide != t) {
        n->var = ir::var(s->var->name, wide, s->var->span);
        w.wide_lets[s->var.get()] = n->var;
        tr = dtype_range(wide);
        fits = ints;
      }
      w.vars[n->var.get()] = fits ? v.r : tr;
      if (w.vars[n->var.get()].lo >= 0 && w.is_nonneg(v.e)) w.nonneg.insert(n->var.get());  // no wrap
      break;
    }
    case StmtKind::Instr:
      map_fields(n->instr.op, [&](Expr& e) { e = w.expr(e); }, s->span);
      if (auto* l = std::get_if<ScalarLoad>(&n->instr.op)) w.vars[l->var.get()] = dtype_range(l->dtype);
      break;
  }
  return n;
}

}  // namespace

Program widen_scalars(const Program& program) {
  Program p = program;
  Widen w;
  for (const auto& v : p.shape_vars) {
    w.vars[v.get()] = {0, dtype_range(v->dtype).hi};  // printed as their dtype
    w.nonneg.insert(v.get());
  }
  for (const auto& k : p.params)
    if (!k.is_tensor && k.var) w.vars[k.var.get()] = dtype_range(k.dtype);
  // the host's expressions (block_dim, workspace_bytes, tensor shapes) print unchanged: their C divisions only
  w.host = true;
  Range dim = p.block_dim ? w.visit(p.block_dim).r : Range{1, 1};
  if (p.workspace_bytes) w.visit(p.workspace_bytes);
  for (const auto& k : p.params)
    for (const auto& d : k.shape)
      if (d) w.visit(d);
  w.host = false;
  if (p.block_idx) {
    w.vars[p.block_idx.get()] = {0, std::max<I128>(0, std::min(dim.hi, kI32Max) - 1)};
    w.nonneg.insert(p.block_idx.get());
  }
  if (p.sub_block_idx) {
    w.vars[p.sub_block_idx.get()] = {0, 1};
    w.nonneg.insert(p.sub_block_idx.get());
  }
  p.aic = rewrite(p.aic, w);
  p.aiv = rewrite(p.aiv, w);
  p.c_divisions = std::move(w.divisions);
  return p;
}

}  // namespace tw::ascend
