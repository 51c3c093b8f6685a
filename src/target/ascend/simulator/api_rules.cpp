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

// The printer's form of a vector instruction: level-2 (one count) when every operand is
// contiguous, else level-0 (mask, repeat, repeat strides) — see ascendc_printer.cpp.
bool level0(const RVec& x, std::initializer_list<const RVecOperand*> ops) {
  if (x.rows <= 1) return false;
  for (const auto* o : ops)
    if (o->stride != x.cols) return true;
  return false;
}

void rep_stride(const RVecOperand& o, ir::DTypeCode t, const char* role, const char* field,
                std::vector<std::string>& out) {
  int64_t blocks = o.stride * ir::DType(t).bytes() / 32;
  if (blocks > 255)
    out.push_back(std::string(field) + " of the " + role + " is " + str(blocks) + " blocks of 32 B (a row stride of " +
                  str(o.stride) + " " + dtn(t) + " elements); the field is uint8 (at most 255) and would wrap: use rows "
                  "of at most " + str(255 * 32 / ir::DType(t).bytes()) + " elements or a tile whose rows are contiguous");
}

void vec_rules(const RVec& x, std::vector<std::string>& out) {
  if (x.rows <= 0 || x.cols <= 0) return;  // no call
  switch (x.kind) {
    case RVec::Cast:
      if (!cast_round_mode_legal(x.dt, x.src_dt, x.round))
        out.push_back("Cast from " + dtn(x.src_dt) + " to " + dtn(x.dt) + " with RoundMode::" +
                      std::string(round_mode_name(x.round)) + ": this conversion accepts only CAST_NONE (Cast.md, table 4); "
                      "on dav-c220 any other mode issues no instruction and the destination keeps stale data: lower it "
                      "with cast_round_mode()");
      if (level0(x, {&x.dst, &x.a})) {
        rep_stride(x.dst, x.dt, "destination", "UnaryRepeatParams.dstRepStride", out);
        rep_stride(x.a, x.src_dt, "source", "UnaryRepeatParams.srcRepStride", out);
      }
      break;
    case RVec::Binary:
      if (level0(x, {&x.dst, &x.a, &x.b})) {
        rep_stride(x.dst, x.dt, "destination", "BinaryRepeatParams.dstRepStride", out);
        rep_stride(x.a, x.dt, "first source", "BinaryRepeatParams.src0RepStride", out);
        rep_stride(x.b, x.dt, "second source", "BinaryRepeatParams.src1RepStride", out);
      }
      break;
    case RVec::Scalar:
    case RVec::Unary:
      if (level0(x, {&x.dst, &x.a})) {
        rep_stride(x.dst, x.dt, "destination", "UnaryRepeatParams.dstRepStride", out);
        rep_stride(x.a, x.dt, "source", "UnaryRepeatParams.srcRepStride", out);
      }
      break;
    case RVec::Dup:
      if (level0(x, {&x.dst})) rep_stride(x.dst, x.dt, "destination", "Duplicate's dstRepeatStride", out);
      break;
    case RVec::Reduce:
      if (x.axis == ReduceAxis::Row && x.rows > 1) rep_stride(x.a, x.dt, "source", "WholeReduce's srcRepStride", out);
      break;
    case RVec::RowBcast:
      if ((x.rows + 7) / 8 > 255)
        out.push_back("row broadcast over " + str(x.rows) + " rows: Brcb's repeat is ceil(rows / 8) = " +
                      str((x.rows + 7) / 8) + ", a uint8 (at most 255, i.e. 2040 rows): split the rows");
      if (x.rows > 1) {
        rep_stride(x.dst, x.dt, "destination", "BinaryRepeatParams.dstRepStride", out);
        rep_stride(x.a, x.dt, "first source", "BinaryRepeatParams.src0RepStride", out);
      }
      break;
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
            fits(out, s, "ndNum", x.nd_num, 0, kU16);
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
            if (x.count < 1 || x.count > 4095)
              out.push_back(std::string(call) + " with blockCount " + str(x.count) +
                            ": the count of bursts is 1..4095 (DataCopyPad docs; the field is uint16)" +
                            (x.count < 1 ? ": a row count <= 0 must not issue the call (guard it)" : ": copy at most 4095 rows per call"));
            int64_t wide = ub_ub ? kU16 : kU32;
            fits(out, s, "blockLen", x.len, 0, wide);
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
            const char* s = "FixpipeParamsV220";
            fits(out, s, "nSize", x.n, 0, kU16);
            fits(out, s, "mSize", x.m, 0, kU16);
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
          [&](const RVec& x) { vec_rules(x, out); },
          [](const auto&) {},
      },
      r.op);
}

}  // namespace tw::ascend::sim
