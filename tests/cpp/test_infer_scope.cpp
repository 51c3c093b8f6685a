// infer_scope: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/infer_scope.h"
