// expand_gemm: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/expand_gemm.h"
