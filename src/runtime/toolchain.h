// The host toolchain: find the C++ compiler, describe the CPU, compile a generated
// translation unit into a shared object (argv via clone + execve, never a shell), dlopen it.
#pragma once

#include <atomic>

#include <string>
#include <utility>
#include <vector>

namespace tw::runtime {

struct CompilerInfo {
    std::string path;      // absolute path of the compiler executable
    std::string identity;  // first line of `<cxx> --version`, e.g. "g++ (Debian 12.2.0-14) 12.2.0"
};

// The compiler named by env().cxx (TW_CXX, else CXX, else g++), resolved on PATH once.
// Throws std::runtime_error if it cannot be found or run (the message says to install g++
// or set TW_CXX).
const CompilerInfo& host_compiler();

// Resolves `cxx` (a name looked up on PATH, or a path containing '/') and asks it for its
// version. Uncached; host_compiler() calls this once with env().cxx.
CompilerInfo probe_compiler(const std::string& cxx);

// Sorted, space-separated ISA features of this host that matter to code generation, e.g.
// "avx avx2 avx512bw avx512f avx512vl f16c fma". Stable across runs; part of cache keys.
std::string cpu_features();

// The CPU architecture kernels and the gemm runtime are compiled for in this process (the g++
// -march value): TW_CPU_ARCH, default "native" (this machine).
std::string cpu_arch();

// The ISA features (cpu_features()'s names) code compiled with -march=`arch` may use: for
// "native" cpu_features(), else read from the host compiler's predefined macros (once per arch).
// Throws std::invalid_argument naming TW_CPU_ARCH and the fix when the compiler does not know
// `arch`.
std::string target_cpu_features(const std::string& arch);

// The features in `required` (space-separated) that this CPU lacks, sorted; "" when none. Code
// that needs any of them must not run here (it would die of SIGILL).
std::string missing_cpu_features(const std::string& required);

// Flags every kernel is compiled with (before caller extras): -O3 -march=<arch> -std=c++20
// -fPIC -shared -fno-plt -ffp-contract=off, and -mprefer-vector-width=512 when `arch` has AVX-512F
// (target_cpu_features(arch)).
std::vector<std::string> default_compile_flags(const std::string& arch = cpu_arch());

struct CompileResult {
    bool ok = false;                // compiler ran and exited with status 0
    std::string log;                // compiler stdout + stderr, interleaved
    std::vector<std::string> argv;  // the exact command that ran
    int exit_code = -1;             // exit status; -1 if it could not run or died by a signal
};

// Runs: <host_compiler().path> <default flags for `arch`> <extra_flags> -I<dir>... -o <output> <source>
// <link_inputs>... (objects or shared libraries linked in, e.g. the gemm runtime library).
// Never throws for compile errors (ok=false, log has the diagnostics); throws
// std::runtime_error only when no compiler is found.
CompileResult compile_shared_object(const std::string& source_path,
                                    const std::string& output_path,
                                    const std::vector<std::string>& extra_flags,
                                    const std::vector<std::string>& include_dirs,
                                    const std::vector<std::string>& link_inputs = {},
                                    const std::string& arch = cpu_arch());

// compile_shared_object's command with -c instead of -shared (no link inputs): one translation
// unit of a library linked by link_shared_object.
// `cancel` set by another thread ends it as an interrupt does (Interrupted thrown).
CompileResult compile_object(const std::string& source_path, const std::string& output_path,
                             const std::vector<std::string>& extra_flags,
                             const std::vector<std::string>& include_dirs, const std::string& arch = cpu_arch(),
                             const std::atomic<bool>* cancel = nullptr);

// Runs: <host_compiler().path> -shared <extra_flags> -o <output> <objects>... (objects made by
// compile_object). Never throws for link errors, as compile_shared_object.
CompileResult link_shared_object(const std::vector<std::string>& objects, const std::string& output_path,
                                 const std::vector<std::string>& extra_flags);

struct ProcessResult {
    int exit_code = -1;      // -1 if the program could not be started or died by a signal
    std::string output;      // stdout + stderr
    std::string error;       // why it could not be started / how it died, else empty
};

// Runs argv[0] (searched on PATH) with argv, stdin from /dev/null, stdout+stderr captured, in its
// own process group, with SIGTERM as its parent-death signal (prctl PR_SET_PDEATHSIG: it ends when
// the calling thread does, so a process killed while it compiles takes its compiler driver along;
// the driver's own children, cc1plus, run to their end). Throws support::Interrupted (after ending the group) when the interrupt check
// (support/interrupt.h) reports an interrupt.
ProcessResult run_process(const std::vector<std::string>& argv, const std::atomic<bool>* cancel = nullptr);

// RAII handle over dlopen(RTLD_NOW | RTLD_LOCAL). Movable, not copyable.
class SharedLibrary {
public:
    SharedLibrary() = default;
    // Throws std::runtime_error with dlerror() text. A path without '/' is taken relative
    // to the working directory (not searched on the library path).
    explicit SharedLibrary(const std::string& path);
    // Loads the file open at `fd`, whose bytes the caller verified through that descriptor, by
    // dlopen of /proc/self/fd/<n>: what is loaded is the file verified, whatever `path` names by
    // then (a file renamed over it between the check and the load changes nothing). `path` names
    // it in messages and path(). The caller keeps and closes `fd` (it may close it at once).
    // glibc knows such a library by the name /proc/self/fd/<n> and hands the library already
    // loaded under a name to a dlopen of that name, so a number whose name a loaded library holds
    // is skipped (the file is loaded through a duplicate with a free name). Throws
    // std::runtime_error, naming the fix, where /proc/self/fd is not available (no silent load
    // by path).
    static SharedLibrary from_fd(int fd, const std::string& path);
    ~SharedLibrary();
    SharedLibrary(SharedLibrary&& other) noexcept;
    SharedLibrary& operator=(SharedLibrary&& other) noexcept;
    SharedLibrary(const SharedLibrary&) = delete;
    SharedLibrary& operator=(const SharedLibrary&) = delete;

    // Address of `name`; throws std::runtime_error with dlerror() text if it is missing.
    void* symbol(const std::string& name) const;
    // Address of `name` or nullptr.
    void* try_symbol(const std::string& name) const;
    template <class F>
    F function(const std::string& name) const {
        return reinterpret_cast<F>(symbol(name));
    }

    bool loaded() const { return handle_ != nullptr; }
    const std::string& path() const { return path_; }
    void close();

private:
    void* handle_ = nullptr;
    std::string path_;
};

// Tells a gemm runtime library just loaded (the cache's or an artifact's) whether it may use the
// AMX tile unit (TW_CPU_AMX) and logs which bf16 / int8 gemm path the process takes (a refused
// tile permission is a warning). Call before any kernel that links against it runs.
void configure_gemm_runtime(const SharedLibrary& lib);

}  // namespace tw::runtime
