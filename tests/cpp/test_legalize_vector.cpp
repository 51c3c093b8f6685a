// legalize_vector: before/after IR texts for each rewrite, then kernels legalised by all the vector
// passes, lowered (select_instructions) and run in the simulator against a float64 reference with zero
// checker reports.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/convert_copies.h"
#include "target/ascend/expand_int8_fill.h"
#include "target/ascend/expand_math.h"
#include "target/ascend/fold_exp2_scale.h"
#include "target/ascend/legalize_vector.h"
#include "target/ascend/select_instructions.h"
#include "target/ascend/select_vector_calls.h"
#include "target/ascend/multi_buffer.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

const target::Target& b2() { return target::find_target("ascend910b2"); }

ir::Kernel legalize(const std::string& text) { return legalize_vector(ir::parse_kernel(text, "vec.tw"), b2()); }
// The vector passes of the automatic pipeline in its order (pipeline.cpp), for the numerics tests.
ir::Kernel vector_passes(const std::string& text) {
  ir::Kernel k = ir::parse_kernel(text, "vec.tw");
  for (auto* pass : {fold_exp2_scale, expand_math, expand_int8_fill, convert_copies}) k = pass(k, b2());
  return legalize_vector(k, b2());
}
std::string after(const std::string& text) { return ir::print(legalize(text)); }
// expand_math, then legalize_vector (the expansions lowered)
std::string after_math(const std::string& text) {
  return ir::print(legalize_vector(expand_math(ir::parse_kernel(text, "vec.tw"), b2()), b2()));
}


// softmax's exp(x - max[i]): a row broadcast, then Exp, both in place.
TEST(LegalizeVector, CompoundMapBecomesSingleOpsInPlace) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[16, 64], Y: global float32[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  copy X[bx * 8:+8, 0:+64] -> x
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      x[i, j] = exp(x[i, j] - m[i])
    }
  }
  copy x -> Y[bx * 8:+8, 0:+64]
}
)"), R"(kernel k(X: global float32[16, 64], Y: global float32[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  copy X[bx * 8:+8, 0:+64] -> x
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      x[i_0, j_0] = x[i_0, j_0] - m[i_0]
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      x[i_1, j_1] = exp(x[i_1, j_1])
    }
  }
  copy x -> Y[bx * 8:+8, 0:+64]
}
)");
}

// (x - m[i])^2 computed once (into the destination); x * 2 + exp(x): exp(x) needs a temporary because x is still read.
TEST(LegalizeVector, CommonSubexpressionsAndTemporaries) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc t: UB float32[8, 64]
  alloc m: UB float32[8]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      t[i, j] = (x[i, j] - m[i]) * (x[i, j] - m[i])
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      x[i_1, j_1] = x[i_1, j_1] * 2.0 + exp(x[i_1, j_1])
    }
  }
}
)"), R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc t: UB float32[8, 64]
  alloc m: UB float32[8]
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      t[i_0, j_0] = x[i_0, j_0] - m[i_0]
    }
  }
  for i_2 in parallel(0, 8) {
    for j_2 in parallel(0, 64) {
      t[i_2, j_2] = t[i_2, j_2] * t[i_2, j_2]
    }
  }
  alloc x_t_0: UB float32[8, 64]
  for i_1_0 in parallel(0, 8) {
    for j_1_0 in parallel(0, 64) {
      x_t_0[i_1_0, j_1_0] = x[i_1_0, j_1_0] * 2.0
    }
  }
  for i_1_1 in parallel(0, 8) {
    for j_1_1 in parallel(0, 64) {
      x[i_1_1, j_1_1] = exp(x[i_1_1, j_1_1])
    }
  }
  for i_1_2 in parallel(0, 8) {
    for j_1_2 in parallel(0, 64) {
      x[i_1_2, j_1_2] = x_t_0[i_1_2, j_1_2] + x[i_1_2, j_1_2]
    }
  }
}
)");
}

