// plan_memory: static buffer placement with liveness-based reuse. The rules are in plan_memory.h.
#include "target/ascend/plan_memory.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/program_access.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ir/functor.h"

namespace tw::ascend {

int64_t buffer_alignment(Mem m) {
  switch (m) {
    case Mem::L0A: case Mem::L0B: return 512;
    case Mem::L0C: return 1024;  // 64 B in general, 1 KiB as an Mmad destination (every L0C tile is one)
    case Mem::GM: case Mem::L1: case Mem::UB: return 32;
  }
  return 32;
}

namespace {


}  // namespace

std::pair<int64_t, int64_t> fractal_dims(Mem m, ir::DType t, int64_t rows, int64_t cols) {
  int64_t c0 = c0_of(t);
  switch (m) {
    case Mem::L0B: return {round_up(rows, c0), round_up(cols, 16)};  // Zn
    case Mem::L0C: return {round_up(rows, 16), round_up(cols, 16)};  // Nz of 16x16 fractals
    case Mem::GM: case Mem::L1: case Mem::L0A: case Mem::UB: break;  // L1 (Nz), L0A (Zz)
  }
  return {round_up(rows, 16), round_up(cols, c0)};
}

int64_t tile_bytes(Mem m, ir::DType t, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  if (m == Mem::UB) {  // rows padded to whole 32 B blocks when there are several (select_instructions's layout)
    int64_t cols = shape.empty() ? 1 : shape.back(), nrows = cols ? numel / cols : 0;
    return round_up(nrows * (nrows > 1 ? round_up(cols, c0_of(t)) : cols) * t.bytes(), 32);
  }
  if (shape.size() < 2) return round_up(numel * t.bytes(), 32);
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  auto [prows, pcols] = fractal_dims(m, t, rows, cols);
  return prows * pcols * t.bytes() * (numel / (rows * cols));
}

namespace {

using ir::Expr;

// ---- accesses of one instruction (program_access) ----

// Upper bound of a non-negative count expression: constants, min with a bounded side, sums,
// products, max and divisions of bounded values.
std::optional<int64_t> upper_bound(const Expr& e) {
  if (!e) return std::nullopt;
  if (auto c = ir::as_const_int(e)) return *c;
  if (e->kind == ir::ExprKind::Cast) return upper_bound(ir::as<ir::CastNode>(e)->value);
  if (e->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = ir::as<ir::BinaryNode>(e);
  auto x = upper_bound(b->a), y = upper_bound(b->b);
  if (b->op == ir::BinOp::Min) {
    if (x && y) return std::min(*x, *y);
    return x ? x : y;
  }
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case ir::BinOp::Add: return *x + *y;
    case ir::BinOp::Mul: return *x * *y;
    case ir::BinOp::Max: return std::max(*x, *y);
    case ir::BinOp::FloorDiv: {
      auto d = ir::as_const_int(b->b);
      return d && *d > 0 ? std::optional<int64_t>(*x / *d) : std::nullopt;
    }
    case ir::BinOp::CeilDiv: {
      auto d = ir::as_const_int(b->b);
      return d && *d > 0 ? std::optional<int64_t>((*x + *d - 1) / *d) : std::nullopt;
    }
    case ir::BinOp::Min:  // above
    case ir::BinOp::Sub: case ir::BinOp::Div: case ir::BinOp::Mod: case ir::BinOp::EQ: case ir::BinOp::NE:
    case ir::BinOp::LT: case ir::BinOp::LE: case ir::BinOp::GT: case ir::BinOp::GE: case ir::BinOp::And:
    case ir::BinOp::Or:
    case ir::BinOp::BitAnd: case ir::BinOp::BitOr: case ir::BinOp::BitXor: case ir::BinOp::Shl: case ir::BinOp::Shr: return std::nullopt;
  }
  return std::nullopt;
}

// plan_memory runs before select_vector_calls: a call-level vector instruction here is a pipeline bug.
void reject_call_level_vector(const InstrOp& op) {
  if (std::holds_alternative<VecCallL2>(op) || std::holds_alternative<VecCallL0>(op) ||
      std::holds_alternative<WholeReduce>(op) || std::holds_alternative<Brcb>(op))
    throw ir::Error("internal: plan_memory met " + std::string(instr_name(op)) +
                    ", which select_vector_calls makes after it");
}

// ---- lifetimes ----

// One access of a buffer at a position of its core's code.
struct Access {
  int pos = 0;
  bool write = false;
  int if_loops = 0;  // loops enclosing the innermost `if` around the access (0: none or outside all loops)
  // The conditional regions around the access, outermost first: (region id, loops enclosing it).
  // A region is one branch of an `if` or the body of a loop that may run no iteration.
  std::vector<std::pair<int, int>> guards;
  std::optional<int64_t> offset, extent;  // constant byte offset, upper bound of bytes
};

struct Loop {
  int first = 0, end = 0;  // positions [first, end) of its instructions
  int depth = 0;           // loops enclosing it
};

struct Lifetime {
  int lo = 0, hi = -1;  // inclusive positions; hi < lo: never accessed
  bool empty() const { return hi < lo; }
  bool intersects(const Lifetime& o) const { return !empty() && !o.empty() && lo <= o.hi && o.lo <= hi; }
};

// Numbers the instructions of one core's code and records every buffer access and loop.
class Walker {
 public:
  explicit Walker(const Program& program) : accesses(program.buffers.size()), program_(&program) {}

