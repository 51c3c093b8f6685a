// multi_buffer: T.Pipelined(n, num_stages=S) -> S copies of every tile the loop body allocates
// (automatic pipeline, after expand_gemm and legalize_vector, before map_grid).
//
// On Ascend the pipes run concurrently (ascend-910b.md "Pipes"); a loop whose iteration i + 1
// loads into the tile iteration i still reads must wait for it. With S copies, iteration i uses
// copy i % S, so the copy-in of the next iterations overlaps the compute of this one (insert_sync
// then only orders the accesses of the same copy). Rewrite, for a pipelined loop over k in
// [min, min + n):
//
//   alloc t: scope dtype[S, shape...]            # for every tile allocated in the body
//   for ko in serial(ceildiv(n, U)):
//     <body with k = min + U*ko,     t -> t[0]>
//     if U*ko + 1 < n: <body with k = min + U*ko + 1, t -> t[1 % S]>   # the If is dropped when U | n
//     ...
//
// When U > S and n is constant, the loop runs n / U times without `if`s and the last n % U
// iterations follow it: <body with k = min + U*(n / U) + r, t -> t[r % S]> for r < n % U.
//
// U = lcm(S, L0 copies) (below): every copy of the body uses the copy of each tile that its global
// iteration i selects, i % S (L1, UB) and i % (L0 copies), so consecutive iterations always use
// different copies, across the unrolled body's boundary too (3 stages, 2 L0 copies: U = 6).
//
// Every variable the body defines (lets, inner loops) is renamed in each copy. A tile allocated
// outside the loop (before it, as tilelang and examples/gemm.py write it) whose value lives within
// one iteration is staged the same way: first its allocation moves to the top of the body. That
// needs proof (transform/tile_facts.h loop_local_tiles): nothing outside the body references it, and the
// first statement of the body that references it overwrites all of it (a copy into the whole
// tile, a fill, or an elementwise map over the whole tile that reads none of it). Otherwise (an
// accumulator, a tile also used after the loop or by another loop, a tile first written in part,
// under an `if` or in an inner loop) it stays one tile shared by the copies. Tiles not copied:
// L0A/L0B tiles that already have a ping-pong dim (expand_gemm alternates them within one gemm),
// tiles used as a whole by T.reduce (whole-buffer operands), and compiler temporaries (temp_of,
// legalize_vector's float32 copies, ...) that no copy reads or writes: their values live within
// one iteration's vector code, so more copies would only overlap vector work with itself. They are
// allocated once before the loop and shared by the copies. num_stages <= 1 loops are left
// alone; the pipelined loop becomes serial in every case. L0A/L0B tiles (expand_gemm's, sized so
// that two copies of a body's L0 tiles fit) get S copies when the body's L0 tiles fit S times,
// else the most that fit (the copy of iteration i is i % copies): num_stages=3 of a 128x256 fp16
// gemm stages its L1 tiles 3 times and its L0 tiles twice. Staged tiles record the stage count
// (BufferNode::stages) so that plan_memory's capacity error names them as the kernel wrote them
// and hints at fewer stages.
// num_stages is a performance hint: when the staged tiles do not fit (plan_memory's CapacityError
// names the stage count of the staged tiles live at the peak), lower_ascend lowers the kernel
// again with max_stages one lower, down to 1, and notes every loop that runs with fewer stages
// than it asked (Program::notes: a TilewrightWarning at the loop's line, a comment in the AscendC).
// A serial loop whose body allocates tiles it loads from GM (the seed's `for k in range(...)`
// with tw.load) is pipelined with 2 stages when the extra copies fit: the bytes of every tile of
// the kernel (counted as live at once, a conservative bound on plan_memory's placement) plus
// the copies must stay within each memory's capacity.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// max_stages > 0: no loop gets more copies than that (lower_ascend's retry when the stages asked
// for do not fit: num_stages is a performance hint).
ir::Kernel multi_buffer(const ir::Kernel& kernel, const target::Target& target, int64_t max_stages = 0);

}  // namespace tw::ascend
