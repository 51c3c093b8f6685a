#include "transform/simplify.h"

#include <cmath>
#include <limits>

#include "ir/arith.h"

namespace tw::transform {

using namespace ir;

namespace {

Stmt empty_seq(const Span& s) { return std::make_shared<SeqNode>(std::vector<Stmt>{}, s); }

// The expression rules are ir::arith's; the statement rules are this pass's.
class Simplifier : public arith::Simplifier {
 public:
  using arith::Simplifier::mutate;

  Stmt mutate(const Stmt& s) override {
    Stmt m = Mutator::mutate(s);
    if (!m) return m;
    if (m->kind == StmtKind::If) {
      auto* n = as<IfNode>(m);
      if (auto c = arith::literal(n->cond)) {
        Stmt branch = *c ? n->then_body : n->else_body;
        return branch ? branch : empty_seq(n->span);
      }
    }
    if (m->kind == StmtKind::For) {
      auto* n = as<ForNode>(m);
      auto ext = arith::literal(n->extent);
      if (ext && *ext <= 0) return empty_seq(n->span);
      if (ext && *ext == 1 && (n->for_kind == ForKind::serial || n->for_kind == ForKind::unroll)) {
        std::vector<Stmt> body{std::make_shared<LetNode>(n->var, n->min, n->span)};
        for (const auto& x : stmts_of(n->body)) body.push_back(x);
        return std::make_shared<SeqNode>(body, n->span);
      }
    }
    return m;
  }
};

}  // namespace

Kernel simplify(const Kernel& k) { return Simplifier().mutate_kernel(k); }

}  // namespace tw::transform
