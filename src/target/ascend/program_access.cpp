// program_access: the byte regions of one Ascend Program instruction. The footprints are listed in
// program_access.h.
#include "target/ascend/program_access.h"

#include <string>

#include "ir/arith.h"

namespace tw::ascend {

namespace {

using ir::Expr;
namespace arith = ir::arith;

Expr K(int64_t v) { return ir::int_imm(v); }
Expr times(const Expr& e, int64_t k) { return arith::mul(e, K(k)); }
Expr round_to(const Expr& e, int64_t m) { return arith::mul(arith::ceildiv(e, K(m)), K(m)); }

class Builder {
 public:
  Builder(const Program& p, InstrAccess& out) : p_(p), out_(out) {}

  // rows x row_bytes, stride apart, from `start` bytes after the on-chip operand r.
  void local(const LocalRef& r, AccessMode mode, Expr rows, Expr row_bytes, Expr stride, Expr start = K(0)) const {
    Region g;
    g.mode = mode;
    g.buffer = r.buffer;
    g.mem = r.buffer >= 0 && r.buffer < static_cast<int>(p_.buffers.size()) ? p_.buffers[r.buffer].mem : Mem::GM;
    g.offset = r.offset;
    g.start = std::move(start), g.rows = std::move(rows), g.row_bytes = std::move(row_bytes), g.stride = std::move(stride);
    out_.regions.push_back(std::move(g));
  }
  // One contiguous run of `bytes` bytes.
  void flat(const LocalRef& r, AccessMode mode, Expr bytes) const { local(r, mode, K(1), std::move(bytes), K(0)); }
  // rows x row_bytes, stride apart, at the GM place r.
  void gm(const GmRef& r, AccessMode mode, Expr rows, Expr row_bytes, Expr stride) const {
    Region g;
    g.mode = mode;
    g.mem = Mem::GM;
    g.param = r.param;
    g.offset = r.offset;
    g.start = K(0), g.rows = std::move(rows), g.row_bytes = std::move(row_bytes), g.stride = std::move(stride);
    out_.regions.push_back(std::move(g));
  }
  // A 2-D vector operand of rows x cols elements of t.
  void vec(const VecOperand& v, AccessMode mode, const Expr& rows, const Expr& cols, ir::DType t) const {
    local(v.at, mode, rows, times(cols, t.bytes()), times(v.row_stride, t.bytes()));
  }
  // A level-0 operand: `repeat` rows rep * 32 B apart, each the blocks of `mask` elements.
  void level0(const LocalRef& r, AccessMode mode, int64_t es, const Expr& mask, const Expr& repeat, const Expr& blk,
              const Expr& rep) const {
    local(r, mode, repeat, nullptr, times(rep, 32));
    Region& g = out_.regions.back();
    g.mask = mask, g.blk = blk, g.elem_bytes = es;
  }

