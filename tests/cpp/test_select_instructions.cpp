// select_instructions: expert-mode Tile IR (text form) -> printed Ascend program (golden texts), and the
// compile-time errors (capacity, alignment, unmappable maps, misplaced ops), each at its line.
#include <gtest/gtest.h>

#include <functional>

#include "ir/arith.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_instructions.h"
#include "target/registry.h"
#include "transform/simplify.h"

namespace tw::ascend {
namespace {

// Instruction selection, then expert-mode placement (every buffer its own bytes), as the pipeline does.
Program lower(const std::string& text) {
  const target::Target& t = target::find_target("ascend910b2");
  return plan_memory(select_instructions(ir::parse_kernel(text, "expert.tw"), t), t, /*reuse=*/false);
}

void expect_error(const std::string& text, const std::string& msg, int line, const std::string& hint = "") {
  try {
    lower(text);
    ADD_FAILURE() << "expected an error containing '" << msg << "'";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().file, "expert.tw") << e.what();
    if (!hint.empty()) EXPECT_NE(e.hint().find(hint), std::string::npos) << e.what();
  }
}

// The Cube path with flags as written: GM -> L1 (ND->Nz, tails) -> L0A/L0B -> Mmad -> Fixpipe.
const char* kCubeGemm = R"(kernel mm(A: global float16[M, 40], B: global float16[40, 48], C: global float16[M, 48] out)
    grid(cid = ceildiv(M, 32)) sub_block(vid) {
  alloc a1: L1 float16[32, 48]
  alloc b1: L1 float16[48, 48]
  alloc a0: L0A float16[32, 48]
  alloc b0: L0B float16[48, 48]
  alloc c0: L0C float32[32, 48]
  scope C {
    copy A[cid * 32:+32, 0:+48] -> a1
    copy B[0:+48, 0:+48] -> b1
    sync set_flag(MTE2, MTE1, 0)
    sync wait_flag(MTE2, MTE1, 0)
    copy a1 -> a0
    copy b1 -> b0
    sync set_flag(MTE1, M, 0)
    sync wait_flag(MTE1, M, 0)
    gemm a0, b0 -> c0 clear=true
    sync set_flag(M, FIX, 0)
    sync wait_flag(M, FIX, 0)
    copy c0 -> C[cid * 32:+32, 0:+48]
  }
}
)";

TEST(SelectInstructions, CubeGemm) {
  Program p = lower(kCubeGemm);
  EXPECT_EQ(print_program(p), R"(ascend_kernel mm AIC_ONLY blocks=ceildiv(M, 32) workspace=0 block_idx=cid sub_block_idx=vid
  param 0 A: GM float16[M, 40]
  param 1 B: GM float16[40, 48]
  param 2 C: GM float16[M, 48] out
  buffer a1: AIC L1 @0 +3072 float16 Nz
  buffer b1: AIC L1 @3072 +4608 float16 Nz
  buffer a0: AIC L0A @0 +3072 float16 Zz
  buffer b0: AIC L0B @0 +4608 float16 Zn
  buffer c0: AIC L0C @0 +6144 float32 Nz
  pool AIC L1 +7680
  pool AIC L0A +3072
  pool AIC L0B +4608
  pool AIC L0C +6144
AIC:
  MTE2 CopyGmToL1 a1[0] <- A[cid * 2560] float16 rows=max(min(M - cid * 32, 32), 0) cols=40 src_row_stride=40 nz=32x48  @9
  MTE2 CopyGmToL1 b1[0] <- B[0] float16 rows=40 cols=48 src_row_stride=48 nz=48x48  @10
  MTE2 SetFlag<MTE2_MTE1>(0)  @11
  MTE1 WaitFlag<MTE2_MTE1>(0)  @12
  MTE1 LoadL0 a0[0] <- a1[0] float16 src_rows=32 window=(0, 0) dst=32x48  @13
  MTE1 LoadL0 b0[0] <- b1[0] float16 src_rows=48 window=(0, 0) dst=48x48 transpose  @14
  MTE1 SetFlag<MTE1_M>(0)  @15
  M WaitFlag<MTE1_M>(0)  @16
  M Mmad c0[0] <- a0[0] x b0[0] float16->float32 m=32 n=48 k=48 init=true  @17
  M SetFlag<M_FIX>(0)  @18
  FIX WaitFlag<M_FIX>(0)  @19
  FIX Fixpipe C[cid * 3072] <- c0[0] float32->float16 m=max(min(M - cid * 32, 32), 0) n=48 src_rows=32 dst_row_stride=48  @20
)");
}

