// plan_memory: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/plan_memory.h"
