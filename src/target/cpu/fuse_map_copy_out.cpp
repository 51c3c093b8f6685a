// fuse_map_copy_out (see fuse_map_copy_out.h).
#include "target/cpu/fuse_map_copy_out.h"

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

// The copy-out conditions of fuse_map_copy_out.h for the map `map_s` (storing `st`) and the
// statement after it.
bool fusable_copy_out(const Kernel& k, const ForNode* loop, const Stmt& map_s, const StoreNode& st, const Stmt& copy_s) {
  if (copy_s->kind != StmtKind::Copy) return false;
  const Buffer& t = st.buffer;
  if (t->dtype.code != DTypeCode::f32 || !fusable(k, loop, t)) return false;
  const auto& outer = *as<ForNode>(map_s);
  const auto& inner = *as<ForNode>(outer.body);
  const auto& cp = *as<CopyNode>(copy_s);
  auto shape = *t->const_shape();
  auto e1 = as_const_int(inner.extent);
  if (!e1 || *e1 < kOutChunk) return false;
  // the copy: the whole tile into a global float32 tensor, or a bfloat16 / float16 one (each chunk
  // converted as the copy converts it: codegen's store_chunk, tw_cpu::convert)
  const DTypeCode oc = cp.dst.buffer->dtype.code;
  if (cp.atomic || cp.src.buffer != t || cp.dst.buffer->scope != Scope::global ||
      (oc != DTypeCode::f32 && oc != DTypeCode::bf16 && oc != DTypeCode::f16))
    return false;  // (an atomic add stays a separate read-add-write of the tile: codegen's emit_atomic_add)
  for (size_t d = 0; d < 2; ++d) {
    auto s0 = as_const_int(cp.src.starts[d]), ex = as_const_int(cp.src.extents[d]);
    if (!s0 || *s0 != 0 || !ex || *ex != shape[d]) return false;
  }
  // the map does not read the destination tensor (its rows are written before the rest of the map is computed)
  bool reads_dst = false;
  for_each_expr(inner.body, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load) reads_dst |= static_cast<const LoadNode*>(e.get())->buffer == cp.dst.buffer;
  });
  if (reads_dst || used_after(k, copy_s, t)) return false;
  // the destination: tile dims with extent != 1 paired in order with the region's; rows contiguous
  const Region& d = cp.dst;
  const int rank = d.buffer->ndim();
  if (static_cast<int>(d.starts.size()) != rank || static_cast<int>(d.extents.size()) != rank) return false;
  std::vector<int> dd, td;
  for (int x = 0; x < rank; ++x)
    if (as_const_int(d.extents[x]) != std::optional<int64_t>(1)) dd.push_back(x);
  for (int x = 0; x < 2; ++x)
    if (shape[x] != 1) td.push_back(x);
  if (td.size() != dd.size() || td.back() != 1 || dd.back() != rank - 1) return false;
  for (size_t x = 0; x < td.size(); ++x)
    if (as_const_int(d.extents[dd[x]]) != std::optional<int64_t>(shape[td[x]])) return false;
  for (int x = 0; x < rank; ++x) {  // a region provably outside its tensor: always the tail path
    auto s0 = as_const_int(d.starts[x]), ex = as_const_int(d.extents[x]), n = as_const_int(d.buffer->shape[x]);
    if ((s0 && *s0 < 0) || (s0 && ex && n && *s0 + *ex > *n)) return false;
  }
  return true;
}

}  // namespace

Kernel fuse_map_copy_out(const Kernel& k) {
  std::unordered_map<const StmtNode*, Annotation> marks;
  for_each_seq(k, [&](const SeqNode& seq, const ForNode* loop) {
    for (size_t i = 0; i + 1 < seq.body.size(); ++i)
      if (const StoreNode* st = full_tile_map(seq.body[i]))
        if (fusable_copy_out(k, loop, seq.body[i], *st, seq.body[i + 1]))
          marks.emplace(seq.body[i].get(), Annotation{"fuse_copy_out", {}});
  });
  return annotate(k, marks);
}

}  // namespace tw::cpu
