// Tests of transform::infer_grid: which tile loops become the launch grid.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tilewright/ir.h"
#include "transform/infer_grid.h"
#include "ir/arith.h"

namespace tw {
namespace {

using namespace ir;
using transform::infer_grid;


Expr c(int64_t v) { return int_imm(v); }
Expr add(Expr a, Expr b) { return binary(BinOp::Add, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, std::move(a), std::move(b)); }
Expr cdiv(Expr a, int64_t b) { return binary(BinOp::CeilDiv, std::move(a), c(b)); }
Region reg(Buffer b, std::vector<Expr> starts, std::vector<int64_t> ext) {
  Region r{std::move(b), std::move(starts), {}};
  for (auto e : ext) r.extents.push_back(c(e));
  return r;
}
Stmt seq(std::vector<Stmt> body) { return std::make_shared<SeqNode>(std::move(body), Span{}); }
Stmt loop(Var v, Expr mn, Expr ext, Stmt body, Span s = {}) {
  return std::make_shared<ForNode>(std::move(v), std::move(mn), std::move(ext), ForKind::serial, 0, std::move(body), s);
}
Stmt alloc(Buffer b) { return std::make_shared<AllocNode>(std::move(b), Span{}); }
Stmt copy(Region src, Region dst) { return std::make_shared<CopyNode>(std::move(src), std::move(dst), Span{}); }
Stmt let(Var v, Expr x) { return std::make_shared<LetNode>(std::move(v), std::move(x), Span{}); }
Param in(Buffer b) { return Param{std::move(b), nullptr, false}; }
Param out(Buffer b) { return Param{std::move(b), nullptr, true}; }
Kernel kernel(std::string name, std::vector<Param> params, Stmt body, Span s = {"kern.py", 1, 1}) {
  return std::make_shared<KernelNode>(std::move(name), std::move(params), std::vector<Var>{}, std::vector<Expr>{},
                                      std::move(body), s);
}
std::vector<StmtKind> kinds(const Stmt& s) {
  std::vector<StmtKind> out;
  if (s->kind != StmtKind::Seq) return {s->kind};
  for (const auto& x : as<SeqNode>(s)->body) out.push_back(x->kind);
  return out;
}
std::optional<int64_t> folded(const Expr& e) { return as_const_int(ir::arith::simplify(e)); }

// The seed's matmul (shared/seed, section 3.3) as the front end builds it from tile loops.
struct Matmul {
  Var M = var("M"), N = var("N"), K = var("K");
  Buffer A = buffer("A", DTypeCode::f32, {M, K}, Scope::global);
  Buffer B = buffer("B", DTypeCode::f32, {K, N}, Scope::global);
  Buffer C = buffer("C", DTypeCode::f32, {M, N}, Scope::global);
  Var by = var("by"), bx = var("bx"), k = var("k");
  Expr ext_by = cdiv(M, 128), ext_bx = cdiv(N, 128);
  Kernel kern;
  Matmul() {
    Buffer acc = buffer("acc", DTypeCode::f32, {c(128), c(128)}, Scope::fragment);
    Buffer a = buffer("a", DTypeCode::f32, {c(128), c(64)}, Scope::shared);
    Buffer b = buffer("b", DTypeCode::f32, {c(64), c(128)}, Scope::shared);
    Stmt kloop = loop(k, c(0), cdiv(K, 64),
                      seq({alloc(a), copy(reg(A, {mul(by, c(128)), mul(k, c(64))}, {128, 64}), reg(a, {c(0), c(0)}, {128, 64})),
                           alloc(b), copy(reg(B, {mul(k, c(64)), mul(bx, c(128))}, {64, 128}), reg(b, {c(0), c(0)}, {64, 128})),
                           std::make_shared<GemmNode>(full_region(a), full_region(b), full_region(acc), false, false,
                                                      false, Span{})}));
    Stmt block = seq({alloc(acc), std::make_shared<FillNode>(full_region(acc), float_imm(0.0), Span{}), kloop,
                      copy(full_region(acc), reg(C, {mul(by, c(128)), mul(bx, c(128))}, {128, 128}))});
    kern = kernel("matmul", {in(A), in(B), out(C)}, loop(by, c(0), ext_by, loop(bx, c(0), ext_bx, block)));
  }
};

TEST(InferGrid, MatmulTileLoopsBecomeA2DGrid) {
  Matmul m;
  Kernel r = infer_grid(m.kern);
  ASSERT_EQ(r->block_vars.size(), 2u);
  EXPECT_EQ(r->block_vars[0], m.bx);  // innermost loop first, as CUDA's blockIdx.x
  EXPECT_EQ(r->block_vars[1], m.by);
  EXPECT_EQ(r->grid[0], m.ext_bx);
  EXPECT_EQ(r->grid[1], m.ext_by);
  EXPECT_EQ(kinds(r->body),
            (std::vector<StmtKind>{StmtKind::Alloc, StmtKind::Fill, StmtKind::For, StmtKind::Copy}));
  auto* k = as<ForNode>(as<SeqNode>(r->body)->body[2]);
  EXPECT_EQ(k->var, m.k);  // the reduction loop stays serial
  EXPECT_EQ(k->for_kind, ForKind::serial);

  // The same change as text: the two outer loops become the grid, the k loop stays.
  EXPECT_EQ(print(m.kern),
            "kernel matmul(A: global float32[M, K], B: global float32[K, N], C: global float32[M, N] out) {\n"
            "  for by in serial(0, ceildiv(M, 128)) {\n"
            "    for bx in serial(0, ceildiv(N, 128)) {\n"
            "      alloc acc: fragment float32[128, 128]\n"
            "      fill acc = 0.0\n"
            "      for k in serial(0, ceildiv(K, 64)) {\n"
            "        alloc a: shared float32[128, 64]\n"
            "        copy A[by * 128:+128, k * 64:+64] -> a\n"
            "        alloc b: shared float32[64, 128]\n"
            "        copy B[k * 64:+64, bx * 128:+128] -> b\n"
            "        gemm a, b -> acc trans_a=false trans_b=false clear=false\n"
            "      }\n"
            "      copy acc -> C[by * 128:+128, bx * 128:+128]\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(print(r),
            "kernel matmul(A: global float32[M, K], B: global float32[K, N], C: global float32[M, N] out)\n"
            "    grid(bx = ceildiv(N, 128), by = ceildiv(M, 128)) {\n"
            "  alloc acc: fragment float32[128, 128]\n"
            "  fill acc = 0.0\n"
            "  for k in serial(0, ceildiv(K, 64)) {\n"
            "    alloc a: shared float32[128, 64]\n"
            "    copy A[by * 128:+128, k * 64:+64] -> a\n"
            "    alloc b: shared float32[64, 128]\n"
            "    copy B[k * 64:+64, bx * 128:+128] -> b\n"
            "    gemm a, b -> acc trans_a=false trans_b=false clear=false\n"
            "  }\n"
            "  copy acc -> C[by * 128:+128, bx * 128:+128]\n"
            "}\n");
  // Idempotent: a kernel with a grid is left alone.
  EXPECT_EQ(infer_grid(r), r);
}

TEST(InferGrid, RowsKernelGets1DGrid) {
  Var n = var("n"), i = var("i");
  Buffer X = buffer("X", DTypeCode::f32, {n}, Scope::global);
  Buffer Y = buffer("Y", DTypeCode::f32, {n}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(256)}, Scope::shared);
  Kernel k = kernel("rows", {in(X), out(Y)},
                    loop(i, c(0), cdiv(n, 256),
                         seq({alloc(t), copy(reg(X, {mul(i, c(256))}, {256}), reg(t, {c(0)}, {256})),
                              copy(reg(t, {c(0)}, {256}), reg(Y, {mul(i, c(256))}, {256}))})));
  Kernel r = infer_grid(k);
  ASSERT_EQ(r->block_vars.size(), 1u);
  EXPECT_EQ(r->block_vars[0], i);
  EXPECT_EQ(print(r->grid[0]), print(cdiv(n, 256)));
  EXPECT_EQ(kinds(r->body), (std::vector<StmtKind>{StmtKind::Alloc, StmtKind::Copy, StmtKind::Copy}));
}

TEST(InferGrid, NonZeroLoopMinIsFoldedIntoTheBody) {
  Var i = var("i");
  Buffer Y = buffer("Y", DTypeCode::f32, {c(1024)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64)}, Scope::fragment);
  Kernel k = kernel("tail", {out(Y)},
                    loop(i, c(2), c(4), seq({alloc(t), copy(reg(t, {c(0)}, {64}), reg(Y, {mul(i, c(64))}, {64}))})));
  Kernel r = infer_grid(k);
  ASSERT_EQ(r->block_vars.size(), 1u);
  EXPECT_EQ(r->block_vars[0], i);
  EXPECT_EQ(folded(r->grid[0]), 4);
  auto* cp = as<CopyNode>(as<SeqNode>(r->body)->body[1]);
  // i*64 became (i + 2)*64: block i runs what iteration i + 2 did.
  EXPECT_EQ(print(cp->dst.starts[0]), print(mul(add(i, c(2)), c(64))));
  EXPECT_EQ(print(r),
            "kernel tail(Y: global float32[1024] out)\n"
            "    grid(i = 4) {\n"
            "  alloc t: fragment float32[64]\n"
            "  copy t -> Y[(i + 2) * 64:+64]\n"
            "}\n");
}

