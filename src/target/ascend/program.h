// The Ascend program: the lowered IR of the Ascend backend.
//
// One Program per kernel. It is what expert-mode lowering (and later the automatic pipeline)
// produces, and what both the AscendC printer and the simulator consume, so they cannot disagree.
// Design rule: every Instr maps to one AscendC call (or one fixed, documented snippet of calls),
// every Stmt to one C++ statement, every BufferDecl to one statically placed LocalTensor, so the
// AscendC printer prints the program 1:1. Facts: shared/ascend-910b.md.
//
// Conventions
// - Addresses: every operand is a byte region: GM = (param | workspace) + byte offset;
//   on-chip = (buffer) + byte offset inside the buffer. Offsets are ir::Expr over the block
//   index variables, loop variables, Let variables, scalar parameters and shape variables.
// - Counts (rows, cols, m, n, k, ...) are ir::Expr too (tails depend on the block index).
// - Matrices are described logically (rows x cols of elements) with their format; the fractal
//   offset formulas are in ascend-910b.md and repeated next to each instruction.
//   C0 = 32 B / element size (16 fp16/bf16, 8 fp32/int32, 32 int8).
// - Block indices: `block_idx` is the AI Core index (0 .. block_dim-1). On AIV code of a MIX_1_2
//   kernel, `sub_block_idx` is 0 or 1 (AscendC GetBlockIdx() on AIV = block_idx*2 + sub_block_idx).
//   AIC_ONLY: block b runs AIC b. AIV_ONLY: block b runs one AIV (sub_block_idx = 0).
//   MIX_1_2: block b runs AIC b and two AIVs (sub 0 and 1).
// - Every Instr carries the ir::Span of the kernel source line it came from.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tilewright/ir.h"

