// alias_tile_copies: which same-dtype whole-tile copies are dropped, their readers reading the
// source (before/after Tile IR text).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/alias_tile_copies.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(alias_tile_copies(ir::parse_kernel(text, "k.tw"))); }

// flash attention's shape: in each step s is computed, copied into p (dtype p_dt), p is read by
// the second gemm; `between` goes between the copy and that gemm, `after` after it (in the loop).
std::string attn(const std::string& p_dt, const std::string& between = "", const std::string& after = "") {
  return R"(kernel k(Q: global float32[64, 32], K: global float32[128, 32], V: global float32[128, 32], O: global float32[64, 32] out)
    grid(bx = 2) {
  alloc q: shared float32[32, 32]
  alloc kk: shared float32[32, 32]
  alloc v: shared )" + p_dt + R"([32, 32]
  alloc s: fragment float32[32, 32]
  alloc p: fragment )" + p_dt + R"([32, 32]
  alloc o: fragment float32[32, 32]
  copy Q[bx * 32:+32, 0:+32] -> q
  fill o = 0.0
  for t in serial(0, 4) {
    copy K[t * 32:+32, 0:+32] -> kk
    gemm q, kk -> s trans_a=false trans_b=true clear=true
    copy V[t * 32:+32, 0:+32] -> v
    copy s -> p
)" + between + R"(    gemm p, v -> o trans_a=false trans_b=false clear=false
)" + after + R"(  }
  copy o -> O[bx * 32:+32, 0:+32]
}
)";
}

// The float32 copy is dropped and the gemm reads s; p's allocation goes too.
TEST(AliasTileCopies, SameDtypeCopyReadByGemmIsDropped) {
  std::string want = attn("float32");
  want.erase(want.find("  alloc p: fragment float32[32, 32]\n"), std::string("  alloc p: fragment float32[32, 32]\n").size());
  want.erase(want.find("    copy s -> p\n"), std::string("    copy s -> p\n").size());
  want.replace(want.find("gemm p, v"), 9, "gemm s, v");
  EXPECT_EQ(run(attn("float32")), ir::print(ir::parse_kernel(want, "k.tw")));
}

// Readers of any kind (a map, a reduction) read the source too.
TEST(AliasTileCopies, OtherReadersReadTheSource) {
  const std::string map = R"(    for i in parallel(0, 32) {
      for j in parallel(0, 32) {
        o[i, j] = o[i, j] + p[i, j]
      }
    }
)";
  std::string want = attn("float32", map);
  want.erase(want.find("  alloc p: fragment float32[32, 32]\n"), std::string("  alloc p: fragment float32[32, 32]\n").size());
  want.erase(want.find("    copy s -> p\n"), std::string("    copy s -> p\n").size());
  want.replace(want.find("gemm p, v"), 9, "gemm s, v");
  want.replace(want.find("+ p[i, j]"), 9, "+ s[i, j]");
  EXPECT_EQ(run(attn("float32", map)), ir::print(ir::parse_kernel(want, "k.tw")));
}

TEST(AliasTileCopies, LeavesOtherCopiesAlone) {
  const std::string cases[] = {
      // a cast (float32 -> bfloat16) is a real copy
      attn("bfloat16"),
      // the source is written between the copy and a reader: p holds the old values
      attn("float32", "    fill s = 0.0\n"),
      attn("float32", R"(    for i in parallel(0, 32) {
      for j in parallel(0, 32) {
        s[i, j] = s[i, j] * 2.0
      }
    }
)"),
      // the copy is written after it (p is not only a name for s)
      attn("float32", "    fill p = 1.0\n"),
      // p is read after the loop body's next copy of s would have changed s (in the next step,
      // before the copy): the read before the copy sees the previous step's value
      attn("float32", "", "").replace(attn("float32").find("    copy K[t"), 0, "    copy p -> O[0:+32, 0:+32]\n"),
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

// A reader that writes the source (a gemm accumulating into s from p) keeps the copy: the gemm
// would read and write the same tile.
TEST(AliasTileCopies, ReaderWritingTheSourceKeepsTheCopy) {
  std::string c = attn("float32");
  c.replace(c.find("gemm p, v -> o"), 14, "gemm p, v -> s");
  EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw")));
}

// rms_norm's shape: a whole weight tensor W copied into a tile w per block, w loaded by the map
// (`between` after the copy, `after` after the map).
std::string weights(const std::string& w_dt, const std::string& between = "", const std::string& after = "",
                    const std::string& w_param = "W: global float32[32]") {
  return R"(kernel k(X: global float32[64, 32], )" + w_param + R"(, Y: global float32[64, 32] out)
    grid(bx = 2) {
  alloc x: fragment float32[32, 32]
  alloc w: fragment )" + w_dt + R"([32]
  alloc s: fragment float32[32]
  copy X[bx * 32:+32, 0:+32] -> x
  copy W -> w
)" + between + R"(  for i in parallel(0, 32) {
    for j in parallel(0, 32) {
      x[i, j] = x[i, j] * w[j]
    }
  }
)" + after + R"(  copy x -> Y[bx * 32:+32, 0:+32]
}
)";
}

// A whole global tensor the kernel never writes, loaded only: the map loads W in place.
TEST(AliasTileCopies, WholeTensorLoadedOnlyIsReadInPlace) {
  std::string want = weights("float32");
  want.erase(want.find("  alloc w: fragment float32[32]\n"), std::string("  alloc w: fragment float32[32]\n").size());
  want.erase(want.find("  copy W -> w\n"), std::string("  copy W -> w\n").size());
  want.replace(want.find("* w[j]"), 6, "* W[j]");
  EXPECT_EQ(run(weights("float32")), ir::print(ir::parse_kernel(want, "k.tw")));
}

TEST(AliasTileCopies, WholeTensorCopiesKeptWhereNotOnlyLoaded) {
  const std::string cases[] = {
      // a cast (bfloat16 -> float32) is a real copy
      weights("float32", "", "", "W: global bfloat16[32]"),
      // the kernel writes the tensor (in any block: another block's copy may see it)
      weights("float32", "", R"(  for j in parallel(0, 32) {
    W[j] = 1.0
  }
)", "W: global float32[32] out"),
      // the copy is written after it
      weights("float32", "  fill w = 1.0\n"),
      // the tile is read whole (a reduction, a copy): only loads read the tensor in place
      weights("float32", "  reduce sum w -> s axis=0 clear=true\n"),
      weights("float32", "  copy w -> s\n"),
      // a gather from the tile (an index that loads memory): checked against the tile's extents
      weights("float32", R"(  alloc ix: fragment int32[32]
  copy I[0:+32] -> ix
  for i in parallel(0, 32) {
    s[i] = w[ix[i]]
  }
)", "", "W: global float32[32], I: global int32[64]"),
      // a load at a scalar parameter's index (not proved inside the tile: checked against its extents;
      // the tensor behind it is not, hunt30 F8)
      weights("float32", R"(  for i in parallel(0, 32) {
    s[i] = w[n]
  }
)", "", "W: global float32[32], n: int32"),
      // the tensor's shape is not the tile's (a part of it)
      weights("float32", "", "", "W: global float32[64]").replace(weights("float32").find("copy W -> w"), 11,
                                                                  "copy W[0:+32] -> w"),
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

}  // namespace
}  // namespace tw::cpu
