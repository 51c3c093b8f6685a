// The manifest of an exported artifact (kernel.export(dir)): what the library contains and
// what it needs, as a small line-oriented text file `tilewright.manifest`, written at export
// and verified by the AOT runtime before anything is loaded.
//
//   tilewright-artifact 2
//   tilewright <version>
//   target <target name>
//   abi <TW_CPU_ABI_VERSION>                       (cpu)
//   compiler <first line of --version>             (cpu)
//   cpu_arch <-march value it was compiled for>    (cpu; "native": the exporting machine)
//   cpu_features <sorted ISA features required>    (cpu; may be empty)
//   library <file name of the shared object>       (cpu)
//   runtime <file name of the gemm runtime library> (cpu, when a kernel calls gemm: loaded
//                                                  before the library, which depends on it)
//   file <sha256> <bytes> <file name>              (every file of the artifact)
//   kernel <name> <symbol> <tile bytes>            (then the kernel's lines, until "end")
//     span <line> <col> <source file>              where it was defined (for messages)
//     var <name> <line> <col> <source file>        a symbolic dimension, in binding order
//     param <in|out> <tensor|scalar> <dtype> <name>
//       dim <terms> <text>                         terms: "#<int>", "$<var index>" or an
//                                                  operator name ("add", "floordiv", ...),
//                                                  comma-separated, reverse Polish; "-" if the
//                                                  dimension is not checked
//   end
//   checksum sha256 <hex>                          the last line: the sha256 of all the text
//                                                  before it (a damaged manifest is refused)
//
// Every field is a token without spaces except the last of a line, which runs to its end. In a
// source file path '%', newline and carriage return are written %25, %0A and %0D.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilewright/signature.h"

namespace tw::runtime {

inline constexpr const char* kManifestFile = "tilewright.manifest";
inline constexpr int kManifestFormat = 2;  // 2: the checksum line, escaped paths

struct ManifestFile {
  std::string name;    // relative to the artifact directory, no '/'
  std::string sha256;  // hex
  uint64_t bytes = 0;
};

struct ManifestKernel {
  Signature signature;     // signature.target is the manifest's target
  std::string symbol;      // the typed C entry point; <symbol>__grid/__block/__abi_version (cpu)
  int64_t tile_bytes = 0;  // stack bytes one block's tiles need (cpu)
};

struct Manifest {
  std::string version;       // Tilewright version that exported it
  std::string target;
  int abi = 0;               // cpu: TW_CPU_ABI_VERSION of the library
  std::string compiler;      // cpu
  std::string cpu_arch;      // cpu: the -march value (TW_CPU_ARCH / export's cpu_arch)
  std::string cpu_features;  // cpu: space-separated, sorted
  std::string library;       // cpu: the shared object's file name
  std::string runtime;       // cpu: the gemm runtime library's file name (its soname), or ""
  std::vector<ManifestFile> files;
  std::vector<ManifestKernel> kernels;
};

std::string print_manifest(const Manifest& m);
// Parses the text of `path` (named in errors). Throws ir::Error saying which line is malformed.
Manifest parse_manifest(const std::string& text, const std::string& path);
// Reads and parses <dir>/tilewright.manifest (a regular file of at most 64 MiB).
Manifest read_manifest(const std::string& dir);
// Opens `path` read-only if it is a regular file (not a FIFO, a device or a directory, which would
// block a load or feed it forever: session 23, h-hunt11b F2) and sets *bytes to its size. Throws
// std::runtime_error saying what it is instead.
int open_regular_file(const std::string& path, uint64_t* bytes);

}  // namespace tw::runtime
