// convert_copies: before/after Tile IR texts.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/convert_copies.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

ir::Kernel convert(const std::string& text) {
  return convert_copies(ir::parse_kernel(text, "vec.tw"), target::find_target("ascend910b2"));
}
std::string after(const std::string& text) { return ir::print(convert(text)); }

// bf16 GM -> fp32 UB through a bf16 tile and a cast map; fp32 UB -> fp16 GM through a fp16 tile.
TEST(ConvertCopies, ConvertingCopiesGoThroughATileOfTheGlobalDtype) {
  EXPECT_EQ(after(R"(kernel k(X: global bfloat16[16, 64], Y: global float16[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  copy X[bx * 8:+8, 0:+64] -> x
  copy x -> Y[bx * 8:+8, 0:+64]
}
)"), R"(kernel k(X: global bfloat16[16, 64], Y: global float16[16, 64])
    grid(bx = 2) {
  alloc x: UB float32[8, 64]
  alloc x_bfloat16_0: UB bfloat16[8, 64]
  copy X[bx * 8:+8, 0:+64] -> x_bfloat16_0
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      x[i_0, j_0] = cast<float32>(x_bfloat16_0[i_0, j_0])
    }
  }
  alloc x_float16_0: UB float16[8, 64]
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      x_float16_0[i_1, j_1] = cast<float16>(x[i_1, j_1])
    }
  }
  copy x_float16_0 -> Y[bx * 8:+8, 0:+64]
}
)");
}

// UB -> UB: a cast map between dtypes, a copy map otherwise (a tensor row -> a 1-D tile too);
// same-dtype GM <-> UB copies stay.
TEST(ConvertCopies, UbToUbCopiesBecomeMaps) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc h: UB float16[8, 64]
  alloc r: UB float32[64]
  copy X -> x
  copy x -> h
  copy x[2:+1, 0:+64] -> r
  copy x -> X
}
)"), R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc h: UB float16[8, 64]
  alloc r: UB float32[64]
  copy X -> x
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      h[i_0, j_0] = cast<float16>(x[i_0, j_0])
    }
  }
  for j_1 in parallel(0, 64) {
    r[j_1] = x[2, j_1]
  }
  copy x -> X
}
)");
}

TEST(ConvertCopies, ConvertingCopyBetweenShapesIsAnErrorAtItsLine) {
  try {
    convert(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc h: UB float16[4, 128]
  copy x -> h
}
)");
    ADD_FAILURE() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("converts float32 to float16 between regions of different shapes"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.span().line, 5) << e.what();
    EXPECT_NE(e.hint().find("same rows x cols"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tw::ascend