// s - t as t * -1 + s; v[i] / t broadcasts v first; a column vector w[j] * 2 is a 1-D map, then a column broadcast add; sigmoid(-m) on a row vector (the double negation cancels; 1 / m is a Div of a row of ones, not
// Reciprocal, which misses 1e-4 relative error on the device).
TEST(LegalizeVector, BroadcastsAndNonCommutingScalars) {
  EXPECT_EQ(after_math(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  alloc w: UB float32[64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      x[i, j] = 3.0 - x[i, j]
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      x[i_1, j_1] = m[i_1] / x[i_1, j_1] + w[j_1] * 2.0
    }
  }
  for i_2 in parallel(0, 8) {
    m[i_2] = sigmoid(-m[i_2])
  }
}
)"), R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  alloc w: UB float32[64]
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      x[i_0, j_0] = x[i_0, j_0] * -1.0
    }
  }
  for i_3 in parallel(0, 8) {
    for j_2 in parallel(0, 64) {
      x[i_3, j_2] = x[i_3, j_2] + 3.0
    }
  }
  alloc x_t_0: UB float32[8, 64]
  alloc x_t_1: UB float32[64]
  for i_1_0 in parallel(0, 8) {
    for j_1_0 in parallel(0, 64) {
      x_t_0[i_1_0, j_1_0] = 0.0
    }
  }
  for i_1_1 in parallel(0, 8) {
    for j_1_1 in parallel(0, 64) {
      x_t_0[i_1_1, j_1_1] = x_t_0[i_1_1, j_1_1] + m[i_1_1]
    }
  }
  for i_1_2 in parallel(0, 8) {
    for j_1_2 in parallel(0, 64) {
      x[i_1_2, j_1_2] = x_t_0[i_1_2, j_1_2] / x[i_1_2, j_1_2]
    }
  }
  for j_1_3 in parallel(0, 64) {
    x_t_1[j_1_3] = w[j_1_3] * 2.0
  }
  for i_1_3 in parallel(0, 8) {
    for j_1_4 in parallel(0, 64) {
      x[i_1_3, j_1_4] = x[i_1_3, j_1_4] + x_t_1[j_1_4]
    }
  }
  alloc m_t_0: UB float32[8]
  for i_2_0 in parallel(0, 8) {
    m[i_2_0] = exp(m[i_2_0])
  }
  for i_2_1 in parallel(0, 8) {
    m[i_2_1] = m[i_2_1] + 1.0
  }
  for i_2_2 in parallel(0, 8) {
    m_t_0[i_2_2] = 1.0
  }
  for i_2_3 in parallel(0, 8) {
    m[i_2_3] = m_t_0[i_2_3] / m[i_2_3]
  }
}
)");
}

// W[j] (fp16) in a loop: copied to UB and converted once, before the loop.
TEST(LegalizeVector, GlobalReadHoistedOutOfTheLoop) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[16, 64], W: global float16[64], Y: global float32[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  for k in serial(0, 4) {
    copy X[bx * 8:+8, 0:+64] -> x
    for i in parallel(0, 8) {
      for j in parallel(0, 64) {
        x[i, j] = x[i, j] * cast<float32>(W[j])
      }
    }
    copy x -> Y[bx * 8:+8, 0:+64]
  }
}
)"), R"(kernel k(X: global float32[16, 64], W: global float16[64], Y: global float32[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc W_ub_0: UB float16[64]
  checked_copy W -> W_ub_0
  alloc W_ub_1: UB float32[64]
  for j_0_0 in parallel(0, 64) {
    W_ub_1[j_0_0] = cast<float32>(W_ub_0[j_0_0])
  }
  for k in serial(0, 4) {
    copy X[bx * 8:+8, 0:+64] -> x
    for i_0 in parallel(0, 8) {
      for j_1 in parallel(0, 64) {
        x[i_0, j_1] = x[i_0, j_1] * W_ub_1[j_1]
      }
    }
    copy x -> Y[bx * 8:+8, 0:+64]
  }
}
)");
}

// One element of a global tensor at indices free of the map's variables (batch norm's per-block
// mean[bx]): read once into a let before the map (the scalar unit's GetValue) and used as a scalar.
TEST(LegalizeVector, OneGlobalElementBecomesAScalarLet) {
  std::string got = after(R"(kernel k(X: global float32[16, 64], M: global float32[2], Y: global float32[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  copy X[bx * 8:+8, 0:+64] -> x
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      x[i, j] = (x[i, j] - M[bx]) * M[bx]
    }
  }
  copy x -> Y[bx * 8:+8, 0:+64]
}
)");
  EXPECT_NE(got.find("let M_s_0: float32 = M[bx]"), std::string::npos) << got;
  EXPECT_EQ(got.find("M_s_1"), std::string::npos) << got;  // M[bx] read once
  EXPECT_EQ(got.find("M_ub"), std::string::npos) << got;  // no copy of M into UB
  EXPECT_NE(got.find("- M_s_0"), std::string::npos) << got;
  EXPECT_NE(got.find("* M_s_0"), std::string::npos) << got;
}

