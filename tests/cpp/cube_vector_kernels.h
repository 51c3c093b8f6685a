// Tile IR texts of two kernels that need both units, at each step of the Cube / Vector split:
// the before/after texts of test_split_cube_vector.cpp, test_skew_cube_loops.cpp and
// test_rotate_vector_loops.cpp (each pass's AFTER is the next one's BEFORE).
#pragma once

namespace tw::ascend::testing {

// examples/gelu_bias.py after infer_scope: gemm + vector epilogue.
inline constexpr const char* kGemmEpilogueInput = R"(kernel main(X: global float32[128, 64], W: global float32[64, 128], bias: global float32[128], Y: global float32[128, 128] out)
    grid(bx = 2, by = 2) {
  alloc x_s: L1 float32[64, 64]
  alloc w_s: L1 float32[64, 64]
  alloc b_s: UB float32[64]
  alloc acc: fragment float32[64, 64]
  fill acc = 0.0
  for k in pipelined(0, 1, stages=2) {
    copy X[by * 64:+64, k * 64:+64] -> x_s
    copy W[k * 64:+64, bx * 64:+64] -> w_s
    gemm x_s, w_s -> acc trans_a=false trans_b=false clear=false
  }
  copy bias[bx * 64:+64] -> b_s
  for i in parallel(0, 64) {
    for j in parallel(0, 64) {
      acc[i, j] = 0.5 * (acc[i, j] + b_s[j]) * (1.0 + erf((acc[i, j] + b_s[j]) * 0.7071067811865475))
    }
  }
  copy acc -> Y[by * 64:+64, bx * 64:+64]
}
)";

// ... after split_cube_vector: L0C -> workspace -> both AIVs (32 rows each), reverse flag pre-set by
// the vector side and drained by the Cube. (No loop waits for the other unit: the later passes leave it.)
inline constexpr const char* kGemmEpilogueSplit = R"(kernel main(X: global float32[128, 64], W: global float32[64, 128], bias: global float32[128], Y: global float32[128, 128] out)
    grid(bx = 2, by = 2) sub_block(vid) {
  alloc ws_0: global float32[256, 64]
  scope C {
    alloc x_s: L1 float32[64, 64]
    alloc w_s: L1 float32[64, 64]
    alloc acc: L0C float32[64, 64]
    fill acc = 0.0
    for k in pipelined(0, 1, stages=2) {
      copy X[by * 64:+64, k * 64:+64] -> x_s
      copy W[k * 64:+64, bx * 64:+64] -> w_s
      gemm x_s, w_s -> acc trans_a=false trans_b=false clear=false
    }
    sync wait_cross_flag(1, FIX)
    copy acc -> ws_0[(by * 2 + bx) % 4 * 64:+64, 0:+64]
    sync set_cross_flag(2, FIX, 0)
    sync wait_cross_flag(1, FIX)
  }
  scope V {
    sync set_cross_flag(2, MTE2, 1)
    alloc b_s: UB float32[64]
    alloc acc_ub: UB float32[32, 64]
    copy bias[bx * 64:+64] -> b_s
    sync wait_cross_flag(0, MTE2)
    copy ws_0[(by * 2 + bx) % 4 * 64 + vid * 32:+32, 0:+64] -> acc_ub
    sync set_cross_flag(2, MTE2, 1)
    for i in parallel(0, 32) {
      for j in parallel(0, 64) {
        acc_ub[i, j] = 0.5 * (acc_ub[i, j] + b_s[j]) * (1.0 + erf((acc_ub[i, j] + b_s[j]) * 0.7071067811865475))
      }
    }
    copy acc_ub -> Y[by * 64 + vid * 32:+32, bx * 64:+64]
  }
}
)";