  std::vector<std::vector<Access>> accesses;  // per buffer, in program order
  std::vector<Loop> loops;                    // innermost first (post-order)
  std::vector<ir::Span> spans;                // per position
  int positions = 0;

  void walk(const StmtPtr& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& b : s->body) walk(b);
        break;
      case StmtKind::For: {
        // A loop that may run no iteration is conditional for the loops around it, like an `if`.
        int saved = if_loops_;
        auto extent = ir::as_const_int(s->value);
        bool maybe_empty = !extent || *extent <= 0;
        if (maybe_empty) if_loops_ = depth_, guards_.push_back({next_region_++, depth_});
        Loop l{positions, 0, depth_};
        ++depth_;
        for (const auto& b : s->body) walk(b);
        --depth_;
        if (maybe_empty) guards_.pop_back();
        if_loops_ = saved;
        l.end = positions;
        if (l.end > l.first) loops.push_back(l);
        break;
      }
      case StmtKind::If: {
        int saved = if_loops_;
        if_loops_ = depth_;
        guards_.push_back({next_region_++, depth_});
        for (const auto& b : s->body) walk(b);
        guards_.back().first = next_region_++;
        walk(s->else_body);
        guards_.pop_back();
        if_loops_ = saved;
        break;
      }
      case StmtKind::Let: break;
      case StmtKind::Instr: {
        int pos = positions++;
        spans.push_back(s->instr.span.known() ? s->instr.span : s->span);
        reject_call_level_vector(s->instr.op);
        for (const Region& r : program_access(*program_, s->instr.op).regions) {
          if (r.buffer < 0 || r.buffer >= static_cast<int>(accesses.size())) continue;
          bool write = r.mode == AccessMode::Write;
          Access a{pos, write, if_loops_, guards_, std::nullopt, std::nullopt};
          // constant byte offset, upper bound of the bytes covered (a write) or read (a read)
          auto off = ir::as_const_int(r.offset), start = ir::as_const_int(r.start);
          if (off && start) a.offset = *off + *start;
          a.extent = evaluate(r, upper_bound).bytes;
          accesses[r.buffer].push_back(a);
        }
        break;
      }
    }
  }

 private:
  const Program* program_;
  int depth_ = 0;
  int if_loops_ = 0;
  int next_region_ = 0;
  std::vector<std::pair<int, int>> guards_;
};

// The conditional regions of an access that lie inside a loop enclosed by `depth` loops.
std::vector<int> regions_inside(const Access& a, int depth) {
  std::vector<int> r;
  for (auto [id, d] : a.guards)
    if (d > depth) r.push_back(id);
  return r;
}

