#include "target/ascend/infer_scope.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"

namespace tw::ascend {

namespace {

using ir::Buffer;
using ir::Scope;

enum Role : unsigned { kOperand = 1, kAccumulator = 2, kVector = 4 };

// A copy from a gemm accumulator into a gemm operand that the Cube's Fixpipe L0C -> L1 does (program.h
// FixpipeL1; docs/ascend.md "Session 36"): float32 -> float16 / bfloat16 (quantPre F322F16 / F322BF16;
// into L1 there is no float32 -> float32), 2-D tiles, windows of whole 16 x 16 fractals at constant
// starts (a partial fractal would leave the operand's padding rows / columns, which a gemm's K reads,
// to the accumulator's padding).
bool fixpipe_to_l1(const ir::CopyNode& c) {
  ir::DType from = c.src.buffer->dtype, to = c.dst.buffer->dtype;
  if (from != ir::DType(ir::DTypeCode::f32) || (to != ir::DType(ir::DTypeCode::f16) && to != ir::DType(ir::DTypeCode::bf16)))
    return false;
  for (const ir::Region* r : {&c.src, &c.dst}) {
    if (r->buffer->shape.size() != 2 || r->starts.size() != 2) return false;
    for (size_t i = 0; i < 2; ++i) {
      auto s = ir::as_const_int(r->starts[i]), e = ir::as_const_int(r->extents[i]);
      if (!s || !e || *s % 16 || *e % 16) return false;
    }
  }
  return true;
}

bool portable(const Buffer& b) { return b->scope == Scope::shared || b->scope == Scope::fragment; }

// Collects the roles of every portable tile.
struct Roles : ir::Visitor {
  std::unordered_map<const ir::BufferNode*, unsigned> role;
  std::unordered_map<const ir::BufferNode*, ir::Span> span;  // first use with each role, for errors

  void add(const Buffer& b, unsigned r, const ir::Span& sp) {
    if (!portable(b)) return;
    unsigned& x = role[b.get()];
    if ((r & (kOperand | kAccumulator)) && (x & (kOperand | kAccumulator)) && !(x & r))
      throw ir::Error("tile '" + b->name + "' is both an operand and the accumulator of T.gemm", sp,
                      "accumulate into a separate fragment and copy it if the result feeds another gemm");
    x |= r;
    span.emplace(b.get(), sp);
  }
  void visit(const ir::Stmt& s) override {
    if (!s) return;
    switch (s->kind) {
      case ir::StmtKind::Gemm: {
        auto* g = ir::as<ir::GemmNode>(s);
        add(g->a.buffer, kOperand, s->span);
        add(g->b.buffer, kOperand, s->span);
        add(g->c.buffer, kAccumulator, s->span);
        break;
      }
      case ir::StmtKind::Store: add(ir::as<ir::StoreNode>(s)->buffer, kVector, s->span); break;
      case ir::StmtKind::Reduce: {
        auto* r = ir::as<ir::ReduceNode>(s);
        add(r->src, kVector, s->span);
        add(r->dst, kVector, s->span);
        break;
      }
      case ir::StmtKind::Seq:
      case ir::StmtKind::For:
      case ir::StmtKind::If:
      case ir::StmtKind::Let:
      case ir::StmtKind::Alloc:
      case ir::StmtKind::Copy:
      case ir::StmtKind::Fill:
      case ir::StmtKind::CoreScope:
      case ir::StmtKind::Sync: break;  // no role of their own (children are visited below)
    }
    ir::Visitor::visit(s);
  }
  void visit(const ir::Expr& e) override {
    if (e && e->kind == ir::ExprKind::Load) add(ir::as<ir::LoadNode>(e)->buffer, kVector, e->span);
    ir::Visitor::visit(e);
  }
  using ir::Visitor::visit;
};

// Every buffer referenced outside its allocation.
struct Used : ir::Visitor {
  std::unordered_set<const ir::BufferNode*> used;
  void visit(const ir::Stmt& s) override {
    if (s && s->kind == ir::StmtKind::Alloc) return;
    ir::Visitor::visit(s);
  }
  void visit_buffer(const Buffer& b) override { used.insert(b.get()); }
  using ir::Visitor::visit;
};

struct Rescope : ir::Mutator {
  const Roles& roles;
  const Used& uses;
  std::unordered_map<const ir::BufferNode*, Buffer> done;
  Rescope(const Roles& r, const Used& u) : roles(r), uses(u) {}

  ir::Stmt mutate(const ir::Stmt& s) override {
    if (s && s->kind == ir::StmtKind::Alloc) {
      const Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
      if (portable(b) && !uses.used.count(b.get()))  // a tile never used: no memory, no unit
        return std::make_shared<ir::SeqNode>(std::vector<ir::Stmt>{}, s->span);
    }
    return ir::Mutator::mutate(s);
  }
  using ir::Mutator::mutate;

