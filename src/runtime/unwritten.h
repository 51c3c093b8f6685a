// Elements of an out_idx output that no store of the kernel wrote (issue 13, session 39): the
// runtime allocates such an output uninitialised (as torch.empty), so those elements return
// whatever the memory held. The ascend910b simulator's checker (simulator/written.h) and cpu's
// checked mode (TW_BOUNDS_CHECK=1, runtime/cpu_launch.h launch_cpu_checked) report them in these
// words, naming the same first element.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilewright/ir.h"

namespace tw::runtime {

// "[i, j]" of the element at linear index `at` of a row-major tensor of `shape`.
std::string element_index(const std::vector<int64_t>& shape, int64_t at);

struct UnwrittenText {
  std::string message, hint;
};
// `count` of the elements of output `tensor` (shape, dtype) of `kernel` were never written; the
// first (row-major) is at linear index `first`.
UnwrittenText unwritten_output(const std::string& kernel, const std::string& tensor, const std::vector<int64_t>& shape,
                               ir::DType dtype, int64_t first, int64_t count);

// A T.atomic_add into `count` elements of output `tensor` (shape) that nothing wrote before it, the
// first at linear index `first`: the sum adds onto whatever the memory held.
UnwrittenText unwritten_add(const std::string& tensor, const std::vector<int64_t>& shape, int64_t first, int64_t count);

}  // namespace tw::runtime
