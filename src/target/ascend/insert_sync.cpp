#include "target/ascend/insert_sync.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ir/functor.h"
#include "ir/printer.h"
#include "target/ascend/program_access.h"
#include "target/ascend/program_printer.h"

namespace tw::ascend {

namespace {

using ir::Expr;
constexpr int kReservedEventIds = 2;  // the top two ids per pipe pair are kept free (ascend-910b.md: "keep 6-7 free")
constexpr int kSpaceWorkspace = 15;  // GM spaces: 15 = workspace, 16 + i = parameter i
constexpr int64_t kUnknown = INT64_MAX;

// ---------------------------------------------------------------------------------------------
// Accesses

// Fence: a cross-core flag's stand-in for "every access of this shared GM space" (conflicts with
// any access of the space, in both directions).
enum class Mode : uint8_t { Read, Write, Fence };

struct Access {
  int space = 0;
  Mode mode = Mode::Read;
  int64_t lo = 0, hi = kUnknown;  // hull
  bool rect = false;              // exact strided rectangle known: start=lo
  int64_t rows = 1, row_bytes = 0, stride = 0;
  std::string slot;               // non-empty: offset = (X % m) * H + [slo, shi), key = "X|m|H"
  Expr slot_x;
  int64_t m = 0, h = 0, slo = 0, shi = 0;
  // offset = V * step + c (V a variable): the strided rectangle at V = 0 starts at step_lo (rows,
  // row_bytes, stride as above); add_dep compares the iterations of V's loop exactly
  const ir::VarNode* step_var = nullptr;
  int64_t step = 0, step_lo = 0;
  bool atomic = false;  // a GM write that adds (T.atomic_add)
};

bool is_gm(int space) { return space >= kSpaceWorkspace; }

std::optional<int64_t> cint(const Expr& e) { return e ? ir::as_const_int(e) : std::optional<int64_t>(); }

// Value ranges of integer expressions (closed intervals, saturated at +-kInf): loop variables are
// in [0, extent), block / sub-block indices and shape variables are >= 0, Mod by a positive
// constant is in [0, m) (floor semantics), other variables are unbounded.
constexpr int64_t kInf = int64_t{1} << 60;
struct Iv {
  int64_t lo = -kInf, hi = kInf;
  bool bounded() const { return lo > -kInf && hi < kInf; }
};
using Ranges = std::map<const ir::VarNode*, Iv>;

int64_t sat(__int128 v) { return v >= kInf ? kInf : v <= -kInf ? -kInf : static_cast<int64_t>(v); }
int64_t fdiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

Iv range_of(const Expr& e, const Ranges& r) {
  if (!e) return {};
  switch (e->kind) {
    case ir::ExprKind::IntImm: {
      int64_t v = ir::as<ir::IntImmNode>(e)->value;
      return {v, v};
    }
    case ir::ExprKind::Var: {
      auto it = r.find(ir::as<ir::VarNode>(e));
      return it == r.end() ? Iv{} : it->second;
    }
    case ir::ExprKind::Binary: {
      auto* b = ir::as<ir::BinaryNode>(e);
      Iv x = range_of(b->a, r), y = range_of(b->b, r);
      auto inf = [](int64_t v) { return v <= -kInf || v >= kInf; };
      switch (b->op) {
        case ir::BinOp::Add: return {sat(__int128(x.lo) + y.lo), sat(__int128(x.hi) + y.hi)};
        case ir::BinOp::Sub: return {sat(__int128(x.lo) - y.hi), sat(__int128(x.hi) - y.lo)};
        case ir::BinOp::Min: return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
        case ir::BinOp::Max: return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
        case ir::BinOp::Mul: {
          if (inf(x.lo) || inf(x.hi) || inf(y.lo) || inf(y.hi)) {
            if (x.lo >= 0 && y.lo >= 0) return {sat(__int128(x.lo) * y.lo), kInf};
            return {};
          }
          __int128 c[4] = {__int128(x.lo) * y.lo, __int128(x.lo) * y.hi, __int128(x.hi) * y.lo, __int128(x.hi) * y.hi};
          return {sat(*std::min_element(c, c + 4)), sat(*std::max_element(c, c + 4))};
        }
        case ir::BinOp::Mod:
          if (y.lo == y.hi && y.lo > 0) {
            if (x.lo >= 0 && x.hi < y.lo) return x;
            return {0, y.lo - 1};
          }
          return {};
        case ir::BinOp::FloorDiv:
        case ir::BinOp::CeilDiv:
          if (y.lo == y.hi && y.lo > 0) {
            int64_t d = y.lo, k = b->op == ir::BinOp::CeilDiv ? d - 1 : 0;
            return {inf(x.lo) ? -kInf : fdiv(x.lo + k, d), inf(x.hi) ? kInf : fdiv(x.hi + k, d)};
          }
          return {};
        case ir::BinOp::Div: case ir::BinOp::EQ: case ir::BinOp::NE: case ir::BinOp::LT: case ir::BinOp::LE:
        case ir::BinOp::GT: case ir::BinOp::GE: case ir::BinOp::And: case ir::BinOp::Or:
        case ir::BinOp::BitAnd: case ir::BinOp::BitOr: case ir::BinOp::BitXor: case ir::BinOp::Shl: case ir::BinOp::Shr: return {};
      }
      return {};
    }
    case ir::ExprKind::FloatImm: case ir::ExprKind::Unary: case ir::ExprKind::Call: case ir::ExprKind::Cast:
    case ir::ExprKind::Select: case ir::ExprKind::Load: return {};
  }
  return {};
}

// Does condition e hold for every value in the ranges (comparisons of intervals, And, Or)?
bool holds(const Expr& e, const Ranges& r) {
  if (!e || e->kind != ir::ExprKind::Binary) {
    auto c = cint(e);
    return c && *c != 0;
  }
  auto* b = ir::as<ir::BinaryNode>(e);
  if (b->op == ir::BinOp::And) return holds(b->a, r) && holds(b->b, r);
  if (b->op == ir::BinOp::Or) return holds(b->a, r) || holds(b->b, r);
  Iv x = range_of(b->a, r), y = range_of(b->b, r);
  switch (b->op) {
    case ir::BinOp::LT: return x.hi < y.lo;
    case ir::BinOp::LE: return x.hi <= y.lo;
    case ir::BinOp::GT: return x.lo > y.hi;
    case ir::BinOp::GE: return x.lo >= y.hi;
    case ir::BinOp::NE: return x.hi < y.lo || x.lo > y.hi;
    case ir::BinOp::EQ: return x.bounded() && x.lo == x.hi && y.lo == y.hi && x.lo == y.lo;
    default: return false;
  }
}

struct SlotMatch {
  Expr x;
  int64_t m, h, c;
};
// (X % m) * H [+ c], either operand order.
std::optional<SlotMatch> match_slot(const Expr& e) {
  if (!e || e->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = ir::as<ir::BinaryNode>(e);
  if (b->op == ir::BinOp::Add) {
    auto c = cint(b->b);
    auto inner = c ? match_slot(b->a) : std::nullopt;
    if (!inner) {
      c = cint(b->a);
      inner = c ? match_slot(b->b) : std::nullopt;
    }
    if (!inner) return std::nullopt;
    inner->c += *c;
    return inner;
  }
  if (b->op != ir::BinOp::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Expr& mod = side ? b->b : b->a;
    auto h = cint(side ? b->a : b->b);
    if (!h || !mod || mod->kind != ir::ExprKind::Binary) continue;
    auto* md = ir::as<ir::BinaryNode>(mod);
    auto m = cint(md->b);
    if (md->op != ir::BinOp::Mod || !m || *m < 2 || *m > 4 || *h <= 0) continue;
    return SlotMatch{md->a, *m, *h, 0};
  }
  return std::nullopt;
}

// V * H [+ c] (V a variable, H > 0 and c constants), either operand order.
struct StepMatch {
  const ir::VarNode* v;
  int64_t h, c;
};
std::optional<StepMatch> match_step(const Expr& e) {
  if (!e || e->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = ir::as<ir::BinaryNode>(e);
  if (b->op == ir::BinOp::Add) {
    for (int side = 0; side < 2; ++side) {
      auto c = cint(side ? b->a : b->b);
      auto inner = c ? match_step(side ? b->b : b->a) : std::nullopt;
      if (inner) {
        inner->c += *c;
        return inner;
      }
    }
    return std::nullopt;
  }
  if (b->op != ir::BinOp::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Expr& v = side ? b->b : b->a;
    auto h = cint(side ? b->a : b->b);
    if (h && *h > 0 && v && v->kind == ir::ExprKind::Var) return StepMatch{ir::as<ir::VarNode>(v), *h, 0};
  }
  return std::nullopt;
}

using Env = std::vector<std::pair<ir::Var, Expr>>;

// The accesses of one instruction (program_access's regions, placed in physical spaces): counts
// and offsets evaluated after the Let substitution `env`; GM hulls from value ranges when a GM
// offset is not constant (`ranges` given).
struct AccessBuilder {
  const Program& p;
  const Env& env;
  std::vector<Access>& out;
  const Ranges* ranges = nullptr;

  Expr sub(const Expr& e) const { return e && !env.empty() ? ir::substitute(e, env) : e; }
  std::optional<int64_t> o(const Expr& e) const { return cint(sub(e)); }

  void build(const InstrOp& op) const {
    for (const Region& r : program_access(p, op).regions) r.mem == Mem::GM ? gm(r) : local(r);
  }

  // A region of an on-chip operand: its buffer's bytes in the physical memory, exact (a constant
  // rectangle) or slotted when the offset allows, else the whole buffer.
  void local(const Region& r) const {
    const BufferDecl& b = p.buffers.at(r.buffer);
    Access a;
    a.space = static_cast<int>(b.mem);
    a.mode = r.mode == AccessMode::Write ? Mode::Write : Mode::Read;
    int64_t base = b.offset, end = b.offset + b.bytes;
    Extent x = evaluate(r, [&](const Expr& e) { return o(e); });
    Expr off = sub(r.offset);
    auto c = cint(off);
    a.lo = base, a.hi = end;
    if (c && x.start) {
      a.lo = base + *c + *x.start;
      if (x.bytes) {
        a.hi = a.lo + *x.bytes;
        a.rect = true;
        a.rows = std::max<int64_t>(*x.rows, 1), a.row_bytes = *x.row_bytes, a.stride = x.stride.value_or(0);
      }
    } else if (auto s = match_slot(off);
               s && x.start && x.bytes && s->c + *x.start >= 0 && s->c + *x.start + *x.bytes <= s->h) {
      a.slot = ir::print(s->x) + "|" + std::to_string(s->m);
      a.h = s->h;
      a.slot_x = s->x, a.m = s->m;
      a.slo = s->c + *x.start, a.shi = a.slo + *x.bytes;
      a.lo = base + a.slo, a.hi = std::min(end, base + (s->m - 1) * s->h + a.shi);
    } else if (auto st = match_step(off); st && x.start && x.bytes && x.rows && x.row_bytes) {
      a.step_var = st->v, a.step = st->h, a.step_lo = base + st->c + *x.start;
      a.rows = std::max<int64_t>(*x.rows, 1), a.row_bytes = *x.row_bytes, a.stride = x.stride.value_or(0);
    }
    out.push_back(a);
  }
  // A GM region: exact when its offset and counts are constant, else (with `ranges`) the hull of
  // its offset's value range plus the upper bound of its extent.
  void gm(const Region& r) const {
    Access a;
    a.space = r.param < 0 ? kSpaceWorkspace : 16 + r.param;
    a.mode = r.mode == AccessMode::Write ? Mode::Write : Mode::Read;
    a.atomic = r.atomic;
    auto c = o(r.offset);
    Extent x = evaluate(r, [&](const Expr& e) { return o(e); });
    if (c && x.start) {
      a.lo = *c + *x.start;
      if (x.bytes) {
        a.hi = a.lo + *x.bytes;
        a.rect = true;
        a.rows = std::max<int64_t>(*x.rows, 1), a.row_bytes = *x.row_bytes, a.stride = x.stride.value_or(0);
      }
    } else if (ranges && r.offset) {
      // hull from value ranges: [min offset, max offset + max extent)
      Iv off = range_of(sub(r.offset), *ranges);
      Extent hi = evaluate(r, [&](const Expr& e) -> std::optional<int64_t> {
        if (auto k = o(e)) return k;
        Iv v = range_of(sub(e), *ranges);
        if (v.lo < 0 || v.hi >= kInf) return std::nullopt;
        return v.hi;
      });
      if (off.lo >= 0 && off.hi < kInf && hi.bytes && hi.start && *hi.start == 0)
        a.lo = off.lo, a.hi = off.hi + *hi.bytes;
    }
    // V * step + c: a tile stored at row k * H of an output in loop k (GM write-after-write) is
    // compared exactly across iterations, as local() does for on-chip operands
    if (!c && x.start && x.bytes && x.rows && x.row_bytes)
      if (auto st = match_step(sub(r.offset))) {
        a.step_var = st->v, a.step = st->h, a.step_lo = st->c + *x.start;
        a.rows = std::max<int64_t>(*x.rows, 1), a.row_bytes = *x.row_bytes, a.stride = x.stride.value_or(0);
      }
    out.push_back(a);
  }
};

// Exact intersection of two constant strided rectangles.
bool rect_overlap(const Access& a, const Access& b) {
  const Access& x = a.rows <= b.rows ? a : b;
  const Access& y = a.rows <= b.rows ? b : a;
  for (int64_t i = 0; i < x.rows; ++i) {
    int64_t s = x.lo + i * x.stride, e = s + x.row_bytes;
    if (y.rows <= 1 || y.stride <= 0) {
      if (s < y.lo + y.row_bytes + (y.rows - 1) * y.stride && y.lo < e) return true;
      continue;
    }
    // rows j of y with y.lo + j*st < e and y.lo + j*st + rb > s
    int64_t jmin = fdiv(s - y.lo - y.row_bytes, y.stride) + 1;
    int64_t jmax = fdiv(e - y.lo - 1, y.stride);
    jmin = std::max<int64_t>(jmin, 0), jmax = std::min<int64_t>(jmax, y.rows - 1);
    if (jmin <= jmax) return true;
  }
  return false;
}

enum class Ov : uint8_t { None, Plain, Slot };

// Do x (earlier) and y (later) conflict?
Ov conflict(const Access& x, const Access& y) {
  if (x.space != y.space) return Ov::None;
  if (x.mode == Mode::Fence || y.mode == Mode::Fence) {
    if (x.mode == y.mode) return Ov::None;
    return std::max(x.lo, y.lo) < std::min(x.hi, y.hi) ? Ov::Plain : Ov::None;
  }
  if (x.mode == Mode::Read && y.mode == Mode::Read) return Ov::None;
  if (x.atomic && y.atomic) return Ov::None;  // atomic adds into GM commute: see header
  if (!x.slot.empty() && x.slot == y.slot && x.h == y.h) {
    if (std::max(x.slo, y.slo) >= std::min(x.shi, y.shi)) return Ov::None;
    return Ov::Slot;  // same slot in one iteration; per-slot flags across iterations
  }
  if (std::max(x.lo, y.lo) >= std::min(x.hi, y.hi)) return Ov::None;
  if (x.rect && y.rect && !rect_overlap(x, y)) return Ov::None;
  return Ov::Plain;
}

// ---------------------------------------------------------------------------------------------
// The statement tree of one core's code, with blocks (statement lists) and program positions.

struct Block {
  int owner = -1;  // node owning the block (For/If), -1 for the root
  std::vector<int> kids;
};

struct Node {
  StmtKind kind = StmtKind::Instr;
  StmtPtr stmt;
  int block = -1, index = 0;     // where it is
  int body = -1, else_body = -1;  // For: body; If: then / else blocks
  int64_t min_trip = 0;           // For: a lower bound of its trip count (value ranges)
  bool first_true = false;        // If: taken in the first iteration of the loop around (see build)
  // instructions
  int pos = -1;
  Pipe pipe = Pipe::S;
  bool cross = false;  // CrossCoreSetFlag / CrossCoreWaitFlag
  bool fence = false;  // cross-core flag that orders accesses (a set, or a wait on a pipe != S)
  std::optional<int64_t> cross_id;
  std::vector<Access> acc;
};

struct Dep {
  int a, b;  // node ids
  bool carried;
  int C;       // block the dependence is placed in
  int ia, ib;  // indices of a's / b's ancestors in C
  int loop;    // carried: the loop node
  std::string slot;
  Expr slot_x;
  int64_t m = 0;
  bool keep = true;
};

struct SyncPair {
  enum Kind : uint8_t { Flag, Barrier, All } kind = Flag;
  Pipe p = Pipe::S, q = Pipe::S, r = Pipe::S;  // r: relay pipe when relay
  bool relay = false;
  int C = -1, s = 0, w = 0;  // slots in C (carried: w is the wait slot in the next iteration)
  bool carried = false;
  int hoist = -1;  // carried flags: the loop node before/after which the pair is set/drained
  std::string slot;
  Expr slot_x;
  int64_t m = 1;
  int id = -1, relay_id = -1;
  bool guard = false;  // intra pair whose set and wait both go first at slot s (see guard_carried)
  std::vector<int> bs;  // the b instructions of the dependences it orders (where waits may sink)
  std::vector<int> as;  // their a instructions (where sets may rise)
  bool guarded = false;  // pair with a guard before its set: the set stays put (see guard_carried)
  bool body_guard = false;  // guard shared by the intra pairs of one pipe pair of a loop body
  ir::Span set_span, wait_span, hoist_span;
  // set_places_of / wait_places_of, computed when first asked for (the colouring asks for them in
  // its innermost loops); a copy starts empty, and a change of the pair in place clears them
  struct Places {
    mutable std::optional<std::vector<std::pair<int, int>>> set, wait;
    Places() = default;
    Places(const Places&) {}
    Places& operator=(const Places&) {
      clear();
      return *this;
    }
    void clear() { set.reset(), wait.reset(); }
  } places;
};


bool in_order(Pipe p) { return p == Pipe::M || p == Pipe::S; }

class CoreSync {
 public:
  CoreSync(const Program& p, CoreType core, const std::set<int>& shared, int event_ids)
      : p_(p), core_(core), shared_(shared), event_ids_(event_ids) {
    if (p.block_idx) ranges_[p.block_idx.get()] = Iv{0, kInf};
    if (p.sub_block_idx) ranges_[p.sub_block_idx.get()] = Iv{0, 1};
    for (const auto& v : p.shape_vars) ranges_[v.get()] = Iv{0, kInf};
  }

  // Phase 1: the statement tree and the accesses (cross-core flags without their fences yet).
  void build_tree(const StmtPtr& code) {
    root_ = new_block(-1);
    Env env;
    build(code, root_, env);
  }

  // The workspace bytes each cross-core flag id guards, seen from this core: the workspace
  // accesses of the instruction next to each flag on its pipe (split_cube_vector's protocol: a
  // wait right before the consumer's access, a set right after the producer's / consumer's access
  // of the hand-off slot). Unknown (no such instruction, or a non-constant hull): the whole space.
  void flag_regions(std::map<int64_t, Iv>& regions, std::set<int64_t>& whole) const {
    for (const Node& n : nodes_) {
      if (!n.cross || !n.cross_id) continue;
      bool is_set = std::holds_alternative<CrossCoreSetFlag>(n.stmt->instr.op);
      const auto& kids = blocks_[n.block].kids;
      const Access* hit = nullptr;
      bool stop = false;
      for (int k = n.index + (is_set ? -1 : 1); !stop && k >= 0 && k < static_cast<int>(kids.size());
           k += is_set ? -1 : 1) {
        const Node& m = nodes_[kids[k]];
        if (m.kind == StmtKind::Let) continue;
        if (m.kind != StmtKind::Instr) break;
        if (m.cross || m.pipe != n.pipe) continue;
        for (const Access& a : m.acc)
          if (a.space == kSpaceWorkspace) hit = &a;
        stop = true;
      }
      if (!hit) continue;
      if (hit->hi == kUnknown) {
        whole.insert(*n.cross_id);
        continue;
      }
      auto [it, fresh] = regions.try_emplace(*n.cross_id, Iv{hit->lo, hit->hi});
      if (!fresh) it->second.lo = std::min(it->second.lo, hit->lo), it->second.hi = std::max(it->second.hi, hit->hi);
    }
  }

  // Phase 2: fences (every shared GM space, the workspace only over the flag's region), then sync.
  StmtPtr finish(const std::map<int64_t, Iv>& regions, const std::set<int64_t>& whole) {
    for (Node& n : nodes_) {
      if (!n.fence) continue;
      for (int sp : shared_) {
        Access a{sp, Mode::Fence};
        if (sp == kSpaceWorkspace && n.cross_id && !whole.count(*n.cross_id))
          if (auto it = regions.find(*n.cross_id); it != regions.end()) a.lo = it->second.lo, a.hi = it->second.hi;
        n.acc.push_back(a);
      }
    }
    build_chains();
    find_deps();
    reduce();
    // Precise pairs first; pipe pairs whose event ids then run out fall back to covering pairs
    // (fewer pairs, but they may hold a pipe behind unrelated work) in both directions (guards).
    // When ids still run out, carried pairs of those pipe pairs merge (merge_, place()).
    // The colouring kept is the last one unless an earlier one has fewer PIPE_ALLs (alls()); a
    // colouring with merged carried pairs only when it has fewer than every earlier one.
    std::vector<SyncPair> best;
    for (;;) {
      pairs_.clear();
      place();
      guard_carried();
      std::set<std::pair<Pipe, Pipe>> failed = colour();
      if (!best.empty() && (merge_.empty() ? alls(best) < alls(pairs_) : alls(best) <= alls(pairs_)))
        std::swap(best, pairs_);
      best = pairs_;
      size_t before = loose_.size() + merge_.size();
      const std::set<std::pair<Pipe, Pipe>> was_loose = loose_;
      for (auto [x, y] : failed) {
        // failed again with covering pairs: merge carried pairs too (place())
        if (was_loose.count({x, y})) merge_.insert({x, y}), merge_.insert({y, x});
        loose_.insert({x, y}), loose_.insert({y, x});
      }
      if (failed.empty() || loose_.size() + merge_.size() == before) break;
    }
    pairs_ = std::move(best);
    return emit(root_);
  }

 private:
  const Program& p_;
  CoreType core_;
  const std::set<int>& shared_;
  int event_ids_;  // SetFlag/WaitFlag ids per pipe pair this pass may use
  Ranges ranges_;  // loop variables (while building), block indices, shape variables
  const ir::VarNode* first_var_ = nullptr;  // while building: the loop whose first iteration decides first_true
  std::vector<Node> nodes_;
  std::vector<Block> blocks_;
  std::vector<int> instrs_;  // instruction nodes in program order
  std::vector<std::vector<std::pair<int, int>>> chains_;  // per node: see chain()
  std::vector<int> ifs_;  // `if`s with an instruction in each arm (reduce())
  std::vector<int> block_first_, block_last_;  // per block: its instructions (those of its kids too) are at pos first .. last
  int root_ = -1;
  std::vector<Dep> deps_;
  std::map<std::tuple<int, int, bool>, int> dep_index_;
  std::vector<SyncPair> pairs_;
  std::map<std::pair<int, int>, std::vector<int>> from_;  // pairs_from()
  std::set<std::pair<Pipe, Pipe>> loose_;  // pipe pairs placed with covering pairs (ids ran out)
  std::set<std::pair<Pipe, Pipe>> merge_;  // loose pipe pairs whose ids still ran out: carried pairs merge

  int new_block(int owner) {
    blocks_.push_back(Block{owner, {}});
    return static_cast<int>(blocks_.size()) - 1;
  }
  int add_node(int block, StmtKind k, const StmtPtr& s) {
    Node n;
    n.kind = k, n.stmt = s, n.block = block, n.index = static_cast<int>(blocks_[block].kids.size());
    nodes_.push_back(std::move(n));
    int id = static_cast<int>(nodes_.size()) - 1;
    blocks_[block].kids.push_back(id);
    return id;
  }

  // Appends statement s to block b (nested Seqs are flattened; Let scope ends with the block).
  void build(const StmtPtr& s, int b, Env& env) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : s->body) build(c, b, env);
        return;
      case StmtKind::Let: {
        add_node(b, StmtKind::Let, s);
        env.emplace_back(s->var, env.empty() ? s->value : ir::substitute(s->value, env));
        return;
      }
      case StmtKind::For: {
        int n = add_node(b, StmtKind::For, s);
        int body = new_block(n);
        nodes_[n].body = body;
        size_t mark = env.size();
        Iv ext = range_of(env.empty() ? s->value : ir::substitute(s->value, env), ranges_);
        nodes_[n].min_trip = std::max<int64_t>(ext.lo, 0);
        ranges_[s->var.get()] = Iv{0, ext.hi >= kInf ? kInf : std::max<int64_t>(ext.hi - 1, 0)};
        const ir::VarNode* outer = first_var_;
        first_var_ = s->var.get();
        build(s->body.at(0), body, env);
        first_var_ = outer;
        env.resize(mark);
        return;
      }
      case StmtKind::If: {
        int n = add_node(b, StmtKind::If, s);
        int then_b = new_block(n);
        nodes_[n].body = then_b;
        // Taken in the first iteration of the innermost loop around (directly in its body, or in
        // the then-branch of such an `if`): the condition holds with that loop's variable = 0.
        const ir::VarNode* outer = first_var_;
        if (first_var_) {
          Iv saved = ranges_[first_var_];
          ranges_[first_var_] = Iv{0, 0};
          nodes_[n].first_true = holds(env.empty() ? s->value : ir::substitute(s->value, env), ranges_);
          ranges_[first_var_] = saved;
        }
        if (!nodes_[n].first_true) first_var_ = nullptr;
        size_t mark = env.size();
        build(s->body.at(0), then_b, env);
        env.resize(mark);
        first_var_ = nullptr;
        int else_b = new_block(n);
        nodes_[n].else_body = else_b;
        build(s->else_body, else_b, env);
        first_var_ = outer;
        env.resize(mark);
        return;
      }
      case StmtKind::Instr: {
        const Instr& in = s->instr;
        if (std::holds_alternative<SetFlag>(in.op) || std::holds_alternative<WaitFlag>(in.op) ||
            std::holds_alternative<PipeBarrier>(in.op))
          throw ir::Error("insert_sync: internal error: the program already has " + print_instr(p_, in, false) +
                              " (automatic programs get all their flags and barriers from insert_sync)",
                          in.span, "do not mix hand-written flags with the automatic pipeline: use expert mode");
        int n = add_node(b, StmtKind::Instr, s);
        Node& nd = nodes_[n];
        nd.pipe = in.pipe();
        nd.pos = static_cast<int>(instrs_.size());
        instrs_.push_back(n);
        nd.cross = std::holds_alternative<CrossCoreSetFlag>(in.op) || std::holds_alternative<CrossCoreWaitFlag>(in.op);
        if (auto* f = std::get_if<CrossCoreSetFlag>(&in.op)) {
          nd.fence = true;
          nd.cross_id = cint(f->id);
        } else if (auto* w = std::get_if<CrossCoreWaitFlag>(&in.op)) {
          nd.fence = w->pipe != Pipe::S;
          nd.cross_id = cint(w->id);
        } else {
          AccessBuilder ab{p_, env, nd.acc};
          ab.ranges = &ranges_;
          ab.build(in.op);
        }
        return;
      }
    }
  }

