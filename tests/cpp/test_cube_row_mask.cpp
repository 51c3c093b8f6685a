// cube_row_mask: row masks of Cube operands become row-tail fills (golden before/after).
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/cube_row_mask.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const std::string& text) {
  return ir::print(cube_row_mask(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

// The kernel up to V's page copy inside the step loop, shared by kernel() and rewritten().
const std::string kHead = R"(kernel main(V: global float16[4, 4, 16], lens: global int32[2], Out: global float32[2, 1, 16] out)
    grid(b = 2) {
  alloc v: shared float16[8, 16]
  alloc p: shared float16[1, 8]
  alloc acc: fragment float32[1, 16]
  fill acc = 0.0
  fill p = 1.0f16
  let n: int32 = lens[b]
  for j in serial(0, 2) {
    copy V[j:+1, 0:+4, 0:+16] -> v[0:+4, 0:+16]
)";

// A paged-decode step reduced to the value side: V's page copied into v, v masked past the
// context length n, then the P V gemm. `mask` is the map's body, `extra` statements after the gemm.
std::string kernel(const std::string& mask, const std::string& extra = "", const std::string& loops = "c, d") {
  std::string c = loops.substr(0, loops.find(',')), d = loops.substr(loops.find(' ') + 1);
  bool row_outer = c == "c";
  std::string outer = row_outer ? "c" : "d", inner = row_outer ? "d" : "c";
  std::string oext = row_outer ? "8" : "16", iext = row_outer ? "16" : "8";
  return kHead + R"(    for )" + outer + " in parallel(0, " + oext + ") {\n      for " + inner + " in parallel(0, " + iext + ") {\n        " +
         mask + R"(
      }
    }
    gemm p, v -> acc trans_a=false trans_b=false clear=false
  }
)" + extra + R"(  copy acc -> Out[b:+1, 0:+1, 0:+16]
}
)";
}

std::string rewritten(const std::string& cond, const std::string& value = "0.0f16") {
  return kHead + R"(    for c in serial(0, 8) {
      if c >= )" + cond + R"( {
        fill v[c:+1, 0:+16] = )" + value + R"(
      }
    }
    gemm p, v -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> Out[b:+1, 0:+1, 0:+16]
}
)";
}

TEST(CubeRowMask, PagedDecodeValueMaskBecomesARowTailFill) {
  EXPECT_EQ(run(kernel("v[c, d] = where(j * 8 + c < n, v[c, d], 0.0f16)")), rewritten("n - j * 8"));
}

TEST(CubeRowMask, TheSameMaskWrittenOtherWays) {
  // c on either side, <= and >, a negated condition, the zero in the true branch, columns outer
  EXPECT_EQ(run(kernel("v[c, d] = where(c < n - j * 8, v[c, d], 0.0f16)")), rewritten("n - j * 8"));
  EXPECT_EQ(run(kernel("v[c, d] = where(n > c + j * 8, v[c, d], 0.0f16)")), rewritten("n - j * 8"));
  EXPECT_EQ(run(kernel("v[c, d] = where(c + j * 8 <= n, v[c, d], 0.0f16)")), rewritten("n - j * 8 + 1"));
  EXPECT_EQ(run(kernel("v[c, d] = where(c + j * 8 >= n, 0.0f16, v[c, d])")), rewritten("n - j * 8"));
  EXPECT_EQ(run(kernel("v[c, d] = where(not (c + j * 8 < n), 0.0f16, v[c, d])")), rewritten("n - j * 8"));
  EXPECT_EQ(run(kernel("v[c, d] = where(j * 8 + c < n, v[c, d], 0.0f16)", "", "d, c")), rewritten("n - j * 8"));
  // another constant is kept (the rows become that value, as the map wrote them)
  EXPECT_EQ(run(kernel("v[c, d] = where(j * 8 + c < n, v[c, d], 1.0f16)")), rewritten("n - j * 8", "1.0f16"));
}

TEST(CubeRowMask, OtherMapsAndTilesStayVectorCode) {
  for (const std::string mask : {
           "v[c, d] = where(j * 8 + c >= n, v[c, d], 0.0f16)",      // keeps a suffix of the rows
           "v[c, d] = where(j * 8 + d < n, v[c, d], 0.0f16)",       // a column mask
           "v[c, d] = where(j * 8 + c + d < n, v[c, d], 0.0f16)",   // rows and columns
           "v[c, d] = where(2 * c < n, v[c, d], 0.0f16)",           // not c + A
           "v[c, d] = where(j * 8 + c < n, v[c, d], v[c, d] * 0.5f16)",  // not a constant
           "v[c, d] = where(j * 8 + c < n, 0.0f16, v[c, d])",       // zeroes the prefix
           "v[c, d] = where(j * 8 + c < n, p[0, c], 0.0f16)",       // another tile's elements
       }) {
    std::string in = kernel(mask);
    EXPECT_EQ(run(in), ir::print(ir::parse_kernel(in, "k.tw"))) << mask;
  }
  // v read by vector code too (a reduce), or written by one: the mask stays vector code
  for (const std::string extra : {
           "  alloc r: fragment float16[8]\n  reduce sum v -> r axis=1 clear=true\n",
           "  for c_9 in parallel(0, 8) {\n    for d_9 in parallel(0, 16) {\n      v[c_9, d_9] = 0.0f16\n    }\n  }\n",
       }) {
    std::string in = kernel("v[c, d] = where(j * 8 + c < n, v[c, d], 0.0f16)", extra);
    EXPECT_EQ(run(in), ir::print(ir::parse_kernel(in, "k.tw"))) << extra;
  }
}

}  // namespace
}  // namespace tw::ascend
