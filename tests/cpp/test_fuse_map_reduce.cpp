// fuse_map_reduce: which maps are reduced over their rows while computed (before/after Tile IR text).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/fuse_map_reduce.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(fuse_map_reduce(ir::parse_kernel(text, "k.tw"))); }

// softmax's exp-and-sum: a map into e, then e's row sum; `after` follows the reduce.
std::string exp_sum(const std::string& cols, const std::string& map_prefix, const std::string& after,
                    const std::string& reduce = "reduce sum e -> s axis=1 clear=true") {
  return R"(kernel k(X: global float32[8, )" + cols + R"(], Y: global float32[8] out)
    grid(bx = 2) {
  alloc e: fragment float32[4, )" + cols + R"(]
  alloc s: fragment float32[4]
  copy X[bx * 4:+4, 0:+)" + cols + R"(] -> e
  )" + map_prefix + R"(for i in parallel(0, 4) {
    for j in parallel(0, )" + cols + R"() {
      e[i, j] = exp(e[i, j])
    }
  }
  )" + reduce + R"(
)" + after + R"(  copy s -> Y[bx * 4:+4]
}
)";
}

// Nothing reads e after the reduce: @fuse_reduce(0), e itself is not written.
TEST(FuseMapReduce, TileNotReadLaterIsNotKept) {
  EXPECT_EQ(run(exp_sum("128", "", "")), exp_sum("128", "@fuse_reduce(0) ", ""));
}

// e is read after the reduce: @fuse_reduce(1), the chunks are written to e too.
TEST(FuseMapReduce, TileReadLaterIsKept) {
  const std::string later = R"(  for i2 in parallel(0, 4) {
    for j2 in parallel(0, 128) {
      e[i2, j2] = e[i2, j2] / s[i2]
    }
  }
)";
  EXPECT_EQ(run(exp_sum("128", "", later)), exp_sum("128", "@fuse_reduce(1) ", later));
}

// In a loop: a tile each iteration overwrites first (a copy into the whole tile) and nothing
// reads later is not written (0); a tile a gemm overwrites (not an iteration-local tile to the
// pass, tile_facts.h) is written (1), and it is still fused.
TEST(FuseMapReduce, InLoops) {
  auto loop = [](const std::string& first, const std::string& mark) {
    return R"(kernel k(X: global float32[8, 128], W: global float32[128, 128], Y: global float32[8] out)
    grid(bx = 2) {
  alloc e: fragment float32[4, 128]
  alloc x: shared float32[4, 128]
  alloc w: shared float32[128, 128]
  alloc s: fragment float32[4]
  fill s = 0.0
  for t in serial(0, 3) {
)" + first + R"(    )" + mark + R"(for i in parallel(0, 4) {
      for j in parallel(0, 128) {
        e[i, j] = exp(e[i, j])
      }
    }
    reduce sum e -> s axis=1 clear=false
  }
  copy s -> Y[bx * 4:+4]
}
)";
  };
  const std::string copy = "    copy X[bx * 4:+4, 0:+128] -> e\n";
  const std::string gemm = "    copy X[bx * 4:+4, 0:+128] -> x\n    copy W -> w\n"
                           "    gemm x, w -> e trans_a=false trans_b=false clear=true\n";
  EXPECT_EQ(run(loop(copy, "")), loop(copy, "@fuse_reduce(0) "));
  EXPECT_EQ(run(loop(gemm, "")), loop(gemm, "@fuse_reduce(1) "));
}

TEST(FuseMapReduce, LeavesOtherPairsAlone) {
  const std::string cases[] = {
      // rows shorter than 16 elements (a narrow softmax)
      exp_sum("8", "", ""),
      // a reduction over the columns
      exp_sum("128", "", "", "reduce sum e -> s2 axis=0 clear=true").replace(
          exp_sum("128", "", "").find("  alloc s:"), 0, "  alloc s2: fragment float32[128]\n"),
      // the map reads the reduce's destination
      R"(kernel k(X: global float32[8, 128], Y: global float32[8] out)
    grid(bx = 2) {
  alloc e: fragment float32[4, 128]
  alloc s: fragment float32[4]
  fill s = 0.0
  copy X[bx * 4:+4, 0:+128] -> e
  for i in parallel(0, 4) {
    for j in parallel(0, 128) {
      e[i, j] = exp(e[i, j] - s[i])
    }
  }
  reduce sum e -> s axis=1 clear=false
  copy s -> Y[bx * 4:+4]
}
)",
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

}  // namespace
}  // namespace tw::cpu
