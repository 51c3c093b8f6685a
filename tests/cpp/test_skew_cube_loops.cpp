// skew_cube_loops: before/after tests (the split kernels of cube_vector_kernels.h
// and small hand-written Cube loops).
#include <gtest/gtest.h>

#include "cube_vector_kernels.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "target/ascend/rotate_vector_loops.h"
#include "target/ascend/skew_cube_loops.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string skew(const std::string& text) {
  ir::Kernel out = skew_cube_loops(ir::parse_kernel(text), target::find_target("ascend910b2"));
  ir::verify(out);
  return ir::print(out);
}

// Flash attention: Q K^T (and its hand-off to the vector code) runs three iterations ahead of
// the wait for P and P V; the V load, which only feeds P V, moves with P V.
TEST(SkewCubeLoops, Attention) {
  const char* before = testing::kAttentionSplit;
  const char* after = testing::kAttentionSkewed;
  EXPECT_EQ(skew(before), after);
}

// Flash attention whose vector loop's tail also writes scores_max, which its head reads: the
// vector loop cannot be rotated, so it reads S_j+1 only after P_j V_j, which a Cube loop three
// iterations ahead would compute after S_j+3 (two slots: S_j+3 waits for S_j+1 to be read), a
// deadlock. The Cube loop is left unchanged (vector_hand_offs_rotate).
TEST(SkewCubeLoops, UnrotatedVectorLoopKeepsTheCubeLoopUnchanged) {
  std::string text = testing::kAttentionSplit;
  const std::string tail = "acc_o_ub[acc_o_i0, acc_o_i1] = acc_o_ub[acc_o_i0, acc_o_i1] + acc_o_pv_ub[acc_o_i0, acc_o_i1]\n        }\n      }\n";
  size_t at = text.find(tail);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(text.find(tail, at + 1), std::string::npos);
  text.insert(at + tail.size(), "      for i_9 in parallel(0, 32) {\n        scores_max[i_9] = scores_max[i_9] * 1.0\n      }\n");
  std::string canonical = ir::print(ir::parse_kernel(text));
  EXPECT_EQ(ir::print(rotate_vector_loops(ir::parse_kernel(text), target::find_target("ascend910b2"))), canonical);
  EXPECT_EQ(skew(text), canonical);
}

// A loop that loads A, then waits for the vector code's tile P and multiplies: the load runs three
// iterations ahead.
TEST(SkewCubeLoops, HeadRunsThreeIterationsAhead) {
  const char* before = R"(kernel k(A: global float16[4, 64, 64], C: global float32[64, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws: global float16[64, 64]
  scope C {
    alloc a: L1 float16[64, 64]
    alloc p: L1 float16[64, 64]
    alloc c: L0C float32[64, 64]
    for k in serial(0, 4) {
      copy A[k:+1, 0:+64, 0:+64] -> a
      sync wait_cross_flag(0, MTE2)
      copy ws -> p
      sync set_cross_flag(2, MTE2, 1)
      gemm p, p -> c trans_a=false trans_b=false clear=true
    }
    copy c -> C
  }
}
)";
  const char* after = R"(kernel k(A: global float16[4, 64, 64], C: global float32[64, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws: global float16[64, 64]
  scope C {
    alloc a: L1 float16[64, 64]
    alloc p: L1 float16[64, 64]
    alloc c: L0C float32[64, 64]
    for k in serial(0, 7) {
      if k < 4 {
        copy A[k:+1, 0:+64, 0:+64] -> a
      }
      if k >= 3 {
        sync wait_cross_flag(0, MTE2)
        copy ws -> p
        sync set_cross_flag(2, MTE2, 1)
        gemm p, p -> c trans_a=false trans_b=false clear=true
      }
    }
    copy c -> C
  }
}
)";
  EXPECT_EQ(skew(before), after);
}

