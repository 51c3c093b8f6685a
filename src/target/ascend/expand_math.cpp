// expand_math: math functions without a vector instruction as ones with one (see expand_math.h).
#include "target/ascend/expand_math.h"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include "ir/functor.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::DType;
using ir::Expr;
using ir::Span;

const DType kF32{ir::DTypeCode::f32};

// The expansion of call c (its argument already expanded), or nullptr when c stays.
Expr expand(const ir::CallNode* c, const Span& sp) {
  const Expr& a = c->args[0];
  DType t = vec::compute_type(a->dtype);
  Expr x = ir::cast(a, t, sp);
  auto K = [&](double v) { return ir::float_imm(v, t, sp); };
  auto F = [&](double v) { return ir::float_imm(v, kF32, sp); };
  auto bin = [&](ir::BinOp op, Expr p, Expr q) { return ir::binary(op, std::move(p), std::move(q), sp); };
  auto fn = [&](ir::MathFn f, Expr p) { return ir::call(f, {std::move(p)}, sp); };
  using B = ir::BinOp;
  switch (c->fn) {
    case ir::MathFn::exp2: return fn(ir::MathFn::exp, bin(B::Mul, x, K(M_LN2)));
    case ir::MathFn::log2: return bin(B::Mul, fn(ir::MathFn::log, x), K(1.0 / M_LN2));
    case ir::MathFn::rsqrt: return bin(B::Div, K(1), fn(ir::MathFn::sqrt, x));
    case ir::MathFn::sigmoid:
      return bin(B::Div, K(1), bin(B::Add, fn(ir::MathFn::exp, ir::unary(ir::UnOp::Neg, x, sp)), K(1)));
    case ir::MathFn::silu:  // x * sigmoid(x) as x / (1 + exp(-x))
      return bin(B::Div, x, bin(B::Add, fn(ir::MathFn::exp, ir::unary(ir::UnOp::Neg, x, sp)), K(1)));
    case ir::MathFn::tanh: {
      Expr y = ir::cast(x, kF32, sp);
      Expr e2 = fn(ir::MathFn::exp, bin(B::Mul, bin(B::Min, bin(B::Max, y, F(-9)), F(9)), F(2)));
      return ir::cast(bin(B::Div, bin(B::Sub, e2, F(1)), bin(B::Add, e2, F(1))), t, sp);
    }
    case ir::MathFn::erf: {
      // Abramowitz & Stegun 7.1.26 on |x|, with the sign of x (clamp(x * 2^100, -1, 1)).
      Expr y = ir::cast(x, kF32, sp);
      const double p = 0.3275911, a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741, a4 = -1.453152027,
                   a5 = 1.061405429;
      Expr tt = bin(B::Div, F(1), bin(B::Add, bin(B::Mul, fn(ir::MathFn::abs, y), F(p)), F(1)));
      Expr poly = bin(B::Add, bin(B::Mul, tt, F(a5)), F(a4));
      for (double k : {a3, a2, a1}) poly = bin(B::Add, bin(B::Mul, poly, tt), F(k));
      poly = bin(B::Mul, poly, tt);
      Expr ex = fn(ir::MathFn::exp, bin(B::Mul, bin(B::Mul, y, y), F(-1)));
      Expr one_minus = bin(B::Add, bin(B::Mul, bin(B::Mul, poly, ex), F(-1)), F(1));
      Expr sign = bin(B::Min, bin(B::Max, bin(B::Mul, y, F(std::ldexp(1.0, 100))), F(-1)), F(1));
      return ir::cast(bin(B::Mul, one_minus, sign), t, sp);
    }
    case ir::MathFn::sin: case ir::MathFn::cos: {
      // tw_cpu::detail::sin_cos (src/target/cpu/include/tw_cpu/math.h, where the method and its error are
      // stated), the same float32 operations in the same order: both targets give the same bits
      const bool is_cos = c->fn == ir::MathFn::cos;
      const double kShift = 12582912.0;  // 1.5 * 2^23: adding it rounds to an integer
      Expr y0 = ir::cast(x, kF32, sp);
      Expr y = ir::select(bin(B::LE, fn(ir::MathFn::abs, y0), F(400000.0)), y0,
                          F(std::numeric_limits<double>::quiet_NaN()), sp);
      Expr xp = bin(B::Mul, y, F(0x1.45f306p-2));  // 1 / pi
      Expr sh = is_cos ? bin(B::Add, bin(B::Sub, xp, F(0.5)), F(kShift)) : bin(B::Add, xp, F(kShift));
      Expr n = bin(B::Sub, sh, F(kShift));
      Expr h = bin(B::Sub, bin(B::Add, bin(B::Mul, n, F(0.5)), F(kShift)), F(kShift));
      Expr par = fn(ir::MathFn::abs, bin(B::Sub, n, bin(B::Mul, h, F(2))));
      Expr sign = is_cos ? bin(B::Sub, bin(B::Mul, par, F(2)), F(1)) : bin(B::Sub, F(1), bin(B::Mul, par, F(2)));
      if (is_cos) n = bin(B::Add, n, F(0.5));
      Expr r = y;
      for (double piece : {0x1.9p+1, 0x1.08p-6, 0x1.fp-12, 0x1.a8p-18, 0x1.110b46p-25})
        r = bin(B::Sub, r, bin(B::Mul, n, F(piece)));
      Expr z = bin(B::Mul, r, r);
      Expr q = bin(B::Add, bin(B::Mul, F(0x1.5e254p-19), z), F(-0x1.9f77c8p-13));
      for (double k : {0x1.110fp-7, -0x1.55554cp-3}) q = bin(B::Add, bin(B::Mul, q, z), F(k));
      Expr res = bin(B::Mul, bin(B::Add, r, bin(B::Mul, bin(B::Mul, r, z), q)), sign);
      if (!is_cos) res = ir::select(bin(B::EQ, y0, F(0)), y0, res, sp);  // sin(-0) = -0
      return ir::cast(res, t, sp);
    }
    case ir::MathFn::pow: {
      const Expr& k = c->args[1];
      auto ce = k->kind == ir::ExprKind::FloatImm ? std::optional<double>(as<ir::FloatImmNode>(k)->value)
                : ir::as_const_int(k)            ? std::optional<double>(static_cast<double>(*ir::as_const_int(k)))
                                                 : std::nullopt;
      if (ce && *ce == 1) return x;
      if (ce && *ce == 2) return bin(B::Mul, x, x);
      if (ce && *ce == 3) return bin(B::Mul, bin(B::Mul, x, x), x);
      if (ce && *ce == 0.5) return fn(ir::MathFn::sqrt, x);
      if (ce && *ce == -0.5) return bin(B::Div, K(1), fn(ir::MathFn::sqrt, x));
      if (ce && *ce == -1) return bin(B::Div, K(1), x);
      if (ce && std::isfinite(*ce) && *ce != std::floor(*ce)) {
        // a constant non-integer c (port36 F5: HF's length penalty (len + 1) ** 0.8): exp(c * log(x)) in
        // float32, pow's value at 0, -0, +inf, negatives and NaN too; log(-inf) is NaN where pow(-inf, c) is
        // +inf (c > 0) or +0 (c < 0): -x or 0 there
        Expr y = ir::cast(x, kF32, sp);
        Expr r = fn(ir::MathFn::exp, bin(B::Mul, fn(ir::MathFn::log, y), F(*ce)));
        Expr at_minus_inf = bin(B::LT, y, F(-std::numeric_limits<float>::max()));
        r = ir::select(at_minus_inf, *ce > 0 ? ir::unary(ir::UnOp::Neg, y, sp) : F(0), r, sp);
        return ir::cast(r, t, sp);
      }
      return nullptr;  // legalize_vector reports the exponent
    }
    case ir::MathFn::fma:  // lower_scalar_math wrote every T.fma as arithmetic (fma_as_mul_add)
    case ir::MathFn::abs:  // an instruction for floats; int |x| in legalize_vector (conditions too)
    case ir::MathFn::exp: case ir::MathFn::log: case ir::MathFn::sqrt:  // instructions
    case ir::MathFn::floor: case ir::MathFn::ceil:  // legalize_vector: a CAST_FLOOR Cast (floor_ceil)
      return nullptr;
  }
  return nullptr;
}

