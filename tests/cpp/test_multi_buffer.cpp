// multi_buffer: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/multi_buffer.h"
