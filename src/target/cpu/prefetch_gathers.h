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

// A tensor of at most this many bytes (the smaller L2 of the two: Zen 4's 1 MiB) stays in L2 once
// read: its strips are not prefetched per call (@prefetch_slices), which only adds instructions
// there (measured 0.80-0.84x with every page in L1 / L2; performance.md, session 16).
inline constexpr int64_t kL2ResidentTensor = 1 << 20;

// The lead of a 32-bit (fp32) @prefetch_slices copy: `@prefetch_slices(0)`, the target's
// (tw_cpu::simd::kSliceLead32, chosen by the C++ compiler from the target's features, which this
// pass does not know): how many iterations ahead its next page lies. Paged decode's fp32 pages
// (64 KiB at 8 kv heads x 128) read 1.06-1.07x faster on Zen 4 4 pages ahead of the same phase (the
// same page of the next step at 4 pages per step) than 1 ahead (session 19), and 1.13x faster on a
// Sapphire Rapids core 1 ahead than 4 ahead (session 40). 16-bit pages (32 KiB bf16) take the next
// page everywhere: on Zen 4 4 ahead 0.97-0.99x, 8 ahead 0.92-0.94x, 2 ahead 1.00x (session 19), on
// Sapphire Rapids 2 ahead 0.99x, 4 ahead 0.91x (session 40) (docs/performance.md "Issue 13, CPU").
inline constexpr int64_t kTargetLead = 0;

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
//
// A gathered copy whose source is a run of kStreamedRun bytes or more gets `@prefetch_slices(lead)`
// (lead: kTargetLead for 32-bit dtypes, else 1) instead when its tile is read in place (@gemm_view) by gemms that each read a strip of the
// tile's columns (paged_decode_pages: a whole page, 16 x 1024 bf16 = 32 KiB, read in place by 8
// per-kv-head gemms of 16 x 128 each), all inside the innermost enclosing loop L, which is not
// parallel, whose variable the address depends on and which holds the copy with no loop in
// between (only ifs and lets, whose values and conditions read only global tensors the kernel
// never writes), its dtype is 16- or 32-bit (bfloat16, float16, float32), and its tensor is larger
// than kL2ResidentTensor (or of a shape unknown here). codegen_cpu then passes each such gemm call
// the same strip of the copy's source `lead` iterations of L ahead (tw_cpu::gemm's next_b: the
// slice of the page that the same gemm will read `lead` pages later, next_page_slices below), which the
// call prefetches into L2 a few lines per step of its loops (an A strip is prefetched before the call).
// Why per call: the hardware prefetchers stream a page's rows once they are read in order, but
// the per-kv-head calls read each 2 KiB row 256 bytes at a time, and a call (~1000
// instructions) needs its 64 lines at its start, so a bf16 page's memory time and the calls'
// arithmetic did not overlap; issued one page ahead, a call's lines arrive while the calls
// before it compute. Measured (performance.md, "Issue 13, CPU", sessions 15, 16 and 18): bf16
// gained 1.1-1.2x with the strip prefetched all before the call; fp32 lost that way (0.88-0.95x on
// Sapphire Rapids, 1.00x on Zen 4: 128 prefetches at once hold the line fill buffers its own
// loads need) and gains 1.2x on Zen 4 with them spread over the call (session 18). A whole-tile reader (masked prefill's
// 64-row K / V blocks) keeps leaving the run to the hardware (session 12: a burst of the next
// block's lines cost 1.1x).
ir::Kernel prefetch_gathers(const ir::Kernel& k);

// For a loop of a kernel after prefetch_gathers: `if var + 1 < min + extent { ... }` holding the
// loops, ifs and lets of its body that lead to the copies annotated for it (fresh variables, the
// loop's variable replaced by var + 1) and those copies, each still annotated `@prefetch_next`:
// codegen_cpu emits the statement at the top of the loop's body and prints its copies as
// prefetches of their source rows into L2 (nothing is written). Null when no copy is annotated
// for this loop.
ir::Stmt next_iteration_prefetches(const ir::ForNode& loop);

// For a loop L of a kernel after prefetch_gathers: the ifs and lets of its body that lead to the
// copies `@prefetch_slices(lead)` for it, with fresh variables and L's variable replaced by var +
// lead (the least lead of its copies, `target_lead` for kTargetLead: the expression codegen prints
// as the target's tw_cpu::simd::kSliceLead32, at least 1; not bounded by L's extent: the last page of one step
// prefetches the first of the next step when the page index is flat, as `j * pages_per_step +
// jj`), every load of a let or a condition
// read only where its indices lie inside its tensor (`0 <= i < n` per dim, which guards the
// let and everything after it), and the copies themselves, still annotated. codegen_cpu emits
// it at the top of L's body: each copy sets its tile's "next source" pointer (null unless the
// region lies inside its tensor), and each gemm reading a strip of the tile prefetches that
// strip from it before its call. An iteration `lead` ahead that L does not run (the last pages, a page index
// that is not flat) may prefetch lines of some other page of the cache or nothing, never an
// address outside the tensor, and never reads an index outside the block table. Null when no
// copy is annotated for this loop.
ir::Stmt next_page_slices(const ir::ForNode& loop, const ir::Expr& target_lead);

}  // namespace tw::cpu