// Calls f on every node of expression e (ir::for_each_expr walks statements).
template <class F>
void for_each_subexpr(const Expr& e, F&& f) {
  ir::for_each_expr(std::make_shared<ir::LetNode>(ir::var("_"), e, Span{}), f);
}

// The times v occurs in e.
int uses(const Expr& e, const ir::VarNode* v) {
  int n = 0;
  for_each_subexpr(e, [&](const Expr& x) { n += x.get() == v; });
  return n;
}

// The expressions of one map (vars: its loop variables) with their calls expanded. An expansion
// that uses a computed argument more than once (sin, erf, silu, ...) reads it from a let placed
// before the statement: the argument is computed once, and the IR stays a tree (hunt40 F6: as a
// shared sub-expression, T.sin(T.sin(T.sin(x))) was a DAG whose every walk as a tree -- the IR
// printer, the verifier -- took minutes).
struct Expander : ir::Mutator {
  explicit Expander(vec::Names& n) : names(n) {}
  vec::Names& names;
  std::set<const ir::VarNode*> tile;  // the map's variables and the lets that hold tile values
  std::vector<ir::Stmt> lets;  // the argument lets of the statement being expanded
  std::set<const ir::StmtNode*> made;  // the sequences {lets, statement} made here: spliced into their parent

