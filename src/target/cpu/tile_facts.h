// Facts about tiles that the cpu target's decision passes (fuse_map_copy_out, fuse_map_reduce,
// view_gemm_operands, view_rows) and codegen_cpu share: which copies can become views, which
// statements are full-tile maps, who references a tile later; and the helper that records a pass's
// decisions as annotations (ir::Annotation) on the statements it chose. The target-neutral facts
// (references, whole tiles, iteration-local tiles) live in transform/tile_facts.h, re-exported here.
#pragma once

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "tilewright/ir.h"
#include "transform/tile_facts.h"

namespace tw::cpu {

using transform::globals_written;
using transform::is_var;
using transform::loop_local_tiles;
using transform::referenced_outside;
using transform::references;
using transform::whole_tile;

// Fused row passes (map + copy-out, map + reduce, the row pipeline) compute each row in chunks
// of this many float32 elements, in L1.
inline constexpr int kOutChunk = 64;
// float32-accumulated sums (T.reduce_sum on cpu) longer than this many row elements / column rows
// are summed in blocks of that length, the blocks' sums added in double (docs/language.md
// "T.reduce_sum": the accuracy). kSumBlock is a multiple of kOutChunk and of 4 vectors.
inline constexpr int kSumBlock = 4096;
inline constexpr int kSumRows = 256;
// The row pipeline's copy-out pass takes its full chunks in rotated order, starting this many
// chunks (half a 4 KiB page of float32) into the row. Unrotated, its chunk k starts at the
// output's first vector boundary (column tw_h + 64k) while the passes before it read column 64k:
// with the input and output at the same page offset (numpy's and torch's arrays of one size, 16 B
// into a page) its stores overlap, in address bits 11:0, the loads of chunk k + 1 that the next
// step of the chunk loop issues, and a load that matches an older store in those bits waits for
// it (4 KiB aliasing). Rotated, the stores run half a page away from every reader's column.
// Softmax 8192x4096 from memory on a Zen 4 core: 0.93 TSC cycles per element with the output 16 B
// into a page like the input, 0.75 with it at offset 0 or 2064, 0.77 rotated (docs/performance.md,
// session 18). The chunks are independent: the same results in any order. Only in pipelines with
// an arithmetic-bound pass (exp, exp2): the memory-bound norms keep the row order (emit_row_pipeline).
inline constexpr int kRotChunks = 2048 / (kOutChunk * 4);

// Structural conditions of a read-in-place view of a tile (view_gemm_operands, view_rows): the
// copy fills a whole 2-D tile from a global region of the same dtype whose innermost paired dim
// is contiguous when the tile's rows are longer than 1. The source's extents may be run-time
// extents (ir.h: their bound counts; the fast path needs them whole, the masked path clips).
// `widening`: also a bfloat16 / float16 source into a float32 tile (view_rows: the readers widen
// each element as the copy would, exactly).
bool viewable_copy(const ir::CopyNode& c, bool widening = false);

// The store of a full-tile elementwise map into a tile, or null: `for i, j in T.Parallel(E0, E1):
// t[i, j] = f(...)` over a whole 2-D tile t (loops from 0 over t's shape), reading t only at [i, j].
// A map whose body binds names before its store is one once inline_map_lets has run (it writes
// the lets into the store).
const ir::StoreNode* full_tile_map(const ir::Stmt& s);

// The select of a full-tile map keeping the rows of its tile where a row condition holds, or
// null: `t[i, j] = T.where(p, t[i, j], e)` with p reading neither j nor t and e not reading t
// (paged decode's `v[c, d] = T.where(j * N + c < n, v[c, d], 0)`). Rows where p holds are left
// as they are, so codegen_cpu writes e only into the rows where p fails.
const ir::SelectNode* row_keep_map(const ir::Stmt& s);

// Does any leaf statement after s, in the order of the kernel's text, reference t?
bool used_after(const ir::Kernel& k, const ir::Stmt& s, const ir::Buffer& t);

// Is b referenced anywhere in k's body but in the statements `allowed` (and their subtrees) and
// in allocations? (Kernel parameters are not looked at: a global tensor is always one.)
bool referenced_except(const ir::Kernel& k, const std::unordered_set<const ir::StmtNode*>& allowed,
                       const ir::Buffer& b);

// Calls fn(seq, loop) for every sequence of k's body, loop being the innermost loop around it
// (null at the kernel's top level), outer sequences first.
void for_each_seq(const ir::Kernel& k, const std::function<void(const ir::SeqNode&, const ir::ForNode*)>& fn);

// May a fused pass that leaves tile t unwritten or skips its later reads be emitted in a sequence
// whose innermost enclosing loop is `loop`? At the top level (loop null), or when t is local to
// the loop's iterations (loop_local_tiles).
bool fusable(const ir::Kernel& k, const ir::ForNode* loop, const ir::Buffer& t);

// k with annotation marks[s] added to each statement s of its body (identity of the nodes of k),
// rebuilding only the statements on the way to them (sequences are not flattened, annotations
// already there are kept).
ir::Kernel annotate(const ir::Kernel& k, const std::unordered_map<const ir::StmtNode*, ir::Annotation>& marks);

// k with `@name(args[t]...)` on the allocation of each tile t of args (annotate).
ir::Kernel annotate_tiles(const ir::Kernel& k, const std::string& name,
                          const std::unordered_map<const void*, std::vector<int64_t>>& args);
ir::Kernel annotate_tiles(const ir::Kernel& k, const std::string& name,
                          const std::unordered_map<const void*, int64_t>& args);

}  // namespace tw::cpu