  // Blocks from n's block up to the root, with the index of n's ancestor in each (computed once
  // per node by finish(): reduce() asks for them in its innermost loop).
  const std::vector<std::pair<int, int>>& chain(int n) const { return chains_[n]; }
  void build_chains() {
    chains_.assign(nodes_.size(), {});
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (int n = static_cast<int>(i); n >= 0; n = blocks_[nodes_[n].block].owner)
        chains_[i].emplace_back(nodes_[n].block, nodes_[n].index);
    block_first_.assign(blocks_.size(), INT_MAX), block_last_.assign(blocks_.size(), -1);
    for (int n : instrs_)
      for (auto [blk, idx] : chains_[n])
        block_first_[blk] = std::min(block_first_[blk], nodes_[n].pos), block_last_[blk] = std::max(block_last_[blk], nodes_[n].pos);
    ifs_.clear();
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (const Node& f = nodes_[i]; f.kind == StmtKind::If && block_last_[f.body] >= 0 && block_last_[f.else_body] >= 0)
        ifs_.push_back(static_cast<int>(i));
  }
  bool block_contains(int outer, int b) const {  // is block b inside (or equal to) block outer?
    while (b >= 0) {
      if (b == outer) return true;
      int o = blocks_[b].owner;
      if (o < 0) return false;
      b = nodes_[o].block;
    }
    return false;
  }