  // The expansion of call y, its computed argument bound to a let when the expansion uses it more than once.
  Expr expand_call(const Expr& y) {
    auto* c = as<ir::CallNode>(y);
    const Expr& a = c->args[0];
    bool computed = a->kind != ir::ExprKind::Var && a->kind != ir::ExprKind::Load && a->kind != ir::ExprKind::IntImm &&
                    a->kind != ir::ExprKind::FloatImm;
    if (computed) {
      ir::Var v = ir::var(names.fresh(std::string(ir::mathfn_name(c->fn)) + "_arg"), a->dtype, a->span);
      std::vector<Expr> args = c->args;
      args[0] = v;
      Expr x = expand(as<ir::CallNode>(ir::call(c->fn, args, y->span)), y->span);
      if (x && uses(x, v.get()) > 1) {
        lets.push_back(std::make_shared<ir::LetNode>(v, a, a->span));
        tile.insert(v.get());
        return x;
      }
    }
    return expand(c, y->span);
  }

  bool scalar(const Expr& e) const {
    bool s = true;
    for_each_subexpr(e, [&](const Expr& x) {
      s = s && x->kind != ir::ExprKind::Load && !(x->kind == ir::ExprKind::Var && tile.count(as<ir::VarNode>(x)));
    });
    return s;
  }
  Expr mutate(const Expr& e) override {
    if (e && e->kind == ir::ExprKind::Select) {  // an index mask holds no call of tile data: kept as written
      auto* n = as<ir::SelectNode>(e);             // (T.where(T.tanh(x[i, j]) > 0.5, ..): expanded, review38 R2)
      Expr c = mutate(n->cond), t = mutate(n->t), f = mutate(n->f);
      if (c == n->cond && t == n->t && f == n->f) return e;
      return std::make_shared<ir::SelectNode>(c, t, f, n->dtype, n->span);
    }
    Expr y = ir::Mutator::mutate(e);
    if (!y || y->kind != ir::ExprKind::Call || scalar(y)) return y;
    Expr x = expand_call(y);
    // a float16 / bfloat16 call's value is the expansion's float32 value, rounded where stored or cast
    // (docs/language.md; cpu: hunt38 F3, T.tanh of a bfloat16 tile into a float32 one was rounded to bfloat16)
    if (x && y->dtype.is_float() && y->dtype.bits() < 32 && x->dtype == kF32) return x;
    return x ? ir::cast(x, y->dtype, y->span) : y;
  }
  ir::Stmt mutate(const ir::Stmt& s) override {
    std::vector<ir::Stmt> outer = std::move(lets);
    lets.clear();
    ir::Stmt y = ir::Mutator::mutate(s);
    if (y && y->kind == ir::StmtKind::Let && !scalar(as<ir::LetNode>(y)->value)) tile.insert(as<ir::LetNode>(y)->var.get());
    if (y && y->kind == ir::StmtKind::Seq) {  // splice the sequences made for its statements
      std::vector<ir::Stmt> body;
      bool spliced = false;
      for (const auto& item : as<ir::SeqNode>(y)->body) {
        bool m = made.count(item.get());
        spliced = spliced || m;
        for (const auto& t : m ? ir::stmts_of(item) : std::vector<ir::Stmt>{item}) body.push_back(t);
      }
      if (spliced) y = std::make_shared<ir::SeqNode>(std::move(body), y->span);
    }
    if (!lets.empty()) {
      lets.push_back(y);
      y = std::make_shared<ir::SeqNode>(std::move(lets), y->span);
      made.insert(y.get());
    }
    lets = std::move(outer);
    return y;
  }
  using ir::Mutator::mutate;
};

}  // namespace

bool element_map_fits(const ir::StoreNode& st) {
  auto reads = [](const Expr& e) {
    bool r = false;
    for_each_subexpr(e, [&](const Expr& x) { r = r || x->kind == ir::ExprKind::Load; });
    return r;
  };
  // the element at idx of tile b starts a 32 B block
  auto aligned = [&](const ir::Buffer& b, const std::vector<Expr>& idx) {
    auto shape = b->const_shape();
    if (b->scope == ir::Scope::global || !shape || idx.empty()) return false;
    int64_t numel = 1;
    for (auto d : *shape) numel *= d;
    int64_t cols = shape->back(), es = b->dtype.bytes();
    const bool padded = cols && numel / cols > 1;  // rows of 32 B blocks
    int64_t pcols = padded ? round_up(cols, 32 / es) : cols;  // UB geometry (select_instructions)
    int64_t off = 0, stride = 1;
    for (size_t d = idx.size(); d-- > 0;) {
      auto c = ir::as_const_int(idx[d]);
      // a leading index known at run time only (x[r, 0] at a serial loop's r: hunt40 F4) moves the place by whole
      // padded rows, each a multiple of 32 B (not an index reading tile data: the map would shift that read too)
      if (!c && (d + 1 == idx.size() || !padded || reads(idx[d]))) return false;
      if (c) off += *c * stride;
      stride *= d + 1 == idx.size() ? pcols : (*shape)[d];
    }
    return off * es % 32 == 0;
  };
  bool ok = aligned(st.buffer, st.indices);
  for_each_subexpr(st.value, [&](const Expr& x) {
    if (x->kind == ir::ExprKind::Load) ok = ok && aligned(as<ir::LoadNode>(x)->buffer, as<ir::LoadNode>(x)->indices);
  });
  return ok;
}

