#include "target/ascend/expand_gemm.h"

namespace tw::ascend {

ir::Kernel expand_gemm(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  return kernel;
}

}  // namespace tw::ascend
