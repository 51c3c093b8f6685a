// The program interpreter and the scheduler of the simulator.
//
// Each core's scalar unit walks its code (compiled to a flat bytecode) and issues instructions
// into per-pipe in-order queues. An instruction executes (data effect, timing, checks) as soon as
// it reaches the head of its queue and, for a WaitFlag, its flag is set; otherwise it waits in the
// queue. The scalar runs until it blocks (a wait on S, PIPE_ALL with work pending, or a queue that
// is full behind an unsatisfied wait); then the scheduler switches to the next core. The execution
// order is therefore always consistent with happens-before, so data flows through flags exactly
// as on the chip. Timing is computed per instruction: start = max(pipe free, issue time, flag
// fire time), with costs from timing.cpp.
#include "target/ascend/simulator/machine.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>

#include "ir/printer.h"
#include "support/env.h"
#include "target/ascend/math_fns.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/simulator/api_rules.h"
#include "target/ascend/simulator/checker.h"
#include "target/ascend/simulator/functional_queue.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/timing.h"
#include "target/ascend/simulator/written.h"

namespace tw::ascend::sim {

namespace {

BC make_bc(BC::Op op) {
  BC b;
  b.op = op;
  return b;
}

// Integer // and % never trap (as on the cpu target): a // 0 == 0, a % 0 == a, INT64_MIN // -1 wraps.
int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0ull - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// A float value as the Value pair (its int64 view defined for NaN / inf / out of range: 0, saturated).
Value of_float(double f) { return Value{num::saturate<int64_t>(f), f}; }
Value of_int(int64_t i) { return Value{i, static_cast<double>(i)}; }

// v converted to t as the printed C++ converts it (`static_cast<T>(...)`, `const T x = ...`, SetValue's
// cast): an integer into an integer type wraps modulo 2^bits; a float rounds to nearest even into
// float32 / float16 / bfloat16 (through float32, as the printed float expression is; an integer once, tw_i2bf
// for bfloat16); a float into an
// integer type truncates toward zero and saturates, NaN giving 0 (docs/language.md "Dtype conversions":
// ascend910b saturates; the printer prints tw_f2i for it, which C++ would leave undefined).
Value convert(Value v, bool from_float, ir::DTypeCode t) {
  using C = ir::DTypeCode;
  const double x = from_float ? v.f : static_cast<double>(v.i);
  switch (t) {
    case C::f64: return of_float(x);
    case C::f32: return of_float(static_cast<double>(from_float ? static_cast<float>(x) : static_cast<float>(v.i)));
    case C::f16: return of_float(num::f16_to_f32(num::f32_to_f16(static_cast<float>(x))));
    case C::bf16:  // an integer rounded once (tw_i2bf)
      return of_float(num::bf16_to_f32(num::f32_to_bf16(from_float ? static_cast<float>(x) : num::int_to_bf16_f32(v.i))));
    case C::boolean: return of_int(from_float ? x != 0 : v.i != 0);
    case C::i8: return of_int(from_float ? num::saturate<int8_t>(std::trunc(x)) : static_cast<int8_t>(v.i));
    case C::u8: return of_int(from_float ? num::saturate<uint8_t>(std::trunc(x)) : static_cast<uint8_t>(v.i));
    case C::i32: return of_int(from_float ? num::saturate<int32_t>(std::trunc(x)) : static_cast<int32_t>(v.i));
    case C::i64: return of_int(from_float ? num::saturate<int64_t>(std::trunc(x)) : v.i);
  }
  return v;
}
}  // namespace

std::string_view report_kind_name(ReportKind k) {
  static constexpr std::string_view names[] = {
      "race", "same-pipe hazard", "out of bounds", "misaligned", "capacity", "illegal flag pair",
      "flag id out of range", "flag set twice", "unmatched set flag", "cross-core flag overflow",
      "deadlock", "invalid instruction", "API rule", "int32 overflow", "stale DataCache",
      "uninitialised read", "negative dividend", "unwritten output"};
  return names[static_cast<int>(k)];
}

// ---------------------------------------------------------------------------------------------
// Building resolved instructions. One function serves both compilation (get() compiles the
// expression and returns nothing useful) and resolution (get() evaluates the next compiled one),
// so the two cannot disagree on the order of the expressions.

namespace {
// The simulator executes the calls the printer prints: byte-level moves must have been replaced.
[[noreturn]] ROp byte_level(const InstrOp& op) {
  throw ir::Error("internal: the simulator got the byte-level move " + std::string(instr_name(op)) +
                  "; run select_move_calls first (it replaces it with the AscendC calls it prints as)");
}

// A call's scalar as the printed `static_cast<T>(scalar)` gives it (T = vec_scalar_dtype): from the
// expression's exact value, so an int64 2^31 + 4 wraps to -2^31 + 4 as on the chip (hunt32 F2: it was
// carried as a double and saturated when stored). Scalar-less calls print no scalar: 0.
template <class Call, class Get>
double call_scalar(const Call& x, Get&& get) {
  if (!x.scalar) return 0;
  const Value v = get(x.scalar);
  if (!vec_api_has_scalar(x.api)) return 0;
  return convert(v, x.scalar->dtype.is_float(), vec_scalar_dtype(x.api, x.dtype, x.src_dtype).code).f;
}

// Every index of `dims` evaluated (build's calls of `get` do not depend on the values: they compile
// the expressions in this order), the first outside its dimension kept (of a window: its start when
// negative, else the dimension's end); a window's indices past its `used` ones are not checked, and a
// window with a dim of used <= 0 not at all (it holds no element of the user's: a padded block, the
// elements a guard skips).
template <class Get>
ROutsideDim outside_dim(const std::vector<DimIndex>& dims, Get&& get) {
  ROutsideDim o;
  bool none = false;  // a dim with no used index: the window holds none of the user's elements
  for (const auto& d : dims) {
    const int64_t i = get(d.index).i, n = get(d.extent).i;
    const int64_t u = d.used ? std::min(d.count, get(d.used).i) : d.count;
    none = none || u <= 0;
    if (o.dim < 0 && u > 0 && (i < 0 || i + u > n)) o = ROutsideDim{d.dim, i < 0 ? i : std::max(i, n), n, i, u};
  }
  return none ? ROutsideDim{} : o;
}

template <class Get>
ROp build(const InstrOp& op, Get&& get) {
  auto gm = [&](const GmRef& r) { return RMem{true, r.param, get(r.offset).i}; };
  auto loc = [&](const LocalRef& r) { return RMem{false, r.buffer, get(r.offset).i}; };
  return std::visit(
      Overload{
          [&](const CopyGmToL1& x) -> ROp { return byte_level(x); },
          [&](const CopyGmToUb& x) -> ROp { return byte_level(x); },
          [&](const CopyUbToGm& x) -> ROp { return byte_level(x); },
          [&](const CopyUbToUb& x) -> ROp { return byte_level(x); },
          [&](const LoadL0& x) -> ROp { return byte_level(x); },
          [&](const Fixpipe& x) -> ROp { return byte_level(x); },
          [&](const Mmad& x) -> ROp {
            RMmad r{loc(x.a), loc(x.b), loc(x.c), x.in_dtype.code, x.acc_dtype.code, 0, 0, 0, false};
            r.m = get(x.m).i, r.n = get(x.n).i, r.k = get(x.k).i;
            r.init = get(x.init).i != 0;
            return r;
          },
          [&](const InitConstValue& x) -> ROp {
            RInitConst r{loc(x.dst), x.dtype.code, 0, 0, 0, 0};
            r.repeat = get(x.repeatTimes).i, r.blocks = get(x.blockNum).i, r.gap = get(x.dstGap).i;
            r.value = get(x.initValue).f;
            return r;
          },
          [&](const DataCopyNd2Nz& x) -> ROp {
            RNd2Nz r{gm(x.src), loc(x.dst), x.dtype.code, 0, 0, 0, 0, 0, 0, 0, 0};
            r.nd_num = get(x.ndNum).i, r.n = get(x.nValue).i, r.d = get(x.dValue).i;
            r.src_nd_stride = get(x.srcNdMatrixStride).i, r.src_d = get(x.srcDValue).i;
            r.c0_stride = get(x.dstNzC0Stride).i, r.n_stride = get(x.dstNzNStride).i;
            r.nz_matrix_stride = get(x.dstNzMatrixStride).i;
            if (x.col_start) r.col_start = get(x.col_start).i;
            return r;
          },
          [&](const DataCopyPadGmToUb& x) -> ROp {
            RDataCopy r{RDataCopy::GmToUb, gm(x.src), loc(x.dst), x.dtype.code};
            r.count = get(x.blockCount).i, r.len = get(x.blockLen).i;
            r.src_stride = get(x.srcStride).i, r.dst_stride = get(x.dstStride).i;
            r.is_pad = x.isPad, r.preload = x.preload;
            r.left = get(x.leftPadding).i, r.right = get(x.rightPadding).i, r.pad_value = get(x.paddingValue).f;
            return r;
          },
          [&](const DataCopyPadUbToGm& x) -> ROp {
            RDataCopy r{RDataCopy::UbToGm, loc(x.src), gm(x.dst), x.dtype.code};
            r.count = get(x.blockCount).i, r.len = get(x.blockLen).i;
            r.src_stride = get(x.srcStride).i, r.dst_stride = get(x.dstStride).i;
            r.atomic = x.atomic;
            if (!x.window.preload) {
              r.window_param = x.window.param, r.window = outside_dim(x.window.dims, get);
              return r;
            }
            r.kept.param = x.window.param, r.kept.tile = loc(x.window.tile);
            for (size_t k = 0; k < x.window.dims.size(); ++k) {
              const DimIndex& d = x.window.dims[k];
              const int64_t i = get(d.index).i, n = get(d.extent).i;
              r.kept.dims.push_back({d.dim, i, n, d.count, x.window.strides[k], d.used ? std::min(d.count, get(d.used).i) : d.count});
            }
            return r;
          },
          [&](const DataCopyUbToUb& x) -> ROp {
            RDataCopy r{RDataCopy::UbToUb, loc(x.src), loc(x.dst), x.dtype.code};
            r.count = get(x.blockCount).i, r.len = get(x.blockLen).i;
            r.src_stride = get(x.srcStride).i, r.dst_stride = get(x.dstStride).i;
            return r;
          },
          [&](const LoadData2D& x) -> ROp {
            RLoad2D r{loc(x.src), loc(x.dst), x.dtype.code, 0, 0, 0, 0, 0, x.ifTranspose};
            r.start = get(x.startIndex).i, r.repeat = get(x.repeatTimes).i, r.src_stride = get(x.srcStride).i;
            r.sid = get(x.sid).i, r.dst_gap = get(x.dstGap).i;
            return r;
          },
          [&](const LoadData3DV2& x) -> ROp {
            RLoad3D r{loc(x.src), loc(x.dst), x.dtype.code, 0, 0, 0, 0, 0, 0, 0, false};
            r.l1h = get(x.l1H).i, r.l1w = get(x.l1W).i, r.channels = get(x.channelSize).i;
            r.kext = get(x.kExtension).i, r.mext = get(x.mExtension).i;
            r.kstart = get(x.kStartPt).i, r.mstart = get(x.mStartPt).i;
            r.unit_kernel = x.strideW == 1 && x.strideH == 1 && x.filterW == 1 && x.filterH == 1 &&
                            x.dilationFilterW == 1 && x.dilationFilterH == 1 && !x.enTranspose && !x.enSmallK &&
                            !x.filterSizeW && !x.filterSizeH && !x.fMatrixCtrl;
            return r;
          },
          [&](const FixpipeV220& x) -> ROp {
            RFixpipe r{loc(x.src), gm(x.dst), x.src_dtype.code, x.dst_dtype.code, 0, 0, 0, 0, 0, x.quantPre, x.reluEn};
            r.n = get(x.nSize).i, r.m = get(x.mSize).i, r.src_stride = get(x.srcStride).i;
            r.dst_stride = get(x.dstStride).i, r.nd_num = get(x.ndNum).i;
            r.atomic = x.atomic;
            return r;
          },
          [&](const FixpipeL1& x) -> ROp {
            RFixpipe r{loc(x.src), loc(x.dst), x.src_dtype.code, x.dst_dtype.code, 0, 0, 0, 0, 1, x.quantPre, false};
            r.n = get(x.nSize).i, r.m = get(x.mSize).i, r.src_stride = get(x.srcStride).i;
            r.dst_stride = get(x.dstStride).i, r.nz = true;
            return r;
          },
          [&](const VecCallL2& x) -> ROp {
            RVecCall r;
            r.api = x.api, r.dt = x.dtype.code, r.src_dt = x.src_dtype.code, r.round = x.round;
            r.dst = loc(x.dst);
            if (vec_api_sources(x.api) >= 1) r.src0 = loc(x.src0);
            if (vec_api_sources(x.api) == 2) r.src1 = loc(x.src1);
            r.scalar = call_scalar(x, get);
            r.mask = get(x.count).i, r.repeat = 1;
            r.cmp = x.cmp;
            if (x.sel.buffer >= 0) r.sel = loc(x.sel);
            r.window_param = x.window.param, r.window = outside_dim(x.window.dims, get);
            r.preload = x.window.preload;
            return r;
          },
          [&](const VecCallL0& x) -> ROp {
            RVecCall r;
            r.api = x.api, r.l0 = true, r.dt = x.dtype.code, r.src_dt = x.src_dtype.code, r.round = x.round;
            r.dst = loc(x.dst);
            if (vec_api_sources(x.api) >= 1) r.src0 = loc(x.src0);
            if (vec_api_sources(x.api) == 2) r.src1 = loc(x.src1);
            r.scalar = call_scalar(x, get);
            r.mask = get(x.mask).i, r.repeat = get(x.repeat).i;
            r.cmp = x.cmp;
            r.blk[0] = get(x.dst_blk).i, r.blk[1] = get(x.src0_blk).i, r.blk[2] = get(x.src1_blk).i;
            r.rep[0] = get(x.dst_rep).i, r.rep[1] = get(x.src0_rep).i, r.rep[2] = get(x.src1_rep).i;
            r.window_param = x.window.param, r.window = outside_dim(x.window.dims, get);
            r.preload = x.window.preload;
            return r;
          },
          [&](const WholeReduce& x) -> ROp {
            RWholeReduce r{x.op, x.dtype.code, loc(x.dst), loc(x.src), 0, 0, 0, 0, 0};
            r.mask = get(x.mask).i, r.repeat = get(x.repeat).i, r.dst_rep = get(x.dst_rep).i;
            r.src_blk = get(x.src_blk).i, r.src_rep = get(x.src_rep).i;
            return r;
          },
          [&](const Brcb& x) -> ROp {
            RBrcb r{x.dtype.code, loc(x.dst), loc(x.src), 0, 0, 0};
            r.repeat = get(x.repeat).i, r.dst_blk = get(x.dst_blk).i, r.dst_rep = get(x.dst_rep).i;
            return r;
          },
          [&](const Gather& x) -> ROp {
            return RGather{x.dtype.code, loc(x.dst), loc(x.src), loc(x.offset), get(x.base).i, get(x.count).i,
                           get(x.src_elems).i};
          },
          [&](const ScalarLoad& x) -> ROp {
            RScalarLoad r{x.ub.buffer >= 0 ? loc(x.ub) : gm(x.src), x.dtype.code, x.ub.buffer >= 0 ? x.tile_end : 0, {}};
            r.outside = outside_dim(x.dims, get);
            return r;
          },
          [&](const ScalarStore& x) -> ROp {
            // the value converted as the printed SetValue's static_cast does (an integer into an 8- / 32-bit
            // element wraps: session 28, hunt17 F6)
            Value v = convert(get(x.value), x.value->dtype.is_float(), x.dtype.code);
            return RScalarStore{loc(x.dst), x.dtype.code, v, x.tile_end, outside_dim(x.dims, get)};
          },
          [&](const SetAtomic&) -> ROp {
            throw ir::Error("internal: SetAtomic is executed by the scalar unit (Machine::set_atomic), not issued");
          },
          [&](const SetFlag& x) -> ROp { return RFlag{x.src, x.dst, get(x.event).i, true}; },
          [&](const WaitFlag& x) -> ROp { return RFlag{x.src, x.dst, get(x.event).i, false}; },
          [&](const PipeBarrier& x) -> ROp { return RBarrier{x.pipe}; },
          [&](const CrossCoreSetFlag& x) -> ROp { return RCross{x.mode, get(x.id).i, true}; },
          [&](const CrossCoreWaitFlag& x) -> ROp { return RCross{0, get(x.id).i, false}; },
          [&](const auto& x) -> ROp {  // the high-level vector kinds
            throw ir::Error("internal: the simulator met the high-level vector instruction " +
                            std::string(instr_name(InstrOp(x))) + ": run select_vector_calls first");
          },
      },
      op);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Expressions

namespace {
// Whether the printed C++ holds e's value in `int` (session 30, h-i32guard): an integer type narrower
// than 64 bits, promoted (c_expr.cpp prints + - * & | ^ unary - ~ and ?: infix, so int operands give an
// int; tw_min / tw_max / tw_floordiv / tw_ceildiv / tw_floormod and the shifts give int64_t; a literal
// outside int32 prints with LL; constant integer arithmetic prints as its literal). n is e's node, its
// operands compiled. // % and ceildiv print infix (C's / and %) exactly where the program says
// (Program::c_divisions, widen_scalars' decision): in int when both operands are; else through
// tw_floordiv / tw_floormod / tw_ceildiv, int64_t.
bool int_narrow(const ir::Expr& e, const CNode& n, const std::vector<CNode>& cn) {
  const bool ints = e->dtype.is_int() || e->dtype.is_bool();
  if (!ints || e->dtype.code == ir::DTypeCode::i64) return false;
  auto fits = [](int64_t v) { return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(); };
  auto nar = [&](int k) { return k >= 0 && cn[static_cast<size_t>(k)].narrow; };
  switch (e->kind) {
    case ir::ExprKind::IntImm: return fits(n.i);
    case ir::ExprKind::Var: case ir::ExprKind::Cast: return true;
    case ir::ExprKind::Unary:
      return static_cast<ir::UnOp>(n.op) == ir::UnOp::Not || nar(n.a);
    case ir::ExprKind::Binary: {
      if (auto c = ir::as_const_int(e)) return fits(*c);
      if (n.float_operands) return false;
      switch (static_cast<ir::BinOp>(n.op)) {
        case ir::BinOp::Add: case ir::BinOp::Sub: case ir::BinOp::Mul: case ir::BinOp::BitAnd:
        case ir::BinOp::BitOr: case ir::BinOp::BitXor:
          return nar(n.a) && nar(n.b);
        case ir::BinOp::EQ: case ir::BinOp::NE: case ir::BinOp::LT: case ir::BinOp::LE: case ir::BinOp::GT:
        case ir::BinOp::GE: case ir::BinOp::And: case ir::BinOp::Or:
          return true;
        case ir::BinOp::FloorDiv: case ir::BinOp::CeilDiv: case ir::BinOp::Mod:
          return n.c_division && nar(n.a) && nar(n.b);
        default:
          return false;
      }
    }
    case ir::ExprKind::Select: return nar(n.b) && nar(n.c);
    case ir::ExprKind::FloatImm: case ir::ExprKind::Call: case ir::ExprKind::Load: return false;
  }
  return false;
}
}  // namespace

int Machine::compile_expr(const ir::Expr& e) {
  if (!e) {  // absent expressions evaluate to 0
    cnodes.push_back(CNode{static_cast<uint8_t>(ir::ExprKind::IntImm), 0, false});
    return static_cast<int>(cnodes.size() - 1);
  }
  CNode n{static_cast<uint8_t>(e->kind), 0, e->dtype.is_float()};
  n.dtype = e->dtype.code;
  switch (e->kind) {
    case ir::ExprKind::IntImm:
      n.i = static_cast<const ir::IntImmNode*>(e.get())->value;
      n.f = static_cast<double>(n.i);
      break;
    case ir::ExprKind::FloatImm:
      n.f = static_cast<const ir::FloatImmNode*>(e.get())->value;
      break;
    case ir::ExprKind::Var: {
      auto it = var_slot_.find(static_cast<const ir::VarNode*>(e.get()));
      if (it == var_slot_.end())
        throw ir::Error("ascend simulator: variable '" + static_cast<const ir::VarNode*>(e.get())->name +
                            "' is not bound here (not a block index, parameter, shape, loop or let variable)",
                        e->span);
      n.slot = it->second;
      break;
    }
    case ir::ExprKind::Binary: {
      auto* b = static_cast<const ir::BinaryNode*>(e.get());
      n.op = static_cast<uint8_t>(b->op);
      int a = compile_expr(b->a), c = compile_expr(b->b);
      n.a = a, n.b = c;
      n.float_operands = cnodes[static_cast<size_t>(a)].is_float || cnodes[static_cast<size_t>(c)].is_float;
      n.c_division = !n.float_operands && prog.c_division(e.get());
      if (b->op == ir::BinOp::Div && !n.float_operands)  // ir::binary makes `/` of integers a float division
        throw ir::Error("internal: ascend simulator: an integer true division '/' (ir::binary converts its operands "
                        "to float32)", e->span);
      break;
    }
    case ir::ExprKind::Unary: {
      auto* u = static_cast<const ir::UnaryNode*>(e.get());
      n.op = static_cast<uint8_t>(u->op);
      n.a = compile_expr(u->a);
      break;
    }
    case ir::ExprKind::Call: {
      auto* c = static_cast<const ir::CallNode*>(e.get());
      n.op = static_cast<uint8_t>(c->fn);
      n.a = compile_expr(c->args.at(0));
      if (c->args.size() > 1) n.b = compile_expr(c->args[1]);
      break;
    }
    case ir::ExprKind::Cast:
      n.a = compile_expr(static_cast<const ir::CastNode*>(e.get())->value);
      break;
    case ir::ExprKind::Select: {
      auto* s = static_cast<const ir::SelectNode*>(e.get());
      int a = compile_expr(s->cond), b = compile_expr(s->t), c = compile_expr(s->f);
      n.a = a, n.b = b, n.c = c;
      break;
    }
    case ir::ExprKind::Load:
      throw ir::Error("ascend simulator: tensor loads are not allowed in scalar expressions of an Ascend program",
                      e->span);
  }
  n.narrow = int_narrow(e, n, cnodes);
  // the checked nodes (CNode::narrow, CNode::c_division): their expression in guards_, indexed by slot
  const bool checked =
      n.c_division ||
      (n.narrow && !n.float_operands &&
       ((e->kind == ir::ExprKind::Binary && (n.op == static_cast<uint8_t>(ir::BinOp::Add) ||
                                             n.op == static_cast<uint8_t>(ir::BinOp::Sub) ||
                                             n.op == static_cast<uint8_t>(ir::BinOp::Mul))) ||
        (e->kind == ir::ExprKind::Unary && n.op == static_cast<uint8_t>(ir::UnOp::Neg))));
  if (checked) {
    n.slot = static_cast<int>(guards_.size());
    guards_.push_back(Guard{e});
  }
  cnodes.push_back(n);
  return static_cast<int>(cnodes.size() - 1);
}

Value Machine::eval_node(const CNode& n, const std::vector<Value>& s) {
  Value v;
  switch (static_cast<ir::ExprKind>(n.kind)) {
    case ir::ExprKind::IntImm:
      return Value{n.i, n.f};
    case ir::ExprKind::FloatImm:
      return Value{static_cast<int64_t>(n.f), n.f};
    case ir::ExprKind::Var:
      return s[n.slot];
    case ir::ExprKind::Binary: {
      Value a = eval(n.a, s), b = eval(n.b, s);
      bool fl = n.float_operands;
      auto op = static_cast<ir::BinOp>(n.op);
      auto setb = [&](bool x) { v.i = x; v.f = x; };
      if (fl) {
        double x = a.f, y = b.f;
        switch (op) {
          case ir::BinOp::Add: v.f = x + y; break;
          case ir::BinOp::Sub: v.f = x - y; break;
          case ir::BinOp::Mul: v.f = x * y; break;
          case ir::BinOp::Div: v.f = x / y; break;
          case ir::BinOp::FloorDiv: v.f = std::floor(x / y); break;
          case ir::BinOp::CeilDiv: v.f = std::ceil(x / y); break;
          case ir::BinOp::Mod: v.f = x - std::floor(x / y) * y; break;
          // the printed tw_fmin / tw_fmax (ascendc_printer.cpp helpers): NaN when either operand is
          case ir::BinOp::Min: v.f = x != x ? x : y != y ? y : y < x ? y : x; break;
          case ir::BinOp::Max: v.f = x != x ? x : y != y ? y : x < y ? y : x; break;
          case ir::BinOp::EQ: setb(x == y); return v;
          case ir::BinOp::NE: setb(x != y); return v;
          case ir::BinOp::LT: setb(x < y); return v;
          case ir::BinOp::LE: setb(x <= y); return v;
          case ir::BinOp::GT: setb(x > y); return v;
          case ir::BinOp::GE: setb(x >= y); return v;
          case ir::BinOp::And: setb(x != 0 && y != 0); return v;
          case ir::BinOp::Or: setb(x != 0 || y != 0); return v;
          case ir::BinOp::BitAnd: case ir::BinOp::BitOr: case ir::BinOp::BitXor: case ir::BinOp::Shl:
          case ir::BinOp::Shr:
            throw ir::Error("internal: ascend simulator: a bitwise operator on float operands (ir::binary rejects it)");
        }
        // the printed C++ computes float scalars in float32 (float16 / bfloat16 too: docs/language.md),
        // each operation rounded
        if (n.dtype != ir::DTypeCode::f64) v.f = static_cast<double>(static_cast<float>(v.f));
        return of_float(v.f);
      }
      int64_t x = a.i, y = b.i;
      // a narrow + - * is int arithmetic in the printed C++: its result must stay in int32
      auto in_int = [&](int64_t r) {
        if (n.narrow && !num::fits<int32_t>(r)) [[unlikely]]
          int32_overflow(n, r);
        return r;
      };
      // C's / and % (c_division): a dividend >= 0 (the divisor is a positive constant: widen_scalars)
      if (n.c_division && x < 0) [[unlikely]]
        negative_dividend(n, x, y);
      switch (op) {
        // int64, wrapping (the printed C++ computes in int64 where the result may leave int32: widen_scalars)
        case ir::BinOp::Add: v.i = in_int(static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y))); break;
        case ir::BinOp::Sub: v.i = in_int(static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y))); break;
        case ir::BinOp::Mul: v.i = in_int(static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y))); break;
        case ir::BinOp::Div: break;  // not reached: compile_expr rejects an integer true division
        case ir::BinOp::FloorDiv: v.i = floordiv(x, y); break;
        case ir::BinOp::CeilDiv:
          // printed (a + b - 1) / b: in int when narrow (widen_scalars widens a sum that may leave int32)
          if (n.c_division && n.narrow && !num::fits<int32_t>(x + y - 1)) [[unlikely]]
            int32_overflow(n, x + y - 1, "its dividend sum `a + b - 1`");
          v.i = y == 0 ? 0 : -floordiv(-x, y);
          break;
        case ir::BinOp::Mod: v.i = y == 0 ? x : y == -1 ? 0 : x - floordiv(x, y) * y; break;
        case ir::BinOp::Min: v.i = std::min(x, y); break;
        case ir::BinOp::Max: v.i = std::max(x, y); break;
        case ir::BinOp::EQ: v.i = x == y; break;
        case ir::BinOp::NE: v.i = x != y; break;
        case ir::BinOp::LT: v.i = x < y; break;
        case ir::BinOp::LE: v.i = x <= y; break;
        case ir::BinOp::GT: v.i = x > y; break;
        case ir::BinOp::GE: v.i = x >= y; break;
        case ir::BinOp::And: v.i = x && y; break;
        case ir::BinOp::Or: v.i = x || y; break;
        case ir::BinOp::BitAnd: case ir::BinOp::BitOr: case ir::BinOp::BitXor: case ir::BinOp::Shl:
        case ir::BinOp::Shr:
          v.i = *ir::fold_int_binary(op, x, y, n.dtype);  // never nullopt for these (ir.h)
          break;
      }
      v.f = static_cast<double>(v.i);
      return v;
    }
    case ir::ExprKind::Unary: {
      Value a = eval(n.a, s);
      if (static_cast<ir::UnOp>(n.op) == ir::UnOp::Neg) {
        const int64_t r = static_cast<int64_t>(0ull - static_cast<uint64_t>(a.i));
        if (n.narrow && !num::fits<int32_t>(r)) [[unlikely]]
          int32_overflow(n, r);
        return Value{r, n.is_float ? -a.f : static_cast<double>(r)};
      }
      if (static_cast<ir::UnOp>(n.op) == ir::UnOp::BitNot) return Value{~a.i, static_cast<double>(~a.i)};
      int64_t x = a.i == 0 && a.f == 0;
      return Value{x, static_cast<double>(x)};
    }
    case ir::ExprKind::Call: {
      const double x = eval(n.a, s).f, y = n.b >= 0 ? eval(n.b, s).f : 0;
      const double r = scalar_value(static_cast<ir::MathFn>(n.op), x, y);  // target/ascend/math_fns.h
      return Value{static_cast<int64_t>(r), r};
    }
    case ir::ExprKind::Cast:  // the printed static_cast<T>
      return convert(eval(n.a, s), cnodes[n.a].is_float, n.dtype);
    case ir::ExprKind::Select: {
      Value cond = eval(n.a, s);
      return cond.i != 0 || cond.f != 0 ? eval(n.b, s) : eval(n.c, s);
    }
    case ir::ExprKind::Load:
      break;
  }
  return v;
}