TEST(InferGrid, LetsBetweenGridLoopsMoveToTheBody) {
  Var M = var("M"), by = var("by"), bx = var("bx"), row = var("row");
  Buffer O = buffer("O", DTypeCode::f32, {M, c(512)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(32), c(128)}, Scope::fragment);
  Kernel k = kernel("lets", {out(O)},
                    loop(by, c(0), cdiv(M, 32),
                         seq({let(row, mul(by, c(32))),
                              loop(bx, c(0), c(4),
                                   seq({alloc(t), copy(full_region(t), reg(O, {row, mul(bx, c(128))}, {32, 128}))}))})));
  Kernel r = infer_grid(k);
  ASSERT_EQ(r->block_vars.size(), 2u);
  EXPECT_EQ(r->block_vars[0], bx);
  EXPECT_EQ(r->block_vars[1], by);
  EXPECT_EQ(folded(r->grid[0]), 4);
  EXPECT_EQ(kinds(r->body), (std::vector<StmtKind>{StmtKind::Let, StmtKind::Alloc, StmtKind::Copy}));
}

TEST(InferGrid, FourDeepNestGivesAtMostThreeGridDims) {
  Var a = var("a"), b = var("b"), cc = var("cc"), d = var("d");
  Buffer O = buffer("O", DTypeCode::f32, {c(8), c(8), c(8), c(8)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(2), c(2), c(2), c(2)}, Scope::fragment);
  Stmt body = seq({alloc(t), copy(full_region(t), reg(O, {mul(a, c(2)), mul(b, c(2)), mul(cc, c(2)), mul(d, c(2))},
                                                      {2, 2, 2, 2}))});
  Kernel k = kernel("deep", {out(O)},
                    loop(a, c(0), c(4), loop(b, c(0), c(4), loop(cc, c(0), c(4), loop(d, c(0), c(4), body)))));
  Kernel r = infer_grid(k);
  ASSERT_EQ(r->block_vars.size(), 3u);
  EXPECT_EQ(r->block_vars[0], cc);
  EXPECT_EQ(r->block_vars[1], b);
  EXPECT_EQ(r->block_vars[2], a);
  for (const auto& g : r->grid) EXPECT_EQ(folded(g), 4);
  ASSERT_EQ(kinds(r->body), (std::vector<StmtKind>{StmtKind::For}));
  ASSERT_EQ(r->body->kind, StmtKind::For);  // a kernel body of one statement is that statement
  EXPECT_EQ(as<ForNode>(r->body)->var, d);
}