// examples/flash_attention.py after infer_scope: two gemms with softmax between.
inline constexpr const char* kAttentionInput = R"(kernel main(Q: global float32[1, 2, 128, 64], K: global float32[1, 2, 128, 64], V: global float32[1, 2, 128, 64], Output: global float32[1, 2, 128, 64] out)
    grid(bx = 2, by = 2, bz = 1) {
  alloc Q_shared: L1 float32[64, 64]
  alloc K_shared: L1 float32[64, 64]
  alloc V_shared: L1 float32[64, 64]
  alloc acc_s: fragment float32[64, 64]
  alloc acc_s_cast: L1 float32[64, 64]
  alloc acc_o: fragment float32[64, 64]
  alloc scores_max: UB float32[64]
  alloc scores_max_prev: UB float32[64]
  alloc scores_scale: UB float32[64]
  alloc scores_sum: UB float32[64]
  alloc logsum: UB float32[64]
  copy Q[bz:+1, by:+1, bx * 64:+64, 0:+64] -> Q_shared
  fill acc_o = 0.0
  fill logsum = 0.0
  fill scores_max = -1e+30
  let loop_range: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
  for k in pipelined(0, loop_range, stages=2) {
    copy K[bz:+1, by:+1, k * 64:+64, 0:+64] -> K_shared
    gemm Q_shared, K_shared -> acc_s trans_a=false trans_b=true clear=true
    for i in parallel(0, 64) {
      for j in parallel(0, 64) {
        acc_s[i, j] = where(bx * 64 + i >= k * 64 + j, acc_s[i, j] * 0.18033688011112042, -1e+30)
      }
    }
    copy scores_max -> scores_max_prev
    reduce max acc_s -> scores_max axis=1 clear=false
    for i_1 in parallel(0, 64) {
      scores_scale[i_1] = exp2(scores_max_prev[i_1] - scores_max[i_1])
    }
    for i_2 in parallel(0, 64) {
      for j_1 in parallel(0, 64) {
        acc_o[i_2, j_1] = acc_o[i_2, j_1] * scores_scale[i_2]
      }
    }
    for i_3 in parallel(0, 64) {
      for j_2 in parallel(0, 64) {
        acc_s[i_3, j_2] = exp2(acc_s[i_3, j_2] - scores_max[i_3])
      }
    }
    reduce sum acc_s -> scores_sum axis=1 clear=true
    for i_4 in parallel(0, 64) {
      logsum[i_4] = logsum[i_4] * scores_scale[i_4] + scores_sum[i_4]
    }
    copy V[bz:+1, by:+1, k * 64:+64, 0:+64] -> V_shared
    copy acc_s -> acc_s_cast
    gemm acc_s_cast, V_shared -> acc_o trans_a=false trans_b=false clear=false
  }
  for i_5 in parallel(0, 64) {
    for j_3 in parallel(0, 64) {
      acc_o[i_5, j_3] = acc_o[i_5, j_3] / logsum[i_5]
    }
  }
  copy acc_o -> Output[bz:+1, by:+1, bx * 64:+64, 0:+64]
}
)";

