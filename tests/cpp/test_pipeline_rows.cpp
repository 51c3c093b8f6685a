// pipeline_rows: which runs of row passes are skewed by one row into one loop (before/after Tile
// IR text; the input carries the fusion annotations of fuse_map_copy_out / fuse_map_reduce).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/pipeline_rows.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(pipeline_rows(ir::parse_kernel(text, "k.tw"))); }
std::string same(const std::string& text) { return ir::print(ir::parse_kernel(text, "k.tw")); }

// softmax: row max, exp fused with the row sum, the division fused with the copy-out;
// `m_at` / `s_at` are the indices of m / s the exp / the division read, `copy_mark` goes before
// the copy-out.
std::string softmax(const std::string& copy_mark, const std::string& m_at = "i", const std::string& s_at = "i2") {
  return R"(kernel sm(X: global float32[16, 128], Y: global float32[16, 128] out)
    grid(bx = 4) {
  alloc x: fragment float32[4, 128]
  alloc m: fragment float32[4]
  alloc s: fragment float32[4]
  copy X[bx * 4:+4, 0:+128] -> x
  reduce max x -> m axis=1 clear=true
  @fuse_reduce(1) for i in parallel(0, 4) {
    for j in parallel(0, 128) {
      x[i, j] = exp(x[i, j] - m[)" + m_at + R"(])
    }
  }
  reduce sum x -> s axis=1 clear=true
  @fuse_copy_out for i2 in parallel(0, 4) {
    for j2 in parallel(0, 128) {
      x[i2, j2] = x[i2, j2] / s[)" + s_at + R"(]
    }
  }
  )" + copy_mark + R"(copy x -> Y[bx * 4:+4, 0:+128]
}
)";
}

TEST(PipelineRows, SoftmaxIsOneRun) { EXPECT_EQ(run(softmax("")), same(softmax("@row_pipeline(5) "))); }

// The exp reads row 0 of m, which the row max writes: the run starts after the row max.
TEST(PipelineRows, RunStartsAfterANonRowLocalPass) {
  EXPECT_EQ(run(softmax("", "0")), same(softmax("@row_pipeline(4) ", "0")));
}

TEST(PipelineRows, LeavesOtherRunsAlone) {
  const std::string cases[] = {
      // the division reads row 0 of s, which the run writes
      softmax("", "i", "0"),
      // one pass only: the fused copy-out
      R"(kernel k(X: global float32[16, 128], Y: global float32[16, 128] out)
    grid(bx = 4) {
  alloc x: fragment float32[4, 128]
  copy X[bx * 4:+4, 0:+128] -> x
  @fuse_copy_out for i in parallel(0, 4) {
    for j in parallel(0, 128) {
      x[i, j] = exp(x[i, j])
    }
  }
  copy x -> Y[bx * 4:+4, 0:+128]
}
)",
      // inside a loop
      R"(kernel k(X: global float32[16, 128], Y: global float32[16, 128] out)
    grid(bx = 1) {
  alloc x: fragment float32[4, 128]
  alloc s: fragment float32[4]
  for r in serial(0, 4) {
    copy X[r * 4:+4, 0:+128] -> x
    reduce sum x -> s axis=1 clear=true
    @fuse_copy_out for i in parallel(0, 4) {
      for j in parallel(0, 128) {
        x[i, j] = x[i, j] / s[i]
      }
    }
    copy x -> Y[r * 4:+4, 0:+128]
  }
}
)",
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), same(c)) << c;
}

// rms_norm: the sum of squares fused with its row sum, a per-row scalar map `row_map` on s, the
// scaling fused with the copy-out
std::string rms(const std::string& copy_mark, const std::string& row_map) {
  return R"(kernel rms(X: global float32[16, 128], Y: global float32[16, 128] out)
    grid(bx = 4) {
  alloc x: fragment float32[4, 128]
  alloc q: fragment float32[4, 128]
  alloc s: fragment float32[4]
  copy X[bx * 4:+4, 0:+128] -> x
  @fuse_reduce(0) for i in parallel(0, 4) {
    for j in parallel(0, 128) {
      q[i, j] = x[i, j] * x[i, j]
    }
  }
  reduce sum q -> s axis=1 clear=true
  for r in parallel(0, 4) {
    )" + row_map + R"(
  }
  @fuse_copy_out for i2 in parallel(0, 4) {
    for j2 in parallel(0, 128) {
      x[i2, j2] = x[i2, j2] * s[i2]
    }
  }
  )" + copy_mark + R"(copy x -> Y[bx * 4:+4, 0:+128]
}
)";
}

// A per-row scalar map between the passes joins the run (the annotation counts it).
TEST(PipelineRows, RowScalarMapJoinsTheRun) {
  const std::string m = "s[r] = rsqrt(s[r] / 128.0 + 0.5)";
  EXPECT_EQ(run(rms("", m)), same(rms("@row_pipeline(5) ", m)));
}

// A row map that reads another row of s (or a 2-D tile) is not row-local: no run.
TEST(PipelineRows, RowMapReadingAnotherRowEndsTheRun) {
  for (const std::string m : {"s[r] = s[r] + s[0]", "s[r] = s[r] + x[r, 0]"}) {
    const std::string c = rms("", m);
    EXPECT_EQ(run(c), same(c)) << m;
  }
}

}  // namespace
}  // namespace tw::cpu
