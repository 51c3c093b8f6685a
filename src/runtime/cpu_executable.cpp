#include "runtime/cpu_executable.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "runtime/cpu_launch.h"
#include "runtime/cpu_library.h"
#include "runtime/disk_cache.h"
#include "runtime/embedded_headers.h"
#include "runtime/env.h"
#include "runtime/toolchain.h"
#include "target/cpu/pipeline.h"
#include "tilewright/version.h"
#include "tw_cpu/abi.h"

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

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(cpu::LoweredCpu lowered, const std::string& target, std::string so_path, bool from_cache,
                const std::string& symbol)
      : source_(std::move(lowered.source)),
      tile_bytes_(lowered.tile_bytes),
      so_path_(std::move(so_path)),
      from_cache_(from_cache),
      lib_(so_path_) {
    kernel_ = lowered.kernel;
    target_ = target;
    stages_ = std::move(lowered.stages);
    auto version = lib_.function<tw_abi_version_fn>(symbol + "__abi_version");
    if (version() != TW_CPU_ABI_VERSION)
      throw ir::Error("kernel library " + so_path_ + " has ABI version " + std::to_string(version()) + ", expected " +
                      std::to_string(TW_CPU_ABI_VERSION));
    grid_ = lib_.function<tw_grid_fn>(symbol + "__grid");
    block_ = lib_.function<tw_block_fn>(symbol + "__block");
  }

  std::string source(std::string_view lang) const override {
    if (lang == "c++" || lang == "cpp" || lang.empty()) return source_;
    throw ir::Error("target '" + target_ + "' generates C++; no '" + std::string(lang) + "' source", {},
                    "call get_source() or get_source(\"c++\")");
  }
  bool from_disk_cache() const override { return from_cache_; }
  CpuCode code() const { return {source_, tile_bytes_}; }

  void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
              const Binding& binding) const override {
    launch_cpu({grid_, block_, tile_bytes_}, signature(), inputs, outputs, binding);
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

std::string cache_key(const std::string& source) {
  std::string k = "tilewright " TILEWRIGHT_VERSION "\nabi " + std::to_string(TW_CPU_ABI_VERSION) + "\ncompiler " +
                  host_compiler().identity + "\nflags";
  for (const auto& f : default_compile_flags()) k += " " + f;
  k += "\ncpu " + cpu_features() + "\nheaders " + headers_hash() + "\nsource\n" + source;
  return sha256_hex(k);
}

std::string compile_source(const std::string& source, const std::string& what, const ir::Span& span,
                           const std::string& key) {
  fs::path tmp = work_root() / "tmp";
  fs::create_directories(tmp);
  std::string stem = (tmp / (key.substr(0, 16) + "." + unique_suffix())).string();
  std::string src = stem + ".cpp", so = stem + ".so";
  std::ofstream(src) << source;
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r = compile_shared_object(src, so, {}, {cpu_include_dir()});
  if (env().verbose) {
    std::string cmd;
    for (const auto& a : r.argv) cmd += (cmd.empty() ? "" : " ") + a;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "tilewright: compiled %s in %.0f ms: %s\n", what.c_str(), ms, cmd.c_str());
  }
  if (!r.ok) {
    std::string log = r.log.size() > 4000 ? r.log.substr(0, 4000) + "\n..." : r.log;
    throw ir::Error("internal compiler error: the C++ generated for " + what + " did not compile:\n" + log, span,
                    "this is a Tilewright bug; the generated source is kept at " + src);
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

SharedObject shared_object(const std::string& source, const std::string& what, const ir::Span& span) {
  const std::string key = cache_key(source);
  const bool use_disk = !env().cache_disabled;
  std::optional<std::string> path;
  if (use_disk) path = disk_cache().lookup(key, "kernel.so");
  const bool from_cache = path.has_value();
  if (env().verbose)
    std::fprintf(stderr, "tilewright: %s key %.16s: %s\n", what.c_str(), key.c_str(),
                 from_cache ? "disk cache hit" : (use_disk ? "disk cache miss" : "cache disabled"));
  if (path) return {*path, true, false};
  if (frozen())
    throw ir::Error("the kernel cache is frozen, but " + what + " is not in it: compiling it now is refused", span,
                    "precompile every kernel the service needs at start-up (tw.precompile(specs)) before "
                    "tw.freeze() / TW_FROZEN=1");
  std::string so = compile_source(source, what, span, key);
  if (!use_disk) return {so, false, true};
  std::string published = disk_cache().publish(key, "kernel.so", so);
  fs::remove(so);
  return {published, false, false};
}

std::optional<CpuCode> cpu_code(const Executable& exe) {
  auto* c = dynamic_cast<const CpuExecutable*>(&exe);
  if (!c) return std::nullopt;
  return c->code();
}

std::shared_ptr<const Executable> compile_cpu(const ir::Kernel& kernel, const target::Target& target) {
  cpu::LoweredCpu lowered = cpu::lower_cpu(kernel);
  // Compiled as a library of one kernel (cpu_library.h), so exporting it alone reuses the object.
  const std::string source = library_source({signature_of(lowered.kernel, target.name)}, {lowered.source});

  // In memory, the signature matters too (which parameters are outputs does not change the C++).
  const std::string memory_key = sha256_hex(cache_key(source) + "\n" + lowered.stages.back().second);
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Executable>> memory;  // one entry per distinct kernel
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memory.find(memory_key); it != memory.end()) return it->second;
  }
  // Compiled without the lock, so different kernels compile in parallel (tw.precompile); when
  // two threads race on the same kernel, the first to finish is kept.
  SharedObject so = shared_object(source, "kernel '" + kernel->name + "'", kernel->span);
  const std::string symbol = library_symbol(lowered.kernel->name);
  auto exe = std::make_shared<CpuExecutable>(std::move(lowered), target.name, so.path, so.from_cache, symbol);
  if (so.temporary) fs::remove(so.path);  // the mapping stays valid after unlink
  std::lock_guard<std::mutex> lock(mu);
  return memory.emplace(memory_key, exe).first->second;
}

}  // namespace tw::runtime
