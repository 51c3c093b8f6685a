// Python bindings of the Tile IR builder (module tilewright._C.ir). Mechanical: every rule lives in
// ir.cpp; the bindings only convert strings (dtypes, scopes, ops) and (file, line, col) spans.
#pragma once

#include <nanobind/nanobind.h>
// module.cpp's tw::ir::Error translator passes std::strings to Python; it needs this caster
// (without it the translation itself fails with std::bad_cast).
#include <nanobind/stl/string.h>

void bind_ir(nanobind::module_& m);
