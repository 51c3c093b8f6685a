// convert_copies: converting and UB -> UB copies as copies and maps (see convert_copies.h).
#include "target/ascend/convert_copies.h"

#include <algorithm>

#include "ir/arith.h"
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

// (session 22) A UB -> UB copy between a 1-D tile's window and an R x C window of a 2-D tile whose
// rows are not one run of UB (C * element size not a multiple of 32 B, or fewer columns than the
// tile's), the N-D window rule of docs/language.md T.copy: the 1-D side holds the rows one after
// another. As a map, a gather (y[i, j] = x[s + i * C + j], or y[s + k] = x[r0 + k // C, c0 + k % C]
// into the 1-D side; legalize_vector's gathers). nullopt for any other pair of windows.
std::optional<ir::Stmt> reshape_map(const ir::Region& dst, const ir::Region& src, const ir::Span& sp,
                                    vec::Names& names) {
  const bool to_2d = dst.buffer->shape.size() == 2 && src.buffer->shape.size() == 1;
  if (!to_2d && !(dst.buffer->shape.size() == 1 && src.buffer->shape.size() == 2)) return std::nullopt;
  const ir::Region& two = to_2d ? dst : src;
  const ir::Region& one = to_2d ? src : dst;
  auto e2 = vec::const_extents(two), e1 = vec::const_extents(one);
  auto width = ir::as_const_int(two.buffer->shape[1]);
  if (e2[0] < 0 || e2[1] < 0 || e1[0] != e2[0] * e2[1] || !width) return std::nullopt;
  const int64_t R = e2[0], C = e2[1];
  if (R == 1 || (C == *width && (C * two.buffer->dtype.bytes()) % 32 == 0)) return std::nullopt;  // one run
  using ir::arith::add;
  using ir::arith::mul;
  if (to_2d) {
    ir::Var i = names.fresh_var("i", sp), j = names.fresh_var("j", sp);
    ir::Expr v = ir::load(src.buffer, {add(src.starts[0], add(mul(i, ir::int_imm(C, ir::kIndexType, sp)), j))}, sp);
    ir::Stmt st = std::make_shared<ir::StoreNode>(dst.buffer, std::vector<ir::Expr>{add(dst.starts[0], i), add(dst.starts[1], j)},
                                                  v, sp);
    return vec::pfor(i, R, vec::pfor(j, C, st, sp), sp);
  }
  ir::Var k = names.fresh_var("k", sp);
  ir::Expr cc = ir::int_imm(C, ir::kIndexType, sp);
  ir::Expr v = ir::load(src.buffer, {ir::binary(ir::BinOp::Add, ir::binary(ir::BinOp::FloorDiv, k, cc, sp), src.starts[0], sp),
                                     ir::binary(ir::BinOp::Add, ir::binary(ir::BinOp::Mod, k, cc, sp), src.starts[1], sp)},
                        sp);
  ir::Stmt st = std::make_shared<ir::StoreNode>(dst.buffer, std::vector<ir::Expr>{add(dst.starts[0], k)}, v, sp);
  return vec::pfor(k, R * C, st, sp);
}

std::optional<std::vector<ir::Stmt>> rewrite_copy(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names);

