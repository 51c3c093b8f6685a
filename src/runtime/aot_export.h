// export_artifact: writes compiled kernels as a self-contained artifact directory that the AOT
// runtime (tilewright/artifact.h) loads without Python, compiler or IR.
//
// cpu: lib<name>.so (all kernels in one shared object, cpu_library.h: a typed C entry point
//      tw_<kernel> per kernel plus tw_<kernel>__grid/__block/__abi_version for the runtime),
//      <name>.h (the C declarations of the typed entry points) and tilewright.manifest
//      (runtime/manifest.h). The shared object goes through the disk cache: a kernel exported
//      alone is the object compiled when it was compiled in-process, and exporting the same
//      set of kernels again copies the library compiled the first time.
// ascend*: <kernel>/<files of the AscendC project> for each kernel, and the manifest.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tilewright/runtime.h"

namespace tw::runtime {

struct ExportResult {
  std::vector<std::string> files;   // paths written, the manifest last
  bool library_from_cache = false;  // cpu: the shared object came from the disk cache
};

// All kernels must be for the same target and have distinct names: their own, or
// `kernel_names[i]` where that is given and not empty (a C identifier: one factory built at two
// shapes gives two kernels of one name); `name` (the library's name) must be a C identifier. Files of an earlier export into `dir` are replaced; the
// manifest is written last, so an interrupted export leaves no loadable artifact. cpu: the
// library (and the gemm runtime library) is compiled for `cpu_arch`, a -march value ("" = this
// process's, TW_CPU_ARCH), which may be one this CPU cannot run (nothing is loaded); the
// manifest records it and the CPU features it needs. Throws ir::Error.
ExportResult export_artifact(const std::vector<std::shared_ptr<const Executable>>& kernels, const std::string& dir,
                             const std::string& name, const std::string& cpu_arch = "",
                             const std::vector<std::string>& kernel_names = {});

// The C header declaring the typed entry points of `kernels` in library `name` (cpu).
std::string export_header(const std::vector<Signature>& kernels, const std::string& name);

}  // namespace tw::runtime