// True when some read of the buffer in loop l may read a value of the previous iteration: the
// writes before it in the iteration that run whenever the read runs (not under an `if` or a
// possibly empty loop inside l that does not also enclose the read) do not cover the bytes it
// reads: [offset, offset + extent) for a read at a constant offset (one slot of a stage-indexed
// tile whose stages the unrolled loop addresses by constants) when `slots`, else all of [0, need).
bool carried(const std::vector<Access>& acc, const Loop& l, int64_t need, bool slots) {
  auto covers = [&](std::vector<std::pair<int64_t, int64_t>> covered, int64_t lo, int64_t hi) {
    std::sort(covered.begin(), covered.end());
    int64_t upto = lo;
    for (auto [a, b] : covered) {
      if (b <= upto) continue;
      if (a > upto) return false;
      upto = b;
    }
    return upto >= hi;
  };
  for (size_t r = 0; r < acc.size(); ++r) {
    const Access& a = acc[r];
    if (a.pos < l.first || a.pos >= l.end || a.write) continue;
    const bool slot = slots && a.offset && a.extent && *a.extent > 0;
    const int64_t lo = slot ? *a.offset : 0, hi = slot ? *a.offset + *a.extent : need;
    std::vector<int> rg = regions_inside(a, l.depth);
    std::vector<std::pair<int64_t, int64_t>> covered;
    for (size_t w = 0; w < r; ++w) {
      const Access& x = acc[w];
      if (x.pos < l.first || !x.write || !x.offset || !x.extent) continue;
      std::vector<int> wg = regions_inside(x, l.depth);  // must be a prefix of the read's regions
      if (wg.size() > rg.size() || !std::equal(wg.begin(), wg.end(), rg.begin())) continue;
      covered.push_back({*x.offset, *x.offset + *x.extent});
    }
    if (!covers(covered, lo, hi)) return true;
  }
  return false;
}

Lifetime lifetime(const std::vector<Access>& acc, const std::vector<Loop>& loops, int64_t need, bool slots) {
  Lifetime t;
  if (acc.empty()) return t;
  t.lo = acc.front().pos;
  t.hi = acc.back().pos;
  for (const Loop& l : loops) {  // innermost first
    bool inside = std::any_of(acc.begin(), acc.end(), [&](const Access& a) { return a.pos >= l.first && a.pos < l.end; });
    if (!inside) continue;
    if (t.lo < l.first || t.hi >= l.end || carried(acc, l, need, slots)) {
      t.lo = std::min(t.lo, l.first);
      t.hi = std::max(t.hi, l.end - 1);
    }
  }
  return t;
}

// ---- placement ----

struct Item {
  int buffer = -1;  // index into Program::buffers
  int64_t bytes = 0;
  Lifetime life;
};

// First fit of items in the given order; returns the offsets (per item) and the bytes used.
int64_t first_fit(const std::vector<Item>& items, const std::vector<size_t>& order, int64_t align,
                  std::vector<int64_t>& offsets) {
  offsets.assign(items.size(), 0);
  std::vector<size_t> placed;
  int64_t used = 0;
  for (size_t i : order) {
    const Item& it = items[i];
    if (it.life.empty()) continue;  // never accessed: takes no bytes
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (items[j].life.intersects(it.life)) busy.push_back({offsets[j], offsets[j] + items[j].bytes});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [a, b] : busy) {
      if (b <= off) continue;
      if (off + it.bytes <= a) break;
      off = round_up(b, align);
    }
    offsets[i] = off;
    used = std::max(used, off + it.bytes);
    placed.push_back(i);
  }
  return used;
}

// Places the items: bump allocation in declaration order (no reuse), or first fit by size and
// by first use (reuse), keeping the smaller.
int64_t place(const std::vector<Item>& items, int64_t align, bool reuse, std::vector<int64_t>& offsets) {
  offsets.assign(items.size(), 0);
  if (!reuse) {
    int64_t used = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      offsets[i] = round_up(used, align);
      used = offsets[i] + items[i].bytes;
    }
    return used;
  }
  std::vector<size_t> by_size(items.size());
  for (size_t i = 0; i < items.size(); ++i) by_size[i] = i;
  std::vector<size_t> by_start = by_size;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    if (items[a].bytes != items[b].bytes) return items[a].bytes > items[b].bytes;
    return items[a].life.lo < items[b].life.lo;
  });
  std::stable_sort(by_start.begin(), by_start.end(), [&](size_t a, size_t b) { return items[a].life.lo < items[b].life.lo; });
  int64_t used = first_fit(items, by_size, align, offsets);
  std::vector<int64_t> other;
  int64_t used2 = first_fit(items, by_start, align, other);
  if (used2 < used) {
    offsets = other;
    used = used2;
  }
  return used;
}