// (session 22) A GM <-> UB copy whose UB window spans several dims of an N-D tile without being
// one run of rows (x[1:3, 1:4, :] of a (4, 5, 16) tile: each index of dim 0 starts a new run), and
// whose GM window has as many non-unit dims: a serial loop over the first non-unit dim of both,
// each iteration a copy of one index (the window one dim smaller, peeled again if needed). nullopt
// for any other copy.
std::optional<ir::Stmt> peel_ub_window(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  const bool load = c->dst.buffer->scope == ir::Scope::UB;
  const ir::Region& ub = load ? c->dst : c->src;
  const ir::Region& gm = load ? c->src : c->dst;
  auto ue = vec::const_extents(ub), ge = vec::const_extents(gm);
  if (std::count(ue.begin(), ue.end(), -1) || std::count(ge.begin(), ge.end(), -1)) return std::nullopt;
  std::vector<size_t> un, gn;  // non-unit dims
  for (size_t d = 0; d < ue.size(); ++d) if (ue[d] != 1) un.push_back(d);
  for (size_t d = 0; d < ge.size(); ++d) if (ge[d] != 1) gn.push_back(d);
  if (un.size() < 3 || un.size() != gn.size()) return std::nullopt;
  for (size_t k = 0; k < un.size(); ++k) if (ue[un[k]] != ge[gn[k]]) return std::nullopt;
  // one run of rows when every dim after the first non-unit one, but the last, is whole
  bool run = true;
  for (size_t d = un[0] + 1; d + 1 < ue.size(); ++d) {
    auto full = ir::as_const_int(ub.buffer->shape[d]);
    run = run && full && *full == ue[d];
  }
  if (run) return std::nullopt;
  ir::Var v = names.fresh_var("w", sp);
  auto peel = [&](const ir::Region& r, size_t d) {
    ir::Region p = r;
    p.starts[d] = ir::arith::add(r.starts[d], v);
    p.extents[d] = ir::int_imm(1, ir::kIndexType, sp);
    return p;
  };
  ir::Region pu = peel(ub, un[0]), pg = peel(gm, gn[0]);
  std::vector<ir::Expr> used = c->used;  // a checked window's: iteration v reads the user's index where v < used
  if (!used.empty()) used[gn[0]] = ir::arith::sub(used[gn[0]], v);
  ir::Stmt copy = std::make_shared<ir::CopyNode>(load ? pg : pu, load ? pu : pg, sp, c->atomic, c->checked, used, c->preload);
  if (auto inner = rewrite_copy(as<ir::CopyNode>(copy), sp, names))
    copy = inner->size() == 1 ? (*inner)[0] : std::make_shared<ir::SeqNode>(std::move(*inner), sp);
  return std::make_shared<ir::ForNode>(v, ir::int_imm(0, ir::kIndexType, sp), ir::int_imm(ue[un[0]], ir::kIndexType, sp),
                                       ir::ForKind::serial, 0, copy, sp);
}

std::optional<std::vector<ir::Stmt>> rewrite_copy(const ir::CopyNode* c, const ir::Span& sp, vec::Names& names) {
  ir::Scope from = c->src.buffer->scope, to = c->dst.buffer->scope;
  ir::DType st = c->src.buffer->dtype, dt = c->dst.buffer->dtype;
  std::vector<ir::Stmt> out;
  if (from == ir::Scope::global && to == ir::Scope::UB && st != dt) {
    auto e = vec::const_extents(c->dst);
    if (std::count(e.begin(), e.end(), -1)) return std::nullopt;
    ir::Buffer tmp = names.ub(c->dst.buffer, "_" + std::string(st.name()), st, e, sp, out);
    out.push_back(std::make_shared<ir::CopyNode>(c->src, ir::full_region(tmp), sp, false, c->checked, c->used, c->preload));
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
    out.push_back(std::make_shared<ir::CopyNode>(c->src, ir::full_region(tmp), sp, false, c->checked, c->used, c->preload));
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
  if (((from == ir::Scope::global && to == ir::Scope::UB) || (from == ir::Scope::UB && to == ir::Scope::global)) &&
      st == dt)
    if (auto p = peel_ub_window(c, sp, names)) return std::vector<ir::Stmt>{*p};
  if (from == ir::Scope::UB && to == ir::Scope::UB) {
    if (st != dt) return std::vector<ir::Stmt>{vec::cast_map(c->dst, c->src, sp, names)};
    auto m = vec::region_map(c->dst, c->src, sp, [](ir::Expr x) { return x; }, names);
    if (!m) m = reshape_map(c->dst, c->src, sp, names);
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
