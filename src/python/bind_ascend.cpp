// Python bindings of the Ascend backend (module tilewright._C.ascend): selecting the instructions of an
// expert-mode kernel (the Ascend program) and printing it (target/ascend/select_instructions.h), and the math
// functions with a Vector instruction (target/ascend/math_fns.h).
#include "python/bind_ascend.h"

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "target/ascend/select_instructions.h"
#include "target/ascend/math_fns.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/registry.h"

namespace nb = nanobind;
using namespace nb::literals;

void bind_ascend(nb::module_& m) {
  m.doc() = "Ascend backend: expert-mode lowering to the Ascend program";
  m.def("select_instructions", [](const tw::ir::Kernel& k, const std::string& target) {
    const tw::target::Target& t = tw::target::find_target(target);
    using namespace tw::ascend;
    return print_program(plan_memory(select_instructions(k, t), t, /*reuse=*/false));
  }, "kernel"_a, "target"_a = "ascend910b",
     "Select the instructions of an expert-mode kernel (T.Kernel(n, is_npu=True)), place its buffers (no reuse) "
     "and return the printed Ascend program.");
  // The math functions the Vector unit has an instruction for (target/ascend/math_fns.h): the
  // expert-mode tile ops T.exp(dst, src), ... in enum order.
  nb::list vector_math;
  for (tw::ir::MathFn f : tw::ir::all_of<tw::ir::MathFn>())
    if (tw::ascend::vector_instruction(f)) vector_math.append(std::string(tw::ir::mathfn_name(f)));
  m.attr("VECTOR_MATH_FUNCTIONS") = nb::module_::import_("builtins").attr("tuple")(vector_math);
}
