// Tests of the CPU code generator (src/target/cpu/codegen.cpp): IR kernels are built with the
// ir.h builders, lowered to C++, compiled with the host compiler into a shared object, loaded,
// run block by block and compared with a naive reference computed here.
#include "target/cpu/codegen.h"
#include "target/cpu/fuse_map_copy_out.h"
#include "target/cpu/fuse_map_reduce.h"
#include "target/cpu/pipeline_rows.h"
#include "target/cpu/view_gemm_operands.h"
#include "target/cpu/view_rows.h"
#include "runtime/cpu_executable.h"
#include "runtime/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <memory>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#include <type_traits>

#include "tw_cpu/abi.h"
#include "tw_cpu/types.h"

extern char** environ;

namespace {

using namespace tw::ir;

// codegen_cpu after the decision passes of lower_cpu that it carries out (fusions, views)
std::string decided_codegen(const Kernel& k, bool bounds_check = false) {
  using namespace tw::cpu;
  return codegen_cpu(view_rows(view_gemm_operands(pipeline_rows(fuse_map_reduce(fuse_map_copy_out(k))))), bounds_check);
}

// ---------------------------------------------------------------------------------------------
// IR construction helpers

Expr I(int64_t v) { return int_imm(v); }
Expr F(double v) { return float_imm(v); }
Expr operator+(const Expr& a, const Expr& b) { return binary(BinOp::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return binary(BinOp::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return binary(BinOp::Mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return binary(BinOp::Div, a, b); }
// (comparisons are named: operator< on shared_ptr would pick the standard library's)
Expr lt(const Expr& a, const Expr& b) { return binary(BinOp::LT, a, b); }
Expr gt(const Expr& a, const Expr& b) { return binary(BinOp::GT, a, b); }
Expr operator&&(const Expr& a, const Expr& b) { return binary(BinOp::And, a, b); }
Expr eq(const Expr& a, const Expr& b) { return binary(BinOp::EQ, a, b); }
Expr ceildiv(const Expr& a, const Expr& b) { return binary(BinOp::CeilDiv, a, b); }
Expr floordiv(const Expr& a, const Expr& b) { return binary(BinOp::FloorDiv, a, b); }
Expr mod(const Expr& a, const Expr& b) { return binary(BinOp::Mod, a, b); }
Expr ld(const Buffer& b, std::vector<Expr> i) { return load(b, std::move(i)); }

Span at(int line) { return Span{"", line, 1}; }
Stmt seq(std::vector<Stmt> b) { return std::make_shared<SeqNode>(std::move(b), Span{}); }
Stmt alloc(const Buffer& b) { return std::make_shared<AllocNode>(b, b->span); }
Stmt loop(const Var& v, Expr ext, ForKind k, Stmt body, int stages = 0) {
  return std::make_shared<ForNode>(v, I(0), std::move(ext), k, stages, std::move(body), Span{});
}
Stmt copy(Region s, Region d, int line = 0) { return std::make_shared<CopyNode>(std::move(s), std::move(d), at(line)); }
Stmt gemm(Region a, Region b, Region c, bool ta, bool tb, bool clear, int line = 0) {
  return std::make_shared<GemmNode>(std::move(a), std::move(b), std::move(c), ta, tb, clear, at(line));
}
Stmt fill(Region d, Expr v) { return std::make_shared<FillNode>(std::move(d), std::move(v), Span{}); }
Stmt reduce(const Buffer& s, const Buffer& d, ReduceKind k, int axis, bool clear) {
  return std::make_shared<ReduceNode>(s, d, k, axis, clear, Span{});
}
Stmt store(const Buffer& b, std::vector<Expr> i, Expr v) {
  return std::make_shared<StoreNode>(b, std::move(i), std::move(v), Span{});
}
Stmt if_(Expr c, Stmt t, Stmt e = nullptr) { return std::make_shared<IfNode>(std::move(c), std::move(t), std::move(e), Span{}); }
Stmt let(const Var& v, Expr x) { return std::make_shared<LetNode>(v, std::move(x), Span{}); }
Region region(const Buffer& b, std::vector<Expr> starts, std::vector<int64_t> ext) {
  Region r{b, std::move(starts), {}};
  for (int64_t e : ext) r.extents.push_back(I(e));
  return r;
}
Param tensor(const Buffer& b, bool out = false) { return Param{b, nullptr, out}; }
Param scalar(const Var& v) { return Param{nullptr, v, false}; }
Kernel kernel(std::string name, std::vector<Param> p, std::vector<Var> bv, std::vector<Expr> grid, Stmt body) {
  return std::make_shared<KernelNode>(std::move(name), std::move(p), std::move(bv), std::move(grid), std::move(body),
                                      Span{});
}

// The explicit-style matmul: grid (ceildiv(N, bn), ceildiv(M, bm)); C[M, N] = A[M, K] * B[K, N].
Kernel make_matmul(DType in, DType out, int64_t bm, int64_t bn, int64_t bk) {
  auto M = var("M"), N = var("N"), K = var("K");
  auto A = buffer("A", in, {M, K}, Scope::global);
  auto B = buffer("B", in, {K, N}, Scope::global);
  auto C = buffer("C", out, {M, N}, Scope::global);
  auto bx = var("bx"), by = var("by"), k = var("k");
  auto As = buffer("A_shared", in, {I(bm), I(bk)}, Scope::shared);
  auto Bs = buffer("B_shared", in, {I(bk), I(bn)}, Scope::shared);
  auto Cl = buffer("C_local", DTypeCode::f32, {I(bm), I(bn)}, Scope::fragment);
  Stmt body = seq({
      alloc(As), alloc(Bs), alloc(Cl),
      fill(full_region(Cl), F(0)),
      loop(k, ceildiv(K, I(bk)), ForKind::pipelined,
           seq({copy(region(A, {by * I(bm), k * I(bk)}, {bm, bk}), full_region(As), 11),
                copy(region(B, {k * I(bk), bx * I(bn)}, {bk, bn}), full_region(Bs), 12),
                gemm(full_region(As), full_region(Bs), full_region(Cl), false, false, false, 13)}),
           3),
      copy(full_region(Cl), region(C, {by * I(bm), bx * I(bn)}, {bm, bn}), 14),
  });
  return kernel("matmul", {tensor(A), tensor(B), tensor(C, true)}, {bx, by},
                {ceildiv(N, I(bn)), ceildiv(M, I(bm))}, body);
}

// ---------------------------------------------------------------------------------------------
// Build and run

std::string repo_dir() { return TW_SOURCE_DIR; }  // absolute (CMake), whatever the working directory

int run_argv(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Library {
  void* handle = nullptr;
  tw_grid_fn grid = nullptr;
  tw_block_fn block = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

// Compiles `source` the way the runtime does and loads it.
std::unique_ptr<Library> build(const std::string& source, const std::string& tag) {
  char tmpl[] = "/tmp/tw_test_cpu_codegen_XXXXXX";
  const char* made = mkdtemp(tmpl);
  EXPECT_NE(made, nullptr);
  if (!made) return nullptr;
  std::string dir = made;
  std::string cpp = dir + "/" + tag + ".cpp", so = dir + "/" + tag + ".so", log = dir + "/" + tag + ".log";
  std::ofstream(cpp) << source;
  std::vector<std::string> argv{"g++"};
  for (const auto& f : tw::runtime::default_compile_flags()) argv.push_back(f);
  argv.push_back("-I" + repo_dir() + "/src/target/cpu/include");
  argv.insert(argv.end(), {"-o", so, cpp});
  // kernels that call tw_cpu::gemm link against the gemm runtime library (loaded into this
  // process by gemm_runtime_library()), as the runtime's compile does
  if (source.find(tw::cpu::kGemmCall) != std::string::npos) argv.push_back(tw::runtime::gemm_runtime_library());
  int rc = run_argv(argv, log);
  EXPECT_EQ(rc, 0) << "compiling " << cpp << " failed:\n" << slurp(log);
  if (rc != 0) return nullptr;
  auto lib = std::make_unique<Library>();
  lib->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib->handle, nullptr) << dlerror();
  if (!lib->handle) return nullptr;
  auto version = reinterpret_cast<tw_abi_version_fn>(dlsym(lib->handle, "tw_abi_version"));
  lib->grid = reinterpret_cast<tw_grid_fn>(dlsym(lib->handle, "tw_grid"));
  lib->block = reinterpret_cast<tw_block_fn>(dlsym(lib->handle, "tw_block"));
  EXPECT_TRUE(version && lib->grid && lib->block);
  if (!version || !lib->grid || !lib->block) return nullptr;
  EXPECT_EQ(version(), TW_CPU_ABI_VERSION);
  for (const auto& f : {cpp, so, log}) unlink(f.c_str());  // kept only when something failed
  rmdir(dir.c_str());                                      // succeeds once the last one is gone
  return lib;
}

// Shape variables in the kernel's order, looked up by name.
std::vector<int64_t> shape_values(const Kernel& k, const std::vector<std::pair<std::string, int64_t>>& named) {
  std::vector<int64_t> out;
  for (const auto& v : k->shape_vars()) {
    bool found = false;
    for (const auto& [n, x] : named)
      if (n == v->name) { out.push_back(x); found = true; }
    EXPECT_TRUE(found) << "no value for shape variable " << v->name;
  }
  return out;
}

// Runs every block serially; returns the grid extents.
std::vector<int64_t> run_all(const Library& lib, std::vector<void*> params, const std::vector<int64_t>& svars) {
  TwArgs a{params.data(), svars.data()};
  int64_t ext[3] = {0, 0, 0};
  lib.grid(&a, ext);
  for (int64_t z = 0; z < ext[2]; ++z)
    for (int64_t y = 0; y < ext[1]; ++y)
      for (int64_t x = 0; x < ext[0]; ++x) lib.block(&a, x, y, z);
  return {ext[0], ext[1], ext[2]};
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

int64_t floordiv_ref(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
int64_t floormod_ref(int64_t a, int64_t b) { return a - floordiv_ref(a, b) * b; }

// ---------------------------------------------------------------------------------------------
// Tests

TEST(CpuCodegen, MatmulFloat32WithTails) {
  const int64_t M = 1000, N = 777, K = 513;
  Kernel k = make_matmul(DTypeCode::f32, DTypeCode::f32, 128, 128, 64);
  auto lib = build(decided_codegen(k), "matmul_f32");
  ASSERT_TRUE(lib);
  auto A = random_floats(M * K, 1), B = random_floats(K * N, 2);
  std::vector<float> C(M * N, std::nanf(""));
  auto ext = run_all(*lib, {A.data(), B.data(), C.data()}, shape_values(k, {{"M", M}, {"N", N}, {"K", K}}));
  EXPECT_EQ(ext, (std::vector<int64_t>{7, 8, 1}));
  std::vector<double> ref(N);
  for (int64_t i = 0; i < M; ++i) {
    std::fill(ref.begin(), ref.end(), 0.0);
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t j = 0; j < N; ++j) ref[j] += double(A[i * K + kk]) * B[kk * N + j];
    for (int64_t j = 0; j < N; ++j) ASSERT_NEAR(C[i * N + j], ref[j], 2e-4) << "at " << i << "," << j;
  }
}

TEST(CpuCodegen, MatmulFloat16Inputs) {
  const int64_t M = 70, N = 45, K = 100;  // every block has tails, K = 64 + 36
  Kernel k = make_matmul(DTypeCode::f16, DTypeCode::f16, 32, 32, 64);
  auto lib = build(decided_codegen(k), "matmul_f16");
  ASSERT_TRUE(lib);
  auto Af = random_floats(M * K, 3), Bf = random_floats(K * N, 4);
  std::vector<tw_cpu::f16> A(M * K), B(K * N), C(M * N, tw_cpu::f16{0x7e00});
  for (size_t i = 0; i < A.size(); ++i) A[i] = tw_cpu::convert<tw_cpu::f16>(Af[i]);
  for (size_t i = 0; i < B.size(); ++i) B[i] = tw_cpu::convert<tw_cpu::f16>(Bf[i]);
  run_all(*lib, {A.data(), B.data(), C.data()}, shape_values(k, {{"M", M}, {"N", N}, {"K", K}}));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double r = 0;
      for (int64_t kk = 0; kk < K; ++kk)
        r += double(tw_cpu::convert<float>(A[i * K + kk])) * tw_cpu::convert<float>(B[kk * N + j]);
      float want = tw_cpu::convert<float>(tw_cpu::convert<tw_cpu::f16>(float(r)));  // one RNE rounding
      ASSERT_NEAR(tw_cpu::convert<float>(C[i * N + j]), want, 1e-3 + 1e-3 * std::fabs(want)) << i << "," << j;
    }
}

// Row softmax: one tile of bm rows x W columns per block (W >= L), padding masked with where().
Kernel make_softmax(int64_t bm, int64_t W) {
  auto R = var("R"), L = var("L");
  auto X = buffer("X", DTypeCode::f32, {R, L}, Scope::global);
  auto Y = buffer("Y", DTypeCode::f32, {R, L}, Scope::global);
  auto by = var("by"), i = var("i"), j = var("j");
  auto Xt = buffer("X_tile", DTypeCode::f32, {I(bm), I(W)}, Scope::fragment);
  auto mx = buffer("row_max", DTypeCode::f32, {I(bm)}, Scope::fragment);
  auto sm = buffer("row_sum", DTypeCode::f32, {I(bm)}, Scope::fragment);
  auto par = [&](Stmt body) {
    return loop(i, I(bm), ForKind::parallel, loop(j, I(W), ForKind::parallel, std::move(body)));
  };
  Stmt body = seq({
      alloc(Xt), alloc(mx), alloc(sm),
      copy(region(X, {by * I(bm), I(0)}, {bm, W}), full_region(Xt)),
      par(store(Xt, {i, j}, select(lt(j, L), ld(Xt, {i, j}), F(-INFINITY)))),
      reduce(Xt, mx, ReduceKind::max, 1, true),
      par(store(Xt, {i, j}, select(lt(j, L), call(MathFn::exp, {ld(Xt, {i, j}) - ld(mx, {i})}), F(0)))),
      reduce(Xt, sm, ReduceKind::sum, 1, true),
      par(store(Xt, {i, j}, ld(Xt, {i, j}) / ld(sm, {i}))),
      copy(full_region(Xt), region(Y, {by * I(bm), I(0)}, {bm, W})),
  });
  return kernel("softmax", {tensor(X), tensor(Y, true)}, {by}, {ceildiv(R, I(bm))}, body);
}

void check_softmax(int64_t R, int64_t L, int64_t bm, int64_t W) {
  Kernel k = make_softmax(bm, W);
  auto lib = build(decided_codegen(k), "softmax_" + std::to_string(L) + "_" + std::to_string(W));
  ASSERT_TRUE(lib);
  auto X = random_floats(R * L, 5, -8.0f, 8.0f);
  std::vector<float> Y(R * L, std::nanf(""));
  auto ext = run_all(*lib, {X.data(), Y.data()}, shape_values(k, {{"R", R}, {"L", L}}));
  EXPECT_EQ(ext[0], (R + bm - 1) / bm);
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < L; ++c) m = std::max(m, double(X[r * L + c]));
    for (int64_t c = 0; c < L; ++c) s += std::exp(double(X[r * L + c]) - m);
    for (int64_t c = 0; c < L; ++c) {
      double want = std::exp(double(X[r * L + c]) - m) / s;
      ASSERT_NEAR(Y[r * L + c], want, 1e-6 + 2e-5 * want) << "row " << r << " col " << c;
    }
  }
}

TEST(CpuCodegen, SoftmaxRowsOfLengthOne) { check_softmax(7, 1, 4, 1); }         // unit dims dropped
TEST(CpuCodegen, SoftmaxRowsOfLengthOnePadded) { check_softmax(7, 1, 4, 16); }  // column tail
TEST(CpuCodegen, SoftmaxLongRows) { check_softmax(5, 4097, 2, 4104); }          // row and column tails

// int8 gemm (B transposed) into int32, If on the first k step (clear vs accumulate), Let, Select,
// Cast, scalar params, floordiv / mod with negative operands, an int32 row reduction.
TEST(CpuCodegen, Int8GemmIfLetSelectCast) {
  const int64_t bm = 32, bn = 16, bk = 32;
  auto M = var("M"), N = var("N"), K = var("K");
  auto A = buffer("A", DTypeCode::i8, {M, K}, Scope::global);
  auto B = buffer("B", DTypeCode::i8, {N, K}, Scope::global);
  auto C = buffer("C", DTypeCode::f32, {M, N}, Scope::global);
  auto D = buffer("D", DTypeCode::i32, {M, N}, Scope::global);
  auto RS = buffer("rowsum", DTypeCode::i32, {M, ceildiv(N, I(bn))}, Scope::global);
  auto scale = var("scale", DTypeCode::f32), off = var("off", DTypeCode::i32);
  auto bx = var("bx"), by = var("by"), k = var("k"), i = var("i"), j = var("j"), r = var("r");
  auto row0 = var("row0"), col0 = var("col0"), v = var("v", DTypeCode::f32);
  auto As = buffer("A_s", DTypeCode::i8, {I(bm), I(bk)}, Scope::shared);
  auto Bs = buffer("B_s", DTypeCode::i8, {I(bn), I(bk)}, Scope::shared);
  auto acc = buffer("acc", DTypeCode::i32, {I(bm), I(bn)}, Scope::fragment);
  auto rs = buffer("rs", DTypeCode::i32, {I(bm)}, Scope::fragment);
  Expr a_ij = ld(acc, {i, j});
  Stmt body = seq({
      alloc(As), alloc(Bs), alloc(acc), alloc(rs),
      loop(k, ceildiv(K, I(bk)), ForKind::serial,
           seq({copy(region(A, {by * I(bm), k * I(bk)}, {bm, bk}), full_region(As)),
                copy(region(B, {bx * I(bn), k * I(bk)}, {bn, bk}), full_region(Bs)),
                if_(eq(k, I(0)), gemm(full_region(As), full_region(Bs), full_region(acc), false, true, true),
                    gemm(full_region(As), full_region(Bs), full_region(acc), false, true, false))})),
      let(row0, by * I(bm)),
      let(col0, bx * I(bn)),
      loop(i, I(bm), ForKind::parallel,
           loop(j, I(bn), ForKind::parallel,
                seq({let(v, cast(a_ij, DTypeCode::f32) * scale),
                     if_(lt(row0 + i, M) && lt(col0 + j, N),
                         seq({store(C, {row0 + i, col0 + j}, select(gt(v, F(0)), v, v * F(0.25))),
                              store(D, {row0 + i, col0 + j},
                                    floordiv(col0 + j - off, I(3)) * I(1000) + mod(a_ij, I(7)) +
                                        cast(cast(a_ij, DTypeCode::i8), DTypeCode::i32))}))}))),
      reduce(acc, rs, ReduceKind::sum, 1, true),
      loop(r, I(bm), ForKind::serial, if_(lt(row0 + r, M), store(RS, {row0 + r, bx}, ld(rs, {r})))),
  });
  Kernel kern = kernel("int8_gemm", {tensor(A), tensor(B), scalar(scale), tensor(C, true), tensor(D, true),
                                     scalar(off), tensor(RS, true)},
                       {bx, by}, {ceildiv(N, I(bn)), ceildiv(M, I(bm))}, body);
  std::string src = decided_codegen(kern);
  auto lib = build(src, "int8_gemm");
  ASSERT_TRUE(lib);

  const int64_t m = 70, n = 37, kk = 77, nb = (n + bn - 1) / bn;
  std::mt19937 g(7);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> a(m * kk), b(n * kk);
  for (auto& x : a) x = static_cast<int8_t>(d(g));
  for (auto& x : b) x = static_cast<int8_t>(d(g));
  float sc = 0.125f;
  int32_t of = 5;
  std::vector<float> c(m * n, std::nanf(""));
  std::vector<int32_t> dd(m * n, -1), rsum(m * nb, -1);
  run_all(*lib, {a.data(), b.data(), &sc, c.data(), dd.data(), &of, rsum.data()},
          shape_values(kern, {{"M", m}, {"N", n}, {"K", kk}}));
  for (int64_t ii = 0; ii < m; ++ii) {
    std::vector<int64_t> blk(nb, 0);
    for (int64_t jj = 0; jj < n; ++jj) {
      int64_t s = 0;
      for (int64_t q = 0; q < kk; ++q) s += int64_t(a[ii * kk + q]) * b[jj * kk + q];
      blk[jj / bn] += s;
      float fv = float(s) * sc;
      ASSERT_EQ(c[ii * n + jj], fv > 0 ? fv : fv * 0.25f) << ii << "," << jj;
      int64_t want = floordiv_ref(jj - of, 3) * 1000 + floormod_ref(s, 7) + int8_t(s);
      ASSERT_EQ(dd[ii * n + jj], want) << ii << "," << jj;
    }
    for (int64_t q = 0; q < nb; ++q) ASSERT_EQ(rsum[ii * nb + q], blk[q]) << "rowsum " << ii << "," << q;
  }
}

// Column max over a loop of row tiles: fill -inf, reduce over axis 0 merging into the
// accumulator, out-of-range rows masked with where(), result stored as bfloat16 through copy.
TEST(CpuCodegen, ColumnMaxReduceMergeAxis0) {
  const int64_t br = 8, bc = 32;
  auto R = var("R"), Cn = var("C");
  auto X = buffer("X", DTypeCode::f32, {R, Cn}, Scope::global);
  auto O = buffer("O", DTypeCode::bf16, {Cn}, Scope::global);
  auto bx = var("bx"), t = var("t"), i = var("i"), j = var("j");
  auto Xt = buffer("X_tile", DTypeCode::f32, {I(br), I(bc)}, Scope::fragment);
  auto cm = buffer("col_max", DTypeCode::f32, {I(bc)}, Scope::fragment);
  Stmt body = seq({
      alloc(Xt), alloc(cm),
      fill(full_region(cm), F(-INFINITY)),
      loop(t, ceildiv(R, I(br)), ForKind::serial,
           seq({copy(region(X, {t * I(br), bx * I(bc)}, {br, bc}), full_region(Xt)),
                loop(i, I(br), ForKind::parallel,
                     loop(j, I(bc), ForKind::parallel,
                          store(Xt, {i, j}, select(lt(t * I(br) + i, R), ld(Xt, {i, j}), F(-INFINITY))))),
                reduce(Xt, cm, ReduceKind::max, 0, false)})),
      copy(full_region(cm), region(O, {bx * I(bc)}, {bc})),
  });
  Kernel k = kernel("colmax", {tensor(X), tensor(O, true)}, {bx}, {ceildiv(Cn, I(bc))}, body);
  auto lib = build(decided_codegen(k), "colmax");
  ASSERT_TRUE(lib);
  const int64_t rows = 21, cols = 45;
  auto x = random_floats(rows * cols, 9, -5.0f, -1.0f);  // all negative: zero padding would win
  std::vector<tw_cpu::bf16> o(cols + 3, tw_cpu::bf16{0x1234});
  run_all(*lib, {x.data(), o.data()}, shape_values(k, {{"R", rows}, {"C", cols}}));
  for (int64_t c = 0; c < cols; ++c) {
    float m = -INFINITY;
    for (int64_t r = 0; r < rows; ++r) m = std::max(m, x[r * cols + c]);
    EXPECT_EQ(o[c].bits, tw_cpu::convert<tw_cpu::bf16>(m).bits) << "col " << c;
  }
  for (int64_t c = cols; c < cols + 3; ++c) EXPECT_EQ(o[c].bits, 0x1234) << "wrote past the end";
}

// A 1 x 128 row of a 2-D tensor copied into a 1-D tile from a start that can be negative
// (Y[r, c] = 2 * X[r, c - 3], zeros shifted in), and a fill of a global region with tails.
TEST(CpuCodegen, ShiftedRowCopyAndGlobalFill) {
  const int64_t bn = 128;
  auto R = var("R"), N = var("N");
  auto X = buffer("X", DTypeCode::f32, {R, N}, Scope::global);
  auto Y = buffer("Y", DTypeCode::f32, {R, N}, Scope::global);
  auto Z = buffer("Z", DTypeCode::i32, {R, N}, Scope::global);
  auto bx = var("bx"), by = var("by"), j = var("j");
  auto row = buffer("row", DTypeCode::f32, {I(bn)}, Scope::fragment);
  Stmt body = seq({
      alloc(row),
      copy(region(X, {by, bx * I(bn) - I(3)}, {1, bn}), full_region(row)),
      loop(j, I(bn), ForKind::parallel, store(row, {j}, ld(row, {j}) * F(2))),
      copy(full_region(row), region(Y, {by, bx * I(bn)}, {1, bn})),
      fill(region(Z, {by, bx * I(bn)}, {1, bn}), I(7)),
  });
  Kernel k = kernel("shift", {tensor(X), tensor(Y, true), tensor(Z, true)}, {bx, by},
                    {ceildiv(N, I(bn)), R}, body);
  auto lib = build(decided_codegen(k), "shift");
  ASSERT_TRUE(lib);
  const int64_t rows = 3, cols = 300;
  auto x = random_floats(rows * cols, 11);
  std::vector<float> y(rows * cols + 5, -1.0f);
  std::vector<int32_t> z(rows * cols + 5, -1);
  auto ext = run_all(*lib, {x.data(), y.data(), z.data()}, shape_values(k, {{"R", rows}, {"N", cols}}));
  EXPECT_EQ(ext, (std::vector<int64_t>{3, 3, 1}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float want = c >= 3 ? 2 * x[r * cols + c - 3] : 0.0f;
      ASSERT_EQ(y[r * cols + c], want) << r << "," << c;
      ASSERT_EQ(z[r * cols + c], 7) << r << "," << c;
    }
  for (int64_t i = rows * cols; i < rows * cols + 5; ++i) {
    EXPECT_EQ(y[i], -1.0f) << "wrote past the end";
    EXPECT_EQ(z[i], -1) << "wrote past the end";
  }
}

// Every math function in float32 (tw_cpu:: functions) and float64 (builtins), with an unroll loop.
void check_math(DType t) {
  const int64_t n = 64;
  auto L = var("L");
  auto X = buffer("X", t, {L}, Scope::global);
  auto Y = buffer("Y", t, {I(13), L}, Scope::global);
  auto i = var("i");
  auto xt = buffer("x_tile", t, {I(n)}, Scope::fragment);
  std::vector<Stmt> body{alloc(xt), copy(region(X, {I(0)}, {n}), full_region(xt))};
  for (int f = 0; f < 13; ++f) {
    Expr x = ld(xt, {i});
    std::vector<Expr> args{x};
    if (static_cast<MathFn>(f) == MathFn::pow) args.push_back(float_imm(1.5, t));
    body.push_back(loop(i, I(n), f == 1 ? ForKind::unroll : ForKind::parallel,
                        if_(lt(i, L), store(Y, {I(f), i}, call(static_cast<MathFn>(f), args)))));
  }
  Kernel k = kernel("math", {tensor(X), tensor(Y, true)}, {}, {}, seq(body));
  auto lib = build(decided_codegen(k), std::string("math_") + std::string(t.name()));
  ASSERT_TRUE(lib);
  auto xf = random_floats(n, 13, 0.1f, 3.0f);
  xf[0] = -1.25f;  // floor / ceil / abs of a negative
  std::vector<double> xd(xf.begin(), xf.end());
  std::vector<float> yf(13 * n);
  std::vector<double> yd(13 * n);
  bool f64 = t.code == DTypeCode::f64;
  auto ext = run_all(*lib, {f64 ? (void*)xd.data() : (void*)xf.data(), f64 ? (void*)yd.data() : (void*)yf.data()},
                     shape_values(k, {{"L", n}}));
  EXPECT_EQ(ext, (std::vector<int64_t>{1, 1, 1}));
  for (int64_t j = 0; j < n; ++j) {
    double x = f64 ? xd[j] : xf[j];
    double want[13] = {std::exp(x), std::exp2(x), std::log(x), std::log2(x), std::sqrt(x), 1 / std::sqrt(x),
                       std::fabs(x), std::tanh(x), std::erf(x), 1 / (1 + std::exp(-x)), std::floor(x), std::ceil(x),
                       std::pow(x, 1.5)};
    for (int f = 0; f < 13; ++f) {
      double got = f64 ? yd[f * n + j] : yf[f * n + j];
      if (std::isnan(want[f])) {
        EXPECT_TRUE(std::isnan(got)) << mathfn_name(static_cast<MathFn>(f)) << "(" << x << ")";
        continue;
      }
      double tol = f64 ? 1e-12 : 2e-6;
      EXPECT_NEAR(got, want[f], tol * (1 + std::fabs(want[f]))) << mathfn_name(static_cast<MathFn>(f)) << "(" << x << ")";
    }
  }
}
TEST(CpuCodegen, MathFunctionsFloat32) { check_math(DTypeCode::f32); }
TEST(CpuCodegen, MathFunctionsFloat64) { check_math(DTypeCode::f64); }

// gemm on sub-regions: A read straight from a global tensor (transposed, from row 8), B a
// transposed tile, C a column window of a wider fragment (pointer offsets, leading dims).
TEST(CpuCodegen, GemmOnSubRegionsAndGlobal) {
  auto At = buffer("At", DTypeCode::f32, {I(40), I(24)}, Scope::global);  // [K0, M]
  auto Bg = buffer("Bg", DTypeCode::f32, {I(48), I(32)}, Scope::global);  // [N, K]
  auto Cg = buffer("Cg", DTypeCode::f32, {I(24), I(64)}, Scope::global);
  auto Bs = buffer("B_s", DTypeCode::f32, {I(48), I(32)}, Scope::shared);
  auto Cl = buffer("C_l", DTypeCode::f32, {I(24), I(64)}, Scope::fragment);
  Stmt body = seq({
      alloc(Bs), alloc(Cl),
      copy(full_region(Bg), full_region(Bs)),
      fill(full_region(Cl), F(0)),
      gemm(region(At, {I(8), I(0)}, {32, 24}), full_region(Bs), region(Cl, {I(0), I(8)}, {24, 48}), true, true, true),
      copy(full_region(Cl), full_region(Cg)),
  });
  Kernel k = kernel("gemm_regions", {tensor(At), tensor(Bg), tensor(Cg, true)}, {}, {}, body);
  std::string src = decided_codegen(k);
  // B_s's live extents bound N and K; C = A * B on a shrunk N clears C first, then accumulates
  EXPECT_NE(src.find("const bool tw_gshrunk = tw_gm < 24 || tw_gn < 48;"), std::string::npos) << src;
  EXPECT_NE(src.find("tw_cpu::gemm(tw_gm, tw_gn, (B_s_cols < 32 ? B_s_cols : 32), (At + 192), 24, true, B_s_p, B_s_ld, true, "
                     "(C_l + 8), 64, /*accumulate=*/tw_gshrunk, /*a_stable=*/false, /*b_stable=*/B_s_p != B_s);"),
            std::string::npos)
      << src;
  auto lib = build(src, "gemm_regions");
  ASSERT_TRUE(lib);
  auto a = random_floats(40 * 24, 21), b = random_floats(48 * 32, 22);
  std::vector<float> c(24 * 64, std::nanf(""));
  run_all(*lib, {a.data(), b.data(), c.data()}, {});
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 64; ++j) {
      double want = 0;
      if (j >= 8 && j < 56)
        for (int q = 0; q < 32; ++q) want += double(a[(8 + q) * 24 + i]) * b[(j - 8) * 32 + q];
      ASSERT_NEAR(c[i * 64 + j], want, 1e-5) << i << "," << j;
    }
}

// The generated source of a small kernel has the expected structure.
TEST(CpuCodegen, GeneratedSourceShape) {
  std::string src = decided_codegen(make_matmul(DTypeCode::f32, DTypeCode::f32, 64, 64, 32));
  for (const char* want :
       {"#include <tw_cpu/abi.h>", "#include <tw_cpu/tw_cpu.h>", "extern \"C\" int tw_abi_version(void)",
        "extern \"C\" void tw_grid(const TwArgs* tw_args, int64_t tw_ext[3])",
        "extern \"C\" void tw_block(const TwArgs* tw_args, int64_t tw_bx, int64_t tw_by, int64_t tw_bz)",
        "alignas(64) float A_shared[2048];", "alignas(64) float C_local[4096];",
        // the accumulator computed in place in C's window (@gemm_out), the first gemm overwriting
        "const int64_t tw_gm = (C_local_rows < (A_shared_rows < 64 ? A_shared_rows : 64) ? C_local_rows : "
        "(A_shared_rows < 64 ? A_shared_rows : 64));",
        "const bool tw_gshrunk = C_local_fresh && (tw_gm < C_local_rows || tw_gn < C_local_cols);",
        "tw_cpu::gemm(tw_gm, tw_gn, "
        "(B_shared_rows < (A_shared_cols < 32 ? A_shared_cols : 32) ? B_shared_rows : (A_shared_cols < 32 ? A_shared_cols : 32)), "
        "A_shared_p, A_shared_ld, false, B_shared_p, B_shared_ld, false, C_local_p, C_local_ld, "
        "/*accumulate=*/!C_local_fresh || tw_gshrunk, /*a_stable=*/A_shared_p != A_shared, /*b_stable=*/B_shared_p != B_shared, "
        "/*b_col=*/B_shared_col, /*b_width=*/B_shared_width);",
        "C_local_p = C + tw_db;", "C_local_fresh = false;", "copy C_local -> C: computed in place by its gemms",
        "B_shared_col = tw_s1; B_shared_width = N;", "B_shared_col = B_shared_rows > 0 && B_shared_cols > 0 ? (int64_t)(tw_s1) : -1; B_shared_width = N;",
        "tw_cpu::new_launch();",
        "A_shared_p = A + tw_sb;", "A_shared_p = A_shared;",
        "// fast path", "// masked path", "// elided: the gemm reads the live part of A in place",
        "A_shared_p = A_shared_rows > 0 && A_shared_cols > 0 ? A + tw_sb : A_shared;", "// line 11: copy A -> A_shared",
        "// line 13: gemm", "// pipelined(num_stages=3)", "float* __restrict A = (float*)tw_args->params[0];",
        "const int64_t M = tw_args->shape_vars[0];"})
    EXPECT_NE(src.find(want), std::string::npos) << "missing: " << want << "\n" << src;
  for (const char* banned : {"<iostream>", "<vector>", "<cmath>", "std::"})
    EXPECT_EQ(src.find(banned), std::string::npos) << "found: " << banned;
  EXPECT_EQ(src, decided_codegen(make_matmul(DTypeCode::f32, DTypeCode::f32, 64, 64, 32))) << "not deterministic";
}

// Copy elision for gemm operands: tiles written only by one copy from a global tensor and read
// only by gemm become (pointer, ld) views of the tensor in the copy's fast path; the masked path
// (tails) still copies. A: [M, K] (or [K, M] when ta), B: [K, N] (or [N, K] when tb).
Kernel make_matmul_elide(DType in, DType acc, int64_t bm, int64_t bn, int64_t bk, bool ta, bool tb, bool read_a_elsewhere) {
  auto M = var("M"), N = var("N"), K = var("K");
  auto A = ta ? buffer("A", in, {K, M}, Scope::global) : buffer("A", in, {M, K}, Scope::global);
  auto B = tb ? buffer("B", in, {N, K}, Scope::global) : buffer("B", in, {K, N}, Scope::global);
  auto C = buffer("C", acc, {M, N}, Scope::global);
  auto bx = var("bx"), by = var("by"), k = var("k");
  auto As = ta ? buffer("A_shared", in, {I(bk), I(bm)}, Scope::shared) : buffer("A_shared", in, {I(bm), I(bk)}, Scope::shared);
  auto Bs = tb ? buffer("B_shared", in, {I(bn), I(bk)}, Scope::shared) : buffer("B_shared", in, {I(bk), I(bn)}, Scope::shared);
  auto Cl = buffer("C_local", acc, {I(bm), I(bn)}, Scope::fragment);
  Region ra = ta ? region(A, {k * I(bk), by * I(bm)}, {bk, bm}) : region(A, {by * I(bm), k * I(bk)}, {bm, bk});
  Region rb = tb ? region(B, {bx * I(bn), k * I(bk)}, {bn, bk}) : region(B, {k * I(bk), bx * I(bn)}, {bk, bn});
  std::vector<Stmt> kbody{copy(ra, full_region(As)), copy(rb, full_region(Bs)),
                          gemm(full_region(As), full_region(Bs), full_region(Cl), ta, tb, false)};
  // C_local[0, 0] += 0 * A_shared[0, 0]: A_shared is then read outside gemm -> no elision
  Expr zero = acc.is_int() ? I(0) : F(0);
  if (read_a_elsewhere)
    kbody.push_back(store(Cl, {I(0), I(0)}, ld(Cl, {I(0), I(0)}) + cast(ld(As, {I(0), I(0)}), acc) * zero));
  Stmt body = seq({
      alloc(As), alloc(Bs), alloc(Cl),
      fill(full_region(Cl), zero),
      loop(k, ceildiv(K, I(bk)), ForKind::pipelined, seq(kbody), 2),
      copy(full_region(Cl), region(C, {by * I(bm), bx * I(bn)}, {bm, bn})),
  });
  return kernel("matmul_elide", {tensor(A), tensor(B), tensor(C, true)}, {bx, by},
                {ceildiv(N, I(bn)), ceildiv(M, I(bm))}, body);
}

template <class T, class TC>
void check_elided_matmul(DType in, DType acc, int64_t M, int64_t N, int64_t K, int64_t bm, int64_t bn, int64_t bk,
                         bool ta, bool tb, bool read_a_elsewhere) {
  SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << " blocks " << bm << "/" << bn << "/" << bk
                                  << " ta=" << ta << " tb=" << tb << " read_a_elsewhere=" << read_a_elsewhere);
  Kernel k = make_matmul_elide(in, acc, bm, bn, bk, ta, tb, read_a_elsewhere);
  std::string src = decided_codegen(k);
  EXPECT_EQ(src.find("A_shared_p = A + tw_sb;") != std::string::npos, !read_a_elsewhere) << src;
  EXPECT_NE(src.find("B_shared_p = B + tw_sb;"), std::string::npos) << src;
  auto lib = build(src, "matmul_elide");
  ASSERT_TRUE(lib);
  std::mt19937 g(M * 7 + N * 3 + K);
  std::uniform_int_distribution<int> d(-9, 9);
  auto gen = [&](std::vector<T>& v, std::vector<double>& vd) {
    for (size_t i = 0; i < v.size(); ++i) {
      int x = d(g);
      if constexpr (std::is_same_v<T, int8_t>) v[i] = static_cast<int8_t>(x * 14);
      else v[i] = tw_cpu::convert<T>(static_cast<float>(x) * 0.125f);
      if constexpr (std::is_same_v<T, int8_t>) vd[i] = v[i];
      else vd[i] = tw_cpu::convert<float>(v[i]);
    }
  };
  std::vector<T> A(M * K), B(K * N);
  std::vector<double> Ad(M * K), Bd(K * N);
  gen(A, Ad);
  gen(B, Bd);
  std::vector<TC> C(M * N, TC(-77));
  run_all(*lib, {A.data(), B.data(), C.data()}, shape_values(k, {{"M", M}, {"N", N}, {"K", K}}));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t q = 0; q < K; ++q)
        want += (ta ? Ad[q * M + i] : Ad[i * K + q]) * (tb ? Bd[j * K + q] : Bd[q * N + j]);
      const double tol = std::is_same_v<TC, float> ? 1e-3 : 0.0;
      ASSERT_NEAR(double(C[i * N + j]), want, tol) << i << "," << j;
    }
  // a second launch on new contents of the same A memory (packed-A reuse is per launch)
  std::vector<TC> C1 = C;
  for (auto& v : A) {
    if constexpr (std::is_same_v<T, int8_t>) v = static_cast<int8_t>(-v);
    else v = tw_cpu::convert<T>(-tw_cpu::convert<float>(v));
  }
  run_all(*lib, {A.data(), B.data(), C.data()}, shape_values(k, {{"M", M}, {"N", N}, {"K", K}}));
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(double(C[i]), -double(C1[i])) << "second launch, element " << i;
}

