// Python bindings of the runtime: compile a kernel for a target, and call it with numpy arrays
// or any object implementing __dlpack__. Argument checking lives in Executable::bind (C++), so
// C++ users get the same errors.
#include "python/bind_runtime.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cxxabi.h>
#include <pythread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ir/parser.h"
#include "runtime/aot_export.h"
#include "runtime/ascend_executable.h"
#include "runtime/cpu_executable.h"
#include "runtime/disk_cache.h"
#include "support/env.h"
#include "support/fork.h"
#include "support/interrupt.h"
#include "runtime/log.h"
#include "runtime/manifest.h"
#include "runtime/thread_pool.h"
#include "runtime/toolchain.h"
#include "target/registry.h"
#include "transform/tile_facts.h"
#include "tune/roofline.h"
#include "tilewright/runtime.h"
#include "tilewright/version.h"

namespace nb = nanobind;
using namespace tw;

namespace {

// Taking the GIL back in a daemon thread while the interpreter finalizes makes CPython (3.11,
// 3.12) end that thread with pthread_exit(), whose forced unwind cannot cross nanobind's
// dispatch (which catches everything) or a noexcept frame: a kernel call or a compile that
// ended in a daemon thread while the process exited aborted it ("terminate called without an
// active exception", SIGABRT). Such a thread is parked instead, holding nothing (what CPython
// 3.14 does with daemon threads at exit); the process is ending and takes it along.
[[noreturn]] void park_forever() {
  for (;;) pause();
}

// nb::gil_scoped_release, except that taking the GIL back survives finalization (above).
class ReleaseGil {
 public:
  ReleaseGil() : state_(PyEval_SaveThread()) {}
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;
  ~ReleaseGil() {
    try {
      PyEval_RestoreThread(state_);
    } catch (abi::__forced_unwind&) {
      park_forever();
    }
  }

 private:
  PyThreadState* state_;
};

// nb::gil_scoped_acquire, likewise (the log sink, called from threads that compile).
class AcquireGil {
 public:
  AcquireGil() {
    try {
      state_ = PyGILState_Ensure();
    } catch (abi::__forced_unwind&) {
      park_forever();
    }
  }
  AcquireGil(const AcquireGil&) = delete;
  AcquireGil& operator=(const AcquireGil&) = delete;
  ~AcquireGil() { PyGILState_Release(state_); }

 private:
  PyGILState_STATE state_;
};

// Interrupts (Ctrl-C) of the long waits that run with the GIL released: the host compiler
// (support/interrupt.h) and a simulation (run_interruptible). Python runs signal handlers on the
// main thread only, between bytecodes; such a wait on the main thread runs them itself about every
// 100 ms (PyErr_CheckSignals). The exception a handler raises is kept until the wait has ended and
// is then raised. On other threads no signal arrives: their waits simply wait (tw.precompile and
// the autotuner end their pools' compiles with interrupt_compiles()).
unsigned long g_main_thread = 0;  // threading.main_thread().ident
struct {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
} g_interrupt;  // the handler's exception (main thread only, with the GIL)

bool python_interrupted() {
  if (PyThread_get_thread_ident() != g_main_thread || !Py_IsInitialized()) return false;
  AcquireGil gil;
  if (PyErr_CheckSignals() == 0) return false;
  Py_XDECREF(g_interrupt.type);
  Py_XDECREF(g_interrupt.value);
  Py_XDECREF(g_interrupt.traceback);
  PyErr_Fetch(&g_interrupt.type, &g_interrupt.value, &g_interrupt.traceback);
  return true;
}

// Runs body(cancel) with the GIL released. On the main thread body runs on a worker thread while
// this one waits, checking for signals every 50 ms: a handler's exception sets `cancel` (the
// simulator polls it: ascend::sim::Options::cancel) and is raised once body has stopped, whatever
// body ended with. Elsewhere body runs here, never cancelled.
template <class F>
void run_interruptible(F&& body) {
  if (PyThread_get_thread_ident() != g_main_thread) {
    ReleaseGil release;
    body(nullptr);
    return;
  }
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  {
    ReleaseGil release;
    std::thread worker([&] {
      try {
        body(&cancel);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu);
      done = true;
      cv.notify_one();
    });
    std::unique_lock<std::mutex> lk(mu);
    while (!cv.wait_for(lk, std::chrono::milliseconds(50), [&] { return done; })) {
      lk.unlock();
      if (!cancel.load() && python_interrupted()) cancel.store(true);
      lk.lock();
    }
    lk.unlock();
    worker.join();
  }
  if (cancel.load()) {
    set_interrupted_error();
    throw nb::python_error();
  }
  if (error) std::rethrow_exception(error);
}

std::optional<ir::DType> from_dlpack(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  auto code = static_cast<C>(t.code);
  if (t.lanes != 1) return std::nullopt;
  if (code == C::Float && t.bits == 16) return ir::DTypeCode::f16;
  if (code == C::Float && t.bits == 32) return ir::DTypeCode::f32;
  if (code == C::Float && t.bits == 64) return ir::DTypeCode::f64;
  if (code == C::Bfloat && t.bits == 16) return ir::DTypeCode::bf16;
  if (code == C::Int && t.bits == 8) return ir::DTypeCode::i8;
  if (code == C::Int && t.bits == 32) return ir::DTypeCode::i32;
  if (code == C::Int && t.bits == 64) return ir::DTypeCode::i64;
  if (code == C::UInt && t.bits == 8) return ir::DTypeCode::u8;
  if (code == C::Bool && t.bits == 8) return ir::DTypeCode::boolean;
  return std::nullopt;
}

// A DLPack dtype as numpy / torch name it (int16, uint32, complex64, ...), for the error on one
// that no Tilewright dtype matches.
std::string dlpack_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  const char* kind = code == C::Int       ? "int"
                     : code == C::UInt    ? "uint"
                     : code == C::Float   ? "float"
                     : code == C::Bfloat  ? "bfloat"
                     : code == C::Complex ? "complex"
                     : code == C::Bool    ? "bool"
                                          : "float";  // DLPack's float8 variants
  std::string n = kind + std::to_string(t.bits);
  return t.lanes == 1 ? n : n + "x" + std::to_string(t.lanes);
}

