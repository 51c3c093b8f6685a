#include "target/ascend/simulator/api_rules.h"

#include <algorithm>
#include <variant>

namespace tw::ascend::sim {

namespace {

std::string dtn(ir::DTypeCode t) { return std::string(ir::DType(t).name()); }
std::string str(int64_t v) { return std::to_string(v); }

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
  const InstrOp& op = r.in->op;
  std::visit(
      Overload{
          [&](const RBurst& x) {
            if (x.n_rows <= 0) return;  // no call (the printer guards it)
            const char* call = std::holds_alternative<CopyUbToUb>(op) ? "DataCopy(UB, UB, DataCopyParams)" : "DataCopyPad";
            if (x.n_rows > 4095)
              out.push_back(std::string(call) + " with blockCount " + str(x.n_rows) +
                            ": the count of bursts is 1..4095 (DataCopyPad docs; the field is uint16): copy at most "
                            "4095 rows per call");
            if (x.n_rows == 1) return;  // the gaps of a single burst are not used
            // The gaps between bursts as printed: GM side in bytes, UB side in 32 B blocks after the
            // burst rounded up to 32 B (DataCopyPad); both sides in 32 B blocks for UB -> UB. They
            // are unsigned fields: a stride shorter than the burst would wrap.
            bool ub_ub = std::holds_alternative<CopyUbToUb>(op), gm_src = std::holds_alternative<CopyGmToUb>(op);
            auto gap = [&](int64_t stride, bool ub_side) {
              return ub_side ? (stride - (ub_ub ? x.row_bytes : (x.row_bytes + 31) / 32 * 32)) / 32 : stride - x.row_bytes;
            };
            int64_t sg = gap(x.src_stride, ub_ub || !gm_src), dg = gap(x.dst_stride, ub_ub || gm_src);
            if (sg < 0 || dg < 0)
              out.push_back(std::string(call) + " with rows " + str(x.row_bytes) + " B long but " +
                            str(sg < 0 ? x.src_stride : x.dst_stride) + " B apart on the " + (sg < 0 ? "source" : "destination") +
                            " side: the gap field is unsigned and would wrap; rows must not overlap");
            if (ub_ub && (x.row_bytes / 32 > 65535 || sg > 65535 || dg > 65535))
              out.push_back("DataCopyParams blockLen / srcStride / dstStride are uint16 (32 B blocks): " + str(x.row_bytes / 32) +
                            ", " + str(sg) + ", " + str(dg));
          },
          [&](const RCopyGmToL1& x) {
            if (x.rows <= 0 || x.cols <= 0) return;
            if (x.src_row_stride > 65535)
              out.push_back("Nd2NzParams.srcDValue = " + str(x.src_row_stride) +
                            ": the GM row stride is a uint16 (at most 65535 elements) and would be truncated; "
                            "use a tensor whose rows are shorter (e.g. store B transposed) or split the matrix");
            if (x.rows > 16384 || x.cols > 65535)
              out.push_back("Nd2NzParams nValue = " + str(x.rows) + ", dValue = " + str(x.cols) +
                            ": at most 16384 rows and 65535 columns per call");
            bool partial = x.rows < x.dst_rows || x.cols < x.dst_cols;
            if (partial && ir::DType(x.fill).bytes() == 1)
              out.push_back("InitConstValue<" + dtn(x.fill) + "> zeroes the tail of this tile, but dav-c220 has no 8-bit "
                            "InitConstValue (a silent no-op; docs list half, int16, uint16, bfloat16, float, int32, "
                            "uint32): zero the tile through a 16-bit ReinterpretCast (fill_dtype float16)");
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
