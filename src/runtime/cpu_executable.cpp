#include "runtime/cpu_executable.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <system_error>
#include <optional>
#include <thread>
#include <unordered_map>

#include "ir/printer.h"
#include "runtime/cpu_launch.h"
#include "runtime/cpu_library.h"
#include "runtime/disk_cache.h"
#include "support/env.h"
#include "support/fork.h"
#include "support/sha256.h"
#include "runtime/header_dir.h"
#include "runtime/log.h"
#include "runtime/toolchain.h"
#include "target/cpu/codegen.h"
#include "target/cpu/pipeline.h"
#include "transform/tile_facts.h"
#include "tilewright/version.h"
#include "tw_cpu/abi.h"

namespace tw::runtime {

namespace fs = std::filesystem;

namespace {

// TW_CACHE_DISABLE=1's private directories: <TMPDIR>/tilewright-XXXXXX (mkdtemp), each holding
// `.owner`, a file its process keeps flock()ed for its whole life (a forked child inherits the
// descriptor, so the directory also stays while a child that may use it lives). The kernel drops
// the lock when the process ends however it ends, so a directory whose `.owner` can be locked
// belongs to nobody: a process killed by SIGTERM / SIGKILL (which skip the atexit removal) leaves
// one, and the next process that makes a private directory removes it.
constexpr const char* kPrivatePrefix = "tilewright-";
constexpr const char* kOwnerFile = ".owner";

// Takes `dir`'s owner lock for the rest of this process's life. The lock file is made and locked
// under another name and only then renamed to `.owner`, so that a `.owner` is never seen unlocked
// while its process lives.
void hold_owner_lock(const std::string& dir) {
  const std::string staged = dir + "/.owner-staged", owner = dir + "/" + kOwnerFile;
  int fd = open(staged.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(staged.c_str(), owner.c_str()) != 0) {
    const int e = errno;
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot lock the private temporary directory '" + dir + "': " + std::strerror(e) +
                             "; set TMPDIR to a writable local directory");
  }
  // never closed: the lock lasts as long as this process (and its forked children)
}

// Removes the private directories in `parent` whose process is gone: only a real directory (not
// a link) named tilewright-XXXXXX, owned by this user, mode 0700, holding a regular `.owner` file
// of this user that can be locked now (its process would hold it). Opened without following
// links at each step; the lock is held while the directory is removed, so two processes cleaning
// at once do not race. Directories of other users, of live processes, or without an `.owner`
// (made by an older Tilewright, or by something else) are left alone. Errors are ignored: this
// is housekeeping, never a reason to fail.
void remove_orphaned_private_dirs(const fs::path& parent) {
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != std::strlen(kPrivatePrefix) + 6 || name.rfind(kPrivatePrefix, 0) != 0) continue;
    const std::string dir = it->path().string();
    const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) continue;
    struct stat st;
    int lfd = -1;
    if (fstat(dfd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700)
      lfd = openat(dfd, kOwnerFile, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dfd);
    if (lfd < 0) continue;
    struct stat lst;
    if (fstat(lfd, &lst) == 0 && S_ISREG(lst.st_mode) && lst.st_uid == geteuid() &&
        flock(lfd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code e2;
      fs::remove_all(dir, e2);  // removes links, never follows them
      if (!e2) log(LogLevel::debug, "removed the private directory of an ended process: " + dir);
    }
    close(lfd);
  }
}

// Root for everything this process writes: the cache dir (created 0700; refused when another
// user owns it or can write it, never chmod'ed), or, with TW_CACHE_DISABLE=1, a fresh private
// directory from mkdtemp (unpredictable name, mode 0700) that this process removes at exit (and
// the next process making one removes, if this one was killed: remove_orphaned_private_dirs).
const fs::path& work_root() {
  static const fs::path root = [] {
    const support::Env& e = support::env();
    if (!e.cache_disabled) {
      ensure_private_dir(e.cache_dir, "cache directory (TW_CACHE_DIR)");
      ensure_safe_ancestors(e.cache_dir, "cache directory (TW_CACHE_DIR)",
                            "set TW_CACHE_DIR to a directory whose parents only you or root can write "
                            "(e.g. ~/.cache/tilewright)");
      return fs::path(e.cache_dir);
    }
    std::error_code tmp_error;  // TMPDIR naming no directory: std::filesystem's own message (robust38 F8)
    const fs::path parent = fs::temp_directory_path(tmp_error);
    if (tmp_error)
      throw std::runtime_error("TW_CACHE_DISABLE=1 compiles in a private directory under TMPDIR (else /tmp), and "
                               "TMPDIR names no directory (" + tmp_error.message() +
                               "); set TMPDIR to a writable directory, or unset it");
    static std::string tmp = (parent / (std::string(kPrivatePrefix) + "XXXXXX")).string();
    ensure_safe_ancestors(tmp, "private temporary directory (TW_CACHE_DISABLE=1)",
                          "set TMPDIR to a directory only you can write, or one with the sticky bit such as /tmp");
    remove_orphaned_private_dirs(parent);
    if (!mkdtemp(tmp.data()))
      throw std::runtime_error("cannot create a private temporary directory '" + tmp + "': " + std::strerror(errno) +
                               "; set TMPDIR to a writable directory");
    static const pid_t owner = getpid();
    std::atexit([] {
      if (getpid() != owner) return;  // a forked child leaves its parent's directory alone
      std::error_code ec;
      fs::remove_all(tmp, ec);
    });
    hold_owner_lock(tmp);
    return fs::path(tmp);
  }();
  return root;
}

