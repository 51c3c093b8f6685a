// fuse_map_copy_out: which maps are computed straight into the tensor their tile is copied to
// (before/after Tile IR text); the @name annotation's text form and verification.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "target/cpu/codegen.h"
#include "target/cpu/fuse_map_copy_out.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(fuse_map_copy_out(ir::parse_kernel(text, "k.tw"))); }

// A kernel whose map into x is followed by x's copy-out into Y[dst_row:+4, ...]; each part can
// be replaced: the map's value, Y's dtype and rows, what comes after the copy.
struct Rows {
  std::string cols = "128", mark, after, value = "exp(x[i, j])", y_type = "float32", y_rows = "M", dst_row = "bx * 4";
  std::string text() const {
    return "kernel k(X: global float32[M, " + cols + "], Y: global " + y_type + "[" + y_rows + ", " + cols +
           "] out)\n    grid(bx = ceildiv(M, 4)) {\n  alloc x: fragment float32[4, " + cols +
           "]\n  copy X[bx * 4:+4, 0:+" + cols + "] -> x\n  " + mark + "for i in parallel(0, 4) {\n    for j in parallel(0, " +
           cols + ") {\n      x[i, j] = " + value + "\n    }\n  }\n  copy x -> Y[" + dst_row + ":+4, 0:+" + cols + "]\n" +
           after + "}\n";
  }
};
std::string exp_rows(const std::string& cols, const std::string& mark, const std::string& after = "") {
  Rows r;
  r.cols = cols, r.mark = mark, r.after = after;
  return r.text();
}

TEST(FuseMapCopyOut, MapThenCopyOutIsAnnotated) {
  EXPECT_EQ(run(exp_rows("128", "")), exp_rows("128", "@fuse_copy_out "));
}

// A copy-out converting into a bfloat16 / float16 tensor is fused too (codegen converts each chunk
// as the copy converts; session 28).
TEST(FuseMapCopyOut, ConvertingCopyOutIsAnnotated) {
  for (const char* dt : {"bfloat16", "float16"}) {
    Rows plain, marked;
    plain.y_type = marked.y_type = dt;
    marked.mark = "@fuse_copy_out ";
    EXPECT_EQ(run(plain.text()), marked.text()) << dt;
  }
}

TEST(FuseMapCopyOut, LeavesOtherPairsAlone) {
  const std::string cases[] = {
      // rows shorter than one chunk (64 elements)
      exp_rows("32", ""),
      // the tile is read after the copy
      exp_rows("128", "", "  copy x -> Y[bx * 4:+4, 0:+128]\n"),
      // the map reads the destination tensor
      [] { Rows r; r.value = "x[i, j] + Y[bx * 4 + i, j]"; return r.text(); }(),
      // a destination dtype other than float32 / bfloat16 / float16 (float16 / bfloat16: fused, below)
      [] { Rows r; r.y_type = "float64"; return r.text(); }(),
      [] { Rows r; r.y_type = "int32"; return r.text(); }(),
      // a destination region provably outside the tensor: always the tail path
      [] { Rows r; r.y_rows = "6"; r.dst_row = "4"; return r.text(); }(),
      // in a loop, with a tile not local to its iterations (the fill before the loop flows in)
      R"(kernel k(Y: global float32[8, 128] out)
    grid(bx = 1) {
  alloc x: fragment float32[4, 128]
  fill x = 1.0
  for r in serial(0, 2) {
    for i in parallel(0, 4) {
      for j in parallel(0, 128) {
        x[i, j] = x[i, j] * 2.0
      }
    }
    copy x -> Y[r * 4:+4, 0:+128]
  }
}
)",
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

// A tile that each iteration overwrites first holds no value across iterations: the pair in the
// loop body is fused as at the top level.
TEST(FuseMapCopyOut, IterationLocalTileInLoop) {
  auto text = [](const std::string& pre) {
    return R"(kernel k(X: global float32[8, 128], Y: global float32[8, 128] out)
    grid(bx = 1) {
  alloc x: fragment float32[4, 128]
  for r in serial(0, 2) {
    copy X[r * 4:+4, 0:+128] -> x
    )" + pre + R"(for i in parallel(0, 4) {
      for j in parallel(0, 128) {
        x[i, j] = exp(x[i, j])
      }
    }
    copy x -> Y[r * 4:+4, 0:+128]
  }
}
)";
  };
  EXPECT_EQ(run(text("")), text("@fuse_copy_out "));
}

// The annotation's text form parses back; the verifier checks its name, place and arguments.
TEST(Annotations, RoundTripAndVerify) {
  std::string fused = exp_rows("128", "@fuse_copy_out ");
  ir::Kernel k = ir::parse_kernel(fused, "k.tw");
  EXPECT_EQ(ir::print(k), fused);
  EXPECT_NO_THROW(ir::verify(k));
  auto error_of = [](const std::string& text) {
    try {
      ir::verify(ir::parse_kernel(text, "k.tw"));
    } catch (const ir::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(exp_rows("128", "@fuse_everything ")).find("unknown annotation @fuse_everything"), std::string::npos);
  EXPECT_NE(error_of(exp_rows("128", "@fuse_copy_out(3) ")).find("has 1 argument(s), expected 0"), std::string::npos);
  EXPECT_NE(error_of(exp_rows("128", "@fuse_reduce(1) ")).find("must be followed by a reduce"), std::string::npos);
  std::string on_copy = exp_rows("128", "");
  on_copy.replace(on_copy.find("copy x"), 0, "@fuse_copy_out ");
  EXPECT_NE(error_of(on_copy).find("@fuse_copy_out on a copy; it belongs on a loop"), std::string::npos);
  // the error points at the annotated statement
  EXPECT_NE(error_of(exp_rows("128", "@fuse_everything ")).find("k.tw:5"), std::string::npos);
}

// codegen_cpu carries out what an annotation says; one on a statement it cannot mean (written by
// hand: the verifier checks only its place) is an error at that statement, not a crash.
TEST(Annotations, CodegenRejectsAnnotationItCannotCarryOut) {
  Rows r;
  r.mark = "@fuse_copy_out ";
  r.value = "x[0, j]";  // reads another row of x: not a full-tile map
  ir::Kernel k = ir::parse_kernel(r.text(), "k.tw");
  EXPECT_NO_THROW(ir::verify(k));
  try {
    codegen_cpu(k);
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("@fuse_copy_out on a statement that is not a full-tile map"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.span().line, 5);
  }
}

}  // namespace
}  // namespace tw::cpu
