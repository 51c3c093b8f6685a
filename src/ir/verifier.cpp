// Tile IR verifier. The list of checks is in ir/verifier.h.
#include "ir/verifier.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "ir/printer.h"

namespace tw::ir {

namespace {


std::string q(const std::string& name) { return "'" + name + "'"; }
std::string dt(DType t) { return std::string(t.name()); }

bool convertible(DType from, DType to) {
  if (from == to) return true;
  if (to.is_bool()) return from.is_bool();
  return true;  // any number (or bool) converts to any number
}

std::string dims_text(const std::vector<int64_t>& d) {
  if (d.empty()) return "a scalar";
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

std::string_view stmt_name(StmtKind k) {
  switch (k) {
    case StmtKind::Seq: return "sequence";
    case StmtKind::For: return "loop";
    case StmtKind::If: return "if";
    case StmtKind::Let: return "let";
    case StmtKind::Store: return "store";
    case StmtKind::Alloc: return "alloc";
    case StmtKind::Copy: return "copy";
    case StmtKind::Gemm: return "gemm";
    case StmtKind::Fill: return "fill";
    case StmtKind::Reduce: return "reduce";
    case StmtKind::CoreScope: return "T.Scope";
    case StmtKind::Sync: return "synchronisation";
  }
  return "statement";
}

class Verifier {
 public:
  void run(const Kernel& k) {
    if (!k) throw Error("verify: null kernel");
    ctx_ = k->span;
    check_name(k->name, k->span, "kernel");
    push();
    for (const auto& p : k->params) {
      if (p.buffer || p.scalar) check_name(p.name(), p.buffer ? p.buffer->span : p.scalar->span, "parameter");
      if (p.buffer) {
        if (p.buffer->scope != Scope::global)
          fail(p.buffer->span, "tensor parameter " + q(p.buffer->name) + " must be in global memory, got " +
                                   std::string(scope_name(p.buffer->scope)),
               "declare tile buffers with alloc inside the kernel body");
        define(p.buffer.get());
      } else if (p.scalar) {
        define(p.scalar.get());
        scalar_params_.insert(p.scalar.get());
      } else {
        fail(k->span, "parameter of kernel " + q(k->name) + " is neither a tensor nor a scalar");
      }
    }
    for (const auto& v : k->shape_vars()) {
      check_name(v->name, v->span, "shape variable");
      define(v.get());
    }
    for (const auto& p : k->params)
      if (p.buffer)
        for (const auto& d : p.buffer->shape) int_expr(d, p.buffer->span, "dimension of " + q(p.buffer->name));
    if (k->block_vars.size() != k->grid.size())
      fail(k->span, "kernel " + q(k->name) + " has " + std::to_string(k->block_vars.size()) + " block variable(s) but " +
                        std::to_string(k->grid.size()) + " grid extent(s)",
           "give one grid extent per block variable");
    if (k->grid.size() > 3)
      fail(k->span, "kernel " + q(k->name) + " has a " + std::to_string(k->grid.size()) + "-D grid; at most 3 dims",
           "fold extra grid dims into one and split the block index with // and %");
    for (const auto& g : k->grid) int_expr(g, k->span, "grid extent");
    for (const auto& v : k->block_vars) {
      check_name(v->name, v->span, "block variable");
      if (!v->dtype.is_int())
        fail(v->span, "block variable " + q(v->name) + " must be an integer, got " + dt(v->dtype));
      define(v.get());
    }
    npu_ = k->is_npu();
    if (npu_) {
      const Var& v = k->sub_block_var;
      check_name(v->name, v->span, "sub-block variable");
      if (!v->dtype.is_int())
        fail(v->span, "sub-block variable " + q(v->name) + " must be an integer, got " + dt(v->dtype));
      // The front end gives expert kernels one grid dim; split_cube_vector's output keeps the
      // portable grid (up to 3 dims) until map_grid maps it to the AI Cores.
      if (k->grid.empty())
        fail(k->span, "an Ascend expert-mode kernel (is_npu=True) has a 1-D grid (the AI Cores), got " +
                          std::to_string(k->grid.size()) + " dims",
             "T.Kernel(n, is_npu=True) as (cid, vid): fold extra dims into n and split cid with // and %");
      define(v.get());
    }
    stmt(k->body);
    pop();
  }

 private:
  // ---- errors and scopes ----
  [[noreturn]] void fail(const Span& s, const std::string& msg, const std::string& hint = {}) {
    throw Error(msg, s.known() ? s : ctx_, hint);
  }
  // Names reach generated code (C++ identifiers, comments, string literals of the AscendC host
  // program) and file names (TW_DUMP_IR): only identifiers get through.
  void check_name(const std::string& name, const Span& s, const char* what) {
    bool ok = !name.empty() && name.size() <= 255 && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) {
      std::string shown;
      for (char c : name.substr(0, 80)) {
        if (std::isprint(static_cast<unsigned char>(c))) {
          shown += c;
        } else {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
          shown += hex;
        }
      }
      fail(s, std::string(what) + " name '" + shown + (name.size() > 80 ? "...'" : "'") +
                  " is not an identifier",
           "use 1-255 characters of [A-Za-z0-9_], not starting with a digit");
    }
  }
  static constexpr int64_t kMaxUnroll = 1024;  // copies of a loop body
  static constexpr int kMaxStages = 32;         // num_stages of a pipelined loop
  int64_t unroll_product_ = 1;
  void push() { scopes_.emplace_back(); }
  void pop() { scopes_.pop_back(); }
  void define(const void* p) { scopes_.back().insert(p); }
  bool in_scope(const void* p) const {
    for (const auto& s : scopes_)
      if (s.count(p)) return true;
    return false;
  }
  void check_buffer(const Buffer& b, const Span& where) {
    if (!b) fail(where, "missing buffer");
    if (!in_scope(b.get()))
      fail(where, "buffer " + q(b->name) + " is used outside its scope",
           "an alloc is visible only until the end of the block that contains it; allocate " + q(b->name) +
               " before this use, in an enclosing block");
    check_core(b, where);
  }
  // Ascend: L1/L0A/L0B/L0C belong to the Cube core, UB to the Vector cores.
  static std::optional<CoreKind> core_of(Scope s) {
    switch (s) {
      case Scope::L1: case Scope::L0A: case Scope::L0B: case Scope::L0C: return CoreKind::C;
      case Scope::UB: return CoreKind::V;
      case Scope::global: case Scope::shared: case Scope::fragment: return std::nullopt;
    }
    return std::nullopt;  // not reached: the switch lists every enumerator
  }
  void check_core(const Buffer& b, const Span& where) {
    if (!core_) return;
    auto c = core_of(b->scope);
    if (!c || *c == *core_) return;
    const char* core = *core_ == CoreKind::C ? "the Cube core (T.Scope(\"C\"))" : "the Vector core (T.Scope(\"V\"))";
    fail(where, std::string(scope_name(b->scope)) + " buffer " + q(b->name) + " is used in code that runs on " + core +
                    ", which has no " + std::string(scope_name(b->scope)),
         *c == CoreKind::C ? "L1, L0A, L0B and L0C are used inside with T.Scope(\"C\"):"
                           : "UB is used inside with T.Scope(\"V\"):; the Cube and Vector cores exchange data through GM");
  }
  void define_var(const Var& v, const Span& where, const char* what) {
    check_name(v->name, where, what);
    if (in_scope(v.get())) {
      if (scalar_params_.count(v.get()))
        fail(where, "scalar parameter " + q(v->name) + " cannot be assigned",
             "scalar parameters are read-only; bind a new variable with let instead");
      fail(where, std::string(what) + " variable " + q(v->name) + " is already defined",
           "every variable is defined once; use a fresh variable");
    }
    define(v.get());
  }

  // ---- expressions ----
  void expr(const Expr& e, const Span& ctx) {
    if (!e) fail(ctx, "missing expression");
    Span here = e->span.known() && e->kind != ExprKind::Var ? e->span : ctx;
    switch (e->kind) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm: return;
      case ExprKind::Var: {
        auto* v = as<VarNode>(e);
        if (!in_scope(v))
          fail(ctx, "variable " + q(v->name) + " is used outside its scope",
               "define it (kernel parameter, grid, for, let) before this use; loop and let variables are visible "
               "only inside their block");
        return;
      }
      case ExprKind::Binary: {
        auto* n = as<BinaryNode>(e);
        expr(n->a, here);
        expr(n->b, here);
        if (n->op == BinOp::Div && (!n->dtype.is_float() || !n->a->dtype.is_float() || !n->b->dtype.is_float()))
          fail(here, "internal: true division '/' on integers: " + print(e),
               "ir::binary converts integer operands of '/' to float32 (docs/language.md); a pass that builds a "
               "BinaryNode itself must do the same, or use // (floordiv) for an integer quotient");
        if ((n->op == BinOp::FloorDiv || n->op == BinOp::CeilDiv || n->op == BinOp::Mod) && !n->b->dtype.is_float() &&
            as_const_int(n->b) == 0)
          fail(here, "integer division by zero: " + print(e),
               "the divisor is always 0; integer // and % by a divisor that is 0 only at run time give 0 and the "
               "dividend (docs/language.md)");
        return;
      }
      case ExprKind::Unary: expr(as<UnaryNode>(e)->a, here); return;
      case ExprKind::Call: for (const auto& a : as<CallNode>(e)->args) expr(a, here); return;
      case ExprKind::Cast: expr(as<CastNode>(e)->value, here); return;
      case ExprKind::Select: {
        auto* n = as<SelectNode>(e);
        expr(n->cond, here);
        expr(n->t, here);
        expr(n->f, here);
        return;
      }
      case ExprKind::Load: {
        auto* n = as<LoadNode>(e);
        check_buffer(n->buffer, here);
        indices(n->buffer, n->indices, here);
        return;
      }
    }
  }

