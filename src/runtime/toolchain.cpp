#include "runtime/toolchain.h"

#include "runtime/log.h"
#include "tilewright/ir.h"
#include "support/env.h"
#include "support/fork.h"
#include "support/interrupt.h"

#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

extern char** environ;

namespace tw::runtime {
namespace {

bool is_executable_file(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

// Resolves a program name like execvp would; returns "" if not found.
std::string find_program(const std::string& name) {
    if (name.empty()) return "";
    if (name.find('/') != std::string::npos) {
        if (!is_executable_file(name)) return "";
        if (name[0] == '/') return name;
        char* real = realpath(name.c_str(), nullptr);
        std::string r = real ? real : name;
        std::free(real);
        return r;
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    for (;;) {
        size_t end = dirs.find(':', start);
        std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos
                                                                      : end - start);
        if (dir.empty()) dir = ".";
        std::string cand = dir + "/" + name;
        if (is_executable_file(cand)) return cand;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return "";
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status))
        return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    return "exit status " + std::to_string(WEXITSTATUS(status));
}

// What the child of spawn_compiler runs, on its own stack, in the parent's memory (CLONE_VM) while
// the parent's thread waits for its exec (CLONE_VFORK): only system calls, nothing that allocates
// or takes a lock.
struct SpawnArgs {
    const char* path;
    char* const* argv;
    int out_fd;
    pid_t parent;
    sigset_t mask;  // the parent thread's signal mask, restored before the exec
    int error = 0;  // errno of the step that failed, for the parent
};

int spawn_child(void* p) {
    auto* a = static_cast<SpawnArgs*>(p);
    errno = 0;  // (the parent thread's: this child runs on its thread-local storage)
    // The parent's signal handlers must not run here (they would run on the parent's memory):
    // every handled signal goes back to its default while all are blocked (the parent blocked them).
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, nullptr, &sa) != 0) continue;
        if (sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
        sa.sa_handler = SIG_DFL;
        sa.sa_flags = 0;
        sigaction(sig, &sa, nullptr);
    }
    int devnull = -1;
    // The pipe's write end is 1 or 2 when the process runs with stdin / stdout / stderr closed: dup2 of
    // a descriptor onto itself keeps its FD_CLOEXEC, and the compiler would start without stdout or
    // stderr. A copy at 3 or above first.
    int out = a->out_fd;
    // Its own process group (an interrupt ends the compiler's children too: cc1plus, as, ld; a
    // terminal's Ctrl-C reaches this process alone, which ends the group), and SIGTERM when the
    // thread that started it ends (the process killed, even by SIGKILL): g++ then removes its
    // temporaries and exits. A parent that died before the prctl is caught by getppid().
    if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != a->parent ||
        sigprocmask(SIG_SETMASK, &a->mask, nullptr) != 0 || (out < 3 && (out = fcntl(out, F_DUPFD_CLOEXEC, 3)) < 0) ||
        (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 ||
        dup2(out, 2) < 0) {
        a->error = errno ? errno : ESRCH;
        _exit(127);
    }
    execve(a->path, a->argv, environ);
    a->error = errno;
    _exit(127);
}

