// rotate_vector_loops: vector software pipelining of a kernel split by split_cube_vector
// (automatic pipeline, after skew_cube_loops; see pipeline.cpp).
//
// In a vector loop body that hands a tile to the Cube (P_j) and then waits for the Cube's result
// on it (P_j V_j), that tail (B: from the wait on) runs L = 3 iterations later, after the next
// iterations' heads (A), so the Cube multiplies P_j V_j while the vector code runs the softmaxes
// of blocks j + 1 .. j + L:
//   for j in [0, n + L): <copies>; if j < n: A(j); if j >= L: B(j - L).
// Statements of A that update a tile B updates (acc_o = acc_o * scale) join the front of B when
// nothing later in A touches what they write. Tiles A writes and B reads (scale) are read by B
// from the copy of L iterations ago: X_prev<L> <- ... <- X_prev <- X at the start of each
// iteration (before A(j) overwrites X); the X_prev tiles are allocated at the top level, before
// the two core scopes. Allocs of the body (landing tiles) go first in the new body.
// The hand-off to the Cube is a `set_cross_flag` on MTE3 in the vector scope, the wait for the
// Cube a `wait_cross_flag` on MTE2 (split_cube_vector.h, 3.). Only the loops directly in the
// vector scope (or in Seqs of it) are considered. Not applied when B writes what A reads or
// writes, when B uses a variable A defines, when a tile A writes and B reads is not in UB, or
// when A waits for a Cube tile set in a Cube loop that skew_cube_loops did not skew
// (skewed_cube_loop): B(j - L) frees the slot of P V(j - 2) only after A(j + 1) read S(j + 1),
// which an unskewed Cube loop writes after P V(j): a deadlock (deadlock40).
// Kernels that were not split (no `scope V` at the top level) are returned unchanged.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

#include <unordered_set>

namespace tw::ascend {

inline constexpr int64_t kVectorLag = 3;  // B(j - 3) after A(j): the P V chain spans several softmaxes

ir::Kernel rotate_vector_loops(const ir::Kernel& kernel, const target::Target& target);

// Whether rotate_vector_loops rotates every loop of the vector scope body `vbody` that hands the
// Cube a tile on one of `ids` (set_cross_flag on MTE3), and no such hand-off sits outside a loop
// it considers. skew_cube_loops asks before it moves Cube work kCubeLag iterations ahead: with two
// slots per hand-off, a Cube loop L = 3 ahead needs the vector loop to read S(j + 1) before it
// waits for P V(j), which only the rotated loop does (else a deadlock from the fourth iteration).
bool vector_hand_offs_rotate(const ir::Stmt& vbody, const std::unordered_set<int>& ids);

}  // namespace tw::ascend