  void int_expr(const Expr& e, const Span& ctx, const std::string& what) {
    expr(e, ctx);
    if (!e->dtype.is_int())
      fail(e->span.known() ? e->span : ctx, what + " must be an integer, got " + dt(e->dtype) + " (" + print(e) + ")",
           "cast it, e.g. cast<int32>(...), or use // instead of /");
  }

  void indices(const Buffer& b, const std::vector<Expr>& idx, const Span& ctx) {
    if (static_cast<int>(idx.size()) != b->ndim())
      fail(ctx, "buffer " + q(b->name) + " has " + std::to_string(b->ndim()) + " dimension(s) (shape " +
                    print_shape(b->shape) + ") but is indexed with " + std::to_string(idx.size()),
           "give one index per dimension");
    for (const auto& i : idx) int_expr(i, ctx, "index into " + q(b->name));
    if (b->scope == Scope::global) return;  // tensors: sizes known at run time
    for (size_t d = 0; d < idx.size(); ++d) {
      auto v = as_const_int(idx[d]);
      auto n = as_const_int(b->shape[d]);
      if (v && n && (*v < 0 || *v >= *n))
        fail(idx[d]->span.known() ? idx[d]->span : ctx,
             "index " + std::to_string(*v) + " is out of bounds for dimension " + std::to_string(d) + " of tile " +
                 q(b->name) + " (shape " + print_shape(b->shape) + ")",
             "tile indices run from 0 to size-1");
    }
  }