// The guarded expression of node n as a report location, once per expression (nullopt after the first).
std::optional<ReportInstr> Machine::first_guard_report(const CNode& n) {
  Guard& g = guards_[static_cast<size_t>(n.slot)];
  if (g.reported) return std::nullopt;
  g.reported = true;
  ReportInstr at;
  at.text = ir::print(g.e);
  at.span = g.e->span;
  at.core = cur_core_ ? cur_core_->name : "launch";
  at.cycle = cur_core_ ? cur_core_->scalar_time : 0;
  return at;
}

void Machine::int32_overflow(const CNode& n, int64_t v, const char* part) {
  auto r = first_guard_report(n);
  if (!r) return;
  const ReportInstr& at = *r;
  const Guard& g = guards_[static_cast<size_t>(n.slot)];
  report(ReportKind::IntOverflow,
         "the scalar expression `" + at.text + "` (" + std::string(g.e->dtype.name()) + ")" +
             (part ? std::string(": ") + part + "," : std::string()) + " is " + std::to_string(static_cast<long long>(v)) +
             " here, outside int32: the printed C++ computes it in int, where that is signed overflow (undefined "
             "behaviour; the simulator computes in int64 and cannot show what the chip gives). widen_scalars "
             "proves every such + - * of an int32 scalar expression stays in int32 or widens it to int64, so in "
             "a program the Tilewright pipeline compiled this is a compiler bug (the proof failed: report it); "
             "in a hand-written program, cast an operand to int64",
         {at});
}

