// Facts about tiles that the cpu target's decision passes (fuse_map_copy_out, fuse_map_reduce,
// view_gemm_operands, view_rows), codegen_cpu and the Ascend multi_buffer (loop_local_tiles) share: which copies can become views, which statements are full-tile maps, which tiles are local to one loop
// iteration, who references a tile later; and the helper that records a pass's decisions as
// annotations (ir::Annotation) on the statements it chose.
#pragma once

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "tilewright/ir.h"

namespace tw::cpu {

// Fused row passes (map + copy-out, map + reduce, the row pipeline) compute each row in chunks
// of this many float32 elements, in L1.
inline constexpr int kOutChunk = 64;

// Structural conditions of a read-in-place view of a tile (view_gemm_operands, view_rows): the
// copy fills a whole 2-D tile from a global region of the same dtype whose innermost paired dim
// is contiguous when the tile's rows are longer than 1.
bool viewable_copy(const ir::CopyNode& c);

// The global tensors a kernel writes (by copy, store, fill, reduce or gemm).
std::unordered_set<const void*> globals_written(const ir::Kernel& k);

// e is the variable v itself.
bool is_var(const ir::Expr& e, const ir::Var& v);

// The store of a full-tile elementwise map into a tile, or null: `for i, j in T.Parallel(E0, E1):
// t[i, j] = f(...)` over a whole 2-D tile t (loops from 0 over t's shape), reading t only at [i, j].
const ir::StoreNode* full_tile_map(const ir::Stmt& s);

// Does statement s (a leaf, or any loads inside a compound one) reference buffer b?
bool references(const ir::Stmt& s, const ir::Buffer& b);

// Does any leaf statement after s, in the order of the kernel's text, reference t?
bool used_after(const ir::Kernel& k, const ir::Stmt& s, const ir::Buffer& t);

// Does anything outside the subtree `inside` of `root` reference t (its allocation aside)?
bool referenced_outside(const ir::Stmt& root, const ir::Stmt& inside, const ir::Buffer& t);

// The whole of a tile (constant shape, region at 0 with the tile's extents)?
bool whole_tile(const ir::Region& r);

// Iteration-local tiles of a serial (or pipelined, or unrolled) loop whose body is a sequence:
// nothing outside the body references such a tile, and the first statement of the body (at its
// top level) that references it overwrites all of it (a copy into the whole tile from another
// buffer, or a fill of the whole tile). No value of such a tile flows from one iteration to the
// next or out of the loop, so what is sound for a tile at the kernel's top level -- a
// read-in-place view, a map fused with its copy-out or its row reduction with the tile not
// written -- is sound in the body. Empty for parallel loops. With maps, a full-tile elementwise
// map that reads nothing of the tile (parallel loops from 0 over each of its dims storing it at the
// loop variables) overwrites it too (the Ascend multi_buffer asks so; the cpu passes do not).
std::unordered_set<const void*> loop_local_tiles(const ir::Kernel& k, const ir::ForNode& loop, bool maps = false);

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

// k with `@name(args[t])` on the allocation of each tile t of args (annotate).
ir::Kernel annotate_tiles(const ir::Kernel& k, const std::string& name,
                          const std::unordered_map<const void*, int64_t>& args);

}  // namespace tw::cpu
