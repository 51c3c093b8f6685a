// drop_gemm_bands: T.gemm's band removed, nothing else changed (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/drop_gemm_bands.h"

namespace tw::ascend {
namespace {

std::string run(const std::string& text) { return ir::print(drop_gemm_bands(ir::parse_kernel(text, "k.tw"))); }

// The kernel text with `band` after each banded gemm's flags ("" for the kernel the pass should give).
std::string kernel(const std::string& band_a, const std::string& band_c) {
  return R"(kernel attn(Q: global float16[64, 32], K: global float16[64, 32], V: global float16[64, 32], L: global int32[2], O: global float32[64, 32])
    grid(bx = 2) {
  alloc q: shared float16[32, 32]
  alloc k: shared float16[32, 32]
  alloc v: shared float16[32, 32]
  alloc p: shared float16[32, 32]
  alloc s: fragment float32[32, 32]
  alloc o: fragment float32[32, 32]
  copy Q[bx * 32:+32, 0:+32] -> q
  copy K[0:+32, 0:+32] -> k
  copy V[0:+32, 0:+32] -> v
  gemm q, k -> s trans_a=false trans_b=true clear=true)" + band_c + R"(
  copy s -> p
  gemm p, v -> o trans_a=false trans_b=false clear=true)" + band_a + R"(
  gemm p[0:+32, 0:+16], v[0:+16, 0:+32] -> o trans_a=false trans_b=false clear=false
  copy o -> O[bx * 32:+32, 0:+32]
}
)";
}

TEST(DropGemmBands, EveryBandIsRemovedAndNothingElseChanges) {
  const std::string plain = kernel("", "");
  EXPECT_EQ(run(kernel(" band_a=(L[bx] - 31, L[bx] + 1)", " band_c=(-31, 1)")), plain);
  EXPECT_EQ(run(kernel("", " band_c=(bx * 32 - 31, 1)")), plain);
  EXPECT_EQ(run(kernel(" band_a=(0, 0)", "")), plain);
}

TEST(DropGemmBands, AKernelWithoutBandsIsUnchanged) {
  const std::string plain = kernel("", "");
  EXPECT_EQ(run(plain), ir::print(ir::parse_kernel(plain, "k.tw")));
  EXPECT_EQ(run(plain), plain);  // the text round-trips: the goldens above compare like with like
}

}  // namespace
}  // namespace tw::ascend