nb::dlpack::dtype to_dlpack(ir::DType t) {
  using C = nb::dlpack::dtype_code;
  nb::dlpack::dtype d{};
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(t.is_bool() ? 8 : t.bits());
  switch (t.code) {
    case ir::DTypeCode::f16:
    case ir::DTypeCode::f32:
    case ir::DTypeCode::f64: d.code = static_cast<uint8_t>(C::Float); break;
    case ir::DTypeCode::bf16: d.code = static_cast<uint8_t>(C::UInt); break;  // numpy has no bf16: uint16, viewed in Python
    case ir::DTypeCode::i8:
    case ir::DTypeCode::i32:
    case ir::DTypeCode::i64: d.code = static_cast<uint8_t>(C::Int); break;
    case ir::DTypeCode::u8: d.code = static_cast<uint8_t>(C::UInt); break;
    case ir::DTypeCode::boolean: d.code = static_cast<uint8_t>(C::Bool); break;
  }
  return d;
}

// Converts one Python argument. Arrays are viewed, never copied.
// A number for a scalar parameter: Python or numpy ints (anything with __index__) and floats.
Arg to_scalar(nb::handle h) {
  // A float 0-d array or tensor (numpy.array(2.0), torch.tensor(2.0)) has __index__ too, which
  // refuses it: then it is read through __float__ below.
  nb::object i;
  if (PyIndex_Check(h.ptr())) {
    i = nb::steal(PyNumber_Index(h.ptr()));
    if (!i.is_valid()) {
      nb::python_error err;  // takes the pending exception
      if (!err.matches(PyExc_TypeError) || !nb::hasattr(h, "__float__")) throw err;
    }
  }
  if (i.is_valid()) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow) throw ir::Error("integer " + nb::cast<std::string>(nb::str(h)) + " does not fit in 64 bits");
    return static_cast<int64_t>(v);
  }
  if (PyFloat_Check(h.ptr()) || PyObject_HasAttrString(h.ptr(), "__float__")) {
    // A numpy bool (np.any(m), np.bool_(True), np.array(False)) has no __index__: read as a float it
    // was "is an integer (bool), got a float" for a bool parameter (rel29 F7). It is 0 or 1, as True is.
    if (!PyFloat_Check(h.ptr()) && nb::hasattr(h, "dtype") && nb::hasattr(h.attr("dtype"), "kind") &&
        nb::cast<std::string>(nb::str(h.attr("dtype").attr("kind"))) == "b") {
      int truth = PyObject_IsTrue(h.ptr());
      if (truth < 0) throw nb::python_error();
      return static_cast<int64_t>(truth);
    }
    double v = PyFloat_AsDouble(h.ptr());
    if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return v;
  }
  throw ir::Error("expected a number, got an object of type '" + nb::cast<std::string>(nb::str(nb::type_name(h.type()))) + "'",
                  {}, "pass a Python or numpy int or float");
}

