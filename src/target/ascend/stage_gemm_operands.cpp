// stage_gemm_operands: gemm operands in global tensors staged through tiles (see stage_gemm_operands.h).
#include "target/ascend/stage_gemm_operands.h"

#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Buffer;
using ir::Expr;
using ir::Region;
using ir::Scope;
using ir::Stmt;

bool global(const Region& r) { return r.buffer->scope == Scope::global; }

class Stager {
 public:
  Stager(const ir::Kernel& k, const target::Target& t) : names_(k), hw_(t.ascend) {}

  std::optional<std::vector<Stmt>> stage(const ir::GemmNode* g, const ir::Span& sp) {
    if (!global(g->a) && !global(g->b)) return std::nullopt;
    // the verifier checked the user's gemm: 2-D regions of constant extents (the others 1; a
    // global tensor's rows may be any dim, BSHD: ir.h gemm_matrix_dims), K equal in A and B, C a
    // fragment of float32 / int32. from_end 2: the matrix's rows, 1: its columns.
    auto mdim = [](const Region& r, size_t from_end) {
      auto [rows, cols] = ir::gemm_matrix_dims(r);
      return from_end == 2 ? rows : cols;
    };
    auto dim = [&](const Region& r, size_t from_end) { return *ir::as_const_int(r.extents[mdim(r, from_end)]); };
    const int64_t ar = dim(g->a, 2), ac = dim(g->a, 1), br = dim(g->b, 2), bc = dim(g->b, 1);
    const int64_t M = g->trans_a ? ac : ar, K = g->trans_a ? ar : ac, N = g->trans_b ? br : bc;
    const ir::DType t = g->a.buffer->dtype;
    const int64_t es = t.bytes();
    const int64_t kg = std::max<int64_t>(16, 32 / es);  // the K fractal (expand_gemm's step unit)

    // the K chunk: all of K when its staged tiles fit kStageBytes, else the largest multiple of
    // kg that fits (dividing K when an operand is a tile, whose chunks cannot be clipped)
    const bool tile_operand = !global(g->a) || !global(g->b);
    const int64_t per_k = ((global(g->a) ? round_up(M, 16) : 0) + (global(g->b) ? round_up(N, 16) : 0)) * es;
    int64_t kc = K;
    if (per_k * K > kStageBytes) {
      const std::string what = "gemm " + ir::print(g->a) + " x " + ir::print(g->b) + " -> " + ir::print(g->c);
      const int64_t most = std::max(kg, kStageBytes / per_k / kg * kg);
      if (2 * per_k * most > hw_.l1_bytes)
        throw ir::Error(what + ": the operands staged from global memory, " + std::to_string(M) + " rows and " +
                            std::to_string(N) + " columns of " + std::string(t.name()) + ", do not fit L1 (" +
                            std::to_string(hw_.l1_bytes / 1024) + " KiB) even in K steps of " + std::to_string(kg),
                        sp, "gemm blocks of at most 256 rows and 256 columns (a loop over them, or the launch grid)");
      kc = most;
      if (tile_operand) {
        while (kc > 0 && K % kc) kc -= kg;
        if (kc <= 0)
          throw ir::Error(what + ": the global operand is staged in K steps of at most " + std::to_string(most) +
                              ", and no multiple of " + std::to_string(kg) + " up to it divides the tile's K of " +
                              std::to_string(K),
                          sp, "copy the global operand into a T.alloc_shared tile yourself, in a K loop over slices of both");
      }
    }
    const int64_t chunks = (K + kc - 1) / kc;
    ir::Var k = chunks > 1 ? names_.var("k", sp) : ir::Var();
    std::vector<Stmt> out;   // allocs (and the clear) before the loop
    std::vector<Stmt> body;  // one chunk

    // an operand in K chunk k: the region with its K dimension (kdim counted from the end) cut
    auto chunk = [&](Region r, size_t kdim) {
      if (!k) return r;
      size_t d = mdim(r, kdim);
      r.starts[d] = simp(ir::binary(BinOp::Add, r.starts[d], ir::binary(BinOp::Mul, k, C(kc), sp), sp));
      Expr left = simp(ir::binary(BinOp::Sub, C(K), ir::binary(BinOp::Mul, k, C(kc), sp), sp));
      r.extents[d] = K % kc == 0 ? C(kc) : ir::binary(BinOp::Min, C(kc), left, sp);
      return r;
    };
    auto operand = [&](const Region& r, int64_t rows, int64_t cols, size_t kdim) {
      Region src = chunk(r, kdim);
      if (!global(r)) return src;
      Buffer tile = ir::buffer(name(r.buffer->name + "_l1"), r.buffer->dtype,
                               {C(kdim == 2 ? std::min(rows, kc) : rows), C(kdim == 1 ? std::min(cols, kc) : cols)},
                               Scope::shared, sp);
      out.push_back(std::make_shared<ir::AllocNode>(tile, sp));
      body.push_back(std::make_shared<ir::CopyNode>(src, ir::full_region(tile), sp));
      return ir::full_region(tile);
    };
    Region a = operand(g->a, ar, ac, g->trans_a ? 2 : 1);
    Region b = operand(g->b, br, bc, g->trans_b ? 1 : 2);
    const Region& c = g->c;
    // chunks accumulate into C, cleared before the loop when the gemm clears it (expand_gemm:
    // the first chunk's Mmad initialises it)
    if (k && g->clear) {
      ir::DType ct = c.buffer->dtype;
      out.push_back(std::make_shared<ir::FillNode>(c, ct.is_float() ? ir::float_imm(0.0, ct, sp) : ir::int_imm(0, ct, sp), sp));
    }
    body.push_back(std::make_shared<ir::GemmNode>(a, b, c, g->trans_a, g->trans_b, g->clear && !k, sp));
    if (k)
      out.push_back(std::make_shared<ir::ForNode>(k, C(0), C(chunks), ir::ForKind::pipelined, 2,
                                                  ir_seq(std::move(body), sp), sp));
    else
      out.insert(out.end(), body.begin(), body.end());
    return out;
  }

 private:
  // base while the kernel does not use it, else base_<i>
  std::string name(const std::string& base) { return names_.var(base, {})->name; }

  vec::Names names_;
  const target::AscendParams& hw_;
};

}  // namespace

ir::Kernel stage_gemm_operands(const ir::Kernel& kernel, const target::Target& target) {
  Stager st(kernel, target);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    if (s->kind != ir::StmtKind::Gemm) return std::nullopt;
    return st.stage(ir::as<ir::GemmNode>(s), s->span);
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
