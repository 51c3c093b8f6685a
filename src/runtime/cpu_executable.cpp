#include "runtime/cpu_executable.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>

#include "runtime/disk_cache.h"
#include "runtime/embedded_headers.h"
#include "runtime/env.h"
#include "runtime/log.h"
#include "runtime/thread_pool.h"
#include "runtime/toolchain.h"
#include "target/cpu/pipeline.h"
#include "tilewright/version.h"
#include "tw_cpu/abi.h"
#include "tw_cpu/types.h"

namespace tw::runtime {

namespace fs = std::filesystem;

namespace {

// Root for everything this process writes: the cache dir, or a private temp dir when disabled.
const fs::path& work_root() {
  static const fs::path root = [] {
    const Env& e = env();
    fs::path p = e.cache_disabled ? fs::temp_directory_path() / ("tilewright-" + std::to_string(getuid()))
                                  : fs::path(e.cache_dir);
    fs::create_directories(p);
    fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace);
    return p;
  }();
  return root;
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(getpid()) + "." + std::to_string(counter++) + "." +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

const std::string& headers_hash() {
  static const std::string h = [] {
    std::string all;
    for (const auto& [path, text] : embedded_cpu_headers()) {
      all += path;
      all += '\0';
      all += text;
      all += '\0';
    }
    return sha256_hex(all);
  }();
  return h;
}

DiskCache& disk_cache() {
  static DiskCache cache((work_root() / "kernels").string(), env().cache_max_bytes);
  return cache;
}

// Scalar argument stored in the parameter's dtype.
struct ScalarSlot {
  alignas(8) unsigned char bytes[8];
};

ScalarSlot to_slot(const Arg& a, ir::DType t) {
  ScalarSlot s{};
  double d = std::holds_alternative<double>(a) ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
  int64_t i = std::holds_alternative<int64_t>(a) ? std::get<int64_t>(a) : static_cast<int64_t>(d);
  auto put = [&](auto v) { std::memcpy(s.bytes, &v, sizeof v); };
  switch (t.code) {
    case ir::DTypeCode::f16: put(tw_cpu::from_f32<tw_cpu::f16>(static_cast<float>(d))); break;
    case ir::DTypeCode::bf16: put(tw_cpu::from_f32<tw_cpu::bf16>(static_cast<float>(d))); break;
    case ir::DTypeCode::f32: put(static_cast<float>(d)); break;
    case ir::DTypeCode::f64: put(d); break;
    case ir::DTypeCode::i8: put(static_cast<int8_t>(i)); break;
    case ir::DTypeCode::i32: put(static_cast<int32_t>(i)); break;
    case ir::DTypeCode::i64: put(i); break;
    case ir::DTypeCode::u8: put(static_cast<uint8_t>(i)); break;
    case ir::DTypeCode::boolean: put(static_cast<bool>(i)); break;
  }
  return s;
}

// Blocks whose tiles need more than this run on a thread with a large stack, not the caller's.
constexpr int64_t kCallerStackTileBytes = int64_t(1) << 20;

std::mutex& launch_mutex() {
  static std::mutex* m = new std::mutex();  // never destroyed
  return *m;
}

// Runs launches whose tiles do not fit the caller's stack: one long-lived thread with the pool
// workers' stack size (64 MiB), started on first use and reused, so a launch costs two wake-ups
// rather than a thread creation, and the thread's stack pages and per-thread gemm caches
// (tw_cpu/gemm.h) stay warm between launches. Calls are serialised by its own mutex (launches
// are already serialised by launch_mutex). After fork() the child starts its own thread.
class BigStackThread {
 public:
  static BigStackThread& get() {
    static std::mutex m;
    static BigStackThread* t = nullptr;  // never destroyed (a worker may outlive static destructors)
    std::lock_guard<std::mutex> g(m);
    if (!t || t->pid_ != getpid()) t = new BigStackThread();  // a forked child's copy has no thread
    return *t;
  }

