// coarsen_grid: merging consecutive blocks of tiny-tile kernels (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "transform/coarsen_grid.h"

namespace tw::transform {
namespace {

std::string run(const std::string& text) { return ir::print(coarsen_grid(ir::parse_kernel(text, "k.tw"))); }

// Softmax over (M, 1) in blocks of 8 rows: tiles of 8 floats are merged 32 at a time.
const char* kNarrowSoftmax = R"(kernel sm(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  alloc m: fragment float32[8]
  alloc s: fragment float32[8]
  copy X[bx * 8:+8, 0:+1] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 8) {
    for j in parallel(0, 1) {
      x[i, j] = exp(x[i, j] - m[i])
    }
  }
  reduce sum x -> s axis=1 clear=true
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 1) {
      x[i_1, j_1] = x[i_1, j_1] / s[i_1]
    }
  }
  copy x -> Y[bx * 8:+8, 0:+1]
}
)";

TEST(CoarsenGrid, NarrowSoftmaxBlocksAreMerged) {
  EXPECT_EQ(run(kNarrowSoftmax), R"(kernel sm(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 256)) {
  alloc x: fragment float32[256, 1]
  alloc m: fragment float32[256]
  alloc s: fragment float32[256]
  copy X[bx * 256:+256, 0:+1] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 256) {
    for j in parallel(0, 1) {
      x[i, j] = exp(x[i, j] - m[i])
    }
  }
  reduce sum x -> s axis=1 clear=true
  for i_1 in parallel(0, 256) {
    for j_1 in parallel(0, 1) {
      x[i_1, j_1] = x[i_1, j_1] / s[i_1]
    }
  }
  copy x -> Y[bx * 256:+256, 0:+1]
}
)");
}

TEST(CoarsenGrid, ConstantGridMergesNoMoreThanItHas) {
  // 5 blocks of 4 rows of 3: F = 8 would allow 21 (tiles of 12 <= 256), capped at 8 >= 5.
  EXPECT_EQ(run(R"(kernel k(X: global float32[19, 3], Y: global float32[19, 3] out)
    grid(bx = 5) {
  alloc x: fragment float32[4, 3]
  copy X[bx * 4:+4, 0:+3] -> x
  for i in parallel(0, 4) {
    for j in parallel(0, 3) {
      x[i, j] = x[i, j] * 2.0
    }
  }
  copy x -> Y[bx * 4:+4, 0:+3]
}
)"),
            R"(kernel k(X: global float32[19, 3], Y: global float32[19, 3] out)
    grid(bx = 1) {
  alloc x: fragment float32[32, 3]
  copy X[bx * 32:+32, 0:+3] -> x
  for i in parallel(0, 32) {
    for j in parallel(0, 3) {
      x[i, j] = x[i, j] * 2.0
    }
  }
  copy x -> Y[bx * 32:+32, 0:+3]
}
)");
}

TEST(CoarsenGrid, OneRowBlocks) {
  // Blocks of one row: the row offset is bx itself and the grid is M.
  EXPECT_EQ(run(R"(kernel k(X: global float32[M, 2], Y: global float32[M, 2] out)
    grid(bx = M) {
  alloc x: fragment float32[1, 2]
  copy X[bx:+1, 0:+2] -> x
  copy x -> Y[bx:+1, 0:+2]
}
)"),
            R"(kernel k(X: global float32[M, 2], Y: global float32[M, 2] out)
    grid(bx = ceildiv(M, 64)) {
  alloc x: fragment float32[64, 2]
  copy X[bx * 64:+64, 0:+2] -> x
  copy x -> Y[bx * 64:+64, 0:+2]
}
)");
}

// Kernels the pass must leave alone: each differs from a mergeable one in one respect.
TEST(CoarsenGrid, LeavesOtherKernelsAlone) {
  const char* cases[] = {
      // tiles too large to be worth it
      R"(kernel k(X: global float32[M, 64], Y: global float32[M, 64] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 64]
  copy X[bx * 8:+8, 0:+64] -> x
  copy x -> Y[bx * 8:+8, 0:+64]
}
)",
      // the grid does not cover the tensor's rows exactly (4 blocks of 8 over 100 rows)
      R"(kernel k(X: global float32[100, 1], Y: global float32[100, 1] out)
    grid(bx = 4) {
  alloc x: fragment float32[8, 1]
  copy X[bx * 8:+8, 0:+1] -> x
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
      // bx used outside a row offset
      R"(kernel k(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  copy X[bx * 8:+8, 0:+1] -> x
  for i in parallel(0, 8) {
    for j in parallel(0, 1) {
      x[i, j] = x[i, j] + cast<float32>(bx)
    }
  }
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
      // the row variable used as a value (row i of a merged block is another row)
      R"(kernel k(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  copy X[bx * 8:+8, 0:+1] -> x
  for i in parallel(0, 8) {
    for j in parallel(0, 1) {
      x[i, j] = x[i, j] + cast<float32>(i)
    }
  }
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
      // a reduction over the rows
      R"(kernel k(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  alloc c: fragment float32[1]
  copy X[bx * 8:+8, 0:+1] -> x
  reduce sum x -> c axis=0 clear=true
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
      // a tile whose first dimension is not the block's rows (per-column data)
      R"(kernel k(X: global float32[M, 4], W: global float32[4], Y: global float32[M, 4] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4]
  alloc w: fragment float32[4]
  copy X[bx * 8:+8, 0:+4] -> x
  copy W[0:+4] -> w
  copy x -> Y[bx * 8:+8, 0:+4]
}
)",
      // a tensor read inside a map
      R"(kernel k(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  for i in parallel(0, 8) {
    for j in parallel(0, 1) {
      x[i, j] = X[bx * 8 + i, j]
    }
  }
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
      // a serial loop in the block
      R"(kernel k(X: global float32[M, 1], Y: global float32[M, 1] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 1]
  copy X[bx * 8:+8, 0:+1] -> x
  for t in serial(0, 3) {
    copy x -> Y[bx * 8:+8, 0:+1]
  }
}
)",
      // a one-block constant grid: nothing to merge
      R"(kernel k(X: global float32[8, 1], Y: global float32[8, 1] out)
    grid(bx = 1) {
  alloc x: fragment float32[8, 1]
  copy X[bx * 8:+8, 0:+1] -> x
  copy x -> Y[bx * 8:+8, 0:+1]
}
)",
  };
  for (const char* text : cases) {
    auto k = ir::parse_kernel(text, "k.tw");
    EXPECT_EQ(coarsen_grid(k), k) << text;
  }
}

}  // namespace
}  // namespace tw::transform
