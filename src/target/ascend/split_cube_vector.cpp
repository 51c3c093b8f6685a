#include "target/ascend/split_cube_vector.h"
#include "target/ascend/core_split.h"
#include "target/ascend/pass_util.h"

#include <algorithm>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/printer.h"
#include "transform/simplify.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Buffer;
using ir::Expr;
using ir::Region;
using ir::Scope;
using ir::Span;
using ir::Stmt;
using ir::StmtKind;
using ir::Var;

using Node = const ir::BufferNode*;


// The working alternative for gemms into part of a tile the vector code also writes (docs/ascend.md
// "Gemms into part of a fragment").
constexpr const char* kWholeFragment =
    "make each gemm write a whole fragment: give each row group its own program in the grid (as "
    "examples/paged_attention.py's paged_decode does per kv head), or gemm into the whole tile";

bool portable(Scope s) { return s == Scope::shared || s == Scope::fragment; }

std::vector<int64_t> shape_of(const Buffer& b) { return *b->const_shape(); }
bool is_full(const Region& r) {
  auto sh = r.buffer->const_shape();
  if (!sh) return false;
  for (size_t d = 0; d < sh->size(); ++d) {
    auto s = ir::as_const_int(r.starts[d]);
    auto e = ir::as_const_int(r.extents[d]);
    if (!s || !e || *s != 0 || *e != (*sh)[d]) return false;
  }
  return true;
}
Region with_buffer(const Region& r, const Buffer& b) { return Region{b, r.starts, r.extents}; }

// A tile this pass makes of tile `of` (an incarnation, P V's partial, a landing or cast tile, each
// AIV's part of the rows when halve is 2): of's dims, dim 0 divided by halve. The one place that
// sets BufferNode::part_of: the user's tile it stands for and how many parts its rows are in.
Buffer part_tile(const Buffer& of, std::string name, ir::DType t, Scope sc, const Span& sp, int64_t halve = 1) {
  auto sh = of->shape;
  if (halve > 1) sh[0] = C(*ir::as_const_int(sh[0]) / halve);
  auto b = std::make_shared<ir::BufferNode>(std::move(name), t, std::move(sh), sc, sp);
  b->part_of = of->part_of.tile.empty() ? ir::TilePart{of->name, halve}
                                        : ir::TilePart{of->part_of.tile, of->part_of.row_parts * halve};
  return b;
}

// Replaces buffers by identity.
struct Rebuffer : ir::Mutator {
  std::unordered_map<Node, Buffer> map;
  Buffer mutate_buffer(const Buffer& b) override {
    auto it = map.find(b.get());
    return it == map.end() ? b : it->second;
  }
};

enum class Side { None, C, V, Both };

// The unit that holds a non-mixed copy operand: UB -> Vector, Cube memories -> Cube, else None.
Side side_of(const Buffer& o) { return o->scope == Scope::UB ? Side::V : is_cube_scope(o->scope) ? Side::C : Side::None; }

// A copy that crosses between the units: L0C / L1 <-> UB.
bool is_cross(const Stmt& s) {
  if (s->kind != StmtKind::Copy) return false;
  auto* c = ir::as<ir::CopyNode>(s);
  Scope a = c->src.buffer->scope, b = c->dst.buffer->scope;
  return (is_cube_scope(a) && b == Scope::UB) || (a == Scope::UB && is_cube_scope(b));
}

// A tile incarnation's name and scope ("acc_s@UB"): one per core a tile lives on.
std::string key(const Buffer& b) { return b->name + "@" + std::string(ir::scope_name(b->scope)); }

class Splitter {
 public:
  Splitter(const ir::Kernel& k, const target::Target& t) : k_(k), t_(t) {}

  ir::Kernel run() {
    find_mixed();
    bool cube = false, vec = !mixed_.empty();
    ir::for_each_stmt(k_->body, [&](const Stmt& s) {
      if (s->kind == StmtKind::Alloc) {
        Scope sc = ir::as<ir::AllocNode>(s)->buffer->scope;
        if (is_cube_scope(sc)) cube = true;
        if (sc == Scope::UB) vec = true;
      }
      // a gemm whose tiles are all mixed (both operands and the accumulator written or read by vector code:
      // CLIP's logits of rows normalised on the Vector core, port38 F4) has Cube work but no Cube-only tile
      if (s->kind == StmtKind::Gemm) cube = true;
      if (s->kind == StmtKind::CoreScope || s->kind == StmtKind::Sync)
        throw ir::Error("T.Scope and Ascend flags belong to expert-mode kernels", s->span,
                        "write the kernel with T.Kernel(n, is_npu=True), or leave placement and flags to the compiler");
    });
    if (!cube || !vec) return k_;  // one unit: map_grid wraps it in its scope
    if (k_->block_vars.empty())
      throw ir::Error("kernel " + q(k_->name) + " has no launch grid", k_->span, "internal: infer_grid runs first");
    vid_ = ir::var("vid", ir::kIndexType, k_->span);
    collect_accesses(k_->body);
    State st;
    Stmt body = walk(k_->body, st);
    body = row_split(body);
    return project(body);
  }

