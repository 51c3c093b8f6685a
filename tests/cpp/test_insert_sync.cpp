// insert_sync: before/after tests.
#include <gtest/gtest.h>

#include "target/ascend/insert_sync.h"