// The Vector path: GM <-> UB with tails, reduce, row broadcast, unary/binary/scalar maps, cast,
// fill, UB -> UB copy, flags and barriers as written; vid splits the rows between the two AIVs.
const char* kVector = R"(kernel sm(X: global float32[N, 64], Y: global float16[N, 64] out, s: float32)
    grid(cid = ceildiv(N, 16)) sub_block(vid) {
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  alloc m: UB float32[8]
  alloc h: UB float16[8, 64]
  scope V {
    let r0: int32 = cid * 16 + vid * 8
    copy X[r0:+8, 0:+64] -> x
    sync set_flag(MTE2, V, 0)
    sync wait_flag(MTE2, V, 0)
    reduce max x -> m axis=1 clear=true
    sync pipe_barrier(V)
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        y[i, j] = x[i, j] - m[i]
      }
    }
    sync pipe_barrier(V)
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        y[i, j] = exp(y[i, j])
      }
    }
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        y[i, j] = y[i, j] * s
      }
    }
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        y[i, j] = max(y[i, j], 0.0)
      }
    }
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        x[i, j] = x[i, j] + y[i, j]
      }
    }
    for i in parallel(0, 8) {
      for j in parallel(0, 32) {
        x[i, j] = 1.0 / y[i, j + 32]
      }
    }
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        h[i, j] = cast<float16>(y[i, j])
      }
    }
    fill m = 0.0
    copy x[0:+8, 0:+32] -> y[0:+8, 32:+32]
    reduce sum x -> m axis=1 clear=true
    sync set_flag(V, MTE3, 0)
    sync wait_flag(V, MTE3, 0)
    copy h -> Y[r0:+8, 0:+64]
  }
}
)";

TEST(SelectInstructions, VectorOps) {
  Program p = lower(kVector);
  EXPECT_EQ(p.kernel_type, KernelType::MIX_1_2);  // vid is used: both AIVs of each block run
  EXPECT_EQ(print_program(p), R"(ascend_kernel sm MIX_1_2 blocks=ceildiv(N, 16) workspace=0 block_idx=cid sub_block_idx=vid
  param 0 X: GM float32[N, 64]
  param 1 Y: GM float16[N, 64] out
  param 2 s: float32
  buffer x: AIV UB @0 +2048 float32 ND
  buffer y: AIV UB @2048 +2048 float32 ND
  buffer m: AIV UB @4096 +32 float32 ND
  buffer h: AIV UB @4128 +1024 float16 ND
  pool AIV UB +5152
AIC:
AIV:
  r0 = cid * 16 + vid * 8
  if max(min(N - r0, 8), 0) < 8:
    ALL PipeBarrier<ALL>  @9
    V Duplicate x[0]/512 <- 0.0 float32 1x512  @9
    ALL PipeBarrier<ALL>  @9
  MTE2 CopyGmToUb x[0] <- X[r0 * 256] float32 n_rows=max(min(N - r0, 8), 0) row_bytes=256 src_stride=256 dst_stride=256 pad  @9
  MTE2 SetFlag<MTE2_V>(0)  @10
  V WaitFlag<MTE2_V>(0)  @11
  V RowReduceMax m[0]/8 <- x[0]/64 float32 8x64  @12
  V PipeBarrier<V>  @13
  V RowBroadcastSub y[0]/64 <- x[0]/64, m[0] float32 8x64  @16
  V PipeBarrier<V>  @19
  V Exp y[0]/512 <- y[0]/512 float32 1x512  @22
  V Muls y[0]/512 <- y[0]/512, s float32 1x512  @27
  V Relu y[0]/512 <- y[0]/512 float32 1x512  @32
  V Add x[0]/512 <- x[0]/512, y[0]/512 float32 1x512  @37
  V Reciprocal x[0]/64 <- y[128]/64 float32 8x32  @42
  V Cast h[0]/512 <- y[0]/512 float32->float16 CAST_RINT 1x512  @47
  V Duplicate m[0]/8 <- 0.0 float32 1x8  @50
  V CopyUbToUb y[128] <- x[0] float32 n_rows=8 row_bytes=128 src_stride=256 dst_stride=256  @51
  V RowReduceSum m[0]/8 <- x[0]/64 float32 8x64  @52
  V SetFlag<V_MTE3>(0)  @53
  MTE3 WaitFlag<V_MTE3>(0)  @54
  MTE3 CopyUbToGm Y[r0 * 128] <- h[0] float16 n_rows=max(min(N - r0, 8), 0) row_bytes=128 src_stride=128 dst_stride=128  @55
)");
}

