// map_grid: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/map_grid.h"
