// Readable text form of an Ascend program (for tests, debugging, simulator reports and the
// PassLog's program stages); parse_program (program_parser.h) reads it back. Example line:
//   MTE2 CopyGmToL1 A_l1[0] <- A[(bi * 128 * K + k * 64) * 2] float16 rows=128 cols=64 ...  @12
#pragma once

#include <string>

#include "target/ascend/program.h"

namespace tw::ascend {

std::string print_program(const Program& p);
// One instruction on one line, without indentation or trailing newline. Buffers and params
// are named from `p`. With span = true, " @line" is appended when the span is known.
std::string print_instr(const Program& p, const Instr& in, bool span = true);

}  // namespace tw::ascend
