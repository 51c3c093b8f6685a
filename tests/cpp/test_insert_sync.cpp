// insert_sync: before/after golden tests on small programs, and the expert examples with their
// hand-written flags stripped, re-synchronised and run in the simulator with the checker.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ir/parser.h"
#include "target/ascend/insert_sync.h"
#include "target/ascend/pipeline.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

const target::Target& b2() { return target::find_target("ascend910b2"); }

// --- stripping and simulating ----------------------------------------------------------------

bool is_local_sync(const Instr& in) {
  return std::holds_alternative<SetFlag>(in.op) || std::holds_alternative<WaitFlag>(in.op) ||
         std::holds_alternative<PipeBarrier>(in.op);
}

bool empty(const StmtPtr& s) { return !s || (s->kind == StmtKind::Seq && s->body.empty()); }

// s without its flags and barriers (null when nothing is left); Ifs left empty disappear.
StmtPtr strip(const StmtPtr& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Seq: {
      std::vector<StmtPtr> body;
      for (const auto& c : s->body)
        if (auto x = strip(c)) body.push_back(x);
      return seq(std::move(body), s->span);
    }
    case StmtKind::For: return for_(s->var, s->value, strip(s->body.at(0)), s->span);
    case StmtKind::If: {
      auto t = strip(s->body.at(0)), e = strip(s->else_body);
      if (empty(t) && empty(e)) return nullptr;
      return if_(s->value, t ? t : seq({}), empty(e) ? nullptr : e, s->span);
    }
    case StmtKind::Instr: return is_local_sync(s->instr) ? nullptr : s;
    default: return s;
  }
}

// The program without SetFlag/WaitFlag/PipeBarrier (cross-core flags kept).
Program stripped(const Program& p) {
  Program q = p;
  q.aic = strip(p.aic);
  q.aiv = strip(p.aiv);
  return q;
}

int count(const StmtPtr& s, size_t alt) {
  if (!s) return 0;
  int n = s->kind == StmtKind::Instr && s->instr.op.index() == alt ? 1 : 0;
  for (const auto& c : s->body) n += count(c, alt);
  return n + count(s->else_body, alt);
}
int count(const Program& p, size_t alt) { return count(p.aic, alt) + count(p.aiv, alt); }
constexpr size_t kSet = 14, kWait = 15, kBarrier = 16;  // InstrOp alternatives

struct Run {
  sim::Result result;
  std::vector<std::vector<uint8_t>> data;
};

