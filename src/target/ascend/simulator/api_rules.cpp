#include "target/ascend/simulator/api_rules.h"

#include <algorithm>
#include <variant>

namespace tw::ascend::sim {

namespace {

std::string dtn(ir::DTypeCode t) { return std::string(ir::DType(t).name()); }
std::string str(int64_t v) { return std::to_string(v); }

constexpr int64_t kU16 = 65535, kU32 = 4294967295LL;

// A field of a call: a value outside [lo, hi] (its width or documented range) would be truncated.
void fits(std::vector<std::string>& out, const char* params, const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    out.push_back(std::string(params) + "." + field + " = " + str(v) + " is outside " + str(lo) + ".." + str(hi) +
                  " (the field's range): the call would truncate it");
}

// A uint8 field of a vector call (repeatTimes, block and repeat strides): 0..255.
void u8(const std::string& call, const char* field, int64_t v, std::vector<std::string>& out) {
  if (v < 0 || v > 255)
    out.push_back(call + " " + field + " = " + str(v) + ": the field is uint8 (0..255) and would wrap: " +
                  (std::string(field).find("Stride") != std::string::npos
                       ? "use rows of at most 8160 B (255 blocks of 32 B) or a tile whose rows are contiguous"
                       : "split the call (at most 255 repeats)"));
}
// mask (count form): 1 .. the elements of one 256 B repeat of the widest operand type.
void mask_rule(const std::string& call, int64_t mask, int es, std::vector<std::string>& out) {
  if (mask < 1 || mask > 256 / es)
    out.push_back(call + " mask = " + str(mask) + ": a level-0 mask selects 1.." + str(256 / es) + " elements (one 256 B "
                  "repeat): split the columns over several calls");
}
bool float_type(ir::DTypeCode t) { return t == ir::DTypeCode::f16 || t == ir::DTypeCode::f32; }

void vec_call_rules(const RVecCall& x, std::vector<std::string>& out) {
  std::string call = std::string(vec_api_name(x.api)) + (x.l0 ? " (level-0)" : " (level-2)");
  if (x.api == VecApi::Cast && !cast_round_mode_legal(x.dt, x.src_dt, x.round))
    out.push_back("Cast from " + dtn(x.src_dt) + " to " + dtn(x.dt) + " with RoundMode::" +
                  std::string(round_mode_name(x.round)) + ": this conversion accepts only CAST_NONE (Cast.md, table 4); "
                  "on dav-c220 any other mode issues no instruction and the destination keeps stale data: lower it "
                  "with cast_round_mode()");
  if (x.api == VecApi::Cast && cast_dequantizes(x.dt, x.src_dt))
    out.push_back("Cast from " + dtn(x.src_dt) + " to " + dtn(x.dt) + ": on dav-c220 this is vconv_deq, a "
                  "dequantization that multiplies by the DEQSCALE register (Cast.md, table 4: the round mode has no "
                  "effect, used with SetDeqScale), which the program never sets (the simulator models no scale): "
                  "convert through float32 (cast_chain)");
  // dav_c220 vconv_impl: half -> int32_t and float -> int32_t have no CAST_NONE form (an assert on the
  // device, nothing issued); the lowering truncates (cast_round_mode)
  if (x.api == VecApi::Cast && x.dt == ir::DTypeCode::i32 && float_type(x.src_dt) && x.round == RoundMode::None)
    out.push_back("Cast from " + dtn(x.src_dt) + " to int32 with RoundMode::CAST_NONE: this conversion has no "
                  "CAST_NONE form on dav-c220 (dav_c220 vconv_impl: an assert, nothing is issued): pick a rounding mode "
                  "(cast_round_mode: CAST_TRUNC)");
  // ascend-910b.md "Vector": no bfloat16 arithmetic on the AIV (and none on 8-bit types: their calls
  // are Cast and, for bfloat16, Duplicate); Duplicate has no 8-bit form on dav-c220 (session 15's
  // rule audit: the per-call dtype was not checked for these)
  bool arith = (x.api <= VecApi::Mins && x.api != VecApi::Div) || x.api == VecApi::Abs || x.api == VecApi::Relu;
  bool byte = x.dt == ir::DTypeCode::i8 || x.dt == ir::DTypeCode::u8;
  if ((arith && (byte || x.dt == ir::DTypeCode::bf16)) || (x.api == VecApi::Duplicate && byte))
    out.push_back(call + " on " + dtn(x.dt) + ": the Vector core has no " + dtn(x.dt) + " form of this call "
                  "(no bfloat16 or 8-bit arithmetic, no 8-bit Duplicate): compute in float32 (or float16) and cast");
  // no vector call of the Vector core takes 64-bit lanes (Duplicate.md, Atlas A2: int16_t, uint16_t, half,
  // bfloat16_t, int32_t, uint32_t, float; the arithmetic calls: half / float / int16 / int32): an int64 tile's
  // copy from a tensor is zeroed as int32 pairs (select_instructions' zero_tile; session 33, h-labels33)
  if (ir::DType(x.dt).bytes() == 8)
    out.push_back(call + " on " + dtn(x.dt) + ": the Vector core has no 64-bit form of any vector call (Duplicate's "
                  "widest lanes are int32_t / uint32_t / float): zero or fill 64-bit data as int32 pairs, compute in "
                  "int32 / float32");
  bool transcendental = x.api == VecApi::Div || (x.api >= VecApi::Exp && x.api <= VecApi::Rsqrt) ||
                        x.api == VecApi::Reciprocal;
  if (transcendental && !float_type(x.dt))
    out.push_back(call + " on " + dtn(x.dt) + ": the API takes half or float only: cast to float32 first");
  // Abs.md (Atlas A2): half / float only (the level-2 form's int32 check is a debug assert: on the
  // device it issues vabs on int32 data); 8-bit and bfloat16 are reported above
  if (x.api == VecApi::Abs && x.dt == ir::DTypeCode::i32)
    out.push_back(call + " on int32: the API takes half or float only: compute |x| as Max(x, Muls(x, -1))");
  if (x.api == VecApi::ShiftLeft || x.api == VecApi::ShiftRight) {
    // ShiftLeft.md / ShiftRight.md (Atlas A2): int16_t/uint16_t/int32_t/uint32_t, a scalar count of
    // the element type; a count outside 0 .. bits-1 is not documented (the compiler masks it)
    if (x.dt != ir::DTypeCode::i32)
      out.push_back(call + " on " + dtn(x.dt) + ": the API takes int16/uint16/int32/uint32 only (of the language's "
                    "types int32): convert first");
    else if (x.scalar < 0 || x.scalar > 31)
      out.push_back(call + " by " + str(static_cast<int64_t>(x.scalar)) + ": the documented counts are 0..31 for "
                    "int32 (the language takes the count modulo 32)");
  }
  if (x.api == VecApi::CreateVecIndex) {
    // CreateVecIndex.md (Atlas A2): int16_t/half/int32_t/float, dst 32 B aligned
    if (x.dt != ir::DTypeCode::i32 && !float_type(x.dt))
      out.push_back(call + " on " + dtn(x.dt) + ": the API takes int16/half/int32/float only");
    if (x.l0) out.push_back(call + ": only the level-2 (count) form is modelled");
    if (x.dst.off % 32 != 0)
      out.push_back(call + " writes at byte " + str(x.dst.off) + " of its buffer: dst must start 32 B aligned");
  }
  // And.md / Or.md (Atlas A2): int16_t/uint16_t only; the calls lowering makes work on the 16-bit lanes of
  // int32 buffers (program.h vec_api_lane_bytes), so their dtype is int32
  if ((x.api == VecApi::And || x.api == VecApi::Or) && (x.dt != ir::DTypeCode::i32 || x.src_dt != ir::DTypeCode::i32))
    out.push_back(call + " on " + dtn(x.dt) + ": the API takes int16_t/uint16_t lanes; Tilewright issues it on the int16 "
                  "view of int32 tiles only");
  bool compare = x.api == VecApi::Compare || x.api == VecApi::CompareScalar;
  bool select = x.api == VecApi::Select || x.api == VecApi::SelectScalar;
  if ((compare || select) && !float_type(x.dt))
    out.push_back(call + " on " + dtn(x.dt) + ": on Atlas A2 the API takes half or float only: compare / select in "
                  "float32 (or float16)");
  if (compare && !x.l0)
    out.push_back(call + ": the level-2 (count) form needs count * element size to be a multiple of 256 B: issue the "
                  "level-0 form (mask / repeat)");
  if (select && x.l0) out.push_back(call + ": only the level-2 (count) form with a tensor mask is modelled");
  if (select && x.sel.off % 32 != 0)
    out.push_back(call + " reads its bit mask at byte " + str(x.sel.off) + " of its buffer: selMask must start 32 B "
                  "aligned");
  if (compare && x.dst.off % 32 != 0)
    out.push_back(call + " writes its bit mask at byte " + str(x.dst.off) + " of its buffer: dst must start 32 B aligned");
  if (!x.l0) {
    if (x.mask < 1)
      out.push_back(call + " with count " + str(x.mask) + ": a call must process at least one element (a count <= 0 "
                    "is no call: guard it with `if (count > 0)`)");
    return;
  }
  mask_rule(call, x.mask, std::max(vec_api_lane_bytes(x.api, x.dt), vec_api_lane_bytes(x.api, x.src_dt)), out);
  u8(call, "repeatTimes", x.repeat, out);
  static const char* blk[] = {"dstBlkStride", "src0BlkStride", "src1BlkStride"};
  static const char* rep[] = {"dstRepStride", "src0RepStride", "src1RepStride"};
  for (int k = 0; k <= vec_api_sources(x.api); ++k) {
    u8(call, blk[k], x.blk[k], out);
    u8(call, rep[k], x.rep[k], out);
  }
}

void whole_reduce_rules(const RWholeReduce& x, std::vector<std::string>& out) {
  std::string call = "WholeReduce" + std::string(reduce_op_name(x.op));
  if (!float_type(x.dt)) out.push_back(call + " on " + dtn(x.dt) + ": the API takes half or float only");
  mask_rule(call, x.mask, ir::DType(x.dt).bytes(), out);
  // (buffers start 32 B aligned: the offset inside the buffer decides)
  if (x.op != ReduceOp::Sum && x.dt == ir::DTypeCode::f32 && x.dst.off % 8 != 0)
    out.push_back(call + " on float writes its destination at byte " + str(x.dst.off) + " of its buffer: the API needs an "
                  "8-byte aligned destination (WholeReduceMax.md): start the call on an even element");
  u8(call, "repeatTimes", x.repeat, out);
  u8(call, "dstRepStride", x.dst_rep, out);
  u8(call, "srcBlkStride", x.src_blk, out);
  u8(call, "srcRepStride", x.src_rep, out);
}

void brcb_rules(const RBrcb& x, std::vector<std::string>& out) {
  u8("Brcb", "repeatTimes", x.repeat, out);
  u8("Brcb", "dstBlkStride", x.dst_blk, out);
  u8("Brcb", "dstRepStride", x.dst_rep, out);
  // Brcb.md (Atlas A2, 约束说明): dstBlkStride 0 is undefined behaviour; the source and the
  // destination may not share memory (session 31 rule audit)
  if (x.dst_blk == 0)
    out.push_back("Brcb with BrcbRepeatParams.dstBlkStride = 0: undefined on the device (Brcb.md): use 1 (each source "
                  "element fills its own 32 B block)");
  if (x.repeat > 0 && !x.src.gm && x.src.index == x.dst.index && x.src.index >= 0) {
    const int64_t src_end = x.src.off + x.repeat * 8 * ir::DType(x.dt).bytes();
    const int64_t dst_end = x.dst.off + ((x.repeat - 1) * x.dst_rep + 7 * x.dst_blk + 1) * 32;
    if (x.src.off < dst_end && x.dst.off < src_end)
      out.push_back("Brcb reads bytes " + str(x.src.off) + ".." + str(src_end - 1) + " and writes bytes " + str(x.dst.off) +
                    ".." + str(dst_end - 1) + " of the same buffer: the API does not take a source and destination that "
                    "share memory (Brcb.md): broadcast from a separate buffer");
  }
}

}  // namespace

void check_api_rules(const RInstr& r, ApiRuleState& st, std::vector<std::string>& out) {
  std::visit(
      Overload{
          [&](const RInitConst& x) {
            if (ir::DType(x.dt).bytes() == 1)
              out.push_back("InitConstValue<" + dtn(x.dt) + ">: dav-c220 has no 8-bit InitConstValue (a silent no-op; docs "
                            "list half, int16, uint16, bfloat16, float, int32, uint32): zero the tile through a 16-bit "
                            "ReinterpretCast (fill_dtype float16)");
            else if (x.dt != ir::DTypeCode::f16 && x.dt != ir::DTypeCode::bf16 && x.dt != ir::DTypeCode::f32 &&
                     x.dt != ir::DTypeCode::i32)
              out.push_back("InitConstValue<" + dtn(x.dt) + "> does not exist (half, int16, uint16, bfloat16, float, int32, uint32)");
            fits(out, "InitConstValueParams", "repeatTimes", x.repeat, 0, kU16);
            fits(out, "InitConstValueParams", "blockNum", x.blocks, 0, kU16);
            fits(out, "InitConstValueParams", "dstGap", x.gap, 0, kU16);
          },
          [&](const RNd2Nz& x) {
            const char* s = "Nd2NzParams";
            // 0 in ndNum, nValue or dValue is documented (CANN 8.5 and 2026 docs): the call does nothing
            fits(out, s, "ndNum", x.nd_num, 0, 4095);
            fits(out, s, "nValue", x.n, 0, 16384);
            fits(out, s, "dValue", x.d, 0, kU16);
            fits(out, s, "srcNdMatrixStride", x.src_nd_stride, 0, kU16);
            if (x.src_d < 0 || x.src_d > kU16)
              out.push_back("Nd2NzParams.srcDValue = " + str(x.src_d) +
                            ": the GM row stride is a uint16 (at most 65535 elements) and would be truncated; "
                            "use a tensor whose rows are shorter (e.g. store B transposed) or split the matrix");
            fits(out, s, "dstNzC0Stride", x.c0_stride, 0, kU16);
            fits(out, s, "dstNzNStride", x.n_stride, 0, kU16);
            fits(out, s, "dstNzMatrixStride", x.nz_matrix_stride, 0, kU16);
          },
          [&](const RDataCopy& x) {
            bool ub_ub = x.kind == RDataCopy::UbToUb;
            const char* call = ub_ub ? "DataCopy(UB, UB, DataCopyParams)" : "DataCopyPad";
            const char* s = ub_ub ? "DataCopyParams" : "DataCopyExtParams";
            // DataCopyPad: blockCount 0..4095 and blockLen 0..2097151, a 0 in either a NOP (the CANN 8.5
            // library's range checks, the 2026 docs for A2/A3); DataCopy(UB, UB): blockCount 1..4095
            if (x.count < (ub_ub ? 1 : 0) || x.count > 4095)
              out.push_back(std::string(call) + " with blockCount " + str(x.count) + ": the count of bursts is " +
                            (ub_ub ? "1" : "0") + "..4095 (the field is uint16)" +
                            (x.count < 0   ? ": a negative row count would wrap: do not issue the call (guard it)"
                             : x.count < 1 ? ": an empty row count must not issue the call (guard it)"
                                           : ": copy at most 4095 rows per call"));
            fits(out, s, "blockLen", x.len, 0, ub_ub ? kU16 : 2097151);
            int64_t wide = ub_ub ? kU16 : kU32;
            // The gaps between bursts are unsigned: a stride shorter than the burst would wrap.
            if (x.count > 1 && (x.src_stride < 0 || x.dst_stride < 0))
              out.push_back(std::string(call) + " with " + s + "." + (x.src_stride < 0 ? "srcStride = " + str(x.src_stride)
                                                                                       : "dstStride = " + str(x.dst_stride)) +
                            ": the gap field is unsigned and would wrap; rows must not overlap");
            else if (x.count > 1) {
              fits(out, s, "srcStride", x.src_stride, 0, wide);
              fits(out, s, "dstStride", x.dst_stride, 0, wide);
            }
            if (x.kind == RDataCopy::GmToUb) {
              int es = ir::DType(x.dt).bytes();
              if (x.left < 0 || x.left * es > 32 || x.right < 0 || x.right * es > 32)
                out.push_back("DataCopyPadExtParams leftPadding = " + str(x.left) + ", rightPadding = " + str(x.right) +
                              " elements: each is at most 32 B of padding (uint8)");
            }
          },
          [&](const RLoad2D& x) {
            const char* s = "LoadData2DParams";
            fits(out, s, "startIndex", x.start, 0, kU16);
            fits(out, s, "repeatTimes", x.repeat, 0, 255);
            fits(out, s, "srcStride", x.src_stride, 0, kU16);
            fits(out, s, "dstGap", x.dst_gap, 0, kU16);
            if (x.sid != 0) out.push_back("LoadData2DParams.sid = " + str(x.sid) + ": the field is reserved, set it to 0");
            if (x.transpose && x.dt != ir::DTypeCode::f16)  // the program has no 16-bit integer dtype
              out.push_back("LoadData with ifTranspose on " + dtn(x.dt) + ": the transposing load is documented for "
                            "uint16_t, int16_t and half only (Load2D.md): transpose 16-bit data through a half view");
          },
          [&](const RLoad3D& x) {
            const char* s = "LoadData3DParamsV2";
            fits(out, s, "l1H", x.l1h, 0, kU16);
            fits(out, s, "l1W", x.l1w, 0, kU16);
            fits(out, s, "channelSize", x.channels, 0, kU16);
            fits(out, s, "kExtension", x.kext, 0, kU16);
            fits(out, s, "mExtension", x.mext, 0, kU16);
            fits(out, s, "kStartPt", x.kstart, 0, kU16);
            fits(out, s, "mStartPt", x.mstart, 0, kU16);
          },
          [&](const RFixpipe& x) {
            // NZ2ND (CFG_ROW_MAJOR): nSize 1..4095, mSize 1..8192 (CANN 8.5 Fixpipe docs; a 0 is a NOP
            // only in the 2026 docs)
            const char* s = "FixpipeParamsV220";
            if (x.nz) {  // L0C -> L1 (CFG_NZ): dav_c220 fixpipe_v2_impl.h CheckFixpipeL0C2L1Param
              if (x.n < 16 || x.n > 4095 || x.n % 16)
                out.push_back("Fixpipe L0C -> L1 with nSize " + str(x.n) + ": in the Nz format nSize is a multiple of 16 "
                              "in 16..4095 (asc-devkit dav_c220 CheckFixpipeL0C2L1Param)");
              if (x.m < 1 || x.m > 65535)
                out.push_back("Fixpipe L0C -> L1 with mSize " + str(x.m) + ": 1..65535 in the Nz format");
              if (x.quant != QuantMode::F322F16 && x.quant != QuantMode::F322BF16)
                out.push_back(std::string("Fixpipe L0C -> L1 with quantPre ") + std::string(quant_mode_name(x.quant)) +
                              ": into L1 only F322F16 / F322BF16 (float32 -> float16 / bfloat16) are implemented");
              if (x.dst.off % 32 || x.src.off % 64)
                out.push_back("Fixpipe L0C -> L1: the destination must be 32 B aligned (offset " + str(x.dst.off) +
                              ") and the source 64 B aligned (offset " + str(x.src.off) + ")");
              fits(out, s, "srcStride", x.src_stride, 0, kU16);
              fits(out, s, "dstStride", x.dst_stride, 1, kU32);
              return;
            }
            if (x.n < 1 || x.m < 1)
              out.push_back("Fixpipe with mSize " + str(x.m) + ", nSize " + str(x.n) +
                            ": each is at least 1 (CANN 8.5 Fixpipe docs; a 0 is a NOP only in the 2026 docs): an "
                            "empty tile must not issue the call (guard it)");
            fits(out, s, "nSize", x.n, 0, 4095);
            fits(out, s, "mSize", x.m, 0, 8192);
            fits(out, s, "srcStride", x.src_stride, 0, kU16);
            fits(out, s, "dstStride", x.dst_stride, 0, kU32);
          },
          [&](const RMmad& x) {
            if (x.m <= 0 || x.n <= 0 || x.k <= 0) return;
            if (x.m > 4095 || x.n > 4095 || x.k > 4095)
              out.push_back("Mmad m = " + str(x.m) + ", n = " + str(x.n) + ", k = " + str(x.k) + ": each is at most 4095");
            if (x.m == 1)
              out.push_back("Mmad with m = 1 runs as GEMV on the Cube (A is read as ND, not Zz; Mmad docs): pad m to 16");
            int64_t frac = ((x.m + 15) / 16) * ((x.n + 15) / 16);
            auto same = [&](const RMem& c) { return c.index == x.c.index && c.off == x.c.off; };
            bool earlier = std::any_of(st.mmad_dsts.begin(), st.mmad_dsts.end(), same);
            if (!x.init && earlier && frac < 10)
              out.push_back("Mmad accumulates into an L0C tile an earlier Mmad wrote with no PipeBarrier<PIPE_M> since, "
                            "and ceil(m/16) * ceil(n/16) = " + str(frac) + " < 10 fractals: the Cube needs "
                            "PipeBarrier<PIPE_M> between them (Mmad docs)");
            if (!earlier) st.mmad_dsts.push_back(x.c);
          },
          [&](const RBarrier& x) {
            if (x.pipe == Pipe::M || x.pipe == Pipe::ALL) st.mmad_dsts.clear();
            if (x.pipe == Pipe::S)
              out.push_back("PipeBarrier<PIPE_S> is a hardware error (PipeBarrier docs): the scalar unit needs no barrier");
          },
          [&](const RVecCall& x) { vec_call_rules(x, out); },
          [&](const RWholeReduce& x) { whole_reduce_rules(x, out); },
          [&](const RBrcb& x) { brcb_rules(x, out); },
          [&](const RGather& x) {
            // the interface issues count / (256 B / es) full repeats as a uint8 (dav-c220 Gather impl)
            int64_t per = 256 / ir::DType(x.dt).bytes();
            if (x.count < 0 || x.count / per > 255)
              out.push_back("Gather count = " + str(x.count) + ": the call issues count / " + str(per) +
                            " repeats as a uint8, so count must be below " + str(256 * per) + ": split the call");
          },
          [](const auto&) {},
      },
      r.op);
}

}  // namespace tw::ascend::sim
