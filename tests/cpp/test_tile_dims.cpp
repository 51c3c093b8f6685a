// tile_dims: the tile dims a kernel ties together (the capacity hint's classes; tile_dims.h).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "target/ascend/tile_dims.h"

namespace tw::ascend {
namespace {

// Flash attention's shape: M (q's, s's, p's, o's rows), the keys N (kk's rows, s's and p's columns,
// v's rows: the transposed gemm, the copy s -> p, the second gemm's K), the head dim D as two
// classes (q's and kk's columns: the first gemm's K; v's and o's: the second gemm's N; nothing in
// the kernel ties the two), both fixed: copied whole from the tensors' whole last dims.
TEST(TileDims, GemmsAndCopiesTieTheAttentionDims) {
  auto k = ir::parse_kernel(R"(kernel k(Q: global float32[64, 64], K: global float32[128, 64], V: global float32[128, 64], O: global float32[64, 64] out)
    grid(bx = 4) {
  alloc q: shared float32[16, 64]
  alloc kk: shared float32[32, 64]
  alloc v: shared float32[32, 64]
  alloc s: fragment float32[16, 32]
  alloc p: fragment float32[16, 32]
  alloc o: fragment float32[16, 64]
  copy Q[bx * 16:+16, 0:+64] -> q
  fill o = 0.0
  for t in serial(0, 4) {
    copy K[t * 32:+32, 0:+64] -> kk
    gemm q, kk -> s trans_a=false trans_b=true clear=true
    copy V[t * 32:+32, 0:+64] -> v
    copy s -> p
    gemm p, v -> o trans_a=false trans_b=false clear=false
  }
  copy o -> O[bx * 16:+16, 0:+64]
}
)", "dims.tw");
  TileDims d = tile_dims(k, k);
  auto cls = [&](const std::string& t, size_t i) { return d.dims.at(t).at(i); };
  const int m = cls("q", 0), n = cls("kk", 0), h = cls("q", 1), h2 = cls("v", 1);
  EXPECT_NE(m, n);
  EXPECT_NE(m, h);
  EXPECT_NE(n, h);
  for (auto [t, i, c] : std::vector<std::tuple<std::string, size_t, int>>{
           {"s", 0, m}, {"p", 0, m}, {"o", 0, m}, {"s", 1, n}, {"p", 1, n}, {"v", 0, n}, {"kk", 1, h}, {"o", 1, h2}})
    EXPECT_EQ(cls(t, i), c) << t << " dim " << i;
  EXPECT_EQ(d.extent[m], 16);
  EXPECT_EQ(d.extent[n], 32);
  EXPECT_FALSE(d.fixed[m]);
  EXPECT_FALSE(d.fixed[n]);
  EXPECT_TRUE(d.fixed[h]);  // the head dim, whole from Q
  EXPECT_TRUE(d.fixed[h2]);  // whole from V
  EXPECT_EQ(d.user.count("p"), 1u);
}

}  // namespace
}  // namespace tw::ascend
