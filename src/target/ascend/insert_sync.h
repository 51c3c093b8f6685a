// insert_sync: automatic synchronisation of an Ascend program (Program pass).
//
// The last pass of the automatic pipeline (after plan_memory gave every buffer its offset). The
// input has no SetFlag/WaitFlag/PipeBarrier (an internal error otherwise); it may have cross-core
// flags (the Cube/Vector hand-offs), which are kept and ordered against. The output has the flags
// and barriers that make the simulator's checker silent, with few set/wait pairs and without
// serialising what can overlap. AIC and AIV code are synchronised separately.
//
// 1. Accesses. Every instruction touches byte regions (program_access.h gives them: operand, rows x
//    row bytes, stride), placed here as (space, hull [lo, hi), and when constant an exact strided
//    rectangle). Spaces are physical memories (L1, L0A, L0B, L0C, UB: buffer offset
//    + operand offset, so buffers sharing bytes after plan_memory's reuse conflict) and GM (one per
//    tensor parameter, one for the workspace). Non-constant offsets overlap conservatively within
//    the buffer; offsets of the form `(X % m) * H + c` (ping-pong halves) are "slotted": two such
//    accesses with the same X, m, H conflict only in the same slot; offsets `V * H + c` (V a
//    variable: a page copied into rows jj * page .. of a tile) are compared exactly for a
//    dependence carried by V's loop (constant extent <= 64): the rectangles of iterations
//    1 .. extent - 1 apart never meeting, the iterations are independent. Read-read never conflicts, so
//    GM inputs never written cause nothing. GM write-after-write is ordered like any other
//    conflict (a kernel may store a tile and then T.atomic_add into the same bytes, or store one
//    window twice: one pipe's copies may overlap, so a PipeBarrier<PIPE_MTE3> goes between them),
//    except between two atomic writes (T.atomic_add's copies under SetAtomicAdd, MTE3 or FIX):
//    their adds commute, as the simulator's checker counts them.
//    GM offsets that are not constant get a hull from value ranges (loop variables in [0, extent),
//    block / sub-block indices and shape variables >= 0, `x % m` in [0, m), min/max/+/-/*/floor-
//    and ceil-division by constants; counts likewise): the workspace regions of different
//    hand-offs do not conflict.
//    Cross-core flags: CrossCoreSetFlag<p> fires when earlier p instructions finished, and
//    CrossCoreWaitFlag<p> with p != S blocks only pipe p, so both "touch" (a fence access) every GM
//    space shared between cores (accessed by AIC and AIV code, written by one; with mode 0/1 flags
//    every written GM space): earlier/later accesses of it on other pipes get a flag to/from p;
//    on p itself nothing is needed. Such a same-pipe link orders nothing else (step 3): a wait
//    does not wait for its pipe's earlier instructions, nor a set hold back its later ones. A CrossCoreWaitFlag on S orders everything after it: nothing.
//    On the workspace the fence covers only the bytes its flag id guards: the union, over every
//    flag with that (constant) id in AIC and AIV code, of the workspace hull of the nearest
//    instruction on the flag's pipe in the same block (after a wait, before a set, not across
//    control flow: split_cube_vector's protocol waits right before and sets right after each
//    hand-off slot access). An id with no such access, or one with an unknown hull, fences the
//    whole workspace.
// 2. Dependences. Intra (a before b in the same iteration of their common loops, placed in the
//    lowest common block C: set after a's ancestor in C, wait before b's) and loop-carried (a in
//    iteration i, b in iteration i+1 of their innermost common loop L, C = L's body: set after
//    a's ancestor, wait before b's; SetFlag once before and WaitFlag once after the outermost loop
//    around L, so every path is set, (wait, set)*, wait: balanced for any trip counts, and the
//    last iteration of an inner loop is ordered before the first of the next outer iteration).
//    A forward carried dependence (a before b in the body) is implied by the placed intra one.
//    Slotted dependences use event id base + X % m (each half its own flag, like hand-written
//    ping-pong code); carried ones are pre-set and drained for every slot.
//    Pipes p != q: SetFlag<p_q>/WaitFlag<p_q>; p == q on V/MTE1/MTE2/MTE3/FIX: PipeBarrier<p>
//    before b's ancestor in C; M and S are in order: nothing.
// 3. Fewest pairs. A dependence a -> b is dropped when an instruction c that executes between
//    them on every path (no If, no loop of unknown trip count between them and C) makes it
//    transitive: (a -> c and pipe(c) = pipe(b)): the wait/barrier before c is on b's pipe and stays
//    in effect; (c -> b and pipe(c) = pipe(a)): the set/barrier after c covers every earlier
//    instruction of a's pipe; (a -> c and c -> b). Or an `if` between them (no If, no loop of
//    unknown trip count between it and C) with such a c on every path through each of its arms
//    (a kid of the arm, an `if` with one in both its arms, a loop body of a constant trip count
//    >= 1 with one): whichever arm runs, its c orders a before b (sync39 S1, session 40). Links
//    are always shorter, so this is well-founded. Then, per block, pipe pair and kind, dependences are intervals (after a's
//    ancestor, before b's ancestor); a placed pair covers every dependence whose interval contains
//    it (greedy by earliest wait) unless, for an intra dependence, the pair's set is later than
//    needed past work of the setter's pipe or its wait earlier than needed before work of the
//    waiter's pipe (then the dependence gets its own pair: no pipe is held behind unrelated
//    work); a barrier covers every same-pipe dependence it lies between. A wait due before an
//    `if` sinks into its branches (before the first instruction it orders in a branch,
//    recursively; at the end of a branch with none) when the waiting pipe has work there that
//    the wait would otherwise hold back: one wait on every path, still before what needs it.
//    Likewise a set due after an `if` rises into its branches (after the last instruction it
//    follows in a branch, at the start of a branch with none) when the setting pipe has more
//    work there; a guarded carried set (4.) rises with its guard, only when its wait in the
//    iteration is due before an earlier statement. A pair covers a dependence only when that
//    does not move where its set rises / its wait sinks (the dependence's a is not later, its b
//    not earlier than the pair's own; or its places with the dependence's a and b are the same:
//    twins, a's in different `if`s of one loop before one wait, are one pair, session 28). If
//    the event ids of a pipe pair then run out, that pipe
//    pair (and its reverse: guards) is placed again with plain covering.
// 4. Event ids 0..(the target's flag_event_ids - 3) per pipe pair (the top two kept free: 0..5 on
//    the 910B). Each placed pair of one pipe pair gets its own id(s): an id is reused by the same
//    pair in later iterations, where the reverse dependence b(i) -> a(i+1) orders the next set
//    after the previous wait (two different pairs
//    sharing an id could set it twice before the first wait, which is undefined). Intra pairs
//    (not carried, slotted, relayed or guards) also share an id when their uses provably
//    alternate: in the lowest block holding both, the first's wait precedes the second's set and
//    a chain of flag pairs placed unconditionally in that block orders the waiting pipe (past
//    the wait) before the setting pipe reaches the set; and around the nearest enclosing loop a
//    chain (intra pairs of two iterations, carried pairs into the next) orders the second's wait
//    before the first's set of the next iteration (pairs inside an `if` or loop of that block
//    count at the `if` / loop). A carried pair whose wait and set would surround one `if` that
//    holds every access it orders in one branch goes into that branch (recursively; session 26):
//    an execution that skips the branch skips both, and the pairs inside it that order the set
//    after the wait run whenever the pair does (left around the `if`, a skipped branch ran the
//    wait and then the set with nothing between: with other timing, a flag set twice). A carried
//    pair whose next set is still not ordered after its wait by flag pairs placed unconditionally
//    in its block (a and b under different `if`s that an iteration may skip) gets a guard: a
//    reverse pair q -> p set and waited right before the carried set (a guard without a free id:
//    a PipeBarrier<PIPE_ALL> there, before the set). Intra pairs of a loop body reuse their id each
//    iteration too: when no chain of unconditional pairs around the loop (reaches over two
//    iterations) orders the wait before the next iteration's set (the reverse dependence may sit
//    in an `if` the drain iterations of a software-pipelined loop skip), the pairs p -> q of the
//    body share one guard q -> p set and waited before the first of their sets (those sets do
//    not rise into `if`s). A relayed pair (5.) is checked and guarded with its relay pipe r as
//    the waiting pipe (a chain from r, or from q past its wait of r's flag, may order the next
//    set; else a guard r -> p), and its second flag r -> q likewise (a body guard q -> r before
//    the wait point; session 26). Guards never share ids. A pair that
//    does not fit in 6 ids becomes a PipeBarrier<PIPE_ALL> at its wait point (correct, less
//    overlap).
// 5. Illegal pairs (AIC MTE2 <-> FIX; S pairs on the AIC): relayed through a pipe r with legal
//    p -> r and r -> q (MTE1 on the AIC): WaitFlag<p_r>, SetFlag<r_q>, WaitFlag<r_q> at the wait
//    point (only r and q stall, the producer's pipe keeps running); PIPE_ALL when no relay exists.
//    Relayed pairs of one r -> q waited at the same places share the second flag: r waits each
//    p_r, then sets r_q once and q waits it once (session 30). A relay whose r -> q flag finds no
//    id is a PIPE_ALL and gives its p -> r id back (the colouring is done again), and the covering
//    retry (3.) then takes r -> q, the pipe pair that ran out.
// 6. Short Mmad accumulations: the Cube keeps Mmads that accumulate into one L0C in order only
//    when ceil(m/16) * ceil(n/16) >= 10 (Mmad docs); before every Mmad that may accumulate into a
//    smaller tile, `if (!init && ceil(m/16) * ceil(n/16) < 10) PipeBarrier<PIPE_M>()` (parts known
//    at compile time folded; nothing for tiles of >= 10 fractals).
#pragma once

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

Program insert_sync(const Program& program, const target::Target& target);

}  // namespace tw::ascend
