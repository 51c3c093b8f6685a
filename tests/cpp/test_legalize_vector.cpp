// legalize_vector: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/legalize_vector.h"
