#include "target/ascend/multi_buffer.h"
#include "target/ascend/pass_util.h"

#include <array>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/rename_defs.h"
#include "transform/tile_facts.h"
#include "transform/simplify.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Buffer;
using ir::Expr;
using ir::Scope;
using ir::Stmt;


// One copy of a loop body: the loop var replaced, staged tiles indexed by `stage` (modulo their
// copies: L0 tiles may have fewer than the loop's stages), every variable defined in the body renamed.
struct Instantiate : RenameDefs {
  const std::unordered_map<const ir::BufferNode*, Buffer>& staged;
  int64_t stage;
  Instantiate(const std::unordered_map<const ir::BufferNode*, Buffer>& s, int64_t st, std::string sfx)
      : RenameDefs(std::move(sfx)), staged(s), stage(st) {}

  Expr copy_of(const Buffer& nb) const { return C(stage % *ir::as_const_int(nb->shape[0])); }

  using RenameDefs::mutate;
  Expr mutate(const Expr& e) override {
    if (e && e->kind == ir::ExprKind::Load) {
      auto* l = ir::as<ir::LoadNode>(e);
      auto it = staged.find(l->buffer.get());
      if (it != staged.end()) {
        std::vector<Expr> idx{copy_of(it->second)};
        for (const auto& i : l->indices) idx.push_back(mutate(i));
        return ir::load(it->second, idx, e->span);
      }
    }
    return RenameDefs::mutate(e);
  }
  Stmt mutate(const Stmt& s) override {
    if (!s) return s;
    switch (s->kind) {
      case ir::StmtKind::Let:
      case ir::StmtKind::For: break;  // renamed: RenameDefs
      case ir::StmtKind::Alloc: return nullptr;  // hoisted out of the loop (staged or shared by the copies)
      case ir::StmtKind::Store: {
        auto* n = ir::as<ir::StoreNode>(s);
        auto it = staged.find(n->buffer.get());
        if (it == staged.end()) break;
        std::vector<Expr> idx{copy_of(it->second)};
        for (const auto& i : n->indices) idx.push_back(mutate(i));
        return std::make_shared<ir::StoreNode>(it->second, idx, mutate(n->value), s->span);
      }
      case ir::StmtKind::Seq:
      case ir::StmtKind::If:
      case ir::StmtKind::Copy:
      case ir::StmtKind::Gemm:
      case ir::StmtKind::Fill:
      case ir::StmtKind::Reduce:
      case ir::StmtKind::CoreScope:
      case ir::StmtKind::Sync: break;  // regions and loads: mutate_region / mutate(Expr)
    }
    return RenameDefs::mutate(s);
  }
  ir::Region mutate_region(const ir::Region& r) override {
    ir::Region x = ir::Mutator::mutate_region(r);
    auto it = staged.find(r.buffer.get());
    if (it == staged.end()) return x;
    x.buffer = it->second;
    x.starts.insert(x.starts.begin(), copy_of(it->second));
    x.extents.insert(x.extents.begin(), C(1));
    return x;
  }
};

int64_t bytes_of(const Buffer& b) {
  auto m = mem_of(b->scope);
  auto shape = b->const_shape();
  return m && shape ? tile_bytes(*m, b->dtype, *shape) : 0;
}

// Tiles allocated in `body` outside nested loops.
std::vector<Buffer> loop_allocs(const Stmt& body) {
  std::vector<Buffer> out;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case ir::StmtKind::Seq:
        for (const auto& c : ir::as<ir::SeqNode>(s)->body) walk(c);
        break;
      case ir::StmtKind::If:
        walk(ir::as<ir::IfNode>(s)->then_body);
        walk(ir::as<ir::IfNode>(s)->else_body);
        break;
      case ir::StmtKind::CoreScope: walk(ir::as<ir::CoreScopeNode>(s)->body); break;
      case ir::StmtKind::Alloc: out.push_back(ir::as<ir::AllocNode>(s)->buffer); break;
      case ir::StmtKind::For:  // nested loops keep their tiles
      case ir::StmtKind::Let:
      case ir::StmtKind::Store:
      case ir::StmtKind::Copy:
      case ir::StmtKind::Gemm:
      case ir::StmtKind::Fill:
      case ir::StmtKind::Reduce:
      case ir::StmtKind::Sync: break;
    }
  };
  walk(body);
  return out;
}