TEST(CpuCodegen, ElidedGemmCopiesFloat32) {
  // exact multiples (fast path only) and tails in every dimension (masked path on the edges)
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 64, 96, 128, 32, 32, 64, false, false, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 70, 45, 100, 32, 32, 64, false, false, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 130, 131, 77, 128, 128, 64, false, false, false);
}
TEST(CpuCodegen, ElidedGemmCopiesTransposed) {
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 70, 45, 100, 32, 32, 64, true, false, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 70, 45, 100, 32, 32, 64, false, true, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 33, 65, 47, 16, 32, 16, true, true, false);
}
TEST(CpuCodegen, ElidedGemmCopiesHalfTypes) {
  check_elided_matmul<tw_cpu::f16, float>(DTypeCode::f16, DTypeCode::f32, 70, 45, 100, 32, 32, 64, false, false, false);
  check_elided_matmul<tw_cpu::bf16, float>(DTypeCode::bf16, DTypeCode::f32, 70, 45, 100, 32, 32, 64, false, true, false);
  check_elided_matmul<tw_cpu::bf16, float>(DTypeCode::bf16, DTypeCode::f32, 64, 64, 64, 32, 32, 32, true, false, false);
}
TEST(CpuCodegen, ElidedGemmCopiesInt8) {
  check_elided_matmul<int8_t, int32_t>(DTypeCode::i8, DTypeCode::i32, 70, 45, 100, 32, 32, 64, false, false, false);
  check_elided_matmul<int8_t, int32_t>(DTypeCode::i8, DTypeCode::i32, 40, 50, 61, 16, 32, 32, true, true, false);
}
TEST(CpuCodegen, GemmTileReadElsewhereIsNotElided) {
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 70, 45, 100, 32, 32, 64, false, false, true);
  check_elided_matmul<int8_t, int32_t>(DTypeCode::i8, DTypeCode::i32, 40, 50, 61, 16, 32, 32, false, false, true);
}
// Skinny tiles (M = 1 and M = 16 rows) through the elided path, including a column tail.
TEST(CpuCodegen, ElidedGemmSkinny) {
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 1, 300, 257, 1, 128, 128, false, false, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 16, 300, 257, 16, 256, 256, false, false, false);
  check_elided_matmul<float, float>(DTypeCode::f32, DTypeCode::f32, 3, 100, 70, 1, 64, 64, true, false, false);
}