  void find_deps() {
    const int n = static_cast<int>(instrs_.size());
    for (int i = 0; i < n; ++i) {
      for (int j = i; j < n; ++j) {
        // common blocks: walk b's chain, find the first block in a's chain
        const auto& ca = chain(instrs_[i]);
        const auto& cb = chain(instrs_[j]);
        int lca = -1, ia = -1, ib = -1;
        for (auto [blk, idx] : cb) {
          for (auto [blk2, idx2] : ca)
            if (blk2 == blk) {
              lca = blk, ia = idx2, ib = idx;
              break;
            }
          if (lca >= 0) break;
        }
        if (i != j && ia != ib) add_dep(instrs_[i], instrs_[j], false, lca, ia, ib, -1);
        // innermost common loop: the lowest common block owned by a For, walking up from lca
        for (auto [blk, idx] : cb) {
          if (!block_contains(blk, lca)) continue;
          int o = blocks_[blk].owner;
          if (o >= 0 && nodes_[o].kind == StmtKind::For) {
            int xa = -1;
            for (auto [blk2, idx2] : ca)
              if (blk2 == blk) xa = idx2;
            // a = later instruction (j), b = earlier (i): j(iter) -> i(iter+1); and i -> j if i != j
            add_dep(instrs_[j], instrs_[i], true, blk, idx, xa, o);
            if (i != j) add_dep(instrs_[i], instrs_[j], true, blk, xa, idx, o);
            break;
          }
        }
      }
    }
  }

  void add_dep(int a, int b, bool carried, int C, int ia, int ib, int loop) {
    const Node& na = nodes_[a];
    const Node& nb = nodes_[b];
    Ov ov = Ov::None;
    const Access* slot_acc = nullptr;
    // Carried by the loop of V, two accesses at V * step + c (a page copy into rows jj * page ..
    // of a tile) touch different bytes in different iterations when their rectangles shifted by
    // 1 .. extent - 1 steps never meet: no dependence between iterations.
    auto iterations_disjoint = [&](const Access& x, const Access& y) {
      if (!carried || loop < 0 || !x.step_var || x.step_var != y.step_var || x.step != y.step || x.space != y.space)
        return false;
      const StmtPtr& f = nodes_[loop].stmt;
      auto ext = cint(f->value);
      // 2 (ext - 1) rectangle pairs of min(rows) rows each: bounded (a gathered row copied into
      // row r of a 128- or 256-row Nz tile: 4-16 strips, ext = block_M)
      if (f->var.get() != x.step_var || !ext || *ext * std::min(x.rows, y.rows) > (int64_t{1} << 16)) return false;
      for (int64_t d = 1; d < *ext; ++d) {
        Access xs = x, ys = y;
        xs.rect = ys.rect = true;
        xs.lo = x.step_lo + d * x.step, ys.lo = y.step_lo;
        if (rect_overlap(xs, ys)) return false;
        xs.lo = x.step_lo, ys.lo = y.step_lo + d * y.step;
        if (rect_overlap(xs, ys)) return false;
      }
      return true;
    };
    for (const Access& x : na.acc) {
      for (const Access& y : nb.acc) {
        if (iterations_disjoint(x, y)) continue;
        Ov o = conflict(x, y);
        if (o == Ov::Plain) {
          ov = Ov::Plain;
          break;
        }
        if (o == Ov::Slot) {
          if (slot_acc && slot_acc->slot != x.slot) {
            ov = Ov::Plain;  // two different slot keys: keep it simple
            break;
          }
          slot_acc = &x;
          ov = Ov::Slot;
        }
      }
      if (ov == Ov::Plain) break;
    }
    if (ov == Ov::None) return;
    Dep d{a, b, carried, C, ia, ib, loop, {}, nullptr, 0, true};
    if (ov == Ov::Slot) d.slot = slot_acc->slot, d.slot_x = slot_acc->slot_x, d.m = slot_acc->m;
    dep_index_[{a, b, carried}] = static_cast<int>(deps_.size());
    deps_.push_back(std::move(d));
  }

  const Dep* find(int a, int b, bool carried) const {
    auto it = dep_index_.find({a, b, carried});
    return it == dep_index_.end() ? nullptr : &deps_[it->second];
  }