// Tiles allocated outside a pipelined loop (num_stages >= 2) whose values live within one
// iteration of it (transform/tile_facts.h loop_local_tiles: nothing outside the loop body references them
// and each iteration overwrites all of it -- a copy, a fill or an elementwise map that reads none
// of it -- before anything else in the body references it) have
// their allocation moved to the top of the loop body, where MultiBuffer stages them as the tiles
// the body allocates. Any other tile allocated outside (an accumulator, a tile written under an
// `if` or by a partial write first, read after the loop) stays where it is, shared by the copies.
struct SinkIterationLocal : ir::Mutator {
  std::unordered_map<const ir::StmtNode*, std::vector<Stmt>> into;  // loop -> allocations moved into its body
  std::unordered_set<const ir::StmtNode*> moved;                      // the allocations moved

  explicit SinkIterationLocal(const ir::Kernel& k) {
    std::vector<Stmt> all_allocs;
    ir::for_each_stmt(k->body, [&](const Stmt& s) {
      if (s->kind == ir::StmtKind::Alloc) all_allocs.push_back(s);
    });
    ir::for_each_stmt(k->body, [&](const Stmt& s) {
      if (s->kind != ir::StmtKind::For) return;
      auto* f = ir::as<ir::ForNode>(s);
      if (f->for_kind != ir::ForKind::pipelined || f->num_stages <= 1) return;
      auto local = transform::loop_local_tiles(k, *f, /*maps=*/true);
      if (local.empty()) return;
      std::unordered_set<const ir::StmtNode*> inside;
      ir::for_each_stmt(f->body, [&](const Stmt& x) { inside.insert(x.get()); });
      for (const auto& a : all_allocs)  // in the kernel's order
        if (!inside.count(a.get()) && !moved.count(a.get()) && local.count(ir::as<ir::AllocNode>(a)->buffer.get())) {
          moved.insert(a.get());
          into[s.get()].push_back(a);
        }
    });
  }
  Stmt mutate(const Stmt& s) override {
    if (s && moved.count(s.get())) return nullptr;
    Stmt m = ir::Mutator::mutate(s);
    auto it = s ? into.find(s.get()) : into.end();
    if (it == into.end()) return m;
    auto* f = ir::as<ir::ForNode>(m);
    std::vector<Stmt> body = it->second;
    for (const auto& c : ir::as<ir::SeqNode>(f->body)->body) body.push_back(c);  // a sequence (loop_local_tiles)
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages,
                                         std::make_shared<ir::SeqNode>(body, f->body->span), m->span, f->user_extent);
  }
  using ir::Mutator::mutate;
};

struct MultiBuffer : ir::Mutator {
  const target::AscendParams& hw;
  int64_t max_stages;  // 0: as the loops ask
  std::array<int64_t, kNumMems> used{};  // bytes of every tile of the kernel, per memory
  MultiBuffer(const ir::Kernel& k, const target::AscendParams& h, int64_t most) : hw(h), max_stages(most) {
    ir::for_each_stmt(k->body, [&](const Stmt& s) {
      if (s->kind != ir::StmtKind::Alloc) return;
      const Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
      if (auto m = mem_of(b->scope)) used[static_cast<int>(*m)] += bytes_of(b);
    });
  }

  // A serial loop that loads tiles from GM gets two stages when the copies fit (counting every
  // tile of the kernel as live at once).
  int64_t auto_stages(const Stmt& body) {
    std::unordered_set<const ir::BufferNode*> loaded;
    ir::for_each_stmt(body, [&](const Stmt& s) {
      if (s->kind == ir::StmtKind::Copy && ir::as<ir::CopyNode>(s)->src.buffer->scope == Scope::global)
        loaded.insert(ir::as<ir::CopyNode>(s)->dst.buffer.get());
    });
    std::array<int64_t, kNumMems> extra{};
    bool any = false;
    for (const auto& b : loop_allocs(body)) {
      if (!loaded.count(b.get())) continue;
      any = true;
      if (auto m = mem_of(b->scope)) extra[static_cast<int>(*m)] += bytes_of(b);
    }
    if (!any) return 1;
    for (int m = 1; m < kNumMems; ++m)
      if (used[m] + extra[m] > capacity_of(hw, static_cast<Mem>(m))) return 1;
    for (int m = 1; m < kNumMems; ++m) used[m] += extra[m];
    return 2;
  }