Arg to_arg(nb::handle h, bool scalar_param, std::vector<nb::object>& keep_alive) {
  if (scalar_param && !nb::hasattr(h, "ndim")) return to_scalar(h);
  if (scalar_param && nb::cast<int>(h.attr("ndim")) == 0) return to_scalar(h);  // numpy scalars, 0-d arrays
  if (PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr())) return to_scalar(h);  // reported by bind()
  nb::handle src = h;
  bool bf16 = false;
  // ml_dtypes.bfloat16 numpy arrays: numpy cannot export them, so view the bits as uint16.
  // Recognised by the name of the dtype's type (ml_dtypes' `bfloat16`; numpy's own dtype types
  // are Float32DType etc.): a cheap test, unlike hasattr(__array_interface__) or dtype.name,
  // which numpy builds in Python (together they were most of the per-call overhead).
  if (nb::object dt = nb::getattr(h, "dtype", nb::none()); !dt.is_none()) {
    nb::object tn = nb::getattr(dt.type(), "__name__", nb::none());
    if (PyUnicode_Check(tn.ptr()) && PyUnicode_CompareWithASCIIString(tn.ptr(), "bfloat16") == 0 &&
        nb::hasattr(h, "view")) {
      keep_alive.push_back(h.attr("view")("uint16"));
      src = keep_alive.back();
      bf16 = true;
    }
  }
  nb::ndarray<> a;
  if (!nb::try_cast(src, a, false)) {
    // An object that has __dlpack__ but refuses it (a numpy array of byte order '>', of dtype
    // object, a meta tensor): its own reason is the useful part of the message.
    std::string why;
    if (nb::hasattr(src, "__dlpack__")) {
      try {
        src.attr("__dlpack__")();
      } catch (nb::python_error& e) {
        why = std::string(": ") + nb::cast<std::string>(nb::str(e.value()));
      }
    }
    throw ir::Error("cannot use an object of type '" + nb::cast<std::string>(nb::str(nb::type_name(h.type()))) +
                        "' as a kernel argument" + why,
                    {}, "pass a numpy array, an object with __dlpack__, or a Python number");
  }
  TensorArg t;
  t.data = a.data();
  auto dt = bf16 ? std::optional<ir::DType>(ir::DTypeCode::bf16) : from_dlpack(a.dtype());
  if (!dt)
    throw ir::Error("unsupported array dtype " + dlpack_name(a.dtype()) + " (DLPack code " +
                        std::to_string(a.dtype().code) + ", " + std::to_string(a.dtype().bits) + " bits)",
                    {}, "supported: float16, bfloat16, float32, float64, int8, int32, int64, uint8, bool; convert "
                        "the array first (numpy: a.astype(numpy.int32); torch: t.to(torch.int32))");
  t.dtype = *dt;
  for (size_t i = 0; i < a.ndim(); ++i) {
    t.shape.push_back(a.shape(i));
    t.strides.push_back(a.stride(i));
  }
  t.device_type = a.device_type();
  t.device_id = a.device_id();
  return t;
}

// Output buffers. Small ones come from malloc. Large ones (>= 2 MiB) are mmap'ed 2 MiB-aligned
// with MADV_HUGEPAGE (as numpy does for its own arrays), and when the array dies the mapping is
// kept in a small process-wide free list and reused by the next output of the same size: a
// kernel called in a loop then writes into warm, already-mapped memory instead of taking a page
// fault (and a page clear) for every 4 KiB of a fresh output. Contents of a new output are
// unspecified either way (as with malloc).
constexpr size_t kBigOutput = size_t(2) << 20;
constexpr size_t kPoolMaxBuffers = 4;
constexpr size_t kPoolMaxBytes = size_t(1) << 30;

struct BigBufferPool {
  support::ForkSafeMutex& mu = support::fork_safe_mutex(/*leaf=*/true);  // munmap runs outside it
  std::vector<std::pair<size_t, void*>> free;  // (bytes, mapping)
  size_t bytes = 0;
  void* get(size_t n) {
    {
      std::lock_guard<support::ForkSafeMutex> lock(mu);
      for (size_t i = 0; i < free.size(); ++i)
        if (free[i].first == n) {
          void* p = free[i].second;
          bytes -= n;
          free.erase(free.begin() + static_cast<long>(i));
          return p;
        }
    }
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
  }
  void put(size_t n, void* p) noexcept {
    {
      std::lock_guard<support::ForkSafeMutex> lock(mu);
      if (free.size() < kPoolMaxBuffers && bytes + n <= kPoolMaxBytes) {
        free.emplace_back(n, p);
        bytes += n;
        return;
      }
      // full: drop the oldest entry instead, keep the most recent size
      if (!free.empty() && n <= kPoolMaxBytes) {
        auto old = free.front();
        free.erase(free.begin());
        bytes -= old.first;
        free.emplace_back(n, p);
        bytes += n;
        p = old.second;
        n = old.first;
      }
    }
    munmap(p, n);
  }
};

