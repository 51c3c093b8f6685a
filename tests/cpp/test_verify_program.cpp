// Tests of verify_program (verify_program.h): a well-formed program passes, and each malformation
// it checks is an internal error naming the pass, the core and what is wrong. Programs are written
// as text (program_parser.h) and then broken in C++ (the text cannot express most breakages).
#include <gtest/gtest.h>

#include <functional>

#include "target/ascend/program_parser.h"
#include "target/ascend/verify_program.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

const char* kProgram = R"(ascend_kernel k MIX_1_2 blocks=4 workspace=0 block_idx=b sub_block_idx=v
  param 0 X: GM float32[M, 64]
  param 1 s: float32
  buffer c: AIC L0C @0 +4096 float32 Nz
  buffer u: AIV UB @0 +4096 float32 ND
AIC:
  FIX CrossCoreSetFlag<2, FIX>(3)  @4
AIV:
  S CrossCoreWaitFlag<S>(3)  @5
  for r in range(M):
    row = r * 256
    MTE2 CopyGmToUb u[0] <- X[row] float32 n_rows=1 row_bytes=256 src_stride=256 dst_stride=256  @6
    MTE2 SetFlag<MTE2_V>(r % 2)  @7
    V WaitFlag<MTE2_V>(r % 2)  @7
    V L2 Muls u[0] <- u[0], s float32 count=64  @8
)";

const target::Target& b2() { return target::find_target("ascend910b2"); }

// The AIV code's statements: [0] wait, [1] the loop; the loop body: [0] let, [1] copy, [2] set, [3] wait, [4] Muls.
StmtPtr& aiv(Program& p, int i) { return const_cast<std::vector<StmtPtr>&>(p.aiv->body)[i]; }
Stmt loop_body_stmt(const Program& p, int i) { return *p.aiv->body[1]->body[0]->body[i]; }

// Replaces statement i of the loop body with `s` and expects the error.
void expect_error(const std::function<void(Program&)>& breakit, const std::string& msg) {
  Program p = parse_program(kProgram, "k.prog");
  breakit(p);
  try {
    verify_program(p, b2(), "some_pass");
    ADD_FAILURE() << "expected an error containing '" << msg << "'";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("the Ascend program after pass 'some_pass' is malformed"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("compiler bug"), std::string::npos) << e.what();
  }
}

// A copy of the loop body with statement i replaced.
void replace_in_loop(Program& p, int i, StmtPtr s) {
  const Stmt& loop = *p.aiv->body[1];
  std::vector<StmtPtr> body = loop.body[0]->body;
  body[i] = std::move(s);
  aiv(p, 1) = for_(loop.var, loop.value, seq(std::move(body)));
}

TEST(VerifyProgram, AWellFormedProgramPasses) {
  Program p = parse_program(kProgram, "k.prog");
  EXPECT_NO_THROW(verify_program(p, b2(), "some_pass"));
}

// Once plan_memory set the pools, each must cover every buffer of its core and memory and be a
// multiple of 32 B; a core type the kernel type does not run has no code.
TEST(VerifyProgram, PoolsCoverTheirBuffersAndTheKernelTypeItsCode) {
  std::string text = kProgram;
  text.insert(text.find("AIC:\n"), "  pool AIC L0C +4096\n  pool AIV UB +4096\n");
  EXPECT_NO_THROW(verify_program(parse_program(text, "k.prog"), b2(), "plan_memory"));
  expect_error([](Program& p) {
    p.pool(CoreType::AIC, Mem::L0C) = 4096;
    p.pool(CoreType::AIV, Mem::UB) = 4064;
  }, "buffer 'u' (AIV UB @0 +4096) ends outside its pool of 4064 bytes");
  expect_error([](Program& p) {  // the AIC's L0C buffer has no pool once any pool is set
    p.pool(CoreType::AIV, Mem::UB) = 4096;
  }, "buffer 'c' (AIC L0C @0 +4096) ends outside its pool of 0 bytes");
  expect_error([](Program& p) {
    p.pool(CoreType::AIC, Mem::L0C) = 4096;
    p.pool(CoreType::AIV, Mem::UB) = 4100;
  }, "the AIV UB pool has 4100 bytes (a multiple of 32 of an on-chip memory)");
  expect_error([](Program& p) { p.kernel_type = KernelType::MIX_AIV_1_0; }, "kernel type MIX_AIV_1_0 runs no AIC but the program has AIC code");
  expect_error([](Program& p) { p.kernel_type = KernelType::AIC_ONLY; }, "kernel type AIC_ONLY runs no AIV but the program has AIV code");
}