TEST(InferGrid, InnerLoopWritingTheSameTileStaysSerial) {
  // for by: for k: C[by*64 : +64, 0 : +64] += ...  (k carries a reduction into the output)
  Var by = var("by"), k = var("k");
  Buffer X = buffer("X", DTypeCode::f32, {c(256), c(256)}, Scope::global);
  Buffer C = buffer("C", DTypeCode::f32, {c(256), c(64)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64), c(64)}, Scope::shared);
  Buffer w = buffer("w", DTypeCode::f32, {c(64), c(64)}, Scope::shared);
  Stmt body = seq({alloc(t), alloc(w), copy(reg(X, {mul(by, c(64)), mul(k, c(64))}, {64, 64}), full_region(t)),
                   std::make_shared<FillNode>(full_region(w), float_imm(1.0), Span{}),
                   std::make_shared<GemmNode>(full_region(t), full_region(w), reg(C, {mul(by, c(64)), c(0)}, {64, 64}),
                                              false, false, false, Span{})});
  Kernel kern = kernel("acc", {in(X), out(C)}, loop(by, c(0), c(4), loop(k, c(0), c(4), body)));
  Kernel r = infer_grid(kern);
  ASSERT_EQ(r->block_vars.size(), 1u);
  EXPECT_EQ(r->block_vars[0], by);
  ASSERT_EQ(kinds(r->body), (std::vector<StmtKind>{StmtKind::For}));
}

