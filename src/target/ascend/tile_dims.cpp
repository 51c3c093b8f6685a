// tile_dims: the kernel's tile dims that change together (see tile_dims.h).
#include "target/ascend/tile_dims.h"

#include <optional>
#include <set>
#include <utility>

#include "ir/functor.h"

namespace tw::ascend {

namespace {

// A tile's dim, by the kernel (0: the user's, 1: after split_cube_vector) and the tile's name:
// split_cube_vector's incarnations of a tile (its Cube and its Vector copy) are buffers of the
// same name; a vector tile's rows may be each AIV's part of the user's.
using Dim = std::pair<std::string, size_t>;
std::string tagged(int kernel, const std::string& name) { return std::to_string(kernel) + ":" + name; }

struct Classes {
  std::map<Dim, Dim> parent;
  std::set<Dim> fixed;
  std::map<Dim, std::string> reduced;  // a dim a reduction of the user's kernel reduces: which one
  std::map<std::string, std::vector<int64_t>> shape;  // per tile name (a name of two shapes: none)
  std::set<std::string> ambiguous;
  std::map<std::string, ir::TilePart> part;  // a tile of the split kernel made of a user tile (BufferNode::part_of)
  Dim find(Dim d) {
    auto it = parent.find(d);
    if (it == parent.end()) return parent[d] = d;
    if (it->second == d) return d;
    return it->second = find(it->second);
  }
  void join(Dim a, Dim b, bool same_tile = false) {
    auto ea = extent(a), eb = extent(b);
    if (!ea || !eb || (*ea != *eb && !same_tile)) return;  // only dims of equal extent
    Dim ra = find(a), rb = find(b);
    parent[ra] = rb;
  }
  std::optional<int64_t> extent(const Dim& d) const {
    auto it = shape.find(d.first);
    if (it == shape.end() || ambiguous.count(d.first) || d.second >= it->second.size()) return std::nullopt;
    return it->second[d.second];
  }
};

bool is_tile(const ir::Buffer& b) { return b->scope != ir::Scope::global; }

// The dims of a region whose extent is not 1, in order, with their extents (nullopt: not constant).
std::vector<std::pair<size_t, std::optional<int64_t>>> wide_dims(const ir::Region& r) {
  std::vector<std::pair<size_t, std::optional<int64_t>>> out;
  for (size_t d = 0; d < r.extents.size(); ++d) {
    auto e = ir::as_const_int(r.extents[d]);
    if (e && *e == 1) continue;
    out.push_back({d, e});
  }
  return out;
}

// The region covers its buffer's dim d whole.
bool whole_dim(const ir::Region& r, size_t d) {
  auto shape = r.buffer->const_shape();
  auto s = ir::as_const_int(r.starts[d]);
  auto e = ir::as_const_int(r.extents[d]);
  return shape && s && e && *s == 0 && *e == (*shape)[d];
}
// The region spans its buffer's dim d whole in extent (a tensor's rows at a block offset are not).
bool full_extent(const ir::Region& r, size_t d) {
  auto shape = r.buffer->const_shape();
  auto e = ir::as_const_int(r.extents[d]);
  return shape && e && *e == (*shape)[d];
}

// The ties and fixed dims of one kernel's statements (the user's kernel, then the one after
// split_cube_vector: its compiler tiles, e.g. P V's partial `acc_o_pv`, join their classes).
void add_kernel(const ir::Kernel& kernel, int tag, Classes& c) {
  std::set<const ir::BufferNode*> params;
  for (const auto& p : kernel->params)
    if (p.buffer) params.insert(p.buffer.get());
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Alloc) return;
    auto* b = ir::as<ir::AllocNode>(s)->buffer.get();
    auto shape = b->const_shape();
    if (!shape) return;
    auto [it, fresh] = c.shape.emplace(tagged(tag, b->name), *shape);
    if (!fresh && it->second != *shape) c.ambiguous.insert(tagged(tag, b->name));
    if (!b->part_of.tile.empty()) c.part[tagged(tag, b->name)] = b->part_of;
  });
  auto dim = [tag](const ir::Buffer& b, size_t d) { return Dim{tagged(tag, b->name), d}; };
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    switch (s->kind) {
      case ir::StmtKind::Gemm: {
        auto* g = ir::as<ir::GemmNode>(s);
        // each operand's (rows, cols) dims, when the region covers them whole
        auto md = [&](const ir::Region& r) -> std::optional<std::pair<Dim, Dim>> {
          if (!is_tile(r.buffer) || r.extents.size() < 2) return std::nullopt;
          auto [rows, cols] = ir::gemm_matrix_dims(r);
          if (!whole_dim(r, rows) || !whole_dim(r, cols)) return std::nullopt;
          return std::make_pair(dim(r.buffer, rows), dim(r.buffer, cols));
        };
        auto a = md(g->a), b = md(g->b), cc = md(g->c);
        std::optional<Dim> am, ak, bk, bn;
        if (a) { am = g->trans_a ? a->second : a->first; ak = g->trans_a ? a->first : a->second; }
        if (b) { bk = g->trans_b ? b->second : b->first; bn = g->trans_b ? b->first : b->second; }
        if (am && cc) c.join(*am, cc->first);
        if (bn && cc) c.join(*bn, cc->second);
        if (ak && bk) c.join(*ak, *bk);
        break;
      }
      case ir::StmtKind::Copy: {
        auto* cp = ir::as<ir::CopyNode>(s);
        auto sd = wide_dims(cp->src), dd = wide_dims(cp->dst);
        if (sd.size() != dd.size()) break;
        for (size_t i = 0; i < sd.size(); ++i) {
          const ir::Region* tile = is_tile(cp->dst.buffer) ? &cp->dst : is_tile(cp->src.buffer) ? &cp->src : nullptr;
          if (!tile) break;
          if (is_tile(cp->src.buffer) && is_tile(cp->dst.buffer)) {
            if (whole_dim(cp->src, sd[i].first) && whole_dim(cp->dst, dd[i].first))
              c.join(dim(cp->src.buffer, sd[i].first), dim(cp->dst.buffer, dd[i].first));
            continue;
          }
          // a tile dim copied whole from / to a tensor parameter's whole dim: fixed by the tensor
          const ir::Region& tensor = tile == &cp->dst ? cp->src : cp->dst;
          if (!params.count(tensor.buffer.get())) continue;  // a GM workspace (a hand-off) fixes nothing
          size_t td = tile == &cp->dst ? dd[i].first : sd[i].first, gd = tile == &cp->dst ? sd[i].first : dd[i].first;
          if (whole_dim(*tile, td) && full_extent(tensor, gd)) c.fixed.insert(dim(tile->buffer, td));
        }
        break;
      }
      case ir::StmtKind::Reduce: {
        auto* r = ir::as<ir::ReduceNode>(s);
        auto ss = r->src->const_shape(), ds = r->dst->const_shape();
        if (!ss || !ds) break;
        if (tag == 0 && r->axis >= 0 && static_cast<size_t>(r->axis) < ss->size())
          c.reduced.emplace(dim(r->src, static_cast<size_t>(r->axis)),
                            "T.reduce_" + std::string(ir::reducekind_name(r->reduce_kind)) + " at line " +
                                std::to_string(s->span.line));
        std::vector<size_t> kept;
        for (size_t d = 0; d < ss->size(); ++d)
          if (static_cast<int>(d) != r->axis) kept.push_back(d);
        if (kept.size() == ds->size())
          for (size_t i = 0; i < kept.size(); ++i) c.join(dim(r->src, kept[i]), dim(r->dst, i));
        break;
      }
      case ir::StmtKind::For: {
        // a T.Parallel loop: each loop variable of the nest ties the tile dims it indexes
        // (nested parallel loops are visited again as outermost loops of their own: the same ties)
        auto* f = ir::as<ir::ForNode>(s);
        if (f->for_kind != ir::ForKind::parallel) break;
        std::map<const ir::VarNode*, Dim> first;
        auto index = [&](const ir::Buffer& b, const std::vector<ir::Expr>& idx) {
          if (!is_tile(b)) return;
          for (size_t d = 0; d < idx.size(); ++d) {
            if (idx[d]->kind != ir::ExprKind::Var) continue;
            auto* v = static_cast<const ir::VarNode*>(idx[d].get());
            auto [it, fresh] = first.emplace(v, dim(b, d));
            if (!fresh) c.join(it->second, dim(b, d));
          }
        };
        ir::for_each_stmt(f->body, [&](const ir::Stmt& t) {
          if (t->kind == ir::StmtKind::Store) index(ir::as<ir::StoreNode>(t)->buffer, ir::as<ir::StoreNode>(t)->indices);
        });
        ir::for_each_expr(f->body, [&](const ir::Expr& e) {
          if (e->kind == ir::ExprKind::Load) {
            auto* ld = static_cast<const ir::LoadNode*>(e.get());
            index(ld->buffer, ld->indices);
          }
        });
        break;
      }
      default: break;
    }
  });
}

}  // namespace

