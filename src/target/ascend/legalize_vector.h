// legalize_vector: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp).
//
// Portable vector code -> statements select_instructions's instruction selection maps to one Ascend
// vector instruction each (match_map in select_instructions.cpp). Runs after infer_scope (vector tiles
// are UB), split_cube_vector and the vector passes that prepare its input (fold_exp2_scale: exp2
// over a scaled tile; expand_math: math without a vector instruction; expand_int8_fill:
// int8/uint8 fills as maps; convert_copies: converting and UB -> UB copies as copies and maps);
// every new tile is a UB alloc placed right before its first use.
//
// The rewrites below are one pass because they are one decision: each T.Parallel store is lowered
// as one graph of operations (the masks, int8 wrap-around and bfloat16/int8 conversions are nodes
// of that graph, sharing its common subexpressions, its compute dtypes and its temporaries), and the reductions and global reads produce maps that are lowered the same
// way at the same point: a reduction's int8 sum is stored with a wrap bound the map alone cannot
// know, the float32 copies of staged global reads and of reduced tiles are made per row chunk,
// the halving scratch tile is allocated between a reduction's conversion and its result tile, and
// the temporaries (named after the buffer they serve, numbered in program order) and chunk loops
// of all of them share one numbering. Split into passes, the buffer names and the order of their
// declarations in the AscendC output would change.
//
//  - T.Parallel maps (1-D or 2-D, constant extents) with compound bodies become a sequence of
//    single-op maps. Every store's value is turned into a list of operations (common
//    subexpressions computed once); each result is written in place into the destination when
//    that is safe (the destination is no longer read and holds no live value) or else into a UB
//    temporary, reused as soon as its value is dead. Operand shapes: a tile a[i, j], a row
//    vector v[i] (VecRowBroadcast), a column vector w[j] (a row stride of 0), a scalar (Adds,
//    Muls, ...; scalar - tile and scalar / tile broadcast the scalar with VecDup first). Values
//    that are only row / column vectors are computed by 1-D maps over that vector.
//  - Reads of a global tensor inside a map (W[j]) become a copy of the region the map reads into
//    a UB tile, hoisted out of every enclosing loop whose variables the region does not use (and
//    shared by the maps that read the same region there), unless the kernel writes that tensor;
//    the copy of a read the map always makes is checked (ir.h CopyNode::checked).
//    One element read at indices free of the map's variables (batch norm's per-block mean[b]) is
//    read once into a let placed before the map (the scalar unit's ScalarLoad, select_instructions)
//    and used as a scalar operand. So is one element of a UB tile the map does not store to, at
//    indices free of its variables but those of extent 1 (read at 0) and with a last index free of
//    all of them (combine_splits' lse[i, sp] over one row: no vector operand addresses a tile
//    column); a map with such a read reads its one-row vectors (total[i]) the same way. So is the
//    value a T.where's index condition compares the column index with in a one-row map whose
//    other value is a scalar (lab[i] in j == lab[i], n[i] in j < n[i]): the condition is then a mask.
//  - math: exp, log, sqrt and abs are instructions (in the compute dtype); expand_math has
//    written the others with them; floor, ceil and pow with another exponent are errors.
//  - T.where(cond, a, b) with cond a conjunction of comparisons affine in the map's indices (and
//    any scalars: block indices, loop variables; <, <=, >, >=, and == of the column index with a
//    value free of the indices, cj * j + r == v: the one column k = cj * (v - r), v clamped to one
//    past the row's ends first, so no column when v is outside): a on the whole tile, then b (a
//    scalar) written with VecDup over the masked columns of each row. Per row the kept columns
//    are [lo, hi): the prefix [0, lo) is one VecDup; the suffix [hi, cols) starts at the 32 B
//    block holding hi: the kept head of that block is saved to a small UB tile, the block and the
//    rest of the row are filled, the head is restored. Bounds independent of the row index: one set of 2-D
//    instructions over all rows (runtime column counts); row-dependent bounds (a causal
//    diagonal): a scalar loop over the rows, skipping rows without masking, the whole loop
//    skipped when no row of the tile needs masking.
//  - T.where(cond, a, b) with cond reading tile data (select_on): `and` / `or` / `not` become
//    nested selects, each comparison of tile data one select map
//    dst = (x cmp y) ? a : b (x a tile, y a tile or scalar, compared in float32 -- float16 ones
//    in float16, int32 values that may reach 2^24 as the sign of an exact int32 key,
//    int32_order_key; a, b float32 or float16, a a tile, b a tile or scalar) that
//    select_instructions makes a VecSelect
//    (Compare + Select); index conditions inside keep the index mask above (their other value a
//    scalar); a bare tile value v as condition is v != 0; bool tiles are an error naming uint8.
//    int32 values: select_int32 (exact: through float32 below 2^24, else an int32 0/1 mask m and
//    x * m + y * (1 - m)). Index conditions that are not a mask (!=, `or`, == of rows or of both
//    indices) or whose other value is a tile are compared the same way, their indices as index
//    vectors (below).
//  - a map index used as a value (ids[i, j] = j, i * n + j): an int32 index vector of the map's
//    rows (i), columns (j) or elements (1-D map), a 1-D map t[k] = k that select_instructions makes
//    a VecIndex (CreateVecIndex), broadcast like a row / column vector.
//  - row reductions (last dim) of rows wider than one 256 B repeat: the columns are first folded
//    in halves with full-rate elementwise max/min/add into UB temporaries (rows x cols/2, ...;
//    one per dtype and shape, shared by all reductions: each is consumed right away)
//    until a row fits one repeat, then one WholeReduce repeat per row (sum: pairwise order);
//  - reduce with clear=False: reduce into a temporary, then combine (max/min/add) into dst;
//    reduce of a bfloat16 or integer tile or into a different dtype: through float32 temporaries.
//    The sum of an int8/uint8 tile is wrapped into its dtype as the language says (exact float32
//    sum, at most 65535 terms per output; s - 256 floor((s - lo) / 256) with a CAST_FLOOR Cast).
//  - int8/uint8 map arithmetic (no AIV int8 arithmetic): computed in float32 and wrapped when
//    stored (or cast to int8/uint8) with the same formula; a bound on |values| proves it exact
//    (< 2^24), else an ir::Error at the map's line. Stored or converted into a wider type, the same
//    arithmetic on the operands Cast to int32 (widen_8bit; session 33).
//  - float16 maps and sums are computed in float32 and rounded once when stored (docs/language.md;
//    compute_type); copies, one +, -, * of two float16 values into a float16 tile (rounded once
//    either way), max / min of two float16 tiles, compares and selects of float16 values
//    (and constants float16 holds exactly) and reduce_max / reduce_min stay float16 (exact).
//  - conversions (cast maps: the user's and convert_copies'): bfloat16 is only converted, never
//    computed on: its arithmetic is done in float32 (rounded once to bfloat16 at the store or at a
//    T.cast to bfloat16, which is a CAST_RINT Cast wherever it is, as on the cpu target: session 32; a
//    bfloat16 copy is two exact Casts). Every conversion is a chain of the Cast pairs dav-c220 has (MapLowering::
//    to_type): bf16 <-> f16/int8 through f32, int8/uint8 -> f32/bf16/i32 through f16, f32 -> int8
//    as f32 -> i32 (trunc) -> f32 -> f16 -> int8, i32 -> f16 through f32.
//  - row chunks: a 2-D map (with float32 temporaries: not a single Cast), conversion or
//    reduction that computes a float16/bfloat16/int8/uint8 tile in float32 runs over chunks of rows when
//    the tile has more rows than one chunk (chunk_rows): a serial loop over the full chunks, then
//    a tail of rows % chunk rows, with chunk-sized temporaries. A chunk's float32 temporary holds
//    at most 4 KiB (rows padded to 32 B, at least one row); its rows are a multiple of the 32 B
//    granule of the row vectors addressed at the chunk's row offset (float32 v[i]: 8 rows, int8:
//    32). Maps that read another row of a tile they store to are not chunked. Row reductions:
//    each chunk reduced into a chunk-sized float32 vector, copied into a float32 vector of all
//    rows (chunks of 8 rows), stored into dst as before. Column reductions: the first chunk
//    reduced into a float32 accumulator, every later row then added (max/min) in row order, the
//    order the whole-tile column reduction uses, so results are bit-identical.
//  - gathers (docs/ascend.md "Gathers"): a read of a UB tile at an index that is not (start + loop
//    variable) — data-dependent (x[i, idx[i, j]], x[i, label[i]]) or strided (x[i, 2 * j + 1]) —
//    is a Gather node: its index computed as int32 tile data (the map's variables used as values
//    are index vectors, OpKind::Iota / CreateVecIndex), shifted left by log2 of the
//    element size into byte offsets, and emitted as the map dst = src[..., off >> k] (a row
//    gather: the last index; a 1-D map over a 2-D tile: the flat form src[(off >> k) // pcols,
//    (off >> k) % pcols]) that select_instructions makes Gather calls. A gather several stores of
//    a map read is done once into a temporary. Interleaving stores y[..., s*j + c] = v_c (every c
//    in 0..s-1) store each v_c into part c of a UB tile, then one gather map interleaves the parts.
//  - int32 & and | as one And / Or of two int32 tiles (a scalar or vector operand broadcast first;
//    select_vector_calls issues them on the int16 lanes), ^ as (a | b) - (a & b) (bitwise);
//    int8/uint8 values in int32 the same way (bitwise).
//  - int32 integer operators without one instruction (docs/ascend.md "Integer operators"): ~x as
//    -1 - x, shifts by a per-element count bit by bit (bit_not, shift_by_tile), // and % by any
//    divisor from two shrunk float32 quotient estimates and sign-bit corrections (int_divide;
//    int8/uint8 values divided in int32); no int32 step leaves int32.
//  - int32 tile data with a scalar that may leave int32 (scalar_range; docs/ascend.md "Session 33:
//    integer arithmetic leaving its width"): + - modulo 2^32 where the value is wrapped, else three
//    clamped Adds (exact or an overflow report); // % exact from scalar flags; a chain of max / min one
//    clamp; int64 arithmetic converted to float32, or a wide dividend, in an element loop on the
//    scalar unit (OpKind::Elem); so is a whole store whose value has a & | ^ with such a scalar seen
//    unwrapped or a // % of a dividend past int32 (elem_past_int32; session 34); x - c where c may be
//    INT32_MIN as x ^ INT32_MIN (stored) or two monotone Adds (seen); int64 arithmetic of an int32 tile
//    and an int64 scalar stored into int32 as the int32 forms above (int64_operand; docs/ascend.md
//    "Session 34: integer arithmetic leaving int32, the rest").
//  - anything else that has no vector instruction (transposed reads, a gather along a leading
//    dim, a scatter, ~ and shifts of int8/uint8 tiles, ...) is an ir::Error at the kernel source line.
#pragma once

#include <set>
#include <string>

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// passes (checker metadata, not printed): gets the names of the temporaries that hold a pass-through operand,
// the int32 where blend's 0 / 1 mask and terms (select_int32: x * m + y * (1 - m)) and the int8 / uint8 wrap's
// multiple of 256 (v - floor((v + 128) / 256) * 256): where such a lane is the identity of a Mul / Add / Sub
// (1; 0), the other operand's lane passes through unchanged, and the simulator's preloaded state follows it there
// (written.cpp), and only there: a user's own `+ z` with z == 0 is a store (bounds40 F3). Their temporaries
// hold nothing else. multi_buffer, map_grid and simplify keep buffer names; select_instructions reads them
// (program.h BufferDecl::passes).
ir::Kernel legalize_vector(const ir::Kernel& kernel, const target::Target& target, std::set<std::string>* passes = nullptr);

}  // namespace tw::ascend