// T.gemm on L1 operands expands to LoadL0 + flags + Mmad on implicit L0 buffers; T.mma's
// run-time init (an if over two gemms) becomes Mmad init=<cond>; loops with flags as written.
const char* kL1Gemm = R"(kernel g(A: global float16[64, K], B: global float16[K, 64], C: global float32[64, 64] out)
    grid(cid = 1) sub_block(vid) {
  alloc a1: L1 float16[2, 64, 32]
  alloc b1: L1 float16[2, 32, 64]
  alloc c0: L0C float32[64, 64]
  scope C {
    for k in serial(0, ceildiv(K, 32)) {
      copy A[0:+64, k * 32:+32] -> a1[k % 2:+1, 0:+64, 0:+32]
      copy B[k * 32:+32, 0:+64] -> b1[k % 2:+1, 0:+32, 0:+64]
      sync set_flag(MTE2, MTE1, 0)
      sync wait_flag(MTE2, MTE1, 0)
      if k == 0 {
        gemm a1[k % 2:+1, 0:+64, 0:+32], b1[k % 2:+1, 0:+32, 0:+64] -> c0 clear=true
      } else {
        gemm a1[k % 2:+1, 0:+64, 0:+32], b1[k % 2:+1, 0:+32, 0:+64] -> c0 clear=false
      }
    }
    sync set_flag(M, FIX, 0)
    sync wait_flag(M, FIX, 0)
    copy c0 -> C
  }
}
)";

