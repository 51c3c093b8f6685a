// Helpers shared by the passes that split an automatic-mode kernel between the Cube and the
// Vector cores (split_cube_vector, skew_cube_loops, rotate_vector_loops): which tiles a statement
// reads and writes, the cross-core flags of a statement, and a rewrite of one core's scope.
#pragma once

#include <functional>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// Buffers read / written by a statement (tile ops, element stores and loads), by identity.
struct TileAccess : ir::Visitor {
  std::unordered_set<const ir::BufferNode*> reads, writes;
  void visit(const ir::Expr& e) override;
  void visit(const ir::Stmt& s) override;
  using ir::Visitor::visit;
};

// A T.Parallel loop nest (vector code).
bool is_map(const ir::Stmt& s);

// The statements of a loop body, nested Seqs flattened one level (hand-off parts are Seqs).
std::vector<ir::Stmt> flat_body(const ir::Stmt& body);

// Whether x is a cross-core sync of kind k whose constant id is in ids.
bool is_cross_sync(const ir::Stmt& x, ir::SyncKind k, const std::unordered_set<int>& ids);

// The constant ids of the cross-core syncs of kind k on pipe p inside s.
std::unordered_set<int> cross_flag_ids(const ir::Stmt& s, ir::SyncKind k, ir::AscendPipe p);

// Whether two statements of a loop body (flat_body) take one cross-core flag id in one role (a
// set, or a wait): hand-offs that split_cube_vector let share an id pair in turn. Their order on
// both cores is what matches each set with its wait, so the passes that move part of a loop body
// across iterations on one core (skew_cube_loops, rotate_vector_loops) leave such a loop alone.
// (Hand-offs sharing a pair in exclusive if arms are in one statement, the if.)
bool reuses_cross_ids(const std::vector<ir::Stmt>& flat);

// A kernel that split_cube_vector split (top level: allocs, then `scope C`, `scope V`) with the
// body of its `core` scope replaced by f(body, allocs); the allocs f appends go to the top level,
// before the two scopes. Any other kernel is returned unchanged.
using CoreBodyRewrite = std::function<ir::Stmt(const ir::Stmt& body, std::vector<ir::Stmt>& allocs)>;
ir::Kernel rewrite_core_scope(const ir::Kernel& k, ir::CoreKind core, const CoreBodyRewrite& f);

}  // namespace tw::ascend
