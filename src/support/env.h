// Environment knobs: the one place Tilewright reads its process environment.
// Every knob is documented in docs/environment.md; add new ones here and there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tw::support {

struct Env {
    std::string cache_dir;      // TW_CACHE_DIR
    bool cache_disabled;        // TW_CACHE_DISABLE
    uint64_t cache_max_bytes;   // TW_CACHE_MAX_BYTES
    int memory_cache_max;       // TW_MEMORY_CACHE_MAX: compiled kernels kept loaded (LRU)
    std::string dump_ir_dir;    // TW_DUMP_IR (empty = off)
    std::string cxx;            // TW_CXX, else CXX, else "g++"
    int num_threads;            // TW_NUM_THREADS
    bool verbose;               // TW_VERBOSE
    bool frozen;                // TW_FROZEN
    bool bounds_check;          // TW_BOUNDS_CHECK: cpu kernels check every element index
    bool progress;              // TW_PROGRESS
    bool cpu_amx;               // TW_CPU_AMX: the gemm runtime may use the AMX tile unit (default on)
    std::string cpu_arch;       // TW_CPU_ARCH: the -march value of kernels and the gemm runtime ("native")
};

// A byte count: a whole number >= 0 with an optional binary suffix K, M, G, T (also k, KiB, ...;
// powers of 1024) or B, as TW_CACHE_MAX_BYTES takes it; nullopt when malformed or past 2^64.
std::optional<uint64_t> parse_byte_count(const std::string& text);

// Reads and validates the environment now. Throws std::invalid_argument naming the
// variable and the accepted form when a value is malformed. Used by tests.
Env read_env();

// The process-wide environment, read once on first use (thread-safe).
const Env& env();

// The knobs the C++ AOT runtime (tilewright/artifact.h) reads, each read alone: a service loading
// an artifact must not fail on a knob of the compiler it never runs (session 23, h-hunt11b F9).
// Each throws std::invalid_argument like read_env when its value is malformed.
int env_num_threads();  // TW_NUM_THREADS
bool env_cpu_amx();     // TW_CPU_AMX
bool env_verbose();     // TW_VERBOSE

// True when the kernel cache is frozen: TW_FROZEN is set, or freeze(true) was called. A
// frozen cache serves what it holds; a kernel it lacks is an error, never a compile.
bool frozen();
// Freezes (true) or unfreezes (false) the cache for this process; TW_FROZEN=1 cannot be undone.
void freeze(bool on);

// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int available_cpus();

}  // namespace tw::support
