// multi_buffer: stage copies of the tiles of pipelined / loading loops (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/multi_buffer.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(multi_buffer(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(MultiBuffer, PipelinedLoopGetsStagedTiles) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  for k in pipelined(0, 3, stages=2) {
    alloc a: L1 float16[128, 64]
    copy A[0:+128, k * 64:+64] -> a
    let kk: int32 = k * 2
    gemm a, a -> acc trans_a=false trans_b=true clear=false
  }
  copy acc -> C
}
)"),
            R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  alloc a: L1 float16[2, 128, 64]
  for k_o in serial(0, 2) {
    {
      let k: int32 = k_o * 2
      copy A[0:+128, k * 64:+64] -> a[0:+1, 0:+128, 0:+64]
      let kk_s0: int32 = k * 2
      gemm a[0:+1, 0:+128, 0:+64], a[0:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
    if k_o * 2 + 1 < 3 {
      let k_s1: int32 = k_o * 2 + 1
      copy A[0:+128, k_s1 * 64:+64] -> a[1:+1, 0:+128, 0:+64]
      let kk_s1: int32 = k_s1 * 2
      gemm a[1:+1, 0:+128, 0:+64], a[1:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
  }
  copy acc -> C
}
)");
}

TEST(MultiBuffer, SerialLoopThatLoadsIsStagedWhenItFits) {
  EXPECT_EQ(run(R"(kernel v(X: global float32[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  for r in serial(0, 4) {
    alloc x: UB float32[16, 64]
    copy X[r * 16:+16, 0:+64] -> x
    copy x -> Y[r * 16:+16, 0:+64]
  }
}
)"),
            R"(kernel v(X: global float32[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  alloc x: UB float32[2, 16, 64]
  for r_o in serial(0, 2) {
    {
      let r: int32 = r_o * 2
      copy X[r * 16:+16, 0:+64] -> x[0:+1, 0:+16, 0:+64]
      copy x[0:+1, 0:+16, 0:+64] -> Y[r * 16:+16, 0:+64]
    }
    {
      let r_s1: int32 = r_o * 2 + 1
      copy X[r_s1 * 16:+16, 0:+64] -> x[1:+1, 0:+16, 0:+64]
      copy x[1:+1, 0:+16, 0:+64] -> Y[r_s1 * 16:+16, 0:+64]
    }
  }
}
)");
}