// Runs p with seeded random inputs (every tensor parameter, the same for the same seed).
Run simulate(const Program& p, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Run run;
  std::vector<sim::Arg> args;
  for (const auto& k : p.params) {
    int64_t n = 1;
    for (const auto& d : k.shape) n *= *ir::as_const_int(d);
    std::vector<uint8_t> bytes(n * k.dtype.bytes());
    for (int64_t i = 0; i < n; ++i) {
      float v = u(rng);
      if (k.dtype.bytes() == 2) {
        uint16_t h = sim::num::f32_to_f16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
    }
    run.data.push_back(std::move(bytes));
  }
  for (auto& d : run.data) args.push_back(sim::Arg{d.data(), static_cast<int64_t>(d.size()), 0});
  sim::Options o;
  o.check = true;
  run.result = sim::run(p, b2().ascend, args, {}, o);
  return run;
}

std::string reports(const sim::Result& r) {
  std::string s;
  for (const auto& x : r.reports) s += x.format() + "\n";
  return s;
}

Program expert_program(const char* text) {
  auto lowered = lower_ascend(ir::parse_kernel(text, "expert.tw"), b2());
  return *lowered.program;
}

// Hand-synced vs stripped + insert_sync: zero reports, identical results, simulated time.
void check_example(const char* name, const char* text, double max_ratio = 1.5) {
  Program hand = expert_program(text);
  Program aut = insert_sync(stripped(hand), b2());
  Run h = simulate(hand), a = simulate(aut);
  EXPECT_TRUE(h.result.reports.empty()) << name << " (hand):\n" << reports(h.result);
  EXPECT_TRUE(a.result.reports.empty()) << name << " (auto):\n" << reports(a.result) << print_program(aut);
  ASSERT_EQ(h.data.size(), a.data.size());
  for (size_t i = 0; i < h.data.size(); ++i) EXPECT_TRUE(h.data[i] == a.data[i]) << name << ": param " << i << " differs";
  std::printf("[insert_sync] %-14s hand %8lld cycles (%d set/wait, %d barriers)  auto %8lld cycles (%d set/wait, %d barriers)  ratio %.3f\n",
              name, static_cast<long long>(h.result.total_cycles), count(hand, kSet), count(hand, kBarrier),
              static_cast<long long>(a.result.total_cycles), count(aut, kSet), count(aut, kBarrier),
              static_cast<double>(a.result.total_cycles) / static_cast<double>(h.result.total_cycles));
  EXPECT_EQ(count(aut, kSet), count(aut, kWait)) << name;
  EXPECT_LE(a.result.total_cycles, max_ratio * h.result.total_cycles) << name << "\n" << print_program(aut);
}

// --- the expert examples' Tile IR (input stage), dumped from examples/ascend/*.py ---------
const char* const k_gemm_tails = R"IR(kernel main(A: global float16[200, 513], B: global float16[513, 300], C: global float16[200, 300] out)
    grid(cid = 4) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 256]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 256]
  alloc C_L0: L0C float32[128, 256]
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, ceildiv(4 - cid, 4)) {
      let tile: int32 = cid + t * 4
      let bx: int32 = tile // 2
      let by: int32 = tile % 2
      for k in serial(0, 3) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 256:+256] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+256] -> B_L0[s:+1, 0:+64, 0:+256]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      copy C_L0 -> C[bx * 128:+128, by * 256:+256]
      sync set_flag(FIX, M, 0)
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
}
)IR";

const char* const k_gemm_even = R"IR(kernel main(A: global float16[256, 1024], B: global float16[1024, 512], C: global float16[256, 512] out)
    grid(cid = 4) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 256]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 256]
  alloc C_L0: L0C float32[128, 256]
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, ceildiv(4 - cid, 4)) {
      let tile: int32 = cid + t * 4
      let bx: int32 = tile // 2
      let by: int32 = tile % 2
      for k in serial(0, 4) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 256:+256] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+256] -> B_L0[s:+1, 0:+64, 0:+256]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      copy C_L0 -> C[bx * 128:+128, by * 256:+256]
      sync set_flag(FIX, M, 0)
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
}
)IR";

