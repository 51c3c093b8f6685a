// prefetch_gathers: which gathered copies are prefetched one loop iteration ahead (before/after
// Tile IR text), and the next-iteration statement codegen_cpu emits for the loop.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/prefetch_gathers.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(prefetch_gathers(ir::parse_kernel(text, "k.tw"))); }

// what next_page_slices adds to a 32-bit copy's loop variable (codegen passes the C text
// tw_cpu::simd::kSliceLead32)
const ir::Expr kLead = ir::var("lead", ir::kIndexType);

// paged decode's walk over a sequence's pages, `steps` pages per step: the page number is read
// from the block table T; `mark` is the annotation of the K copy, `index` the table's index,
// `inner` the extent of the per-step loop.
std::string pages(const std::string& mark, const std::string& index = "j * 4 + jj", const std::string& inner = "4",
                  const std::string& tile_rows = "64", const std::string& table = "T") {
  return R"(kernel k(K: global float32[100, 16, 2, 128], T: global int32[2, 64], L: global int32[2], O: global float32[2, 2, 128] out)
    grid(h = 2, b = 2) {
  alloc k: shared float32[)" + tile_rows + R"(, 128]
  alloc t: fragment int32[64]
  alloc o: fragment float32[1, 128]
  copy T[b:+1, 0:+64] -> t
  let n: int32 = L[b]
  for j in serial(0, ceildiv(n, 64)) {
    for jj in serial(0, )" + inner + R"() {
      if j * 4 + jj < ceildiv(n, 16) {
        let page: int32 = )" + table + "[" + (table == "T" ? "b, " : "") + index + R"(]
        )" + mark + R"(copy K[page:+1, 0:+16, h:+1, 0:+128] -> k[jj * 16:+16, 0:+128]
      }
    }
    reduce sum k -> o axis=0 clear=false
  }
  copy o -> O[b:+1, h:+1, 0:+128]
}
)";
}

// The outermost loop the page depends on whose body fits the budget: the step (two loops out).
TEST(PrefetchGathers, PageCopiesOfAStepPrefetchedForTheNextStep) {
  EXPECT_EQ(run(pages("")), pages("@prefetch_next(2) "));
}

// 64 pages of 8 KiB per step (512 KiB) are over the budget: the next page of the same step
// instead (one loop out).
TEST(PrefetchGathers, OverBudgetStepFallsBackToTheInnerLoop) {
  EXPECT_EQ(run(pages("", "j * 4 + jj", "64", "1024")), pages("@prefetch_next(1) ", "j * 4 + jj", "64", "1024"));
}

// The index depends on the step only: the inner loop is not a candidate.
TEST(PrefetchGathers, IndexOfTheStepOnly) {
  EXPECT_EQ(run(pages("", "j")), pages("@prefetch_next(2) ", "j"));
}

TEST(PrefetchGathers, LeavesOtherCopiesAlone) {
  const std::string cases[] = {
      // the index is read from a tile (it may change between iterations): no
      pages("", "j * 4 + jj", "4", "64", "t"),
      // an affine copy (no value read from memory in the address): the hardware prefetchers follow it
      R"(kernel k(X: global float32[64, 128], O: global float32[128] out)
    grid(bx = 1) {
  alloc x: shared float32[16, 128]
  alloc o: fragment float32[128]
  for j in serial(0, 4) {
    copy X[j * 16:+16, 0:+128] -> x
    reduce sum x -> o axis=0 clear=false
  }
  copy o -> O[0:+128]
}
)",
      // an index from a tensor the kernel writes
      R"(kernel k(X: global float32[64, 128], I: global int32[4], O: global float32[128] out)
    grid(bx = 1) {
  alloc x: shared float32[1, 128]
  alloc o: fragment float32[128]
  for j in serial(0, 4) {
    let r: int32 = I[j]
    copy X[r:+1, 0:+128] -> x
    reduce sum x -> o axis=0 clear=false
    I[j] = 0
  }
  copy o -> O[0:+128]
}
)",
  };
  for (const auto& c : cases) EXPECT_EQ(run(c), ir::print(ir::parse_kernel(c, "k.tw"))) << c;
}