  // ---- regions ----
  // Checks scope, rank and types; returns the constant extents when `need_const`.
  // runtime_ok (T.copy): a global region's extent may be a run-time extent min(C, e) (ir.h); its
  // bound C stands for it here.
  std::vector<int64_t> region(const Region& r, const Span& ctx, const std::string& op, bool need_const,
                              bool runtime_ok = false) {
    check_buffer(r.buffer, ctx);
    const Buffer& b = r.buffer;
    if (static_cast<int>(r.starts.size()) != b->ndim() || r.extents.size() != r.starts.size())
      fail(ctx, op + ": region of " + q(b->name) + " has " + std::to_string(r.starts.size()) + " dim(s) but the buffer has " +
                    std::to_string(b->ndim()) + " (shape " + print_shape(b->shape) + ")",
           "give start:+extent for every dimension");
    for (const auto& s : r.starts) int_expr(s, ctx, op + ": region start of " + q(b->name));
    for (const auto& x : r.extents) int_expr(x, ctx, op + ": region extent of " + q(b->name));
    std::vector<int64_t> ext;
    for (const auto& x : r.extents) {
      auto c = as_const_int(x);
      if (!c && need_const && runtime_ext(r, x, ctx, op, runtime_ok)) c = runtime_extent(x)->bound;
      if (!c) {
        if (need_const)
          fail(ctx, op + ": extents must be constants, but " + print(r) + " has extent " + print(x),
               op == "copy" ? "a copy of the rows that exist takes a run-time extent with a constant bound on the "
                              "tensor's side: X[r0:r0 + rows] with rows = T.min(C, n - r0) (docs/language.md "
                              "\"Run-time extents\")"
                            : "tile shapes are compile-time constants; guard tails with the global buffer's bounds instead");
        ext.push_back(-1);
        continue;
      }
      if (*c <= 0) fail(ctx, op + ": extent of " + print(r) + " must be positive, got " + std::to_string(*c));
      ext.push_back(*c);
    }
    // Tile buffers cannot be accessed out of range (global buffers may: that is how tails work).
    if (b->scope != Scope::global) {
      auto shape = b->const_shape();
      for (size_t i = 0; shape && i < r.starts.size(); ++i) {
        auto s = as_const_int(r.starts[i]);
        if (!s || ext[i] < 0) continue;
        if (*s < 0 || *s + ext[i] > (*shape)[i])
          fail(ctx, op + ": region " + print(r) + " is out of bounds of " + std::string(scope_name(b->scope)) +
                        " buffer " + q(b->name) + " (" + dims_text(*shape) + "): dim " + std::to_string(i) + " covers " +
                        std::to_string(*s) + ".." + std::to_string(*s + ext[i]) + " but the size is " +
                        std::to_string((*shape)[i]),
               "only global buffers may be accessed partially out of range; fix the start/extent or enlarge the "
               "tile buffer");
      }
    }
    return ext;
  }

  // A run-time extent min(C, e) where one is allowed: on the global side of a T.copy.
  bool runtime_ext(const Region& r, const Expr& x, const Span& ctx, const std::string& op, bool runtime_ok) {
    if (!runtime_extent(x)) return false;
    if (!runtime_ok)
      fail(ctx, op + ": the extent " + print(x) + " of " + print(r) + " is a run-time value",
           "only T.copy takes run-time extents (docs/language.md \"Run-time extents\"); give this op constant extents");
    if (r.buffer->scope != Scope::global)
      fail(ctx, op + ": the extent " + print(x) + " of tile " + q(r.buffer->name) + " is a run-time value; a tile's "
                "side of a copy has constant extents",
           "write the run-time extent on the tensor's slice and the whole window on the tile's (docs/language.md "
           "\"Run-time extents\")");
    return true;
  }

  static std::vector<int64_t> drop_units(const std::vector<int64_t>& v) {
    std::vector<int64_t> r;
    for (auto x : v)
      if (x != 1) r.push_back(x);
    return r;
  }

  // ---- statements ----
  void no_tile_op_in_parallel(const Stmt& s) {
    if (parallel_depth_ == 0) return;
    fail(s->span, std::string(stmt_name(s->kind)) + " is not allowed inside a parallel loop",
         "a parallel loop is an elementwise map: its body may only contain stores, lets, ifs and nested parallel "
         "loops; move the " + std::string(stmt_name(s->kind)) + " out of the loop");
  }

  void body(const Stmt& s) {
    push();
    stmt(s);
    pop();
  }

