// Facts about tiles shared by the cpu target's passes and codegen (see tile_facts.h).
#include "target/cpu/tile_facts.h"

#include "ir/functor.h"

namespace tw::cpu {

using namespace tw::ir;

// Structural conditions of a view: full 2-D tile <- global region of the same dtype whose
// innermost paired dim is contiguous when the tile's rows are longer than 1. A run-time extent
// takes its bound: the copy's fast path requires it whole, its masked path clips at it.
bool viewable_copy(const CopyNode& c, bool widening) {
  const Buffer& d = c.dst.buffer;
  auto shape = d->const_shape();
  const DTypeCode sc = c.src.buffer->dtype.code;
  const bool widens = widening && !c.atomic && d->dtype.code == DTypeCode::f32 &&
                      (sc == DTypeCode::bf16 || sc == DTypeCode::f16);
  if (c.src.buffer->scope != Scope::global || d->scope == Scope::global || (c.src.buffer->dtype != d->dtype && !widens) || !shape ||
      shape->size() != 2)
    return false;
  std::vector<int64_t> sext;
  for (size_t i = 0; i < 2; ++i) {
    auto st = as_const_int(c.dst.starts[i]), ex = as_const_int(c.dst.extents[i]);
    if (!st || *st != 0 || !ex || *ex != (*shape)[i]) return false;
  }
  for (const auto& e : c.src.extents) {
    auto x = extent_bound(e);  // a run-time extent min(C, e) counts as C: its rows past e are a tail
    if (!x) return false;
    sext.push_back(*x);
  }
  std::vector<int> sd;
  for (size_t i = 0; i < sext.size(); ++i)
    if (sext[i] != 1) sd.push_back(static_cast<int>(i));
  int nd = ((*shape)[0] != 1) + ((*shape)[1] != 1);
  if (static_cast<int>(sd.size()) != nd) return false;
  return (*shape)[1] == 1 || sd.back() == static_cast<int>(sext.size()) - 1;
}

const StoreNode* full_tile_map(const Stmt& s) {
  if (!s || s->kind != StmtKind::For) return nullptr;
  const auto& outer = *static_cast<const ForNode*>(s.get());
  if (outer.for_kind != ForKind::parallel || !outer.body || outer.body->kind != StmtKind::For) return nullptr;
  const auto& inner = *static_cast<const ForNode*>(outer.body.get());
  if (inner.for_kind != ForKind::parallel || !inner.body || inner.body->kind != StmtKind::Store) return nullptr;
  const auto* st = static_cast<const StoreNode*>(inner.body.get());
  const Buffer& t = st->buffer;
  auto shape = t->const_shape();
  auto mn0 = as_const_int(outer.min), mn1 = as_const_int(inner.min);
  auto e0 = as_const_int(outer.extent), e1 = as_const_int(inner.extent);
  if (t->scope == Scope::global || !shape || shape->size() != 2 || !mn0 || *mn0 != 0 || !mn1 || *mn1 != 0 || !e0 ||
      !e1 || (*shape)[0] != *e0 || (*shape)[1] != *e1 || st->indices.size() != 2 ||
      !is_var(st->indices[0], outer.var) || !is_var(st->indices[1], inner.var))
    return nullptr;
  bool other_read = false;
  for_each_expr(inner.body, [&](const Expr& e) {
    if (!e || e->kind != ExprKind::Load) return;
    const auto& l = *static_cast<const LoadNode*>(e.get());
    if (l.buffer == t && !(l.indices.size() == 2 && is_var(l.indices[0], outer.var) && is_var(l.indices[1], inner.var)))
      other_read = true;
  });
  return other_read ? nullptr : st;
}

const SelectNode* row_keep_map(const Stmt& s) {
  const StoreNode* st = full_tile_map(s);
  if (!st || st->value->kind != ExprKind::Select) return nullptr;
  const auto& sel = *static_cast<const SelectNode*>(st->value.get());
  // the kept value: t itself (full_tile_map: every load of t is t[i, j]), of t's dtype
  if (sel.t->kind != ExprKind::Load || static_cast<const LoadNode*>(sel.t.get())->buffer != st->buffer ||
      sel.t->dtype != st->buffer->dtype)
    return nullptr;
  const Var& col = static_cast<const ForNode*>(static_cast<const ForNode*>(s.get())->body.get())->var;
  bool ok = true;
  auto check = [&](const Expr& root, bool col_too) {
    for_each_expr(root, [&](const Expr& e) {
      if (e && e->kind == ExprKind::Load && static_cast<const LoadNode*>(e.get())->buffer == st->buffer) ok = false;
      if (col_too && is_var(e, col)) ok = false;
    });
  };
  check(sel.cond, true);
  check(sel.f, false);
  return ok ? &sel : nullptr;
}

bool used_after(const Kernel& k, const Stmt& s, const Buffer& t) {
  bool after = false, later_use = false;
  for_each_stmt(k->body, [&](const Stmt& x) {
    if (after && x->kind != StmtKind::Seq && x->kind != StmtKind::For && x->kind != StmtKind::If)
      later_use |= references(x, t);
    if (x.get() == s.get()) after = true;
  });
  return later_use;
}

bool referenced_except(const Kernel& k, const std::unordered_set<const StmtNode*>& allowed, const Buffer& b) {
  struct V : Visitor {
    const std::unordered_set<const StmtNode*>& allowed;
    const Buffer& b;
    bool hit = false;
    V(const std::unordered_set<const StmtNode*>& a, const Buffer& u) : allowed(a), b(u) {}
    void visit(const Stmt& s) override {
      if (!s || allowed.count(s.get()) || s->kind == StmtKind::Alloc) return;
      Visitor::visit(s);
    }
    using Visitor::visit;
    void visit_buffer(const Buffer& x) override { hit |= x == b; }
  } v(allowed, b);
  v.visit(k->body);
  return v.hit;
}

void for_each_seq(const Kernel& k, const std::function<void(const SeqNode&, const ForNode*)>& fn) {
  struct V : Visitor {
    const std::function<void(const SeqNode&, const ForNode*)>& f;
    const ForNode* loop = nullptr;
    explicit V(const std::function<void(const SeqNode&, const ForNode*)>& g) : f(g) {}
    void visit(const Stmt& s) override {
      if (!s) return;
      if (s->kind == StmtKind::Seq) f(*as<SeqNode>(s), loop);
      const ForNode* saved = loop;
      if (s->kind == StmtKind::For) loop = as<ForNode>(s);
      Visitor::visit(s);
      loop = saved;
    }
    using Visitor::visit;
  } v(fn);
  v.visit(k->body);
}

bool fusable(const Kernel& k, const ForNode* loop, const Buffer& t) {
  return !loop || loop_local_tiles(k, *loop).count(t.get()) > 0;
}

Kernel annotate(const Kernel& k, const std::unordered_map<const StmtNode*, Annotation>& marks) {
  if (marks.empty()) return k;
  struct M : Mutator {
    const std::unordered_map<const StmtNode*, Annotation>& marks;
    explicit M(const std::unordered_map<const StmtNode*, Annotation>& m) : marks(m) {}
    using Mutator::mutate;
    Stmt mutate(const Stmt& s) override {
      if (!s) return s;
      Stmt m;
      if (s->kind == StmtKind::Seq) {  // the base class would flatten nested sequences
        const auto& body = as<SeqNode>(s)->body;
        std::vector<Stmt> out;
        bool changed = false;
        for (const auto& c : body) {
          out.push_back(mutate(c));
          changed |= out.back() != c;
        }
        m = changed ? std::make_shared<SeqNode>(std::move(out), s->span) : s;
      } else {
        m = Mutator::mutate(s);
      }
      if (m != s)  // rebuilt: keep the annotations already decided
        for (const auto& a : s->annotations) m = with_annotation(m, a);
      auto it = marks.find(s.get());
      return it == marks.end() ? m : with_annotation(m, it->second);
    }
  } mut(marks);
  return mut.mutate_kernel(k);
}

Kernel annotate_tiles(const Kernel& k, const std::string& name,
                      const std::unordered_map<const void*, std::vector<int64_t>>& args) {
  std::unordered_map<const StmtNode*, Annotation> marks;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::Alloc) return;
    auto it = args.find(as<AllocNode>(s)->buffer.get());
    if (it != args.end()) marks.emplace(s.get(), Annotation{name, it->second});
  });
  return annotate(k, marks);
}

Kernel annotate_tiles(const Kernel& k, const std::string& name, const std::unordered_map<const void*, int64_t>& args) {
  std::unordered_map<const void*, std::vector<int64_t>> v;
  for (const auto& [b, x] : args) v[b] = {x};
  return annotate_tiles(k, name, v);
}

}  // namespace tw::cpu
