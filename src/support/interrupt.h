// Interrupting the long waits of a compile (the host compiler, another process's cache key lock)
// from the host's signal handling. The Python bindings install the check: it runs Python's signal
// handlers (on the main thread only; elsewhere it reports nothing, and the wait simply waits), and
// an exception one raises (Ctrl-C's KeyboardInterrupt) ends the wait: the compiler's process group
// is ended and Interrupted thrown, which the bindings raise as the handler's exception.
// A simulation is cancelled through ascend::sim::Options::cancel instead (the simulator polls it).
#pragma once

namespace tw::support {

// Not a std::exception: the handlers that turn a compile's environment failures into located
// errors let it through to the bindings.
struct Interrupted {};

using InterruptCheck = bool (*)();
// Installs `check` (nullptr: none). Called from the waits about every 100 ms, from any thread,
// and from a cpu kernel's launch about every 50 ms (runtime/cpu_launch.h).
void set_interrupt_check(InterruptCheck check);
// Whether a check is installed (the Python module's): without one only interrupt_all() interrupts.
bool interrupt_check_installed();

// Interrupts every wait that began before this call, on any thread: tw.precompile's and the
// autotuner's pool threads, which no signal reaches, once the main thread has been interrupted.
void interrupt_all();
// The count of interrupt_all() calls: a wait takes it when it begins.
unsigned long interrupt_epoch();
// Whether a wait that began at `epoch` is interrupted: interrupt_all() since, or the installed
// check reports an interrupt.
bool interrupt_requested(unsigned long epoch);

}  // namespace tw::support
