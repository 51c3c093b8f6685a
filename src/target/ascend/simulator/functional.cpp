// Data semantics of the instructions (program.h documents each one) and operand validation
// (bounds, alignment) with the list of byte rectangles each instruction reads and writes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "target/ascend/simulator/machine.h"
#include "target/ascend/simulator/numeric.h"

namespace tw::ascend::sim {

namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t rup(int64_t a, int64_t b) { return cdiv(a, b) * b; }
int es_of(ir::DTypeCode t) { return ir::DType(t).bytes(); }
// Element offsets in the fractal layouts (program.h, LoadL0 / Mmad): Nz with strips of `strip`
// rows and width w (L1 with w = C0; L0C with w = 16), Zz (L0A, K1 = K / C0), Zn (L0B, N1 = N / 16).
int64_t nz_off(int64_t r, int64_t c, int64_t strip, int64_t w) { return ((c / w) * strip + r) * w + c % w; }
int64_t zz_off(int64_t m, int64_t k, int64_t K1, int64_t c0) {
  return (m / 16) * (K1 * 16 * c0) + (k / c0) * (16 * c0) + (m % 16) * c0 + k % c0;
}
int64_t zn_off(int64_t k, int64_t n, int64_t N1, int64_t c0) {
  return (k / c0) * (N1 * 16 * c0) + (n / 16) * (16 * c0) + (n % 16) * c0 + k % c0;
}
int align_of(Mem m) {
  switch (m) {
    case Mem::L1: return 32;
    case Mem::L0A: case Mem::L0B: return 512;
    case Mem::L0C: return 64;
    case Mem::UB: return 32;
    default: return 1;
  }
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Validation and access lists

bool Machine::accesses(Core& c, const RInstr& r, std::vector<Access>& out) {
  bool ok = true;
  auto fail = [&](ReportKind k, const std::string& msg) {
    if (ok) report(k, msg, {describe(c, r.in, c.pipes[static_cast<int>(r.pipe)].free)});
    ok = false;
  };
  auto operand = [&](const RMem& m, Rect rect, bool write, int elem, const char* role) {
    if (!ok) return;
    if (!m.gm && (m.index < 0 || m.index >= static_cast<int>(prog.buffers.size()))) {
      fail(ReportKind::InvalidInstr, std::string(role) + " refers to buffer #" + std::to_string(m.index) + ", which does not exist");
      return;
    }
    if (m.gm && m.index >= static_cast<int>(prog.params.size())) {
      fail(ReportKind::InvalidInstr, std::string(role) + " refers to parameter #" + std::to_string(m.index));
      return;
    }
    if (!m.gm && prog.buffers[m.index].core != c.type) {
      fail(ReportKind::InvalidInstr, std::string(role) + " buffer " + prog.buffers[m.index].name + " belongs to the " +
                                         std::string(core_type_name(prog.buffers[m.index].core)) + ", not the " +
                                         std::string(core_type_name(c.type)));
      return;
    }
    // A row count <= 0 is no call (program.h; the printer guards it with `if (count > 0)`); a
    // negative byte count in a call that is issued would wrap the unsigned API field.
    if (rect.rows > 0 && rect.row_bytes < 0) {
      fail(ReportKind::InvalidInstr, std::string(role) + " has a negative size (" + std::to_string(rect.rows) + " rows of " +
                                         std::to_string(rect.row_bytes) + " bytes): the count fields are unsigned");
      return;
    }
    Span s = base(c, m);
    rect.start += m.off;
    std::string what = m.gm ? (m.index < 0 ? std::string("the GM workspace") : "GM tensor " + prog.params[m.index].name)
                            : "buffer " + prog.buffers[m.index].name + " (" + std::string(mem_name(s.mem)) + ")";
    // the lowest and highest byte touched (a negative row stride walks downwards)
    int64_t lo = rect.rows > 1 && rect.stride < 0 ? rect.start + (rect.rows - 1) * rect.stride : rect.start;
    int64_t hi = rect.rows > 1 && rect.stride < 0 ? rect.start + rect.row_bytes : rect.end();
    if (rect.rows > 0 && rect.row_bytes > 0 && (lo < 0 || hi > s.size)) {
      fail(ReportKind::OutOfBounds, std::string(role) + " " + (write ? "writes" : "reads") + " bytes [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + ") of " + what +
                                        ", which has " + std::to_string(s.size) + " bytes");
      return;
    }
    int64_t abs = s.abs_base + rect.start;
    int al = m.gm ? elem : align_of(s.mem);
    if (abs % al != 0) {
      fail(ReportKind::Misaligned, std::string(role) + " address " + std::to_string(abs) + " in " +
                                       (m.gm ? what : std::string(mem_name(s.mem)) + " (" + what + ")") +
                                       " is not " + std::to_string(al) + "-byte aligned" +
                                       (m.gm ? "" : std::string(" (") + std::string(mem_name(s.mem)) + " requires " + std::to_string(al) + " B)"));
      return;
    }
    if (!m.gm && s.mem == Mem::UB && rect.rows > 1 && rect.stride % 32 != 0) {
      fail(ReportKind::Misaligned, std::string(role) + " row stride of " + std::to_string(rect.stride) +
                                       " bytes in UB is not a multiple of 32 B (the 32 B data block)");
      return;
    }
    rect.start = m.gm ? rect.start : abs;
    out.push_back(Access{s.space, rect, write});
  };
  auto invalid = [&](bool cond, const std::string& msg) {
    if (cond) fail(ReportKind::InvalidInstr, msg);
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, RCopyGmToL1>) {
          int es = es_of(x.dt), c0 = 32 / es;
          invalid(x.dst_rows % 16 != 0 || x.dst_cols % c0 != 0,
                  "Nz destination " + std::to_string(x.dst_rows) + "x" + std::to_string(x.dst_cols) +
                      " must have rows a multiple of 16 and cols a multiple of C0 = " + std::to_string(c0));
          invalid(x.rows > x.dst_rows || x.cols > x.dst_cols || x.rows < 0 || x.cols < 0,
                  "copied " + std::to_string(x.rows) + "x" + std::to_string(x.cols) + " does not fit the Nz destination " +
                      std::to_string(x.dst_rows) + "x" + std::to_string(x.dst_cols));
          if (!prog.buffers.empty() && !x.dst.gm && x.dst.index >= 0 && x.dst.index < (int)prog.buffers.size())
            invalid(prog.buffers[x.dst.index].mem != Mem::L1, "CopyGmToL1 destination must be an L1 buffer");
          operand(x.src, Rect{0, x.rows, x.cols * es, x.src_row_stride * es}, false, es, "source");
          operand(x.dst, Rect{0, 1, x.dst_rows * x.dst_cols * es, 0}, true, es, "destination");
        } else if constexpr (std::is_same_v<T, RBurst>) {
          operand(x.src, Rect{0, x.n_rows, x.row_bytes, x.src_stride}, false, 1, "source");
          int64_t written = x.pad == RBurst::kExact ? x.row_bytes : rup(x.row_bytes, 32);
          operand(x.dst, Rect{0, x.n_rows, written, x.dst_stride}, true, 1, "destination");
        } else if constexpr (std::is_same_v<T, RLoadL0>) {
          int es = es_of(x.dt), c0 = 32 / es;
          bool to_a = x.dst.index >= 0 && x.dst.index < (int)prog.buffers.size() && prog.buffers[x.dst.index].mem == Mem::L0A;
          invalid(x.dst.index < 0 || x.dst.index >= (int)prog.buffers.size() ||
                      (prog.buffers[x.dst.index].mem != Mem::L0A && prog.buffers[x.dst.index].mem != Mem::L0B),
                  "LoadL0 destination must be an L0A or L0B buffer");
          invalid(x.transpose && es != 2 && !(es == 4 && !to_a),
                  "LoadData transposes 16-bit types (LoadDataWithTranspose also 32-bit types into L0B)");
          // window in the source (rows x cols of the Nz matrix)
          bool same = to_a != x.transpose;  // D = window (else D = window^T)
          int64_t wr = same ? x.dst_rows : x.dst_cols, wc = same ? x.dst_cols : x.dst_rows;
          int64_t drow_mult = to_a ? 16 : c0, dcol_mult = to_a ? c0 : 16;
          invalid(x.dst_rows % drow_mult != 0 || x.dst_cols % dcol_mult != 0 || x.src_row % 16 != 0 ||
                      x.src_col % c0 != 0 || x.src_rows % 16 != 0 || wr % 16 != 0 || wc % c0 != 0,
                  "LoadL0 shapes must be whole fractals (16 x C0 = 16 x " + std::to_string(c0) + ")");
          invalid(x.src_row + wr > x.src_rows, "LoadL0 window rows [" + std::to_string(x.src_row) + ", " +
                                                   std::to_string(x.src_row + wr) + ") exceed the Nz strip height " +
                                                   std::to_string(x.src_rows));
          operand(x.src, Rect{(x.src_col / c0 * x.src_rows + x.src_row) * 32, wc / c0, wr * 32, x.src_rows * 32}, false, es, "source");
          operand(x.dst, Rect{0, 1, x.dst_rows * x.dst_cols * es, 0}, true, es, "destination");
        } else if constexpr (std::is_same_v<T, RMmad>) {
          int es = es_of(x.in), c0 = 32 / es;
          invalid(x.m <= 0 || x.n <= 0 || x.k <= 0 || x.m > 4095 || x.n > 4095 || x.k > 4095,
                  "Mmad m, n, k must be in 1..4095 (got " + std::to_string(x.m) + ", " + std::to_string(x.n) + ", " +
                      std::to_string(x.k) + ")");
          bool int8 = x.in == ir::DTypeCode::i8;
          invalid(int8 ? x.acc != ir::DTypeCode::i32 : x.acc != ir::DTypeCode::f32,
                  "Mmad accumulates fp16/bf16/fp32 in fp32 and int8 in int32");
          int64_t mp = rup(x.m, 16), kp = rup(x.k, c0), np = rup(x.n, 16);
          operand(x.a, Rect{0, 1, mp * kp * es, 0}, false, es, "A (L0A)");
          operand(x.b, Rect{0, 1, kp * np * es, 0}, false, es, "B (L0B)");
          if (!x.init) operand(x.c, Rect{0, 1, mp * np * 4, 0}, false, 4, "C (L0C)");
          operand(x.c, Rect{0, 1, mp * np * 4, 0}, true, 4, "C (L0C)");
        } else if constexpr (std::is_same_v<T, RFixpipe>) {
          int es = es_of(x.to);
          invalid(x.m > x.src_rows || x.src_rows % 16 != 0, "Fixpipe m must be <= src_rows (a multiple of 16)");
          operand(x.src, Rect{0, 1, x.src_rows * rup(x.n, 16) * 4, 0}, false, 4, "source (L0C)");
          operand(x.dst, Rect{0, x.m, x.n * es, x.dst_row_stride * es}, true, es, "destination");
        } else if constexpr (std::is_same_v<T, RVec>) {
          int des = es_of(x.dt), ses = es_of(x.src_dt);
          // Cast and Duplicate have bfloat16_t forms on dav-c220 (vconv_impl, duplicate_impl); no arithmetic does
          invalid(x.dt == ir::DTypeCode::bf16 && x.kind != RVec::Cast && x.kind != RVec::Dup,
                  "bf16 arithmetic is not available on the AIV: cast to float32 first");
          auto tile = [&](const RVecOperand& o, int es, bool w, const char* role) {
            operand(o.at, Rect{0, x.rows, x.cols * es, o.stride * es}, w, es, role);
          };
          switch (x.kind) {
            case RVec::Binary: tile(x.a, ses, false, "a"); tile(x.b, ses, false, "b"); tile(x.dst, des, true, "dst"); break;
            case RVec::Scalar: case RVec::Unary: case RVec::Cast:
              tile(x.a, ses, false, "src"); tile(x.dst, des, true, "dst"); break;
            case RVec::Dup: tile(x.dst, des, true, "dst"); break;
            case RVec::Reduce:
              invalid(x.rows > 0 && x.cols > 0 ? false : (x.axis == ReduceAxis::Row ? x.rows : x.cols) > 0,
                      "a reduction over an empty range (" + std::to_string(x.rows) + "x" + std::to_string(x.cols) + ")");
              tile(x.a, ses, false, "src");
              operand(x.dst.at, Rect{0, 1, (x.axis == ReduceAxis::Row ? x.rows : x.cols) * des, 0}, true, des, "dst");
              break;
            case RVec::RowBcast:
              tile(x.a, ses, false, "a");
              operand(x.vec, Rect{0, 1, x.rows * ses, 0}, false, ses, "row vector");
              tile(x.dst, des, true, "dst");
              break;
          }
        }
      },
      r.op);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Data effects