// A tile whose source tensor is written by the kernel is not elided (the data could change).
TEST(CpuCodegen, GemmTileFromWrittenTensorIsNotElided) {
  auto A = buffer("A", DTypeCode::f32, {I(16), I(16)}, Scope::global);
  auto As = buffer("A_s", DTypeCode::f32, {I(16), I(16)}, Scope::shared);
  auto C = buffer("C", DTypeCode::f32, {I(16), I(16)}, Scope::fragment);
  Kernel k = kernel("w", {tensor(A, true)}, {}, {},
                    seq({alloc(As), alloc(C), copy(full_region(A), full_region(As)),
                         fill(full_region(A), F(0)),
                         gemm(full_region(As), full_region(As), full_region(C), false, false, true),
                         copy(full_region(C), full_region(A))}));
  std::string src = decided_codegen(k);
  EXPECT_EQ(src.find("A_s_p"), std::string::npos) << src;
  auto lib = build(src, "written");
  ASSERT_TRUE(lib);
  auto a = random_floats(256, 9);
  auto a0 = a;
  run_all(*lib, {a.data()}, {});
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = 0;
      for (int q = 0; q < 16; ++q) want += double(a0[i * 16 + q]) * a0[q * 16 + j];
      ASSERT_NEAR(a[i * 16 + j], want, 1e-5);
    }
}

