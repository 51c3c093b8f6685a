// pipeline_rows (see pipeline_rows.h).
#include "target/cpu/pipeline_rows.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

const ForNode* row_scalar_map(const Stmt& s, int64_t E0) {
  if (!s || s->kind != StmtKind::For) return nullptr;
  const auto* f = as<ForNode>(s);
  if (f->for_kind != ForKind::parallel || as_const_int(f->min) != std::optional<int64_t>(0) ||
      as_const_int(f->extent) != std::optional<int64_t>(E0) || !f->body)
    return nullptr;
  auto row_vec = [&](const Buffer& b, const std::vector<Expr>& idx) {  // [E0] at [i] or [E0, 1] at [i, 0]
    auto sh = b->const_shape();
    if (!sh || b->dtype.code != DTypeCode::f32 || b->scope == Scope::global || idx.empty() || !is_var(idx[0], f->var))
      return false;
    if (sh->size() == 1) return (*sh)[0] == E0 && idx.size() == 1;
    return sh->size() == 2 && (*sh)[0] == E0 && (*sh)[1] == 1 && idx.size() == 2 &&
           as_const_int(idx[1]) == std::optional<int64_t>(0);
  };
  bool ok = true;
  for (const auto& c : stmts_of(f->body)) {
    if (c->kind != StmtKind::Store) return nullptr;
    const auto* st = as<StoreNode>(c);
    ok = ok && row_vec(st->buffer, st->indices);
    for_each_expr(st->value, [&](const Expr& e) {
      if (e->kind == ExprKind::Load) ok = ok && row_vec(as<LoadNode>(e)->buffer, as<LoadNode>(e)->indices);
      if (e->kind == ExprKind::Var) ok = ok && e.get() == f->var.get();  // no other variable
    });
  }
  return ok ? f : nullptr;
}

namespace {

// The number of statements of the row pipeline starting at body[k0], 0 if none starts there.
size_t row_run(const std::vector<Stmt>& body, size_t k0) {
  struct Stage {
    const ReduceNode* rd = nullptr;  // row reductions, map + reduce pairs
    const StoreNode* st = nullptr;   // map + reduce, map + copy-out pairs
    const ForNode* outer = nullptr;
    const ForNode* inner = nullptr;
  };
  std::vector<Stage> stages;
  const CopyNode* cp = nullptr;
  int64_t E0 = -1, E1 = -1;
  auto tile_ok = [&](const Buffer& t) {
    auto sh = t->const_shape();
    if (!sh || sh->size() != 2 || t->dtype.code != DTypeCode::f32 || t->scope == Scope::global) return false;
    if (E0 < 0) E0 = (*sh)[0], E1 = (*sh)[1];
    return (*sh)[0] == E0 && (*sh)[1] == E1;
  };
  auto vec_ok = [&](const Buffer& b) {  // [E0] or [E0, 1] float32
    auto sh = b->const_shape();
    return sh && b->dtype.code == DTypeCode::f32 && b->scope != Scope::global && E0 >= 0 &&
           ((sh->size() == 1 && (*sh)[0] == E0) || (sh->size() == 2 && (*sh)[0] == E0 && (*sh)[1] == 1));
  };
  std::vector<const ForNode*> row_maps;
  size_t k = k0;
  while (k < body.size() && !cp) {
    const Stmt& s = body[k];
    if (!stages.empty() && row_scalar_map(s, E0)) {  // between passes (after one)
      row_maps.push_back(as<ForNode>(s));
      ++k;
      continue;
    }
    if (s->kind == StmtKind::Reduce) {
      const auto& rd = *as<ReduceNode>(s);
      if (rd.axis != 1 || rd.src == rd.dst || !tile_ok(rd.src) || !vec_ok(rd.dst)) break;
      stages.push_back({&rd});
      ++k;
      continue;
    }
    if (k + 1 >= body.size()) break;
    const StoreNode* st = full_tile_map(s);
    if (!st) break;
    const auto* outer = as<ForNode>(s);
    const auto* inner = as<ForNode>(outer->body);
    if (find_annotation(s, "fuse_copy_out")) {
      auto sh = *st->buffer->const_shape();
      if (!tile_ok(st->buffer) || sh[0] == 1 || sh[1] == 1) break;
      cp = as<CopyNode>(body[k + 1]);
      stages.push_back({nullptr, st, outer, inner});
    } else if (find_annotation(s, "fuse_reduce")) {
      const auto* rd = as<ReduceNode>(body[k + 1]);
      if (!tile_ok(st->buffer) || !vec_ok(rd->dst)) break;
      stages.push_back({rd, st, outer, inner});
    } else {
      break;
    }
    k += 2;
  }
  if (!cp || stages.size() < 2 || E0 < 2 || E1 < kOutChunk) return 0;
  // dependences: every access to a buffer the run writes is row-local; the destination is not read
  std::unordered_set<const void*> written;
  for (const auto& g : stages) {
    if (g.st) written.insert(g.st->buffer.get());
    if (g.rd) written.insert(g.rd->dst.get());
  }
  for (const ForNode* m : row_maps)
    for (const auto& c : stmts_of(m->body)) written.insert(as<StoreNode>(c)->buffer.get());
  const Buffer& G = cp->dst.buffer;
  bool ok = true;
  for (const auto& g : stages) {
    if (g.rd && g.rd->src == G) ok = false;
    if (!g.inner) continue;
    for_each_expr(g.inner->body, [&](const Expr& e) {
      if (!e || e->kind != ExprKind::Load) return;
      const auto& l = *static_cast<const LoadNode*>(e.get());
      if (l.buffer == G) ok = false;
      if (!written.count(l.buffer.get())) return;
      auto sh = *l.buffer->const_shape();
      bool row = !l.indices.empty() && is_var(l.indices[0], g.outer->var);
      if (sh.size() == 2 && sh[1] == E1 && E1 != 1) row = row && l.indices.size() == 2 && is_var(l.indices[1], g.inner->var);
      else if (sh.size() == 2) row = row && l.indices.size() == 2 && as_const_int(l.indices[1]) == std::optional<int64_t>(0);
      else row = row && l.indices.size() == 1;
      ok = ok && row;
    });
  }
  return ok ? k - k0 : 0;
}

}  // namespace

Kernel pipeline_rows(const Kernel& k) {
  std::unordered_map<const StmtNode*, Annotation> marks;
  for_each_seq(k, [&](const SeqNode& seq, const ForNode* loop) {
    if (loop) return;
    const auto& body = seq.body;
    for (size_t i = 0; i < body.size();) {
      if (size_t n = row_run(body, i)) {
        marks.emplace(body[i + n - 1].get(), Annotation{"row_pipeline", {static_cast<int64_t>(n)}});
        i += n;
      } else if (find_annotation(body[i], "fuse_copy_out") || find_annotation(body[i], "fuse_reduce")) {
        i += 2;  // a fused pair
      } else {
        ++i;
      }
    }
  });
  return annotate(k, marks);
}

}  // namespace tw::cpu
