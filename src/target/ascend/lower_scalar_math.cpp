// lower_scalar_math: math functions of scalars folded or computed by the Vector unit (see
// lower_scalar_math.h).
#include "target/ascend/lower_scalar_math.h"

#include <cmath>
#include <functional>
#include <set>

#include "ir/arith.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "target/ascend/math_fns.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::Expr;
using ir::Stmt;

const ir::DType kF32{ir::DTypeCode::f32};

std::optional<double> literal(const Expr& e) {
  if (e->kind == ir::ExprKind::FloatImm) return as<ir::FloatImmNode>(e)->value;
  if (auto c = ir::as_const_int(e)) return static_cast<double>(*c);
  return std::nullopt;
}

// A call of literals: its value.
struct Folder : ir::Mutator {
  using ir::Mutator::mutate;
  Expr mutate(const Expr& e) override {
    Expr y = ir::Mutator::mutate(e);
    if (!y || y->kind != ir::ExprKind::Call || !y->dtype.is_float()) return y;
    auto* c = as<ir::CallNode>(y);
    if (c->fn == ir::MathFn::fma) return y;  // Lowerer: fma_as_mul_add
    auto x = literal(c->args[0]);
    auto p = c->args.size() > 1 ? literal(c->args[1]) : std::optional<double>(0.0);
    if (!x || !p) return y;
    return ir::float_imm(scalar_value(c->fn, *x, *p), y->dtype, y->span);
  }
};

// Each call of a scalar (no variable of `inner`) replaced by the element of a one-element tile the
// statements appended to `out` compute it in.
struct Lowerer : ir::Mutator {
  vec::Names& names;
  std::vector<Stmt>& out;
  std::set<const ir::ExprNode*> inner;  // variables bound inside the statement (a map's indices, its lets)
  std::set<const ir::BufferNode*> stored;  // the tiles and tensors a map stores to
  bool changed = false;                    // an integer |n| or an fma rewritten (no tile appended)
  Expr call;                               // the user's call of the last tile appended (a located error names it)
  Lowerer(vec::Names& n, std::vector<Stmt>& o) : names(n), out(o) {}

  bool element_store = false;  // of an element store: no element read (select_instructions' one-element map)
  // no variable bound inside the statement (an element of a tile or tensor at such an index is too), and no
  // read of what the map stores: computed before the map it would read the element before the map's stores
  // (review37 R2: t[i] = t[i] / T.sqrt(t[0] + 1) ran on the old t[0] where cpu's iterations see the new one;
  // left in the map, it is the located error of t[i] = t[i] / (t[0] + 1))
  bool scalar(const Expr& e) const {
    bool s = true;
    ir::for_each_expr(e, [&](const Expr& x) {
      s = s && !(x->kind == ir::ExprKind::Var && inner.count(x.get())) &&
          !(element_store && x->kind == ir::ExprKind::Load) &&
          !(x->kind == ir::ExprKind::Load && stored.count(as<ir::LoadNode>(x)->buffer.get()));
    });
    return s;
  }
  using ir::Mutator::mutate;
  Expr mutate(const Expr& e) override {
    Expr y = ir::Mutator::mutate(e);  // inner calls first: their tiles are read by this one's argument
    if (y && y->kind == ir::ExprKind::Call && as<ir::CallNode>(y)->fn == ir::MathFn::fma) {
      changed = true;  // every T.fma, of scalars or in a map: arithmetic, or the located error of a float32 fma
      return fma_as_mul_add(*as<ir::CallNode>(y));
    }
    if (!y || y->kind != ir::ExprKind::Call || !scalar(y)) return y;
    auto* c = as<ir::CallNode>(y);
    if (c->fn == ir::MathFn::abs && y->dtype.is_int()) {  // |n| of an integer: max(n, 0 - n) on the scalar unit (review37
      const Expr& x = c->args[0];                          // R4: simulated, then 'internal: the AscendC printer got ...')
      changed = true;
      return ir::arith::max(x, ir::arith::sub(ir::int_imm(0, x->dtype, y->span), x));
    }
    if (!y->dtype.is_float()) return y;
    const ir::Span& sp = y->span;
    if (c->fn == ir::MathFn::pow && c->args.size() > 1 && !literal(c->args[1])) {
      // c ** y of a positive literal c and a scalar y (Adam's bias correction b1 ** step): exp(y * ln c), the
      // vector unit having no pow of a non-literal exponent
      auto base = literal(c->args[0]);
      if (!base || !(*base > 0)) return y;  // legalize_vector reports the exponent
      Expr e = ir::binary(ir::BinOp::Mul, ir::cast(c->args[1], kF32, sp), ir::float_imm(std::log(*base), kF32, sp), sp);
      return mutate(ir::cast(ir::call(ir::MathFn::exp, {e}, sp), y->dtype, sp));
    }
    ir::Buffer t = ir::buffer(names.fresh("tw_" + std::string(ir::mathfn_name(c->fn))), kF32, {ir::int_imm(1)},
                              ir::Scope::fragment, sp);
    const Expr at0 = ir::load(t, {ir::int_imm(0)}, sp);
    auto map = [&](bool call) {  // t[i] = x, or t[i] = f(t[i]) (pow's exponent as written)
      ir::Var i = names.fresh_var("i", sp);
      std::vector<Expr> args{ir::load(t, {i}, sp)};
      args.insert(args.end(), c->args.begin() + 1, c->args.end());
      Expr value = call ? ir::call(c->fn, args, sp) : ir::cast(c->args[0], kF32, sp);
      return vec::pfor(i, 1, std::make_shared<ir::StoreNode>(t, std::vector<Expr>{i}, value, sp), sp);
    };
    call = e;
    out.push_back(std::make_shared<ir::AllocNode>(t, sp));
    out.push_back(map(false));
    out.push_back(map(true));
    return ir::cast(at0, y->dtype, sp);
  }
};

