// fuse_map_reduce (see fuse_map_reduce.h).
#include "target/cpu/fuse_map_reduce.h"

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

// The conditions of fuse_map_reduce.h for the map `map_s` (storing `st`) and the statement after it.
bool fusable_reduce(const Stmt& map_s, const StoreNode& st, const Stmt& red_s) {
  if (red_s->kind != StmtKind::Reduce) return false;
  const auto& rd = *as<ReduceNode>(red_s);
  const Buffer& t = st.buffer;
  if (rd.src != t || rd.axis != 1 || t->dtype.code != DTypeCode::f32 ||
      rd.dst->dtype.code != DTypeCode::f32 || rd.dst == t)
    return false;
  auto shape = *t->const_shape();
  auto ds = rd.dst->const_shape();
  if (shape[1] < 16) return false;
  if (!ds || !((ds->size() == 1 && (*ds)[0] == shape[0]) || (ds->size() == 2 && (*ds)[0] == shape[0] && (*ds)[1] == 1)))
    return false;
  // the map must not read the reduce's destination (it is written row by row)
  bool reads_dst = false;
  for_each_expr(map_s, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load) reads_dst |= static_cast<const LoadNode*>(e.get())->buffer == rd.dst;
  });
  return !reads_dst;
}

}  // namespace

Kernel fuse_map_reduce(const Kernel& k) {
  std::unordered_map<const StmtNode*, Annotation> marks;
  for_each_seq(k, [&](const SeqNode& seq, const ForNode* loop) {
    for (size_t i = 0; i + 1 < seq.body.size(); ++i) {
      const Stmt& red_s = seq.body[i + 1];
      if (const StoreNode* st = full_tile_map(seq.body[i]); st && fusable_reduce(seq.body[i], *st, red_s)) {
        // t is written (keep) unless nothing reads it later; in a loop whose iterations do not
        // each overwrite t first, the next iteration may read it: written too
        const bool keep = !fusable(k, loop, st->buffer) || used_after(k, red_s, st->buffer);
        marks.emplace(seq.body[i].get(), Annotation{"fuse_reduce", {keep ? 1 : 0}});
      }
    }
  });
  return annotate(k, marks);
}

}  // namespace tw::cpu
