// skew_cube_loops: Cube software pipelining of a kernel split by split_cube_vector (automatic
// pipeline, after split_cube_vector; see pipeline.cpp).
//
// In a Cube loop body that waits for a Vector -> Cube hand-off after some Cube work (flash
// attention: S_j = Q K_j^T, then wait for P_j), the work before the wait (A) is moved L = 3
// iterations ahead when A and the rest (B) share no tile:
//   for j in [0, n + L): if j < n: A(j); if j >= L: B(j - L).
// The Cube computes the next scores while the vector code runs the softmax of block j, and the
// write-out of S_j+L does not queue behind P_j V_j (whose chain through both cores is longer than
// one softmax). (L measured on flash attention: 1: 31.9%, 2: 36.8%, 3: 37.7% of peak at S = 8192.)
// Statements of A that only feed B (flash attention's V load) move to the front of B first.
// The wait is a `wait_cross_flag` on MTE2 in the Cube scope: the Cube's side of a Vector -> Cube
// hand-off (split_cube_vector.h, 3.). Only the loops directly in the Cube scope (or in Seqs of it)
// are considered. Not applied when A allocates or has no work, when B writes what A reads or A
// writes what B reads or writes (non-GM tiles), when B uses a variable A defines, or when a
// vector loop that hands this loop a tile will not be rotated by rotate_vector_loops
// (vector_hand_offs_rotate): with two slots per hand-off the Cube, L ahead, writes S_j+L only
// once the vector code read S_j+L-2, and an unrotated vector loop reads S_j+1 only after P_j V_j,
// which the Cube computes after S_j+3: a deadlock.
// Kernels that were not split (no `scope C` at the top level) are returned unchanged.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

inline constexpr int64_t kCubeLag = 3;  // A(j) runs kCubeLag iterations ahead of B(j)

ir::Kernel skew_cube_loops(const ir::Kernel& kernel, const target::Target& target);

// Whether the Cube loop s has the form skew_cube_loops gives a loop it skews:
//   for j in [min, ..): if j < end: A(j); if j >= min + kCubeLag: B(j - kCubeLag).
// rotate_vector_loops asks it of the Cube loops a vector loop waits for (see its header).
bool skewed_cube_loop(const ir::Stmt& s);

}  // namespace tw::ascend