bool has_gemm(const Stmt& s) {
  bool g = false;
  if (s) ir::for_each_stmt(s, [&](const Stmt& x) { g = g || x->kind == ir::StmtKind::Gemm; });
  return g;
}

// A call the Vector unit would compute whose value the Cube core needs (review37 R3): split_cube_vector /
// the verifier would refuse the one-element tile by its name, which the user never wrote.
[[noreturn]] void cube_needs(const Expr& call, const std::string& where, const std::string& why, const std::string& hint) {
  throw ir::Error("T." + ir::print(call) + " in " + where +
                      ": the Ascend scalar unit has no math functions, so the Vector unit computes the call, and " + why,
                  call->span, hint);
}

}  // namespace

std::string scalar_math_hint(const std::string& fn) {
  return "the Ascend scalar unit has no math functions: compute it on the Vector unit in a one-element tile "
         "(t = T.alloc_fragment((1,), \"float32\"); for i in T.Parallel(1): t[i] = x; for i in T.Parallel(1): t[i] = T." +
         fn + "(t[i])) and use t[0], or pass the value as a scalar parameter; a value per row of a map over more than two "
         "dimensions (T." + fn + "(r[i] ...) in a map over i, g, c): compute it over the vector first in its own "
         "T.Parallel map (rr[i] = T." + fn + "(r[i] ...)) and use rr[i]";
}

ir::Kernel lower_scalar_math(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  ir::Stmt body = Folder{}.mutate(kernel->body);
  if (kernel->is_npu()) return vec::with_body(kernel, body);  // expert mode: the user's code, as written
  vec::Names names(kernel);
  const bool cube = has_gemm(body);  // a kernel with Cube code: split_cube_vector puts it on two cores
  std::function<std::optional<std::vector<ir::Stmt>>(const ir::Stmt&)> f;
  f = [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    std::vector<ir::Stmt> out;
    Lowerer low(names, out);
    if (s->kind == ir::StmtKind::If) {  // the condition's calls before the if, its arms as any statements
      auto* n = as<ir::IfNode>(s);
      Expr c = low.mutate(n->cond);
      if (!out.empty() && (has_gemm(n->then_body) || has_gemm(n->else_body)))
        cube_needs(low.call, "the condition of an if around T.gemm",
                   "the Cube core, which runs the gemm, evaluates the condition too",
                   "pass the value as a scalar parameter (computed on the host), or put only vector code "
                   "(T.Parallel maps) under the if");
      if (out.empty() && !low.changed) return std::nullopt;
      out.push_back(std::make_shared<ir::IfNode>(c, vec::rewrite_stmts(n->then_body, f),
                                                 n->else_body ? vec::rewrite_stmts(n->else_body, f) : nullptr, s->span));
      return out;
    }
    const bool map = s->kind == ir::StmtKind::For && as<ir::ForNode>(s)->for_kind == ir::ForKind::parallel;
    if (!map && s->kind != ir::StmtKind::Let && s->kind != ir::StmtKind::Store && s->kind != ir::StmtKind::Fill)
      return std::nullopt;
    // t[k] = f(t[j]): a one-element vector instruction where both start a 32-byte block, else select_instructions'
    // located error (docs/ascend.md "Scalar reads and element stores of UB tiles"); f of scalars is lowered here
    low.element_store = s->kind == ir::StmtKind::Store;
    if (map)
      ir::for_each_stmt(s, [&](const ir::Stmt& x) {
        if (x->kind == ir::StmtKind::For) low.inner.insert(as<ir::ForNode>(x)->var.get());
        if (x->kind == ir::StmtKind::Let) low.inner.insert(as<ir::LetNode>(x)->var.get());
        if (x->kind == ir::StmtKind::Store) low.stored.insert(as<ir::StoreNode>(x)->buffer.get());
      });
    ir::Stmt y = low.mutate(s);
    if (cube && !out.empty() && s->kind == ir::StmtKind::Let)
      cube_needs(low.call, "let " + q(as<ir::LetNode>(s)->var->name) + " of a kernel with Cube code (T.gemm)",
                 "in such a kernel a let runs on both the Cube and the Vector core",
                 "write the call inside the T.Parallel map that uses " + q(as<ir::LetNode>(s)->var->name) + " (T." +
                     ir::print(low.call) + " in its place there), or pass the value as a scalar parameter");
    if (out.empty() && !low.changed && !map) return std::nullopt;
    out.push_back(y);  // a map whole: its lets and stores are not scalar code
    return out;
  };
  body = vec::rewrite_stmts(body, f);
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