// Starts the compiler `path` (stdout and stderr to out_fd) as run_process describes; returns its
// pid, or -1 with *error set. posix_spawn cannot set the parent-death signal: this is its
// clone(CLONE_VM | CLONE_VFORK) with the prctl added (no fork: no copy of the page tables, no
// pthread_atfork handlers of the libraries loaded, such as OpenBLAS's).
pid_t spawn_compiler(const char* path, char* const* argv, int out_fd, int* error) {
    constexpr size_t kStack = size_t(64) << 10;
    void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        *error = errno;
        return -1;
    }
    SpawnArgs a{path, argv, out_fd, getpid(), {}};
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &a.mask);
    pid_t pid = clone(&spawn_child, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    const int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &a.mask, nullptr);
    munmap(stack, kStack);
    if (pid < 0) {
        *error = clone_errno;
        return -1;
    }
    if (a.error != 0) {  // it failed before or at the exec, and has exited
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        *error = a.error;
        return -1;
    }
    return pid;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::atomic<bool>* cancel) {
    ProcessResult r;
    if (argv.empty()) {
        r.error = "run_process: empty argv";
        return r;
    }
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        r.error = std::string("pipe2: ") + std::strerror(errno);
        return r;
    }
    // A process forked by another thread meanwhile must not keep the write end: the read below
    // would not see EOF while it lived (support/fork.h).
    support::close_in_forked_child(fds[0]);
    support::close_in_forked_child(fds[1]);
    const std::string path = argv[0].find('/') == std::string::npos ? find_program(argv[0]) : argv[0];
    int rc = ENOENT;
    pid_t pid = path.empty() ? -1 : spawn_compiler(path.c_str(), cargv.data(), fds[1], &rc);
    support::keep_in_forked_child(fds[1]);
    close(fds[1]);
    if (pid < 0) {
        support::keep_in_forked_child(fds[0]);
        close(fds[0]);
        r.error = "cannot run '" + argv[0] + "': " + std::strerror(rc);
        return r;
    }
    // Drain the pipe until EOF before waiting, so a chatty child never blocks on a full pipe. After
    // every read and every 100 ms without output the interrupt check runs (support/interrupt.h): on an
    // interrupt the compiler's group is ended (SIGTERM, which lets g++ remove its temporary files;
    // SIGKILL after 2 s) and Interrupted thrown.
    const unsigned long epoch = support::interrupt_epoch();
    char buf[65536];
    for (;;) {
        pollfd pfd{fds[0], POLLIN, 0};
        int n = poll(&pfd, 1, 100);
        if (n < 0 && errno != EINTR) break;
        if (support::interrupt_requested(epoch) || (cancel && cancel->load())) {
            kill(-pid, SIGTERM);
            int status = 0;
            for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(10000);
            kill(-pid, SIGKILL);  // the group's other processes too, if any outlived the driver
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            support::keep_in_forked_child(fds[0]);
            close(fds[0]);
            throw support::Interrupted{};
        }
        if (n <= 0) continue;
        ssize_t k = read(fds[0], buf, sizeof buf);
        if (k > 0) {
            r.output.append(buf, static_cast<size_t>(k));
        } else if (k == 0) {
            break;
        } else if (errno != EINTR) {
            break;
        }
    }
    support::keep_in_forked_child(fds[0]);
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            r.error = std::string("waitpid: ") + std::strerror(errno);
            struct sigaction sa;
            // SIG_IGN or SA_NOCLDWAIT: the kernel reaps the children itself, and their exit status is lost
            if (errno == ECHILD && sigaction(SIGCHLD, nullptr, &sa) == 0 &&
                (sa.sa_handler == SIG_IGN || (sa.sa_flags & SA_NOCLDWAIT)))
                r.error += " (this process ignores SIGCHLD, e.g. signal.signal(signal.SIGCHLD, signal.SIG_IGN), so the "
                           "compiler's exit status is lost: leave SIGCHLD at its default while kernels compile)";
            return r;
        }
    }
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else {
        r.error = "'" + argv[0] + "' " + describe_status(status);
    }
    return r;
}

CompilerInfo probe_compiler(const std::string& cxx) {
    std::string path = find_program(cxx);
    if (path.empty())
        throw std::runtime_error(
            "C++ compiler '" + cxx +
            "' was not found (taken from TW_CXX, else CXX, else the default g++). Install g++ "
            "(e.g. `apt-get install g++`) or set TW_CXX to the path of a C++20 compiler.");
    ProcessResult pr = run_process({path, "--version"});
    if (pr.exit_code != 0)
        throw std::runtime_error("C++ compiler '" + path + "' failed to run `--version` (" +
                                 (pr.error.empty() ? "exit status " + std::to_string(pr.exit_code)
                                                   : pr.error) +
                                 "): " + pr.output +
                                 "\nInstall g++ or set TW_CXX to a working C++20 compiler.");
    std::string first = pr.output.substr(0, pr.output.find('\n'));
    while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
    return CompilerInfo{path, first};
}