// Copies of tiles into a large (>= 8 MiB) global tensor use streaming stores; rows here start
// 4 bytes past a vector boundary (a head, the vector body and a tail per row).
TEST(CpuCodegen, StreamingStoresIntoLargeOutput) {
  const int64_t R = 2048, W = 1025, bm = 8;
  auto X = buffer("X", DTypeCode::f32, {I(R), I(W - 1)}, Scope::global);
  auto Y = buffer("Y", DTypeCode::f32, {I(R), I(W)}, Scope::global);
  auto t = buffer("t", DTypeCode::f32, {I(bm), I(W - 1)}, Scope::fragment);
  auto by = var("by");
  Kernel k = kernel("stream", {tensor(X), tensor(Y, true)}, {by}, {I(R / bm)},
                    seq({alloc(t), copy(region(X, {by * I(bm), I(0)}, {bm, W - 1}), full_region(t)),
                         copy(full_region(t), region(Y, {by * I(bm), I(1)}, {bm, W - 1}))}));
  std::string src = decided_codegen(k);
  EXPECT_NE(src.find("tw_cpu::simd::stream_copy("), std::string::npos) << src;
  auto lib = build(src, "stream");
  ASSERT_TRUE(lib);
  auto x = random_floats(R * (W - 1), 31);
  std::vector<float> y(R * W, -5.0f);
  run_all(*lib, {x.data(), y.data()}, {});
  for (int64_t i = 0; i < R; ++i) {
    ASSERT_EQ(y[i * W], -5.0f) << i;
    for (int64_t j = 1; j < W; ++j) ASSERT_EQ(y[i * W + j], x[i * (W - 1) + j - 1]) << i << "," << j;
  }
}

