// The Tilewright AOT runtime: load a kernel library exported from Python with
// kernel.export(dir) / tw.export(kernels, dir), and run its kernels from C++. No Python, no
// compiler and no IR are needed at run time: link Tilewright::runtime (find_package(Tilewright)).
//
//   auto lib = tw::Artifact::load("/opt/service/kernels");      // verifies, then dlopens
//   const tw::AotKernel& mm = lib->kernel("matmul_kernel");
//   std::vector<tw::Tensor> out = mm.run({tw::view(a, {M, K}), tw::view(b, {K, N})});
//
// Errors are exceptions of type tw::ir::Error (a std::runtime_error whose what() says what is
// wrong, where and how to fix it); nothing aborts. Loading and launching are thread-safe: any
// number of threads may share one Artifact and launch its kernels concurrently (launches are
// serialised process-wide and each one runs its blocks on the runtime's thread pool, sized by
// TW_NUM_THREADS).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tilewright/signature.h"
#include "tilewright/version.h"

namespace tw {

// A dense row-major array owned by the runtime (64-byte aligned): an output of AotKernel::run.
class Tensor {
 public:
  Tensor(ir::DType dtype, std::vector<int64_t> shape);  // uninitialised contents
  ir::DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype_.bytes(); }
  void* data() const { return data_.get(); }
  template <class T>
  T* data_as() const { return static_cast<T*>(data()); }
  TensorArg arg() const { return TensorArg{data(), dtype_, shape_, {}, 1, 0}; }

 private:
  ir::DType dtype_;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> data_;
};

// Views caller-owned dense row-major memory as an argument; the dtype comes from T.
TensorArg view(const float* p, std::vector<int64_t> shape);
TensorArg view(const double* p, std::vector<int64_t> shape);
TensorArg view(const int8_t* p, std::vector<int64_t> shape);
TensorArg view(const int32_t* p, std::vector<int64_t> shape);
TensorArg view(const int64_t* p, std::vector<int64_t> shape);
TensorArg view(const uint8_t* p, std::vector<int64_t> shape);
// Any dtype (float16/bfloat16 data as raw 16-bit words).
TensorArg view(const void* p, ir::DType dtype, std::vector<int64_t> shape);

class Artifact;

// One kernel of a loaded artifact.
class AotKernel {
 public:
  const std::string& name() const { return signature_.kernel; }
  const Signature& signature() const { return signature_; }
  // Checks the inputs exactly as the Python side does (tw::bind); returns the shape variables
  // and the output shapes. Throws ir::Error.
  Binding bind(const std::vector<Arg>& inputs) const { return tw::bind(signature_, inputs); }
  // Checks the inputs, allocates the outputs and runs the kernel; returns the outputs in order.
  std::vector<Tensor> run(const std::vector<Arg>& inputs) const;
  // Checks the inputs and the caller's outputs (tw::check_outputs: one per output parameter,
  // dtype, shape, contiguity) and runs the kernel writing into them.
  void run(const std::vector<Arg>& inputs, const std::vector<TensorArg>& outputs) const;

 private:
  friend class Artifact;
  AotKernel() = default;
  Signature signature_;
  void* grid_ = nullptr;
  void* block_ = nullptr;
  int64_t tile_bytes_ = 0;
};

// A loaded artifact: one shared object with one or more kernels. Keep the shared_ptr alive
// while its kernels are in use (the library is unloaded when the last reference goes).
class Artifact {
 public:
  // Reads <dir>/tilewright.manifest, checks its format and ABI version, that this CPU has every
  // ISA feature the library was compiled for, and the sha256 of the shared object (and of the
  // gemm runtime library it depends on, when it has one) against the manifest; then loads them
  // (the runtime first, once per process: it is never unloaded) and resolves every kernel's
  // entry points. Throws ir::Error.
  static std::shared_ptr<const Artifact> load(const std::string& dir);
  ~Artifact();

  // Throws ir::Error listing the kernel names when `name` is not one.
  const AotKernel& kernel(std::string_view name) const;
  std::vector<std::string> kernel_names() const;
  const std::string& target() const { return target_; }
  const std::string& exported_by() const { return version_; }  // Tilewright version
  const std::string& dir() const { return dir_; }

 private:
  Artifact() = default;
  std::string dir_, target_, version_;
  std::vector<std::unique_ptr<AotKernel>> kernels_;
  void* handle_ = nullptr;
};

}  // namespace tw