const CompilerInfo& host_compiler() {
    // Not a magic static: a failed probe must be retried (and rethrown) on the next call.
    static auto& mu = support::fork_safe_mutex();  // held across the probe: a forked child gets it unlocked
    static std::unique_ptr<CompilerInfo> info;
    std::lock_guard<support::ForkSafeMutex> lock(mu);
    if (!info) info = std::make_unique<CompilerInfo>(probe_compiler(support::env().cxx));
    return *info;
}

namespace {

// The ISA features that matter to code generation, each with its /proc/cpuinfo flag (what this
// host has) and the compiler's macro (what code compiled with -march=X may use), under one name.
struct IsaFeature {
    const char* proc;   // /proc/cpuinfo flag
    const char* macro;  // predefined by g++ / clang++ -march=X
    const char* name;   // ours: cpu_features(), target_cpu_features(), manifests
};
constexpr IsaFeature kIsa[] = {
#if defined(__x86_64__) || defined(__i386__)
    {"sse4_2", "__SSE4_2__", "sse4.2"},     {"popcnt", "__POPCNT__", "popcnt"},
    {"abm", "__LZCNT__", "lzcnt"},          {"bmi1", "__BMI__", "bmi"},
    {"bmi2", "__BMI2__", "bmi2"},           {"movbe", "__MOVBE__", "movbe"},
    {"avx", "__AVX__", "avx"},              {"avx2", "__AVX2__", "avx2"},
    {"fma", "__FMA__", "fma"},              {"f16c", "__F16C__", "f16c"},
    {"avx_vnni", "__AVXVNNI__", "avxvnni"}, {"gfni", "__GFNI__", "gfni"},
    {"vaes", "__VAES__", "vaes"},           {"vpclmulqdq", "__VPCLMULQDQ__", "vpclmulqdq"},
    {"avx512f", "__AVX512F__", "avx512f"},  {"avx512bw", "__AVX512BW__", "avx512bw"},
    {"avx512vl", "__AVX512VL__", "avx512vl"}, {"avx512dq", "__AVX512DQ__", "avx512dq"},
    {"avx512cd", "__AVX512CD__", "avx512cd"}, {"avx512ifma", "__AVX512IFMA__", "avx512ifma"},
    {"avx512_vnni", "__AVX512VNNI__", "avx512vnni"}, {"avx512_bf16", "__AVX512BF16__", "avx512bf16"},
    {"avx512_fp16", "__AVX512FP16__", "avx512fp16"}, {"avx512vbmi", "__AVX512VBMI__", "avx512vbmi"},
    {"avx512_vbmi2", "__AVX512VBMI2__", "avx512vbmi2"}, {"avx512_bitalg", "__AVX512BITALG__", "avx512bitalg"},
    {"avx512_vpopcntdq", "__AVX512VPOPCNTDQ__", "avx512vpopcntdq"},
    {"amx_tile", "__AMX_TILE__", "amx-tile"}, {"amx_bf16", "__AMX_BF16__", "amx-bf16"},
    {"amx_int8", "__AMX_INT8__", "amx-int8"},
    // AMD-only instructions that -march=znver* assumes (an Intel core lacks them).
    {"sse4a", "__SSE4A__", "sse4a"},        {"clzero", "__CLZERO__", "clzero"},
    {"mwaitx", "__MWAITX__", "mwaitx"},     {"fma4", "__FMA4__", "fma4"},
    {"xop", "__XOP__", "xop"},              {"tbm", "__TBM__", "tbm"},
#elif defined(__aarch64__)
    {"asimd", "__ARM_NEON", "neon"},        {"asimdhp", "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC", "fp16"},
    {"asimddp", "__ARM_FEATURE_DOTPROD", "dotprod"}, {"i8mm", "__ARM_FEATURE_MATMUL_INT8", "i8mm"},
    {"bf16", "__ARM_FEATURE_BF16", "bf16"}, {"sve", "__ARM_FEATURE_SVE", "sve"},
    {"sve2", "__ARM_FEATURE_SVE2", "sve2"}, {"sme", "__ARM_FEATURE_SME", "sme"},
#endif
};

std::string joined(const std::set<std::string>& words) {
    std::string s;
    for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
    return s;
}

std::set<std::string> split_words(const std::string& s) {
    std::set<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.insert(w);
    return out;
}

}  // namespace

