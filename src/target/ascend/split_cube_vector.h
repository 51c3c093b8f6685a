// split_cube_vector: Cube / Vector split of a portable kernel that needs both units (automatic
// pipeline, after infer_scope, before skew_cube_loops; see pipeline.cpp).
//
// After infer_scope, tiles with both a Cube and a vector role keep their portable scope (a gemm
// result the vector code then reads: flash attention's scores, a gemm with a vector epilogue).
// This pass produces the expert form of such a kernel:
//
//   grid(bx = .., by = ..) sub_block(vid)           # vid: which AIV; map_grid reuses this var
//     alloc ws_0: global float32[W * slots * M, N]   # GM workspace, one per hand-off
//     alloc <every tile, hoisted>
//     T.Scope("C") { <Cube statements: GM->L1 copies, gemm, L0C->GM> }
//     T.Scope("V") { <vector statements: GM<->UB copies, T.Parallel, reduce, fills of UB> }
//
// 1. Incarnations. A mixed tile X gets a Cube tile X (L0C when a gemm writes it, L1 when a gemm
//    reads it) and a vector tile X_ub (UB). Statements are walked in program order tracking which
//    incarnation holds X's value; a statement reading X on the other side is preceded by a
//    hand-off copy (X -> X_ub or X_ub -> X). A fill (or a GM -> X copy) goes to the side of X's
//    next access. Loops: the state at the back edge must match the entry (the body is re-walked
//    from the joined state). A tile on one unit at the entry that the body hands to the other and
//    never writes (Q scaled by a map after its copy, then Q K^T in the key loop) is on both at the
//    entry: handed over once, before the loop (one slot), so the loop has no hand-off for it and
//    skew_cube_loops / rotate_vector_loops pipeline it as a loop over a copied Q (session 41).
//    An if joins its branches: a tile on both units in one branch and on one unit in the other is
//    on that unit after the if (paged decode's page copies under `if j * P + jj < pages` into a V
//    tile handed to the Cube in the previous step); a tile on the Cube in one branch and the
//    Vector in the other is an error.
// 2. Accumulating gemm on a vector-updated tile (flash attention's acc_o, rescaled by the vector
//    code between gemms): `gemm A, B -> X` becomes `gemm A, B -> X_pv (L0C, clear)`, a hand-off
//    X_pv -> X_pv_ub, and `X_ub = X_ub + X_pv_ub`: the same sum, on the vector side.
// 3. Hand-offs go through GM: every copy L0C -> UB or UB -> L1 becomes
//      Cube -> Vector:  C: [wait_cross_flag(r, FIX)] copy L0C -> ws slot; set_cross_flag(2, FIX, f)
//                       V: wait_cross_flag(f, MTE2); copy ws slot (its rows) -> UB;
//                          set_cross_flag(2, MTE2, r)
//      Vector -> Cube:  V: [cast into a UB tile of the L1 dtype] wait_cross_flag(r, MTE3);
//                          copy UB -> ws slot (its rows); set_cross_flag(2, MTE3, f)
//                       C: wait_cross_flag(f, MTE2); copy ws slot -> L1; set_cross_flag(2, MTE2, r)
//    f ("slot written") and r ("slot read": the reverse flag, so a producer never overwrites a
//    slot its consumer still reads, and never has more than `slots` sets pending) are two ids per
//    hand-off (5 pairs: ids 0..9; the 910B has 0..10). The consumer pre-sets r `slots` times at the start of
//    its scope; the producer waits for those sets at the end (every block leaves the counters at 0).
//    Hand-offs in exclusive arms of an if (then / else, nested elifs: both units take the same
//    arm) of the same direction and slots share one pair of ids (and the workspace, when its
//    slots have the same dtype and shape and no cast tile is needed): each run is balanced in
//    itself, so the counters after the if are the same whichever arm ran (session 29: the masked
//    kernel's three kinds of block each hand the scores over).
//    A hand-off that finds no pair left takes the latest pair of its direction and slots in turn
//    (its own workspace; session 35): the counters match the k-th set with the k-th wait since
//    both units run the hand-offs in the program order, and the release flag orders the
//    consumer's read before the producer's next write of the slot (the argument at handoff()).
//    skew_cube_loops / rotate_vector_loops keep such loops (reuses_cross_ids). Only kernels that
//    ran out of ids do it: it costs overlap.
//    Slots: 2 for a hand-off directly inside one loop (slot = iteration % 2: the producer can run
//    one step ahead), else 1.
//    Dtype: the workspace holds the vector tile's dtype (float32 scores stay float32, whatever
//    the gemm's operand dtype): narrowing them would round every score (bfloat16: |s| * 2^-9,
//    which the softmax's exp turns into a relative error of each weight: session 23, fuzz11 F2)
//    or make a float16 score above 65504 inf (then NaN in s - max: session 24). Whether a
//    narrowing is exact depends on the data, so the compiler never narrows. The user may: a copy
//    of a gemm result that is on the Cube into a vector tile (T.copy(s, s16), or a T.Parallel map
//    `s16[i, j] = s[i, j]` / `T.cast(s[i, j], dt)`; whole tiles; float32 -> float32 / float16 /
//    bfloat16, int32 -> int32) is the hand-off itself: L0C -> workspace in s16's dtype (Fixpipe
//    F322F16 / F322BF16: round to nearest even, inf past the range), then workspace -> s16.
//    Landing tile: the first Cube -> Vector hand-off with 2 slots lands in X_in, a UB tile
//    allocated in the loop body (multi_buffer stages it: the next block's data is loaded while
//    this one is computed on), then `copy X_in -> X` (V); only when two X_in fit in UB next to
//    every UB tile and vector incarnation (counted as live at once) with 1/4 of UB kept for
//    legalize_vector's temporaries. Else the data lands in X itself (flash attention's float32
//    scores at 128 x 128: a staged X_in cost the loop its second stage, session 24).
//    Workspace: one slot set per AI Core. map_grid runs blocks round robin in row-major order
//    (bx fastest) for split kernels, so block lin = bx + gx * (by + gy * bz) runs on core
//    lin % W with W = min(AIC cores, blocks): set lin % W is private to the core, and the
//    pre-set / drain above make consecutive blocks of a core reuse it safely.
//    Memory: W x slots x tile bytes per hand-off.
// 4. Both AIVs (row split). Every vector statement must be row-local: the UB tiles that hold
//    rows of a hand-off tile (dim 0 = M, indexed by the outer T.Parallel variable or a row loop's
//    r, reduced along another axis, copied to / from each other) are cut to M / 2 rows; AIV vid handles rows
//    vid * M / 2 ...: T.Parallel row extents halve (other uses of the row variable become
//    row + vid * M / 2), GM and workspace row offsets move by vid * M / 2; a row loop (`for r in
//    T.serial(M)` touching each row tile at row r only: copies into c[r, :], element accesses at
//    row r) is split the same way (qk_rope_proj's table rows gathered by position). Tiles without rows
//    (a bias vector indexed by the column) are loaded whole by both AIVs.
//    Each hand-off tile has its own M (paged decode: the G query rows of the scores and the
//    N = pages x page rows of V). Tiles of an odd M (MHA's one query row, a page of 5 rows), and
//    of an M whose tiles a copy or fill writes in part (a page into rows jj * page ..; not a row
//    loop's row r), or a reduction reads across the rows (a column sum of a gemm result), or an element
//    is read or stored outside a map at a row other than a row loop's r (`o[1] = c[15, 15]`), stay whole:
//    both AIVs compute them alike; AIV 0 alone stores them to GM (`if vid == 0`), and each AIV
//    writes a hand-off to the Cube into its own half of the workspace (twice the rows; the Cube
//    reads AIV 0's), so both run the same instructions and insert_sync's flags are on every path.
//    Vector code that takes no hand-off at all (Cube and vector work side by side) is whole on both
//    AIVs the same way: AIV 0 alone stores to GM.
// Provenance: every tile the pass makes of a user tile (the incarnations X / X_ub, P V's partial
// X_pv / X_pv_ub, a landing or cast tile, each AIV's half of a row tile) records that tile and how
// many parts its rows are in (ir::BufferNode::part_of, set by part_tile only), so that messages name
// the user's tile at the shape the kernel declares (tile_dims, plan_memory, select_instructions).
// (Cube and vector software pipelining of the split loops: skew_cube_loops.h, rotate_vector_loops.h.)
//
// Why decisions 1-4 are one pass: 2. is decided on the state 1. tracks (which unit holds the
// tile when the gemm runs); 4. takes its row count from the hand-off copies 1. inserts and cuts the
// tiles before 3. turns those copies into per-AIV workspace rows, and allocates the tiles of 2.
// at the top level. The Tile IR between separate passes cannot tell an incarnation from a tile of
// the kernel, so splitting them would change the allocation order, and with it the generated code.
// Errors (ir::Error at the statement, with a hint): a statement that is not row-local (a map over
// tiles of two row counts included), an L0C
// incarnation the vector side would have to hand back (other than an accumulating gemm), a tile
// whose side differs between loop entry and back edge, more than 5 pairs of hand-off ids (cross-core flag ids 0..10).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel split_cube_vector(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
