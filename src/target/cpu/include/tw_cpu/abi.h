// The binary interface between the Tilewright runtime and a generated CPU kernel library.
// Kept tiny and C-compatible: it is included both by the runtime and by every generated kernel.
#pragma once
#include <stdint.h>

#define TW_CPU_ABI_VERSION 1

// Arguments of one launch. Shared by all blocks; read-only for the kernel.
typedef struct TwArgs {
  // One entry per kernel parameter, in declaration order: for a tensor, its data pointer
  // (dense row-major); for a scalar, a pointer to the value stored in the scalar's dtype.
  void* const* params;
  // Values of the kernel's shape variables, in KernelNode::shape_vars() order.
  const int64_t* shape_vars;
} TwArgs;

// Functions every generated kernel defines (extern "C"). The runtime compiles kernels into
// libraries (runtime/cpu_library.h) where kernel k's are renamed tw_<k>__abi_version,
// tw_<k>__grid and tw_<k>__block, next to its typed entry point tw_<k>:
//   int     tw_abi_version(void);                         -> TW_CPU_ABI_VERSION
//   void    tw_grid(const TwArgs* a, int64_t extents[3]);  -> grid extents (unused dims = 1)
//   void    tw_block(const TwArgs* a, int64_t bx, int64_t by, int64_t bz);  runs one block
typedef int (*tw_abi_version_fn)(void);
typedef void (*tw_grid_fn)(const TwArgs*, int64_t*);
typedef void (*tw_block_fn)(const TwArgs*, int64_t, int64_t, int64_t);