std::string cpu_features() {
    static const std::string cached = [] {
        // /proc/cpuinfo only lists features the OS has enabled (e.g. AVX-512 state saved by
        // XSAVE), which is what we need.
        std::set<std::string> flags;
        std::ifstream in("/proc/cpuinfo");
        std::string line;
        while (std::getline(in, line)) {
            // x86: "flags\t\t: fpu vme ..."; aarch64: "Features\t: fp asimd ..."
            if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
            size_t colon = line.find(':');
            if (colon == std::string::npos) continue;
            flags = split_words(line.substr(colon + 1));
            break;  // the first CPU is representative
        }
        std::set<std::string> out;
        if (!flags.empty()) {
            for (const auto& f : kIsa)
                if (flags.count(f.proc)) out.insert(f.name);
        } else {
#if defined(__x86_64__) || defined(__i386__)
            // No /proc (unusual sandbox): ask the CPU directly.
            __builtin_cpu_init();
            if (__builtin_cpu_supports("avx")) out.insert("avx");
            if (__builtin_cpu_supports("avx2")) out.insert("avx2");
            if (__builtin_cpu_supports("fma")) out.insert("fma");
            if (__builtin_cpu_supports("avx512f")) out.insert("avx512f");
            if (__builtin_cpu_supports("avx512bw")) out.insert("avx512bw");
            if (__builtin_cpu_supports("avx512vl")) out.insert("avx512vl");
            if (__builtin_cpu_supports("avx512dq")) out.insert("avx512dq");
            if (__builtin_cpu_supports("avx512cd")) out.insert("avx512cd");
            if (__builtin_cpu_supports("avx512vnni")) out.insert("avx512vnni");
            if (__builtin_cpu_supports("sse4.2")) out.insert("sse4.2");
            if (__builtin_cpu_supports("popcnt")) out.insert("popcnt");
            if (__builtin_cpu_supports("bmi")) out.insert("bmi");
            if (__builtin_cpu_supports("bmi2")) out.insert("bmi2");
#endif
        }
        return joined(out);
    }();
    return cached;
}

std::string cpu_arch() { return support::env().cpu_arch; }

std::string target_cpu_features(const std::string& arch) {
    if (arch == "native") return cpu_features();
    static auto& mu = support::fork_safe_mutex();  // held across a compiler run: unlocked in a forked child
    static std::map<std::string, std::string> cache;  // arch -> features (valid arches only)
    std::lock_guard<support::ForkSafeMutex> lock(mu);
    if (auto it = cache.find(arch); it != cache.end()) return it->second;
    // The compiler's own view of -march=<arch>: its predefined macros (no code is compiled).
    ProcessResult pr = run_process({host_compiler().path, "-march=" + arch, "-dM", "-E", "-x", "c++", "/dev/null"});
    if (!pr.error.empty() || pr.exit_code != 0) {
        std::string why = pr.output.substr(0, pr.output.find('\n'));
        throw std::invalid_argument(
            "the CPU architecture '" + arch + "' (TW_CPU_ARCH, or the export's cpu_arch) is not one the host "
            "compiler (" + host_compiler().identity + ") knows" + (why.empty() ? pr.error : ": " + why) +
            ". Use native (this machine), or a -march value such as x86-64-v3 (AVX2 + FMA), x86-64-v4 "
            "(AVX-512), haswell, znver3, skylake-avx512, sapphirerapids (`g++ --help=target` lists them).");
    }
    std::set<std::string> macros, out;
    std::istringstream lines(pr.output);
    for (std::string l; std::getline(lines, l);) {
        std::istringstream w(l);
        std::string define, name;
        if (w >> define >> name && define == "#define") macros.insert(name);
    }
    for (const auto& f : kIsa)
        if (macros.count(f.macro)) out.insert(f.name);
    return cache[arch] = joined(out);
}