TEST(InferGrid, ElementStoresWithAnInnerLoopCoverOneTilePerIteration) {
  // for i: for j in 0..64: Y[i*64 + j] = X[i*64 + j]   -> both are grid loops
  Var n = var("n"), i = var("i"), j = var("j");
  Buffer X = buffer("X", DTypeCode::f32, {n}, Scope::global);
  Buffer Y = buffer("Y", DTypeCode::f32, {n}, Scope::global);
  Expr idx = add(mul(i, c(64)), j);
  Stmt st = std::make_shared<StoreNode>(Y, std::vector<Expr>{idx}, load(X, {idx}), Span{});
  Kernel r = infer_grid(kernel("ew", {in(X), out(Y)}, loop(i, c(0), cdiv(n, 64), loop(j, c(0), c(64), st))));
  ASSERT_EQ(r->block_vars.size(), 2u);
  EXPECT_EQ(r->block_vars[0], j);
  EXPECT_EQ(r->block_vars[1], i);

  // With a stride of 32 the 64 elements of one iteration overlap the next one's.
  Expr idx32 = add(mul(i, c(32)), j);
  Stmt st32 = std::make_shared<StoreNode>(Y, std::vector<Expr>{idx32}, float_imm(1.0), Span{});
  Kernel bad = kernel("ew", {out(Y)}, loop(i, c(0), c(8), loop(j, c(0), c(64), st32), Span{"kern.py", 3, 5}));
  try {
    infer_grid(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "loop 'i' cannot be a grid loop: iterations write overlapping tiles of 'Y' "
              "(start i*32 + j advances by 32 but one iteration covers 64 elements)");
  }
}

TEST(InferGrid, OverlappingTilesAreAnErrorAtTheLoop) {
  Var i = var("i");
  Buffer O = buffer("out", DTypeCode::f32, {c(1024), c(128)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(128), c(128)}, Scope::fragment);
  Kernel k = kernel("ovl", {out(O)},
                    loop(i, c(0), c(8), seq({alloc(t), copy(full_region(t), reg(O, {mul(i, c(64)), c(0)}, {128, 128}))}),
                         Span{"kern.py", 7, 5}));
  try {
    infer_grid(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "loop 'i' cannot be a grid loop: iterations write overlapping tiles of 'out' "
              "(row start i*64 advances by 64 but the tile is 128 rows tall)");
    EXPECT_EQ(e.hint(), "make the tile stride equal to the tile size, or move this loop inside the block");
    EXPECT_EQ(e.span().line, 7);
    EXPECT_EQ(e.span().file, "kern.py");
    EXPECT_NE(std::string(e.what()).find("kern.py:7:5: error: loop 'i'"), std::string::npos) << e.what();
  }
}