  // Copies of the L0A / L0B tiles of a loop body with S stages: expand_gemm made them (sized so
  // that two copies of the body's L0 tiles fit, see expand_gemm.h); S copies when they fit, else
  // the most that fit (the copy for iteration i is i % copies).
  int64_t l0_stages(const Stmt& body, int64_t S, const std::function<bool(const Buffer&)>& shared) {
    for (int64_t c = S; c > 1; --c) {
      std::array<int64_t, kNumMems> need{};
      ir::for_each_stmt(body, [&](const Stmt& x) {
        if (x->kind != ir::StmtKind::Alloc) return;
        const Buffer& b = ir::as<ir::AllocNode>(x)->buffer;
        if (b->scope != Scope::L0A && b->scope != Scope::L0B) return;
        Mem m = *mem_of(b->scope);
        need[static_cast<int>(m)] += round_up(bytes_of(b), buffer_alignment(m)) * (shared(b) ? 1 : c);
      });
      if (need[static_cast<int>(Mem::L0A)] <= capacity_of(hw, Mem::L0A) &&
          need[static_cast<int>(Mem::L0B)] <= capacity_of(hw, Mem::L0B))
        return c;
    }
    return 1;
  }

  Stmt mutate(const Stmt& s) override {
    if (!s || s->kind != ir::StmtKind::For) return ir::Mutator::mutate(s);
    auto* f = ir::as<ir::ForNode>(s);
    if (f->for_kind != ir::ForKind::pipelined && f->for_kind != ir::ForKind::serial) return ir::Mutator::mutate(s);
    Stmt body = mutate(f->body);  // inner loops first
    int64_t S = f->for_kind == ir::ForKind::pipelined ? f->num_stages : auto_stages(body);
    if (max_stages > 0) S = std::min(S, max_stages);
    if (S <= 1) {  // no copies: the loop (pipelined or not) becomes a plain serial loop
      if (f->for_kind == ir::ForKind::serial && body == f->body) return s;
      return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, ir::ForKind::serial, 0, body, s->span);
    }

    // tiles to stage
    std::unordered_set<const ir::BufferNode*> whole;  // reduce operands
    std::unordered_set<const ir::BufferNode*> moved;  // tiles a copy (DMA) reads or writes
    ir::for_each_stmt(body, [&](const Stmt& x) {
      if (x->kind == ir::StmtKind::Reduce) {
        whole.insert(ir::as<ir::ReduceNode>(x)->src.get());
        whole.insert(ir::as<ir::ReduceNode>(x)->dst.get());
      }
      if (x->kind == ir::StmtKind::Copy) {
        moved.insert(ir::as<ir::CopyNode>(x)->src.buffer.get());
        moved.insert(ir::as<ir::CopyNode>(x)->dst.buffer.get());
      }
    });
    auto is_l0 = [](const Buffer& b) { return b->scope == Scope::L0A || b->scope == Scope::L0B; };
    auto shared = [&](const Buffer& b) {
      bool pingpong = is_l0(b) && b->ndim() > 2;
      // a compiler temporary no copy touches holds values of one iteration's vector code only
      bool vector_temp = !b->temp_of.empty() && !moved.count(b.get());
      return pingpong || vector_temp || whole.count(b.get()) > 0;
    };
    int64_t l0_copies = l0_stages(body, S, shared);
    std::unordered_map<const ir::BufferNode*, Buffer> staged;
    std::vector<Stmt> allocs;
    ir::for_each_stmt(body, [&](const Stmt& x) {
      if (x->kind != ir::StmtKind::Alloc) return;
      const Buffer& b = ir::as<ir::AllocNode>(x)->buffer;
      if (shared(b) || (is_l0(b) && l0_copies == 1)) {
        allocs.push_back(x);  // one tile shared by the copies
        return;
      }
      std::vector<Expr> shape{C(is_l0(b) ? l0_copies : S)};
      for (const auto& d : b->shape) shape.push_back(d);
      auto mb = std::make_shared<ir::BufferNode>(b->name, b->dtype, shape, b->scope, b->span);
      mb->temp_of = b->temp_of;  // a temporary's copies stay temporaries
      mb->part_of = b->part_of;
      if (b->stages == 0) mb->stages = is_l0(b) ? l0_copies : S;  // (copies of copies: nested loops show all dims)
      Buffer nb = mb;
      staged[b.get()] = nb;
      allocs.push_back(std::make_shared<ir::AllocNode>(nb, x->span));
    });