BigBufferPool& big_pool() {
  static BigBufferPool* pool = new BigBufferPool;  // never destroyed (capsules may die at exit)
  return *pool;
}

struct BigBuffer {
  size_t bytes;
  void* p;
};

// An output the machine cannot hold is the caller's error (a shape too large), not a crash:
// the byte count is checked for overflow, and a failed allocation names the output's size.
[[noreturn]] void output_too_large(const OutputSpec& spec, const std::string& bytes) {
  std::string shape;
  for (auto d : spec.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  throw ir::Error("cannot allocate an output of shape (" + shape + ") " + std::string(spec.dtype.name()) + ": " +
                      bytes + " bytes",
                  {}, "check the arguments' shapes (the output's shape follows from them)");
}

// Returns the numpy array; *data is its buffer.
nb::object alloc_output(const OutputSpec& spec, void** data) {
  size_t n = 1;
  for (auto s : spec.shape)
    if (s < 0 || __builtin_mul_overflow(n, static_cast<size_t>(s), &n)) output_too_large(spec, "more than 2^64");
  size_t bytes;
  if (__builtin_mul_overflow(n, spec.dtype.bytes(), &bytes) || bytes > (size_t(1) << 62))
    output_too_large(spec, "more than 2^62");
  bytes = (bytes + 63) / 64 * 64;
  std::vector<size_t> shape(spec.shape.begin(), spec.shape.end());
  void* p;
  nb::capsule owner;
  if (bytes >= kBigOutput) {
    size_t mapped = (bytes + kBigOutput - 1) / kBigOutput * kBigOutput;
    p = big_pool().get(mapped);
    if (!p) output_too_large(spec, std::to_string(bytes) + " (out of memory)");
    auto* info = new BigBuffer{mapped, p};
    owner = nb::capsule(info, [](void* q) noexcept {
      auto* b = static_cast<BigBuffer*>(q);
      big_pool().put(b->bytes, b->p);
      delete b;
    });
  } else {
    p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) output_too_large(spec, std::to_string(bytes) + " (out of memory)");
    owner = nb::capsule(p, [](void* q) noexcept { std::free(q); });
  }
  *data = p;
  return nb::cast(nb::ndarray<nb::numpy>(p, shape.size(), shape.data(), owner, nullptr, to_dlpack(spec.dtype)));
}

// Runs `exe` on Python arguments; returns the outputs (a list, in output-parameter order).
// The arguments of one call: converted inputs, the checked binding and the allocated outputs.
struct Prepared {
  std::vector<nb::object> keep_alive;
  std::vector<Arg> inputs;
  Binding binding;
  nb::list outs;
  std::vector<void*> out_ptrs;
};

void prepare(const Executable& exe, nb::handle args, Prepared& p) {
  size_t n = nb::len(args);
  p.inputs.reserve(n);
  std::vector<bool> scalar_param;
  for (const auto& param : exe.kernel()->params)
    if (!param.is_output) scalar_param.push_back(static_cast<bool>(param.scalar));
  for (size_t i = 0; i < n; ++i) {
    try {
      p.inputs.push_back(to_arg(args[i], i < scalar_param.size() && scalar_param[i], p.keep_alive));
    } catch (const ir::Error& e) {
      const auto& k = *exe.kernel();
      std::string name;
      size_t j = 0;
      for (const auto& param : k.params)
        if (!param.is_output && j++ == i) name = param.name();
      throw ir::Error("argument " + std::to_string(i) + (name.empty() ? "" : " ('" + name + "')") + " of kernel '" +
                          k.name + "': " + e.message(),
                      k.span, e.hint());
    }
  }
  p.binding = exe.bind(p.inputs);
  for (const auto& spec : p.binding.outputs) {
    void* data = nullptr;
    p.outs.append(alloc_output(spec, &data));  // (no DLPack round trip back to the pointer)
    p.out_ptrs.push_back(data);
  }
}

