#include "target/ascend/legalize_vector.h"

namespace tw::ascend {

ir::Kernel legalize_vector(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  return kernel;
}

}  // namespace tw::ascend