  Buffer mutate_buffer(const Buffer& b) override {
    if (!portable(b)) return b;
    auto it = done.find(b.get());
    if (it != done.end()) return it->second;
    auto r = roles.role.find(b.get());
    unsigned role = r == roles.role.end() ? 0u : r->second;
    Scope s;
    if (role == kOperand)
      s = Scope::L1;
    else if (role == kAccumulator)
      s = Scope::L0C;
    else if (role == 0 || role == kVector)
      s = Scope::UB;
    else
      return done[b.get()] = b;  // Cube and vector: split_cube_vector's job
    return done[b.get()] = ir::buffer(b->name, b->dtype, b->shape, s, b->span);
  }
};

}  // namespace

ir::Kernel infer_scope(const ir::Kernel& kernel, const target::Target&) {
  Roles roles;
  roles.visit(kernel->body);
  // A copy from a gemm result that only the Cube uses into a gemm operand (`T.copy(s, p)`, then
  // `T.gemm(p, ...)`) that Fixpipe L0C -> L1 cannot do (below): both tiles get the vector role
  // too and the copy runs on the Vector core between two hand-offs (L0C -> GM -> UB, UB -> GM ->
  // L1), as a T.Parallel copy would. (A result the vector code also uses is already on both
  // units: split_cube_vector hands it to the operand from UB, flash attention's P.)
  // A copy from such a gemm result into a vector tile (`T.copy(s, s16)`, s16 a float16 fragment
  // the vector code reads): the copy is a hand-off, so the result gets the vector role too and
  // split_cube_vector makes the copy the hand-off itself, in the destination's dtype (Fixpipe
  // converts float32 -> float16 / bfloat16 on the way to the GM workspace: the user's narrowing).
  // A copy from a vector tile into a gemm operand only the Cube uses (`T.copy(p32, p)`, p32 the
  // softmax's float32 weights): the operand gets the vector role, and the copy runs on the Vector
  // core before the operand's hand-off (UB -> GM -> L1).
  // A copy from a gemm result that only the Cube uses into a gemm operand only the Cube uses, of
  // whole fractals from float32 to a 16-bit type (fixpipe_to_l1), whose tiles no other copy
  // touches but the Cube's own moves to and from tensors (below): both stay on the Cube and the copy is the Cube's Fixpipe L0C -> L1 (session 36). The
  // rules above apply to every other copy.
  std::vector<const ir::CopyNode*> copies;
  // every copy of a tile, a tensor's too (review36 R3: T.copy(p, Y) of an operand the Fixpipe put in L1
  // only was 'no data path L1 -> global'), but the Cube's own moves of the two: an accumulator copied out
  // to a tensor (Fixpipe L0C -> GM) and an operand loaded from one (MTE2 GM -> L1; hunt37 F1: a state
  // loaded once, then fed back into its operand by Fixpipe L0C -> L1 each step)
  std::unordered_map<const ir::BufferNode*, int> in_copies, to_tensor, from_tensor;
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Copy) return;
    auto* c = ir::as<ir::CopyNode>(s);
    ++in_copies[c->src.buffer.get()];
    ++in_copies[c->dst.buffer.get()];
    if (c->dst.buffer->scope == Scope::global) ++to_tensor[c->src.buffer.get()];
    if (c->src.buffer->scope == Scope::global && c->src.buffer->dtype == c->dst.buffer->dtype)
      ++from_tensor[c->dst.buffer.get()];  // (MTE2 converts nothing)
    if (!portable(c->src.buffer) || !portable(c->dst.buffer)) return;
    copies.push_back(c);
  });
  auto on_cube = [&](const ir::CopyNode* c) {
    auto role = [&](const Buffer& b) { auto it = roles.role.find(b.get()); return it == roles.role.end() ? 0u : it->second; };
    const ir::BufferNode *src = c->src.buffer.get(), *dst = c->dst.buffer.get();
    return role(c->src.buffer) == kAccumulator && role(c->dst.buffer) == kOperand &&
           in_copies[src] - to_tensor[src] == 1 && in_copies[dst] - from_tensor[dst] == 1 && fixpipe_to_l1(*c);
  };
  std::vector<const ir::CopyNode*> rest;
  for (const ir::CopyNode* c : copies)
    if (!on_cube(c)) rest.push_back(c);
  for (const ir::CopyNode* c : rest) {
    unsigned& src = roles.role[c->src.buffer.get()];
    unsigned& dst = roles.role[c->dst.buffer.get()];
    if (src == kAccumulator) {
      if (dst & kOperand) dst |= kVector;
      if (dst & (kOperand | kVector) || dst == 0) src |= kVector;
    } else if ((src == kVector || src == 0) && dst == kOperand) {
      dst |= kVector;
    }
  }
  Used uses;
  uses.visit(kernel->body);
  Rescope m(roles, uses);
  return m.mutate_kernel(kernel);
}

}  // namespace tw::ascend