  void operator()(const CopyGmToL1& x) const {
    int es = x.dtype.bytes();
    gm(x.src, AccessMode::Read, x.rows, times(x.cols, es), times(x.src_row_stride, es));
    if (!x.window_rows) return flat(x.dst, AccessMode::Write, times(arith::mul(x.dst_rows, x.dst_cols), es));
    // a window of rows in each C0 strip (32 B per row), strips dst_rows rows apart
    Expr strips = arith::floordiv(times(x.dst_cols, es), K(32));
    local(x.dst, AccessMode::Write, strips, times(x.window_rows, 32), times(x.dst_rows, 32));
  }
  void operator()(const CopyGmToUb& x) const {
    gm(x.src, AccessMode::Read, x.n_rows, x.row_bytes, x.src_stride);
    Expr lead = x.left ? arith::add(times(x.left, x.dtype.bytes()), x.row_bytes) : x.row_bytes;  // leftPadding first
    local(x.dst, AccessMode::Write, x.n_rows, round_to(lead, 32), x.dst_stride);
  }
  void operator()(const CopyUbToGm& x) const {
    local(x.src, AccessMode::Read, x.n_rows, x.row_bytes, x.src_stride);
    gm(x.dst, AccessMode::Write, x.n_rows, x.row_bytes, x.dst_stride);
    out_.regions.back().atomic = x.atomic;
  }
  void operator()(const CopyUbToUb& x) const {
    local(x.src, AccessMode::Read, x.n_rows, x.row_bytes, x.src_stride);
    local(x.dst, AccessMode::Write, x.n_rows, x.row_bytes, x.dst_stride);
  }
  void operator()(const LoadL0& x) const {
    int es = x.dtype.bytes(), c0 = 32 / es;
    bool to_a = x.dst.buffer >= 0 && x.dst.buffer < static_cast<int>(p_.buffers.size()) &&
                p_.buffers[x.dst.buffer].mem == Mem::L0A;
    bool same = to_a != x.transpose;  // the window is dst_rows x dst_cols of the source
    const Expr& win_rows = same ? x.dst_rows : x.dst_cols;
    const Expr& win_cols = same ? x.dst_cols : x.dst_rows;
    Expr start = times(arith::add(arith::mul(arith::floordiv(x.src_col, K(c0)), x.src_rows), x.src_row), 32);
    local(x.src, AccessMode::Read, arith::floordiv(win_cols, K(c0)), times(win_rows, 32), times(x.src_rows, 32), start);
    flat(x.dst, AccessMode::Write, times(arith::mul(x.dst_rows, x.dst_cols), es));
  }
  void operator()(const Mmad& x) const {
    int es = x.in_dtype.bytes(), c0 = 32 / es;
    Expr mp = round_to(x.m, 16), kp = round_to(x.k, c0), np = round_to(x.n, 16);
    flat(x.a, AccessMode::Read, times(arith::mul(mp, kp), es));
    flat(x.b, AccessMode::Read, times(arith::mul(kp, np), es));
    Expr c_bytes = times(arith::mul(mp, np), x.acc_dtype.bytes());
    auto init = ir::as_const_int(x.init);
    if (!init || *init == 0) flat(x.c, AccessMode::Read, c_bytes);  // accumulates into C
    flat(x.c, AccessMode::Write, c_bytes);
  }
  void operator()(const Fixpipe& x) const {
    flat(x.src, AccessMode::Read, times(arith::mul(x.src_rows, round_to(x.n, 16)), x.src_dtype.bytes()));
    int es = x.dst_dtype.bytes();
    gm(x.dst, AccessMode::Write, x.m, times(x.n, es), times(x.dst_row_stride, es));
    out_.regions.back().atomic = x.atomic;
  }
  [[noreturn]] static void call_level(const InstrOp& op) {
    throw ir::Error("internal: program_access got the call-level move " + std::string(instr_name(op)) +
                    "; plan_memory and insert_sync run before select_move_calls makes it");
  }
  void operator()(const InitConstValue& x) const {  // repeatTimes runs of blockNum blocks, dstGap blocks between
    local(x.dst, AccessMode::Write, x.repeatTimes, times(x.blockNum, 32),
          times(arith::add(x.blockNum, x.dstGap), 32));
  }
  void operator()(const DataCopyNd2Nz& x) const { call_level(x); }
  void operator()(const DataCopyPadGmToUb& x) const { call_level(x); }
  void operator()(const DataCopyPadUbToGm& x) const { call_level(x); }
  void operator()(const DataCopyUbToUb& x) const { call_level(x); }
  void operator()(const LoadData2D& x) const { call_level(x); }
  void operator()(const LoadData3DV2& x) const { call_level(x); }
  void operator()(const FixpipeV220& x) const { call_level(x); }
  void operator()(const FixpipeL1& x) const {  // mSize rows of nSize / 16 strips on both sides
    Expr strips = arith::floordiv(x.nSize, K(16));
    local(x.src, AccessMode::Read, strips, times(x.mSize, 16 * x.src_dtype.bytes()), times(x.srcStride, 16 * x.src_dtype.bytes()));
    local(x.dst, AccessMode::Write, strips, times(x.mSize, 16 * x.dst_dtype.bytes()), times(x.dstStride, 32));
  }
  void operator()(const VecBinary& x) const {
    vec(x.a, AccessMode::Read, x.rows, x.cols, x.dtype);
    vec(x.b, AccessMode::Read, x.rows, x.cols, x.dtype);
    vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype);
  }
  // dst = f(a): VecBinaryScalar, VecUnary.
  template <class Op>
  void one_source(const Op& x) const {
    vec(x.a, AccessMode::Read, x.rows, x.cols, x.dtype);
    vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype);
  }
  void operator()(const VecBinaryScalar& x) const { one_source(x); }
  void operator()(const VecUnary& x) const { one_source(x); }
  void operator()(const VecCast& x) const {
    vec(x.src, AccessMode::Read, x.rows, x.cols, x.src_dtype);
    vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dst_dtype);
  }
  void operator()(const VecDup& x) const { vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype); }
  void operator()(const VecIndex& x) const { vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype); }
  void operator()(const VecReduce& x) const {
    vec(x.src, AccessMode::Read, x.rows, x.cols, x.dtype);
    flat(x.dst.at, AccessMode::Write, times(x.axis == ReduceAxis::Row ? x.rows : x.cols, x.dtype.bytes()));
  }
  void operator()(const VecRowBroadcast& x) const {
    vec(x.a, AccessMode::Read, x.rows, x.cols, x.dtype);
    flat(x.vec, AccessMode::Read, times(x.rows, x.dtype.bytes()));
    vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype);
  }
  void operator()(const VecSelect& x) const {
    vec(x.a, AccessMode::Read, x.rows, x.cols, x.cmp_dtype);
    if (x.b.at.buffer >= 0) vec(x.b, AccessMode::Read, x.rows, x.cols, x.cmp_dtype);
    vec(x.x, AccessMode::Read, x.rows, x.cols, x.dtype);
    if (x.y.at.buffer >= 0) vec(x.y, AccessMode::Read, x.rows, x.cols, x.dtype);
    vec(x.dst, AccessMode::Write, x.rows, x.cols, x.dtype);
  }
  void operator()(const VecCallL2& x) const {
    int n = vec_api_sources(x.api);
    if (n >= 1) flat(x.src0, AccessMode::Read, times(x.count, x.src_dtype.bytes()));
    if (n == 2) flat(x.src1, AccessMode::Read, times(x.count, x.src_dtype.bytes()));
    if (x.api == VecApi::Select || x.api == VecApi::SelectScalar)  // one bit per element
      flat(x.sel, AccessMode::Read, arith::ceildiv(x.count, K(8)));
    flat(x.dst, AccessMode::Write, times(x.count, x.dtype.bytes()));
  }
  void operator()(const VecCallL0& x) const {
    int n = vec_api_sources(x.api);
    if (n >= 1) level0(x.src0, AccessMode::Read, x.src_dtype.bytes(), x.mask, x.repeat, x.src0_blk, x.src0_rep);
    if (n == 2) level0(x.src1, AccessMode::Read, x.src_dtype.bytes(), x.mask, x.repeat, x.src1_blk, x.src1_rep);
    if (x.api == VecApi::Compare || x.api == VecApi::CompareScalar)  // repeat * (256 / es) bits, contiguous
      flat(x.dst, AccessMode::Write, times(x.repeat, 256 / x.dtype.bytes() / 8));
    else
      level0(x.dst, AccessMode::Write, x.dtype.bytes(), x.mask, x.repeat, x.dst_blk, x.dst_rep);
  }
  void operator()(const WholeReduce& x) const {
    int es = x.dtype.bytes();
    level0(x.src, AccessMode::Read, es, x.mask, x.repeat, x.src_blk, x.src_rep);
    local(x.dst, AccessMode::Write, x.repeat, K(es), times(x.dst_rep, es));
  }
  void operator()(const Brcb& x) const {
    flat(x.src, AccessMode::Read, times(x.repeat, 8 * x.dtype.bytes()));
    level0(x.dst, AccessMode::Write, 1, K(256), x.repeat, x.dst_blk, x.dst_rep);
  }
  void operator()(const Gather& x) const {
    flat(x.offset, AccessMode::Read, times(x.count, 4));
    flat(x.src, AccessMode::Read, times(x.src_elems, x.dtype.bytes()));  // any element of the row
    flat(x.dst, AccessMode::Write, times(x.count, x.dtype.bytes()));
  }
  void operator()(const ScalarLoad& x) const {
    if (x.ub.buffer >= 0) flat(x.ub, AccessMode::Read, K(x.dtype.bytes()));
    else gm(x.src, AccessMode::Read, K(1), K(x.dtype.bytes()), K(0));
  }
  void operator()(const ScalarStore& x) const { flat(x.dst, AccessMode::Write, K(x.dtype.bytes())); }
  void operator()(const SetAtomic&) const {}  // a mode register of the core: no bytes
  void operator()(const SetFlag&) const {}
  void operator()(const WaitFlag&) const {}
  void operator()(const PipeBarrier&) const {}
  void operator()(const CrossCoreSetFlag&) const {}
  void operator()(const CrossCoreWaitFlag&) const {}

 private:
  const Program& p_;
  InstrAccess& out_;
};

}  // namespace

InstrAccess program_access(const Program& program, const InstrOp& op) {
  InstrAccess out;
  out.pipe = pipe_of(op);
  std::visit(Builder{program, out}, op);
  return out;
}

Extent evaluate(const Region& region, const ExprValue& value) {
  Extent x;
  auto v = [&](const Expr& e) { return e ? value(e) : std::nullopt; };
  x.start = v(region.start);
  x.rows = v(region.rows);
  x.stride = v(region.stride);
  if (region.row_bytes) {
    x.row_bytes = v(region.row_bytes);
  } else if (region.mask) {  // level-0: the 32 B blocks the mask covers, blk blocks apart
    auto m = v(region.mask), b = v(region.blk);
    if (m && b) {
      int64_t es = region.elem_bytes, epb = 32 / es, nb = (*m + epb - 1) / epb;
      x.row_bytes = *b == 1 || nb <= 1 ? *m * es : (nb - 1) * *b * 32 + 32;
    }
  }
  if (!x.rows || !x.row_bytes) return x;
  if (*x.rows <= 1) x.bytes = *x.row_bytes;
  else if (x.stride) x.bytes = (*x.rows - 1) * *x.stride + *x.row_bytes;
  return x;
}

}  // namespace tw::ascend