TEST(InferGrid, OutermostLoopWritingTheSameTileIsAnError) {
  Var k = var("k");
  Buffer O = buffer("out", DTypeCode::f32, {c(64)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64)}, Scope::fragment);
  Kernel kern = kernel("same", {out(O)},
                       loop(k, c(0), c(8), seq({alloc(t), copy(full_region(t), reg(O, {c(0)}, {64}))}),
                            Span{"kern.py", 4, 3}));
  try {
    infer_grid(kern);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "loop 'k' cannot be a grid loop: iterations write overlapping tiles of 'out' "
              "(no start of the tile depends on 'k': every iteration writes the same tile)");
    EXPECT_EQ(e.span().line, 4);
  }
}

TEST(InferGrid, ReadingAnotherIterationsTileIsAnError) {
  // for i: t = X[i*64 + 64 : +64]; X[i*64 : +64] = t   (a shift in place: iterations race)
  Var i = var("i");
  Buffer X = buffer("X", DTypeCode::f32, {c(1024)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64)}, Scope::shared);
  Kernel k = kernel("shift", {out(X)},
                    loop(i, c(0), c(15),
                         seq({alloc(t), copy(reg(X, {add(mul(i, c(64)), c(64))}, {64}), full_region(t)),
                              copy(full_region(t), reg(X, {mul(i, c(64))}, {64}))}),
                         Span{"kern.py", 9, 5}));
  try {
    infer_grid(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "loop 'i' cannot be a grid loop: an iteration reads a tile of 'X' that other iterations write "
              "(reads X[i*64 + 64 : +64] but writes X[i*64 : +64])");
    EXPECT_EQ(e.span().line, 9);
    EXPECT_NE(e.hint().find("same tile of 'X'"), std::string::npos);
  }

  // Reading back the tile the same iteration writes is fine (an in-place update).
  Kernel ok = kernel("inplace", {out(X)},
                     loop(i, c(0), c(16),
                          seq({alloc(t), copy(reg(X, {mul(i, c(64))}, {64}), full_region(t)),
                               copy(full_region(t), reg(X, {mul(i, c(64))}, {64}))})));
  Kernel r = infer_grid(ok);
  ASSERT_EQ(r->block_vars.size(), 1u);
  EXPECT_EQ(r->block_vars[0], i);
}

TEST(InferGrid, KernelWithAGridIsUnchanged) {
  Var bx = var("bx");
  Buffer Y = buffer("Y", DTypeCode::f32, {c(256)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64)}, Scope::fragment);
  Kernel k = std::make_shared<KernelNode>(
      "explicit", std::vector<Param>{out(Y)}, std::vector<Var>{bx}, std::vector<Expr>{c(4)},
      seq({alloc(t), copy(full_region(t), reg(Y, {mul(bx, c(64))}, {64}))}), Span{});
  EXPECT_EQ(infer_grid(k), k);
}

TEST(InferGrid, NoLoopsGivesASingleBlock) {
  Buffer Y = buffer("Y", DTypeCode::f32, {c(64)}, Scope::global);
  Buffer t = buffer("t", DTypeCode::f32, {c(64)}, Scope::fragment);
  Kernel k = kernel("one", {out(Y)},
                    seq({alloc(t), std::make_shared<FillNode>(full_region(t), float_imm(1.0), Span{}),
                         copy(full_region(t), full_region(Y))}));
  Kernel r = infer_grid(k);
  ASSERT_EQ(r->block_vars.size(), 1u);
  EXPECT_EQ(r->block_vars[0]->name, "bx");
  EXPECT_EQ(folded(r->grid[0]), 1);
  EXPECT_EQ(r->body, k->body);
  std::string after = print(r);
  EXPECT_NE(after.find("bx"), std::string::npos) << after;
}

}  // namespace
}  // namespace tw
