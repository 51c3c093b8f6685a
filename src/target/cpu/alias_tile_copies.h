// alias_tile_copies: same-dtype copies between whole tiles that only rename a value are removed
// (a Tile IR rewrite of the cpu target, before its decision passes).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A copy `T.copy(t, u)` of a whole tile t into a whole tile u (both on-chip, the same dtype and
// constant shape, not atomic) is dropped and every other reference to u becomes a reference to t
// (u's allocation is dropped too) when:
//   * the copy is u's only writer, and every other reference to u lies in the statements after
//     the copy in the same sequence (so u's value never flows around a loop or out of it), and
//   * no statement from the copy up to the last of those references writes t (so each reader
//     sees t exactly as the copy did; a reader writing t, a gemm accumulating into t from u, keeps
//     the copy).
// Flash attention's `T.copy(acc_s, acc_s_cast)` in float32, read by the P V gemm only, is such a
// copy: the gemm reads the score tile in place. A float32 -> bfloat16 cast copy is kept.
// t may also be a whole global tensor of constant shape (the tile's) that the kernel never writes,
// when u's readers only load its elements at indices the range analysis proves inside u (no copy,
// gemm or reduce of u, no gather `u[idx[i]]`, no `u[i, n]` at a scalar parameter n: a tile access
// not proved inside is checked against the tile's extents at run time, docs/language.md "Tails and
// out-of-range accesses"): rms_norm's per-block
// `T.copy(W, w)` of its 16 KiB weight row, whose map then loads W[j] in place (the same values;
// rms_norm 8192 x 4096 block_M 8 on one Zen 4 core -6 to -9% CPU time, docs/performance.md
// "Session 29").
ir::Kernel alias_tile_copies(const ir::Kernel& k);

}  // namespace tw::cpu