// Runs `exe` on Python arguments; returns the outputs (a list, in output-parameter order).
nb::list call(const Executable& exe, nb::args args) {
  Prepared p;
  prepare(exe, args, p);
  if (auto* ascend = dynamic_cast<const runtime::AscendExecutable*>(&exe)) {  // a simulation: interruptible
    run_interruptible([&](const std::atomic<bool>* cancel) { ascend->launch(p.inputs, p.out_ptrs, p.binding, cancel); });
    return p.outs;
  }
  {
    ReleaseGil release;
    exe.launch(p.inputs, p.out_ptrs, p.binding);
  }
  return p.outs;
}

// Simulated targets: runs with options and returns (outputs, report dict). Checker reports are
// returned, not raised.
nb::tuple simulate(const Executable& exe, nb::list args, bool functional, bool check, bool trace) {
  auto* ascend = dynamic_cast<const runtime::AscendExecutable*>(&exe);
  if (!ascend)
    throw ir::Error("kernel '" + exe.kernel()->name + "' is compiled for '" + exe.target() +
                        "', which is not simulated: profile() and trace() are for the ascend910b targets",
                    exe.kernel()->span, "time a cpu kernel with time.perf_counter() around calls, or use bench/run.py");
  Prepared p;
  prepare(exe, args, p);
  std::shared_ptr<const ascend::sim::Result> r;
  run_interruptible([&](const std::atomic<bool>* cancel) {
    ascend::sim::Options options{functional, check, trace, 64};
    options.cancel = cancel;
    r = ascend->simulate(p.inputs, p.out_ptrs, p.binding, options);
  });
  nb::dict d;
  d["target"] = exe.target();
  d["total_cycles"] = r->total_cycles;
  d["time_us"] = r->time_us;
  d["clock_mhz"] = r->clock_mhz;
  d["blocks"] = r->blocks;
  d["kernel_type"] = std::string(ascend::kernel_type_name(r->kernel_type));
  d["aic_used"] = r->aic_used;
  d["aiv_used"] = r->aiv_used;
  d["cube_utilisation"] = r->cube_utilisation;
  d["cube_busy"] = r->cube_busy;
  d["hbm_bytes"] = r->hbm_bytes;
  d["flops"] = r->flops;
  d["tflops"] = r->tflops;
  d["instructions"] = r->instructions;
  nb::dict busy;
  const char* cores[2] = {"AIC", "AIV"};
  for (int c = 0; c < 2; ++c) {
    nb::dict per_pipe;
    for (int q = 0; q < ascend::kNumPipes; ++q)
      per_pipe[nb::str(std::string(ascend::pipe_name(static_cast<ascend::Pipe>(q))).c_str())] = r->busy_pct[c][q];
    busy[cores[c]] = per_pipe;
  }
  d["pipe_busy_pct"] = busy;
  nb::list reports;
  for (const auto& rep : r->reports) reports.append(rep.format());
  d["reports"] = reports;
  d["dropped_reports"] = r->dropped_reports;
  d["summary"] = r->summary();
  if (trace) d["trace_json"] = r->trace_json();
  return nb::make_tuple(p.outs, d);
}

// The roofline work of a compiled kernel. Ascend: after map_grid the loops over blocks depend on
// the core index, so the kernel is counted as it was after infer_grid + simplify.
std::optional<tune::Work> work_of(const Executable& e) {
  auto w = tune::estimate_work(e.kernel());
  if (w) return w;
  auto names = e.stage_names();
  if (std::find(names.begin(), names.end(), "simplify") == names.end()) return std::nullopt;
  return tune::estimate_work(ir::parse_kernel(e.ir("simplify")));
}

}  // namespace

void set_interrupted_error() {
  if (g_interrupt.type && PyThread_get_thread_ident() == g_main_thread) {
    PyErr_Restore(g_interrupt.type, g_interrupt.value, g_interrupt.traceback);
    g_interrupt = {};
  } else {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  }
}