  // Each annotation is one of kAnnotations, on its statement kind, with its argument count
  // (non-negative), followed in its sequence by the statement kind it names.
  void annotations(const Stmt& s, const Stmt& next, const Span& sp) {
    for (const Annotation& a : s->annotations) {
      const AnnotationInfo* info = nullptr;
      for (const auto& i : kAnnotations)
        if (i.name == a.name) info = &i;
      std::string what = "annotation @" + a.name;
      if (!info) fail(sp, "unknown " + what, "annotations are written by the compiler's passes; remove it");
      if (s->kind != info->on)
        fail(sp, what + " on a " + std::string(stmt_name(s->kind)) + "; it belongs on a " +
                     std::string(stmt_name(info->on)));
      if (static_cast<int>(a.args.size()) != info->nargs)
        fail(sp, what + " has " + std::to_string(a.args.size()) + " argument(s), expected " +
                     std::to_string(info->nargs));
      for (int64_t x : a.args)
        if (x < 0) fail(sp, what + " has the negative argument " + std::to_string(x));
      if (info->next && (!next || next->kind != *info->next))
        fail(sp, what + " must be followed by a " + std::string(stmt_name(*info->next)) + " in the same sequence");
    }
  }

  void stmt(const Stmt& s) {
    if (!s) return;
    const Stmt next = std::exchange(next_, nullptr);  // the statement after s in its sequence
    Span saved = ctx_;
    if (s->span.known()) ctx_ = s->span;
    const Span& sp = ctx_;
    annotations(s, next, sp);
    switch (s->kind) {
      case StmtKind::Seq: {
        push();
        const auto& body = as<SeqNode>(s)->body;
        for (size_t i = 0; i < body.size(); ++i) {
          next_ = i + 1 < body.size() ? body[i + 1] : nullptr;
          stmt(body[i]);
        }
        pop();
        break;
      }
      case StmtKind::For: for_stmt(as<ForNode>(s), s); break;
      case StmtKind::If: {
        auto* n = as<IfNode>(s);
        expr(n->cond, sp);
        if (!n->cond->dtype.is_bool())
          fail(sp, "if condition must be bool, got " + dt(n->cond->dtype) + " (" + print(n->cond) + ")",
               "compare explicitly, e.g. x != 0");
        body(n->then_body);
        body(n->else_body);
        break;
      }
      case StmtKind::Let: {
        auto* n = as<LetNode>(s);
        expr(n->value, sp);
        if (!convertible(n->value->dtype, n->var->dtype))
          fail(sp, "let " + q(n->var->name) + ": cannot convert " + dt(n->value->dtype) + " to " + dt(n->var->dtype),
               "compare explicitly, e.g. x != 0");
        define_var(n->var, sp, "let");
        break;
      }
      case StmtKind::Store: {
        auto* n = as<StoreNode>(s);
        check_buffer(n->buffer, sp);
        indices(n->buffer, n->indices, sp);
        expr(n->value, sp);
        if (!convertible(n->value->dtype, n->buffer->dtype))
          fail(sp, "cannot store a " + dt(n->value->dtype) + " value into " + dt(n->buffer->dtype) + " buffer " +
                       q(n->buffer->name),
               "compare explicitly, e.g. x != 0");
        break;
      }
      case StmtKind::Alloc: {
        no_tile_op_in_parallel(s);
        const Buffer& b = as<AllocNode>(s)->buffer;
        // Ascend kernels (is_npu) may allocate a GM workspace (split_cube_vector's hand-offs):
        // outside any T.Scope, sizes known at run time.
        if (b->scope == Scope::global && (!npu_ || core_))
          fail(sp, "cannot alloc global buffer " + q(b->name),
               "global tensors are kernel parameters; allocate tiles in shared or fragment (or an Ascend scope)");
        if (b->scope != Scope::global && !b->const_shape())
          fail(sp, "tile buffer " + q(b->name) + " must have a constant shape, got " + print_shape(b->shape),
               "tile sizes are compile-time constants");
        if (in_scope(b.get())) fail(sp, "buffer " + q(b->name) + " is allocated twice", "allocate it once");
        check_name(b->name, sp, "buffer");
        if (auto shape = b->const_shape()) {  // the byte size must not wrap (a 2^80-element tile is not 0 bytes)
          int64_t bytes = b->dtype.bytes();
          for (int64_t d : *shape)
            if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes))
              fail(sp, "tile buffer " + q(b->name) + " " + print_shape(b->shape) + " is too large (more than 2^63 bytes)",
                   "tiles are kept in on-chip/stack memory: use block sizes of a few hundred KiB");
        }
        check_core(b, sp);
        define(b.get());
        break;
      }
      case StmtKind::Copy: {
        no_tile_op_in_parallel(s);
        auto* n = as<CopyNode>(s);
        if (n->atomic) atomic_add(*n, sp);
        if ((n->checked || n->preload) &&
            (n->atomic || (n->checked && n->preload) ||
             (n->src.buffer->scope == Scope::global) == (n->dst.buffer->scope == Scope::global)))
          fail(sp, std::string(n->checked ? "checked_copy " : "preload_copy ") + print(n->src) + " -> " + print(n->dst) +
                   ": a checked or preload copy moves a window of a global tensor into a tile or out of one",
               "checked_copy / preload_copy are the Ascend passes' staged map windows (ir.h CopyNode::checked, "
               "CopyNode::preload); write copy");
        const Region& win = n->src.buffer->scope == Scope::global ? n->src : n->dst;
        if (!n->used.empty() && n->used.size() != win.extents.size())
          fail(sp, "checked_copy " + print(n->src) + " -> " + print(n->dst) + " has " + std::to_string(n->used.size()) +
                   " used extents for " + std::to_string(win.extents.size()) + " dims",
               "give one per dim of the tensor's window (ir.h CopyNode::used)");
        for (const Expr& e : n->used) int_expr(e, sp, "used extent of checked_copy");
        auto a = region(n->src, sp, n->atomic ? "T.atomic_add" : "copy", true, !n->atomic);
        auto b = region(n->dst, sp, n->atomic ? "T.atomic_add" : "copy", true, !n->atomic);
        auto ua = drop_units(a), ub = drop_units(b);
        if (ua != ub && !flattened_dims(ua, ub) && !flattened_dims(ub, ua))
          fail(sp, "copy shape mismatch: " + print(n->src) + " is " + dims_text(a) + " but " + print(n->dst) + " is " +
                       dims_text(b),
               "source and destination must have the same shape (dims of extent 1 are ignored; a window with more "
               "dims fills the other side's rows with its leading dims flattened: (2, 8, 64) -> (16, 64))");
        ascend_path(n->src.buffer->scope, n->dst.buffer->scope, sp);
        break;
      }
      case StmtKind::Gemm: gemm(as<GemmNode>(s), s); break;
      case StmtKind::Fill: {
        no_tile_op_in_parallel(s);
        auto* n = as<FillNode>(s);
        region(n->dst, sp, "fill", false);
        expr(n->value, sp);
        if (!convertible(n->value->dtype, n->dst.buffer->dtype))
          fail(sp, "fill: cannot convert " + dt(n->value->dtype) + " to " + dt(n->dst.buffer->dtype) + " buffer " +
                       q(n->dst.buffer->name));
        break;
      }
      case StmtKind::Reduce: reduce(as<ReduceNode>(s), s); break;
      case StmtKind::CoreScope: {
        no_tile_op_in_parallel(s);
        auto* n = as<CoreScopeNode>(s);
        std::string what = "T.Scope(\"" + std::string(corekind_name(n->core)) + "\")";
        if (!npu_)
          fail(sp, what + " is only valid in an Ascend expert-mode kernel",
               "launch the kernel with T.Kernel(n, is_npu=True) as (cid, vid)");
        if (core_)
          fail(sp, what + " inside T.Scope(\"" + std::string(corekind_name(*core_)) + "\"): core scopes do not nest",
               "close the enclosing with T.Scope(...) block first");
        core_ = n->core;
        body(n->body);
        core_.reset();
        break;
      }
      case StmtKind::Sync: sync(as<SyncNode>(s), s); break;
    }
    ctx_ = saved;
  }

  // T.atomic_add(dst, src): dst a global tensor of a dtype both targets add atomically (Ascend
  // SetAtomicAdd<T>: int8/int16/half/bfloat16/int32/float; the language offers the float types and
  // int32), src a tile.
  void atomic_add(const CopyNode& n, const Span& sp) {
    const Buffer& d = n.dst.buffer;
    const Buffer& s = n.src.buffer;
    if (d->scope != Scope::global)
      fail(sp, "T.atomic_add: the destination " + q(d->name) + " is a " + std::string(scope_name(d->scope)) +
                   " tile, not a global tensor",
           "atomic_add adds into a kernel argument (GM); to add into a tile use T.Parallel: acc[i, j] += x[i, j]");
    if (s->scope == Scope::global)
      fail(sp, "T.atomic_add: the source " + q(s->name) + " is a global tensor",
           "copy it into a tile first (T.copy(" + s->name + "[...], tile)) and add the tile");
    DTypeCode c = d->dtype.code;
    if (c != DTypeCode::f32 && c != DTypeCode::f16 && c != DTypeCode::bf16 && c != DTypeCode::i32)
      fail(sp, "T.atomic_add into " + dt(d->dtype) + " tensor " + q(d->name) + " is not supported",
           "atomic_add adds into float32, float16, bfloat16 or int32 tensors");
  }

  // Hardware data paths of the 910B (shared/ascend-910b.md "Pipes and data paths").
  void ascend_path(Scope from, Scope to, const Span& sp) {
    auto ascend = [](Scope s) { return s == Scope::L1 || s == Scope::L0A || s == Scope::L0B || s == Scope::L0C || s == Scope::UB; };
    if (!ascend(from) && !ascend(to)) return;
    // A portable tile (shared/fragment) next to an Ascend one: infer_scope left it for
    // split_cube_vector, which gives it one incarnation per unit.
    if (from == Scope::shared || from == Scope::fragment || to == Scope::shared || to == Scope::fragment) return;
    static const std::pair<Scope, Scope> kPaths[] = {
        {Scope::global, Scope::L1}, {Scope::global, Scope::L0A}, {Scope::global, Scope::L0B},
        {Scope::global, Scope::UB}, {Scope::L1, Scope::L0A},     {Scope::L1, Scope::L0B},
        {Scope::L0C, Scope::global}, {Scope::L0C, Scope::L1},    {Scope::UB, Scope::global},
        {Scope::UB, Scope::UB}};
    for (const auto& [a, b] : kPaths)
      if (a == from && b == to) return;
    fail(sp, "there is no data path " + std::string(scope_name(from)) + " -> " + std::string(scope_name(to)) +
                 " on the Ascend 910B",
         "paths: GM->L1, L1->L0A, L1->L0B, L0C->GM, GM<->UB, UB->UB; the Cube and Vector cores exchange data only "
         "through GM (global) with cross-core flags");
  }

  void sync(const SyncNode* n, const Stmt& s) {
    no_tile_op_in_parallel(s);
    const Span& sp = ctx_;
    std::string what = "T." + std::string(synckind_name(n->sync));
    if (!npu_)
      fail(sp, what + " is only valid in an Ascend expert-mode kernel",
           "launch the kernel with T.Kernel(n, is_npu=True) as (cid, vid)");
    if (!core_)
      fail(sp, what + " outside T.Scope: the compiler cannot tell which core it synchronises",
           "put it inside with T.Scope(\"C\"): (Cube core) or with T.Scope(\"V\"): (Vector core)");
    bool aic = *core_ == CoreKind::C;
    std::string core = aic ? "the Cube core (AIC)" : "the Vector core (AIV)";
    auto pn = [](AscendPipe p) { return std::string(pipe_name(p)); };
    auto on_core = [&](AscendPipe p) {
      switch (p) {
        case AscendPipe::S: case AscendPipe::MTE2: case AscendPipe::MTE3: case AscendPipe::ALL: return true;
        case AscendPipe::V: return !aic;
        case AscendPipe::M: case AscendPipe::MTE1: case AscendPipe::FIX: return aic;
      }
      return aic;  // not reached: the switch lists every enumerator
    };
    auto check_pipe = [&](AscendPipe p) {
      if (p == AscendPipe::ALL && n->sync != SyncKind::pipe_barrier)
        fail(sp, what + ": pipe ALL is only valid for T.pipe_barrier", "name one pipe");
      if (!on_core(p))
        fail(sp, what + ": " + core + " has no pipe " + pn(p),
             aic ? "AIC pipes: S MTE1 MTE2 MTE3 M FIX" : "AIV pipes: S V MTE2 MTE3");
    };
    auto const_id = [&](int64_t hi, const char* kind, const char* hint) {
      int_expr(n->id, sp, what + " " + kind);
      if (auto v = as_const_int(n->id); v && (*v < 0 || *v > hi))
        fail(sp, what + ": " + kind + " " + std::to_string(*v) + " is out of range 0.." + std::to_string(hi), hint);
    };
    switch (n->sync) {
      case SyncKind::set_flag:
      case SyncKind::wait_flag: {
        check_pipe(n->pipe);
        check_pipe(n->dst_pipe);
        using P = AscendPipe;
        static const std::pair<P, P> kAic[] = {
            {P::M, P::MTE1},    {P::M, P::MTE2},    {P::M, P::FIX},     {P::MTE1, P::M},    {P::MTE1, P::MTE2},
            {P::MTE1, P::MTE3}, {P::MTE1, P::FIX},  {P::MTE2, P::M},    {P::MTE2, P::MTE1}, {P::MTE2, P::MTE3},
            {P::MTE3, P::MTE1}, {P::MTE3, P::MTE2}, {P::FIX, P::M},     {P::FIX, P::MTE1}};
        static const std::pair<P, P> kAiv[] = {
            {P::S, P::V},      {P::S, P::MTE2},   {P::S, P::MTE3},   {P::V, P::S},     {P::MTE2, P::S},
            {P::MTE3, P::S},   {P::V, P::MTE2},   {P::V, P::MTE3},   {P::MTE2, P::V},  {P::MTE2, P::MTE3},
            {P::MTE3, P::V},   {P::MTE3, P::MTE2}};
        bool ok = false;
        if (aic) {
          for (const auto& [a, b] : kAic) ok |= a == n->pipe && b == n->dst_pipe;
        } else {
          for (const auto& [a, b] : kAiv) ok |= a == n->pipe && b == n->dst_pipe;
        }
        if (!ok)
          fail(sp, what + "(" + pn(n->pipe) + ", " + pn(n->dst_pipe) + "): " + pn(n->pipe) + " -> " + pn(n->dst_pipe) +
                       " is not a flag pair of " + core,
               aic ? "AIC pairs: M->{MTE1,MTE2,FIX}, MTE1->{M,MTE2,MTE3,FIX}, MTE2->{M,MTE1,MTE3}, MTE3->{MTE1,MTE2}, "
                     "FIX->{M,MTE1}; within one pipe use T.pipe_barrier"
                   : "AIV pairs: S<->{V,MTE2,MTE3}, V->{MTE2,MTE3}, MTE2->{V,MTE3}, MTE3->{V,MTE2}; within one pipe "
                     "use T.pipe_barrier");
        const_id(7, "event id", "event ids are 0..7");
        break;
      }
      case SyncKind::pipe_barrier:
        check_pipe(n->pipe);
        if (n->id) fail(sp, what + " takes no id");
        break;
      case SyncKind::set_cross_flag:
        if (n->mode < 0 || n->mode > 2)
          fail(sp, what + ": mode " + std::to_string(n->mode) + " is not 0, 1 or 2",
               "mode 0: all cores of one type; 1: the two AIVs of an AI Core; 2: AIC <-> its two AIVs");
        check_pipe(n->pipe);
        const_id(10, "flag id", "cross-core flag ids are 0..10 on the 910B (CrossCoreSetFlag docs)");
        break;
      case SyncKind::wait_cross_flag:
        check_pipe(n->pipe);
        const_id(10, "flag id", "cross-core flag ids are 0..10 on the 910B (CrossCoreSetFlag docs)");
        break;
    }
  }

  void for_stmt(const ForNode* n, const Stmt& s) {
    const Span& sp = ctx_;
    std::string loop = forkind_name(n->for_kind) == "serial" ? "loop" : std::string(forkind_name(n->for_kind)) + " loop";
    if (parallel_depth_ > 0 && n->for_kind != ForKind::parallel)
      fail(sp, std::string(forkind_name(n->for_kind)) + " loop over " + q(n->var->name) +
                   " is not allowed inside a parallel loop",
           "a parallel loop is an elementwise map; nest only parallel loops in it, or move this loop outside");
    int_expr(n->min, sp, "lower bound of " + loop + " " + q(n->var->name));
    int_expr(n->extent, sp, "extent of " + loop + " " + q(n->var->name));
    if (n->user_extent) {
      if (n->for_kind != ForKind::parallel)
        fail(sp, "user= on the " + loop + " over " + q(n->var->name) + ": only a parallel loop a pass padded has it",
             "user= is written by the Ascend passes that pad a map (ir.h ForNode::user_extent); remove it");
      int_expr(n->user_extent, sp, "user extent of " + loop + " " + q(n->var->name));
    }
    if (!n->var->dtype.is_int())
      fail(sp, "loop variable " + q(n->var->name) + " must be an integer, got " + dt(n->var->dtype));
    if (n->for_kind == ForKind::pipelined && n->num_stages < 1)
      fail(sp, "pipelined loop over " + q(n->var->name) + " needs num_stages >= 1, got " + std::to_string(n->num_stages),
           "e.g. stages=2 for double buffering");
    if (n->for_kind != ForKind::pipelined && n->num_stages != 0)
      fail(sp, "num_stages=" + std::to_string(n->num_stages) + " is only valid for pipelined loops, but " +
                   q(n->var->name) + " is a " + std::string(forkind_name(n->for_kind)) + " loop",
           "make the loop pipelined or drop num_stages");
    if (n->for_kind == ForKind::pipelined && n->num_stages > kMaxStages)
      fail(sp, "pipelined loop over " + q(n->var->name) + " has num_stages=" + std::to_string(n->num_stages) +
                   ", more than " + std::to_string(kMaxStages),
           "each stage is a copy of the loop's tiles; 2-4 stages hide the copy latency");
    if ((n->for_kind == ForKind::unroll || n->for_kind == ForKind::parallel) && !as_const_int(n->extent))
      fail(sp, std::string(forkind_name(n->for_kind)) + " loop over " + q(n->var->name) +
                   " needs a constant extent, got " + print(n->extent),
           "use a serial loop, or a constant tile size");
    // Fully unrolled code grows with the product of the nested unroll extents: bound it before
    // the host compiler spends minutes on it.
    const int64_t saved_unroll = unroll_product_;
    if (n->for_kind == ForKind::unroll) {
      int64_t ext = std::max<int64_t>(*as_const_int(n->extent), 1);
      if (__builtin_mul_overflow(unroll_product_, ext, &unroll_product_) || unroll_product_ > kMaxUnroll)
        fail(sp, "unrolled loop over " + q(n->var->name) + " would copy the loop body " +
                     (unroll_product_ > 0 && unroll_product_ < (int64_t(1) << 62) ? std::to_string(unroll_product_)
                                                                                   : std::string("too many")) +
                     " times (with the unrolled loops around it), more than " + std::to_string(kMaxUnroll),
             "use T.serial for long loops; unroll only short inner loops");
    }
    push();
    define_var(n->var, sp, "loop");
    if (n->for_kind == ForKind::parallel) ++parallel_depth_;
    body(n->body);
    if (n->for_kind == ForKind::parallel) --parallel_depth_;
    pop();
    unroll_product_ = saved_unroll;
    (void)s;
  }

  void gemm(const GemmNode* n, const Stmt& s) {
    no_tile_op_in_parallel(s);
    const Span& sp = ctx_;
    auto two_d = [&](const Region& r, const char* role) {
      auto e = region(r, sp, "gemm", true);
      if (e.size() < 2)
        fail(sp, std::string("gemm: operand ") + role + " " + print(r) + " must be a 2-D region, got " + dims_text(e));
      // the matrix: its last two dims, or in a global tensor any dim and the last (ir.h gemm_matrix_dims)
      auto [rd, cd] = gemm_matrix_dims(r);
      for (size_t i = 0; i < e.size(); ++i)
        if (i != rd && i != cd && e[i] != 1)
          fail(sp, std::string("gemm: operand ") + role + " " + print(r) + " must be a 2-D region, got " + dims_text(e),
               r.buffer->scope == Scope::global ? "slice all dims but the rows' and the last to extent 1"
                                                : "slice leading dims to extent 1");
      return std::make_pair(e[rd], e[cd]);
    };
    auto [a0, a1] = two_d(n->a, "A");
    auto [b0, b1] = two_d(n->b, "B");
    auto [c0, c1] = two_d(n->c, "C");
    DType ta = n->a.buffer->dtype, tb = n->b.buffer->dtype, tc = n->c.buffer->dtype;
    if (ta != tb)
      fail(sp, "gemm: A and B must have the same dtype, but " + q(n->a.buffer->name) + " is " + dt(ta) + " and " +
                   q(n->b.buffer->name) + " is " + dt(tb),
           n->a.buffer->scope == Scope::L0A || n->a.buffer->scope == Scope::L1 || n->b.buffer->scope == Scope::L0B ||
                   n->b.buffer->scope == Scope::L1
               ? "give both operands one dtype: the Cube's copies (GM -> L1 -> L0) do not convert; convert on the "
                 "Vector core (T.cast in UB) and hand the data over through GM"
               : "copy one operand into a tile of the other's dtype first (copy converts)");
    Scope cs = n->c.buffer->scope;
    if (cs != Scope::fragment && cs != Scope::L0C)
      fail(sp, "gemm: accumulator C " + q(n->c.buffer->name) + " must be a fragment (or L0C) buffer, got " +
                   std::string(scope_name(cs)),
           "allocate the accumulator with alloc ...: fragment");
    DType want;
    if (ta.is_float()) want = DTypeCode::f32;
    else if (ta == DType(DTypeCode::i8)) want = DTypeCode::i32;
    else
      fail(sp, "gemm: inputs must be float or int8, got " + dt(ta), "cast the operands when copying them into tiles");
    if (tc != want)
      fail(sp, "gemm: accumulator " + q(n->c.buffer->name) + " is " + dt(tc) + " but " + dt(ta) + " inputs accumulate in " +
                   dt(want),
           "allocate C as " + dt(want) + " and copy it to the output dtype afterwards");
    int64_t m = n->trans_a ? a1 : a0, k = n->trans_a ? a0 : a1;
    int64_t k2 = n->trans_b ? b1 : b0, nn = n->trans_b ? b0 : b1;
    std::string shapes = "op(A) " + print(n->a) + (n->trans_a ? "^T" : "") + " is " + std::to_string(m) + "x" +
                         std::to_string(k) + " (MxK), op(B) " + print(n->b) + (n->trans_b ? "^T" : "") + " is " +
                         std::to_string(k2) + "x" + std::to_string(nn) + " (KxN), C " + print(n->c) + " is " +
                         std::to_string(c0) + "x" + std::to_string(c1) + " (MxN)";
    std::string hint = "check the tile sizes and trans_a/trans_b";
    if (k != k2)
      fail(sp, "gemm shape mismatch: K differs (" + std::to_string(k) + " vs " + std::to_string(k2) + "): " + shapes, hint);
    if (m != c0)
      fail(sp, "gemm shape mismatch: M differs (" + std::to_string(m) + " vs " + std::to_string(c0) + "): " + shapes, hint);
    if (nn != c1)
      fail(sp, "gemm shape mismatch: N differs (" + std::to_string(nn) + " vs " + std::to_string(c1) + "): " + shapes, hint);
    if (n->band != GemmBand::none) {
      if (!n->band_lo || !n->band_hi) fail(sp, "gemm: a band needs both bounds (lo, hi)");
      int_expr(n->band_lo, sp, "gemm band's lower bound");
      int_expr(n->band_hi, sp, "gemm band's upper bound");
    }
    for (auto [lo, hi, what] : {std::tuple{n->rows_lo, n->rows_hi, "rows"}, std::tuple{n->cols_lo, n->cols_hi, "cols"}}) {
      if (!lo && !hi) continue;
      if (n->band == GemmBand::none)
        fail(sp, std::string("gemm: ") + what + "=(lo, hi) limits a band: it needs a_band or c_band",
             "pass the band too (the whole block's: (1 - rows, cols))");
      if (!lo || !hi) fail(sp, std::string("gemm: ") + what + " needs both bounds (lo, hi)");
      int_expr(lo, sp, std::string("gemm ") + what + "' lower bound");
      int_expr(hi, sp, std::string("gemm ") + what + "' upper bound");
    }
  }

  void reduce(const ReduceNode* n, const Stmt& s) {
    no_tile_op_in_parallel(s);
    const Span& sp = ctx_;
    check_buffer(n->src, sp);
    check_buffer(n->dst, sp);
    const std::string op = "reduce " + std::string(reducekind_name(n->reduce_kind));
    if (n->axis < 0 || n->axis >= n->src->ndim())
      fail(sp, op + ": axis " + std::to_string(n->axis) + " is out of range for " + q(n->src->name) + " of shape " +
                   print_shape(n->src->shape) + " (" + std::to_string(n->src->ndim()) + " dims)",
           "axis counts from 0 and must be less than the source's rank");
    if (n->src->dtype != n->dst->dtype)
      fail(sp, op + ": " + q(n->src->name) + " is " + dt(n->src->dtype) + " but " + q(n->dst->name) + " is " +
                   dt(n->dst->dtype),
           "reduce into a buffer of the same dtype, then copy to convert");
    std::vector<Expr> want;
    for (int i = 0; i < n->src->ndim(); ++i)
      if (i != n->axis) want.push_back(n->src->shape[i]);
    bool ok = want.size() == n->dst->shape.size();
    for (size_t i = 0; ok && i < want.size(); ++i) {
      auto x = as_const_int(want[i]), y = as_const_int(n->dst->shape[i]);
      ok = (x && y) ? *x == *y : print(want[i]) == print(n->dst->shape[i]);
    }
    if (!ok && want.empty()) {
      auto d = n->dst->const_shape();
      ok = d && d->size() == 1 && (*d)[0] == 1;
    }
    if (!ok)
      fail(sp, op + ": " + q(n->dst->name) + " has shape " + print_shape(n->dst->shape) + " but reducing " +
                   q(n->src->name) + " (" + print_shape(n->src->shape) + ") over axis " + std::to_string(n->axis) +
                   " gives " + (want.empty() ? std::string("a scalar") : print_shape(want)),
           "the destination's shape is the source's shape without the reduced axis");
  }

  std::vector<std::unordered_set<const void*>> scopes_;
  std::unordered_set<const void*> scalar_params_;
  int parallel_depth_ = 0;
  Span ctx_;
  Stmt next_;  // set by a sequence for the child about to be verified: the child after it
  bool npu_ = false;               // an Ascend expert-mode kernel
  std::optional<CoreKind> core_;   // inside T.Scope("C") / T.Scope("V")
};

}  // namespace

void verify(const Kernel& k) { Verifier().run(k); }

}  // namespace tw::ir