void Machine::negative_dividend(const CNode& n, int64_t a, int64_t b) {
  auto r = first_guard_report(n);
  if (!r) return;
  const ReportInstr& at = *r;
  const Guard& g = guards_[static_cast<size_t>(n.slot)];
  // what the printed C form gives (truncating) and the language's value (floor), b > 0
  const auto op = static_cast<ir::BinOp>(n.op);
  const int64_t d = b == 0 ? 1 : b;  // b is a positive constant (c_divisions); never 0 here
  const int64_t c = op == ir::BinOp::Mod ? a % d : op == ir::BinOp::CeilDiv ? (a + d - 1) / d : a / d;
  const int64_t lang = op == ir::BinOp::Mod ? a - floordiv(a, d) * d : op == ir::BinOp::CeilDiv ? -floordiv(-a, d) : floordiv(a, d);
  const char* form = op == ir::BinOp::Mod ? "`%`" : op == ir::BinOp::CeilDiv ? "`(a + b - 1) / b`" : "`/`";
  report(ReportKind::NegativeDividend,
         "the scalar expression `" + at.text + "` (" + std::string(g.e->dtype.name()) + ") has the dividend " +
             std::to_string(static_cast<long long>(a)) + " here: the printed C++ computes it with C's " + form +
             ", which truncates toward zero (" + std::to_string(static_cast<long long>(c)) +
             ") where the language floors (" + std::to_string(static_cast<long long>(lang)) +
             "). widen_scalars prints `//`, `%` and ceildiv with C's operators only where it proves the dividend "
             ">= 0 (Program::c_divisions), so in a program the Tilewright pipeline compiled this is a compiler bug "
             "(the proof failed: report it); in a hand-written program, leave the node out of c_divisions (it then "
             "prints tw_floordiv / tw_floormod / tw_ceildiv)",
         {at});
}

