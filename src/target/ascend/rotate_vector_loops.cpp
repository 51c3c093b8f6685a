#include "target/ascend/rotate_vector_loops.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/ascend/core_split.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/skew_cube_loops.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Buffer;
using ir::Expr;
using ir::Scope;
using ir::Stmt;
using ir::StmtKind;
using Node = const ir::BufferNode*;

std::string key(Node n) { return n->name + "@" + std::string(ir::scope_name(n->scope)); }

// The non-GM tiles a statement reads and writes, by name and scope.
struct Keys {
  std::unordered_set<std::string> reads, writes;
  explicit Keys(const Stmt& x) {
    TileAccess a;
    a.visit(x);
    for (Node n : a.reads)
      if (n->scope != Scope::global) reads.insert(key(n));
    for (Node n : a.writes)
      if (n->scope != Scope::global) writes.insert(key(n));
  }
  Keys() = default;
  void add(const Keys& o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
  }
};
bool meet(const std::unordered_set<std::string>& x, const std::unordered_set<std::string>& y) {
  for (const auto& n : x)
    if (y.count(n)) return true;
  return false;
}

// Whether every statement of the Cube body `cube` that sets one of ids is in a Cube loop
// skew_cube_loops skewed.
bool set_in_skewed_loops(const Stmt& cube, const std::unordered_set<int>& ids) {
  if (!cube) return true;
  if (cube->kind == StmtKind::Seq) {
    for (const auto& c : ir::as<ir::SeqNode>(cube)->body)
      if (!set_in_skewed_loops(c, ids)) return false;
    return true;
  }
  bool sets = false;
  ir::for_each_stmt(cube, [&](const Stmt& x) {
    if (x->kind != StmtKind::Sync) return;
    auto* y = ir::as<ir::SyncNode>(x);
    auto id = ir::as_const_int(y->id);
    sets |= y->sync == ir::SyncKind::set_cross_flag && id && ids.count(static_cast<int>(*id));
  });
  return !sets || skewed_cube_loop(cube);
}

