// view_rows: which row tiles are read in place in their source tensor (before/after Tile IR text).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/view_rows.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(view_rows(ir::parse_kernel(text, "k.tw"))); }

// y = x / rowsum(x): the reduce reads x, the map overwrites it; `out` is the tensor written.
std::string normalize(const std::string& mark, const std::string& params, const std::string& out,
                      const std::string& extra = "") {
  return R"(kernel k()" + params + R"()
    grid(bx = 4) {
  )" + mark + R"(alloc x: fragment float32[4, 128]
  alloc s: fragment float32[4]
  copy X[bx * 4:+4, 0:+128] -> x
  reduce sum x -> s axis=1 clear=true
)" + extra + R"(  for i in parallel(0, 4) {
    for j in parallel(0, 128) {
      x[i, j] = x[i, j] / s[i]
    }
  }
  copy x -> )" + out + R"([bx * 4:+4, 0:+128]
}
)";
}

const char* kTwo = "X: global float32[16, 128], Y: global float32[16, 128] out";

TEST(ViewRows, TileReadUntilAMapOverwritesItIsAView) {
  EXPECT_EQ(run(normalize("", kTwo, "Y")), normalize("@row_view(1, 0) ", kTwo, "Y"));
}

// A float32 tile copied from a bfloat16 / float16 tensor: a widening view (its readers widen each
// element as the copy would). Not a float64 tile (only float32 tiles widen), nor an int32 source.
TEST(ViewRows, WideningViewOfHalfTensors) {
  for (const char* dt : {"bfloat16", "float16"}) {
    const std::string p = std::string("X: global ") + dt + "[16, 128], Y: global float32[16, 128] out";
    EXPECT_EQ(run(normalize("", p, "Y")), normalize("@row_view(1, 1) ", p, "Y")) << dt;
  }
  const std::string p = "X: global int32[16, 128], Y: global float32[16, 128] out";
  EXPECT_EQ(run(normalize("", p, "Y")), ir::print(ir::parse_kernel(normalize("", p, "Y"), "k.tw")));
}

TEST(ViewRows, LeavesOtherTilesAlone) {
  const std::string cases[] = {
      // the kernel writes the source tensor (in place)
      normalize("", "X: global float32[16, 128] out", "X"),
      // the tile is written by something else than a full-tile map while the view is live
      normalize("", kTwo, "Y", "  fill x[0:+1, 0:+128] = 0.0\n"),
      // the tile is copied while the view is live
      normalize("", std::string(kTwo) + ", Z: global float32[16, 128] out", "Y", "  copy x -> Z[bx * 4:+4, 0:+128]\n"),
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

// In the body of a serial loop, for a tile each iteration overwrites first: @row_view(0, 0) (no
// prefetch of the next block's rows from there).
TEST(ViewRows, IterationLocalTileInLoop) {
  auto text = [](const std::string& mark) {
    return R"(kernel k(X: global float32[16, 128], Y: global float32[16, 128] out)
    grid(bx = 1) {
  )" + mark + R"(alloc x: fragment float32[4, 128]
  alloc s: fragment float32[4]
  for r in serial(0, 4) {
    copy X[r * 4:+4, 0:+128] -> x
    reduce max x -> s axis=1 clear=true
    copy s -> Y[r * 4:+4, 0:+1]
  }
}
)";
  };
  EXPECT_EQ(run(text("")), text("@row_view(0, 0) "));
}

}  // namespace
}  // namespace tw::cpu
