#include "runtime/unwritten.h"

namespace tw::runtime {

std::string element_index(const std::vector<int64_t>& shape, int64_t at) {
  std::string index;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t n = shape[d] > 0 ? shape[d] : 1;
    index = std::to_string(at % n) + (index.empty() ? "" : ", ") + index;
    at /= n;
  }
  return "[" + (index.empty() ? std::string("0") : index) + "]";
}

UnwrittenText unwritten_output(const std::string& kernel, const std::string& tensor, const std::vector<int64_t>& shape,
                               ir::DType dtype, int64_t first, int64_t count) {
  int64_t numel = 1;
  std::string dims;
  for (int64_t d : shape) {
    numel *= d;
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  }
  UnwrittenText t;
  t.message = "element " + element_index(shape, first) + " of output '" + tensor + "' (" + std::string(dtype.name()) +
              " (" + dims + ")) " + (count > 1 ? "and " + std::to_string(count - 1) + " more of its " : "of its ") +
              std::to_string(numel) + " element(s) " + (count > 1 ? "are" : "is") + " never written by kernel '" +
              kernel + "': the runtime allocates an out_idx output uninitialised, so " +
              (count > 1 ? "they hold" : "it holds") + " whatever the memory held";
  t.hint = "write every element of " + tensor + " (store zeros where nothing else goes, e.g. T.clear a tile and copy it "
           "out over the gap), or allocate " + tensor + " yourself and pass it as an argument instead of out_idx";
  return t;
}

UnwrittenText unwritten_add(const std::string& tensor, const std::vector<int64_t>& shape, int64_t first, int64_t count) {
  UnwrittenText t;
  t.message = "atomic add into element " + element_index(shape, first) + " of output '" + tensor + "'" +
              (count > 1 ? " and " + std::to_string(count - 1) + " more" : "") +
              ", which nothing wrote before: the runtime allocates an out_idx output uninitialised, so the sum adds "
              "onto whatever the memory held";
  t.hint = "write (or T.clear a tile and copy out) every element of " + tensor + " before adding into it, add into it "
           "only (the output then starts at zero), or pass " + tensor + " yourself instead of out_idx";
  return t;
}

}  // namespace tw::runtime
