#include "target/ascend/map_grid.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

#include "ir/functor.h"
#include "ir/arith.h"

#include <string>

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Expr;
using ir::Scope;

Expr bin(BinOp op, const Expr& a, const Expr& b) { return ir::arith::simplify(ir::binary(op, a, b)); }


}  // namespace

ir::Kernel map_grid(const ir::Kernel& kernel, const target::Target& target) {
  // Expert kernels never come here (pipeline.cpp); a kernel with a sub-block var comes from
  // split_cube_vector: its var is the vid, and its blocks keep row-major order (its GM workspace
  // is indexed by linear block % block_dim, which is the core index only in that order).
  const ir::Span& sp = kernel->span;
  const bool split = kernel->is_npu();
  bool scopes = false, cube = false, vector = false;
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::CoreScope) scopes = true;
    if (s->kind == ir::StmtKind::Alloc) {
      Scope sc = ir::as<ir::AllocNode>(s)->buffer->scope;
      (is_cube_scope(sc) ? cube : vector) = true;
    }
  });
  if (!scopes && cube && vector)
    throw ir::Error("kernel '" + kernel->name + "' needs both the Cube and the Vector units, but its code was not split",
                    sp, "internal: split_cube_vector must put every Cube/Vector statement in a scope");
  int cores = (scopes || cube) ? target.ascend.aic_cores : target.ascend.aiv_cores;

  const auto& grid = kernel->grid;
  const auto& bv = kernel->block_vars;
  Expr nblocks = C(1);
  for (const auto& g : grid) nblocks = bin(BinOp::Mul, nblocks, g);
  Expr block_dim = bin(BinOp::Min, C(cores), nblocks);

  // The loop's names, unless the kernel uses one (a tile named t: the printed AscendC declared the
  // loop counter `int32_t t` over the tile `LocalTensor t` and did not compile): then name_0, ...
  vec::Names names(kernel);
  auto var = [&](const std::string& base) { return names.var(base, sp); };
  ir::Var cid = var("cid");
  ir::Var vid = split ? kernel->sub_block_var : var("vid");
  ir::Var t = var("t");
  ir::Var blk = var("blk");

  std::vector<ir::Stmt> lets;
  lets.push_back(std::make_shared<ir::LetNode>(blk, bin(BinOp::Add, cid, bin(BinOp::Mul, t, block_dim)), sp));
  auto g0 = grid.size() >= 1 ? ir::as_const_int(grid[0]) : std::nullopt;
  auto g1 = grid.size() >= 2 ? ir::as_const_int(grid[1]) : std::nullopt;
  if (!split && grid.size() == 2 && g0 && g1 && *g0 > 1 && *g1 > kPanel) {
    // Panels of kPanel rows of by; by fastest inside a panel (the last panel may be shorter).
    ir::Var panel = var("panel");
    ir::Var rows = var("panel_rows");
    ir::Var in = var("in_panel");
    lets.push_back(std::make_shared<ir::LetNode>(panel, bin(BinOp::FloorDiv, blk, C(kPanel * *g0)), sp));
    lets.push_back(std::make_shared<ir::LetNode>(in, bin(BinOp::Mod, blk, C(kPanel * *g0)), sp));
    lets.push_back(std::make_shared<ir::LetNode>(
        rows, bin(BinOp::Min, C(kPanel), bin(BinOp::Sub, C(*g1), bin(BinOp::Mul, panel, C(kPanel)))), sp));
    lets.push_back(std::make_shared<ir::LetNode>(bv[0], bin(BinOp::FloorDiv, in, rows), sp));
    lets.push_back(std::make_shared<ir::LetNode>(
        bv[1], bin(BinOp::Add, bin(BinOp::Mul, panel, C(kPanel)), bin(BinOp::Mod, in, rows)), sp));
  } else {
    Expr rest = blk;
    for (size_t d = 0; d < grid.size(); ++d) {
      bool last = d + 1 == grid.size();
      lets.push_back(std::make_shared<ir::LetNode>(bv[d], last ? rest : bin(BinOp::Mod, rest, grid[d]), sp));
      if (!last) rest = bin(BinOp::FloorDiv, rest, grid[d]);
    }
  }
  ir::Stmt body = kernel->body;
  if (!scopes) body = std::make_shared<ir::CoreScopeNode>(cube ? ir::CoreKind::C : ir::CoreKind::V, body, sp);
  lets.push_back(body);
  ir::Stmt loop_body = std::make_shared<ir::SeqNode>(std::move(lets), sp);
  Expr trips = bin(BinOp::CeilDiv, bin(BinOp::Sub, nblocks, cid), block_dim);
  ir::Stmt loop = std::make_shared<ir::ForNode>(t, C(0), trips, ir::ForKind::serial, 0, loop_body, sp);
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, std::vector<ir::Var>{cid},
                                          std::vector<Expr>{block_dim}, loop, sp, vid);
}

}  // namespace tw::ascend