// A T.Parallel map into a tile followed by the copy of the whole tile out is one pass (rows
// computed in chunks, stored straight to the output, streaming stores when large): aligned and
// unaligned output rows, rows a multiple of the chunk or not, a tail block (the map and copy as
// written). With the tile read after the copy there is no fusion.
Kernel make_map_copy_out(int64_t R, int64_t W, int64_t bm, int64_t col0, bool read_after) {
  auto X = buffer("X", DTypeCode::f32, {I(R), I(W)}, Scope::global);
  auto Y = buffer("Y", DTypeCode::f32, {I(R), I(W + col0)}, Scope::global);
  auto Z = buffer("Z", DTypeCode::f32, {I(R), I(W)}, Scope::global);
  auto t = buffer("t", DTypeCode::f32, {I(bm), I(W)}, Scope::fragment);
  auto by = var("by"), i = var("i"), j = var("j");
  std::vector<Stmt> body{alloc(t), copy(region(X, {by * I(bm), I(0)}, {bm, W}), full_region(t)),
                         loop(i, I(bm), ForKind::parallel,
                              loop(j, I(W), ForKind::parallel, store(t, {i, j}, ld(t, {i, j}) * F(2) + F(1)))),
                         copy(full_region(t), region(Y, {by * I(bm), I(col0)}, {bm, W}))};
  if (read_after) body.push_back(copy(full_region(t), region(Z, {by * I(bm), I(0)}, {bm, W})));
  return kernel("map_out", {tensor(X), tensor(Y, true), tensor(Z, true)}, {by}, {ceildiv(I(R), I(bm))}, seq(body));
}

