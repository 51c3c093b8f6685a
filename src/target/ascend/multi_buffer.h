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
//   for ko in serial(ceildiv(n, S)):
//     <body with k = min + S*ko,     t -> t[0]>
//     if S*ko + 1 < n: <body with k = min + S*ko + 1, t -> t[1]>   # the If is dropped when S | n
//     ...
//
// Every variable the body defines (lets, inner loops) is renamed in each copy. Tiles not copied:
// L0A/L0B tiles that already have a ping-pong dim (expand_gemm alternates them within one gemm),
// tiles used as a whole by T.reduce (whole-buffer operands), and compiler temporaries (temp_of,
// legalize_vector's float32 copies, ...) that no copy reads or writes: their values live within
// one iteration's vector code, so more copies would only overlap vector work with itself. They are
// allocated once before the loop and shared by the copies. num_stages <= 1 loops are left
// alone; the pipelined loop becomes serial in every case.
// A serial loop whose body allocates tiles it loads from GM (the seed's `for k in range(...)`
// with tw.load) is pipelined with 2 stages when the extra copies fit: the bytes of every tile of
// the kernel (counted as live at once, a conservative bound on plan_memory's placement) plus
// the copies must stay within each memory's capacity.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel multi_buffer(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