// ---------------------------------------------------------------------------------------------
// Code

void Machine::compile_stmt(const StmtPtr& s, Code& code) {
  if (!s) return;
  auto slot_of = [&](const ir::Var& v) {
    auto it = var_slot_.find(v.get());
    if (it != var_slot_.end()) return it->second;
    int id = nslots_++;
    var_slot_[v.get()] = id;
    return id;
  };
  switch (s->kind) {
    case StmtKind::Seq:
      for (const auto& b : s->body) compile_stmt(b, code);
      break;
    case StmtKind::Let: {  // the printed `const T v = value;` converts the value to T
      CNode cast{static_cast<uint8_t>(ir::ExprKind::Cast), 0, s->var->dtype.is_float()};
      cast.dtype = s->var->dtype.code;
      cast.a = compile_expr(s->value);
      cnodes.push_back(cast);
      int e = static_cast<int>(cnodes.size() - 1);
      BC bc = make_bc(BC::Let);
      bc.slot = slot_of(s->var);
      bc.expr = e;
      code.ops.push_back(bc);
      break;
    }
    case StmtKind::For: {
      BC b = make_bc(BC::ForBegin);
      b.expr = compile_expr(s->value);
      b.slot = slot_of(s->var);
      b.slot2 = nslots_++;
      size_t begin = code.ops.size();
      code.ops.push_back(b);
      compile_stmt(s->body.at(0), code);
      BC e = make_bc(BC::ForEnd);
      e.slot = b.slot, e.slot2 = b.slot2, e.target = static_cast<int>(begin + 1);
      code.ops.push_back(e);
      code.ops[begin].target = static_cast<int>(code.ops.size());
      break;
    }
    case StmtKind::If: {
      BC b = make_bc(BC::IfFalse);
      b.expr = compile_expr(s->value);
      size_t at = code.ops.size();
      code.ops.push_back(b);
      compile_stmt(s->body.at(0), code);
      if (s->else_body) {
        size_t j = code.ops.size();
        code.ops.push_back(make_bc(BC::Jump));
        code.ops[at].target = static_cast<int>(code.ops.size());
        compile_stmt(s->else_body, code);
        code.ops[j].target = static_cast<int>(code.ops.size());
      } else {
        code.ops[at].target = static_cast<int>(code.ops.size());
      }
      break;
    }
    case StmtKind::Instr: {
      BC bc = make_bc(BC::Instr);
      bc.instr = &s->instr;
      if (auto* load = std::get_if<ScalarLoad>(&s->instr.op)) bc.slot = slot_of(load->var);
      if (std::holds_alternative<SetAtomic>(s->instr.op)) {  // the scalar unit's mode register: no operands
        code.ops.push_back(std::move(bc));
        break;
      }
      build(s->instr.op, [&](const ir::Expr& e) {
        bc.exprs.push_back(compile_expr(e));
        return Value{};
      });
      code.ops.push_back(std::move(bc));
      break;
    }
  }
}

void Machine::compile() {
  var_slot_[prog.block_idx.get()] = nslots_++;
  if (prog.sub_block_idx) var_slot_[prog.sub_block_idx.get()] = nslots_++;
  for (const auto& v : prog.shape_vars) var_slot_[v.get()] = nslots_++;
  for (const auto& p : prog.params)
    if (!p.is_tensor && p.var) var_slot_[p.var.get()] = nslots_++;
  if (prog.aic) compile_stmt(prog.aic, aic_code_);
  aic_code_.ops.push_back(make_bc(BC::End));
  if (prog.aiv) compile_stmt(prog.aiv, aiv_code_);
  aiv_code_.ops.push_back(make_bc(BC::End));
}

// ---------------------------------------------------------------------------------------------
// Setup

Machine::Machine(const Program& p, const target::AscendParams& c, std::vector<Arg> a,
                 const std::vector<int64_t>& shape_values, const Options& o)
    : prog(p), chip(c), opt(o), args(std::move(a)) {
  if (args.size() != prog.params.size())
    throw ir::Error("ascend simulator: kernel '" + prog.name + "' takes " + std::to_string(prog.params.size()) +
                        " arguments, got " + std::to_string(args.size()),
                    prog.span);
  if (shape_values.size() != prog.shape_vars.size())
    throw ir::Error("ascend simulator: " + std::to_string(prog.shape_vars.size()) + " shape values expected, got " +
                        std::to_string(shape_values.size()),
                    prog.span);
  if (!prog.block_idx) throw ir::Error("ascend simulator: program has no block_idx variable", prog.span);
  compile();
  // the GM spaces scalar loads read (params, then the workspace): their DMA writes are recorded
  gm_written_.resize(prog.params.size() + 1);
  scalar_read_.assign(prog.params.size() + 1, 0);
  for (const Code* code : {&aic_code_, &aiv_code_})
    for (const BC& bc : code->ops)
      if (bc.op == BC::Instr && bc.slot >= 0) {
        const auto& load = std::get<ScalarLoad>(bc.instr->op);
        int param = load.src.param;
        if (load.ub.buffer < 0 && param < static_cast<int>(prog.params.size()))
          scalar_read_[param < 0 ? prog.params.size() : param] = 1;
      }
  // base slot values: shape vars and scalars
  base_slots_.assign(nslots_, Value{});
  for (size_t i = 0; i < prog.shape_vars.size(); ++i)
    base_slots_[var_slot_[prog.shape_vars[i].get()]] = Value{shape_values[i], static_cast<double>(shape_values[i])};
  for (size_t i = 0; i < prog.params.size(); ++i)
    if (!prog.params[i].is_tensor && prog.params[i].var) {
      double v = args[i].scalar;
      // a float parameter holds its dtype's value, as the printed kernel's parameter (a float16 0.1
      // is 0.099975586; hunt10a F14: the float32 value was used)
      if (const ir::DType t = prog.params[i].var->dtype; t.is_float() && t.code != ir::DTypeCode::f64) {
        uint8_t b[8];
        num::store(b, t.code, v);
        v = num::load(b, t.code);
      }
      const std::optional<int64_t>& iv = args[i].int_scalar;  // an integer argument exactly (hunt31 F3)
      base_slots_[var_slot_[prog.params[i].var.get()]] =
          iv && !prog.params[i].var->dtype.is_float() ? Value{*iv, static_cast<double>(*iv)} : Value{static_cast<int64_t>(v), v};
    }
  auto eval_expr = [&](const ir::Expr& e) { return e ? eval(compile_expr(e), base_slots_).i : 0; };
  int64_t blocks = eval_expr(prog.block_dim);
  // 0 blocks (an empty dimension, e.g. M = 0): nothing is launched, the result is empty
  if (blocks < 0) throw ir::Error("ascend simulator: block_dim must not be negative, got " + std::to_string(blocks), prog.span);
  workspace_bytes_ = eval_expr(prog.workspace_bytes);
  gm_row_elems_.assign(prog.params.size(), 0);
  for (size_t i = 0; i < prog.params.size(); ++i)
    if (prog.params[i].is_tensor && prog.params[i].shape.size() >= 2) gm_row_elems_[i] = eval_expr(prog.params[i].shape.back());
  param_shapes.resize(prog.params.size());
  for (size_t i = 0; i < prog.params.size(); ++i)
    for (const auto& d : prog.params[i].shape) param_shapes[i].push_back(eval_expr(d));
  if (opt.functional) workspace.assign(static_cast<size_t>(std::max<int64_t>(workspace_bytes_, 0)), 0);
  for (size_t i = 0; i < prog.params.size(); ++i)  // an output only T.atomic_add writes starts at zero
    if (opt.functional && prog.params[i].zeroed && args[i].data && args[i].bytes > 0)
      std::memset(args[i].data, 0, static_cast<size_t>(args[i].bytes));
  if ((!runs_aiv(prog.kernel_type) && prog.aiv) || (!runs_aic(prog.kernel_type) && prog.aic))
    throw ir::Error("ascend simulator: kernel type " + std::string(kernel_type_name(prog.kernel_type)) +
                        " with code for the other core type",
                    prog.span);

  bool has_aic = runs_aic(prog.kernel_type), has_aiv = runs_aiv(prog.kernel_type);
  int nphys = static_cast<int>(std::min<int64_t>(blocks, !has_aic ? chip.aiv_cores : chip.aic_cores));
  aic_phys_ = has_aic ? nphys : 0;
  aiv_phys_ = !has_aiv ? 0 : !has_aic ? nphys : 2 * nphys;
  cores.resize(aic_phys_ + aiv_phys_);
  for (int i = 0; i < aic_phys_ + aiv_phys_; ++i) {
    Core& k = cores[i];
    k.index = i;
    k.type = i < aic_phys_ ? CoreType::AIC : CoreType::AIV;
    k.slot = i < aic_phys_ ? i : i - aic_phys_;
    k.name = std::string(core_type_name(k.type)) + " " + std::to_string(k.slot);
    k.code = k.type == CoreType::AIC ? &aic_code_ : &aiv_code_;
    int phys_block = (k.type == CoreType::AIV && prog.kernel_type == KernelType::MIX_1_2) ? k.slot / 2 : k.slot;
    k.sub = (k.type == CoreType::AIV && prog.kernel_type == KernelType::MIX_1_2) ? k.slot % 2 : 0;
    for (int64_t b = phys_block; b < blocks; b += nphys) k.blocks.push_back(static_cast<int>(b));
    k.flags.resize(8 * 8 * chip.flag_event_ids);
    k.cross.resize(chip.cross_flag_ids);
    k.cross_waits.resize(chip.cross_flag_ids);
    for (auto& ps : k.pipes) ps.ring.assign(chip.pipe_queue_depth, 0);
    if (opt.functional) {
      // Physical sizes, grown to cover every buffer of this core type: a buffer past the capacity
      // is reported below (Capacity) and must still run without touching memory it does not own.
      auto assign = [&](Mem m, int64_t bytes) {
        for (const auto& b : prog.buffers)
          if (b.core == k.type && b.mem == m) bytes = std::max(bytes, b.offset + b.bytes);
        k.mem[static_cast<int>(m)].assign(static_cast<size_t>(bytes), kPoisonByte);
      };
      if (k.type == CoreType::AIC) {
        assign(Mem::L1, chip.l1_bytes);
        assign(Mem::L0A, chip.l0a_bytes);
        assign(Mem::L0B, chip.l0b_bytes);
        assign(Mem::L0C, chip.l0c_bytes);
      } else {
        assign(Mem::UB, chip.ub_bytes);
      }
    }
  }
  reported_overflow_.assign(cores.size() * chip.cross_flag_ids, 0);
  result.blocks = static_cast<int>(blocks);
  result.kernel_type = prog.kernel_type;
  result.aic_used = aic_phys_;
  result.aiv_used = aiv_phys_;
  result.chip_aic = chip.aic_cores;
  result.clock_mhz = chip.clock_mhz;
  result.program = std::make_shared<Program>(prog);
  for (const auto& k : cores) result.core_names.push_back(k.name);
  timing = std::make_unique<Timing>(*this);
  if (opt.check) checker = std::make_unique<Checker>(*this);
  if (opt.check) written = std::make_unique<Written>(*this);
  if (opt.threads < 0)
    throw ir::Error("ascend simulator: Options::threads must be 0 (TW_NUM_THREADS) or a thread count >= 1, got " +
                        std::to_string(opt.threads),
                    prog.span);
  int threads = opt.threads > 0 ? opt.threads : support::env().num_threads;
  if (opt.functional && threads > 1 && !cores.empty()) queue_ = std::make_unique<FunctionalQueue>(*this, threads - 1);

  // buffer capacity
  for (const auto& b : prog.buffers) {
    int64_t cap = b.mem == Mem::L1 ? chip.l1_bytes : b.mem == Mem::L0A ? chip.l0a_bytes
                  : b.mem == Mem::L0B ? chip.l0b_bytes : b.mem == Mem::L0C ? chip.l0c_bytes : chip.ub_bytes;
    if (b.offset < 0 || b.offset + b.bytes > cap) {
      ReportInstr ri;
      ri.text = "buffer " + b.name + ": " + std::string(mem_name(b.mem)) + " @" + std::to_string(b.offset) + " +" +
                std::to_string(b.bytes);
      ri.span = b.span;
      report(ReportKind::Capacity,
             "buffer " + b.name + " needs " + mem_name(b.mem).data() + std::string(" bytes [") +
                 std::to_string(b.offset) + ", " + std::to_string(b.offset + b.bytes) + ") but " +
                 std::string(mem_name(b.mem)) + " has " + std::to_string(cap) + " usable bytes per " +
                 std::string(core_type_name(b.core)) + ": make the tile smaller or reuse memory",
             {ri});
    }
  }
}