 private:
  // ---------------------------------------------------------------------------------------------
  // 1. Mixed tiles and their incarnations
  struct Mixed {
    Buffer orig, cube, vec;
  };
  using State = std::unordered_map<Node, Side>;
  // The tiles of a State or a tile set by name: the containers' own order follows the heap's
  // addresses, and it decides the order of hand-off copies and which tile an error names (h-determ35).
  template <class C>
  static std::vector<Node> by_name(const C& c) {
    std::vector<Node> v;
    for (const auto& x : c) {
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Node>) v.push_back(x);
      else v.push_back(x.first);
    }
    std::stable_sort(v.begin(), v.end(), [](Node a, Node b) { return a->name < b->name; });
    return v;
  }

  void find_mixed() {
    std::unordered_set<Node> acc, opd;
    ir::for_each_stmt(k_->body, [&](const Stmt& s) {
      if (s->kind != StmtKind::Gemm) return;
      auto* g = ir::as<ir::GemmNode>(s);
      opd.insert(g->a.buffer.get());
      opd.insert(g->b.buffer.get());
      acc.insert(g->c.buffer.get());
    });
    ir::for_each_stmt(k_->body, [&](const Stmt& s) {
      if (s->kind != StmtKind::Alloc) return;
      const Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
      if (!portable(b->scope)) return;
      Scope cs = acc.count(b.get()) ? Scope::L0C : Scope::L1;
      Mixed m;
      m.orig = b;
      m.cube = part_tile(b, b->name, b->dtype, cs, b->span);
      m.vec = part_tile(b, b->name + "_ub", b->dtype, Scope::UB, b->span);
      mixed_[b.get()] = m;
    });
  }
  bool mixed(const Buffer& b) const { return mixed_.count(b.get()) > 0; }

  // Program-order list of (statement, mixed tile, side of the access); None = either side.
  void collect_accesses(const Stmt& root) {
    ir::for_each_stmt(root, [&](const Stmt& s) {
      auto add = [&](const Buffer& b, Side sd) {
        if (mixed(b)) order_.push_back({s.get(), b.get(), sd});
      };
      switch (s->kind) {
        case StmtKind::Gemm: {
          auto* g = ir::as<ir::GemmNode>(s);
          add(g->a.buffer, Side::C);
          add(g->b.buffer, Side::C);
          add(g->c.buffer, Side::C);
          break;
        }
        case StmtKind::Fill: add(ir::as<ir::FillNode>(s)->dst.buffer, Side::None); break;
        case StmtKind::Reduce:
          add(ir::as<ir::ReduceNode>(s)->src, Side::V);
          add(ir::as<ir::ReduceNode>(s)->dst, Side::V);
          break;
        case StmtKind::Copy: {
          auto* c = ir::as<ir::CopyNode>(s);
          add(c->src.buffer, side_of(c->dst.buffer));
          add(c->dst.buffer, side_of(c->src.buffer));
          break;
        }
        case StmtKind::Store: add(ir::as<ir::StoreNode>(s)->buffer, Side::V); break;
        case StmtKind::Seq:
        case StmtKind::For:
        case StmtKind::If:
        case StmtKind::Let:
        case StmtKind::Alloc:
        case StmtKind::CoreScope:
        case StmtKind::Sync: break;  // loads of Let / If / For expressions: see below
      }
      if (s->kind == StmtKind::Store || s->kind == StmtKind::Copy || s->kind == StmtKind::Fill)
        ir::for_each_expr(s, [&](const Expr& e) {
          if (e->kind == ir::ExprKind::Load) add(ir::as<ir::LoadNode>(e)->buffer, Side::V);
        });
    });
  }
  // The side of the next access to b after statement s (default: vector).
  Side next_side(const ir::StmtNode* s, Node b) {
    size_t i = 0;
    while (i < order_.size() && !(order_[i].s == s && order_[i].b == b)) ++i;
    for (++i; i < order_.size(); ++i)
      if (order_[i].b == b && order_[i].side != Side::None) return order_[i].side;
    return Side::V;
  }

  static bool covers(Side have, Side need) { return have == need || have == Side::Both; }

  // Makes b's value available on side `need`, appending a hand-off copy to out when needed.
  void ensure(const Buffer& b, Side need, State& st, std::vector<Stmt>& out, const Span& sp) {
    Side& have = st[b.get()];
    if (have == Side::None || covers(have, need)) {
      if (have == Side::None) have = need;
      return;
    }
    const Mixed& m = mixed_.at(b.get());
    if (need == Side::V) {
      // port35 F3: a Cube operand tile (L1) has no path back to the Vector core (L1 -> GM does not exist);
      // before, the hand-off was built and the verifier said "no data path L1 -> global" at the loop
      if (m.cube->scope == Scope::L1)
        throw ir::Error("tile " + q(b->name) + " holds its value on the Cube (a gemm operand in L1: the T.fill / "
                        "T.clear or T.copy that wrote it last ran there) where the vector code needs it (a loop whose "
                        "vector code writes the tile starts each iteration on the vector side), and the 910B has no "
                        "path from L1 back to the Vector core",
                        sp, "give the tile its value from the vector side: T.clear a float32 fragment and T.copy it "
                            "into " + q(b->name) + " (that copy is the hand-off to the Cube)");
      out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(m.cube), ir::full_region(m.vec), sp));
    } else {
      if (m.cube->scope == Scope::L0C)
        throw ir::Error("tile " + q(b->name) + " is updated by the vector code and then read by the Cube, "
                        "but its Cube copy is a gemm accumulator (L0C), which cannot be loaded from GM",
                        sp, "accumulate the gemm into a fresh fragment and add it to " + q(b->name) +
                                " in a T.Parallel loop, or copy the tile into a separate operand tile");
      out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(m.vec), ir::full_region(m.cube), sp));
    }
    have = Side::Both;
  }
  Buffer inc(const Buffer& b, Side sd) const {
    auto it = mixed_.find(b.get());
    if (it == mixed_.end()) return b;
    return sd == Side::C ? it->second.cube : it->second.vec;
  }

  Stmt walk(const Stmt& s, State& st) {
    if (!s) return s;
    const Span& sp = s->span;
    std::vector<Stmt> out;
    switch (s->kind) {
      case StmtKind::Seq: {
        for (const auto& c : ir::as<ir::SeqNode>(s)->body) out.push_back(walk(c, st));
        return std::make_shared<ir::SeqNode>(std::move(out), sp);
      }
      case StmtKind::For: {
        auto* f = ir::as<ir::ForNode>(s);
        if (f->for_kind == ir::ForKind::parallel) return map_stmt(s, st);
        State entry = st;
        Stmt body;
        State fin;
        TileAccess body_acc;  // a tile the body never writes is loop-invariant (its hand-off moves before the loop)
        body_acc.visit(f->body);
        for (int round = 0;; ++round) {
          State in = entry;
          body = walk(f->body, in);
          bool stable = true;
          for (Node b : by_name(in)) {
            Side have = in.at(b);
            Side e = entry.count(b) ? entry[b] : Side::None;
            if (e == have) continue;
            Side m = e == Side::None ? have : have == Side::Both ? e : e == Side::Both ? have : Side::None;
            // a gemm result the body works on with vector code (a serial loop over its rows): it
            // moves to the vector side before the loop, and the body runs there (a gemm into it
            // after the vector code in the body runs too: test_ascend_s23.py)
            if (e == Side::C && have == Side::V) m = Side::V;
            // a tile written on one unit before the loop that the body hands to the other and never
            // writes (a prescaled Q read by the Cube's Q K^T every key block): handed over once,
            // before the loop, so the loop has no hand-off for it (skew_cube_loops / rotate_vector_loops
            // then pipeline it as a kernel that copies Q: handoff41). Only where that hand-off exists
            // (to an operand in L1, from an accumulator in L0C): else ensure()'s error stays at the
            // statement that needs the tile.
            const bool l0c = mixed_.at(b).cube->scope == Scope::L0C;
            if (have == Side::Both && (e == Side::V ? !l0c : e == Side::C && l0c) && !body_acc.writes.count(b))
              m = Side::Both;
            if (m == Side::None)
              throw ir::Error("tile " + q(mixed_.at(b).orig->name) + " is on the " + (e == Side::C ? "Cube" : "Vector") +
                                  " side at the start of this loop but on the other side at the end of its body",
                              sp, "write the tile on one unit per iteration: element-wise work on a gemm result "
                                  "as one map (T.Parallel, or a loop nest whose statements store t[i, j] and "
                                  "read the tiles they write only at [i, j]); other loops (a scan along a row): "
                                  "copy the tile before the loop with a map (for i, j in T.Parallel(..): d[i, j] = "
                                  "t[i, j]) and loop over that copy");
            if (m != e) {
              entry[b] = m;
              stable = false;
            }
          }
          if (stable || round > 4) {
            fin = in;
            break;
          }
        }
        for (Node b : by_name(entry)) {
          Side need = entry.at(b), have = st.count(b) ? st.at(b) : Side::None;
          if (need == Side::Both)  // a loop-invariant tile (above) on one unit: the other gets it here
            need = have == Side::C ? Side::V : have == Side::V ? Side::C : Side::None;
          if (need == Side::C || need == Side::V) ensure(mixed_.at(b).orig, need, st, out, sp);
        }
        for (auto& [b, have] : fin) st[b] = have;
        out.push_back(
            std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, sp, f->user_extent));
        return ir_seq(std::move(out), sp);
      }
      case StmtKind::If: {
        auto* n = ir::as<ir::IfNode>(s);
        State a = st, b = st;
        Stmt t = walk(n->then_body, a);
        Stmt e = n->else_body ? walk(n->else_body, b) : nullptr;
        // Join: a tile's value after the if is on the units that hold it after both branches (a
        // branch that hands it over keeps the other unit's copy valid: Both meets X in X; a tile
        // no branch or only one branch wrote has that branch's side).
        auto side = [](State& m, Node x) { return m.count(x) ? m[x] : Side::None; };
        State joined = a;
        for (auto& [x, sd] : b) joined.emplace(x, sd);
        for (Node x : by_name(joined)) {
          Side& sd = joined.at(x);
          Side p = side(a, x), r = side(b, x);
          if (p == r) continue;
          if (p == Side::None || p == Side::Both) sd = r;
          else if (r == Side::None || r == Side::Both) sd = p;
          else
            throw ir::Error("tile " + q(mixed_.at(x).orig->name) + " ends on different units in the two branches of this if",
                            sp, "write the tile on the same unit (Cube gemm or vector code) in both branches");
        }
        st = joined;
        return std::make_shared<ir::IfNode>(n->cond, t, e, sp);
      }
      case StmtKind::Let: {
        // A GM tensor element is read by each core's scalar unit (the let is replicated on both
        // sides); a tile lives on one unit, so its elements cannot feed both. An element of a UB tile
        // (no Cube incarnation: lower_scalar_math's one-element tile of T.rsqrt(a)) is the Vector
        // core's alone: the let is on the Vector side only, and project() refuses it where the Cube
        // code uses its variable (review37 R3).
        ir::for_each_expr(s, [&](const Expr& e) {
          if (e->kind != ir::ExprKind::Load || ir::as<ir::LoadNode>(e)->buffer->scope == Scope::global) return;
          const Buffer& b = ir::as<ir::LoadNode>(e)->buffer;
          const std::string& name = ir::as<ir::LetNode>(s)->var->name;
          const bool vector = b->scope == Scope::UB && !mixed(b);
          std::string msg = "let " + q(name) + " reads element " + ir::print(e) + " of tile " + q(b->name) +
                            " as a scalar: in a kernel with Cube and Vector code the let runs on " +
                            (vector ? "the Vector core, where the tile lives, and the Cube code uses " + q(name)
                                    : std::string("both cores, and a tile lives on one of them"));
          if (!vector) throw ir::Error(msg, sp, v_let_hint());
          v_lets_.emplace(ir::as<ir::LetNode>(s)->var.get(), std::make_pair(msg, sp));
        });
        return s;
      }
      case StmtKind::Alloc: {
        auto* a = ir::as<ir::AllocNode>(s);
        auto it = mixed_.find(a->buffer.get());
        if (it == mixed_.end()) return s;
        out.push_back(std::make_shared<ir::AllocNode>(it->second.cube, sp));
        out.push_back(std::make_shared<ir::AllocNode>(it->second.vec, sp));
        return ir_seq(std::move(out), sp);
      }
      case StmtKind::Store: return map_stmt(s, st);
      case StmtKind::Reduce: {
        auto* r = ir::as<ir::ReduceNode>(s);
        if (mixed(r->src)) ensure(r->src, Side::V, st, out, sp);
        if (mixed(r->dst)) {
          if (!r->clear) ensure(r->dst, Side::V, st, out, sp);
          st[r->dst.get()] = Side::V;
        }
        auto v = std::make_shared<ir::ReduceNode>(inc(r->src, Side::V), inc(r->dst, Side::V), r->reduce_kind, r->axis,
                                                  r->clear, sp);
        v->annotations = r->annotations;  // nan_unobserved (mark_nan_unobserved)
        out.push_back(std::move(v));
        return ir_seq(std::move(out), sp);
      }
      case StmtKind::Fill: {
        auto* f = ir::as<ir::FillNode>(s);
        if (!mixed(f->dst.buffer)) return s;
        const Buffer& b = f->dst.buffer;
        Side sd = next_side(s.get(), b.get());
        if (!is_full(f->dst)) ensure(b, sd, st, out, sp);
        st[b.get()] = sd;
        out.push_back(std::make_shared<ir::FillNode>(with_buffer(f->dst, inc(b, sd)), f->value, sp));
        return ir_seq(std::move(out), sp);
      }
      case StmtKind::Gemm: return gemm(s, st);
      case StmtKind::Copy: return copy(s, st);
      case StmtKind::CoreScope:
      case StmtKind::Sync: break;  // rejected by run()
    }
    return s;
  }

  // A T.Parallel nest that copies a whole tile with a conversion (`s16[i, j] = s[i, j]`, or
  // `T.cast(s[i, j], "float16")`): that copy, else nullptr.
  static std::shared_ptr<ir::CopyNode> cast_map_copy(const Stmt& s) {
    std::vector<const ir::ForNode*> loops;
    Stmt b = s;
    for (; b->kind == StmtKind::For; b = ir::as<ir::ForNode>(b)->body) {
      auto* f = ir::as<ir::ForNode>(b);
      auto m = ir::as_const_int(f->min);
      if (f->for_kind != ir::ForKind::parallel || !m || *m != 0) return nullptr;
      loops.push_back(f);
    }
    if (b->kind != StmtKind::Store) return nullptr;
    auto* st = ir::as<ir::StoreNode>(b);
    Expr v = st->value;
    if (v->kind == ir::ExprKind::Cast && v->dtype == st->buffer->dtype) v = ir::as<ir::CastNode>(v)->value;
    if (v->kind != ir::ExprKind::Load) return nullptr;
    auto* ld = ir::as<ir::LoadNode>(v);
    auto ds = st->buffer->const_shape(), ss = ld->buffer->const_shape();
    if (!ds || !ss || *ds != *ss || ds->size() != loops.size() || st->indices.size() != loops.size() ||
        ld->indices.size() != loops.size())
      return nullptr;
    for (size_t d = 0; d < loops.size(); ++d) {
      auto e = ir::as_const_int(loops[d]->extent);
      for (const Expr& x : {st->indices[d], ld->indices[d]})
        if (x->kind != ir::ExprKind::Var || ir::as<ir::VarNode>(x) != loops[d]->var.get()) return nullptr;
      if (!e || *e != (*ds)[d]) return nullptr;
    }
    return std::make_shared<ir::CopyNode>(ir::full_region(ld->buffer), ir::full_region(st->buffer), s->span);
  }

  // A T.Parallel nest or an element store: vector code.
  Stmt map_stmt(const Stmt& s, State& st) {
    if (auto c = cast_map_copy(s); c && mixed(c->src.buffer) && user_handoff(*c, st[c->src.buffer.get()]))
      return copy(c, st);  // the user's conversion of a gemm result on the Cube: the hand-off itself
    TileAccess acc;
    acc.visit(s);
    std::vector<Stmt> out;
    Rebuffer rb;
    for (Node b : by_name(acc.reads))
      if (mixed_.count(b)) {
        ensure(mixed_.at(b).orig, Side::V, st, out, s->span);
        rb.map[b] = mixed_.at(b).vec;
      }
    for (Node b : by_name(acc.writes))
      if (mixed_.count(b)) {
        ensure(mixed_.at(b).orig, Side::V, st, out, s->span);  // element stores may be partial
        st[b] = Side::V;
        rb.map[b] = mixed_.at(b).vec;
      }
    out.push_back(rb.mutate(s));
    return ir_seq(std::move(out), s->span);
  }

  Stmt gemm(const Stmt& s, State& st) {
    auto* g = ir::as<ir::GemmNode>(s);
    const Span& sp = s->span;
    std::vector<Stmt> out;
    for (const Buffer* x : {&g->a.buffer, &g->b.buffer})
      if (mixed(*x)) ensure(*x, Side::C, st, out, sp);
    Region a = with_buffer(g->a, inc(g->a.buffer, Side::C));
    Region b = with_buffer(g->b, inc(g->b.buffer, Side::C));
    const Buffer& cb = g->c.buffer;
    if (!mixed(cb)) {
      out.push_back(std::make_shared<ir::GemmNode>(a, b, g->c, g->trans_a, g->trans_b, g->clear, sp));
      return ir_seq(std::move(out), sp);
    }
    Side have = st[cb.get()];
    // A clearing gemm into part of a tile whose value is on the vector side alone: the rest of
    // the tile stays in UB while the gemm's part lands in L0C (a tile is on one unit at a time).
    if (g->clear && have == Side::V && !is_full(g->c))
      throw ir::Error("gemm writes part of " + q(cb->name) + " (" + ir::print(g->c) + "), whose other elements the "
                          "vector code wrote: on Ascend the gemm's part is on the Cube (L0C) and the rest on the Vector "
                          "core, so the tile would be split between the two",
                      sp, kWholeFragment);
    if (g->clear || have == Side::None || covers(have, Side::C)) {
      st[cb.get()] = Side::C;
      out.push_back(std::make_shared<ir::GemmNode>(a, b, with_buffer(g->c, inc(cb, Side::C)), g->trans_a, g->trans_b,
                                                   g->clear, sp));
      return ir_seq(std::move(out), sp);
    }
    // Accumulating gemm into a tile the vector code updated: gemm into a fresh L0C tile, hand it
    // over, add it on the vector side.
    if (!is_full(g->c))
      throw ir::Error("gemm accumulates into part of " + q(cb->name) + " (" + ir::print(g->c) +
                          "), which the vector code also updates: on Ascend the gemm's part is on the Cube (L0C) "
                          "and the rest on the Vector core",
                      sp, kWholeFragment);
    const Mixed& m = mixed_.at(cb.get());
    auto& made = partial_[s.get()];  // loops are walked more than once: one pair per gemm
    if (!made.first) {
      made.first = part_tile(cb, cb->name + "_pv", cb->dtype, Scope::L0C, sp);
      made.second = part_tile(cb, cb->name + "_pv_ub", cb->dtype, Scope::UB, sp);
      new_allocs_.push_back(made.first);
      new_allocs_.push_back(made.second);
    }
    Buffer pv = made.first, pv_ub = made.second;
    out.push_back(std::make_shared<ir::GemmNode>(a, b, ir::full_region(pv), g->trans_a, g->trans_b, true, sp));
    out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(pv), ir::full_region(pv_ub), sp));
    // X_ub[i, j] = X_ub[i, j] + X_pv_ub[i, j]
    auto sh = shape_of(cb);
    std::vector<Var> vars;
    std::vector<Expr> idx;
    for (size_t d = 0; d < sh.size(); ++d) {
      vars.push_back(ir::var(cb->name + "_i" + std::to_string(d), ir::kIndexType, sp));
      idx.push_back(vars.back());
    }
    Expr sum = ir::binary(BinOp::Add, ir::load(m.vec, idx, sp), ir::load(pv_ub, idx, sp), sp);
    Stmt body = std::make_shared<ir::StoreNode>(m.vec, idx, sum, sp);
    for (size_t d = sh.size(); d-- > 0;)
      body = std::make_shared<ir::ForNode>(vars[d], C(0), C(sh[d]), ir::ForKind::parallel, 0, body, sp);
    out.push_back(body);
    st[cb.get()] = Side::V;
    return ir_seq(std::move(out), sp);
  }

  // A whole-tile copy of a gemm result that is on the Cube only (L0C) into a vector tile (UB) of
  // a dtype Fixpipe writes: float32 -> float32 / float16 / bfloat16, int32 -> int32.
  bool user_handoff(const ir::CopyNode& c, Side have) const {
    const Buffer& src = c.src.buffer;
    const Buffer& dst = c.dst.buffer;
    if (have != Side::C || mixed(dst) || dst->scope != Scope::UB || mixed_.at(src.get()).cube->scope != Scope::L0C)
      return false;
    if (!is_full(c.src) || !is_full(c.dst) || shape_of(src) != shape_of(dst)) return false;
    ir::DTypeCode a = src->dtype.code, b = dst->dtype.code;
    using ir::DTypeCode;
    return (a == DTypeCode::f32 && (b == DTypeCode::f32 || b == DTypeCode::f16 || b == DTypeCode::bf16)) ||
           (a == DTypeCode::i32 && b == DTypeCode::i32);
  }

  Stmt copy(const Stmt& s, State& st) {
    auto* c = ir::as<ir::CopyNode>(s);
    const Span& sp = s->span;
    const Buffer& src = c->src.buffer;
    const Buffer& dst = c->dst.buffer;
    if (!mixed(src) && !mixed(dst)) return s;
    std::vector<Stmt> out;
    Side sd;
    if (mixed(src)) {
      Side have = st[src.get()];
      if (user_handoff(*c, have)) {
        // The user's copy of a gemm result on the Cube into a vector tile is the hand-off itself,
        // in the vector tile's dtype (T.copy(s, s16): Fixpipe narrows float32 on the way to GM).
        out.push_back(std::make_shared<ir::CopyNode>(with_buffer(c->src, inc(src, Side::C)), c->dst, sp));
        return ir_seq(std::move(out), sp);
      }
      if (mixed(dst) || dst->scope == Scope::global) {
        // On the Cube only L0C -> GM (Fixpipe); L0C -> L1 has no move in the program: a copy
        // into another mixed tile runs on the Vector core (after the hand-off of src).
        sd = have == Side::None || have == Side::Both ? Side::V : have;
        if (sd == Side::C && (mixed_.at(src.get()).cube->scope != Scope::L0C || mixed(dst))) sd = Side::V;
      } else if (dst->scope == Scope::L1) {
        // The value goes UB -> (GM) -> L1: a hand-off (after the hand-off of an L0C value to the
        // Vector core: the program has no L0C -> L1 move).
        sd = Side::V;
      } else {
        sd = side_of(dst) == Side::None ? Side::V : side_of(dst);
      }
      ensure(src, sd, st, out, sp);
    } else {
      sd = side_of(src);
      if (sd == Side::None) sd = next_side(s.get(), dst.get());
    }
    if (mixed(dst)) {
      if (!is_full(c->dst)) ensure(dst, sd, st, out, sp);
      st[dst.get()] = sd;
    }
    out.push_back(std::make_shared<ir::CopyNode>(with_buffer(c->src, inc(src, sd)), with_buffer(c->dst, inc(dst, sd)), sp,
                                                  c->atomic, c->checked, std::vector<ir::Expr>{}, c->preload));
    return ir_seq(std::move(out), sp);
  }

  // ---------------------------------------------------------------------------------------------
  // 2. Row split between the two AIVs
  Stmt row_split(const Stmt& body) {
    // Each hand-off tile brings its own row count: tiles of an even count M are cut to M / 2 rows
    // per AIV; tiles of an odd count (one query row of an MHA decode) stay whole on both AIVs,
    // which compute them alike, and only AIV 0 writes them out (GM stores and hand-offs to the Cube).
    std::unordered_map<Node, int64_t> rows;
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (!is_cross(s)) return;
      auto* c = ir::as<ir::CopyNode>(s);
      const Buffer& u = c->src.buffer->scope == Scope::UB ? c->src.buffer : c->dst.buffer;
      auto sh = shape_of(u);
      if (sh.size() != 2)
        throw ir::Error("the Cube / Vector hand-off of " + q(u->name) + " needs a 2-D tile", s->span,
                        "hand over matrices (rows x columns)");
      if (sh[0] % 2 == 0) {
        rows[u.get()] = sh[0];
        split_rows_.insert(sh[0]);
      }
    });
    // No hand-off (Cube and vector code side by side, not talking): every tile stays whole on both
    // AIVs, and AIV 0 alone stores to GM below, as for a whole tile (both storing the same bytes is
    // a race; both adding them, with T.atomic_add, would add twice).
    // Propagate: tiles indexed by the row variable of a map over row tiles or by a row loop's r,
    // reduce partners, UB -> UB copy partners (each with the row count of the tile it is connected to).
    for (bool changed = true; changed;) {
      changed = false;
      auto add = [&](const Buffer& b, int64_t M) {
        if (b->scope == Scope::UB && b->const_shape() && shape_of(b)[0] == M && rows.emplace(b.get(), M).second)
          changed = true;
      };
      auto row_of = [&](Node b) { auto it = rows.find(b); return it == rows.end() ? int64_t{-1} : it->second; };
      ir::for_each_stmt(body, [&](const Stmt& s) {
        if (is_map(s)) {
          auto* f = ir::as<ir::ForNode>(s);
          std::vector<std::pair<Buffer, std::vector<Expr>>> acc;
          collect_elem(s, acc);
          int64_t M = -1;
          for (auto& [b, idx] : acc)
            if (row_of(b.get()) > 0 && !idx.empty() && idx[0].get() == f->var.get()) M = row_of(b.get());
          if (M > 0)
            for (auto& [b, idx] : acc)
              if (!idx.empty() && idx[0].get() == f->var.get()) add(b, M);
        } else if (s->kind == StmtKind::For && ir::as<ir::ForNode>(s)->for_kind == ir::ForKind::serial &&
                   ir::as_const_int(ir::as<ir::ForNode>(s)->min) == 0) {
          // a row loop (for r in T.serial(M)) over row tiles at row r: the tiles it reads or writes at row r hold
          // rows too (o2[r, j] = o[r, j] * 2.0 wrote only this AIV's rows of o2, which AIV 0 then stored whole)
          auto* f = ir::as<ir::ForNode>(s);
          std::vector<std::pair<Buffer, std::vector<Expr>>> acc;
          collect_elem(s, acc);
          const int64_t n = ir::as_const_int(f->extent).value_or(-1);
          bool row = false;
          for (auto& [b, idx] : acc)
            row = row || (row_of(b.get()) == n && !idx.empty() && idx[0].get() == f->var.get());
          if (row)
            for (auto& [b, idx] : acc)
              if (!idx.empty() && idx[0].get() == f->var.get()) add(b, n);
        } else if (s->kind == StmtKind::Reduce) {
          auto* r = ir::as<ir::ReduceNode>(s);
          int64_t M = std::max(row_of(r->src.get()), row_of(r->dst.get()));
          if (M > 0) {
            add(r->src, M);
            add(r->dst, M);
          }
        } else if (s->kind == StmtKind::Copy && !is_cross(s)) {
          auto* c = ir::as<ir::CopyNode>(s);
          int64_t M = std::max(row_of(c->src.buffer.get()), row_of(c->dst.buffer.get()));
          if (c->src.buffer->scope == Scope::UB && c->dst.buffer->scope == Scope::UB && M > 0) {
            add(c->src.buffer, M);
            add(c->dst.buffer, M);
          }
        }
      });
    }
    // Row counts whose tiles are written in part by a copy or fill (a page of a paged KV tile: rows
    // jj * page ..) stay whole: a copy's rows are not this AIV's rows. A copy or fill of row r of a
    // row loop over the M rows (`for r in T.serial(M)`: RowSplit::row_loop) is this AIV's row.
    std::unordered_map<const ir::VarNode*, int64_t> row_loops;  // serial loops from 0: var -> extent
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (s->kind != StmtKind::For || is_map(s)) return;
      auto* f = ir::as<ir::ForNode>(s);
      auto m = ir::as_const_int(f->min), e = ir::as_const_int(f->extent);
      if (f->for_kind == ir::ForKind::serial && m && *m == 0 && e) row_loops[f->var.get()] = *e;
    });
    std::unordered_set<int64_t> whole;
    auto partial = [&](const Region& r) {
      auto it = rows.find(r.buffer.get());
      if (it == rows.end()) return;
      auto s0 = ir::as_const_int(r.starts[0]);
      auto e0 = ir::as_const_int(r.extents[0]);
      auto rl = row_loops.find(r.starts[0]->kind == ir::ExprKind::Var ? ir::as<ir::VarNode>(r.starts[0]) : nullptr);
      if (rl != row_loops.end() && rl->second == it->second && e0 && *e0 == 1) return;
      if (!s0 || !e0 || *s0 != 0 || *e0 != it->second) whole.insert(it->second);
    };
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (s->kind == StmtKind::Reduce) {  // across the rows (a column sum of a gemm result): every row on each AIV
        auto* r = ir::as<ir::ReduceNode>(s);
        auto it = rows.find(r->src.get());
        if (it != rows.end() && (r->axis == 0 || r->src->ndim() < 2)) whole.insert(it->second);
      }
      if (s->kind == StmtKind::Fill) partial(ir::as<ir::FillNode>(s)->dst);
      if (s->kind == StmtKind::Copy && !is_cross(s)) {
        partial(ir::as<ir::CopyNode>(s)->src);
        partial(ir::as<ir::CopyNode>(s)->dst);
      }
    });
    // An element of a row tile read or written outside a map at a row that is not a row loop's r
    // (`o[1] = c[15, 15]` after a gemm: hunt33 F7) stays whole: the row is not this AIV's row.
    std::unordered_set<const void*> in_map;
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (!is_map(s)) return;
      ir::for_each_stmt(s, [&](const Stmt& x) { in_map.insert(x.get()); });
      ir::for_each_expr(s, [&](const Expr& e) { in_map.insert(e.get()); });
    });
    auto element = [&](const void* n, const Buffer& b, const std::vector<Expr>& idx) {
      auto it = rows.find(b.get());
      if (it == rows.end() || in_map.count(n) || idx.empty()) return;
      auto rl = row_loops.find(idx[0]->kind == ir::ExprKind::Var ? ir::as<ir::VarNode>(idx[0]) : nullptr);
      if (rl == row_loops.end() || rl->second != it->second) whole.insert(it->second);
    };
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (s->kind == StmtKind::Store) element(s.get(), ir::as<ir::StoreNode>(s)->buffer, ir::as<ir::StoreNode>(s)->indices);
    });
    ir::for_each_expr(body, [&](const Expr& e) {
      if (e->kind == ir::ExprKind::Load) element(e.get(), ir::as<ir::LoadNode>(e)->buffer, ir::as<ir::LoadNode>(e)->indices);
    });
    for (auto it = rows.begin(); it != rows.end();) it = whole.count(it->second) ? rows.erase(it) : std::next(it);
    for (int64_t M : whole) split_rows_.erase(M);
    RowSplit rs(*this, rows);
    return rs.mutate(body);
  }

  static void collect_elem(const Stmt& s, std::vector<std::pair<Buffer, std::vector<Expr>>>& acc) {
    ir::for_each_stmt(s, [&](const Stmt& x) {
      if (x->kind == StmtKind::Store) acc.push_back({ir::as<ir::StoreNode>(x)->buffer, ir::as<ir::StoreNode>(x)->indices});
    });
    ir::for_each_expr(s, [&](const Expr& e) {
      if (e->kind == ir::ExprKind::Load) acc.push_back({ir::as<ir::LoadNode>(e)->buffer, ir::as<ir::LoadNode>(e)->indices});
    });
  }

  struct RowSplit : ir::Mutator {
    Splitter& sp;
    const std::unordered_map<Node, int64_t>& rows;  // split tile -> its row count M (M / 2 per AIV)
    std::unordered_map<Node, Buffer> half;
    RowSplit(Splitter& s, const std::unordered_map<Node, int64_t>& r) : sp(s), rows(r) {}

    Buffer mutate_buffer(const Buffer& b) override {
      if (!rows.count(b.get())) return b;
      auto it = half.find(b.get());
      if (it != half.end()) return it->second;
      return half[b.get()] = part_tile(b, b->name, b->dtype, b->scope, b->span, 2);
    }
    [[noreturn]] void not_local(const Span& span, const std::string& what) {
      throw ir::Error(what + ": the vector code is not row-local, so its rows cannot be split between the two "
                             "Vector cores of an AI Core",
                      span, "make every vector statement work row by row on the tiles the gemm produces "
                            "(T.Parallel with the row index first, reductions along the columns)");
    }
    Region row_region(const Region& r, const Span& span) {
      if (!rows.count(r.buffer.get())) return mutate_region(r);
      int64_t M = rows.at(r.buffer.get());
      auto s0 = ir::as_const_int(r.starts[0]);
      auto e0 = ir::as_const_int(r.extents[0]);
      if (!s0 || !e0 || *s0 != 0 || *e0 != M) not_local(span, "a copy of part of the rows of " + q(r.buffer->name));
      Region o = mutate_region(r);
      o.extents[0] = C(M / 2);
      return o;
    }
    // GM region matching a row tile of M rows: its dim with extent M (the first) moves to this
    // AIV's rows.
    Region gm_rows(const Region& r, int64_t M, const Span& span) {
      for (size_t d = 0; d < r.extents.size(); ++d) {
        auto e = ir::extent_bound(r.extents[d]);
        if (e && *e == M) {
          Region o = mutate_region(r);
          Expr first = ir::arith::mul(sp.vid_, C(M / 2));  // this AIV's first row
          o.starts[d] = ir::arith::add(o.starts[d], first);
          // a run-time extent min(M, e) (ir.h): this AIV's half holds min(M / 2, e - first) of its rows
          auto rt = ir::runtime_extent(o.extents[d]);
          o.extents[d] = rt ? ir::binary(ir::BinOp::Min, C(M / 2), ir::arith::sub(rt->value, first)) : C(M / 2);
          return o;
        }
      }
      not_local(span, "a copy between GM and the row tile");
    }
    Stmt mutate(const Stmt& s) override {
      if (!s) return s;
      const Span& span = s->span;
      if (is_map(s)) return map(s);
      switch (s->kind) {
        case StmtKind::Store:
          if (rows.count(ir::as<ir::StoreNode>(s)->buffer.get())) not_local(span, "an element store outside T.Parallel");
          return ir::Mutator::mutate(s);
        case StmtKind::Reduce: {
          auto* r = ir::as<ir::ReduceNode>(s);
          if (rows.count(r->src.get()) && (r->axis == 0 || r->src->ndim() < 2))
            not_local(span, "a reduction across rows of " + q(r->src->name));
          return ir::Mutator::mutate(s);
        }
        case StmtKind::Fill: {
          auto* f = ir::as<ir::FillNode>(s);
          if (!rows.count(f->dst.buffer.get())) return ir::Mutator::mutate(s);
          return std::make_shared<ir::FillNode>(row_region(f->dst, span), ir::Mutator::mutate(f->value), span);
        }
        case StmtKind::Copy: {
          auto* c = ir::as<ir::CopyNode>(s);
          bool rs = rows.count(c->src.buffer.get()), rd = rows.count(c->dst.buffer.get());
          if (!rs && !rd) {
            // a whole (unsplit) tile: both AIVs hold it, AIV 0 stores it
            if (c->src.buffer->scope == Scope::UB && c->dst.buffer->scope == Scope::global)
              return std::make_shared<ir::IfNode>(ir::binary(ir::BinOp::EQ, sp.vid_, C(0), span), ir::Mutator::mutate(s),
                                                  nullptr, span);
            return ir::Mutator::mutate(s);
          }
          if (is_cross(s)) return ir::Mutator::mutate(s);  // the hand-off picks this AIV's rows
          int64_t M = rows.at((rs ? c->src : c->dst).buffer.get());
          Region a = rs ? row_region(c->src, span) : c->src.buffer->scope == Scope::global ? gm_rows(c->src, M, span) : c->src;
          Region b = rd ? row_region(c->dst, span) : c->dst.buffer->scope == Scope::global ? gm_rows(c->dst, M, span) : c->dst;
          if ((rs && !rd && c->dst.buffer->scope != Scope::global) || (rd && !rs && c->src.buffer->scope != Scope::global))
            not_local(span, "a copy between a row tile and a tile without rows");
          return std::make_shared<ir::CopyNode>(a, b, span, c->atomic, c->checked, std::vector<ir::Expr>{}, c->preload);
        }
        case StmtKind::For:
          if (Stmt r = row_loop(s)) return r;
          break;
        case StmtKind::Seq:
        case StmtKind::If:
        case StmtKind::Let:
        case StmtKind::Alloc:
        case StmtKind::Gemm:
        case StmtKind::CoreScope:
        case StmtKind::Sync: break;
      }
      return ir::Mutator::mutate(s);
    }
    // A serial loop over the M rows of row tiles that touches each at its own row r only (`for r in
    // T.serial(M): p = Pos[..r]; T.copy(Cos[p, :], c[r, :])`: table rows gathered by position):
    // this AIV runs its rows r = vid * M / 2 + lr, lr < M / 2, like a map's. nullptr when the loop
    // does not index a row tile by its variable.
    // A loop of one iteration inside it runs at its min: it is inlined first, so the one-row map of
    // a token loop over (token, head) rows with one head (`for t in T.serial(qlen): for i, c in
    // T.Parallel(1, N): s[t + i, c] = ..`) touches row t only.
    struct UnitLoops : ir::arith::Simplifier {
      using ir::arith::Simplifier::mutate;
      Stmt mutate(const Stmt& st) override {
        if (st && st->kind == StmtKind::For) {
          auto* l = ir::as<ir::ForNode>(st);
          if (ir::as_const_int(l->extent).value_or(0) == 1) return mutate(ir::substitute(l->body, {{l->var, l->min}}));
        }
        return ir::arith::Simplifier::mutate(st);
      }
    };
    Stmt row_loop(const Stmt& s) {
      auto* f0 = ir::as<ir::ForNode>(s);
      Stmt body = UnitLoops().mutate(f0->body);
      auto f = std::make_shared<ir::ForNode>(f0->var, f0->min, f0->extent, f0->for_kind, f0->num_stages, body, s->span,
                                             f0->user_extent);
      const ir::VarNode* v = f->var.get();
      auto lo = ir::as_const_int(f->min), n = ir::as_const_int(f->extent);
      bool touches = false;
      std::string bad;
      int64_t M = -1;  // the row count of the tiles it touches
      auto at_row = [&](const Buffer& b, const Expr& start, const Expr* extent) {
        if (!rows.count(b.get())) return;
        bool mine = start.get() == v && (!extent || ir::as_const_int(*extent).value_or(0) == 1) &&
                    (M < 0 || rows.at(b.get()) == M);
        if (start.get() == v && M < 0) M = rows.at(b.get());
        touches = touches || start.get() == v;
        if (!mine && bad.empty()) bad = q(b->name);
      };
      ir::for_each_stmt(f->body, [&](const Stmt& x) {
        switch (x->kind) {
          case StmtKind::Copy:
            for (const Region* r : {&ir::as<ir::CopyNode>(x)->src, &ir::as<ir::CopyNode>(x)->dst})
              at_row(r->buffer, r->starts[0], &r->extents[0]);
            break;
          case StmtKind::Fill: {
            const Region& r = ir::as<ir::FillNode>(x)->dst;
            at_row(r.buffer, r.starts[0], &r.extents[0]);
            break;
          }
          case StmtKind::Reduce:
            for (const Buffer* b : {&ir::as<ir::ReduceNode>(x)->src, &ir::as<ir::ReduceNode>(x)->dst})
              at_row(*b, C(-1), nullptr);
            break;
          case StmtKind::Store: {
            auto* st = ir::as<ir::StoreNode>(x);
            at_row(st->buffer, st->indices[0], nullptr);
            break;
          }
          case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let: case StmtKind::Alloc:
          case StmtKind::Gemm: case StmtKind::CoreScope: case StmtKind::Sync: break;
        }
      });
      ir::for_each_expr(f->body, [&](const Expr& e) {
        if (e->kind == ir::ExprKind::Load) at_row(ir::as<ir::LoadNode>(e)->buffer, ir::as<ir::LoadNode>(e)->indices[0], nullptr);
      });
      if (!touches) return nullptr;
      if (!bad.empty())
        not_local(s->span, "a loop over rows that accesses " + bad + " at other rows than the loop's own (r, one row)");
      if (f->for_kind != ir::ForKind::serial || !lo || *lo != 0 || !n || *n != M)
        not_local(s->span, "a loop over rows that is not T.serial(" + std::to_string(M) + ") over all rows of its tiles");
      Var lv = ir::var(f->var->name, f->var->dtype, f->var->span);
      RowSub sub(*this, v, lv, ir::arith::add(lv, ir::arith::mul(sp.vid_, C(M / 2))));
      return std::make_shared<ir::ForNode>(lv, f->min, C(M / 2), f->for_kind, f->num_stages, sub.mutate(f->body), s->span);
    }
    // The body of a map or row loop over row variable v on this AIV's rows: row tiles are indexed
    // by the local row lv (a region of a row loop: its row v), every other use of v is the global
    // row g.
    struct RowSub : ir::Mutator {
      RowSplit& rs;
      const ir::VarNode* v;
      Var lv;
      Expr g;
      RowSub(RowSplit& r, const ir::VarNode* vv, Var l, Expr gg) : rs(r), v(vv), lv(std::move(l)), g(std::move(gg)) {}
      Buffer mutate_buffer(const Buffer& b) override { return rs.mutate_buffer(b); }
      std::vector<Expr> local(const std::vector<Expr>& idx) {
        std::vector<Expr> o{lv};
        for (size_t d = 1; d < idx.size(); ++d) o.push_back(mutate(idx[d]));
        return o;
      }
      Expr mutate(const Expr& e) override {
        if (!e) return e;
        if (e.get() == v) return g;
        if (e->kind == ir::ExprKind::Load) {
          auto* l = ir::as<ir::LoadNode>(e);
          if (rs.rows.count(l->buffer.get())) return ir::load(rs.mutate_buffer(l->buffer), local(l->indices), e->span);
        }
        return ir::Mutator::mutate(e);
      }
      Region mutate_region(const Region& r) override {
        if (!rs.rows.count(r.buffer.get())) return ir::Mutator::mutate_region(r);
        Region o{rs.mutate_buffer(r.buffer), local(r.starts), r.extents};
        for (size_t d = 1; d < o.extents.size(); ++d) o.extents[d] = mutate(r.extents[d]);
        return o;
      }
      Stmt mutate(const Stmt& st) override {
        if (st && st->kind == StmtKind::Store) {
          auto* n = ir::as<ir::StoreNode>(st);
          if (rs.rows.count(n->buffer.get()))
            return std::make_shared<ir::StoreNode>(rs.mutate_buffer(n->buffer), local(n->indices), mutate(n->value),
                                                   st->span);
        }
        return ir::Mutator::mutate(st);
      }
    };
    Stmt map(const Stmt& s) {
      auto* f = ir::as<ir::ForNode>(s);
      std::vector<std::pair<Buffer, std::vector<Expr>>> acc;
      collect_elem(s, acc);
      int64_t M = -1;
      for (auto& [b, idx] : acc)
        if (rows.count(b.get())) M = rows.at(b.get());
      if (M < 0) return s;
      const ir::VarNode* v = f->var.get();
      auto e = ir::as_const_int(f->extent);
      if (!e || *e != M) not_local(s->span, "a T.Parallel loop whose first extent is not the row count " + std::to_string(M));
      auto uses_v = [&](const Expr& x) {
        // a row tile's element read inside the index (a table gathered at a row tile's value, tb[bk[i, j]]: port37
        // F5) is that AIV's own row (RowSub localizes it): the index does not use the row variable itself
        struct V : ir::Visitor {
          const ir::VarNode* v;
          const std::unordered_map<Node, int64_t>* rows = nullptr;
          bool u = false;
          void visit(const Expr& y) override {
            if (y && y.get() == v) u = true;
            if (y && y->kind == ir::ExprKind::Load && rows->count(ir::as<ir::LoadNode>(y)->buffer.get())) return;
            ir::Visitor::visit(y);
          }
          using ir::Visitor::visit;
        } vis;
        vis.rows = &rows;
        vis.v = v;
        vis.visit(x);
        return vis.u;
      };
      for (auto& [b, idx] : acc) {
        bool r = rows.count(b.get()) > 0;
        if (r && rows.at(b.get()) != M)
          not_local(s->span, "a T.Parallel loop over tiles of " + std::to_string(M) + " and " +
                                 std::to_string(rows.at(b.get())) + " rows");
        for (size_t d = 0; d < idx.size(); ++d) {
          if (r && d == 0) {
            if (idx[0].get() != v) not_local(s->span, "an access to " + q(b->name) + " not indexed by the row variable");
            continue;
          }
          if (b->scope != Scope::global && uses_v(idx[d]))  // (GM indices get the global row below)
            not_local(s->span, "an access to " + q(b->name) + " indexed by the row variable outside its first dim");
        }
      }
      // Rows of this AIV: row tiles keep the local index, every other use is the global row.
      Var lv = ir::var(f->var->name, f->var->dtype, f->var->span);
      RowSub sub(*this, v, lv, ir::arith::add(lv, ir::arith::mul(sp.vid_, C(M / 2))));
      Stmt body = sub.mutate(f->body);
      return std::make_shared<ir::ForNode>(lv, f->min, C(M / 2), f->for_kind, f->num_stages, body, s->span);
    }
  };

  // ---------------------------------------------------------------------------------------------
  // 3. Hand-offs, projection onto the two cores, Cube software pipelining
  // The arms of the ifs around a statement, outermost first: (the if, 0 = then / 1 = else).
  using Arms = std::vector<std::pair<const ir::StmtNode*, int>>;
  // Whether statements in arms a and b never both run in one run of their innermost common if:
  // at the first if where their paths part, they are in its two arms.
  static bool exclusive(const Arms& a, const Arms& b) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].first != b[i].first) return false;  // two ifs of one scope: both may run
      if (a[i].second != b[i].second) return true;
    }
    return false;  // one inside the other's arm, or the same arms
  }
  struct Handoff {
    bool to_vector;  // Cube -> Vector
    int f = 0, r = 0;
    int slots = 1;
    bool maybe_none = false;  // may run no time in a program (under an if, or in a loop that may be empty)
    bool shares = false;      // takes f and r of an earlier hand-off: no pre-sets / drains of its own
    bool in_turn = false;     // shares them in turn (not exclusively): see handoff()
    bool own_ws = true;       // allocates ws (false: the earlier hand-off's slots, the same dtype and shape)
    Arms arms;                // the if arms it runs in, outermost first
    Buffer ws;
    Buffer land;  // C -> V in a loop: the staged UB tile the data lands in (then copied to the vector tile)
    Buffer cast;  // V -> C with a dtype change: the UB tile of the L1 dtype
    std::string tile;  // the tile handed over and the copy's line, for messages
    Span span;
  };
  struct Loop {
    Var var;
    Expr min;
    Expr extent;
  };

  Expr lin_block() const {
    Expr lin = C(0);
    for (size_t d = k_->grid.size(); d-- > 0;) lin = ir::arith::add(ir::arith::mul(lin, k_->grid[d]), k_->block_vars[d]);
    return lin;
  }
  Expr block_sets() const {
    Expr n = C(1);
    for (const auto& g : k_->grid) n = ir::arith::mul(n, g);
    return ir::arith::min(C(t_.ascend.aic_cores), n);
  }

  Handoff& handoff(const Stmt& s) {
    auto it = handoffs_.find(s.get());
    if (it != handoffs_.end()) return it->second;
    auto* c = ir::as<ir::CopyNode>(s);
    Handoff h;
    h.to_vector = is_cube_scope(c->src.buffer->scope);
    h.tile = (h.to_vector ? c->src.buffer : c->dst.buffer)->name;  // the Cube incarnation: the user's name
    h.span = s->span;
    h.arms = arms_;
    h.slots = (loops_.size() == 1 && arms_.empty()) ? 2 : 1;
    h.maybe_none = !arms_.empty();
    for (const auto& l : loops_) {
      auto e = ir::as_const_int(l.extent);
      h.maybe_none = h.maybe_none || !e || *e < 1;
    }
    const Buffer& cube = h.to_vector ? c->src.buffer : c->dst.buffer;
    const Buffer& ub = h.to_vector ? c->dst.buffer : c->src.buffer;
    auto sh = shape_of(cube);
    ir::DType wt = h.to_vector ? ub->dtype : cube->dtype;
    if (h.to_vector && !(wt.is_float() && wt.bits() >= 16 && wt.bits() <= 32)) wt = cube->dtype;
    // The workspace keeps the vector tile's dtype: a narrower one (the gemm's 16-bit operand
    // dtype) would round every score (bfloat16: |s| * 2^-9, which the softmax's exp turns into a
    // relative error of every weight; fuzz11 F2) or turn a score above 65504 into inf (float16:
    // inf - inf = NaN in the softmax), a change of the answer the program did not write.
    if (h.to_vector && h.slots == 2 && !landing_ && ub_fits(2 * ub_bytes_of(ub), t_.ascend.ub_bytes / 4)) {
      // The first looped hand-off lands in a tile of the loop body (multi_buffer stages it), then
      // `copy land -> ub`: the next iteration's data is loaded while this one is computed on.
      // Only when two copies fit beside every UB tile with a quarter of UB to spare for the
      // temporaries this pass does not see (1/8 was too little for flash attention's float32
      // scores, 128 x 128 blocks: the loop lost its second stage, 489 us instead of 460 at S 2048;
      // they land in the vector tile itself). Paged decode's small scores keep their landing tile.
      h.land = part_tile(ub, ub->name + "_in", wt, Scope::UB, s->span);
      landing_ = true;
    }
    Expr rows = handoff_rows(h, sh[0]);
    if (!h.to_vector && shape_of(ub)[0] == sh[0]) rows = ir::arith::mul(rows, C(2));  // a whole tile: one half per AIV
    h.ws = ir::buffer("ws_" + std::to_string(handoffs_.size()), wt, {rows, C(sh[1])}, Scope::global, s->span);
    if (!h.to_vector && ub->dtype != cube->dtype)
      h.cast = part_tile(ub, ub->name + "_" + std::string(cube->dtype.name()), cube->dtype, Scope::UB, s->span);
    // Cross-core flag ids. A hand-off in one arm of an if takes the ids of an earlier one of the
    // same direction and slots that it excludes, and every hand-off sharing them: each run of
    // either is the same protocol on the same pipes (producer: wait r, write, set f; consumer:
    // wait f, read, set r), balanced in itself, and both units take the same arm, so the counters
    // after the if are the same whichever arm ran and the k-th set of f is still the k-th slot
    // written (the masked kernel's three arms each hand the scores over: one pair of ids). It takes
    // the earlier one's workspace too when its slots have the same dtype and shape (no cast tile):
    // the same GM bytes behind the flags, as insert_sync's fences read them.
    const Handoff* pair = nullptr;
    for (const auto* o : handoff_order_) {
      const Handoff& g = handoffs_.at(o);
      if (g.shares || g.to_vector != h.to_vector || g.slots != h.slots) continue;
      bool excl = true;
      for (const auto* m : handoff_order_)
        if (handoffs_.at(m).f == g.f) excl = excl && exclusive(h.arms, handoffs_.at(m).arms);
      if (excl) {
        pair = &g;
        break;
      }
    }
    if (pair) {
      h.shares = true;
      h.f = pair->f;
      h.r = pair->r;
      if (!h.cast && !pair->cast && h.ws->dtype == pair->ws->dtype && same_shape(h.ws, pair->ws))
        h.ws = pair->ws, h.own_ws = false;
    } else if (const int pairs = id_pairs(); pairs < t_.ascend.cross_flag_ids / 2) {
      h.f = 2 * pairs;
      h.r = h.f + 1;
    } else {
      // No id pair left: take one in turn. The latest earlier pair of the same direction and
      // slots is shared with it (its own workspace kept). Safe because the flags are counters
      // and both units run every hand-off of the kernel in the same order (the program order,
      // projected onto each unit; the same loops and the same if arms on both): the k-th set of
      // f is the k-th wait of f whichever hand-off of the pair it is, so the consumer reads the
      // workspace of the hand-off the producer wrote. What keeps the producer from overwriting
      // a slot its consumer still reads is the release flag r: the consumer sets r right after
      // its read and the producer waits r before each write, so with `slots` pre-sets it writes
      // the pair's j-th hand-off only once the consumer read the (j - slots)-th. The slot it
      // writes was last read by one of those (a hand-off of one slot: any earlier one; of two,
      // the same hand-off two iterations ago of its one loop, at least `slots` hand-offs of the
      // pair back): stricter than a pair of its own, never looser. No deadlock: each wait is
      // for a set that comes earlier in the program order (the read of the (j - slots)-th
      // hand-off precedes the j-th write), as with a pair of its own. The counters stay in
      // range (at most `slots` sets of f or r pending) and the pre-sets / drains balance (one
      // set and one wait of each id per hand-off). The order must survive the passes after
      // this one: skew_cube_loops and rotate_vector_loops move statements of a loop body
      // across iterations, and leave a loop alone when two of its body's statements take one
      // id (core_split.h, reuses_cross_ids). It costs overlap: the producer of the j-th
      // hand-off waits for the consumer's (j - slots)-th read, not its own previous one, so
      // only kernels that would run out of ids take a pair in turn (the others compile as before).
      const Handoff* turn = nullptr;
      for (const auto* o : handoff_order_) {
        const Handoff& g = handoffs_.at(o);
        if (!g.shares && g.to_vector == h.to_vector && g.slots == h.slots) turn = &g;
      }
      if (!turn)
        throw ir::Error("more than " + std::to_string(pairs) + " hand-offs between the Cube and the vector code (two "
                        "cross-core flag ids each, shared by hand-offs in exclusive if arms or in turn by hand-offs "
                        "of one direction; the " + t_.name + " has ids 0.." +
                        std::to_string(t_.ascend.cross_flag_ids - 1) + "): this one, of " + q(h.tile) + " (" +
                        (h.to_vector ? "Cube -> vector" : "vector -> Cube") + "), has no pair of its direction to share",
                        s->span, "the tiles that cross so far: " + crossing_tiles() + "; " + kFewerTiles);
      h.shares = h.in_turn = true;
      h.f = turn->f;
      h.r = turn->r;
    }
    handoff_order_.push_back(s.get());
    return handoffs_[s.get()] = h;
  }
  static constexpr const char* kFewerTiles =
      "share fewer tiles between gemms and vector code (compute a tile on one unit, or read it from global memory "
      "on the other): element-wise work on a gemm operand read from global memory (a feature map, decays) can run in "
      "a kernel of its own, so the operand goes to the Cube straight from global memory; a tile carried across loop "
      "iterations stays on one side (a state the vector code updates, S = a * S + a fresh gemm's result, copied into "
      "the gemm's operand once per iteration)";
  // The hand-offs so far, for the errors: each tile, its direction and line.
  std::string crossing_tiles() const {
    std::string tiles;
    for (const auto* o : handoff_order_) {
      const Handoff& g = handoffs_.at(o);
      tiles += (tiles.empty() ? "" : ", ") + q(g.tile) + " (" + (g.to_vector ? "Cube -> vector" : "vector -> Cube") +
               ", line " + std::to_string(g.span.line) + ")";
    }
    return tiles;
  }
  static bool same_shape(const Buffer& a, const Buffer& b) {
    if (a->shape.size() != b->shape.size()) return false;
    for (size_t d = 0; d < a->shape.size(); ++d)
      if (ir::print(a->shape[d]) != ir::print(b->shape[d])) return false;
    return true;
  }
  // The pairs of cross-core flag ids the hand-offs so far take (two ids each).
  int id_pairs() const {
    int n = 0;
    for (const auto* o : handoff_order_) n += handoffs_.at(o).shares ? 0 : 1;
    return n;
  }

  // Rows of a hand-off's slots: one slot set per AI Core.
  Expr handoff_rows(const Handoff& h, int64_t M) const {
    return ir::arith::mul(ir::arith::mul(block_sets(), C(h.slots)), C(M));
  }

  Stmt sync(ir::SyncKind k, ir::AscendPipe p, int id, const Span& sp) {
    return std::make_shared<ir::SyncNode>(k, p, ir::AscendPipe::S, k == ir::SyncKind::set_cross_flag ? 2 : 0, C(id), sp);
  }

  // One core's part of a hand-off copy.
  Stmt handoff_part(const Stmt& s, Side side) {
    auto* c = ir::as<ir::CopyNode>(s);
    const Span& sp = s->span;
    Handoff& h = handoff(s);
    const Buffer& cube = h.to_vector ? c->src.buffer : c->dst.buffer;
    const Buffer& ub = h.to_vector ? c->dst.buffer : c->src.buffer;
    int64_t M = shape_of(cube)[0], N = shape_of(cube)[1];
    Expr slot = C(0);
    if (h.slots == 2) slot = ir::arith::mod(ir::arith::sub(loops_[0].var, loops_[0].min), C(2));
    Expr row0 = ir::arith::mul(ir::arith::add(ir::arith::mul(ir::arith::mod(lin_block(), block_sets()), C(h.slots)), slot),
                    C(M));
    using ir::AscendPipe;
    using ir::SyncKind;
    std::vector<Stmt> out;
    if (side == Side::C) {
      Region w{h.ws, {row0, C(0)}, {C(M), C(N)}};
      if (h.to_vector) {
        out.push_back(sync(SyncKind::wait_cross_flag, AscendPipe::FIX, h.r, sp));
        out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(cube), w, sp));
        out.push_back(sync(SyncKind::set_cross_flag, AscendPipe::FIX, h.f, sp));
      } else {
        out.push_back(sync(SyncKind::wait_cross_flag, AscendPipe::MTE2, h.f, sp));
        out.push_back(std::make_shared<ir::CopyNode>(w, ir::full_region(cube), sp));
        out.push_back(sync(SyncKind::set_cross_flag, AscendPipe::MTE2, h.r, sp));
      }
    } else {
      int64_t R = shape_of(ub)[0];
      Expr r0 = R == M ? row0 : ir::arith::add(row0, ir::arith::mul(vid_, C(R)));
      Region w{h.ws, {r0, C(0)}, {C(R), C(N)}};
      if (h.to_vector) {
        if (h.land) out.push_back(std::make_shared<ir::AllocNode>(h.land, sp));
        out.push_back(sync(SyncKind::wait_cross_flag, AscendPipe::MTE2, h.f, sp));
        out.push_back(std::make_shared<ir::CopyNode>(w, ir::full_region(h.land ? h.land : ub), sp));
        out.push_back(sync(SyncKind::set_cross_flag, AscendPipe::MTE2, h.r, sp));
        if (h.land) out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(h.land), ir::full_region(ub), sp));
      } else {
        Buffer src = ub;
        if (h.cast) {
          if (shape_of(h.cast)[0] != R) h.cast = part_tile(ub, h.cast->name, h.cast->dtype, Scope::UB, h.cast->span);
          out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(ub), ir::full_region(h.cast), sp));
          src = h.cast;
        }
        out.push_back(sync(SyncKind::wait_cross_flag, AscendPipe::MTE3, h.r, sp));
        // A whole tile (not row-split): both AIVs hold it and write it, each into its own half of
        // the workspace (the Cube reads AIV 0's): both cores run the same instructions, so the
        // flags insert_sync places around the copy are on every path.
        if (R == M) w.starts[0] = ir::arith::add(w.starts[0], ir::arith::mul(vid_, handoff_rows(h, M)));
        out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(src), w, sp));
        out.push_back(sync(SyncKind::set_cross_flag, AscendPipe::MTE3, h.f, sp));
      }
    }
    return ir_seq(std::move(out), sp);
  }

  // UB bytes of tile b, row-split tiles at half their rows.
  int64_t ub_bytes_of(const Buffer& b) const {
    auto sh = b->const_shape();
    if (!sh) return 0;
    int64_t n = b->dtype.bytes();
    for (size_t i = 0; i < sh->size(); ++i) n *= (i == 0 && split_rows_.count((*sh)[0])) ? (*sh)[0] / 2 : (*sh)[i];
    return (n + 31) / 32 * 32;
  }
  // Whether `extra` more UB bytes fit next to every UB tile of the kernel, the vector incarnations
  // of the tiles both units use included (those the program uses: set in project()) (all counted as live at once), keeping `margin` bytes for
  // legalize_vector's temporaries.
  bool ub_fits(int64_t extra, int64_t margin) {
    int64_t used = extra;
    for (const auto& [n, m] : mixed_)  // (not an incarnation the walk left unused: a user hand-off's source)
      if (m.vec && m.vec->scope == Scope::UB && used_.count(key(m.vec)))
        used += ub_bytes_of(m.vec);
    ir::for_each_stmt(k_->body, [&](const Stmt& x) {
      if (x->kind == StmtKind::Alloc && ir::as<ir::AllocNode>(x)->buffer->scope == Scope::UB)
        used += ub_bytes_of(ir::as<ir::AllocNode>(x)->buffer);
    });
    for (const auto& b : new_allocs_)
      if (b->scope == Scope::UB) used += ub_bytes_of(b);
    return used <= t_.ascend.ub_bytes - margin;
  }

  static Side side_of_leaf(const Stmt& s) {
    if (is_map(s) || s->kind == StmtKind::Store || s->kind == StmtKind::Reduce) return Side::V;
    if (s->kind == StmtKind::Gemm) return Side::C;
    if (s->kind == StmtKind::Fill) return is_cube_scope(ir::as<ir::FillNode>(s)->dst.buffer->scope) ? Side::C : Side::V;
    if (s->kind == StmtKind::Copy) {
      auto* c = ir::as<ir::CopyNode>(s);
      if (is_cube_scope(c->src.buffer->scope) || is_cube_scope(c->dst.buffer->scope)) return Side::C;
      return Side::V;
    }
    return Side::None;
  }

  // The statements of one core, nullptr when there are none. V-side loop and let variables are
  // renamed (each variable is defined once per kernel).
  Stmt proj(const Stmt& s, Side side) {
    if (!s) return nullptr;
    const Span& sp = s->span;
    auto rename = [&](const Stmt& x) { return side == Side::V ? ir::substitute(x, vsub_) : x; };
    auto rn = [&](const Expr& x) { return side == Side::V ? ir::substitute(x, vsub_) : x; };
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<Stmt> out;
        bool work = false;
        for (const auto& c : ir::as<ir::SeqNode>(s)->body) {
          Stmt p = proj(c, side);
          if (!p) continue;
          if (p->kind != StmtKind::Let && p->kind != StmtKind::Alloc) work = true;
          out.push_back(p);
        }
        if (!work) return nullptr;
        return std::make_shared<ir::SeqNode>(std::move(out), sp);
      }
      case StmtKind::For: {
        if (is_map(s)) return side == Side::V ? rename(s) : nullptr;
        auto* f = ir::as<ir::ForNode>(s);
        Var v = f->var;
        if (side == Side::V) {
          v = ir::var(f->var->name + "_v", f->var->dtype, f->var->span);
          vsub_.push_back({f->var, v});
        }
        loops_.push_back({v, rn(f->min), rn(f->extent)});
        Stmt b = proj(f->body, side);
        loops_.pop_back();
        if (!b) return nullptr;
        return std::make_shared<ir::ForNode>(v, rn(f->min), rn(f->extent), f->for_kind, f->num_stages, b, sp,
                                             f->user_extent ? rn(f->user_extent) : nullptr);
      }
      case StmtKind::If: {
        auto* n = ir::as<ir::IfNode>(s);
        arms_.push_back({s.get(), 0});
        Stmt t = proj(n->then_body, side);
        arms_.back().second = 1;
        Stmt e = proj(n->else_body, side);
        arms_.pop_back();
        if (!t && !e) return nullptr;
        if (!t) t = std::make_shared<ir::SeqNode>(std::vector<Stmt>{}, sp);
        return std::make_shared<ir::IfNode>(rn(n->cond), t, e, sp);
      }
      case StmtKind::Let: {
        auto* n = ir::as<ir::LetNode>(s);
        if (side != Side::V) return v_lets_.count(n->var.get()) ? nullptr : s;  // a Vector core's let (walk)
        Var v = ir::var(n->var->name + "_v", n->var->dtype, n->var->span);
        Expr val = rn(n->value);
        vsub_.push_back({n->var, v});
        return std::make_shared<ir::LetNode>(v, val, sp);
      }
      case StmtKind::Alloc: {
        const Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
        if (!used_.count(key(b))) return nullptr;  // unused incarnation
        return (b->scope == Scope::UB) == (side == Side::V) ? s : nullptr;
      }
      case StmtKind::Store:
      case StmtKind::Copy:
      case StmtKind::Gemm:
      case StmtKind::Fill:
      case StmtKind::Reduce:
      case StmtKind::CoreScope:
      case StmtKind::Sync: break;  // leaves: below
    }
    if (is_cross(s)) return rename(handoff_part(s, side));
    Side ls = side_of_leaf(s);
    if (ls == Side::None) return nullptr;
    return ls == side ? rename(s) : nullptr;
  }

  ir::Kernel project(const Stmt& body) {
    const Span& sp = k_->span;
    struct Used : ir::Visitor {
      std::unordered_set<std::string>* u;
      void visit(const Stmt& s) override {
        if (s && s->kind == StmtKind::Alloc) return;
        ir::Visitor::visit(s);
      }
      void visit_buffer(const Buffer& b) override { u->insert(key(b)); }
      using ir::Visitor::visit;
    } used;
    used.u = &used_;
    used.visit(body);
    Stmt c = proj(body, Side::C);
    if (c)
      ir::for_each_expr(c, [&](const Expr& e) {  // a let of the Vector core's tile the Cube code uses (walk)
        auto it = e->kind == ir::ExprKind::Var ? v_lets_.find(e.get()) : v_lets_.end();
        if (it != v_lets_.end()) throw ir::Error(it->second.first, it->second.second, v_let_hint());
      });
    vsub_.clear();
    Stmt v = proj(body, Side::V);
    if (!c || !v) throw ir::Error("internal: split_cube_vector found no code for one unit", sp);
    using ir::AscendPipe;
    using ir::SyncKind;
    std::vector<Stmt> cs, vs, top;
    for (const auto* s : handoff_order_) {  // the consumer pre-sets the reverse flag once per slot (per id pair)
      const Handoff& h = handoffs_.at(s);
      if (h.shares) continue;
      for (int i = 0; i < h.slots; ++i)
        (h.to_vector ? vs : cs).push_back(sync(SyncKind::set_cross_flag, h.to_vector ? AscendPipe::MTE2 : AscendPipe::MTE2, h.r, sp));
    }
    cs.push_back(c);
    vs.push_back(v);
    for (const auto* s : handoff_order_) {  // the producer consumes the last sets: counters back at 0
      const Handoff& h = handoffs_.at(s);
      if (h.shares) continue;
      for (int i = 0; i < h.slots; ++i)
        (h.to_vector ? cs : vs).push_back(sync(SyncKind::wait_cross_flag, h.to_vector ? AscendPipe::FIX : AscendPipe::MTE3, h.r, sp));
    }
    // A hand-off that may run no time in a program (its loop empty, its if false) leaves the consumer
    // free to run ahead through such programs, each adding its pre-sets to the producer's counter: past
    // 15 pending sets the hardware hangs. So the producer tells the consumer that it has taken a
    // program's sets back ("drained", one set per program but the core's last) and the consumer,
    // at the end of each program but its first, waits for the previous program's: its pre-sets never
    // run more than one program ahead of the producer's drains (at most two programs' sets pending),
    // and in a program with hand-offs the consumer, which waited for the producer's data, finds the
    // previous drain already there (no stall). Programs run on a core in the order blk, blk + sets, ...
    int next_id = 2 * id_pairs();
    Expr lin = lin_block(), sets = block_sets(), total = C(1);
    for (const auto& g : k_->grid) total = ir::arith::mul(total, g);
    auto n_total = ir::as_const_int(total), n_sets = ir::as_const_int(sets);
    const bool one_program_per_core = n_total && n_sets && *n_total <= *n_sets;  // nothing to pace
    for (bool to_vector : {true, false}) {
      bool any = false;
      for (const auto* s : handoff_order_) any = any || (handoffs_.at(s).to_vector == to_vector && handoffs_.at(s).maybe_none);
      if (!any || one_program_per_core) continue;
      if (next_id >= t_.ascend.cross_flag_ids)
        throw ir::Error(std::to_string(id_pairs()) + " hand-offs between the Cube and the vector code, some in a loop "
                        "or branch that may run no time, need " + std::to_string(next_id + 1) +
                        " cross-core flag ids (two per hand-off, one per direction to pace the programs); the " + t_.name +
                        " has ids 0.." + std::to_string(t_.ascend.cross_flag_ids - 1), sp,
                        "the tiles that cross: " + crossing_tiles() + "; " + kFewerTiles);
      Stmt set = sync(SyncKind::set_cross_flag, to_vector ? AscendPipe::FIX : AscendPipe::MTE3, next_id, sp);
      Stmt wait = sync(SyncKind::wait_cross_flag, AscendPipe::S, next_id, sp);
      (to_vector ? cs : vs).push_back(std::make_shared<ir::IfNode>(
          ir::binary(ir::BinOp::LT, ir::arith::add(lin, sets), total, sp), set, nullptr, sp));
      (to_vector ? vs : cs).push_back(std::make_shared<ir::IfNode>(ir::binary(ir::BinOp::GE, lin, sets, sp), wait, nullptr, sp));
      ++next_id;
    }
    for (const auto* s : handoff_order_) {
      const Handoff& h = handoffs_.at(s);
      if (h.own_ws) top.push_back(std::make_shared<ir::AllocNode>(h.ws, sp));
      if (h.cast) top.push_back(std::make_shared<ir::AllocNode>(h.cast, sp));
    }
    for (const auto& b : new_allocs_) {
      Buffer x = b;
      if (x->scope == Scope::UB && split_rows_.count(shape_of(x)[0])) x = part_tile(x, x->name, x->dtype, x->scope, x->span, 2);
      top.push_back(std::make_shared<ir::AllocNode>(x, sp));
    }
    top.push_back(std::make_shared<ir::CoreScopeNode>(ir::CoreKind::C, std::make_shared<ir::SeqNode>(cs, sp), sp));
    top.push_back(std::make_shared<ir::CoreScopeNode>(ir::CoreKind::V, std::make_shared<ir::SeqNode>(vs, sp), sp));
    Stmt out = std::make_shared<ir::SeqNode>(std::move(top), sp);
    // The row-split tiles were rebuilt: make every reference (allocs included) use one buffer.
    out = unify(out);
    return std::make_shared<ir::KernelNode>(k_->name, k_->params, k_->block_vars, k_->grid, out, sp, vid_);
  }

  // Buffers rebuilt with the same name (row split) in different places -> one buffer per name and
  // scope, the one whose alloc is kept.
  Stmt unify(const Stmt& s) {
    std::unordered_map<std::string, Buffer> by_name;
    ir::for_each_stmt(s, [&](const Stmt& x) {
      if (x->kind != StmtKind::Alloc) return;
      const Buffer& b = ir::as<ir::AllocNode>(x)->buffer;
      by_name[key(b)] = b;
    });
    struct U : ir::Mutator {
      std::unordered_map<std::string, Buffer>* m;
      Buffer mutate_buffer(const Buffer& b) override {
        if (b->scope == Scope::global) return b;
        auto it = m->find(key(b));
        return it == m->end() ? b : it->second;
      }
    } u;
    u.m = &by_name;
    return u.mutate(s);
  }

  struct Acc {
    const ir::StmtNode* s;
    Node b;
    Side side;
  };

  const ir::Kernel& k_;
  const target::Target& t_;
  Var vid_;
  std::unordered_map<Node, Mixed> mixed_;
  std::vector<Acc> order_;
  std::vector<Buffer> new_allocs_;
  std::unordered_map<const ir::StmtNode*, std::pair<Buffer, Buffer>> partial_;  // rule-3 tiles per gemm
  std::unordered_set<int64_t> split_rows_;  // row counts of the tiles cut in half between the AIVs
  bool landing_ = false;  // a hand-off has a landing tile (at most one)
  std::unordered_map<const ir::StmtNode*, Handoff> handoffs_;
  std::vector<const ir::StmtNode*> handoff_order_;
  std::vector<Loop> loops_;
  Arms arms_;  // the if arms around the statement proj is at
  std::vector<std::pair<Var, Expr>> vsub_;
  // lets of an element of a UB tile: on the Vector core only (their error, should the Cube code use them)
  std::unordered_map<const ir::ExprNode*, std::pair<std::string, Span>> v_lets_;
  static std::string v_let_hint() {
    return "read the value from the GM tensor the tile was copied from (each core's scalar unit reads GM), or "
           "compute with it inside a T.Parallel map";
  }
  std::unordered_set<std::string> used_;  // name@scope of every buffer referenced outside allocs
};

}  // namespace

ir::Kernel split_cube_vector(const ir::Kernel& kernel, const target::Target& target) {
  if (kernel->is_npu()) return kernel;
  return Splitter(kernel, target).run();
}

}  // namespace tw::ascend
