#include "target/ascend/program_printer.h"

#include <sstream>

#include "ir/printer.h"

namespace tw::ascend {

namespace {

std::string ex(const ir::Expr& e) { return e ? ir::print(e) : std::string("<null>"); }

std::string gm(const Program& p, const GmRef& r) {
  std::string base = r.param < 0 ? "workspace"
                     : r.param < static_cast<int>(p.params.size()) ? p.params[r.param].name
                                                                   : "param#" + std::to_string(r.param);
  return base + "[" + ex(r.offset) + "]";
}
std::string loc(const Program& p, const LocalRef& r) {
  std::string base = r.buffer >= 0 && r.buffer < static_cast<int>(p.buffers.size())
                         ? p.buffers[r.buffer].name
                         : "buffer#" + std::to_string(r.buffer);
  return base + "[" + ex(r.offset) + "]";
}
std::string vop(const Program& p, const VecOperand& v) { return loc(p, v.at) + "/" + ex(v.row_stride); }
std::string dt(ir::DType t) { return std::string(t.name()); }

struct InstrPrinter {
  const Program& p;
  std::string operator()(const CopyGmToL1& c) const {
    return "CopyGmToL1 " + loc(p, c.dst) + " <- " + gm(p, c.src) + " " + dt(c.dtype) + " rows=" + ex(c.rows) +
           " cols=" + ex(c.cols) + " src_row_stride=" + ex(c.src_row_stride) + (c.window_rows ? " window_rows=" + ex(c.window_rows) : "") +
           (c.skip_rows ? " skip_rows=" + ex(c.skip_rows) : "") +
           (c.skip_cols ? " skip_cols=" + ex(c.skip_cols) : "") +
           (c.col_start ? " col_start=" + ex(c.col_start) : "") + " nz=" + ex(c.dst_rows) + "x" +
           ex(c.dst_cols) + (c.fill_dtype == ir::DType(ir::DTypeCode::f16) ? "" : " fill=" + dt(c.fill_dtype));
  }
  template <class C>
  std::string burst(const char* name, const std::string& dst, const std::string& src, const C& c) const {
    return std::string(name) + " " + dst + " <- " + src + " " + dt(c.dtype) + " n_rows=" + ex(c.n_rows) +
           " row_bytes=" + ex(c.row_bytes) + " src_stride=" + ex(c.src_stride) + " dst_stride=" + ex(c.dst_stride);
  }
  std::string operator()(const CopyGmToUb& c) const {
    return burst("CopyGmToUb", loc(p, c.dst), gm(p, c.src), c) + (c.pad ? " pad" : "") +
           (c.left ? " left=" + ex(c.left) : "");
  }
  std::string operator()(const CopyUbToGm& c) const {
    return burst("CopyUbToGm", gm(p, c.dst), loc(p, c.src), c) + (c.atomic ? " atomic" : "");
  }
  std::string operator()(const CopyUbToUb& c) const { return burst("CopyUbToUb", loc(p, c.dst), loc(p, c.src), c); }
  std::string operator()(const LoadL0& c) const {
    return "LoadL0 " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + " src_rows=" + ex(c.src_rows) +
           " window=(" + ex(c.src_row) + ", " + ex(c.src_col) + ") dst=" + ex(c.dst_rows) + "x" + ex(c.dst_cols) +
           (c.transpose ? " transpose" : "");
  }
  std::string operator()(const Mmad& c) const {
    return "Mmad " + loc(p, c.c) + " <- " + loc(p, c.a) + " x " + loc(p, c.b) + " " + dt(c.in_dtype) + "->" +
           dt(c.acc_dtype) + " m=" + ex(c.m) + " n=" + ex(c.n) + " k=" + ex(c.k) + " init=" + ex(c.init);
  }
  std::string operator()(const Fixpipe& c) const {
    return "Fixpipe " + gm(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.src_dtype) + "->" + dt(c.dst_dtype) +
           " m=" + ex(c.m) + " n=" + ex(c.n) + " src_rows=" + ex(c.src_rows) + " dst_row_stride=" +
           ex(c.dst_row_stride) + (c.relu ? " relu" : "") + (c.atomic ? " atomic" : "");
  }
  // call-level moves: the API call and its fields, as named by the API
  static std::string f(const char* name, const ir::Expr& e) { return std::string(" ") + name + "=" + ex(e); }
  std::string operator()(const InitConstValue& c) const {
    return "InitConstValue " + loc(p, c.dst) + " " + dt(c.dtype) + f("repeatTimes", c.repeatTimes) +
           f("blockNum", c.blockNum) + f("dstGap", c.dstGap) + f("initValue", c.initValue);
  }
  std::string operator()(const DataCopyNd2Nz& c) const {
    return "DataCopyNd2Nz " + loc(p, c.dst) + " <- " + gm(p, c.src) + " " + dt(c.dtype) + f("ndNum", c.ndNum) +
           f("nValue", c.nValue) + f("dValue", c.dValue) + f("srcNdMatrixStride", c.srcNdMatrixStride) +
           f("srcDValue", c.srcDValue) + f("dstNzC0Stride", c.dstNzC0Stride) + f("dstNzNStride", c.dstNzNStride) +
           f("dstNzMatrixStride", c.dstNzMatrixStride) + (c.col_start ? " col_start=" + ex(c.col_start) : "");
  }
  template <class C>
  static std::string ext(const C& c) {
    return f("blockCount", c.blockCount) + f("blockLen", c.blockLen) + f("srcStride", c.srcStride) +
           f("dstStride", c.dstStride);
  }
  std::string operator()(const DataCopyPadGmToUb& c) const {
    return "DataCopyPad " + loc(p, c.dst) + " <- " + gm(p, c.src) + " " + dt(c.dtype) + ext(c) +
           (c.isPad ? " isPad" + f("leftPadding", c.leftPadding) + f("rightPadding", c.rightPadding) +
                          f("paddingValue", c.paddingValue)
                    : std::string());
  }
  std::string operator()(const DataCopyPadUbToGm& c) const {
    return "DataCopyPad " + gm(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + ext(c) +
           (c.atomic ? " atomic" : "");
  }
  std::string operator()(const DataCopyUbToUb& c) const {
    return "DataCopy " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + ext(c);
  }
  std::string operator()(const LoadData2D& c) const {
    return "LoadData2D " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + f("startIndex", c.startIndex) +
           f("repeatTimes", c.repeatTimes) + f("srcStride", c.srcStride) + f("sid", c.sid) + f("dstGap", c.dstGap) +
           (c.ifTranspose ? " ifTranspose" : "");
  }
  std::string operator()(const LoadData3DV2& c) const {
    return "LoadData3DV2 " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + f("l1H", c.l1H) +
           f("l1W", c.l1W) + f("channelSize", c.channelSize) + f("kExtension", c.kExtension) +
           f("mExtension", c.mExtension) + f("kStartPt", c.kStartPt) + f("mStartPt", c.mStartPt);
  }
  std::string operator()(const FixpipeL1& c) const {
    return "FixpipeL1 " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.src_dtype) + "->" + dt(c.dst_dtype) +
           f("nSize", c.nSize) + f("mSize", c.mSize) + f("srcStride", c.srcStride) + f("dstStride", c.dstStride) +
           " quantPre=" + std::string(quant_mode_name(c.quantPre));
  }
  std::string operator()(const FixpipeV220& c) const {
    return "FixpipeV220 " + gm(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.src_dtype) + "->" + dt(c.dst_dtype) +
           f("nSize", c.nSize) + f("mSize", c.mSize) + f("srcStride", c.srcStride) + f("dstStride", c.dstStride) +
           " quantPre=" + std::string(quant_mode_name(c.quantPre)) + (c.reluEn ? " reluEn" : "") + f("ndNum", c.ndNum) +
           (c.atomic ? " atomic" : "");
  }
  static std::string shape(const ir::Expr& r, const ir::Expr& c) { return " " + ex(r) + "x" + ex(c); }
  std::string operator()(const VecBinary& c) const {
    return std::string(vec_binop_name(c.op)) + " " + vop(p, c.dst) + " <- " + vop(p, c.a) + ", " + vop(p, c.b) +
           " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecBinaryScalar& c) const {
    return std::string(vec_binop_name(c.op)) + "s " + vop(p, c.dst) + " <- " + vop(p, c.a) + ", " + ex(c.scalar) +
           " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecUnary& c) const {
    return std::string(vec_unop_name(c.op)) + " " + vop(p, c.dst) + " <- " + vop(p, c.a) + " " + dt(c.dtype) +
           shape(c.rows, c.cols);
  }
  std::string operator()(const VecCast& c) const {
    return "Cast " + vop(p, c.dst) + " <- " + vop(p, c.src) + " " + dt(c.src_dtype) + "->" + dt(c.dst_dtype) + " " +
           std::string(round_mode_name(c.round)) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecDup& c) const {
    return "Duplicate " + vop(p, c.dst) + " <- " + ex(c.value) + " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecIndex& c) const {
    return "Index " + vop(p, c.dst) + " <- " + ex(c.first) + " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecReduce& c) const {
    return std::string(c.axis == ReduceAxis::Row ? "RowReduce" : "ColReduce") + std::string(reduce_op_name(c.op)) +
           " " + vop(p, c.dst) + " <- " + vop(p, c.src) + " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecSelect& c) const {
    std::string b = c.b.at.buffer >= 0 ? vop(p, c.b) : ex(c.b_scalar);
    std::string y = c.y.at.buffer >= 0 ? vop(p, c.y) : ex(c.y_scalar);
    return "Select" + std::string(cmp_mode_name(c.cmp)) + " " + vop(p, c.dst) + " <- " + vop(p, c.a) + ", " + b + " " +
           dt(c.cmp_dtype) + " then " + vop(p, c.x) + " else " + y + " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string operator()(const VecRowBroadcast& c) const {
    return "RowBroadcast" + std::string(vec_binop_name(c.op)) + " " + vop(p, c.dst) + " <- " + vop(p, c.a) + ", " +
           loc(p, c.vec) + " " + dt(c.dtype) + shape(c.rows, c.cols);
  }
  std::string vec_call(const char* form, VecApi api, ir::DType t, ir::DType st, const LocalRef& dst, const LocalRef& src0,
                       const LocalRef& src1, const ir::Expr& scalar, RoundMode round, CmpMode cmp,
                       const LocalRef& sel) const {
    std::string s = std::string(form) + " " + std::string(vec_api_name(api)) + " " + loc(p, dst) + " <-";
    if (vec_api_sources(api) >= 1) s += " " + loc(p, src0);
    if (vec_api_sources(api) == 2) s += ", " + loc(p, src1);
    if (vec_api_has_scalar(api)) s += std::string(vec_api_sources(api) ? ", " : " ") + ex(scalar);
    s += " " + (t == st ? dt(t) : dt(st) + "->" + dt(t));
    if (api == VecApi::Cast) s += " " + std::string(round_mode_name(round));
    if (api == VecApi::Compare || api == VecApi::CompareScalar) s += " " + std::string(cmp_mode_name(cmp));
    if (api == VecApi::Select || api == VecApi::SelectScalar) s += " sel=" + loc(p, sel);
    return s;
  }
  std::string operator()(const VecCallL2& c) const {
    return vec_call("L2", c.api, c.dtype, c.src_dtype, c.dst, c.src0, c.src1, c.scalar, c.round, c.cmp, c.sel) +
           " count=" + ex(c.count);
  }
  std::string operator()(const VecCallL0& c) const {
    std::string s = vec_call("L0", c.api, c.dtype, c.src_dtype, c.dst, c.src0, c.src1, c.scalar, c.round, c.cmp, LocalRef{}) +
                    " mask=" + ex(c.mask) + " repeat=" + ex(c.repeat) + " blk=(" + ex(c.dst_blk);
    int n = vec_api_sources(c.api);
    if (n >= 1) s += ", " + ex(c.src0_blk);
    if (n == 2) s += ", " + ex(c.src1_blk);
    s += ") rep=(" + ex(c.dst_rep);
    if (n >= 1) s += ", " + ex(c.src0_rep);
    if (n == 2) s += ", " + ex(c.src1_rep);
    return s + ")";
  }
  std::string operator()(const WholeReduce& c) const {
    return "WholeReduce" + std::string(reduce_op_name(c.op)) + " " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " +
           dt(c.dtype) + " mask=" + ex(c.mask) + " repeat=" + ex(c.repeat) + " dst_rep=" + ex(c.dst_rep) +
           " src_blk=" + ex(c.src_blk) + " src_rep=" + ex(c.src_rep);
  }
  std::string operator()(const Brcb& c) const {
    return "Brcb " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + " repeat=" + ex(c.repeat) +
           " dst_blk=" + ex(c.dst_blk) + " dst_rep=" + ex(c.dst_rep);
  }
  std::string operator()(const Gather& c) const {
    return "Gather " + loc(p, c.dst) + " <- " + loc(p, c.src) + " " + dt(c.dtype) + " offset=" + loc(p, c.offset) +
           " base=" + ex(c.base) + " count=" + ex(c.count) + " src_elems=" + ex(c.src_elems);
  }
  std::string operator()(const ScalarLoad& c) const {
    return "ScalarLoad " + (c.var ? c.var->name : std::string("<null>")) + " <- " +
           (c.ub.buffer >= 0 ? loc(p, c.ub) : gm(p, c.src)) + " " + dt(c.dtype);
  }
  std::string operator()(const ScalarStore& c) const {
    return "ScalarStore " + loc(p, c.dst) + " <- " + ex(c.value) + " " + dt(c.dtype);
  }
  std::string operator()(const SetAtomic& c) const {
    return c.add ? "SetAtomicAdd " + dt(*c.add) : std::string("SetAtomicNone");
  }
  std::string operator()(const SetFlag& c) const {
    return "SetFlag<" + std::string(pipe_name(c.src)) + "_" + std::string(pipe_name(c.dst)) + ">(" + ex(c.event) + ")";
  }
  std::string operator()(const WaitFlag& c) const {
    return "WaitFlag<" + std::string(pipe_name(c.src)) + "_" + std::string(pipe_name(c.dst)) + ">(" + ex(c.event) + ")";
  }
  std::string operator()(const PipeBarrier& c) const { return "PipeBarrier<" + std::string(pipe_name(c.pipe)) + ">"; }
  std::string operator()(const CrossCoreSetFlag& c) const {
    return "CrossCoreSetFlag<" + std::to_string(c.mode) + ", " + std::string(pipe_name(c.pipe)) + ">(" + ex(c.id) + ")";
  }
  std::string operator()(const CrossCoreWaitFlag& c) const {
    std::string mode = c.mode ? std::to_string(*c.mode) + ", " : "";  // set by resolve_cross_waits
    return "CrossCoreWaitFlag<" + mode + std::string(pipe_name(c.pipe)) + ">(" + ex(c.id) + ")";
  }
};

void print_stmt(const Program& p, const StmtPtr& s, int indent, std::ostringstream& os) {
  if (!s) return;
  std::string pad(indent * 2, ' ');
  switch (s->kind) {
    case StmtKind::Seq:
      for (const auto& b : s->body) print_stmt(p, b, indent, os);
      break;
    case StmtKind::For:
      os << pad << "for " << s->var->name << " in range(" << ex(s->value) << "):\n";
      print_stmt(p, s->body.at(0), indent + 1, os);
      break;
    case StmtKind::If:
      os << pad << "if " << ex(s->value) << ":\n";
      print_stmt(p, s->body.at(0), indent + 1, os);
      if (s->else_body) {
        os << pad << "else:\n";
        print_stmt(p, s->else_body, indent + 1, os);
      }
      break;
    case StmtKind::Let:
      // the variable's dtype when it is not the value's (a narrowing let: `blk: int32 = ...`)
      os << pad << s->var->name;
      if (s->value && s->var->dtype != s->value->dtype) os << ": " << s->var->dtype.name();
      os << " = " << ex(s->value) << "\n";
      break;
    case StmtKind::Instr:
      os << pad << print_instr(p, s->instr) << "\n";
      break;
  }
}

}  // namespace

std::string print_instr(const Program& p, const Instr& in, bool span) {
  std::string s = std::string(pipe_name(in.pipe())) + " " + std::visit(InstrPrinter{p}, in.op);
  if (span && in.span.known()) s += "  @" + std::to_string(in.span.line);
  return s;
}

std::string print_program(const Program& p) {
  std::ostringstream os;
  os << "ascend_kernel " << p.name << " " << kernel_type_name(p.kernel_type) << " blocks=" << ex(p.block_dim)
     << " workspace=" << (p.workspace_bytes ? ex(p.workspace_bytes) : "0");
  if (p.block_idx) os << " block_idx=" << p.block_idx->name;
  if (p.block_idx && p.sub_block_idx) os << " sub_block_idx=" << p.sub_block_idx->name;
  os << "\n";
  for (size_t i = 0; i < p.params.size(); ++i) {
    const auto& k = p.params[i];
    os << "  param " << i << " " << k.name << ": ";
    if (k.is_tensor) {
      os << "GM " << k.dtype.name() << "[";
      for (size_t d = 0; d < k.shape.size(); ++d) os << (d ? ", " : "") << ex(k.shape[d]);
      os << "]" << (k.is_output ? " out" : "") << (k.zeroed ? " zeroed" : "");
    } else {
      os << k.dtype.name();
    }
    os << "\n";
  }
  for (const auto& b : p.buffers) {
    os << "  buffer " << b.name << ": " << core_type_name(b.core) << " " << mem_name(b.mem) << " @" << b.offset
       << " +" << b.bytes << " " << b.dtype.name() << " " << format_name(b.format) << "\n";
  }
  for (CoreType c : {CoreType::AIC, CoreType::AIV})
    for (int m = 0; m < kNumMems; ++m)
      if (int64_t n = p.pool(c, static_cast<Mem>(m)))
        os << "  pool " << core_type_name(c) << " " << mem_name(static_cast<Mem>(m)) << " +" << n << "\n";
  if (p.aic) {
    os << "AIC:\n";
    print_stmt(p, p.aic, 1, os);
  }
  if (p.aiv) {
    os << "AIV:\n";
    print_stmt(p, p.aiv, 1, os);
  }
  return os.str();
}

}  // namespace tw::ascend