// reduce clear=False into a temporary + max; a bf16 reduce through fp32 (the converting copies of
// this test's first version: test_convert_copies.cpp).
// A float max reduction takes its NaN flag (flag_nan: x != x ? x : -0.0 summed, added to the
// result), and the clear=False merge is the elementwise max with its NaN fix-ups (max_min).
TEST(LegalizeVector, MergingReduceAndBfloat16Reduce) {
  EXPECT_EQ(after(R"(kernel k(X: global bfloat16[16, 64], Y: global float16[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  alloc b: UB bfloat16[8, 64]
  alloc bm: UB bfloat16[8]
  reduce max x -> m axis=1 clear=false
  reduce sum b -> bm axis=1 clear=true
}
)"), R"(kernel k(X: global bfloat16[16, 64], Y: global float16[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc m: UB float32[8]
  alloc b: UB bfloat16[8, 64]
  alloc bm: UB bfloat16[8]
  alloc m_part_0: UB float32[8]
  reduce max x -> m_part_0 axis=1 clear=true
  alloc x_nan_0: UB float32[8, 64]
  for i_0_0 in parallel(0, 8) {
    for j_0_0 in parallel(0, 64) {
      x_nan_0[i_0_0, j_0_0] = where(x[i_0_0, j_0_0] != x[i_0_0, j_0_0], x[i_0_0, j_0_0], -0.0)
    }
  }
  alloc m_part_0_nan_0: UB float32[8]
  reduce sum x_nan_0 -> m_part_0_nan_0 axis=1 clear=true
  for j_1_0 in parallel(0, 8) {
    m_part_0[j_1_0] = m_part_0[j_1_0] + m_part_0_nan_0[j_1_0]
  }
  alloc m_t_0: UB float32[8]
  for j_2_0 in parallel(0, 8) {
    m_t_0[j_2_0] = max(m[j_2_0], m_part_0[j_2_0])
  }
  for j_2_1 in parallel(0, 8) {
    m[j_2_1] = where(m_t_0[j_2_1] >= m[j_2_1], m_t_0[j_2_1], nan)
  }
  for j_2_2 in parallel(0, 8) {
    m[j_2_2] = where(m[j_2_2] >= m_part_0[j_2_2], m[j_2_2], nan)
  }
  alloc b_f32_0: UB float32[8, 64]
  for i_1_0 in parallel(0, 8) {
    for j_3_0 in parallel(0, 64) {
      b_f32_0[i_1_0, j_3_0] = cast<float32>(b[i_1_0, j_3_0])
    }
  }
  alloc bm_part_0: UB float32[8]
  reduce sum b_f32_0 -> bm_part_0 axis=1 clear=true
  for j_4_0 in parallel(0, 8) {
    bm[j_4_0] = cast<bfloat16>(bm_part_0[j_4_0])
  }
}
)");
}

// expand_math's expansions are tile expressions like the user's: their common subexpressions are
// computed once with the rest of the store (one Ln for log and log2, one x * x for pow 2 and 3).
TEST(LegalizeVector, ExpansionsShareCommonSubexpressions) {
  EXPECT_EQ(after_math(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      y[i, j] = log(x[i, j]) + log2(x[i, j])
      y[i, j] = pow(x[i, j], 2.0) + pow(x[i, j], 3.0)
    }
  }
}
)"), R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  alloc y_t_0: UB float32[8, 64]
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      y[i_0, j_0] = log(x[i_0, j_0])
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      y_t_0[i_1, j_1] = y[i_1, j_1] * 1.4426950408889634
    }
  }
  for i_2 in parallel(0, 8) {
    for j_2 in parallel(0, 64) {
      y[i_2, j_2] = y[i_2, j_2] + y_t_0[i_2, j_2]
    }
  }
  alloc y_t_1: UB float32[8, 64]
  for i_3 in parallel(0, 8) {
    for j_3 in parallel(0, 64) {
      y[i_3, j_3] = x[i_3, j_3] * x[i_3, j_3]
    }
  }
  for i_4 in parallel(0, 8) {
    for j_4 in parallel(0, 64) {
      y_t_1[i_4, j_4] = y[i_4, j_4] * x[i_4, j_4]
    }
  }
  for i_5 in parallel(0, 8) {
    for j_5 in parallel(0, 64) {
      y[i_5, j_5] = y[i_5, j_5] + y_t_1[i_5, j_5]
    }
  }
}
)");
}

