// check_independent_maps: a T.Parallel map whose iterations reach one element (a store and another
// iteration's load or store) is an error at the access; maps whose iterations keep to their own elements pass.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "tilewright/ir.h"
#include "transform/independent_maps.h"

namespace tw {
namespace {

// A kernel with tiles x (rows, cols) and s (rows,) and the map `body`.
ir::Kernel map_kernel(const std::string& body, int rows = 4, int cols = 8) {
  const std::string r = std::to_string(rows), c = std::to_string(cols);
  return ir::parse_kernel("kernel k(X: global float32[" + r + ", " + c + "]) grid(bx = 1) {\n"
                          "  alloc x: fragment float32[" + r + ", " + c + "]\n"
                          "  alloc s: fragment float32[" + r + "]\n" + body + "}\n",
                          "k.tw");
}

std::string error_of(const ir::Kernel& k) {
  try {
    transform::check_independent_maps(k);
  } catch (const ir::Error& e) {
    return e.message();
  }
  return "";
}

TEST(IndependentMaps, ReadOfAnotherIterationsElementIsAnError) {
  std::string e = error_of(map_kernel("  for i in parallel(0, 4) {\n    for j in parallel(0, 8) {\n"
                                      "      x[i, j] = x[i, j] + x[(i + 1) % 4, j]\n    }\n  }\n"));
  EXPECT_NE(e.find("reads it at x[(i + 1) % 4, j]: iteration (i=0, j=0) reads the element that iteration (i=1, j=0) "
                   "stores"), std::string::npos) << e;
  e = error_of(map_kernel("  for i in parallel(0, 4) {\n    s[i] = s[3 - i]\n  }\n"));
  EXPECT_NE(e.find("iteration (i=0) reads the element that iteration (i=3) stores"), std::string::npos) << e;
}

TEST(IndependentMaps, OwnElementsPass) {
  // interleaved pairs in place, halves in place, a guard that keeps the halves apart, a constant other column
  EXPECT_EQ(error_of(map_kernel("  for i in parallel(0, 4) {\n    for j in parallel(0, 4) {\n"
                                "      let a: float32 = x[i, 2 * j]\n      x[i, 2 * j] = x[i, 2 * j + 1]\n"
                                "      x[i, 2 * j + 1] = a\n    }\n  }\n")), "");
  EXPECT_EQ(error_of(map_kernel("  for i in parallel(0, 4) {\n    for j in parallel(0, 4) {\n"
                                "      x[i, j] = x[i, j + 4]\n    }\n  }\n")), "");
  EXPECT_EQ(error_of(map_kernel("  for i in parallel(0, 4) {\n    for j in parallel(0, 8) {\n"
                                "      if j < 4 {\n        x[i, j] = x[i, j + 4]\n      }\n    }\n  }\n")), "");
  EXPECT_EQ(error_of(map_kernel("  for i in parallel(0, 4) {\n    x[i, 3] = x[i, 5] * s[i]\n  }\n")), "");
}

TEST(IndependentMaps, StoresOfOneElementFromSeveralIterations) {
  std::string e = error_of(map_kernel("  for i in parallel(0, 4) {\n    for j in parallel(0, 8) {\n"
                                      "      s[i] = x[i, j]\n    }\n  }\n"));
  EXPECT_NE(e.find("the store s[i] (it does not use every loop index: not j) writes the same element"),
            std::string::npos) << e;
}

TEST(IndependentMaps, MapsTooLargeToEnumerateUseTheOffset) {
  // 2^21 iterations: more than the enumeration's limit; a constant offset along one variable is still exact
  const int n = 1 << 21;
  const std::string head = "  for i in parallel(0, " + std::to_string(n) + ") {\n";
  EXPECT_EQ(error_of(map_kernel(head + "    x[0, i] = x[0, i] * 2.0\n  }\n", 1, n)), "");
  std::string e = error_of(map_kernel(head + "    x[0, i] = x[0, i + 1]\n  }\n", 1, n + 1));
  EXPECT_NE(e.find("iteration (i=0) reads the element that iteration (i=1) stores"), std::string::npos) << e;
}

}  // namespace
}  // namespace tw
