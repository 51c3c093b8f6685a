// prefetch_gathers: which gathered copies the cpu target prefetches one loop iteration ahead
// (the last Tile IR pass of lower_cpu).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// Bytes of one gathered copy's source, times the trips of the constant loops between it and the
// loop it is prefetched for, that one iteration may prefetch (L2 is 1 MiB on Zen 4, 2 MiB on
// Sapphire Rapids: the rows of this iteration and of the next stay in it).
inline constexpr int64_t kPrefetchBudget = 256 << 10;

// A gathered copy whose source is one contiguous run of at least this many bytes (a block of
// whole rows: masked prefill's 64-row K / V blocks, 16-32 KiB) is left to the hardware
// prefetchers, which stream it once its first lines miss; smaller runs (paged decode's 512-byte
// rows of one kv head, 4 KiB apart) are prefetched.
inline constexpr int64_t kStreamedRun = 4 << 10;

// A copy from a global tensor into a tile whose source address depends on a value read from
// memory (a page number read from a block table, a token id: `page = block_tables[b, j];
// T.copy(K[page, :, h, :], k)`) is a gather the hardware prefetchers cannot follow: each copy
// waits on memory row by row (paged decode spent most of its time there). Such a copy gets
// `@prefetch_next(levels)` when, for the enclosing loop L `levels` loops out (1: the innermost):
//  * L is serial, pipelined or unrolled and the copy's source address depends on L's variable,
//  * every value the address and the conditions of the ifs between L and the copy read (through
//    lets, transitively) is a global tensor the kernel never writes, so evaluating them for the
//    next iteration reads exactly what that iteration will read, nothing out of bounds,
//  * the loops between L and the copy have constant extents, and the copy's bytes times their
//    trips are at most kPrefetchBudget.
// A run-time extent of the source (min(C, e), ir.h) counts at its bound C, and the prefetch covers
// the bound's rows that lie inside the tensor.
// The outermost such L is chosen (the farthest ahead that fits: a whole step of a paged decode
// kernel's pages, not the next page of the same step). codegen_cpu carries it out with
// next_iteration_prefetches below.
ir::Kernel prefetch_gathers(const ir::Kernel& k);

// For a loop of a kernel after prefetch_gathers: `if var + 1 < min + extent { ... }` holding the
// loops, ifs and lets of its body that lead to the copies annotated for it (fresh variables, the
// loop's variable replaced by var + 1) and those copies, each still annotated `@prefetch_next`:
// codegen_cpu emits the statement at the top of the loop's body and prints its copies as
// prefetches of their source rows into L2 (nothing is written). Null when no copy is annotated
// for this loop.
ir::Stmt next_iteration_prefetches(const ir::ForNode& loop);

}  // namespace tw::cpu
