// expand_int8_fill: before/after Tile IR texts.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/expand_int8_fill.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string after(const std::string& text) {
  return ir::print(expand_int8_fill(ir::parse_kernel(text, "vec.tw"), target::find_target("ascend910b2")));
}

TEST(ExpandInt8Fill, Int8AndUint8FillsBecomeMaps) {
  EXPECT_EQ(after(R"(kernel k(Y: global int8[8, 64])
    grid(bx = 1) {
  alloc y: UB int8[8, 64]
  alloc u: UB uint8[32]
  alloc f: UB float32[8, 64]
  fill y = 3
  fill u[0:+8] = 200
  fill f = 1.5
  copy y -> Y
}
)"), R"(kernel k(Y: global int8[8, 64])
    grid(bx = 1) {
  alloc y: UB int8[8, 64]
  alloc u: UB uint8[32]
  alloc f: UB float32[8, 64]
  for i_0 in parallel(0, 8) {
    for j_0 in parallel(0, 64) {
      y[i_0, j_0] = 3i8
    }
  }
  for j_1 in parallel(0, 8) {
    u[j_1] = 200u8
  }
  fill f = 1.5
  copy y -> Y
}
)");
}

}  // namespace
}  // namespace tw::ascend