namespace tw::ascend {

// ---------------------------------------------------------------------------------------------
// Enumerations

// Pipes (AscendC PIPE_*): the IR's enum (expert-mode flags name them), so the program and the
// Tile IR cannot disagree. ALL is only valid for PipeBarrier (PIPE_ALL).
using Pipe = ir::AscendPipe;
using ir::pipe_name;  // "S" "V" "M" "MTE1" "MTE2" "MTE3" "FIX" "ALL"
inline constexpr int kNumPipes = 7;  // S..FIX

// std::visit over the instruction variant with one lambda per alternative.
template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

enum class Mem : uint8_t { GM, L1, L0A, L0B, L0C, UB };
inline constexpr int kNumMems = 6;
std::string_view mem_name(Mem m);  // "GM" "L1" "L0A" "L0B" "L0C" "UB"

// Fractal formats (AscendC spelling; catlass/tilelang spell them reversed).
enum class Format : uint8_t { ND, Nz, Zz, Zn };
std::string_view format_name(Format f);

// The AscendC kernel type. AIC_ONLY / AIV_ONLY / MIX_1_2 are what select_instructions picks from
// the cores the kernel uses; resolve_cross_waits turns a one-core-type kernel with cross-core flags
// into MIX_AIC_1_0 / MIX_AIV_1_0 (AscendC requires that type for CrossCoreSetFlag/WaitFlag), which
// run the same cores as AIC_ONLY / AIV_ONLY.
enum class KernelType : uint8_t { AIC_ONLY, AIV_ONLY, MIX_1_2, MIX_AIC_1_0, MIX_AIV_1_0 };
inline constexpr int kNumKernelTypes = 5;
std::string_view kernel_type_name(KernelType t);  // "AIC_ONLY" "AIV_ONLY" "MIX_1_2" "MIX_AIC_1_0" "MIX_AIV_1_0"
bool runs_aic(KernelType t);                      // every type but AIV_ONLY / MIX_AIV_1_0
bool runs_aiv(KernelType t);                      // every type but AIC_ONLY / MIX_AIC_1_0

enum class CoreType : uint8_t { AIC, AIV };
std::string_view core_type_name(CoreType c);

// ---------------------------------------------------------------------------------------------
// Kernel interface and buffers

// A kernel parameter, mapped from ir::Kernel params in order. Tensors live in GM (dense
// row-major, `shape` may use shape variables); scalars are passed by value.
struct KernelParam {
  std::string name;
  bool is_tensor = true;
  ir::DType dtype;
  std::vector<ir::Expr> shape;  // tensors
  ir::Var var;                  // scalars: the variable instructions refer to
  bool is_output = false;
  // An output only T.atomic_add writes (transform::globals_accumulated): it starts at zero (the
  // simulator zeroes it before the launch; the printed host program zeroes every output).
  bool zeroed = false;
};

// A statically planned on-chip buffer of one core type (every core of that type has its own).
// AscendC: one TBuf/LocalTensor at a fixed offset of its TPosition (L1=A1/B1, L0A=A2, L0B=B2,
// L0C=CO1, UB=VECCALC).
struct BufferDecl {
  std::string name;
  CoreType core = CoreType::AIC;
  Mem mem = Mem::L1;
  int64_t offset = 0;  // bytes from the start of the memory
  int64_t bytes = 0;
  ir::DType dtype;
  std::vector<int64_t> shape;  // logical tile shape (informative; for printing)
  Format format = Format::ND;  // informative
  ir::Span span;
  std::string temp_of;  // a compiler temporary: the user buffer it serves (ir::BufferNode::temp_of)
  int64_t stages = 0;   // copies in the leading dim (ir::BufferNode::stages: multi_buffer), else 0
  ir::TilePart part_of;  // the user's tile it stands for (ir::BufferNode::part_of: split_cube_vector)
  bool passes = false;   // holds pass-through operands (legalize_vector.h; checker metadata, not printed)
};

// ---------------------------------------------------------------------------------------------
// Operands

// A place in GM: tensor parameter `param` (index into Program::params) or, with param == -1,
// the kernel's GM workspace. `offset` is in bytes from the tensor's (workspace's) start.
struct GmRef {
  int param = -1;
  ir::Expr offset;
};

// A place in an on-chip buffer: `buffer` indexes Program::buffers; `offset` in bytes from the
// buffer's start (so double buffering is `offset = (i % 2) * half`).
struct LocalRef {
  int buffer = -1;
  ir::Expr offset;
};

// A 2-D vector operand in UB: element (r, c) is at at + (r * row_stride + c) * dtype bytes.
// row_stride * bytes must be a multiple of 32 when rows > 1 (it becomes a repeat stride).
struct VecOperand {
  LocalRef at;
  ir::Expr row_stride;  // elements
};

// One index of a multi-dimensional element access (ScalarLoad / ScalarStore `dims`): the simulator
// reports an index outside [0, extent) of its dimension (hunt34 F1 / F2: an index past its row that
// stays inside the buffer addresses another row's element, which the flat bounds, the tensor's bytes
// and tile_end, do not see). Checked by the simulator only: nothing of it is printed.
// count > 1: the indices index .. index + count - 1 of a window (WindowCheck); the first one outside
// is reported (index when it is negative, else the dimension's end), as cpu reports the first element.
// used (null: all count): how many of the window's leading indices the user's iterations
// read (ir.h CopyNode::used: the rest is a padded loop's, clipped without a report).
struct DimIndex {
  ir::Expr index, extent;
  int dim = 0;  // the dimension, counted from 0
  int64_t count = 1;
  ir::Expr used;
};
// The window of a map's element reads of a tensor that a checked copy staged (ir.h
// CopyNode::checked): its dims not proved inside the tensor. The language does not clip a map's
// element reads, the copy does (the tile reads zeros there): the simulator reports a window that
// leaves a dimension. It rides on the zero fill of the copy's tail (select_instructions), which runs
// exactly where the window leaves the tensor (the copy itself may be empty and not issued).
// Checker metadata: not printed.
// preload (ir.h CopyNode::preload, a map's stores that may skip elements of their window): on the zero fill of
// the preload's tail (no dims), what it writes is the preload's; on the copy out, the simulator reports an
// element of the window outside the tensor that no longer holds the preload's (the map stored it; written.h),
// in place of the window leaving a dim: `dims` are every dim of the window not proved inside or of more than
// one index, `strides` (elements, one per dims entry) place each element in the UB tile at `tile`.
struct WindowCheck {
  int param = -1;  // the tensor parameter (-1: no check)
  std::vector<DimIndex> dims;
  bool preload = false;
  LocalRef tile;
  std::vector<int64_t> strides;
};

// ---------------------------------------------------------------------------------------------
// Instructions. Each struct documents its pipe, semantics and the AscendC call it prints as.
// The byte-level moves below (CopyGmToL1 .. LoadL0, Fixpipe) are what lowering produces; the last
// pass, select_move_calls, replaces them with the call-level moves further down, which are what
// the printer and the simulator accept.

// MTE2. GM (ND, row-major) -> L1 (Nz), AscendC DataCopy(dst, src, Nd2NzParams) (+ InitConstValue
// for the padding). Reads rows x cols elements at src with src_row_stride elements between rows,
// writes the Nz matrix of strip height dst_rows (multiple of 16) and width dst_cols (multiple of
// C0): off(r, c) = (c / C0) * dst_rows * C0 + r * C0 + (c % C0). Every element of the
// dst_rows x dst_cols Nz matrix outside rows x cols is written with zero (tails): when the copy
// may be partial, InitConstValue<fill_dtype> zeroes the whole tile first (the tile read as
// fill_dtype; InitConstValue has no int8/uint8 form on dav-c220, so lowering zeroes 8-bit tiles
// as half). Nd2NzParams fields are uint16: rows <= 16384, cols and src_row_stride <= 65535.
// window_rows (when set): dst is a window of window_rows rows starting inside a taller Nz tile
// whose strips are dst_rows rows long (a page of a paged KV tile at rows jj * page ..): only the
// window's rows of each strip are written, and its tail zeroing is one InitConstValue repeat per
// strip (blockNum = window_rows, dstGap = dst_rows - window_rows).
// A row window is also how a gathered row lands (window_rows = 1,
// `T.copy(X[t, :], a[r, :])`): dst points at row
// r0 of the Nz matrix (r0 * 32 bytes into each strip) and the copy fills only rows r0 ..
// r0 + window_rows - 1 of it: rows x cols must fit the window, and a partial copy zeroes just the
// window's rows (InitConstValue repeatTimes = dst_cols / C0 strips of window_rows blocks, dstGap
// dst_rows - window_rows), never the rest of the tile. Unset (null): the whole strip height.
// skip_rows (when set, a run-time count): the window's first skip_rows rows lie before row 0 of the
// tensor (a start like bx * B - 64): the Nd2Nz writes the rows x cols it reads skip_rows rows (32 B
// each) further into every strip; the zero fill covers the skipped rows (rows < the window's rows
// whenever skip_rows > 0), so they read 0 as on cpu.
// skip_cols (when set, a run-time count, a multiple of C0): the window's first skip_cols columns lie
// before column 0: the Nd2Nz writes skip_cols / C0 strips (dst_rows x 32 B each) further in; the
// zero fill covers the skipped strips.
// col_start (when set): the tensor column the read starts at (the window's run-time column start
// plus skip_cols), set where it may be negative at run time (a start of unknown sign that is not a
// whole number of strips before column 0): such a read cannot be clipped on this path (an Nz row
// keeps a strip's C0 columns in one 32 B block) and crosses its row's start; the simulator's checker
// reports it (checker metadata, carried to DataCopyNd2Nz; not an API field, not in the AscendC text).
struct CopyGmToL1 {
  GmRef src;
  LocalRef dst;
  ir::DType dtype;
  ir::Expr rows, cols, src_row_stride;
  ir::Expr dst_rows, dst_cols;
  ir::DType fill_dtype = ir::DTypeCode::f16;
  ir::Expr window_rows;  // null: the window is the whole tile (dst_rows)
  ir::Expr skip_rows;    // null: 0
  ir::Expr skip_cols;    // null: 0
  ir::Expr col_start;    // null: the read starts at a column >= 0 (checker metadata, above)
};

// MTE2. GM -> UB, AscendC DataCopyPad(dst, src, DataCopyExtParams{n_rows, row_bytes, ...},
// DataCopyPadExtParams{pad, 0, rightPadding, 0}): n_rows bursts of row_bytes bytes; source bursts
// start src_stride bytes apart, destination bursts dst_stride bytes apart (multiple of 32). Each
// destination burst is written up to the next 32 B boundary: the bytes after row_bytes are zero
// when `pad` (rightPadding = those bytes / element size), unspecified values otherwise (the
// simulator writes garbage there). Bytes between the 32 B-rounded bursts are not written.
// left (when set, needs pad): each destination burst starts with `left` zero elements (leftPadding,
// under 32 B) before its row_bytes: a window that starts before column 0 of its tensor lands the
// columns it reads that many elements into the 32 B block dst points at.
struct CopyGmToUb {
  GmRef src;
  LocalRef dst;
  ir::DType dtype;
  ir::Expr n_rows, row_bytes, src_stride, dst_stride;
  bool pad = false;
  ir::Expr left;  // null: 0
  bool preload = false;  // ir.h CopyNode::preload: what it writes is the preload's (WindowCheck; not printed)
};

// MTE3. UB -> GM, DataCopyPad. Same fields as CopyGmToUb (src_stride multiple of 32).
// atomic (T.atomic_add): the bytes are added into GM (see DataCopyPadUbToGm).
// window: a checked store's (ir.h CopyNode::checked: a map's element stores staged as one window,
// hunt35 F1): the simulator reports the window leaving a dimension (WindowCheck, not printed).
struct CopyUbToGm {
  LocalRef src;
  GmRef dst;
  ir::DType dtype;
  ir::Expr n_rows, row_bytes, src_stride, dst_stride;
  bool atomic = false;
  WindowCheck window;
};

// V. UB -> UB, DataCopy(dst, src, DataCopyParams) (strides and lengths multiples of 32 B).
struct CopyUbToUb {
  LocalRef src, dst;
  ir::DType dtype;
  ir::Expr n_rows, row_bytes, src_stride, dst_stride;
};

// MTE1. L1 (Nz) -> L0A (Zz) or L0B (Zn), AscendC LoadData(LoadData2DParams) (select_move_calls
// issues the fewest calls the layouts allow). The source is the Nz matrix at src with strip height
// src_rows; the window starts at (src_row, src_col) (multiples of 16 and C0).
// The destination is the logical dst_rows x dst_cols matrix (L0A: M x K in Zz; L0B: K x N in Zn;
// dims multiples of 16 / C0):
//   Zz: off(m, k) = (m/16)*(K1*16*C0) + (k/C0)*(16*C0) + (m%16)*C0 + (k%C0),  K1 = K / C0
//   Zn: off(k, n) = (k/C0)*(N1*16*C0) + (n/16)*(16*C0) + (n%16)*C0 + (k%C0),  N1 = N / 16
// Fractals are copied as they are unless `transpose` (16-bit types only):
//   L0A: D[i][j] = S[src_row + i][src_col + j]         (transpose: S[src_row + j][src_col + i])
//   L0B: D[i][j] = S[src_row + j][src_col + i]  (L1 holds B^T, N x K; transpose: L1 holds B, K x N:
//        D[i][j] = S[src_row + i][src_col + j])
struct LoadL0 {
  LocalRef src, dst;
  ir::DType dtype;
  ir::Expr src_rows;
  ir::Expr src_row, src_col;
  ir::Expr dst_rows, dst_cols;
  bool transpose = false;
};

// M. Mmad(c, a, b, MmadParams{m, n, k, cmatrixInitVal = init}):
//   C[m][n] = (init ? 0 : C[m][n]) + sum_k A[m][k] * B[k][n]
// A in L0A Zz (K1 = ceil(k / C0)), B in L0B Zn (N1 = ceil(n / 16)), C in L0C Nz with
// Mp = ceil(m / 16) * 16: off(m, n) = (n/16)*(Mp*16) + m*16 + (n%16). Only the valid
// m x n x k elements take part. Inputs fp16/bf16 (acc fp32), fp32 (acc fp32), int8 (acc int32).
// m, n, k <= 4095. `init` is a boolean expression (e.g. `k_iter == 0`).
struct Mmad {
  LocalRef a, b, c;
  ir::DType in_dtype, acc_dtype;
  ir::Expr m, n, k;
  ir::Expr init;
};

// FIX. L0C (Nz) -> GM (ND), Fixpipe(FixpipeParamsV220): the valid m x n part of the L0C matrix
// of strip height src_rows (= Mp, multiple of 16) is converted (fp32 -> fp16/bf16/fp32 with
// round-to-nearest-even, int32 -> int32; optional ReLU) and written row-major with
// dst_row_stride elements between rows. atomic (T.atomic_add): added into GM (see FixpipeV220).
struct Fixpipe {
  LocalRef src;
  GmRef dst;
  ir::DType src_dtype, dst_dtype;
  ir::Expr m, n, src_rows, dst_row_stride;
  bool relu = false;
  bool atomic = false;
};

// Call-level data moves ---------------------------------------------------------------------
// select_move_calls replaces each byte-level move above (CopyGmToL1, CopyGmToUb, CopyUbToGm,
// CopyUbToUb, LoadL0, Fixpipe) with the AscendC call(s) it prints as. Their fields are the API's
// parameter-struct fields, named as the API names them, in the API's units; the printer prints them
// 1:1 and the simulator executes them with the documented semantics below. The widths and documented
// ranges are checked by the pass for constants (a located error) and by the simulator's API rules
// at run time. Facts: shared/ascendc-api-facts.md (asc-devkit v8.5.0 structs and docs).

// MTE2. InitConstValue(dst, InitConstValueParams<dtype>{repeatTimes, blockNum, dstGap, initValue})
// on an L1 buffer: repeatTimes times, writes blockNum 32 B blocks of initValue (as dtype), then
// skips dstGap 32 B blocks. Fields uint16. A fill, not a move: select_instructions emits it for
// `T.fill` of an L1 window (one call: a window of rows r0.. of every C0 strip it covers), and
// select_move_calls for the tails of CopyGmToL1; plan_memory and insert_sync see its footprint. dtype: half, int16, uint16, bfloat16, float, int32,
// uint32 (dav-c220 has no 8-bit form: it is a silent no-op there).
struct InitConstValue {
  LocalRef dst;
  ir::DType dtype;
  ir::Expr repeatTimes, blockNum, dstGap;
  ir::Expr initValue;
};

// MTE2. DataCopy(dst L1, src GM, Nd2NzParams): ndNum ND matrices (srcNdMatrixStride elements apart
// in GM, dstNzMatrixStride elements apart in L1) of nValue rows x dValue elements, GM rows
// srcDValue elements apart, are written in Nz: element (r, c) of matrix i goes to
//   dst + i * dstNzMatrixStride * es + (c / C0) * dstNzC0Stride * 32 + r * dstNzNStride * 32 + (c % C0) * es
// Only those elements are written (the rest of the tile keeps its bytes: InitConstValue zeroes tails).
// Fields uint16 (0..65535; nValue at most 16384). Units: nValue rows, dValue / srcDValue /
// srcNdMatrixStride / dstNzMatrixStride elements, dstNzC0Stride / dstNzNStride 32 B blocks.
struct DataCopyNd2Nz {
  GmRef src;
  LocalRef dst;
  ir::DType dtype;
  ir::Expr ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, dstNzNStride, dstNzMatrixStride;
  ir::Expr col_start;  // null, or CopyGmToL1::col_start (checker metadata, not printed in AscendC)
};

// MTE2. DataCopyPad(dst UB, src GM, DataCopyExtParams{blockCount, blockLen, srcStride, dstStride, 0},
// DataCopyPadExtParams<dtype>{isPad, leftPadding, rightPadding, paddingValue}). blockCount bursts
// (1..4095, uint16) of blockLen bytes (uint32); GM side: srcStride bytes between the end of one burst
// and the start of the next (uint32); UB side: each burst takes leftPadding + blockLen / es +
// rightPadding elements rounded up to 32 B, followed by dstStride 32 B blocks (uint32). When isPad,
// leftPadding / rightPadding elements (uint8, at most 32 B each) of paddingValue come before / after
// the data; the bytes after that up to the 32 B boundary are unspecified (the simulator writes
// garbage there).
struct DataCopyPadGmToUb {
  GmRef src;
  LocalRef dst;
  ir::DType dtype;
  ir::Expr blockCount, blockLen, srcStride, dstStride;
  bool isPad = false;
  ir::Expr leftPadding, rightPadding, paddingValue;
  bool preload = false;  // CopyGmToUb's (checker metadata, not printed)
};

// MTE3. DataCopyPad(dst GM, src UB, DataCopyExtParams{blockCount, blockLen, srcStride, dstStride, 0}):
// blockCount bursts (1..4095) of blockLen bytes; UB side: each burst takes blockLen rounded up to
// 32 B, followed by srcStride 32 B blocks; GM side: dstStride bytes between bursts (all uint32).
// atomic (T.atomic_add): the copy is meant to run under SetAtomicAdd<dtype> (SetAtomic), which
// adds every element written into GM; the mark is what the simulator checks the mode against.
struct DataCopyPadUbToGm {
  LocalRef src;
  GmRef dst;
  ir::DType dtype;
  ir::Expr blockCount, blockLen, srcStride, dstStride;
  bool atomic = false;
  WindowCheck window;  // CopyUbToGm's (checker metadata, not printed)
};

// V. DataCopy(dst UB, src UB, DataCopyParams{blockCount, blockLen, srcStride, dstStride}): blockCount
// bursts (1..4095) of blockLen 32 B blocks, srcStride / dstStride 32 B blocks between the end of one
// burst and the start of the next on each side. Fields uint16.
struct DataCopyUbToUb {
  LocalRef src, dst;
  ir::DType dtype;
  ir::Expr blockCount, blockLen, srcStride, dstStride;
};

// MTE1. LoadData(dst L0A/L0B, src L1, LoadData2DParams{startIndex, repeatTimes, srcStride, sid,
// dstGap, ifTranspose}): repeatTimes fractals of 512 B (16 x C0 elements); fractal i is read at
// src + (startIndex + i * srcStride) * 512 and written at dst + i * (1 + dstGap) * 512, as it is or,
// with ifTranspose (16-bit types), transposed as a 16 x 16 matrix. startIndex, srcStride, dstGap
// uint16; repeatTimes uint8 (1..255); sid 0.
struct LoadData2D {
  LocalRef src, dst;
  ir::DType dtype;
  ir::Expr startIndex, repeatTimes, srcStride, sid, dstGap;
  bool ifTranspose = false;
};

// MTE1. LoadData(dst L0B, src L1, LoadData3DParamsV2<dtype>) with a 1 x 1 kernel (img2col of a
// feature map of l1H x l1W positions and channelSize channels, stored C1 x H x W x C0 = Nz with strip
// height l1H * l1W): the img2col matrix S (position x channel) is read in the window
// [mStartPt, mStartPt + mExtension) x [kStartPt, kStartPt + kExtension) and written to L0B as the
// mExtension x kExtension matrix D in Zn (D[i][j] = S[mStartPt + i][kStartPt + j]): the transposing
// 32-bit B load. Fields uint16 (strides, filter sizes and dilations uint8). Only the 1 x 1 kernel,
// stride 1, dilation 1, l1W = 1 and all flags false are modelled (anything else is rejected).
struct LoadData3DV2 {
  LocalRef src, dst;
  ir::DType dtype;
  ir::Expr l1H, l1W, channelSize, kExtension, mExtension, kStartPt, mStartPt;
  int64_t strideW = 1, strideH = 1, filterW = 1, filterH = 1, dilationFilterW = 1, dilationFilterH = 1;
  bool enTranspose = false, enSmallK = false, filterSizeW = false, filterSizeH = false, fMatrixCtrl = false;
};

// Fixpipe's QuantMode_t (quantPre): NoQuant (fp32 -> fp32, int32 -> int32), F322F16 and F322BF16
// (round to nearest even).
enum class QuantMode : uint8_t { NoQuant, F322F16, F322BF16 };
std::string_view quant_mode_name(QuantMode q);  // "NoQuant" "F322F16" "F322BF16"

// FIX. Fixpipe<dst_dtype, src_dtype, CFG_ROW_MAJOR>(dst GM, src L0C, FixpipeParamsV220{nSize, mSize,
// srcStride, dstStride, quantPre, reluEn, ndNum}): the mSize x nSize part of the L0C Nz matrix whose
// strip height is srcStride rows (a multiple of 16) is converted by quantPre (then ReLU when reluEn)
// and written row-major, dstStride elements between rows. nSize, mSize, srcStride, ndNum uint16
// (ndNum 1); dstStride uint32. atomic: meant to run under SetAtomicAdd<dst_dtype> (SetAtomic): the
// converted values are added into GM (as DataCopyPadUbToGm's atomic).
struct FixpipeV220 {
  LocalRef src;
  GmRef dst;
  ir::DType src_dtype, dst_dtype;
  ir::Expr nSize, mSize, srcStride, dstStride;
  QuantMode quantPre = QuantMode::NoQuant;
  bool reluEn = false;
  ir::Expr ndNum;
  bool atomic = false;
};

// FIX. Fixpipe<dst_dtype, src_dtype, CFG_NZ>(dst L1, src L0C, FixpipeParamsV220{nSize, mSize,
// srcStride, dstStride, quantPre}): L0C -> L1 (declared for arch 2201: asc-devkit
// include/basic_api/kernel_operator_fixpipe_intf.h "L0C->L1"; dav_c220 fixpipe_v2_impl.h
// CheckFixpipeL0C2L1Param / FixpipeL0cToL1). The Nz layout is kept (CFG_NZ; row-major is refused
// into L1): nSize / 16 strips of 16 columns, mSize rows of each, the source strips srcStride rows
// apart (the L0C strip height), the destination strips dstStride 32 B blocks apart; float32 ->
// float16 / bfloat16 only (quantPre F322F16 / F322BF16: into L1 there is no NoQuant). nSize a
// multiple of 16 in 16..4095, mSize 1..65535, the destination 32 B aligned, the source 64 B. An
// L0C Nz float32 fractal converted element by element is the L1 Nz fractal of a 16-bit tile (C0 =
// 16), so T.copy(accumulator, gemm operand) is one call. select_instructions makes it with the API's
// fields (it is byte-level and call-level at once: select_move_calls leaves it).
struct FixpipeL1 {
  LocalRef src, dst;
  ir::DType src_dtype, dst_dtype;
  ir::Expr nSize, mSize, srcStride, dstStride;
  QuantMode quantPre = QuantMode::F322F16;
};

// High-level vector instructions (pipe V) operate on rows x cols elements of 2-D UB operands; they
// are what instruction selection (select_instructions) produces and what plan_memory and insert_sync
// reason about. select_vector_calls then replaces each with the call-level instructions below
// (VecCallL2 / VecCallL0 / WholeReduce / Brcb): the printer and the simulator never see these.
// Arithmetic on fp16 is computed exactly and rounded once (RNE); bf16 is not supported on AIV
// (cast to fp32 first).
// ShiftLeft/ShiftRight: only the scalar form (VecBinaryScalar), int32, count 0..31 (arithmetic
// right shift: docs/ascend.md "Integer operators").
// And/Or: int32 tiles only, tensor-tensor only (VecBinary), on the bits: select_vector_calls issues
// AscendC's And/Or on the tiles' int16 lanes (VecApi::And below).
enum class VecBinOp : uint8_t { Add, Sub, Mul, Div, Max, Min, ShiftLeft, ShiftRight, And, Or };
inline constexpr int kVecTensorBinOps = 6;  // Add .. Min: the ops with a tensor-tensor form
enum class VecUnOp : uint8_t { Exp, Ln, Sqrt, Rsqrt, Abs, Relu, Reciprocal };
enum class ReduceOp : uint8_t { Sum, Max, Min };
enum class ReduceAxis : uint8_t { Row, Col };  // Row: one result per row; Col: one per column
// AscendC RoundMode: CAST_RINT (nearest even), CAST_FLOOR, CAST_CEIL, CAST_TRUNC, CAST_ROUND
// (half away from zero), CAST_NONE (RINT for float targets, TRUNC for int targets).
enum class RoundMode : uint8_t { None, Rint, Floor, Ceil, Trunc, Round };
std::string_view vec_binop_name(VecBinOp op);   // "Add" "Sub" "Mul" "Div" "Max" "Min" "ShiftLeft" "ShiftRight"
std::string_view vec_unop_name(VecUnOp op);     // "Exp" "Ln" "Sqrt" "Rsqrt" "Abs" "Relu" "Reciprocal"
std::string_view reduce_op_name(ReduceOp op);   // "Sum" "Max" "Min"
std::string_view round_mode_name(RoundMode m);  // "CAST_NONE" "CAST_RINT" ...

// dst = a op b (elementwise).
struct VecBinary {
  VecBinOp op;
  ir::DType dtype;
  VecOperand dst, a, b;
  ir::Expr rows, cols;
};
// dst = a op scalar (Adds/Muls/Maxs/Mins; Sub and Div as a - s, a / s). scalar: any Expr.
struct VecBinaryScalar {
  VecBinOp op;
  ir::DType dtype;
  VecOperand dst, a;
  ir::Expr scalar;
  ir::Expr rows, cols;
};
// dst = op(a).
struct VecUnary {
  VecUnOp op;
  ir::DType dtype;
  VecOperand dst, a;
  ir::Expr rows, cols;
};
// dst (dst_dtype) = convert(src (src_dtype)) with the rounding mode. The mode is what the AscendC
// Cast call carries: lowering picks it with cast_round_mode(), the simulator reports a mode the
// pair does not accept (cast_round_mode_legal()).
struct VecCast {
  ir::DType dst_dtype, src_dtype;
  RoundMode round = RoundMode::Rint;
  VecOperand dst, src;
  ir::Expr rows, cols;
};
// Duplicate: every element of dst = value. window: a staged window's check (WindowCheck; the zero
// fill of a checked copy's tail), carried to the Duplicate calls.
struct VecDup {
  ir::DType dtype;
  VecOperand dst;
  ir::Expr value;
  ir::Expr rows, cols;
  WindowCheck window;
};
// Index: dst[r][c] = first + r * cols + c (the row-major position; an iota). dtype int32, float32
// or float16. AscendC: CreateVecIndex (select_vector_calls.h): one level-2 call over contiguous
// rows (one row, or row_stride == cols), else one per row.
struct VecIndex {
  ir::DType dtype;
  VecOperand dst;
  ir::Expr first;
  ir::Expr rows, cols;
};
// Row: dst[r] = reduce_c src[r][c] (dst contiguous, rows elements);
// Col: dst[c] = reduce_r src[r][c] (dst contiguous, cols elements). Max/Min are exact. Sum follows
// the AscendC calls (select_vector_calls.h): Row sums each 256 B chunk of a row with
// WholeReduceSum's pairwise tree, then the chunk sums with the same tree; Col adds row after row
// in dtype (Add).
struct VecReduce {
  ReduceOp op;
  ReduceAxis axis;
  ir::DType dtype;
  VecOperand dst, src;
  ir::Expr rows, cols;
};
// dst[r][c] = a[r][c] op vec[r] (vec: one element per row, contiguous). AscendC: Brcb + a level-0
// binary call with block stride 0 (select_vector_calls.h).
struct VecRowBroadcast {
  VecBinOp op;
  ir::DType dtype;
  VecOperand dst, a;
  LocalRef vec;
  ir::Expr rows, cols;
};
// The comparison of Compare / CompareScalar (AscendC CMPMODE). A comparison with NaN is false
// (NE: true), as in IEEE 754.
enum class CmpMode : uint8_t { LT, GT, EQ, LE, GE, NE };
std::string_view cmp_mode_name(CmpMode m);  // "LT" "GT" "EQ" "LE" "GE" "NE"
// dst[r][c] = (a[r][c] cmp b[r][c]) ? x[r][c] : y[r][c]: a data-dependent select. a and b are
// cmp_dtype (b a scalar when b.at.buffer < 0: b_scalar), x, y and dst are dtype (y a scalar when
// y.at.buffer < 0: y_scalar); both dtypes float16 or float32. AscendC: Compare / CompareScalar into
// a uint8 bit mask (a UB scratch area), then Select (select_vector_calls.h).
struct VecSelect {
  CmpMode cmp;
  ir::DType cmp_dtype, dtype;
  VecOperand dst, a, b, x, y;
  ir::Expr b_scalar, y_scalar;
  ir::Expr rows, cols;
};

// Call-level vector instructions (pipe V). select_vector_calls replaces every high-level vector
// instruction above with these; each is exactly one AscendC call whose arguments are its fields,
// in the API's own units (elements, 32 B blocks), so the printer prints it 1:1 and the simulator
// executes the fields. The high-level kinds never reach the printer or the simulator.
//
// Level-0 addressing (every operand, in its own element size es, epb = 32 / es elements per
// block): element e (0 <= e < mask) of repeat i (0 <= i < repeat) is at
//   base + i * rep_stride * 32 B + (e / epb) * blk_stride * 32 B + (e % epb) * es.
// mask is the count form (the first `mask` elements of each repeat; 1 .. 256 B / max es);
// repeat (repeatTimes) and the block / repeat strides are uint8 (0 .. 255). A constant field out
// of range is a compile-time error of select_vector_calls; a run-time one an `API rule` report.

// The elementwise AscendC APIs. Binary: Add Sub Mul Div Max Min (dst, src0, src1). Scalar: Adds
// Muls Maxs Mins (dst, src0, scalar converted to dtype). Unary: Exp Ln Sqrt Rsqrt Abs Relu
// Reciprocal (dst, src0). Cast (dst, src0, round; dtype = destination, src_dtype = source).
// Duplicate (dst, scalar). ShiftLeft ShiftRight (dst, src0, scalar count of the element type).
//
// Compare(dst, src0, src1, cmp, ...) and CompareScalar(dst, src0, scalar, cmp, ...) (level-0 only:
// the level-2 form needs 256 B multiples): dtype = src_dtype = the compared type (half/float); dst
// is a uint8 bit mask written contiguously (the destination strides are not used): bit e % 8 of
// byte e / 8 holds element e's result, repeat i's 256 B / es bits start at byte i * 256 / es / 8,
// and the bits of elements past `mask` in a repeat are written 0. Select(dst, sel, src0, src1 or
// scalar, count) (level-2 only): dst[e] = bit e of sel ? src0[e] : src1[e] (Select,
// SELMODE::VSEL_TENSOR_TENSOR_MODE) or the scalar (SelectScalar, printed as Select with
// SELMODE::VSEL_TENSOR_SCALAR_MODE); half/float.
// CreateVecIndex(dst, firstValue, count) (level-2 only here): dst[e] = firstValue + e for the first
// count elements; int16/half/int32/float on Atlas A2, dst 32 B aligned (CreateVecIndex.md).
enum class VecApi : uint8_t {
  Add, Sub, Mul, Div, Max, Min, Adds, Muls, Maxs, Mins,
  Exp, Ln, Sqrt, Rsqrt, Abs, Relu, Reciprocal, Cast, Duplicate, ShiftLeft, ShiftRight,
  Compare, CompareScalar, Select, SelectScalar, CreateVecIndex, And, Or
};
inline constexpr int kVecApiCount = 28;
// The bytes of one lane of a call: its dtype's, except And / Or, which AscendC offers on
// int16_t/uint16_t only (And.md, Or.md, Atlas A2): their dtype names the operand buffers' type
// (int32), their count / mask / block and repeat strides count 16-bit lanes (two per int32
// element: the bitwise result is the same), and they print as And<int16_t> on ReinterpretCast<int16_t>()
// views of every operand.
int vec_api_lane_bytes(VecApi a, ir::DType t);
std::string_view vec_api_name(VecApi a);  // the AscendC function name
// The operand class of an API: 2 = binary, 1 = one source (scalar, unary, Cast), 0 = Duplicate.
int vec_api_sources(VecApi a);
bool vec_api_has_scalar(VecApi a);  // Adds/Muls/Maxs/Mins/Duplicate/ShiftLeft/ShiftRight/CreateVecIndex
// The type the call's scalar is converted to, printed `static_cast<T>(scalar)`: the compared type for
// CompareScalar, else dtype. The simulator converts the scalar's exact value as that cast does (an
// integer wraps modulo 2^bits: hunt32 F2), so both read it from here.
ir::DType vec_scalar_dtype(VecApi a, ir::DType dtype, ir::DType src_dtype);
// Select in VSEL_TENSOR_TENSOR_MODE / VSEL_TENSOR_SCALAR_MODE (Select / SelectScalar) writes a temporary
// (the selMask address or the scalar, one Duplicate of 32 elements) into UB at TMP_UB_OFFSET = 184 KiB
// on dav-c220 and reads it back through set_cmpmask; Select.md asks for 8 KB of UB to be reserved
// (asc-devkit impl/basic_api/dav_c220/kernel_operator_vec_cmpsel_impl.h VselImpl,
// impl/basic_api/utils/kernel_utils_constants.h for __NPU_ARCH__ 2201). A program that selects keeps
// its UB buffers below it (the simulator's API rule; session 31, h-audit31).
inline constexpr int64_t kSelectTmpUbOffset = 184 * 1024, kSelectTmpUbBytes = 8 * 1024;

// Level-2 (counter mode): the first `count` elements of every operand, contiguous.
//   Add(dst, src0, src1, count); Adds(dst, src0, static_cast<T>(scalar), count);
//   Exp(dst, src0, count); Cast(dst, src0, RoundMode::R, count); Duplicate(dst, scalar, count).
// count is AscendC's `const int32_t& count` (1 .. 2^31-1; a call is only issued for count >= 1).
struct VecCallL2 {
  VecApi api;
  ir::DType dtype, src_dtype;  // src_dtype differs from dtype only for Cast
  LocalRef dst, src0, src1;    // unused sources have buffer -1
  ir::Expr scalar;             // Scalar APIs and Duplicate
  RoundMode round = RoundMode::None;
  ir::Expr count;
  CmpMode cmp = CmpMode::LT;  // Compare / CompareScalar
  LocalRef sel;               // Select / SelectScalar: the bit mask (buffer -1 otherwise)
  WindowCheck window;         // Duplicate: VecDup's (checker metadata, not printed)
};
// Level-0 (mask / repeat) form: Add(dst, src0, src1, mask, repeat, BinaryRepeatParams(dst_blk,
// src0_blk, src1_blk, dst_rep, src0_rep, src1_rep)); Adds/Exp/Cast(..., mask, repeat,
// UnaryRepeatParams(dst_blk, src0_blk, dst_rep, src0_rep)); Duplicate(dst, scalar, mask, repeat,
// dst_blk, dst_rep). Semantics: the level-0 addressing above, op applied element by element.
struct VecCallL0 {
  VecApi api;
  ir::DType dtype, src_dtype;
  LocalRef dst, src0, src1;
  ir::Expr scalar;
  RoundMode round = RoundMode::None;
  ir::Expr mask, repeat;
  ir::Expr dst_blk, src0_blk, src1_blk;  // 32 B blocks (uint8)
  ir::Expr dst_rep, src0_rep, src1_rep;  // 32 B blocks (uint8)
  CmpMode cmp = CmpMode::LT;             // Compare / CompareScalar
  WindowCheck window;                    // Duplicate: VecDup's (checker metadata, not printed)
};
// WholeReduceSum/Max/Min(dst, src, mask, repeat, dst_rep, src_blk, src_rep[, ORDER_ONLY_VALUE for
// Max/Min]): repeat i reduces its first `mask` source elements (level-0 addressing) to one value
// written at dst + i * dst_rep elements (dst_rep counts destination elements, as the API's
// dstRepStride does for ORDER_ONLY_VALUE). Sum is a pairwise tree: adjacent pairs level by level,
// every partial sum rounded to dtype (fp16 saturates at +-65504); Max/Min are exact. f16/f32.
struct WholeReduce {
  ReduceOp op;
  ir::DType dtype;
  LocalRef dst, src;
  ir::Expr mask, repeat, dst_rep, src_blk, src_rep;
};
// Brcb(dst, src, repeat, BrcbRepeatParams(dst_blk, dst_rep)): repeat i reads the 8 elements
// src[i*8 .. i*8+7] and fills the j-th destination block (at dst + i * dst_rep * 32 B + j *
// dst_blk * 32 B) with element j. 16- and 32-bit types.
struct Brcb {
  ir::DType dtype;
  LocalRef dst, src;
  ir::Expr repeat, dst_blk, dst_rep;
};

// V. Gather(dst, src, srcOffset, srcBaseAddr, count) (AscendC Gather, the "first count elements"
// form; asc-devkit docs 离散与聚合/Gather.md and impl/basic_api/dav_c220/kernel_operator_vec_gather_impl.h,
// /work/shared/ascendc-api-facts.md "Gather"): dst[e] = the element of src at byte srcBaseAddr +
// srcOffset[e], for e < count; srcOffset is a uint32 tensor of byte offsets (`offset`, in UB).
// dtype: int16, uint16, half, bfloat16, int32, uint32, float (dav-c220 has no 8-bit form). dst,
// src and srcOffset start on 32 B; dst must not overlap src; every offset (and srcBaseAddr) is a
// multiple of the element size. The interface issues count / (256 B / es) full repeats as a uint8
// and one masked repeat for the rest, so count < 256 * 256 / es. count 0 is no operation.
// src_elems is not an API field but a fact of the program: the elements from src the kernel may
// read (the tile row its index addresses). An address outside them is reported by the simulator
// at the kernel's line (the device would read whatever the UB holds there).
struct Gather {
  ir::DType dtype;
  LocalRef dst, src, offset;
  ir::Expr base, count, src_elems;
};

// Scalar unit -------------------------------------------------------------------------------


// S. `T var = src.GetValue(offset / sizeof(T))` (AscendC GlobalTensor::GetValue, __inout_pipe__(S)):
// the core's scalar unit reads one element of a GM tensor through its DataCache (64 B lines) and
// binds it to `var`, visible in the rest of the enclosing Seq (like a Let). It runs in program order
// on the scalar unit, so later offsets, counts, bounds and conditions may use `var`. The DataCache
// is not coherent with DMA: a scalar read of GM bytes any core's DMA wrote earlier in the same run
// needs DataCacheCleanAndInvalid first; the programs read only tensors the kernel never writes
// (select_instructions rejects the rest) and the simulator reports a read of written bytes.
// `src.offset` is in bytes and a multiple of the element size. dtype: an integer or float type.
// With `ub.buffer >= 0` it reads UB instead: `T var = ub.GetValue(offset / sizeof(T))` (AscendC
// LocalTensor::GetValue, __inout_pipe__(S), index in elements; TPosition VECIN/VECCALC/VECOUT:
// asc-devkit docs/api/context/LocalTensor简介.md). UB has no DataCache, but the scalar unit runs
// beside the V/MTE pipes: bytes an MTE2 or V instruction wrote need SetFlag/WaitFlag<X_S> before
// the read (insert_sync places them; the simulator's race checker reports a missing one).
struct ScalarLoad {
  ir::Var var;
  GmRef src;  // unused (param -1, no offset) when ub.buffer >= 0
  ir::DType dtype;
  LocalRef ub;
  // UB: the end (bytes from the buffer's start) of the tile's last element; the simulator reports an
  // element past it (inside the allocation's 32 B padding) as out of bounds. 0: the buffer's size.
  int64_t tile_end = 0;
  std::vector<DimIndex> dims;  // the tensor's or tile's indices, each against its dimension (2-D and more)
};
// S. `dst.SetValue(offset / sizeof(T), (T)value)` (AscendC LocalTensor::SetValue, __inout_pipe__(S),
// index in elements; CANN 9.0 API doc atlasascendc_api_07_00102): the scalar unit writes one
// element of a UB buffer. Later V/MTE3 readers need SetFlag/WaitFlag<S_X> after it, and earlier
// V/MTE readers or writers of those bytes need <X_S> before it (insert_sync; the checker reports a
// missing one). The docs warn it is slow in bulk: the lowering uses it for single elements and
// scalar-unit element loops only. dtype: a 16- or 32-bit float or an integer type.
struct ScalarStore {
  LocalRef dst;
  ir::Expr value;
  ir::DType dtype;
  int64_t tile_end = 0;         // as ScalarLoad's
  std::vector<DimIndex> dims;  // as ScalarLoad's
};

// S. The core's atomic mode for copies into GM (AscendC kernel_operator_set_atomic_intf.h):
// `add` set: SetAtomicAdd<add>(): every later copy into GM (DataCopyPad UB -> GM, Fixpipe L0C -> GM)
// adds its elements into GM, the sum rounded to `add`, each element's add atomic with respect to
// the other cores (A2 dtypes int8/int16/half/bfloat16/int32/float); unset: SetAtomicNone() ends
// the mode. A scalar-unit register write: the mode travels with each copy issued after it, in
// program order (docs/ascend.md "Atomic add"). select_move_calls brackets every copy marked
// `atomic` with the pair; the simulator reports a copy whose `atomic` mark disagrees with the mode
// it is issued under, and a block that ends with the mode on (it stays on for the core's next block).
struct SetAtomic {
  std::optional<ir::DType> add;
};
// The dtypes SetAtomicAdd<T> has on the 910B (Atlas A2): int8, int16, half, bfloat16, int32, float
// (the IR has no int16).
bool atomic_add_dtype(ir::DType t);

// Synchronisation ---------------------------------------------------------------------------

// SetFlag<HardEvent::SRC_DST>(event) / WaitFlag<HardEvent::SRC_DST>(event). Event ids 0..7.
// SetFlag runs on `src`, WaitFlag on `dst`.
struct SetFlag {
  Pipe src, dst;
  ir::Expr event;
};
struct WaitFlag {
  Pipe src, dst;
  ir::Expr event;
};
// PipeBarrier<PIPE_X>(); X may be ALL.
struct PipeBarrier {
  Pipe pipe;
};
// CrossCoreSetFlag<mode, pipe>(id): once earlier instructions of `pipe` finished, increments
// the counter `id` (0..10 on the 910B) of the target cores. mode 0: all cores of the same type (fires when
// every one has set); 1: the two AIVs of one AI Core (fires when both have set); 2: AIC -> its
// two AIVs, or AIV -> its AIC (fires when both AIVs have set).
struct CrossCoreSetFlag {
  int mode = 2;
  Pipe pipe = Pipe::FIX;
  ir::Expr id;
};
// CrossCoreWaitFlag(id): `pipe` blocks until the counter is > 0, then decrements it. With
// pipe S the scalar unit blocks (every later instruction of the core waits).
struct CrossCoreWaitFlag {
  ir::Expr id;
  Pipe pipe = Pipe::S;
  // The modeId AscendC's CrossCoreWaitFlag<modeId, pipe> names: chosen by resolve_cross_waits
  // (unset before it; the simulator does not use it).
  std::optional<int> mode;
};

using InstrOp = std::variant<CopyGmToL1, CopyGmToUb, CopyUbToGm, CopyUbToUb, LoadL0, Mmad, Fixpipe,
                             InitConstValue, DataCopyNd2Nz, DataCopyPadGmToUb, DataCopyPadUbToGm,
                             DataCopyUbToUb, LoadData2D, LoadData3DV2, FixpipeV220, FixpipeL1,
                             VecBinary, VecBinaryScalar, VecUnary, VecCast, VecDup, VecIndex, VecReduce,
                             VecRowBroadcast, VecSelect, VecCallL2, VecCallL0, WholeReduce, Brcb, Gather, ScalarLoad, ScalarStore, SetAtomic, SetFlag,
                             WaitFlag, PipeBarrier, CrossCoreSetFlag, CrossCoreWaitFlag>;

// The pipe an instruction is issued to (SetFlag: src, WaitFlag: dst, barrier: its pipe).
Pipe pipe_of(const InstrOp& op);
// Whether SetFlag/WaitFlag<src_dst> exists on a core of type t (ascend-910b.md "Synchronisation").
bool flag_pair_legal(CoreType t, Pipe src, Pipe dst);
// Cast round modes (AscendC Cast.md, table 4, dav-c220): the exact widening conversions
// (half/bfloat16 -> float, int8/uint8 -> half) accept only CAST_NONE (any other mode issues no
// instruction on the device). cast_round_mode gives the mode a plain conversion uses: CAST_NONE for
// those and int -> int, CAST_RINT into a float type, CAST_TRUNC float -> int.
bool cast_widening_exact(ir::DType dst, ir::DType src);
// The Cast pairs dav-c220 has (AscendC Cast, dav_c220 vconv_impl): float32 <-> float16 / bfloat16 /
// int32, float16 <-> int8 / uint8, float16 -> int32, bfloat16 -> int32 (int32 -> float16 is a
// dequantizing Cast scaled by SetDeqScale's register, not a conversion: not a pair here).
bool cast_pair_available(ir::DType dst, ir::DType src);
// The dtypes a conversion src -> dst steps through as Casts (the last one is dst; empty when
// src == dst): bfloat16 <-> float16 via float32; int8/uint8 -> float32/bfloat16/int32 via float16;
// float32 -> int8/uint8 via int32 (truncation), float32, float16; int32 -> float16 via float32.
// Every step is exact for the values the language defines the conversion on, so the result is
// rounded once. legalize_vector lowers conversions this way; expert mode names the chain.
std::vector<ir::DType> cast_chain(ir::DType dst, ir::DType src);
// A Cast int32_t -> half on dav-c220 is no conversion but a dequantization (Cast.md table 4: the
// round mode has no effect, used with SetDeqScale; dav_c220 vconv_impl issues vconv_deq): it
// multiplies by the DEQSCALE register, which Tilewright never sets. The conversion is the chain
// int32 -> float32 -> float16 (cast_chain); the simulator's API rules report the call.
bool cast_dequantizes(ir::DType dst, ir::DType src);
bool cast_round_mode_legal(ir::DType dst, ir::DType src, RoundMode m);
RoundMode cast_round_mode(ir::DType dst, ir::DType src);
std::string_view instr_name(const InstrOp& op);  // "CopyGmToL1", "Mmad", ...
// VecBinary .. VecSelect: the kinds select_vector_calls replaces (never printed or simulated).
bool is_high_level_vector(const InstrOp& op);
// Whether op is a byte-level move (CopyGmToL1, CopyGmToUb, CopyUbToGm, CopyUbToUb, LoadL0, Fixpipe)
// that select_move_calls replaces: the printer and the simulator accept only call-level moves.
bool is_byte_level_move(const InstrOp& op);

struct Instr {
  InstrOp op;
  ir::Span span;
  Pipe pipe() const { return pipe_of(op); }
};

// ---------------------------------------------------------------------------------------------
// Statements (the scalar unit's structured control flow)

enum class StmtKind : uint8_t { Seq, For, If, Let, Instr };

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;

// One node type, the fields used depend on kind:
//   Seq:   body
//   For:   var in [0, value), body[0]          (for (int32_t var = 0; var < value; ++var))
//   If:    value = condition, body[0] = then, else_body may be null
//   Let:   var = value, visible in the rest of the enclosing Seq
//   Instr: instr (a ScalarLoad binds its var like a Let)
struct Stmt {
  StmtKind kind = StmtKind::Seq;
  std::vector<StmtPtr> body;
  ir::Var var;
  ir::Expr value;
  StmtPtr else_body;
  Instr instr;
  ir::Span span;
};

StmtPtr seq(std::vector<StmtPtr> body, ir::Span span = {});
StmtPtr for_(ir::Var var, ir::Expr extent, StmtPtr body, ir::Span span = {});
StmtPtr if_(ir::Expr cond, StmtPtr then_body, StmtPtr else_body = nullptr, ir::Span span = {});
StmtPtr let(ir::Var var, ir::Expr value, ir::Span span = {});
StmtPtr instr(InstrOp op, ir::Span span = {});

// ---------------------------------------------------------------------------------------------
// Program

struct Program {
  std::string name;
  KernelType kernel_type = KernelType::MIX_1_2;
  std::vector<KernelParam> params;
  std::vector<ir::Var> shape_vars;   // bound from the tensor arguments' shapes
  ir::Expr block_dim;                // number of blocks (AI Cores; AIVs for AIV_ONLY)
  ir::Expr workspace_bytes;          // GM workspace size (may be 0 / null)
  std::vector<BufferDecl> buffers;   // AIC and AIV buffers, statically placed
  ir::Var block_idx;                 // int32, both codes
  ir::Var sub_block_idx;             // int32, AIV code only
  StmtPtr aic;                       // null for AIV_ONLY
  StmtPtr aiv;                       // null for AIC_ONLY
  // Bytes of each core type's pool per on-chip memory (pool_bytes[core][mem]; 0: no pool): the one
  // TBuf a core's buffers of that memory are placed in. plan_memory sets it (every planned buffer's
  // end, rounded up to 32 B) and select_vector_calls grows the UB pool by its scratch area;
  // verify_program checks it covers every buffer once set. The AscendC printer prints it as InitBuffer's size.
  std::array<std::array<int64_t, kNumMems>, 2> pool_bytes{};
  ir::Span span;                     // the kernel's def line
  // AscendC's TPipe constructor sets M_MTE1 events 0, 1, 2 on the AIC and its destructor waits
  // for them (kernel_tpipe_impl.h). true: the AIC code calls pipe.Destroy() right after its
  // InitBuffer calls, which waits for them before any instruction, so every event id is free.
  // false (tests only): the events stay set until the kernel ends; the simulator models both.
  bool tpipe_destroy = true;
  // What the compiler chose in place of what the kernel asked, each at its source line (a
  // T.Pipelined loop run with fewer stages than num_stages: lower_ascend). The runtime shows them
  // as warnings; the AscendC printer prints them in the kernel's header comment.
  struct Note {
    std::string message;
    ir::Span span;
  };
  std::vector<Note> notes;
  // The integer `//`, `%` and ceildiv nodes the printed C++ computes with C's truncating `/` and `%`
  // (ceildiv as `(a + b - 1) / b`): widen_scalars marks those whose divisor is a positive constant and
  // whose dividend it proves non-negative, where truncation and the language's floor agree. The
  // AscendC printer prints exactly these infix (the rest through tw_floordiv / tw_floormod /
  // tw_ceildiv, in int64_t); the simulator reports one whose dividend is negative when it runs (the
  // proof failed) and checks the int32 ones as int arithmetic (session 31, h-i32b). Keyed by node;
  // the value keeps the node alive. Empty in a program no widen_scalars ran on: helpers everywhere.
  std::unordered_map<const ir::ExprNode*, ir::Expr> c_divisions;
  bool c_division(const ir::ExprNode* e) const { return c_divisions.count(e) > 0; }

  int find_buffer(std::string_view name) const;  // -1 if none
  int64_t& pool(CoreType c, Mem m) { return pool_bytes[static_cast<int>(c)][static_cast<int>(m)]; }
  int64_t pool(CoreType c, Mem m) const { return pool_bytes[static_cast<int>(c)][static_cast<int>(m)]; }
};

// Element size helpers.
inline int c0_of(ir::DType t) { return 32 / t.bytes(); }

}  // namespace tw::ascend
