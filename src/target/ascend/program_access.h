// program_access: what one instruction of an Ascend Program reads and writes (an analysis of the
// Program, not a pass: it changes nothing).
//
// program_access(program, op) gives the instruction's pipe and its byte regions, reads first (an
// instruction reads its inputs before it writes its output), in operand order. A region is one
// operand: an on-chip buffer (Program::buffers index, its memory) or a GM place (tensor parameter
// or, param == -1, the workspace), the operand's byte offset, and the bytes touched from there:
// `rows` rows of `row_bytes` bytes, `stride` bytes apart, starting `start` bytes after the operand.
// These are ir::Expr formulas over the instruction's fields (folded by ir::arith, otherwise
// symbolic: tails, block indices, loop variables stay in them); evaluate() turns them into bytes
// with a caller's value of an expression (plan_memory: upper bounds of counts, for liveness;
// insert_sync: constants after its Let substitution and value-range hulls, for dependences).
//
// Footprints (es = element size; round32(x) = x rounded up to 32 B):
//   CopyGmToL1   GM src: rows x cols*es, src_row_stride*es apart; L1 dst: dst_rows*dst_cols*es
//                (the whole Nz tile: tails are zero-filled); with window_rows (a row window): dst_cols/C0
//                rows of window_rows*32 B, dst_rows*32 apart
//   CopyGmToUb   GM src: n_rows x row_bytes, src_stride apart; UB dst: n_rows x round32(row_bytes),
//                dst_stride apart (each burst is written up to the next 32 B boundary)
//   CopyUbToGm   UB src: n_rows x row_bytes, src_stride apart; GM dst: same, dst_stride apart
//   CopyUbToUb   src / dst: n_rows x row_bytes, src_stride / dst_stride apart
//   LoadL0       L1 src: the window's fractal-column strips, from (src_col/C0*src_rows + src_row)*32:
//                (cols of the window)/C0 rows of (rows of the window)*32 B, src_rows*32 apart (the
//                window is dst_rows x dst_cols, transposed for L0B unless `transpose`, for L0A when
//                `transpose`); L0A/L0B dst: dst_rows*dst_cols*es
//   Mmad         a: Mp*Kp*es, b: Kp*Np*es, reads c unless init is the constant true, writes c:
//                Mp*Np*acc_es (Mp, Np = m, n rounded up to 16; Kp = k rounded up to C0)
//   Fixpipe      L0C src: src_rows*round16(n)*src_es; GM dst: m x n*dst_es, dst_row_stride*dst_es apart
//   Vec*         each operand rows x cols*es, row_stride*es apart (the operand's own dtype);
//                VecReduce dst: rows (Row) or cols (Col) elements; VecRowBroadcast vec: rows elements
//   VecCallL2    each source and dst: count elements (sources in src_dtype)
//   VecCallL0    each operand: `repeat` rows rep*32 B apart, each the 32 B blocks its mask covers
//                (level-0 addressing, program.h)
//   WholeReduce  src: level-0 rows; dst: repeat values, dst_rep elements apart
//   Brcb         src: repeat*8 elements; dst: level-0 rows of 8 full blocks
//   Gather       srcOffset: count uint32; src: src_elems elements (any of them may be read);
//                dst: count elements
//   ScalarLoad   GM src or UB src: one element;   ScalarStore  UB dst: one element
//   InitConstValue  L1 dst: repeatTimes rows of blockNum*32 B, (blockNum + dstGap)*32 apart
//   SetFlag, WaitFlag, PipeBarrier, CrossCoreSetFlag, CrossCoreWaitFlag: none (their ordering is
//                the consumers' business)
// The call-level moves (DataCopyNd2Nz .. FixpipeV220) are made by select_move_calls, the last
// pass, after every consumer of this analysis: asking for one is an internal error (InitConstValue
// is also a fill that select_instructions emits, so it has a footprint).
//
// The simulator does not use this analysis: it executes the call-level instructions with its own
// addressing, so its checker is an independent oracle for the dependences insert_sync derives here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "target/ascend/program.h"

namespace tw::ascend {

enum class AccessMode : uint8_t { Read, Write };

// One operand's bytes: rows x row_bytes, stride apart, from operand + offset + start (bytes).
// Level-0 vector operands (VecCallL0, WholeReduce and Brcb operands) have no row_bytes: each of
// their rows covers the 32 B blocks of `mask` elements of `elem_bytes` bytes, `blk` blocks apart
// (mask * elem_bytes bytes when blk is 1 or they fit one block, else (blocks - 1) * blk * 32 + 32).
struct Region {
  AccessMode mode = AccessMode::Read;
  Mem mem = Mem::GM;  // the buffer's memory; GM for a GmRef
  int buffer = -1;    // on-chip operand: index into Program::buffers
  int param = -1;     // GM operand: tensor parameter index, -1 = the workspace
  ir::Expr offset;    // the operand's byte offset (LocalRef / GmRef offset)
  ir::Expr start, rows, row_bytes, stride;
  ir::Expr mask, blk;  // level-0 operands
  int64_t elem_bytes = 0;
  bool atomic = false;  // a GM write that adds into GM (T.atomic_add): commutes with other atomic adds
};

struct InstrAccess {
  Pipe pipe = Pipe::S;
  std::vector<Region> regions;  // reads first, in operand order, then writes
};

// The pipe and byte regions of `op` (an instruction of `program`: LoadL0 needs its destination's
// memory). Throws ir::Error (internal) for call-level moves.
InstrAccess program_access(const Program& program, const InstrOp& op);

// A value of an expression for the caller's purpose (a constant, an upper bound), or nullopt.
using ExprValue = std::function<std::optional<int64_t>(const ir::Expr&)>;

// A region's numbers under `value`; bytes = the byte extent from start: row_bytes for one row,
// (rows - 1) * stride + row_bytes for more (nullopt when a needed number is). No rows count as one
// (a move of no rows is never issued: its region stays the operand's first row, so the passes
// order it like the move it is when the count is not known).
struct Extent {
  std::optional<int64_t> start, rows, row_bytes, stride, bytes;
};
Extent evaluate(const Region& region, const ExprValue& value);

}  // namespace tw::ascend
