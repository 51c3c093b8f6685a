// ir::arith: the one place for folded integer arithmetic on the Tile IR.
//
// simplify() applies the expression rules of the simplify pass (transform/simplify.h lists them:
// constant folding with Python's floor semantics, identities, bool and select rules, exact
// literal casts); the builders build one node and fold it with the same rules, so index
// arithmetic written by a pass is as simple as the simplify pass would make it.
#pragma once

#include <optional>

#include "ir/functor.h"
#include "tilewright/ir.h"

namespace tw::ir::arith {

// The expression rules as a Mutator; transform::simplify adds the statement rules.
class Simplifier : public Mutator {
 public:
  using Mutator::mutate;
  Expr mutate(const Expr& e) override;
};

Expr simplify(const Expr& e);

// The value of an integer or bool literal (no folding: as_const_int folds).
std::optional<int64_t> literal(const Expr& e);

// Folded builders: simplify(binary(op, a, b)).
Expr add(const Expr& a, const Expr& b);
Expr sub(const Expr& a, const Expr& b);
Expr mul(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);
Expr ceildiv(const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);  // floor modulo (Python's %)
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);

// Light builders: fold only the identities x + 0, 0 + x, x - 0, x * 1, 1 * x, x * 0, 0 * x and
// build divisions as they are (no constant evaluation, no reassociation), so an expression keeps
// the form its builder wrote. The Ascend call fields (select_move_calls) and the offsets the
// AscendC printer derives use them: the printed AscendC shows the formula of each field.
namespace light {
Expr add(const Expr& a, const Expr& b);
Expr sub(const Expr& a, const Expr& b);
Expr mul(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);
Expr ceildiv(const Expr& a, const Expr& b);
}  // namespace light

}  // namespace tw::ir::arith