const char* const k_softmax_pad = R"IR(kernel main(X: global float32[100, 1027], Y: global float32[100, 1027] out)
    grid(cid = 4) sub_block(vid) {
  alloc x: UB float32[16, 1032]
  alloc mx: UB float32[16]
  alloc sm: UB float32[16]
  scope V {
    let g: int32 = cid * 2 + vid
    sync set_flag(MTE3, V, 0)
    for t in serial(0, ceildiv(7 - g, 8)) {
      let row: int32 = (g + t * 8) * 16
      sync wait_flag(MTE3, V, 0)
      fill x = -inf
      sync set_flag(V, MTE2, 0)
      sync wait_flag(V, MTE2, 0)
      copy X[row:+16, 0:+1032] -> x
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      reduce max x -> mx axis=1 clear=true
      sync pipe_barrier(V)
      for i in parallel(0, 16) {
        for j in parallel(0, 1032) {
          x[i, j] = x[i, j] - mx[i]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 16) {
        for j_1 in parallel(0, 1032) {
          x[i_1, j_1] = exp(x[i_1, j_1])
        }
      }
      sync pipe_barrier(V)
      reduce sum x -> sm axis=1 clear=true
      sync pipe_barrier(V)
      for i_2 in parallel(0, 16) {
        for j_2 in parallel(0, 1032) {
          x[i_2, j_2] = x[i_2, j_2] / sm[i_2]
        }
      }
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy x -> Y[row:+16, 0:+1032]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

const char* const k_softmax_col1 = R"IR(kernel main(X: global float32[5, 1], Y: global float32[5, 1] out)
    grid(cid = 1) sub_block(vid) {
  alloc x: UB float32[16, 8]
  alloc mx: UB float32[16]
  alloc sm: UB float32[16]
  scope V {
    let g: int32 = cid * 2 + vid
    sync set_flag(MTE3, V, 0)
    for t in serial(0, ceildiv(1 - g, 2)) {
      let row: int32 = (g + t * 2) * 16
      sync wait_flag(MTE3, V, 0)
      fill x = -inf
      sync set_flag(V, MTE2, 0)
      sync wait_flag(V, MTE2, 0)
      copy X[row:+16, 0:+8] -> x
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      reduce max x -> mx axis=1 clear=true
      sync pipe_barrier(V)
      for i in parallel(0, 16) {
        for j in parallel(0, 8) {
          x[i, j] = x[i, j] - mx[i]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 16) {
        for j_1 in parallel(0, 8) {
          x[i_1, j_1] = exp(x[i_1, j_1])
        }
      }
      sync pipe_barrier(V)
      reduce sum x -> sm axis=1 clear=true
      sync pipe_barrier(V)
      for i_2 in parallel(0, 16) {
        for j_2 in parallel(0, 8) {
          x[i_2, j_2] = x[i_2, j_2] / sm[i_2]
        }
      }
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy x -> Y[row:+16, 0:+8]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

const char* const k_mmgelu_small = R"IR(kernel main(A: global float16[50, 17], B: global float16[17, 33], Bias: global float32[33], W: global float32[256, 128], Y: global float16[50, 33] out)
    grid(cid = 1) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 128]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 128]
  alloc C_L0: L0C float32[128, 128]
  alloc c: UB float32[64, 128]
  alloc u: UB float32[64, 128]
  alloc bt: UB float32[64, 128]
  alloc o: UB float16[64, 128]
  let n_t: int32 = 1 - cid
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, n_t) {
      let tile: int32 = cid + t
      let bx: int32 = tile
      let by: int32 = tile % 1
      let slot: int32 = t % 2
      for k in serial(0, 1) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 128:+128] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+128] -> B_L0[s:+1, 0:+64, 0:+128]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      if t >= 2 {
        sync wait_cross_flag(2 + slot, FIX)
      }
      copy C_L0 -> W[(cid * 2 + slot) * 128:+128, 0:+128]
      sync set_cross_flag(2, FIX, slot)
      sync set_flag(FIX, M, 0)
    }
    for j in unroll(0, 2) {
      if n_t - 2 + j >= 0 {
        sync wait_cross_flag(2 + (n_t - 2 + j) % 2)
      }
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
  scope V {
    sync set_flag(V, MTE2, 0)
    sync set_flag(MTE3, V, 0)
    for t_1 in serial(0, n_t) {
      let tile_1: int32 = cid + t_1
      let bx_1: int32 = tile_1
      let by_1: int32 = tile_1 % 1
      let slot_1: int32 = t_1 % 2
      sync wait_cross_flag(slot_1)
      sync wait_flag(V, MTE2, 0)
      copy W[(cid * 2 + slot_1) * 128 + vid * 64:+64, 0:+128] -> c
      copy Bias[by_1 * 128:+128] -> bt[0:+1, 0:+128]
      sync set_cross_flag(2, MTE2, 2 + slot_1)
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      copy bt[0:+1, 0:+128] -> bt[1:+1, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+2, 0:+128] -> bt[2:+2, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+4, 0:+128] -> bt[4:+4, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+8, 0:+128] -> bt[8:+8, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+16, 0:+128] -> bt[16:+16, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+32, 0:+128] -> bt[32:+32, 0:+128]
      sync pipe_barrier(V)
      for i in parallel(0, 64) {
        for j_1 in parallel(0, 128) {
          c[i, j_1] = c[i, j_1] + bt[i, j_1]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 64) {
        for j_2 in parallel(0, 128) {
          u[i_1, j_2] = c[i_1, j_2] * c[i_1, j_2]
        }
      }
      sync pipe_barrier(V)
      for i_2 in parallel(0, 64) {
        for j_3 in parallel(0, 128) {
          u[i_2, j_3] = u[i_2, j_3] * c[i_2, j_3]
        }
      }
      sync pipe_barrier(V)
      for i_3 in parallel(0, 64) {
        for j_4 in parallel(0, 128) {
          u[i_3, j_4] = u[i_3, j_4] * 0.044715
        }
      }
      sync pipe_barrier(V)
      for i_4 in parallel(0, 64) {
        for j_5 in parallel(0, 128) {
          u[i_4, j_5] = u[i_4, j_5] + c[i_4, j_5]
        }
      }
      sync pipe_barrier(V)
      for i_5 in parallel(0, 64) {
        for j_6 in parallel(0, 128) {
          u[i_5, j_6] = u[i_5, j_6] * -1.5957691216057308
        }
      }
      sync pipe_barrier(V)
      for i_6 in parallel(0, 64) {
        for j_7 in parallel(0, 128) {
          u[i_6, j_7] = exp(u[i_6, j_7])
        }
      }
      sync pipe_barrier(V)
      for i_7 in parallel(0, 64) {
        for j_8 in parallel(0, 128) {
          u[i_7, j_8] = u[i_7, j_8] + 1.0
        }
      }
      sync pipe_barrier(V)
      for i_8 in parallel(0, 64) {
        for j_9 in parallel(0, 128) {
          c[i_8, j_9] = c[i_8, j_9] / u[i_8, j_9]
        }
      }
      sync pipe_barrier(V)
      sync wait_flag(MTE3, V, 0)
      for i_9 in parallel(0, 64) {
        for j_10 in parallel(0, 128) {
          o[i_9, j_10] = cast<float16>(c[i_9, j_10])
        }
      }
      sync set_flag(V, MTE2, 0)
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy o -> Y[bx_1 * 128 + vid * 64:+64, by_1 * 128:+128]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(V, MTE2, 0)
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

const char* const k_mmgelu_tails = R"IR(kernel main(A: global float16[300, 520], B: global float16[520, 260], Bias: global float32[260], W: global float32[2304, 128], Y: global float16[300, 260] out)
    grid(cid = 9) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 128]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 128]
  alloc C_L0: L0C float32[128, 128]
  alloc c: UB float32[64, 128]
  alloc u: UB float32[64, 128]
  alloc bt: UB float32[64, 128]
  alloc o: UB float16[64, 128]
  let n_t: int32 = ceildiv(9 - cid, 9)
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, n_t) {
      let tile: int32 = cid + t * 9
      let bx: int32 = tile // 3
      let by: int32 = tile % 3
      let slot: int32 = t % 2
      for k in serial(0, 3) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 128:+128] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+128] -> B_L0[s:+1, 0:+64, 0:+128]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      if t >= 2 {
        sync wait_cross_flag(2 + slot, FIX)
      }
      copy C_L0 -> W[(cid * 2 + slot) * 128:+128, 0:+128]
      sync set_cross_flag(2, FIX, slot)
      sync set_flag(FIX, M, 0)
    }
    for j in unroll(0, 2) {
      if n_t - 2 + j >= 0 {
        sync wait_cross_flag(2 + (n_t - 2 + j) % 2)
      }
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
  scope V {
    sync set_flag(V, MTE2, 0)
    sync set_flag(MTE3, V, 0)
    for t_1 in serial(0, n_t) {
      let tile_1: int32 = cid + t_1 * 9
      let bx_1: int32 = tile_1 // 3
      let by_1: int32 = tile_1 % 3
      let slot_1: int32 = t_1 % 2
      sync wait_cross_flag(slot_1)
      sync wait_flag(V, MTE2, 0)
      copy W[(cid * 2 + slot_1) * 128 + vid * 64:+64, 0:+128] -> c
      copy Bias[by_1 * 128:+128] -> bt[0:+1, 0:+128]
      sync set_cross_flag(2, MTE2, 2 + slot_1)
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      copy bt[0:+1, 0:+128] -> bt[1:+1, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+2, 0:+128] -> bt[2:+2, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+4, 0:+128] -> bt[4:+4, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+8, 0:+128] -> bt[8:+8, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+16, 0:+128] -> bt[16:+16, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+32, 0:+128] -> bt[32:+32, 0:+128]
      sync pipe_barrier(V)
      for i in parallel(0, 64) {
        for j_1 in parallel(0, 128) {
          c[i, j_1] = c[i, j_1] + bt[i, j_1]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 64) {
        for j_2 in parallel(0, 128) {
          u[i_1, j_2] = c[i_1, j_2] * c[i_1, j_2]
        }
      }
      sync pipe_barrier(V)
      for i_2 in parallel(0, 64) {
        for j_3 in parallel(0, 128) {
          u[i_2, j_3] = u[i_2, j_3] * c[i_2, j_3]
        }
      }
      sync pipe_barrier(V)
      for i_3 in parallel(0, 64) {
        for j_4 in parallel(0, 128) {
          u[i_3, j_4] = u[i_3, j_4] * 0.044715
        }
      }
      sync pipe_barrier(V)
      for i_4 in parallel(0, 64) {
        for j_5 in parallel(0, 128) {
          u[i_4, j_5] = u[i_4, j_5] + c[i_4, j_5]
        }
      }
      sync pipe_barrier(V)
      for i_5 in parallel(0, 64) {
        for j_6 in parallel(0, 128) {
          u[i_5, j_6] = u[i_5, j_6] * -1.5957691216057308
        }
      }
      sync pipe_barrier(V)
      for i_6 in parallel(0, 64) {
        for j_7 in parallel(0, 128) {
          u[i_6, j_7] = exp(u[i_6, j_7])
        }
      }
      sync pipe_barrier(V)
      for i_7 in parallel(0, 64) {
        for j_8 in parallel(0, 128) {
          u[i_7, j_8] = u[i_7, j_8] + 1.0
        }
      }
      sync pipe_barrier(V)
      for i_8 in parallel(0, 64) {
        for j_9 in parallel(0, 128) {
          c[i_8, j_9] = c[i_8, j_9] / u[i_8, j_9]
        }
      }
      sync pipe_barrier(V)
      sync wait_flag(MTE3, V, 0)
      for i_9 in parallel(0, 64) {
        for j_10 in parallel(0, 128) {
          o[i_9, j_10] = cast<float16>(c[i_9, j_10])
        }
      }
      sync set_flag(V, MTE2, 0)
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy o -> Y[bx_1 * 128 + vid * 64:+64, by_1 * 128:+128]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(V, MTE2, 0)
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

TEST(InsertSyncExamples, GemmTails) { check_example("gemm_tails", k_gemm_tails); }
TEST(InsertSyncExamples, GemmEven) { check_example("gemm_even", k_gemm_even); }
TEST(InsertSyncExamples, SoftmaxPadded) { check_example("softmax_pad", k_softmax_pad); }
TEST(InsertSyncExamples, SoftmaxOneColumn) { check_example("softmax_col1", k_softmax_col1); }
TEST(InsertSyncExamples, MatmulGeluSmall) { check_example("mmgelu_small", k_mmgelu_small); }
TEST(InsertSyncExamples, MatmulGeluTails) { check_example("mmgelu_tails", k_mmgelu_tails); }

TEST(InsertSyncExamples, PrintAuto) {
  std::printf("%s\n", print_program(insert_sync(stripped(expert_program(k_gemm_tails)), b2())).c_str());
}

}  // namespace
}  // namespace tw::ascend
