// verify_program: the checks the PassLog runs on the Ascend Program after each program pass
// (select_instructions / instruction selection, plan_memory, insert_sync, select_vector_calls,
// select_move_calls), as ir::verify does for the Tile IR. It decides nothing; it only checks what
// is cheap and certain:
//  - every statement has its parts (a For its variable, extent and body, an If its condition and
//    body, a Let its variable and value, Seq bodies non-null);
//  - every variable a statement's expression or an operand's offset / row stride uses is in scope:
//    the block indices, the shape variables, the scalar parameters, an enclosing loop, or a Let
//    earlier in an enclosing Seq;
//  - every buffer an instruction names is declared (Program::buffers) for the core whose code uses
//    it, with a constant byte offset inside it; every GM operand is a tensor parameter or the
//    workspace; call-level vector operands the API does not read are the only absent ones;
//  - the kernel type runs every core type that has code; once plan_memory set the pools
//    (Program::pool_bytes), each is a multiple of 32 B covering every buffer of its core and memory;
//  - SetFlag/WaitFlag name a flag pair of that core, cross-core flags a mode 0..2; a constant event
//    or flag id is in range (the target's flag_event_ids / cross_flag_ids; a runtime one, expert
//    mode's ping-pong ids, is the simulator's to check).
// A violation is a compiler bug: an ir::Error naming the pass, the core and the instruction.
#pragma once

#include <string>

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

void verify_program(const Program& p, const target::Target& target, const std::string& pass);

}  // namespace tw::ascend