std::string missing_cpu_features(const std::string& required) {
    std::set<std::string> have = split_words(cpu_features()), missing;
    for (const auto& f : split_words(required))
        if (!have.count(f)) missing.insert(f);
    return joined(missing);
}

std::vector<std::string> default_compile_flags(const std::string& arch) {
    // -ffp-contract=off: every float operation the kernel writes is rounded on its own, as the
    // language says, numpy computes and the ascend910b simulator and printed AscendC do (g++'s
    // default, fast, fused `t - (t - v)` after `t = v * c` into fma(v, c, -v): Veltkamp's split and
    // Dekker's product then computed other values than on ascend910b). The compiler's own FMAs (the
    // tw_cpu/math.h polynomials, the gemm micro-kernels, simd::fma) are written explicitly and kept.
    std::vector<std::string> f{"-O3", "-march=" + arch, "-std=c++20", "-fPIC", "-shared", "-fno-plt", "-ffp-contract=off"};
    // On AVX-512 targets the hand-written vectors (tw_cpu/simd.h: reductions, gemm, row kernels)
    // are 512-bit, but g++ and clang++ tune -march=native on Intel cores (icelake-server,
    // sapphirerapids) to auto-vectorise with 256-bit vectors, so every T.Parallel map and
    // elementwise loop ran at half the width of the code around it. Flash attention's maps (the
    // exp2 of the scores, the mask, the rescale) ran 1.5-1.7x faster at 512 bits on a Sapphire
    // Rapids core (docs/performance.md); on Zen 4, which executes 512-bit operations as two
    // 256-bit halves, the width is neutral for throughput. One width on both sides also lets a
    // fused map + row reduction hand its chunks through L1: two 256-bit stores reloaded by one
    // 512-bit load cannot be store-forwarded (rms_norm 2.3x -> 4.0x numpy on that core).
    // The TARGET's features decide (TW_CPU_ARCH), not the host's.
    if (split_words(target_cpu_features(arch)).count("avx512f")) f.push_back("-mprefer-vector-width=512");
    return f;
}

