// select_instructions: the instruction selection of both Ascend modes: a kernel in expert form
// (T.Kernel(n, is_npu=True) with T.Scope("C"/"V"): written so in expert mode, produced by the Tile
// IR passes in automatic mode) -> the Ascend program (target/ascend/program.h). Facts:
// shared/ascend-910b.md.
//
// Expert mode means the user owns placement and synchronisation; this lowering only translates:
//  - parameters map 1:1 (tensors in GM, scalars by value); the grid's one extent is block_dim,
//    the block variable is Program::block_idx, the sub-block variable Program::sub_block_idx;
//  - every alloc becomes a BufferDecl of its memory (L1/L0A/L0B/L0C on the AIC, UB on the AIV)
//    with its geometry; plan_memory (run next) gives it its address and checks the capacity
//    (the program this returns has every offset 0). Cube buffers
//    hold fractal matrices (L1 Nz, L0A Zz, L0B Zn, L0C Nz; rows/cols padded to 16 / C0); UB
//    buffers are row-major, rows padded to whole 32 B blocks when a tile has several rows (the
//    row pitch vector repeats and DataCopyPad bursts need). A leading dimension of a Cube buffer indexes separate matrices
//    (double buffering: T.alloc_L0A((2, m, k), ...) and A_l0[i % 2, :, :]);
//  - T.Scope("C") code goes to the AIC program, T.Scope("V") code to the AIV program; scalar code
//    outside scopes (loops, ifs, lets) is replicated into both and pruned where it holds no
//    instruction. Kernel type: both scopes MIX_1_2; C only AIC_ONLY; V only AIV_ONLY, or MIX_1_2
//    with an empty AIC when the code uses the sub-block index (so both AIVs of a block run);
//  - tile ops become instructions (one each, except T.gemm on L1 operands):
//      copy GM->L1            CopyGmToL1 (ND->Nz, tails = min(extent, tensor dim - start)); into
//                             whole rows r0 .. of the tile (any r0, run-time too): a window of
//                             window_rows rows in each C0 strip, the strips dst_rows apart
//      copy L1->L0A / L0B     LoadL0 (L0B from a KxN L1 tile: transpose; 16-bit types)
//      gemm L0A x L0B -> L0C  Mmad (init = clear; an `if c: gemm(clear) else gemm()` pair, which
//                             T.mma(init=cond) produces, becomes one Mmad with init = c)
//      gemm on L1 operands    LoadL0 A, LoadL0 B into two implicit buffers (_gemm_L0A/_gemm_L0B),
//                             SetFlag/WaitFlag MTE1->M (event 7), Mmad, SetFlag/WaitFlag M->MTE1
//                             (event 7): a self-contained library call (its own flags only)
//      copy L0C->GM           Fixpipe (conversion fp32->fp16/bf16/fp32, int32; Nz->ND; tails)
//      copy GM->UB / UB->GM   CopyGmToUb / CopyUbToGm (tails = max(0, min(extent, tensor dim -
//                             start)): a copy entirely outside the tensor moves nothing). A GM->UB
//                             copy that can cross the tensor's end reads zeros there (docs/
//                             language.md "Tails"): DataCopyPad pads each row to 32 B with zeros,
//                             and when the copy is short (a runtime test) a VecDup of 0 over the
//                             whole tile runs first. With auto_sync, insert_sync orders the two
//                             like any other instructions; in expert mode the VecDup is fenced
//                             by PipeBarrier<PIPE_ALL> before and after (tail iterations only).
//                             The GM workspace (hand-offs) is read as written, without this
//      copy UB->UB            CopyUbToUb, or VecCast when the dtypes differ
//      T.Parallel on UB       VecBinary / VecBinaryScalar / VecUnary / VecCast / VecDup /
//                             VecRowBroadcast / CopyUbToUb / VecIndex (1-D t[j] = j) by the form of the body (see
//                             match_map in the .cpp; a column vector w[j] is an operand with
//                             row stride 0; `if j < n` around the body makes a runtime
//                             column count); an error for any other body
//      fill (UB)              VecDup;   reduce (UB)  VecReduce (axis = last: Row, 0 of 2-D: Col)
//  - scalar reads of GM tensors (an element in a let, loop bound, if condition or region start):
//    ScalarLoad (GlobalTensor::GetValue on the scalar unit) before the statement; a let that is
//    exactly one element binds its own variable. Only tensor parameters the kernel never writes
//    (the scalar DataCache does not see DMA writes);
//  - scalar reads of UB tiles (Vector core): ScalarLoad from UB (LocalTensor::GetValue), the same
//    way; element stores into UB tiles outside a map: ScalarStore (LocalTensor::SetValue) after the
//    loads its value and indices need (no math functions: an error); a 1-D T.Parallel map over a
//    column of tiles (no vector instruction: unaligned elements) runs as a serial loop of those, and
//    so does a map storing converted values into int64 tiles (vec::int64_element_map: no int64
//    Cast or arithmetic on the Vector core; session 33, port33 F4).
//    Elements of L1/L0 tiles and element stores into GM tensors are errors;
//  - T.set_flag / wait_flag / pipe_barrier / set_cross_flag / wait_cross_flag: exactly as written
//    (there is no automatic synchronisation in expert mode).
// Every error is an ir::Error at the kernel source line of the offending statement.
#pragma once

#include <set>
#include <string>

#include "target/ascend/program.h"
#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// auto_sync: the automatic pipeline, whose insert_sync runs next and synchronises every
// instruction; false (expert mode): instructions this lowering adds are fenced here.
// passes: legalize_vector's pass-through temporaries, by name (BufferDecl::passes).
Program select_instructions(const ir::Kernel& kernel, const target::Target& target, bool auto_sync = false,
                            const std::set<std::string>* passes = nullptr);

// The event id the expansion of T.gemm on L1 operands uses for its MTE1->M / M->MTE1 flags.
// Kernels that use T.gemm on L1 operands must not use it for those pairs themselves.
inline constexpr int kGemmEventId = 7;

}  // namespace tw::ascend
