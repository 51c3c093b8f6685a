// tile_dims: the kernel's tile dims that change together, for the capacity error's hint
// (plan_memory's smaller tiles). Not a pass: an analysis of the Tile IR (after split_cube_vector).
//
// Two tile dims are tied when the kernel relates them: a T.gemm's M (A's and C's rows), K (A's
// columns, B's rows) and N (B's and C's columns), transposes applied; a T.Parallel map's loop
// variable indexing a dim of each tile it reads or writes (`p[i, c]`, `v[c, d]`: c ties p's columns
// to v's rows when one map uses both, and a chain of maps and gemms ties them transitively); a copy
// between tiles or a reduction (its result's dims with its source's other dims). Only dims of equal
// extent are tied. A class is fixed when one of its dims is copied whole from or to a whole dim of a
// tensor parameter (a head dim D taken whole from Q: the model fixes it, not a block size): a smaller
// tile proposes to shrink a free class first. (paged_decode at head dim 256: k's and v's rows and
// s's and p's columns are one class, the keys per step; q's rows and columns are fixed.)
// A class is reduced when a T.reduce_* of the user's kernel reduces one of its dims (the sequence
// axis S of a column sum): a smaller tile proposes it after the other free classes, and names the
// loop that keeps the result (hunt14 F3: "x 2048x16" of a 4097-row sum was another sum).
// A tile split_cube_vector made of a user tile X (BufferNode::part_of: the Vector copy X_ub, P V's
// partial X_pv, each AIV's part of X's rows) has X's dims: hints name it X at X's shape (hunt14 F5:
// the user's fix is acc's rows, not `acc_ub`'s half).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tilewright/ir.h"

namespace tw::ascend {

struct TileDims {
  std::map<std::string, std::vector<int>> dims;  // per tile name: each dim's class (-1: none)
  std::set<std::string> user;                    // the tiles the user's kernel allocates (named in hints)
  std::vector<bool> fixed;                       // per class
  std::vector<std::string> reduced;              // per class: "" or the reduction that reduces it ("T.reduce_sum
                                                 // at line 12"): fewer of it changes what the block computes
  std::vector<int64_t> extent;                   // per class: the dims' extent
};

// kernel: the Tile IR after split_cube_vector (its gemms into compiler tiles, e.g. P V's partial
// `acc_o_pv`, tie them too; copies through GM workspaces fix nothing); user: the user's kernel.
TileDims tile_dims(const ir::Kernel& kernel, const ir::Kernel& user);

}  // namespace tw::ascend