namespace {

// Runs the host compiler with `argv` (after the compiler's path) and collects the result.
CompileResult run_compiler(std::vector<std::string> args, const std::atomic<bool>* cancel = nullptr) {
    CompileResult r;
    r.argv.push_back(host_compiler().path);
    r.argv.insert(r.argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
    ProcessResult pr = run_process(r.argv, cancel);
    r.log = std::move(pr.output);
    if (!pr.error.empty()) r.log += (r.log.empty() ? "" : "\n") + pr.error;
    r.exit_code = pr.exit_code;
    r.ok = pr.error.empty() && pr.exit_code == 0;
    return r;
}

// Runs the host compiler with `args`, which write `output_path`: on an interrupt whatever the ended
// compiler wrote is removed (the caller removes its inputs); success without a written output is a
// failure.
CompileResult build_output(std::vector<std::string> args, const std::string& output_path, const char* what,
                           const std::atomic<bool>* cancel = nullptr) {
    CompileResult r;
    try {
        r = run_compiler(std::move(args), cancel);
    } catch (const support::Interrupted&) {
        ::unlink(output_path.c_str());
        throw;
    }
    // A "compiler" that succeeds without writing its output (TW_CXX a wrapper that drops it) failed
    // here, not later in the cache's publish with an error about a staged file (h-rel17 F7).
    struct stat st;
    if (r.ok && (::stat(output_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)) {
        r.ok = false;
        r.log += std::string(r.log.empty() ? "" : "\n") + "the compiler exited with status 0 but wrote no " + what + " '" +
                 output_path + "'";
    }
    return r;
}

}  // namespace

CompileResult compile_shared_object(const std::string& source_path,
                                    const std::string& output_path,
                                    const std::vector<std::string>& extra_flags,
                                    const std::vector<std::string>& include_dirs,
                                    const std::vector<std::string>& link_inputs,
                                    const std::string& arch) {
    std::vector<std::string> args = default_compile_flags(arch);
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    for (const auto& d : include_dirs) args.push_back("-I" + d);
    args.push_back("-o");
    args.push_back(output_path);
    args.push_back(source_path);
    args.insert(args.end(), link_inputs.begin(), link_inputs.end());
    return build_output(std::move(args), output_path, "library");
}

CompileResult compile_object(const std::string& source_path, const std::string& output_path,
                             const std::vector<std::string>& extra_flags,
                             const std::vector<std::string>& include_dirs, const std::string& arch,
                             const std::atomic<bool>* cancel) {
    std::vector<std::string> args = default_compile_flags(arch);
    std::erase(args, "-shared");
    args.push_back("-c");
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    for (const auto& d : include_dirs) args.push_back("-I" + d);
    args.push_back("-o");
    args.push_back(output_path);
    args.push_back(source_path);
    return build_output(std::move(args), output_path, "object file", cancel);
}

CompileResult link_shared_object(const std::vector<std::string>& objects, const std::string& output_path,
                                 const std::vector<std::string>& extra_flags) {
    std::vector<std::string> args{"-shared"};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    args.push_back("-o");
    args.push_back(output_path);
    args.insert(args.end(), objects.begin(), objects.end());
    return build_output(std::move(args), output_path, "library");
}

// ---- SharedLibrary ----

namespace {

// Why dlopen failed, with the likely cause where its message is cryptic: "failed to map segment"
// is a file system mounted noexec (hardened /tmp, /dev/shm, some container volumes; h-hunt11b F18).
std::string dlopen_failure(const std::string& path, const char* e) {
    std::string why = e ? e : "unknown dlopen error";
    if (why.find("failed to map segment") != std::string::npos)
        why += " -- the file system holding it does not allow executing code (mounted noexec?): keep the kernel "
               "cache (TW_CACHE_DIR; TMPDIR with TW_CACHE_DISABLE=1) and artifacts on one that does";
    return "cannot load shared library '" + path + "': " + why;
}

// A library file that ends before its loadable segments do (a compiler, a copy or a disk cut
// short) is mapped past its end by dlopen, and the first touch of those pages kills the process
// with SIGBUS (h-rel17 F5: a TW_CXX that left a truncated library): its program headers are read
// first and such a file is an error. What dlopen reports well itself (too short for an ELF header,
// not ELF, another class) is left to it.
void check_not_truncated(int fd, const std::string& path) {
    struct stat st;
    ElfW(Ehdr) eh;
    if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof eh) ||
        ::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_phentsize != sizeof(ElfW(Phdr)))
        return;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    auto cut_short = [&](const std::string& what) {
        throw std::runtime_error("cannot load shared library '" + path + "': the file is " + std::to_string(size) +
                                 " bytes, shorter than its " + what +
                                 " (cut short: a full disk, or a compiler (TW_CXX) or copy that did not finish)");
    };
    const uint64_t table_end = static_cast<uint64_t>(eh.e_phoff) + uint64_t{eh.e_phnum} * sizeof(ElfW(Phdr));
    if (eh.e_phoff > size || table_end > size) cut_short("program headers");
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        ElfW(Phdr) ph;
        if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != static_cast<ssize_t>(sizeof ph))
            cut_short("program headers");
        if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
            cut_short("segments");
    }
}

}  // namespace

SharedLibrary::SharedLibrary(const std::string& path) : path_(path) {
    std::string p = path.find('/') == std::string::npos ? "./" + path : path;
    if (int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); fd >= 0) {
        struct Close {
            int fd;
            ~Close() { ::close(fd); }
        } close_fd{fd};
        check_not_truncated(fd, path);
    }
    dlerror();
    handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
        throw std::runtime_error(dlopen_failure(path, dlerror()));
    }
}

