#include "target/ascend/simulator/timing.h"

#include "target/ascend/simulator/mmad_kernel.h"

#include <algorithm>
#include <cmath>

namespace tw::ascend::sim {

namespace {
int64_t cdiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
int bytes_of(ir::DTypeCode t) { return ir::DType(t).bytes(); }
}  // namespace

Timing::Timing(Machine& m)
    : m_(m), p_(m.chip), l2_(static_cast<int64_t>(m.chip.l2_mib * 1048576.0), m.chip.l2_line_bytes) {
  double cycles_per_s = p_.clock_mhz * 1e6;
  l2_per_bucket_ = p_.l2_tbps * 1e12 / cycles_per_s * p_.gm_bandwidth_bucket_cycles;
  hbm_per_bucket_ = p_.hbm_tbps * 1e12 / cycles_per_s * p_.gm_bandwidth_bucket_cycles;
}

int64_t Timing::launch() const { return std::llround(p_.launch_overhead_us * p_.clock_mhz); }

int64_t Timing::block_start(int64_t t) const { return t + p_.block_start_cycles; }

int64_t Timing::drained() const { return static_cast<int64_t>(std::ceil(drained_)); }

int64_t Timing::gm_transfer(int64_t t, double bytes, double hbm, double rate) {
  const int64_t B = p_.gm_bandwidth_bucket_cycles;
  const double l2_rate = l2_per_bucket_ / static_cast<double>(B), hbm_rate = hbm_per_bucket_ / static_cast<double>(B);
  const double frac = bytes > 0 ? hbm / bytes : 0;  // HBM bytes per GM byte (> 1 for partial lines)
  hbm_bytes_ += hbm;
  double remaining = bytes;
  double cur = static_cast<double>(t);
  while (remaining > 1e-9) {
    size_t b = static_cast<size_t>(cur / static_cast<double>(B));
    if (b >= l2_used_.size()) {
      l2_used_.resize(b * 2 + 64, 0.0);
      hbm_used_.resize(b * 2 + 64, 0.0);
    }
    const double bucket_start = static_cast<double>(b * B), bucket_end = static_cast<double>((b + 1) * B);
    double cap = rate * (bucket_end - cur);
    cap = std::min(cap, l2_per_bucket_ - l2_used_[b]);
    if (frac > 0) cap = std::min(cap, (hbm_per_bucket_ - hbm_used_[b]) / frac);
    if (cap <= 1e-9) {
      cur = bucket_end;
      continue;
    }
    double x = std::min(remaining, cap);
    l2_used_[b] += x;
    hbm_used_[b] += x * frac;
    remaining -= x;
    drained_ = std::max({drained_, bucket_start + l2_used_[b] / l2_rate, bucket_start + hbm_used_[b] / hbm_rate});
    if (remaining <= 1e-9) {
      // the share of the bucket we got determines the effective rate inside it
      double eff = cap / (bucket_end - cur);
      cur += x / std::max(eff, 1e-9);
      break;
    }
    cur = bucket_end;
  }
  return static_cast<int64_t>(std::ceil(cur));
}

Cost Timing::cost(Core& core, const RInstr& r, int64_t start) {
  Cost k;
  // HBM bytes of a GM access: the lines of a read missing from L2; every written byte
  auto hbm_of = [&](const RMem& gm, const Rect& rect, bool write) {
    Machine::Span sp = m_.base(core, gm);
    if (!write) return static_cast<double>(l2_.read(sp.space, rect, sp.size));
    l2_.write(sp.space, rect, sp.size);
    return rect.rows > 0 && rect.row_bytes > 0 ? static_cast<double>(rect.rows * rect.row_bytes) : 0.0;
  };
  auto gm_move = [&](const RMem& gm, const Rect& rect, double bytes, double rate, bool write) {
    double hbm = hbm_of(gm, rect, write);
    int64_t t0 = start + p_.move_overhead_cycles;
    int64_t end = gm_transfer(t0, bytes, hbm, rate);
    k.busy = end - start;
    k.latency = p_.gm_latency_cycles;
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        auto load_l0 = [&](const RMem& dst, double bytes) {
          Mem dm = m_.prog.buffers[dst.index].mem;
          double rate = dm == Mem::L0A ? p_.l1_to_l0a_bytes_per_cycle : p_.l1_to_l0b_bytes_per_cycle;
          k.busy = p_.local_move_overhead_cycles + static_cast<int64_t>(std::ceil(bytes / rate));
        };
        if constexpr (std::is_same_v<T, RInitConst>) {
          double bytes = static_cast<double>(std::max<int64_t>(0, x.repeat) * std::max<int64_t>(0, x.blocks) * 32);
          k.busy = p_.move_overhead_cycles + static_cast<int64_t>(std::ceil(bytes / p_.init_const_bytes_per_cycle));
        } else if constexpr (std::is_same_v<T, RNd2Nz>) {
          int es = bytes_of(x.dt);
          // the GM rows of all ndNum matrices, as one transfer
          double hbm = 0;
          for (int64_t i = 0; i < x.nd_num; ++i)
            hbm += hbm_of(x.src, Rect{x.src.off + i * x.src_nd_stride * es, x.n, x.d * es, x.src_d * es}, false);
          int64_t t0 = start + p_.move_overhead_cycles;
          k.busy = gm_transfer(t0, static_cast<double>(std::max<int64_t>(0, x.nd_num) * x.n * x.d * es), hbm,
                               p_.gm_read_bytes_per_cycle) - start;
          k.latency = p_.gm_latency_cycles;
        } else if constexpr (std::is_same_v<T, RDataCopy>) {
          double bytes = static_cast<double>(x.count * x.bytes());
          if (x.kind == RDataCopy::GmToUb) {
            gm_move(x.src, Rect{x.src.off, x.count, x.bytes(), x.src_pitch()}, bytes, p_.gm_read_bytes_per_cycle, false);
          } else if (x.kind == RDataCopy::UbToGm) {
            gm_move(x.dst, Rect{x.dst.off, x.count, x.bytes(), x.dst_pitch()}, bytes,
                    std::min(p_.ub_to_gm_bytes_per_cycle, p_.gm_write_bytes_per_cycle), true);
          } else {
            k.busy = p_.vec_overhead_cycles + cdiv(static_cast<int64_t>(bytes), static_cast<int64_t>(p_.ub_to_ub_bytes_per_cycle));
          }
        } else if constexpr (std::is_same_v<T, RLoad2D>) {
          auto it = load2d_end_.find(core.index);
          bool stream = it != load2d_end_.end() && it->second == start;
          load_l0(x.dst, static_cast<double>(x.repeat * 512));
          if (stream) k.busy -= p_.local_move_overhead_cycles;
          load2d_end_[core.index] = start + k.busy;
        } else if constexpr (std::is_same_v<T, RLoad3D>) {
          load_l0(x.dst, static_cast<double>(x.mext * x.kext * bytes_of(x.dt)));
        } else if constexpr (std::is_same_v<T, RMmad>) {
          k.mac_cycles = cdiv(x.m, 16) * cdiv(x.n, 16) * cdiv(x.k, cube_k0(x.in));
          k.busy = p_.mmad_overhead_cycles + k.mac_cycles;
          k.latency = p_.mmad_latency_cycles;
          k.flops = 2.0 * static_cast<double>(x.m) * static_cast<double>(x.n) * static_cast<double>(x.k);
        } else if constexpr (std::is_same_v<T, RFixpipe>) {
          int es = bytes_of(x.to);
          if (x.nz) {  // L0C -> L1: an on-chip move at FixPipe's published rate (output bytes)
            k.busy = p_.local_move_overhead_cycles +
                     static_cast<int64_t>(std::ceil(static_cast<double>(x.m * x.n * es) / p_.fixpipe_bytes_per_cycle));
            return;
          }
          Rect rect{x.dst.off, x.m, x.n * es, x.dst_stride * es};
          gm_move(x.dst, rect, static_cast<double>(x.m * x.n * es),
                  std::min(p_.fixpipe_bytes_per_cycle, p_.gm_write_bytes_per_cycle), true);
        } else if constexpr (std::is_same_v<T, RVecCall>) {
          int es = std::max(vec_api_lane_bytes(x.api, x.dt), vec_api_lane_bytes(x.api, x.src_dt));
          int64_t per_repeat = 256 / es;  // elements of one 256 B repeat
          // a level-2 call runs ceil(count / per_repeat) repeats; a masked repeat costs a whole one
          int64_t repeats = x.l0 ? x.repeat : cdiv(x.mask, per_repeat);
          bool slow = x.api == VecApi::Div || x.api == VecApi::Exp || x.api == VecApi::Ln || x.api == VecApi::Sqrt;
          double cyc = x.api == VecApi::Cast ? static_cast<double>(repeats * per_repeat) / p_.vec_cast_elems_per_cycle
                       : slow ? static_cast<double>(repeats * per_repeat) / p_.vec_transcendental_elems_per_cycle
                              : static_cast<double>(repeats) * 256.0 / p_.vec_bytes_per_cycle;
          k.busy = p_.vec_overhead_cycles + static_cast<int64_t>(std::ceil(cyc));
        } else if constexpr (std::is_same_v<T, RWholeReduce>) {
          k.busy = p_.vec_overhead_cycles + static_cast<int64_t>(std::ceil(static_cast<double>(x.repeat) * p_.vec_reduce_cycles_per_repeat));
        } else if constexpr (std::is_same_v<T, RScalarLoad>) {  // a DataCache hit, or a line fill from GM
          if (!x.src.gm) {  // LocalTensor::GetValue: a UB read
            k.busy = p_.scalar_ub_access_cycles;
            return;
          }
          int64_t line = (static_cast<int64_t>(m_.base(core, x.src).space) << 40) | (x.src.off / p_.scalar_dcache_line_bytes);
          k.busy = core.dcache.insert(line).second ? p_.gm_latency_cycles : p_.scalar_dcache_hit_cycles;
        } else if constexpr (std::is_same_v<T, RScalarStore>) {  // LocalTensor::SetValue: a UB write
          k.busy = p_.scalar_ub_access_cycles;
        } else if constexpr (std::is_same_v<T, RGather>) {  // whole 256 B repeats at the gather rate
          int64_t per_repeat = 256 / bytes_of(x.dt);
          k.busy = p_.vec_overhead_cycles + static_cast<int64_t>(std::ceil(
                                                static_cast<double>(cdiv(x.count, per_repeat) * per_repeat) /
                                                p_.vec_gather_elems_per_cycle));
        } else if constexpr (std::is_same_v<T, RBrcb>) {
          k.busy = p_.vec_overhead_cycles + static_cast<int64_t>(std::ceil(static_cast<double>(x.repeat) * 256.0 / p_.vec_bytes_per_cycle));
        }
      },
      r.op);
  return k;
}

}  // namespace tw::ascend::sim