// A gathered block of whole rows: masked prefill's key loop over a compacted list of key blocks
// (`kb = I[t]`), `rows` rows of `dim` floats of one head, one contiguous run of rows * dim * 4
// bytes in K.
std::string blocks(const std::string& mark, int rows, int dim, int heads = 2) {
  const std::string r = std::to_string(rows), d = std::to_string(dim);
  return R"(kernel k(K: global float32[)" + std::to_string(heads) + ", 2048, " + d +
         R"(], I: global int32[32], O: global float32[2, )" + d + R"(] out)
    grid(h = 2) {
  alloc k: shared float32[)" + r + ", " + d + R"(]
  alloc o: fragment float32[)" + d + R"(]
  for t in serial(0, 32) {
    let kb: int32 = I[t]
    )" + mark + "copy K[h:+1, kb * " + r + ":+" + r + ", 0:+" + d + R"(] -> k
    reduce sum k -> o axis=0 clear=false
  }
  copy o -> O[h:+1, 0:+)" + d + R"(]
}
)";
}

// kStreamedRun: a source of at least 4 KiB in one contiguous run is left to the hardware
// prefetchers (64 rows x 512 B = 32 KiB; 8 rows x 512 B = 4 KiB); a shorter run is prefetched
// (4 rows x 512 B = 2 KiB; one float), and so is a large block whose rows are apart (the BSHD
// layout: 64 rows of 512 B, one head's row in every 1 KiB; paged decode's pages above likewise).
TEST(PrefetchGathers, LongContiguousRunsLeftToTheHardware) {
  EXPECT_EQ(run(blocks("", 64, 128)), blocks("", 64, 128));
  EXPECT_EQ(run(blocks("", 8, 128)), blocks("", 8, 128));
  EXPECT_EQ(run(blocks("", 4, 128)), blocks("@prefetch_next(1) ", 4, 128));
  EXPECT_EQ(run(blocks("", 1, 1)), blocks("@prefetch_next(1) ", 1, 1));
  // one head: K[0:+1, ...] covers the head dim whole; the run is still the block's rows
  EXPECT_EQ(run(blocks("", 64, 128, 1)), blocks("", 64, 128, 1));
  const std::string bshd = R"(kernel k(K: global float32[2048, 2, 128], I: global int32[32], O: global float32[2, 128] out)
    grid(h = 2) {
  alloc k: shared float32[64, 128]
  alloc o: fragment float32[128]
  for t in serial(0, 32) {
    let kb: int32 = I[t]
    @copy K[kb * 64:+64, h:+1, 0:+128] -> k
    reduce sum k -> o axis=0 clear=false
  }
  copy o -> O[h:+1, 0:+128]
}
)";
  auto with = [&](const std::string& mark) { return bshd.substr(0, bshd.find('@')) + mark + bshd.substr(bshd.find('@') + 1); };
  EXPECT_EQ(run(with("")), with("@prefetch_next(1) "));
}

// A run-time extent (masked prefill's V block: the valid keys of a listed block) counts at its
// bound, and the next iteration's prefetch covers the bound's rows (a prefetch reads nothing into
// the program; the copy itself stops at the count).
TEST(PrefetchGathers, RunTimeExtentCountsAtItsBound) {
  const std::string text = R"(kernel k(K: global float32[2048, 2, 128], I: global int32[32], L: global int32[1], O: global float32[2, 128] out)
    grid(h = 2) {
  alloc k: shared float32[64, 128]
  alloc o: fragment float32[128]
  let n: int32 = L[0]
  for t in serial(0, 32) {
    let kb: int32 = I[t]
    let cols: int32 = min(64, n - kb * 64)
    @copy K[kb * 64:+min(64, cols), h:+1, 0:+128] -> k
    reduce sum k -> o axis=0 clear=false
  }
  copy o -> O[h:+1, 0:+128]
}
)";
  auto with = [&](const std::string& mark) { return text.substr(0, text.find('@')) + mark + text.substr(text.find('@') + 1); };
  ir::Kernel k = prefetch_gathers(ir::parse_kernel(with(""), "k.tw"));
  EXPECT_EQ(ir::print(k), with("@prefetch_next(1) "));
  const ir::ForNode* loop = nullptr;
  for (const auto& s : ir::stmts_of(k->body))
    if (s->kind == ir::StmtKind::For) loop = static_cast<const ir::ForNode*>(s.get());
  ASSERT_NE(loop, nullptr);
  ir::Stmt next = next_iteration_prefetches(*loop);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(ir::print(next), R"(if t + 1 < 32 {
  let kb_nx: int32 = I[t + 1]
  @prefetch_next(1) copy K[kb_nx * 64:+64, h:+1, 0:+128] -> k
}
)");
}

