#include "target/cpu/pipeline.h"

#include "ir/functor.h"
#include "ir/printer.h"
#include "support/env.h"
#include "target/cpu/codegen.h"
#include "transform/coarsen_grid.h"
#include "transform/hoist_map_invariants.h"
#include "transform/infer_grid.h"
#include "transform/pass_log.h"
#include "transform/simplify.h"

namespace tw::cpu {

namespace {

// Sum of the tile buffers one block allocates (an upper bound: scoped tiles may share space).
// Throws at the allocation that goes over kMaxBlockTileBytes.
int64_t block_tile_bytes(const ir::Kernel& k) {
  int64_t total = 0;
  ir::for_each_stmt(k->body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Alloc) return;
    const auto& b = static_cast<const ir::AllocNode*>(s.get())->buffer;
    int64_t n = b->dtype.bytes();
    for (int64_t d : b->const_shape().value_or(std::vector<int64_t>{})) n *= d;
    total += n;
    if (total > kMaxBlockTileBytes)
      throw ir::Error("the tiles of kernel '" + k->name + "' need " + std::to_string(total >> 20) +
                          " MiB per block, more than the cpu target's " + std::to_string(kMaxBlockTileBytes >> 20) +
                          " MiB (tile '" + b->name + "' " + ir::print_shape(b->shape) + " " +
                          std::string(b->dtype.name()) + " is the one that goes over)",
                      s->span, "use smaller block sizes; tiles of a few hundred KiB that fit in L2 are fastest");
  });
  return total;
}

}  // namespace

LoweredCpu lower_cpu(const ir::Kernel& input) {
  transform::PassLog log(input, "cpu");  // verifies the user's kernel: errors point at the user's lines
  // Tile-loop kernels (the seed's style) have no grid yet: find it before anything needs it.
  log.run("infer_grid", transform::infer_grid);
  // Fold index arithmetic (block offsets, tile extents) so codegen sees constants.
  log.run("simplify", transform::simplify);
  // Blocks with tiles of a few elements are merged, so their loops run over more rows.
  log.run("coarsen_grid", transform::coarsen_grid);
  // Per-column subexpressions of 2-D maps (batch norm's rsqrt(var[j] + eps)) once per column.
  log.run("hoist_map_invariants", transform::hoist_map_invariants);
  // Tile ops lower one-to-one to loops and micro-kernel calls; pipelined loops run serially
  // (no asynchronous copies on a CPU: hardware prefetch plays that role).
  std::string source = codegen_cpu(log.kernel(), support::env().bounds_check);
  log.dump("codegen.cpp", source);
  return LoweredCpu{log.kernel(), std::move(source), block_tile_bytes(log.kernel()), log.stages()};
}

}  // namespace tw::cpu
