// fold_exp2_scale: before/after Tile IR texts.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/fold_exp2_scale.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string after(const std::string& text) {
  ir::Kernel k = ir::parse_kernel(text, "vec.tw");
  return ir::print(fold_exp2_scale(k, target::find_target("ascend910b2")));
}

TEST(FoldExp2Scale, ScaleMaxExp2BecomesOneExp) {
  EXPECT_EQ(after(R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc m: UB float32[8]
  copy S -> s
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = s[i, j] * 0.125
    }
  }
  reduce max s -> m axis=1 clear=false
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      s[i_1, j_1] = exp2(s[i_1, j_1] - m[i_1])
    }
  }
  copy s -> S
}
)"), R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc m: UB float32[8]
  copy S -> s
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = s[i, j] * 0.08664339756999316
    }
  }
  alloc m_scaled_0: UB float32[8]
  reduce max s -> m_scaled_0 axis=1 clear=true
  for i_0 in parallel(0, 8) {
    m[i_0] = max(m[i_0], m_scaled_0[i_0] * 1.4426950408889634)
  }
  alloc m_ln2_0: UB float32[8]
  for i_2 in parallel(0, 8) {
    m_ln2_0[i_2] = m[i_2] * 0.6931471805599453
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      s[i_1, j_1] = exp(s[i_1, j_1] - m_ln2_0[i_1])
    }
  }
  copy s -> S
}
)");
}

// X read by something other than a row max between the scale and exp2 (here a copy map): the
// scaled values are seen there, so nothing changes.
TEST(FoldExp2Scale, OtherReadsOfTheTileInBetweenKeepIt) {
  std::string text = R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc t: UB float32[8, 64]
  alloc m: UB float32[8]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = s[i, j] * 0.125
    }
  }
  reduce max s -> m axis=1 clear=true
  for i_2 in parallel(0, 8) {
    for j_2 in parallel(0, 64) {
      t[i_2, j_2] = s[i_2, j_2]
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      s[i_1, j_1] = exp2(s[i_1, j_1] - m[i_1])
    }
  }
}
)";
  EXPECT_EQ(after(text), ir::print(ir::parse_kernel(text, "vec.tw")));
}

// exp2 with the scale in its argument (flash attention when no key is masked): the constant
// and the row vector scaled by ln 2, one Exp over the tile (no multiply by ln 2 after the Sub).
TEST(FoldExp2Scale, ScaleInsideExp2BecomesOneExp) {
  EXPECT_EQ(after(R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc m: UB float32[8]
  copy S -> s
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = exp2(0.125 * s[i, j] - m[i])
    }
  }
  copy s -> S
}
)"), R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc m: UB float32[8]
  copy S -> s
  alloc m_ln2_0: UB float32[8]
  for i_0 in parallel(0, 8) {
    m_ln2_0[i_0] = m[i_0] * 0.6931471805599453
  }
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = exp(s[i, j] * 0.08664339756999316 - m_ln2_0[i])
    }
  }
  copy s -> S
}
)");
}

// The subtrahend not a row vector of the tile (here a column vector, then a scalar): unchanged.
TEST(FoldExp2Scale, ScaleInsideExp2NeedsARowVector) {
  for (const char* sub : {"m[j]", "0.5"}) {
    std::string text = std::string(R"(kernel k(S: global float32[8, 64])
    grid(bx = 1) {
  alloc s: UB float32[8, 64]
  alloc m: UB float32[64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      s[i, j] = exp2(s[i, j] * 0.125 - )") + sub + R"()
    }
  }
}
)";
    EXPECT_EQ(after(text), ir::print(ir::parse_kernel(text, "vec.tw"))) << sub;
  }
}

}  // namespace
}  // namespace tw::ascend