void bind_runtime(nb::module_& m) {
  m.attr("__version__") = TILEWRIGHT_VERSION;
  g_main_thread = nb::cast<unsigned long>(nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  support::set_interrupt_check(&python_interrupted);
  m.def("interrupt_compiles", &support::interrupt_all,
        "End the host compilers of every compile running now, on any thread (tw.precompile's and the autotuner's "
        "pools after Ctrl-C), and stop the cpu kernel launches running now between blocks: those compiles and "
        "calls raise KeyboardInterrupt.");

  nb::class_<Executable>(m, "Executable")
      .def("__call__", &call)
      .def("ascendc_files",
           [](const Executable& exe) {
             auto* a = dynamic_cast<const runtime::AscendExecutable*>(&exe);
             if (!a)
               throw ir::Error("kernel '" + exe.kernel()->name + "' is compiled for '" + exe.target() +
                                   "': AscendC projects come from the ascend910b targets",
                               exe.kernel()->span, "compile it with target=\"ascend910b\"");
             return a->ascendc_files();
           })
      .def("simulate", &simulate, nb::arg("args"), nb::arg("functional") = true, nb::arg("check") = true,
           nb::arg("trace") = false)
      .def_prop_ro("kernel", &Executable::kernel)
      .def_prop_ro("target", &Executable::target)
      .def("source", &Executable::source, nb::arg("lang") = "c++")
      .def("ir", &Executable::ir, nb::arg("stage") = "final")
      .def("stage_names", &Executable::stage_names)
      .def_prop_ro("from_disk_cache", &Executable::from_disk_cache)
      .def_prop_ro("notes",
                   [](const Executable& e) {
                     // (text, file, line) of every compile note
                     std::vector<std::tuple<std::string, std::string, int>> out;
                     for (const auto& n : e.notes()) out.emplace_back(n.text, n.span.file, n.span.line);
                     return out;
                   })
      .def_prop_ro("simulated",
                   [](const Executable& e) { return dynamic_cast<const runtime::AscendExecutable*>(&e) != nullptr; })
      .def("written_inputs",
           [](const Executable& e) {
             // Indices (among the non-output parameters) of the tensors the kernel writes in
             // place: a store, or the destination of a copy, fill, gemm or reduction.
             const auto written = transform::globals_written(e.kernel());
             std::vector<int> out;
             int i = 0;
             for (const auto& p : e.kernel()->params) {
               if (p.is_output) continue;
               if (p.buffer && written.count(p.buffer.get())) out.push_back(i);
               ++i;
             }
             return out;
           })
      .def("input_specs",
           [](const Executable& e) {
             // (name, constant shape or None, dtype name, is a tensor) of every non-output parameter
             std::vector<std::tuple<std::string, std::optional<std::vector<int64_t>>, std::string, bool>> out;
             for (const auto& p : e.kernel()->params) {
               if (p.is_output) continue;
               if (p.scalar) out.emplace_back(p.name(), std::nullopt, std::string(p.scalar->dtype.name()), false);
               else out.emplace_back(p.name(), p.buffer->const_shape(), std::string(p.buffer->dtype.name()), true);
             }
             return out;
           })
      .def("output_specs",
           [](const Executable& e, const std::vector<std::pair<std::vector<int64_t>, std::string>>& inputs) {
             // Output (shape, dtype) for inputs of these shapes and dtypes (no data is read):
             // what torch.library's fake implementation needs.
             static char dummy;
             std::vector<Arg> args;
             for (const auto& [shape, dtype] : inputs) {
               if (dtype.empty()) { args.emplace_back(int64_t{0}); continue; }
               TensorArg t;
               t.data = &dummy;
               t.shape = shape;
               auto dt = ir::parse_dtype(dtype);
               if (!dt) throw ir::Error("unknown dtype '" + dtype + "'");
               t.dtype = *dt;
               t.device_type = 1;
               args.emplace_back(std::move(t));
             }
             std::vector<std::pair<std::vector<int64_t>, std::string>> out;
             for (const auto& spec : e.bind(args).outputs) out.emplace_back(spec.shape, std::string(spec.dtype.name()));
             return out;
           })
      .def("estimate_work",
           [](const Executable& e) -> std::optional<std::tuple<double, double, double>> {
             auto w = work_of(e);
             if (!w) return std::nullopt;
             return std::make_tuple(w->flops, w->global_bytes, w->compulsory_bytes);
           })
      .def("roofline_seconds",
           [](const Executable& e, double peak_flops, double memory_bw, double cache_bw) -> std::optional<double> {
             auto w = work_of(e);
             if (!w) return std::nullopt;
             return tune::roofline_seconds(*w, peak_flops, memory_bw, cache_bw);
           },
           nb::arg("peak_flops"), nb::arg("memory_bw"), nb::arg("cache_bw") = 0.0)
      .def_prop_ro("output_dtypes", [](const Executable& e) {
        std::vector<std::string> out;
        for (const auto& p : e.kernel()->params)
          if (p.is_output) out.emplace_back(p.buffer->dtype.name());
        return out;
      });

  // The GIL is released while lowering and running the host compiler, so other Python threads
  // (progress lines, tw.precompile's parallel compiles) keep running during a compile.
  m.def("compile", &tw::compile, nb::arg("kernel"), nb::arg("target") = "cpu",
        nb::call_guard<ReleaseGil>(),  // kernels compile in parallel from threads (tw.precompile)
        "Compile a Tile IR kernel for a target; identical requests share one executable.");
  m.def("cache_info", [] {
    runtime::CpuCacheInfo c = runtime::cpu_cache_info();
    nb::dict memory, disk, out;
    memory["entries"] = c.memory_entries;
    memory["max_entries"] = c.memory_max;
    memory["loaded_kernels"] = c.loaded_kernels;
    disk["enabled"] = c.disk_enabled;
    disk["dir"] = py_path(c.disk_dir);
    disk["entries"] = c.disk_entries;
    disk["bytes"] = c.disk_bytes;
    disk["max_bytes"] = c.disk_max_bytes;
    out["memory"] = memory;
    out["disk"] = disk;
    return out;
  });
  m.def("clear_cache", &runtime::clear_cpu_cache, nb::arg("disk") = false);
  m.def("prune_cache", &runtime::prune_cpu_cache, nb::arg("max_bytes"));
  m.def("memory_cache_max", [] { return support::env().memory_cache_max; });
  m.def("set_log_sink", [](nb::object fn) {
    if (fn.is_none()) {
      runtime::set_log_sink(nullptr);
      return;
    }
    auto holder = std::make_shared<nb::object>(fn);
    runtime::set_log_sink([holder](runtime::LogLevel level, const std::string& msg) {
      if (!Py_IsInitialized()) return;
      AcquireGil gil;
      try {
        (*holder)(static_cast<int>(level), py_message(msg));
      } catch (nb::python_error& e) {
        // A signal handled while the sink ran (Ctrl-C during a compile: the sink is the only
        // Python code a compile runs) must not be lost with the sink's error: raised again once
        // the compile returns to Python.
        if (e.matches(PyExc_KeyboardInterrupt)) PyErr_SetInterrupt();
        else e.discard_as_unraisable("tilewright log sink");
      }
    });
  }, nb::arg("fn").none(), "Route runtime log lines to fn(level, message) (None: stderr when TW_VERBOSE).");
  m.def("env_flags", [] {
    const auto& e = support::env();
    return std::make_tuple(e.verbose, e.progress, e.cache_disabled, e.cache_max_bytes);
  }, "(verbose, progress, cache_disabled, cache_max_bytes) as read from the environment");
  m.def("bounds_check", [] { return support::env().bounds_check; },
        "whether TW_BOUNDS_CHECK is on in this process (cpu kernels compiled in checked mode)");
  m.def("target_info", [](std::string_view name) {
    const auto& t = target::find_target(name);
    nb::dict d;
    d["name"] = t.name;
    d["kind"] = t.kind == target::TargetKind::cpu ? "cpu" : "ascend";
    d["description"] = t.description;
    if (t.kind == target::TargetKind::ascend) {
      d["peak_fp16_tflops"] = t.ascend.peak_fp16_tflops();
      d["hbm_tbps"] = t.ascend.hbm_tbps;
      d["l2_tbps"] = t.ascend.l2_tbps;
      d["aic_cores"] = t.ascend.aic_cores;
      d["aiv_cores"] = t.ascend.aiv_cores;
      d["clock_mhz"] = t.ascend.clock_mhz;
    }
    return d;
  });

  m.def("mark_outputs", &ir::with_outputs, nb::arg("kernel"), nb::arg("indices"));
  // Indices of the tensor parameters a kernel writes (transform::globals_written): an output it never
  // writes would be returned uninitialised, so tw.compile refuses it (api34 F18).
  m.def("written_params", [](const ir::Kernel& k) {
    const auto written = transform::globals_written(k);
    std::vector<int> out;
    for (size_t i = 0; i < k->params.size(); ++i)
      if (k->params[i].buffer && written.count(k->params[i].buffer.get())) out.push_back(static_cast<int>(i));
    return out;
  }, nb::arg("kernel"));
  m.def("targets", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& t : target::all_targets()) out.emplace_back(t.name, t.description);
    return out;
  });
  m.def("find_target", [](std::string_view name) { return target::find_target(name).name; });
  m.def("target_aliases", &target::target_aliases);
  m.def("num_threads", [] { return runtime::default_pool().size(); });
  m.def("cpu_features", &runtime::cpu_features);
  m.def("cpu_arch", &runtime::cpu_arch);
  m.def("target_cpu_features", [](const std::string& arch) { return runtime::target_cpu_features(arch); },
        nb::arg("arch"));
  m.def("compiler_identity", [] { return runtime::host_compiler().identity; });
  m.def("compile_flags", [](const std::string& arch) { return runtime::default_compile_flags(arch); },
        nb::arg("arch"));
  m.def("toolchain_problem", [](const std::string& arch) { return runtime::toolchain_problem(arch); },
        nb::arg("arch"), nb::call_guard<ReleaseGil>());
  m.def("cache_dir", [] { return py_path(support::env().cache_dir); });
  // The kernel cache's per-key lock (DiskCache::KeyLock: flock on <dir>/.locks/<key>, dropped by
  // the kernel when its holder dies, the wait bounded) for other per-key work across processes:
  // the autotuner's sweeps and peak measurements (python/tilewright/autotune.py).
  struct KeyLockHandle {
    std::optional<runtime::DiskCache::KeyLock> lock;
  };
  nb::class_<KeyLockHandle>(m, "KeyLock")
      .def_prop_ro("held", [](const KeyLockHandle& h) { return h.lock && h.lock->held(); })
      .def("release", [](KeyLockHandle& h) { h.lock.reset(); });
  m.def("key_lock",
        [](const std::filesystem::path& dir, const std::string& key, double max_wait_s) {  // any path's bytes
          auto h = std::make_unique<KeyLockHandle>();
          ReleaseGil release;
          runtime::DiskCache cache(dir.string(), 0);  // only for its lock: nothing is published or evicted
          h->lock.emplace(cache.lock(key, std::chrono::milliseconds(static_cast<int64_t>(max_wait_s * 1000))));
          return h;
        },
        nb::arg("dir"), nb::arg("key"), nb::arg("max_wait_s") = runtime::DiskCache::kLockWait.count() / 1000.0);
  // a byte count as TW_CACHE_MAX_BYTES takes it (`tilewright cache prune --max-bytes 500M`); None if malformed
  m.def("parse_byte_count", &support::parse_byte_count, nb::arg("text"));

  // Deployment (python/tilewright/deploy.py).
  m.def("export_artifact",
        [](const std::vector<std::shared_ptr<const Executable>>& kernels, const std::string& dir,
           const std::string& name, const std::string& cpu_arch, const std::vector<std::string>& kernel_names) {
          runtime::ExportResult r;
          {
            ReleaseGil release;
            r = runtime::export_artifact(kernels, dir, name, cpu_arch, kernel_names);
          }
          return std::make_pair(r.files, r.library_from_cache);
        },
        nb::arg("kernels"), nb::arg("dir"), nb::arg("name"), nb::arg("cpu_arch") = "",
        nb::arg("kernel_names") = std::vector<std::string>{});
  m.def("read_manifest", [](const std::string& dir) {
    runtime::Manifest m = runtime::read_manifest(dir);
    nb::dict d;
    d["tilewright"] = m.version;
    d["target"] = m.target;
    if (!m.library.empty()) {
      d["abi"] = m.abi;
      d["compiler"] = m.compiler;
      d["cpu_arch"] = m.cpu_arch;
      d["cpu_features"] = m.cpu_features;
      d["library"] = m.library;
      if (!m.runtime.empty()) d["runtime"] = m.runtime;
    }
    nb::list files, kernels;
    for (const auto& fe : m.files) {
      nb::dict x;
      x["name"] = fe.name;
      x["sha256"] = fe.sha256;
      x["bytes"] = fe.bytes;
      files.append(x);
    }
    for (const auto& k : m.kernels) {
      nb::dict x;
      x["name"] = k.signature.kernel;
      x["symbol"] = k.symbol;
      nb::list vars, params;
      for (const auto& v : k.signature.shape_vars) vars.append(v.name);
      for (const auto& p : k.signature.params) {
        nb::dict q;
        q["name"] = p.name;
        q["dtype"] = std::string(p.dtype.name());
        q["output"] = p.is_output;
        if (p.is_scalar) {
          q["scalar"] = true;
        } else {
          nb::list shape;
          for (const auto& dim : p.shape) shape.append(dim.text);
          q["shape"] = shape;
        }
        params.append(q);
      }
      x["shape_vars"] = vars;
      x["params"] = params;
      kernels.append(x);
    }
    d["files"] = files;
    d["kernels"] = kernels;
    return d;
  }, nb::arg("dir"));
  m.def("freeze", [](bool on) {
    if (!on && support::env().frozen)  // h-hunt11b F24: it used to return as if it had worked
      throw ir::Error("tw.freeze(False): the cache is frozen by TW_FROZEN=1, which cannot be undone in the process", {},
                      "start the process without TW_FROZEN to compile kernels");
    support::freeze(on);
  }, nb::arg("on") = true);
  m.def("frozen", &support::frozen);
}