// a diagonal and a tail bound: per-row column bounds, rows without masking skipped, the whole loop skipped when no row needs it; the kept head of the block holding the bound is saved and restored.
TEST(LegalizeVector, CausalAndTailMaskRowByRow) {
  EXPECT_EQ(after(R"(kernel k(S: global float32[64, 64])
    grid(bx = 2) {
  alloc s: UB float32[16, 64]
  for k in serial(0, 4) {
    for i in parallel(0, 16) {
      for j in parallel(0, 64) {
        s[i, j] = where(bx * 16 + i >= k * 16 + j and k * 16 + j < 50, s[i, j], -1e+30)
      }
    }
  }
}
)"), R"(kernel k(S: global float32[64, 64])
    grid(bx = 2) {
  alloc s: UB float32[16, 64]
  for k in serial(0, 4) {
    alloc s_keep_0: UB float32[8]
    if min(bx * 16 - k * 16 + 1, bx * 16 - k * 16 + 16) < 64 or 50 - k * 16 < 64 {
      for r_0 in serial(0, 16) {
        let hi_0: int32 = min(max(min(min(r_0 + (bx * 16 - k * 16) + 1, 64), 50 - k * 16), 0), 64)
        if hi_0 < 64 {
          let blk_0: int32 = hi_0 // 8 * 8
          let head_0: int32 = hi_0 - blk_0
          if head_0 > 0 {
            for j_0 in parallel(0, 8) {
              if j_0 < head_0 {
                s_keep_0[j_0] = s[r_0, blk_0 + j_0]
              }
            }
          }
          for j_1 in parallel(0, 64) {
            if j_1 < 64 - blk_0 {
              s[r_0, blk_0 + j_1] = -1e+30
            }
          }
          if head_0 > 0 {
            for j_2 in parallel(0, 8) {
              if j_2 < head_0 {
                s[r_0, blk_0 + j_2] = s_keep_0[j_2]
              }
            }
          }
        }
      }
    }
  }
}
)");
}

// The tail mask alone: one column bound for all rows, so 2-D instructions over every row with a
// runtime column count (`if j < n` inside the map).
TEST(LegalizeVector, TailMaskOverAllRows) {
  EXPECT_EQ(after(R"(kernel k(S: global float32[64, 64])
    grid(bx = 2) {
  alloc s: UB float32[16, 64]
  for k in serial(0, 4) {
    for i in parallel(0, 16) {
      for j in parallel(0, 64) {
        s[i, j] = where(k * 16 + j < 50, s[i, j] * 0.5, 0.0)
      }
    }
  }
}
)"), R"(kernel k(S: global float32[64, 64])
    grid(bx = 2) {
  alloc s: UB float32[16, 64]
  for k in serial(0, 4) {
    for i_0 in parallel(0, 16) {
      for j_0 in parallel(0, 64) {
        s[i_0, j_0] = s[i_0, j_0] * 0.5
      }
    }
    alloc s_keep_0: UB float32[16, 8]
    let hi_0: int32 = min(max(min(50 - k * 16, 64), 0), 64)
    if hi_0 < 64 {
      let blk_0: int32 = hi_0 // 8 * 8
      let head_0: int32 = hi_0 - blk_0
      if head_0 > 0 {
        for i_1 in parallel(0, 16) {
          for j_1 in parallel(0, 8) {
            if j_1 < head_0 {
              s_keep_0[i_1, j_1] = s[i_1, blk_0 + j_1]
            }
          }
        }
      }
      for i_2 in parallel(0, 16) {
        for j_2 in parallel(0, 64) {
          if j_2 < 64 - blk_0 {
            s[i_2, blk_0 + j_2] = 0.0
          }
        }
      }
      if head_0 > 0 {
        for i_3 in parallel(0, 16) {
          for j_3 in parallel(0, 8) {
            if j_3 < head_0 {
              s[i_3, blk_0 + j_3] = s_keep_0[i_3, j_3]
            }
          }
        }
      }
    }
  }
}
)");
}

// Gathers (docs/ascend.md "Gathers"): x[idx[j]] reads x at the byte offsets idx << 2 (the Gather
// form x[off >> 2]), the index clamped to [-2^29, 2^29 - 1] first so the shift cannot wrap an
// index outside x into it (hunt30 F2); x[2 * j + 1] (map variables and constants only: no clamp)
// computes its offsets from the iota tile, which is built once before the map from Duplicates.
TEST(LegalizeVector, GathersComputeByteOffsetsAsTileData) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[16], I: global int32[8], Y: global float32[8])
    grid(bx = 1) {
  alloc x: UB float32[16]
  alloc idx: UB int32[8]
  alloc y: UB float32[8]
  for j in parallel(0, 8) {
    y[j] = x[idx[j]] + x[2 * j + 1]
  }
}
)"), R"(kernel k(X: global float32[16], I: global int32[8], Y: global float32[8])
    grid(bx = 1) {
  alloc x: UB float32[16]
  alloc idx: UB int32[8]
  alloc y: UB float32[8]
  alloc y_t_0: UB int32[8]
  alloc y_t_1: UB float32[8]
  for j_0 in parallel(0, 8) {
    y_t_0[j_0] = max(idx[j_0], -536870912)
  }
  for j_1 in parallel(0, 8) {
    y_t_0[j_1] = min(y_t_0[j_1], 536870911)
  }
  for j_2 in parallel(0, 8) {
    y_t_0[j_2] = y_t_0[j_2] << 2
  }
  for j_3 in parallel(0, 8) {
    y[j_3] = x[y_t_0[j_3] >> 2]
  }
  for j_4 in parallel(0, 8) {
    y_t_0[j_4] = j_4
  }
  for j_5 in parallel(0, 8) {
    y_t_0[j_5] = 2 * y_t_0[j_5]
  }
  for j_6 in parallel(0, 8) {
    y_t_0[j_6] = y_t_0[j_6] + 1
  }
  for j_7 in parallel(0, 8) {
    y_t_0[j_7] = y_t_0[j_7] << 2
  }
  for j_8 in parallel(0, 8) {
    y_t_1[j_8] = x[y_t_0[j_8] >> 2]
  }
  for j_9 in parallel(0, 8) {
    y[j_9] = y[j_9] + y_t_1[j_9]
  }
}
)");
}

