// drop_gemm_bands: T.gemm without its band (see drop_gemm_bands.h).
#include "target/ascend/drop_gemm_bands.h"

#include "target/ascend/vector_util.h"

namespace tw::ascend {

ir::Kernel drop_gemm_bands(const ir::Kernel& kernel) {
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    if (s->kind != ir::StmtKind::Gemm || ir::as<ir::GemmNode>(s)->band == ir::GemmBand::none) return std::nullopt;
    auto* n = ir::as<ir::GemmNode>(s);
    return std::vector<ir::Stmt>{std::make_shared<ir::GemmNode>(n->a, n->b, n->c, n->trans_a, n->trans_b, n->clear, n->span)};
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
