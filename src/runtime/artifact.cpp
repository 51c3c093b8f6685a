// The AOT runtime (tilewright/artifact.h): loading and verifying an exported artifact, and
// running its kernels with the same argument checks (tw::bind) and launcher (launch_cpu) as
// kernels compiled in-process.
#include "tilewright/artifact.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "runtime/cpu_launch.h"
#include "runtime/disk_cache.h"
#include "support/fork.h"
#include "support/sha256.h"
#include "runtime/manifest.h"
#include "runtime/toolchain.h"
#include "tw_cpu/abi.h"

namespace tw {

namespace {

const char* kReexport = "export the kernels again on a machine like this one (kernel.export(dir))";

// A library loaded through the open descriptor of the file that was verified
// (SharedLibrary::from_fd); the descriptor is closed with it.
struct VerifiedLibrary {
  runtime::SharedLibrary lib;
  int fd = -1;
  VerifiedLibrary() = default;
  VerifiedLibrary(const VerifiedLibrary&) = delete;
  VerifiedLibrary& operator=(const VerifiedLibrary&) = delete;
  ~VerifiedLibrary() {
    lib.close();
    if (fd >= 0) ::close(fd);
  }
};

// Loads the file `name` of the artifact, listed in its manifest, after checking its sha256. It is
// hashed and then loaded through one open file descriptor, so the file that is loaded is the
// file that was verified (replacing the path in between changes nothing). `what` names it.
std::unique_ptr<VerifiedLibrary> load_verified(const std::string& dir, const runtime::Manifest& m,
                                               const std::string& name, const std::string& what,
                                               std::string* sha256 = nullptr) {
  const runtime::ManifestFile* entry = nullptr;
  for (const auto& f : m.files)
    if (f.name == name) entry = &f;
  if (!entry || name.find('/') != std::string::npos)
    throw ir::Error("the manifest of artifact " + dir + " does not list its " + what + " '" + name + "'", {},
                    kReexport);
  const std::string so = dir + "/" + name;
  auto v = std::make_unique<VerifiedLibrary>();
  std::string digest;
  uint64_t bytes = 0;
  try {
    v->fd = runtime::open_regular_file(so, &bytes);
    if (bytes == entry->bytes) digest = support::sha256_fd_hex(v->fd, so);
  } catch (const std::exception& e) {
    throw ir::Error("cannot read the " + what + " of artifact " + dir + ": " + e.what(), {}, kReexport);
  }
  if (bytes != entry->bytes)  // checked first: /dev/zero behind a link would be hashed forever
    throw ir::Error("the " + what + " " + so + " does not match its manifest (" + std::to_string(bytes) +
                        " bytes, expected " + std::to_string(entry->bytes) + "): it was modified or damaged",
                    {}, kReexport);
  if (digest != entry->sha256)
    throw ir::Error("the " + what + " " + so + " does not match its manifest (sha256 " + digest + ", expected " +
                        entry->sha256 + "): it was modified or damaged",
                    {}, kReexport);
  if (sha256) *sha256 = digest;
  try {
    v->lib = runtime::SharedLibrary::from_fd(v->fd, so);
    return v;
  } catch (const std::exception& e) {
    const bool noexec = std::string(e.what()).find("noexec") != std::string::npos;
    throw ir::Error("cannot load the " + what + " of artifact " + dir + ": " + e.what(), {},
                    noexec ? "keep the artifact on a file system that allows executing code" : kReexport);
  }
}

// The gemm runtime library of an artifact: loaded once per process per content (never unloaded:
// it keeps the runtime's state, and glibc would not unmap it anyway), before the library that
// depends on it.
void load_gemm_runtime(const std::string& dir, const runtime::Manifest& m) {
  static auto& mu = support::fork_safe_mutex();  // held across the load: unlocked in a forked child
  static auto* loaded = new std::map<std::string, std::unique_ptr<VerifiedLibrary>>();  // by sha256
  std::lock_guard<support::ForkSafeMutex> g(mu);
  for (const auto& f : m.files)
    if (f.name == m.runtime && loaded->count(f.sha256)) return;  // verified when it was loaded
  std::string digest;
  auto v = load_verified(dir, m, m.runtime, "gemm runtime library", &digest);
  runtime::configure_gemm_runtime(v->lib);
  (*loaded)[digest] = std::move(v);
}

}  // namespace

Tensor::Tensor(ir::DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t n : shape_)
    if (n < 0) throw ir::Error("a tensor dimension cannot be negative");
  const bool empty = std::find(shape_.begin(), shape_.end(), 0) != shape_.end();
  int64_t total = empty ? 0 : dtype_.bytes();
  for (int64_t n : shape_) {
    if (__builtin_mul_overflow(total, n, &total) || total > (int64_t{1} << 62)) {
      std::string dims;
      for (int64_t d : shape_) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      throw ir::Error("a tensor of shape (" + dims + ") does not fit in memory (over 2^62 bytes)", {},
                      "check the input shapes: a kernel output's shape follows from them");
    }
  }
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(total, 1)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw ir::Error("out of memory allocating " + std::to_string(bytes) + " bytes for a kernel output");
  data_ = std::shared_ptr<void>(p, std::free);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

TensorArg view(const void* p, ir::DType dtype, std::vector<int64_t> shape) {
  return TensorArg{const_cast<void*>(p), dtype, std::move(shape), {}, 1, 0};
}
TensorArg view(const float* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::f32, std::move(s)); }
TensorArg view(const double* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::f64, std::move(s)); }
TensorArg view(const int8_t* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::i8, std::move(s)); }
TensorArg view(const int32_t* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::i32, std::move(s)); }
TensorArg view(const int64_t* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::i64, std::move(s)); }
TensorArg view(const uint8_t* p, std::vector<int64_t> s) { return view(p, ir::DTypeCode::u8, std::move(s)); }