TEST(SelectInstructions, GemmOnL1OperandsAndRuntimeInit) {
  Program p = lower(kL1Gemm);
  EXPECT_EQ(print_program(p), R"(ascend_kernel g AIC_ONLY blocks=1 workspace=0 block_idx=cid sub_block_idx=vid
  param 0 A: GM float16[64, K]
  param 1 B: GM float16[K, 64]
  param 2 C: GM float32[64, 64] out
  buffer a1: AIC L1 @0 +8192 float16 Nz
  buffer b1: AIC L1 @8192 +8192 float16 Nz
  buffer c0: AIC L0C @0 +16384 float32 Nz
  buffer _gemm_L0A: AIC L0A @0 +4096 float16 Zz
  buffer _gemm_L0B: AIC L0B @0 +4096 float16 Zn
  pool AIC L1 +16384
  pool AIC L0A +4096
  pool AIC L0B +4096
  pool AIC L0C +16384
AIC:
  for k in range(ceildiv(K, 32)):
    MTE2 CopyGmToL1 a1[k % 2 * 4096] <- A[k * 64] float16 rows=64 cols=max(min(K - k * 32, 32), 0) src_row_stride=K nz=64x32  @8
    MTE2 CopyGmToL1 b1[k % 2 * 4096] <- B[k * 4096] float16 rows=max(min(K - k * 32, 32), 0) cols=64 src_row_stride=64 nz=32x64  @9
    MTE2 SetFlag<MTE2_MTE1>(0)  @10
    MTE1 WaitFlag<MTE2_MTE1>(0)  @11
    MTE1 LoadL0 _gemm_L0A[0] <- a1[k % 2 * 4096] float16 src_rows=64 window=(0, 0) dst=64x32  @12
    MTE1 LoadL0 _gemm_L0B[0] <- b1[k % 2 * 4096] float16 src_rows=32 window=(0, 0) dst=32x64 transpose  @12
    MTE1 SetFlag<MTE1_M>(7)  @12
    M WaitFlag<MTE1_M>(7)  @12
    M Mmad c0[0] <- _gemm_L0A[0] x _gemm_L0B[0] float16->float32 m=64 n=64 k=32 init=k == 0  @12
    M SetFlag<M_MTE1>(7)  @12
    MTE1 WaitFlag<M_MTE1>(7)  @12
  M SetFlag<M_FIX>(0)  @18
  FIX WaitFlag<M_FIX>(0)  @19
  FIX Fixpipe C[0] <- c0[0] float32->float32 m=64 n=64 src_rows=64 dst_row_stride=64  @20
)");
}

// A MIX kernel: both codes, scalar code outside the scopes replicated, cross-core flags.
const char* kMix = R"(kernel mix(A: global float32[64, 64], W: global float32[64, 64] out)
    grid(cid = 4) sub_block(vid) {
  alloc c0: L0C float32[64, 64]
  alloc u: UB float32[32, 64]
  for t in serial(0, 2) {
    let row: int32 = vid * 32
    scope C {
      sync set_cross_flag(2, FIX, 1)
    }
    scope V {
      sync wait_cross_flag(1)
      copy W[row:+32, 0:+64] -> u
      sync set_flag(MTE2, MTE3, 0)
      sync wait_flag(MTE2, MTE3, 0)
      copy u -> W[row:+32, 0:+64]
    }
  }
}
)";

TEST(SelectInstructions, MixKernelReplicatesScalarCode) {
  Program p = lower(kMix);
  EXPECT_EQ(print_program(p), R"(ascend_kernel mix MIX_1_2 blocks=4 workspace=0 block_idx=cid sub_block_idx=vid
  param 0 A: GM float32[64, 64]
  param 1 W: GM float32[64, 64] out
  buffer c0: AIC L0C @0 +16384 float32 Nz
  buffer u: AIV UB @0 +8192 float32 ND
  pool AIC L0C +16384
  pool AIV UB +8192
AIC:
  for t in range(2):
    row = 0 * 32
    FIX CrossCoreSetFlag<2, FIX>(1)  @8
AIV:
  for t in range(2):
    row = vid * 32
    S CrossCoreWaitFlag<S>(1)  @11
    MTE2 CopyGmToUb u[0] <- W[row * 256] float32 n_rows=32 row_bytes=256 src_stride=256 dst_stride=256  @12
    MTE2 SetFlag<MTE2_MTE3>(0)  @13
    MTE3 WaitFlag<MTE2_MTE3>(0)  @14
    MTE3 CopyUbToGm W[row * 256] <- u[0] float32 n_rows=32 row_bytes=256 src_stride=256 dst_stride=256  @15
)");
}

// ---- errors ----

const char* kHead = "kernel e(A: global float32[64, 64], O: global float32[64, 64] out)\n"
                    "    grid(cid = 2) sub_block(vid) {\n";