  // Does c execute on every path from a to b of dependence d (c strictly between them)? Every
  // block between c and C must be on the chain of the instruction whose iteration c runs in, or a
  // loop body that runs: intra, a's or b's (one execution of C); carried, a's when c runs after a
  // (iteration i, after_a), b's when c runs before b (iteration i+1). An instruction of a's `if`
  // arm before a does not run before b of the next iteration, where b's arm may run instead (a and
  // b in the two arms of one `if`); a c both after a and before b may run in either iteration
  // (reduce() asks for both).
  // c may be an `if` too (its instructions' positions, first to last; reduce() then looks for one
  // instruction in each of its arms: covered()).
  bool between(const Dep& d, int c, bool after_a) const {
    const Node& nc = nodes_[c];
    const Node& na = nodes_[d.a];
    const Node& nb = nodes_[d.b];
    if (c == d.a || c == d.b) return false;
    int first = nc.pos, last = nc.pos;
    if (nc.kind == StmtKind::If)
      first = std::min(block_first_[nc.body], block_first_[nc.else_body]),
      last = std::max(block_last_[nc.body], block_last_[nc.else_body]);
    if (!block_contains(d.C, nc.block)) return false;
    const auto &ca = chain(d.a), &cb = chain(d.b);
    auto on = [](const std::vector<std::pair<int, int>>& ch, int blk) {
      for (auto [b, i] : ch)
        if (b == blk) return true;
      return false;
    };
    auto runs = [&](bool on_a, bool on_b) {
      for (int blk = nc.block; blk != d.C;) {
        if (!(on_a && on(ca, blk)) && !(on_b && on(cb, blk))) {
          int o = blocks_[blk].owner;
          if (nodes_[o].kind != StmtKind::For) return false;
          auto ext = cint(nodes_[o].stmt->value);
          if (!ext || *ext < 1) return false;
        }
        blk = nodes_[blocks_[blk].owner].block;
      }
      return true;
    };
    if (!d.carried) return na.pos < first && last < nb.pos && runs(true, true);
    return after_a ? first > na.pos && runs(true, false) : last < nb.pos && runs(false, true);
  }

  // A carried link may stand for the carried dependence d only if it is plain or has d's slot.
  static bool link_ok(const Dep* l, const Dep& d) {
    if (!l) return false;
    if (!l->carried) return true;
    return l->slot.empty() || l->slot == d.slot;
  }

  // Does link l order its a's completion before its b (a flag, a barrier, or an in-order pipe)? A
  // same-pipe link with a cross-core flag places nothing: a CrossCoreWaitFlag blocks later
  // instructions of its pipe but does not wait for earlier ones, and a CrossCoreSetFlag does not
  // block later ones, so an MTE2 copy into UB, a wait, then an MTE2 copy into the same bytes (a tile
  // plan_memory reused after a dead copy) still needs its PipeBarrier (port36 F1).
  bool ordered(const Dep& l) const {
    Pipe pa = nodes_[l.a].pipe, pb = nodes_[l.b].pipe;
    return !(pa == pb && !in_order(pa) && (nodes_[l.a].cross || nodes_[l.b].cross));
  }

  // Intra dependences first: a forward carried dependence a(i) -> b(i+1) (a before b in the body)
  // is implied by the intra one a(i) -> b(i) when that one is placed (its wait or barrier is
  // executed unconditionally after a in every execution of its block, on b's pipe, before b(i+1)).
  void reduce() {
    for (int pass = 0; pass < 2; ++pass)
      for (Dep& d : deps_)
        if (d.carried == (pass == 1)) reduce(d);
  }
  void reduce(Dep& d) {
    Pipe pa = nodes_[d.a].pipe, pb = nodes_[d.b].pipe;
    // In-order pipe, or a cross-core flag on the same pipe (a set fires after the earlier
    // instructions of its pipe, a wait blocks the later ones): nothing to do (still a link).
    if (pa == pb && (in_order(pa) || nodes_[d.a].cross || nodes_[d.b].cross)) {
      d.keep = false;
      return;
    }
    if (d.carried && nodes_[d.a].pos < nodes_[d.b].pos)
      if (const Dep* intra = find(d.a, d.b, false); intra && intra->keep) {
        d.keep = false;
        return;
      }
    // the instructions that may be between: those of C (contiguous in program order), and for an
    // intra dependence only those after a and before b
    int lo = block_first_[d.C], hi = block_last_[d.C];
    if (!d.carried) lo = std::max(lo, nodes_[d.a].pos + 1), hi = std::min(hi, nodes_[d.b].pos - 1);
    for (int k = lo; k <= hi; ++k)
      for (bool after_a : {true, false}) {
        int c = instrs_[k];
        if ((!after_a && !d.carried) || !between(d, c, after_a)) continue;
        if (links(d, c, after_a)) {
          d.keep = false;
          return;
        }
      }
    // No one instruction: an `if` between them with such an instruction on every path through each
    // arm (sync39 S1: the store of iteration k, then y rewritten in either arm, then the store of
    // iteration k + 1 reading y, into bytes the first one wrote)
    for (int f : ifs_) {
      const int first = std::min(block_first_[nodes_[f].body], block_first_[nodes_[f].else_body]);
      if (first < lo || first > hi) continue;
      for (bool after_a : {true, false})
        if ((after_a || d.carried) && between(d, f, after_a) && covered(d, nodes_[f].body, after_a) &&
            covered(d, nodes_[f].else_body, after_a)) {
          d.keep = false;
          return;
        }
    }
  }

  // Do the dependences a -> c and c -> b order d's a before its b (c between them, at a run after
  // a of d's iteration or before b of the next one: after_a)? Both placed, or one of them with c on
  // the other end's pipe (a wait blocks its pipe's later instructions; a set fires after its pipe's
  // earlier ones).
  bool links(const Dep& d, int c, bool after_a) const {
    const Dep* l1 = find(d.a, c, d.carried && !after_a);
    const Dep* l2 = find(c, d.b, d.carried && after_a);
    bool ok1 = link_ok(l1, d) && ordered(*l1), ok2 = link_ok(l2, d) && ordered(*l2);
    Pipe pc = nodes_[c].pipe;
    return (ok1 && pc == nodes_[d.b].pipe) || (ok2 && pc == nodes_[d.a].pipe) || (ok1 && ok2);
  }

  // Does every execution of block blk (an arm of an `if` between a and b: between()) run an
  // instruction c with links(d, c, after_a), at a position between() allows? One of its kids, an
  // `if` with one in each arm, or a loop that runs (as between()'s runs) with one in its body.
  bool covered(const Dep& d, int blk, bool after_a) const {
    const Node& na = nodes_[d.a];
    const Node& nb = nodes_[d.b];
    for (int k : blocks_[blk].kids) {
      const Node& n = nodes_[k];
      if (n.kind == StmtKind::Instr) {
        if (k == d.a || k == d.b) continue;
        const bool placed = !d.carried ? na.pos < n.pos && n.pos < nb.pos : after_a ? n.pos > na.pos : n.pos < nb.pos;
        if (placed && links(d, k, after_a)) return true;
      } else if (n.kind == StmtKind::If) {
        if (covered(d, n.body, after_a) && covered(d, n.else_body, after_a)) return true;
      } else if (n.kind == StmtKind::For) {
        auto ext = cint(n.stmt->value);
        if (ext && *ext >= 1 && covered(d, n.body, after_a)) return true;
      }
    }
    return false;
  }

  int last_pos(const std::vector<int>& v) const {
    int m = -1;
    for (int x : v) m = std::max(m, nodes_[x].pos);
    return m;
  }
  int first_pos(const std::vector<int>& v) const {
    int m = INT_MAX;
    for (int x : v) m = std::min(m, nodes_[x].pos);
    return m;
  }

  // Would pair sp, ordering a -> b too, still set and wait exactly where it does (emit()'s places:
  // its set rises after the last of its a's, its wait sinks before the first of its b's)? Then it
  // covers the dependence at no cost, even with a later than its a's or b earlier than its b's:
  // the waiting pipe already stops there for that set (session 28). Twins, two dependences of one
  // pipe pair whose a's sit in different `if`s of one loop and whose pairs would set after that
  // loop and wait at one place (causal flash attention: the relayed MTE2 -> FIX pairs of the two
  // loads of P in the key loop, before the program's cross-core set), are one pair, one event id
  // (no PIPE_ALL when the ids run out).
  bool same_places_with(const SyncPair& sp, int a, int b) const {
    SyncPair x = sp;
    x.as.push_back(a), x.bs.push_back(b);
    return set_places_of(x) == set_places_of(sp) && wait_places_of(x) == wait_places_of(sp);
  }

  // Does pipe p run anything in kids [from, to) of block C (indices >= n: the next iteration)?
  bool has_pipe(int C, int from, int to, Pipe p) const {
    const auto& kids = blocks_[C].kids;
    int n = static_cast<int>(kids.size());
    for (int k = from; k < to; ++k)
      if (pipes_of(kids[k % n]) & (1u << static_cast<int>(p))) return true;
    return false;
  }
  uint32_t pipes_of(int node) const {
    const Node& nd = nodes_[node];
    if (nd.kind == StmtKind::Instr) return 1u << static_cast<int>(nd.pipe);
    uint32_t m = 0;
    for (int b : {nd.body, nd.else_body})
      if (b >= 0)
        for (int k : blocks_[b].kids) m |= pipes_of(k);
    return m;
  }

  // The outermost For around (and including) loop node l.
  int outermost_loop(int l) const {
    int best = l;
    for (int n = l; n >= 0; n = blocks_[nodes_[n].block].owner)
      if (nodes_[n].kind == StmtKind::For) best = n;
    return best;
  }

