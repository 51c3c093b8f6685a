// rotate_vector_loops: before/after tests (the split kernels of cube_vector_kernels.h
// after skew_cube_loops, and small hand-written vector loops).
#include <gtest/gtest.h>

#include "cube_vector_kernels.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "target/ascend/rotate_vector_loops.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string rotate(const std::string& text) {
  ir::Kernel out = rotate_vector_loops(ir::parse_kernel(text), target::find_target("ascend910b2"));
  ir::verify(out);
  return ir::print(out);
}

// Flash attention: the vector loop rescales acc_o and adds P V three iterations late (after the
// next three softmaxes); the scale is read from its copy of three iterations ago
// (scores_scale_prev3 <- scores_scale_prev2 <- scores_scale_prev <- scores_scale, allocated before
// the core scopes); the landing tile of the scores stays first in the body.
TEST(RotateVectorLoops, Attention) {
  const char* before = testing::kAttentionSkewed;
  const char* after = testing::kAttentionRotated;
  EXPECT_EQ(rotate(before), after);
}

// The same vector loop against its Cube loop unskewed (split_cube_vector's output, before
// skew_cube_loops): its head waits for the scores, which the Cube writes only after P V of the
// previous block, whose slot the tail frees 3 iterations late: rotated, it would deadlock
// (deadlock40, masked40 F1). It stays as it is.
TEST(RotateVectorLoops, HeadWaitingForAnUnskewedCubeLoopUnchanged) {
  ir::Kernel k = ir::parse_kernel(testing::kAttentionSplit);
  EXPECT_EQ(ir::print(rotate_vector_loops(k, target::find_target("ascend910b2"))), ir::print(k));
}

// The head computes x and hands it to the Cube; the tail waits for the Cube's result y and adds x:
// it runs three iterations late and reads x from the copy of three iterations ago.
TEST(RotateVectorLoops, TailRunsThreeIterationsLate) {
  const char* before = R"(kernel k(X: global float32[4, 64], Y: global float32[64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws0: global float32[64]
  alloc ws1: global float32[64]
  scope V {
    alloc x: UB float32[64]
    alloc y: UB float32[64]
    alloc z: UB float32[64]
    fill z = 0.0
    for k in serial(0, 4) {
      copy X[k:+1, 0:+64] -> x
      sync wait_cross_flag(3, MTE3)
      copy x -> ws0
      sync set_cross_flag(2, MTE3, 2)
      sync wait_cross_flag(4, MTE2)
      copy ws1 -> y
      sync set_cross_flag(2, MTE2, 5)
      for i in parallel(0, 64) {
        z[i] = z[i] + y[i] * x[i]
      }
    }
    copy z -> Y
  }
}
)";
  const char* after = R"(kernel k(X: global float32[4, 64], Y: global float32[64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws0: global float32[64]
  alloc ws1: global float32[64]
  alloc x_prev: UB float32[64]
  alloc x_prev2: UB float32[64]
  alloc x_prev3: UB float32[64]
  scope V {
    alloc x: UB float32[64]
    alloc y: UB float32[64]
    alloc z: UB float32[64]
    fill z = 0.0
    for k in serial(0, 7) {
      copy x_prev2 -> x_prev3
      copy x_prev -> x_prev2
      copy x -> x_prev
      if k < 4 {
        copy X[k:+1, 0:+64] -> x
        sync wait_cross_flag(3, MTE3)
        copy x -> ws0
        sync set_cross_flag(2, MTE3, 2)
      }
      if k >= 3 {
        sync wait_cross_flag(4, MTE2)
        copy ws1 -> y
        sync set_cross_flag(2, MTE2, 5)
        for i in parallel(0, 64) {
          z[i] = z[i] + y[i] * x_prev3[i]
        }
      }
    }
    copy z -> Y
  }
}
)";
  EXPECT_EQ(rotate(before), after);
}

// The tail writes the tile the head reads (x accumulates the Cube's results): running it late
// would change what the head reads, so the loop is unchanged.
TEST(RotateVectorLoops, TailWritingWhatTheHeadReadsUnchanged) {
  const char* text = R"(kernel k(Y: global float32[64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws0: global float32[64]
  alloc ws1: global float32[64]
  scope V {
    alloc x: UB float32[64]
    alloc y: UB float32[64]
    fill x = 0.0
    for k in serial(0, 4) {
      sync wait_cross_flag(3, MTE3)
      copy x -> ws0
      sync set_cross_flag(2, MTE3, 2)
      sync wait_cross_flag(4, MTE2)
      copy ws1 -> y
      sync set_cross_flag(2, MTE2, 5)
      for i in parallel(0, 64) {
        x[i] = x[i] + y[i]
      }
    }
    copy x -> Y
  }
}
)";
  EXPECT_EQ(rotate(text), text);
}

// A variable the head defines (paged decode's `jj = 0` of a one-page step) stays in the head's
// `if`: the loop is rotated when the tail does not use it, and unchanged when it does (the tail
// runs three iterations later).
const char* kHeadLet = R"(kernel k(X: global float32[4, 64], Y: global float32[4, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws0: global float32[64]
  alloc ws1: global float32[64]
  scope V {
    alloc x: UB float32[64]
    alloc y: UB float32[64]
    for k in serial(0, 4) {
      let r: int32 = 3 - k
      copy X[r:+1, 0:+64] -> x
      sync wait_cross_flag(3, MTE3)
      copy x -> ws0
      sync set_cross_flag(2, MTE3, 2)
      sync wait_cross_flag(4, MTE2)
      copy ws1 -> y
      sync set_cross_flag(2, MTE2, 5)
      copy y -> Y[TAIL:+1, 0:+64]
    }
  }
}
)";

std::string head_let(const char* tail_row) {
  std::string s = kHeadLet;
  s.replace(s.find("TAIL"), 4, tail_row);
  return s;
}

TEST(RotateVectorLoops, HeadVariableStaysInTheHead) {
  const char* after = R"(kernel k(X: global float32[4, 64], Y: global float32[4, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws0: global float32[64]
  alloc ws1: global float32[64]
  scope V {
    alloc x: UB float32[64]
    alloc y: UB float32[64]
    for k in serial(0, 7) {
      if k < 4 {
        let r: int32 = 3 - k
        copy X[r:+1, 0:+64] -> x
        sync wait_cross_flag(3, MTE3)
        copy x -> ws0
        sync set_cross_flag(2, MTE3, 2)
      }
      if k >= 3 {
        sync wait_cross_flag(4, MTE2)
        copy ws1 -> y
        sync set_cross_flag(2, MTE2, 5)
        copy y -> Y[k - 3:+1, 0:+64]
      }
    }
  }
}
)";
  EXPECT_EQ(rotate(head_let("k")), after);
}

TEST(RotateVectorLoops, TailUsingAHeadVariableUnchanged) {
  std::string text = head_let("r");
  EXPECT_EQ(rotate(text), ir::print(ir::parse_kernel(text)));
}

// A vector loop that hands nothing to the Cube (gemm + epilogue) is unchanged.
TEST(RotateVectorLoops, NoVectorToCubeHandOffUnchanged) {
  const char* text = testing::kGemmEpilogueSplit;
  EXPECT_EQ(rotate(text), text);
}

// A kernel split_cube_vector did not split (one unit) is returned as is.
TEST(RotateVectorLoops, UnsplitKernelUnchanged) {
  ir::Kernel k = ir::parse_kernel(testing::kOneUnitKernel);
  EXPECT_EQ(rotate_vector_loops(k, target::find_target("ascend910b2")), k);
}

}  // namespace
}  // namespace tw::ascend