void expect_error(const std::string& body, const std::string& msg, int line, const std::string& hint = "") {
  std::string text = "kernel k(W: global float32[64])\n    grid(bx = 1) {\n  alloc x: UB float32[8, 64]\n"
                     "  alloc m: UB float32[8]\n  for i in parallel(0, 8) {\n    for j in parallel(0, 64) {\n" +
                     body + "\n    }\n  }\n}\n";
  try {
    legalize(text);
    ADD_FAILURE() << "expected an error containing '" << msg << "'";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().file, "vec.tw") << e.what();
    if (!hint.empty()) EXPECT_NE(e.hint().find(hint), std::string::npos) << e.what();
  }
}

// One element of a UB tile the map does not store to (m[0]; lse[i, sp] over one row) is read by
// the scalar unit into a let before the map and used as a scalar operand (a Muls).
TEST(LegalizeVector, TileElementReadBeforeTheMap) {
  std::string text = "kernel k(W: global float32[64])\n    grid(bx = 1) {\n  alloc x: UB float32[8, 64]\n"
                     "  alloc m: UB float32[8]\n  for i in parallel(0, 8) {\n    for j in parallel(0, 64) {\n"
                     "      x[i, j] = x[i, j] * m[3]\n    }\n  }\n}\n";
  std::string out = ir::print(legalize(text));
  EXPECT_NE(out.find("let m_s_0: float32 = m[3]"), std::string::npos) << out;
  EXPECT_NE(out.find("x[i_0, j_0] = x[i_0, j_0] * m_s_0"), std::string::npos) << out;
}

// Everything without a vector instruction is an error at the line of the store.
TEST(LegalizeVector, ErrorsNameTheLineAndTheFix) {
  expect_error("      x[i, j] = pow(x[i, j], 1.7)", "T.pow with exponent 1.7 is not supported", 7, "supported exponents");
  expect_error("      x[i, j] = where(2 * j < 5, x[i, j], 0.0)", "the column index has coefficient -2", 7, "+-1");
  expect_error("      x[i, j] = x[j // 8, i]", "transposed", 7, "transpose");
  expect_error("      m[i] = x[i, j]", "does not use every loop index", 7, "reduction");
  // (m[0] alone is read by the scalar unit before the map: the map stores to x here)
  expect_error("      x[i, j] = x[i, j] * x[0, 0]", "of a tile it stores to as a scalar", 7, "before the map");
}

// ---------------------------------------------------------------------------------------------
// Numerics: the legalised kernel, lowered and run in the simulator. The tests do not depend on
// the automatic pipeline's other passes: kernels are written in expert form (scope V), and a
// PipeBarrier<PIPE_ALL> after every instruction stands in for insert_sync.

StmtPtr serialize(const StmtPtr& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Instr: return seq({s, instr(PipeBarrier{Pipe::ALL}, s->span)}, s->span);
    case StmtKind::Let: return s;
    default: {
      auto n = std::make_shared<Stmt>(*s);
      for (auto& b : n->body) b = serialize(b);
      n->else_body = serialize(s->else_body);
      return n;
    }
  }
}

struct SimRun {
  sim::Result result;
  std::string ir;
};

SimRun simulate(const std::string& text, std::vector<sim::Arg> args, std::vector<int64_t> shapes) {
  ir::Kernel k = vector_passes(text);
  Program p = plan_memory(select_instructions(k, b2()), b2(), false);
  p.aiv = serialize(p.aiv);
  p = select_move_calls(select_vector_calls(p, b2()), b2());
  return SimRun{sim::run(p, b2().ascend, std::move(args), shapes), ir::print(k)};
}