// The tail multiplies the tile the head loads and the head multiplies it too: moving the head
// three iterations ahead would overwrite the tile before the tail of three iterations ago reads it,
// so the loop is unchanged.
TEST(SkewCubeLoops, TileOfHeadAndTailUnchanged) {
  const char* text = R"(kernel k(A: global float16[4, 64, 64], S: global float32[4, 64, 64] out, C: global float32[64, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws: global float16[64, 64]
  scope C {
    alloc a: L1 float16[64, 64]
    alloc p: L1 float16[64, 64]
    alloc s: L0C float32[64, 64]
    alloc c: L0C float32[64, 64]
    for k in serial(0, 4) {
      copy A[k:+1, 0:+64, 0:+64] -> a
      gemm a, a -> s trans_a=false trans_b=false clear=true
      copy s -> S[k:+1, 0:+64, 0:+64]
      sync wait_cross_flag(0, MTE2)
      copy ws -> p
      sync set_cross_flag(2, MTE2, 1)
      gemm a, p -> c trans_a=false trans_b=false clear=true
    }
    copy c -> C
  }
}
)";
  EXPECT_EQ(skew(text), text);
}

// Session 35: two Cube -> Vector hand-offs of the loop, one in the head and one in the tail, taking
// one pair of ids in turn (split_cube_vector, when the ids run out): the k-th set of id 2 is the
// k-th wait on the vector side only while the Cube hands them over in the program order, so the
// loop is not skewed (reuses_cross_ids). With a pair each (ids 2 and 4) the same loop is skewed.
TEST(SkewCubeLoops, HandOffsSharingIdsInTurnKeepTheLoop) {
  auto text = [](int tail_id) {
    return std::string(R"(kernel k(A: global float16[4, 64, 64], C: global float32[64, 64] out)
    grid(bx = 1) sub_block(vid) {
  alloc ws: global float16[64, 64]
  alloc ws_1: global float32[64, 64]
  alloc ws_2: global float32[64, 64]
  scope C {
    alloc a: L1 float16[64, 64]
    alloc p: L1 float16[64, 64]
    alloc s: L0C float32[64, 64]
    alloc c: L0C float32[64, 64]
    for k in serial(0, 4) {
      copy A[k:+1, 0:+64, 0:+64] -> a
      gemm a, a -> s trans_a=false trans_b=false clear=true
      sync wait_cross_flag(3, FIX)
      copy s -> ws_1
      sync set_cross_flag(2, FIX, 2)
      sync wait_cross_flag(0, MTE2)
      copy ws -> p
      sync set_cross_flag(2, MTE2, 1)
      gemm p, p -> c trans_a=false trans_b=false clear=true
      sync wait_cross_flag()") + std::to_string(tail_id + 1) + R"(, FIX)
      copy c -> ws_2
      sync set_cross_flag(2, FIX, )" + std::to_string(tail_id) + R"()
    }
    copy c -> C
  }
}
)";
  };
  std::string shared = ir::print(ir::parse_kernel(text(2)));
  EXPECT_EQ(skew(shared), shared);
  std::string own = ir::print(ir::parse_kernel(text(4)));
  std::string skewed = skew(own);
  EXPECT_NE(skewed, own);
  EXPECT_NE(skewed.find("for k in serial(0, 7)"), std::string::npos) << skewed;
}

// A Cube loop that waits for no vector tile (gemm + epilogue) is unchanged.
TEST(SkewCubeLoops, NoVectorToCubeHandOffUnchanged) {
  const char* text = testing::kGemmEpilogueSplit;
  EXPECT_EQ(skew(text), text);
}

// A kernel split_cube_vector did not split (one unit) is returned as is.
TEST(SkewCubeLoops, UnsplitKernelUnchanged) {
  ir::Kernel k = ir::parse_kernel(testing::kOneUnitKernel);
  EXPECT_EQ(skew_cube_loops(k, target::find_target("ascend910b2")), k);
}

}  // namespace
}  // namespace tw::ascend
