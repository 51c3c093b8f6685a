#include "target/ascend/split_cube_vector.h"

namespace tw::ascend {

ir::Kernel split_cube_vector(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  return kernel;
}

}  // namespace tw::ascend