template <class T>
sim::Arg arg(std::vector<T>& v) {
  return sim::Arg{reinterpret_cast<uint8_t*>(v.data()), static_cast<int64_t>(v.size() * sizeof(T))};
}
std::vector<float> randn(size_t n, float scale, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<uint16_t> to16(const std::vector<float>& v, bool bf) {
  std::vector<uint16_t> o;
  for (float x : v) o.push_back(bf ? sim::num::f32_to_bf16(x) : sim::num::f32_to_f16(x));
  return o;
}
float from16(uint16_t h, bool bf) { return bf ? sim::num::bf16_to_f32(h) : sim::num::f16_to_f32(h); }

#define EXPECT_NO_REPORTS(r) EXPECT_TRUE((r).result.reports.empty()) << (r).result.summary() << (r).ir

// layer_norm as the example writes it (compound maps, row vectors, global W (fp16) and B read
// inside the map), N = 300 (rows are not whole 32 B blocks), M = 13 (a tail block).
TEST(LegalizeVectorNumerics, LayerNormOddShapes) {
  const int64_t M = 13, N = 300;
  std::string k = R"(kernel ln(X: global float32[M, 300], W: global float16[300], B: global float32[300], Y: global float32[M, 300] out)
    grid(cid = ceildiv(M, 8)) sub_block(vid) {
  alloc x: UB float32[8, 300]
  alloc tmp: UB float32[8, 300]
  alloc mean: UB float32[8]
  alloc var: UB float32[8]
  scope V {
    copy X[cid * 8:+8, 0:+300] -> x
    reduce sum x -> mean axis=1 clear=true
    for i in parallel(0, 8) {
      mean[i] = mean[i] / 300.0
    }
    for i_1 in parallel(0, 8) {
      for j in parallel(0, 300) {
        tmp[i_1, j] = (x[i_1, j] - mean[i_1]) * (x[i_1, j] - mean[i_1])
      }
    }
    reduce sum tmp -> var axis=1 clear=true
    for i_2 in parallel(0, 8) {
      var[i_2] = rsqrt(var[i_2] / 300.0 + 1e-05)
    }
    for i_3 in parallel(0, 8) {
      for j_1 in parallel(0, 300) {
        x[i_3, j_1] = (x[i_3, j_1] - mean[i_3]) * var[i_3] * cast<float32>(W[j_1]) + B[j_1]
      }
    }
    copy x -> Y[cid * 8:+8, 0:+300]
  }
}
)";
  auto x = randn(M * N, 2.0f, 1), wf = randn(N, 1.0f, 2), b = randn(N, 1.0f, 3);
  auto w = to16(wf, false);
  std::vector<float> y(M * N, 0);
  SimRun r = simulate(k, {arg(x), arg(w), arg(b), arg(y)}, {M});
  EXPECT_NO_REPORTS(r);
  for (int64_t i = 0; i < M; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < N; ++j) mu += x[i * N + j];
    mu /= N;
    for (int64_t j = 0; j < N; ++j) var += (x[i * N + j] - mu) * (x[i * N + j] - mu);
    var /= N;
    for (int64_t j = 0; j < N; ++j) {
      double ref = (x[i * N + j] - mu) / std::sqrt(var + 1e-5) * from16(w[j], false) + b[j];
      ASSERT_NEAR(y[i * N + j], ref, 1e-5 + 1e-5 * std::fabs(ref)) << i << "," << j << r.ir;
    }
  }
}

// Math functions without a vector instruction, each against the float64 function with the
// error bound stated in expand_math.h.
struct MathCase {
  const char* fn;
  float lo, hi;
  double (*ref)(double);
  double abs_tol, rel_tol;
};

