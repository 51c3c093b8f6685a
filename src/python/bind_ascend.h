#pragma once

#include <nanobind/nanobind.h>

// Module tilewright._C.ascend: the Ascend lowering (expert mode) for tests and tools.
void bind_ascend(nanobind::module_& m);
