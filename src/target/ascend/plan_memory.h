// plan_memory: static placement of the on-chip buffers of an Ascend program (Program pass, run
// right after instruction selection). Facts: shared/ascend-910b.md.
//
// Instruction selection (select_instructions) gives every BufferDecl its geometry (bytes, shape, dtype,
// format); this pass gives it its `offset` in its memory, checks the memory's capacity and sets
// Program::pool_bytes: per core type and memory, the end of its last buffer rounded up to 32 B (the
// size of the TBuf the AscendC printer declares for that memory).
//
// Alignment of every buffer start (buffer_alignment): L1 32 B, L0A/L0B 512 B, L0C 1 KiB (the Mmad
// destination alignment; every L0C tile is one), UB 32 B.
//
// reuse = false (expert mode: the user's flags only protect the buffers they name): every buffer
// gets its own bytes, bump-allocated in declaration order.
//
// reuse = true (automatic mode; insert_sync runs afterwards and synchronises on physical byte
// ranges, so two buffers sharing bytes are ordered like any other dependence):
//  1. Positions: the instructions of the AIC code (for L1/L0A/L0B/L0C buffers) and of the AIV
//     code (for UB buffers) are numbered in program order (pre-order walk; both branches of an
//     `if` are numbered, then before else). Buffers of different core types never share (they
//     are in different memories).
//  2. Lifetime of a buffer: [first access, last access] over those positions, whole-buffer
//     granularity; within one instruction reads come before writes (the accesses and the bytes a
//     write covers are program_access.h's regions). A buffer never accessed has
//     no lifetime and takes no bytes (offset 0).
//  3. Loops, innermost first. If a buffer is accessed inside loop L and
//       (a) its lifetime reaches outside L (a value flows into or out of the loop), or
//       (b) its value may flow from one iteration of L to the next: some read in L's body comes
//           before the buffer is fully redefined in that body by writes that run whenever the
//           read runs (writes under an `if` / possibly empty loop inside L count only for reads
//           inside that same branch / loop body),
//     its lifetime is extended to the whole of L. "Fully redefined" = the bytes [0, need) are
//     covered by writes that run on every iteration of L (not under an `if` inside L) at
//     constant byte offsets; need = the buffer's bytes (Cube, fractal padded) or its elements
//     (UB). A write's extent is the upper bound of its counts (a tail writes fewer elements; the
//     ones past a tail are never meaningful). So accumulators (Mmad with an init that is not the
//     constant true, a VecBinary reading its own destination), read-modify-write updates and
//     stage-indexed (multi-buffered) writes keep their buffer for the whole loop.
//     Slot liveness (session 19), only when the placement below overflows with the rule above:
//     a read at a constant byte offset needs only the bytes it reads, [offset, offset + its
//     upper bound of bytes), covered by such writes (the other bytes of the buffer are not read
//     there). So an L0 tile of two slots at constant offsets (expand_gemm's unrolled K steps:
//     each Mmad reads the slot the LoadData before it in the same iteration wrote) is no longer
//     live through the loops around it, and two gemms in a row whose K steps each take more than
//     half of L0A / L0B fit. Not the default: the extra reuse it allows (any read of part of a
//     buffer) costs synchronisation between the pipes that share the bytes (up to +1.6% cycles on 12
//     of 300 fuzz programs that fit either way, docs/ascend.md).
//  4. Placement: buffers by decreasing size (then first use, then declaration), each at the
//     lowest aligned offset whose bytes overlap no already placed buffer with an intersecting
//     lifetime (first fit). If that overflows, placement in order of first use is tried too.
//
// Capacity (both modes): when a memory's placement exceeds the target's capacity the pass throws
// an ir::Error at the kernel source line of the biggest buffer involved, naming the buffers live
// together at the peak (all the memory's buffers without reuse), their shapes and sizes, the bytes
// needed, the capacity of that memory on that chip, and as hint a smaller tile that fits: with the
// kernel's tile dims (tile_dims.h: the dims a gemm, a map or a copy ties change together), one free
// class of them halved (the fewest halvings; the class with the most bytes at the peak first), then
// all free classes, then one class taken whole from a tensor, then all, until the placement fits, the
// hint naming the class's dims and their extent ("k's rows, p's columns, ... 512 -> 256"); without
// them (or for a buffer they do not name with its shape), the leading matrix dimension of every such
// buffer halved together. Compiler temporaries keep their size there, as legalize_vector's row
// chunks do, and so do UB vectors as long as a tile's columns and no tile's rows (a weight row w
// (N,)) when the kernel's dims do not say. A tile staged
// by T.Pipelined (BufferDecl::stages, multi_buffer) is named with the shape the kernel wrote and
// its stage count, its stage dim is never halved, and the hint adds the most stages that fit.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "target/ascend/program.h"
#include "target/ascend/tile_dims.h"
#include "target/registry.h"

namespace tw::ascend {

// The capacity error (above). `stages`: the most copies a T.Pipelined-staged buffer live at the
// peak has (BufferDecl::stages; 0 when none is live there), so that lower_ascend can lower the
// kernel again with fewer stages (num_stages is a performance hint).
class CapacityError : public ir::Error {
 public:
  CapacityError(std::string message, ir::Span span, std::string hint, Mem m, int64_t needed, int64_t capacity,
                int64_t stages)
      : ir::Error(std::move(message), std::move(span), std::move(hint)),
        mem(m), needed(needed), capacity(capacity), stages(stages) {}
  Mem mem;
  int64_t needed, capacity, stages;
};

// dims: the kernel's tile dims that change together (tile_dims), for the capacity error's smaller
// tiles; null: each buffer's leading matrix dim, all halved together.
Program plan_memory(const Program& program, const target::Target& target, bool reuse,
                    const TileDims* dims = nullptr);

// Alignment in bytes of a buffer start in memory m.
int64_t buffer_alignment(Mem m);

// Bytes of memory m the target lets a kernel use (0 for GM).
int64_t capacity_of(const target::AscendParams& hw, Mem m);
// Bytes of memory m program p may plan: capacity_of, but UB ends at kSelectTmpUbOffset (184 KiB)
// when p's Vector code selects (a VecSelect or a Select call: AscendC's Select in modes 1 and 2 keeps
// a temporary there on dav-c220, program.h; session 31, h-audit31).
int64_t usable_bytes(const Program& p, const target::AscendParams& hw, Mem m);

// Bytes a tile of `shape` takes in memory m: UB row-major, rows padded to whole 32 B blocks when
// there are several (as select_instructions lays UB tiles out), rounded up to 32 B; Cube
// memories hold matrices of the last two dims as fractals (L1/L0A: rows to 16, cols to C0;
// L0B: rows to C0, cols to 16; L0C: both to 16), a leading dim counts separate matrices.
int64_t tile_bytes(Mem m, ir::DType dtype, const std::vector<int64_t>& shape);

// The padded {rows, cols} of one rows x cols matrix in Cube memory m (the fractal formats above).
std::pair<int64_t, int64_t> fractal_dims(Mem m, ir::DType dtype, int64_t rows, int64_t cols);

}  // namespace tw::ascend