// ... after split_cube_vector: three hand-offs (S, P, P V), the accumulating gemm into the
// vector-rescaled acc_o becomes a fresh L0C tile added on the vector side, the scores land in a
// tile of the loop body (acc_s_ub_in, staged by multi_buffer).
inline constexpr const char* kAttentionSplit = R"(kernel main(Q: global float32[1, 2, 128, 64], K: global float32[1, 2, 128, 64], V: global float32[1, 2, 128, 64], Output: global float32[1, 2, 128, 64] out)
    grid(bx = 2, by = 2, bz = 1) sub_block(vid) {
  alloc ws_0: global float32[512, 64]
  alloc ws_1: global float32[512, 64]
  alloc ws_2: global float32[512, 64]
  alloc acc_o_pv: L0C float32[64, 64]
  alloc acc_o_pv_ub: UB float32[32, 64]
  scope C {
    sync set_cross_flag(2, MTE2, 3)
    sync set_cross_flag(2, MTE2, 3)
    alloc Q_shared: L1 float32[64, 64]
    alloc K_shared: L1 float32[64, 64]
    alloc V_shared: L1 float32[64, 64]
    alloc acc_s: L0C float32[64, 64]
    alloc acc_s_cast: L1 float32[64, 64]
    copy Q[bz:+1, by:+1, bx * 64:+64, 0:+64] -> Q_shared
    let loop_range: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k in pipelined(0, loop_range, stages=2) {
      copy K[bz:+1, by:+1, k * 64:+64, 0:+64] -> K_shared
      gemm Q_shared, K_shared -> acc_s trans_a=false trans_b=true clear=true
      sync wait_cross_flag(1, FIX)
      copy acc_s -> ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k % 2) * 64:+64, 0:+64]
      sync set_cross_flag(2, FIX, 0)
      copy V[bz:+1, by:+1, k * 64:+64, 0:+64] -> V_shared
      sync wait_cross_flag(2, MTE2)
      copy ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k % 2) * 64:+64, 0:+64] -> acc_s_cast
      sync set_cross_flag(2, MTE2, 3)
      gemm acc_s_cast, V_shared -> acc_o_pv trans_a=false trans_b=false clear=true
      sync wait_cross_flag(5, FIX)
      copy acc_o_pv -> ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k % 2) * 64:+64, 0:+64]
      sync set_cross_flag(2, FIX, 4)
    }
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(5, FIX)
    sync wait_cross_flag(5, FIX)
  }
  scope V {
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 5)
    sync set_cross_flag(2, MTE2, 5)
    alloc acc_s_ub: UB float32[32, 64]
    alloc acc_o_ub: UB float32[32, 64]
    alloc scores_max: UB float32[32]
    alloc scores_max_prev: UB float32[32]
    alloc scores_scale: UB float32[32]
    alloc scores_sum: UB float32[32]
    alloc logsum: UB float32[32]
    fill acc_o_ub = 0.0
    fill logsum = 0.0
    fill scores_max = -1e+30
    let loop_range_v: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k_v in pipelined(0, loop_range_v, stages=2) {
      alloc acc_s_ub_in: UB float32[32, 64]
      sync wait_cross_flag(0, MTE2)
      copy ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64] -> acc_s_ub_in
      sync set_cross_flag(2, MTE2, 1)
      copy acc_s_ub_in -> acc_s_ub
      for i in parallel(0, 32) {
        for j in parallel(0, 64) {
          acc_s_ub[i, j] = where(bx * 64 + (i + vid * 32) >= k_v * 64 + j, acc_s_ub[i, j] * 0.18033688011112042, -1e+30)
        }
      }
      copy scores_max -> scores_max_prev
      reduce max acc_s_ub -> scores_max axis=1 clear=false
      for i_1 in parallel(0, 32) {
        scores_scale[i_1] = exp2(scores_max_prev[i_1] - scores_max[i_1])
      }
      for i_2 in parallel(0, 32) {
        for j_1 in parallel(0, 64) {
          acc_o_ub[i_2, j_1] = acc_o_ub[i_2, j_1] * scores_scale[i_2]
        }
      }
      for i_3 in parallel(0, 32) {
        for j_2 in parallel(0, 64) {
          acc_s_ub[i_3, j_2] = exp2(acc_s_ub[i_3, j_2] - scores_max[i_3])
        }
      }
      reduce sum acc_s_ub -> scores_sum axis=1 clear=true
      for i_4 in parallel(0, 32) {
        logsum[i_4] = logsum[i_4] * scores_scale[i_4] + scores_sum[i_4]
      }
      sync wait_cross_flag(3, MTE3)
      copy acc_s_ub -> ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64]
      sync set_cross_flag(2, MTE3, 2)
      sync wait_cross_flag(4, MTE2)
      copy ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64] -> acc_o_pv_ub
      sync set_cross_flag(2, MTE2, 5)
      for acc_o_i0 in parallel(0, 32) {
        for acc_o_i1 in parallel(0, 64) {
          acc_o_ub[acc_o_i0, acc_o_i1] = acc_o_ub[acc_o_i0, acc_o_i1] + acc_o_pv_ub[acc_o_i0, acc_o_i1]
        }
      }
    }
    for i_5 in parallel(0, 32) {
      for j_3 in parallel(0, 64) {
        acc_o_ub[i_5, j_3] = acc_o_ub[i_5, j_3] / logsum[i_5]
      }
    }
    copy acc_o_ub -> Output[bz:+1, by:+1, bx * 64 + vid * 32:+32, 0:+64]
    sync wait_cross_flag(3, MTE3)
    sync wait_cross_flag(3, MTE3)
  }
}
)";

