// Tests of resolve_cross_waits (src/target/ascend/resolve_cross_waits.h): before/after texts of
// hand-built programs (print_program), and the mode the AscendC printer then prints.
#include "target/ascend/resolve_cross_waits.h"

#include <gtest/gtest.h>

#include <string>

#include "target/ascend/program_printer.h"

namespace tw::ascend {
namespace {

ir::Expr C(int64_t v) { return ir::int_imm(v); }
StmtPtr ins(InstrOp op, int line) { return instr(std::move(op), ir::Span{"k.py", line, 3}); }

// AIC: for i < 2 { wait(1) on S; set(0) mode 0 on FIX }. AIV: if (b == 0) { wait(0) on MTE2 }
// else { wait(5) on S }; set(1) mode 1 on MTE3.
Program cross_program() {
  Program p;
  p.name = "k";
  p.kernel_type = KernelType::MIX_1_2;
  p.block_idx = ir::var("b");
  p.sub_block_idx = ir::var("v");
  p.block_dim = C(1);
  p.workspace_bytes = C(0);
  p.span = ir::Span{"k.py", 1, 3};
  ir::Var i = ir::var("i");
  p.aic = seq({for_(i, C(2),
                    seq({ins(CrossCoreWaitFlag{C(1), Pipe::S}, 10), ins(CrossCoreSetFlag{0, Pipe::FIX, C(0)}, 11)}))});
  p.aiv = seq({if_(ir::binary(ir::BinOp::EQ, p.block_idx, C(0)), seq({ins(CrossCoreWaitFlag{C(0), Pipe::MTE2}, 20)}),
                   seq({ins(CrossCoreWaitFlag{C(5), Pipe::S}, 21)})),
               ins(CrossCoreSetFlag{1, Pipe::MTE3, C(1)}, 22)});
  return p;
}

TEST(ResolveCrossWaits, EachWaitGetsTheModeOfTheSetWithItsId) {
  Program before = cross_program();
  std::string b = print_program(before), a = print_program(resolve_cross_waits(before));
  // before: the waits have no mode
  EXPECT_NE(b.find("CrossCoreWaitFlag<S>(1)"), std::string::npos) << b;
  EXPECT_NE(b.find("CrossCoreWaitFlag<MTE2>(0)"), std::string::npos) << b;
  EXPECT_NE(b.find("CrossCoreWaitFlag<S>(5)"), std::string::npos) << b;
  // after: the mode of the set with the same id (1: mode 1, 0: mode 0), 2 when there is none (5)
  std::string expected = b;
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = expected.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    expected.replace(at, from.size(), to);
  };
  replace("CrossCoreWaitFlag<S>(1)", "CrossCoreWaitFlag<1, S>(1)");
  replace("CrossCoreWaitFlag<MTE2>(0)", "CrossCoreWaitFlag<0, MTE2>(0)");
  replace("CrossCoreWaitFlag<S>(5)", "CrossCoreWaitFlag<2, S>(5)");
  EXPECT_EQ(a, expected);
}

TEST(ResolveCrossWaits, TheLastSetWithAnIdWinsAndOnlyTheCodeTheKernelRunsCounts) {
  Program p = cross_program();
  p.aiv = seq({ins(CrossCoreSetFlag{1, Pipe::MTE3, C(0)}, 23), p.aiv});  // AIV code comes after AIC code
  std::string a = print_program(resolve_cross_waits(p));
  EXPECT_NE(a.find("CrossCoreWaitFlag<1, S>(1)"), std::string::npos) << a;
  EXPECT_NE(a.find("CrossCoreWaitFlag<1, MTE2>(0)"), std::string::npos) << a;

  // An AIC-only kernel does not run AIV code: its sets do not count.
  Program q = cross_program();
  q.kernel_type = KernelType::AIC_ONLY;
  const Program r = resolve_cross_waits(q);
  const auto& loop = r.aic->body.at(0);
  const auto& wait = std::get<CrossCoreWaitFlag>(loop->body.at(0)->body.at(0)->instr.op);
  ASSERT_TRUE(wait.mode.has_value());
  EXPECT_EQ(*wait.mode, 2);
}

// The final kernel type: a one-core-type kernel with a cross-core flag becomes MIX_AIC_1_0 /
// MIX_AIV_1_0 (only the header's type changes); without one, and MIX_1_2, it stays.
TEST(ResolveCrossWaits, OneCoreTypeKernelWithCrossFlagsBecomesMix10) {
  Program aiv = cross_program();
  aiv.kernel_type = KernelType::AIV_ONLY;
  aiv.aic = nullptr;
  aiv.aiv = seq({ins(CrossCoreSetFlag{0, Pipe::MTE3, C(1)}, 22), ins(CrossCoreWaitFlag{C(1), Pipe::S}, 23)});
  std::string b = print_program(aiv), a = print_program(resolve_cross_waits(aiv));
  EXPECT_EQ(b,
            "ascend_kernel k AIV_ONLY blocks=1 workspace=0 block_idx=b sub_block_idx=v\n"
            "AIV:\n"
            "  MTE3 CrossCoreSetFlag<0, MTE3>(1)  @22\n"
            "  S CrossCoreWaitFlag<S>(1)  @23\n");
  EXPECT_EQ(a,
            "ascend_kernel k MIX_AIV_1_0 blocks=1 workspace=0 block_idx=b sub_block_idx=v\n"
            "AIV:\n"
            "  MTE3 CrossCoreSetFlag<0, MTE3>(1)  @22\n"
            "  S CrossCoreWaitFlag<0, S>(1)  @23\n");

  Program aic = cross_program();
  aic.kernel_type = KernelType::AIC_ONLY;
  aic.aiv = nullptr;
  EXPECT_EQ(resolve_cross_waits(aic).kernel_type, KernelType::MIX_AIC_1_0);
  aic.aic = seq({});
  EXPECT_EQ(print_program(resolve_cross_waits(aic)), print_program(aic));  // no flag: AIC_ONLY
  EXPECT_EQ(resolve_cross_waits(cross_program()).kernel_type, KernelType::MIX_1_2);
}

TEST(ResolveCrossWaits, ProgramWithoutWaitsIsUnchanged) {
  Program p = cross_program();
  p.aic = seq({ins(CrossCoreSetFlag{0, Pipe::FIX, C(0)}, 11)});
  p.aiv = seq({ins(CrossCoreSetFlag{2, Pipe::MTE3, C(1)}, 22)});
  EXPECT_EQ(print_program(resolve_cross_waits(p)), print_program(p));
}

}  // namespace
}  // namespace tw::ascend