std::string shape_str(const std::vector<int64_t>& sh) {
  std::string s;
  for (size_t i = 0; i < sh.size(); ++i) s += (i ? "x" : "") + std::to_string(sh[i]);
  return s;
}

// The shape of one copy of a staged buffer (multi_buffer's leading dim dropped), as the kernel wrote it.
std::vector<int64_t> tile_shape(const BufferDecl& d, std::vector<int64_t> sh) {
  if (d.stages > 0 && sh.size() > 1) sh.erase(sh.begin());
  return sh;
}

// The shape sh (tile_shape) of buffer d as the kernel declares its tile: a tile split_cube_vector
// made of a user tile (BufferDecl::part_of) with each AIV's part of its rows holds rows / parts of them.
std::vector<int64_t> user_shape(const BufferDecl& d, std::vector<int64_t> sh) {
  if (!d.part_of.tile.empty() && !sh.empty()) sh[0] *= d.part_of.row_parts;
  return sh;
}

// The capacity error of memory m: the buffers live together at the peak, the bytes needed, the
// capacity, and as hint smaller tiles that fit: the kernel's dims that change together (dims) halved,
// one class of them at a time first (see below).
[[noreturn]] void capacity_error(const Program& p, const target::Target& target, Mem m, const std::vector<Item>& items,
                                 int64_t used, bool reuse, const std::vector<ir::Span>& spans, const TileDims* dims,
                                 const std::vector<std::pair<Mem, std::vector<Item>>>& others) {
  int64_t cap = usable_bytes(p, target.ascend, m), align = buffer_alignment(m);
  // The peak: the position where the live buffers' aligned bytes add up to the most (without
  // reuse every buffer is live throughout).
  std::vector<size_t> live;
  int peak_pos = -1;
  if (!reuse) {
    for (size_t i = 0; i < items.size(); ++i) live.push_back(i);
  } else {
    int64_t best = -1;
    for (int pos = 0; pos < static_cast<int>(spans.size()); ++pos) {
      int64_t sum = 0;
      for (const Item& it : items)
        if (!it.life.empty() && it.life.lo <= pos && pos <= it.life.hi) sum += round_up(it.bytes, align);
      if (sum > best) best = sum, peak_pos = pos;
    }
    for (size_t i = 0; i < items.size(); ++i)
      if (!items[i].life.empty() && items[i].life.lo <= peak_pos && peak_pos <= items[i].life.hi) live.push_back(i);
  }
  // The kernel's own buffers by name; compiler temporaries (BufferDecl::temp_of) are not named:
  // their bytes are counted with the buffer they serve.
  std::vector<std::string> owners;
  std::map<std::string, int64_t> temp_bytes;
  for (size_t i : live) {
    const BufferDecl& d = p.buffers[items[i].buffer];
    if (d.temp_of.empty()) continue;
    if (!temp_bytes.count(d.temp_of)) owners.push_back(d.temp_of);
    temp_bytes[d.temp_of] += d.bytes;
  }
  auto temps_of = [&](const std::string& owner) {
    return std::to_string(temp_bytes[owner]) + " B of compiler temporaries for it (e.g. float32 copies: bfloat16 and "
           "int8 are computed in float32; the 16-bit pieces of an int32 product computed modulo 2^32, docs/ascend.md "
           "\"int32 overflow\")";
  };
  std::string list;
  const BufferDecl* biggest = nullptr;
  std::set<std::string> listed;
  for (size_t i : live) {
    const BufferDecl& d = p.buffers[items[i].buffer];
    if (!d.temp_of.empty()) continue;
    if (!biggest || d.bytes > biggest->bytes) biggest = &d;
    listed.insert(d.name);
    std::string staged = d.stages > 0 ? " x " + std::to_string(d.stages) + " stages of T.Pipelined" : "";
    const std::vector<int64_t> sh = tile_shape(d, d.shape);
    const std::string temps = temp_bytes.count(d.name) ? ", and " + temps_of(d.name) : "";
    const ir::TilePart& part = d.part_of;
    if (part.tile.empty() || (part.tile == d.name && part.row_parts == 1)) {
      list += (list.empty() ? "" : ", ") + d.name + " (" + shape_str(sh) + " " + std::string(d.dtype.name()) + staged +
              ", " + std::to_string(d.bytes) + " B" + temps + ")";
    } else {  // a tile split_cube_vector made of the user's tile: named as the kernel declares it, then what the core holds
      const std::vector<int64_t> user = user_shape(d, sh);
      const std::string as = part.tile != d.name ? "as " + d.name : "";
      const std::string rows = part.row_parts > 1 && !sh.empty()
                                   ? "each AIV " + std::to_string(sh[0]) + " of its " + std::to_string(user[0]) + " rows"
                                   : "";
      list += (list.empty() ? "" : ", ") + part.tile + " (" + shape_str(user) + " " + std::string(d.dtype.name()) + staged +
              (d.span.known() && d.span.line != p.span.line ? ", line " + std::to_string(d.span.line) : "") + "; " + as +
              (as.empty() || rows.empty() ? "" : ", ") + rows + ": " + shape_str(sh) + ", " + std::to_string(d.bytes) +
              " B" + temps + ")";
    }
  }
  for (const auto& o : owners)
    if (!listed.count(o)) list += (list.empty() ? "" : ", ") + std::string("the compiler temporaries for ") + o + " (" +
                                  std::to_string(temp_bytes[o]) + " B)";
  if (!biggest)
    for (size_t i : live)
      if (!biggest || p.buffers[items[i].buffer].bytes > biggest->bytes) biggest = &p.buffers[items[i].buffer];
  // A UB vector as long as a kernel tile's rows is a row vector (halved with the rows); one as long
  // as a tile's columns and no tile's rows is a column vector, e.g. rms_norm's weight row w (N,),
  // whose length is the kernel's argument, not a block size: kept (hunt11a F4's "w 1024").
  std::set<int64_t> tile_rows, tile_cols;
  for (const Item& it : items) {
    const BufferDecl& d = p.buffers[it.buffer];
    if (!d.temp_of.empty() || d.stages > 0 || d.shape.size() < 2) continue;
    tile_rows.insert(d.shape[d.shape.size() - 2]);
    tile_cols.insert(d.shape.back());
  }
  auto column_vector = [&](const BufferDecl& d) {
    return d.mem == Mem::UB && d.stages == 0 && d.shape.size() == 1 && tile_cols.count(d.shape[0]) &&
           !tile_rows.count(d.shape[0]);
  };
  // The dims that shrink together: the kernel's classes (tile_dims: a gemm's M, K, N, a map's
  // index, ... change together, so that the proposed tiles still fit one another); a buffer the
  // kernel does not name as it is (a program built by hand, a tile whose shape a pass changed), its
  // leading matrix dim in one class with the other such buffers' (all halved together).
  const int untied = dims ? static_cast<int>(dims->extent.size()) : 0;
  auto classes = [&](const BufferDecl& d) {  // per dim of its shape: the class (-1: kept)
    const size_t lead = d.stages > 0 ? 1 : 0;  // the stage dim stays
    std::vector<int> v(d.shape.size(), -1);
    if (!d.temp_of.empty()) return v;  // kept (an upper bound): row-chunk temporaries do not shrink with the tile
    auto it = dims ? dims->dims.find(d.name) : std::map<std::string, std::vector<int>>::const_iterator();
    bool tied = dims && it != dims->dims.end() && it->second.size() + lead == d.shape.size();
    for (size_t k = 0; tied && k < it->second.size(); ++k)  // (a vector tile: each AIV's part of the rows)
      tied = d.shape[k + lead] > 0 && dims->extent[it->second[k]] % d.shape[k + lead] == 0;
    if (tied) {
      for (size_t k = 0; k < it->second.size(); ++k) v[k + lead] = it->second[k];
    } else if (!column_vector(d) && !d.shape.empty()) {
      v[d.shape.size() >= lead + 2 ? d.shape.size() - 2 : lead] = untied;
    }
    return v;
  };
  std::vector<std::vector<int>> cls;
  for (const Item& it : items) cls.push_back(classes(p.buffers[it.buffer]));
  // The items of mem with the classes in `shrink` halved; shapes (optional): their shapes.
  auto shrunk = [&](const std::vector<Item>& its, Mem mem, const std::vector<int>& shrink, int halvings,
                    std::vector<std::vector<int64_t>>* shapes) {
    std::vector<Item> out = its;
    for (Item& it : out) {
      const BufferDecl& d = p.buffers[it.buffer];
      const std::vector<int> c = classes(d);
      std::vector<int64_t> sh = d.shape;
      for (size_t k = 0; k < sh.size(); ++k)
        if (c[k] >= 0 && std::find(shrink.begin(), shrink.end(), c[k]) != shrink.end())
          sh[k] = std::max<int64_t>(1, sh[k] >> halvings);
      if (sh != d.shape)
        it.bytes = (mem != Mem::UB && sh.size() < 2) ? std::max<int64_t>(512, d.bytes >> halvings)  // implicit gemm L0
                                                     : tile_bytes(mem, d.dtype, sh);
      if (shapes) shapes->push_back(sh);
    }
    return out;
  };
  auto fixed = [&](int c) { return c != untied && dims->fixed[c]; };
  // The classes of the buffers live at the peak, the most bytes first.
  std::map<int, int64_t> weight;
  for (size_t i : live)
    for (int c : cls[i])
      if (c >= 0) weight[c] += p.buffers[items[i].buffer].bytes;
  std::vector<int> order;
  for (const auto& [c, w] : weight) order.push_back(c);
  // (a class a reduction reduces after the others: fewer of it computes another result, hunt14 F3)
  auto reduced = [&](int c) { return c != untied && !dims->reduced[c].empty(); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return reduced(a) != reduced(b) ? reduced(b) : weight[a] > weight[b];
  });
  // Tried in turn: one free class, all free classes, one fixed class, all.
  std::vector<std::vector<int>> tries;
  std::vector<int> free_all, all;
  for (int c : order) {
    if (!fixed(c)) tries.push_back({c}), free_all.push_back(c);
    all.push_back(c);
  }
  if (free_all.size() > 1) tries.push_back(free_all);
  for (int c : order)
    if (fixed(c)) tries.push_back({c});
  if (all.size() > free_all.size() && all.size() > 1) tries.push_back(all);
  // Each try with 1, 2, ... halvings before the next try (one block size to change, before several).
  std::string hint;
  for (const auto& shrink : tries) {
    for (int halvings = 1; halvings <= 6 && hint.empty(); ++halvings) {
      std::vector<std::vector<int64_t>> shapes;
      std::vector<Item> smaller = shrunk(items, m, shrink, halvings, &shapes);
      bool changed = false;
      for (size_t i = 0; i < smaller.size(); ++i) changed |= shapes[i] != p.buffers[smaller[i].buffer].shape;
      if (!changed) break;  // (nothing left to halve)
      std::vector<int64_t> offsets;
      int64_t tot = place(smaller, align, reuse, offsets);
      if (tot > cap) continue;
      // the other memories fit too with these tiles (a smaller L1 tile whose L0C accumulator still overflows helps not)
      bool others_fit = true;
      for (const auto& [om, its] : others) {
        others_fit &= place(shrunk(its, om, shrink, halvings, nullptr), buffer_alignment(om), reuse, offsets) <=
                      usable_bytes(p, target.ascend, om);
      }
      if (!others_fit) continue;
      std::string s;  // the user's tiles (a compiler tile, e.g. P V's partial acc_o_pv, follows its class)
      std::set<std::string> named;
      for (size_t i : live) {
        const BufferDecl& d = p.buffers[items[i].buffer];
        const std::string name = d.part_of.tile.empty() ? d.name : d.part_of.tile;  // acc_ub: acc
        if (!d.temp_of.empty() || (dims && !dims->user.count(name)) || !named.insert(name).second) continue;
        std::vector<int64_t> sh = user_shape(d, tile_shape(d, shapes[i]));
        auto it = dims ? dims->dims.find(d.name) : std::map<std::string, std::vector<int>>::const_iterator();
        const size_t lead = d.stages > 0 ? 1 : 0;
        bool tied = dims && it != dims->dims.end() && it->second.size() + lead == d.shape.size();
        for (size_t k = 0; tied && k < it->second.size(); ++k) tied = cls[i][k + lead] == it->second[k];
        if (tied) {
          sh.clear();  // the tile as the user wrote it (a vector tile of a mix kernel: each AIV holds part of its rows)
          for (int c : it->second)
            sh.push_back(std::find(shrink.begin(), shrink.end(), c) != shrink.end() ? std::max<int64_t>(1, dims->extent[c] >> halvings)
                                                                                   : dims->extent[c]);
        }
        s += (s.empty() ? "" : ", ") + name + " " + shape_str(sh);
      }
      if (s.empty()) s = "the tiles halved " + std::to_string(halvings) + " time(s)";
      hint = "a smaller tile that fits: " + s + " (" + std::to_string(tot) + " B)" +
             (reuse ? "" : "; or reuse one buffer for two tiles");
      // the kernel's tied dims that change: named, so that the user changes the block size or loop
      // extent they come from (paged_decode's keys per step: k's and v's rows, s's and p's columns)
      for (int c : shrink) {
        if (c == untied) continue;
        std::string members;
        int n = 0;
        for (const auto& [name, v] : dims->dims)
          for (size_t k = 0; k < v.size(); ++k) {
            if (v[k] != c || !dims->user.count(name)) continue;
            const std::string dim = v.size() == 1 ? "length" : k + 1 == v.size() ? "columns" : k + 2 == v.size() ? "rows"
                                                                                                    : "dim " + std::to_string(k);
            if (n++ < 6) members += (members.empty() ? "" : ", ") + name + "'s " + dim;
          }
        if (n > 6) members += ", ...";
        const int64_t e = dims->extent[c];
        hint += "; " + members + " " + std::to_string(e) + " -> " + std::to_string(std::max<int64_t>(1, e >> halvings)) +
                (n > 1 ? " (dims the kernel ties: they change together, one block size or loop extent of it)" : "") +
                (fixed(c) ? " (taken whole from a tensor dim: a loop over its parts in the kernel)" : "") +
                (reduced(c) ? " (the dim " + dims->reduced[c] + " reduces: with fewer of it each tile holds part of "
                              "the reduction; a T.serial loop over its parts in the kernel, reducing each into the "
                              "result with clear=False, computes the whole)" : "");
      }
    }
    if (!hint.empty()) break;
  }
  if (hint.empty()) hint = "use smaller tiles";
  // Tiles staged by T.Pipelined (multi_buffer): the most stages that fit with the tiles as they are.
  int64_t most = 0;
  for (const Item& it : items) most = std::max(most, p.buffers[it.buffer].stages);
  for (int64_t s = most - 1; s >= 1; --s) {
    std::vector<Item> fewer = items;
    for (Item& it : fewer) {
      const BufferDecl& d = p.buffers[it.buffer];
      if (d.stages <= s) continue;
      std::vector<int64_t> sh = d.shape;
      sh[0] = s;
      it.bytes = tile_bytes(m, d.dtype, sh);
    }
    std::vector<int64_t> offsets;
    int64_t tot = place(fewer, align, reuse, offsets);
    if (tot > cap) continue;
    hint += "; or fewer stages: T.Pipelined(..., num_stages=" + std::to_string(s) + ") fits (" + std::to_string(tot) +
            " B)";
    break;
  }
  std::string where;
  if (reuse && peak_pos >= 0 && spans[peak_pos].known())
    where = " are live together at line " + std::to_string(spans[peak_pos].line) + " and";
  std::string core = m == Mem::UB ? "AIV" : "AIC";
  int64_t live_stages = 0;
  for (size_t i : live) live_stages = std::max(live_stages, p.buffers[items[i].buffer].stages);
  throw CapacityError(std::string(mem_name(m)) + " overflow: " + list + where + " need " + std::to_string(used) +
                          " B but the " + core + "'s " + std::string(mem_name(m)) + " on " + target.name + " holds " +
                          std::to_string(cap) + " B" +
                          (cap < capacity_of(target.ascend, m) ? " (above it, AscendC's Select keeps a temporary: Select.md reserves 8 KB of UB)" : ""),
                      biggest ? biggest->span : p.span, hint, m, used, cap, live_stages);
}

}  // namespace