// ... after skew_cube_loops: the Cube loop runs Q K^T three iterations ahead of P V.
inline constexpr const char* kAttentionSkewed = R"(kernel main(Q: global float32[1, 2, 128, 64], K: global float32[1, 2, 128, 64], V: global float32[1, 2, 128, 64], Output: global float32[1, 2, 128, 64] out)
    grid(bx = 2, by = 2, bz = 1) sub_block(vid) {
  alloc ws_0: global float32[512, 64]
  alloc ws_1: global float32[512, 64]
  alloc ws_2: global float32[512, 64]
  alloc acc_o_pv: L0C float32[64, 64]
  alloc acc_o_pv_ub: UB float32[32, 64]
  scope C {
    sync set_cross_flag(2, MTE2, 3)
    sync set_cross_flag(2, MTE2, 3)
    alloc Q_shared: L1 float32[64, 64]
    alloc K_shared: L1 float32[64, 64]
    alloc V_shared: L1 float32[64, 64]
    alloc acc_s: L0C float32[64, 64]
    alloc acc_s_cast: L1 float32[64, 64]
    copy Q[bz:+1, by:+1, bx * 64:+64, 0:+64] -> Q_shared
    let loop_range: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k in pipelined(0, loop_range + 3, stages=2) {
      if k < loop_range {
        copy K[bz:+1, by:+1, k * 64:+64, 0:+64] -> K_shared
        gemm Q_shared, K_shared -> acc_s trans_a=false trans_b=true clear=true
        sync wait_cross_flag(1, FIX)
        copy acc_s -> ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k % 2) * 64:+64, 0:+64]
        sync set_cross_flag(2, FIX, 0)
      }
      if k >= 3 {
        copy V[bz:+1, by:+1, (k - 3) * 64:+64, 0:+64] -> V_shared
        sync wait_cross_flag(2, MTE2)
        copy ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + (k - 3) % 2) * 64:+64, 0:+64] -> acc_s_cast
        sync set_cross_flag(2, MTE2, 3)
        gemm acc_s_cast, V_shared -> acc_o_pv trans_a=false trans_b=false clear=true
        sync wait_cross_flag(5, FIX)
        copy acc_o_pv -> ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + (k - 3) % 2) * 64:+64, 0:+64]
        sync set_cross_flag(2, FIX, 4)
      }
    }
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(5, FIX)
    sync wait_cross_flag(5, FIX)
  }
  scope V {
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 5)
    sync set_cross_flag(2, MTE2, 5)
    alloc acc_s_ub: UB float32[32, 64]
    alloc acc_o_ub: UB float32[32, 64]
    alloc scores_max: UB float32[32]
    alloc scores_max_prev: UB float32[32]
    alloc scores_scale: UB float32[32]
    alloc scores_sum: UB float32[32]
    alloc logsum: UB float32[32]
    fill acc_o_ub = 0.0
    fill logsum = 0.0
    fill scores_max = -1e+30
    let loop_range_v: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k_v in pipelined(0, loop_range_v, stages=2) {
      alloc acc_s_ub_in: UB float32[32, 64]
      sync wait_cross_flag(0, MTE2)
      copy ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64] -> acc_s_ub_in
      sync set_cross_flag(2, MTE2, 1)
      copy acc_s_ub_in -> acc_s_ub
      for i in parallel(0, 32) {
        for j in parallel(0, 64) {
          acc_s_ub[i, j] = where(bx * 64 + (i + vid * 32) >= k_v * 64 + j, acc_s_ub[i, j] * 0.18033688011112042, -1e+30)
        }
      }
      copy scores_max -> scores_max_prev
      reduce max acc_s_ub -> scores_max axis=1 clear=false
      for i_1 in parallel(0, 32) {
        scores_scale[i_1] = exp2(scores_max_prev[i_1] - scores_max[i_1])
      }
      for i_2 in parallel(0, 32) {
        for j_1 in parallel(0, 64) {
          acc_o_ub[i_2, j_1] = acc_o_ub[i_2, j_1] * scores_scale[i_2]
        }
      }
      for i_3 in parallel(0, 32) {
        for j_2 in parallel(0, 64) {
          acc_s_ub[i_3, j_2] = exp2(acc_s_ub[i_3, j_2] - scores_max[i_3])
        }
      }
      reduce sum acc_s_ub -> scores_sum axis=1 clear=true
      for i_4 in parallel(0, 32) {
        logsum[i_4] = logsum[i_4] * scores_scale[i_4] + scores_sum[i_4]
      }
      sync wait_cross_flag(3, MTE3)
      copy acc_s_ub -> ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64]
      sync set_cross_flag(2, MTE3, 2)
      sync wait_cross_flag(4, MTE2)
      copy ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64] -> acc_o_pv_ub
      sync set_cross_flag(2, MTE2, 5)
      for acc_o_i0 in parallel(0, 32) {
        for acc_o_i1 in parallel(0, 64) {
          acc_o_ub[acc_o_i0, acc_o_i1] = acc_o_ub[acc_o_i0, acc_o_i1] + acc_o_pv_ub[acc_o_i0, acc_o_i1]
        }
      }
    }
    for i_5 in parallel(0, 32) {
      for j_3 in parallel(0, 64) {
        acc_o_ub[i_5, j_3] = acc_o_ub[i_5, j_3] / logsum[i_5]
      }
    }
    copy acc_o_ub -> Output[bz:+1, by:+1, bx * 64 + vid * 32:+32, 0:+64]
    sync wait_cross_flag(3, MTE3)
    sync wait_cross_flag(3, MTE3)
  }
}
)";