namespace {

constexpr char kFdPrefix[] = "/proc/self/fd/";

// A name /proc/self/fd/<n> a library was loaded under by from_fd: glibc keeps it as the library's
// first name, or, when the file was already loaded under another name (matched by device and
// inode), as an alias of that library. Either way the name stays bound to that library while it
// stays loaded (its load address and first name), however the number is reused.
struct FdName {
    long n;
    dev_t dev;
    ino_t ino;
    ElfW(Addr) addr;
    std::string holder;
};

struct LoadedLibraries {
    std::set<long> fd_names;                              // first names /proc/self/fd/<n>
    std::set<std::pair<ElfW(Addr), std::string>> loaded;  // every library: address, first name
};

// Held across a dlopen: a forked child gets it unlocked (support/fork.h). The list of names it
// guards is edited in short steps (before and after the dlopen); only a fork landing inside one
// of them leaves the child a half-edited list.
support::ForkSafeMutex& loader_mutex() {
    static auto& mu = support::fork_safe_mutex();
    return mu;
}

int note_library(struct dl_phdr_info* info, size_t, void* data) {
    auto* libs = static_cast<LoadedLibraries*>(data);
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    libs->loaded.emplace(info->dlpi_addr, name);
    if (std::strncmp(name, kFdPrefix, sizeof kFdPrefix - 1) == 0) {
        char* end = nullptr;
        long n = std::strtol(name + sizeof kFdPrefix - 1, &end, 10);
        if (end && *end == '\0' && n >= 0) libs->fd_names.insert(n);
    }
    return 0;
}

}  // namespace

SharedLibrary SharedLibrary::from_fd(int fd, const std::string& path) {
    struct stat st;
    if (::stat((kFdPrefix + std::to_string(fd)).c_str(), &st) != 0)
        throw std::runtime_error("cannot load '" + path + "' through the descriptor it was verified through: " +
                                 kFdPrefix + std::to_string(fd) + ": " + std::strerror(errno) +
                                 " (Tilewright loads verified libraries through /proc/self/fd: mount /proc)");
    if (::fstat(fd, &st) != 0)
        throw std::runtime_error("cannot load '" + path + "': fstat: " + std::strerror(errno));
    check_not_truncated(fd, path);
    // One load at a time, and no unload meanwhile (close() takes this lock too): the names in
    // use are read, one chosen and loaded under it, and a library found loaded stays loaded.
    static auto* names = new std::vector<FdName>();  // never destroyed: loads may follow static destructors
    std::lock_guard<support::ForkSafeMutex> g(loader_mutex());
    LoadedLibraries libs;
    dl_iterate_phdr(note_library, &libs);
    names->erase(std::remove_if(names->begin(), names->end(),
                                [&](const FdName& a) { return !libs.loaded.count({a.addr, a.holder}); }),
                 names->end());
    auto open_as = [&](const std::string& name) {
        SharedLibrary lib;
        dlerror();
        lib.handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib.handle_) {
            throw std::runtime_error(dlopen_failure(path, dlerror()));
        }
        lib.path_ = path;
        struct link_map* lm = nullptr;
        if (dlinfo(lib.handle_, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
            const char* e = dlerror();
            const std::string why = e ? e : "no link map";
            dlclose(std::exchange(lib.handle_, nullptr));  // not close(): the lock is held here
            throw std::runtime_error("cannot load shared library '" + path + "': dlinfo: " + why);
        }
        return std::make_pair(std::move(lib), lm);
    };
    // The same file loaded already through a name of ours: that name, which glibc finds without
    // opening anything, so no new alias is added for each load of a library that stays loaded.
    for (const auto& a : *names)
        if (a.dev == st.st_dev && a.ino == st.st_ino) {
            auto [lib, lm] = open_as(kFdPrefix + std::to_string(a.n));
            if (lm->l_addr != a.addr || a.holder != (lm->l_name ? lm->l_name : "")) {
                dlclose(std::exchange(lib.handle_, nullptr));
                throw std::runtime_error("cannot load '" + path + "': glibc gave another library");
            }
            return std::move(lib);
        }
    std::set<long> taken = std::move(libs.fd_names);
    for (const auto& a : *names) taken.insert(a.n);
    // The lowest free number whose name no loaded library holds (at most taken.size() tries; the
    // duplicates are closed once the library is loaded).
    int n = fd;
    std::vector<int> dups;
    struct CloseDups {
        std::vector<int>& fds;
        ~CloseDups() {
            for (int d : fds) ::close(d);
        }
    } close_dups{dups};
    while (taken.count(n)) {
        n = ::fcntl(fd, F_DUPFD_CLOEXEC, n + 1);
        if (n < 0) {
            // EINVAL: the next number is at the limit. Each loaded library keeps the number it was
            // loaded through (its name), closed or not, so the limit bounds the libraries loaded at
            // once, however few descriptors are open (rel30 F3).
            const int err = errno;
            struct rlimit rl {};
            ::getrlimit(RLIMIT_NOFILE, &rl);
            throw std::runtime_error(
                "cannot load '" + path + "': no free descriptor number to load it through (" + std::strerror(err) +
                "): " + std::to_string(taken.size()) + " libraries are loaded through /proc/self/fd names, and the "
                "descriptor limit (RLIMIT_NOFILE) is " + std::to_string(static_cast<long long>(rl.rlim_cur)) +
                "; raise it (`ulimit -n`, resource.setrlimit) or keep fewer kernels loaded (a lower "
                "TW_MEMORY_CACHE_MAX, fewer Kernel objects held)");
        }
        dups.push_back(n);
    }
    auto [lib, lm] = open_as(kFdPrefix + std::to_string(n));
    names->push_back({n, st.st_dev, st.st_ino, lm->l_addr, lm->l_name ? lm->l_name : ""});
    return std::move(lib);
}

