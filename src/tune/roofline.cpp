#include "tune/roofline.h"

#include <algorithm>

namespace tw::tune {
namespace {

std::optional<double> region_elems(const ir::Region& r) {
  double n = 1;
  for (const auto& e : r.extents) {
    auto v = ir::as_const_int(e);
    if (!v) return std::nullopt;
    n *= static_cast<double>(*v);
  }
  return n;
}

bool is_global(const ir::Buffer& b) { return b->scope == ir::Scope::global; }

// Adds the work of `s`, executed `times` times, to `w`; false when something is not constant.
bool count(const ir::Stmt& s, double times, Work& w) {
  if (!s) return true;
  switch (s->kind) {
    case ir::StmtKind::Seq:
      for (const auto& b : static_cast<const ir::SeqNode&>(*s).body)
        if (!count(b, times, w)) return false;
      return true;
    case ir::StmtKind::For: {
      const auto& f = static_cast<const ir::ForNode&>(*s);
      auto n = ir::as_const_int(f.extent);
      if (!n) return false;
      return count(f.body, times * static_cast<double>(std::max<int64_t>(*n, 0)), w);
    }
    case ir::StmtKind::If: {  // an upper bound: the larger branch
      const auto& i = static_cast<const ir::IfNode&>(*s);
      Work a, b;
      if (!count(i.then_body, times, a) || !count(i.else_body, times, b)) return false;
      w.flops += std::max(a.flops, b.flops);
      w.global_bytes += std::max(a.global_bytes, b.global_bytes);
      return true;
    }
    case ir::StmtKind::CoreScope:
      return count(static_cast<const ir::CoreScopeNode&>(*s).body, times, w);
    case ir::StmtKind::Copy: {
      const auto& c = static_cast<const ir::CopyNode&>(*s);
      auto n = region_elems(c.src);
      if (!n) return false;
      if (is_global(c.src.buffer)) w.global_bytes += times * *n * c.src.buffer->dtype.bytes();
      if (is_global(c.dst.buffer)) w.global_bytes += times * *n * c.dst.buffer->dtype.bytes();
      return true;
    }
    case ir::StmtKind::Gemm: {
      const auto& g = static_cast<const ir::GemmNode&>(*s);
      auto c = region_elems(g.c);
      auto a = region_elems(g.a);
      if (!c || !a) return false;
      auto m = ir::as_const_int(g.c.extents.at(0));
      if (!m || *m == 0) return false;
      double k = *a / static_cast<double>(*m);
      w.flops += times * 2.0 * *c * k;
      return true;
    }
    case ir::StmtKind::Store: {
      const auto& st = static_cast<const ir::StoreNode&>(*s);
      if (is_global(st.buffer)) w.global_bytes += times * st.buffer->dtype.bytes();
      return true;
    }
    case ir::StmtKind::Let: case ir::StmtKind::Alloc: case ir::StmtKind::Fill: case ir::StmtKind::Reduce:
    case ir::StmtKind::Sync:
      return true;
  }
  return true;  // not reached: the switch lists every enumerator
}

}  // namespace

std::optional<Work> estimate_work(const ir::Kernel& kernel) {
  double blocks = 1;
  for (const auto& g : kernel->grid) {
    auto n = ir::as_const_int(g);
    if (!n) return std::nullopt;
    blocks *= static_cast<double>(*n);
  }
  Work w;
  if (!count(kernel->body, blocks, w)) return std::nullopt;
  for (const auto& p : kernel->params) {
    if (!p.buffer) continue;
    auto shape = p.buffer->const_shape();
    if (!shape) return std::nullopt;
    double n = p.buffer->dtype.bytes();
    for (auto d : *shape) n *= static_cast<double>(d);
    w.compulsory_bytes += n;
  }
  return w;
}

double roofline_seconds(const Work& w, double peak_flops, double memory_bw, double cache_bw) {
  double t = std::max(w.flops / peak_flops, w.compulsory_bytes / memory_bw);
  return cache_bw > 0 ? std::max(t, w.global_bytes / cache_bw) : t;
}

}  // namespace tw::tune