// sent: the ids the vector code sets for Vector -> Cube hand-offs; c2v: the ids it waits on for
// Cube -> Vector hand-offs. New tiles are appended to allocs. cube: the Cube scope's body after
// skew_cube_loops, or nullptr to ask whether the loop rotates once its Cube loops are skewed.
Stmt rotate(const Stmt& s, const std::unordered_set<int>& sent_ids, const std::unordered_set<int>& c2v,
            std::vector<Stmt>& allocs, const Stmt& cube) {
  if (!s) return s;
  if (s->kind == StmtKind::Seq) {
    std::vector<Stmt> out;
    for (const auto& c : ir::as<ir::SeqNode>(s)->body) out.push_back(rotate(c, sent_ids, c2v, allocs, cube));
    return std::make_shared<ir::SeqNode>(std::move(out), s->span);
  }
  if (s->kind != StmtKind::For || is_map(s)) return s;
  auto* f = ir::as<ir::ForNode>(s);
  std::vector<Stmt> flat = flat_body(f->body);
  if (reuses_cross_ids(flat)) return s;  // hand-offs sharing flag ids in turn: their order stays
  size_t sent = flat.size(), w = flat.size();
  for (size_t i = 0; i < flat.size(); ++i) {
    if (sent == flat.size() && is_cross_sync(flat[i], ir::SyncKind::set_cross_flag, sent_ids)) sent = i;
    if (sent < i && is_cross_sync(flat[i], ir::SyncKind::wait_cross_flag, c2v)) w = i;
  }
  if (w == flat.size()) return s;
  std::vector<Stmt> A0(flat.begin(), flat.begin() + static_cast<long>(w)), B(flat.begin() + static_cast<long>(w), flat.end());
  std::vector<Stmt> body_allocs;  // tiles of the body (landing tiles): allocated first
  for (auto* part : {&A0, &B}) {
    std::vector<Stmt> rest;
    for (const auto& x : *part) (x->kind == StmtKind::Alloc ? body_allocs : rest).push_back(x);
    *part = rest;
  }
  // Statements of A that update what B updates (acc_o = acc_o * scale) move to the front of B.
  Keys kb;
  for (const auto& x : B) kb.add(Keys(x));
  std::vector<Keys> ka;
  for (const auto& x : A0) ka.emplace_back(x);
  std::vector<Stmt> A, moved;
  for (size_t i = 0; i < A0.size(); ++i) {
    bool joins_b = A0[i]->kind != StmtKind::Sync && meet(ka[i].writes, kb.writes);
    if (joins_b)
      for (size_t j = i + 1; j < A0.size(); ++j)
        if (meet(ka[i].writes, ka[j].reads) || meet(ka[i].writes, ka[j].writes) || meet(ka[j].writes, ka[i].reads))
          joins_b = false;
    (joins_b ? moved : A).push_back(A0[i]);
  }
  B.insert(B.begin(), moved.begin(), moved.end());
  Keys a, b;
  for (const auto& x : A) a.add(Keys(x));
  for (const auto& x : B) b.add(Keys(x));
  if (meet(b.writes, a.reads) || meet(b.writes, a.writes)) return s;
  // Variables A defines (paged decode's `jj = 0` of a one-page step) stay in A's `if`: B, which
  // runs L iterations later, must not use them.
  std::unordered_set<const ir::VarNode*> a_defs;
  for (const auto& x : A)
    if (x->kind == StmtKind::Let) a_defs.insert(ir::as<ir::LetNode>(x)->var.get());
  bool uses_a = false;
  for (const auto& x : B)
    ir::for_each_expr(x, [&](const Expr& e) { uses_a |= e->kind == ir::ExprKind::Var && a_defs.count(ir::as<ir::VarNode>(e)); });
  if (uses_a) return s;
  // A head that waits for a Cube tile (S_j) needs the Cube loop producing it skewed: B(j - L)
  // frees the slot of the Cube's result (P V) only after A(j) read S_j, which an unskewed Cube
  // loop writes after P V(j - 1), whose slot waits for B(j - 3): a deadlock from the fourth
  // iteration (deadlock40: a vector-written Q handed off in the loop keeps the Cube unskewed).
  std::unordered_set<int> a_waits;
  for (int id : cross_flag_ids(ir_seq(A, s->span), ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2))
    if (c2v.count(id)) a_waits.insert(id);
  if (!a_waits.empty() && !set_in_skewed_loops(cube, a_waits)) return s;
  // Tiles A writes and B reads: B(j - L) runs after A(j), so it reads A(j - L)'s value from the
  // last of a chain of copies.
  std::unordered_map<std::string, Buffer> prev;
  std::vector<Stmt> copies;
  std::unordered_map<std::string, Buffer> by_key;
  for (const auto& x : flat) {
    struct Bufs : ir::Visitor {
      std::unordered_map<std::string, Buffer>* m;
      void visit_buffer(const Buffer& bb) override { (*m)[key(bb.get())] = bb; }
      using ir::Visitor::visit;
    } bv;
    bv.m = &by_key;
    bv.visit(x);
  }
  for (const auto& k : a.writes) {
    if (!b.reads.count(k)) continue;
    auto it = by_key.find(k);
    if (it == by_key.end() || it->second->scope != Scope::UB) return s;
    const Buffer& x = it->second;
    // a chain of copies X_prev<L> <- ... <- X_prev <- X at the start of the iteration: B(j - L)
    // reads A(j - L)'s value from X_prev<L> (copied last first)
    Buffer last = x;
    std::vector<Stmt> chain;
    for (int64_t l = 1; l <= kVectorLag; ++l) {
      Buffer xp = ir::buffer(x->name + "_prev" + (l > 1 ? std::to_string(l) : ""), x->dtype, x->shape, x->scope, x->span);
      allocs.push_back(std::make_shared<ir::AllocNode>(xp, s->span));
      chain.insert(chain.begin(), std::make_shared<ir::CopyNode>(ir::full_region(last), ir::full_region(xp), s->span));
      last = xp;
    }
    prev[k] = last;
    copies.insert(copies.end(), chain.begin(), chain.end());
  }
  struct Rename : ir::Mutator {
    std::unordered_map<std::string, Buffer>* m;
    Buffer mutate_buffer(const Buffer& bb) override {
      auto it = m->find(key(bb.get()));
      return it == m->end() ? bb : it->second;
    }
  } rn;
  rn.m = &prev;
  const ir::Span& sp = s->span;
  Expr end = ir::arith::add(f->min, f->extent);
  Stmt sb = ir::substitute(rn.mutate(ir_seq(B, sp)), {{f->var, ir::binary(BinOp::Sub, f->var, C(kVectorLag), sp)}});
  sb = std::make_shared<ir::IfNode>(ir::binary(BinOp::GE, f->var, ir::arith::add(f->min, C(kVectorLag)), sp), sb,
                                    nullptr, sp);
  Stmt sa = std::make_shared<ir::IfNode>(ir::binary(BinOp::LT, f->var, end, sp), ir_seq(A, sp), nullptr, sp);
  std::vector<Stmt> nb = body_allocs;
  nb.insert(nb.end(), copies.begin(), copies.end());
  nb.push_back(sa);
  nb.push_back(sb);
  return std::make_shared<ir::ForNode>(f->var, f->min, ir::arith::add(f->extent, C(kVectorLag)), f->for_kind,
                                       f->num_stages, ir_seq(std::move(nb), sp), sp);
}

