// stage_global_copies: global -> global copies through fragment tiles (see stage_global_copies.h).
#include "target/ascend/stage_global_copies.h"

#include <algorithm>
#include <functional>

#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

// The constant extents of a region, run-time extents min(C, e) at their bound C; nullopt for others.
std::optional<std::vector<int64_t>> extent_bounds(const ir::Region& r) {
  std::vector<int64_t> e;
  for (const auto& x : r.extents) {
    auto b = ir::extent_bound(x);
    if (!b) return std::nullopt;
    e.push_back(*b);
  }
  return e;
}

// The extent of chunk [off, off + n) of a dim whose whole extent is x (constant, or min(C, e)):
// the constant n, or min(n, e - off) for a run-time extent.
ir::Expr chunk_extent(const ir::Expr& x, const ir::Expr& off, int64_t n) {
  if (auto rt = ir::runtime_extent(x)) return ir::binary(ir::BinOp::Min, C(n), ir::arith::sub(rt->value, off));
  return C(n);
}

std::vector<ir::Stmt> stage(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  ir::DType st = c->src.buffer->dtype;
  auto es = extent_bounds(c->src), ed = extent_bounds(c->dst);
  if (!es || !ed)  // not reached: the verifier allows constant and min(C, e) extents only
    throw ir::Error("copy global -> global with extents that are neither constants nor min(C, e)", sp,
                    "copy through a tile: t = T.alloc_fragment(<shape>, dtype); T.copy(<src>, t); T.copy(t, <dst>)");
  std::vector<ir::Stmt> out;
  if (std::count(es->begin(), es->end(), 0) || std::count(ed->begin(), ed->end(), 0)) return out;
  const int64_t per_tile = kCopyStageBytes / std::max(st.bytes(), c->dst.buffer->dtype.bytes());
  auto leaf = [&](const ir::Region& src, const ir::Region& dst, const std::vector<int64_t>& shape, std::vector<ir::Stmt>& o) {
    std::vector<ir::Expr> sh;
    for (auto d : shape) sh.push_back(C(d));
    ir::Buffer t = ir::buffer(names.fresh(c->dst.buffer->name + "_stage"), st, sh, ir::Scope::fragment, sp);
    o.push_back(std::make_shared<ir::AllocNode>(t, sp));
    o.push_back(std::make_shared<ir::CopyNode>(src, ir::full_region(t), sp));
    o.push_back(std::make_shared<ir::CopyNode>(ir::full_region(t), dst, sp, c->atomic));
  };
  if (*es != *ed) {
    int64_t n = 1;
    for (auto x : *ed) n *= x;
    if (n > per_tile)
      throw ir::Error("copy global -> global between windows of different shapes, " + std::to_string(n) +
                          " elements: more than one staging tile of " + std::to_string(per_tile) + " on Ascend",
                      sp, "copy through a tile in chunks: t = T.alloc_fragment(<chunk shape>, dtype); "
                          "T.copy(<src chunk>, t); T.copy(t, <dst chunk>)");
    leaf(c->src, c->dst, *ed, out);
    return out;
  }
  // chunk extents, the last dim first: as many elements of each dim as the tile holds
  const size_t rank = ed->size();
  std::vector<int64_t> chunk(rank);
  int64_t room = per_tile;
  for (size_t d = rank; d-- > 0;) {
    chunk[d] = std::max<int64_t>(1, std::min((*ed)[d], room));
    room = std::max<int64_t>(1, room / chunk[d]);
  }
  // dims d.. of the chunk whose dims before d are placed in src / dst, with extents `shape`
  std::function<void(size_t, const ir::Region&, const ir::Region&, const std::vector<int64_t>&, std::vector<ir::Stmt>&)>
      emit = [&](size_t d, const ir::Region& src, const ir::Region& dst, const std::vector<int64_t>& shape,
                 std::vector<ir::Stmt>& o) {
        if (d == rank) return leaf(src, dst, shape, o);
        int64_t e = (*ed)[d], n = chunk[d];
        auto at = [&](const ir::Expr& off, int64_t len, std::vector<ir::Stmt>& body) {
          ir::Region s2 = src, d2 = dst;
          s2.starts[d] = simp(ir::arith::add(src.starts[d], off));
          d2.starts[d] = simp(ir::arith::add(dst.starts[d], off));
          s2.extents[d] = len == e ? src.extents[d] : chunk_extent(src.extents[d], off, len);
          d2.extents[d] = len == e ? dst.extents[d] : chunk_extent(dst.extents[d], off, len);
          auto sh = shape;
          sh.push_back(len);
          emit(d + 1, s2, d2, sh, body);
        };
        if (n == e) return at(C(0), e, o);
        if (e / n > 1) {
          ir::Var k = names.fresh_var("k", sp);
          std::vector<ir::Stmt> body;
          at(ir::arith::mul(k, C(n)), n, body);
          o.push_back(std::make_shared<ir::ForNode>(k, C(0), C(e / n), ir::ForKind::serial, 0, ir_seq(body, sp), sp));
        } else {
          at(C(0), n, o);
        }
        if (e % n) at(C(e / n * n), e % n, o);
      };
  emit(0, c->src, c->dst, {}, out);
  return out;
}

}  // namespace

ir::Kernel stage_global_copies(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    if (s->kind != ir::StmtKind::Copy) return std::nullopt;
    auto* c = ir::as<ir::CopyNode>(s);
    if (c->src.buffer->scope != ir::Scope::global || c->dst.buffer->scope != ir::Scope::global) return std::nullopt;
    return stage(c, s->span, names);
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