// ... after rotate_vector_loops: the vector loop rescales acc_o and adds P V three iterations late
// (after the next three softmaxes), reading the scale from its copy of three iterations ago.
inline constexpr const char* kAttentionRotated = R"(kernel main(Q: global float32[1, 2, 128, 64], K: global float32[1, 2, 128, 64], V: global float32[1, 2, 128, 64], Output: global float32[1, 2, 128, 64] out)
    grid(bx = 2, by = 2, bz = 1) sub_block(vid) {
  alloc ws_0: global float32[512, 64]
  alloc ws_1: global float32[512, 64]
  alloc ws_2: global float32[512, 64]
  alloc acc_o_pv: L0C float32[64, 64]
  alloc acc_o_pv_ub: UB float32[32, 64]
  alloc scores_scale_prev: UB float32[32]
  alloc scores_scale_prev2: UB float32[32]
  alloc scores_scale_prev3: UB float32[32]
  scope C {
    sync set_cross_flag(2, MTE2, 3)
    sync set_cross_flag(2, MTE2, 3)
    alloc Q_shared: L1 float32[64, 64]
    alloc K_shared: L1 float32[64, 64]
    alloc V_shared: L1 float32[64, 64]
    alloc acc_s: L0C float32[64, 64]
    alloc acc_s_cast: L1 float32[64, 64]
    copy Q[bz:+1, by:+1, bx * 64:+64, 0:+64] -> Q_shared
    let loop_range: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k in pipelined(0, loop_range + 3, stages=2) {
      if k < loop_range {
        copy K[bz:+1, by:+1, k * 64:+64, 0:+64] -> K_shared
        gemm Q_shared, K_shared -> acc_s trans_a=false trans_b=true clear=true
        sync wait_cross_flag(1, FIX)
        copy acc_s -> ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k % 2) * 64:+64, 0:+64]
        sync set_cross_flag(2, FIX, 0)
      }
      if k >= 3 {
        copy V[bz:+1, by:+1, (k - 3) * 64:+64, 0:+64] -> V_shared
        sync wait_cross_flag(2, MTE2)
        copy ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + (k - 3) % 2) * 64:+64, 0:+64] -> acc_s_cast
        sync set_cross_flag(2, MTE2, 3)
        gemm acc_s_cast, V_shared -> acc_o_pv trans_a=false trans_b=false clear=true
        sync wait_cross_flag(5, FIX)
        copy acc_o_pv -> ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + (k - 3) % 2) * 64:+64, 0:+64]
        sync set_cross_flag(2, FIX, 4)
      }
    }
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(1, FIX)
    sync wait_cross_flag(5, FIX)
    sync wait_cross_flag(5, FIX)
  }
  scope V {
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 1)
    sync set_cross_flag(2, MTE2, 5)
    sync set_cross_flag(2, MTE2, 5)
    alloc acc_s_ub: UB float32[32, 64]
    alloc acc_o_ub: UB float32[32, 64]
    alloc scores_max: UB float32[32]
    alloc scores_max_prev: UB float32[32]
    alloc scores_scale: UB float32[32]
    alloc scores_sum: UB float32[32]
    alloc logsum: UB float32[32]
    fill acc_o_ub = 0.0
    fill logsum = 0.0
    fill scores_max = -1e+30
    let loop_range_v: int32 = min(ceildiv((bx + 1) * 64, 64), 2)
    for k_v in pipelined(0, loop_range_v + 3, stages=2) {
      alloc acc_s_ub_in: UB float32[32, 64]
      copy scores_scale_prev2 -> scores_scale_prev3
      copy scores_scale_prev -> scores_scale_prev2
      copy scores_scale -> scores_scale_prev
      if k_v < loop_range_v {
        sync wait_cross_flag(0, MTE2)
        copy ws_0[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64] -> acc_s_ub_in
        sync set_cross_flag(2, MTE2, 1)
        copy acc_s_ub_in -> acc_s_ub
        for i in parallel(0, 32) {
          for j in parallel(0, 64) {
            acc_s_ub[i, j] = where(bx * 64 + (i + vid * 32) >= k_v * 64 + j, acc_s_ub[i, j] * 0.18033688011112042, -1e+30)
          }
        }
        copy scores_max -> scores_max_prev
        reduce max acc_s_ub -> scores_max axis=1 clear=false
        for i_1 in parallel(0, 32) {
          scores_scale[i_1] = exp2(scores_max_prev[i_1] - scores_max[i_1])
        }
        for i_3 in parallel(0, 32) {
          for j_2 in parallel(0, 64) {
            acc_s_ub[i_3, j_2] = exp2(acc_s_ub[i_3, j_2] - scores_max[i_3])
          }
        }
        reduce sum acc_s_ub -> scores_sum axis=1 clear=true
        for i_4 in parallel(0, 32) {
          logsum[i_4] = logsum[i_4] * scores_scale[i_4] + scores_sum[i_4]
        }
        sync wait_cross_flag(3, MTE3)
        copy acc_s_ub -> ws_1[(((bz * 2 + by) * 2 + bx) % 4 * 2 + k_v % 2) * 64 + vid * 32:+32, 0:+64]
        sync set_cross_flag(2, MTE3, 2)
      }
      if k_v >= 3 {
        for i_2 in parallel(0, 32) {
          for j_1 in parallel(0, 64) {
            acc_o_ub[i_2, j_1] = acc_o_ub[i_2, j_1] * scores_scale_prev3[i_2]
          }
        }
        sync wait_cross_flag(4, MTE2)
        copy ws_2[(((bz * 2 + by) * 2 + bx) % 4 * 2 + (k_v - 3) % 2) * 64 + vid * 32:+32, 0:+64] -> acc_o_pv_ub
        sync set_cross_flag(2, MTE2, 5)
        for acc_o_i0 in parallel(0, 32) {
          for acc_o_i1 in parallel(0, 64) {
            acc_o_ub[acc_o_i0, acc_o_i1] = acc_o_ub[acc_o_i0, acc_o_i1] + acc_o_pv_ub[acc_o_i0, acc_o_i1]
          }
        }
      }
    }
    for i_5 in parallel(0, 32) {
      for j_3 in parallel(0, 64) {
        acc_o_ub[i_5, j_3] = acc_o_ub[i_5, j_3] / logsum[i_5]
      }
    }
    copy acc_o_ub -> Output[bz:+1, by:+1, bx * 64 + vid * 32:+32, 0:+64]
    sync wait_cross_flag(3, MTE3)
    sync wait_cross_flag(3, MTE3)
  }
}
)";

