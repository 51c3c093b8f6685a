// pipeline_rows: which runs of row passes the cpu target skews by one row and runs in one loop
// (after fuse_map_copy_out and fuse_map_reduce, whose annotations it reads).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A run of row passes over [E0, E1] float32 tiles (E0 >= 2, E1 >= kOutChunk) in a sequence outside
// every loop -- row reductions (axis 1, into an [E0] or [E0, 1] float32 tile), map + row reduction
// pairs (`@fuse_reduce`) and, last, one map + copy-out pair (`@fuse_copy_out`, into a float32,
// bfloat16 or float16 tensor) whose tile has no dim of extent 1; at least two passes -- handles
// each row independently in every pass. Its copy-out gets `@row_pipeline(n)` (n: the statements
// of the run, the copy included), and codegen_cpu skews the passes by one row and runs them in one
// loop: step s runs pass k on row
// s - k, all passes chunk by chunk (kOutChunk elements) side by side (the copy-out's in rotated
// order when a pass is arithmetic-bound: kRotChunks). The streaming stores of the
// copy-out then overlap the arithmetic of the passes before it (softmax's exp) instead of
// following it, and a reduction that only loads runs beside arithmetic-bound work. Sound when
// every access to a buffer written by a pass of the run is row-local (row i of an [E0, E1] tile
// at [i, j], element i of an [E0] or [E0, 1] buffer): row i of pass k then sees what the passes
// before it wrote on row i, as in program order, and no pass touches another row of such a
// buffer; the copy's destination is read by no pass. Tails (destination rows outside the tensor)
// run the statements as written. Runs are found left to right, as codegen_cpu emits: a statement
// that a run or a fused pair took does not start another run.
//
// Between the passes a run may hold per-row scalar maps (row_scalar_map: rms_norm's
// `ss[i] = rsqrt(ss[i] / N + eps)`, layer_norm's `mean[i] = mean[i] / N`): codegen_cpu runs each
// on row s - k at the end of step s, after pass k (the pass before it) finished that row, so the
// next pass reads it at step s + 1 as in program order. Without them rms_norm and layer_norm had
// no pipeline: their reduction passes ran with no memory traffic in flight (12-25% of each block's
// time), the streaming stores and the next block's prefetches only in the last pass.
ir::Kernel pipeline_rows(const ir::Kernel& k);

// A per-row scalar map over an [E0] row vector: `for i in T.Parallel(E0)` (from 0) whose body
// only stores into float32 [E0] / [E0, 1] tiles at [i] / [i, 0] and only loads such tiles at
// those indices (constants and math calls otherwise); its loop, or null.
const ir::ForNode* row_scalar_map(const ir::Stmt& s, int64_t E0);

}  // namespace tw::cpu
