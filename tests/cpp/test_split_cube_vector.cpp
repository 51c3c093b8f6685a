// split_cube_vector: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/split_cube_vector.h"
