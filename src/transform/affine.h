// Affine analysis of integer index expressions: c + sum(coef * atom). An atom is a variable or an
// opaque (non-linear) subexpression; Let-bound variables (`lets`) are replaced by their values.
// The conversion never fails: what is not linear becomes an atom, and the caller decides whether
// the atom's dependencies are acceptable (infer_grid: a grid loop's tiles; independent_maps: a
// T.Parallel map's elements).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tilewright/ir.h"

namespace tw::transform {

using LetMap = std::unordered_map<const ir::VarNode*, ir::Expr>;

struct Term {
  ir::Expr atom;
  int64_t coef;
};
struct Affine {
  int64_t c = 0;
  std::vector<Term> terms;  // distinct atoms (structurally), no zero coefficient
  bool is_const() const { return terms.empty(); }
};

// a + scale * b.
Affine combine(Affine a, const Affine& b, int64_t scale);
Affine to_affine(const ir::Expr& e, const LetMap& lets = {});

}  // namespace tw::transform
