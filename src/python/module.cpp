// The extension module tilewright._C: the IR builder (._C.ir) and the runtime.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "python/bind_ascend.h"
#include "python/bind_ir.h"
#include "python/bind_runtime.h"
#include "support/interrupt.h"
#include "tilewright/ir.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  // Compiled kernels and IR live in process-wide caches until exit, by design (no recompiles).
  nb::set_leak_warnings(false);
  // Every tw::ir::Error surfaces as tilewright.TilewrightError with its location and hint.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tw::ir::Error& e) {
      try {
        nb::object cls = nb::module_::import_("tilewright.errors").attr("TilewrightError");
        const auto& s = e.span();
        nb::object err = cls(py_message(e.message()), py_message(s.file), s.line, s.col, py_message(e.hint()));
        PyErr_SetObject(cls.ptr(), err.ptr());
      } catch (nb::python_error& pe) {
        // Python code raised while the error was being made: a signal's KeyboardInterrupt (Ctrl-C
        // reached the compiler too, whose death is the error), a MemoryError. That is what the
        // caller sees, not nanobind's RuntimeError wrapping its traceback.
        pe.restore();
      }
    } catch (const tw::support::Interrupted&) {  // a wait ended by a signal (support/interrupt.h)
      set_interrupted_error();
    }
  });
  nb::module_ ir = m.def_submodule("ir", "Tile IR builder");
  bind_ir(ir);
  nb::module_ ascend = m.def_submodule("ascend", "Ascend backend");
  bind_ascend(ascend);
  bind_runtime(m);
}