Machine::~Machine() = default;

int Machine::num_spaces() const { return static_cast<int>(prog.params.size()) + 1 + static_cast<int>(cores.size()) * 5; }
int Machine::space_id(const Core& c, Mem m) const {
  return static_cast<int>(prog.params.size()) + 1 + c.index * 5 + static_cast<int>(m) - 1;
}
std::string Machine::space_name(int space) const {
  int np = static_cast<int>(prog.params.size());
  if (space < np) return "GM tensor " + prog.params[space].name;
  if (space == np) return "GM workspace";
  int k = space - np - 1;
  return cores[k / 5].name + " " + std::string(mem_name(static_cast<Mem>(k % 5 + 1)));
}

std::string Machine::buffer_name(const RMem& m, bool brief, const char* local) const {
  if (m.gm) return m.index < 0 ? std::string("the GM workspace") : (brief ? "tensor " : "GM tensor ") + prog.params[m.index].name;
  const BufferDecl& b = prog.buffers[m.index];
  return std::string(local) + " " + b.name + (brief ? std::string() : " (" + std::string(mem_name(b.mem)) + ")");
}

Machine::Span Machine::base(const Core& c, const RMem& m) {
  if (m.gm) {
    if (m.index < 0) return Span{workspace.empty() ? nullptr : workspace.data(), workspace_bytes_, static_cast<int>(prog.params.size()), Mem::GM, 0};
    const Arg& a = args[m.index];
    return Span{a.data, a.bytes, m.index, Mem::GM, 0};
  }
  const BufferDecl& b = prog.buffers[m.index];
  auto& mem = const_cast<Core&>(c).mem[static_cast<int>(b.mem)];
  return Span{mem.empty() ? nullptr : mem.data() + b.offset, b.bytes, space_id(c, b.mem), b.mem, b.offset};
}

void Machine::wait_data() {
  if (queue_) queue_->drain();
}

ReportInstr Machine::describe(const Core& c, const Instr* in, int64_t cycle) const {
  ReportInstr r;
  r.text = in ? print_instr(prog, *in, false) : "";
  r.span = in ? in->span : ir::Span{};
  r.core = c.name;
  r.cycle = cycle;
  return r;
}

void Machine::report(ReportKind k, std::string msg, std::vector<ReportInstr> instrs) {
  uint64_t key = std::hash<std::string>{}(msg) ^ (static_cast<uint64_t>(k) << 56);
  for (const auto& i : instrs) key = key * 31 + std::hash<std::string>{}(i.text) + static_cast<uint64_t>(i.span.line);
  if (report_keys_.count(key)) return;
  report_keys_[key] = true;
  if (static_cast<int>(result.reports.size()) >= opt.max_reports) {
    ++result.dropped_reports;
    return;
  }
  result.reports.push_back(Report{k, std::move(msg), std::move(instrs)});
}


// ---------------------------------------------------------------------------------------------
// Scheduler

RInstr Machine::resolve(Core& c, const BC& bc) {
  RInstr r;
  r.in = bc.instr;
  r.pipe = bc.instr->pipe();
  // A CrossCoreWaitFlag whose counter is 0 blocks every later instruction of the core, whatever its
  // pipe template argument (CrossCoreWaitFlag docs, constraints; asc-devkit issue #1613): the scalar
  // unit waits at issue.
  if (std::holds_alternative<CrossCoreWaitFlag>(bc.instr->op)) r.pipe = Pipe::S;
  size_t k = 0;
  r.op = build(bc.instr->op, [&](const ir::Expr&) { return eval(bc.exprs[k++], c.slots); });
  // static validation at issue
  auto bad = [&](ReportKind kind, std::string msg) {
    report(kind, std::move(msg), {describe(c, r.in, c.scalar_time)});
    r.valid = false;
  };
  bool aic = c.type == CoreType::AIC;
  if (r.pipe == Pipe::ALL && !std::holds_alternative<RBarrier>(r.op))
    bad(ReportKind::InvalidInstr, "PIPE_ALL is only valid for PipeBarrier");
  if ((r.pipe == Pipe::V && aic) || ((r.pipe == Pipe::M || r.pipe == Pipe::MTE1 || r.pipe == Pipe::FIX) && !aic))
    bad(ReportKind::InvalidInstr, std::string(instr_name(bc.instr->op)) + " uses pipe " +
                                      std::string(pipe_name(r.pipe)) + ", which the " +
                                      std::string(core_type_name(c.type)) + " does not have");
  if (auto* f = std::get_if<RFlag>(&r.op)) {
    if (f->event < 0 || f->event >= chip.flag_event_ids)
      bad(ReportKind::FlagIdOutOfRange, "event id " + std::to_string(f->event) + " is out of range 0.." +
                                            std::to_string(chip.flag_event_ids - 1));
    else if (!ascend::flag_pair_legal(c.type, f->src, f->dst))
      bad(ReportKind::IllegalFlagPair, std::string(pipe_name(f->src)) + " -> " + std::string(pipe_name(f->dst)) +
                                           " is not a legal flag pair on the " + std::string(core_type_name(c.type)) +
                                           " (ascend-910b.md, Synchronisation)");
  }
  if (auto* x = std::get_if<RCross>(&r.op)) {
    if (x->id < 0 || x->id >= chip.cross_flag_ids)
      bad(ReportKind::FlagIdOutOfRange, "cross-core flag id " + std::to_string(x->id) + " is out of range 0.." +
                                            std::to_string(chip.cross_flag_ids - 1));
    // CrossCoreSetFlag(ISASI).md table 3 (A2/A3: modes 0, 1, 2): mode 1 (the two AIVs of an AI Core)
    // and mode 2 (the AIC and its AIVs) run only in KERNEL_TYPE_MIX_AIC_1_1 / MIX_AIC_1_2 kernels
    // (a MIX_AIV_1_0 block has no second AIV; session 31 rule audit); mode 0 in every mixed type
    else if (x->set && (x->mode < 0 || x->mode > 2 || (x->mode == 1 && aic) ||
                        (x->mode >= 1 && prog.kernel_type != KernelType::MIX_1_2)))
      bad(ReportKind::InvalidInstr, "cross-core flag mode " + std::to_string(x->mode) + " is not valid on the " +
                                        std::string(core_type_name(c.type)) + " of a " +
                                        std::string(kernel_type_name(prog.kernel_type)) + " kernel" +
                                        (x->mode >= 1 && x->mode <= 2 && prog.kernel_type != KernelType::MIX_1_2
                                             ? " (CrossCoreSetFlag docs, table 3: modes 1 and 2 need a kernel with both "
                                               "core types, KERNEL_TYPE_MIX_AIC_1_2; mode 0 syncs every core of a type)"
                                             : ""));
  }
  if (checker && r.valid) {
    thread_local std::vector<std::string> broken;
    broken.clear();
    check_api_rules(r, c.api, broken);
    // Mmad's destination starts on a 1 KiB boundary of L0C (one 16x16 float32 / int32 fractal;
    // ascend-910b.md, buffer table): plan_memory places L0C tiles there and lowering writes whole
    // tiles from (0, 0); a hand-built program may not (session 15's rule audit)
    if (auto* x = std::get_if<RMmad>(&r.op); x && !x->c.gm && x->c.index >= 0 &&
                                             x->c.index < static_cast<int>(prog.buffers.size())) {
      int64_t at = prog.buffers[x->c.index].offset + x->c.off;
      if (at % 1024)
        broken.push_back("Mmad writes L0C at address " + std::to_string(at) +
                         ": the destination must start on a 1 KiB boundary (a 16x16 fractal of the accumulator)");
    }
    // Select in VSEL_TENSOR_TENSOR_MODE / VSEL_TENSOR_SCALAR_MODE (the only modes printed) Duplicates
    // its selMask address / scalar into UB at TMP_UB_OFFSET = 184 KiB on dav-c220 and set_cmpmask()s
    // it (Select.md: modes 1 and 2 need 8 KB of UB reserved; dav_c220 kernel_operator_vec_cmpsel_impl.h
    // VselImpl; kernel_utils_constants.h __NPU_ARCH__ 2201): a UB buffer of the core there would be
    // overwritten (session 31 rule audit, h-audit31)
    if (auto* x = std::get_if<RVecCall>(&r.op); x && (x->api == VecApi::Select || x->api == VecApi::SelectScalar))
      for (const auto& b : prog.buffers)
        if (b.core == c.type && b.mem == Mem::UB && b.bytes > 0 && b.offset + b.bytes > kSelectTmpUbOffset) {
          broken.push_back("Select (SELMODE::" +
                           std::string(x->api == VecApi::Select ? "VSEL_TENSOR_TENSOR_MODE" : "VSEL_TENSOR_SCALAR_MODE") +
                           ") uses UB bytes " + std::to_string(kSelectTmpUbOffset) + ".." +
                           std::to_string(kSelectTmpUbOffset + kSelectTmpUbBytes - 1) +
                           " as its temporary on dav-c220 (Select.md: reserve 8 KB of UB), but buffer '" + b.name +
                           "' occupies bytes " + std::to_string(b.offset) + ".." + std::to_string(b.offset + b.bytes - 1) +
                           " and would be overwritten: keep the kernel's UB below 184 KiB when it selects");
          break;
        }
    for (auto& m : broken) report(ReportKind::ApiRule, std::move(m), {describe(c, r.in, c.scalar_time)});
  }
  return r;
}