void check_map_copy_out(int64_t R, int64_t W, int64_t bm, int64_t col0, bool read_after) {
  std::string src = decided_codegen(make_map_copy_out(R, W, bm, col0, read_after));
  EXPECT_EQ(src.find("fused with copy") != std::string::npos, !read_after) << src;
  auto lib = build(src, "map_out_" + std::to_string(R) + "_" + std::to_string(W) + "_" + std::to_string(col0) +
                            (read_after ? "_r" : ""));
  ASSERT_TRUE(lib);
  auto x = random_floats(R * W, 41);
  std::vector<float> y(R * (W + col0), -5.0f), z(R * W, -7.0f);
  run_all(*lib, {x.data(), y.data(), z.data()}, {});
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < col0; ++c) ASSERT_EQ(y[r * (W + col0) + c], -5.0f) << r;
    for (int64_t c = 0; c < W; ++c) {
      float want = x[r * W + c] * 2.0f + 1.0f;
      ASSERT_EQ(y[r * (W + col0) + col0 + c], want) << r << "," << c;
      ASSERT_EQ(z[r * W + c], read_after ? want : -7.0f) << r << "," << c;
    }
  }
}

TEST(CpuCodegen, MapCopyOutFusedStreamingAligned) { check_map_copy_out(2048, 1024, 8, 0, false); }
TEST(CpuCodegen, MapCopyOutFusedStreamingUnaligned) { check_map_copy_out(2048, 1000, 8, 1, false); }
TEST(CpuCodegen, MapCopyOutFusedTailBlock) { check_map_copy_out(37, 100, 8, 0, false); }
TEST(CpuCodegen, MapCopyOutNotFusedWhenTileReadAfter) { check_map_copy_out(37, 100, 8, 0, true); }