  void place() {
    // groups: (C, carried, p, q, slot)
    std::vector<Dep*> ds;
    for (Dep& d : deps_)
      if (d.keep) ds.push_back(&d);
    auto n_of = [&](const Dep& d) { return static_cast<int>(blocks_[d.C].kids.size()); };
    auto wslot = [&](const Dep& d) { return d.carried ? d.ib + n_of(d) : d.ib; };
    std::stable_sort(ds.begin(), ds.end(), [&](const Dep* x, const Dep* y) {
      if (x->carried != y->carried) return !x->carried;  // intra first (barriers may cover carried)
      int wx = wslot(*x), wy = wslot(*y);
      if (wx != wy) return wx < wy;
      return x->ia > y->ia;
    });
    for (Dep* d : ds) {
      Pipe pa = nodes_[d->a].pipe, pb = nodes_[d->b].pipe;
      int s = d->ia + 1, w = wslot(*d);
      if (pa == pb) {
        bool covered = false;
        for (const SyncPair& sp : pairs_)
          if (sp.kind == SyncPair::Barrier && sp.C == d->C && sp.p == pa) {
            int k = sp.w;
            if (!d->carried ? (s <= k && k <= w) : (k >= s || k <= d->ib)) covered = true;
          }
        if (covered) continue;
        SyncPair sp;
        sp.kind = SyncPair::Barrier;
        sp.p = sp.q = pa;
        sp.C = d->C, sp.s = sp.w = d->ib;
        sp.wait_span = nodes_[d->b].stmt->instr.span;
        pairs_.push_back(sp);
        continue;
      }
      bool covered = false;
      for (SyncPair& sp : pairs_)
        if (!covered && sp.kind == SyncPair::Flag && sp.C == d->C && sp.p == pa && sp.q == pb && sp.carried == d->carried &&
            sp.slot == d->slot && s <= sp.s && sp.w <= w &&
            (loose_.count({pa, pb}) ||
             ((d->carried || (!has_pipe(d->C, s, sp.s, pa) && !has_pipe(d->C, sp.w, w, pb))) &&
              ((nodes_[d->a].pos <= last_pos(sp.as) && nodes_[d->b].pos >= first_pos(sp.bs)) ||
               same_places_with(sp, d->a, d->b))))) {
          covered = true;  // (a pair that would hold back work of either pipe does not cover)
          sp.bs.push_back(d->b);
          sp.as.push_back(d->a);
          sp.places.clear();
        }
      // Ids of this pipe pair ran out even with covering pairs (merge_): a carried dependence joins
      // a carried pair of the same loop body and pipe pair, which then sets at the later of the two
      // set slots and waits at the earlier of the two wait slots (still after both a's and before
      // both b's of the next iteration). A rotated vector loop's two halves (paged decode) then share
      // one carried pair and its guard instead of taking two ids of each pipe pair (and a PIPE_ALL).
      if (!covered && d->carried && merge_.count({pa, pb}))
        for (SyncPair& sp : pairs_)
          if (sp.kind == SyncPair::Flag && sp.carried && sp.C == d->C && sp.p == pa && sp.q == pb && sp.slot == d->slot &&
              sp.hoist == outermost_loop(d->loop)) {
            covered = true;
            sp.s = std::max(sp.s, s), sp.w = std::min(sp.w, w);
            sp.bs.push_back(d->b);
            sp.as.push_back(d->a);
            sp.places.clear();
            break;
          }
      if (covered) continue;
      SyncPair sp;
      sp.p = pa, sp.q = pb;
      sp.C = d->C, sp.s = s, sp.w = w;
      sp.carried = d->carried;
      sp.slot = d->slot;
      sp.slot_x = d->slot_x;
      sp.m = d->slot_x ? d->m : 1;
      sp.set_span = nodes_[d->a].stmt->instr.span;
      sp.wait_span = nodes_[d->b].stmt->instr.span;
      sp.bs = {d->b};
      sp.as = {d->a};
      if (d->carried) {
        sp.hoist = outermost_loop(d->loop);
        sp.hoist_span = nodes_[sp.hoist].stmt->span;
      }
      if (!flag_pair_legal(core_, pa, pb)) {
        bool found = false;
        for (Pipe r : {Pipe::MTE1, Pipe::M, Pipe::MTE2, Pipe::MTE3, Pipe::V, Pipe::FIX, Pipe::S})
          if (r != pa && r != pb && flag_pair_legal(core_, pa, r) && flag_pair_legal(core_, r, pb)) {
            sp.relay = true, sp.r = r, found = true;
            break;
          }
        if (!found) {
          sp.kind = SyncPair::All;
          sp.w = d->ib;
        }
      }
      pairs_.push_back(sp);
    }
    for (SyncPair& sp : pairs_)
      if (sp.kind == SyncPair::Flag && sp.carried) narrow(sp);
  }

  // A carried pair whose wait and set are due right before and right after one `if` (kid w of
  // its block, s = w + 1) that holds every access it orders in one branch goes into that branch
  // (recursively): wait before the first b there, set after the last a. An execution that skips
  // the branch then skips both, so sets and waits still alternate (the preset before the loop and
  // the drain after it are unchanged; a wait takes the set of the last execution that ran the
  // branch, after its a's), and the chains of flag pairs inside the branch that order the set
  // after the wait (guard_carried) run whenever the pair does. Left before and after the `if`, a
  // skipped branch ran the wait and then the set with nothing ordering the setting pipe after the
  // waiting one: with other timing, a flag set twice. Not when the b's follow the a's in the
  // branch (the wait would come after the set).
  void narrow(SyncPair& sp) const {
    for (;;) {
      const auto& kids = blocks_[sp.C].kids;
      int k = sp.w - static_cast<int>(kids.size());
      if (k != sp.s - 1 || k < 0 || nodes_[kids[k]].kind != StmtKind::If) return;
      const Node& f = nodes_[kids[k]];
      int br = -1;
      for (int b : {f.body, f.else_body}) {
        bool all = true;
        for (const auto* v : {&sp.as, &sp.bs})
          for (int x : *v) all = all && block_contains(b, nodes_[x].block);
        if (all) br = b;
      }
      if (br < 0) return;
      auto index_in = [&](int x) {
        for (auto [blk, idx] : chain(x))
          if (blk == br) return idx;
        return -1;
      };
      int first_b = INT_MAX, last_a = -1;
      for (int x : sp.bs) first_b = std::min(first_b, index_in(x));
      for (int x : sp.as) last_a = std::max(last_a, index_in(x));
      if (first_b > last_a) return;
      sp.C = br, sp.s = last_a + 1, sp.w = first_b + static_cast<int>(blocks_[br].kids.size());
      sp.places.clear();
    }
  }

  // A carried pair p -> q (set after a's ancestor at slot s, wait before b's ancestor at slot w
  // of the next iteration) reuses its id every iteration: the set of iteration i+1 must come after
  // the wait of iteration i+1. The reverse dependence b -> a orders them only when it is placed
  // unconditionally in C (a reverse intra pair q -> p whose set follows the wait slot and whose
  // wait precedes the set slot); when b and a sit in `if`s that may both be skipped, or the
  // reverse dependence was dropped as implied by a chain inside those `if`s, nothing does, and
  // the setter's pipe may set again before the waiter consumed the previous set. Such pairs get a
  // guard: q sets and p waits a reverse flag right before the carried set (slot s), which is
  // after the carried wait (slot w <= s - 1) in the iteration.
  // Does a chain of intra flag pairs placed in block C (they run on every iteration) order pipe
  // q, once past the waits at slot w, before pipe p reaches the sets at slot s? A pipe past the
  // waits of slot t runs the sets of slots > t; a set at slot t' is before the waits of slot t'.
  // Waits and sets are Ends: a wait that emit() sinks into the `if` at kid t and a set it raises
  // into the `if` at kid s - 1 = t (or a pair inside that kid) may land in one branch in either
  // order; then the places emit() gives them decide (wait_before_set).
  struct End {
    int slot;
    bool moved;  // sunk into kid slot (a wait) / risen into kid slot - 1 (a set), or inside it
    int pair = -1;  // whose wait / set (its places): an index into pairs_; -1: unknown
    auto key() const { return std::make_tuple(slot, moved, pair); }
  };
  int ix(const SyncPair& sp) const { return static_cast<int>(&sp - pairs_.data()); }  // sp is in pairs_
  bool wait_before_set(End w, End s) const {
    if (w.slot >= s.slot) return false;
    if (!(w.slot + 1 == s.slot && w.moved && s.moved)) return true;
    return w.pair >= 0 && s.pair >= 0 && places_ordered(pairs_[w.pair], pairs_[s.pair]);
  }
  const std::vector<std::pair<int, int>>& wait_places_of(const SyncPair& sp) const {
    if (sp.places.wait) return *sp.places.wait;
    int w = sp.carried ? sp.w - static_cast<int>(blocks_[sp.C].kids.size()) : sp.w;
    std::vector<std::pair<int, int>> places;
    branch_places(sp.C, w, sp.bs, sp.relay ? sp.r : sp.q, /*wait=*/true, places);
    return *(sp.places.wait = std::move(places));
  }
  // Does every set of pair sp come after a wait of pair wp on its path (their places in emit())?
  // A wait at slot a of block W precedes a set at slot b of W when a < b (a set goes before the
  // waits of its slot), and a set inside kid k of W when a <= k.
  bool places_ordered(const SyncPair& wp, const SyncPair& sp) const {
    const auto& waits = wait_places_of(wp);
    for (auto [sb, ss] : set_places_of(sp)) {
      bool ok = false;
      for (auto [wb, ws] : waits) {
        int blk = sb, idx = ss;
        bool inner = false;
        while (blk != wb && blk >= 0) {
          int o = blocks_[blk].owner;
          if (o < 0) {
            blk = -1;
            break;
          }
          idx = nodes_[o].index, blk = nodes_[o].block, inner = true;
        }
        if (blk == wb && (inner ? ws <= idx : ws < idx)) ok = true;
      }
      if (!ok) return false;
    }
    return true;
  }
  // Does emit() move sp's wait / set out of its slot into the `if` next to it (branch_places)?
  bool wait_sinks(const SyncPair& sp) const {
    int w = sp.carried ? sp.w - static_cast<int>(blocks_[sp.C].kids.size()) : sp.w;
    const auto& places = wait_places_of(sp);
    return places.size() != 1 || places[0] != std::make_pair(sp.C, w);
  }
  bool set_rises(const SyncPair& sp) const {
    const auto& places = set_places_of(sp);
    return places.size() != 1 || places[0] != std::make_pair(sp.C, sp.s);
  }
  End wait_end(const SyncPair& sp, int offset = 0) const { return {sp.w + offset, wait_sinks(sp), ix(sp)}; }
  End set_end(const SyncPair& sp, int offset = 0) const { return {sp.s + offset, set_rises(sp), ix(sp)}; }

  // The pairs of pairs_ placed in block C whose set is on pipe p, in pairs_' order (what reaches(),
  // reaches2() and pipes_in() follow from a pipe; index_pairs() after pairs_ is built or replaced).
  const std::vector<int>& pairs_from(int C, Pipe p) const {
    static const std::vector<int> none;
    auto it = from_.find({C, static_cast<int>(p)});
    return it == from_.end() ? none : it->second;
  }
  void index_pairs() {
    from_.clear();
    for (size_t i = 0; i < pairs_.size(); ++i) from_[{pairs_[i].C, static_cast<int>(pairs_[i].p)}].push_back(static_cast<int>(i));
  }