// examples/gemm.py's form (tilelang's): the tiles are allocated before the loop. A tile whose value
// lives within one iteration (every reference inside the body, overwritten whole first) is staged
// exactly as if the body allocated it; the accumulator stays shared.
TEST(MultiBuffer, TileAllocatedBeforeThePipelinedLoopIsStagedAsIfAllocatedInside) {
  const char* outside = R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc a: L1 float16[128, 64]
  alloc acc: L0C float32[128, 128]
  for k in pipelined(0, 3, stages=2) {
    copy A[0:+128, k * 64:+64] -> a
    gemm a, a -> acc trans_a=false trans_b=true clear=false
  }
  copy acc -> C
}
)";
  const char* inside = R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  for k in pipelined(0, 3, stages=2) {
    alloc a: L1 float16[128, 64]
    copy A[0:+128, k * 64:+64] -> a
    gemm a, a -> acc trans_a=false trans_b=true clear=false
  }
  copy acc -> C
}
)";
  const char* staged = R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  alloc a: L1 float16[2, 128, 64]
  for k_o in serial(0, 2) {
    {
      let k: int32 = k_o * 2
      copy A[0:+128, k * 64:+64] -> a[0:+1, 0:+128, 0:+64]
      gemm a[0:+1, 0:+128, 0:+64], a[0:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
    if k_o * 2 + 1 < 3 {
      let k_s1: int32 = k_o * 2 + 1
      copy A[0:+128, k_s1 * 64:+64] -> a[1:+1, 0:+128, 0:+64]
      gemm a[1:+1, 0:+128, 0:+64], a[1:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
  }
  copy acc -> C
}
)";
  EXPECT_EQ(run(outside), staged);
  EXPECT_EQ(run(inside), staged);
}

// Tiles allocated before the loop that carry a value across iterations or out of the loop, or that
// the body does not overwrite whole before its other references, are one tile shared by the copies.
TEST(MultiBuffer, TileBeforeTheLoopThatLivesAcrossIterationsIsNotStaged) {
  EXPECT_EQ(run(R"(kernel v(X: global float32[64, 64], Y: global float32[16, 64] out, Z: global float32[16, 64] out)
    grid(bx = 1) {
  alloc s: UB float32[16, 64]
  alloc last: UB float32[16, 64]
  alloc part: UB float32[16, 64]
  fill s = 0.0
  for r in pipelined(0, 4, stages=2) {
    copy X[r * 16:+16, 0:+64] -> last
    copy X[r * 16:+8, 0:+64] -> part[0:+8, 0:+64]
    for i in parallel(0, 16) {
      for j in parallel(0, 64) {
        s[i, j] = s[i, j] + last[i, j] + part[i, j]
      }
    }
  }
  copy s -> Y
  copy last -> Z
}
)"),
            R"(kernel v(X: global float32[64, 64], Y: global float32[16, 64] out, Z: global float32[16, 64] out)
    grid(bx = 1) {
  alloc s: UB float32[16, 64]
  alloc last: UB float32[16, 64]
  alloc part: UB float32[16, 64]
  fill s = 0.0
  for r_o in serial(0, 2) {
    {
      let r: int32 = r_o * 2
      copy X[r * 16:+16, 0:+64] -> last
      copy X[r * 16:+8, 0:+64] -> part[0:+8, 0:+64]
      for i_s0 in parallel(0, 16) {
        for j_s0 in parallel(0, 64) {
          s[i_s0, j_s0] = s[i_s0, j_s0] + last[i_s0, j_s0] + part[i_s0, j_s0]
        }
      }
    }
    {
      let r_s1: int32 = r_o * 2 + 1
      copy X[r_s1 * 16:+16, 0:+64] -> last
      copy X[r_s1 * 16:+8, 0:+64] -> part[0:+8, 0:+64]
      for i_s1 in parallel(0, 16) {
        for j_s1 in parallel(0, 64) {
          s[i_s1, j_s1] = s[i_s1, j_s1] + last[i_s1, j_s1] + part[i_s1, j_s1]
        }
      }
    }
  }
  copy s -> Y
  copy last -> Z
}
)");
}

// expand_gemm sizes a body's L0A / L0B tiles so that two copies fit; with more stages they get the
// most copies that fit (here two of B's 32 KiB L0B tile in 64 KiB), the copy for iteration i being
// i % 2, and the kernel's L1 tiles get the three the loop asks for.
TEST(MultiBuffer, L0TilesGetTheCopiesThatFit) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[128, 192], B: global float16[192, 256], C: global float32[128, 256] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 256]
  for k in pipelined(0, 3, stages=3) {
    alloc b: L1 float16[64, 256]
    copy B[k * 64:+64, 0:+256] -> b
    alloc a_l0: L0A float16[128, 64]
    alloc b_l0: L0B float16[64, 256]
    copy A[0:+128, k * 64:+64] -> a_l0
    copy b -> b_l0
    gemm a_l0, b_l0 -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C
}
)"),
            R"(kernel mm(A: global float16[128, 192], B: global float16[192, 256], C: global float32[128, 256] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 256]
  alloc b: L1 float16[3, 64, 256]
  alloc a_l0: L0A float16[2, 128, 64]
  alloc b_l0: L0B float16[2, 64, 256]
  {
    let k_r0: int32 = 0
    copy B[k_r0 * 64:+64, 0:+256] -> b[0:+1, 0:+64, 0:+256]
    copy A[0:+128, k_r0 * 64:+64] -> a_l0[0:+1, 0:+128, 0:+64]
    copy b[0:+1, 0:+64, 0:+256] -> b_l0[0:+1, 0:+64, 0:+256]
    gemm a_l0[0:+1, 0:+128, 0:+64], b_l0[0:+1, 0:+64, 0:+256] -> acc trans_a=false trans_b=false clear=false
  }
  {
    let k_r1: int32 = 1
    copy B[k_r1 * 64:+64, 0:+256] -> b[1:+1, 0:+64, 0:+256]
    copy A[0:+128, k_r1 * 64:+64] -> a_l0[1:+1, 0:+128, 0:+64]
    copy b[1:+1, 0:+64, 0:+256] -> b_l0[1:+1, 0:+64, 0:+256]
    gemm a_l0[1:+1, 0:+128, 0:+64], b_l0[1:+1, 0:+64, 0:+256] -> acc trans_a=false trans_b=false clear=false
  }
  {
    let k_r2: int32 = 2
    copy B[k_r2 * 64:+64, 0:+256] -> b[2:+1, 0:+64, 0:+256]
    copy A[0:+128, k_r2 * 64:+64] -> a_l0[0:+1, 0:+128, 0:+64]
    copy b[2:+1, 0:+64, 0:+256] -> b_l0[0:+1, 0:+64, 0:+256]
    gemm a_l0[0:+1, 0:+128, 0:+64], b_l0[0:+1, 0:+64, 0:+256] -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C
}
)");
}

// A tile the body first overwrites whole by an elementwise map that reads none of it (convert_copies'
// cast of a converting copy) is iteration-local too; the staging tile the copy lands in was
// allocated in the body.
TEST(MultiBuffer, TileBeforeTheLoopFirstWrittenByAMapIsStaged) {
  EXPECT_EQ(run(R"(kernel v(X: global float16[32, 8], Y: global float32[32, 8] out)
    grid(bx = 1) {
  alloc x: UB float32[16, 8]
  for r in pipelined(0, 2, stages=2) {
    alloc x_h: UB float16[16, 8]
    copy X[r * 16:+16, 0:+8] -> x_h
    for i in parallel(0, 16) {
      for j in parallel(0, 8) {
        x[i, j] = cast<float32>(x_h[i, j])
      }
    }
    copy x -> Y[r * 16:+16, 0:+8]
  }
}
)"),
            R"(kernel v(X: global float16[32, 8], Y: global float32[32, 8] out)
    grid(bx = 1) {
  alloc x: UB float32[2, 16, 8]
  alloc x_h: UB float16[2, 16, 8]
  for r_o in serial(0, 1) {
    {
      let r: int32 = r_o * 2
      copy X[r * 16:+16, 0:+8] -> x_h[0:+1, 0:+16, 0:+8]
      for i_s0 in parallel(0, 16) {
        for j_s0 in parallel(0, 8) {
          x[0, i_s0, j_s0] = cast<float32>(x_h[0, i_s0, j_s0])
        }
      }
      copy x[0:+1, 0:+16, 0:+8] -> Y[r * 16:+16, 0:+8]
    }
    {
      let r_s1: int32 = r_o * 2 + 1
      copy X[r_s1 * 16:+16, 0:+8] -> x_h[1:+1, 0:+16, 0:+8]
      for i_s1 in parallel(0, 16) {
        for j_s1 in parallel(0, 8) {
          x[1, i_s1, j_s1] = cast<float32>(x_h[1, i_s1, j_s1])
        }
      }
      copy x[1:+1, 0:+16, 0:+8] -> Y[r_s1 * 16:+16, 0:+8]
    }
  }
}
)");
}

}  // namespace
}  // namespace tw::ascend