    // The body is unrolled U = lcm(S, L0 copies) times, so that every tile's copy is its global
    // iteration modulo its copies (iteration i uses L1 copy i % S and L0 copy i % l0_copies):
    // with 3 stages and 2 L0 copies, an unroll by 3 would give L0 copies 0, 1, 0, 0, 1, 0, and
    // the two steps around the unroll boundary would load into the same L0 copy back to back.
    int64_t U = std::lcm(S, l0_copies);
    ir::Var ko = ir::var(f->var->name + "_o", f->var->dtype, f->var->span);
    auto n = ir::as_const_int(f->extent);
    // When the unroll is longer than the stages (U > S) and the trip count is constant, the loop
    // runs the n / U whole unrolled bodies and the n % U last iterations follow it (no `if` in
    // the loop body: insert_sync can share and reuse event ids only between flags placed
    // unconditionally; 3 stages: up to 5 guarded copies otherwise). Else the copies past the first
    // are guarded by `if U*ko + st < n` unless U divides n (peeling there too made flash
    // attention's 2-stage loops slower: 33.1% -> 31.6% of peak, its steps after the loop ran out
    // of event ids).
    bool peel = n && U > S;
    bool exact = n && *n % U == 0;
    int64_t full = peel ? *n / U : 0, rest = peel ? *n % U : 0;
    // Each copy binds the loop variable to its iteration in a let (`g = g_o * 2`, `g_s1 = g_o * 2 + 1`), not
    // substituted: the loop's first copy, where a later pass meets an error first, keeps the user's name (port36
    // F4: a message printed S[bx * 4:+4, g_o * 2:+1] for the user's S[..., g]); the others are renamed apart, as
    // their own variables are (one C++ scope holds the copies).
    auto instance = [&](int64_t st, const Expr& iter, const char* tag) {
      Instantiate inst(staged, st, tag + std::to_string(st));
      const bool first = st == 0 && *tag == '_' && tag[1] == 's';
      ir::Var g = ir::var(first ? f->var->name : f->var->name + inst.suffix, f->var->dtype, f->var->span);
      inst.vars[f->var.get()] = g;
      std::vector<Stmt> b{std::make_shared<ir::LetNode>(g, simp(ir::binary(BinOp::Add, f->min, iter)), f->span)};
      for (const auto& x : ir::stmts_of(inst.mutate(body))) b.push_back(x);
      return Stmt(std::make_shared<ir::SeqNode>(b, s->span));
    };
    std::vector<Stmt> copies;
    for (int64_t st = 0; st < U; ++st) {
      Expr iter = simp(ir::binary(BinOp::Add, ir::binary(BinOp::Mul, ko, C(U)), C(st)));
      Stmt b = instance(st, iter, "_s");
      if (st > 0 && !peel && !exact) b = std::make_shared<ir::IfNode>(ir::binary(BinOp::LT, iter, f->extent, s->span), b, nullptr, s->span);
      copies.push_back(b);
    }
    Expr trips = peel ? C(full) : simp(ir::binary(BinOp::CeilDiv, f->extent, C(U)));
    if (!peel || full > 0)
      allocs.push_back(std::make_shared<ir::ForNode>(ko, C(0), trips, ir::ForKind::serial, 0,
                                                     std::make_shared<ir::SeqNode>(copies, s->span), s->span));
    for (int64_t st = 0; st < rest; ++st) allocs.push_back(instance(st, C(full * U + st), "_r"));  // (renamed apart from the loop's)
    return std::make_shared<ir::SeqNode>(allocs, s->span);
  }
  using ir::Mutator::mutate;
};

}  // namespace

ir::Kernel multi_buffer(const ir::Kernel& kernel, const target::Target& target, int64_t max_stages) {
  SinkIterationLocal sink(kernel);
  ir::Kernel k = sink.moved.empty() ? kernel : sink.mutate_kernel(kernel);
  MultiBuffer m(k, target.ascend, max_stages);
  return m.mutate_kernel(k);
}

}  // namespace tw::ascend
