// convert_copies: converting and UB -> UB copies as copies and maps (see convert_copies.h).
#include "target/ascend/convert_copies.h"

#include <algorithm>
#include <functional>

#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

// A UB window that starts on a 32 B block but ends inside one, before its tile's last column
// (t[0:17, 0:65] of an 80-column float32 tile): a GM -> UB copy straight into it would overwrite
// the columns after it up to the block's end (session 15).
bool ends_inside_a_block(const ir::Region& r) {
  if (r.starts.empty()) return false;
  auto c0 = ir::as_const_int(r.starts.back()), n = ir::as_const_int(r.extents.back());
  auto cols = ir::as_const_int(r.buffer->shape.back());
  int64_t b = r.buffer->dtype.bytes();
  return c0 && n && cols && (*c0 * b) % 32 == 0 && ((*c0 + *n) * b) % 32 != 0 && *c0 + *n < *cols;
}

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

// Elements of one staging tile of a global -> global copy (each of the source and the
// destination dtype): 16 KiB of the wider dtype, a twelfth of UB.
constexpr int64_t kStageBytes = 16384;

// The extent of chunk [off, off + n) of a dim whose whole extent is x (constant, or min(C, e)):
// the constant n, or min(n, e - off) for a run-time extent.
ir::Expr chunk_extent(const ir::Expr& x, const ir::Expr& off, int64_t n) {
  if (auto rt = ir::runtime_extent(x)) return ir::binary(ir::BinOp::Min, C(n), ir::arith::sub(rt->value, off));
  return C(n);
}

// A global -> global copy through UB (session 22, hunt9a F14): for each chunk, a copy into a UB
// tile of the source dtype, a cast map into one of the destination dtype when they differ, and a
// copy out. Regions of the same extents are cut into chunks of at most kStageBytes per tile (the
// last dims first; a serial loop over the whole chunks of a dim, then its tail); regions whose
// extents differ (a tensor row into a column window) are staged whole when they fit. A region
// with an extent 0 copies nothing.
std::optional<std::vector<ir::Stmt>> stage_global_copy(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  ir::DType st = c->src.buffer->dtype, dt = c->dst.buffer->dtype;
  auto es = extent_bounds(c->src), ed = extent_bounds(c->dst);
  if (!es || !ed) return std::nullopt;
  std::vector<ir::Stmt> out;
  if (std::count(es->begin(), es->end(), 0) || std::count(ed->begin(), ed->end(), 0)) return out;
  const int64_t per_tile = kStageBytes / std::max(st.bytes(), dt.bytes());
  auto leaf = [&](const ir::Region& src, const ir::Region& dst, const std::vector<int64_t>& shape, std::vector<ir::Stmt>& o) {
    ir::Buffer a = names.ub(c->dst.buffer, "_stage", st, shape, sp, o);
    o.push_back(std::make_shared<ir::CopyNode>(src, ir::full_region(a), sp));
    ir::Buffer b = a;
    if (st != dt) {
      b = names.ub(c->dst.buffer, "_stage", dt, shape, sp, o);
      o.push_back(vec::cast_map(ir::full_region(b), ir::full_region(a), sp, names));
    }
    o.push_back(std::make_shared<ir::CopyNode>(ir::full_region(b), dst, sp, c->atomic));
  };
  if (*es != *ed) {
    int64_t n = 1;
    for (auto x : *ed) n *= x;
    if (n > per_tile) return std::nullopt;
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
  // dims d.. of the chunk at offsets `off` (one per dim before d)
  std::function<void(size_t, ir::Region, ir::Region, std::vector<int64_t>, std::vector<ir::Stmt>&)> emit =
      [&](size_t d, ir::Region src, ir::Region dst, std::vector<int64_t> shape, std::vector<ir::Stmt>& o) {
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

std::optional<std::vector<ir::Stmt>> rewrite_copy(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  ir::Scope from = c->src.buffer->scope, to = c->dst.buffer->scope;
  ir::DType st = c->src.buffer->dtype, dt = c->dst.buffer->dtype;
  std::vector<ir::Stmt> out;
  if (from == ir::Scope::global && to == ir::Scope::global) return stage_global_copy(c, sp, names);
  if (from == ir::Scope::global && to == ir::Scope::UB && st != dt) {
    auto e = vec::const_extents(c->dst);
    if (std::count(e.begin(), e.end(), -1)) return std::nullopt;
    ir::Buffer tmp = names.ub(c->dst.buffer, "_" + std::string(st.name()), st, e, sp, out);
    out.push_back(std::make_shared<ir::CopyNode>(c->src, ir::full_region(tmp), sp));
    out.push_back(vec::cast_map(c->dst, ir::full_region(tmp), sp, names));
    return out;
  }
  if (from == ir::Scope::global && to == ir::Scope::UB && ends_inside_a_block(c->dst)) {
    // DataCopyPad writes each row up to the next 32 B boundary: the load lands in a tile of the
    // window's shape and a vector copy (exact masks) moves it into the window
    auto e = vec::const_extents(c->dst);
    if (std::count(e.begin(), e.end(), -1)) return std::nullopt;  // run-time extents: select_instructions' error
    ir::Buffer tmp = names.ub(c->dst.buffer, "_win", dt, e, sp, out);
    auto m = vec::region_map(c->dst, ir::full_region(tmp), sp, [](ir::Expr x) { return x; }, names);
    if (!m) return std::nullopt;
    out.push_back(std::make_shared<ir::CopyNode>(c->src, ir::full_region(tmp), sp));
    out.push_back(*m);
    return out;
  }
  if (from == ir::Scope::UB && to == ir::Scope::global && st != dt) {
    auto e = vec::const_extents(c->src);
    if (std::count(e.begin(), e.end(), -1)) return std::nullopt;
    ir::Buffer tmp = names.ub(c->src.buffer, "_" + std::string(dt.name()), dt, e, sp, out);
    out.push_back(vec::cast_map(ir::full_region(tmp), c->src, sp, names));
    out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(tmp), c->dst, sp, c->atomic));
    return out;
  }
  if (from == ir::Scope::UB && to == ir::Scope::UB) {
    if (st != dt) return std::vector<ir::Stmt>{vec::cast_map(c->dst, c->src, sp, names)};
    auto m = vec::region_map(c->dst, c->src, sp, [](ir::Expr x) { return x; }, names);
    if (!m) return std::nullopt;
    return std::vector<ir::Stmt>{*m};
  }
  return std::nullopt;
}

}  // namespace

ir::Kernel convert_copies(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    if (s->kind != ir::StmtKind::Copy) return std::nullopt;
    return rewrite_copy(as<ir::CopyNode>(s), s->span, names);
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
