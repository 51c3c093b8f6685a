#include "target/ascend/select_move_calls.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "target/ascend/pass_util.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::DType;
using ir::DTypeCode;
using ir::Error;
using ir::Expr;
using ir::Span;

// The fields are built with ir::arith's light builders (identities folded, nothing else), so each
// field reads as its formula in the program and in the printed AscendC.
using ir::arith::light::add;
using ir::arith::light::ceildiv;
using ir::arith::light::floordiv;
using ir::arith::light::mul;
using ir::arith::light::sub;
Expr round32(const Expr& bytes) { return mul(ceildiv(bytes, C(32)), C(32)); }

constexpr int64_t kU8 = 255, kU16 = 65535, kU32 = 4294967295LL;

class Selector {
 public:
  explicit Selector(const Program& p) : p_(p) {}

  StmtPtr stmt(const StmtPtr& s) {
    if (!s) return s;
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<StmtPtr> body;
        for (const auto& b : s->body) body.push_back(stmt(b));
        return seq(std::move(body), s->span);
      }
      case StmtKind::For: return for_(s->var, s->value, stmt(s->body.at(0)), s->span);
      case StmtKind::If: return if_(s->value, stmt(s->body.at(0)), stmt(s->else_body), s->span);
      case StmtKind::Let: return s;
      case StmtKind::Instr: {
        span_ = s->instr.span;
        return std::visit([&](const auto& op) { return select(op, s); }, s->instr.op);
      }
    }
    return s;
  }

 private:
  // A field of the call: a constant outside [lo, hi] is an error at the instruction's line.
  Expr field(const char* call, const char* name, Expr e, int64_t lo, int64_t hi, const std::string& what) const {
    // (a negative lo only lets run-time counts through to their guards: the field itself starts at 0 or 1)
    if (auto c = ir::as_const_int(e); c && (*c < lo || *c > hi))
      throw Error(std::string(call) + "." + name + " = " + std::to_string(*c) + " (" + what + ") is " +
                      (lo < 0 ? "above " + std::to_string(hi) + ", the largest value of the field"
                              : "outside " + std::to_string(lo) + ".." + std::to_string(hi) + ", the range of the field"),
                  span_, hint(name));
    return e;
  }
  static std::string hint(const std::string& name) {
    if (name == "srcDValue") return "the GM row stride is at most 65535 elements: store the matrix transposed or split it";
    if (name == "blockCount") return "copy at most 4095 rows per call: use a smaller tile";
    if (name == "repeatTimes") return "use a smaller tile (at most 255 fractals per fractal row)";
    return "use a smaller tile";
  }
  // The gap between bursts in the API's unit: 0 for a single burst (its strides are not used). A
  // negative constant gap is an error when the copy has several rows; with a symbolic row count it
  // is `n_rows > 1 ? gap : 0` (the simulator reports it if a call with several rows is issued).
  Expr gap(const char* call, const char* name, const Expr& n_rows, Expr g, int64_t hi, const char* unit) const {
    auto rows = ir::as_const_int(n_rows);
    if (rows && *rows <= 1) return C(0);
    if (auto c = ir::as_const_int(g); c && *c < 0) {
      if (!rows) return ir::select(ir::binary(BinOp::GT, n_rows, C(1)), g, C(0));
      throw Error("internal: a copy of " + std::to_string(*rows) + " rows has a negative gap between rows (" +
                      std::to_string(*c) + " " + unit + "): rows must not overlap",
                  span_);
    }
    return field(call, name, std::move(g), 0, hi, unit);
  }
  StmtPtr ins(InstrOp op) const { return instr(std::move(op), span_); }
  // An atomic copy into GM (T.atomic_add) between SetAtomicAdd<t>() and SetAtomicNone() (program.h
  // SetAtomic); a plain one as it is.
  StmtPtr atomic_mode(bool atomic, ir::DType t, StmtPtr call) const {
    if (!atomic) return call;
    return seq({ins(SetAtomic{t}), std::move(call), ins(SetAtomic{})}, span_);
  }
  // `if (n > 0 && ...)` over the counts that are not positive constants: an empty (or negative)
  // count issues no call. DataCopyPad's blockCount (a negative count would wrap) and Fixpipe's
  // mSize / nSize (1.. in CANN 8.5: docs/ascend.md "Empty counts") are guarded; DataCopyPad's
  // blockLen and Nd2Nz's nValue / dValue take 0 (a NOP).
  StmtPtr guarded(std::initializer_list<Expr> counts, StmtPtr body) const {
    Expr cond;
    for (const Expr& n : counts) {
      if (auto c = ir::as_const_int(n); c && *c >= 1) continue;
      Expr t = ir::binary(BinOp::GT, n, C(0));
      cond = cond ? ir::binary(BinOp::And, cond, t) : t;
    }
    return cond ? if_(cond, std::move(body), nullptr, span_) : body;
  }

  StmtPtr select(const CopyGmToL1& c, const StmtPtr&) {
    const char* call = "Nd2NzParams";
    auto rows = ir::as_const_int(c.rows), cols = ir::as_const_int(c.cols);
    Expr win = c.window_rows ? c.window_rows : c.dst_rows;  // the rows of each strip this copy covers
    auto drows = ir::as_const_int(win), dcols = ir::as_const_int(c.dst_cols);
    bool full = rows && cols && drows && dcols && *rows == *drows && *cols == *dcols;
    bool always_partial = rows && cols && drows && dcols && !full;
    std::vector<StmtPtr> out;
    if (!full) {
      // ND2NZ writes only the valid rows and C0 strips: zero the whole Nz tile first.
      if (c.fill_dtype.bytes() == 1)
        throw Error("InitConstValue<" + std::string(c.fill_dtype.name()) + "> would zero the tail of this tile, but "
                    "dav-c220 has no 8-bit InitConstValue (a silent no-op; docs list half, int16, uint16, bfloat16, "
                    "float, int32, uint32)",
                    span_, "zero the tile through a 16-bit view (fill_dtype float16)");
      // the whole tile in one repeat; a window: its rows of each C0 strip (one 32 B block per row)
      Expr strips = floordiv(mul(c.dst_cols, C(c.dtype.bytes())), C(32));
      Expr repeat = c.window_rows ? strips : C(1);
      Expr blocks = c.window_rows ? c.window_rows : floordiv(mul(mul(c.dst_rows, c.dst_cols), C(c.dtype.bytes())), C(32));
      Expr gap = c.window_rows ? sub(c.dst_rows, c.window_rows) : C(0);
      StmtPtr fill = seq({ins(InitConstValue{c.dst, c.fill_dtype,
                                             field("InitConstValueParams", "repeatTimes", repeat, 0, kU16, "repeats"),
                                             field("InitConstValueParams", "blockNum", blocks, 0, kU16, "32 B blocks"),
                                             field("InitConstValueParams", "dstGap", gap, 0, kU16, "32 B blocks"), C(0)}),
                          ins(PipeBarrier{Pipe::MTE2})},
                         span_);
      if (!always_partial) {
        Expr cond;
        if (!(rows && drows && *rows == *drows)) cond = ir::binary(BinOp::LT, c.rows, win);
        if (!(cols && dcols && *cols == *dcols)) {
          Expr cc = ir::binary(BinOp::LT, c.cols, c.dst_cols);
          cond = cond ? ir::binary(BinOp::Or, cond, cc) : cc;
        }
        fill = if_(cond, fill, nullptr, span_);
      }
      out.push_back(fill);
    }
    LocalRef at = c.dst;  // rows and columns before the tensor's row / column 0 stay the fill's zeros
    if (c.skip_rows) at.offset = add(at.offset, mul(c.skip_rows, C(32)));
    if (c.skip_cols) at.offset = add(at.offset, mul(mul(c.skip_cols, C(c.dtype.bytes())), c.dst_rows));  // C0 elements = 32 B
    out.push_back(ins(DataCopyNd2Nz{c.src, at, c.dtype, C(1), field(call, "nValue", c.rows, 0, 16384, "rows"),
                                    field(call, "dValue", c.cols, 0, kU16, "elements"), C(0),
                                    field(call, "srcDValue", c.src_row_stride, 0, kU16, "elements"),
                                    field(call, "dstNzC0Stride", c.dst_rows, 0, kU16, "32 B blocks"), C(1), C(0),
                                    c.col_start}));
    return out.size() == 1 ? out[0] : seq(std::move(out), span_);
  }

  // A copy of more than 4095 rows (DataCopyPad's and DataCopy's blockCount is 0..4095) is several
  // calls of at most 4095 rows each, one after another on the copy's pipe, each starting its rows'
  // strides further on both sides (hunt13 F2: a (4096, 2) tile whose rows are the tokens). A
  // run-time count (a tail's `min(4097, M - r0)`, a run-time extent) is bounded by the rows its UB
  // tile holds: part i copies min(n - 4095 i, 4095) rows, a call with none skipped by its guard
  // (hunt14 F1). nullptr: one call does.
  template <typename Copy>
  StmtPtr in_parts(const Copy& c, const StmtPtr& s) {
    auto n = ir::as_const_int(c.n_rows);
    const int64_t bound = n ? *n : in_part_ ? 0 : ub_rows(c);
    if (bound <= 4095) return nullptr;
    std::vector<StmtPtr> out;
    in_part_ = true;
    for (int64_t r = 0; r < bound; r += 4095) {
      Copy part = c;
      part.n_rows = n ? C(std::min<int64_t>(4095, *n - r))
                      : ir::binary(BinOp::Min, r ? sub(c.n_rows, C(r)) : c.n_rows, C(4095));
      part.src.offset = add(c.src.offset, mul(C(r), c.src_stride));
      part.dst.offset = add(c.dst.offset, mul(C(r), c.dst_stride));
      if constexpr (std::is_same_v<Copy, CopyUbToGm>)
        if (r) part.window = {};  // a checked store's window check: once, with the first part
      out.push_back(select(part, s));
    }
    in_part_ = false;
    return seq(std::move(out), span_);
  }
  bool in_part_ = false;  // selecting a part of a split copy (its run-time count is at most 4095)
  // The most rows a copy's UB tile holds (its bytes over its constant row stride; 0: unknown).
  int64_t ub_rows(const LocalRef& at, const Expr& stride) const {
    auto st = ir::as_const_int(stride);
    if (!st || *st <= 0 || at.buffer < 0 || at.buffer >= static_cast<int>(p_.buffers.size())) return 0;
    return p_.buffers[at.buffer].bytes / *st;
  }
  int64_t ub_rows(const CopyGmToUb& c) const { return ub_rows(c.dst, c.dst_stride); }
  int64_t ub_rows(const CopyUbToGm& c) const { return ub_rows(c.src, c.src_stride); }
  int64_t ub_rows(const CopyUbToUb& c) const {
    return std::min(ub_rows(c.src, c.src_stride), ub_rows(c.dst, c.dst_stride));
  }

  StmtPtr select(const CopyGmToUb& c, const StmtPtr& s) {
    if (StmtPtr parts = in_parts(c, s)) return parts;
    const char* call = "DataCopyExtParams";
    if (c.left && !c.pad) throw Error("internal: CopyGmToUb with leftPadding but no padding", span_);
    Expr left = c.left ? c.left : C(0);
    Expr lead = mul(left, C(c.dtype.bytes()));  // the burst's bytes in UB: leftPadding, then the data
    Expr right = c.pad ? floordiv(sub(round32(add(lead, c.row_bytes)), add(lead, c.row_bytes)), C(c.dtype.bytes())) : C(0);
    DataCopyPadGmToUb x{c.src, c.dst, c.dtype,
                        field(call, "blockCount", c.n_rows, -kU32, 4095, "rows"),
                        field(call, "blockLen", c.row_bytes, 0, kU32, "bytes"),
                        gap(call, "srcStride", c.n_rows, sub(c.src_stride, c.row_bytes), kU32, "bytes"),
                        gap(call, "dstStride", c.n_rows, floordiv(sub(c.dst_stride, round32(add(lead, c.row_bytes))), C(32)),
                            kU32, "32 B blocks"),
                        c.pad, field("DataCopyPadExtParams", "leftPadding", left, 0, kU8, "elements"),
                        field("DataCopyPadExtParams", "rightPadding", right, 0, kU8, "elements"), C(0), c.preload};
    return guarded({c.n_rows}, ins(std::move(x)));
  }

  // A checked store (CopyUbToGm::window) is issued also when it moves no row, as blockCount max(n, 0) (0: a NOP,
  // docs/ascend.md "Empty counts"): its window check rides on the call, and a window wholly outside the tensor's
  // rows (a row count of 0 after clipping) is reported like one that overhangs it.
  StmtPtr select(const CopyUbToGm& c, const StmtPtr& s) {
    if (StmtPtr parts = in_parts(c, s)) return parts;
    const char* call = "DataCopyExtParams";
    // unguarded: the window's check runs whatever the count (select_instructions keeps the UB address of a call
    // that moves no row on its 32 B block: ub_skip_rows)
    const bool issued = c.window.param >= 0;
    auto* m = c.n_rows->kind == ir::ExprKind::Binary ? ir::as<ir::BinaryNode>(c.n_rows) : nullptr;
    const bool clamped = m && m->op == BinOp::Max && ir::as_const_int(m->b) == 0;  // gm_window's max(.., 0)
    const Expr rows = issued && !clamped ? simp(ir::binary(BinOp::Max, c.n_rows, C(0))) : c.n_rows;
    DataCopyPadUbToGm x{c.src, c.dst, c.dtype,
                        field(call, "blockCount", rows, -kU32, 4095, "rows"),
                        field(call, "blockLen", c.row_bytes, 0, kU32, "bytes"),
                        gap(call, "srcStride", c.n_rows, floordiv(sub(c.src_stride, round32(c.row_bytes)), C(32)), kU32,
                            "32 B blocks"),
                        gap(call, "dstStride", c.n_rows, sub(c.dst_stride, c.row_bytes), kU32, "bytes"), c.atomic,
                        c.window};
    return atomic_mode(c.atomic, c.dtype, issued ? ins(std::move(x)) : guarded({c.n_rows}, ins(std::move(x))));
  }

  StmtPtr select(const CopyUbToUb& c, const StmtPtr& s) {
    if (StmtPtr parts = in_parts(c, s)) return parts;
    const char* call = "DataCopyParams";
    auto blk = [](const Expr& e) { return floordiv(e, C(32)); };
    DataCopyUbToUb x{c.src, c.dst, c.dtype,
                     field(call, "blockCount", c.n_rows, -kU32, 4095, "rows"),
                     field(call, "blockLen", blk(c.row_bytes), 0, kU16, "32 B blocks"),
                     gap(call, "srcStride", c.n_rows, blk(sub(c.src_stride, c.row_bytes)), kU16, "32 B blocks"),
                     gap(call, "dstStride", c.n_rows, blk(sub(c.dst_stride, c.row_bytes)), kU16, "32 B blocks")};
    return guarded({c.n_rows}, ins(std::move(x)));
  }

  StmtPtr select(const LoadL0& c, const StmtPtr&) {
    if (c.dst.buffer < 0 || c.dst.buffer >= static_cast<int>(p_.buffers.size()))
      throw Error("internal: LoadL0 refers to buffer #" + std::to_string(c.dst.buffer), span_);
    const BufferDecl& db = p_.buffers[c.dst.buffer];
    if (db.mem != Mem::L0A && db.mem != Mem::L0B)
      throw Error("LoadL0 writes buffer '" + db.name + "' in " + std::string(mem_name(db.mem)) + ", expected L0A or L0B", span_);
    if (c.transpose && c.dtype.bytes() == 4 && db.mem == Mem::L0B) {
      // 32-bit B (K x N) in L1 (Nz, strip height src_rows) -> L0B (Zn): one Load3Dv2 (img2col with a
      // 1 x 1 kernel) over the whole window. (LoadDataWithTranspose is not used: for 32-bit types it
      // joins two consecutive 16 x 8 fractals, which are vertically adjacent in an Nz matrix unless
      // the strip height is 16.)
      const char* call = "LoadData3DParamsV2";
      LoadData3DV2 x;
      x.src = c.src, x.dst = c.dst, x.dtype = c.dtype;
      x.l1H = field(call, "l1H", c.src_rows, 0, kU16, "rows");
      x.l1W = C(1);
      x.channelSize = field(call, "channelSize", add(c.src_col, c.dst_cols), 0, kU16, "channels");
      x.kExtension = field(call, "kExtension", c.dst_cols, 0, kU16, "columns");
      x.mExtension = field(call, "mExtension", c.dst_rows, 0, kU16, "rows");
      x.kStartPt = field(call, "kStartPt", c.src_col, 0, kU16, "columns");
      x.mStartPt = field(call, "mStartPt", c.src_row, 0, kU16, "rows");
      return ins(std::move(x));
    }
    if (c.transpose && c.dtype.bytes() != 2)
      throw Error("LoadL0 with transpose needs a 16-bit type (or a 32-bit type into L0B), got " +
                      std::string(c.dtype.name()) + " into " + std::string(mem_name(db.mem)),
                  span_);
    const int64_t c0 = c0_of(c.dtype), frac = 512;
    Expr r1 = floordiv(c.src_rows, C(16));
    Expr row_blk = floordiv(c.src_row, C(16));
    Expr outer, inner, base, step, sstride;
    if (db.mem == Mem::L0A) {  // Zz: fractal rows over m, K1 fractals each
      outer = floordiv(c.dst_rows, C(16));
      inner = floordiv(c.dst_cols, C(c0));
      if (!c.transpose) {
        base = add(mul(floordiv(c.src_col, C(c0)), r1), row_blk), step = C(1), sstride = r1;
      } else {
        base = add(mul(floordiv(c.src_col, C(16)), r1), row_blk), step = r1, sstride = C(1);
      }
    } else {  // Zn: fractal rows over k, N1 fractals each
      inner = floordiv(c.dst_cols, C(16));
      if (!c.transpose) {
        outer = floordiv(c.dst_rows, C(c0));
        base = add(mul(floordiv(c.src_col, C(c0)), r1), row_blk), step = r1, sstride = C(1);
      } else {
        outer = floordiv(c.dst_rows, C(16));
        base = add(mul(floordiv(c.src_col, C(16)), r1), row_blk), step = C(1), sstride = r1;
      }
    }
    // Destination fractal (i, j) (i < outer, j < inner) lies at dst + (i * inner + j) * 512 B and is
    // read from source fractal base + i * step + j * sstride (fractal f of the Nz matrix at f * 512 B).
    const char* call = "LoadData2DParams";
    LoadData2D x;
    // A transposing LoadData2D is documented for uint16/int16/half only (Load2D.md): a bfloat16
    // fractal is transposed through a half view (the same bits move; session 15's rule audit)
    x.dtype = c.transpose && c.dtype == ir::DType(DTypeCode::bf16) ? ir::DType(DTypeCode::f16) : c.dtype;
    x.startIndex = C(0);
    x.sid = C(0);
    x.ifTranspose = c.transpose;
    auto known = [](const Expr& e) { return ir::as_const_int(simp(e)); };
    auto o = known(outer), n = known(inner), st = known(step), ss = known(sstride);
    ir::Var i = ir::var("tw_i", DTypeCode::i32);
    if (o && n && st && ss && (*o == 1 || *n == 1 || *st == *n * *ss)) {
      // the source runs through the destination's order with one stride: one call for the window
      // (calls of 255 fractals, the width of repeatTimes, and one for the rest)
      const int64_t total = *o * *n, stride = *n == 1 ? *st : *ss;
      x.srcStride = field(call, "srcStride", C(stride), 0, kU16, "512 B fractals");
      x.dstGap = C(0);
      auto chunk = [&](const Expr& first, int64_t count) {
        LoadData2D y = x;
        y.src = LocalRef{c.src.buffer, add(c.src.offset, mul(add(base, mul(first, C(stride))), C(frac)))};
        y.dst = LocalRef{c.dst.buffer, add(c.dst.offset, mul(first, C(frac)))};
        y.repeatTimes = C(count);
        return ins(std::move(y));
      };
      if (total <= kU8) return chunk(C(0), total);
      std::vector<StmtPtr> calls;
      if (total / kU8 == 1) calls.push_back(chunk(C(0), kU8));
      else calls.push_back(for_(i, C(total / kU8), chunk(mul(i, C(kU8)), kU8), span_));
      if (total % kU8) calls.push_back(chunk(C(total / kU8 * kU8), total % kU8));
      return seq(std::move(calls), span_);
    }
    if (o && n && *n < *o && *o <= kU8 && *n - 1 <= kU16) {
      // fewer fractal columns than rows: one call per destination fractal column, its fractals
      // inner apart (dstGap inner - 1)
      x.src = LocalRef{c.src.buffer, add(c.src.offset, mul(add(base, mul(i, sstride)), C(frac)))};
      x.dst = LocalRef{c.dst.buffer, add(c.dst.offset, mul(i, C(frac)))};
      x.repeatTimes = field(call, "repeatTimes", outer, 0, kU8, "fractals per fractal column");
      x.srcStride = field(call, "srcStride", step, 0, kU16, "512 B fractals");
      x.dstGap = C(*n - 1);
      return for_(i, inner, ins(std::move(x)), span_);
    }
    // one call per destination fractal row
    x.src = LocalRef{c.src.buffer, add(c.src.offset, mul(add(base, mul(i, step)), C(frac)))};
    x.dst = LocalRef{c.dst.buffer, add(c.dst.offset, mul(mul(i, inner), C(frac)))};
    x.repeatTimes = field(call, "repeatTimes", inner, 0, kU8, "fractals per fractal row");
    x.srcStride = field(call, "srcStride", sstride, 0, kU16, "512 B fractals");
    x.dstGap = C(0);
    return for_(i, outer, ins(std::move(x)), span_);
  }

  StmtPtr select(const Fixpipe& c, const StmtPtr&) {
    QuantMode q;
    if (c.src_dtype.code == DTypeCode::f32 && c.dst_dtype.code == DTypeCode::f16) q = QuantMode::F322F16;
    else if (c.src_dtype.code == DTypeCode::f32 && c.dst_dtype.code == DTypeCode::bf16) q = QuantMode::F322BF16;
    else if (c.src_dtype == c.dst_dtype && (c.src_dtype.code == DTypeCode::f32 || c.src_dtype.code == DTypeCode::i32))
      q = QuantMode::NoQuant;
    else
      throw Error("Fixpipe from " + std::string(c.src_dtype.name()) + " to " + std::string(c.dst_dtype.name()) +
                      " has no quantPre mode (fp32 -> fp16/bf16/fp32, int32 -> int32)",
                  span_, "convert the result with a vector Cast instead");
    const char* call = "FixpipeParamsV220";
    StmtPtr x = ins(FixpipeV220{c.src, c.dst, c.src_dtype, c.dst_dtype, field(call, "nSize", c.n, 0, 4095, "columns"),
                                field(call, "mSize", c.m, 0, 8192, "rows"),
                                field(call, "srcStride", c.src_rows, 0, kU16, "rows of the L0C strip"),
                                field(call, "dstStride", c.dst_row_stride, 0, kU32, "elements"), q, c.relu, C(1),
                                c.atomic});
    return atomic_mode(c.atomic, c.dst_dtype, guarded({c.m, c.n}, std::move(x)));
  }

  // Everything else is kept as it is.
  template <class Op>
  StmtPtr select(const Op&, const StmtPtr& s) {
    return s;
  }

  const Program& p_;
  Span span_;
};

}  // namespace

Program select_move_calls(const Program& program, const target::Target&) {
  Program out = program;
  Selector s(program);
  out.aic = s.stmt(program.aic);
  out.aiv = s.stmt(program.aiv);
  return out;
}

}  // namespace tw::ascend