TileDims tile_dims(const ir::Kernel& kernel, const ir::Kernel& user) {
  Classes c;
  add_kernel(user, 0, c);
  add_kernel(kernel, 1, c);
  for (const auto& [name, shape] : c.shape)  // a tile of both kernels: its dims are the same dims
    if (name[0] == '1' && c.shape.count("0" + name.substr(1)) && c.shape["0" + name.substr(1)].size() == shape.size())
      for (size_t d = 0; d < shape.size(); ++d) c.join({name, d}, {"0" + name.substr(1), d}, /*same_tile=*/true);
  // a tile split_cube_vector made of a user tile X (BufferNode::part_of: the Vector copy X_ub, P V's
  // partial X_pv, each AIV's part of X's rows): X's dims
  for (const auto& [name, part] : c.part) {
    const std::string base = tagged(0, part.tile);
    if (!c.shape.count(base) || !c.shape.count(name)) continue;
    const std::vector<int64_t>& user_shape = c.shape[base];
    const std::vector<int64_t>& shape = c.shape[name];
    bool same = user_shape.size() == shape.size() && !shape.empty() && shape[0] * part.row_parts == user_shape[0];
    for (size_t d = 1; same && d < shape.size(); ++d) same = shape[d] == user_shape[d];
    if (!same) continue;
    for (size_t d = 0; d < shape.size(); ++d) c.join({name, d}, {base, d}, /*same_tile=*/true);
  }
  TileDims out;
  std::map<Dim, int> ids;
  for (const auto& [tname, shape] : c.shape) {  // the user's tiles first: their extents name the classes
    const std::string name = tname.substr(2);
    if (c.ambiguous.count(tname) || out.dims.count(name)) continue;
    std::vector<int> v;
    for (size_t d = 0; d < shape.size(); ++d) {
      Dim root = c.find({tname, d});
      auto [it, fresh] = ids.emplace(root, static_cast<int>(out.extent.size()));
      if (fresh) {
        out.extent.push_back(shape[d]);
        out.fixed.push_back(false);
        out.reduced.push_back("");
      }
      v.push_back(it->second);
    }
    out.dims[name] = v;
  }
  for (const auto& d : c.fixed) {
    auto it = ids.find(c.find(d));
    if (it != ids.end()) out.fixed[it->second] = true;
  }
  for (const auto& [d, by] : c.reduced) {
    auto it = ids.find(c.find(d));
    if (it != ids.end() && out.reduced[it->second].empty()) out.reduced[it->second] = by;
  }
  ir::for_each_stmt(user->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Alloc) out.user.insert(ir::as<ir::AllocNode>(s)->buffer->name);
  });
  return out;
}

}  // namespace tw::ascend