TEST(SelectInstructions, CapacityErrorNamesBuffersAndSuggestsATile) {
  expect_error(std::string(kHead) +
                   "  alloc a: UB float32[256, 128]\n"
                   "  alloc b: UB float32[256, 128]\n"
                   "  scope V {\n    copy A -> a[0:+64, 0:+64]\n  }\n}\n",
               "UB overflow: a (256x128 float32, 131072 B), b (256x128 float32, 131072 B) need 262144 B but the "
               "AIV's UB on ascend910b2 holds 196352 B",
               3, "a smaller tile that fits: a 128x128, b 128x128 (131072 B)");
  expect_error(std::string(kHead) + "  alloc a: L0A float16[256, 256]\n  scope C {\n  }\n}\n",
               "L0A overflow: a (256x256 float16, 131072 B) need 131072 B but the AIC's L0A on ascend910b2 holds 65536 B",
               3, "a 128x256");
}

TEST(SelectInstructions, AlignmentErrors) {
  // (a global alloc outside the scopes is a GM workspace region: test_split_cube_vector.cpp)
  expect_error(std::string(kHead) +
                   "  alloc a: L1 float16[32, 64]\n  scope C {\n    alloc h: global float16[64, 64]\n  }\n}\n",
               "cannot alloc global buffer", 5);
}

TEST(SelectInstructions, L1WindowMustStartOnAStrip) {
  const char* text = R"(kernel e(A: global float16[64, 64]) grid(cid = 1) sub_block(vid) {
  alloc a: L1 float16[64, 64]
  scope C {
    copy A[0:+64, 0:+8] -> a[0:+64, 8:+8]
  }
}
)";
  expect_error(text, "the window's first column must be a constant multiple of C0 = 16", 4, "Nz strips");
}

TEST(SelectInstructions, UnmappableParallelBody) {
  expect_error(std::string(kHead) +
                   "  alloc x: UB float32[8, 64]\n  alloc m: UB float32[8]\n  scope V {\n"
                   "    for i in parallel(0, 8) {\n      for j in parallel(0, 64) {\n"
                   "        x[i, j] = exp(x[i, j] - m[i])\n      }\n    }\n  }\n}\n",
               "this T.Parallel body is not a vector instruction", 8, "split longer formulas into tile ops");
  expect_error(std::string(kHead) +
                   "  alloc x: UB float32[8, 64]\n  alloc m: UB float32[64, 8]\n  scope V {\n"
                   "    for i in parallel(0, 8) {\n      for j in parallel(0, 64) {\n"
                   "        x[i, j] = x[i, j] - m[j, i]\n      }\n    }\n  }\n}\n",
               "neither a tile indexed like the destination, a scalar, nor a per-row vector", 8);
}

// Row windows of an L1 tile (examples/moe.py's gathered rows): a GM row copied into row r of the Nz
// matrix starts r * 32 bytes into its first strip and fills only that row (window_rows=1); a fill of
// one row is one InitConstValue of a block per strip (dstGap: the other rows); out-of-reach rows fail.
TEST(SelectInstructions, L1RowWindows) {
  const char* text = R"(kernel g(X: global float16[20, 40], R: global int32[16], Y: global float16[16, 40] out)
    grid(cid = 1) sub_block(vid) {
  alloc a: L1 float16[16, 48]
  scope C {
    for r in serial(0, 16) {
      let t: int32 = R[r]
      if t < 20 {
        copy X[t:+1, 0:+40] -> a[r:+1, 0:+40]
      } else {
        fill a[r:+1, 0:+48] = 0.0f16
      }
    }
  }
}
)";
  std::string out = print_program(lower(text));
  EXPECT_NE(out.find("CopyGmToL1 a[r * 32] <- X["), std::string::npos) << out;
  // t may be negative (a GM value): a row before row 0 is skipped as on cpu (it reads the fill's zeros)
  EXPECT_NE(out.find("window_rows=1 skip_rows=min(max(0 - t, 0), 1) nz=16x48"), std::string::npos) << out;
  EXPECT_NE(out.find("InitConstValue a[r * 32] float16 repeatTimes=3 blockNum=1 dstGap=15 initValue=0.0f16"),
            std::string::npos)
      << out;
  std::string bad = text;
  bad.replace(bad.find("a[r:+1, 0:+40]"), 14, "a[t:+1, 0:+40]");
  expect_error(bad, "are not provably inside it", 8, "T.serial(16)");
  // under `if t >= 0` the start is provably >= 0: no clip (select_instructions' if-condition bounds)
  std::string guarded = text;
  guarded.replace(guarded.find("if t < 20 {"), 11, "if t >= 0 {");
  std::string g = print_program(lower(guarded));
  EXPECT_NE(g.find("window_rows=1 nz=16x48"), std::string::npos) << g;
  EXPECT_EQ(g.find("skip_rows"), std::string::npos) << g;
}