// What codegen_cpu emits at the top of the step loop's body: the next step's pages (j + 1), the
// if and the let the copy needs (fresh variables), guarded by the loop's end.
TEST(PrefetchGathers, NextIterationStatement) {
  ir::Kernel k = prefetch_gathers(ir::parse_kernel(pages(""), "k.tw"));
  const ir::ForNode* step = nullptr;
  for (const auto& s : ir::stmts_of(k->body))
    if (s->kind == ir::StmtKind::For) step = static_cast<const ir::ForNode*>(s.get());
  ASSERT_NE(step, nullptr);
  ir::Stmt next = next_iteration_prefetches(*step);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(ir::print(next), R"(if j + 1 < ceildiv(n, 64) {
  for jj_nx in serial(0, 4) {
    if (j + 1) * 4 + jj_nx < ceildiv(n, 16) {
      let page_nx: int32 = T[b, (j + 1) * 4 + jj_nx]
      @prefetch_next(2) copy K[page_nx:+1, 0:+16, h:+1, 0:+128] -> k[jj_nx * 16:+16, 0:+128]
    }
  }
}
)");
  // the inner loop has no copy of its own to prefetch
  const auto* inner = static_cast<const ir::ForNode*>(ir::stmts_of(step->body)[0].get());
  EXPECT_EQ(next_iteration_prefetches(*inner), nullptr);
}

// paged_decode_pages' key loop: a whole page (16 x 1024 of `dt`, read in place: @gemm_view) per
// iteration, read by one gemm per kv head h of a `width`-column strip; `mark` is the copy's
// annotation, `gemm` where the gemms go ("in": after the copy, "out": after the loops too).
std::string page_strips(const std::string& mark, const std::string& dt = "bfloat16", const std::string& width = "128",
                        const std::string& loop = "serial", const std::string& blocks = "100") {
  return R"(kernel k(Q: global )" + dt + R"([2, 32, 128], K: global )" + dt + "[" + blocks +
         R"(, 16, 1024], T: global int32[2, 64], L: global int32[2], O: global float32[2, 32, 64] out)
    grid(b = 2) {
  @gemm_view(0) alloc q: shared )" + dt + R"([32, 128]
  @gemm_view(0) alloc k: shared )" + dt + R"([16, 1024]
  alloc s: fragment float32[32, 64]
  copy Q[b:+1, 0:+32, 0:+128] -> q
  let n: int32 = L[b]
  let pages: int32 = ceildiv(n, 16)
  for j in serial(0, ceildiv(pages, 4)) {
    for jj in )" + loop + R"((0, 4) {
      if j * 4 + jj < pages {
        let page: int32 = T[b, j * 4 + jj]
        )" + mark + R"(copy K[page:+1, 0:+16, 0:+1024] -> k
        for h in serial(0, 8) {
          gemm q[h * 4:+4, 0:+128], k[0:+16, h * 128:+)" + width + R"(] -> s[h * 4:+4, jj * 16:+16] trans_a=false trans_b=true clear=true
        }
      }
    }
    copy s -> O[b:+1, 0:+32, 0:+64]
  }
}
)";
}

// A 32 KiB page (a contiguous run: no @prefetch_next) read in 256-byte strips by 8 gemms of a
// 3.2 MiB cache (6.4 MiB fp32): @prefetch_slices for 16- and 32-bit dtypes (fp32 since session 18:
// the strip passed to the call and prefetched over its loops); not for a gemm reading the whole
// tile (masked prefill's key block), a parallel page loop, or a cache of at most kL2ResidentTensor
// (32 pages: 1 MiB, in L2 once read).
TEST(PrefetchGathers, PageStripsReadInPlacePrefetchedPerCall) {
  EXPECT_EQ(run(page_strips("")), page_strips("@prefetch_slices(1) "));
  EXPECT_EQ(run(page_strips("", "float16")), page_strips("@prefetch_slices(1) ", "float16"));
  // fp32: the target's lead (kTargetLead: tw_cpu::simd::kSliceLead32 pages ahead)
  EXPECT_EQ(run(page_strips("", "float32")), page_strips("@prefetch_slices(0) ", "float32"));
  // the whole page per gemm (one kv head of 1024 columns): left to the hardware
  const std::string whole = page_strips("", "bfloat16", "1024");
  EXPECT_EQ(run(whole), whole);
  // the page loop is parallel: no next iteration
  const std::string par = page_strips("", "bfloat16", "128", "parallel");
  EXPECT_EQ(run(par), par);
  const std::string small = page_strips("", "bfloat16", "128", "serial", "32");
  EXPECT_EQ(run(small), small);
  EXPECT_EQ(run(page_strips("", "bfloat16", "128", "serial", "33")), page_strips("@prefetch_slices(1) ", "bfloat16", "128", "serial", "33"));
}