SharedLibrary::~SharedLibrary() { close(); }

SharedLibrary::SharedLibrary(SharedLibrary&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), path_(std::move(o.path_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& o) noexcept {
    if (this != &o) {
        close();
        handle_ = std::exchange(o.handle_, nullptr);
        path_ = std::move(o.path_);
    }
    return *this;
}

void SharedLibrary::close() {
    if (handle_) {
        std::lock_guard<support::ForkSafeMutex> g(loader_mutex());  // not while from_fd looks at what is loaded
        dlclose(handle_);
        handle_ = nullptr;
    }
}

void* SharedLibrary::try_symbol(const std::string& name) const {
    if (!handle_) return nullptr;
    return dlsym(handle_, name.c_str());
}

void* SharedLibrary::symbol(const std::string& name) const {
    if (!handle_)
        throw std::runtime_error("symbol '" + name + "' requested from an unloaded SharedLibrary");
    dlerror();
    void* p = dlsym(handle_, name.c_str());
    if (const char* e = dlerror())
        throw std::runtime_error("symbol '" + name + "' not found in '" + path_ + "': " + e +
                                 " (is it declared extern \"C\"?)");
    return p;
}

void configure_gemm_runtime(const SharedLibrary& lib) {
  using Setup = const char* (*)(int);
  if (auto setup = reinterpret_cast<Setup>(lib.try_symbol("tw_cpu_gemm_amx_setup"))) {
    bool amx = true;
    try {
      amx = support::env_cpu_amx();
    } catch (const std::invalid_argument& e) {
      throw ir::Error(e.what(), {}, "set TW_CPU_AMX to 1 or 0, or unset it (docs/environment.md)");
    }
    const std::string line = setup(amx ? 1 : 0);
    log(line.find("refused") != std::string::npos ? LogLevel::warning : LogLevel::info, line);
  }
}

}  // namespace tw::runtime