// Does s set one of ids (set_cross_flag on MTE3) anywhere inside?
bool sets_any(const Stmt& s, const std::unordered_set<int>& ids) {
  for (int id : cross_flag_ids(s, ir::SyncKind::set_cross_flag, ir::AscendPipe::MTE3))
    if (ids.count(id)) return true;
  return false;
}

bool hand_offs_rotate(const Stmt& s, const std::unordered_set<int>& ids, const std::unordered_set<int>& sent_ids,
                      const std::unordered_set<int>& c2v) {
  if (!s || !sets_any(s, ids)) return true;
  if (s->kind == StmtKind::Seq) {
    for (const auto& c : ir::as<ir::SeqNode>(s)->body)
      if (!hand_offs_rotate(c, ids, sent_ids, c2v)) return false;
    return true;
  }
  bool waits = false;  // a loop that never waits for the Cube cannot hold it up
  for (int id : cross_flag_ids(s, ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2)) waits |= c2v.count(id) > 0;
  if (!waits) return true;
  std::vector<Stmt> scratch;
  return s->kind == StmtKind::For && !is_map(s) && rotate(s, sent_ids, c2v, scratch, nullptr) != s;
}

}  // namespace

bool vector_hand_offs_rotate(const ir::Stmt& vbody, const std::unordered_set<int>& ids) {
  return hand_offs_rotate(vbody, ids, cross_flag_ids(vbody, ir::SyncKind::set_cross_flag, ir::AscendPipe::MTE3),
                          cross_flag_ids(vbody, ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2));
}

ir::Kernel rotate_vector_loops(const ir::Kernel& kernel, const target::Target&) {
  ir::Stmt cbody;
  rewrite_core_scope(kernel, ir::CoreKind::C, [&](const ir::Stmt& body, std::vector<ir::Stmt>&) { return cbody = body; });
  return rewrite_core_scope(kernel, ir::CoreKind::V, [&](const ir::Stmt& body, std::vector<ir::Stmt>& allocs) {
    return rotate(body, cross_flag_ids(body, ir::SyncKind::set_cross_flag, ir::AscendPipe::MTE3),
                  cross_flag_ids(body, ir::SyncKind::wait_cross_flag, ir::AscendPipe::MTE2), allocs, cbody);
  });
}

}  // namespace tw::ascend