// What codegen_cpu emits at the top of the page loop's body (bf16): the next page (jj + 1, not bounded
// by the loop's extent: the last page of a step reads the first of the next step), the if and
// the let the copy needs, the table read only where its indices lie inside the table.
TEST(PrefetchGathers, NextPageSlicesStatement) {
  ir::Kernel k = prefetch_gathers(ir::parse_kernel(page_strips(""), "k.tw"));
  const ir::ForNode* step = nullptr;
  for (const auto& s : ir::stmts_of(k->body))
    if (s->kind == ir::StmtKind::For) step = static_cast<const ir::ForNode*>(s.get());
  ASSERT_NE(step, nullptr);
  const auto* pages = static_cast<const ir::ForNode*>(ir::stmts_of(step->body)[0].get());
  EXPECT_EQ(next_page_slices(*step, kLead), nullptr);  // the copy is the page loop's
  EXPECT_EQ(next_iteration_prefetches(*pages), nullptr);
  ir::Stmt next = next_page_slices(*pages, kLead);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(ir::print(next), R"(if j * 4 + (jj + 1) < pages {
  if 0 <= b and b < 2 and 0 <= j * 4 + (jj + 1) and j * 4 + (jj + 1) < 64 {
    let page_nx: int32 = T[b, j * 4 + (jj + 1)]
    @prefetch_slices(1) copy K[page_nx:+1, 0:+16, 0:+1024] -> k
  }
}
)");
}

// fp32 pages: the target's lead (the expression passed for it: codegen's tw_cpu::simd::kSliceLead32,
// 4 pages ahead on Zen 4, the next page on Sapphire Rapids), guarded as the next page is.
TEST(PrefetchGathers, NextPageSlicesFp32TargetLead) {
  ir::Kernel k = prefetch_gathers(ir::parse_kernel(page_strips("", "float32"), "k.tw"));
  const ir::ForNode* step = nullptr;
  for (const auto& s : ir::stmts_of(k->body))
    if (s->kind == ir::StmtKind::For) step = static_cast<const ir::ForNode*>(s.get());
  ASSERT_NE(step, nullptr);
  ir::Stmt next = next_page_slices(*static_cast<const ir::ForNode*>(ir::stmts_of(step->body)[0].get()), kLead);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(ir::print(next), R"(if j * 4 + (jj + lead) < pages {
  if 0 <= b and b < 2 and 0 <= j * 4 + (jj + lead) and j * 4 + (jj + lead) < 64 {
    let page_nx: int32 = T[b, j * 4 + (jj + lead)]
    @prefetch_slices(0) copy K[page_nx:+1, 0:+16, 0:+1024] -> k
  }
}
)");
}

// A page index without an if (every iteration reads the table): the guard on the table read is
// all that keeps the last iteration's next index (past the table) from being read; an index
// read from the table twice (a page number that indexes another table) is guarded inside out.
TEST(PrefetchGathers, NextPageSlicesGuardEveryTableRead) {
  const std::string text = R"(kernel k(Q: global bfloat16[32, 128], K: global bfloat16[100, 16, 1024], T: global int32[64], P: global int32[100], O: global float32[32, 16] out)
    grid(b = 1) {
  @gemm_view(0) alloc q: shared bfloat16[32, 128]
  @gemm_view(0) alloc k: shared bfloat16[16, 1024]
  alloc s: fragment float32[32, 16]
  copy Q -> q
  for j in serial(0, 64) {
    let page: int32 = P[T[j]]
    @copy K[page:+1, 0:+16, 0:+1024] -> k
    for h in serial(0, 8) {
      gemm q[h * 4:+4, 0:+128], k[0:+16, h * 128:+128] -> s[h * 4:+4, 0:+16] trans_a=false trans_b=true clear=false
    }
  }
  copy s -> O
}
)";
  auto with = [&](const std::string& mark) {
    return text.substr(0, text.find("@copy")) + mark + text.substr(text.find("@copy") + 1);
  };
  ir::Kernel k = prefetch_gathers(ir::parse_kernel(with(""), "k.tw"));
  EXPECT_EQ(ir::print(k), with("@prefetch_slices(1) "));
  const ir::ForNode* loop = nullptr;
  for (const auto& s : ir::stmts_of(k->body))
    if (s->kind == ir::StmtKind::For) loop = static_cast<const ir::ForNode*>(s.get());
  ASSERT_NE(loop, nullptr);
  ir::Stmt next = next_page_slices(*loop, kLead);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(ir::print(next), R"({
  if 0 <= j + 1 and j + 1 < 64 and 0 <= T[j + 1] and T[j + 1] < 100 {
    let page_nx: int32 = P[T[j + 1]]
    @prefetch_slices(1) copy K[page_nx:+1, 0:+16, 0:+1024] -> k
  }
}
)");
}

}  // namespace
}  // namespace tw::cpu
