// Python bindings of the runtime (module tilewright._C): compile, executables, targets.
#pragma once

#include <nanobind/nanobind.h>

#include <string_view>

void bind_runtime(nanobind::module_& m);

// With the GIL held: sets the Python error of an interrupted wait (support::Interrupted): the
// exception a signal handler raised during it (Ctrl-C's KeyboardInterrupt), else KeyboardInterrupt.
void set_interrupted_error();

// A message of the runtime as a Python str. It may hold bytes that are not UTF-8 (a path or a
// knob value from the environment, a compiler's output), which nanobind's std::string caster
// refuses with UnicodeDecodeError: those are written \xNN instead (session 30, rel30 F1).
inline nanobind::str py_message(std::string_view s) {
  return nanobind::steal<nanobind::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()),
                                                             "backslashreplace"));
}

// A path from the runtime as a Python str, as os.fsdecode gives it (surrogateescape): a name that
// is not UTF-8 round-trips (rel30 F8).
inline nanobind::str py_path(std::string_view s) {
  return nanobind::steal<nanobind::str>(PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}
