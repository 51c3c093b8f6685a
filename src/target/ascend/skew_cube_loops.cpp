#include "target/ascend/skew_cube_loops.h"

#include <functional>

#include "ir/functor.h"
#include "target/ascend/core_split.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/rotate_vector_loops.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Expr;
using ir::Scope;
using ir::Stmt;
using ir::StmtKind;
using Node = const ir::BufferNode*;

// A nest of loops, ifs (without else), lets and copies (the page copies of paged decode).
bool copy_nest(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::Seq: {
      for (const auto& c : ir::as<ir::SeqNode>(s)->body)
        if (!copy_nest(c)) return false;
      return true;
    }
    case StmtKind::For: return copy_nest(ir::as<ir::ForNode>(s)->body);
    case StmtKind::If: return !ir::as<ir::IfNode>(s)->else_body && copy_nest(ir::as<ir::IfNode>(s)->then_body);
    case StmtKind::Let:
    case StmtKind::Copy: return true;
    default: return false;
  }
}

// A copy nest with only the copies whose destination `keep` accepts (the loops, ifs and lets around
// them stay); nullptr when none is left.
Stmt restrict_copies(const Stmt& s, const std::function<bool(Node)>& keep) {
  switch (s->kind) {
    case StmtKind::Copy: return keep(ir::as<ir::CopyNode>(s)->dst.buffer.get()) ? s : nullptr;
    case StmtKind::Let: return s;
    case StmtKind::Seq: {
      std::vector<Stmt> out;
      bool any = false;
      for (const auto& c : ir::as<ir::SeqNode>(s)->body) {
        Stmt r = restrict_copies(c, keep);
        if (!r) continue;
        any |= r->kind != StmtKind::Let;
        out.push_back(r);
      }
      return any ? ir_seq(std::move(out), s->span) : nullptr;
    }
    case StmtKind::For: {
      auto* f = ir::as<ir::ForNode>(s);
      Stmt b = restrict_copies(f->body, keep);
      return b ? std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, b, s->span,
                                               f->user_extent)
               : nullptr;
    }
    case StmtKind::If: {
      auto* i = ir::as<ir::IfNode>(s);
      Stmt t = restrict_copies(i->then_body, keep);
      return t ? std::make_shared<ir::IfNode>(i->cond, t, nullptr, s->span) : nullptr;
    }
    default: return s;
  }
}

