// Python bindings of the runtime (module tilewright._C): compile, executables, targets.
#pragma once

#include <nanobind/nanobind.h>

void bind_runtime(nanobind::module_& m);