// AscendC's TPipe on the AIC: the constructor sets M_MTE1 events 0, 1, 2 and the destructor waits
// for them (Program::tpipe_destroy). With pipe.Destroy() right after InitBuffer the waits come
// before any instruction, so the model is empty; without it the sets stay pending through the
// kernel: a kernel SetFlag<M_MTE1> on those ids is a second set (reported at its wait), and a
// kernel WaitFlag that consumed the constructor's set leaves the destructor waiting.
constexpr int kTPipeEvents = 3;

static size_t m_mte1_flag(int ids, int e) { return (static_cast<size_t>(Pipe::M) * 8 + static_cast<size_t>(Pipe::MTE1)) * ids + e; }

void Machine::tpipe_construct(Core& c) {
  if (c.type != CoreType::AIC || prog.tpipe_destroy) return;
  for (int e = 0; e < kTPipeEvents; ++e) {
    FlagEntry f;
    f.fire = c.scalar_time, f.tpipe = true;
    c.flags[m_mte1_flag(chip.flag_event_ids, e)].push(f);
  }
}

void Machine::tpipe_destruct(Core& c) {
  if (c.type != CoreType::AIC || prog.tpipe_destroy) return;
  for (int e = 0; e < kTPipeEvents; ++e) {
    FlagQueue& q = c.flags[m_mte1_flag(chip.flag_event_ids, e)];
    if (!q.empty()) {
      q.pop();
      continue;
    }
    ReportInstr ri;
    ri.text = "TPipe::~TPipe(): WaitFlag<M_MTE1>(" + std::to_string(e) + ")";
    ri.span = prog.span, ri.core = c.name, ri.cycle = c.scalar_time;
    report(ReportKind::Deadlock,
           "TPipe's destructor waits for M_MTE1 event " + std::to_string(e) + " (its constructor set it on the AIC), but "
           "the kernel consumed that set: the AIC hangs at kernel exit; call pipe.Destroy() after InitBuffer or use "
           "event ids >= 3 for M_MTE1",
           {ri});
  }
}

void Machine::start_block(Core& c) {
  c.block = c.blocks[c.next_block];
  c.slots = base_slots_;
  c.slots[var_slot_[prog.block_idx.get()]] = Value{c.block, static_cast<double>(c.block)};
  if (prog.sub_block_idx) c.slots[var_slot_[prog.sub_block_idx.get()]] = Value{c.sub, static_cast<double>(c.sub)};
  c.pc = 0;
  int64_t t = c.scalar_time;
  for (auto& ps : c.pipes) t = std::max(t, ps.last_complete);
  t = timing->block_start(t);
  c.scalar_time = t;
  for (auto& ps : c.pipes) ps.free = std::max(ps.free, t);
  if (checker && c.next_block > 0) checker->barrier_all(c);
  if (written) written->new_block(c);
  tpipe_construct(c);
  c.api = ApiRuleState{};  // the previous block drained every pipe
  c.running = true;
}

static std::string ordinal(int64_t n) {
  const char* suf = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suf;
}

void Machine::cross_set(Core& c, const RCross& x, int64_t fire, const RInstr& r) {
  // group: members who must all set, targets whose counter increments
  int mode = x.mode;
  uint64_t gidx = 0;
  std::vector<int> members, targets;
  auto aiv_core = [&](int slot) { return aic_phys_ + slot; };
  if (mode == 2) {
    if (c.type == CoreType::AIC) {
      gidx = c.slot;
      members = {c.index};
      targets = {aiv_core(2 * c.slot), aiv_core(2 * c.slot + 1)};
    } else {
      int s = c.slot / 2;
      gidx = s;
      members = {aiv_core(2 * s), aiv_core(2 * s + 1)};
      targets = {s};
    }
  } else if (mode == 1) {
    int s = c.slot / 2;
    gidx = s;
    members = {aiv_core(2 * s)};
    if (2 * s + 1 < aiv_phys_) members.push_back(aiv_core(2 * s + 1));
    targets = members;
  } else {
    gidx = 0;
    for (const auto& k : cores)
      if (k.type == c.type) members.push_back(k.index);
    targets = members;
  }
  uint64_t key = static_cast<uint64_t>(mode) | (static_cast<uint64_t>(c.type) << 2) | (gidx << 8) |
                 (static_cast<uint64_t>(x.id) << 40);
  Group& g = groups_[key];
  if (g.members.empty()) {
    g.members = members;
    g.targets = targets;
    g.q.resize(members.size());
  }
  size_t me = std::find(g.members.begin(), g.members.end(), c.index) - g.members.begin();
  if (me >= g.members.size()) return;
  g.q[me].push_back({fire, r.uid, checker ? checker->snapshot(c, r.pipe) : -1});
  for (auto& q : g.q)
    if (q.empty()) return;
  int64_t t = 0;
  int snap = -1;
  uint32_t uid = 0;
  for (auto& q : g.q) {
    Contribution k = q.front();
    q.pop_front();
    t = std::max(t, k.fire);
    uid = k.uid;
    snap = snap < 0 ? k.vc : checker->join_snapshots(snap, k.vc);
  }
  t += chip.cross_flag_latency_cycles;
  for (size_t i = 0; i < g.targets.size(); ++i) {
    Core& tc = cores[g.targets[i]];
    int s = (checker && i + 1 < g.targets.size()) ? checker->clone(snap) : snap;
    // The counter holds at most max_pending unconsumed sets: set n must be ordered after the wait
    // that took set n - max_pending (the group's knowledge is the join of its members' sets),
    // whatever the simulated timing; a wait that has not happened yet is the timing rule below.
    CrossWaits& cw = tc.cross_waits[x.id];
    int64_t n = ++cw.sets, need = n - chip.cross_flag_max_pending;
    char& reported = reported_overflow_[tc.index * chip.cross_flag_ids + x.id];
    if (checker && need >= 1 && need <= cw.waits && !reported) {
      const CrossWaits::Wait& w = cw.ring[(need - 1) % chip.cross_flag_max_pending];
      if (!checker->snapshot_knows(s, w.tid, w.clk)) {
        reported = 1;
        report(ReportKind::CrossFlagOverflow,
               "the " + ordinal(n) + " CrossCoreSetFlag<" + std::to_string(mode) + ">(" + std::to_string(x.id) +
                   ") that reaches " + tc.name + " is not ordered after the CrossCoreWaitFlag that took set " +
                   std::to_string(need) + " (nothing on " +
                   (g.members.size() > 1 ? "any member's setting pipe" : "the setting pipe") +
                   " waited for anything that follows that wait): with a slower consumer the counter holds more than " +
                   std::to_string(chip.cross_flag_max_pending) +
                   " unconsumed sets and the hardware hangs; add a reverse handshake (the consumer sets a flag the "
                   "producer waits on before reusing the slot)",
               {checker->describe(w.uid), checker->describe(r.uid)});
      }
    }
    tc.cross[x.id].push({t, uid, s});
    if (static_cast<int>(tc.cross[x.id].size()) > chip.cross_flag_max_pending && !reported) {
      reported = 1;
      report(ReportKind::CrossFlagOverflow,
             "cross-core flag " + std::to_string(x.id) + " of " + tc.name + " has " +
                 std::to_string(tc.cross[x.id].size()) + " pending sets (at most " +
                 std::to_string(chip.cross_flag_max_pending) +
                 "; the hardware hangs): the producer runs ahead of the consumer; add a reverse handshake "
                 "(the consumer sets a flag the producer waits on before reusing the slot)",
             {describe(c, r.in, fire)});
    }
    for (int p = 0; p < kNumPipes; ++p)
      if (!tc.pipes[p].pending.empty()) wakes_.push_back({&tc, p});
  }
}