// The sub-block index is AIV-only: the AscendC AIC branch does not declare it (select_instructions
// gives the AIC copy of replicated scalar code 0 for it).
TEST(VerifyProgram, TheSubBlockIndexInAicCodeIsAnError) {
  std::string text = kProgram;
  text.replace(text.find("AIC:\n"), 5, "AIC:\n  x = v * 2\n");
  Program p = parse_program(text, "k.prog");
  try {
    verify_program(p, b2(), "some_pass");
    ADD_FAILURE() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("AIC code"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("'v', which is not in scope there"), std::string::npos) << e.what();
  }
}

TEST(VerifyProgram, EachMalformationIsAnError) {
  auto muls = [](const Program& p) { return std::get<VecCallL2>(loop_body_stmt(p, 4).instr.op); };
  expect_error([&](Program& p) {  // a buffer index past the declared buffers
    VecCallL2 c = muls(p);
    c.dst.buffer = 7;
    replace_in_loop(p, 4, instr(c));
  }, "AIV code: `V L2 Muls buffer#7[0] <- u[0], s float32 count=64`: dst names buffer #7, which is not declared (the program has 2)");
  expect_error([&](Program& p) {  // the AIC's buffer in AIV code
    VecCallL2 c = muls(p);
    c.src0.buffer = 0;
    replace_in_loop(p, 4, instr(c));
  }, "src0 names buffer 'c' of the AIC");
  expect_error([&](Program& p) {  // a constant offset past the buffer's end
    VecCallL2 c = muls(p);
    c.dst.offset = ir::int_imm(4096);
    replace_in_loop(p, 4, instr(c));
  }, "dst starts at byte 4096, outside buffer 'u' (4096 bytes)");
  expect_error([&](Program& p) {  // the loop variable used after its loop
    VecCallL2 c = muls(p);
    c.dst.offset = p.aiv->body[1]->var;
    aiv(p, 0) = instr(c);
  }, "dst offset uses variable 'r', which is not in scope there");
  expect_error([&](Program& p) {  // a let used before it
    CopyGmToUb c = std::get<CopyGmToUb>(loop_body_stmt(p, 1).instr.op);
    replace_in_loop(p, 0, instr(c));
  }, "src offset uses variable 'row', which is not in scope there");
  expect_error([&](Program& p) {  // a GM operand naming the scalar parameter
    CopyGmToUb c = std::get<CopyGmToUb>(loop_body_stmt(p, 1).instr.op);
    c.src.param = 1;
    replace_in_loop(p, 1, instr(c));
  }, "src names parameter #1, which is not a tensor parameter");
  expect_error([&](Program& p) {  // an event id the 910B does not have
    replace_in_loop(p, 2, instr(SetFlag{Pipe::MTE2, Pipe::V, ir::int_imm(8)}));
  }, "the event id 8 is out of range 0..7");
  expect_error([&](Program& p) {  // a flag pair the AIV does not have
    replace_in_loop(p, 2, instr(SetFlag{Pipe::M, Pipe::V, ir::int_imm(0)}));
  }, "`M SetFlag<M_V>(0)` is not a flag pair of this core");
  expect_error([&](Program& p) {  // an event id naming a variable out of scope
    replace_in_loop(p, 2, instr(SetFlag{Pipe::MTE2, Pipe::V, p.aiv->body[1]->body[0]->body[0]->var}));
    aiv(p, 0) = instr(WaitFlag{Pipe::MTE2, Pipe::V, p.aiv->body[1]->var});
  }, "`V WaitFlag<MTE2_V>(r)`: the event id uses variable 'r', which is not in scope there");
  expect_error([&](Program& p) {  // a cross-core flag id past 10
    aiv(p, 0) = instr(CrossCoreWaitFlag{ir::int_imm(11), Pipe::S});
  }, "the cross-core flag id 11 is out of range 0..10");
  expect_error([&](Program& p) {  // a loop without its extent
    const Stmt& loop = *p.aiv->body[1];
    aiv(p, 1) = for_(loop.var, nullptr, loop.body[0]);
  }, "AIV code: a loop lacks its parts");
}

}  // namespace
}  // namespace tw::ascend
