// Text form of the Tile IR: the parser.
//
// Grammar (what ir/printer.h prints; whitespace and newlines are insignificant, `#` starts a
// comment that runs to the end of the line):
//
//   kernel   := [span] 'kernel' NAME '(' [param {',' param}] ')'
//               ['grid' '(' NAME [span] [':' DTYPE] '=' expr {',' ...} ')']
//               ['sub_block' '(' NAME [span] [':' DTYPE] ')'] block   # sub_block: Ascend expert mode
//   param    := NAME [span] ':' SCOPE DTYPE '[' [expr {',' expr}] ']' ['out']   # tensor
//             | NAME [span] ':' DTYPE ['out']                                  # scalar
//   block    := [span] '{' {stmt} '}'                    # a Seq; lets/allocs live until '}'.
//               # A loop, if, scope or kernel body of one statement is that statement (ir::body_form)
//   stmt     := {'@' NAME ['(' INT {',' INT} ')']} [span] ( block   # annotations (ir::Annotation)
//             | 'alloc' NAME [span] ':' SCOPE DTYPE '[' dims ']'
//             | 'for' NAME [span] [':' DTYPE] 'in' KIND '(' min ',' extent [',' 'stages' '=' INT] ')' block
//             | 'if' expr block ['else' block]
//             | 'let' NAME [span] ':' DTYPE '=' expr
//             | NAME '[' [expr {',' expr}] ']' '=' expr                        # store
//             | 'copy' region '->' region
//             | 'gemm' region ',' region '->' region {('trans_a'|'trans_b'|'clear') '=' BOOL}
//             | 'fill' region '=' expr
//             | 'reduce' ('sum'|'max'|'min') NAME '->' NAME {('axis' '=' INT | 'clear' '=' BOOL)}
//             | 'scope' ('C'|'V') block                     # Ascend expert mode: AIC / AIV code
//             | 'sync' sync )                               # Ascend expert mode: flags, barriers
//   sync     := 'set_flag' '(' PIPE ',' PIPE ',' expr ')'  # src pipe, dst pipe, event id
//             | 'wait_flag' '(' PIPE ',' PIPE ',' expr ')'
//             | 'pipe_barrier' '(' PIPE ')'
//             | 'set_cross_flag' '(' INT ',' PIPE ',' expr ')'   # mode, pipe, flag id
//             | 'wait_cross_flag' '(' expr [',' PIPE] ')'        # flag id [, pipe; default S]
//   PIPE     := S | V | M | MTE1 | MTE2 | MTE3 | FIX | ALL
//   region   := NAME                                     # the whole buffer
//             | NAME '[' start ':' '+' extent {',' ...} ']'
//   KIND     := serial | parallel | pipelined | unroll   # for-loops take (min, extent), not (begin, end)
//
// Expressions, loosest to tightest binding (all binary operators are left-associative;
// comparisons do not chain):
//   or · and · not · (== != < <= > >=) · (+ -) · (* / // %) · unary - · primary
//   primary  := literal | NAME | NAME '[' indices ']' | '(' [span] expr ')'
//             | ('min'|'max'|'ceildiv') '(' a ',' b ')' | MATHFN '(' args ')'
//             | 'where' '(' cond ',' t ',' f ')' | 'cast' '<' DTYPE '>' '(' expr ')'
//   `/` is true division, `//` floor division, `%` floor modulo (Python semantics).
//   literal  := INT [suffix] | FLOAT [suffix] | 'true' | 'false' | inf[suffix] | nan[suffix]
//     Without a suffix an integer is int32 and a float float32; suffixes: i8 i32 i64 u8 b (bool)
//     f16 bf16 f32 f64, e.g. `3i64`, `1.5f16`, `-infbf16`. A '-' directly before a number is part
//     of the literal (`-2`); a negation node applied to a literal prints as `-(2)`.
//   Shape variables are declared by their first use in a parameter shape (optionally typed there:
//   `M: int64`); loop, block and shape variables are int32 unless typed.
//
// Spans (PrintOptions::spans): `@line:col` or `@"file":line:col`. A span annotation before
// 'kernel' switches the parser to span mode: every node takes the span written for it, or, when
// none is written, the span of its enclosing node (the printer elides spans equal to the parent's).
// A node's span goes: before a statement or block; after a declared name; as the first thing
// inside parentheses for an expression, `(@3:9 a + b)`. Without span mode, nodes get their
// position in the text (file = the filename passed to parse_kernel).
//
// Names are resolved lexically (params and shape vars, block vars, loop vars, lets, allocs).
// Errors throw tw::ir::Error with the line and column in the text.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "tilewright/ir.h"

namespace tw::ir {

Kernel parse_kernel(std::string_view text, const std::string& filename = "<text>");

// The expression at the start of `text` (one line; the expression grammar above), for parsers of
// other texts that embed Tile IR expressions (the Ascend Program's, target/ascend/program_parser.h).
// Names are the variables in `vars`; with `declare`, an unknown name declares an int32 variable,
// which is added to `vars` (shape variables). Returns the expression and the offset in `text` of
// the first character after it (std::string::npos when it runs to the end). `at` is the position of
// text[0]: errors are tw::ir::Error located in the enclosing text.
std::pair<Expr, size_t> parse_expr_prefix(std::string_view text, std::unordered_map<std::string, Var>& vars,
                                          const Span& at, bool declare = false);

}  // namespace tw::ir