  template <class F>
  void run(F& fn) {
    std::lock_guard<std::mutex> one(call_);
    std::function<void()> job = [&fn] { fn(); };
    std::unique_lock<std::mutex> lk(m_);
    job_ = &job;
    error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lk, [this] { return job_ == nullptr; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  BigStackThread() : pid_(getpid()) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, ThreadPool::kWorkerStackBytes);
    pthread_t t;
    int rc = pthread_create(&t, &attr, &BigStackThread::body, this);
    pthread_attr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("cannot start a thread for kernel launches with big tiles");
    pthread_detach(t);
  }
  static void* body(void* p) {
    auto* self = static_cast<BigStackThread*>(p);
    std::unique_lock<std::mutex> lk(self->m_);
    for (;;) {
      self->cv_.wait(lk, [self] { return self->job_ != nullptr; });
      std::function<void()>* job = self->job_;
      lk.unlock();
      std::exception_ptr error;
      try {
        (*job)();
      } catch (...) {
        error = std::current_exception();
      }
      lk.lock();
      self->error_ = error;
      self->job_ = nullptr;
      self->cv_.notify_all();
    }
  }

  const pid_t pid_;
  std::mutex call_, m_;
  std::condition_variable cv_;
  std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
};

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(cpu::LoweredCpu lowered, const std::string& target, std::string so_path, bool from_cache)
      : source_(std::move(lowered.source)),
      tile_bytes_(lowered.tile_bytes),
      so_path_(std::move(so_path)),
      from_cache_(from_cache),
      lib_(so_path_) {
    kernel_ = lowered.kernel;
    target_ = target;
    stages_ = std::move(lowered.stages);
    auto version = lib_.function<tw_abi_version_fn>("tw_abi_version");
    if (version() != TW_CPU_ABI_VERSION)
      throw ir::Error("kernel library " + so_path_ + " has ABI version " + std::to_string(version()) + ", expected " +
                      std::to_string(TW_CPU_ABI_VERSION));
    grid_ = lib_.function<tw_grid_fn>("tw_grid");
    block_ = lib_.function<tw_block_fn>("tw_block");
  }

  std::string source(std::string_view lang) const override {
    if (lang == "c++" || lang == "cpp" || lang.empty()) return source_;
    throw ir::Error("target '" + target_ + "' generates C++; no '" + std::string(lang) + "' source", {},
                    "call get_source() or get_source(\"c++\")");
  }
  bool from_disk_cache() const override { return from_cache_; }

  void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
              const Binding& binding) const override {
    const auto& params = kernel_->params;
    std::vector<void*> ptrs(params.size());
    std::vector<ScalarSlot> scalars(params.size());
    size_t in = 0, out = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].is_output) {
        ptrs[i] = outputs.at(out++);
      } else if (params[i].scalar) {
        scalars[i] = to_slot(inputs.at(in++), params[i].scalar->dtype);
        ptrs[i] = scalars[i].bytes;
      } else {
        ptrs[i] = std::get<TensorArg>(inputs.at(in++)).data;
      }
    }
    TwArgs args{ptrs.data(), binding.shape_vars.data()};
    // Launches are serialised (the pool serialises their blocks anyway): tw_grid starts a new
    // epoch of the gemm runtime's packed-operand caches, whose shared arena must not be reused
    // while blocks of another launch still read it.
    std::unique_lock<std::mutex> serial;
    if (!in_parallel_region()) serial = std::unique_lock<std::mutex>(launch_mutex());
    int64_t ext[3] = {1, 1, 1};
    grid_(&args, ext);
    const int64_t e0 = ext[0], e1 = ext[1], total = ext[0] * ext[1] * ext[2];
    if (total <= 0) return;
    // Blocks run in row-major order (bx fastest) and the pool gives each thread a contiguous
    // share of them (runtime/thread_pool.h), i.e. whole rows of blocks. The rows of thread t's
    // share start at column t * e0 / threads (bx rotated, a bijection within every row), so the
    // threads begin on different columns: a gemm kernel's threads then pack different panels of
    // B in their first row (each packed panel is shared, see tw_cpu/gemm.h) instead of packing
    // the same ones at the same moment.
    const int64_t rows = total / e0;
    const int64_t threads = in_parallel_region() ? 1 : default_pool().size();
    auto run = [&](int64_t i) {
      const int64_t r = i / e0;
      int64_t bx = i % e0;
      if (threads > 1) bx = (bx + (r * threads / rows) * e0 / threads) % e0;
      block_(&args, bx, r % e1, r / e1);
    };
    auto run_all = [&] {
      if (total == 1)
        run(0);
      else
        default_pool().parallel_for(total, run);
    };
    // The caller's stack (often 8 MiB) may be too small for big tiles: run on a 64 MiB one.
    if (tile_bytes_ > kCallerStackTileBytes && !in_parallel_region())
      BigStackThread::get().run(run_all);
    else
      run_all();
  }

 private:
  std::string source_;
  int64_t tile_bytes_;
  std::string so_path_;
  bool from_cache_;
  SharedLibrary lib_;
  tw_grid_fn grid_ = nullptr;
  tw_block_fn block_ = nullptr;
};