static bool selects(const StmtPtr& s) {
  if (!s) return false;
  if (s->kind == StmtKind::Instr) {
    const InstrOp& op = s->instr.op;
    if (std::holds_alternative<VecSelect>(op)) return true;
    if (auto* c = std::get_if<VecCallL2>(&op)) return c->api == VecApi::Select || c->api == VecApi::SelectScalar;
    return false;
  }
  for (const auto& b : s->body)
    if (selects(b)) return true;
  return selects(s->else_body);
}

int64_t usable_bytes(const Program& p, const target::AscendParams& hw, Mem m) {
  int64_t cap = capacity_of(hw, m);
  return m == Mem::UB && selects(p.aiv) ? std::min(cap, kSelectTmpUbOffset) : cap;
}

int64_t capacity_of(const target::AscendParams& hw, Mem m) {
  switch (m) {
    case Mem::L1: return hw.l1_bytes;
    case Mem::L0A: return hw.l0a_bytes;
    case Mem::L0B: return hw.l0b_bytes;
    case Mem::L0C: return hw.l0c_bytes;
    case Mem::UB: return hw.ub_bytes;
    case Mem::GM: return 0;
  }
  return 0;
}


Program plan_memory(const Program& program, const target::Target& target, bool reuse, const TileDims* dims) {
  Program out = program;
  Walker aic(out), aiv(out);
  if (reuse) {
    aic.walk(out.aic);
    aiv.walk(out.aiv);
  }
  // whole-buffer liveness first; slot liveness (rule 3) only when that overflows
  auto items_of = [&](Mem m, bool slots) {
    const Walker& w = m == Mem::UB ? aiv : aic;
    std::vector<Item> items;
    for (size_t b = 0; b < out.buffers.size(); ++b) {
      const BufferDecl& d = out.buffers[b];
      if (d.mem != m) continue;
      Item it{static_cast<int>(b), d.bytes, {}};
      if (reuse) {
        int64_t numel = 1;
        for (auto x : d.shape) numel *= x;
        int64_t need = m == Mem::UB ? numel * d.dtype.bytes() : d.bytes;
        it.life = lifetime(w.accesses[b], w.loops, need, slots);
      } else {
        it.life = Lifetime{0, 0};  // every buffer live throughout
      }
      items.push_back(it);
    }
    return items;
  };
  for (int mi = 0; mi < kNumMems; ++mi) {
    Mem m = static_cast<Mem>(mi);
    if (m == Mem::GM) continue;
    std::vector<Item> items = items_of(m, false);
    if (items.empty()) continue;
    std::vector<int64_t> offsets;
    int64_t used = place(items, buffer_alignment(m), reuse, offsets);
    if (used > usable_bytes(out, target.ascend, m) && reuse) {
      items = items_of(m, true);
      used = place(items, buffer_alignment(m), reuse, offsets);
    }
    if (used > usable_bytes(out, target.ascend, m)) {
      std::vector<std::pair<Mem, std::vector<Item>>> others;  // for the hint: the tiles must fit every memory
      for (int oi = 0; oi < kNumMems; ++oi)
        if (oi != mi && static_cast<Mem>(oi) != Mem::GM) others.push_back({static_cast<Mem>(oi), items_of(static_cast<Mem>(oi), reuse)});
      capacity_error(out, target, m, items, used, reuse, (m == Mem::UB ? aiv : aic).spans, dims, others);
    }
    for (size_t i = 0; i < items.size(); ++i) out.buffers[items[i].buffer].offset = offsets[i];
  }
  // Each core's pool per memory: the end of its last buffer, rounded up to 32 B (the TBuf's size).
  out.pool_bytes = {};
  for (const auto& b : out.buffers)
    if (b.mem != Mem::GM) out.pool(b.core, b.mem) = std::max(out.pool(b.core, b.mem), round_up(b.offset + b.bytes, 32));
  return out;
}

}  // namespace tw::ascend
