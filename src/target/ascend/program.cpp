#include "target/ascend/program.h"

#include <algorithm>
#include <iterator>
#include <initializer_list>

namespace tw::ascend {

std::string_view mem_name(Mem m) {
  static constexpr std::string_view names[] = {"GM", "L1", "L0A", "L0B", "L0C", "UB"};
  return names[static_cast<int>(m)];
}
std::string_view format_name(Format f) {
  static constexpr std::string_view names[] = {"ND", "Nz", "Zz", "Zn"};
  return names[static_cast<int>(f)];
}
std::string_view kernel_type_name(KernelType t) {
  switch (t) {
    case KernelType::AIC_ONLY: return "AIC_ONLY";
    case KernelType::AIV_ONLY: return "AIV_ONLY";
    case KernelType::MIX_1_2: return "MIX_1_2";
    case KernelType::MIX_AIC_1_0: return "MIX_AIC_1_0";
    case KernelType::MIX_AIV_1_0: return "MIX_AIV_1_0";
  }
  return "?";
}
bool runs_aic(KernelType t) { return t != KernelType::AIV_ONLY && t != KernelType::MIX_AIV_1_0; }
bool runs_aiv(KernelType t) { return t != KernelType::AIC_ONLY && t != KernelType::MIX_AIC_1_0; }
std::string_view core_type_name(CoreType c) { return c == CoreType::AIC ? "AIC" : "AIV"; }
std::string_view vec_binop_name(VecBinOp op) {
  static constexpr std::string_view names[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "ShiftLeft", "ShiftRight", "And", "Or"};
  return names[static_cast<int>(op)];
}
std::string_view vec_unop_name(VecUnOp op) {
  static constexpr std::string_view names[] = {"Exp", "Ln", "Sqrt", "Rsqrt", "Abs", "Relu", "Reciprocal"};
  return names[static_cast<int>(op)];
}
std::string_view reduce_op_name(ReduceOp op) {
  static constexpr std::string_view names[] = {"Sum", "Max", "Min"};
  return names[static_cast<int>(op)];
}
std::string_view round_mode_name(RoundMode m) {
  static constexpr std::string_view names[] = {"CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_ROUND"};
  return names[static_cast<int>(m)];
}
std::string_view vec_api_name(VecApi a) {
  static constexpr std::string_view names[] = {"Add",  "Sub",  "Mul", "Div", "Max",   "Min", "Adds",
                                               "Muls", "Maxs", "Mins", "Exp", "Ln",   "Sqrt", "Rsqrt",
                                               "Abs",  "Relu", "Reciprocal", "Cast", "Duplicate", "ShiftLeft",
                                               "ShiftRight", "Compare", "CompareScalar", "Select", "SelectScalar",
                                               "CreateVecIndex", "And", "Or"};
  static_assert(std::size(names) == kVecApiCount);
  return names[static_cast<int>(a)];
}
std::string_view cmp_mode_name(CmpMode m) {
  static constexpr std::string_view names[] = {"LT", "GT", "EQ", "LE", "GE", "NE"};
  return names[static_cast<int>(m)];
}
int vec_api_sources(VecApi a) {
  if (a <= VecApi::Min || a == VecApi::Compare || a == VecApi::Select || a == VecApi::And || a == VecApi::Or) return 2;
  return a == VecApi::Duplicate || a == VecApi::CreateVecIndex ? 0 : 1;
}
int vec_api_lane_bytes(VecApi a, ir::DType t) { return a == VecApi::And || a == VecApi::Or ? 2 : t.bytes(); }
bool vec_api_has_scalar(VecApi a) {
  return (a >= VecApi::Adds && a <= VecApi::Mins) || a == VecApi::Duplicate || a == VecApi::ShiftLeft ||
         a == VecApi::ShiftRight || a == VecApi::CompareScalar || a == VecApi::SelectScalar ||
         a == VecApi::CreateVecIndex;
}
ir::DType vec_scalar_dtype(VecApi a, ir::DType dtype, ir::DType src_dtype) {
  return a == VecApi::CompareScalar ? src_dtype : dtype;
}
bool is_high_level_vector(const InstrOp& op) {
  return std::holds_alternative<VecBinary>(op) || std::holds_alternative<VecBinaryScalar>(op) ||
         std::holds_alternative<VecUnary>(op) || std::holds_alternative<VecCast>(op) ||
         std::holds_alternative<VecDup>(op) || std::holds_alternative<VecIndex>(op) ||
         std::holds_alternative<VecReduce>(op) ||
         std::holds_alternative<VecRowBroadcast>(op) || std::holds_alternative<VecSelect>(op);
}


Pipe pipe_of(const InstrOp& op) {
  return std::visit(
      Overload{
          [](const CopyGmToL1&) { return Pipe::MTE2; }, [](const CopyGmToUb&) { return Pipe::MTE2; },
          [](const CopyUbToGm&) { return Pipe::MTE3; }, [](const CopyUbToUb&) { return Pipe::V; },
          [](const LoadL0&) { return Pipe::MTE1; }, [](const Mmad&) { return Pipe::M; },
          [](const Fixpipe&) { return Pipe::FIX; }, [](const InitConstValue&) { return Pipe::MTE2; },
          [](const DataCopyNd2Nz&) { return Pipe::MTE2; }, [](const DataCopyPadGmToUb&) { return Pipe::MTE2; },
          [](const DataCopyPadUbToGm&) { return Pipe::MTE3; }, [](const DataCopyUbToUb&) { return Pipe::V; },
          [](const LoadData2D&) { return Pipe::MTE1; }, [](const LoadData3DV2&) { return Pipe::MTE1; },
          [](const FixpipeV220&) { return Pipe::FIX; }, [](const FixpipeL1&) { return Pipe::FIX; },
          [](const VecBinary&) { return Pipe::V; },
          [](const VecBinaryScalar&) { return Pipe::V; }, [](const VecUnary&) { return Pipe::V; },
          [](const VecCast&) { return Pipe::V; }, [](const VecDup&) { return Pipe::V; },
          [](const VecIndex&) { return Pipe::V; },
          [](const VecReduce&) { return Pipe::V; }, [](const VecRowBroadcast&) { return Pipe::V; },
          [](const VecSelect&) { return Pipe::V; },
          [](const VecCallL2&) { return Pipe::V; }, [](const VecCallL0&) { return Pipe::V; },
          [](const WholeReduce&) { return Pipe::V; }, [](const Brcb&) { return Pipe::V; },
          [](const Gather&) { return Pipe::V; },
          [](const ScalarLoad&) { return Pipe::S; }, [](const ScalarStore&) { return Pipe::S; },
          [](const SetAtomic&) { return Pipe::S; },
          [](const SetFlag& f) { return f.src; }, [](const WaitFlag& f) { return f.dst; },
          [](const PipeBarrier& b) { return b.pipe; }, [](const CrossCoreSetFlag& f) { return f.pipe; },
          [](const CrossCoreWaitFlag& f) { return f.pipe; }},
      op);
}

std::string_view instr_name(const InstrOp& op) {
  static constexpr std::string_view names[] = {
      "CopyGmToL1", "CopyGmToUb", "CopyUbToGm", "CopyUbToUb", "LoadL0", "Mmad", "Fixpipe",
      "InitConstValue", "DataCopyNd2Nz", "DataCopyPadGmToUb", "DataCopyPadUbToGm", "DataCopyUbToUb",
      "LoadData2D", "LoadData3DV2", "FixpipeV220", "FixpipeL1",
      "VecBinary", "VecBinaryScalar", "VecUnary", "VecCast", "VecDup", "VecIndex", "VecReduce",
      "VecRowBroadcast", "VecSelect", "VecCallL2", "VecCallL0", "WholeReduce", "Brcb", "Gather", "ScalarLoad", "ScalarStore", "SetAtomic", "SetFlag", "WaitFlag", "PipeBarrier", "CrossCoreSetFlag", "CrossCoreWaitFlag"};
  return names[op.index()];
}

bool atomic_add_dtype(ir::DType t) {
  using D = ir::DTypeCode;
  return t.code == D::i8 || t.code == D::f16 || t.code == D::bf16 || t.code == D::i32 || t.code == D::f32;
}

bool is_byte_level_move(const InstrOp& op) {
  return std::holds_alternative<CopyGmToL1>(op) || std::holds_alternative<CopyGmToUb>(op) ||
         std::holds_alternative<CopyUbToGm>(op) || std::holds_alternative<CopyUbToUb>(op) ||
         std::holds_alternative<LoadL0>(op) || std::holds_alternative<Fixpipe>(op);
}

std::string_view quant_mode_name(QuantMode q) {
  static constexpr std::string_view names[] = {"NoQuant", "F322F16", "F322BF16"};
  return names[static_cast<int>(q)];
}

StmtPtr seq(std::vector<StmtPtr> body, ir::Span span) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::Seq;
  s->body = std::move(body);
  s->span = std::move(span);
  return s;
}
StmtPtr for_(ir::Var var, ir::Expr extent, StmtPtr body, ir::Span span) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::For;
  s->var = std::move(var);
  s->value = std::move(extent);
  s->body = {std::move(body)};
  s->span = std::move(span);
  return s;
}
StmtPtr if_(ir::Expr cond, StmtPtr then_body, StmtPtr else_body, ir::Span span) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::If;
  s->value = std::move(cond);
  s->body = {std::move(then_body)};
  s->else_body = std::move(else_body);
  s->span = std::move(span);
  return s;
}
StmtPtr let(ir::Var var, ir::Expr value, ir::Span span) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::Let;
  s->var = std::move(var);
  s->value = std::move(value);
  s->span = std::move(span);
  return s;
}
StmtPtr instr(InstrOp op, ir::Span span) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::Instr;
  s->instr = Instr{std::move(op), span};
  s->span = std::move(span);
  return s;
}

