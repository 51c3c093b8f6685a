// Text form of the Tile IR: the printer. The grammar is documented at the top of ir/parser.h.
//
// The output is deterministic and stable: the same IR always prints the same text, and
// print(parse_kernel(print(k))) == print(k). Distinct Vars/Buffers that share a name (or whose
// name is a keyword or not an identifier) are renamed deterministically (x, x_1, ...).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tilewright/ir.h"

namespace tw::ir {

struct PrintOptions {
  // Print every node's source span (as "@line:col" annotations, elided when equal to the
  // enclosing node's span) so that parsing the text gives back the same spans.
  bool spans = false;
};

std::string print(const Kernel& k, const PrintOptions& opt = {});
std::string print(const Stmt& s, const PrintOptions& opt = {});
std::string print(const Expr& e, const PrintOptions& opt = {});
// "A[0:+128, k * 64:+64]" (always the explicit form; used in diagnostics).
std::string print(const Region& r);
// "128x64" for constant shapes, "[M, 64]" otherwise.
std::string print_shape(const std::vector<Expr>& shape);

namespace text {
// Words that cannot be used as names in the text form (keywords, builtin functions, literals).
bool is_reserved(std::string_view word);
// Literal suffix of a dtype ("" for the defaults int32 / float32): i8 i64 u8 b f16 bf16 f64 ...
std::string_view dtype_suffix(DType t);
std::optional<DType> dtype_from_suffix(std::string_view s);
// Shortest decimal text that reads back to exactly v ("1.5", "0.1", "1e+20", "inf", "-inf", "nan").
std::string format_float(double v);
}  // namespace text

}  // namespace tw::ir