std::vector<Tensor> AotKernel::run(const std::vector<Arg>& inputs) const {
  Binding b = bind(inputs);
  std::vector<Tensor> outs;
  std::vector<void*> ptrs;
  for (const auto& spec : b.outputs) {
    outs.emplace_back(spec.dtype, spec.shape);
    ptrs.push_back(outs.back().data());
  }
  runtime::launch_cpu({reinterpret_cast<tw_grid_fn>(grid_), reinterpret_cast<tw_block_fn>(block_), tile_bytes_},
                      signature_, inputs, ptrs, b);
  return outs;
}

namespace {

// [start, end) of a tensor argument's bytes.
std::pair<const char*, const char*> byte_range(const TensorArg& t) {
  int64_t n = t.dtype.bytes();
  for (auto d : t.shape) n *= d;
  const char* p = static_cast<const char*>(t.data);
  return {p, p + n};
}

// A caller's output sharing memory with an input or another output is refused: the kernel assumes
// distinct buffers (an in-place run({x}, {x}) of a kernel that is not elementwise reads what it has
// already written: session 23, h-hunt11b F19).
void check_distinct(const Signature& sig, const std::vector<Arg>& inputs, const std::vector<TensorArg>& outputs) {
  std::vector<std::pair<const TensorArg*, std::string>> tensors;  // the outputs first
  size_t in = 0, out = 0;
  for (const auto& p : sig.params)
    if (p.is_output && out < outputs.size()) {
      tensors.push_back({&outputs[out], "output '" + p.name + "'"});
      ++out;
    }
  for (const auto& p : sig.params) {
    if (p.is_output || in >= inputs.size()) continue;
    if (const auto* t = std::get_if<TensorArg>(&inputs[in])) tensors.push_back({t, "argument '" + p.name + "'"});
    ++in;
  }
  for (size_t i = 0; i < out; ++i) {
    const auto [a0, a1] = byte_range(*tensors[i].first);
    for (size_t j = i + 1; j < tensors.size(); ++j) {
      const auto [b0, b1] = byte_range(*tensors[j].first);
      if (a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1)
        throw ir::Error(tensors[i].second + " of kernel '" + sig.kernel + "' overlaps " + tensors[j].second + " in memory" +
                            ": the kernel assumes distinct buffers, and its result would depend on the order of its "
                            "reads and writes",
                        sig.span, "pass separate buffers (copy one first)");
    }
  }
}

}  // namespace