// Executes r at the head of its pipe. Returns false (and does nothing) for an unsatisfied wait.
bool Machine::try_execute(Core& c, PipeState& ps, RInstr& r) {
  ++events_;
  const int pipe = static_cast<int>(r.pipe);
  int64_t start = std::max(ps.free, r.issue);
  if (checker) checker->join_issue(c, r);  // what S knew when it issued r (checker.h: issue time)
  if (!r.valid) {
    ps.ring[r.seq % ps.ring.size()] = start;
    return true;
  }
  // A wait (WaitFlag or CrossCoreWaitFlag) whose set has arrived: takes the set, acquires its
  // clock, and stalls the pipe (and the scalar unit for a wait on S) until the set fires.
  auto consume = [&](FlagQueue& q) {
    FlagEntry e = q.pop();
    if (checker) {
      r.uid = checker->record(c, r.in, start);
      checker->acquire(c, r.pipe, e.vc);
    }
    if (opt.trace && e.fire > start)
      result.trace.push_back({c.index, static_cast<uint8_t>(pipe), start, e.fire - start, nullptr});
    ps.free = std::max(start, e.fire);
    if (pipe == 0) c.scalar_time = std::max(c.scalar_time, e.fire);
  };
  if (auto* f = std::get_if<RFlag>(&r.op)) {
    FlagQueue& q = c.flags[(static_cast<int>(f->src) * 8 + static_cast<int>(f->dst)) * chip.flag_event_ids + f->event];
    if (f->set) {
      if (checker) r.uid = checker->record(c, r.in, start);
      // Sets and waits of one flag alternate. A set that nothing orders after the wait that took
      // the previous set may, under other timing, come before it: a flag set twice.
      if (checker && q.empty() && q.wait_tid >= 0 && !q.unordered_reported &&
          !checker->knows(c, r.pipe, q.wait_tid, q.wait_clk)) {
        q.unordered_reported = true;
        report(ReportKind::FlagSetTwice,
               "SetFlag<" + std::string(pipe_name(f->src)) + "_" + std::string(pipe_name(f->dst)) + ">(" +
                   std::to_string(f->event) + ") is not ordered after the WaitFlag that took the previous set "
                   "(nothing on its pipe waited for anything that follows that wait): with other timing it sets "
                   "the flag twice, which is undefined; make the set depend on the wait (both under the same "
                   "condition, or a flag from the waiting pipe to the setting pipe)",
               {checker->describe(q.wait_uid), checker->describe(r.uid)});
      }
      int64_t fire = std::max(r.issue, ps.last_complete) + chip.flag_latency_cycles;
      q.push({fire, r.uid, checker ? checker->snapshot(c, r.pipe) : -1});
      int d = static_cast<int>(f->dst);
      if (!c.pipes[d].pending.empty() || (d == 0 && c.blocked == Core::SWait)) wakes_.push_back({&c, d});
    } else {
      if (q.empty()) return --events_, false;
      bool by_tpipe = q.front().tpipe;
      consume(q);
      if (checker) {  // a wait on S blocks the scalar unit: every later-issued instruction knows it
        auto [t, clk] = r.pipe == Pipe::S ? checker->scalar_wait(c) : checker->tick(c, r.pipe);
        q.wait_tid = t, q.wait_clk = clk, q.wait_uid = r.uid;
      }
      if (checker && !q.empty())
        report(ReportKind::FlagSetTwice,
               "SetFlag<" + std::string(pipe_name(f->src)) + "_" + std::string(pipe_name(f->dst)) + ">(" +
                   std::to_string(f->event) + ") was set again before this WaitFlag consumed the earlier set "
                   "(setting a flag twice without a wait is undefined): wait before setting again or use another event id" +
                   (by_tpipe ? std::string("; the earlier set is TPipe's constructor, which sets M_MTE1 events 0, 1 and 2 "
                                           "on the AIC: call pipe.Destroy() after InitBuffer or use ids >= 3")
                             : std::string()),
               {checker->describe(q.front().uid), checker->describe(r.uid)});
    }
    ps.ring[r.seq % ps.ring.size()] = start;
    return true;
  }
  if (auto* x = std::get_if<RCross>(&r.op)) {
    if (x->set) {
      if (checker) {
        r.uid = checker->record(c, r.in, start);
        checker->begin(c, r.pipe);
      }
      int64_t fire = std::max(r.issue, ps.last_complete);
      cross_set(c, *x, fire, r);
    } else {
      FlagQueue& q = c.cross[x->id];
      if (q.empty()) return --events_, false;
      consume(q);
      if (checker) {
        CrossWaits& cw = c.cross_waits[x->id];
        auto [t, clk] = checker->scalar_wait(c);
        cw.ring.resize(chip.cross_flag_max_pending);
        cw.ring[cw.waits++ % chip.cross_flag_max_pending] = {t, clk, r.uid};
      }
    }
    ps.ring[r.seq % ps.ring.size()] = start;
    return true;
  }
  if (std::holds_alternative<RBarrier>(r.op)) {
    ps.free = std::max(start, ps.last_complete);
    if (checker) checker->barrier(c, r.pipe);
    ps.ring[r.seq % ps.ring.size()] = start;
    return true;
  }
  execute(c, ps, r);
  return true;
}

void Machine::execute(Core& c, PipeState& ps, RInstr& r) {
  int64_t start = std::max(ps.free, r.issue);
  bool ok = true;
  thread_local std::vector<Access> acc;
  acc.clear();
  if (checker || opt.functional) {
    ok = accesses(c, r, acc);
    if (checker) {
      r.uid = checker->record(c, r.in, start);
      checker->begin(c, r.pipe);
      if (ok)
        for (const auto& a : acc) checker->access(c, r.pipe, r.uid, a);
    }
    if (written && ok) written->execute(c, r, acc);
  }
  if (ok)  // the GM bytes DMA writes (the DataCache rule of scalar_load)
    for (const auto& a : acc)
      if (a.write && a.space <= static_cast<int>(prog.params.size()) && scalar_read_[a.space] && a.rect.rows > 0 &&
          a.rect.row_bytes > 0)
        gm_written_[a.space].push_back({a.rect.start, a.rect.end()});
  Cost k = timing->cost(c, r, start);
  ps.free = start + k.busy;
  ps.last_complete = std::max(ps.last_complete, ps.free + k.latency);
  ps.busy += k.busy;
  ps.ring[r.seq % ps.ring.size()] = start;
  c.mmad_mac_cycles += k.mac_cycles;
  result.flops += k.flops;
  ++result.instructions;
  if (opt.trace) result.trace.push_back({c.index, static_cast<uint8_t>(r.pipe), start, k.busy, r.in});
  if (ok && opt.functional) {
    if (queue_) queue_->submit(c, r, acc);
    else functional(c, r);
  }
}

void Machine::set_atomic(Core& c, const SetAtomic& a, const Instr* in) {
  c.scalar_time += chip.scalar_issue_cycles;
  if (a.add && !atomic_add_dtype(*a.add))
    report(ReportKind::ApiRule,
           "SetAtomicAdd<" + std::string(a.add->name()) + ">: the atomic add has int8, int16, half, bfloat16, int32 "
           "and float (AscendC SetAtomicAdd, Atlas A2)",
           {describe(c, in, c.scalar_time)});
  if (a.add) {
    c.atomic = a.add->code;
    c.atomic_set = in;
  } else {
    c.atomic.reset();
    c.atomic_set = nullptr;
  }
}

// The mode travels with the copy issued under it (program.h SetAtomic): a copy into GM adds when
// the mode is on, whatever its mark says; a mark that disagrees with the mode is reported.
void Machine::atomic_mode(Core& c, RInstr& r) {
  bool* atomic = nullptr;
  ir::DTypeCode dt{};
  if (auto* x = std::get_if<RDataCopy>(&r.op); x && x->kind == RDataCopy::UbToGm) atomic = &x->atomic, dt = x->dt;
  if (auto* x = std::get_if<RFixpipe>(&r.op)) atomic = &x->atomic, dt = x->to;
  if (!atomic) return;
  bool on = c.atomic.has_value();
  if (*atomic && !on)
    report(ReportKind::ApiRule,
           "a copy meant to add into GM (T.atomic_add) is issued without SetAtomicAdd: it overwrites GM instead",
           {describe(c, r.in, c.scalar_time)});
  if (!*atomic && on)
    report(ReportKind::ApiRule,
           "a plain copy into GM is issued while the atomic mode is on (SetAtomicAdd<" +
               std::string(ir::DType(*c.atomic).name()) + "> with no SetAtomicNone after the atomic copy): it adds into "
               "GM instead of writing",
           {describe(c, r.in, c.scalar_time), describe(c, c.atomic_set, c.scalar_time)});
  if (*atomic && on && *c.atomic != dt)
    report(ReportKind::ApiRule,
           "SetAtomicAdd<" + std::string(ir::DType(*c.atomic).name()) + "> is on but the copy writes " +
               std::string(ir::DType(dt).name()) + " elements: the mode's dtype must be the data's",
           {describe(c, r.in, c.scalar_time), describe(c, c.atomic_set, c.scalar_time)});
  *atomic = on;
}

void Machine::issue(Core& c, RInstr r) {
  int p = static_cast<int>(r.pipe);
  if (r.pipe == Pipe::ALL) p = 0;
  PipeState& ps = c.pipes[p];
  int64_t depth = static_cast<int64_t>(ps.ring.size());
  r.seq = ps.count++;
  r.issue = ps.count > depth ? std::max(c.scalar_time, ps.ring[r.seq % depth]) : c.scalar_time;
  c.scalar_time = r.issue + chip.scalar_issue_cycles;
  if (p == 0) {  // the scalar unit itself: waits block it, barriers on ALL drain everything
    if (auto* b = std::get_if<RBarrier>(&r.op); b && b->pipe == Pipe::ALL) {
      c.blocked = Core::BarrierAll;
      c.blocked_instr = std::move(r);
      return;
    }
    if (!try_execute(c, ps, r)) {
      c.blocked = Core::SWait;
      c.blocked_instr = std::move(r);
    }
    return;
  }
  if (!ps.pending.empty()) {  // it runs later: it keeps what S knows now (checker.h: issue time)
    if (checker) r.s_snap = checker->hold_s(c);
    ps.pending.push_back(std::move(r));
    if (static_cast<int64_t>(ps.pending.size()) >= depth) {
      c.blocked = Core::QueueFull;
      c.blocked_pipe = p;
    }
    return;
  }
  if (!try_execute(c, ps, r)) ps.pending.push_back(std::move(r));
}

// GlobalTensor::GetValue: issued to pipe S like any scalar-unit instruction (bounds, the race
// checker and the cost see it there); the scalar unit then waits for the value and binds it. The
// DataCache is not coherent with DMA: reading bytes a DMA wrote earlier in this run is reported
// (the value is then 0: the program has no defined one).
void Machine::scalar_load(Core& c, const BC& bc, RInstr r) {
  const auto load = std::get<RScalarLoad>(r.op);
  const Instr* in = r.in;
  bool valid = r.valid;
  issue(c, std::move(r));
  c.scalar_time = std::max(c.scalar_time, c.pipes[0].free);
  Value v{};
  int es = ir::DType(load.dt).bytes();
  Span s = base(c, load.src);
  int64_t lo = load.src.off, hi = lo + es;
  bool in_bounds = valid && s.data && lo >= 0 && hi <= s.size && lo % es == 0;
  bool stale = false;
  // UB (LocalTensor::GetValue): no DataCache; the value is the bytes once every data effect issued
  // before (in the scheduler's order, which the race checker validated) has run
  if (in_bounds && !load.src.gm && queue_) queue_->drain();
  if (in_bounds && load.src.gm)
    for (const auto& [wlo, whi] : gm_written_[s.space]) stale = stale || (lo < whi && wlo < hi);
  if (stale) {
    report(ReportKind::StaleDataCache,
           "the scalar unit reads bytes [" + std::to_string(lo) + ", " + std::to_string(hi) + ") of " +
               space_name(s.space) + ", which a DMA wrote earlier in this kernel run: the scalar DataCache "
               "is not coherent with DMA, so the read may return the old value (call DataCacheCleanAndInvalid "
               "before it, or read only tensors the kernel does not write)",
           {describe(c, in, c.scalar_time)});
  } else if (in_bounds) {
    // timing-only runs read the value too (the caller's tensor is there): loop trip counts and
    // addresses that come from GM (paged decode's context lengths and block table) are the real ones
    const uint8_t* p = s.data + lo;
    if (load.dt == ir::DTypeCode::i64) {
      std::memcpy(&v.i, p, 8);
      v.f = static_cast<double>(v.i);
    } else {
      v.f = num::load(p, load.dt);
      v.i = ir::DType(load.dt).is_float() ? static_cast<int64_t>(std::trunc(v.f)) : static_cast<int64_t>(v.f);
    }
  }
  c.slots[bc.slot] = v;
}

