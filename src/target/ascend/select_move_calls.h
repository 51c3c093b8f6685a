// select_move_calls: instruction selection of the data moves (the last program pass; expert:
// after plan_memory, automatic: after insert_sync).
//
// Every byte-level move (program.h: CopyGmToL1, CopyGmToUb, CopyUbToGm, CopyUbToUb, LoadL0,
// Fixpipe) is replaced by the call-level instruction(s) it is printed as, whose fields are the
// AscendC parameter-struct fields in the API's units:
//   CopyGmToL1  -> [if (rows < dst_rows || cols < dst_cols)] { InitConstValue<fill_dtype> over the
//                  whole Nz tile; PipeBarrier<PIPE_MTE2> }  DataCopyNd2Nz (Nd2NzParams). The guard
//                  is left out when the copy is provably partial, the zeroing when it is provably full.
//                  A window of rows (window_rows set): the guard compares rows with window_rows and
//                  InitConstValue zeroes those rows of each C0 strip (repeatTimes = strips,
//                  blockNum = window_rows, dstGap = dst_rows - window_rows).
//   CopyGmToUb  -> DataCopyPadGmToUb: GM gap in bytes (stride - row bytes), UB gap in 32 B blocks
//                  after the row rounded up to 32 B; rightPadding = the padded elements when `pad`.
//   CopyUbToGm  -> DataCopyPadUbToGm (UB gap in 32 B blocks, GM gap in bytes).
//   CopyUbToUb  -> DataCopyUbToUb (DataCopyParams: everything in 32 B blocks).
//                  A copy of one row has gaps 0 (the API does not use them). A row count that is not
//                  a positive constant is guarded: `if (n_rows > 0)` (blockCount is 1..4095).
//   LoadL0      -> the fewest LoadData2D calls the layouts allow (each: repeatTimes fractals,
//                  srcStride between source fractals, dstGap between destination fractals): one
//                  call when the source fractals run through the destination's order with one
//                  stride (calls of 255 when more); else, with constant sizes and fewer destination
//                  fractal columns than rows, for (tw_i < columns) one call per column (dstGap =
//                  columns - 1); else for (tw_i < fractal rows) one call per row. For a
//                  transposing 32-bit load into L0B, one LoadData3DV2 (1 x 1 img2col).
//   Fixpipe     -> FixpipeV220 with quantPre chosen from the dtype pair (fp32 -> fp16 F322F16,
//                  fp32 -> bf16 F322BF16, fp32 -> fp32 and int32 -> int32 NoQuant).
// Mmad is already the call (MmadParams m, n, k, cmatrixInitVal) and is kept.
//
// Errors (ir::Error at the instruction's kernel line): a constant field outside its documented
// range or width (e.g. srcDValue > 65535, blockCount > 4095, repeatTimes > 255), a negative gap
// between rows, a dtype pair Fixpipe cannot convert, a transposing load of a type the calls cannot
// transpose, an 8-bit InitConstValue (dav-c220 has none). Fields that are runtime values are checked
// by the simulator (API rule reports).
#pragma once

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

Program select_move_calls(const Program& program, const target::Target& target);

}  // namespace tw::ascend
