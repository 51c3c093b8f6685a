#include "target/ascend/unroll_loops.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "target/ascend/pass_util.h"
#include "target/ascend/rename_defs.h"

namespace tw::ascend {

using ir::Buffer;
using ir::Expr;
using ir::Stmt;

namespace {

// One copy of an unrolled body: RenameDefs' fresh variables, and a fresh tile for each one the body
// allocates inside a loop (hoisted: the allocations taken out of the body, kept as they are).
struct Copy : RenameDefs {
  const std::unordered_set<const ir::BufferNode*>& hoisted;
  bool first;
  int& tiles_made;  // of the whole pass: a fresh tile's name is its own (the AscendC declares each tile by name)
  std::unordered_map<const ir::BufferNode*, Buffer> fresh_tiles;
  Copy(const std::unordered_set<const ir::BufferNode*>& h, bool is_first, int& made, std::string sfx)
      : RenameDefs(std::move(sfx)), hoisted(h), first(is_first), tiles_made(made) {}

  using RenameDefs::mutate;
  Buffer mutate_buffer(const Buffer& b) override {
    auto it = fresh_tiles.find(b.get());
    return it == fresh_tiles.end() ? b : it->second;
  }
  Stmt mutate(const Stmt& s) override {
    if (s && s->kind == ir::StmtKind::Alloc) {
      const Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
      if (hoisted.count(b.get())) return nullptr;  // before the copies
      if (first) return s;
      auto nb = std::make_shared<ir::BufferNode>(*b);
      nb->name = b->name + "_u" + std::to_string(++tiles_made);
      fresh_tiles[b.get()] = nb;
      return std::make_shared<ir::AllocNode>(nb, s->span);
    }
    if (s && s->kind == ir::StmtKind::Let) {  // a let the copy makes constant: the constant (kk = 2 * k2 + 1 -> 3)
      auto* n = ir::as<ir::LetNode>(s);
      Expr v = simp(mutate(n->value));
      if (ir::as_const_int(v) && v->dtype == n->var->dtype) {
        vars[n->var.get()] = v;
        return nullptr;
      }
    }
    return RenameDefs::mutate(s);
  }
};

// The allocations of s outside any loop (the loops' own stay in them).
void allocs_outside_loops(const Stmt& s, std::vector<Stmt>& out) {
  if (!s) return;
  switch (s->kind) {
    case ir::StmtKind::Alloc: out.push_back(s); return;
    case ir::StmtKind::Seq:
      for (const auto& x : ir::as<ir::SeqNode>(s)->body) allocs_outside_loops(x, out);
      return;
    case ir::StmtKind::If: {
      auto* n = ir::as<ir::IfNode>(s);
      allocs_outside_loops(n->then_body, out);
      allocs_outside_loops(n->else_body, out);
      return;
    }
    default: return;
  }
}

struct Unroll : ir::Mutator {
  int tiles_made = 0;
  using ir::Mutator::mutate;
  Stmt mutate(const Stmt& s) override {
    Stmt m = ir::Mutator::mutate(s);  // the loops inside first
    if (!m || m->kind != ir::StmtKind::For) return m;
    auto* f = ir::as<ir::ForNode>(m);
    if (f->for_kind != ir::ForKind::unroll) return m;
    const int64_t n = *ir::as_const_int(f->extent);  // the verifier: constant, at most 1024 copies in all
    std::vector<Stmt> out;
    allocs_outside_loops(f->body, out);
    std::unordered_set<const ir::BufferNode*> hoisted;
    for (const auto& a : out) hoisted.insert(ir::as<ir::AllocNode>(a)->buffer.get());
    for (int64_t i = 0; i < n; ++i) {
      Copy c(hoisted, i == 0, tiles_made, "_u" + std::to_string(i));
      c.vars[f->var.get()] = simp(ir::binary(ir::BinOp::Add, f->min, C(i)));
      for (const auto& x : ir::stmts_of(c.mutate(f->body))) out.push_back(x);
    }
    return std::make_shared<ir::SeqNode>(std::move(out), m->span);
  }
};

}  // namespace

ir::Kernel unroll_loops(const ir::Kernel& kernel) { return Unroll().mutate_kernel(kernel); }

}  // namespace tw::ascend