namespace {

// An element store outside a map whose value needs a math function the scalar unit lacks
// (`tot[0] = T.sqrt(tot[0])`, `s[0] = T.sin(s[0])`) where element_map_fits: a one-element map (the last index of
// the store and of every UB tile element it reads + v, v in [0, 1)), expanded below as any map (hunt40 F1: it was
// made in legalize_vector, after this pass, so every call without an instruction was "not supported on
// Ascend vector units yet"); nullptr otherwise (lower_scalar_math computed the calls of the others on one-element
// tiles; what stays, select_instructions reports at its line).
ir::Stmt element_map(const ir::StoreNode* st, vec::Names& names) {
  if (st->buffer->scope != ir::Scope::UB) return nullptr;
  bool call = false, ub = true;
  for_each_subexpr(st->value, [&](const Expr& x) {
    call |= x->kind == ir::ExprKind::Call;
    ub = ub && (x->kind != ir::ExprKind::Load || as<ir::LoadNode>(x)->buffer->scope == ir::Scope::UB);
  });
  if (!call || !ub || !element_map_fits(*st)) return nullptr;
  const Span& sp = st->span;
  ir::Var v = names.fresh_var("e", sp);
  auto shift = [&](std::vector<Expr> idx) {
    idx.back() = ir::binary(ir::BinOp::Add, idx.back(), v, sp);
    return idx;
  };
  struct Shift : ir::Mutator {
    std::function<std::vector<Expr>(std::vector<Expr>)> f;
    using ir::Mutator::mutate;
    Expr mutate(const Expr& x) override {
      if (x->kind != ir::ExprKind::Load) return ir::Mutator::mutate(x);
      auto* l = as<ir::LoadNode>(x);
      return std::make_shared<ir::LoadNode>(l->buffer, f(l->indices), x->dtype, x->span);
    }
  } m;
  m.f = shift;
  ir::Stmt body = std::make_shared<ir::StoreNode>(st->buffer, shift(st->indices), m.mutate(st->value), sp);
  return vec::pfor(v, 1, body, sp);
}

}  // namespace

ir::Kernel expand_math(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s0) -> std::optional<std::vector<ir::Stmt>> {
    ir::Stmt s = s0;
    if (s->kind == ir::StmtKind::Store)
      if (ir::Stmt m = element_map(as<ir::StoreNode>(s), names)) s = m;
    if (s->kind != ir::StmtKind::For || as<ir::ForNode>(s)->for_kind != ir::ForKind::parallel) return std::nullopt;
    // a map over more than 2 dims (an N-D tile): legalize_vector runs its leading loops serially around the
    // 2-D map of the last two (rewrite_map), so that map is the vector code (port37 F1: T.rsqrt / T.silu in a
    // 3-D map were "not supported on Ascend vector units yet", left unexpanded)
    std::vector<ir::Stmt> nest;
    for (ir::Stmt c = s; c && c->kind == ir::StmtKind::For && as<ir::ForNode>(c)->for_kind == ir::ForKind::parallel;) {
      nest.push_back(c);
      c = as<ir::ForNode>(c)->body;
      while (c && c->kind == ir::StmtKind::Seq && as<ir::SeqNode>(c)->body.size() == 1) c = as<ir::SeqNode>(c)->body[0];
    }
    auto m = vec::vector_map(nest.size() > 2 ? nest[nest.size() - 2] : s);
    if (!m) return std::vector<ir::Stmt>{s};  // not vector code: select_instructions reports it
    Expander ex(names);
    // the scalar test of legalize_vector's map lowering: a value using the row index of a 2-D map
    // or the column index (a 1-D map's only index) is tile data
    ex.tile.insert(m->vars.back().get());
    if (m->vars.size() == 2) ex.tile.insert(m->vars[0].get());
    return std::vector<ir::Stmt>{ex.mutate(s)};
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