  // The pipes chains of flag pairs placed unconditionally in block C order after pipe q, past the
  // waits at w, each with the earliest Ends it is reached at (how: one execution of C, one of a
  // loop's first iteration, two iterations of C's loop: reaches(), pipes_in(), reaches2()). An End
  // at an earlier slot, or at the same slot not moved, is before every set a later one is before
  // and enters every kid it enters (wait_before_set, through_loops), so the Ends it is earlier
  // than are not followed: they reach nothing more (the answer is the same, the walk is short).
  // Kept per start while the pairs it depends on keep their kind (a Flag, or not: colour() makes
  // pairs PIPE_ALLs and starts again from the uncoloured pairs): the pairs whose waits it reached
  // pipes at, the pairs it passed over for not being Flags whose waits would reach their pipes
  // earlier than it did, and those of the walks in loops and `if`s it asked. The colouring asks
  // may_share of every pair of a group, the same starts again and again; walked every time, its
  // cost grew as the fourth power of a straight-line program (docs/performance.md, session 38).
  enum class Walk : uint8_t { Once, First, Twice };
  using Reached = std::vector<std::pair<Pipe, End>>;
  struct Walked {
    Reached out;
    std::vector<std::pair<int, bool>> deps;  // (pair, was a Flag)
  };
  mutable std::map<std::tuple<int, Pipe, int, bool, int, Walk>, Walked> reached_;
  mutable std::vector<std::pair<int, bool>>* deps_of_walk_ = nullptr;  // the walk being made, if any
  const Reached& reached(int C, Pipe q, End w, Walk walk) const {
    auto key = std::make_tuple(C, q, w.slot, w.moved, w.pair, walk);
    auto it = reached_.find(key);
    bool valid = it != reached_.end();
    for (size_t i = 0; valid && i < it->second.deps.size(); ++i)
      valid = (pairs_[it->second.deps[i].first].kind == SyncPair::Flag) == it->second.deps[i].second;
    if (!valid) {
      Walked walked;
      auto* outer = deps_of_walk_;
      deps_of_walk_ = &walked.deps;
      walk_from(C, q, w, walk, walked);
      deps_of_walk_ = outer;
      it = reached_.insert_or_assign(key, std::move(walked)).first;
    }
    if (deps_of_walk_) deps_of_walk_->insert(deps_of_walk_->end(), it->second.deps.begin(), it->second.deps.end());
    return it->second.out;
  }
  void walk_from(int C, Pipe q, End w, Walk walk, Walked& walked) const {
    int n = static_cast<int>(blocks_[C].kids.size());
    struct Item {
      Pipe x;
      End t;
      int by;  // the pair whose wait it is, -1: none
    };
    auto later = [](const Item& x, const Item& y) {  // the earliest End first
      return std::make_tuple(x.t.slot, x.t.moved) > std::make_tuple(y.t.slot, y.t.moved);
    };
    std::vector<Item> todo{{q, w, -1}};
    std::vector<std::pair<Pipe, End>> loops;
    std::vector<Item> passed;  // pairs passed over for not being Flags: the wait each would reach a pipe at
    Reached& out = walked.out;
    auto push = [&](Item e) {
      todo.push_back(e);
      std::push_heap(todo.begin(), todo.end(), later);
    };
    while (!todo.empty()) {
      std::pop_heap(todo.begin(), todo.end(), later);
      auto [x, t, by] = todo.back();
      todo.pop_back();
      bool seen = false;
      for (const auto& [y, v] : out)
        seen = seen || (y == x && (v.slot < t.slot || (v.slot == t.slot && (!v.moved || v.key() == t.key()))));
      if (seen) continue;
      out.emplace_back(x, t);
      if (by >= 0) walked.deps.emplace_back(by, true);
      for (int i : pairs_from(C, x)) {
        const SyncPair& g = pairs_[i];
        if (g.guard || (g.carried && (walk != Walk::Twice || g.slot_x || t.slot >= n))) continue;
        if (g.kind != SyncPair::Flag) {  // as a Flag, its set would have to be after t
          if (t.slot < g.s) passed.push_back({g.q, End{g.w, false, -1}, i});
          else if (walk == Walk::Twice && !g.carried && t.slot < g.s + n) passed.push_back({g.q, End{g.w + n, false, -1}, i});
          continue;
        }
        if (walk != Walk::Twice || g.carried) {
          if (wait_before_set(t, set_end(g))) push({g.q, wait_end(g), i});
        } else {
          for (int o : {0, n})
            if (wait_before_set(t, set_end(g, o))) push({g.q, wait_end(g, o), i});
        }
      }
      loops.clear();
      if (walk != Walk::Twice) through_loops(C, x, t, 0, walk == Walk::First, loops);
      else for (int o : {0, n}) through_loops(C, x, t, o, false, loops);
      for (auto [y, e] : loops) push({y, e, -1});
    }
    // a pair passed over matters only if its wait would reach its pipe earlier than the walk did
    for (const auto& [y, e, i] : passed) {
      bool earlier = false;
      for (const auto& [x, v] : out) earlier = earlier || (x == y && (v.slot < e.slot || (v.slot == e.slot && !v.moved)));
      if (!earlier) walked.deps.emplace_back(i, false);
    }
  }
  bool reaches(int C, Pipe q, End w, Pipe p, End s) const {
    for (const auto& [x, t] : reached(C, q, w, Walk::Once))
      if (x == p && wait_before_set(t, s)) return true;
    return false;
  }
  void pairs_changed() {  // pairs_ is built anew: the walks and the index go
    reached_.clear();
    index_pairs();
  }

  // Chains through a kid of block C (kid k, slot k + offset in reaches2's two iterations) that pipe
  // x, past the waits at t, comes before: a loop L that provably runs at least once (min_trip: a
  // constant, or ceildiv(e, c) with e >= 1, from the value ranges), whose first iteration's sets
  // on x all follow x's wait, so the pairs placed unconditionally in that iteration (L's body,
  // and the then-branch of an `if` there whose condition holds when L's variable is 0:
  // first_true) order after x the pipes they reach there, recursively through the kids of the
  // body; or an `if` whose two branches both reach a pipe that way (an empty branch reaches
  // nothing). A reached pipe is past a wait inside kid k, before every set after it: End{k,
  // moved}, so it does not enter kid k again. L's own carried pairs are not followed (with one
  // iteration their wait is not in L). `first`: C is the body (or a taken branch) of a loop's
  // first iteration.
  void through_loops(int C, Pipe x, End t, int offset, bool first, std::vector<std::pair<Pipe, End>>& todo) const {
    const auto& kids = blocks_[C].kids;
    for (int k = 0; k < static_cast<int>(kids.size()); ++k) {
      const Node& L = nodes_[kids[k]];
      int at = k + offset;
      if (!(t.slot < at || (t.slot == at && !t.moved))) continue;
      uint32_t got = 0;
      if (L.kind == StmtKind::For && L.min_trip >= 1) got = pipes_in(L.body, x, true);
      else if (L.kind == StmtKind::If && first && L.first_true) got = pipes_in(L.body, x, true);
      else if (L.kind == StmtKind::If) got = pipes_in(L.body, x, false) & pipes_in(L.else_body, x, false);
      for (int y = 0; y < 32; ++y)
        if (got & (1u << y)) todo.push_back({static_cast<Pipe>(y), End{at, true, -1}});
    }
  }
  // The pipes that chains of flag pairs placed unconditionally in block B order after pipe x,
  // which is past everything before B's first kid (one execution of B; x itself excluded).
  uint32_t pipes_in(int B, Pipe x, bool first) const {
    uint32_t got = 0;
    for (const auto& [y, t] : reached(B, x, End{-1, false, -1}, first ? Walk::First : Walk::Once))
      if (y != x) got |= 1u << static_cast<int>(y);
    return got;
  }

  void guard_carried() {
    pairs_changed();
    std::vector<SyncPair> out;
    std::map<std::tuple<int, Pipe, Pipe>, int> body_guard;  // (loop body, q, p) -> first set slot
    for (const SyncPair& sp : pairs_) {
      // The pipe that waits the flag sp.p sets: q, or the relay pipe r of a relayed pair; r sets
      // r_q right after that wait and q waits it there, so a chain from q past the wait orders
      // the next set after it too.
      Pipe wq = sp.relay ? sp.r : sp.q;
      auto add_body_guard = [&](int F, Pipe from, Pipe to, int slot) {
        auto key = std::make_tuple(F, from, to);
        auto it = body_guard.find(key);
        if (it == body_guard.end()) body_guard[key] = slot;
        else it->second = std::min(it->second, slot);
      };
      if (sp.kind == SyncPair::Flag && sp.relay && !sp.slot_x) {
        // The relay's second flag r -> q, set by r right after its wait of p_r and waited by q
        // there, is reused every iteration of the loop around too: without a chain of
        // unconditional pairs that orders q's wait before r's next set, a guard q -> r goes
        // before the wait point (it shares the body guard of the pairs r -> q).
        int F = sp.C;
        if (blocks_[F].owner >= 0 && nodes_[blocks_[F].owner].kind == StmtKind::For) {
          int nF = static_cast<int>(blocks_[F].kids.size());
          int w = sp.carried ? sp.w - nF : sp.w;
          bool sinks = wait_sinks(sp);
          if (!reaches2(F, sp.q, End{w, sinks, ix(sp)}, sp.r, End{w + nF, sinks, -1}) &&
              flag_pair_legal(core_, sp.q, sp.r))
            add_body_guard(F, sp.q, sp.r, w);
        }
      }
      if (sp.kind == SyncPair::Flag && sp.carried && !sp.slot_x) {
        int n = static_cast<int>(blocks_[sp.C].kids.size());
        int w = sp.w - n;
        End we{w, wait_sinks(sp), ix(sp)};
        bool ordered = w >= sp.s || reaches(sp.C, wq, we, sp.p, set_end(sp)) ||
                       (sp.relay && reaches(sp.C, sp.q, we, sp.p, set_end(sp)));
        if (!ordered && flag_pair_legal(core_, wq, sp.p)) {
          SyncPair g;
          g.p = wq, g.q = sp.p;
          g.C = sp.C, g.s = g.w = sp.s;
          g.guard = true;
          g.set_span = sp.wait_span, g.wait_span = sp.set_span;
          out.push_back(g);
          out.push_back(sp);
          out.back().guarded = true;
          continue;
        }
      } else if (sp.kind == SyncPair::Flag && !sp.carried && !sp.guard && !sp.slot_x) {
        // An intra pair of a loop body reuses its id every iteration: its next set must follow
        // this wait. Without a chain of unconditional pairs around the loop that orders them (the
        // reverse dependence may sit in an `if` the next iterations skip), the pairs p -> q of
        // the body share one guard q -> p before the first of their sets (which stay there).
        int F = sp.C;
        if (blocks_[F].owner >= 0 && nodes_[blocks_[F].owner].kind == StmtKind::For) {
          int nF = static_cast<int>(blocks_[F].kids.size());
          bool ordered = reaches2(F, wq, wait_end(sp), sp.p, set_end(sp, nF)) ||
                         (sp.relay && reaches2(F, sp.q, wait_end(sp), sp.p, set_end(sp, nF)));
          if (!ordered && flag_pair_legal(core_, wq, sp.p)) {
            add_body_guard(F, wq, sp.p, sp.s);
            out.push_back(sp);
            out.back().guarded = true;
            continue;
          }
        }
      }
      out.push_back(sp);
    }
    std::vector<SyncPair> guards;
    for (const auto& [key, slot] : body_guard) {
      SyncPair g;
      g.p = std::get<1>(key), g.q = std::get<2>(key);
      g.C = std::get<0>(key), g.s = g.w = slot;
      g.guard = g.body_guard = true;
      guards.push_back(g);
    }
    out.insert(out.begin(), guards.begin(), guards.end());
    pairs_ = std::move(out);
    pairs_changed();
  }

  // Two iterations of block C's loop (slots n.. are the next iteration's): is pipe q, past the
  // waits at slot w, ordered before pipe p reaches the sets at slot s by flag pairs placed
  // unconditionally in C (intra pairs in both iterations, carried ones from the first into the
  // second)?
  bool reaches2(int C, Pipe q, End w, Pipe p, End s) const {
    for (const auto& [x, t] : reached(C, q, w, Walk::Twice))
      if (x == p && wait_before_set(t, s)) return true;
    return false;
  }

