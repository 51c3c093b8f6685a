// select_instructions: expert-form kernel -> Ascend program. The rules are listed in select_instructions.h.
#include "target/ascend/select_instructions.h"
#include "target/ascend/math_fns.h"
#include "target/ascend/pass_util.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/vector_util.h"
#include "transform/simplify.h"
#include "transform/tile_facts.h"

namespace tw::ascend {

namespace {

using ir::Error;
using ir::Expr;
using ir::Scope;
using ir::Span;



// Index arithmetic, folded as it is built.
using ir::arith::add;
using ir::arith::mul;
using ir::arith::sub;
using ir::arith::max;
using ir::arith::min;
// The part of `extent` elements from `start` that lies inside [0, dim): a tail's count, 0 for a
// region that starts at or after the end.
Expr valid_count(int64_t extent, const Expr& dim, const Expr& start) {
  return max(C(0), min(C(extent), sub(dim, start)));
}
// Calls fn on every node of expression e (ir::for_each_expr walks statements).
template <class F>
void for_each_subexpr(const Expr& e, F&& fn) {
  ir::for_each_expr(std::make_shared<ir::LetNode>(ir::var("_"), e, e->span), fn);
}
bool has_load(const Expr& e) {
  bool found = false;
  for_each_subexpr(e, [&](const Expr& x) { found = found || x->kind == ir::ExprKind::Load; });
  return found;
}
// null for the constant 0 (an optional program field left unset), e otherwise.
Expr zero_or_null(const Expr& e) {
  auto c = ir::as_const_int(e);
  return c && *c == 0 ? nullptr : e;
}
// The index expression as int32 (region starts may be any integer type).
Expr idx32(const Expr& e) { return e->dtype == ir::kIndexType ? e : ir::cast(e, ir::kIndexType, e->span); }
// A region start as int32: an int64 one is clipped to the int32 range first (an id of 2^32 + 5 stays
// outside the tensor, its rows read as zeros: hunt31 F9), not wrapped onto a real row.
Expr start32(const Expr& e) {
  if (e->dtype.bits() <= 32) return idx32(e);
  const Expr lo = ir::int_imm(INT32_MIN, e->dtype, e->span), hi = ir::int_imm(INT32_MAX, e->dtype, e->span);
  return idx32(ir::arith::min(ir::arith::max(e, lo), hi));
}

// Whether integer index e is a multiple of m for every value of its variables (sums, differences
// and products of constants and variables; anything else: not known, false).
// lets: the values of let-bound variables (`s = off * 16`), looked through when given.
using LetValues = std::unordered_map<const ir::VarNode*, Expr>;
bool multiple_of(const Expr& e, int64_t m, const LetValues* lets = nullptr) {
  if (m == 1) return true;
  if (auto c = ir::as_const_int(e)) return *c % m == 0;
  if (e->kind == ir::ExprKind::Cast) return multiple_of(ir::as<ir::CastNode>(e)->value, m, lets);
  if (e->kind == ir::ExprKind::Var && lets) {
    auto it = lets->find(ir::as<ir::VarNode>(e));
    return it != lets->end() && multiple_of(it->second, m, lets);
  }
  if (e->kind != ir::ExprKind::Binary) return false;
  auto* b = ir::as<ir::BinaryNode>(e);
  switch (b->op) {
    case ir::BinOp::Add:
    case ir::BinOp::Sub: return multiple_of(b->a, m, lets) && multiple_of(b->b, m, lets);
    case ir::BinOp::Mul: {
      for (const auto& [x, y] : {std::pair{b->a, b->b}, std::pair{b->b, b->a}})
        if (auto c = ir::as_const_int(x))
          return multiple_of(y, m / std::gcd(m, std::abs(*c) == 0 ? m : std::abs(*c)), lets);
      return multiple_of(b->a, m, lets) || multiple_of(b->b, m, lets);
    }
    default: return false;
  }
}



// A statically placed tile buffer. Cube buffers: `slices` matrices of rows x cols (the last two
// dims), stored as fractal matrices of prows x pcols. UB: row-major, `shape` as declared, rows
// pcols elements apart (cols padded to 32 B when the tile has more than one row).
struct Buf {
  int index = -1;  // into Program::buffers
  Mem mem = Mem::UB;
  ir::DType dtype;
  std::vector<int64_t> shape;
  int64_t rows = 1, cols = 1, prows = 1, pcols = 1;
  int64_t slice_bytes = 0;
  int64_t bytes = 0;
};

// A copy/op operand in a tile buffer, reduced to one 2-D window of one matrix (slice).
struct Window {
  const Buf* buf = nullptr;
  Expr slice_off;                 // bytes to the start of the slice (Cube) / of the window (UB)
  Expr r0, c0;                    // window start inside the slice (Cube only)
  int64_t rows = 1, cols = 1;     // window extents
  int64_t row_stride = 1;         // UB: elements between rows
};

// A non-unit dim of a GM window outside its 2-D part: the copy runs once per index (a loop).
struct GmOuter {
  int64_t count = 1;              // the window's extent in this dim
  Expr valid;                     // the indices inside the tensor (a tail: fewer)
  Expr stride;                    // elements between consecutive indices
};

// A place in a global tensor: byte offset of the region start and its 2-D extents/tails. The
// window's unit dims are dropped: cols is the last dim, rows the innermost other non-unit dim, and
// any further non-unit dims are `outer` (outermost first): the tile's rows are the window's
// leading dims flattened row-major, one 2-D copy per outer index (dims whose strides continue the
// rows' are merged into them).
struct GmWindow {
  int param = -1;
  Expr offset;                    // bytes
  int64_t rows = 1, cols = 1;     // extents of the 2-D part
  Expr valid_rows, valid_cols;    // min(extent, dim - start): tails
  Expr skip_rows = C(0);          // rows before row 0 of the tensor (a negative start): not copied
  Expr skip_cols = C(0);          // columns before column 0 (a negative start): not copied
  Expr row_stride;                // elements between rows
  // A rows / columns start that may lie before 0 of the tensor but was not clipped (not a multiple of
  // the caller's row_clip / col_clip unit): the start expression (null: none). The caller clips it
  // another way or reports it (gm_window's comment).
  Expr unclipped_rows, unclipped_cols;
  Expr col_start;                 // the columns' start (the window's last kept dim)
  std::vector<GmOuter> outer;
  int64_t total_rows() const {
    int64_t r = rows;
    for (const auto& o : outer) r *= o.count;
    return r;
  }
};

class Lowerer {
 public:
  Lowerer(const ir::Kernel& k, const target::Target& t, bool auto_sync, const std::set<std::string>* passes)
      : k_(k), t_(t), hw_(t.ascend), auto_sync_(auto_sync), passes_(passes) {}

  Program run() {
    if (t_.kind != target::TargetKind::ascend)
      throw Error("select_instructions: target '" + t_.name + "' is not an Ascend target", k_->span);
    if (!k_->is_npu())
      throw Error("kernel " + q(k_->name) + " is not an Ascend expert-mode kernel", k_->span,
                  "expert mode is T.Kernel(n, is_npu=True) as (cid, vid) with code in T.Scope(\"C\") / T.Scope(\"V\")");
    ir::verify(k_);
    p_.name = k_->name;
    p_.span = k_->span;
    p_.block_dim = k_->grid.at(0);
    p_.block_idx = k_->block_vars.at(0);
    p_.sub_block_idx = k_->sub_block_var;
    p_.workspace_bytes = C(0);
    p_.shape_vars = k_->shape_vars();
    for (const auto& v : k_->block_vars) nonneg_.insert(v.get());
    if (k_->sub_block_var) nonneg_.insert(k_->sub_block_var.get());
    for (size_t d = 0; d < k_->block_vars.size() && d < k_->grid.size(); ++d)
      if (auto g = ir::as_const_int(k_->grid[d]); g && *g >= 1) range_[k_->block_vars[d].get()] = {0, *g - 1};
    if (k_->sub_block_var) range_[k_->sub_block_var.get()] = {0, 1};  // the AIV of its AI Core
    for (const auto& v : p_.shape_vars) nonneg_.insert(v.get());
    map_params();
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {  // the tensors the kernel writes (no scalar reads of them)
      if (s->kind == ir::StmtKind::Copy) written_.insert(as<ir::CopyNode>(s)->dst.buffer.get());
      if (s->kind == ir::StmtKind::Gemm) written_.insert(as<ir::GemmNode>(s)->c.buffer.get());
      if (s->kind == ir::StmtKind::Store) written_.insert(as<ir::StoreNode>(s)->buffer.get());
    });
    // L0 tiles a gemm reads transposed (L0A declared KxM, L0B declared NxK: the orientation of the
    // L1 tile they are loaded from); the load into them picks a plain or a transposing LoadData.
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {
      if (s->kind != ir::StmtKind::Gemm) return;
      auto* g = as<ir::GemmNode>(s);
      if (g->trans_a && g->a.buffer->scope == Scope::L0A) l0_transposed_.insert(g->a.buffer.get());
      if (g->trans_b && g->b.buffer->scope == Scope::L0B) l0_transposed_.insert(g->b.buffer.get());
    });
    // L1 tiles a 32-bit K x N B is loaded from into L0B (LoadData3DParamsV2 reads channelSize =
    // N rounded up to 16 columns, whole 16-column fractals of L0B): their columns are padded to 16,
    // not to C0 = 8, so the load stays inside the tile (the extra columns only feed output
    // columns past N, which Fixpipe does not write). The L0B tile it writes: the load writes whole
    // 16 x 16 fractals (K rounded up to 16 too, load_l0's rmul), so its rows are padded to 16, not
    // to C0 = 8, as the automatic pipeline's staged K is (hunt9b F10: K = 8 wrote past the tile).
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {
      if (s->kind != ir::StmtKind::Copy) return;
      auto* c = as<ir::CopyNode>(s);
      if (c->src.buffer->scope == Scope::L1 && c->dst.buffer->scope == Scope::L0B && c->src.buffer->dtype.bytes() == 4 &&
          !l0_transposed_.count(c->dst.buffer.get())) {
        load3d_src_.insert(c->src.buffer.get());
        load3d_dst_.insert(c->dst.buffer.get());
      }
    });
    plan_buffers();