// v2c: the ids the Cube waits on for Vector -> Cube hand-offs; vbody: the vector scope's body.
Stmt skew(const Stmt& s, const std::unordered_set<int>& v2c, const Stmt& vbody) {
  if (!s) return s;
  if (s->kind == StmtKind::Seq) {
    std::vector<Stmt> out;
    for (const auto& c : ir::as<ir::SeqNode>(s)->body) out.push_back(skew(c, v2c, vbody));
    return std::make_shared<ir::SeqNode>(std::move(out), s->span);
  }
  if (s->kind != StmtKind::For || is_map(s)) return s;
  // The vector loops that feed this one must run their tails late too (see the header).
  std::unordered_set<int> fed;
  for (int id : cross_flag_ids(s, ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2))
    if (v2c.count(id)) fed.insert(id);
  if (!vector_hand_offs_rotate(vbody, fed)) return s;
  auto* f = ir::as<ir::ForNode>(s);
  std::vector<Stmt> flat = flat_body(f->body);
  if (reuses_cross_ids(flat)) return s;  // hand-offs sharing flag ids in turn: their order stays
  size_t w = 0;
  while (w < flat.size() && !is_cross_sync(flat[w], ir::SyncKind::wait_cross_flag, v2c)) ++w;
  if (w == 0 || w == flat.size()) return s;
  std::vector<Stmt> A0(flat.begin(), flat.begin() + static_cast<long>(w)), B(flat.begin() + static_cast<long>(w), flat.end());
  // Statements of A that only feed B (flash attention's V load) move to the front of B. A nest of
  // copies that feeds both (paged decode's `if j * P + jj < pages: copy K page; copy V page`) is
  // split first: the copies into tiles B uses move, the others stay (the loops, ifs and lets are
  // repeated around each part). The lets of A a moved statement uses are substituted into it.
  std::vector<Stmt> A, moved;
  {
    TileAccess b0;
    for (const auto& x : B) b0.visit(x);
    auto feeds = [&](Node n) { return n->scope != Scope::global && (b0.reads.count(n) || b0.writes.count(n)); };
    std::vector<Stmt> split;
    for (const auto& x : A0) {
      TileAccess t;
      t.visit(x);
      bool to_b = false, to_a = false;
      for (Node n : t.writes) (feeds(n) ? to_b : to_a) = true;
      if (to_b && to_a && x->kind != StmtKind::Copy && copy_nest(x)) {
        split.push_back(restrict_copies(x, [&](Node n) { return !feeds(n); }));
        split.push_back(restrict_copies(x, feeds));
      } else {
        split.push_back(x);
      }
    }
    A0 = std::move(split);
    std::vector<TileAccess> acc(A0.size());
    std::vector<bool> moving(A0.size());
    for (size_t i = 0; i < A0.size(); ++i) {
      acc[i].visit(A0[i]);
      bool feeds_b = false;
      for (Node n : acc[i].writes) feeds_b |= feeds(n);
      moving[i] = feeds_b && A0[i]->kind != StmtKind::Sync && A0[i]->kind != StmtKind::Let;
    }
    std::vector<std::pair<ir::Var, Expr>> lets;  // A's lets so far, their values substituted
    for (size_t i = 0; i < A0.size(); ++i) {
      if (A0[i]->kind == StmtKind::Let) {
        auto* l = ir::as<ir::LetNode>(A0[i]);
        lets.emplace_back(l->var, ir::substitute(l->value, lets));
      }
      if (!moving[i]) {
        A.push_back(A0[i]);
        continue;
      }
      for (size_t j = i + 1; j < A0.size(); ++j) {
        if (moving[j]) continue;
        for (Node n : acc[i].writes)
          if (acc[j].reads.count(n) || acc[j].writes.count(n)) return s;
        for (Node n : acc[j].writes)
          if (acc[i].reads.count(n)) return s;
      }
      moved.push_back(ir::substitute(A0[i], lets));
    }
    B.insert(B.begin(), moved.begin(), moved.end());
  }
  TileAccess a, b;
  std::unordered_set<const ir::VarNode*> a_defs;
  bool work = false;
  for (const auto& x : A) {
    a.visit(x);
    if (x->kind == StmtKind::Let) a_defs.insert(ir::as<ir::LetNode>(x)->var.get());
    if (x->kind == StmtKind::Alloc) return s;
    if (x->kind != StmtKind::Let && x->kind != StmtKind::Sync) work = true;
  }
  for (const auto& x : B) b.visit(x);
  if (!work) return s;
  auto conflict = [](const std::unordered_set<Node>& x, const std::unordered_set<Node>& y) {
    for (Node n : x)
      if (n->scope != Scope::global && y.count(n)) return true;
    return false;
  };
  if (conflict(a.writes, b.reads) || conflict(a.writes, b.writes) || conflict(b.writes, a.reads)) return s;
  bool uses_a = false;
  for (const auto& x : B)
    ir::for_each_expr(x, [&](const Expr& e) { uses_a |= e->kind == ir::ExprKind::Var && a_defs.count(ir::as<ir::VarNode>(e)); });
  if (uses_a) return s;
  const ir::Span& sp = s->span;
  Expr end = ir::arith::add(f->min, f->extent);
  Stmt sa = std::make_shared<ir::IfNode>(ir::binary(BinOp::LT, f->var, end, sp), ir_seq(A, sp), nullptr, sp);
  // B runs kCubeLag iterations late: A(j + 1) .. A(j + kCubeLag) do not wait for P_j (see the header)
  Stmt sb = ir::substitute(ir_seq(B, sp), {{f->var, ir::binary(BinOp::Sub, f->var, C(kCubeLag), sp)}});
  sb = std::make_shared<ir::IfNode>(ir::binary(BinOp::GE, f->var, ir::arith::add(f->min, C(kCubeLag)), sp), sb,
                                    nullptr, sp);
  Stmt nb = std::make_shared<ir::SeqNode>(std::vector<Stmt>{sa, sb}, sp);
  return std::make_shared<ir::ForNode>(f->var, f->min, ir::arith::add(f->extent, C(kCubeLag)), f->for_kind,
                                       f->num_stages, nb, sp);
}

}  // namespace

bool skewed_cube_loop(const ir::Stmt& s) {
  if (!s || s->kind != ir::StmtKind::For || is_map(s)) return false;
  auto* f = ir::as<ir::ForNode>(s);
  if (f->body->kind != ir::StmtKind::Seq) return false;
  const auto& body = ir::as<ir::SeqNode>(f->body)->body;
  auto guard = [&](const ir::Stmt& x, ir::BinOp op) {
    if (x->kind != ir::StmtKind::If || ir::as<ir::IfNode>(x)->else_body) return false;
    const ir::Expr& c = ir::as<ir::IfNode>(x)->cond;
    if (c->kind != ir::ExprKind::Binary) return false;
    auto* b = ir::as<ir::BinaryNode>(c);
    return b->op == op && b->a->kind == ir::ExprKind::Var && ir::as<ir::VarNode>(b->a) == f->var.get();
  };
  return body.size() == 2 && guard(body[0], ir::BinOp::LT) && guard(body[1], ir::BinOp::GE);
}

ir::Kernel skew_cube_loops(const ir::Kernel& kernel, const target::Target&) {
  ir::Stmt vbody;
  rewrite_core_scope(kernel, ir::CoreKind::V, [&](const ir::Stmt& body, std::vector<ir::Stmt>&) { return vbody = body; });
  return rewrite_core_scope(kernel, ir::CoreKind::C, [&](const ir::Stmt& body, std::vector<ir::Stmt>&) {
    return skew(body, cross_flag_ids(body, ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2), vbody);
  });
}

}  // namespace tw::ascend