TEST(LegalizeVectorNumerics, MathExpansionsWithinStatedBounds) {
  const MathCase cases[] = {
      {"exp2", -30.f, 30.f, [](double v) { return std::exp2(v); }, 0, 2.5e-6},
      {"log2", 1e-3f, 1e3f, [](double v) { return std::log2(v); }, 4e-7, 2.5e-7},
      {"sigmoid", -20.f, 20.f, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 1e-7, 4e-7},
      {"tanh", -12.f, 12.f, [](double v) { return std::tanh(v); }, 3e-7, 0},
      {"erf", -6.f, 6.f, [](double v) { return std::erf(v); }, 4e-7, 0},
  };
  const int64_t R = 16, Cc = 72;
  for (const auto& c : cases) {
    std::string k = std::string("kernel f(X: global float32[16, 72], Y: global float32[16, 72] out) grid(cid = 1) sub_block(vid) {\n") +
                    "  alloc x: UB float32[16, 72]\n  scope V {\n    copy X -> x\n" +
                    "    for i in parallel(0, 16) {\n      for j in parallel(0, 72) {\n        x[i, j] = " + c.fn +
                    "(x[i, j])\n      }\n    }\n    copy x -> Y\n  }\n}\n";
    std::vector<float> x(R * Cc), y(R * Cc, 0);
    for (int64_t i = 0; i < R * Cc; ++i) x[i] = c.lo + (c.hi - c.lo) * static_cast<float>(i) / (R * Cc - 1);
    x[0] = c.lo;
    if (c.lo < 0) x[R * Cc / 2] = 0.f, x[R * Cc / 2 + 1] = 1e-9f, x[R * Cc / 2 + 2] = -1e-20f;
    SimRun r = simulate(k, {arg(x), arg(y)}, {});
    EXPECT_NO_REPORTS(r);
    double worst = 0;
    for (int64_t i = 0; i < R * Cc; ++i) {
      double ref = c.ref(x[i]), err = std::fabs(y[i] - ref);
      worst = std::max(worst, err / (c.abs_tol + c.rel_tol * std::fabs(ref)));
      ASSERT_LE(err, c.abs_tol + c.rel_tol * std::fabs(ref)) << c.fn << "(" << x[i] << ") = " << y[i] << " vs " << ref;
    }
    std::printf("[ math ] %-8s worst error / bound = %.2f\n", c.fn, worst);
  }
}

// gelu_bias's epilogue: v = acc + b[j] (a column vector), 0.5 v (1 + erf(v / sqrt 2)).
TEST(LegalizeVectorNumerics, GeluWithColumnBias) {
  const int64_t R = 32, Cc = 48;
  std::string k = R"(kernel g(A: global float32[32, 48], Bias: global float32[48], Y: global float32[32, 48] out)
    grid(cid = 1) sub_block(vid) {
  alloc acc: UB float32[32, 48]
  alloc b_s: UB float32[48]
  scope V {
    copy A -> acc
    copy Bias -> b_s
    for i in parallel(0, 32) {
      for j in parallel(0, 48) {
        acc[i, j] = 0.5 * (acc[i, j] + b_s[j]) * (1.0 + erf((acc[i, j] + b_s[j]) * 0.7071067811865475))
      }
    }
    copy acc -> Y
  }
}
)";
  auto a = randn(R * Cc, 2.0f, 4), b = randn(Cc, 1.0f, 5);
  std::vector<float> y(R * Cc, 0);
  SimRun r = simulate(k, {arg(a), arg(b), arg(y)}, {});
  EXPECT_NO_REPORTS(r);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < Cc; ++j) {
      double v = static_cast<double>(a[i * Cc + j]) + b[j], ref = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      ASSERT_NEAR(y[i * Cc + j], ref, 1e-6 + 1e-6 * std::fabs(v)) << i << "," << j;
    }
}

// Flash attention's masks over a loop of key blocks: the causal diagonal (row-dependent bounds,
// per-row loop) and the sequence tail (one bound for all rows, a runtime column count), with
// column bounds that are not on 32 B blocks.
TEST(LegalizeVectorNumerics, CausalAndTailMasks) {
  const int64_t G = 7, K = 3, R = 16, Cc = 40, S = 100;
  std::string k = R"(kernel m(X: global float32[3, 16, 40], Y: global float32[7, 3, 16, 40] out)
    grid(cid = 7) sub_block(vid) {
  alloc x: UB float32[16, 40]
  scope V {
    for k in serial(0, 3) {
      copy X[k:+1, 0:+16, 0:+40] -> x
      for i in parallel(0, 16) {
        for j in parallel(0, 40) {
          x[i, j] = where(cid * 16 + i >= k * 40 + j, x[i, j] * 0.5, -1e+30)
        }
      }
      for i_1 in parallel(0, 16) {
        for j_1 in parallel(0, 40) {
          x[i_1, j_1] = where(k * 40 + j_1 < 100, x[i_1, j_1], -2.0)
        }
      }
      copy x -> Y[cid:+1, k:+1, 0:+16, 0:+40]
    }
  }
}
)";
  auto x = randn(K * R * Cc, 1.0f, 6);
  std::vector<float> y(G * K * R * Cc, 0);
  SimRun r = simulate(k, {arg(x), arg(y)}, {});
  EXPECT_NO_REPORTS(r);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < Cc; ++j) {
          float v = g * R + i >= kk * Cc + j ? x[(kk * R + i) * Cc + j] * 0.5f : -1e30f;
          if (!(kk * Cc + j < S)) v = -2.0f;
          ASSERT_EQ(y[((g * K + kk) * R + i) * Cc + j], v) << g << "," << kk << "," << i << "," << j;
        }
}

