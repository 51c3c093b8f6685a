// vector_util: helpers shared by the Ascend vector passes of the automatic pipeline
// (fold_exp2_scale, expand_int8_fill, convert_copies, legalize_vector, halve_wide_rows): the
// kernel's names and fresh ones, UB temporaries, and maps built over regions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tilewright/ir.h"

namespace tw::ascend::vec {

// int8 / uint8: no vector arithmetic (computed in float32), no 8-bit Duplicate.
bool small_int(ir::DType t);
// The dtype vector arithmetic on values of dtype t is done in: float32 for float16 and bfloat16
// (docs/language.md: computed in float32, rounded once when stored; bfloat16 has no AIV arithmetic
// at all), and for int8/uint8, which have none the language's wrap-around could use
// (legalize_vector computes their maps exactly in float32 and wraps them when stored).
ir::DType compute_type(ir::DType t);

// The names a kernel uses (parameters, block variables, buffers, loop and let variables);
// fresh(base) returns the first base_N not used yet and records it. Passes that add names take
// them from here, so the numbering is the same whichever pass adds them.
class Names {
 public:
  explicit Names(const ir::Kernel& kernel);
  std::string fresh(const std::string& base);
  ir::Var fresh_var(const std::string& base, const ir::Span& sp);
  // base itself while the kernel does not use it (recorded), else fresh(base)
  ir::Var var(const std::string& base, const ir::Span& sp);
  // A UB temporary named after (and, in capacity errors, counted with) the buffer it serves; its
  // alloc is appended to out.
  ir::Buffer ub(const ir::Buffer& owner, const std::string& suffix, ir::DType t, const std::vector<int64_t>& shape,
                const ir::Span& sp, std::vector<ir::Stmt>& out);

 private:
  std::set<std::string> names_;
};

// One level of a T.Parallel map: for v in parallel(0, extent) { body }.
ir::Stmt pfor(const ir::Var& v, int64_t extent, const ir::Stmt& body, const ir::Span& sp, ir::Expr user = nullptr);

// A T.Parallel map that legalize_vector lowers: 1 or 2 nested parallel loops from 0 with constant
// extents whose body is stores into UB tiles (and lets) reading UB tiles and global tensors.
struct VectorMap {
  std::vector<ir::Var> vars;  // outer to inner
  std::vector<int64_t> ext;
  std::vector<ir::Expr> user;   // per variable: a padded loop's user extent (ir.h ForNode::user_extent), else null
  ir::Stmt body;                // the innermost loop's body
  std::vector<ir::Stmt> items;  // its statements (stores and lets)
};
// nullopt for any other statement (other maps are left to select_instructions, which reports them).
std::optional<VectorMap> vector_map(const ir::Stmt& s);

// A map body (items) of stores into int64 UB tiles of converted or computed values (idx64[i] = idx[i] of an
// int32 / int8 / uint8 / bool tile, a -1 sentinel, a T.where of them): the Vector core has no int64
// arithmetic and dav-c220 no Cast into int64, so it is no vector code (vector_map) and select_instructions
// runs it as an element loop on the scalar unit (GetValue / SetValue, the value converted by a C++ cast).
// Values with a math function, a GM read or a read of an int64 tile are not (int64 arithmetic and int64
// copies keep their own rules).
bool int64_element_map(const std::vector<ir::Stmt>& items);

// The constant extents of a region (-1 for a runtime extent).
std::vector<int64_t> const_extents(const ir::Region& r);

// A map over the dims of two regions of the same shape: dst = f(src element). Regions of the
// same rank and extents map every dim, extent-1 dims included (an (8, 1) tile stays a 2-D map
// whose column loop has extent 1, so its stores index every loop variable), of more than 2 dims
// their non-unit dims and the last one; regions of
// different ranks (a tensor row -> a 1-D tile) map their non-unit dims, and when no dim is
// wider than 1 their last dims; more than two non-unit dims: serial loops over the leading ones
// around a 2-D map of the last two. nullopt when the shapes differ.
std::optional<ir::Stmt> region_map(const ir::Region& dst, const ir::Region& src, const ir::Span& sp,
                                   const std::function<ir::Expr(ir::Expr)>& f, Names& names);

// The map dst = cast(src) (region_map), or an ir::Error at sp when the regions differ in shape.
ir::Stmt cast_map(const ir::Region& dst, const ir::Region& src, const ir::Span& sp, Names& names);

// The hint of a T.Parallel store into `buffer` that does not use every loop index (the 1-D map that
// runs, e.g. a per-row value stored inside a 2-D map; a reduction).
std::string unused_index_hint(const std::string& buffer);

// The statements of a kernel body rewritten: f(s) returns the statements that replace s (spliced
// into the enclosing statement list), or nullopt to keep s and visit its children; statements are
// visited in program order.
ir::Stmt rewrite_stmts(const ir::Stmt& body,
                       const std::function<std::optional<std::vector<ir::Stmt>>(const ir::Stmt&)>& f);

// The kernel with a new body.
ir::Kernel with_body(const ir::Kernel& kernel, ir::Stmt body);

}  // namespace tw::ascend::vec
