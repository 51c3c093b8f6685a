// convert_copies: converting and UB -> UB copies as copies and maps (see convert_copies.h).
#include "target/ascend/convert_copies.h"

#include <algorithm>

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

std::optional<std::vector<ir::Stmt>> rewrite_copy(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  ir::Scope from = c->src.buffer->scope, to = c->dst.buffer->scope;
  ir::DType st = c->src.buffer->dtype, dt = c->dst.buffer->dtype;
  std::vector<ir::Stmt> out;
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