TEST(SelectInstructions, MisplacedOps) {
  expect_error(std::string(kHead) + "  alloc x: UB float32[8, 64]\n  copy A[0:+8, 0:+64] -> x\n  scope V {\n  }\n}\n",
               "a tile op outside T.Scope", 4, "T.Scope(\"V\")");
  expect_error(std::string(kHead) + "  alloc c: L0C float32[16, 16]\n  scope C {\n    c[0, 0] = 1.0\n  }\n}\n",
               "the scalar unit writes single elements of UB tiles only", 5);
  expect_error(std::string(kHead) + "  alloc c: L0C float32[16, 16]\n  scope C {\n    fill c = 0.0\n  }\n}\n",
               "only UB and L1 tiles can be filled", 5, "init=True");
  expect_error(std::string(kHead) + "  alloc x: shared float32[8, 64]\n  scope V {\n  }\n}\n",
               "expert mode places every tile itself", 3);
  expect_error(std::string(kHead) + "  alloc x: UB float32[8, 64]\n}\n", "has no T.Scope", 1);
}

TEST(SelectInstructions, GemmEventIsReserved) {
  std::string text = kL1Gemm;
  text.replace(text.find("sync set_flag(M, FIX, 0)"), 24, "sync set_flag(M, MTE1, 7)");
  text.replace(text.find("sync wait_flag(M, FIX, 0)"), 25, "sync wait_flag(M, MTE1, 7)");
  expect_error(text, "event 7 of M->MTE1 is used by T.gemm on L1 operands", 18, "0..6");
}

TEST(SelectInstructions, NotAnExpertKernel) {
  expect_error("kernel p(A: global float32[64]) grid(b = 1) {\n}\n", "is not an Ascend expert-mode kernel", 1);
}

// Issue 10 (AscendC API rules): widening casts carry CAST_NONE, both as an elementwise cast and
// as a converting UB -> UB copy (Cast.md table 4: any other mode issues no instruction).
TEST(SelectInstructions, WideningCastsUseCastNone) {
  std::string text = std::string(kHead) + R"(  alloc h: UB float16[8, 64]
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  alloc z: UB float16[8, 64]
  scope V {
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        x[i, j] = cast<float32>(h[i, j])
      }
    }
    copy h -> y
    copy x -> z
  }
}
)";
  std::string p = print_program(lower(text));
  EXPECT_NE(p.find("Cast x[0]/512 <- h[0]/512 float16->float32 CAST_NONE"), std::string::npos) << p;
  EXPECT_NE(p.find("Cast y[0]/512 <- h[0]/512 float16->float32 CAST_NONE"), std::string::npos) << p;
  EXPECT_NE(p.find("Cast z[0]/512 <- x[0]/512 float32->float16 CAST_RINT"), std::string::npos) << p;
}

TEST(SelectInstructions, PipeBarrierOnSIsRejectedAtItsLine) {
  expect_error(std::string(kHead) + "  alloc x: UB float32[8, 64]\n  scope V {\n    sync pipe_barrier(S)\n  }\n}\n",
               "PipeBarrier<PIPE_S> is a hardware error", 5, "needs no barrier");
}