// Conversions on the way in and out (bfloat16 GM <-> float32 UB; float16 too), reduce with
// clear=False, a UB -> UB copy of rows that are not whole 32 B blocks.
TEST(LegalizeVectorNumerics, ConvertingCopiesAndMergingReduce) {
  for (bool bf : {true, false}) {
    const int64_t M = 11, N = 100;
    std::string t = bf ? "bfloat16" : "float16";
    std::string k = "kernel c(X: global " + t + "[M, 100], Y: global " + t + "[M, 100] out, Z: global " + t + R"([M] out)
    grid(cid = ceildiv(M, 8)) sub_block(vid) {
  alloc x: UB float32[8, 100]
  alloc x2: UB float32[8, 100]
  alloc m: UB float32[8]
  scope V {
    copy X[cid * 8:+8, 0:+100] -> x
    fill m = 0.5
    reduce max x -> m axis=1 clear=false
    copy x -> x2
    for i in parallel(0, 8) {
      for j in parallel(0, 100) {
        x[i, j] = x2[i, j] - m[i]
      }
    }
    copy x -> Y[cid * 8:+8, 0:+100]
    copy m -> Z[cid * 8:+8]
  }
}
)";
    auto xf = randn(M * N, 1.0f, 7);
    auto x = to16(xf, bf);
    std::vector<uint16_t> y(M * N, 0), z(M, 0);
    SimRun r = simulate(k, {arg(x), arg(y), arg(z)}, {M});
    EXPECT_NO_REPORTS(r);
    for (int64_t i = 0; i < M; ++i) {
      float mx = 0.5f;
      for (int64_t j = 0; j < N; ++j) mx = std::max(mx, from16(x[i * N + j], bf));
      ASSERT_EQ(from16(z[i], bf), from16(bf ? sim::num::f32_to_bf16(mx) : sim::num::f32_to_f16(mx), bf)) << i;
      for (int64_t j = 0; j < N; ++j) {
        float v = from16(x[i * N + j], bf) - mx;
        ASSERT_EQ(y[i * N + j], bf ? sim::num::f32_to_bf16(v) : sim::num::f32_to_f16(v)) << t << " " << i << "," << j;
      }
    }
  }
}

// A bfloat16 map of 9 rows x 256 (1 KiB of float32 a row): chunks of 4 rows (4 KiB float32
// temporaries) in a serial loop, then a 1-row tail; in a 2-stage pipeline the float32 temporaries
// are shared by the copies (no copy touches them), the tile x is staged.
TEST(LegalizeVector, Bfloat16MapInRowChunksSharedByPipelineStages) {
  ir::Kernel k = legalize(R"(kernel k(X: global bfloat16[9, 256], Y: global bfloat16[9, 256])
    grid(bx = 1) {
  for s in pipelined(0, 2, stages=2) {
    alloc x: UB bfloat16[9, 256]
    copy X[0:+9, 0:+256] -> x
    for i in parallel(0, 9) {
      for j in parallel(0, 256) {
        x[i, j] = x[i, j] * 2.0 + 1.0
      }
    }
    copy x -> Y[0:+9, 0:+256]
  }
}
)");
  std::string out = ir::print(multi_buffer(k, b2()));
  size_t allocs = 0;
  for (size_t at = out.find("alloc "); at != std::string::npos; at = out.find("alloc ", at + 1)) ++allocs;
  EXPECT_EQ(allocs, 3u) << out;  // the staged tile and one temporary per chunk shape, before the loop
  for (const char* line : {"  alloc x: UB bfloat16[2, 9, 256]\n  alloc x_t_1: UB float32[4, 256]\n"
                           "  alloc x_t_2: UB float32[1, 256]\n  for s_o in serial(0, 1) {",
                           "for chunk_0_s1 in serial(0, 2) {",
                           "x_t_1[i_4_0_s1, j_4_0_s1] = cast<float32>(x[1, chunk_0_s1 * 4 + i_4_0_s1, j_4_0_s1])",
                           "x[1, chunk_0_s1 * 4 + i_4_3_s1, j_4_3_s1] = cast<bfloat16>(x_t_1[i_4_3_s1, j_4_3_s1])",
                           "x_t_2[i_5_0_s1, j_5_0_s1] = cast<float32>(x[1, i_5_0_s1 + 8, j_5_0_s1])",
                           "x[1, i_5_3_s1 + 8, j_5_3_s1] = cast<bfloat16>(x_t_2[i_5_3_s1, j_5_3_s1])"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
}

}  // namespace
}  // namespace tw::ascend