bool Machine::try_scalar_wait(Core& c) {
  switch (c.blocked) {
    case Core::None:
      return true;
    case Core::QueueFull:
      if (static_cast<int64_t>(c.pipes[c.blocked_pipe].pending.size()) >= static_cast<int64_t>(c.pipes[c.blocked_pipe].ring.size()))
        return false;
      c.scalar_time = std::max(c.scalar_time, c.pipes[c.blocked_pipe].free);
      break;
    case Core::SWait:
      if (!try_execute(c, c.pipes[0], c.blocked_instr)) return false;
      break;
    case Core::BarrierAll: {
      int64_t t = c.scalar_time;
      for (auto& ps : c.pipes) {
        if (!ps.pending.empty()) return false;
        t = std::max(t, ps.last_complete);
      }
      c.scalar_time = t;
      for (auto& ps : c.pipes) ps.free = std::max(ps.free, t);
      if (checker) {
        c.blocked_instr.uid = checker->record(c, c.blocked_instr.in, t);
        checker->barrier_all(c);
      }
      break;
    }
  }
  c.blocked = Core::None;
  return true;
}

void Machine::drain(Core& c, int pipe) {
  PipeState& ps = c.pipes[pipe];
  while (!ps.pending.empty()) {
    if (!try_execute(c, ps, ps.pending.front())) break;
    ps.pending.pop_front();
  }
}

void Machine::drain_wakes() {
  while (!wakes_.empty()) {
    auto [c, p] = wakes_.back();
    wakes_.pop_back();
    if (p != 0) drain(*c, p);
  }
}

void Machine::step(Core& c) {
  cur_core_ = &c;
  const auto& ops = c.code->ops;
  while (true) {
    if (c.blocked != Core::None && !try_scalar_wait(c)) return;
    drain_wakes();
    if (c.scalar_time > horizon_) return;  // the other cores' turn (run())
    const BC& bc = ops[c.pc];
    switch (bc.op) {
      case BC::End: {
        for (auto& ps : c.pipes)
          if (!ps.pending.empty()) return;
        if (c.atomic)
          report(ReportKind::ApiRule,
                 "the block ends with the atomic mode on (SetAtomicAdd<" + std::string(ir::DType(*c.atomic).name()) +
                     "> without SetAtomicNone): every later copy into GM on " + c.name + " would add instead of write",
                 {describe(c, c.atomic_set, c.scalar_time)});
        tpipe_destruct(c);
        if (++c.next_block < c.blocks.size()) {
          start_block(c);
          continue;
        }
        c.running = false;
        c.finished = true;
        return;
      }
      case BC::Let:
        c.slots[bc.slot] = eval(bc.expr, c.slots);
        ++c.pc;
        break;
      case BC::ForBegin: {
        int64_t ext = eval(bc.expr, c.slots).i;
        c.slots[bc.slot2] = Value{ext, static_cast<double>(ext)};
        c.slots[bc.slot] = Value{0, 0};
        c.pc = ext > 0 ? c.pc + 1 : static_cast<size_t>(bc.target);
        c.scalar_time += chip.scalar_issue_cycles;
        break;
      }
      case BC::ForEnd: {
        Value& v = c.slots[bc.slot];
        ++v.i;
        v.f = static_cast<double>(v.i);
        c.pc = v.i < c.slots[bc.slot2].i ? static_cast<size_t>(bc.target) : c.pc + 1;
        c.scalar_time += chip.scalar_issue_cycles;
        break;
      }
      case BC::IfFalse:
      {
        Value v = eval(bc.expr, c.slots);
        bool truth = cnodes[bc.expr].is_float ? v.f != 0 : v.i != 0;
        c.pc = truth ? c.pc + 1 : static_cast<size_t>(bc.target);
        break;
      }
      case BC::Jump:
        c.pc = static_cast<size_t>(bc.target);
        break;
      case BC::Instr:
        ++c.pc;
        if (bc.slot >= 0) {
          scalar_load(c, bc, resolve(c, bc));
        } else if (auto* a = std::get_if<SetAtomic>(&bc.instr->op)) {
          set_atomic(c, *a, bc.instr);
        } else {
          RInstr r = resolve(c, bc);
          atomic_mode(c, r);
          issue(c, std::move(r));
        }
        drain_wakes();
        break;
    }
  }
}

void Machine::finish() {
  // deadlock / unmatched waits
  std::vector<ReportInstr> stuck;
  for (auto& c : cores) {
    if (c.finished) continue;
    if (c.blocked == Core::SWait || c.blocked == Core::BarrierAll)
      stuck.push_back(describe(c, c.blocked_instr.in, c.scalar_time));
    for (auto& ps : c.pipes)
      if (!ps.pending.empty()) stuck.push_back(describe(c, ps.pending.front().in, ps.free));
  }
  if (written && stuck.empty()) written->finish();  // the outputs' elements nothing wrote (a run that ended)
  if (!stuck.empty()) {
    std::string msg = std::to_string(stuck.size()) +
                      " wait(s) can never be satisfied (no matching set is ever executed; every core is finished "
                      "or blocked):";
    for (const auto& s : stuck) msg += "\n    " + s.core + ": " + s.text + (s.span.known() ? "  (line " + std::to_string(s.span.line) + ")" : "");
    if (stuck.size() > 8) stuck.resize(8);
    report(ReportKind::Deadlock, msg, stuck);
  }
  // flags left set
  for (auto& c : cores) {
    for (size_t i = 0; i < c.flags.size(); ++i) {
      if (c.flags[i].empty()) continue;
      int ids = chip.flag_event_ids;
      Pipe s = static_cast<Pipe>(i / ids / 8), d = static_cast<Pipe>(i / ids % 8);
      std::vector<ReportInstr> ins;
      if (checker && c.flags[i].front().uid) ins.push_back(checker->describe(c.flags[i].front().uid));
      report(ReportKind::UnmatchedSetFlag,
             "SetFlag<" + std::string(pipe_name(s)) + "_" + std::string(pipe_name(d)) + ">(" + std::to_string(i % ids) +
                 ") on " + c.name + " is never waited for (flags must be paired exactly; add the matching WaitFlag "
                 "before the kernel ends)",
             ins);
    }
    // cross-core sets that arrived and were never waited for: each id is a counter that outlives the
    // block (a later block of this core, or the next kernel, would pass its CrossCoreWaitFlag at once);
    // Set and Wait are used in pairs (CrossCoreSetFlag docs; session 21 hunt F8)
    for (size_t id = 0; id < c.cross.size(); ++id) {
      if (c.cross[id].empty()) continue;
      std::vector<ReportInstr> ins;
      if (checker && c.cross[id].front().uid) ins.push_back(checker->describe(c.cross[id].front().uid));
      report(ReportKind::UnmatchedSetFlag,
             "cross-core flag " + std::to_string(id) + " of " + c.name + " has " + std::to_string(c.cross[id].size()) +
                 " set(s) never waited for when the kernel ends (CrossCoreSetFlag and CrossCoreWaitFlag are used in "
                 "pairs: a left-over set would release a later wait on this core at once): add the matching "
                 "CrossCoreWaitFlag on " + c.name + ", or set only for the cores that wait",
             ins);
    }
  }
  int64_t total = timing->drained();
  for (auto& c : cores) {
    total = std::max(total, c.scalar_time);
    for (auto& ps : c.pipes) total = std::max({total, ps.last_complete, ps.free});
  }
  result.total_cycles = total;
  result.hbm_bytes = timing->hbm_bytes();
  result.time_us = static_cast<double>(total) / chip.clock_mhz;
  int64_t macs = 0, mbusy = 0;
  for (auto& c : cores) {
    int t = static_cast<int>(c.type);
    for (int p = 0; p < kNumPipes; ++p) result.busy_cycles[t][p] += c.pipes[p].busy;
    macs += c.mmad_mac_cycles;
    if (c.type == CoreType::AIC) mbusy += c.pipes[static_cast<int>(Pipe::M)].busy;
  }
  for (int t = 0; t < 2; ++t) {
    int n = t == 0 ? aic_phys_ : aiv_phys_;
    for (int p = 0; p < kNumPipes; ++p)
      result.busy_pct[t][p] = n && total ? 100.0 * static_cast<double>(result.busy_cycles[t][p]) / (static_cast<double>(total) * n) : 0;
  }
  if (total) {
    result.cube_utilisation = static_cast<double>(macs) / (static_cast<double>(total) * chip.aic_cores);
    result.cube_busy = aic_phys_ ? static_cast<double>(mbusy) / (static_cast<double>(total) * aic_phys_) : 0;
    result.tflops = result.flops / (result.time_us * 1e-6) / 1e12;
  }
}

Result Machine::run() {
  for (auto& c : cores) {
    if (c.blocks.empty()) {
      c.finished = true;
      continue;
    }
    c.scalar_time = timing->launch();
    start_block(c);
  }
  // Turns of kTurnCycles: each round lets every core issue up to kTurnCycles past the earliest
  // unfinished core's scalar time. When no core moves (the earliest ones wait for a core past the
  // horizon), the next round's horizon follows the earliest core that is not waiting, then no
  // horizon at all; when no core moves even then, the run ends (finish() reports a deadlock).
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  int stuck = 0;
  while (true) {
    if (opt.cancel && opt.cancel->load(std::memory_order_relaxed))
      throw ir::Error("ascend simulator: the simulation of '" + prog.name + "' was cancelled (Options::cancel)",
                      prog.span);
    int64_t lo = kNever;
    for (auto& c : cores)
      if (!c.finished && (stuck == 0 || c.blocked == Core::None)) lo = std::min(lo, c.scalar_time);
    horizon_ = stuck >= 2 || lo > kNever - kTurnCycles ? kNever : lo + kTurnCycles;
    bool all = true, progress = false;
    for (auto& c : cores) {
      if (c.finished) continue;
      size_t pc = c.pc, nb = c.next_block;
      int64_t n = events_;
      auto blocked = c.blocked;
      step(c);
      drain_wakes();
      if (c.pc != pc || c.next_block != nb || events_ != n || c.blocked != blocked || c.finished)
        progress = true;
      if (!c.finished) all = false;
    }
    if (all) break;
    if (progress) {
      stuck = 0;
    } else if (horizon_ == kNever) {
      break;
    } else {
      ++stuck;
    }
  }
  if (queue_) queue_->drain();
  finish();
  return std::move(result);
}

Result run(const Program& program, const target::AscendParams& chip, std::vector<Arg> args,
           const std::vector<int64_t>& shape_values, const Options& options) {
  Machine m(program, chip, std::move(args), shape_values, options);
  return m.run();
}

}  // namespace tw::ascend::sim