// Row kernels read their input tile in place (row_view_tiles): y = x / rowsum(x) with a row
// reduction and a map reading the tile through the view (and prefetching the next block's rows). Not when the kernel writes the source
// tensor (in place: X is the output), nor when the tile is reduced over its first axis.
void check_row_view(int64_t R, int64_t W, int64_t bm, bool in_place, bool col_reduce) {
  auto X = buffer("X", DTypeCode::f32, {I(R), I(W)}, Scope::global);
  auto Y = buffer("Y", DTypeCode::f32, {I(R), I(W)}, Scope::global);
  auto t = buffer("t", DTypeCode::f32, {I(bm), I(W)}, Scope::fragment);
  auto rs = buffer("rs", DTypeCode::f32, {I(bm)}, Scope::fragment);
  auto cs = buffer("cs", DTypeCode::f32, {I(W)}, Scope::fragment);
  auto by = var("by"), i = var("i"), j = var("j");
  const Buffer& out = in_place ? X : Y;
  std::vector<Stmt> body{alloc(t), alloc(rs), alloc(cs), copy(region(X, {by * I(bm), I(0)}, {bm, W}), full_region(t)),
                         reduce(t, rs, ReduceKind::sum, 1, true)};
  if (col_reduce) body.push_back(reduce(t, cs, ReduceKind::max, 0, true));
  body.push_back(loop(i, I(bm), ForKind::parallel,
                      loop(j, I(W), ForKind::parallel, store(t, {i, j}, ld(t, {i, j}) / ld(rs, {i})))));
  body.push_back(copy(full_region(t), region(out, {by * I(bm), I(0)}, {bm, W})));
  std::vector<Param> params{tensor(X, in_place)};
  if (!in_place) params.push_back(tensor(Y, true));
  Kernel k = kernel("row_view", params, {by}, {ceildiv(I(R), I(bm))}, seq(body));
  std::string src = decided_codegen(k);
  // a reduce over either axis reads the view (the column reduce four rows per pass)
  EXPECT_EQ(src.find("is only read (loads, reductions)") != std::string::npos, !in_place) << src;
  if (col_reduce) EXPECT_NE(src.find("tw_p3 = t_p + "), std::string::npos) << src;
  // the pass ending the view prefetches the next block's rows
  EXPECT_EQ(src.find("__builtin_prefetch(t_next") != std::string::npos, !in_place) << src;
  auto lib = build(src, "row_view_" + std::to_string(R) + "_" + std::to_string(W) + (in_place ? "_ip" : "") +
                            (col_reduce ? "_cr" : ""));
  ASSERT_TRUE(lib);
  auto x = random_floats(R * W, 43, 0.5f, 2.0f);
  auto x0 = x;
  std::vector<float> y(R * W, -5.0f);
  if (in_place) run_all(*lib, {x.data()}, {});
  else run_all(*lib, {x.data(), y.data()}, {});
  const std::vector<float>& got = in_place ? x : y;
  for (int64_t r = 0; r < R; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < W; ++c) sum += x0[r * W + c];
    for (int64_t c = 0; c < W; ++c) ASSERT_NEAR(got[r * W + c], x0[r * W + c] / sum, 1e-5 / W) << r << "," << c;
  }
}

