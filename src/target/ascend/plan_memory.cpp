#include "target/ascend/plan_memory.h"

namespace tw::ascend {

Program plan_memory(const Program& program, const target::Target& target, bool reuse) {
  (void)target;
  (void)reuse;
  return program;
}

}  // namespace tw::ascend
