#include "target/ascend/program_parser.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/parser.h"

namespace tw::ascend {

namespace {

using Vars = std::unordered_map<std::string, ir::Var>;

// The enumerator of E named `w` (E's values are 0 .. count-1 and `name` prints them).
template <class E>
std::optional<E> by_name(std::string_view w, int count, std::string_view (*name)(E)) {
  for (int i = 0; i < count; ++i)
    if (name(static_cast<E>(i)) == w) return static_cast<E>(i);
  return std::nullopt;
}
std::string_view pipe_text(Pipe p) { return pipe_name(p); }

// One line of the text: a cursor over it with the helpers the instruction forms need.
class Line {
 public:
  Line(std::string_view text, int line, const std::string& file, Vars& vars, const Program& p)
      : s_(text), end_(text.size()), line_(line), file_(file), vars_(vars), p_(p) {}

  [[noreturn]] void fail(const std::string& msg, size_t at, const std::string& hint = {}) const {
    throw ir::Error(msg, ir::Span{file_, line_, static_cast<int>(at) + 1}, hint);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, pos_); }
  size_t pos() const { return pos_; }
  void limit(size_t end) { end_ = end; }
  size_t end() const { return end_; }
  bool done() {
    skip();
    return pos_ >= end_;
  }
  void skip() {
    while (pos_ < end_ && s_[pos_] == ' ') ++pos_;
  }
  bool peek(std::string_view lit) {
    skip();
    return s_.substr(pos_, std::min(lit.size(), end_ - pos_)) == lit;
  }
  bool peek_digit() {
    skip();
    return pos_ < end_ && s_[pos_] >= '0' && s_[pos_] <= '9';
  }
  bool accept(std::string_view lit) {
    if (!peek(lit)) return false;
    pos_ += lit.size();
    return true;
  }
  void expect(std::string_view lit) {
    if (!accept(lit)) fail("expected '" + std::string(lit) + "', got " + got());
  }
  std::string got() {
    skip();
    if (pos_ >= end_) return "the end of the line";
    return "'" + std::string(s_.substr(pos_, std::min<size_t>(20, end_ - pos_))) + "'";
  }
  // A word: letters, digits and '_'.
  std::string word(const char* what) {
    skip();
    size_t j = pos_;
    while (j < end_ && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
    if (j == pos_) fail("expected " + std::string(what) + ", got " + got());
    std::string w(s_.substr(pos_, j - pos_));
    pos_ = j;
    return w;
  }
  // Whether the next word is `w` (not a prefix of a longer word); consumes it when so.
  bool accept_word(std::string_view w) {
    skip();
    size_t j = pos_ + w.size();
    if (s_.substr(pos_, std::min(w.size(), end_ - pos_)) != w) return false;
    if (j < end_ && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) return false;
    pos_ = j;
    return true;
  }
  template <class E>
  E enum_word(const char* what, int count, std::string_view (*name)(E)) {
    size_t at = (skip(), pos_);
    std::string w = word(what);
    auto e = by_name<E>(w, count, name);
    if (!e) fail("unknown " + std::string(what) + " '" + w + "'", at);
    return *e;
  }
  ir::DType dtype() {
    size_t at = (skip(), pos_);
    std::string w = word("a dtype");
    auto d = ir::parse_dtype(w);
    if (!d) fail("unknown dtype '" + w + "'", at, "dtypes: float16 bfloat16 float32 float64 int8 int32 int64 uint8 bool");
    return *d;
  }
  // "A->B" (returns {A, B}) or, when `single` is allowed, "A" (returns {A, A}).
  std::pair<ir::DType, ir::DType> dtype_pair(bool single) {
    ir::DType a = dtype();
    if (!accept("->")) {
      if (!single) fail("expected '->' and the destination dtype, got " + got());
      return {a, a};
    }
    return {a, dtype()};
  }
  // The expression at the cursor (up to the first token that cannot continue it).
  ir::Expr expr(bool declare = false) {
    skip();
    auto [e, used] = ir::parse_expr_prefix(s_.substr(pos_, end_ - pos_), vars_,
                                           ir::Span{file_, line_, static_cast<int>(pos_) + 1}, declare);
    pos_ = used == std::string::npos ? end_ : pos_ + used;
    return e;
  }
  // The expression that ends exactly at `stop` (a position after the cursor).
  ir::Expr expr_to(size_t stop) {
    struct Restore {
      size_t& end;
      size_t keep;
      ~Restore() { end = keep; }
    } restore{end_, end_};
    end_ = stop;
    ir::Expr e = expr();
    if (!done()) fail("unexpected " + got() + " after the expression");
    return e;
  }
  // " key=EXPR"
  ir::Expr field(std::string_view key) {
    while (!key.empty() && key[0] == ' ') key.remove_prefix(1);
    expect(std::string(key) + "=");
    return expr();
  }
  // "AxB" from the cursor to `stop` (npos: the end): the first split at an 'x' outside brackets
  // where both sides are whole expressions (printing either split gives the same text).
  std::pair<ir::Expr, ir::Expr> dims(size_t stop = std::string_view::npos) {
    skip();
    if (stop == std::string_view::npos) stop = end_;
    size_t start = pos_;
    int depth = 0;
    for (size_t x = start; x + 1 < stop; ++x) {
      if (s_[x] == '(' || s_[x] == '[') ++depth;
      if (s_[x] == ')' || s_[x] == ']') --depth;
      if (s_[x] != 'x' || depth != 0 || x == start) continue;
      try {
        pos_ = start;
        ir::Expr a = expr_to(x);
        pos_ = x + 1;
        ir::Expr b = expr_to(stop);
        pos_ = stop;
        return {a, b};
      } catch (const ir::Error&) {  // not this 'x': try the next one
      }
    }
    pos_ = start;
    fail("expected ROWSxCOLS (two expressions joined by 'x'), got " + got());
  }
  // "NAME[EXPR]": an on-chip buffer.
  LocalRef local() {
    size_t at = (skip(), pos_);
    std::string n = word("a buffer name");
    int b = p_.find_buffer(n);
    if (b < 0) fail("'" + n + "' is not a buffer of the program", at, "declare it with a 'buffer' line");
    expect("[");
    ir::Expr off = expr();
    expect("]");
    return LocalRef{b, off};
  }
  // "NAME[EXPR]": a tensor parameter, or `workspace`.
  GmRef gm() {
    size_t at = (skip(), pos_);
    std::string n = word("a tensor parameter or 'workspace'");
    int param = -2;
    if (n == "workspace") param = -1;
    for (size_t i = 0; i < p_.params.size() && param == -2; ++i)
      if (p_.params[i].name == n && p_.params[i].is_tensor) param = static_cast<int>(i);
    if (param == -2) fail("'" + n + "' is not a tensor parameter of the program (or 'workspace')", at);
    expect("[");
    ir::Expr off = expr();
    expect("]");
    return GmRef{param, off};
  }
  // Whether the operand at the cursor names a buffer (else a parameter).
  bool at_buffer() {
    skip();
    size_t j = pos_;
    while (j < end_ && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
    return p_.find_buffer(s_.substr(pos_, j - pos_)) >= 0;
  }
  VecOperand vop() {
    LocalRef r = local();
    expect("/");
    return VecOperand{r, expr()};
  }
  void finish() {
    if (!done()) fail("unexpected " + got() + " at the end of the instruction");
  }
  // Position of `lit` outside brackets at or after the cursor, or npos.
  size_t find_top(std::string_view lit) const {
    int depth = 0;
    for (size_t i = pos_; i + lit.size() <= end_; ++i) {
      if (depth == 0 && s_.substr(i, lit.size()) == lit) return i;
      if (s_[i] == '(' || s_[i] == '[') ++depth;
      if (s_[i] == ')' || s_[i] == ']') --depth;
    }
    return std::string_view::npos;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0, end_;
  int line_;
  const std::string& file_;
  Vars& vars_;
  const Program& p_;
};

// The instruction after the pipe word (the cursor is at the instruction's name).
InstrOp parse_instr(Line& L) {
  size_t name_at = (L.skip(), L.pos());
  std::string name = L.word("an instruction");
  auto flag = [&](const char* w) { return L.accept_word(w); };
  // Operands "DST <- SRC": the destination is read up to " <- ".
  auto dst_end = [&] {
    size_t at = L.find_top(" <- ");
    if (at == std::string_view::npos) L.fail("expected 'DST <- SRC' after " + name);
    return at;
  };
  // "DST <- SRC" then the rest of the instruction (`rest` reads it into c)
  auto local = [&] { return L.local(); };
  auto gm = [&] { return L.gm(); };
  auto move = [&](auto c, auto dst, auto src, auto rest) {
    c.dst = dst(), L.expect("<-"), c.src = src(), rest(c);
    return InstrOp(c);
  };
  auto vop_dst = [&] {
    size_t keep = L.end(), stop = dst_end();
    L.limit(stop);
    VecOperand v = L.vop();
    L.finish();
    L.limit(keep);
    L.expect("<-");
    return v;
  };
  if (name == "CopyGmToL1") {
    CopyGmToL1 c;
    c.dst = L.local(), L.expect("<-"), c.src = L.gm(), c.dtype = L.dtype();
    c.rows = L.field(" rows"), c.cols = L.field(" cols"), c.src_row_stride = L.field(" src_row_stride");
    if (L.accept("window_rows=")) c.window_rows = L.expr();
    if (L.accept("skip_rows=")) c.skip_rows = L.expr();
    if (L.accept("skip_cols=")) c.skip_cols = L.expr();
    if (L.accept("col_start=")) c.col_start = L.expr();
    L.expect("nz=");
    std::tie(c.dst_rows, c.dst_cols) = L.dims(L.find_top(" fill="));
    if (L.accept("fill=")) c.fill_dtype = L.dtype();
    return c;
  }
  auto burst = [&](auto& c) {
    c.dtype = L.dtype();
    c.n_rows = L.field(" n_rows"), c.row_bytes = L.field(" row_bytes"), c.src_stride = L.field(" src_stride"),
    c.dst_stride = L.field(" dst_stride");
  };
  if (name == "CopyGmToUb")
    return move(CopyGmToUb{}, local, gm, [&](auto& c) {
      burst(c), c.pad = flag("pad");
      if (L.accept("left=")) c.left = L.expr();
    });
  if (name == "CopyUbToGm") return move(CopyUbToGm{}, gm, local, [&](auto& c) { burst(c), c.atomic = flag("atomic"); });
  if (name == "CopyUbToUb") return move(CopyUbToUb{}, local, local, burst);
  if (name == "LoadL0") {
    LoadL0 c;
    c.dst = L.local(), L.expect("<-"), c.src = L.local(), c.dtype = L.dtype(), c.src_rows = L.field(" src_rows");
    L.expect("window=(");
    c.src_row = L.expr(), L.expect(","), c.src_col = L.expr(), L.expect(")");
    L.expect("dst=");
    std::tie(c.dst_rows, c.dst_cols) = L.dims(L.find_top(" transpose"));
    c.transpose = flag("transpose");
    return c;
  }
  if (name == "Mmad") {
    Mmad c;
    c.c = L.local(), L.expect("<-"), c.a = L.local(), L.expect("x"), c.b = L.local();
    std::tie(c.in_dtype, c.acc_dtype) = L.dtype_pair(false);
    c.m = L.field(" m"), c.n = L.field(" n"), c.k = L.field(" k"), c.init = L.field(" init");
    return c;
  }
  if (name == "Fixpipe")
    return move(Fixpipe{}, gm, local, [&](auto& c) {
      std::tie(c.src_dtype, c.dst_dtype) = L.dtype_pair(false);
      c.m = L.field("m"), c.n = L.field("n"), c.src_rows = L.field("src_rows");
      c.dst_row_stride = L.field("dst_row_stride"), c.relu = flag("relu"), c.atomic = flag("atomic");
    });
  if (name == "InitConstValue") {
    InitConstValue c;
    c.dst = L.local(), c.dtype = L.dtype(), c.repeatTimes = L.field(" repeatTimes"), c.blockNum = L.field(" blockNum"),
    c.dstGap = L.field(" dstGap"), c.initValue = L.field(" initValue");
    return c;
  }
  if (name == "DataCopyNd2Nz")
    return move(DataCopyNd2Nz{}, local, gm, [&](auto& c) {
      c.dtype = L.dtype(), c.ndNum = L.field("ndNum"), c.nValue = L.field("nValue"), c.dValue = L.field("dValue");
      c.srcNdMatrixStride = L.field("srcNdMatrixStride"), c.srcDValue = L.field("srcDValue");
      c.dstNzC0Stride = L.field("dstNzC0Stride"), c.dstNzNStride = L.field("dstNzNStride");
      c.dstNzMatrixStride = L.field("dstNzMatrixStride");
      if (L.accept("col_start=")) c.col_start = L.expr();
    });
  auto ext = [&](auto& c) {
    c.dtype = L.dtype();
    c.blockCount = L.field(" blockCount"), c.blockLen = L.field(" blockLen"), c.srcStride = L.field(" srcStride"),
    c.dstStride = L.field(" dstStride");
  };
  if (name == "DataCopyPad" && L.at_buffer()) {
    DataCopyPadGmToUb c;
    c.dst = L.local(), L.expect("<-"), c.src = L.gm(), ext(c);
    if ((c.isPad = flag("isPad")))
      c.leftPadding = L.field(" leftPadding"), c.rightPadding = L.field(" rightPadding"),
      c.paddingValue = L.field(" paddingValue");
    return c;
  }
  if (name == "DataCopyPad") return move(DataCopyPadUbToGm{}, gm, local, [&](auto& c) { ext(c), c.atomic = flag("atomic"); });
  if (name == "DataCopy") return move(DataCopyUbToUb{}, local, local, ext);
  if (name == "LoadData2D")
    return move(LoadData2D{}, local, local, [&](auto& c) {
      c.dtype = L.dtype(), c.startIndex = L.field("startIndex"), c.repeatTimes = L.field("repeatTimes");
      c.srcStride = L.field("srcStride"), c.sid = L.field("sid"), c.dstGap = L.field("dstGap");
      c.ifTranspose = flag("ifTranspose");
    });
  if (name == "LoadData3DV2")
    return move(LoadData3DV2{}, local, local, [&](auto& c) {
      c.dtype = L.dtype(), c.l1H = L.field("l1H"), c.l1W = L.field("l1W"), c.channelSize = L.field("channelSize");
      c.kExtension = L.field("kExtension"), c.mExtension = L.field("mExtension"), c.kStartPt = L.field("kStartPt");
      c.mStartPt = L.field("mStartPt");
    });
  auto fixpipe = [&](auto& c) {  // the fields FixpipeV220 and FixpipeL1 share, in printed order
    std::tie(c.src_dtype, c.dst_dtype) = L.dtype_pair(false);
    c.nSize = L.field("nSize"), c.mSize = L.field("mSize"), c.srcStride = L.field("srcStride");
    c.dstStride = L.field("dstStride");
    L.expect("quantPre=");
    c.quantPre = L.enum_word<QuantMode>("quant mode", 3, quant_mode_name);
  };
  if (name == "FixpipeV220")
    return move(FixpipeV220{}, gm, local, [&](auto& c) {
      fixpipe(c);
      c.reluEn = flag("reluEn"), c.ndNum = L.field("ndNum"), c.atomic = flag("atomic");
    });
  if (name == "FixpipeL1") return move(FixpipeL1{}, local, local, fixpipe);
  auto shape = [&](ir::Expr& rows, ir::Expr& cols) { std::tie(rows, cols) = L.dims(); };
  auto tensor_op = by_name<VecBinOp>(name, kVecTensorBinOps, vec_binop_name);
  if (!tensor_op && (name == "And" || name == "Or")) tensor_op = name == "And" ? VecBinOp::And : VecBinOp::Or;
  if (auto op = tensor_op) {
    VecBinary c;
    c.op = *op, c.dst = vop_dst(), c.a = L.vop(), L.expect(","), c.b = L.vop(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name.size() > 1 && name.back() == 's') {
    if (auto op = by_name<VecBinOp>(std::string_view(name).substr(0, name.size() - 1), 8, vec_binop_name)) {
      VecBinaryScalar c;
      c.op = *op, c.dst = vop_dst(), c.a = L.vop(), L.expect(","), c.scalar = L.expr(), c.dtype = L.dtype();
      shape(c.rows, c.cols);
      return c;
    }
  }
  if (auto op = by_name<VecUnOp>(name, 7, vec_unop_name)) {
    VecUnary c;
    c.op = *op, c.dst = vop_dst(), c.a = L.vop(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name == "Cast") {
    VecCast c;
    c.dst = vop_dst(), c.src = L.vop();
    std::tie(c.src_dtype, c.dst_dtype) = L.dtype_pair(false);
    c.round = L.enum_word<RoundMode>("round mode", 6, round_mode_name);
    shape(c.rows, c.cols);
    return c;
  }
  if (name == "Duplicate") {
    VecDup c;
    c.dst = vop_dst(), c.value = L.expr(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name == "Index") {
    VecIndex c;
    c.dst = vop_dst(), c.first = L.expr(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  for (ReduceAxis axis : {ReduceAxis::Row, ReduceAxis::Col}) {
    std::string prefix = axis == ReduceAxis::Row ? "RowReduce" : "ColReduce";
    if (name.rfind(prefix, 0) != 0) continue;
    auto op = by_name<ReduceOp>(std::string_view(name).substr(prefix.size()), 3, reduce_op_name);
    if (!op) L.fail("unknown reduction '" + name + "'", name_at);
    VecReduce c;
    c.op = *op, c.axis = axis, c.dst = vop_dst(), c.src = L.vop(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name.rfind("Select", 0) == 0 && name.size() == 8) {
    auto cmp = by_name<CmpMode>(std::string_view(name).substr(6), 6, cmp_mode_name);
    if (!cmp) L.fail("unknown select '" + name + "'", name_at);
    VecSelect c;
    c.cmp = *cmp, c.dst = vop_dst(), c.a = L.vop(), L.expect(",");
    if (L.at_buffer()) c.b = L.vop();
    else c.b = VecOperand{LocalRef{}, nullptr}, c.b_scalar = L.expr();
    c.cmp_dtype = L.dtype();
    L.expect("then");
    c.x = L.vop();
    L.expect("else");
    if (L.at_buffer()) c.y = L.vop();
    else c.y = VecOperand{LocalRef{}, nullptr}, c.y_scalar = L.expr();
    c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name.rfind("RowBroadcast", 0) == 0) {
    auto op = by_name<VecBinOp>(std::string_view(name).substr(12), kVecTensorBinOps, vec_binop_name);
    if (!op) L.fail("unknown row broadcast '" + name + "'", name_at);
    VecRowBroadcast c;
    c.op = *op, c.dst = vop_dst(), c.a = L.vop(), L.expect(","), c.vec = L.local(), c.dtype = L.dtype();
    shape(c.rows, c.cols);
    return c;
  }
  if (name == "L2" || name == "L0") {
    VecApi api = L.enum_word<VecApi>("vector API", kVecApiCount, vec_api_name);
    LocalRef dst, src0{-1, nullptr}, src1{-1, nullptr};
    ir::Expr scalar;
    dst = L.local();
    L.expect("<-");
    int n = vec_api_sources(api);
    if (n >= 1) src0 = L.local();
    if (n == 2) L.expect(","), src1 = L.local();
    if (vec_api_has_scalar(api)) {
      if (n) L.expect(",");
      scalar = L.expr();
    }
    auto [st, t] = L.dtype_pair(true);
    RoundMode round = RoundMode::None;
    if (api == VecApi::Cast) round = L.enum_word<RoundMode>("round mode", 6, round_mode_name);
    CmpMode cmp = CmpMode::LT;
    if (api == VecApi::Compare || api == VecApi::CompareScalar) cmp = L.enum_word<CmpMode>("compare mode", 6, cmp_mode_name);
    LocalRef sel{-1, nullptr};
    if (api == VecApi::Select || api == VecApi::SelectScalar) L.expect("sel="), sel = L.local();
    if (name == "L2") {
      VecCallL2 c;
      c.api = api, c.dtype = t, c.src_dtype = st, c.dst = dst, c.src0 = src0, c.src1 = src1, c.scalar = scalar;
      c.round = round, c.count = L.field(" count"), c.cmp = cmp, c.sel = sel;
      return c;
    }
    VecCallL0 c;
    c.api = api, c.dtype = t, c.src_dtype = st, c.dst = dst, c.src0 = src0, c.src1 = src1, c.scalar = scalar;
    c.cmp = cmp;
    c.round = round, c.mask = L.field(" mask"), c.repeat = L.field(" repeat");
    L.expect("blk=(");
    c.dst_blk = L.expr();
    if (n >= 1) L.expect(","), c.src0_blk = L.expr();
    if (n == 2) L.expect(","), c.src1_blk = L.expr();
    L.expect(")");
    L.expect("rep=(");
    c.dst_rep = L.expr();
    if (n >= 1) L.expect(","), c.src0_rep = L.expr();
    if (n == 2) L.expect(","), c.src1_rep = L.expr();
    L.expect(")");
    return c;
  }
  if (name.rfind("WholeReduce", 0) == 0) {
    auto op = by_name<ReduceOp>(std::string_view(name).substr(11), 3, reduce_op_name);
    if (!op) L.fail("unknown reduction '" + name + "'", name_at);
    WholeReduce c;
    c.op = *op, c.dst = L.local(), L.expect("<-"), c.src = L.local(), c.dtype = L.dtype();
    c.mask = L.field(" mask"), c.repeat = L.field(" repeat"), c.dst_rep = L.field(" dst_rep"),
    c.src_blk = L.field(" src_blk"), c.src_rep = L.field(" src_rep");
    return c;
  }
  if (name == "Brcb") {
    Brcb c;
    c.dst = L.local(), L.expect("<-"), c.src = L.local(), c.dtype = L.dtype();
    c.repeat = L.field(" repeat"), c.dst_blk = L.field(" dst_blk"), c.dst_rep = L.field(" dst_rep");
    return c;
  }
  if (name == "Gather") {
    Gather c;
    c.dst = L.local(), L.expect("<-"), c.src = L.local(), c.dtype = L.dtype();
    L.expect("offset="), c.offset = L.local();
    c.base = L.field(" base"), c.count = L.field(" count"), c.src_elems = L.field(" src_elems");
    return c;
  }
  if (name == "ScalarLoad") {  // ScalarLoad VAR <- GM|UB dtype (binds VAR: ProgramParser::stmt defines it)
    std::string v = L.word("the variable the load binds");
    L.expect("<-");
    ScalarLoad c;
    if (L.at_buffer()) c.ub = L.local();
    else c.src = L.gm();
    c.dtype = L.dtype();
    c.var = ir::var(v, c.dtype);
    return c;
  }
  if (name == "ScalarStore") {  // ScalarStore UB <- EXPR dtype
    ScalarStore c;
    c.dst = L.local();
    L.expect("<-");
    c.value = L.expr();
    c.dtype = L.dtype();
    return c;
  }
  if (name == "SetAtomicAdd") return SetAtomic{L.dtype()};
  if (name == "SetAtomicNone") return SetAtomic{};
  auto pipe = [&] { return L.enum_word<Pipe>("pipe", 8, pipe_text); };
  if (name == "SetFlag" || name == "WaitFlag") {
    L.expect("<");
    size_t at = L.pos();
    std::string pair = L.word("a pipe pair SRC_DST");
    size_t us = pair.find('_');
    auto src = by_name<Pipe>(std::string_view(pair).substr(0, us), 8, pipe_text);
    auto dst = us == std::string::npos ? std::nullopt : by_name<Pipe>(std::string_view(pair).substr(us + 1), 8, pipe_text);
    if (!src || !dst) L.fail("expected a pipe pair SRC_DST (e.g. MTE2_V), got '" + pair + "'", at);
    L.expect(">(");
    ir::Expr event = L.expr();
    L.expect(")");
    if (name == "SetFlag") return SetFlag{*src, *dst, event};
    return WaitFlag{*src, *dst, event};
  }
  if (name == "PipeBarrier") {
    L.expect("<");
    Pipe p = pipe();
    L.expect(">");
    return PipeBarrier{p};
  }
  if (name == "CrossCoreSetFlag" || name == "CrossCoreWaitFlag") {  // <MODE, PIPE>(ID); a wait's mode is optional
    bool set = name == "CrossCoreSetFlag";
    L.expect("<");
    std::optional<int> mode;
    if (set || L.peek_digit()) {
      size_t at = L.pos();
      std::string m = L.word("a mode");
      if (m.size() != 1 || m[0] < '0' || m[0] > '9') L.fail("expected the mode (a number), got '" + m + "'", at);
      mode = m[0] - '0';
      L.expect(",");
    }
    Pipe p = pipe();
    L.expect(">(");
    ir::Expr id = L.expr();
    L.expect(")");
    if (set) return CrossCoreSetFlag{*mode, p, id};
    return CrossCoreWaitFlag{id, p, mode};
  }
  L.fail("unknown instruction '" + name + "'", name_at);
}

class ProgramParser {
 public:
  ProgramParser(std::string_view text, std::string file) : file_(std::move(file)) {
    size_t at = 0;
    while (at <= text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      lines_.push_back(text.substr(at, nl - at));
      at = nl + 1;
    }
    while (!lines_.empty() && lines_.back().empty()) lines_.pop_back();
  }

  Program program() {
    if (lines_.empty()) throw ir::Error("empty program text: expected 'ascend_kernel NAME ...'", ir::Span{file_, 1, 1});
    Line h = line(0);
    h.expect("ascend_kernel");
    p_.name = h.word("the kernel name");
    p_.kernel_type = h.enum_word<KernelType>("kernel type", kNumKernelTypes, kernel_type_name);
    p_.span = ir::Span{file_, 1, 1};
    // blocks= and workspace= may use shape variables, which the parameter lines declare: read them after those
    size_t i = 1;
    for (; i < lines_.size() && lines_[i].rfind("  param ", 0) == 0; ++i) param(i);
    for (; i < lines_.size() && lines_[i].rfind("  buffer ", 0) == 0; ++i) buffer(i);
    for (; i < lines_.size() && lines_[i].rfind("  pool ", 0) == 0; ++i) pool(i);
    h.expect("blocks=");
    size_t ws = h.find_top(" workspace=");
    if (ws == std::string_view::npos) h.fail("expected ' workspace=' after the block count");
    p_.block_dim = h.expr_to(ws);
    h.expect("workspace=");
    size_t bi = h.find_top(" block_idx=");
    p_.workspace_bytes = h.expr_to(bi == std::string_view::npos ? h.end() : bi);
    if (h.accept("block_idx=")) {
      size_t at = h.pos();
      p_.block_idx = ir::var(h.word("the block index name"));
      define(p_.block_idx, h, at);
      if (h.accept("sub_block_idx=")) {
        at = h.pos();
        p_.sub_block_idx = ir::var(h.word("the sub-block index name"));
        define(p_.sub_block_idx, h, at);  // the AIV's; expert mode also replicates code using it into the AIC
      }
    }
    h.finish();
    for (const auto& code : {"AIC:", "AIV:"}) {
      if (i < lines_.size() && lines_[i] == code) {
        ++i;
        (code[2] == 'C' ? p_.aic : p_.aiv) = block(i, 1);
      }
    }
    if (i < lines_.size())
      throw ir::Error("unexpected line: expected 'AIC:', 'AIV:' or a statement indented under them",
                      ir::Span{file_, static_cast<int>(i) + 1, 1});
    return p_;
  }

 private:
  Line line(size_t i) { return Line(lines_[i], static_cast<int>(i) + 1, file_, vars_, p_); }
  void define(const ir::Var& v, Line& L, size_t at) {
    if (!vars_.emplace(v->name, v).second) L.fail("'" + v->name + "' is already defined", at, "use another name");
  }

  void param(size_t i) {
    Line L = line(i);
    L.expect("param");
    size_t at = (L.skip(), L.pos());
    if (L.word("the parameter index") != std::to_string(p_.params.size()))
      L.fail("expected parameter index " + std::to_string(p_.params.size()), at);
    KernelParam k;
    size_t name_at = (L.skip(), L.pos());
    k.name = L.word("the parameter name");
    L.expect(":");
    if (L.accept_word("GM")) {
      k.dtype = L.dtype();
      L.expect("[");
      if (!L.accept("]")) {
        do {
          std::set<std::string> known;
          for (const auto& kv : vars_) known.insert(kv.first);
          k.shape.push_back(L.expr(/*declare=*/true));
          for (const auto& [n, v] : vars_)  // the shape variables this dimension declared
            if (!known.count(n)) p_.shape_vars.push_back(v);
        } while (L.accept(","));
        L.expect("]");
      }
      k.is_output = L.accept_word("out");
      k.zeroed = k.is_output && L.accept_word("zeroed");
    } else {
      k.is_tensor = false;
      k.dtype = L.dtype();
      k.var = ir::var(k.name, k.dtype);
      define(k.var, L, name_at);
    }
    L.finish();
    p_.params.push_back(std::move(k));
  }
  void buffer(size_t i) {
    Line L = line(i);
    L.expect("buffer");
    BufferDecl b;
    size_t at = (L.skip(), L.pos());
    b.name = L.word("the buffer name");
    if (p_.find_buffer(b.name) >= 0) L.fail("buffer '" + b.name + "' is declared twice", at);
    L.expect(":");
    b.core = L.enum_word<CoreType>("core type", 2, core_type_name);
    b.mem = L.enum_word<Mem>("memory", kNumMems, mem_name);
    L.expect("@");
    b.offset = integer(L, "the byte offset");
    L.expect("+");
    b.bytes = integer(L, "the size in bytes");
    b.dtype = L.dtype();
    b.format = L.enum_word<Format>("format", 4, format_name);
    L.finish();
    p_.buffers.push_back(std::move(b));
  }
  void pool(size_t i) {
    Line L = line(i);
    L.expect("pool");
    size_t at = (L.skip(), L.pos());
    CoreType c = L.enum_word<CoreType>("core type", 2, core_type_name);
    Mem m = L.enum_word<Mem>("memory", kNumMems, mem_name);
    if (m == Mem::GM) L.fail("GM has no pool", at);
    if (p_.pool(c, m) != 0) L.fail("the pool of " + std::string(core_type_name(c)) + " " + std::string(mem_name(m)) + " is declared twice", at);
    L.expect("+");
    p_.pool(c, m) = integer(L, "the size in bytes");
    L.finish();
  }
  static int64_t integer(Line& L, const char* what) {
    size_t at = (L.skip(), L.pos());
    std::string w = L.word(what);
    if (w.find_first_not_of("0123456789") != std::string::npos || w.size() > 18)
      L.fail("expected " + std::string(what) + " (an integer), got '" + w + "'", at);
    return std::stoll(w);
  }

  static int indent_of(std::string_view s) {
    size_t n = s.find_first_not_of(' ');
    return n == std::string_view::npos ? -1 : static_cast<int>(n);
  }

  // The statements indented exactly `level` levels from line i on; stops at a shallower line.
  StmtPtr block(size_t& i, int level) {
    std::vector<StmtPtr> body;
    Vars keep = vars_;  // lets are visible in the rest of their block
    while (i < lines_.size()) {
      int ind = indent_of(lines_[i]);
      if (ind < level * 2) break;
      if (ind != level * 2)
        throw ir::Error("unexpected indentation: expected " + std::to_string(level * 2) + " spaces",
                        ir::Span{file_, static_cast<int>(i) + 1, ind + 1});
      if (lines_[i].substr(ind).rfind("else:", 0) == 0) break;
      body.push_back(stmt(i, level));
    }
    vars_ = std::move(keep);
    if (body.size() == 1) return body[0];
    return seq(std::move(body));
  }

  StmtPtr stmt(size_t& i, int level) {
    std::string_view text = lines_[i];
    Line L = line(i);
    size_t at = (L.skip(), L.pos());
    if (L.accept_word("for")) {
      size_t vat = (L.skip(), L.pos());
      ir::Var v = ir::var(L.word("the loop variable"));
      L.expect("in range(");
      if (text.size() < 2 || text.substr(text.size() - 2) != "):") L.fail("expected the line to end with '):'", text.size());
      size_t colon = text.size() - 2;
      ir::Expr extent = L.expr_to(colon);
      ++i;
      Vars keep = vars_;
      vars_.erase(v->name);  // a loop variable may reuse an outer name
      define(v, L, vat);
      StmtPtr body = block(i, level + 1);
      vars_ = std::move(keep);
      return for_(v, extent, body);
    }
    if (L.accept_word("if")) {
      if (text.back() != ':') L.fail("expected the line to end with ':'", text.size());
      ir::Expr cond = L.expr_to(text.size() - 1);
      ++i;
      StmtPtr then_body = block(i, level + 1);
      StmtPtr else_body;
      if (i < lines_.size() && lines_[i] == std::string(level * 2, ' ') + "else:") {
        ++i;
        else_body = block(i, level + 1);
      }
      return if_(cond, then_body, else_body);
    }
    std::string first = L.word("a statement");
    std::optional<ir::DType> let_type;  // `NAME: DTYPE = EXPR`: a let whose variable's dtype is not the value's
    if (L.accept(":")) let_type = L.dtype();
    if (L.accept("= ")) {  // let
      ir::Expr value = L.expr_to(text.size());
      ir::Var v = ir::var(first, let_type ? *let_type : value->dtype);
      vars_.erase(first);
      define(v, L, at);
      ++i;
      return let(v, value);
    }
    auto pipe = by_name<Pipe>(first, 8, pipe_text);
    if (!pipe) L.fail("expected a statement (for, if, VAR = EXPR or PIPE INSTRUCTION), got '" + first + "'", at);
    // the span suffix "  @LINE"
    ir::Span span;
    size_t sp = text.rfind("  @");
    if (sp != std::string_view::npos && sp > L.pos() &&
        text.find_first_not_of("0123456789", sp + 3) == std::string_view::npos && sp + 3 < text.size() &&
        text.size() - (sp + 3) <= 9) {  // a line number that fits an int
      span = ir::Span{file_, std::stoi(std::string(text.substr(sp + 3))), 0};
      L.limit(sp);
    }
    InstrOp op = parse_instr(L);
    L.finish();
    if (pipe_of(op) != *pipe)
      L.fail("instruction " + std::string(instr_name(op)) + " runs on pipe " + std::string(pipe_name(pipe_of(op))) +
                 ", not " + first,
             at);
    if (auto* load = std::get_if<ScalarLoad>(&op)) {  // binds its variable like a let
      vars_.erase(load->var->name);
      define(load->var, L, at);
    }
    ++i;
    return instr(std::move(op), span);
  }

  std::string file_;
  std::vector<std::string_view> lines_;
  Program p_;
  Vars vars_;
};

}  // namespace

Program parse_program(std::string_view text, const std::string& filename) {
  return ProgramParser(text, filename).program();
}

}  // namespace tw::ascend