std::string cache_key(const cpu::LoweredCpu& lowered) {
  std::string k = "tilewright " TILEWRIGHT_VERSION "\nabi " + std::to_string(TW_CPU_ABI_VERSION) + "\ncompiler " +
                  host_compiler().identity + "\nflags";
  for (const auto& f : default_compile_flags()) k += " " + f;
  k += "\ncpu " + cpu_features() + "\nheaders " + headers_hash() + "\nsource\n" + lowered.source;
  return sha256_hex(k);
}

std::string compile_source(const cpu::LoweredCpu& lowered, const std::string& key) {
  fs::path tmp = work_root() / "tmp";
  fs::create_directories(tmp);
  std::string stem = (tmp / (key.substr(0, 16) + "." + unique_suffix())).string();
  std::string src = stem + ".cpp", so = stem + ".so";
  std::ofstream(src) << lowered.source;
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r = compile_shared_object(src, so, {}, {cpu_include_dir()});
  {
    std::string cmd;
    for (const auto& a : r.argv) cmd += (cmd.empty() ? "" : " ") + a;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char head[160];
    std::snprintf(head, sizeof head, "compiled kernel '%s' in %.0f ms", lowered.kernel->name.c_str(), ms);
    log(LogLevel::info, head);
    log(LogLevel::debug, "compiler command: " + cmd);
  }
  if (!r.ok) {
    std::string log = r.log.size() > 4000 ? r.log.substr(0, 4000) + "\n..." : r.log;
    throw ir::Error("internal compiler error: the C++ generated for kernel '" + lowered.kernel->name +
                        "' did not compile:\n" + log,
                    lowered.kernel->span, "this is a Tilewright bug; the generated source is kept at " + src);
  }
  fs::remove(src);
  return so;
}

}  // namespace

const std::string& cpu_include_dir() {
  static const std::string dir = [] {
    fs::path final_dir = work_root() / "include" / headers_hash().substr(0, 16);
    if (fs::exists(final_dir / ".complete")) return final_dir.string();
    fs::path stage = work_root() / "include" / ("stage." + unique_suffix());
    for (const auto& [rel, text] : embedded_cpu_headers()) {
      fs::path p = stage / std::string(rel);
      fs::create_directories(p.parent_path());
      std::ofstream(p, std::ios::binary) << text;
    }
    std::ofstream(stage / ".complete") << headers_hash() << "\n";
    std::error_code ec;
    fs::rename(stage, final_dir, ec);  // atomic publish; if another process won, use theirs
    if (ec) fs::remove_all(stage);
    if (!fs::exists(final_dir / ".complete"))
      throw std::runtime_error("cannot publish the CPU runtime headers to " + final_dir.string());
    return final_dir.string();
  }();
  return dir;
}

std::shared_ptr<const Executable> compile_cpu(const ir::Kernel& kernel, const target::Target& target) {
  cpu::LoweredCpu lowered = cpu::lower_cpu(kernel);
  const std::string key = cache_key(lowered);

  // In memory, the signature matters too (which parameters are outputs does not change the C++).
  const std::string memory_key = sha256_hex(key + "\n" + lowered.stages.back().second);
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Executable>> memory;  // one entry per distinct kernel
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memory.find(memory_key); it != memory.end()) return it->second;

  const bool use_disk = !env().cache_disabled;
  std::optional<std::string> path;
  if (use_disk) path = disk_cache().lookup(key, "kernel.so");
  bool from_cache = path.has_value();
  log(LogLevel::debug, "kernel '" + kernel->name + "' key " + key.substr(0, 16) + ": " +
                           (from_cache ? "disk cache hit" : (use_disk ? "disk cache miss" : "cache disabled")));
  if (!path) {
    std::string so = compile_source(lowered, key);
    if (use_disk) {
      path = disk_cache().publish(key, "kernel.so", so);
      fs::remove(so);
    } else {
      path = so;
    }
  }
  auto exe = std::make_shared<CpuExecutable>(std::move(lowered), target.name, *path, from_cache);
  if (!use_disk) fs::remove(*path);  // the mapping stays valid after unlink
  memory.emplace(memory_key, exe);
  return exe;
}

}  // namespace tw::runtime