int Program::find_buffer(std::string_view n) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == n) return static_cast<int>(i);
  return -1;
}

bool flag_pair_legal(CoreType t, Pipe s, Pipe d) {
  using P = Pipe;
  auto in = [](P x, std::initializer_list<P> l) { return std::find(l.begin(), l.end(), x) != l.end(); };
  if (t == CoreType::AIC) {
    switch (s) {
      case P::M: return in(d, {P::MTE1, P::MTE2, P::FIX});
      case P::MTE1: return in(d, {P::M, P::MTE2, P::MTE3, P::FIX});
      case P::MTE2: return in(d, {P::M, P::MTE1, P::MTE3});
      case P::MTE3: return in(d, {P::MTE1, P::MTE2});
      case P::FIX: return in(d, {P::M, P::MTE1});
      case P::S: case P::V: case P::ALL: return false;
    }
    return false;
  }
  switch (s) {
    case P::S: return in(d, {P::V, P::MTE2, P::MTE3});
    case P::V: return in(d, {P::S, P::MTE2, P::MTE3});
    case P::MTE2: return in(d, {P::S, P::V, P::MTE3});
    case P::MTE3: return in(d, {P::S, P::V, P::MTE2});
    case P::M: case P::MTE1: case P::FIX: case P::ALL: return false;
  }
  return false;
}

