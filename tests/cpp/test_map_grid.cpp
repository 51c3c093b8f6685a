// map_grid: grid -> AI Cores loop, block order, core scope (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/map_grid.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(map_grid(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(MapGrid, VectorKernelRunsOnTheAIVs) {
  EXPECT_EQ(run(R"(kernel sm(X: global float32[M, 32], Y: global float32[M, 32] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: UB float32[8, 32]
  copy X[bx * 8:+8, 0:+32] -> x
  copy x -> Y[bx * 8:+8, 0:+32]
}
)"),
            R"(kernel sm(X: global float32[M, 32], Y: global float32[M, 32] out)
    grid(cid = min(ceildiv(M, 8), 48)) sub_block(vid) {
  for t in serial(0, ceildiv(ceildiv(M, 8) - cid, min(ceildiv(M, 8), 48))) {
    let blk: int32 = cid + t * min(ceildiv(M, 8), 48)
    let bx: int32 = blk
    scope V {
      alloc x: UB float32[8, 32]
      copy X[bx * 8:+8, 0:+32] -> x
      copy x -> Y[bx * 8:+8, 0:+32]
    }
  }
}
)");
}

TEST(MapGrid, CubeKernelPanelOrder) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[1280, 64], B: global float16[64, 384], C: global float16[1280, 384] out)
    grid(bx = 3, by = 10) {
  alloc acc: L0C float32[128, 128]
  copy acc -> C[by * 128:+128, bx * 128:+128]
}
)"),
            R"(kernel mm(A: global float16[1280, 64], B: global float16[64, 384], C: global float16[1280, 384] out)
    grid(cid = 24) sub_block(vid) {
  for t in serial(0, ceildiv(30 - cid, 24)) {
    let blk: int32 = cid + t * 24
    let panel: int32 = blk // 12
    let in_panel: int32 = blk % 12
    let panel_rows: int32 = min(10 - panel * 4, 4)
    let bx: int32 = in_panel // panel_rows
    let by: int32 = panel * 4 + in_panel % panel_rows
    scope C {
      alloc acc: L0C float32[128, 128]
      copy acc -> C[by * 128:+128, bx * 128:+128]
    }
  }
}
)");
}

TEST(MapGrid, ThreeDimGridRowMajor) {
  EXPECT_EQ(run(R"(kernel k3(X: global float32[2, 4, 64], Y: global float32[2, 4, 64] out)
    grid(bx = 2, by = 4, bz = 2) {
  alloc x: UB float32[1, 1, 32]
  copy X[bz:+1, by:+1, bx * 32:+32] -> x
  copy x -> Y[bz:+1, by:+1, bx * 32:+32]
}
)"),
            R"(kernel k3(X: global float32[2, 4, 64], Y: global float32[2, 4, 64] out)
    grid(cid = 16) sub_block(vid) {
  for t in serial(0, ceildiv(16 - cid, 16)) {
    let blk: int32 = cid + t * 16
    let bx: int32 = blk % 2
    let by: int32 = blk // 2 % 4
    let bz: int32 = blk // 2 // 4
    scope V {
      alloc x: UB float32[1, 1, 32]
      copy X[bz:+1, by:+1, bx * 32:+32] -> x
      copy x -> Y[bz:+1, by:+1, bx * 32:+32]
    }
  }
}
)");
}

}  // namespace
}  // namespace tw::ascend