  // Where a pair's set / wait sits, seen from block B that contains its block: (set, wait) for
  // reaches(): in B itself its Ends; inside kid k of B: the set after the waits of slot k (k + 1),
  // the wait before the sets of slot k + 1 (k), both inside kid k (moved).
  std::pair<End, End> lifted(const SyncPair& sp, int B) const {
    if (sp.C == B) return {set_end(sp), wait_end(sp)};
    int blk = sp.C, k = -1;
    while (blk != B) {
      int o = blocks_[blk].owner;
      k = nodes_[o].index;
      blk = nodes_[o].block;
    }
    return {End{k + 1, true, ix(sp)}, End{k, true, ix(sp)}};
  }
  int lca_block(int x, int y) const {
    for (int b = x; b >= 0;) {
      if (block_contains(b, y)) return b;
      int o = blocks_[b].owner;
      if (o < 0) break;
      b = nodes_[o].block;
    }
    return root_;
  }
  int loop_body_around(int b) const {  // the nearest For body containing block b (or -1)
    while (b >= 0) {
      int o = blocks_[b].owner;
      if (o < 0) return -1;
      if (nodes_[o].kind == StmtKind::For) return b;
      b = nodes_[o].block;
    }
    return -1;
  }
  // May intra pairs x and y of one pipe pair share an event id? Their uses must alternate: in
  // the lowest block holding both, one's wait precedes the other's set and is ordered before it
  // (reaches), and around the nearest enclosing loop the second's wait is ordered before the
  // first's set in the next iteration.
  bool may_share(const SyncPair& x, const SyncPair& y) const {
    if (x.carried || y.carried) return x.carried != y.carried && may_share_carried(x.carried ? x : y, x.carried ? y : x);
    int B = lca_block(x.C, y.C);
    auto [sx, wx] = lifted(x, B);
    auto [sy, wy] = lifted(y, B);
    const SyncPair *first = &x, *second = &y;
    End w1 = wx, s2 = sy;
    if (!wait_before_set(wx, sy)) {
      if (!wait_before_set(wy, sx)) return false;
      first = &y, second = &x, w1 = wy, s2 = sx;
    }
    if (!reaches(B, x.q, w1, x.p, s2)) return false;
    int F = loop_body_around(B);
    if (F < 0) return true;
    int n = static_cast<int>(blocks_[F].kids.size());
    End s1f = lifted(*first, F).first, w2f = lifted(*second, F).second;
    s1f.slot += n;
    return reaches2(F, x.q, w2f, x.p, s1f);
  }

  // May carried pair k (set at slot s of loop body C, waited in the next iteration) share its id
  // with intra pair x of the same body? Per iteration the id is then used as: k's wait (of the
  // previous iteration's set, or of the set before the loop), x's set, x's wait, k's set, which
  // alternate when chains of flag pairs placed unconditionally in C order the waiting pipe past
  // k's wait before the setting pipe reaches x's set, and past x's wait before it reaches k's set.
  // (multi_buffer's unrolled bodies: the MTE1 -> MTE2 pair that frees L1 copy c for step st + S
  // of the same body and the carried one that frees it for step st of the next body.) The set
  // before the loop is waited at k's first wait, the last set at the drain after the loop.
  bool may_share_carried(const SyncPair& k, const SyncPair& x) const {
    if (k.C != x.C || k.guarded || x.guarded || k.hoist < 0) return false;
    int n = static_cast<int>(blocks_[k.C].kids.size());
    End kw{k.w - n, wait_sinks(k), ix(k)};
    return wait_before_set(wait_end(x), set_end(k)) && reaches(k.C, x.q, wait_end(x), x.p, set_end(k)) &&
           wait_before_set(kw, set_end(x)) && reaches(k.C, x.q, kw, x.p, set_end(x));
  }

  // Event ids: every pair of one pipe pair gets its own ids (slotted pairs m consecutive ones),
  // except intra pairs whose uses provably alternate (may_share), which share one. Otherwise an
  // id is only reused by the same pair in later iterations, where the reverse dependence
  // (b(i) -> a(i+1), or a(i+m) for slotted pairs) orders the next set after the previous wait;
  // two different pairs sharing an id could see the second set fire before the first wait.
  // Relays are coloured last (their second flags r -> q; relays of one r -> q waited at the same
  // places share one); a relay whose second flag finds no id gives its first one back (colour()
  // again). Pairs that do not fit become PIPE_ALL at their wait point; the pipe pair reported as
  // failed (for the covering retry) is the one whose ids ran out.
  int depth(const SyncPair& sp) const {  // loops around the pair's block
    int d = 0;
    for (int b = sp.C; b >= 0 && blocks_[b].owner >= 0; b = nodes_[blocks_[b].owner].block)
      d += nodes_[blocks_[b].owner].kind == StmtKind::For;
    return d;
  }
  // The PIPE_ALLs of a colouring, counted per loop depth, deepest first (compared as a vector:
  // one in a loop body costs more than any number outside it).
  std::vector<int> alls(const std::vector<SyncPair>& ps) const {
    std::vector<int> n(8, 0);
    for (const SyncPair& sp : ps)
      if (sp.kind == SyncPair::All) ++n[7 - std::min(depth(sp), 7)];
    return n;
  }

  // Pairs are coloured in placement order; when some do not fit, once more with the pairs of
  // deeper loops first (a pair after a loop, taking an id first, can leave a pair of the loop
  // body, which runs every iteration, without one), keeping the colouring with fewer PIPE_ALLs.
  std::set<std::pair<Pipe, Pipe>> colour() {
    std::vector<int> order(pairs_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    const std::vector<SyncPair> saved = pairs_;
    std::set<std::pair<Pipe, Pipe>> failed = colour(order);
    if (failed.empty()) return failed;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return depth(saved[x]) > depth(saved[y]); });
    std::vector<SyncPair> first = std::move(pairs_);
    pairs_ = saved;
    std::set<std::pair<Pipe, Pipe>> again = colour(order);
    if (alls(pairs_) < alls(first)) return again;
    pairs_ = std::move(first);
    return failed;
  }
  // A relayed pair whose second flag r -> q finds no id (pass 1) is a PIPE_ALL; its first flag's
  // id p -> r is then given to other pairs: the colouring is done again with that pair a PIPE_ALL
  // from the start (at most once per relayed pair).
  std::set<std::pair<Pipe, Pipe>> colour(const std::vector<int>& order) {
    const std::vector<SyncPair> saved = pairs_;
    std::set<int> no_relay;
    for (;;) {
      std::set<std::pair<Pipe, Pipe>> failed;
      size_t before = no_relay.size();
      colour(order, no_relay, failed);
      if (no_relay.size() == before) return failed;
      pairs_ = saved;
    }
  }
  void colour(const std::vector<int>& order, std::set<int>& no_relay, std::set<std::pair<Pipe, Pipe>>& failed) {
    std::map<std::pair<Pipe, Pipe>, int> next;
    std::map<std::pair<Pipe, Pipe>, std::vector<std::vector<int>>> groups;  // shareable ids: id -> pairs
    std::map<std::pair<Pipe, Pipe>, std::vector<int>> group_id;
    auto take = [&](Pipe p, Pipe q, int64_t m) {
      int& n = next[{p, q}];
      if (n + m > event_ids_) return -1;
      int b = n;
      n += static_cast<int>(m);
      return b;
    };
    // relayed pairs of one relay r -> q waited at the same places share their second flag: r waits
    // every p_r there, then sets r_q once, and q waits it once (emit())
    std::map<std::tuple<Pipe, Pipe, std::vector<std::pair<int, int>>>, int> relay_at;
    for (int pass = 0; pass < 2; ++pass)
      for (int i : order) {
        SyncPair& sp = pairs_[i];
        if (sp.kind != SyncPair::Flag || (pass == 1 && !sp.relay)) continue;
        bool shareable = pass == 0 && !sp.relay && !sp.guard && !sp.slot_x;
        int b = -1;
        if (shareable) {
          auto& gs = groups[{sp.p, sp.q}];
          for (size_t g = 0; g < gs.size() && b < 0; ++g) {
            bool ok = true;
            for (int j : gs[g]) ok = ok && may_share(pairs_[j], sp);
            if (ok) b = group_id[{sp.p, sp.q}][g], gs[g].push_back(static_cast<int>(i));
          }
        }
        if (b < 0 && !no_relay.count(i) && pass == 0) {
          b = take(sp.p, sp.relay ? sp.r : sp.q, sp.m);
          if (b >= 0 && shareable) {
            groups[{sp.p, sp.q}].push_back({static_cast<int>(i)});
            group_id[{sp.p, sp.q}].push_back(b);
          }
        } else if (b < 0 && pass == 1) {
          auto key = std::make_tuple(sp.r, sp.q, wait_places_of(sp));
          auto it = relay_at.find(key);
          if (it != relay_at.end()) b = it->second;
          else if ((b = take(sp.r, sp.q, 1)) >= 0) relay_at[key] = b;
        }
        if (b < 0) {
          int n = static_cast<int>(blocks_[sp.C].kids.size());
          // the pipe pair whose ids ran out: a relay's second flag is r -> q
          bool second = pass == 1 || no_relay.count(i);
          failed.insert(second ? std::make_pair(sp.r, sp.q) : std::make_pair(sp.p, sp.relay ? sp.r : sp.q));
          if (pass == 1) no_relay.insert(i);
          sp.kind = SyncPair::All;
          if (sp.carried) sp.w -= n;
          sp.places.clear();
          continue;
        }
        (pass == 0 ? sp.id : sp.relay_id) = b;
      }
  }

  // -------------------------------------------------------------------------------------------
  // Emission

  struct SlotItems {
    std::vector<StmtPtr> sets, drains, presets, barriers, waits;
  };

  Expr event(const SyncPair& sp) const {
    if (!sp.slot_x) return ir::int_imm(sp.id, ir::DTypeCode::i32);
    Expr e = ir::binary(ir::BinOp::Mod, sp.slot_x, ir::int_imm(sp.m, sp.slot_x->dtype));
    if (sp.id) e = ir::binary(ir::BinOp::Add, ir::int_imm(sp.id, e->dtype), e);
    return e;
  }

  // Where a pair's set goes (branch_places); a guarded carried pair's set (and its guard) rises
  // only when its wait in the iteration is due before an earlier kid than the one it rises into.
  const std::vector<std::pair<int, int>>& set_places_of(const SyncPair& sp) const {
    if (sp.places.set) return *sp.places.set;
    std::vector<std::pair<int, int>> places;
    int n = static_cast<int>(blocks_[sp.C].kids.size());
    if (sp.kind != SyncPair::Flag || sp.guard || (sp.guarded && (!sp.carried || !(sp.w - n < sp.s - 1))))
      places.emplace_back(sp.C, sp.s);
    else
      branch_places(sp.C, sp.s, sp.as, sp.p, /*wait=*/false, places);
    return *(sp.places.set = std::move(places));
  }