    bool has_c = false, has_v = false, uses_vid = false;
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {
      if (s->kind == ir::StmtKind::CoreScope) (as<ir::CoreScopeNode>(s)->core == ir::CoreKind::C ? has_c : has_v) = true;
    });
    ir::for_each_expr(k_->body, [&](const Expr& e) { uses_vid |= e.get() == k_->sub_block_var.get(); });
    if (!has_c && !has_v)
      throw Error("expert-mode kernel " + q(k_->name) + " has no T.Scope(\"C\") or T.Scope(\"V\") block", k_->span,
                  "put Cube code (L1/L0 copies, mma) in with T.Scope(\"C\"): and vector code in with T.Scope(\"V\"):");
    if (has_c) {
      core_ = CoreKind::C;
      // The AIC has no sub-block: scalar code outside the scopes that reads the sub-block index
      // (replicated into both programs) sees 0 there, as in the simulator, so the AIC program never
      // names the AIV-only variable (the AscendC AIC branch does not declare it).
      ir::Stmt aic = uses_vid ? ir::substitute(k_->body, {{k_->sub_block_var, C(0)}}) : k_->body;
      p_.aic = or_empty(lower(aic, false));
    }
    if (has_v) {
      core_ = CoreKind::V;
      p_.aiv = or_empty(lower(k_->body, false));
    }
    if (has_c && has_v) {
      p_.kernel_type = KernelType::MIX_1_2;
    } else if (has_c) {
      p_.kernel_type = KernelType::AIC_ONLY;
    } else if (uses_vid) {
      p_.kernel_type = KernelType::MIX_1_2;  // both AIVs of every block run; the AIC has nothing to do
      p_.aic = seq({}, k_->span);
    } else {
      p_.kernel_type = KernelType::AIV_ONLY;
    }
    return std::move(p_);
  }

 private:
  enum class CoreKind { C, V };

  // ---- parameters and buffers ----
  void map_params() {
    const auto accumulated = transform::globals_accumulated(k_);
    for (size_t i = 0; i < k_->params.size(); ++i) {
      const ir::Param& ip = k_->params[i];
      KernelParam kp;
      kp.name = ip.name();
      kp.is_output = ip.is_output;
      kp.zeroed = ip.is_output && ip.buffer && accumulated.count(ip.buffer.get());
      if (ip.buffer) {
        kp.is_tensor = true;
        kp.dtype = ip.buffer->dtype;
        kp.shape = ip.buffer->shape;
        params_[ip.buffer.get()] = static_cast<int>(i);
      } else {
        kp.is_tensor = false;
        kp.dtype = ip.scalar->dtype;
        kp.var = ip.scalar;
        runtime_.insert(ip.scalar.get());
      }
      p_.params.push_back(std::move(kp));
    }
  }

  // Geometry of a buffer of `shape` in memory m (see Buf). Throws for shapes a memory cannot hold.
  static Buf geometry(Mem m, ir::DType t, const std::vector<int64_t>& shape, const std::string& name, const Span& sp) {
    Buf b;
    b.mem = m;
    b.dtype = t;
    b.shape = shape;
    int64_t numel = 1;
    for (auto d : shape) numel *= d;
    if (m == Mem::UB) {
      // Row-major with each row padded to whole 32 B blocks when the tile has several rows (the
      // row pitch pcols: vector repeats and DataCopyPad bursts start on 32 B boundaries).
      b.rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
      b.cols = shape.back();
      int64_t nrows = b.cols ? numel / b.cols : 0;
      b.pcols = nrows > 1 ? round_up(b.cols, c0_of(t)) : b.cols;
      b.slice_bytes = b.bytes = tile_bytes(m, t, shape);
      return b;
    }
    if (shape.size() < 2)
      throw Error(std::string(mem_name(m)) + " buffer " + q(name) + " must be a matrix (2-D), got shape " +
                      std::to_string(shape[0]),
                  sp, "Cube buffers hold matrices; a leading third dim indexes separate matrices (double buffering)");
    b.rows = shape[shape.size() - 2];
    b.cols = shape.back();
    std::tie(b.prows, b.pcols) = fractal_dims(m, t, b.rows, b.cols);
    b.slice_bytes = b.prows * b.pcols * t.bytes();
    b.bytes = b.slice_bytes * (numel / (b.rows * b.cols));
    return b;
  }

  void plan_buffers() {
    struct Item { ir::Buffer b; Span span; };
    std::vector<Item> allocs;
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {
      if (s->kind != ir::StmtKind::Alloc) return;
      const ir::Buffer& b = as<ir::AllocNode>(s)->buffer;
      if (b->scope == Scope::global) {  // a GM workspace (split_cube_vector's hand-offs)
        workspace(b);
        return;
      }
      if (!mem_of(b->scope))
        throw Error(std::string(ir::scope_name(b->scope)) + " buffer " + q(b->name) +
                        " in an expert-mode kernel: expert mode places every tile itself",
                    s->span, "use T.alloc_L1 / alloc_L0A / alloc_L0B / alloc_L0C / alloc_UB");
      allocs.push_back({b, s->span});
    });
    // Implicit L0 operands of T.gemm on L1 operands: as large as the largest such gemm needs.
    int64_t need_a = 0, need_b = 0;
    ir::DType gemm_t;
    Span gemm_span;
    ir::for_each_stmt(k_->body, [&](const ir::Stmt& s) {
      if (s->kind != ir::StmtKind::Gemm) return;
      auto* g = as<ir::GemmNode>(s);
      if (g->a.buffer->scope != Scope::L1 && g->b.buffer->scope != Scope::L1) return;
      auto [m, k, n] = gemm_dims(*g);
      ir::DType t = g->a.buffer->dtype;
      need_a = std::max(need_a, tile_bytes(Mem::L0A, t, {m, k}));
      need_b = std::max(need_b, tile_bytes(Mem::L0B, t, {k, n}));
      gemm_t = t;
      gemm_span = s->span;
    });

    for (const auto& [b, sp] : allocs) {
      auto shape = b->const_shape();
      Buf geo = geometry(*mem_of(b->scope), b->dtype, *shape, b->name, sp);
      bool cols16 = load3d_src_.count(b.get()) && geo.pcols % 16, rows16 = load3d_dst_.count(b.get()) && geo.prows % 16;
      if (cols16 || rows16) {  // (see run())
        int64_t matrices = geo.bytes / geo.slice_bytes;
        if (cols16) geo.pcols = round_up(geo.pcols, 16);
        if (rows16) geo.prows = round_up(geo.prows, 16);
        geo.slice_bytes = geo.prows * geo.pcols * b->dtype.bytes();
        geo.bytes = geo.slice_bytes * matrices;
      }
      Buf g = declare(b->name, geo, sp, *shape);
      p_.buffers.back().temp_of = b->temp_of;
      p_.buffers.back().stages = b->stages;
      p_.buffers.back().part_of = b->part_of;
      p_.buffers.back().passes = passes_ && passes_->count(b->name);
      bufs_[b.get()] = g;
    }
    if (need_a > 0) {
      Buf a;
      a.mem = Mem::L0A; a.dtype = gemm_t; a.slice_bytes = a.bytes = need_a; a.prows = 16; a.pcols = c0_of(gemm_t);
      gemm_l0a_ = declare("_gemm_L0A", a, gemm_span, {need_a / gemm_t.bytes()});
      Buf bb = a;
      bb.mem = Mem::L0B; bb.slice_bytes = bb.bytes = need_b;
      gemm_l0b_ = declare("_gemm_L0B", bb, gemm_span, {need_b / gemm_t.bytes()});
    }
  }

  // Geometry only: plan_memory gives every buffer its address and checks the capacity.
  Buf declare(const std::string& name, Buf b, const Span& sp, const std::vector<int64_t>& shape) {
    BufferDecl d;
    d.name = name;
    d.core = b.mem == Mem::UB ? CoreType::AIV : CoreType::AIC;
    d.mem = b.mem;
    d.bytes = b.bytes;
    d.dtype = b.dtype;
    d.shape = shape;
    d.format = b.mem == Mem::L1 ? Format::Nz : b.mem == Mem::L0A ? Format::Zz : b.mem == Mem::L0B ? Format::Zn
               : b.mem == Mem::L0C ? Format::Nz : Format::ND;
    d.span = sp;
    b.index = static_cast<int>(p_.buffers.size());
    p_.buffers.push_back(d);
    return b;
  }

  const Buf& buf(const ir::Buffer& b, const Span& sp) {
    auto it = bufs_.find(b.get());
    if (it == bufs_.end()) throw Error("buffer " + q(b->name) + " is not a tile of this kernel", sp);
    return it->second;
  }

  // ---- operands ----
  std::vector<int64_t> const_extents(const ir::Region& r, const Span& sp) {
    std::vector<int64_t> out;
    for (const auto& e : r.extents) {
      auto c = ir::extent_bound(e);  // a run-time extent's bound (gm_window clips to its value)
      if (!c) throw Error("region " + ir::print(r) + " needs constant extents", sp);
      out.push_back(*c);
    }
    return out;
  }

  // A region of a tile buffer as one 2-D window (leading dims must have extent 1).
  Window window(const ir::Region& r, const Span& sp) {
    const Buf& b = buf(r.buffer, sp);
    auto ext = const_extents(r, sp);
    size_t n = ext.size();
    Window w;
    w.buf = &b;
    if (b.mem == Mem::UB) {
      // dense row-major: offset of the start, 2-D view over the last two dims
      // Unit dims are dropped: the rows are the innermost non-unit dim before the last; further
      // non-unit dims must continue them (the region covers the dims between: one run of rows).
      Expr off = C(0);
      int64_t stride = 1;
      std::vector<int64_t> strides(n);
      for (size_t d = n; d-- > 0;) {
        strides[d] = stride;
        off = add(off, mul(start32(r.starts[d]), C(stride)));
        stride *= d == n - 1 ? b.pcols : b.shape[d];
      }
      w.slice_off = mul(off, C(b.dtype.bytes()));
      w.cols = ext[n - 1];
      w.row_stride = b.pcols;
      if (n < 2) return w;
      size_t rd = n - 2;
      while (rd > 0 && ext[rd] == 1) --rd;
      if (ext[rd] == 1) rd = n - 2;
      w.rows = ext[rd];
      if (rd < n - 2) w.row_stride = strides[rd];
      for (size_t d = rd; d-- > 0;) {
        if (ext[d] == 1) continue;
        if (strides[d] != w.rows * w.row_stride)
          throw Error("UB region " + ir::print(r) + " of tile " + q(r.buffer->name) + " is not one 2-D window: dim " +
                          std::to_string(d) + " steps " + std::to_string(strides[d]) + " elements, but the " +
                          std::to_string(w.rows) + " rows inside it span " + std::to_string(w.rows * w.row_stride),
                      sp, "copy whole inner dims (the region's dims after its first non-unit dim cover the tile), "
                          "or copy one index of the outer dim at a time");
        w.rows *= ext[d];
      }
      return w;
    }
    Expr slice = C(0);
    int64_t stride = 1;
    for (size_t d = n - 2; d-- > 0;) {
      if (ext[d] != 1)
        throw Error(std::string(mem_name(b.mem)) + " region " + ir::print(r) +
                        " spans several matrices; index the leading dim with one value",
                    sp, "e.g. A_l1[i % 2, :, :]");
      slice = add(slice, mul(start32(r.starts[d]), C(stride)));
      stride *= b.shape[d];
    }
    w.slice_off = mul(slice, C(b.slice_bytes));
    w.r0 = start32(r.starts[n - 2]);
    w.c0 = start32(r.starts[n - 1]);
    w.rows = ext[n - 2];
    w.cols = ext[n - 1];
    return w;
  }

  // A global buffer allocated in the kernel: a region of Program::workspace (param -1) at a byte
  // offset, each 512 B aligned; Program::workspace_bytes is the sum.
  void workspace(const ir::Buffer& b) {
    Expr bytes = C(b->dtype.bytes());
    for (const auto& d : b->shape) bytes = mul(bytes, idx32(d));
    ws_offset_[b.get()] = p_.workspace_bytes;
    p_.workspace_bytes = add(p_.workspace_bytes, mul(simp(ir::binary(ir::BinOp::CeilDiv, bytes, C(512))), C(512)));
  }

  // Starts before the tensor (bx * B - 64 in causal and sliding-window kernels): row_clip k > 0
  // skips the rows before row 0 (skip_rows) when the start is a multiple of k, col_clip k > 0 the
  // columns before column 0 (skip_cols) likewise; the GM offset starts past them and the caller
  // shifts its local side by as many rows / columns. k = 1 (any start): GM <-> UB rows (a UB row
  // stride), GM -> L1 rows (an Nz row of 32 B), GM -> UB columns (whole 32 B blocks of UB, the rest
  // through DataCopyPad's leftPadding). k > 1: where the local side can only start on a unit of k
  // (UB -> GM columns: a 32 B block; Fixpipe rows: an L0C fractal row of 16), the skip is clamped
  // to whole units of the window (when the window lies wholly before the tensor its valid count is
  // 0 and nothing moves). A start that may be negative but is not a provable multiple of k is not
  // clipped here: gm_window returns it in unclipped_rows / unclipped_cols and the caller either clips
  // it another way (UB -> GM columns: the head of the window through the scalar unit) or, when its
  // lower bound is negative (some block reaches the copy with a start before 0), reports a located
  // error (start_before_tensor); a start of unknown range that is negative at run time is the
  // simulator checker's out-of-bounds report (never silently shifted data).
  // tile_cols: the columns of the tile side; trailing size-1 dims of the tensor are dropped only
  // when it has more than one (an (M, 1) tensor into an (M, 1) tile stays a column).
  GmWindow gm_window(const ir::Region& r, const Span& sp, int64_t tile_cols, int64_t row_clip = 0,
                     int64_t col_clip = 0) {
    GmWindow g;
    auto ws = ws_offset_.find(r.buffer.get());
    g.param = ws != ws_offset_.end() ? -1 : params_.at(r.buffer.get());
    const auto& shape = r.buffer->shape;
    auto ext = const_extents(r, sp);
    size_t n = ext.size();
    // where dim d's indices end: the tensor's size, or before start + e for a run-time extent
    // min(C, e) (ir.h): the indices past it are outside like a tail's
    auto end = [&](size_t d) {
      auto rt = ir::runtime_extent(r.extents[d]);
      return rt ? min(shape[d], add(start32(r.starts[d]), idx32(rt->value))) : shape[d];
    };
    for (size_t d = 0; d < n; ++d)  // a unit dim is dropped below: its run-time extent would be lost
      if (auto rt = ir::runtime_extent(r.extents[d]); rt && rt->bound == 1)
        throw Error("GM region " + ir::print(r) + ": the run-time extent " + ir::print(r.extents[d]) +
                        " has the bound 1; on Ascend a run-time extent is one of the copy's rows or columns",
                    sp, "guard the copy with an if instead (if " + ir::print(rt->value) + " >= 1: T.copy(...))");
    Expr off = C(0), stride = C(1);
    std::vector<Expr> strides(n);
    for (size_t d = n; d-- > 0;) {
      strides[d] = stride;
      off = add(off, mul(start32(r.starts[d]), stride));
      stride = mul(stride, shape[d]);
    }
    g.offset = mul(off, C(r.buffer->dtype.bytes()));
    if (ws != ws_offset_.end()) g.offset = add(ws->second, g.offset);
    // Trailing dims of size 1 (X[a:b, :, 0] of an (S, D, 1) tensor) are dropped: the dim before
    // them is the last, contiguous one.
    auto size_one = [&](size_t d) { auto c = ir::as_const_int(shape[d]); return c && *c == 1 && ext[d] == 1; };
    while (tile_cols != 1 && n > 1 && size_one(n - 1)) --n;
    g.cols = ext[n - 1];
    Expr cstart = start32(r.starts[n - 1]);
    g.col_start = cstart;
    int64_t es = r.buffer->dtype.bytes();
    if (inside(cstart, g.cols, end(n - 1))) {
      g.valid_cols = C(g.cols);
    } else if (auto c = clip_low(cstart, g.cols, end(n - 1), col_clip)) {
      std::tie(g.skip_cols, g.valid_cols) = *c;
      g.offset = add(g.offset, mul(g.skip_cols, C(es)));
    } else {
      g.valid_cols = valid_count(g.cols, end(n - 1), cstart);
      if (col_clip > 0 && !nonneg(cstart)) g.unclipped_cols = cstart;
    }
    if (n < 2) {
      g.row_stride = shape[n - 1];
      g.rows = 1;
      g.valid_rows = C(1);
      return g;
    }
    // The rows: the innermost non-unit dim before the last (the one before the last when all are unit).
    size_t rd = n - 2;
    while (rd > 0 && ext[rd] == 1) --rd;
    if (ext[rd] == 1) rd = n - 2;
    g.row_stride = rd == n - 2 ? shape[n - 1] : strides[rd];
    g.rows = ext[rd];
    Expr start = start32(r.starts[rd]);
    g.valid_rows = valid_count(g.rows, end(rd), start);
    if (inside(start, g.rows, end(rd))) {
      g.valid_rows = C(g.rows);
    } else if (auto c = clip_low(start, g.rows, end(rd), row_clip)) {
      // the GM side starts at row 0, the local side that many rows in (a load reads zeros there
      // through the tail fill)
      std::tie(g.skip_rows, g.valid_rows) = *c;
      g.offset = add(g.offset, mul(mul(g.skip_rows, g.row_stride), C(es)));
    } else if (row_clip > 0 && !nonneg(start)) {
      g.unclipped_rows = start;
    }
    // A dropped unit dim whose index may lie outside the tensor (A[by + 3, 0, :] with by + 3 >= M,
    // A[by - 16, 2, :] with by < 16): the window is then empty, as on cpu (no rows read or
    // written; a load's tile reads zeros through the tail fill).
    for (size_t d = 0; d + 1 < n; ++d) {
      Expr st = start32(r.starts[d]);
      if (d == rd || ext[d] != 1 || inside(st, 1, end(d))) continue;
      Expr v = valid_count(1, end(d), st);
      if (!nonneg(st)) v = max(C(0), min(min(C(1), sub(end(d), st)), add(st, C(1))));
      g.valid_rows = simp(mul(g.valid_rows, v));
    }
    for (size_t d = 0; d < rd; ++d) {
      if (ext[d] == 1) continue;
      Expr st = start32(r.starts[d]);
      if (row_clip && !nonneg(st))
        throw Error("GM region " + ir::print(r) + ": the start of dim " + std::to_string(d) + " (" + ir::print(st) +
                        ") may be negative; only the rows dim of a window may start before the tensor",
                    sp, "start the outer dims of the window at 0 or later (clip them in the kernel)");
      g.outer.push_back({ext[d], inside(st, ext[d], end(d)) ? C(ext[d]) : valid_count(ext[d], end(d), st),
                         strides[d]});
    }
    // An outer dim whose stride continues the rows (rows x row_stride: nothing between them) and
    // rows without a tail or a clipped start: one run of rows.
    while (!g.outer.empty()) {
      const GmOuter& o = g.outer.back();
      auto gap = ir::as_const_int(simp(sub(o.stride, mul(C(g.rows), g.row_stride))));
      auto vr = ir::as_const_int(g.valid_rows), skip = ir::as_const_int(g.skip_rows);
      if (!gap || *gap != 0 || !vr || *vr != g.rows || !skip || *skip != 0) break;
      g.valid_rows = simp(mul(o.valid, C(g.rows)));
      g.rows *= o.count;
      g.outer.pop_back();
    }
    return g;
  }

  // The constant lower bound of integer expression e (block, loop and let bounds, the ifs around the
  // statement), when there is one.
  std::optional<int64_t> low_bound(const Expr& e) const {
    std::optional<int64_t> lo;
    if (auto r = bounds(e)) lo = r->first;
    if (auto l = lower(e)) lo = std::max(lo.value_or(*l), *l);
    return lo;
  }
  // Whether integer expression e has a negative constant lower bound: some block or step reaches the
  // statement with e < 0 (as far as the bounds are tight).
  bool reaches_negative(const Expr& e) const {
    auto lo = low_bound(e);
    return lo && *lo < 0;
  }
  // The Cube's column clips (GM -> L1 in C0 strips, Fixpipe in 16-column fractals, session 17) are
  // made for starts that reach a negative value, and (session 18) for starts that depend on a value
  // known only at run time (a scalar parameter, an element read from GM: `k * bk + off * 16`), which
  // may be negative in some call. A start of unknown range built from block indices alone keeps the
  // unclipped copy it had before, so kernels whose block indices the bounds cannot prove
  // non-negative (map_grid's swizzled bx = in_panel // panel_rows in the seed matmul) keep their code.
  GmWindow cube_gm_window(const ir::Region& r, const Span& sp, int64_t tile_cols, int64_t row_clip, int64_t col_clip) {
    GmWindow g = gm_window(r, sp, tile_cols, row_clip, col_clip);
    auto none = ir::as_const_int(g.skip_cols);
    if ((g.unclipped_cols || !none || *none != 0) && !reaches_negative(g.col_start) && !run_time(g.col_start))
      g = gm_window(r, sp, tile_cols, row_clip, 0);
    return g;
  }
  // A located error for a window start that lies before row / column 0 of its tensor in some run that
  // reaches the copy (its lower bound is negative) on a path that cannot skip those rows / columns.
  void start_before_tensor(const Expr& start, const ir::Region& r, const char* dim, const std::string& why,
                           const std::string& hint, const Span& sp) const {
    auto lo = low_bound(start);
    if (!lo || *lo >= 0) return;  // unknown range: the checker reports a negative start at run time
    throw Error("copy to / from " + ir::print(r) + ": the window's first " + dim + " " + ir::print(start) +
                    " lies before " + dim + " 0 of tensor " + q(r.buffer->name) + " in some blocks or steps (it can be " +
                    std::to_string(*lo) + "), and " + why,
                sp, hint);
  }

  // (skip, valid) of a window dim that may start before index 0 (gm_window's row_clip / col_clip
  // `unit`): skip = the indices before 0, clamped to the window's whole units; valid = the indices
  // inside [0, end). nullopt: not clipped (unit 0, a start provably >= 0, or not a multiple of unit).
  std::optional<std::pair<Expr, Expr>> clip_low(const Expr& start, int64_t extent, const Expr& end, int64_t unit) const {
    if (unit <= 0 || nonneg(start) || !multiple_of(start, unit, &let_values_)) return std::nullopt;
    Expr before = max(C(0), sub(C(0), start));
    Expr valid = max(C(0), sub(min(C(extent), sub(end, start)), min(before, C(extent))));
    return std::make_pair(min(before, C(extent / unit * unit)), valid);
  }

  // The copy `body(gm_bytes, row)` once per outer index of g: gm_bytes is the GM byte offset of
  // that index's rows, row their first row in the tile. Indices past the tensor's end are skipped.
  StmtPtr per_outer(const GmWindow& g, ir::DType t, const Span& sp,
                    const std::function<StmtPtr(const Expr&, const Expr&)>& body) {
    std::vector<ir::Var> vars;
    Expr gm = C(0), row = C(0);
    int64_t rows_per = g.rows;
    for (size_t k = g.outer.size(); k-- > 0;) {
      ir::Var v = ir::var("_w" + std::to_string(window_loops_++), ir::kIndexType, sp);
      nonneg_.insert(v.get());
      gm = add(gm, mul(v, g.outer[k].stride));
      row = add(row, mul(v, C(rows_per)));
      rows_per *= g.outer[k].count;
      vars.push_back(v);
    }
    StmtPtr s = body(mul(gm, C(t.bytes())), row);
    for (size_t k = g.outer.size(), i = 0; k-- > 0; ++i) s = for_(vars[i], g.outer[k].valid, s, sp);
    return s;
  }

  // or_with(c): c, or c || (some outer index is past the tensor's end).
  Expr or_outer_short(const GmWindow& g, Expr c) {
    for (const auto& o : g.outer) c = simp(ir::binary(ir::BinOp::Or, c, ir::binary(ir::BinOp::LT, o.valid, C(o.count))));
    return c;
  }

  LocalRef local(const Window& w, const Expr& extra = nullptr) const {
    return LocalRef{w.buf->index, extra ? add(w.slice_off, extra) : w.slice_off};
  }

  // ---- statements ----
  static StmtPtr or_empty(StmtPtr s) { return s ? s : seq({}, {}); }

  StmtPtr emit(InstrOp op, const Span& sp) { return instr(std::move(op), sp); }

  // nullptr: nothing for the current core.
  StmtPtr lower(const ir::Stmt& s, bool inside) {
    if (!s) return nullptr;
    const Span& sp = s->span;
    switch (s->kind) {
      case ir::StmtKind::Seq: {
        std::vector<StmtPtr> out;
        bool any = false;
        for (const auto& c : as<ir::SeqNode>(s)->body) {
          StmtPtr l = lower(c, inside);
          if (!l) continue;
          // a statement with hoisted scalar loads: the loads (and a let) bind in this Seq
          std::vector<StmtPtr> parts = hoisted_.erase(l.get()) ? l->body : std::vector<StmtPtr>{l};
          for (auto& x : parts) {
            any |= !scalar_only(x);
            out.push_back(std::move(x));
          }
        }
        if (!any) return nullptr;
        return out.size() == 1 ? out[0] : seq(std::move(out), sp);
      }
      case ir::StmtKind::For: {
        auto* f = as<ir::ForNode>(s);
        if (f->for_kind == ir::ForKind::parallel) {
          if (!inside) outside_scope(s, "a T.Parallel map");
          if (core_ != CoreKind::V) return nullptr;
          return lower_map(f, sp);
        }
        if (auto t = row_tail_fill(f, inside, sp)) return *t;
        std::vector<StmtPtr> loads;
        Expr f_extent = hoist_scalar_loads(f->extent, sp, "the bound of loop " + q(f->var->name), loads);
        Expr f_min = hoist_scalar_loads(f->min, sp, "the start of loop " + q(f->var->name), loads);
        if (!loads.empty()) {
          StmtPtr l = lower(std::make_shared<ir::ForNode>(f->var, f_min, f_extent, f->for_kind, f->num_stages, f->body, f->span), inside);
          return with_loads(std::move(loads), l, sp);
        }
        if (run_time(f->min)) runtime_.insert(f->var.get());
        else runtime_.erase(f->var.get());
        let_values_.erase(f->var.get());
        if (auto mn0 = ir::as_const_int(f->min); mn0 && *mn0 == 0) loop_extent_[f->var.get()] = f->extent;
        else loop_extent_.erase(f->var.get());
        bound(f->var.get(), nonneg(f->min), [&]() -> std::optional<std::pair<int64_t, int64_t>> {
          auto lo = ir::as_const_int(f->min), ext = ir::as_const_int(f->extent);
          if (lo && ext && *ext >= 1) return std::make_pair(*lo, *lo + *ext - 1);
          return std::nullopt;
        }());
        StmtPtr body = lower(f->body, inside);
        if (!body) return nullptr;
        auto mn = ir::as_const_int(f->min);
        if (mn && *mn == 0) return for_(f->var, f->extent, body, sp);
        // Program loops start at 0: iterate a fresh variable and bind the IR one.
        ir::Var v = ir::var(f->var->name + "_0", f->var->dtype, f->var->span);
        return for_(v, f->extent, seq({let(f->var, add(v, f->min), sp), body}, sp), sp);
      }
      case ir::StmtKind::If: {
        auto* n = as<ir::IfNode>(s);
        if (auto init = mma_init_pair(n)) return lower(*init, inside);
        std::vector<StmtPtr> loads;
        Expr cond = hoist_scalar_loads(n->cond, sp, "the condition of this if", loads);
        if (!loads.empty())
          return with_loads(std::move(loads), lower(std::make_shared<ir::IfNode>(cond, n->then_body, n->else_body, n->span), inside), sp);
        StmtPtr t;
        {
          // the then-branch knows the condition's lower bound on its variable (skew_cube_loops'
          // `if (k_o * 2 >= 3)` around a load of rows (k_o * 2 - 3) * 64: no clip at row 0)
          auto known = cond_low(n->cond);
          std::optional<int64_t> saved;
          if (known) {
            if (auto it = low_.find(known->first); it != low_.end()) saved = it->second;
            low_[known->first] = std::max(known->second, saved.value_or(known->second));
          }
          guards_.push_back(n->cond);
          t = lower(n->then_body, inside);
          if (known) {
            if (saved) low_[known->first] = *saved;
            else low_.erase(known->first);
          }
        }
        StmtPtr e = lower(n->else_body, inside);
        guards_.pop_back();
        if (!t && !e) return nullptr;
        return if_(n->cond, or_empty(t), e, sp);
      }
      case ir::StmtKind::Let: {
        auto* n = as<ir::LetNode>(s);
        if (auto load = gm_scalar_load(n->value, n->var, sp, "let " + q(n->var->name)))  // `page = table[b, j]`
          return load;
        std::vector<StmtPtr> loads;
        Expr value = hoist_scalar_loads(n->value, sp, "let " + q(n->var->name), loads);
        bool is_int = value->dtype.is_int();
        bound(n->var.get(), is_int && nonneg(value), is_int ? stride_bounds(value) : std::nullopt);
        if (run_time(value)) runtime_.insert(n->var.get());
        else runtime_.erase(n->var.get());
        if (is_int) let_values_[n->var.get()] = value;
        else let_values_.erase(n->var.get());
        return with_loads(std::move(loads), let(n->var, value, sp), sp);
      }
      case ir::StmtKind::Alloc: return nullptr;
      case ir::StmtKind::Store: return lower_element_store(as<ir::StoreNode>(s), sp);
      case ir::StmtKind::CoreScope: {
        auto* n = as<ir::CoreScopeNode>(s);
        bool mine = (n->core == ir::CoreKind::C) == (core_ == CoreKind::C);
        if (!mine) return nullptr;
        StmtPtr b = lower(n->body, true);
        return b;
      }
      case ir::StmtKind::Sync: {
        if (!inside) outside_scope(s, "synchronisation");
        return lower_sync(as<ir::SyncNode>(s), sp);
      }
      case ir::StmtKind::Copy: {  // a GM element in a region's starts (`cache[table[b, j], :, :]`)
        auto* n = as<ir::CopyNode>(s);  // or in a run-time extent (`min(C, n - KvIdx[b, t] * C)`)
        std::vector<StmtPtr> loads;
        auto region = [&](const ir::Region& r) {
          ir::Region out = r;
          for (auto& e : out.starts) e = hoist_scalar_loads(e, sp, "the region " + ir::print(r), loads);
          for (auto& e : out.extents) e = hoist_scalar_loads(e, sp, "the extent of region " + ir::print(r), loads);
          return out;
        };
        ir::Region src = region(n->src), dst = region(n->dst);
        if (!loads.empty())
          return with_loads(std::move(loads), lower(std::make_shared<ir::CopyNode>(src, dst, n->span, n->atomic, n->checked, n->used, n->preload), inside), sp);
        if (!inside) outside_scope(s, "a tile op");
        return lower_tile_op(s);
      }
      case ir::StmtKind::Fill: {  // a GM or UB element in the value (`T.fill(y, P[0])`, lower_scalar_math's
        auto* n = as<ir::FillNode>(s);  // `T.fill(y, T.log(P[0]))`): loaded on the scalar unit first, as a let's
        std::vector<StmtPtr> loads;
        Expr value = hoist_scalar_loads(n->value, sp, "T.fill value", loads);
        if (!loads.empty())
          return with_loads(std::move(loads), lower(std::make_shared<ir::FillNode>(n->dst, value, n->span), inside), sp);
        if (!inside) outside_scope(s, "a tile op");
        return lower_tile_op(s);
      }
      case ir::StmtKind::Gemm:
      case ir::StmtKind::Reduce: {
        if (!inside) outside_scope(s, "a tile op");
        return lower_tile_op(s);
      }
    }
    return nullptr;
  }

  [[noreturn]] void outside_scope(const ir::Stmt& s, const std::string& what) {
    throw Error(what + " outside T.Scope: in expert mode every tile op and flag runs on a core you name", s->span,
                "put it inside with T.Scope(\"C\"): (Cube core: L1/L0 copies, mma) or with T.Scope(\"V\"): (Vector "
                "core: UB copies and vector ops)");
  }

  // Loads left in a scalar expression after hoist_scalar_loads: elements of tiles the scalar unit
  // cannot read (Cube-side buffers L1/L0*; UB tiles read by the Cube core's code).
  void check_scalar(const Expr& e, const Span& sp, const std::string& what) {
    for_each_subexpr(e, [&](const Expr& x) {
      if (x->kind != ir::ExprKind::Load) return;
      const ir::Buffer& b = as<ir::LoadNode>(x)->buffer;
      if (b->scope == Scope::UB)  // the Cube core's copy of scalar code outside T.Scope
        throw Error(what + " reads element " + ir::print(x) + " of UB tile " + q(b->name) +
                        " in code the Cube core runs: a UB tile lives on the Vector core",
                    sp, "read it inside with T.Scope(\"V\"): (the Vector core's scalar unit reads UB with GetValue), or "
                        "read the GM tensor the tile was copied from");
      throw Error(what + " reads element " + ir::print(x) + " of " + std::string(ir::scope_name(b->scope)) + " tile " +
                      q(b->name) + " as a scalar: the scalar unit reads GM tensors (GetValue) and UB tiles (LocalTensor::GetValue), "
                      "not the Cube core's L1/L0 buffers",
                  sp, "copy the values to a UB tile (through GM), or read the GM tensor the tile was copied from");
    });
  }

  // ---- scalar reads and writes of UB tiles (LocalTensor::GetValue / SetValue on the scalar unit) ----
  // The element of UB tile `ld` as a byte place of its buffer (rows padded as the tile's geometry says).
  LocalRef ub_element(const ir::LoadNode* ld, const Span& sp) { return ub_element(ld->buffer, ld->indices, sp); }
  LocalRef ub_element(const ir::Buffer& b, const std::vector<Expr>& indices, const Span& sp) {
    ir::Region r{b, indices, std::vector<Expr>(indices.size(), C(1))};
    return local(window(r, sp));
  }
  // The end (bytes from the buffer's start) of UB tile b's last element: rows padded to pcols, the
  // last row's padding excluded (ScalarLoad::tile_end).
  int64_t ub_tile_end(const ir::Buffer& b, const Span& sp) {
    const Buf& t = buf(b, sp);
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
    return t.shape.empty() ? 0 : ((rows - 1) * t.pcols + t.shape.back()) * t.dtype.bytes();
  }
  // The indices of a scalar-unit element access of a buffer of 2 or more dims, each against its
  // dimension (program.h DimIndex: the simulator reports one outside it); a constant index inside a
  // constant dimension needs no check.
  static std::vector<DimIndex> dim_indices(const ir::Buffer& b, const std::vector<Expr>& indices) {
    std::vector<DimIndex> dims;
    if (indices.size() < 2) return dims;  // one dim: the flat bound is the dimension's
    for (size_t d = 0; d < indices.size(); ++d) {
      auto i = ir::arith::literal(indices[d]), n = ir::arith::literal(b->shape[d]);
      if (i && n && *i >= 0 && *i < *n) continue;
      dims.push_back(DimIndex{indices[d], b->shape[d], static_cast<int>(d)});
    }
    return dims;
  }
  bool ub_readable(const Expr& x) const {
    return x && x->kind == ir::ExprKind::Load && as<ir::LoadNode>(x)->buffer->scope == Scope::UB && core_ == CoreKind::V;
  }
  // `t[i, j] = value` outside a T.Parallel map: SetValue on the scalar unit, the tile elements the
  // value reads loaded first (GetValue). The value is scalar-unit arithmetic: no math functions.
  StmtPtr lower_element_store(const ir::StoreNode* n, const Span& sp) {
    if (n->buffer->scope == Scope::global)
      throw Error("element store into tensor " + q(n->buffer->name) +
                      " outside a T.Parallel map: on Ascend the scalar unit writes single elements of UB tiles only "
                      "(its GM writes go through a DataCache the DMA does not see)",
                  sp, "store into a tile (T.alloc_fragment) and T.copy the tile to the tensor once it is complete");
    if (n->buffer->scope != Scope::UB)
      throw Error("element store into " + std::string(ir::scope_name(n->buffer->scope)) + " tile " + q(n->buffer->name) +
                      ": the scalar unit writes single elements of UB tiles only",
                  sp, "write whole tiles: T.fill, T.copy, vector ops or a T.Parallel map");
    if (core_ != CoreKind::V) return nullptr;  // the Vector core's statement
    // abs of an integer is a select, not a math function (hunt30 F3): max(x, -x) for a signed type
    // (abs(INT_MIN) wraps to INT_MIN, as the language says), x itself for a bare uint8 value; a uint8
    // expression may be negative before it is stored (u[0] - u[1]: hunt31 F6), so it is max(x, -x) too
    struct IntAbs : ir::Mutator {
      using ir::Mutator::mutate;
      Expr mutate(const Expr& e) override {
        Expr x = ir::Mutator::mutate(e);
        if (x->kind != ir::ExprKind::Call || as<ir::CallNode>(x)->fn != ir::MathFn::abs || !x->dtype.is_int()) return x;
        const Expr& a = as<ir::CallNode>(x)->args[0];
        if (x->dtype == ir::DType(ir::DTypeCode::u8) &&
            (a->kind == ir::ExprKind::Load || a->kind == ir::ExprKind::Var || ir::as_const_int(a)))
          return a;
        return ir::binary(ir::BinOp::Max, a, ir::unary(ir::UnOp::Neg, a, x->span), x->span);
      }
    };
    const Expr value0 = IntAbs{}.mutate(n->value);
    for_each_subexpr(value0, [&](const Expr& x) {
      if (x->kind == ir::ExprKind::Call) {
        const std::string call = ir::print(x);  // the function's name only: the indices are the compiler's
        throw Error("element store into tile " + q(n->buffer->name) + " computes " + call.substr(0, call.find('(')) +
                        " on the scalar unit, which has no math functions on Ascend",
                    sp, "compute it with vector code: a loop nest of its own that only stores the element-wise value "
                        "(for i, j over the tile: e[i, j] = T.exp(x[i, j] - m[i]); a running sum or other statement in "
                        "the same nest keeps it on the scalar unit, so sum in a second nest), a T.Parallel map over the "
                        "tile, or one element whose place "
                        "starts a 32-byte block (t[0], t[8] of float32), which runs as a one-element vector "
                        "instruction");
      }
    });
    std::vector<StmtPtr> loads;
    std::vector<Expr> idx;
    for (const auto& i : n->indices) idx.push_back(hoist_scalar_loads(i, sp, "the index of this element store", loads));
    Expr value = hoist_scalar_loads(value0, sp, "the value of this element store", loads);
    LocalRef dst = ub_element(n->buffer, idx, sp);
    StmtPtr st = emit(ScalarStore{dst, ir::cast(value, n->buffer->dtype, sp), n->buffer->dtype, ub_tile_end(n->buffer, sp),
                                  dim_indices(n->buffer, idx)},
                      sp);
    return loads.empty() ? st : with_loads(std::move(loads), st, sp);
  }

  // ---- scalar reads of GM tensors (GlobalTensor::GetValue on the scalar unit) ----
  // `value` is exactly an element of a tensor parameter the kernel never writes: a ScalarLoad
  // binding `var` (nullptr otherwise). A tensor the kernel writes is rejected: its DMA writes are
  // not coherent with the scalar DataCache (program.h ScalarLoad).
  // `dims`: the load's indices are checked each against its dimension (DimIndex); false for a read the
  // expression may discard (unguarded_loads, pass_util.h): hoisted, it runs whatever the condition, so
  // each of its indices not proved inside its dimension is clamped into it (the value is discarded
  // where the index is outside; the printed GetValue reads the clamped element too: review34's open
  // note, `T.if_then_else(j < n, Table[1, j], 0)` read past the tensor's last byte at j = 3).
  StmtPtr gm_scalar_load(const Expr& value, const ir::Var& var, const Span& sp, const std::string& what,
                         bool dims = true) {
    if (!value || value->kind != ir::ExprKind::Load) return nullptr;
    auto* ld = as<ir::LoadNode>(value);
    bool ub = ub_readable(value);
    if (!ub && ld->buffer->scope != Scope::global) return nullptr;
    // indices that read elements themselves (`cnt[e_s]`, `X[idx[i], 0]`): those loads first
    std::vector<StmtPtr> loads;
    std::vector<Expr> idx;
    for (const auto& i : ld->indices) idx.push_back(hoist_scalar_loads(i, sp, what, loads));
    if (!loads.empty()) {
      StmtPtr st = gm_scalar_load(std::make_shared<ir::LoadNode>(ld->buffer, idx, value->dtype, value->span), var, sp,
                                  what, dims);
      return with_loads(std::move(loads), st, sp);
    }
    if (!dims)
      for (size_t d = 0; d < idx.size(); ++d)
        if (!inside(idx[d], 1, ld->buffer->shape[d]))
          idx[d] = simp(min(max(start32(idx[d]), C(0)), sub(idx32(ld->buffer->shape[d]), C(1))));
    if (ub) {
      ScalarLoad l;
      l.var = var, l.dtype = ld->buffer->dtype, l.ub = ub_element(ld->buffer, idx, sp);
      l.tile_end = ub_tile_end(ld->buffer, sp);
      if (dims) l.dims = dim_indices(ld->buffer, idx);
      return emit(std::move(l), sp);
    }
    if (ld->buffer->scope != Scope::global) return nullptr;
    auto it = params_.find(ld->buffer.get());
    if (it == params_.end())
      throw Error(what + " reads element " + ir::print(value) + " of the kernel's own global buffer " +
                      q(ld->buffer->name) + " as a scalar: the kernel writes it by DMA, which the scalar unit's "
                      "DataCache does not see",
                  sp, "read a tensor parameter the kernel does not write, or keep the value in a tile and use it "
                      "inside a T.Parallel map");
    if (written_.count(ld->buffer.get()))
      throw Error(what + " reads element " + ir::print(value) + " of tensor " + q(ld->buffer->name) +
                      " as a scalar, but the kernel also writes " + q(ld->buffer->name) +
                      ": on Ascend the scalar unit reads GM through a DataCache that DMA writes do not update",
                  sp, "read scalars only from input tensors the kernel does not write (pass the values in a "
                      "separate tensor)");
    const auto& shape = ld->buffer->shape;
    Expr off = C(0), stride = C(1);
    for (size_t d = shape.size(); d-- > 0;) {
      off = add(off, mul(idx32(idx[d]), stride));
      stride = mul(stride, shape[d]);
    }
    off = mul(off, C(ld->buffer->dtype.bytes()));
    runtime_.insert(var.get());
    ScalarLoad l{var, GmRef{it->second, off}, ld->buffer->dtype};
    if (dims) l.dims = dim_indices(ld->buffer, ld->indices);
    return emit(std::move(l), sp);
  }
  // `e` with each element of a tensor parameter or (Vector core) UB tile it reads replaced by a
  // variable a ScalarLoad (appended to `loads`) binds; other tile elements stay an error (check_scalar).
  Expr hoist_scalar_loads(const Expr& e, const Span& sp, const std::string& what, std::vector<StmtPtr>& loads) {
    if (!e) return e;
    Expr out = e;
    while (true) {  // innermost loads first: an index that reads an element (`cnt[ti[i]]`) is loaded before
      ExprVarMap map;
      std::unordered_set<std::string> unguarded;
      unguarded_loads(out, unguarded);
      for_each_subexpr(out, [&](const Expr& x) {
        if (x->kind != ir::ExprKind::Load) return;
        if (as<ir::LoadNode>(x)->buffer->scope != Scope::global && !ub_readable(x)) return;
        for (const auto& i : as<ir::LoadNode>(x)->indices)
          if (has_load(i)) return;
        if (find_load(map, x)) return;
        ir::Var v = ir::var(as<ir::LoadNode>(x)->buffer->name + "_s" + std::to_string(++scalar_loads_), x->dtype, sp);
        loads.push_back(gm_scalar_load(x, v, sp, what, unguarded.count(ir::print(x)) > 0));
        map.emplace_back(v, x);
      });
      if (map.empty()) break;
      out = ReplaceExprs(map).mutate(out);
    }
    check_scalar(out, sp, what);
    return out;
  }
  // `s` after the loads its expressions need (a Seq the enclosing Seq splices, so the loads and a
  // let bind in it); just `s` when there are none.
  StmtPtr with_loads(std::vector<StmtPtr> loads, StmtPtr s, const Span& sp) {
    if (loads.empty() || !s) return s;  // nothing of the statement on this core: no loads either
    loads.push_back(std::move(s));
    StmtPtr out = seq(std::move(loads), sp);
    hoisted_.insert(out.get());
    return out;
  }
  // Only scalar work (lets, scalar loads): a Seq of it alone is dropped for a core.
  static bool scalar_only(const StmtPtr& s) {
    if (s->kind == StmtKind::Let) return true;
    if (s->kind == StmtKind::Instr) return std::holds_alternative<ScalarLoad>(s->instr.op);
    if (s->kind == StmtKind::Seq)
      return std::all_of(s->body.begin(), s->body.end(), [](const StmtPtr& b) { return scalar_only(b); });
    return false;
  }

  // `if c { gemm(clear=true) } else { gemm(clear=false) }` on the same operands: T.mma(init=c).
  std::optional<ir::Stmt> mma_init_pair(const ir::IfNode* n) {
    auto single = [](const ir::Stmt& s) -> const ir::GemmNode* {
      ir::Stmt x = s;
      while (x && x->kind == ir::StmtKind::Seq && as<ir::SeqNode>(x)->body.size() == 1) x = as<ir::SeqNode>(x)->body[0];
      return x && x->kind == ir::StmtKind::Gemm ? as<ir::GemmNode>(x) : nullptr;
    };
    const ir::GemmNode* t = single(n->then_body);
    const ir::GemmNode* e = n->else_body ? single(n->else_body) : nullptr;
    if (!t || !e || !t->clear || e->clear || t->trans_a != e->trans_a || t->trans_b != e->trans_b) return std::nullopt;
    if (ir::print(t->a) != ir::print(e->a) || ir::print(t->b) != ir::print(e->b) || ir::print(t->c) != ir::print(e->c))
      return std::nullopt;
    if (t->a.buffer != e->a.buffer || t->b.buffer != e->b.buffer || t->c.buffer != e->c.buffer) return std::nullopt;
    pending_init_ = n->cond;
    return std::make_shared<ir::GemmNode>(t->a, t->b, t->c, t->trans_a, t->trans_b, true, n->span);
  }

  StmtPtr lower_sync(const ir::SyncNode* n, const Span& sp) {
    switch (n->sync) {
      case ir::SyncKind::set_flag:
        check_gemm_event(n, sp);
        return emit(SetFlag{n->pipe, n->dst_pipe, n->id}, sp);
      case ir::SyncKind::wait_flag:
        check_gemm_event(n, sp);
        return emit(WaitFlag{n->pipe, n->dst_pipe, n->id}, sp);
      case ir::SyncKind::pipe_barrier:
        if (n->pipe == Pipe::S)
          throw Error("T.pipe_barrier(\"S\"): PipeBarrier<PIPE_S> is a hardware error on the 910B (PipeBarrier docs)", sp,
                      "the scalar unit issues in order and needs no barrier; to wait for another pipe use a flag "
                      "(T.set_flag / T.wait_flag) or T.pipe_barrier(\"ALL\")");
        return emit(PipeBarrier{n->pipe}, sp);
      case ir::SyncKind::set_cross_flag: return emit(CrossCoreSetFlag{n->mode, n->pipe, n->id}, sp);
      case ir::SyncKind::wait_cross_flag: return emit(CrossCoreWaitFlag{n->id, n->pipe}, sp);
    }
    return nullptr;
  }

  void check_gemm_event(const ir::SyncNode* n, const Span& sp) {
    if (gemm_l0a_.index < 0) return;
    bool pair = (n->pipe == ir::AscendPipe::MTE1 && n->dst_pipe == ir::AscendPipe::M) ||
                (n->pipe == ir::AscendPipe::M && n->dst_pipe == ir::AscendPipe::MTE1);
    auto id = ir::as_const_int(n->id);
    if (pair && (!id || *id == kGemmEventId))
      throw Error("event " + std::to_string(kGemmEventId) + " of " + std::string(ir::pipe_name(n->pipe)) + "->" +
                      std::string(ir::pipe_name(n->dst_pipe)) + " is used by T.gemm on L1 operands in this kernel",
                  sp, "use event ids 0..6 for your own MTE1/M flags (or a constant id)");
  }

  // ---- tile ops ----
  StmtPtr lower_tile_op(const ir::Stmt& s) {
    const Span& sp = s->span;
    switch (s->kind) {
      case ir::StmtKind::Copy: return lower_copy(as<ir::CopyNode>(s), sp);
      case ir::StmtKind::Gemm: return lower_gemm(as<ir::GemmNode>(s), sp);
      case ir::StmtKind::Fill: {
        auto* n = as<ir::FillNode>(s);
        if (n->dst.buffer->scope == Scope::L1) return fill_l1(n, sp);
        if (n->dst.buffer->scope != Scope::UB)
          throw Error("T.fill of " + std::string(ir::scope_name(n->dst.buffer->scope)) + " buffer " +
                          q(n->dst.buffer->name) + ": only UB and L1 tiles can be filled",
                      sp, "to start an accumulation from zero use T.mma(..., init=True) / T.gemm(..., clear_accum=True)");
        Window w = window(n->dst, sp);
        vec_aligned(w, n->dst, sp, "T.fill of");
        // Duplicate has a bfloat16_t form on dav-c220 (only bf16 arithmetic is missing)
        if (w.buf->dtype != ir::DType(ir::DTypeCode::bf16)) vec_dtype_ok(w.buf->dtype, sp, "T.fill", true);
        check_scalar(n->value, sp, "T.fill value");
        VecOperand d = vop(w);
        auto [rows, cols] = collapse({&d}, w.rows, w.cols, sp);
        return emit(VecDup{w.buf->dtype, d, ir::cast(n->value, w.buf->dtype, sp), C(rows), C(cols)}, sp);
      }
      case ir::StmtKind::Reduce: return lower_reduce(as<ir::ReduceNode>(s), sp);
      case ir::StmtKind::Seq:
      case ir::StmtKind::For:
      case ir::StmtKind::If:
      case ir::StmtKind::Let:
      case ir::StmtKind::Store:
      case ir::StmtKind::Alloc:
      case ir::StmtKind::CoreScope:
      case ir::StmtKind::Sync: break;  // not tile ops
    }
    return nullptr;
  }

  // A row-tail fill (cube_row_mask.h): `for r in serial(0, R) { if r >= e { fill X[.., r:+1, cols]
  // = z } }` on an L1 tile of at least R rows, e free of r: the rows lo .. R - 1 with lo =
  // max(min(e, R), 0), as one InitConstValue over those rows of each C0 strip the columns cover
  // (blockNum and dstGap at run time; no call when lo == R). nullopt for any other loop.
  std::optional<StmtPtr> row_tail_fill(const ir::ForNode* f, bool inside, const Span& sp) {
    auto mn = ir::as_const_int(f->min), ext = ir::as_const_int(f->extent);
    if (f->for_kind != ir::ForKind::serial || !mn || *mn != 0 || !ext || *ext < 1 || !f->body ||
        f->body->kind != ir::StmtKind::If)
      return std::nullopt;
    auto* i = as<ir::IfNode>(f->body);
    if (i->else_body || !i->then_body || i->then_body->kind != ir::StmtKind::Fill || i->cond->kind != ir::ExprKind::Binary)
      return std::nullopt;
    auto mentions = [&](const Expr& e) {
      bool found = false;
      for_each_subexpr(e, [&](const Expr& x) { found = found || x.get() == f->var.get(); });
      return found;
    };
    auto* c = as<ir::BinaryNode>(i->cond);
    if (c->op != ir::BinOp::GE || c->a.get() != f->var.get() || mentions(c->b)) return std::nullopt;
    auto* n = as<ir::FillNode>(i->then_body);
    const ir::Region& r = n->dst;
    size_t nd = r.starts.size();
    if (r.buffer->scope != Scope::L1 || nd < 2 || r.starts[nd - 2].get() != f->var.get()) return std::nullopt;
    auto one = ir::as_const_int(r.extents[nd - 2]);
    if (!one || *one != 1) return std::nullopt;
    for (size_t d = 0; d < nd; ++d)
      if (d != nd - 2 && (mentions(r.starts[d]) || mentions(r.extents[d]))) return std::nullopt;
    if (!inside) outside_scope(i->then_body, "a tile op");
    if (*ext > buf(r.buffer, sp).rows) return std::nullopt;  // the general path reports the rows outside
    std::vector<StmtPtr> loads;
    Expr e = hoist_scalar_loads(c->b, sp, "the condition of this if", loads);
    ir::Var lo = ir::var(r.buffer->name + "_kept_" + std::to_string(++row_tails_), ir::kIndexType, sp);
    Expr rows = C(*ext);
    StmtPtr fill = fill_l1(n, sp, std::make_pair(Expr(lo), sub(rows, lo)));
    StmtPtr out = seq({let(lo, max(min(ir::cast(e, ir::kIndexType, sp), rows), C(0)), sp),
                       if_(ir::binary(ir::BinOp::LT, lo, rows, sp), fill, nullptr, sp)},
                      sp);
    return loads.empty() ? out : with_loads(std::move(loads), out, sp);
  }

  // T.fill of an L1 window (MTE2): one InitConstValue over rows r0 .. r0 + rows - 1 of each C0
  // strip the window covers (all the tile's rows: the whole strip height, padding rows included).
  // InitConstValue has no 8-bit form on dav-c220: 8-bit tiles are zeroed as half (zero only).
  // run_rows (a row-tail fill): the window's first row and row count at run time instead (the
  // caller proves them inside the tile).
  StmtPtr fill_l1(const ir::FillNode* n, const Span& sp, std::optional<std::pair<Expr, Expr>> run_rows = std::nullopt) {
    Window w = window(n->dst, sp);
    ir::DType t = w.buf->dtype;
    int64_t c0 = c0_of(t);
    auto cc0 = ir::as_const_int(w.c0);
    if (!cc0 || *cc0 % c0 != 0 || (w.cols % c0 != 0 && *cc0 + w.cols != w.buf->cols))
      throw Error("T.fill of " + ir::print(n->dst) + ": an L1 window is filled in whole C0 strips (" +
                      std::to_string(c0) + " " + std::string(t.name()) + " columns), but its columns start at " +
                      ir::print(w.c0) + " and number " + std::to_string(w.cols),
                  sp, "fill whole rows of the tile (t[r, :]), or columns starting and ending at multiples of " +
                          std::to_string(c0));
    check_scalar(n->value, sp, "T.fill value");
    ir::DType ft = t;
    Expr value = ir::cast(n->value, t, sp);
    if (t.bytes() == 1) {
      auto v = ir::as_const_int(value);
      if (!v || *v != 0)
        throw Error("T.fill of the " + std::string(t.name()) + " L1 tile " + q(n->dst.buffer->name) +
                        " with a value other than 0: dav-c220 has no 8-bit InitConstValue",
                    sp, "fill 8-bit L1 tiles with 0, or fill a UB tile and copy it");
      ft = ir::DType(ir::DTypeCode::f16);
      value = ir::float_imm(0.0, ft, sp);
    }
    Expr win = run_rows ? nullptr : row_window(w, n->dst, "T.fill of", sp);
    int64_t prows = w.buf->prows;
    Expr rows = run_rows ? run_rows->second : C(win ? w.rows : prows);
    Expr off = add(C(*cc0 / c0 * prows * 32), mul(run_rows ? run_rows->first : w.r0, C(32)));
    int64_t strips = (w.cols + c0 - 1) / c0;
    for (int64_t f : {strips, prows})  // rows and the gap are at most prows
      if (f > 65535)
        throw Error("T.fill of " + ir::print(n->dst) + ": InitConstValueParams fields are uint16 (at most 65535)", sp,
                    "use a smaller tile");
    return emit(InitConstValue{local(w, off), ft, C(strips), rows, sub(C(prows), rows), value}, sp);
  }

  StmtPtr lower_copy(const ir::CopyNode* n, const Span& sp) {
    Scope from = n->src.buffer->scope, to = n->dst.buffer->scope;
    ir::DType st = n->src.buffer->dtype, dt = n->dst.buffer->dtype;
    auto same_dtype = [&](const char* path) {
      if (st != dt)
        throw Error(std::string("copy ") + path + " cannot convert " + std::string(st.name()) + " to " +
                        std::string(dt.name()),
                    sp, std::string(to == Scope::L1 ? "the Cube's copies (GM -> L1 Nd2Nz) move data unconverted: pass the "
                                                      "tensor in the tile's dtype, or copy it into a tile of its own dtype "
                                                      "and convert that tile in a T.Parallel map (p[i, j] = x[i, j]), which "
                                                      "runs on the Vector core and hands the result to the Cube"
                                                    : "copy into a buffer of the same dtype; convert in UB with T.cast, or "
                                                      "on the way out of L0C"));
    };
    if (from == Scope::global && to == Scope::L1) {
      same_dtype("GM->L1");
      Window w = window(n->dst, sp);
      int64_t c0 = c0_of(dt);
      // columns before column 0: whole C0 strips of the Nz tile (an Nz row keeps a strip's C0 columns
      // in one 32 B block, and the Nd2Nz destination starts on a block)
      GmWindow g = cube_gm_window(n->src, sp, w.cols, /*row_clip=*/1, /*col_clip=*/c0);
      Expr col_start;
      if (g.unclipped_cols)
        start_before_tensor(g.unclipped_cols, n->src, "column",
                            "a GM->L1 copy (DataCopy with Nd2NzParams) skips columns only in whole C0 strips of " +
                                std::to_string(c0) + " " + std::string(dt.name()) + " columns: the Nz tile keeps each row's " +
                                std::to_string(c0) + " columns of a strip in one 32 B block",
                            "start the window a multiple of " + std::to_string(c0) + " columns before the tensor (e.g. "
                                "bx * " + std::to_string(c0) + " - " + std::to_string(c0) + "): the columns before 0 then "
                                "read zeros, as on cpu",
                            sp);
      if (g.unclipped_cols) {
        // a start of unknown range (a scalar parameter, an element read from GM): the whole C0
        // strips before column 0 are clipped at run time (a start that is a multiple of C0 then
        // reads exact zeros there) and a window wholly before the tensor moves nothing; a rest inside
        // a strip cannot be clipped (the Nd2Nz destination starts on a 32 B block): the copy then
        // reads across the start of its row, the simulator checker's out-of-bounds report (never
        // silent: the read always crosses the row's start)
        Expr before = max(C(0), sub(C(0), g.unclipped_cols));
        Expr skip = simp(min(mul(ir::binary(ir::BinOp::FloorDiv, before, C(c0)), C(c0)), C(g.cols / c0 * c0)));
        g.skip_cols = skip;
        // wholly before the tensor (start + the columns it reads <= 0; fewer columns than a strip skip
        // none): nothing. The columns it reads are valid_cols, not the window's bound g.cols: a
        // run-time extent (the tail of a K chunk, stage_gemm_operands: 488 of 512) ends earlier
        Expr any = mul(max(C(0), add(g.unclipped_cols, g.valid_cols)), C(g.cols));
        g.valid_cols = simp(max(C(0), min(sub(g.valid_cols, skip), any)));
        g.offset = add(g.offset, mul(skip, C(dt.bytes())));
        // where the read starts in its row: negative for a rest inside a strip (the checker's report;
        // a per-row check of the bytes alone misses a start whole tensor rows before column 0)
        col_start = simp(add(g.unclipped_cols, skip));
      }
      cube_single(g, n->src, sp);
      auto cc0 = ir::as_const_int(w.c0);
      Expr win_rows = row_window(w, n->dst, "copy GM->L1 into", sp);
      if (!cc0 || *cc0 % c0 != 0)
        throw Error("copy GM->L1 into " + ir::print(n->dst) + ": the window's first column must be a constant "
                        "multiple of C0 = " + std::to_string(c0) + " (" + std::string(dt.name()) + ")",
                    sp, "Nz strips are C0 columns wide");
      check_same_2d(g.rows, g.cols, w.rows, w.cols, n, sp);
      // row r0 of an Nz strip starts r0 * 32 bytes into it
      Expr off = add(C(*cc0 / c0 * w.buf->prows * c0 * dt.bytes()), mul(w.r0, C(32)));
      if (auto rs = ir::as_const_int(g.row_stride); rs && *rs > 65535)
        throw Error("copy GM->L1 from " + ir::print(n->src) + ": the tensor's rows are " + std::to_string(*rs) +
                        " elements apart, but Nd2NzParams.srcDValue is a uint16 (at most 65535 elements)",
                    sp, "store the matrix transposed (rows of at most 65535 elements) or split it into narrower tensors");
      return emit(CopyGmToL1{GmRef{g.param, g.offset}, local(w, off), dt, g.valid_rows, g.valid_cols, g.row_stride,
                             C(w.buf->prows), C(round_up(w.cols, c0)),
                             dt.bytes() == 1 ? ir::DType(ir::DTypeCode::f16) : dt,  // no InitConstValue<int8_t>
                             win_rows, zero_or_null(g.skip_rows), zero_or_null(g.skip_cols), col_start},
                  sp);
    }
    if (from == Scope::L1 && (to == Scope::L0A || to == Scope::L0B)) {
      same_dtype("L1->L0");
      Window s = window(n->src, sp), d = window(n->dst, sp);
      check_window_origin(d, n->dst, sp);
      check_same_2d(s.rows, s.cols, d.rows, d.cols, n, sp);
      bool b = to == Scope::L0B;
      // L0A holds A (MxK), L0B holds B (KxN). A tile declared the other way round (KxM / NxK, see
      // l0_transposed_) is loaded from an L1 tile of that orientation.
      bool declared_t = l0_transposed_.count(n->dst.buffer.get()) > 0;
      bool transpose = b != declared_t;
      if (transpose && dt.bytes() != 2 && !(b && dt.bytes() == 4))
        throw Error("copy L1->" + std::string(b ? "L0B" : "L0A") + " of a " + std::string(dt.name()) + " " +
                        (b ? "KxN" : "KxM") + " tile needs a transposing load, which LoadData does for 16-bit types " +
                        "(and LoadDataWithTranspose for 32-bit types into L0B)",
                    sp, b ? "use float16/bfloat16/float32 operands, or store B as NxK (transpose_B=True)"
                          : "use float16/bfloat16 operands, or store A as MxK (transpose_A=False)");
      if (declared_t) std::swap(d.rows, d.cols);  // LoadL0's destination is the logical MxK / KxN matrix
      check_l1_fractal_origin(s, n->src, dt, b && transpose && dt.bytes() == 4, sp);
      int64_t rmul = b ? (transpose ? 16 : c0_of(dt)) : 16, cmul = b ? 16 : c0_of(dt);
      return emit(load_l0(s, d, dt, transpose, rmul, cmul), sp);
    }
    if (from == Scope::L0C && to == Scope::global) {
      Window s = window(n->src, sp);
      // rows and columns before the tensor: whole 16 x 16 fractals of L0C (a Fixpipe source starting
      // inside a fractal is not documented for FixpipeParamsV220)
      GmWindow g = cube_gm_window(n->dst, sp, s.cols, /*row_clip=*/16, /*col_clip=*/16);
      for (auto [start, dim] : {std::pair{g.unclipped_rows, "row"}, std::pair{g.unclipped_cols, "column"}})
        if (start)
          start_before_tensor(start, n->dst, dim,
                              std::string("a store from L0C (Fixpipe) skips ") + dim + "s only in whole 16 x 16 "
                              "fractals: its source starts on a fractal (a start inside one is not documented for "
                              "FixpipeParamsV220)",
                              std::string("start the window at a multiple of 16 ") + dim + "s (e.g. bx * 16 - 16), or "
                              "copy the accumulator into a fragment in a T.Parallel map (f[i, j] = c[i, j]) and store "
                              "that: the Vector core's copy skips any rows",
                              sp);
      cube_single(g, n->dst, sp);
      check_same_2d(s.rows, s.cols, g.rows, g.cols, n, sp);
      bool ok = (st == ir::DType(ir::DTypeCode::f32) && dt.is_float() && dt.bits() <= 32) ||
                (st == ir::DType(ir::DTypeCode::i32) && dt == ir::DType(ir::DTypeCode::i32));
      if (!ok)
        throw Error("copy L0C->GM cannot convert " + std::string(st.name()) + " to " + std::string(dt.name()), sp,
                    "Fixpipe converts float32 to float16/bfloat16/float32, int32 to int32");
      auto r0 = ir::as_const_int(s.r0), c0 = ir::as_const_int(s.c0);
      if (!r0 || !c0 || *r0 % 16 || *c0 % 16)
        throw Error("copy L0C->GM from " + ir::print(n->src) + ": the window must start at constant multiples of 16",
                    sp, "L0C holds 16x16 fractals");
      // rows before the tensor's row 0 (skip_rows, a multiple of 16): the source starts past them
      // (skip_cols, a multiple of 16: that many strips of prows x 16)
      Expr off = add(C((*c0 / 16 * s.buf->prows * 16 + *r0 * 16) * st.bytes()),
                     add(mul(g.skip_rows, C(16 * st.bytes())), mul(g.skip_cols, C(s.buf->prows * st.bytes()))));
      return emit(Fixpipe{local(s, off), GmRef{g.param, g.offset}, st, dt, g.valid_rows, g.valid_cols,
                          C(s.buf->prows), g.row_stride, false, n->atomic},
                  sp);
    }
    if (from == Scope::L0C && to == Scope::L1) {
      // T.copy(accumulator, gemm operand) kept on the Cube by infer_scope (whole 16 x 16 fractals,
      // float32 -> float16 / bfloat16): one Fixpipe L0C -> L1 (program.h FixpipeL1), the Nz layout
      // of both sides the same fractal by fractal
      Window s = window(n->src, sp), d = window(n->dst, sp);
      check_same_2d(s.rows, s.cols, d.rows, d.cols, n, sp);
      auto r0 = ir::as_const_int(s.r0), c0 = ir::as_const_int(s.c0);
      auto dr0 = ir::as_const_int(d.r0), dc0 = ir::as_const_int(d.c0);
      bool half = dt == ir::DType(ir::DTypeCode::f16), bf = dt == ir::DType(ir::DTypeCode::bf16);
      if (st != ir::DType(ir::DTypeCode::f32) || !(half || bf) || !r0 || !c0 || !dr0 || !dc0 ||
          (*r0 | *c0 | *dr0 | *dc0 | s.rows | s.cols) % 16)
        throw Error("internal: copy L0C->L1 " + ir::print(n->src) + " -> " + ir::print(n->dst) +
                        ": Fixpipe L0C -> L1 moves whole 16 x 16 fractals from float32 to float16 / bfloat16",
                    sp, "infer_scope keeps only such copies on the Cube");
      Expr soff = C((*c0 / 16 * s.buf->prows * 16 + *r0 * 16) * 4);
      Expr doff = C((*dc0 / 16 * d.buf->prows * 16 + *dr0 * 16) * 2);
      return emit(FixpipeL1{local(s, soff), local(d, doff), st, dt, C(s.cols), C(s.rows), C(s.buf->prows),
                            C(d.buf->prows * 16 * 2 / 32), half ? QuantMode::F322F16 : QuantMode::F322BF16},
                  sp);
    }
    if (from == Scope::global && to == Scope::UB) {
      same_dtype("GM->UB");
      Window w = window(n->dst, sp);
      ub_copy_window_ok(w, n->dst, /*load=*/true, sp);
      GmWindow g = gm_window(n->src, sp, w.cols, /*row_clip=*/1, /*col_clip=*/1);
      int64_t ub_stride = ub_row_stride(w, g, n, sp);
      int64_t b = dt.bytes();
      // skipped columns (a start before column 0): the UB side moves on by their whole 32 B
      // blocks and DataCopyPad's leftPadding places the rest (zeros, under 32 B)
      Expr skip_blocks = simp(ir::binary(ir::BinOp::FloorDiv, mul(g.skip_cols, C(b)), C(32)));
      Expr left = simp(sub(g.skip_cols, mul(skip_blocks, C(32 / b))));
      Expr col_shift = mul(skip_blocks, C(32));
      // Tails read zeros: a copy that can be short pads its rows to 32 B with zeros and, when it
      // is short, runs after a VecDup of 0 over the tile (select_instructions.h). Not for the GM
      // workspace: split_cube_vector's hand-off slots are read within the slot they were written to.
      Expr short_rows = simp(ir::binary(ir::BinOp::LT, g.valid_rows, C(g.rows)));
      Expr short_cols = simp(ir::binary(ir::BinOp::LT, g.valid_cols, C(g.cols)));
      Expr is_short = or_outer_short(g, simp(ir::binary(ir::BinOp::Or, short_rows, short_cols)));
      auto never = ir::as_const_int(is_short);
      bool tail = g.param >= 0 && !(never && *never == 0);
      StmtPtr copy = per_outer(g, dt, sp, [&](const Expr& gm, const Expr& row) {
        return emit(CopyGmToUb{GmRef{g.param, add(g.offset, gm)},
                               local(w, add(mul(add(row, g.skip_rows), C(ub_stride * b)), col_shift)), dt,
                               g.valid_rows, mul(g.valid_cols, C(b)), mul(g.row_stride, C(b)), C(ub_stride * b), tail,
                               zero_or_null(left), n->preload},
                    sp);
      });
      if (!tail) return copy;
      auto col0 = ir::as_const_int(n->dst.starts.back());
      bool to_row_end = col0 && *col0 + g.cols == w.buf->cols;  // the bytes after each row are padding
      WindowCheck fill_check = n->checked ? window_check(n->src, n->used, sp) : WindowCheck{};
      fill_check.preload = n->preload;  // the preload's fill: what it writes is the preload's
      return seq({zero_tile(w, g.total_rows(), g.cols, ub_stride, is_short, sp, to_row_end, std::move(fill_check)),
                  copy},
                 sp);
    }
    if (from == Scope::UB && to == Scope::global) {
      same_dtype("UB->GM");
      Window w = window(n->src, sp);
      ub_copy_window_ok(w, n->src, /*load=*/false, sp);
      GmWindow g = gm_window(n->dst, sp, w.cols, /*row_clip=*/1, /*col_clip=*/32 / dt.bytes());
      if (g.unclipped_cols) return store_before_column_0(n, w, sp);
      int64_t ub_stride = ub_row_stride(w, g, n, sp);
      int64_t b = dt.bytes();
      const WindowCheck wc = store_check(n, sp);
      const Expr skip_rows = ub_skip_rows(g, ub_stride * b, wc);
      return per_outer(g, dt, sp, [&](const Expr& gm, const Expr& row) {
        return emit(CopyUbToGm{local(w, add(mul(add(row, skip_rows), C(ub_stride * b)), mul(g.skip_cols, C(b)))),
                               GmRef{g.param, add(g.offset, gm)},
                               dt, g.valid_rows, mul(g.valid_cols, C(b)), C(ub_stride * b), mul(g.row_stride, C(b)),
                               n->atomic, wc},
                    sp);
      });
    }
    if (from == Scope::UB && to == Scope::UB) {
      Window s = window(n->src, sp), d = window(n->dst, sp);
      vec_aligned(s, n->src, sp, "copy from");
      vec_aligned(d, n->dst, sp, "copy into");
      VecOperand so = vop(s), dop = vop(d);
      if (s.rows * s.cols != d.rows * d.cols || (s.rows != d.rows && !(s.row_stride == s.cols && d.row_stride == d.cols)))
        check_same_2d(s.rows, s.cols, d.rows, d.cols, n, sp);
      if (st != dt) {
        vec_dtype_ok(st, sp, "T.cast", false);
        cast_pair_ok(dt, st, sp);
        auto [rows, cols] = collapse({&so, &dop}, d.rows, d.cols, sp);
        return emit(VecCast{dt, st, cast_round_mode(dt, st), dop, so, C(rows), C(cols)},
                    sp);
      }
      auto [rows, cols] = collapse({&so, &dop}, d.rows, d.cols, sp);
      int64_t b = dt.bytes();
      if ((cols * b) % 32)
        throw Error("copy UB->UB of rows of " + std::to_string(cols * b) + " B: the Vector core copies whole 32 B "
                        "blocks",
                    sp, "make the copied row a multiple of 32 bytes");
      return emit(CopyUbToUb{so.at, dop.at, dt, C(rows), C(cols * b), mul(so.row_stride, C(b)),
                             mul(dop.row_stride, C(b))},
                  sp);
    }
    throw Error("copy " + std::string(ir::scope_name(from)) + " -> " + std::string(ir::scope_name(to)) +
                    " is not supported by the Ascend program yet",
                sp, "supported: GM->L1, L1->L0A, L1->L0B, L0C->GM, GM->UB, UB->GM, UB->UB");
  }

  // `if (cond) Duplicate(0)` over the rows x cols UB window w (rows `stride` elements apart);
  // in expert mode fenced by PipeBarrier<PIPE_ALL> on both sides (select_instructions.h).
  // to_row_end: the window ends at its rows' last column (what follows in each row is padding).
  // A checked copy's window (ir.h CopyNode::checked: a map's element reads of a tensor): each dim not
  // proved inside the tensor, start .. start + extent - 1 against the dim (program.h WindowCheck).
  WindowCheck window_check(const ir::Region& r, const std::vector<Expr>& used, const Span& sp) {
    WindowCheck wc;
    auto ext = const_extents(r, sp);
    for (size_t d = 0; d < ext.size(); ++d) {
      Expr st = start32(r.starts[d]);
      auto u = used.empty() ? std::optional<int64_t>(ext[d]) : ir::as_const_int(simp(used[d]));
      // a dim inside the tensor is checked too where its used count may be 0 (machine.cpp outside_dim: then
      // no dim of the window is reported)
      if (!inside(st, ext[d], r.buffer->shape[d]) || !u || *u <= 0)
        wc.dims.push_back(DimIndex{st, idx32(r.buffer->shape[d]), static_cast<int>(d), ext[d],
                                   used.empty() ? nullptr : simp(idx32(used[d]))});
    }
    if (!wc.dims.empty()) wc.param = params_.at(r.buffer.get());
    return wc;
  }
  // A copy out's check: a checked store's window, or a preload's copy out (ir.h CopyNode::preload) element by
  // element: every dim of the window, each with its elements' stride
  // in the UB tile and its used count (program.h WindowCheck::preload; none when the window is proved inside its
  // tensor).
  WindowCheck store_check(const ir::CopyNode* n, const Span& sp) {
    if (n->checked) return window_check(n->dst, n->used, sp);
    if (!n->preload) return WindowCheck{};
    const ir::Region &r = n->dst, &u = n->src;
    WindowCheck wc = window_check(r, n->used, sp);
    if (wc.dims.empty()) return wc;
    const Buf& b = buf(u.buffer, sp);
    auto ge = const_extents(r, sp), ue = const_extents(u, sp);
    // the tile's element strides (select_instructions' Window: dense row-major, rows pcols apart)
    std::vector<int64_t> us(ue.size());
    int64_t stride = 1;
    for (size_t d = ue.size(); d-- > 0;) {
      us[d] = stride;
      stride *= d + 1 == ue.size() ? b.pcols : b.shape[d];
    }
    std::vector<size_t> gn, un;  // the non-unit dims of each side, which pair in order
    for (size_t d = 0; d < ge.size(); ++d) if (ge[d] != 1) gn.push_back(d);
    for (size_t d = 0; d < ue.size(); ++d) if (ue[d] != 1) un.push_back(d);
    bool same = gn.size() == un.size() && b.mem == Mem::UB;
    for (size_t k = 0; same && k < gn.size(); ++k) same = ge[gn[k]] == ue[un[k]];
    if (!same)
      throw Error("internal: preload_copy " + ir::print(u) + " -> " + ir::print(r) + ": the tile's window does not "
                      "pair its dims with the tensor's", sp, "stage_global_maps stages such a map's stores in a tile "
                      "of the window's shape");
    wc.dims.clear();
    wc.preload = true;
    wc.tile = local(window(u, sp));
    for (size_t d = 0, k = 0; d < ge.size(); ++d) {
      Expr st = start32(r.starts[d]);
      const bool unit = ge[d] == 1;
      wc.dims.push_back(DimIndex{st, idx32(r.buffer->shape[d]), static_cast<int>(d), ge[d],
                                 n->used.empty() ? nullptr : simp(idx32(n->used[d]))});
      wc.strides.push_back(unit ? 0 : us[un[k]]);
      k += !unit;
    }
    return wc;
  }
  // window: the checks of a checked copy's window, carried by the fill (it runs where the window leaves
  // the tensor, also where the copy is empty)
  StmtPtr zero_tile(const Window& w, int64_t rows, int64_t cols, int64_t stride, const Expr& cond, const Span& sp,
                    bool to_row_end = false, WindowCheck window = {}) {
    ir::DType t = w.buf->dtype;
    ir::DType dup_t = t;
    int64_t r = rows, c = cols;
    if (t == ir::DType(ir::DTypeCode::bf16)) dup_t = ir::DType(ir::DTypeCode::f16);  // zero has the same bits
    VecOperand d{local(w), C(stride)};
    if (stride == c || r == 1) {  // contiguous: one run of r * c elements
      d.row_stride = C(r * c);
      c = r * c;
      r = 1;
    }
    // Duplicate has no 8-bit form on dav-c220: zero bytes as float16 pairs (UB rows are 32 B, so
    // the row stride is even; one run needs none); an odd run also zeroes the padding byte after it
    // (a 1-element int8 tile of a 1-D copy from before the tensor: fuzzer seeds 182565-182569).
    if (t.bytes() == 1 && (r == 1 || stride % 2 == 0) && (c % 2 == 0 || to_row_end)) {
      dup_t = ir::DType(ir::DTypeCode::f16);
      c = (c + 1) / 2;
      d.row_stride = C(r == 1 ? c : stride / 2);
    }
    // nor a 64-bit one (Duplicate.md, Atlas A2: 16- and 32-bit lanes): an int64 / float64 tile (PyTorch's
    // labels copied from a tensor) is zeroed as int32 pairs (the same bits)
    if (t.bytes() == 8) {
      dup_t = ir::DType(ir::DTypeCode::i32);
      c *= 2;
      d.row_stride = C(r == 1 ? c : stride * 2);
    }
    Expr zero = dup_t.is_float() ? ir::float_imm(0.0, dup_t, sp) : ir::int_imm(0, dup_t, sp);
    std::vector<StmtPtr> body;
    if (!auto_sync_) body.push_back(emit(PipeBarrier{Pipe::ALL}, sp));
    body.push_back(emit(VecDup{dup_t, d, zero, C(r), C(c), std::move(window)}, sp));
    if (!auto_sync_) body.push_back(emit(PipeBarrier{Pipe::ALL}, sp));
    StmtPtr fill = body.size() == 1 ? body[0] : seq(std::move(body), sp);
    auto always = ir::as_const_int(cond);
    return always && *always ? fill : if_(cond, fill, nullptr, sp);
  }

  void check_same_2d(int64_t r1, int64_t c1, int64_t r2, int64_t c2, const ir::CopyNode* n, const Span& sp) {
    if (r1 == r2 && c1 == c2) return;
    if (r1 * c1 == r2 * c2 && (r1 == 1 || r2 == 1) && (c1 == 1 || c2 == 1)) return;  // a vector either way
    throw Error("copy " + ir::print(n->src) + " -> " + ir::print(n->dst) + ": the windows are " + std::to_string(r1) +
                    "x" + std::to_string(c1) + " and " + std::to_string(r2) + "x" + std::to_string(c2),
                sp, "Ascend copies move 2-D windows of the same rows x cols; reshape in UB with a T.Parallel map into a tile "
                    "of the other window's shape (y2[i, j] = y[i * " + std::to_string(r1 > 1 ? c1 : c2) + " + j] for a 1-D tile y), "
                    "then copy that tile");
  }

  // Cube-side GM copies move one 2-D window: outer window dims that do not merge into its rows
  // would need one Nd2Nz / Fixpipe per index into a part of the Nz matrix (not done yet).
  // The rows a copy out's UB side skips (the window's rows before row 0). A checked copy out is issued also when
  // it moves no row (select_move_calls): a one-row window whose row lies before row 0 then moves nothing, and a
  // UB row pitch that is not whole 32 B blocks (a 1 x 5 int8 tile) would put the empty call's UB address off its
  // 32 B block. Such a window's UB side stays at its row (skip_rows > 0 only when nothing moves).
  Expr ub_skip_rows(const GmWindow& g, int64_t pitch_bytes, const WindowCheck& wc) const {
    return wc.param >= 0 && pitch_bytes % 32 && g.total_rows() == 1 ? C(0) : g.skip_rows;
  }
  // A UB -> GM copy whose first column may lie before column 0 of the tensor at a start that is not
  // a provable multiple of the 32 B block (T.copy(t, Y[r, bx * 8 - 3]) in float32). The UB side of
  // DataCopyPad starts on a 32 B block, so the skipped columns cannot simply be stepped over: with
  // skip the columns before 0 (0 when the start is not negative) and a the first block boundary at
  // or after it, the columns from a are stored from their block as usual, and the head, columns
  // skip .. a - 1 (fewer than one block), is moved by the scalar unit (GetValue / SetValue) into a
  // scratch tile of one 32 B block per row and stored from there to column 0, only when it is not
  // empty (a run-time if: the blocks whose start is negative and not on a block boundary).
  StmtPtr store_before_column_0(const ir::CopyNode* n, const Window& w, const Span& sp) {
    ir::DType dt = n->dst.buffer->dtype;
    int64_t b = dt.bytes(), blk = 32 / b;
    GmWindow g = gm_window(n->dst, sp, w.cols, /*row_clip=*/1, /*col_clip=*/1);
    int64_t ub_stride = ub_row_stride(w, g, n, sp);
    Expr skip = g.skip_cols;
    Expr a = simp(mul(ir::binary(ir::BinOp::CeilDiv, skip, C(blk)), C(blk)));
    Expr head = simp(max(C(0), min(sub(a, skip), g.valid_cols)));
    Expr rest = simp(sub(g.valid_cols, head));
    auto it = head_scratch_.find(n);
    if (it == head_scratch_.end()) {
      Buf s;
      s.mem = Mem::UB, s.dtype = dt, s.shape = {g.rows, blk}, s.rows = g.rows, s.cols = blk, s.pcols = blk;
      s.slice_bytes = s.bytes = g.rows * 32;
      std::string name = "_head_" + n->src.buffer->name;
      while (p_.find_buffer(name) >= 0) name += "_";
      it = head_scratch_.emplace(n, declare(name, s, sp, {g.rows, blk}).index).first;
      p_.buffers.back().temp_of = n->src.buffer->name;  // a capacity error names the tile it serves
    }
    int scratch = it->second;
    const WindowCheck wc = store_check(n, sp);  // on both stores
    // A checked copy out runs also when it stores nothing (a window wholly past the row's columns or before
    // column 0: head and rest both 0), its blockLen 0 (a NOP, docs/ascend.md "Empty counts"), so its window's
    // check runs. Its UB side then starts at the window's last 32 B block (a may point past the window; a is that
    // block or before it whenever rest > 0).
    const bool checked = wc.param >= 0;
    const Expr ub_col = checked ? simp(min(a, C((g.cols - 1) / blk * blk))) : a;  // (g.cols: the UB run's)
    const Expr skip_rows = ub_skip_rows(g, ub_stride * b, wc);
    return per_outer(g, dt, sp, [&](const Expr& gm, const Expr& row) {
      Expr first = add(row, g.skip_rows);  // the tile row of the first row stored
      StmtPtr main = emit(CopyUbToGm{local(w, add(mul(add(row, skip_rows), C(ub_stride * b)), mul(ub_col, C(b)))),
                                     GmRef{g.param, add(add(g.offset, gm), mul(head, C(b)))}, dt, g.valid_rows,
                                     mul(rest, C(b)), C(ub_stride * b), mul(g.row_stride, C(b)), n->atomic, wc},
                          sp);
      ir::Var r = ir::var("_hr" + std::to_string(window_loops_++), ir::kIndexType, sp);
      ir::Var j = ir::var("_hc" + std::to_string(window_loops_++), ir::kIndexType, sp);
      ir::Var v = ir::var("_hv" + std::to_string(window_loops_++), dt, sp);
      nonneg_.insert(r.get());
      nonneg_.insert(j.get());
      ScalarLoad ld;
      ld.var = v, ld.dtype = dt;
      ld.ub = local(w, mul(add(mul(add(first, r), C(ub_stride)), add(skip, j)), C(b)));
      StmtPtr move = seq({emit(std::move(ld), sp),
                          emit(ScalarStore{LocalRef{scratch, mul(add(mul(r, C(blk)), j), C(b))}, v, dt}, sp)},
                         sp);
      std::vector<StmtPtr> body;
      if (!auto_sync_) body.push_back(emit(PipeBarrier{Pipe::ALL}, sp));  // expert mode: no flags of its own
      body.push_back(for_(r, g.valid_rows, for_(j, head, move, sp), sp));
      if (!auto_sync_) body.push_back(emit(PipeBarrier{Pipe::ALL}, sp));
      body.push_back(emit(CopyUbToGm{LocalRef{scratch, C(0)}, GmRef{g.param, add(g.offset, gm)}, dt, g.valid_rows,
                                     mul(head, C(b)), C(32), mul(g.row_stride, C(b)), n->atomic, wc},
                          sp));
      if (!auto_sync_) body.push_back(emit(PipeBarrier{Pipe::ALL}, sp));
      StmtPtr h = if_(simp(ir::binary(ir::BinOp::GT, head, C(0))), seq(std::move(body), sp), nullptr, sp);
      // the rest may be empty (a window that ends before the next block boundary): its UB side then
      // points past the window (not a checked copy's: above)
      Expr run = simp(ir::binary(ir::BinOp::GT, rest, C(0)));
      if (checked) run = simp(ir::binary(ir::BinOp::Or, run, ir::binary(ir::BinOp::EQ, head, C(0))));
      return seq({h, if_(run, main, nullptr, sp)}, sp);
    });
  }
  std::unordered_map<const ir::CopyNode*, int> head_scratch_;  // store_before_column_0's scratch tiles

  void cube_single(const GmWindow& g, const ir::Region& r, const Span& sp) {
    if (g.outer.empty()) return;
    throw Error("GM region " + ir::print(r) + " has " + std::to_string(g.outer.size() + 2) +
                    " non-unit dims whose rows are not one run of memory: a Cube-side copy (L1 / L0C) moves one 2-D "
                    "window per call",
                sp, "copy one index of the outer dim at a time into a row block of the tile (e.g. a loop over it: "
                    "T.copy(X[i, r0:r1, c0:c1], t[i * R:(i + 1) * R, :])), or stage the copy through a UB tile");
  }

  // The rows of an L1 window that is not the whole height of its tile (null for all rows from row
  // 0: the whole strip height, padding rows included): an Nz matrix keeps each row's C0 elements of
  // a strip in one 32 B block, so rows r0 .. r0 + rows - 1 of every strip are a window one call can
  // fill (a gathered row, a row block), and a tail zeroes only those rows, never the tile's others.
  // The start must be provably inside the tile (a constant, or a loop variable / let with known bounds).
  Expr row_window(const Window& w, const ir::Region& r, const char* what, const Span& sp) {
    auto r0 = ir::as_const_int(w.r0);
    if (r0 && *r0 == 0 && w.rows >= w.buf->rows) return nullptr;
    auto b = bounds(w.r0);
    if (!b || b->first < 0 || b->second + w.rows > w.buf->rows)
      throw Error(std::string(what) + " " + ir::print(r) + ": rows " + ir::print(w.r0) + " .. +" +
                      std::to_string(w.rows) + " of the L1 tile " + q(r.buffer->name) + " (" +
                      std::to_string(w.buf->rows) + " rows) are not provably inside it",
                  sp, "index the tile's rows with a loop variable of constant bounds (for r in T.serial(" +
                          std::to_string(w.buf->rows) + ")) or a constant");
    return C(w.rows);
  }

  void check_window_origin(const Window& w, const ir::Region& r, const Span& sp) {
    auto r0 = ir::as_const_int(w.r0), c0 = ir::as_const_int(w.c0);
    if (!r0 || !c0 || *r0 != 0 || *c0 != 0)
      throw Error(std::string(mem_name(w.buf->mem)) + " window " + ir::print(r) + " must start at (0, 0) of its matrix",
                  sp, "L0 tiles are loaded and used whole; use a leading dim for separate matrices");
  }

  // The UB row stride of a GM<->UB copy (elements), checking the window shapes and alignment.
  // (session 22, hunt9a F4) A 1-D UB window and a GM window of several rows (docs/language.md
  // T.copy: the 1-D side holds the rows one after another): a window whose rows are contiguous in
  // the tensor and lie inside it is one run (g becomes 1 x rows * cols); any other such window
  // moves its rows cols elements apart in UB, which must be a multiple of 32 B.
  int64_t ub_row_stride(const Window& w, GmWindow& g, const ir::CopyNode* n, const Span& sp) {
    bool contiguous = w.rows == 1 || w.row_stride == w.cols;
    bool flat = w.rows == 1 && g.total_rows() > 1 && w.cols == g.total_rows() * g.cols;
    if (flat && g.outer.empty()) {
      auto rs = ir::as_const_int(g.row_stride), vr = ir::as_const_int(g.valid_rows),
           vc = ir::as_const_int(g.valid_cols), sr = ir::as_const_int(g.skip_rows),
           sc = ir::as_const_int(g.skip_cols);
      if (rs && *rs == g.cols && vr && *vr == g.rows && vc && *vc == g.cols && sr && *sr == 0 && sc && *sc == 0 &&
          !g.unclipped_rows && !g.unclipped_cols) {
        g.cols *= g.rows;
        g.rows = 1;
        g.valid_rows = C(1);
        g.valid_cols = C(g.cols);
      }
    }
    int64_t g_rows = g.total_rows();
    flat = flat && g_rows > 1;
    if (!(w.rows == g_rows && w.cols == g.cols) && !(g_rows == 1 && contiguous && w.rows * w.cols == g.cols) && !flat)
      check_same_2d(g_rows, g.cols, w.rows, w.cols, n, sp);
    // A GM column (one element per tensor row) and a UB row, or a GM row and a UB column tile
    // (K x 1: each element in its own 32 B block): each GM row moves as one DataCopyPad burst that
    // starts on a 32 B block of UB, so the two layouts cannot meet in one copy.
    bool gm_column = g_rows > 1 && g.cols == 1, ub_column = w.rows > 1 && w.cols == 1;
    if (gm_column != ub_column) {
      const ir::Region& gr = n->src.buffer->scope == Scope::global ? n->src : n->dst;
      const ir::Region& ur = n->src.buffer->scope == Scope::global ? n->dst : n->src;
      // the user's tile (split_cube_vector: each AIV copies its part of the rows, BufferNode::part_of)
      const ir::TilePart& part = ur.buffer->part_of;
      const int64_t parts = part.tile.empty() ? 1 : part.row_parts, n = std::max(g_rows, g.cols);
      std::string k = std::to_string(n * parts), declared;
      if (parts > 1) {
        auto sh = *ur.buffer->const_shape();
        sh[0] *= parts;
        declared = ", declared (";
        for (size_t d = 0; d < sh.size(); ++d) declared += (d ? ", " : "") + std::to_string(sh[d]);
        declared += sh.size() == 1 ? ",)" : ")";
        declared += ": each of the " + std::to_string(parts) + " Vector cores copies " + std::to_string(n) + " of its " + k;
      }
      throw Error("copy between " + ir::print(gr) + " (" + std::to_string(g_rows) + " x " + std::to_string(g.cols) +
                      " of tensor " + q(gr.buffer->name) + ") and " + ir::print(ur) + " (" + std::to_string(w.rows) +
                      " x " + std::to_string(w.cols) + " of tile " + q(part.tile.empty() ? ur.buffer->name : part.tile) +
                      declared + "): on Ascend each row a copy moves between GM and UB starts a new 32 B block of UB, so a " +
                      (gm_column ? "column of a tensor cannot fill or come from a 1-D tile"
                                 : "row of a tensor cannot fill or come from a column tile"),
                  sp, gm_column ? "declare the tile as a column, shape (" + k + ", 1), and copy the column X[a:b, c:c + 1] "
                                  "into it (maps and reductions work on it); where a map needs it as a per-row factor "
                                  "v[i] (x[i, j] * v[i]), T.copy that column tile into the 1-D tile (a gather in UB)"
                                : "declare the tile 1-D, shape (" + k + ",), or copy a column of the tensor");
    }
    int64_t stride = g_rows == 1 ? w.rows * w.cols : flat ? g.cols : w.row_stride;
    int64_t b = w.buf->dtype.bytes();
    if (flat && (stride * b) % 32)
      throw Error("copy " + ir::print(n->src) + " -> " + ir::print(n->dst) + ": the " + std::to_string(g_rows) +
                      " rows of the window are " + std::to_string(stride * b) + " B each in the 1-D tile " +
                      q((n->src.buffer->scope == Scope::UB ? n->src : n->dst).buffer->name) +
                      ", not a multiple of 32 B, and not one contiguous run of the tensor (a tail, or rows apart): "
                      "on Ascend each row a copy moves between GM and UB starts on a 32 B block of UB",
                  sp, "copy the window through a 2-D tile of its shape, (" + std::to_string(g_rows) + ", " +
                          std::to_string(g.cols) + "), and T.copy between that tile and the 1-D one in UB (a gather, "
                          "y2[i, j] = y[i * " + std::to_string(g.cols) + " + j] or y[k] = y2[k // " +
                          std::to_string(g.cols) + ", k % " + std::to_string(g.cols) + "])");
    if (g_rows > 1 && (stride * b) % 32)
      throw Error("copy " + ir::print(n->src) + " -> " + ir::print(n->dst) + ": UB rows are " + std::to_string(stride * b) +
                      " B apart, not a multiple of 32 B",
                  sp, "make the UB tile's last dim a multiple of " + std::to_string(32 / b) + " elements (" +
                          std::string(w.buf->dtype.name()) + ")");
    return stride;
  }

  // The L1 window a LoadL0 reads (the region r of an Nz tile): LoadData 2D moves whole 512 B
  // fractals, 16 rows x C0 columns of the Nz strips, so the window starts on a fractal: a row
  // that is a multiple of 16 and a column that is a multiple of C0 (a window inside a fractal
  // would be read from the fractal's first row / column: other rows' data). The transposing
  // 32-bit load into L0B (Load3Dv2: mStartPt / kStartPt) addresses rows and columns itself.
  void check_l1_fractal_origin(const Window& s, const ir::Region& r, ir::DType t, bool load3d, const Span& sp) {
    if (load3d) return;
    const int64_t c0 = c0_of(t);
    bool rows_ok = multiple_of(s.r0, 16), cols_ok = multiple_of(s.c0, c0);
    if (rows_ok && cols_ok) return;
    std::string what = !rows_ok ? "row " + ir::print(r.starts[r.starts.size() - 2]) + " (a multiple of 16 is needed)"
                                : "column " + ir::print(r.starts.back()) + " (a multiple of " + std::to_string(c0) +
                                      " for " + std::string(t.name()) + " is needed)";
    throw Error("the L1 window " + ir::print(r) + " (a gemm operand) starts at " + what +
                    ": the Cube loads L1 into L0 in whole 16 x " + std::to_string(c0) + " fractals (LoadData)",
                sp, "make the window start on a fractal (rows in multiples of 16, columns in multiples of " +
                        std::to_string(c0) + "), or copy the rows from global memory into a tile of their own "
                        "(T.copy(X[r0:r0 + n, :], x_part)) and pass that tile to T.gemm");
  }

  LoadL0 load_l0(const Window& s, const Window& d, ir::DType t, bool transpose, int64_t rmul, int64_t cmul) {
    return LoadL0{local(s), local(d), t, C(s.buf->prows), s.r0, s.c0, C(round_up(d.rows, rmul)),
                  C(round_up(d.cols, cmul)), transpose};
  }

  std::tuple<int64_t, int64_t, int64_t> gemm_dims(const ir::GemmNode& g) {
    auto ea = const_extents(g.a, g.span), eb = const_extents(g.b, g.span);
    int64_t a0 = ea[ea.size() - 2], a1 = ea.back(), b0 = eb[eb.size() - 2], b1 = eb.back();
    int64_t m = g.trans_a ? a1 : a0, k = g.trans_a ? a0 : a1, n = g.trans_b ? b0 : b1;
    return {m, k, n};
  }

  StmtPtr lower_gemm(const ir::GemmNode* g, const Span& sp) {
    Expr init = pending_init_ ? pending_init_ : ir::int_imm(g->clear ? 1 : 0, ir::DTypeCode::boolean, sp);
    pending_init_ = nullptr;
    Scope as_ = g->a.buffer->scope, bs = g->b.buffer->scope;
    if (g->c.buffer->scope != Scope::L0C)
      throw Error("gemm accumulator " + q(g->c.buffer->name) + " must be an L0C buffer in expert mode", sp,
                  "allocate it with T.alloc_L0C((m, n), \"float32\")");
    Window c = window(g->c, sp);
    check_window_origin(c, g->c, sp);
    ir::DType t = g->a.buffer->dtype;
    auto [m, k, n] = gemm_dims(*g);
    for (int64_t d : {m, n, k})
      if (d > 4095)
        throw Error("gemm dimension " + std::to_string(d) + " exceeds the Mmad limit 4095", sp,
                    d == k ? "split K: several gemms over K windows of A and B (e.g. two halves), each after the "
                             "first accumulating into C (clear_accum=False / init=False)"
                           : "use a smaller tile (at most 4095 rows and columns per gemm)");
    // Mmad with m = 1 runs as GEMV (A read as ND, not Zz; Mmad docs): compute a whole fractal row
    // instead (rows 1..15 of the L0A fractal and of L0C are padding; Fixpipe writes the valid row).
    const int64_t mm = m == 1 ? 16 : m;
    if (as_ == Scope::L0A && bs == Scope::L0B) {
      // trans_a / trans_b on L0 operands: the tile is declared KxM / NxK (see l0_transposed_) and
      // holds A / B in the Cube's layout once loaded.
      if ((g->trans_a && !l0_transposed_.count(g->a.buffer.get())) || (g->trans_b && !l0_transposed_.count(g->b.buffer.get())))
        throw Error("gemm on L0 operands cannot transpose: the layout is fixed when loading L0", sp,
                    "load L0A as MxK and L0B as KxN");
      Window a = window(g->a, sp), b = window(g->b, sp);
      check_window_origin(a, g->a, sp);
      check_window_origin(b, g->b, sp);
      return emit(Mmad{local(a), local(b), local(c), t, g->c.buffer->dtype, C(mm), C(n), C(k), init}, sp);
    }
    if (as_ == Scope::L1 && bs == Scope::L1) {
      // T.gemm on L1 operands: a self-contained library call with its own MTE1<->M flags.
      if ((g->trans_a || !g->trans_b) && t.bytes() != 2)
        throw Error("T.gemm on " + std::string(t.name()) + " L1 operands needs a transposing L0 load, which LoadData 2D "
                        "only does for 16-bit types",
                    sp, "use float16/bfloat16, or store B transposed (NxK) and pass transpose_B=True");
      Window a = window(g->a, sp), b = window(g->b, sp);
      Window la{&gemm_l0a_, C(0), C(0), C(0), m, k, 1}, lb{&gemm_l0b_, C(0), C(0), C(0), k, n, 1};
      Expr ev = C(kGemmEventId);
      std::vector<StmtPtr> out;
      check_l1_fractal_origin(a, g->a, t, false, sp);
      check_l1_fractal_origin(b, g->b, t, g->trans_b == false && t.bytes() == 4, sp);
      LoadL0 lda = load_l0(a, la, t, g->trans_a, 16, c0_of(t));
      LoadL0 ldb = load_l0(b, lb, t, !g->trans_b, c0_of(t), 16);
      out.push_back(emit(lda, sp));
      out.push_back(emit(ldb, sp));
      out.push_back(emit(SetFlag{Pipe::MTE1, Pipe::M, ev}, sp));
      out.push_back(emit(WaitFlag{Pipe::MTE1, Pipe::M, ev}, sp));
      out.push_back(emit(Mmad{local(la), local(lb), local(c), t, g->c.buffer->dtype, C(mm), C(n), C(k), init}, sp));
      out.push_back(emit(SetFlag{Pipe::M, Pipe::MTE1, ev}, sp));
      out.push_back(emit(WaitFlag{Pipe::M, Pipe::MTE1, ev}, sp));
      return seq(std::move(out), sp);
    }
    throw Error("gemm operands " + q(g->a.buffer->name) + " (" + std::string(ir::scope_name(as_)) + ") and " +
                    q(g->b.buffer->name) + " (" + std::string(ir::scope_name(bs)) + ") are not L0A x L0B or L1 x L1",
                sp, "T.mma(A_l0a, B_l0b, C_l0c) after loading L0, or T.gemm(A_l1, B_l1, C_l0c)");
  }

  StmtPtr lower_reduce(const ir::ReduceNode* n, const Span& sp) {
    if (n->src->scope != Scope::UB || n->dst->scope != Scope::UB)
      throw Error("reduce " + q(n->src->name) + " -> " + q(n->dst->name) + ": expert-mode reductions work on UB tiles",
                  sp);
    if (!n->clear)
      throw Error("reduce with clear=False is not a single vector instruction", sp,
                  "reduce into a fresh tile, then combine with T.add / T.max / T.min");
    const Buf& s = buf(n->src, sp);
    const Buf& d = buf(n->dst, sp);
    // int32 reductions are exact int32 Add/Max/Min calls (select_vector_calls); no 8-bit ones
    if (s.dtype != ir::DType(ir::DTypeCode::i32)) vec_dtype_ok(s.dtype, sp, "reduce", false);
    if (d.dtype != s.dtype)
      throw Error("reduce " + q(n->src->name) + " (" + std::string(s.dtype.name()) + ") -> " + q(n->dst->name) + " (" +
                      std::string(d.dtype.name()) + "): an expert-mode reduction writes its source's dtype",
                  sp, "reduce into a tile of the source's dtype, then T.copy it into the other dtype");
    size_t r = s.shape.size();
    ReduceOp op = n->reduce_kind == ir::ReduceKind::sum ? ReduceOp::Sum
                  : n->reduce_kind == ir::ReduceKind::max ? ReduceOp::Max : ReduceOp::Min;
    const int64_t es = s.dtype.bytes(), cols = s.shape[r - 1];
    const size_t k = static_cast<size_t>(n->axis);
    // UB tiles are row-major with rows padded to pcols elements (32 B), so every run of whole rows
    // starts on a 32 B block.
    if (k + 1 == r) {
      int64_t lead = 1, rows = r >= 2 ? s.shape[r - 2] : 1;  // the matrices of an N-D tile
      for (size_t i = 0; i + 2 < r; ++i) lead *= s.shape[i];
      // (session 21, hunt9a F3) over the last axis: one row reduction per matrix; matrix b starts b *
      // rows padded rows into the source, its results b rows (of d.pcols) into the destination
      // (dst's shape is src's without the last dim: its last dim is rows).
      if (lead > 256)
        throw Error("reduce over the last axis of a " + std::to_string(r) + "-D tile of " + std::to_string(lead) +
                        " matrices (one vector instruction each)", sp,
                    "reduce at most 256 matrices per T.reduce_* (a T.serial loop over windows of the tile's leading "
                    "dims), or reduce a 2-D tile of the rows flattened");
      std::vector<StmtPtr> per;
      for (int64_t b = 0; b < lead; ++b) {
        VecOperand so{LocalRef{s.index, C(b * rows * s.pcols * es)}, C(s.pcols)};
        VecOperand dop{LocalRef{d.index, C(b * d.pcols * es)}, C(rows)};
        per.push_back(emit(VecReduce{op, ReduceAxis::Row, s.dtype, dop, so, C(rows), C(cols)}, sp));
      }
      return per.size() == 1 ? per[0] : seq(std::move(per), sp);
    }
    // (session 22, hunt9a F3) over another axis k: for each index p of the dims before k (p_count of
    // them), the elements from axis k on are a matrix of shape[k] rows of q elements (q: the padded
    // rows of the dims between k and the last, m of them: every row starts on a 32 B block), reduced
    // by columns (an Add / Max / Min of row after row) into the q elements of dst at p * q: dst is
    // src's shape without dim k, with the same last dim and padded rows. Rows with padding (cols <
    // pcols) are reduced one padded row at a time (m reductions per p): padding holds no data.
    int64_t p_count = 1, m = 1;
    for (size_t i = 0; i < k; ++i) p_count *= s.shape[i];
    for (size_t i = k + 1; i + 1 < r; ++i) m *= s.shape[i];
    const int64_t q = m * s.pcols;
    const bool whole = cols == s.pcols || m == 1;  // one run of q (m == 1: cols) elements per p
    const int64_t calls = whole ? p_count : p_count * m;
    if (calls > 256)
      throw Error("reduce over axis " + std::to_string(k) + " of a " + std::to_string(r) + "-D tile: " +
                      std::to_string(calls) + " column reductions (one per index of the dims before it" +
                      (whole ? "" : " and per row of the dims after it") + ")", sp,
                  "reduce at most 256 of them per T.reduce_* (a T.serial loop over windows of the leading dims)");
    std::vector<StmtPtr> per;
    for (int64_t b = 0; b < p_count; ++b)
      for (int64_t i = 0; i < (whole ? 1 : m); ++i) {
        const int64_t n_elems = whole ? q - (s.pcols - cols) : cols, at = b * q + i * s.pcols;
        VecOperand so{LocalRef{s.index, C((b * s.shape[k] * q + i * s.pcols) * es)}, C(q)};
        VecOperand dop{LocalRef{d.index, C(at * es)}, C(n_elems)};
        per.push_back(emit(VecReduce{op, ReduceAxis::Col, s.dtype, dop, so, C(s.shape[k]), C(n_elems)}, sp));
      }
    return per.size() == 1 ? per[0] : seq(std::move(per), sp);
  }

  // ---- vector helpers ----
  // The Vector core has no int64 data (PyTorch's labels and lengths are int64): what runs instead
  // (legalize_vector's narrow_int64_bounds; docs/ascend.md "Session 33: PyTorch's int64 labels in maps").
  static constexpr const char* kInt64Hint =
      "the Vector core has no int64 data; for int64 labels or lengths (PyTorch's): compare one with the column "
      "index itself (j == lab[i], "
      "j < lab[i], j + c >= lab[i]: the scalar unit clamps it), gather with it (x[i, T.min(T.max(lab[i], 0), N - 1)]), "
      "or first convert the labels into an int32 tile (T.copy(lab, lab32), or lab32[i] = T.cast(lab[i], \"int32\") "
      "in a map, also of a 2-D index tile: the scalar unit converts them one by one, wrapping as T.cast does) and use "
      "that; "
      "for an int64 scalar (a T.int64 parameter c) with int32 tiles: one operation of a tile and c stored into an "
      "int32 tile runs (y[j] = x[j] + c, c - x[j], x[j] // c, x[j] % c, T.max(x[j], c): the int64 value wrapped at "
      "the store, as on cpu); or run the kernel on the cpu target";
  // dav-c220 has a Cast for some dtype pairs only (cast_pair_available): any other conversion is an
  // error naming the chain of conversions to write, the one the automatic pipeline lowers to.
  void cast_pair_ok(ir::DType to, ir::DType from, const Span& sp) {
    if (cast_pair_available(to, from)) return;
    std::string steps(from.name());
    bool chained = true;
    ir::DType prev = from;
    for (ir::DType t : cast_chain(to, from)) {
      chained = chained && cast_pair_available(t, prev);
      steps += " -> " + std::string(t.name());
      prev = t;
    }
    std::string what = "conversion from " + std::string(from.name()) + " to " + std::string(to.name()) +
                       ": dav-c220 has no Cast for this pair (its Casts: float32 <-> float16 / bfloat16 / int32, "
                       "float16 <-> int8 / uint8, float16 -> int32, bfloat16 -> int32; int32 -> float16 is a "
                       "dequantizing Cast scaled by SetDeqScale's register)";
    if (chained)
      throw Error(what, sp, "convert in steps, through one UB tile per dtype: " + steps +
                                " (each step a T.copy / T.cast between tiles, exact for the values the conversion "
                                "is defined on; the automatic pipeline lowers it the same way)");
    if (from == ir::DType(ir::DTypeCode::f64))  // port33 F5: nothing on the chip converts float64
      throw Error(what, sp, "convert the tensor on the host (x.astype(np.float32) / x.float()) and pass float32 data, "
                            "or run the kernel on the cpu target");
    if (to == ir::DType(ir::DTypeCode::i64) || from == ir::DType(ir::DTypeCode::i64))
      throw Error(what, sp, kInt64Hint);
    throw Error(what, sp, "no chain of Casts gives this conversion exactly: compute the value in a dtype that has one "
                          "(float16 / float32), or convert on the cpu target");
  }
  void vec_dtype_ok(ir::DType t, const Span& sp, const std::string& what, bool allow_int) {
    if (t == ir::DType(ir::DTypeCode::bf16))
      throw Error(what + " on bfloat16: the Vector core has no bfloat16 arithmetic", sp,
                  "T.cast to float32 first, compute, then T.cast back");
    bool ok = t == ir::DType(ir::DTypeCode::f16) || t == ir::DType(ir::DTypeCode::f32) ||
              (allow_int && (t == ir::DType(ir::DTypeCode::i32) || t == ir::DType(ir::DTypeCode::i8) ||
                             t == ir::DType(ir::DTypeCode::u8)));
    if (ok) return;
    // the hint per dtype (hunt30 F4): an integer or bool user is not sent to float16 (inexact past 2^11)
    std::string hint = "use float16 or float32 tiles";
    if (t == ir::DType(ir::DTypeCode::boolean))
      hint = "convert the bool tile's values first: T.cast(x, \"int32\") (or T.where(x, a, b)) computes on the Vector "
             "core; or run the kernel on the cpu target";
    else if (t == ir::DType(ir::DTypeCode::i64))
      hint = kInt64Hint;
    else if (t == ir::DType(ir::DTypeCode::f64))
      hint = "pass float32 tensors (convert on the host: x.astype(np.float32) / x.float()): the chip has no float64 "
             "arithmetic and no Cast from float64; or run the kernel on the cpu target";
    else if (t.is_int())
      hint = "use int32 tiles (T.cast(x, \"int32\")), or float16 / float32 tiles";
    throw Error(what + " on " + std::string(t.name()) + " is not supported by the Vector core", sp, hint);
  }

  // Vector instructions start on 32 B blocks of UB: a window at a constant offset that is not a
  // multiple of 32 B is an error here (the checker would report it at run time).
  // Session 21 (hunt9a F5): also a start computed from loop variables / block indices with constant
  // bounds that is not a multiple of 32 B in some step (y[r * 3:(r + 1) * 3] of a float32 tile in a
  // serial loop: 12 B at r = 1): it compiled and was the checker's report in every run.
  void vec_aligned(const Window& w, const ir::Region& r, const Span& sp, const std::string& what) {
    auto off = ir::as_const_int(w.slice_off);
    std::string where;
    if (off) {
      if (*off % 32 == 0) return;
    } else {
      auto bad = misaligned_step(w.slice_off);
      if (!bad) return;
      off = bad->first;
      where = " when " + bad->second;
    }
    int64_t per = 32 / w.buf->dtype.bytes();
    bool one_d = r.starts.size() == 1;
    throw Error(what + " " + ir::print(r) + ": the window starts " + std::to_string(*off) + " bytes into tile " +
                    q(r.buffer->name) + where + ", not on a 32 B block; on Ascend the Vector core and DataCopyPad read "
                    "and write UB from 32 B boundaries",
                sp, one_d ? "start the window at a multiple of " + std::to_string(per) + " elements (" +
                                std::string(w.buf->dtype.name()) + "), or give the tile one row per window: a 2-D tile " +
                                "t[R, C] copied whole (T.copy(t, Y[0:R, 0:C])) or row by row (t[r:r + 1, :]); each row of a 2-D "
                                "UB tile starts on a 32 B block"
                          : "start the window at a column that is a multiple of " + std::to_string(per) + " (" +
                                std::string(w.buf->dtype.name()) + ") in any row, e.g. whole rows t[r:r + 1, :]" +
                                (what.find("into") != std::string::npos
                                     ? std::string("; to pad a tile with zeros, copy a window of the tensor that starts "
                                                   "before it into the whole tile (T.copy(X[-1, -1], t): the elements "
                                                   "outside X read as 0)")
                                     : std::string()));
  }
  // A byte offset that is not a multiple of 32 in some step: (the offset, "v = 1, ...") for the first
  // such assignment of the offset's variables within their constant bounds (loops, block indices;
  // lets through their values), nullopt when it is a multiple of 32 in every assignment, some variable
  // has no constant bounds (a run-time value) or an enclosing if tests one (a step that may not run):
  // the checker reports a misaligned address at run time (review33 R1 / R3).
  std::optional<std::pair<int64_t, std::string>> misaligned_step(const Expr& e0) {
    if (multiple_of(e0, 32, &let_values_)) return std::nullopt;
    // lets inlined: the steps are those of the loops and blocks (a let s = (k * 16) // 2 is never 1)
    struct Inline : ir::Mutator {
      const LetValues* lets = nullptr;
      using ir::Mutator::mutate;
      Expr mutate(const Expr& x) override {
        if (x->kind == ir::ExprKind::Var)
          if (auto it = lets->find(as<ir::VarNode>(x)); it != lets->end()) return mutate(it->second);
        return ir::Mutator::mutate(x);
      }
    } inline_lets;
    inline_lets.lets = &let_values_;
    const Expr e = inline_lets.mutate(e0);
    std::vector<const ir::VarNode*> vars;
    bool loads = false;
    for_each_subexpr(e, [&](const Expr& x) {
      loads = loads || x->kind == ir::ExprKind::Load;
      if (x->kind == ir::ExprKind::Var && std::find(vars.begin(), vars.end(), as<ir::VarNode>(x)) == vars.end())
        vars.push_back(as<ir::VarNode>(x));
    });
    if (loads) return std::nullopt;
    // a step an enclosing if may skip (`if k == 0` around x[i, j + k]) is the checker's, at run time
    std::unordered_set<const ir::VarNode*> in_guards;
    for (const Expr& c : guards_)
      for_each_subexpr(inline_lets.mutate(c), [&](const Expr& y) {
        if (y->kind == ir::ExprKind::Var) in_guards.insert(as<ir::VarNode>(y));
      });
    if (std::any_of(vars.begin(), vars.end(), [&](const ir::VarNode* v) { return in_guards.count(v) > 0; }))
      return std::nullopt;
    int64_t combos = 1;
    std::vector<std::pair<int64_t, int64_t>> rs;
    for (const auto* v : vars) {
      auto it = range_.find(v);
      if (it == range_.end() || it->second.second < it->second.first) return std::nullopt;
      rs.push_back(it->second);
      combos *= it->second.second - it->second.first + 1;
      if (combos > 4096) return std::nullopt;
    }
    auto saved = range_;
    std::vector<int64_t> at(vars.size());
    for (size_t i = 0; i < vars.size(); ++i) at[i] = rs[i].first;
    std::optional<std::pair<int64_t, std::string>> found;
    for (int64_t k = 0; k < combos && !found; ++k) {
      for (size_t i = 0; i < vars.size(); ++i) range_[vars[i]] = {at[i], at[i]};
      auto b = bounds(e);
      if (b && b->first == b->second && b->first % 32 != 0) {
        std::string s;
        for (size_t i = 0; i < vars.size(); ++i) s += (i ? ", " : "") + vars[i]->name + " = " + std::to_string(at[i]);
        found = std::make_pair(b->first, s);
      }
      for (size_t i = 0; i < vars.size(); ++i) {  // next assignment
        if (++at[i] <= rs[i].second) break;
        at[i] = rs[i].first;
      }
    }
    range_ = std::move(saved);
    return found;
  }

  // The UB window of a GM <-> UB copy (DataCopyPad): each row's burst starts on a 32 B block of
  // UB, and a load writes each row up to the next 32 B boundary (the bytes after the data are
  // padding zeros or unspecified). So a window must start on a 32 B block, and a load's window
  // must end on one or at the tile's last column: a load into t[:, 0:65] of an 80-column float32
  // tile would overwrite columns 65..71 (session 15: a silent wrong answer after a T.fill of t;
  // a misaligned start was a simulator report). Automatic kernels only: an expert copy is the
  // DataCopyPad it names (the simulator writes garbage after the burst and reports a misaligned
  // address).
  void ub_copy_window_ok(const Window& w, const ir::Region& r, bool load, const Span& sp) {
    if (!auto_sync_) return;
    const std::string what = load ? "copy GM->UB into" : "copy UB->GM from";
    vec_aligned(w, r, sp, what);
    auto col0 = ir::as_const_int(r.starts.back());
    if (!col0) return;
    int64_t b = w.buf->dtype.bytes(), per = 32 / b;
    if ((*col0 * b) % 32)
      throw Error(what + " " + ir::print(r) + ": the window starts at column " + std::to_string(*col0) + " of tile " +
                      q(r.buffer->name) + ", not on a 32 B block; DataCopyPad moves each row from / to a 32 B "
                      "boundary of UB",
                  sp, "start the window at a column that is a multiple of " + std::to_string(per) + " (" +
                          std::string(w.buf->dtype.name()) + "), or copy the whole rows t[r0:r1, :]");
    int64_t end = *col0 + w.cols;
    if (load && (end * b) % 32 && end < w.buf->cols)
      throw Error(what + " " + ir::print(r) + ": the window ends at column " + std::to_string(end) + " of tile " +
                      q(r.buffer->name) + " (" + std::to_string(w.buf->cols) + " columns), inside a 32 B block; "
                      "DataCopyPad writes each row up to the next 32 B boundary, which would overwrite columns " +
                      std::to_string(end) + " .. " + std::to_string(std::min((end + per - 1) / per * per, w.buf->cols) - 1),
                  sp, "end the window at a multiple of " + std::to_string(per) + " columns (" +
                          std::string(w.buf->dtype.name()) + ") or at the tile's last column (t[r0:r1, c0:]), or copy "
                          "into a tile of its own and combine the tiles in a T.Parallel map");
  }

  static VecOperand vop(const Window& w) { return VecOperand{LocalRef{w.buf->index, w.slice_off}, C(w.row_stride)}; }

  // Operands whose rows are contiguous (row_stride == cols) are treated as one row: rows x cols
  // becomes 1 x rows*cols. Otherwise every row stride must be a multiple of 32 B.
  std::pair<int64_t, int64_t> collapse(std::vector<VecOperand*> ops, int64_t rows, int64_t cols, const Span& sp) {
    bool all = true;
    for (auto* o : ops) all &= ir::as_const_int(o->row_stride) == cols;
    if (rows == 1 || all) {
      for (auto* o : ops) o->row_stride = C(rows * cols);
      return {1, rows * cols};
    }
    collapse_strict(ops, rows, sp);
    return {rows, cols};
  }

  // ---- T.Parallel maps on UB ----
  // A map's loops: constant extents, except the innermost one, which may be a scalar expression
  // (legalize_vector's masks write runtime column ranges); `extent` is -1 then.
  struct Loop { const ir::VarNode* var; int64_t extent; Expr ext; };
  // True when e is the same on every iteration of the map: it reads no tile element and uses no
  // loop variable.
  static bool invariant(const Expr& e, const std::vector<Loop>& loops) {
    bool ok = true;
    for_each_subexpr(e, [&](const Expr& x) {
      ok &= x->kind != ir::ExprKind::Load;
      for (const auto& l : loops) ok &= x.get() != l.var;
    });
    return ok;
  }
  // One buffer access of the map: which loop variable indexes each dim (-1: none) and the base.
  struct Access {
    const ir::BufferNode* buffer = nullptr;
    const Buf* buf = nullptr;
    Expr offset;            // bytes of the element at all loop vars = 0
    std::vector<int> var_of_dim;
    std::vector<int64_t> stride;  // elements, per dim
  };

  // An if inside a map that serial_maps did not make selects (hunt30 F5, elif32, elifcond33): arms around
  // inner T.Parallel loops of different extents (or whose stores the condition reads), arms whose stores run
  // in order storing a strided element twice.
  static std::string if_in_map() {
    return "this T.Parallel body is not a vector instruction: an if inside a map (a vector instruction covers "
           "every element; an if is lowered to selects when its arms hold stores, lets and ifs, or each one inner "
           "T.Parallel loop of the same extent whose stores the condition does not read, and no arm stores an "
           "element at a strided index twice)";
  }
  static std::string if_in_map_hint() {
    return "write the stores as selects, t[i] = T.where(cond, a, b), or put the `if` inside the inner T.Parallel "
           "loop (`for i, j in T.Parallel(m, n): if cond: ... elif j < k: ...`); store each strided element once "
           "per arm";
  }
  // The map nest f with every T.Parallel loop serial (an element loop on the scalar unit).
  static ir::Stmt serial_nest(const ir::ForNode* f) {
    ir::Stmt b = f->body;
    while (b && b->kind == ir::StmtKind::Seq && as<ir::SeqNode>(b)->body.size() == 1) b = as<ir::SeqNode>(b)->body[0];
    if (b && b->kind == ir::StmtKind::For && as<ir::ForNode>(b)->for_kind == ir::ForKind::parallel)
      b = serial_nest(as<ir::ForNode>(b));
    else
      b = f->body;
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, ir::ForKind::serial, 0, b, f->span);
  }
  StmtPtr lower_map(const ir::ForNode* f, const Span& sp) {
    std::vector<Loop> loops;
    ir::Stmt body;
    const ir::ForNode* cur = f;
    while (true) {
      auto ext = ir::as_const_int(cur->extent);
      auto mn = ir::as_const_int(cur->min);
      if (!mn || *mn != 0) throw Error("T.Parallel map with a non-zero start", sp, "iterate from 0 and add the start to the indices");
      loops.push_back({cur->var.get(), ext ? *ext : -1, cur->extent});
      ir::Stmt b = cur->body;
      while (b && b->kind == ir::StmtKind::Seq && as<ir::SeqNode>(b)->body.size() == 1) b = as<ir::SeqNode>(b)->body[0];
      if (b && b->kind == ir::StmtKind::For && as<ir::ForNode>(b)->for_kind == ir::ForKind::parallel) {
        cur = as<ir::ForNode>(b);
        continue;
      }
      body = b;
      break;
    }
    // stores into int64 tiles of converted values (vec::int64_element_map): an element loop nest on the scalar unit
    if (body && vec::int64_element_map(ir::stmts_of(body))) return lower(serial_nest(f), true);
    // `if j < n { store }` around the body (j the innermost index, n a scalar): the map covers
    // min(extent, n) columns, a runtime count (legalize_vector's masks).
    if (body && body->kind == ir::StmtKind::If) {
      auto* n = as<ir::IfNode>(body);
      auto* c = n->cond->kind == ir::ExprKind::Binary ? as<ir::BinaryNode>(n->cond) : nullptr;
      bool free = c && c->op == ir::BinOp::LT && c->a.get() == loops.back().var && !n->else_body;
      if (!free || !invariant(c->b, loops)) throw Error(if_in_map(), body->span, if_in_map_hint());
      Expr w = ir::binary(ir::BinOp::Max, min(loops.back().ext, idx32(c->b)), C(0), sp);
      loops.back() = Loop{loops.back().var, -1, simp(w)};
      body = n->then_body;
      while (body && body->kind == ir::StmtKind::Seq && as<ir::SeqNode>(body)->body.size() == 1)
        body = as<ir::SeqNode>(body)->body[0];
    }
    for (size_t l = 0; l + 1 < loops.size(); ++l)
      if (loops[l].extent < 0)
        throw Error("T.Parallel map with a non-constant extent " + ir::print(loops[l].ext) + " in an outer dim", sp,
                    "only the innermost extent of a vector map may be a runtime value");
    if (loops.size() > 2)
      throw Error("T.Parallel map over " + std::to_string(loops.size()) + " dims: vector instructions cover 2-D tiles",
                  sp, "map 2-D tiles (rows x cols): loop over the leading index in a T.serial loop with a 2-D tile (copied "
                      "from the N-D window X[s0:s1, h, 0:D]), or copy the window into a (B * rows, cols) tile and map that");
    std::vector<ir::Stmt> stores;
    if (body && body->kind == ir::StmtKind::Store) stores.push_back(body);
    else if (body && body->kind == ir::StmtKind::Seq) stores = as<ir::SeqNode>(body)->body;
    if (column_map(stores, loops, sp))  // no vector instruction: an element loop on the scalar unit
      return lower(std::make_shared<ir::ForNode>(f->var, f->min, f->extent, ir::ForKind::serial, 0, f->body, sp), true);
    for (const auto& st : stores)  // before a let's error: an if beside lets is what serial_maps left
      if (st->kind == ir::StmtKind::If) throw Error(if_in_map(), st->span, if_in_map_hint());
    for (const auto& st : stores)  // before a let's error: a store outside UB (an expert map over GM, port33 F9)
      if (st->kind == ir::StmtKind::Store && as<ir::StoreNode>(st)->buffer->scope != Scope::UB)
        (void)access(as<ir::StoreNode>(st)->buffer, as<ir::StoreNode>(st)->indices, loops, st->span);
    std::vector<StmtPtr> out;
    for (const auto& st : stores) {
      if (st->kind != ir::StmtKind::Store)
        throw Error("this T.Parallel body is not a vector instruction: it contains a " +
                        std::string(st->kind == ir::StmtKind::Let ? "let" : "statement") +
                        " (one store per vector instruction is needed)",
                    st->span, map_hint());
      out.push_back(match_map(as<ir::StoreNode>(st), loops, st->span));
    }
    if (out.empty()) throw Error("empty T.Parallel map", sp);
    return out.size() == 1 ? out[0] : seq(std::move(out), sp);
  }

  // A 1-D map over a column of tiles (`x[i, j] = x[i, j] + x[i, j - 1]` over i, j fixed: a scan
  // along rows): every store's loop index steps a dim of stride > 1. Vector operands start on 32 B
  // blocks and a column's elements sit at any offset inside theirs, so no vector instruction
  // covers it: the map runs as a serial loop of GetValue/SetValue on the scalar unit (docs/
  // language.md "Element access"). Only plain stores whose value needs no math function.
  bool column_map(const std::vector<ir::Stmt>& stores, const std::vector<Loop>& loops, const Span& sp) {
    if (loops.size() != 1 || loops[0].extent < 0 || stores.empty()) return false;
    for (const auto& st : stores) {
      if (st->kind != ir::StmtKind::Store) return false;
      auto* n = as<ir::StoreNode>(st);
      if (n->buffer->scope != Scope::UB) return false;
      bool call = false;
      for_each_subexpr(n->value, [&](const Expr& x) { call |= x->kind == ir::ExprKind::Call; });
      if (call) return false;
      auto a = access(n->buffer, n->indices, loops, sp);
      if (!a) return false;
      bool strided = false;
      for (size_t d = 0; d < a->var_of_dim.size(); ++d) strided |= a->var_of_dim[d] == 0 && a->stride[d] != 1;
      if (!strided) return false;
    }
    return true;
  }

  // A gather (legalize_vector's form, docs/ascend.md "Gathers"): dst = src[r..., off >> k] (off an
  // int32 UB tile of byte offsets, k = log2 of the element size; the leading indices address a row
  // of src: the map's row index or free of the map's variables) is one Gather per row, its source
  // that row of src; dst = src[(off >> k) // pcols, (off >> k) % pcols] (a 1-D map over a 2-D
  // tile) one Gather over the whole tile. nullptr when the store is not a gather.
  StmtPtr match_gather(const ir::StoreNode* st, const std::vector<Loop>& loops, const VecOperand& dst, int64_t rows,
                       int64_t cols, const Span& sp) {
    const Expr& v = st->value;
    if (v->kind != ir::ExprKind::Load) return nullptr;
    auto* l = as<ir::LoadNode>(v);
    if (l->buffer->scope != Scope::UB || l->indices.empty()) return nullptr;
    const ir::DType t = l->buffer->dtype;
    const int64_t es = t.bytes();
    // Shr(load of an int32 tile, log2(es)): the byte offsets' load
    auto offsets = [&](const Expr& e) -> const ir::LoadNode* {
      if (e->kind != ir::ExprKind::Binary || as<ir::BinaryNode>(e)->op != ir::BinOp::Shr) return nullptr;
      auto* b = as<ir::BinaryNode>(e);
      auto k = ir::as_const_int(b->b);
      if (b->a->kind != ir::ExprKind::Load || !k || (int64_t{1} << *k) != es) return nullptr;
      auto* o = as<ir::LoadNode>(b->a);
      return o->buffer->dtype == ir::DType(ir::DTypeCode::i32) ? o : nullptr;
    };
    const Expr& last = l->indices.back();
    const ir::LoadNode* off = offsets(last);
    bool flat = false;
    const size_t nidx = l->indices.size();
    if (!off && nidx >= 2 && last->kind == ir::ExprKind::Binary && as<ir::BinaryNode>(last)->op == ir::BinOp::Mod &&
        l->indices[nidx - 2]->kind == ir::ExprKind::Binary &&
        as<ir::BinaryNode>(l->indices[nidx - 2])->op == ir::BinOp::FloorDiv) {
      off = offsets(as<ir::BinaryNode>(last)->a);
      flat = off != nullptr;
    }
    if (!off) return nullptr;
    auto fail = [&](const std::string& why) -> StmtPtr {
      throw Error("this T.Parallel gather is not an Ascend Gather: " + why, sp,
                  "gather along the last dim of a float16/bfloat16/float32/int32 tile: x[i, idx[i, j]] or x[idx[j]]");
    };
    if (es != 2 && es != 4) fail("Gather takes 16- and 32-bit elements, not " + std::string(t.name()));
    if (t != st->buffer->dtype) fail("the gathered tile and the destination differ in dtype");
    if (cols < 0) fail("a run-time column count");
    if (l->buffer.get() == st->buffer.get()) fail("the destination is the gathered tile (Gather.md: they may not overlap)");
    const int64_t per = 256 / es;
    if (cols >= 256 * per)
      fail("rows of " + std::to_string(cols) + " elements: the Gather call issues count / " + std::to_string(per) +
           " repeats as a uint8 (at most " + std::to_string(256 * per - 1) + " elements a call)");
    const Buf& sb = buf(l->buffer, sp);
    auto oacc = access(off->buffer, off->indices, loops, sp);
    auto ostride = oacc ? full_stride(*oacc, loops.size()) : std::nullopt;
    if (!ostride) fail("the offsets tile " + q(off->buffer->name) + " is not indexed like the destination");
    LocalRef src{sb.index, C(0)};
    Expr src_rs = C(0), src_elems;
    if (flat) {
      // the last two dims of the tile, at the leading indices (a stage of multi_buffer's copies, a unit dim)
      if (loops.size() != 1) fail("a flat gather reads the last two dims of a tile in a 1-D map");
      auto pc = ir::as_const_int(as<ir::BinaryNode>(last)->b);
      if (!pc || *pc != sb.pcols) fail("the flat index does not use the tile's row pitch");
      std::vector<Expr> lead(l->indices.begin(), l->indices.end() - 2);
      lead.insert(lead.end(), {C(0), C(0)});
      auto sacc = access(l->buffer, lead, loops, sp);
      if (!sacc || std::any_of(sacc->var_of_dim.begin(), sacc->var_of_dim.end(), [](int v) { return v >= 0; }))
        fail("the leading indices of " + q(l->buffer->name) + " depend on the map's index");
      src.offset = sacc->offset;
      src_elems = C(sb.rows * sb.pcols);
    } else {
      std::vector<Expr> lead(l->indices.begin(), l->indices.end());
      lead.back() = C(0);
      auto sacc = access(l->buffer, lead, loops, sp);
      if (!sacc) fail("the leading indices of " + q(l->buffer->name) + " are not (start + row index)");
      for (size_t d = 0; d < sacc->var_of_dim.size(); ++d) {
        if (sacc->var_of_dim[d] == static_cast<int>(loops.size()) - 1) fail("the column index addresses a leading dim");
        if (sacc->var_of_dim[d] == 0 && loops.size() == 2) src_rs = C(sacc->stride[d]);
      }
      src.offset = sacc->offset;
      src_elems = C(sb.shape.back());
    }
    auto one = [&](const Expr& r) {
      auto row = [&](const LocalRef& at, const Expr& stride, int64_t bytes) {
        return LocalRef{at.buffer, add(at.offset, mul(mul(r, stride), C(bytes)))};
      };
      return emit(Gather{t, row(dst.at, dst.row_stride, es), row(src, src_rs, es),
                         row(LocalRef{oacc->buf->index, oacc->offset}, C(*ostride), 4), C(0), C(cols), src_elems},
                  sp);
    };
    if (rows == 1) return one(C(0));
    ir::Var r = ir::var("tw_row", ir::kIndexType, sp);
    return for_(r, C(rows), one(r), sp);
  }

  static std::string map_hint() {
    return "a map on UB must be one vector instruction per store: dst = a op b, a op scalar, a op v[i] (row "
           "broadcast), a op w[j] (column broadcast), exp/log/sqrt/rsqrt/abs(a), max(a, 0), 1 / a, cast(a), or a "
           "scalar; split longer formulas into tile ops (T.sub(t, a, b); T.exp(t, t); ...)";
  }

  std::optional<Access> access(const ir::Buffer& b, const std::vector<Expr>& idx, const std::vector<Loop>& loops,
                               const Span& sp) {
    if (b->scope != Scope::UB)
      throw Error("T.Parallel map on " + std::string(ir::scope_name(b->scope)) + " buffer " + q(b->name) +
                      ": vector maps work on UB tiles",
                  sp, "copy the data into UB first");
    Access a;
    a.buffer = b.get();
    a.buf = &buf(b, sp);
    size_t n = idx.size();
    a.stride.assign(n, 1);
    for (size_t d = n - 1; d-- > 0;) a.stride[d] = a.stride[d + 1] * (d + 1 == n - 1 ? a.buf->pcols : a.buf->shape[d + 1]);
    Expr off = C(0);
    for (size_t d = 0; d < n; ++d) {
      int v = -1;
      Expr base;
      auto loop_of = [&](const Expr& e) -> int {
        if (e->kind != ir::ExprKind::Var) return -1;
        for (size_t i = 0; i < loops.size(); ++i)
          if (loops[i].var == e.get()) return static_cast<int>(i);
        return -1;
      };
      const Expr& e = idx[d];
      if ((v = loop_of(e)) >= 0) {
        base = C(0);
      } else if (e->kind == ir::ExprKind::Binary && as<ir::BinaryNode>(e)->op == ir::BinOp::Add) {
        auto* bn = as<ir::BinaryNode>(e);
        if ((v = loop_of(bn->b)) >= 0) base = bn->a;
        else if ((v = loop_of(bn->a)) >= 0) base = bn->b;
        else base = e;
      } else {
        base = e;
      }
      if (!invariant(base, loops)) return std::nullopt;
      for (int o : a.var_of_dim)
        if (v >= 0 && o == v) return std::nullopt;  // one loop variable in two dims
      a.var_of_dim.push_back(v);
      off = add(off, mul(idx32(base), C(a.stride[d])));
    }
    a.offset = mul(off, C(a.buf->dtype.bytes()));
    return a;
  }

  // The row stride (elements) of a full access (every loop var used, the last one in the last
  // dim with stride 1), or nullopt. A column vector of a 2-D map (only the last loop var, in a
  // dim of stride 1: w[j]) is a full access with row stride 0: every row reads the same elements.
  static std::optional<int64_t> full_stride(const Access& a, size_t nloops) {
    int dim_of[2] = {-1, -1};
    for (size_t d = 0; d < a.var_of_dim.size(); ++d)
      if (a.var_of_dim[d] >= 0) dim_of[a.var_of_dim[d]] = static_cast<int>(d);
    int last = dim_of[nloops - 1];
    if (last < 0 || a.stride[last] != 1) return std::nullopt;
    if (nloops == 2) {
      if (dim_of[0] < 0) return 0;  // column broadcast
      if (dim_of[0] >= last) return std::nullopt;
      return a.stride[dim_of[0]];
    }
    return 0;
  }
  // A per-row vector: only the first of two loop vars, in a dim of stride 1.
  static bool row_vector(const Access& a, size_t nloops) {
    if (nloops != 2) return false;
    bool has0 = false;
    for (size_t d = 0; d < a.var_of_dim.size(); ++d) {
      if (a.var_of_dim[d] == 1) return false;
      if (a.var_of_dim[d] == 0) has0 = a.stride[d] == 1;
    }
    return has0;
  }

  // e modulo 32 when the terms that are not multiples of 32 are constants (byte offsets: a row
  // index times a 32 B row pitch is 0), nullopt otherwise.
  static std::optional<int64_t> mod32(const Expr& e) {
    if (auto c = ir::as_const_int(e)) return ((*c % 32) + 32) % 32;
    if (e->kind != ir::ExprKind::Binary) return std::nullopt;
    auto* b = as<ir::BinaryNode>(e);
    if (b->op == ir::BinOp::Add || b->op == ir::BinOp::Sub) {
      auto x = mod32(b->a), y = mod32(b->b);
      if (!x || !y) return std::nullopt;
      return ((b->op == ir::BinOp::Add ? *x + *y : *x - *y) % 32 + 32) % 32;
    }
    if (b->op == ir::BinOp::Mul) {
      auto x = mod32(b->a), y = mod32(b->b);
      if ((x && *x == 0) || (y && *y == 0)) return 0;
      if (x && y) return (*x * *y) % 32;
    }
    return std::nullopt;
  }
  // A vector operand of a map starts on a 32 B block of UB (every operand address of a Vector
  // instruction is): x[i, j + 65] of a float32 tile starts 260 B into each row. Before session 15
  // it was a simulator report (misaligned) at run time; no vector instruction can read it.
  // dst: the store's operand (a map's destination, a copy between tiles into a window: port34 F4)
  void map_operand_aligned(const Access& a, const Span& sp, bool dst = false) {
    auto m = mod32(a.offset);
    std::string where;
    if (!m) {  // port33 F1: a start from loop variables with constant bounds (x[i, j + k], k in T.serial(3))
      // Loop variables and block indices take every value of their range; a let's range is an interval
      // around its values (c = r0 % 64 + vid * 16 is a multiple of 16 though its interval holds 1), so an
      // offset reading a let stays the checker's run-time question. A let bound to a constant is that
      // constant (port35 F1: a T.serial(1) / T.Parallel(1) loop of a 1-row, 1-column image simplified to
      // `let i = 0`: x[i, j + 1] of a float32 tile starts 4 bytes into a block, as at every other size).
      bool lets = false;
      for_each_subexpr(a.offset, [&](const Expr& x) {
        if (x->kind != ir::ExprKind::Var) return;
        auto it = let_values_.find(as<ir::VarNode>(x));
        lets = lets || (it != let_values_.end() && !ir::as_const_int(it->second));
      });
      if (lets) return;
      auto bad = misaligned_step(a.offset);
      if (!bad) return;
      m = (bad->first % 32 + 32) % 32;
      if (!bad->second.empty()) where = " when " + bad->second;
    }
    if (*m == 0) return;
    int64_t per = 32 / a.buf->dtype.bytes();
    const std::string shift = "shift by a multiple of " + std::to_string(per) + " columns (" + std::string(a.buf->dtype.name()) + "), or ";
    if (dst)
      throw Error("this T.Parallel map (or T.copy between tiles) writes " + q(a.buffer->name) + " at an element which starts " +
                      std::to_string(*m) + " bytes into a 32 B block of UB" + where +
                      "; on Ascend the Vector core's operands start on 32 B blocks",
                  sp, shift + "compute those columns in a tile of their own and copy it to global memory at their column "
                      "(T.copy(u, Y[r0, c0 + s]): a copy to global memory starts at any column), or build the wide tile "
                      "in one map that selects by the column (T.where(j < c, a[i, j], b[i, T.max(j - c, 0)]))");
    throw Error("this T.Parallel map reads or writes " + q(a.buffer->name) + " at an element which starts " + std::to_string(*m) +
                    " bytes into a 32 B block of UB" + where + "; on Ascend the Vector core's operands start on 32 B blocks",
                sp, shift + "copy the shifted columns from global memory into a tile of their own (T.copy(X[r0:r1, c0 + s:c0 + s + n], u)) "
                        "and map over that tile");
  }

  StmtPtr match_map(const ir::StoreNode* st, const std::vector<Loop>& loops, const Span& sp) {
    auto fail = [&](const std::string& why) -> StmtPtr {
      throw Error("this T.Parallel body is not a vector instruction: " + why, sp, map_hint());
    };
    ir::DType t = st->buffer->dtype;
    auto dacc = access(st->buffer, st->indices, loops, sp);
    if (!dacc) fail("the destination index is not (start + loop variable) per dimension");
    auto dstride = full_stride(*dacc, loops.size());
    if (!dstride || (loops.size() == 2 && *dstride == 0))
      fail("the destination " + q(st->buffer->name) + " is not indexed by every loop variable in order");
    int64_t rows = loops.size() == 2 ? loops[0].extent : 1;
    const Loop& inner = loops.back();
    int64_t cols = inner.extent;  // -1: a runtime extent (inner.ext)
    Expr cols_e = inner.extent >= 0 ? C(inner.extent) : inner.ext;
    map_operand_aligned(*dacc, sp, /*dst=*/true);
    VecOperand dst{LocalRef{dacc->buf->index, dacc->offset}, loops.size() == 2 ? C(*dstride) : cols_e};

    auto is_load = [](const Expr& e) { return e->kind == ir::ExprKind::Load; };
    // an operand's error points at the operand: a let's value (b = x[i, j + h] ... b * s) at the let's line (hunt40 F5)
    auto at = [&](const Expr& e) -> const Span& { return e->span.known() ? e->span : sp; };
    auto load_acc = [&](const Expr& e) { auto* l = as<ir::LoadNode>(e); return access(l->buffer, l->indices, loops, at(e)); };
    auto full_any = [&](const Expr& e) -> std::optional<std::pair<VecOperand, ir::DType>> {
      if (!is_load(e)) return std::nullopt;
      auto a = load_acc(e);
      if (!a) return std::nullopt;
      auto s = full_stride(*a, loops.size());
      if (!s) return std::nullopt;
      map_operand_aligned(*a, at(e));
      return std::make_pair(VecOperand{LocalRef{a->buf->index, a->offset}, loops.size() == 2 ? C(*s) : cols_e},
                            a->buf->dtype);
    };
    auto full = [&](const Expr& e) -> std::optional<VecOperand> {
      auto f = full_any(e);
      if (!f) return std::nullopt;
      if (f->second != t) fail("operand " + q(as<ir::LoadNode>(e)->buffer->name) + " is " + std::string(f->second.name()) +
                               " but the destination is " + std::string(t.name()) + " (vector ops do not convert)");
      return f->first;
    };
    auto rowvec = [&](const Expr& e) -> std::optional<LocalRef> {
      if (!is_load(e)) return std::nullopt;
      auto a = load_acc(e);
      if (!a || !row_vector(*a, loops.size()) || a->buf->dtype != t) return std::nullopt;
      map_operand_aligned(*a, at(e));
      return LocalRef{a->buf->index, a->offset};
    };
    auto scalar = [&](const Expr& e) { return invariant(e, loops); };
    auto is_lit = [](const Expr& e, double v) {
      if (e->kind == ir::ExprKind::FloatImm) return as<ir::FloatImmNode>(e)->value == v;
      if (e->kind == ir::ExprKind::IntImm) return static_cast<double>(as<ir::IntImmNode>(e)->value) == v;
      return false;
    };
    // Collapses contiguous operands first, then builds the instruction from the final operands.
    // A runtime column count keeps the 2-D shape (strides checked by collapse_strict).
    auto shape_of = [&](std::vector<VecOperand*> ops) -> std::pair<Expr, Expr> {
      if (cols < 0) {
        if (rows > 1) collapse_strict(ops, rows, sp);
        return {C(rows), cols_e};
      }
      auto [r, c] = collapse(ops, rows, cols, sp);
      return {C(r), C(c)};
    };
    auto emit_v = [&](std::vector<VecOperand*> ops, auto make) {
      auto [r, c] = shape_of(ops);
      return emit(make(r, c), sp);
    };

    Expr v = st->value;
    // The loop index as a value (legalize_vector's iota: a 1-D map dst[j] = j): CreateVecIndex.
    if (v.get() == inner.var && loops.size() == 1) {
      if (t != v->dtype) fail("the loop index is " + std::string(v->dtype.name()) + " but the destination is " +
                              std::string(t.name()) + " (vector ops do not convert)");
      vec_dtype_ok(t, sp, "vector op", true);
      return emit(VecIndex{t, dst, ir::int_imm(0, t, sp), C(1), cols_e}, sp);
    }
    // A conversion: cast<t>(load) (and floor/ceil inside for float -> int). bfloat16 <-> float32
    // conversions are available (only bf16 arithmetic is not).
    if (v->kind == ir::ExprKind::Cast && v->dtype == t) {
      Expr x = as<ir::CastNode>(v)->value;
      // into a bool tile: its bytes 0 / 1 as uint8 (legalize_vector converts only 0 / 1 values to bool)
      if (t == ir::DType(ir::DTypeCode::boolean)) t = ir::DType(ir::DTypeCode::u8);
      RoundMode rm = RoundMode::Trunc;  // float -> int; every other pair: cast_round_mode below
      if (x->kind == ir::ExprKind::Call && (as<ir::CallNode>(x)->fn == ir::MathFn::floor ||
                                            as<ir::CallNode>(x)->fn == ir::MathFn::ceil) && t.is_int()) {
        rm = as<ir::CallNode>(x)->fn == ir::MathFn::floor ? RoundMode::Floor : RoundMode::Ceil;
        x = as<ir::CallNode>(x)->args[0];
      }
      if (is_load(x)) {
        auto a = full_any(x);
        if (!a) fail("the cast's source is not indexed like the destination");
        ir::DType from = a->second;
        // a bool tile (legalize_vector's data-dependent T.where) holds bytes 0 / 1: converted as uint8
        if (from == ir::DType(ir::DTypeCode::boolean)) from = ir::DType(ir::DTypeCode::u8);
        if (t.is_float() || !from.is_float()) rm = cast_round_mode(t, from);
        VecOperand src = a->first;
        // a Cast is no arithmetic: a bfloat16 side is fine for the pairs dav-c220 has (bfloat16 <-> float32,
        // bfloat16 -> int32; cast_pair_ok rejects the others)
        bool bf16 = from == ir::DType(ir::DTypeCode::bf16) || t == ir::DType(ir::DTypeCode::bf16);
        cast_pair_ok(t, from, sp);
        if (!bf16) vec_dtype_ok(from, sp, "cast", true);
        return emit_v({&dst, &src}, [&](Expr r, Expr c) { return VecCast{t, from, rm, dst, src, r, c}; });
      }
      if (scalar(x)) return emit_v({&dst}, [&](Expr r, Expr c) { return VecDup{t, dst, v, r, c}; });
      fail("a conversion of a computed value; compute in the source dtype, then T.cast");
    }
    if (StmtPtr g = match_gather(st, loops, dst, rows, cols, sp)) return g;
    // a constant into a bfloat16 tile: Duplicate has a bfloat16_t form on dav-c220 (no arithmetic;
    // hunt10a F16: it was "no bfloat16 arithmetic")
    if (t == ir::DType(ir::DTypeCode::bf16) && v->dtype == t && scalar(v))
      return emit_v({&dst}, [&](Expr r, Expr c) { return VecDup{t, dst, v, r, c}; });
    vec_dtype_ok(t, sp, "vector op", !v->dtype.is_float());
    if (v->dtype != t) fail("the value is " + std::string(v->dtype.name()) + " but the destination is " +
                            std::string(t.name()) + "; vector ops do not convert");
    if (is_load(v)) {
      auto a = full(v);
      if (!a) fail("a copy whose source is not indexed like the destination");
      VecOperand src = *a;
      // a tile copied onto itself (`t[j] = t[j]`: a map's `where(c, t[j], t[j])` folded) moves nothing; as x * 1 it
      // cleared the checker's preload state of a row under 32 B (bounds40 F4: a false report)
      if (src.at.buffer == dst.at.buffer && ir::structural_equal(src.at.offset, dst.at.offset) &&
          ir::structural_equal(src.row_stride, dst.row_stride))
        return seq({}, sp);
      auto [r, c] = shape_of({&dst, &src});
      int64_t b = t.bytes();
      auto rc = ir::as_const_int(r), cc = ir::as_const_int(c), ss = ir::as_const_int(src.row_stride);
      if (cc && (*cc * b) % 32 == 0 && (*rc == 1 || (ss && *ss != 0)))
        return emit(CopyUbToUb{src.at, dst.at, t, r, C(*cc * b), mul(src.row_stride, C(b)), mul(dst.row_stride, C(b))}, sp);
      // Rows that are not whole 32 B blocks, a runtime width or a broadcast source: an exact
      // vector copy (x * 1; x + 0 for integers).
      Expr one = t.is_float() ? ir::float_imm(1.0, t, sp) : ir::int_imm(0, t, sp);
      return emit(VecBinaryScalar{t.is_float() ? VecBinOp::Mul : VecBinOp::Add, t, dst, src, one, r, c}, sp);
    }
    if (scalar(v)) return emit_v({&dst}, [&](Expr r, Expr c) { return VecDup{t, dst, v, r, c}; });
    if (v->kind == ir::ExprKind::Select) {
      // select(a cmp b, x, y): a, x tiles; b, y tiles or scalars (legalize_vector's form)
      auto* sn = as<ir::SelectNode>(v);
      if (sn->cond->kind != ir::ExprKind::Binary) fail("a select whose condition is not a comparison");
      auto* cn = as<ir::BinaryNode>(sn->cond);
      std::optional<CmpMode> cmp;
      switch (cn->op) {
        case ir::BinOp::LT: cmp = CmpMode::LT; break;
        case ir::BinOp::GT: cmp = CmpMode::GT; break;
        case ir::BinOp::EQ: cmp = CmpMode::EQ; break;
        case ir::BinOp::LE: cmp = CmpMode::LE; break;
        case ir::BinOp::GE: cmp = CmpMode::GE; break;
        case ir::BinOp::NE: cmp = CmpMode::NE; break;
        case ir::BinOp::Add: case ir::BinOp::Sub: case ir::BinOp::Mul: case ir::BinOp::Div: case ir::BinOp::FloorDiv:
        case ir::BinOp::CeilDiv: case ir::BinOp::Mod: case ir::BinOp::Min: case ir::BinOp::Max: case ir::BinOp::And:
        case ir::BinOp::Or: case ir::BinOp::BitAnd: case ir::BinOp::BitOr: case ir::BinOp::BitXor:
        case ir::BinOp::Shl: case ir::BinOp::Shr: break;
      }
      if (!cmp) fail("a select whose condition is not one comparison (<, >, ==, <=, >=, !=)");
      ir::DType ct = cn->a->dtype;
      auto tile_of = [&](const Expr& e, ir::DType want, const char* what) -> VecOperand {
        auto f = full_any(e);
        if (!f) fail(std::string(what) + " of the select is not a tile indexed like the destination");
        if (f->second != want) fail(std::string(what) + " of the select is " + std::string(f->second.name()) + ", not " +
                                    std::string(want.name()));
        return f->first;
      };
      VecOperand a = tile_of(cn->a, ct, "the first compared operand");
      VecOperand b{LocalRef{}, C(0)}, x = tile_of(sn->t, t, "the selected value"), y{LocalRef{}, C(0)};
      Expr bs, ys;
      if (scalar(cn->b)) bs = cn->b;
      else b = tile_of(cn->b, ct, "the second compared operand");
      if (scalar(sn->f)) ys = sn->f;
      else y = tile_of(sn->f, t, "the other value");
      for (ir::DType d : {ct, t})
        if (d != ir::DType(ir::DTypeCode::f16) && d != ir::DType(ir::DTypeCode::f32))
          fail("Compare and Select take float16 or float32, not " + std::string(d.name()));
      std::vector<VecOperand*> ops{&dst, &a, &x};
      if (!bs) ops.push_back(&b);
      if (!ys) ops.push_back(&y);
      return emit_v(ops, [&](Expr r, Expr c) { return VecSelect{*cmp, ct, t, dst, a, b, x, y, bs, ys, r, c}; });
    }
    if (v->kind == ir::ExprKind::Call) {
      auto* c = as<ir::CallNode>(v);
      std::optional<VecUnOp> op = vector_instruction(c->fn);  // target/ascend/math_fns.h
      if (!op) fail(std::string(ir::mathfn_name(c->fn)) + " has no vector instruction");
      auto a = full(c->args[0]);
      if (!a) fail(std::string(ir::mathfn_name(c->fn)) + " of something other than a tile element a[i, j]");
      VecOperand src = *a;
      return emit_v({&dst, &src}, [&](Expr r, Expr cc) { return VecUnary{*op, t, dst, src, r, cc}; });
    }
    if (v->kind != ir::ExprKind::Binary) fail("unsupported expression " + ir::print(v));
    auto* bn = as<ir::BinaryNode>(v);
    // a tile read down a column by the map: its last index free of the map's variables, another one on them
    auto column_read = [&](const Expr& e) {
      if (!is_load(e)) return false;
      auto* l = as<ir::LoadNode>(e);
      auto on_map = [&](const Expr& d) {
        bool on = false;
        for_each_subexpr(d, [&](const Expr& x) {
          for (const auto& lp : loops) on |= x.get() == lp.var;
        });
        return on;
      };
      return l->buffer->scope != ir::Scope::global && l->indices.size() >= 2 && !on_map(l->indices.back()) &&
             std::any_of(l->indices.begin(), l->indices.end() - 1, on_map);
    };
    // a per-row factor read down a column of a 2-D tile (a conv tap's weights w[i, k]; port34 F2): its elements lie
    // a row apart, and a row broadcast reads a contiguous vector
    auto per_row_column = [&](const std::string& n) {
      throw Error("this T.Parallel body is not a vector instruction: the per-row factor " + q(n) +
                      " is read down a column of a tile (its elements lie a row apart); a row broadcast a op v[i] "
                      "reads a 1-D tile",
                  sp, "copy the column into a 1-D tile first, for i in T.Parallel(n): v[i] = " + n +
                          "[i, k] (a gather), and use v[i] in this map");
    };
    std::optional<VecBinOp> op;
    switch (bn->op) {
      case ir::BinOp::Add: op = VecBinOp::Add; break;
      case ir::BinOp::Sub: op = VecBinOp::Sub; break;
      case ir::BinOp::Mul: op = VecBinOp::Mul; break;
      case ir::BinOp::Div: op = VecBinOp::Div; break;
      case ir::BinOp::Max: op = VecBinOp::Max; break;
      case ir::BinOp::Min: op = VecBinOp::Min; break;
      case ir::BinOp::FloorDiv:
      case ir::BinOp::CeilDiv:
      case ir::BinOp::Mod:
      case ir::BinOp::EQ:
      case ir::BinOp::NE:
      case ir::BinOp::LT:
      case ir::BinOp::LE:
      case ir::BinOp::GT:
      case ir::BinOp::GE:
      case ir::BinOp::And:
      case ir::BinOp::Shl: op = VecBinOp::ShiftLeft; break;
      case ir::BinOp::Shr: op = VecBinOp::ShiftRight; break;
      case ir::BinOp::BitAnd: op = VecBinOp::And; break;
      case ir::BinOp::BitOr: op = VecBinOp::Or; break;
      case ir::BinOp::Or:
      case ir::BinOp::BitXor: break;  // no vector instruction
    }
    if (!op) fail("operator " + std::string(ir::binop_name(bn->op)) + " has no vector instruction");
    if (*op == VecBinOp::ShiftLeft || *op == VecBinOp::ShiftRight) {
      // ShiftLeft/ShiftRight(dst, src, scalar count): int32 tile << scalar; the count modulo 32 (ir.h)
      auto fa = full(bn->a);
      if (t != ir::DType(ir::DTypeCode::i32))
        fail("'" + std::string(ir::binop_symbol(bn->op)) + "' on " + std::string(t.name()) +
             " tile data: the AIV shifts int32 (of the language's types) only");
      if (!fa && column_read(bn->a)) {
        // the int32 order key's x >> 8 (legalize_vector: a comparison of int32 data, T.where(ids[i, k] == j, ..)
        // in a 2-D map, computed per row in a map over i) of a per-row factor read down a column (port38 F1)
        per_row_column(as<ir::LoadNode>(bn->a)->buffer->name);
      }
      if (!fa || !scalar(bn->b))
        fail("'" + std::string(ir::binop_symbol(bn->op)) + "' by a per-element count: ShiftLeft/ShiftRight take one "
             "scalar count for the whole tile");
      VecOperand src = *fa;
      Expr count = ir::arith::simplify(ir::binary(ir::BinOp::BitAnd, bn->b, ir::int_imm(31, bn->b->dtype, sp), sp));
      return emit_v({&dst, &src}, [&](Expr r, Expr c) { return VecBinaryScalar{*op, t, dst, src, count, r, c}; });
    }
    if (*op == VecBinOp::And || *op == VecBinOp::Or) {
      // int32 tiles on both sides (legalize_vector materializes a scalar or vector operand first)
      auto fa = full(bn->a), fb = full(bn->b);
      if (t != ir::DType(ir::DTypeCode::i32) || !fa || !fb)
        fail("'" + std::string(ir::binop_symbol(bn->op)) + "' on " + std::string(t.name()) +
             " tile data: And/Or take two int32 tiles here");
      VecOperand a = *fa, b = *fb;
      return emit_v({&dst, &a, &b}, [&](Expr r, Expr c) { return VecBinary{*op, t, dst, a, b, r, c}; });
    }
    bool commutes = *op == VecBinOp::Add || *op == VecBinOp::Mul || *op == VecBinOp::Max || *op == VecBinOp::Min;
    auto fa = full(bn->a), fb = full(bn->b);
    if (fa && fb) {
      VecOperand a = *fa, b = *fb;
      return emit_v({&dst, &a, &b}, [&](Expr r, Expr c) { return VecBinary{*op, t, dst, a, b, r, c}; });
    }
    // tile op scalar (scalar op tile when it commutes); relu and reciprocal
    Expr tile = fa ? bn->a : (fb && commutes) ? bn->b : nullptr;
    Expr other = fa ? bn->b : bn->a;
    if (*op == VecBinOp::Div && fb && is_lit(bn->a, 1.0) && t.is_float()) {
      VecOperand src = *fb;
      return emit_v({&dst, &src}, [&](Expr r, Expr c) { return VecUnary{VecUnOp::Reciprocal, t, dst, src, r, c}; });
    }
    if (tile && scalar(other)) {
      VecOperand src = *full(tile);
      if (*op == VecBinOp::Max && is_lit(other, 0.0))
        return emit_v({&dst, &src}, [&](Expr r, Expr c) { return VecUnary{VecUnOp::Relu, t, dst, src, r, c}; });
      return emit_v({&dst, &src}, [&](Expr r, Expr c) { return VecBinaryScalar{*op, t, dst, src, other, r, c}; });
    }
    // row broadcast: tile op v[i]
    if (loops.size() == 2) {
      if (fa) {
        if (auto rv = rowvec(bn->b)) {
          VecOperand src = *fa;
          collapse_strict({&dst, &src}, rows, sp);
          return emit(VecRowBroadcast{*op, t, dst, src, *rv, C(rows), cols_e}, sp);
        }
      }
      if (fb && commutes) {
        if (auto rv = rowvec(bn->a)) {
          VecOperand src = *fb;
          collapse_strict({&dst, &src}, rows, sp);
          return emit(VecRowBroadcast{*op, t, dst, src, *rv, C(rows), cols_e}, sp);
        }
      }
    }
    // a column of a tile read by the map (its last index free of the map's variables, another one on them):
    // elements a row apart, which no vector operand reads (port36 F3: box decoding's a[i, 0] + a[i, 2] of
    // (N, 4) boxes, the (bn, 4) map made a column map over i)
    for (const Expr& e : {bn->a, bn->b}) {
      if (fa || fb || !column_read(e)) continue;
      const std::string& n = as<ir::LoadNode>(e)->buffer->name;
      throw Error("this T.Parallel body is not a vector instruction: tile " + q(n) +
                      " is read down a column (its elements lie a row apart; a vector operand is a run of a row)",
                  sp, "gather the column into a row of a tile first, for i in T.Parallel(n): c[k, i] = " + n +
                          "[i, k] (one map per column), and compute on those rows (c[0, i] + c[2, i])");
    }
    if (!fa && !fb) fail("neither operand of " + std::string(ir::binop_name(bn->op)) + " is a tile element a[i, j]");
    if (fb && !commutes && scalar(bn->a))
      fail("scalar " + std::string(ir::binop_name(bn->op)) + " tile has no vector instruction (only tile op scalar)");
    for (const Expr& e : {bn->a, bn->b}) {
      auto a = is_load(e) && loops.size() == 2 ? load_acc(e) : std::nullopt;
      if (a && std::count(a->var_of_dim.begin(), a->var_of_dim.end(), 0) == 1 &&
          std::count(a->var_of_dim.begin(), a->var_of_dim.end(), 1) == 0 && !row_vector(*a, 2)) {
        per_row_column(as<ir::LoadNode>(e)->buffer->name);
      }
    }
    return fail("the second operand is neither a tile indexed like the destination, a scalar, nor a per-row vector v[i]");
  }

  // Row-broadcast operands keep their 2-D shape: check the repeat strides (a single row has no
  // second repeat, so any row stride will do: a (1, 1) tile is fine).
  void collapse_strict(std::vector<VecOperand*> ops, int64_t rows, const Span& sp) {
    if (rows == 1) return;
    for (auto* o : ops) {
      const BufferDecl& d = p_.buffers[o->at.buffer];
      int64_t b = d.dtype.bytes();
      auto st = ir::as_const_int(o->row_stride);
      if (st && (*st * b) % 32)
        throw Error("vector operand in " + q(d.name) + ": rows are " + std::to_string(*st * b) +
                        " B apart, not a multiple of 32 B (a repeat stride)",
                    sp, "make the tile's last dim a multiple of " + std::to_string(32 / b) + " elements");
    }
  }

  const ir::Kernel& k_;
  const target::Target& t_;
  const target::AscendParams& hw_;
  bool auto_sync_ = false;  // see select_instructions.h
  const std::set<std::string>* passes_ = nullptr;  // see select_instructions.h
  Program p_;
  CoreKind core_ = CoreKind::C;
  std::unordered_map<const ir::BufferNode*, int> params_;
  std::unordered_set<const ir::BufferNode*> written_;  // tensors the kernel writes (copy, gemm, store)
  std::unordered_set<const Stmt*> hoisted_;            // with_loads' Seqs, spliced by the enclosing Seq
  int scalar_loads_ = 0;
  int row_tails_ = 0;  // names of the row-tail fills' first rows
  std::unordered_map<const ir::BufferNode*, Expr> ws_offset_;  // GM workspace buffers: byte offset
  std::unordered_map<const ir::BufferNode*, Buf> bufs_;
  int window_loops_ = 0;  // names of the loops over outer window dims
  Buf gemm_l0a_, gemm_l0b_;
  Expr pending_init_;
  std::unordered_set<const ir::BufferNode*> l0_transposed_;  // see run()
  // Integer variables proven >= 0 (block and shape variables, loops from a non-negative start,
  // lets of non-negative values): region starts built from them need no clipping at row 0.
  std::unordered_set<const ir::BufferNode*> load3d_src_;  // L1 tiles of 32-bit K x N B operands (run())
  std::unordered_set<const ir::BufferNode*> load3d_dst_;  // the L0B tiles they are loaded into (run())
  std::unordered_set<const ir::VarNode*> nonneg_;
  // Variables whose value depends on a value known only at run time: scalar parameters, elements
  // read from GM, and lets / loop variables computed from them.
  std::unordered_set<const ir::VarNode*> runtime_;
  LetValues let_values_;  // integer lets (multiple_of looks through them)
  std::vector<Expr> guards_;  // the conditions of the enclosing ifs (misaligned_step)
  LetValues loop_extent_;  // extents of loops from 0
  // The bounds of a let's value; a grid-stride index `x + t * c` (constant c > 0) of a loop
  // `for t in range(ceildiv(E - x, c))` (constant E: map_grid's `blk = cid + t * block_dim`) lies in
  // [lower(x), E - 1] (x + t * c < E for every t of the loop), which interval arithmetic loses.
  std::optional<std::pair<int64_t, int64_t>> stride_bounds(const Expr& e) const {
    auto r = bounds(e);
    if (r || e->kind != ir::ExprKind::Binary) return r;
    auto* b = as<ir::BinaryNode>(e);
    if (b->op != ir::BinOp::Add) return r;
    for (const auto& [x, m] : {std::pair{b->a, b->b}, std::pair{b->b, b->a}}) {
      if (m->kind != ir::ExprKind::Binary || as<ir::BinaryNode>(m)->op != ir::BinOp::Mul) continue;
      auto* mb = as<ir::BinaryNode>(m);
      auto c = ir::as_const_int(mb->b);
      if (!c || *c <= 0 || mb->a->kind != ir::ExprKind::Var) continue;
      auto it = loop_extent_.find(as<ir::VarNode>(mb->a));
      if (it == loop_extent_.end() || it->second->kind != ir::ExprKind::Binary) continue;
      auto* ext = as<ir::BinaryNode>(it->second);  // ceildiv(E - x, c)
      auto ec = ir::as_const_int(ext->b);
      if (ext->op != ir::BinOp::CeilDiv || !ec || *ec != *c || ext->a->kind != ir::ExprKind::Binary) continue;
      auto* sb = as<ir::BinaryNode>(ext->a);
      auto E = ir::as_const_int(sb->a);
      auto lo = lower(x);
      if (sb->op != ir::BinOp::Sub || !E || !ir::structural_equal(sb->b, x) || !lo || *lo > *E - 1) continue;
      return std::make_pair(*lo, *E - 1);
    }
    return r;
  }
  bool run_time(const Expr& e) const {
    bool found = false;
    for_each_subexpr(e, [&](const Expr& x) {
      found = found || x->kind == ir::ExprKind::Load ||
              (x->kind == ir::ExprKind::Var && runtime_.count(as<ir::VarNode>(x)) > 0);
    });
    return found;
  }
  bool nonneg(const Expr& e) const {
    if (auto r = bounds(e); r && r->first >= 0) return true;
    if (auto l = lower(e); l && *l >= 0) return true;
    return ir::is_nonneg(e, [&](const ir::VarNode* v) { return nonneg_.count(v) > 0; });
  }
  // Lower bounds of integer variables from the conditions of the ifs around the statement being
  // lowered (`if (v * a + b >= c)`, a > 0: v >= ceil((c - b) / a)).
  std::unordered_map<const ir::VarNode*, int64_t> low_;
  // A lower bound of integer expression e: constants, variables (low_, range_, 0 when proven >= 0),
  // sums, differences with a constant and products by a non-negative constant; nullopt otherwise.
  std::optional<int64_t> lower(const Expr& e) const {
    constexpr int64_t kBig = int64_t{1} << 40;
    if (auto c = ir::as_const_int(e)) return std::abs(*c) < kBig ? std::optional<int64_t>{*c} : std::nullopt;
    if (e->kind == ir::ExprKind::Var) {
      auto* v = as<ir::VarNode>(e);
      std::optional<int64_t> l;
      if (auto it = low_.find(v); it != low_.end()) l = it->second;
      if (auto it = range_.find(v); it != range_.end()) l = std::max(l.value_or(it->second.first), it->second.first);
      if (nonneg_.count(v)) l = std::max<int64_t>(l.value_or(0), 0);
      return l;
    }
    if (e->kind == ir::ExprKind::Cast) {
      auto* c = as<ir::CastNode>(e);
      if (!c->dtype.is_int() || !c->value->dtype.is_int() || c->dtype.bits() <= c->value->dtype.bits()) return {};  // a same-width cast may wrap
      return lower(c->value);
    }
    if (e->kind != ir::ExprKind::Binary || !e->dtype.is_int()) return {};
    auto* b = as<ir::BinaryNode>(e);
    auto cb = ir::as_const_int(b->b), ca = ir::as_const_int(b->a);
    auto small = [&](std::optional<int64_t> x) { return x && std::abs(*x) < kBig ? x : std::nullopt; };
    switch (b->op) {
      case ir::BinOp::Add: {
        auto x = lower(b->a), y = lower(b->b);
        return x && y ? small(*x + *y) : std::nullopt;
      }
      case ir::BinOp::Sub: {
        auto x = lower(b->a);
        return x && cb ? small(*x - *cb) : std::nullopt;
      }
      case ir::BinOp::Mul: {
        const Expr& other = cb ? b->a : b->b;
        auto k = cb ? cb : ca;
        auto x = k && *k >= 0 && *k < kBig ? lower(other) : std::nullopt;
        return x ? small(*x * *k) : std::nullopt;
      }
      default: return {};
    }
  }
  // (v, lo) when cond is `v * a + b >= c` or `v * a + b > c` (constants a > 0, b, c): v >= lo.
  std::optional<std::pair<const ir::VarNode*, int64_t>> cond_low(const Expr& cond) const {
    if (cond->kind != ir::ExprKind::Binary) return {};
    auto* c = as<ir::BinaryNode>(cond);
    auto rhs = ir::as_const_int(c->b);
    if ((c->op != ir::BinOp::GE && c->op != ir::BinOp::GT) || !rhs) return {};
    int64_t bound = *rhs + (c->op == ir::BinOp::GT ? 1 : 0);
    Expr lhs = c->a;
    int64_t a = 1, off = 0;
    if (lhs->kind == ir::ExprKind::Binary) {  // v * a + b, v * a - b, v + b, v * a
      auto* x = as<ir::BinaryNode>(lhs);
      if (auto k = ir::as_const_int(x->b); k && (x->op == ir::BinOp::Add || x->op == ir::BinOp::Sub)) {
        off = x->op == ir::BinOp::Add ? *k : -*k;
        lhs = x->a;
      }
    }
    if (lhs->kind == ir::ExprKind::Binary) {
      auto* x = as<ir::BinaryNode>(lhs);
      auto k = ir::as_const_int(x->b);
      if (x->op != ir::BinOp::Mul || !k || *k <= 0) return {};
      a = *k;
      lhs = x->a;
    }
    if (lhs->kind != ir::ExprKind::Var || !lhs->dtype.is_int() || std::abs(bound) > (int64_t{1} << 40) ||
        std::abs(off) > (int64_t{1} << 40))
      return {};
    int64_t need = bound - off;  // v * a >= need
    int64_t lo = need >= 0 ? (need + a - 1) / a : -((-need) / a);
    return std::make_pair(as<ir::VarNode>(lhs), lo);
  }
  // Records what is known of variable v as it is bound (a variable bound again loses what was
  // known of its previous value).
  void bound(const ir::VarNode* v, bool is_nonneg, std::optional<std::pair<int64_t, int64_t>> r) {
    if (is_nonneg) nonneg_.insert(v);
    else nonneg_.erase(v);
    if (r) range_[v] = *r;
    else range_.erase(v);
  }
  // Constant bounds [lo, hi] of integer variables: block indices (0 .. grid - 1 for a constant
  // grid), the sub-block index (0 .. 1), loops with constant bounds, lets of bounded values.
  std::unordered_map<const ir::VarNode*, std::pair<int64_t, int64_t>> range_;
  // Interval arithmetic over + - * floordiv min max and % by a positive constant (constants and
  // bounded variables): the bounds of integer expression e, or nullopt when some part is unbounded
  // (or too large).
  std::optional<std::pair<int64_t, int64_t>> bounds(const Expr& e) const {
    using R = std::optional<std::pair<int64_t, int64_t>>;
    constexpr int64_t kBig = int64_t{1} << 40;  // products of two bounded values stay in int64
    auto ok = [&](int64_t lo, int64_t hi) -> R {
      if (lo < -kBig || hi > kBig) return std::nullopt;
      return std::make_pair(lo, hi);
    };
    if (auto c = ir::as_const_int(e)) return ok(*c, *c);
    switch (e->kind) {
      case ir::ExprKind::Var: {
        auto it = range_.find(as<ir::VarNode>(e));
        return it == range_.end() ? R{} : R{it->second};
      }
      case ir::ExprKind::Cast: {
        auto* c = as<ir::CastNode>(e);
        if (!c->dtype.is_int() || !c->value->dtype.is_int() || c->dtype.bits() <= c->value->dtype.bits()) return {};  // a same-width cast may wrap
        return bounds(c->value);
      }
      case ir::ExprKind::Binary: {
        auto* b = as<ir::BinaryNode>(e);
        if (!b->dtype.is_int()) return {};
        R x = bounds(b->a), y = bounds(b->b);
        // floor modulo by a positive constant c lies in [0, c - 1] whatever the dividend (map_grid's
        // `by = (blk / 2) % 2`); a dividend already inside [0, c - 1] keeps its range
        if (b->op == ir::BinOp::Mod && y && y->first == y->second && y->first > 0) {
          if (x && x->first >= 0 && x->second < y->first) return x;
          return ok(0, y->first - 1);
        }
        if (b->op == ir::BinOp::Mod && y && y->first >= 1) return ok(0, y->second - 1);  // a divisor in [b0, b1]
        if (!x || !y) return {};
        auto [a0, a1] = *x;
        auto [b0, b1] = *y;
        switch (b->op) {
          case ir::BinOp::Add: return ok(a0 + b0, a1 + b1);
          case ir::BinOp::Sub: return ok(a0 - b1, a1 - b0);
          case ir::BinOp::Mul: {
            int64_t p[4] = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
            return ok(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
          }
          case ir::BinOp::FloorDiv: {
            if (b0 != b1 && b0 >= 1 && a0 >= 0) return ok(a0 / b1, a1 / b0);  // a divisor in [b0, b1], b0 >= 1
            if (b0 != b1 || b0 <= 0) return {};
            auto fd = [&](int64_t v) { return v >= 0 ? v / b0 : -((-v + b0 - 1) / b0); };
            return ok(fd(a0), fd(a1));
          }
          case ir::BinOp::Min: return ok(std::min(a0, b0), std::min(a1, b1));
          case ir::BinOp::Max: return ok(std::max(a0, b0), std::max(a1, b1));
          case ir::BinOp::Div:
          case ir::BinOp::CeilDiv:
          case ir::BinOp::Mod:  // a non-constant or non-positive divisor (a positive constant: above)
          case ir::BinOp::EQ:
          case ir::BinOp::NE:
          case ir::BinOp::LT:
          case ir::BinOp::LE:
          case ir::BinOp::GT:
          case ir::BinOp::GE:
          case ir::BinOp::And:
          case ir::BinOp::Or:
          case ir::BinOp::BitAnd:
          case ir::BinOp::BitOr:
          case ir::BinOp::BitXor:
          case ir::BinOp::Shl:
          case ir::BinOp::Shr: return {};  // not bounded here
        }
        return {};
      }
      case ir::ExprKind::IntImm:
      case ir::ExprKind::FloatImm:
      case ir::ExprKind::Unary:
      case ir::ExprKind::Call:
      case ir::ExprKind::Select:
      case ir::ExprKind::Load: return {};  // constants are handled above; the rest is unbounded
    }
    return {};
  }
  // True when [start, start + extent) provably lies inside [0, dim): the copy is never short.
  bool inside(const Expr& start, int64_t extent, const Expr& dim) const {
    auto r = bounds(start);
    auto d = ir::as_const_int(dim);
    return r && d && r->first >= 0 && r->second + extent <= *d;
  }
};

}  // namespace

Program select_instructions(const ir::Kernel& kernel, const target::Target& target, bool auto_sync,
                            const std::set<std::string>* passes) {
  return Lowerer(kernel, target, auto_sync, passes).run();
}

}  // namespace tw::ascend