// A vector-only kernel: split_cube_vector leaves it as is, and so do the passes after it.
inline constexpr const char* kOneUnitKernel = R"(kernel k(A: global float32[64, 64], B: global float32[64, 64] out)
    grid(bx = 1) {
  alloc a: UB float32[64, 64]
  copy A[0:+64, 0:+64] -> a
  copy a -> B[0:+64, 0:+64]
}
)";

// examples/paged_attention.py paged_decode(1 seq, 2 heads, 2 kv heads (MHA: G = 1), D 16, page 4,
// pages_per_step 2, fp16) after infer_scope: page copies under an `if`, a V tile masked by vector
// code and handed to the Cube, hand-offs of 1 (scores) and 8 (V) rows.
inline constexpr const char* kPagedDecodeInput = R"(kernel main(Q: global float16[1, 2, 16], K: global float16[4, 4, 2, 16], V: global float16[4, 4, 2, 16], block_tables: global int32[1, 3], context_lens: global int32[1], Out: global float16[1, 2, 16] out)
    grid(h = 2, b = 1) {
  alloc q: L1 float16[1, 16]
  alloc k: L1 float16[8, 16]
  alloc v: shared float16[8, 16]
  alloc s: fragment float32[1, 8]
  alloc p: L1 float16[1, 8]
  alloc acc: fragment float32[1, 16]
  alloc m: UB float32[1]
  alloc m_prev: UB float32[1]
  alloc rescale: UB float32[1]
  alloc row_sum: UB float32[1]
  alloc l: UB float32[1]
  copy Q[b:+1, h:+1, 0:+16] -> q
  fill acc = 0.0
  fill l = 0.0
  fill m = -1e+30
  let n: int32 = context_lens[b]
  let pages: int32 = ceildiv(n, 4)
  for j in serial(0, ceildiv(pages, 2)) {
    for jj in serial(0, 2) {
      if j * 2 + jj < pages {
        let page: int32 = block_tables[b, j * 2 + jj]
        copy K[page:+1, 0:+4, h:+1, 0:+16] -> k[jj * 4:+4, 0:+16]
        copy V[page:+1, 0:+4, h:+1, 0:+16] -> v[jj * 4:+4, 0:+16]
      }
    }
    gemm q, k -> s trans_a=false trans_b=true clear=true
    for i in parallel(0, 1) {
      for c in parallel(0, 8) {
        s[i, c] = where(j * 8 + c < n, s[i, c] * 0.36067376022224085, -1e+30)
      }
    }
    copy m -> m_prev
    reduce max s -> m axis=1 clear=false
    for i_1 in parallel(0, 1) {
      rescale[i_1] = exp2(m_prev[i_1] - m[i_1])
    }
    for i_2 in parallel(0, 1) {
      for d in parallel(0, 16) {
        acc[i_2, d] = acc[i_2, d] * rescale[i_2]
      }
    }
    for i_3 in parallel(0, 1) {
      for c_1 in parallel(0, 8) {
        s[i_3, c_1] = exp2(s[i_3, c_1] - m[i_3])
      }
    }
    reduce sum s -> row_sum axis=1 clear=true
    for i_4 in parallel(0, 1) {
      l[i_4] = l[i_4] * rescale[i_4] + row_sum[i_4]
    }
    for c_2 in parallel(0, 8) {
      for d_1 in parallel(0, 16) {
        v[c_2, d_1] = where(j * 8 + c_2 < n, v[c_2, d_1], 0.0f16)
      }
    }
    copy s -> p
    gemm p, v -> acc trans_a=false trans_b=false clear=false
  }
  for i_5 in parallel(0, 1) {
    for d_2 in parallel(0, 16) {
      acc[i_5, d_2] = acc[i_5, d_2] / l[i_5]
    }
  }
  copy acc -> Out[b:+1, h:+1, 0:+16]
}
)";

}  // namespace tw::ascend::testing
