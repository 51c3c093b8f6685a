#include "target/ascend/select_vector_calls.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "ir/printer.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/plan_memory.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::DType;
using ir::Error;
using ir::Expr;
using ir::Span;

using ir::arith::add;
using ir::arith::mul;
std::optional<int64_t> cst(const Expr& e) { return e ? ir::as_const_int(e) : std::nullopt; }

constexpr int64_t kMaxRepeat = 255;  // repeatTimes is uint8

// A positive constant that provably divides the integer value of e (1 when nothing is known):
// constants, products, sums and differences, min / max of such terms.
int64_t known_factor(const Expr& e) {
  if (!e) return 1;
  if (auto v = ir::as_const_int(e)) return *v == 0 ? 0 : std::abs(*v);
  if (e->kind != ir::ExprKind::Binary) return 1;
  const auto* b = ir::as<ir::BinaryNode>(e);
  int64_t fa = known_factor(b->a), fb = known_factor(b->b);
  switch (b->op) {
    case BinOp::Mul: return fa == 0 || fb == 0 ? 0 : fa * fb;
    case BinOp::Add:
    case BinOp::Sub:
    case BinOp::Min:
    case BinOp::Max: return std::gcd(fa, fb);
    case BinOp::Div: case BinOp::FloorDiv: case BinOp::CeilDiv: case BinOp::Mod: case BinOp::EQ: case BinOp::NE:
    case BinOp::LT: case BinOp::LE: case BinOp::GT: case BinOp::GE: case BinOp::And: case BinOp::Or:
    case BinOp::BitAnd: case BinOp::BitOr: case BinOp::BitXor: case BinOp::Shl: case BinOp::Shr: return 1;
  }
  return 1;
}

// One level-0 chunk: the row and column it starts at (elements), its mask and repeat.
struct Chunk {
  Expr r0, c0, mask, rep;
};

class Selector {
 public:
  Selector(const Program& p, const target::Target& t) : p_(p), out_(p), ub_bytes_(usable_bytes(p, t.ascend, Mem::UB)) {}

  Program run() {
    out_.aic = code(p_.aic, CoreType::AIC);
    out_.aiv = code(p_.aiv, CoreType::AIV);
    return std::move(out_);
  }

 private:
  // ---- statements

  StmtPtr code(const StmtPtr& body, CoreType core) {
    if (!body) return body;
    core_ = core;
    scratch_ = -1;
    scratch_need_ = 0;
    StmtPtr s = stmt(body);
    if (scratch_ >= 0) place_scratch();
    return s;
  }