  StmtPtr emit(int root) {
    std::map<std::pair<int, int>, SlotItems> at;
    // A PIPE_ALL at slot w of block C (a pair without an id) finishes every pipe's earlier work:
    // an intra pair of C set at a slot <= w and waited right at w (not sunk into an `if`) orders
    // nothing more, and is left out (its set, its wait and its relay).
    std::set<std::pair<int, int>> all_at, all_done;
    std::map<std::tuple<int, int, Pipe, Pipe, int>, StmtPtr> relay_set;  // (block, slot, r, q, id) -> its SetFlag
    for (const SyncPair& sp : pairs_)
      if (sp.kind == SyncPair::All && !sp.guard) all_at.insert({sp.C, sp.w});
    for (size_t i = 0; i < pairs_.size(); ++i) {
      const SyncPair& sp = pairs_[i];
      if (sp.kind == SyncPair::Flag && !sp.carried && !sp.guard && sp.s <= sp.w && all_at.count({sp.C, sp.w}) &&
          !wait_sinks(sp))
        continue;
      if (sp.kind == SyncPair::Barrier) {
        at[{sp.C, sp.w}].barriers.push_back(instr(PipeBarrier{sp.p}, sp.wait_span));
        continue;
      }
      // a guard goes right before its carried pair's set (pushed next to it by guard_carried); one
      // that ran out of ids is a PIPE_ALL there (before the set it orders)
      const SyncPair& owner = sp.guard && !sp.body_guard && i + 1 < pairs_.size() ? pairs_[i + 1] : sp;
      if (sp.kind == SyncPair::All && sp.guard) {
        for (auto [blk, slot] : set_places_of(owner))
          at[{blk, slot}].sets.push_back(instr(PipeBarrier{Pipe::ALL}, sp.wait_span));
        continue;
      }
      if (sp.kind == SyncPair::All) {  // one PIPE_ALL per slot orders all the pairs waited there
        if (all_done.insert({sp.C, sp.w}).second) at[{sp.C, sp.w}].barriers.push_back(instr(PipeBarrier{Pipe::ALL}, sp.wait_span));
        continue;
      }
      int n = static_cast<int>(blocks_[sp.C].kids.size());
      int w = sp.carried ? sp.w - n : sp.w;
      Pipe dst = sp.relay ? sp.r : sp.q;
      Expr ev = event(sp);
      for (auto [blk, slot] : set_places_of(owner)) {
        at[{blk, slot}].sets.push_back(instr(SetFlag{sp.p, dst, ev}, sp.set_span));
        if (sp.guard) at[{blk, slot}].sets.push_back(instr(WaitFlag{sp.p, dst, ev}, sp.wait_span));
      }
      if (sp.guard) continue;
      std::vector<std::pair<int, int>> places;
      branch_places(sp.C, w, sp.bs, sp.relay ? sp.r : sp.q, /*wait=*/true, places);
      for (auto [blk, slot] : places) {
        auto& waits = at[{blk, slot}].waits;
        StmtPtr wait = instr(WaitFlag{sp.p, dst, ev}, sp.wait_span);
        if (!sp.relay) {
          waits.push_back(wait);
          continue;
        }
        // a relay r -> q already set and waited here (the same id, colour()): this p_r wait goes
        // before its set
        auto [it, fresh] = relay_set.try_emplace(std::make_tuple(blk, slot, sp.r, sp.q, sp.relay_id), nullptr);
        if (!fresh) {
          waits.insert(std::find(waits.begin(), waits.end(), it->second), wait);
          continue;
        }
        Expr rid = ir::int_imm(sp.relay_id, ir::DTypeCode::i32);
        waits.push_back(wait);
        waits.push_back(it->second = instr(SetFlag{sp.r, sp.q, rid}, sp.wait_span));
        waits.push_back(instr(WaitFlag{sp.r, sp.q, rid}, sp.wait_span));
      }
      if (sp.carried) {
        const Node& h = nodes_[sp.hoist];
        for (int64_t k = 0; k < sp.m; ++k) {
          Expr e = ir::int_imm(sp.id + k, ir::DTypeCode::i32);
          at[{h.block, h.index}].presets.push_back(instr(SetFlag{sp.p, dst, e}, sp.hoist_span));
          at[{h.block, h.index + 1}].drains.push_back(instr(WaitFlag{sp.p, dst, e}, sp.hoist_span));
        }
      }
    }
    return emit_block(root, at);
  }

  // Where a wait due at slot w of block C goes (wait = true): when kid w is an `if` (it holds the
  // first of the instructions `ins` it orders), into each branch instead: before the first of them
  // in that branch (recursively), or at the end of a branch holding none. Exactly one wait runs on
  // every path, still before every instruction of `ins`, and the branch not needing it is not held up.
  // Where a set due at slot s of block C goes (wait = false), the mirror image: when kid s - 1 is
  // an `if` (it holds the last of the instructions `ins` the set follows), into each branch: after
  // the last of them in that branch (recursively), or at the start of a branch with none. One set
  // on every path, still after all of `ins`.
  // Either moves only when the pipe has work in the branches it would otherwise hold back.
  void branch_places(int C, int slot, const std::vector<int>& ins, Pipe pipe, bool wait,
                     std::vector<std::pair<int, int>>& out) const {
    const auto& kids = blocks_[C].kids;
    int k = wait ? slot : slot - 1;  // the kid that may be an `if`
    if (k < 0 || k >= static_cast<int>(kids.size()) || nodes_[kids[k]].kind != StmtKind::If) {
      out.emplace_back(C, slot);
      return;
    }
    const Node& f = nodes_[kids[k]];
    std::vector<std::pair<int, int>> moved;
    bool helps = false;
    for (int br : {f.body, f.else_body}) {
      std::vector<int> in;
      int edge = wait ? INT_MAX : -1;  // the first (wait) / last (set) kid of br holding one of `ins`
      for (int i : ins)
        if (block_contains(br, nodes_[i].block)) {
          in.push_back(i);
          for (auto [blk, idx] : chain(i))
            if (blk == br) edge = wait ? std::min(edge, idx) : std::max(edge, idx);
        }
      int n = static_cast<int>(blocks_[br].kids.size());
      if (in.empty()) {
        moved.emplace_back(br, wait ? n : 0);
        helps = helps || has_pipe(br, 0, n, pipe);
      } else {
        int at = wait ? edge : edge + 1;
        size_t mark = moved.size();
        branch_places(br, at, in, pipe, wait, moved);
        helps = helps || (wait ? has_pipe(br, 0, at, pipe) : has_pipe(br, at, n, pipe)) || moved.size() != mark + 1 ||
                moved[mark] != std::make_pair(br, at);
      }
    }
    if (helps) out.insert(out.end(), moved.begin(), moved.end());
    else out.emplace_back(C, slot);
  }

  StmtPtr emit_block(int b, std::map<std::pair<int, int>, SlotItems>& at) {
    const Block& bl = blocks_[b];
    std::vector<StmtPtr> out;
    for (size_t k = 0; k <= bl.kids.size(); ++k) {
      auto it = at.find({b, static_cast<int>(k)});
      if (it != at.end()) {
        for (auto* v : {&it->second.sets, &it->second.drains, &it->second.presets, &it->second.barriers,
                        &it->second.waits})
          out.insert(out.end(), v->begin(), v->end());
      }
      if (k == bl.kids.size()) break;
      const Node& n = nodes_[bl.kids[k]];
      switch (n.kind) {
        case StmtKind::For:
          out.push_back(for_(n.stmt->var, n.stmt->value, emit_block(n.body, at), n.stmt->span));
          break;
        case StmtKind::If: {
          StmtPtr els = blocks_[n.else_body].kids.empty() && !has_items(n.else_body, at) ? nullptr
                                                                                          : emit_block(n.else_body, at);
          out.push_back(if_(n.stmt->value, emit_block(n.body, at), els, n.stmt->span));
          break;
        }
        case StmtKind::Seq: case StmtKind::Let: case StmtKind::Instr:
          out.push_back(n.stmt);
          break;
      }
    }
    return seq(std::move(out));
  }
  bool has_items(int b, const std::map<std::pair<int, int>, SlotItems>& at) const {
    auto it = at.lower_bound({b, 0});
    return it != at.end() && it->first.first == b;
  }
};

// GM spaces that another core also accesses (and someone writes): what cross-core flags order.
void gm_spaces(const Program& p, const StmtPtr& s, std::set<int>& touched, std::set<int>& written, bool& mode01) {
  if (!s) return;
  for (const auto& c : s->body) gm_spaces(p, c, touched, written, mode01);
  if (s->else_body) gm_spaces(p, s->else_body, touched, written, mode01);
  if (s->kind != StmtKind::Instr) return;
  if (auto* f = std::get_if<CrossCoreSetFlag>(&s->instr.op)) mode01 = mode01 || f->mode != 2;
  std::vector<Access> acc;
  Env env;
  AccessBuilder{p, env, acc}.build(s->instr.op);
  for (const Access& a : acc)
    if (is_gm(a.space)) {
      touched.insert(a.space);
      if (a.mode == Mode::Write) written.insert(a.space);
    }
}

// Mmads accumulating into one L0C need PipeBarrier<PIPE_M> between them when
// ceil(m/16) * ceil(n/16) < 10 (Mmad docs; the Cube does not keep such short accumulation chains
// in order). Before every Mmad that may accumulate (init not the constant true) and may be that
// small: `if (!init && ceil(m/16) * ceil(n/16) < 10) PipeBarrier<PIPE_M>()`, the parts known at
// compile time folded away.
StmtPtr mmad_barriers(const StmtPtr& s) {
  if (!s) return s;
  if (s->kind == StmtKind::Instr) {
    auto* m = std::get_if<Mmad>(&s->instr.op);
    if (!m) return s;
    auto init = ir::as_const_int(m->init);
    if (init && *init != 0) return s;
    auto cm = ir::as_const_int(m->m), cn = ir::as_const_int(m->n);
    if (cm && cn && ((*cm + 15) / 16) * ((*cn + 15) / 16) >= 10) return s;
    using ir::BinOp;
    auto frac = [](const ir::Expr& e) { return ir::binary(BinOp::CeilDiv, e, ir::int_imm(16)); };
    ir::Expr cond;
    if (!(cm && cn)) cond = ir::binary(BinOp::LT, ir::binary(BinOp::Mul, frac(m->m), frac(m->n)), ir::int_imm(10));
    if (!init) {
      ir::Expr acc = ir::unary(ir::UnOp::Not, m->init);
      cond = cond ? ir::binary(BinOp::And, acc, cond) : acc;
    }
    StmtPtr bar = instr(PipeBarrier{Pipe::M}, s->instr.span);
    return seq({cond ? if_(cond, bar, nullptr, s->span) : bar, s}, s->span);
  }
  auto c = std::make_shared<Stmt>(*s);
  for (auto& b : c->body) b = mmad_barriers(b);
  c->else_body = mmad_barriers(s->else_body);
  return c;
}

}  // namespace

Program insert_sync(const Program& program, const target::Target& target) {
  Program out = program;
  const int event_ids = target.ascend.flag_event_ids - kReservedEventIds;
  std::set<int> t_aic, t_aiv, written;
  bool mode01 = false;
  gm_spaces(program, program.aic, t_aic, written, mode01);
  gm_spaces(program, program.aiv, t_aiv, written, mode01);
  auto shared_for = [&](const std::set<int>& mine, const std::set<int>& other) {
    std::set<int> s;
    for (int x : mine)
      if (written.count(x) && (other.count(x) || mode01)) s.insert(x);
    return s;
  };
  auto sh_aic = shared_for(t_aic, t_aiv), sh_aiv = shared_for(t_aiv, t_aic);
  std::optional<CoreSync> aic, aiv;
  std::map<int64_t, Iv> regions;
  std::set<int64_t> whole;
  if (program.aic) aic.emplace(program, CoreType::AIC, sh_aic, event_ids), aic->build_tree(program.aic), aic->flag_regions(regions, whole);
  if (program.aiv) aiv.emplace(program, CoreType::AIV, sh_aiv, event_ids), aiv->build_tree(program.aiv), aiv->flag_regions(regions, whole);
  if (aic) out.aic = mmad_barriers(aic->finish(regions, whole));
  if (aiv) out.aiv = aiv->finish(regions, whole);
  return out;
}

}  // namespace tw::ascend