void AotKernel::run(const std::vector<Arg>& inputs, const std::vector<TensorArg>& outputs) const {
  Binding b = bind(inputs);
  check_outputs(signature_, b, outputs);
  check_distinct(signature_, inputs, outputs);
  std::vector<void*> ptrs;
  ptrs.reserve(outputs.size());
  for (const auto& o : outputs) ptrs.push_back(o.data);
  runtime::launch_cpu({reinterpret_cast<tw_grid_fn>(grid_), reinterpret_cast<tw_block_fn>(block_), tile_bytes_},
                      signature_, inputs, ptrs, b);
}

std::shared_ptr<const Artifact> Artifact::load(const std::string& dir) {
  runtime::Manifest m = runtime::read_manifest(dir);
  if (m.library.empty())
    throw ir::Error("artifact " + dir + " is for target '" + m.target + "', which has no loadable library", {},
                    m.target.rfind("ascend", 0) == 0 ? "it is an AscendC project: build it with CANN (see its README.md)"
                                                     : "export the kernels for target 'cpu'");
  if (m.abi != TW_CPU_ABI_VERSION)
    throw ir::Error("artifact " + dir + " uses kernel ABI version " + std::to_string(m.abi) + ", this runtime (" +
                        TILEWRIGHT_VERSION + ") speaks version " + std::to_string(TW_CPU_ABI_VERSION),
                    {}, kReexport);
  const std::string missing = runtime::missing_cpu_features(m.cpu_features);
  if (!missing.empty())
    throw ir::Error("artifact " + dir + " was compiled for CPU features this CPU lacks: " + missing +
                        (m.cpu_arch.empty() ? "" : " (-march=" + m.cpu_arch + ")"), {},
                    std::string(kReexport) + " (or export with --cpu-arch set to the oldest CPU of the fleet, "
                                             "e.g. x86-64-v3)");
  auto a = std::shared_ptr<Artifact>(new Artifact());
  a->dir_ = dir;
  a->target_ = m.target;
  a->version_ = m.version;
  // The gemm runtime library first: the kernel library depends on it (by its soname).
  if (!m.runtime.empty()) load_gemm_runtime(dir, m);
  auto* verified = load_verified(dir, m, m.library, "library").release();
  a->handle_ = verified;
  const runtime::SharedLibrary* shared = &verified->lib;
  try {
    for (auto& mk : m.kernels) {
      auto version = shared->function<tw_abi_version_fn>(mk.symbol + "__abi_version");
      if (version() != TW_CPU_ABI_VERSION)
        throw ir::Error("kernel '" + mk.signature.kernel + "' in " + dir + "/" + m.library + " has ABI version " +
                            std::to_string(version()) + ", expected " + std::to_string(TW_CPU_ABI_VERSION),
                        {}, kReexport);
      std::unique_ptr<AotKernel> k(new AotKernel());
      k->signature_ = std::move(mk.signature);
      k->grid_ = shared->symbol(mk.symbol + "__grid");
      k->block_ = shared->symbol(mk.symbol + "__block");
      k->tile_bytes_ = mk.tile_bytes;
      a->kernels_.push_back(std::move(k));
    }
  } catch (const ir::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw ir::Error("cannot load artifact " + dir + ": " + e.what(), {}, kReexport);
  }
  return a;
}

Artifact::~Artifact() { delete static_cast<VerifiedLibrary*>(handle_); }

const AotKernel& Artifact::kernel(std::string_view name) const {
  for (const auto& k : kernels_)
    if (k->name() == name) return *k;
  std::string names;
  for (const auto& k : kernels_) names += (names.empty() ? "" : ", ") + k->name();
  throw ir::Error("artifact " + dir_ + " has no kernel '" + std::string(name) + "'", {}, "its kernels are: " + names);
}

std::vector<std::string> Artifact::kernel_names() const {
  std::vector<std::string> out;
  for (const auto& k : kernels_) out.push_back(k->name());
  return out;
}

}  // namespace tw