// Compiled kernels kept loaded, so identical requests share one Executable: least recently used
// first out beyond TW_MEMORY_CACHE_MAX. An evicted kernel's library is unloaded once no Kernel
// object refers to it any more (the Executable owns the dlopen handle).
class MemoryCache {
 public:
  std::shared_ptr<const Executable> get(const std::string& key) {
    std::lock_guard<support::ForkSafeMutex> g(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  void put(const std::string& key, std::shared_ptr<const Executable> exe) {
    std::vector<std::shared_ptr<const Executable>> evicted;  // released outside the lock
    std::lock_guard<support::ForkSafeMutex> g(mu_);
    if (index_.count(key)) return;
    lru_.emplace_front(key, std::move(exe));
    index_[key] = lru_.begin();
    while (lru_.size() > static_cast<size_t>(support::env().memory_cache_max)) {
      index_.erase(lru_.back().first);
      evicted.push_back(std::move(lru_.back().second));
      lru_.pop_back();
    }
  }
  size_t size() {
    std::lock_guard<support::ForkSafeMutex> g(mu_);
    return lru_.size();
  }
  void clear() {
    std::list<std::pair<std::string, std::shared_ptr<const Executable>>> old;
    std::lock_guard<support::ForkSafeMutex> g(mu_);
    old.swap(lru_);
    index_.clear();
  }

 private:
  // A leaf lock (support/fork.h): a fork waits for it, so a forked child sees the cache whole.
  support::ForkSafeMutex& mu_ = support::fork_safe_mutex(/*leaf=*/true);
  std::list<std::pair<std::string, std::shared_ptr<const Executable>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

MemoryCache& memory_cache() {
  static MemoryCache* c = new MemoryCache();  // never destroyed: kernels may outlive static destructors
  return *c;
}

std::atomic<int64_t> g_loaded_kernels{0};

// Never destroyed: a thread may still compile while the process exits (a daemon thread).
DiskCache& disk_cache() {
  static DiskCache* cache = new DiskCache((work_root() / "kernels").string(), support::env().cache_max_bytes);
  return *cache;
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(cpu::LoweredCpu lowered, const std::string& target, const SharedObject& so, const std::string& symbol)
      : source_(std::move(lowered.source)),
      tile_bytes_(lowered.tile_bytes),
      so_path_(so.path),
      from_cache_(so.from_cache),
      lib_(so.load()) {
    kernel_ = lowered.kernel;
    target_ = target;
    stages_ = std::move(lowered.stages);
    auto version = lib_.function<tw_abi_version_fn>(symbol + "__abi_version");
    if (version() != TW_CPU_ABI_VERSION)
      throw ir::Error("kernel library " + so_path_ + " has ABI version " + std::to_string(version()) + ", expected " +
                      std::to_string(TW_CPU_ABI_VERSION));
    if (checked_) {  // the parameters the kernel writes (launch_cpu_checked restores the inputs among them)
      const auto w = transform::globals_written(kernel_);
      for (const auto& p : kernel_->params) written_.push_back(p.buffer && w.count(p.buffer.get()) > 0);
    }
    if (checked_) add_check_ = static_cast<tw_cpu::AddCheck*>(lib_.try_symbol(symbol + "__add_check"));
    grid_ = lib_.function<tw_grid_fn>(symbol + "__grid");
    block_ = lib_.function<tw_block_fn>(symbol + "__block");
    ++g_loaded_kernels;
  }
  ~CpuExecutable() override { --g_loaded_kernels; }

  std::string source(std::string_view lang) const override {
    if (lang == "c++" || lang == "cpp" || lang.empty()) return source_;
    throw ir::Error("target '" + target_ + "' generates C++; no '" + std::string(lang) + "' source", {},
                    "call get_source() or get_source(\"c++\")");
  }
  bool from_disk_cache() const override { return from_cache_; }
  CpuCode code() const { return {source_, tile_bytes_}; }

  void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
              const Binding& binding) const override {
    if (checked_)
      launch_cpu_checked({grid_, block_, tile_bytes_, add_check_}, signature(), inputs, outputs, binding, written_);
    else launch_cpu({grid_, block_, tile_bytes_}, signature(), inputs, outputs, binding);
  }

 private:
  std::string source_;
  int64_t tile_bytes_;
  std::string so_path_;
  bool from_cache_;
  SharedLibrary lib_;
  tw_grid_fn grid_ = nullptr;
  tw_block_fn block_ = nullptr;
  // compiled in checked mode (TW_BOUNDS_CHECK=1: the code is; lower_cpu read the same switch)
  const bool checked_ = support::env().bounds_check;
  std::vector<bool> written_;  // checked: per parameter, whether the kernel writes it
  tw_cpu::AddCheck* add_check_ = nullptr;  // checked, with T.atomic_add into an out_idx output
};

// What every CPU cache key covers besides the code: version, ABI, compiler, flags (with the
// -march value, TW_CPU_ARCH), the target's CPU features (this host's for "native"), headers.
std::string toolchain_key_text(const std::string& arch) {
  std::string k = "tilewright " TILEWRIGHT_VERSION "\nabi " + std::to_string(TW_CPU_ABI_VERSION) + "\ncompiler " +
                  host_compiler().identity + "\nflags";
  for (const auto& f : default_compile_flags(arch)) k += " " + f;
  return k + "\ncpu " + target_cpu_features(arch) + "\nheaders " + embedded_headers_hash();
}

// Code built for `arch` must not be loaded into this process when it may use instructions this
// CPU lacks (it would die of SIGILL at the first one): the same rule as an artifact's load
// (artifact.cpp, its manifest's cpu_features).
void require_runs_here(const std::string& arch, const ir::Span& span) {
  std::string missing;
  try {
    missing = missing_cpu_features(target_cpu_features(arch));
  } catch (const std::invalid_argument& e) {
    throw ir::Error(e.what(), span, "set TW_CPU_ARCH to native or to a -march value the host compiler accepts");
  }
  if (!missing.empty())
    throw ir::Error("TW_CPU_ARCH=" + arch + " compiles code for CPU features this CPU lacks (" + missing +
                        "): it would stop the process (SIGILL), so it is not run here",
                    span,
                    "unset TW_CPU_ARCH (native) or pick an architecture this CPU has (e.g. x86-64-v3 for AVX2 + "
                    "FMA); to build for another machine without running here, export instead: "
                    "python -m tilewright.deploy export --cpu-arch " + arch + " ...");
}

// The gemm runtime library: tw_cpu/gemm_runtime.cpp (gemm_impl.h's packing routines,
// micro-kernels and drivers behind tw_cpu::gemm, and all their state) compiled once with the
// kernels' flags into a shared library, loaded once per process (never unloaded) before any
// kernel library that calls tw_cpu::gemm, which is linked against it (a DT_NEEDED on its soname,
// which the dynamic loader resolves to the copy already loaded). A kernel's own translation unit
// compiles only the declarations (tw_cpu/gemm.h) and holds none of the runtime's statics or
// thread_locals (STB_GNU_UNIQUE symbols and thread_local destructors keep glibc from ever
// unmapping a library), so an evicted kernel is unmapped.

// Its key: the toolchain part of every kernel's key (the library's source is among the embedded
// headers) and its name. Every kernel key includes it.
std::string runtime_library_key(const std::string& arch) {
  return support::sha256_hex(toolchain_key_text(arch) + "\nlibrary tw_cpu/gemm_runtime.cpp");
}

std::string cache_key(const std::string& source, const std::string& arch) {
  return support::sha256_hex(toolchain_key_text(arch) + "\nruntime " + runtime_library_key(arch) + "\nsource\n" +
                             source);
}

std::string clipped_log(const std::string& log) {
  return log.size() > 4000 ? log.substr(0, 4000) + "\n..." : log;
}

// The program a compiler driver's log says it could not run ("g++: fatal error: cannot execute
// 'as'", "collect2: fatal error: cannot find 'ld'", clang's "Executable \"ld\" doesn't exist"; GCC
// quotes with U+2018/U+2019 in a UTF-8 locale), else "".
std::string missing_tool(const std::string& log) {
  static const char* const opens[] = {"'", "\"", "\xE2\x80\x98"};
  for (const char* head : {"cannot execute ", "cannot find ", "Executable "}) {
    for (auto at = log.find(head); at != std::string::npos; at = log.find(head, at + 1)) {
      std::size_t start = at + std::strlen(head);
      for (const char* open : opens) {
        if (log.compare(start, std::strlen(open), open) != 0) continue;
        start += std::strlen(open);
        std::size_t end = start;
        while (end < log.size() && log[end] != '\'' && log[end] != '"' && log[end] != '\xE2' && log[end] != '\n') ++end;
        if (end > start && end < log.size() && log[end] != '\n') return log.substr(start, end - start);
      }
    }
  }
  return "";
}

// A failed compile: the machine ran out of disk or memory, or the compiler was killed, or the
// host toolchain cannot build even a one-line shared library (toolchain_problem: an assembler or
// linker missing from PATH, TW_CXX naming something that is not a C++ compiler) -- not the
// kernel's fault: a std::runtime_error; `out` and, when `own_src`, `src` are removed -- else an
// internal error pointing at the kept `src`.
[[noreturn]] void compile_failed(const CompileResult& r, const std::string& what, const ir::Span& span,
                                 const std::string& src, bool own_src, const std::string& out,
                                 const std::string& arch) {
  const std::string log = clipped_log(r.log);
  auto remove_files = [&] {
    std::error_code ec;
    if (own_src) fs::remove(src, ec);
    fs::remove(out, ec);
  };
  for (const char* cause : {"No space left on device", "Disk quota exceeded", "Cannot allocate memory",
                            "virtual memory exhausted", "out of memory", "killed by signal"}) {
    if (r.log.find(cause) == std::string::npos) continue;
    remove_files();
    throw std::runtime_error("the host compiler could not build " + what + ": " + cause + " (" + host_compiler().path +
                             "):\n" + log + "\nfree disk space/memory in " + (work_root() / "tmp").string() +
                             " or set TW_CACHE_DIR/TMPDIR");
  }
  if (std::string problem = toolchain_problem(arch); !problem.empty()) {
    remove_files();
    throw std::runtime_error("the host toolchain is broken: " + problem);  // the caller names `what`
  }
  throw ir::Error("internal compiler error: the C++ generated for " + what + " did not compile:\n" + log, span,
                  "this is a Tilewright bug; the generated source is kept at " + src);
}

void log_compile(const CompileResult& r, const std::string& what, std::chrono::steady_clock::time_point t0) {
  std::string cmd;
  for (const auto& a : r.argv) cmd += (cmd.empty() ? "" : " ") + a;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char head[64];
  std::snprintf(head, sizeof head, " in %.0f ms", ms);
  log(LogLevel::info, "compiled " + what + head);
  log(LogLevel::debug, "compiler command: " + cmd);
}

// The directory of compile temporaries (work_root()/tmp, private). A process killed while it
// compiles (SIGTERM, SIGKILL: nothing unwinds to remove them) leaves its source and a partial
// library there: files older than an hour (no compile takes that long) are removed, once per
// process, the first time it compiles.
fs::path temporaries_dir() {
  const fs::path tmp = work_root() / "tmp";
  ensure_private_dir(tmp.string(), "temporary directory");
  static std::once_flag once;
  std::call_once(once, [&] {
    const auto now = fs::file_time_type::clock::now();
    std::error_code ec;
    for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code e2;
      if (!it->is_regular_file(e2) || it->is_symlink(e2)) continue;
      const auto t = fs::last_write_time(it->path(), e2);
      if (!e2 && now - t > std::chrono::hours(1)) fs::remove(it->path(), e2);
    }
  });
  return tmp;
}

// The parts of tw_cpu/gemm_runtime.cpp and the CPU-s of compiling each alone (-march=native, g++
// 12, Zen 4), the longest first: float32, bfloat16 and float16 gemm, the zero terms with the
// library's state, int8 gemm. The whole file in one compile: 18-20 CPU-s.
struct RuntimePart {
  int part;
  double cpu_s;
};
constexpr RuntimePart kRuntimeParts[] = {{1, 6.0}, {3, 5.4}, {2, 5.0}, {0, 3.9}, {4, 1.3}};

// The parts grouped into one translation unit per CPU (at most one per part), each part to the
// group with the least work so far (the longest first): the TW_GEMM_PARTS masks. One CPU: the
// whole file in one compile, as a single TU costs least; each further group adds ~0.5 CPU-s of
// parsing and the templates two groups share.
std::vector<int> runtime_part_groups(int cpus) {
  std::vector<int> masks(std::clamp(cpus, 1, int(std::size(kRuntimeParts))), 0);
  std::vector<double> work(masks.size(), 0.0);
  for (const auto& p : kRuntimeParts) {
    const auto g = std::min_element(work.begin(), work.end()) - work.begin();
    masks[g] |= 1 << p.part;
    work[g] += p.cpu_s;
  }
  return masks;
}

// Compiles the runtime library from the header directory (verified right before the compiler
// reads it) into work_root()/tmp: its part groups in parallel, one thread each, then linked into
// one library (--no-undefined: a part left out is a link error, not a library that fails when a
// kernel loads it). A user's first gemm kernel waits for the largest group instead of the whole
// file (docs/performance.md, "Session 35: the gemm runtime library in parts").
std::string build_runtime_library(const std::string& key, const std::string& arch) {
  const std::string include_dir = cpu_include_dir();
  const fs::path tmp = temporaries_dir();
  const std::string stem = (tmp / (key.substr(0, 16) + "." + unique_suffix())).string();
  const std::string lib = stem + ".so";
  const std::string src = include_dir + "/tw_cpu/gemm_runtime.cpp";
  const std::string what = "the gemm runtime library (first compile with this compiler and CPU)";
  const std::vector<int> groups = runtime_part_groups(support::available_cpus());
  const int n = int(groups.size());
  std::vector<std::string> objects;
  for (int mask : groups) objects.push_back(stem + ".parts" + std::to_string(mask) + ".o");
  struct Remove {
    const std::vector<std::string>& files;
    ~Remove() {
      std::error_code ec;
      for (const auto& f : files) fs::remove(f, ec);
    }
  } remove_objects{objects};
  std::vector<CompileResult> parts(n);
  std::exception_ptr error;  // the first thrown (an interrupt, or no compiler): it ends the other compiles
  std::mutex error_mu;
  std::atomic<bool> cancel{false};
  std::atomic<int> next{0};
  auto compile_parts = [&] {
    for (int i; (i = next++) < n;) {
      try {
        parts[i] = compile_object(src, objects[i], {"-DTW_GEMM_PARTS=" + std::to_string(groups[i])}, {include_dir},
                                  arch, &cancel);
        if (!parts[i].ok) next = n;  // the first failure is reported: no further group is started
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mu);
        if (!error) error = std::current_exception();
        next = n;
        cancel = true;  // Python's signal handlers run on the main thread only: this thread's compile saw it
      }
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) {
    try {
      threads.emplace_back(compile_parts);
    } catch (const std::system_error&) {  // no thread to be had: the parts left run on the threads started
      break;
    }
  }
  compile_parts();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  for (const auto& r : parts) {
    if (r.argv.empty()) continue;  // not started: an earlier part failed
    if (!r.ok) compile_failed(r, what, {}, src, /*own_src=*/false, lib, arch);
    std::string cmd;
    for (const auto& a : r.argv) cmd += (cmd.empty() ? "" : " ") + a;
    log(LogLevel::debug, "compiler command: " + cmd);
  }
  CompileResult r = link_shared_object(objects, lib, {"-Wl,-soname," + gemm_runtime_soname(arch), "-Wl,--no-undefined"});
  log_compile(r, what, t0);
  if (!r.ok) compile_failed(r, what, {}, src, /*own_src=*/false, lib, arch);
  return lib;
}

// Publishes `staged`, a library this process just compiled, as entry `key` and returns it verified
// through the descriptor the caller loads it by. Another process may evict the entry before it is
// looked up again (a cache far too small for its kernels, `tilewright cache prune`): the library is
// then loaded through a descriptor opened on this process's own compile before it was published (the
// compiler's output in the private tmp/, as with the cache disabled), not refused (h-rel31 F1).
DiskCache::Verified publish_own(const std::string& key, const std::string& name, const std::string& staged) {
  DiskCache::Verified own(disk_cache().entry_dir(key) + "/" + name,
                          open(staged.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  disk_cache().publish(key, name, staged);
  if (auto hit = disk_cache().lookup_open(key, name)) return std::move(*hit);
  if (own.fd() < 0)
    throw std::runtime_error("the cache entry '" + disk_cache().entry_dir(key) + "' was evicted by another process "
                             "before it could be loaded, and this process's compile cannot be opened");
  log(LogLevel::debug, "the cache entry '" + disk_cache().entry_dir(key) + "' was evicted by another process before "
                           "it was loaded: loading this process's own compile");
  return own;
}

void log_lock_timeout(const std::string& what) {
  log(LogLevel::warning, "another process has held the cache's lock on " + what + " for " +
                             std::to_string(DiskCache::kLockWait.count() / 1000) +
                             " s (stopped, or its compiler hung?): compiling it here as well");
}

// The path of the runtime library, built on the first miss. In the disk cache it is an entry
// like a kernel's (verified on every lookup: owner, mode, size, sha256 bound to its key; built
// once across processes under the key's lock); with the cache disabled, built once per process
// in the private work directory.
SharedObject runtime_library(const std::string& arch) {
  const std::string key = runtime_library_key(arch), name = gemm_runtime_soname(arch);
  if (support::env().cache_disabled) {
    static auto& mu = support::fork_safe_mutex();  // held across a build: unlocked in a forked child
    static std::map<std::string, std::string> paths;  // by arch
    std::lock_guard<support::ForkSafeMutex> g(mu);
    std::string& path = paths[arch];
    if (path.empty() || !fs::exists(path)) path = build_runtime_library(key, arch);
    return {path, false, false, std::nullopt};
  }
  auto hit = disk_cache().lookup_open(key, name);
  if (!hit) {
    DiskCache::KeyLock lock = disk_cache().lock(key);
    if (!lock.held()) log_lock_timeout("the gemm runtime library");
    hit = disk_cache().lookup_open(key, name);
    if (!hit) {
      if (support::frozen())
        throw ir::Error("the kernel cache is frozen, but the gemm runtime library is not in it (evicted or damaged): "
                        "building it now is refused", {},
                        "precompile the service's kernels (tw.precompile(specs)) in a process that is not frozen, "
                        "which rebuilds it, or raise TW_CACHE_MAX_BYTES so that it is not evicted");
      hit = publish_own(key, name, build_runtime_library(key, arch));
    }
  }
  const std::string path = hit->path();
  return {path, true, false, std::move(hit)};
}

// Loads the runtime library of this process's architecture (TW_CPU_ARCH) into it once (right
// after its lookup verified it, as a kernel library is) and returns the verified path a kernel
// library links against. Kept loaded for the life of the process: kernel libraries loaded later
// resolve their dependency on its soname to this copy.
std::atomic<bool> g_runtime_loaded{false};

std::string load_runtime_library() {
  static auto& mu = support::fork_safe_mutex();  // held across the load: unlocked in a forked child
  static SharedLibrary* loaded = nullptr;  // never unloaded: kernels may run until exit
  require_runs_here(cpu_arch(), {});
  const SharedObject lib = runtime_library(cpu_arch());
  std::lock_guard<support::ForkSafeMutex> g(mu);
  if (!loaded) {
    loaded = new SharedLibrary(lib.load());
    configure_gemm_runtime(*loaded);
    g_runtime_loaded = true;
  }
  return lib.path;
}

// The runtime library a kernel for `arch` links against: this process's, loaded, or (an export
// for another architecture) only built.
std::string runtime_library_for(const std::string& arch) {
  return arch == cpu_arch() ? load_runtime_library() : runtime_library(arch).path;
}

std::string compile_source(const std::string& source, const std::string& what, const ir::Span& span,
                           const std::string& key, const std::string& arch) {
  const fs::path tmp = temporaries_dir();
  std::string stem = (tmp / (key.substr(0, 16) + "." + unique_suffix())).string();
  std::string src = stem + ".cpp", so = stem + ".so";
  // Removes the generated source if anything below fails (a full disk while the headers are
  // written, the runtime library evicted and not rebuildable), so failures leave nothing in tmp/;
  // an internal compiler error keeps it for the report (compile_failed decides).
  struct SourceGuard {
    std::string path;
    ~SourceGuard() {
      std::error_code ec;
      if (!path.empty()) fs::remove(path, ec);
    }
  } guard{src};
  {
    std::ofstream out(src);
    out << source;
    out.close();
    if (!out) throw std::runtime_error("cannot write the generated source to '" + src + "' (disk full?)");
  }
  const std::string include_dir = cpu_include_dir();  // verified right before the compiler reads it
  const bool gemm = source.find(cpu::kGemmCall) != std::string::npos;
  std::vector<std::string> link, flags;
  if (gemm) {
    link.push_back(runtime_library_for(arch));
    flags.push_back("-Wl,-rpath,$ORIGIN");  // an exported library finds the runtime next to it
  }
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r = compile_shared_object(src, so, flags, {include_dir}, link, arch);
  if (!r.ok && gemm && !fs::exists(link[0])) {
    // the library was evicted between its lookup and the link (another process filled the cache)
    link[0] = runtime_library_for(arch);
    r = compile_shared_object(src, so, flags, {include_dir}, link, arch);
  }
  log_compile(r, what, t0);
  guard.path.clear();
  if (!r.ok) compile_failed(r, what, span, src, /*own_src=*/true, so, arch);
  fs::remove(src);
  return so;
}

}  // namespace

std::string toolchain_problem(const std::string& arch) {
  const fs::path tmp = temporaries_dir();
  const std::string stem = (tmp / ("toolchain-probe." + unique_suffix())).string();
  struct Remove {
    std::string stem;
    ~Remove() {
      std::error_code ec;
      fs::remove(stem + ".cpp", ec);
      fs::remove(stem + ".so", ec);
    }
  } guard{stem};
  {
    std::ofstream f(stem + ".cpp");
    f << "extern \"C\" int tw_toolchain_probe() { return 0; }\n";
    f.close();
    if (!f) throw std::runtime_error("cannot write '" + stem + ".cpp' (disk full?)");
  }
  CompileResult r = compile_shared_object(stem + ".cpp", stem + ".so", {}, {}, {}, arch);
  if (r.ok) return "";
  const std::string tool = missing_tool(r.log);
  const CompilerInfo& cc = host_compiler();
  return "the compiler '" + cc.path + "' (" + cc.identity +
         ") cannot build a one-line shared library with the kernels' flags" +
         (tool.empty() ? "" : ": it cannot run '" + tool + "'") + ":\n" + clipped_log(r.log) + "\nfix: " +
         (tool.empty() ? "set TW_CXX (else CXX) to a C++20 compiler that accepts GCC-style flags (g++ or clang++)"
                       : "put '" + tool + "' (binutils) on PATH, or set TW_CXX to a compiler whose assembler and "
                         "linker are installed") +
         " (docs/environment.md); `tilewright doctor` checks the toolchain";
}

CpuCacheInfo cpu_cache_info() {
  CpuCacheInfo info;
  info.memory_entries = memory_cache().size();
  info.memory_max = static_cast<size_t>(support::env().memory_cache_max);
  info.loaded_kernels = g_loaded_kernels.load();
  info.disk_enabled = !support::env().cache_disabled;
  info.disk_dir = support::env().cache_disabled ? std::string() : (fs::path(support::env().cache_dir) / "kernels").string();
  info.disk_max_bytes = support::env().cache_max_bytes;
  if (info.disk_enabled && fs::exists(info.disk_dir)) {
    info.disk_entries = disk_cache().entries();
    info.disk_bytes = disk_cache().total_bytes();
  }
  return info;
}

void clear_cpu_cache(bool disk) {
  memory_cache().clear();
  if (disk && !support::env().cache_disabled && fs::exists(fs::path(support::env().cache_dir) / "kernels")) disk_cache().clear();
}

void prune_cpu_cache(uint64_t max_bytes) {
  const fs::path dir = fs::path(support::env().cache_dir) / "kernels";
  if (fs::exists(dir)) DiskCache(dir.string(), max_bytes).evict_to_limit();
}

std::string cpu_include_dir() { return verified_header_dir(work_root().string()); }

std::string gemm_runtime_soname(const std::string& arch) {
  return "libtw_gemm_" + runtime_library_key(arch).substr(0, 16) + ".so";
}

std::string gemm_runtime_library(const std::string& arch) { return runtime_library_for(arch); }

// The cache, the disk, the compiler: an environment problem, reported as such (not as a bug).
[[noreturn]] static void environment_error(const std::string& what, const ir::Span& span, const std::exception& e) {
  throw ir::Error("cannot build " + what + ": " + e.what(), span,
                  "this is a problem with the environment (cache directory, disk, host compiler), not with the "
                  "kernel; docs/environment.md lists the settings");
}

SharedObject shared_object(const std::string& source, const std::string& what, const ir::Span& span,
                           const std::string& arch) {
  const bool use_disk = !support::env().cache_disabled;
  try {
    const std::string key = cache_key(source, arch);
    std::optional<DiskCache::Verified> hit;
    std::optional<DiskCache::KeyLock> key_lock;
    if (use_disk) {
      hit = disk_cache().lookup_open(key, "kernel.so");
      if (!hit) {  // another process may be compiling this key: wait for it, then look again
        key_lock.emplace(disk_cache().lock(key));
        if (!key_lock->held()) log_lock_timeout(what);
        hit = disk_cache().lookup_open(key, "kernel.so");
      }
    }
    log(LogLevel::debug, what + " key " + key.substr(0, 16) + ": " +
                             (hit ? "disk cache hit" : (use_disk ? "disk cache miss" : "cache disabled")));
    if (hit) {
      const std::string path = hit->path();
      return {path, true, false, std::move(hit)};
    }
    if (support::frozen())
      throw ir::Error("the kernel cache is frozen, but " + what + " is not in it: compiling it now is refused", span,
                      what.rfind("kernel library", 0) == 0  // an export of several kernels: one library of them all
                          ? "export before tw.freeze() / TW_FROZEN=1 (an export of several kernels compiles them "
                            "together into one library, which no precompile makes), or call tw.freeze(False) around "
                            "the export"
                          : "precompile every kernel the service needs at start-up (tw.precompile(specs)) before "
                            "tw.freeze() / TW_FROZEN=1");
    std::string so = compile_source(source, what, span, key, arch);
    if (!use_disk) return {so, false, true, std::nullopt};
    DiskCache::Verified fresh = publish_own(key, "kernel.so", so);
    fs::remove(so);
    const std::string path = fresh.path();
    return {path, false, false, std::move(fresh)};
  } catch (const ir::Error&) {
    throw;
  } catch (const std::exception& e) {
    environment_error(what, span, e);
  }
}

static void evict_shared_object(const std::string& source) { disk_cache().remove(cache_key(source, cpu_arch())); }

std::optional<CpuCode> cpu_code(const Executable& exe) {
  auto* c = dynamic_cast<const CpuExecutable*>(&exe);
  if (!c) return std::nullopt;
  return c->code();
}

std::shared_ptr<const Executable> compile_cpu(const ir::Kernel& kernel, const target::Target& target) {
  require_runs_here(cpu_arch(), kernel->span);
  cpu::LoweredCpu lowered = cpu::lower_cpu(kernel);
  // Compiled as a library of one kernel (cpu_library.h), so exporting it alone reuses the object.
  const std::string source = library_source({signature_of(lowered.kernel, target.name)}, {lowered.source});

  const std::string what = "kernel '" + kernel->name + "'";
  // In memory, the signature matters too (which parameters are outputs does not change the C++).
  std::string memory_key;
  try {  // the key names the compiler: a TW_CXX naming no compiler fails here (h-hunt11b F4)
    memory_key = support::sha256_hex(cache_key(source, cpu_arch()) + "\n" + ir::print(lowered.kernel));
  } catch (const ir::Error&) {
    throw;
  } catch (const std::exception& e) {
    environment_error(what, kernel->span, e);
  }
  if (auto hit = memory_cache().get(memory_key)) return hit;
  // Compiled without a lock, so different kernels compile in parallel (tw.precompile; the disk
  // cache's key lock keeps one compile per key across threads and processes).
  const std::string symbol = library_symbol(lowered.kernel->name);
  SharedObject so = shared_object(source, what, kernel->span);
  if (source.find(cpu::kGemmCall) != std::string::npos) {
    try {
      if (!g_runtime_loaded) load_runtime_library();  // a disk cache hit: its dependency must be loaded before it
      // The runtime library used after its dependents (LRU): a full cache evicts a kernel that needs
      // it before evicting it (session 23, h-hunt11b F11: it went first and left its kernels unusable).
      if (!support::env().cache_disabled) disk_cache().touch(runtime_library_key(cpu_arch()));
    } catch (const ir::Error&) {
      throw;
    } catch (const std::exception& e) {
      environment_error(what, kernel->span, e);
    }
  }
  std::shared_ptr<CpuExecutable> exe;
  try {
    exe = std::make_shared<CpuExecutable>(lowered, target.name, so, symbol);
  } catch (const ir::Error&) {
    throw;
  } catch (const std::exception& e) {
    if (!so.from_cache) environment_error(what, kernel->span, e);  // e.g. a noexec file system
    // Verified against its key, but it does not load (e.g. written by an incompatible build):
    // evict it and rebuild rather than failing on every compile.
    log(LogLevel::warning, "evicting the cache entry of " + what + ", which does not load: " + e.what());
    try {
      evict_shared_object(source);
    } catch (const std::exception& e2) {
      environment_error(what, kernel->span, e2);
    }
    so = shared_object(source, what, kernel->span);
    try {
      exe = std::make_shared<CpuExecutable>(std::move(lowered), target.name, so, symbol);
    } catch (const ir::Error&) {
      throw;
    } catch (const std::exception& e2) {
      environment_error(what, kernel->span, e2);
    }
  }
  if (so.temporary) fs::remove(so.path);  // the mapping stays valid after unlink
  memory_cache().put(memory_key, exe);
  if (auto winner = memory_cache().get(memory_key)) return winner;  // a racing thread's, if it was first
  return exe;
}

}  // namespace tw::runtime
