// split_window_copies (see split_window_copies.h).
#include "target/cpu/split_window_copies.h"

#include <optional>
#include <vector>

#include "ir/arith.h"
#include "ir/functor.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

std::optional<std::vector<int64_t>> const_extents(const Region& r) {
  std::vector<int64_t> out;
  for (const auto& e : r.extents) {
    auto c = as_const_int(e);
    if (!c) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

std::vector<size_t> non_unit(const std::vector<int64_t>& ext) {
  std::vector<size_t> out;
  for (size_t d = 0; d < ext.size(); ++d)
    if (ext[d] != 1) out.push_back(d);
  return out;
}

// The loops of copies for `c`, or nullptr when its sides pair dim by dim (or do not flatten).
Stmt split(const CopyNode* c) {
  auto se = const_extents(c->src), de = const_extents(c->dst);
  if (!se || !de) return nullptr;
  auto sd = non_unit(*se), dd = non_unit(*de);
  bool src_wide = sd.size() > dd.size();
  Region wide = src_wide ? c->src : c->dst, narrow = src_wide ? c->dst : c->src;
  const auto& we = src_wide ? *se : *de;
  const auto& wd = src_wide ? sd : dd;
  const auto& nd = src_wide ? dd : sd;
  std::vector<int64_t> wx, nx;
  for (auto d : wd) wx.push_back(we[d]);
  for (auto d : nd) nx.push_back((src_wide ? *de : *se)[d]);
  auto flat = flattened_dims(wx, nx);
  if (!flat) return nullptr;
  size_t k = *flat;  // the wide side's dims looped over
  const Span& sp = c->span;
  int64_t rows = we[wd[k]];
  std::vector<Var> vars;
  Expr block = int_imm(0, kIndexType, sp);  // row-major index over the looped dims
  for (size_t j = 0; j < k; ++j) {
    Var v = var("w" + std::to_string(j), kIndexType, sp);
    vars.push_back(v);
    block = arith::add(arith::mul(block, int_imm(we[wd[j]], kIndexType, sp)), v);
    wide.starts[wd[j]] = arith::add(wide.starts[wd[j]], v);
    wide.extents[wd[j]] = int_imm(1, kIndexType, sp);
  }
  narrow.starts[nd[0]] = arith::add(narrow.starts[nd[0]], arith::mul(block, int_imm(rows, kIndexType, sp)));
  narrow.extents[nd[0]] = int_imm(rows, kIndexType, sp);
  Stmt s = std::make_shared<CopyNode>(src_wide ? wide : narrow, src_wide ? narrow : wide, sp, c->atomic);
  for (size_t j = k; j-- > 0;)
    s = std::make_shared<ForNode>(vars[j], int_imm(0, kIndexType, sp), int_imm(we[wd[j]], kIndexType, sp),
                                  ForKind::serial, 0, s, sp);
  return s;
}

}  // namespace

Kernel split_window_copies(const Kernel& k) {
  struct M : Mutator {
    Stmt mutate(const Stmt& s) override {
      if (s && s->kind == StmtKind::Copy)
        if (Stmt r = split(as<CopyNode>(s))) return r;
      return Mutator::mutate(s);
    }
    using Mutator::mutate;
  } m;
  return m.mutate_kernel(k);
}

}  // namespace tw::cpu