// An A tile of one row: Mmad m = 1 would run as GEMV (A read as ND), so the Mmad computes a whole
// fractal row (m = 16); Fixpipe still writes the one valid row.
TEST(SelectInstructions, OneRowGemmIsPaddedToAFractalRow) {
  std::string text = kCubeGemm;
  for (auto [from, to] : {std::pair<std::string, std::string>{"a1: L1 float16[32, 48]", "a1: L1 float16[1, 48]"},
                          {"a0: L0A float16[32, 48]", "a0: L0A float16[1, 48]"},
                          {"c0: L0C float32[32, 48]", "c0: L0C float32[1, 48]"},
                          {"A[cid * 32:+32, 0:+48]", "A[cid:+1, 0:+48]"},
                          {"C[cid * 32:+32, 0:+48]", "C[cid:+1, 0:+48]"},
                          {"ceildiv(M, 32)", "M"}})
    text.replace(text.find(from), from.size(), to);
  std::string p = print_program(lower(text));
  EXPECT_NE(p.find("m=16 n=48 k=48"), std::string::npos) << p;
  EXPECT_NE(p.find("Fixpipe C[cid * 96] <- c0[0] float32->float16 m=max(min(M - cid, 1), 0)"), std::string::npos) << p;
}

// int8 L1 tiles are zeroed through half (InitConstValue has no int8 form on dav-c220).
TEST(SelectInstructions, Int8L1TilesAreZeroedAsHalf) {
  std::string text = R"(kernel q(A: global int8[M, 64], O: global int32[M, 64] out)
    grid(cid = ceildiv(M, 32)) sub_block(vid) {
  alloc a1: L1 int8[32, 64]
  scope C {
    copy A[cid * 32:+32, 0:+64] -> a1
  }
}
)";
  Program p = lower(text);
  bool found = false;
  std::function<void(const StmtPtr&)> walk = [&](const StmtPtr& s) {
    if (!s) return;
    if (s->kind == StmtKind::Instr)
      if (auto* c = std::get_if<CopyGmToL1>(&s->instr.op)) {
        found = true;
        EXPECT_EQ(c->fill_dtype, ir::DType(ir::DTypeCode::f16));
      }
    for (const auto& b : s->body) walk(b);
    walk(s->else_body);
  };
  walk(p.aic);
  EXPECT_TRUE(found) << print_program(p);
}

// Nd2NzParams.srcDValue is a uint16: a GM row stride above 65535 elements would be truncated.
TEST(SelectInstructions, GmRowStrideAbove65535IsAnError) {
  std::string text = kCubeGemm;
  for (auto [from, to] : {std::pair<std::string, std::string>{"A: global float16[M, 40]", "A: global float16[M, 70000]"}})
    text.replace(text.find(from), from.size(), to);
  expect_error(text, "Nd2NzParams.srcDValue is a uint16", 9, "store the matrix transposed");
}

// A global buffer allocated in the kernel is a region of the program's GM workspace (param -1),
// each 512 B aligned.
TEST(SelectInstructions, WorkspaceAllocsLowerToWorkspaceRegions) {
  const char* text = R"(kernel k(A: global float32[64, 64], B: global float32[64, 64] out)
    grid(cid = 1) sub_block(vid) {
  alloc w0: global float32[10, 10]
  alloc w1: global float32[64, 64]
  alloc a: UB float32[64, 64]
  scope V {
    copy A[0:+64, 0:+64] -> a
    copy a -> w1[0:+64, 0:+64]
    copy w1[0:+64, 0:+64] -> a
    copy a -> B[0:+64, 0:+64]
  }
}
)";
  Program p = select_instructions(transform::simplify(ir::parse_kernel(text)), target::find_target("ascend910b2"));
  EXPECT_EQ(ir::print(ir::arith::simplify(p.workspace_bytes)), "16896");  // 512 + 16384
  const CopyUbToGm* s = nullptr;
  for (const auto& st : p.aiv->body)
    if (st->kind == StmtKind::Instr && !s) s = std::get_if<CopyUbToGm>(&st->instr.op);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->dst.param, -1);
  EXPECT_EQ(ir::print(ir::arith::simplify(s->dst.offset)), "512");
}

}  // namespace
}  // namespace tw::ascend
