#include "target/cpu/pipeline.h"

#include "ir/functor.h"
#include "ir/printer.h"
#include "support/env.h"
#include "transform/nan_unobserved.h"
#include "target/cpu/codegen.h"
#include "target/cpu/alias_tile_copies.h"
#include "target/cpu/fuse_map_copy_out.h"
#include "target/cpu/fuse_map_reduce.h"
#include "target/cpu/inline_map_lets.h"
#include "target/cpu/pipeline_rows.h"
#include "target/cpu/prefetch_gathers.h"
#include "target/cpu/split_window_copies.h"
#include "target/cpu/view_gemm_operands.h"
#include "target/cpu/view_rows.h"
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
    int64_t numel = 1;
    for (int64_t d : b->const_shape().value_or(std::vector<int64_t>{})) numel *= d;
    int64_t n = numel * b->dtype.bytes();
    // a widening row view (view_rows) has a 2-byte shadow tile for its copy's masked path
    if (const ir::Annotation* a = ir::find_annotation(s, "row_view"); a && a->args.at(1)) n += numel * 2;
    if (support::env().bounds_check) n += numel;  // checked mode's written flags (codegen.cpp Flags)
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
  // A window with more non-unit dims than its tile fills the tile's rows with its leading dims
  // flattened: one copy per index of the extra dims.
  log.run("split_window_copies", split_window_copies);
  // Blocks with tiles of a few elements are merged, so their loops run over more rows.
  log.run("coarsen_grid", transform::coarsen_grid);
  // A full-tile map that binds names (lets) stores their values in place: one store, as the
  // passes below take a map.
  log.run("inline_map_lets", inline_map_lets);
  // Per-column subexpressions of 2-D maps (batch norm's rsqrt(var[j] + eps)) once per column.
  log.run("hoist_map_invariants", transform::hoist_map_invariants);
  // A same-dtype copy of a whole tile whose copy is only read while the source is unchanged: the
  // readers read the source (flash attention's float32 P tile, read by the P V gemm in place).
  log.run("alias_tile_copies", alias_tile_copies);
  // Decisions codegen carries out, recorded as annotations (@name) on the statements they concern:
  // a max/min reduction whose NaN no output sees combines with the max alone (@nan_unobserved)
  log.run("mark_nan_unobserved", transform::mark_nan_unobserved);
  // a map whose tile is copied out next is computed straight into the destination (@fuse_copy_out)
  log.run("fuse_map_copy_out", fuse_map_copy_out);
  // a map whose tile is reduced over its rows next is reduced while computed (@fuse_reduce)
  log.run("fuse_map_reduce", fuse_map_reduce);
  // a run of such row passes ending in a fused copy-out is skewed by one row into one loop
  // (@row_pipeline(n) on the copy)
  log.run("pipeline_rows", pipeline_rows);
  // gemm operands copied from a tensor the kernel never writes are read in place (@gemm_view)
  log.run("view_gemm_operands", view_gemm_operands);
  // row tiles copied from such a tensor are read in place until a map overwrites them (@row_view)
  log.run("view_rows", view_rows);
  // copies gathered through an index read from memory (paged KV cache pages) are prefetched one
  // loop iteration ahead (@prefetch_next): the hardware prefetchers cannot guess their rows
  log.run("prefetch_gathers", prefetch_gathers);
  // Tile ops lower one-to-one to loops and micro-kernel calls; pipelined loops run serially
  // (no asynchronous copies on a CPU: hardware prefetch plays that role).
  std::string source = codegen_cpu(log.kernel(), support::env().bounds_check);
  log.dump("codegen.cpp", source);
  return LoweredCpu{log.kernel(), std::move(source), block_tile_bytes(log.kernel()), log.stages()};
}

}  // namespace tw::cpu
