// Tile IR text for the before/after tests of the cpu target's passes: parsed as the front end
// builds kernels. The text form writes every loop or if body as a block, which the parser reads
// as a sequence; the front end (frontend/core.py) makes a body of one statement that statement,
// and the passes' patterns (a map is a loop whose body is a loop whose body is a store) are
// written for that form.
#pragma once

#include <string>

#include "ir/functor.h"
#include "ir/parser.h"

namespace tw::cpu::test {

inline ir::Kernel parse_as_built(const std::string& text) {
  struct Unwrap : ir::Mutator {
    using ir::Mutator::mutate;
    static ir::Stmt one(const ir::Stmt& s) {
      return s && s->kind == ir::StmtKind::Seq && ir::as<ir::SeqNode>(s)->body.size() == 1 ? ir::as<ir::SeqNode>(s)->body[0]
                                                                                              : s;
    }
    ir::Stmt mutate(const ir::Stmt& s) override {
      ir::Stmt m = rebuilt(s);
      if (m && m != s)  // a rebuilt node keeps its annotations
        for (const auto& a : s->annotations) m = ir::with_annotation(m, a);
      return m;
    }
    ir::Stmt rebuilt(const ir::Stmt& s) {
      ir::Stmt m = ir::Mutator::mutate(s);
      if (!m) return m;
      if (m->kind == ir::StmtKind::For) {
        const auto* f = ir::as<ir::ForNode>(m);
        if (ir::Stmt b = one(f->body); b != f->body)
          return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, b, f->span);
      }
      if (m->kind == ir::StmtKind::If) {
        const auto* n = ir::as<ir::IfNode>(m);
        ir::Stmt t = one(n->then_body), e = one(n->else_body);
        if (t != n->then_body || e != n->else_body) return std::make_shared<ir::IfNode>(n->cond, t, e, n->span);
      }
      return m;
    }
  } unwrap;
  return unwrap.mutate_kernel(ir::parse_kernel(text, "k.tw"));
}

}  // namespace tw::cpu::test