TEST(CpuCodegen, RowViewReadsInputInPlace) { check_row_view(37, 300, 8, false, false); }   // tail block
TEST(CpuCodegen, RowViewLongRowsStreaming) { check_row_view(2048, 1031, 4, false, false); }
TEST(CpuCodegen, RowViewNotWhenSourceWritten) { check_row_view(37, 300, 8, true, false); }
TEST(CpuCodegen, RowViewAlsoWhenReducedOverRows) { check_row_view(37, 300, 8, false, true); }

// A map reading the tensor its tile is copied into (here the next column of it) is not fused:
// the rows would be overwritten before the map has read them.
TEST(CpuCodegen, MapCopyOutNotFusedWhenMapReadsDestination) {
  const int64_t R = 16, W = 128, bm = 4;
  auto Y = buffer("Y", DTypeCode::f32, {I(R), I(W + 1)}, Scope::global);
  auto t = buffer("t", DTypeCode::f32, {I(bm), I(W)}, Scope::fragment);
  auto by = var("by"), i = var("i"), j = var("j");
  Kernel k = kernel("shift", {tensor(Y, true)}, {by}, {I(R / bm)},
                    seq({alloc(t),
                         loop(i, I(bm), ForKind::parallel,
                              loop(j, I(W), ForKind::parallel, store(t, {i, j}, ld(Y, {by * I(bm) + i, j + I(1)})))),
                         copy(full_region(t), region(Y, {by * I(bm), I(0)}, {bm, W}))}));
  std::string src = decided_codegen(k);
  EXPECT_EQ(src.find("fused with copy"), std::string::npos) << src;
  auto lib = build(src, "shift_left");
  ASSERT_TRUE(lib);
  auto y = random_floats(R * (W + 1), 47);
  auto y0 = y;
  run_all(*lib, {y.data()}, {});
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < W; ++c) ASSERT_EQ(y[r * (W + 1) + c], y0[r * (W + 1) + c + 1]) << r << "," << c;
}

TEST(CpuCodegen, UnsupportedGemmDtypesAreAnError) {
  auto A = buffer("A", DTypeCode::f16, {I(16), I(16)}, Scope::shared);
  auto B = buffer("B", DTypeCode::f32, {I(16), I(16)}, Scope::shared);
  auto C = buffer("C", DTypeCode::f32, {I(16), I(16)}, Scope::fragment);
  Kernel k = kernel("bad", {}, {}, {}, seq({alloc(A), alloc(B), alloc(C),
                                            gemm(full_region(A), full_region(B), full_region(C), false, false, true, 42)}));
  try {
    decided_codegen(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("gemm on the CPU supports"), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, 42);
  }
}

}  // namespace
