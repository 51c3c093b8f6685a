// The calling convention of a compiled kernel, without its IR: parameters (name, dtype, shape
// whose dimensions may be symbolic), the shape variables, and the one function that checks a
// call's arguments against it. Shared by the compiler's Executable (Python and C++ callers)
// and by the AOT runtime (tilewright/artifact.h), so both report the same errors.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "tilewright/ir.h"

namespace tw {

// A tensor argument: a view of memory owned by the caller.
struct TensorArg {
  void* data = nullptr;
  ir::DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means dense row-major
  int device_type = 1;           // DLPack device type; 1 = CPU
  int device_id = 0;
};
// A scalar argument (converted to the parameter's dtype).
using Arg = std::variant<TensorArg, int64_t, double>;

struct OutputSpec {
  ir::DType dtype;
  std::vector<int64_t> shape;
};

// The result of checking the arguments of one call against the kernel's signature.
struct Binding {
  std::vector<int64_t> shape_vars;  // in Signature::shape_vars order
  std::vector<OutputSpec> outputs;  // one per output parameter, in order
};

// One term of a dimension in reverse Polish notation: a constant, a shape variable (its index
// in Signature::shape_vars) or a binary operator applied to the two terms before it.
struct DimTerm {
  enum Kind : uint8_t { Const, Var, Op } kind = Const;
  int64_t value = 0;  // Const: the value; Var: the shape variable's index
  ir::BinOp op = ir::BinOp::Add;
};

struct SignatureDim {
  std::vector<DimTerm> rpn;  // one Const, one Var, or an expression over shape variables
  std::string text;          // as declared, e.g. "4096", "M", "(M * 2)" (used in messages)
};

struct SignatureParam {
  std::string name;
  ir::DType dtype;
  bool is_output = false;
  bool is_scalar = false;
  std::vector<SignatureDim> shape;  // empty for a scalar
};

struct SignatureVar {
  std::string name;
  ir::Span span;
  // The largest value the target's code can hold the variable in: the printed AscendC keeps a
  // shape variable in its dtype (int32), the cpu target in int64.
  int64_t max = INT64_MAX;
};

struct Signature {
  std::string kernel;                     // the kernel's name
  ir::Span span;                          // its definition (file:line:col), for messages
  std::string target;                     // e.g. "cpu"
  std::vector<SignatureParam> params;     // in declaration order, outputs included
  std::vector<SignatureVar> shape_vars;   // symbolic dimensions, in binding order
};

// Checks the inputs (the non-output parameters, in order): count, scalar vs tensor, scalar
// range, device, dtype, rank, shape and shape-variable agreement, contiguity, null data; binds
// the shape variables and computes the output shapes. Throws ir::Error naming the parameter and
// the kernel's definition line.
Binding bind(const Signature& sig, const std::vector<Arg>& inputs);

// Checks caller-provided outputs against what `binding` (from bind) says this call produces:
// one per output parameter, on the host, with that dtype and shape, contiguous, non-null.
// Throws ir::Error naming the output and the kernel's definition line.
void check_outputs(const Signature& sig, const Binding& binding, const std::vector<TensorArg>& outputs);

}  // namespace tw