bool cast_widening_exact(ir::DType dst, ir::DType src) {
  using D = ir::DTypeCode;
  if (dst.code == D::f32) return src.code == D::f16 || src.code == D::bf16;
  if (dst.code == D::f16) return src.code == D::i8 || src.code == D::u8;
  return false;
}

bool cast_pair_available(ir::DType dst, ir::DType src) {
  using D = ir::DTypeCode;
  auto is = [](ir::DType t, std::initializer_list<D> codes) {
    for (D c : codes)
      if (t.code == c) return true;
    return false;
  };
  if (src.code == D::f32) return is(dst, {D::f16, D::bf16, D::i32});
  if (dst.code == D::f32) return is(src, {D::f16, D::bf16, D::i32});
  if (src.code == D::f16) return is(dst, {D::i8, D::u8, D::i32});
  // int32 -> half is no plain conversion on dav-c220: its Cast is vconv_deq, which ignores the round
  // mode and scales by the DEQSCALE register (Cast.md table 4: "use with SetDeqScale"); cast_chain
  // goes through float32 (session 21 hunt F11)
  if (dst.code == D::f16) return is(src, {D::i8, D::u8});
  return src.code == D::bf16 && dst.code == D::i32;
}

std::vector<ir::DType> cast_chain(ir::DType dst, ir::DType src) {
  using D = ir::DTypeCode;
  const ir::DType f32{D::f32}, f16{D::f16}, bf16{D::bf16}, i32{D::i32};
  auto small = [](ir::DType t) { return t.code == D::i8 || t.code == D::u8; };
  auto then = [](std::vector<ir::DType> a, const std::vector<ir::DType>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  if (dst == src) return {};
  // bfloat16 -> int32 goes through float32 too (exact), truncated there like every float -> int
  // conversion: the Vector core takes bfloat16 operands only in Casts to and from float32
  if (src == bf16 && dst != f32) return then({f32}, cast_chain(dst, f32));
  if (dst == bf16 && src != f32) return then(cast_chain(f32, src), {bf16});
  if (small(src) && dst != f16 && !small(dst)) return then({f16}, cast_chain(dst, f16));
  if (src == i32 && dst == f16) return {f32, f16};
  if (src == f32 && small(dst)) return {i32, f32, f16, dst};
  return {dst};
}

bool cast_dequantizes(ir::DType dst, ir::DType src) {
  return dst.code == ir::DTypeCode::f16 && src.code == ir::DTypeCode::i32;
}

bool cast_round_mode_legal(ir::DType dst, ir::DType src, RoundMode m) {
  return !cast_widening_exact(dst, src) || m == RoundMode::None;
}

RoundMode cast_round_mode(ir::DType dst, ir::DType src) {
  if (cast_widening_exact(dst, src)) return RoundMode::None;
  if (dst.is_float()) return RoundMode::Rint;
  return src.is_float() ? RoundMode::Trunc : RoundMode::None;
}

}  // namespace tw::ascend
