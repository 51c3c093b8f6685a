// parse_program: reads the text print_program writes (program_printer.h) back into a Program, so
// program-pass tests can be before/after texts like the Tile IR ones (parse, run the pass, compare
// print_program of the result), and a dumped stage (TW_DUMP_IR) can be read back.
//
// Text (one item per line; statements indented two spaces per level):
//   ascend_kernel NAME KERNEL_TYPE blocks=EXPR workspace=EXPR [block_idx=NAME] [sub_block_idx=NAME]
//     param I NAME: GM DTYPE[EXPR, ...] [out]          # tensor; shape variables declared by first use
//     param I NAME: DTYPE                               # scalar (the variable NAME)
//     buffer NAME: CORE MEM @OFFSET +BYTES DTYPE FORMAT
//     pool CORE MEM +BYTES                              # Program::pool_bytes (absent: 0)
//   AIC:                                                # the AIC code (absent: null); then AIV:
//     for VAR in range(EXPR):                           # body: the lines indented deeper
//     if EXPR:  /  else:
//     VAR = EXPR                                        # let: visible in the rest of its block
//     VAR: DTYPE = EXPR                                 # a let whose variable's dtype is not EXPR's
//     PIPE INSTRUCTION [ @LINE]                        # print_instr's form of each kind
// Expressions are Tile IR expressions (ir/parser.h); names resolve to the block indices, shape
// variables, scalar parameters, enclosing loops and earlier lets. Operands name a buffer or a tensor
// parameter (`workspace` for the GM workspace) with a byte offset: `NAME[EXPR]`.
// What the text does not hold is defaulted: buffer shapes and spans, the file of instruction spans
// (`filename`), CopyGmToL1's fill dtype (float16), tpipe_destroy (true).
// Errors throw tw::ir::Error at the line and column in the text.
#pragma once

#include <string>
#include <string_view>

#include "target/ascend/program.h"

namespace tw::ascend {

Program parse_program(std::string_view text, const std::string& filename = "<program>");

}  // namespace tw::ascend