namespace {

// Row of n elements to/from doubles.
void load_row(const uint8_t* p, ir::DTypeCode t, int64_t n, double* out) {
  switch (t) {
    case ir::DTypeCode::f32:
      for (int64_t i = 0; i < n; ++i) { float v; std::memcpy(&v, p + 4 * i, 4); out[i] = v; }
      return;
    case ir::DTypeCode::f16:
      for (int64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, p + 2 * i, 2); out[i] = num::f16_to_f32(h); }
      return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = num::load(p + i * es_of(t), t);
  }
}
void store_row(uint8_t* p, ir::DTypeCode t, int64_t n, const double* in, RoundMode m = RoundMode::Rint) {
  if (m == RoundMode::Rint || m == RoundMode::None) {
    if (t == ir::DTypeCode::f32) {
      for (int64_t i = 0; i < n; ++i) { float v = static_cast<float>(in[i]); std::memcpy(p + 4 * i, &v, 4); }
      return;
    }
    if (t == ir::DTypeCode::f16) {
      for (int64_t i = 0; i < n; ++i) { uint16_t h = num::f32_to_f16(static_cast<float>(in[i])); std::memcpy(p + 2 * i, &h, 2); }
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) num::store(p + i * es_of(t), t, in[i], m);
}

double binop(VecBinOp op, double a, double b, bool is_int) {
  switch (op) {
    case VecBinOp::Add: return a + b;
    case VecBinOp::Sub: return a - b;
    case VecBinOp::Mul: return a * b;
    case VecBinOp::Div: return is_int ? (b == 0 ? 0 : std::trunc(a / b)) : a / b;
    case VecBinOp::Max: return std::max(a, b);
    case VecBinOp::Min: return std::min(a, b);
  }
  return 0;
}

void apply_bin(VecBinOp op, double* a, const double* b, int64_t n, bool is_int) {
  switch (op) {
    case VecBinOp::Add: for (int64_t i = 0; i < n; ++i) a[i] += b[i]; break;
    case VecBinOp::Sub: for (int64_t i = 0; i < n; ++i) a[i] -= b[i]; break;
    case VecBinOp::Mul: for (int64_t i = 0; i < n; ++i) a[i] *= b[i]; break;
    default: for (int64_t i = 0; i < n; ++i) a[i] = binop(op, a[i], b[i], is_int); break;
  }
}

// float32 rounding of an fp32 operation computed in double (exact for + - * / sqrt: 53 >= 2*24+2)
inline double unop(VecUnOp op, double x) {
  switch (op) {
    case VecUnOp::Exp: return std::exp(x);
    case VecUnOp::Ln: return std::log(x);
    case VecUnOp::Sqrt: return std::sqrt(x);
    case VecUnOp::Rsqrt: return 1.0 / std::sqrt(x);
    case VecUnOp::Abs: return std::fabs(x);
    case VecUnOp::Relu: return x > 0 ? x : 0.0;
    case VecUnOp::Reciprocal: return 1.0 / x;
  }
  return 0;
}

}  // namespace

