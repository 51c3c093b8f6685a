// expand_int8_fill: int8/uint8 fills as maps (see expand_int8_fill.h).
#include "target/ascend/expand_int8_fill.h"

#include "target/ascend/vector_util.h"

namespace tw::ascend {

ir::Kernel expand_int8_fill(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    if (s->kind != ir::StmtKind::Fill) return std::nullopt;
    auto* n = as<ir::FillNode>(s);
    ir::DType t = n->dst.buffer->dtype;
    if (n->dst.buffer->scope != ir::Scope::UB || !vec::small_int(t)) return std::nullopt;
    auto m = vec::region_map(n->dst, n->dst, s->span, [&](ir::Expr) { return ir::cast(n->value, t, s->span); }, names);
    if (!m) return std::nullopt;
    return std::vector<ir::Stmt>{*m};
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
