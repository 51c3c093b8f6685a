// The CPU backend's Executable: lowers with the CPU pipeline, compiles the C++ with the host
// compiler (or loads it from the disk cache), and runs the grid on the thread pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/disk_cache.h"
#include "runtime/toolchain.h"
#include "target/registry.h"
#include "tilewright/runtime.h"

namespace tw::runtime {

std::shared_ptr<const Executable> compile_cpu(const ir::Kernel& kernel, const target::Target& target);

// The CPU target's caches (tw.cache_info()): kernels kept in memory (LRU, TW_MEMORY_CACHE_MAX),
// kernel libraries currently loaded (held by the memory cache or by live Kernel objects), and
// the disk cache (entries, bytes; zero when disabled or not created yet).
struct CpuCacheInfo {
  size_t memory_entries = 0, memory_max = 0;
  int64_t loaded_kernels = 0;
  bool disk_enabled = false;
  std::string disk_dir;
  size_t disk_entries = 0;
  uint64_t disk_bytes = 0, disk_max_bytes = 0;
};
CpuCacheInfo cpu_cache_info();

// Empties the memory cache (libraries are unloaded as their last Kernel goes away); with
// `disk`, also removes every disk cache entry.
void clear_cpu_cache(bool disk);
// Evicts least recently used disk cache entries until they hold at most `max_bytes` (`tilewright cache
// prune`): the cache's own eviction, so it keeps the usage index and races no other process.
void prune_cpu_cache(uint64_t max_bytes);

// Directory holding the tw_cpu/ headers that generated code includes (materialised from the
// copies embedded in this library, so an installed library needs no source tree), verified
// on every call (runtime/header_dir.h): call it right before each compile.
std::string cpu_include_dir();

// The gemm runtime library (tw_cpu/gemm_runtime.cpp compiled with the kernels' flags into a
// shared library whose soname is gemm_runtime_soname(); see tw_cpu/gemm.h), which every kernel
// library that calls tw_cpu::gemm depends on: loads it into this process (once; never unloaded)
// and returns its path, verified like any disk cache entry (or private to this process when the
// cache is disabled), compiled on the first miss. Throws std::runtime_error / ir::Error as a
// kernel compile does.
// `arch`: the -march value (default this process's, TW_CPU_ARCH); for another architecture (an
// export for another machine) the library is built and verified but not loaded.
std::string gemm_runtime_library(const std::string& arch = cpu_arch());
// libtw_gemm_<16 hex digits of its key>.so: one name per toolchain, so libraries built by
// different toolchains never stand in for each other.
std::string gemm_runtime_soname(const std::string& arch = cpu_arch());

// Compiles and links a one-line shared library with the kernels' flags for `arch`: "" when the host
// toolchain works, else what fails (the compiler's log, the program it could not run) and the fix
// (TW_CXX, PATH). A failed kernel compile asks it whether the environment is to blame;
// `tilewright doctor` reports it.
std::string toolchain_problem(const std::string& arch = cpu_arch());

// The generated C++ and the stack bytes of one block's tiles of a CPU executable; nullopt for
// an executable of another target.
struct CpuCode {
  std::string source;
  int64_t tile_bytes = 0;
};
std::optional<CpuCode> cpu_code(const Executable& exe);

// A shared object built from `source` with the kernel flags, taken from the disk cache when
// there (keyed like kernels: source, compiler, flags, CPU features, headers, version).
struct SharedObject {
  std::string path;
  bool from_cache = false;
  bool temporary = false;  // the disk cache is disabled: the caller removes `path` when done
  // From the disk cache: the descriptor its bytes were verified through, to load it by
  // (SharedLibrary::from_fd); empty for a temporary one (compiled by this process, private).
  std::optional<DiskCache::Verified> verified;
  SharedLibrary load() const { return verified ? SharedLibrary::from_fd(verified->fd(), path) : SharedLibrary(path); }
};
// `what` names the code in messages ("kernel 'x'"); `span` is where errors point. A miss while
// the cache is frozen (frozen()) is an ir::Error instead of a compile.
SharedObject shared_object(const std::string& source, const std::string& what, const ir::Span& span,
                           const std::string& arch = cpu_arch());

}  // namespace tw::runtime