void Machine::functional(Core& c, const RInstr& r) {
  thread_local std::vector<double> ra, rb;
  thread_local std::vector<float> fa, fb, fc;
  thread_local std::vector<int32_t> ia, ib, ic;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, RCopyGmToL1>) {
          int es = es_of(x.dt), c0 = 32 / es;
          const uint8_t* src = base(c, x.src).data + x.src.off;
          uint8_t* dst = base(c, x.dst).data + x.dst.off;
          std::memset(dst, 0, static_cast<size_t>(x.dst_rows * x.dst_cols * es));
          int64_t strips = cdiv(x.cols, c0);
          for (int64_t rr = 0; rr < x.rows; ++rr) {
            const uint8_t* s = src + rr * x.src_row_stride * es;
            for (int64_t j = 0; j < strips; ++j) {
              int64_t n = std::min<int64_t>(c0, x.cols - j * c0);
              std::memcpy(dst + ((j * x.dst_rows + rr) * c0) * es, s + j * c0 * es, static_cast<size_t>(n * es));
            }
          }
        } else if constexpr (std::is_same_v<T, RBurst>) {
          const uint8_t* src = base(c, x.src).data + x.src.off;
          uint8_t* dst = base(c, x.dst).data + x.dst.off;
          int64_t dummy = x.pad == RBurst::kExact ? 0 : rup(x.row_bytes, 32) - x.row_bytes;
          for (int64_t i = 0; i < x.n_rows; ++i) {
            std::memmove(dst + i * x.dst_stride, src + i * x.src_stride, static_cast<size_t>(x.row_bytes));
            // DataCopyPad's bytes up to the next 32 B: zeros when padded, else unspecified values,
            // modelled as large garbage of alternating sign per row so a kernel that reads them
            // gets visibly wrong sums, maxima and minima
            if (dummy > 0)
              std::memset(dst + i * x.dst_stride + x.row_bytes, x.pad == RBurst::kZero ? 0 : (i % 2 ? 0xFB : 0x7B),
                          static_cast<size_t>(dummy));
          }
        } else if constexpr (std::is_same_v<T, RLoadL0>) {
          int es = es_of(x.dt), c0 = 32 / es;
          const uint8_t* S = base(c, x.src).data + x.src.off;
          uint8_t* D = base(c, x.dst).data + x.dst.off;
          bool to_a = prog.buffers[x.dst.index].mem == Mem::L0A;
          auto nz = [&](int64_t rr, int64_t cc) { return nz_off(rr, cc, x.src_rows, c0); };
          if (to_a) {
            int64_t K1 = x.dst_cols / c0;
            auto zz = [&](int64_t m, int64_t k) { return zz_off(m, k, K1, c0); };
            if (!x.transpose) {
              for (int64_t i = 0; i < x.dst_rows; ++i)
                for (int64_t j = 0; j < x.dst_cols; j += c0)
                  std::memcpy(D + zz(i, j) * es, S + nz(x.src_row + i, x.src_col + j) * es, 32);
            } else {
              for (int64_t i = 0; i < x.dst_rows; ++i)
                for (int64_t j = 0; j < x.dst_cols; ++j)
                  std::memcpy(D + zz(i, j) * 2, S + nz(x.src_row + j, x.src_col + i) * 2, 2);
            }
          } else {
            int64_t N1 = x.dst_cols / 16;
            auto zn = [&](int64_t k, int64_t n) { return zn_off(k, n, N1, c0); };
            if (!x.transpose) {  // D[k][n] = S[r0 + n][c0 + k]
              for (int64_t n = 0; n < x.dst_cols; ++n)
                for (int64_t k = 0; k < x.dst_rows; k += c0)
                  std::memcpy(D + zn(k, n) * es, S + nz(x.src_row + n, x.src_col + k) * es, 32);
            } else {  // D[k][n] = S[r0 + k][c0 + n]
              for (int64_t k = 0; k < x.dst_rows; ++k) {
                const uint8_t* srow = S + nz(x.src_row + k, x.src_col) * es;
                for (int64_t n = 0; n < x.dst_cols; ++n)
                  std::memcpy(D + zn(k, n) * es, srow + ((n / c0) * x.src_rows * c0 + n % c0) * es, static_cast<size_t>(es));
              }
            }
          }
        } else if constexpr (std::is_same_v<T, RMmad>) {
          int es = es_of(x.in), c0 = 32 / es;
          const uint8_t* A = base(c, x.a).data + x.a.off;
          const uint8_t* B = base(c, x.b).data + x.b.off;
          uint8_t* C = base(c, x.c).data + x.c.off;
          int64_t m = x.m, n = x.n, k = x.k, K1 = cdiv(k, c0), N1 = cdiv(n, 16), Mp = rup(m, 16);
          auto zz = [&](int64_t i, int64_t kk) { return zz_off(i, kk, K1, c0); };
          auto zn = [&](int64_t kk, int64_t j) { return zn_off(kk, j, N1, c0); };
          auto lc = [&](int64_t i, int64_t j) { return nz_off(i, j, Mp, 16); };
          if (x.in == ir::DTypeCode::i8) {
            ia.resize(m * k), ib.resize(k * n), ic.resize(m * n);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t kk = 0; kk < k; ++kk) ia[i * k + kk] = static_cast<int8_t>(A[zz(i, kk)]);
            for (int64_t kk = 0; kk < k; ++kk)
              for (int64_t j = 0; j < n; ++j) ib[kk * n + j] = static_cast<int8_t>(B[zn(kk, j)]);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                int32_t v = 0;
                if (!x.init) std::memcpy(&v, C + lc(i, j) * 4, 4);
                ic[i * n + j] = v;
              }
            for (int64_t i = 0; i < m; ++i) {
              int32_t* crow = &ic[i * n];
              for (int64_t kk = 0; kk < k; ++kk) {
                int32_t a = ia[i * k + kk];
                const int32_t* brow = &ib[kk * n];
                for (int64_t j = 0; j < n; ++j) crow[j] += a * brow[j];
              }
            }
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) std::memcpy(C + lc(i, j) * 4, &ic[i * n + j], 4);
            return;
          }
          fa.resize(m * k), fb.resize(k * n), fc.resize(m * n);
          auto ld = [&](const uint8_t* p, int64_t idx) -> float {
            if (x.in == ir::DTypeCode::f32) { float v; std::memcpy(&v, p + idx * 4, 4); return v; }
            uint16_t h; std::memcpy(&h, p + idx * 2, 2);
            return x.in == ir::DTypeCode::f16 ? num::f16_to_f32(h) : num::bf16_to_f32(h);
          };
          for (int64_t i = 0; i < m; ++i)
            for (int64_t kk = 0; kk < k; ++kk) fa[i * k + kk] = ld(A, zz(i, kk));
          for (int64_t kk = 0; kk < k; ++kk)
            for (int64_t j = 0; j < n; ++j) fb[kk * n + j] = ld(B, zn(kk, j));
          for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t w = std::min<int64_t>(16, n - j0);
            for (int64_t i = 0; i < m; ++i) {
              float* d = &fc[i * n + j0];
              if (x.init) std::fill(d, d + w, 0.f);
              else std::memcpy(d, C + lc(i, j0) * 4, static_cast<size_t>(w * 4));
            }
          }
          for (int64_t i = 0; i < m; ++i) {
            float* crow = &fc[i * n];
            for (int64_t kk = 0; kk < k; ++kk) {
              float a = fa[i * k + kk];
              const float* brow = &fb[kk * n];
              for (int64_t j = 0; j < n; ++j) crow[j] += a * brow[j];
            }
          }
          for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t w = std::min<int64_t>(16, n - j0);
            for (int64_t i = 0; i < m; ++i) std::memcpy(C + lc(i, j0) * 4, &fc[i * n + j0], static_cast<size_t>(w * 4));
          }
        } else if constexpr (std::is_same_v<T, RFixpipe>) {
          const uint8_t* S = base(c, x.src).data + x.src.off;
          uint8_t* D = base(c, x.dst).data + x.dst.off;
          int es = es_of(x.to);
          int64_t Mp = x.src_rows;
          for (int64_t i = 0; i < x.m; ++i) {
            uint8_t* drow = D + i * x.dst_row_stride * es;
            for (int64_t j = 0; j < x.n; ++j) {
              const uint8_t* s = S + nz_off(i, j, Mp, 16) * 4;
              if (x.from == ir::DTypeCode::i32) {
                int32_t v;
                std::memcpy(&v, s, 4);
                if (x.relu && v < 0) v = 0;
                num::store(drow + j * es, x.to, static_cast<double>(v));
                continue;
              }
              float v;
              std::memcpy(&v, s, 4);
              if (x.relu && v < 0) v = 0;
              if (x.to == ir::DTypeCode::f16) {
                uint16_t h = num::f32_to_f16(v);
                std::memcpy(drow + j * 2, &h, 2);
              } else if (x.to == ir::DTypeCode::bf16) {
                uint16_t h = num::f32_to_bf16(v);
                std::memcpy(drow + j * 2, &h, 2);
              } else {
                num::store(drow + j * es, x.to, v);
              }
            }
          }
        } else if constexpr (std::is_same_v<T, RVec>) {
          int des = es_of(x.dt), ses = es_of(x.src_dt);
          bool is_int = !ir::DType(x.dt).is_float();
          auto ptr = [&](const RVecOperand& o, int64_t row, int es) { return base(c, o.at).data + o.at.off + row * o.stride * es; };
          ra.resize(std::max<int64_t>(x.cols, x.rows));
          rb.resize(std::max<int64_t>(x.cols, x.rows));
          switch (x.kind) {
            case RVec::Binary:
              for (int64_t i = 0; i < x.rows; ++i) {
                load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                load_row(ptr(x.b, i, ses), x.src_dt, x.cols, rb.data());
                apply_bin(static_cast<VecBinOp>(x.op), ra.data(), rb.data(), x.cols, is_int);
                store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data());
              }
              break;
            case RVec::Scalar: {
              // the scalar is first converted to the operand type (as AscendC's T scalarValue)
              uint8_t tmp[8];
              num::store(tmp, x.dt, x.scalar);
              double sc = num::load(tmp, x.dt);
              for (int64_t i = 0; i < x.rows; ++i) {
                load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                for (int64_t j = 0; j < x.cols; ++j) ra[j] = binop(static_cast<VecBinOp>(x.op), ra[j], sc, is_int);
                store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data());
              }
              break;
            }
            case RVec::Unary:
              for (int64_t i = 0; i < x.rows; ++i) {
                load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                auto op = static_cast<VecUnOp>(x.op);
                for (int64_t j = 0; j < x.cols; ++j) ra[j] = unop(op, ra[j]);
                store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data());
              }
              break;
            case RVec::Cast:
              for (int64_t i = 0; i < x.rows; ++i) {
                load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data(), x.round);
              }
              break;
            case RVec::Dup:
              std::fill(ra.begin(), ra.begin() + x.cols, x.scalar);
              for (int64_t i = 0; i < x.rows; ++i) store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data());
              break;
            case RVec::Reduce: {
              auto op = static_cast<ReduceOp>(x.op);
              // a sum rounded to the element type (WholeReduceSum / Add on fp16: saturating)
              auto rnd = [&](float v) {
                if (x.dt != ir::DTypeCode::f16) return v;
                return std::clamp(num::f16_to_f32(num::f32_to_f16(v)), -65504.f, 65504.f);
              };
              auto comb = [&](float a, float b) { return op == ReduceOp::Sum ? rnd(a + b) : op == ReduceOp::Max ? std::max(a, b) : std::min(a, b); };
              // WholeReduceSum over n values: adjacent pairs, level by level (program.h, VecReduce)
              auto tree = [&](std::vector<float>& v) {
                for (size_t n = v.size(); n > 1; n = (n + 1) / 2)
                  for (size_t k = 0; k < n; k += 2) v[k / 2] = k + 1 < n ? comb(v[k], v[k + 1]) : v[k];
                return v.empty() ? 0.f : v[0];
              };
              uint8_t* dst = base(c, x.dst.at).data + x.dst.at.off;
              if (x.axis == ReduceAxis::Row) {
                const int64_t P = 256 / ses;
                std::vector<float> part, chunk;
                for (int64_t i = 0; i < x.rows; ++i) {
                  load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                  part.clear();
                  for (int64_t j0 = 0; j0 < x.cols; j0 += P) {
                    chunk.assign(ra.begin() + j0, ra.begin() + std::min(x.cols, j0 + P));
                    part.push_back(tree(chunk));
                  }
                  rb[i] = tree(part);
                }
                store_row(dst, x.dt, x.rows, rb.data());
              } else {
                std::vector<float> acc(x.cols);
                for (int64_t i = 0; i < x.rows; ++i) {
                  load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                  for (int64_t j = 0; j < x.cols; ++j) acc[j] = i == 0 ? static_cast<float>(ra[j]) : comb(acc[j], static_cast<float>(ra[j]));
                }
                for (int64_t j = 0; j < x.cols; ++j) rb[j] = acc[j];
                store_row(dst, x.dt, x.cols, rb.data());
              }
              break;
            }
            case RVec::RowBcast: {
              const uint8_t* vec = base(c, x.vec).data + x.vec.off;
              for (int64_t i = 0; i < x.rows; ++i) {
                double v = num::load(vec + i * ses, x.src_dt);
                load_row(ptr(x.a, i, ses), x.src_dt, x.cols, ra.data());
                for (int64_t j = 0; j < x.cols; ++j) ra[j] = binop(static_cast<VecBinOp>(x.op), ra[j], v, is_int);
                store_row(ptr(x.dst, i, des), x.dt, x.cols, ra.data());
              }
              break;
            }
          }
        }
      },
      r.op);
}

}  // namespace tw::ascend::sim