  StmtPtr stmt(const StmtPtr& s) {
    if (!s) return s;
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<StmtPtr> body;
        for (const auto& b : s->body) append(b, body);
        return seq(std::move(body), s->span);
      }
      case StmtKind::For: return for_(s->var, s->value, stmt(s->body.at(0)), s->span);
      case StmtKind::If: return if_(s->value, stmt(s->body.at(0)), stmt(s->else_body), s->span);
      case StmtKind::Let: return s;
      case StmtKind::Instr: {
        if (!is_high_level_vector(s->instr.op)) return s;
        std::vector<StmtPtr> body;
        append(s, body);
        return seq(std::move(body), s->span);
      }
    }
    return s;
  }

  void append(const StmtPtr& s, std::vector<StmtPtr>& out) {
    if (!s || s->kind != StmtKind::Instr || !is_high_level_vector(s->instr.op)) {
      out.push_back(stmt(s));
      return;
    }
    span_ = s->instr.span;
    std::visit([&](const auto& x) { expand(x, out); }, s->instr.op);
  }

  // ---- emission helpers

  void call(InstrOp op, std::vector<StmtPtr>& out) const {
    if (window_) {  // each Duplicate call of a VecDup with a window check carries it
      if (auto* c = std::get_if<VecCallL2>(&op)) c->window = *window_;
      if (auto* c = std::get_if<VecCallL0>(&op)) c->window = *window_;
    }
    out.push_back(instr(std::move(op), span_));
  }
  const WindowCheck* window_ = nullptr;  // the VecDup being expanded's, when it has one
  void barrier(std::vector<StmtPtr>& out) const { call(PipeBarrier{Pipe::V}, out); }
  // A barrier before reusing the scratch area, unless the statement just before is one.
  void reuse_barrier(std::vector<StmtPtr>& out) const {
    if (!out.empty() && out.back()->kind == StmtKind::Instr)
      if (auto* b = std::get_if<PipeBarrier>(&out.back()->instr.op); b && b->pipe == Pipe::V) return;
    barrier(out);
  }

  // Wraps what `body` emits in If(rows > 0 && cols > 0) unless both are positive constants; emits
  // nothing when one is a constant <= 0 (no call).
  void guarded(const Expr& rows, const Expr& cols, std::vector<StmtPtr>& out,
               const std::function<void(std::vector<StmtPtr>&)>& body) {
    Expr cond;
    for (const Expr& n : {rows, cols}) {
      if (auto v = cst(n)) {
        if (*v <= 0) return;
        continue;
      }
      Expr c = ir::binary(BinOp::GT, n, ir::int_imm(0, n->dtype));
      cond = cond ? ir::binary(BinOp::And, cond, c) : c;
    }
    if (!cond) {
      body(out);
      return;
    }
    std::vector<StmtPtr> inner;
    body(inner);
    out.push_back(if_(cond, seq(std::move(inner), span_), nullptr, span_));
  }

  // Level-0 iteration over rows x cols with at most `per_repeat` columns per call: constant sizes
  // that fit emit one call; others a For over row chunks of 255 and / or column chunks.
  void level0(const Expr& rows, const Expr& cols, int64_t per_repeat, std::vector<StmtPtr>& out,
              const std::function<void(const Chunk&, std::vector<StmtPtr>&)>& body, int64_t max_rep = kMaxRepeat) {
    auto r = cst(rows), c = cst(cols);
    Chunk k{C(0), C(0), cols, rows};
    std::vector<StmtPtr> row_body, col_body;
    ir::Var vr, vc;
    std::vector<StmtPtr>* cur = &out;
    if (!(r && *r <= max_rep)) {
      vr = ir::var("tw_r");
      ir::Var rep = ir::var("tw_rep");
      k.r0 = mul(vr, C(max_rep));
      row_body.push_back(let(rep, ir::arith::min(ir::arith::sub(rows, k.r0), C(max_rep)), span_));
      k.rep = rep;
      cur = &row_body;
    }
    if (!(c && *c <= per_repeat)) {
      vc = ir::var("tw_c");
      ir::Var mask = ir::var("tw_mask");
      k.c0 = mul(vc, C(per_repeat));
      col_body.push_back(let(mask, ir::arith::min(ir::arith::sub(cols, k.c0), C(per_repeat)), span_));
      k.mask = mask;
      body(k, col_body);
      cur->push_back(for_(vc, ir::arith::ceildiv(cols, C(per_repeat)), seq(std::move(col_body), span_), span_));
    } else {
      body(k, *cur);
    }
    if (vr) out.push_back(for_(vr, ir::arith::ceildiv(rows, C(max_rep)), seq(std::move(row_body), span_), span_));
  }

  // ---- operands and fields

  static LocalRef at(const LocalRef& r, const Expr& elems, int64_t bytes) {
    if (auto v = cst(elems); v && *v == 0) return r;
    return LocalRef{r.buffer, add(r.offset ? r.offset : C(0), mul(elems, C(bytes)))};
  }
  // The element (r0, c0) of a 2-D operand.
  static LocalRef at(const VecOperand& v, const Chunk& k, int64_t bytes) {
    return at(v.at, add(mul(k.r0, v.row_stride), k.c0), bytes);
  }

  // A uint8 field: a constant must be 0..255 (else a located error naming `what` and the fix).
  Expr u8(const Expr& e, const std::string& what, const std::string& fix) const {
    if (auto v = cst(e); v && (*v < 0 || *v > 255))
      throw Error(what + " is " + std::to_string(*v) + ", but the AscendC field is uint8 (0..255)", span_, fix);
    return e;
  }
  // The repeat stride (32 B blocks) of a 2-D operand read or written row by row. With one row the
  // stride is never used: no checks, and a value that does not fit is printed as 0.
  Expr rep_stride(const VecOperand& v, DType t, const Expr& rows, const char* role) const {
    Expr blocks = ir::arith::floordiv(mul(v.row_stride, C(t.bytes())), C(32));
    if (auto r = cst(rows); r && *r == 1) {
      auto b = cst(blocks);
      return b && (*b < 0 || *b > 255) ? C(0) : blocks;
    }
    aligned_rows(v, t, rows, role);
    return u8(blocks, "the repeat stride of the " + std::string(role) + " (in 32 B blocks)",
              "use rows of at most " + std::to_string(255 * 32 / t.bytes()) + " " + std::string(t.name()) +
                  " elements, or a tile whose rows are contiguous");
  }
  // Rows of a 2-D operand (more than one) must start on 32 B blocks: a constant row stride in bytes
  // is a multiple of 32, a symbolic one provably so (known_factor); else a located error (flooring
  // the stride would address the wrong rows).
  void aligned_rows(const VecOperand& v, DType t, const Expr& rows, const char* role) const {
    if (auto r = cst(rows); r && *r == 1) return;
    Expr bytes = mul(v.row_stride, C(t.bytes()));
    if (!cst(bytes) && known_factor(bytes) % 32 != 0)
      throw Error("the " + std::string(role) + " of this vector instruction has rows " + ir::print(bytes) +
                      " B apart, a run-time value not provably a multiple of 32 B: a level-0 repeat stride counts 32 B "
                      "blocks (flooring it would address the wrong rows)",
                  span_, "give the tile a row length that is a constant, or a multiple of " + std::to_string(32 / t.bytes()) +
                             " " + std::string(t.name()) + " elements by construction (e.g. ceildiv(n, " +
                             std::to_string(32 / t.bytes()) + ") * " + std::to_string(32 / t.bytes()) + ")");
    if (auto b = cst(bytes); b && *b % 32 != 0)
      throw Error("the " + std::string(role) + " of this vector instruction has rows " + std::to_string(*b) +
                      " B apart, not a multiple of 32 B: a level-0 repeat stride counts 32 B blocks",
                  span_, "give the tile a row length whose bytes are a multiple of 32 (pad the columns)");
  }
  // Rows more than 255 blocks of 32 B apart (a constant stride): no uint8 repeat stride reaches the
  // next row, so the calls go along each row instead (one row per call, in a Program For).
  static bool wide(const VecOperand& v, DType t, const Expr& rows) {
    if (auto r = cst(rows); r && *r == 1) return false;
    auto b = cst(mul(v.row_stride, C(t.bytes())));
    return b && *b % 32 == 0 && *b / 32 > kMaxRepeat;
  }
  // The calls over one row of `cols` elements, `per_repeat` per repeat: body(index of the first
  // repeat in the row, mask, repeat) for the whole repeats (calls of <= max_rep, the row read with a
  // repeat stride of per_repeat elements) and once for the rest (one repeat, a smaller mask).
  void along_row(const Expr& cols, int64_t per_repeat, std::vector<StmtPtr>& out,
                 const std::function<void(const Expr&, const Expr&, const Expr&, std::vector<StmtPtr>&)>& body,
                 int64_t max_rep = kMaxRepeat) {
    Expr full = ir::arith::floordiv(cols, C(per_repeat));
    Expr tail = ir::arith::sub(cols, mul(full, C(per_repeat)));
    guarded(full, C(1), out, [&](std::vector<StmtPtr>& o) {
      level0(full, C(per_repeat), per_repeat, o, [&](const Chunk& k, std::vector<StmtPtr>& b) {
        body(k.r0, k.mask, k.rep, b);
      }, max_rep);
    });
    guarded(tail, C(1), out, [&](std::vector<StmtPtr>& o) { body(full, tail, C(1), o); });
  }
  // Constant rows x cols with fewer rows than 256 B column chunks (one wide row, a few rows, as a
  // row in column blocks gives): calls along each row (a Program For over the rows, each call's
  // repeats going along its row) are fewer than one call per column chunk whose repeats step over
  // the rows (238 calls of one repeat for a 15232-column float32 row, each paying the issue
  // overhead). The same instructions on the same elements, only addressed differently: the results
  // are bit for bit those of the column-chunk form.
  static bool few_rows(const Expr& rows, const Expr& cols, int64_t per_repeat) {
    auto r = cst(rows), c = cst(cols);
    if (!r || !c || *r < 1 || *c < 1) return false;
    const int64_t full = *c / per_repeat, along = (full + kMaxRepeat - 1) / kMaxRepeat + (*c % per_repeat ? 1 : 0);
    return *r * along < (*c + per_repeat - 1) / per_repeat * ((*r + kMaxRepeat - 1) / kMaxRepeat);
  }
  // The per-row forms' loop over the rows: `body` (addressing row `r`) in a Program For, or as is
  // with r = 0 for one row (row0 gives the index to address with).
  static Expr row0(const ir::Var& r, const Expr& rows) {
    auto n = cst(rows);
    return n && *n == 1 ? C(0) : Expr(r);
  }
  void for_rows(const ir::Var& r, const Expr& rows, std::vector<StmtPtr> body, std::vector<StmtPtr>& out) const {
    if (auto n = cst(rows); n && *n == 1) {
      for (auto& b : body) out.push_back(std::move(b));
      return;
    }
    out.push_back(for_(r, rows, seq(std::move(body), span_), span_));
  }
  static Expr one(DType t) { return t.is_float() ? ir::float_imm(1.0, t) : ir::int_imm(1, t); }

  static bool contiguous(std::initializer_list<const VecOperand*> ops, const Expr& rows, const Expr& cols) {
    if (auto r = cst(rows); r && *r == 1) return true;
    std::string c = ir::print(cols);
    for (const auto* v : ops)
      if (ir::print(v->row_stride) != c) return false;
    return true;
  }

  // ---- scratch area

  // Reserves `bytes` of the core's scratch buffer (one per core, sized to the largest need) and
  // returns its index.
  int scratch(int64_t bytes) {
    bytes += scratch_base_;
    if (scratch_ < 0) {
      scratch_ = static_cast<int>(out_.buffers.size());
      std::string name = "tw_vec_scratch";
      while (out_.find_buffer(name) >= 0) name += "_";
      BufferDecl b;
      b.name = name, b.core = core_, b.mem = Mem::UB, b.dtype = ir::DTypeCode::u8, b.span = span_;
      out_.buffers.push_back(b);
    }
    if (bytes > scratch_need_) scratch_need_ = bytes, scratch_span_ = span_;
    return scratch_;
  }
  void place_scratch() {
    int64_t end = 0, staged = 0;  // staged: the most T.Pipelined stages of a UB tile of the core
    for (const auto& b : out_.buffers)
      if (b.core == core_ && b.mem == Mem::UB && &b != &out_.buffers[scratch_]) {
        end = std::max(end, b.offset + b.bytes);
        staged = std::max(staged, b.stages);
      }
    BufferDecl& s = out_.buffers[scratch_];
    s.offset = round_up(end, 32);
    s.bytes = round_up(scratch_need_, 32);
    s.shape = {s.bytes};
    s.span = scratch_span_;
    out_.pool(core_, Mem::UB) = std::max(out_.pool(core_, Mem::UB), s.offset + s.bytes);  // the scratch area is in the pool
    // (planned buffers that overflow the UB already are the simulator's capacity report); a UB
    // capacity error, so that lower_ascend runs T.Pipelined with fewer stages when UB tiles are
    // staged (fuzz14 F3: 2 stages of a 2 x 4096 float32 chunk left no scratch), else the block's
    // rows in groups when it can (split_rows)
    if (end <= ub_bytes_ && s.offset + s.bytes > ub_bytes_)
      throw CapacityError("the vector calls need " + std::to_string(s.bytes) + " B of UB scratch (row reduce wider than one repeat "
                      "/ row broadcast) after " + std::to_string(end) + " B of planned buffers; the UB has " +
                      std::to_string(ub_bytes_) + " B",
                  scratch_span_, "use smaller vector tiles (fewer rows or columns)", Mem::UB, s.offset + s.bytes, ub_bytes_,
                  staged);
  }
  // The most rows an instruction can have, for sizing the scratch area: `rows` when constant, else
  // what fits the operand `holder` that holds one element per row (its buffer's bytes / eb; the
  // simulator checks every access against the buffer).
  int64_t max_rows(const Expr& rows, const LocalRef& holder, int64_t eb) const {
    if (auto r = cst(rows)) return *r;
    if (holder.buffer < 0 || holder.buffer >= static_cast<int>(p_.buffers.size()))
      throw Error("internal: vector instruction refers to buffer #" + std::to_string(holder.buffer), span_);
    return p_.buffers[holder.buffer].bytes / eb;
  }

  // ---- elementwise

  struct Elementwise {
    VecApi api;
    DType dtype, src_dtype;
    const VecOperand* dst;
    const VecOperand* a = nullptr;
    const VecOperand* b = nullptr;
    Expr scalar;
    RoundMode round = RoundMode::None;
    bool b_block = false;  // b is one 32 B block read by every repeat (block and repeat stride 0)
  };

  void elementwise(const Elementwise& e, const Expr& rows, const Expr& cols, std::vector<StmtPtr>& out) {
    guarded(rows, cols, out, [&](std::vector<StmtPtr>& o) { elementwise_calls(e, rows, cols, o); });
  }
  // elementwise's calls for rows, cols > 0. A block operand b (b_block) takes level-0 calls only:
  // along the rows * cols elements of contiguous operands, along each row of rows too far apart for
  // a repeat stride, else one repeat per row.
  void elementwise_calls(const Elementwise& e, const Expr& rows, const Expr& cols, std::vector<StmtPtr>& o) {
    const int64_t db = e.dtype.bytes(), sb = e.src_dtype.bytes();
    bool cont = e.b_block ? contiguous({e.dst, e.a}, rows, cols)
                : e.b     ? contiguous({e.dst, e.a, e.b}, rows, cols)
                : e.a     ? contiguous({e.dst, e.a}, rows, cols) : contiguous({e.dst}, rows, cols);
    const int64_t P = 256 / std::max(db, sb);
    // level-0 calls along `n` elements from d and a, b's block for every repeat
    auto along_block = [&](const LocalRef& d, const LocalRef& a, const Expr& n, std::vector<StmtPtr>& body) {
      along_row(n, P, body, [&](const Expr& j, const Expr& mask, const Expr& rep, std::vector<StmtPtr>& b) {
        Expr c0 = mul(j, C(P));
        call(VecCallL0{e.api, e.dtype, e.src_dtype, at(d, c0, db), at(a, c0, sb), e.b->at, e.scalar, e.round, mask, rep,
                       C(1), C(1), C(0), C(P * db / 32), C(P * sb / 32), C(0)}, b);
      });
    };
    if (cont && e.b_block) return along_block(e.dst->at, e.a->at, mul(rows, cols), o);
    if (cont) {
      VecCallL2 c{e.api, e.dtype, e.src_dtype, e.dst->at, {}, {}, e.scalar, e.round, mul(rows, cols)};
      if (e.a) c.src0 = e.a->at;
      if (e.b) c.src1 = e.b->at;
      call(c, o);
      return;
    }
    if (wide(*e.dst, e.dtype, rows) || (e.a && wide(*e.a, e.src_dtype, rows)) ||
        (e.b && wide(*e.b, e.src_dtype, rows)) || few_rows(rows, cols, P)) {
      // rows too far apart for a repeat stride, or fewer rows than column chunks: one level-2 call
      // per row (level-0 along the row for b_block)
      aligned_rows(*e.dst, e.dtype, rows, "destination");
      if (e.a) aligned_rows(*e.a, e.src_dtype, rows, "first source");
      if (e.b && !e.b_block) aligned_rows(*e.b, e.src_dtype, rows, "second source");
      ir::Var r = ir::var("tw_row");
      const Expr ri = row0(r, rows);
      auto row = [&](const VecOperand& v, int64_t bytes) { return at(v.at, mul(ri, v.row_stride), bytes); };
      std::vector<StmtPtr> body;
      if (e.b_block) {
        along_block(row(*e.dst, db), row(*e.a, sb), cols, body);
      } else {
        VecCallL2 c{e.api, e.dtype, e.src_dtype, row(*e.dst, db), {}, {}, e.scalar, e.round, cols};
        if (e.a) c.src0 = row(*e.a, sb);
        if (e.b) c.src1 = row(*e.b, sb);
        call(c, body);
      }
      for_rows(r, rows, std::move(body), o);
      return;
    }
    Expr drep = rep_stride(*e.dst, e.dtype, rows, "destination");
    Expr arep = e.a ? rep_stride(*e.a, e.src_dtype, rows, "first source") : C(0);
    Expr brep = e.b && !e.b_block ? rep_stride(*e.b, e.src_dtype, rows, "second source") : C(0);
    level0(rows, cols, P, o, [&](const Chunk& k, std::vector<StmtPtr>& body) {
      VecCallL0 c{e.api, e.dtype, e.src_dtype, at(*e.dst, k, db), {}, {}, e.scalar, e.round, k.mask, k.rep,
                  C(1), C(e.a ? 1 : 0), C(e.b && !e.b_block ? 1 : 0), drep, arep, brep};
      if (e.a) c.src0 = at(*e.a, k, sb);
      if (e.b) c.src1 = e.b_block ? e.b->at : at(*e.b, k, sb);
      call(c, body);
    });
  }

  static VecApi binary_api(VecBinOp op) {
    switch (op) {
      case VecBinOp::Add: return VecApi::Add;
      case VecBinOp::Sub: return VecApi::Sub;
      case VecBinOp::Mul: return VecApi::Mul;
      case VecBinOp::Div: return VecApi::Div;
      case VecBinOp::Max: return VecApi::Max;
      case VecBinOp::Min: return VecApi::Min;
      case VecBinOp::And: return VecApi::And;
      case VecBinOp::Or: return VecApi::Or;
      case VecBinOp::ShiftLeft: case VecBinOp::ShiftRight:
        throw ir::Error("internal: a tensor-tensor " + std::string(vec_binop_name(op)) +
                        " (the shifts have only the scalar form; select_instructions makes no other)");
    }
    return VecApi::Add;
  }
  static VecApi unary_api(VecUnOp op) { return static_cast<VecApi>(static_cast<int>(VecApi::Exp) + static_cast<int>(op)); }

  void expand(const VecBinary& x, std::vector<StmtPtr>& out) {
    if (x.op == VecBinOp::And || x.op == VecBinOp::Or) return bitwise(x, out);
    elementwise({binary_api(x.op), x.dtype, x.dtype, &x.dst, &x.a, &x.b, {}, RoundMode::None}, x.rows, x.cols, out);
  }
  // int32 a & b, a | b: And / Or on the tiles' int16 lanes (program.h vec_api_lane_bytes), two lanes
  // an element: one level-2 call of 2 * rows * cols lanes over contiguous operands, else one per row
  // (2 * cols lanes; every row starts on a 32 B block).
  void bitwise(const VecBinary& x, std::vector<StmtPtr>& out) {
    const VecApi api = binary_api(x.op);
    const int64_t eb = x.dtype.bytes(), lanes = eb / vec_api_lane_bytes(api, x.dtype);
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      if (contiguous({&x.dst, &x.a, &x.b}, x.rows, x.cols)) {
        call(VecCallL2{api, x.dtype, x.dtype, x.dst.at, x.a.at, x.b.at, {}, RoundMode::None,
                       mul(mul(x.rows, x.cols), C(lanes))}, o);
        return;
      }
      aligned_rows(x.dst, x.dtype, x.rows, "destination");
      aligned_rows(x.a, x.dtype, x.rows, "first source");
      aligned_rows(x.b, x.dtype, x.rows, "second source");
      ir::Var r = ir::var("tw_row");
      auto row = [&](const VecOperand& v) { return at(v.at, mul(r, v.row_stride), eb); };
      VecCallL2 c{api, x.dtype, x.dtype, row(x.dst), row(x.a), row(x.b), {}, RoundMode::None, mul(x.cols, C(lanes))};
      o.push_back(for_(r, x.rows, instr(c, span_), span_));
    });
  }
  void expand(const VecBinaryScalar& x, std::vector<StmtPtr>& out) {
    VecApi api = VecApi::Adds;
    Expr s = x.scalar;
    switch (x.op) {
      case VecBinOp::Add: break;
      case VecBinOp::Sub: s = ir::unary(ir::UnOp::Neg, s); break;
      case VecBinOp::Mul: api = VecApi::Muls; break;
      case VecBinOp::Div:
        if (auto r = exact_reciprocal(s, x.dtype)) {
          api = VecApi::Muls, s = *r;
          break;
        }
        return divide(x, out);
      case VecBinOp::Max: api = VecApi::Maxs; break;
      case VecBinOp::Min: api = VecApi::Mins; break;
      case VecBinOp::ShiftLeft: api = VecApi::ShiftLeft; break;
      case VecBinOp::ShiftRight: api = VecApi::ShiftRight; break;
      case VecBinOp::And: case VecBinOp::Or:
        throw ir::Error("internal: a tile-scalar " + std::string(vec_binop_name(x.op)) +
                        " (And/Or have only the tensor form; select_instructions makes no other)");
    }
    elementwise({api, x.dtype, x.dtype, &x.dst, &x.a, nullptr, s, RoundMode::None}, x.rows, x.cols, out);
  }
  // 1 / s where x * (1 / s) is x / s for every x: s a constant +-2^k with 2^k and 2^-k normal
  // numbers of t (the product and the quotient are the same real number, rounded once).
  static std::optional<Expr> exact_reciprocal(const Expr& s, DType t) {
    double v = 0;
    if (s->kind == ir::ExprKind::FloatImm) v = ir::as<ir::FloatImmNode>(s)->value;
    else if (auto c = ir::as_const_int(s)) v = static_cast<double>(*c);
    else return std::nullopt;
    int e2 = 0;
    if (!std::isfinite(v) || std::abs(std::frexp(v, &e2)) != 0.5) return std::nullopt;
    const int k = e2 - 1, kmax = t == DType(ir::DTypeCode::f16) ? 14 : 126;
    if (k < -kmax || k > kmax) return std::nullopt;
    return ir::float_imm(1.0 / v, t);
  }
  // x / s correctly rounded, as cpu's `/` (Muls by 1 / s is not: hunt15 F1): s Duplicated into one
  // 32 B block of the scratch area, then Div reads that block for every repeat (block and repeat
  // stride 0). The scalar may be a run-time value.
  void divide(const VecBinaryScalar& x, std::vector<StmtPtr>& out) {
    const DType t = x.dtype;
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      const int64_t eb = t.bytes();
      int buf = scratch(32);
      VecOperand blk{LocalRef{buf, C(scratch_base_)}, C(0)};
      reuse_barrier(o);  // the scratch area may still be read by an earlier V instruction
      Expr s = x.scalar->dtype == t ? x.scalar : ir::cast(x.scalar, t);
      call(VecCallL2{VecApi::Duplicate, t, t, blk.at, {}, {}, s, RoundMode::None, C(32 / eb)}, o);
      barrier(o);
      elementwise_calls({VecApi::Div, t, t, &x.dst, &x.a, &blk, {}, RoundMode::None, true}, x.rows, x.cols, o);
    });
  }
  void expand(const VecUnary& x, std::vector<StmtPtr>& out) {
    elementwise({unary_api(x.op), x.dtype, x.dtype, &x.dst, &x.a, nullptr, {}, RoundMode::None}, x.rows, x.cols, out);
  }
  void expand(const VecCast& x, std::vector<StmtPtr>& out) {
    elementwise({VecApi::Cast, x.dst_dtype, x.src_dtype, &x.dst, &x.src, nullptr, {}, x.round}, x.rows, x.cols, out);
  }
  void expand(const VecDup& x, std::vector<StmtPtr>& out) {
    window_ = x.window.dims.empty() && !x.window.preload ? nullptr : &x.window;
    elementwise({VecApi::Duplicate, x.dtype, x.dtype, &x.dst, nullptr, nullptr, x.value, RoundMode::None}, x.rows, x.cols, out);
    window_ = nullptr;
  }

  // The index (iota) dst[r][c] = first + r * cols + c: one level-2 CreateVecIndex over contiguous
  // rows, else one per row (firstValue first + r * cols; each row's start 32 B aligned, as the API
  // needs: the simulator reports a row that is not).
  void expand(const VecIndex& x, std::vector<StmtPtr>& out) {
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      if (contiguous({&x.dst}, x.rows, x.cols)) {
        call(VecCallL2{VecApi::CreateVecIndex, x.dtype, x.dtype, x.dst.at, {}, {}, x.first, RoundMode::None,
                       mul(x.rows, x.cols)}, o);
        return;
      }
      ir::Var r = ir::var("tw_row");
      Expr first = add(x.first, ir::cast(mul(r, x.cols), x.dtype));
      VecCallL2 c{VecApi::CreateVecIndex, x.dtype, x.dtype, at(x.dst.at, mul(r, x.dst.row_stride), x.dtype.bytes()), {}, {},
                  first, RoundMode::None, x.cols};
      o.push_back(for_(r, x.rows, instr(c, span_), span_));
    });
  }

  // ---- reductions

  void expand(const VecReduce& x, std::vector<StmtPtr>& out) {
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      if (x.axis == ReduceAxis::Col) col_reduce(x, o);
      else if (x.dtype == DType(ir::DTypeCode::i32)) int_row_reduce(x, o);
      else row_reduce(x, o);
    });
  }

  // An int32 row reduction (WholeReduce takes half/float only) as exact int32 Add/Max/Min calls,
  // kIntRowGroup rows at a time through the scratch area (acc: one 32 B block per row, then spread:
  // eight blocks per row):
  //  1. acc[r] = the row's first 32 B block, then acc[r] op= each further block of the row (the
  //     last one masked to the row's end): lane l combines the row's columns l, l + 8, l + 16 ...;
  //  2. Brcb spreads acc[r][0..7] over the row's eight blocks, block k filled with acc[r][k];
  //  3. block 0 op= blocks 1 .. min(8, cols) - 1 (a halving tree for 8): each lane of block 0 holds
  //     the row's result;
  //  4. dst is written one 32 B block (8 rows) at a time: for k = 7 .. 0, lanes 0 .. k of the block
  //     take row 8b + k's block 0 (mask k + 1, each call overwriting the lower lanes of the one
  //     before), so lane k ends with row 8b + k's result.
  // Sums are exact while every partial sum fits int32 (the simulator reports one that does not).
  void int_row_reduce(const VecReduce& x, std::vector<StmtPtr>& out) {
    constexpr int64_t eb = 4, kIntRowGroup = 64;
    const DType t = x.dtype;
    auto cols = cst(x.cols);
    if (!cols)
      throw Error("int32 row reduce over " + ir::print(x.cols) + " columns with a symbolic size is not supported "
                  "(it needs a scratch area of known size)",
                  span_, "use a constant tile shape");
    const VecApi api = x.op == ReduceOp::Sum ? VecApi::Add : x.op == ReduceOp::Max ? VecApi::Max : VecApi::Min;
    // rows more than 255 blocks apart (wide()): step 1 runs per row of the group (a Program For),
    // one repeat per call, as the other reductions issue such rows one per call
    const bool per_row = wide(x.src, t, x.rows);
    if (per_row) aligned_rows(x.src, t, x.rows, "source");
    const Expr srep = per_row ? C(0) : rep_stride(x.src, t, x.rows, "source");
    const int64_t full = *cols / 8, tail = *cols % 8, lanes = std::min<int64_t>(8, *cols);
    auto rows = cst(x.rows);
    const int64_t gmax = rows ? std::min(*rows, kIntRowGroup) : kIntRowGroup;
    const int buf = scratch(gmax * (32 + 256));
    const LocalRef acc{buf, C(0)}, spread{buf, C(gmax * 32)};
    // a level-0 call: binary `api` d = s0 op s1, or a copy (Muls by 1) d = s0 when s1 has no buffer
    auto l0 = [&](VecApi a, const LocalRef& d, const LocalRef& s0, const LocalRef& s1, const Expr& mask,
                  const Expr& rep, int64_t drep, const Expr& s0rep, const Expr& s1rep, std::vector<StmtPtr>& o) {
      bool copy = s1.buffer < 0;
      call(VecCallL0{copy ? VecApi::Muls : a, t, t, d, s0, s1, copy ? one(t) : Expr{}, RoundMode::None, mask, rep,
                     C(1), C(1), C(copy ? 0 : 1), C(drep), s0rep, copy ? C(0) : s1rep},
           o);
    };
    // 1. fold the blocks of g rows from src into acc (g repeats, one per row)
    auto fold = [&](const LocalRef& into, const LocalRef& src, const Expr& g, std::vector<StmtPtr>& o) {
      l0(api, into, src, {}, C(lanes), g, 1, srep, C(0), o);
      if (full > 2) {
        ir::Var v = ir::var("tw_b");
        std::vector<StmtPtr> body;
        barrier(body);
        l0(api, into, into, at(src, mul(add(v, C(1)), C(8)), eb), C(8), g, 1, C(1), srep, body);
        o.push_back(for_(v, C(full - 1), seq(std::move(body), span_), span_));
      } else {
        for (int64_t j = 1; j < full; ++j) {
          barrier(o);
          l0(api, into, into, at(src, C(j * 8), eb), C(8), g, 1, C(1), srep, o);
        }
      }
      if (full >= 1 && tail > 0) {
        barrier(o);
        l0(api, into, into, at(src, C(full * 8), eb), C(tail), g, 1, C(1), srep, o);
      }
    };
    auto group = [&](const Expr& r0, const Expr& g, std::vector<StmtPtr>& o) {
      reuse_barrier(o);  // the scratch area may still be read by an earlier V instruction
      const LocalRef src = at(x.src.at, mul(r0, x.src.row_stride), eb);
      if (per_row) {
        ir::Var rr = ir::var("tw_row");
        std::vector<StmtPtr> body;
        fold(at(acc, mul(rr, C(8)), eb), at(src, mul(rr, x.src.row_stride), eb), C(1), body);
        o.push_back(for_(rr, g, seq(std::move(body), span_), span_));
      } else {
        fold(acc, src, g, o);
      }
      // 2. spread each row's 8 lanes over 8 blocks
      barrier(o);
      call(Brcb{t, spread, acc, g, C(1), C(8)}, o);
      // 3. combine the row's blocks into block 0
      if (lanes == 8) {
        for (int64_t half : {4, 2, 1}) {
          barrier(o);
          l0(api, spread, spread, at(spread, C(half * 8), eb), C(half * 8), g, 8, C(8), C(8), o);
        }
      } else {
        for (int64_t k = 1; k < lanes; ++k) {
          barrier(o);
          l0(api, spread, spread, at(spread, C(k * 8), eb), C(8), g, 8, C(8), C(8), o);
        }
      }
      // 4. gather lane 0 of each row's block 0 into dst, 8 rows per 32 B block
      const LocalRef dst = at(x.dst.at, r0, eb);
      const Expr blocks = ir::arith::floordiv(g, C(8)), rest = ir::arith::mod(g, C(8));
      std::vector<StmtPtr> whole;
      for (int64_t k = 7; k >= 0; --k) {
        barrier(whole);
        l0(api, dst, at(spread, C(k * 64), eb), {}, C(k + 1), blocks, 1, C(64), C(0), whole);
      }
      if (auto b = cst(blocks); !b || *b > 0) {
        if (b) for (auto& w : whole) o.push_back(std::move(w));
        else o.push_back(if_(ir::binary(BinOp::GT, blocks, C(0)), seq(std::move(whole), span_), nullptr, span_));
      }
      const LocalRef dst_rest = at(dst, mul(blocks, C(8)), eb);
      const LocalRef spread_rest = at(spread, mul(blocks, C(8 * 64)), eb);
      if (auto rc = cst(rest)) {
        for (int64_t k = *rc - 1; k >= 0; --k) {
          barrier(o);
          l0(api, dst_rest, at(spread_rest, C(k * 64), eb), {}, C(k + 1), C(1), 1, C(0), C(0), o);
        }
      } else {  // k = rest - 1 - v for v = 0 .. rest - 1
        ir::Var v = ir::var("tw_k");
        Expr k = ir::arith::sub(ir::arith::sub(rest, C(1)), v);
        std::vector<StmtPtr> body;
        barrier(body);
        l0(api, dst_rest, at(spread_rest, mul(k, C(64)), eb), {}, add(k, C(1)), C(1), 1, C(0), C(0), body);
        o.push_back(for_(v, rest, seq(std::move(body), span_), span_));
      }
    };
    if (rows && *rows <= kIntRowGroup) {
      group(C(0), x.rows, out);
      return;
    }
    ir::Var vg = ir::var("tw_g"), g = ir::var("tw_rows");
    std::vector<StmtPtr> body;
    Expr r0 = mul(vg, C(kIntRowGroup));
    body.push_back(let(g, ir::arith::min(ir::arith::sub(x.rows, r0), C(kIntRowGroup)), span_));
    group(r0, g, body);
    out.push_back(for_(vg, ir::arith::ceildiv(x.rows, C(kIntRowGroup)), seq(std::move(body), span_), span_));
  }

  // dst = row 0 (Muls by 1), then dst = dst op row r for r = 1 .. rows - 1 (dependent calls).
  void col_reduce(const VecReduce& x, std::vector<StmtPtr>& out) {
    const DType t = x.dtype;
    const int64_t eb = t.bytes();
    VecApi api = x.op == ReduceOp::Sum ? VecApi::Add : x.op == ReduceOp::Max ? VecApi::Max : VecApi::Min;
    call(VecCallL2{VecApi::Muls, t, t, x.dst.at, x.src.at, {}, one(t), RoundMode::None, x.cols}, out);
    if (auto r = cst(x.rows); r && *r <= 1) return;
    ir::Var v = ir::var("tw_r");
    std::vector<StmtPtr> body;
    barrier(body);
    call(VecCallL2{api, t, t, x.dst.at, x.dst.at, at(x.src.at, mul(add(v, C(1)), x.src.row_stride), eb), {},
                   RoundMode::None, x.cols},
         body);
    out.push_back(for_(v, ir::arith::sub(x.rows, C(1)), seq(std::move(body), span_), span_));
  }

  void row_reduce(const VecReduce& x, std::vector<StmtPtr>& out) {
    const DType t = x.dtype;
    const int64_t eb = t.bytes(), P = 256 / eb;
    auto cols = cst(x.cols);
    // rows of more than 255 repeats (a 32000-wide float32 row, hunt11a F2) as well: the per-chunk
    // form below strides its partial results a row apart (WholeReduceSum's uint8 dstRepStride)
    // and issues one call per 256 B chunk, the per-row form runs along the row
    const bool long_rows = cols && round_up((*cols + P - 1) / P * eb, 32) / eb > kMaxRepeat;
    // a sum of fewer rows than column chunks (few_rows): the per-row form issues its WholeReduceSum
    // repeats along the row, the same partial sums in the same places (max / min keep their fold:
    // the order decides which of -0 and +0 a max of the two gives)
    if (wide(x.src, t, x.rows) || long_rows || (x.op == ReduceOp::Sum && few_rows(x.rows, x.cols, P))) {
      wide_row_reduce(x, out);
      return;
    }
    Expr srep = rep_stride(x.src, t, x.rows, "source");
    auto whole = [&](const LocalRef& dst, const LocalRef& src, const Expr& mask, const Expr& rep, const Expr& dst_rep,
                     const Expr& src_rep, std::vector<StmtPtr>& body) {
      call(WholeReduce{x.op, t, dst, src, mask, rep, dst_rep, C(1), src_rep}, body);
    };
    // float WholeReduceMax/Min need an 8-byte aligned destination (WholeReduceMax.md): chunks of
    // 254 rows, so every chunk's first result lands on an even element of the destination
    const int64_t dst_chunk = x.op != ReduceOp::Sum && eb == 4 ? kMaxRepeat - 1 : kMaxRepeat;
    if (cols && *cols <= P) {
      level0(x.rows, x.cols, P, out, [&](const Chunk& k, std::vector<StmtPtr>& body) {
        whole(at(x.dst.at, k.r0, eb), at(x.src, k, eb), k.mask, k.rep, C(1), srep, body);
      }, dst_chunk);
      return;
    }
    if (!cols)
      throw Error("row reduce over " + ir::print(x.cols) + " columns with a symbolic size is not supported (wider than "
                  "one repeat it needs a scratch area of known size)",
                  span_, "use a constant tile shape");
    const int64_t rows = max_rows(x.rows, x.dst.at, eb), chunks = (*cols + P - 1) / P;
    if (x.op != ReduceOp::Sum) {
      // Fold the column chunks into one repeat-wide row per row (rows P elements = 8 blocks apart).
      int buf = scratch(rows * 256);
      LocalRef s{buf, C(scratch_base_)};
      reuse_barrier(out);  // the scratch area may still be read by an earlier V instruction
      level0(x.rows, C(P), P, out, [&](const Chunk& k, std::vector<StmtPtr>& body) {
        call(VecCallL0{VecApi::Muls, t, t, at(s, mul(k.r0, C(P)), eb), at(x.src, k, eb), {}, one(t),
                       RoundMode::None, k.mask, k.rep, C(1), C(1), C(0), C(8), srep, C(0)},
             body);
      });
      VecApi api = x.op == ReduceOp::Max ? VecApi::Max : VecApi::Min;
      for (int64_t j = 1; j < chunks; ++j) {
        barrier(out);
        level0(x.rows, C(std::min(P, *cols - j * P)), P, out, [&](const Chunk& k, std::vector<StmtPtr>& body) {
          LocalRef row = at(s, mul(k.r0, C(P)), eb);
          call(VecCallL0{api, t, t, row, row, at(x.src, Chunk{k.r0, C(j * P), k.mask, k.rep}, eb), {}, RoundMode::None,
                         k.mask, k.rep, C(1), C(1), C(1), C(8), C(8), srep},
               body);
        });
      }
      barrier(out);
      level0(x.rows, C(P), P, out, [&](const Chunk& k, std::vector<StmtPtr>& body) {
        whole(at(x.dst.at, k.r0, eb), at(s, mul(k.r0, C(P)), eb), k.mask, k.rep, C(1), C(8), body);
      }, dst_chunk);
      return;
    }
    // Sum. Step 1: reduce each column chunk of every row to scratch[r * S + j]; step 2: the partials.
    const int64_t S = round_up(chunks * eb, 32) / eb;
    int buf = scratch(rows * S * eb);
    LocalRef s{buf, C(scratch_base_)};
    reuse_barrier(out);
    for (int64_t j = 0; j < chunks; ++j) {
      level0(x.rows, C(std::min(P, *cols - j * P)), P, out, [&](const Chunk& k, std::vector<StmtPtr>& body) {
        whole(at(s, add(mul(k.r0, C(S)), C(j)), eb), at(x.src, Chunk{k.r0, C(j * P), k.mask, k.rep}, eb), k.mask, k.rep,
              u8(C(S), "WholeReduceSum's dstRepStride (" + std::to_string(chunks) + " partial sums per row)",
                 "use rows of fewer columns"),
              srep, body);
      });
    }
    barrier(out);
    partials(x, s, S, chunks, rows * S * eb, out);
  }

  // Step 2 of a row reduce: dst = the reduce of the `n` partial results per row at s (rows S
  // elements apart), itself a row reduce (more than one repeat of partials: in stages), whose
  // scratch lies after the partials' `bytes`.
  void partials(const VecReduce& x, const LocalRef& s, int64_t S, int64_t n, int64_t bytes, std::vector<StmtPtr>& out) {
    VecReduce y = x;
    y.src = VecOperand{s, C(S)};
    y.cols = C(n);
    const int64_t base = scratch_base_;
    scratch_base_ += round_up(bytes, 32);
    row_reduce(y, out);
    scratch_base_ = base;
  }

  // A row reduce whose source rows are more than 255 blocks apart: per row (a Program For), the
  // WholeReduce repeats go along the row (repeat stride 8 blocks), one partial result per 256 B of
  // columns into scratch[r * S + j]; then the partials are reduced (partials()). Float Max/Min write
  // 8-byte aligned destinations only (WholeReduceMax.md): the whole repeats start at an even
  // partial (calls of 254); when their count is odd the last, partial repeat is issued first,
  // together with the whole repeat before it (both under its mask, an even start), and the whole
  // repeats then overwrite that one with its true result (Max/Min of a subset is overwritten).
  void wide_row_reduce(const VecReduce& x, std::vector<StmtPtr>& out) {
    const DType t = x.dtype;
    const int64_t eb = t.bytes(), P = 256 / eb;
    auto cols = cst(x.cols);
    if (!cols)
      throw Error("row reduce over " + ir::print(x.cols) + " columns with a symbolic size is not supported (rows "
                  "more than 8160 B apart are reduced through a scratch area of known size)",
                  span_, "use a constant tile shape");
    aligned_rows(x.src, t, x.rows, "source");
    const int64_t full = *cols / P, tail = *cols % P, n = full + (tail ? 1 : 0);
    const int64_t S = round_up(n * eb, 32) / eb, rows = max_rows(x.rows, x.dst.at, eb);
    const bool even = x.op != ReduceOp::Sum && eb == 4;
    int buf = scratch(rows * S * eb);
    LocalRef s{buf, C(scratch_base_)};
    reuse_barrier(out);
    ir::Var r = ir::var("tw_row");
    const Expr ri = row0(r, x.rows);
    auto src = [&](const Expr& c0) { return at(x.src.at, add(mul(ri, x.src.row_stride), c0), eb); };
    auto part = [&](const Expr& j) { return at(s, add(mul(ri, C(S)), j), eb); };
    auto whole = [&](const Expr& j, const Expr& c0, const Expr& mask, const Expr& rep, std::vector<StmtPtr>& body) {
      call(WholeReduce{x.op, t, part(j), src(c0), mask, rep, C(1), C(1), C(P * eb / 32)}, body);
    };
    const bool tail_first = tail && even && full % 2 == 1;
    if (tail_first) {
      std::vector<StmtPtr> body;
      whole(C(full - 1), C((full - 1) * P), C(tail), C(2), body);
      for_rows(r, x.rows, std::move(body), out);
      barrier(out);
    }
    std::vector<StmtPtr> body;
    if (full > 0)
      along_row(C(full * P), P, body, [&](const Expr& j, const Expr& mask, const Expr& rep, std::vector<StmtPtr>& b) {
        whole(j, mul(j, C(P)), mask, rep, b);
      }, even ? kMaxRepeat - 1 : kMaxRepeat);
    if (tail && !tail_first) whole(C(full), C(full * P), C(tail), C(1), body);
    for_rows(r, x.rows, std::move(body), out);
    barrier(out);
    partials(x, s, S, n, rows * S * eb, out);
  }

  // ---- row broadcast

  void expand(const VecRowBroadcast& x, std::vector<StmtPtr>& out) {
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      const DType t = x.dtype;
      const int64_t eb = t.bytes(), rows = max_rows(x.rows, x.vec, eb);
      int buf = scratch((rows + 7) / 8 * 8 * 32);
      LocalRef s{buf, C(scratch_base_)};
      reuse_barrier(o);  // the scratch area may still be read by an earlier V instruction
      // One 32 B block per row holding vec[r], read with block stride 0 by the binary op; Brcb's
      // repeatTimes (8 rows each) is uint8: calls of 255 repeats (2040 rows) when rows may be more.
      Expr nrep = ir::arith::ceildiv(x.rows, C(8));
      auto brcb = [&](const Expr& first, const Expr& rep, std::vector<StmtPtr>& b) {
        call(Brcb{t, at(s, mul(first, C(8 * 32 / eb)), eb), at(x.vec, mul(first, C(8)), eb), rep, C(1), C(8)}, b);
      };
      if ((rows + 7) / 8 <= kMaxRepeat) {
        brcb(C(0), nrep, o);
      } else {
        ir::Var i = ir::var("tw_b"), rep = ir::var("tw_brep");
        std::vector<StmtPtr> body;
        body.push_back(let(rep, ir::arith::min(ir::arith::sub(nrep, mul(i, C(kMaxRepeat))), C(kMaxRepeat)), span_));
        brcb(mul(i, C(kMaxRepeat)), rep, body);
        o.push_back(for_(i, ir::arith::ceildiv(nrep, C(kMaxRepeat)), seq(std::move(body), span_), span_));
      }
      barrier(o);
      const int64_t P = 256 / eb;
      if (wide(x.dst, t, x.rows) || wide(x.a, t, x.rows) || few_rows(x.rows, x.cols, P)) {
        // rows too far apart for a repeat stride, or fewer rows than column chunks: per row, the
        // repeats go along the row (repeat stride 8 blocks) and all read the row's block (block
        // and repeat stride 0)
        aligned_rows(x.dst, t, x.rows, "destination");
        aligned_rows(x.a, t, x.rows, "first source");
        ir::Var r = ir::var("tw_row");
        const Expr ri = row0(r, x.rows);
        std::vector<StmtPtr> body;
        along_row(x.cols, P, body, [&](const Expr& j, const Expr& mask, const Expr& rep, std::vector<StmtPtr>& b) {
          Expr c0 = mul(j, C(P));
          call(VecCallL0{binary_api(x.op), t, t, at(x.dst.at, add(mul(ri, x.dst.row_stride), c0), eb),
                         at(x.a.at, add(mul(ri, x.a.row_stride), c0), eb), at(s, mul(ri, C(32 / eb)), eb), {},
                         RoundMode::None, mask, rep, C(1), C(1), C(0), C(8), C(8), C(0)},
               b);
        });
        for_rows(r, x.rows, std::move(body), o);
        return;
      }
      Expr drep = rep_stride(x.dst, t, x.rows, "destination"), arep = rep_stride(x.a, t, x.rows, "first source");
      level0(x.rows, x.cols, P, o, [&](const Chunk& k, std::vector<StmtPtr>& body) {
        call(VecCallL0{binary_api(x.op), t, t, at(x.dst, k, eb), at(x.a, k, eb), at(s, mul(k.r0, C(32 / eb)), eb), {},
                       RoundMode::None, k.mask, k.rep, C(1), C(1), C(0), drep, arep, C(1)},
             body);
      });
    });
  }

  // ---- data-dependent select

  // Per pass over `count` contiguous elements: Compare / CompareScalar (level-0, one repeat per
  // 256 B of the compared type) into a bit mask in the scratch area, then level-2 Select /
  // SelectScalar. Compare and Select address the mask 32 B aligned (api_rules), and a repeat writes
  // P / 8 bytes (8 for float32, 16 for float16), so the whole repeats go in calls of a multiple of
  // 32 B of mask (at most 252 repeats), and a partial last repeat (count % P elements) writes its
  // bits at the next 32 B boundary. When that is not where they follow the whole repeats', the
  // Select is two calls: the whole repeats' elements, then the tail's (its operands start on a
  // 256 B boundary of the compared type). Contiguous operands: one pass over the tile; else one
  // pass per row (a Program For; every row starts on a 32 B block).
  void expand(const VecSelect& x, std::vector<StmtPtr>& out) {
    guarded(x.rows, x.cols, out, [&](std::vector<StmtPtr>& o) {
      const DType ct = x.cmp_dtype, t = x.dtype;
      const int64_t ceb = ct.bytes(), eb = t.bytes(), P = 256 / ceb;
      const bool has_b = x.b.at.buffer >= 0, has_y = x.y.at.buffer >= 0;
      auto cols = cst(x.cols), rows = cst(x.rows);
      if (!cols || !rows)
        throw Error("a data-dependent T.where over a " + ir::print(x.rows) + " x " + ir::print(x.cols) +
                        " tile with a run-time size is not supported (its bit mask lives in a scratch area of known size)",
                    span_, "use a constant tile shape");
      std::string c = ir::print(x.cols);
      bool cont = *rows == 1;
      if (!cont) {
        cont = true;
        for (const VecOperand* v : {&x.dst, &x.a, &x.b, &x.x, &x.y})
          if (v->at.buffer >= 0 && ir::print(v->row_stride) != c) cont = false;
      }
      const int64_t n = cont ? *rows * *cols : *cols;
      const int64_t full = n / P, tail = n % P;
      const int64_t tail_at = round_up(full * P / 8, 32);  // the partial repeat's mask byte
      const bool split = tail > 0 && tail_at != full * P / 8;
      int buf = scratch(round_up(tail > 0 ? tail_at + P / 8 : full * P / 8, 32));
      const LocalRef bits{buf, C(scratch_base_)};
      auto pass = [&](const std::function<LocalRef(const VecOperand&, int64_t)>& row, std::vector<StmtPtr>& b) {
        reuse_barrier(b);  // the scratch area may still be read by an earlier V instruction
        auto compare = [&](const Expr& e0, const LocalRef& dst, const Expr& mask, const Expr& rep,
                           std::vector<StmtPtr>& bb) {
          VecCallL0 k{has_b ? VecApi::Compare : VecApi::CompareScalar, ct, ct, dst,
                      at(row(x.a, ceb), e0, ceb), has_b ? at(row(x.b, ceb), e0, ceb) : LocalRef{}, x.b_scalar,
                      RoundMode::None, mask, rep, C(1), C(1), C(1), C(8), C(8), C(8)};
          k.cmp = x.cmp;
          call(k, bb);
        };
        guarded(C(full), C(1), b, [&](std::vector<StmtPtr>& g) {
          level0(C(full), C(P), P, g, [&](const Chunk& k, std::vector<StmtPtr>& bb) {
            compare(mul(k.r0, C(P)), at(bits, mul(k.r0, C(P / 8)), 1), k.mask, k.rep, bb);
          }, kMaxRepeat / 4 * 4);  // whole 32 B of mask per call (P / 8 = 8 or 16 bytes a repeat)
        });
        if (tail > 0) compare(C(full * P), at(bits, C(tail_at), 1), C(tail), C(1), b);
        barrier(b);
        auto select = [&](int64_t e0, int64_t count, const LocalRef& sel) {
          VecCallL2 s{has_y ? VecApi::Select : VecApi::SelectScalar, t, t, at(row(x.dst, eb), C(e0), eb),
                      at(row(x.x, eb), C(e0), eb), has_y ? at(row(x.y, eb), C(e0), eb) : LocalRef{}, x.y_scalar,
                      RoundMode::None, C(count)};
          s.sel = sel;
          call(s, b);
        };
        if (!split) {
          select(0, n, bits);
        } else {
          select(0, full * P, bits);
          select(full * P, tail, at(bits, C(tail_at), 1));
        }
      };
      if (cont) {
        pass([](const VecOperand& v, int64_t) { return v.at; }, o);
        return;
      }
      aligned_rows(x.dst, t, x.rows, "destination");
      aligned_rows(x.a, ct, x.rows, "first compared operand");
      if (has_b) aligned_rows(x.b, ct, x.rows, "second compared operand");
      aligned_rows(x.x, t, x.rows, "selected operand");
      if (has_y) aligned_rows(x.y, t, x.rows, "other selected operand");
      ir::Var r = ir::var("tw_row");
      std::vector<StmtPtr> body;
      pass([&](const VecOperand& v, int64_t bytes) { return at(v.at, mul(r, v.row_stride), bytes); }, body);
      o.push_back(for_(r, x.rows, seq(std::move(body), span_), span_));
    });
  }

  template <class T>
  void expand(const T&, std::vector<StmtPtr>&) {
    throw Error("internal: select_vector_calls met a non-vector instruction", span_);
  }

  const Program& p_;
  Program out_;
  int64_t ub_bytes_;
  CoreType core_ = CoreType::AIV;
  int scratch_ = -1;
  int64_t scratch_need_ = 0;
  int64_t scratch_base_ = 0;  // the bytes of the scratch area below the expansion's own part (row reduce partials)
  Span scratch_span_;
  Span span_;
};

}  // namespace

Program select_vector_calls(const Program& p, const target::Target& target) { return Selector(p, target).run(); }

}  // namespace tw::ascend
