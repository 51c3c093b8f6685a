#include "target/ascend/pipeline.h"

#include <algorithm>
#include <optional>
#include <typeinfo>

#include "target/ascend/convert_copies.h"
#include "target/ascend/drop_gemm_bands.h"
#include "target/ascend/cube_row_mask.h"
#include "target/ascend/expand_gemm.h"
#include "target/ascend/expand_int8_fill.h"
#include "target/ascend/expand_math.h"
#include "target/ascend/fold_exp2_scale.h"
#include "target/ascend/lower_scalar_math.h"
#include "target/ascend/infer_scope.h"
#include "target/ascend/insert_sync.h"
#include "target/ascend/legalize_vector.h"
#include "target/ascend/select_instructions.h"
#include "target/ascend/map_grid.h"
#include "target/ascend/multi_buffer.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/resolve_cross_waits.h"
#include "target/ascend/select_vector_calls.h"
#include "target/ascend/serial_maps.h"
#include "target/ascend/rotate_vector_loops.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/skew_cube_loops.h"
#include "target/ascend/stage_global_copies.h"
#include "target/ascend/stage_global_maps.h"
#include "target/ascend/split_cube_vector.h"
#include "target/ascend/split_cols.h"
#include "target/ascend/split_rows.h"
#include "target/ascend/unroll_loops.h"
#include "target/ascend/stage_gemm_operands.h"
#include "target/ascend/verify_program.h"
#include "target/ascend/widen_scalars.h"
#include "target/ascend/vector_util.h"
#include "ir/functor.h"
#include "transform/infer_grid.h"
#include "transform/nan_unobserved.h"
#include "transform/pass_log.h"
#include "transform/pick_element.h"
#include "transform/simplify.h"

namespace tw::ascend {

namespace {

// The PassLog's check of a program pass: the program is verified, and printed as the stage's text.
struct ProgramStage {
  const target::Target& target;
  std::string operator()(const Program& p, const std::string& pass) const {
    verify_program(p, target, pass);
    return print_program(p);
  }
};

// Expert mode: the user placed every tile and wrote every flag; the pipeline only translates tile
// ops to instructions and gives each buffer its own static address (no reuse: the user's flags
// only protect the buffers they name).
Program lower_expert_kernel(transform::PassLog& log, const target::Target& target) {
  log.run("drop_gemm_bands", drop_gemm_bands);
  log.run("simplify", [](const ir::Kernel& k) { return transform::simplify(k); });
  log.run("lower_scalar_math", [&](const ir::Kernel& k) { return lower_scalar_math(k, target); });  // T.exp(2.0) -> its value
  const ProgramStage check{target};  // program passes: verified and recorded like the Tile IR ones
  Program p = log.run("select_instructions", log.kernel(), [&](const ir::Kernel& k) { return select_instructions(k, target); }, check);
  p = log.run("plan_memory", p, [&](const Program& q) { return plan_memory(q, target, /*reuse=*/false); }, check);
  p = log.run("select_vector_calls", p, [&](const Program& q) { return select_vector_calls(q, target); }, check);  // vector instructions -> AscendC calls
  p = log.run("select_move_calls", p, [&](const Program& q) { return select_move_calls(q, target); }, check);  // byte-level moves -> the AscendC calls they print as
  p = log.run("resolve_cross_waits", p, [](const Program& q) { return resolve_cross_waits(q); }, check);  // each cross-core wait: the mode of its set; the final kernel type (MIX_*_1_0 with cross-core flags)
  return log.run("widen_scalars", p, [](const Program& q) { return widen_scalars(q); }, check);  // int scalar arithmetic that may leave int32: computed in int64
}

// Automatic mode: a kernel written for any target. Each pass is one file (target/ascend/<name>.h
// documents what it decides); the Tile IR passes turn the kernel into the expert form, which the
// same instruction selection lowers; the program passes then place buffers and synchronise.
// max_stages > 0: T.Pipelined loops get at most that many stages (lower_ascend's retry);
// row_step > 0: the block's rows run in groups (split_rows, lower_ascend's retry), rows: what
// split_rows found; col_blocks > 0: each row in about that many column blocks (split_cols, the retry
// when one row does not fit) with col_copies copies of the column tiles, cols: what split_cols found;
// unroll: T.unroll loops written out first (unroll_loops, lower_ascend's retry).
Program lower_automatic_kernel(transform::PassLog& log, const target::Target& target, bool unroll, int64_t max_stages,
                               int64_t row_step, RowSplit& rows, int64_t col_blocks, int64_t col_copies, ColSplit& cols) {
  auto with_target = [&](ir::Kernel (*pass)(const ir::Kernel&, const target::Target&)) {
    return [&target, pass](const ir::Kernel& k) { return pass(k, target); };
  };
  const ir::Kernel user = log.kernel();
  log.run("drop_gemm_bands", drop_gemm_bands);                   // T.gemm bands: the Cube computes whole tiles
  if (unroll) log.run("unroll_loops", unroll_loops);             // T.unroll -> copies of the body (ifs on it fold next)
  log.run("infer_grid", [](const ir::Kernel& k) { return transform::infer_grid(k); });
  log.run("simplify", [](const ir::Kernel& k) { return transform::simplify(k); });
  log.run("serial_maps", with_target(serial_maps));              // serial loop nests that are maps -> T.Parallel
  log.run("lower_scalar_math", with_target(lower_scalar_math));    // scalar math: folded / on the Vector unit (after serial_maps: a serial nest's f(t[i, j]) stays a map)
  split_rows(log.kernel(), 0, &rows);                            // can the rows run in groups?
  split_cols(log.kernel(), 0, &cols);                            // can a row run in column blocks? (the body as written)
  if (row_step > 0)
    log.run("split_rows", [&](const ir::Kernel& k) { return split_rows(k, row_step, &rows); });  // rows in groups that fit UB
  if (col_blocks > 0)
    log.run("split_cols", [&](const ir::Kernel& k) { return split_cols(k, col_blocks, &cols, col_copies); });  // a row in column blocks that fit UB
  log.run("pick_element", [](const ir::Kernel& k) { return transform::pick_element(k); });  // the sum of a one-column where: the element (a row kept whole)
  log.run("stage_global_copies", with_target(stage_global_copies));  // global -> global copies -> through fragment tiles
  log.run("stage_global_maps", with_target(stage_global_maps));  // maps storing into global tensors -> through fragment tiles
  log.run("stage_gemm_operands", with_target(stage_gemm_operands));  // gemm on global tensors -> copies into tiles
  log.run("cube_row_mask", with_target(cube_row_mask));          // row masks of Cube operands -> row-tail fills
  log.run("infer_scope", with_target(infer_scope));              // shared/fragment -> L1/L0C/UB
  log.run("mark_nan_unobserved", [](const ir::Kernel& k) { return transform::mark_nan_unobserved(k); });  // max/min reductions whose NaN no output sees
  log.run("split_cube_vector", with_target(split_cube_vector));  // C/V code, GM workspaces, cross flags
  const TileDims dims = tile_dims(log.kernel(), user);           // the tile dims that change together (hints)
  log.run("skew_cube_loops", with_target(skew_cube_loops));      // Cube loops: work before a wait 3 steps ahead
  log.run("rotate_vector_loops", with_target(rotate_vector_loops));  // vector loops: tail after a wait 3 steps late
  log.run("expand_gemm", with_target(expand_gemm));              // gemm on L1 -> L0 loads + mma
  log.run("fold_exp2_scale", with_target(fold_exp2_scale));      // exp2 over a scaled tile: one Exp
  log.run("expand_math", with_target(expand_math));              // exp2, tanh, erf, ... -> exp/log/sqrt/abs
  log.run("expand_int8_fill", with_target(expand_int8_fill));    // int8/uint8 fills -> maps
  log.run("convert_copies", with_target(convert_copies));        // converting / UB->UB copies -> copies + maps
  std::set<std::string> passes;  // legalize_vector's pass-through temporaries (checker metadata)
  log.run("legalize_vector", [&](const ir::Kernel& k) { return legalize_vector(k, target, &passes); });  // one vector instruction per statement
  log.run("multi_buffer", [&](const ir::Kernel& k) { return multi_buffer(k, target, max_stages); });  // T.Pipelined stages -> buffer copies
  log.run("map_grid", with_target(map_grid));                    // grid -> cores, L2-friendly order
  log.run("simplify", [](const ir::Kernel& k) { return transform::simplify(k); });
  const ProgramStage check{target};  // program passes: verified and recorded like the Tile IR ones
  Program p = log.run("select_instructions", log.kernel(), [&](const ir::Kernel& k) { return select_instructions(k, target, /*auto_sync=*/true, &passes); }, check);  // instruction selection
  p = log.run("plan_memory", p, [&](const Program& q) { return plan_memory(q, target, /*reuse=*/true, &dims); }, check);  // static addresses with liveness-based reuse
  p = log.run("insert_sync", p, [&](const Program& q) { return insert_sync(q, target); }, check);  // flags and barriers
  p = log.run("select_vector_calls", p, [&](const Program& q) { return select_vector_calls(q, target); }, check);  // vector instructions -> AscendC calls
  p = log.run("select_move_calls", p, [&](const Program& q) { return select_move_calls(q, target); }, check);  // byte-level moves -> the AscendC calls they print as
  p = log.run("resolve_cross_waits", p, [](const Program& q) { return resolve_cross_waits(q); }, check);  // each cross-core wait: the mode of its set; the final kernel type (MIX_*_1_0 with cross-core flags)
  return log.run("widen_scalars", p, [](const Program& q) { return widen_scalars(q); }, check);  // int scalar arithmetic that may leave int32: computed in int64
}

// T.Pipelined(..., num_stages=S) is a performance hint: when the stage copies do not fit (a
// capacity error whose peak holds staged tiles), the kernel is lowered again with one stage
// fewer, down to 1 (a capacity error then stays an error), and every loop that asked for more
// gets a note at its line naming the count used and why. A UB overflow that remains is retried
// with the block's rows in groups (split_rows), then, when one row does not fit, with each row in
// column blocks (split_cols); each gets a note at the largest tile.
LoweredAscend lower_fitted(const ir::Kernel& input, const target::Target& target, bool unroll) {
  int64_t max_stages = 0, row_step = 0, col_blocks = 0, col_copies = 2;
  std::optional<CapacityError> first, first_ub, before_cols;  // the overflow with the stages as asked; with all rows; with whole rows
  RowSplit rows;
  ColSplit cols;
  std::optional<LoweredAscend> fitted;  // a row or column split that fits, kept while a smaller one is tried
  for (;;) {
    transform::PassLog log(input, target.name);  // verifies the user's kernel: errors point at the user's lines
    Program p;
    try {
      p = input->is_npu() ? lower_expert_kernel(log, target)
                          : lower_automatic_kernel(log, target, unroll, max_stages, row_step, rows, col_blocks, col_copies, cols);
    } catch (const CapacityError& e) {
      if (fitted) return *fitted;  // the smaller group did not fit
      if (input->is_npu()) throw;
      if (e.stages > 1) {
        if (!first) first = e;
        max_stages = e.stages - 1;
        continue;
      }
      if (e.mem != Mem::UB) throw;
      if (!first_ub) first_ub = e;
      if (col_blocks > 0) {
        // the row in more column blocks (each at least cols.step columns: 64, or one 32-byte block
        // when nothing reduces along the columns), else with one copy of the column tiles (from the
        // first block count again), else the overflow as written
        const int64_t most = (cols.cols + cols.step - 1) / cols.step;
        if (cols.why_not.empty() && col_blocks < most) {
          col_blocks = std::min(most, col_blocks + std::max<int64_t>(1, col_blocks / 4));
          continue;
        }
        if (col_copies > 1) {
          col_copies = 1;
          col_blocks = std::max<int64_t>(2, (before_cols->needed + before_cols->capacity - 1) / before_cols->capacity);
          continue;
        }
        throw *first_ub;
      }
      // the tiles overflow UB: run the block's rows in groups when its body allows (split_rows)
      // (straight to the largest group that may fit: a block's bytes shrink at most in proportion
      // to its rows, so no group above G * capacity / needed fits)
      if (rows.rows > 0 && rows.why_not.empty() && row_step < rows.steps) {
        const int64_t most = (row_step > 0 ? rows.group_rows : rows.rows) * e.capacity / e.needed;
        for (++row_step; row_step < rows.steps && rows.groups[row_step - 1] > most;) ++row_step;
        continue;
      }
      // one row does not fit (or the rows cannot run in groups): each row in column blocks when its
      // body allows (split_cols; on the rows in groups of one when they ran as blocks of the grid)
      if (cols.why_not.empty() && cols.cols > cols.step && (rows.rows <= 1 || row_step > 0 || !rows.why_not.empty())) {
        if (row_step > 0 && !rows.as_blocks) row_step = 0;
        before_cols = e;
        col_blocks = std::max<int64_t>(2, (e.needed + e.capacity - 1) / e.capacity);
        continue;
      }
      const std::string no_cols = cols.why_not.empty() ? std::string()
                                  : "; the compiler runs a row in column blocks when every statement allows, which line " +
                                        std::to_string(cols.at.line) + " prevents (" + cols.why_not + ")";
      if (rows.rows == 0) throw CapacityError(e.message(), e.span(), e.hint() + no_cols, e.mem, e.needed, e.capacity, e.stages);
      if (!rows.why_not.empty() && rows.rows > 1)
        throw CapacityError(e.message(), e.span(),
                            e.hint() + "; the compiler runs a block's rows in groups that fit when every row is "
                                       "computed on its own, which line " + std::to_string(rows.at.line) + " prevents (" +
                                       rows.why_not + ")" + no_cols,
                            e.mem, e.needed, e.capacity, e.stages);
      if ((rows.rows == 1 || row_step > 0) && rows.row_bytes * 8 > e.capacity) {
        // one row (at least an eighth of the UB: the overflow is the row's) does not fit and its
        // body cannot run in column blocks: the kernel's rows must be split by its author
        const int64_t fit = std::max<int64_t>(8, rows.cols * e.capacity / e.needed / 8 * 8);
        throw CapacityError(
            first_ub->message() + (row_step > 0 ? "; computed one row at a time the block still needs " +
                                                      std::to_string(e.needed) + " B"
                                                : std::string()),
            first_ub->span(),
            "one row of " + q(rows.widest) + " (" + std::to_string(rows.cols) + " elements) does not fit the UB with the "
                "block's other tiles: rows of at most about " + std::to_string(fit) + " elements do" + no_cols +
                ". Loop over column blocks of at most " + std::to_string(fit) + " elements of each row in the kernel "
                "(carrying each row's running results, e.g. max and sum, from block to block as flash attention does "
                "along its keys), or run this size on cpu",
            e.mem, e.needed, e.capacity, e.stages);
      }
      if (row_step > 0) throw *first_ub;  // one row fits, other tiles do not: the overflow as written
      throw CapacityError(e.message(), e.span(), e.hint() + no_cols, e.mem, e.needed, e.capacity, e.stages);
    } catch (const ir::Error& other) {
      // the rows in groups hit another limit: the smaller group's plan is not used, or the overflow stays the error
      // (its hint naming that limit)
      if (fitted) return *fitted;
      if (col_blocks > 0 && col_copies > 1) {  // two copies of the column tiles hit another limit: one copy
        col_copies = 1;
        col_blocks = std::max<int64_t>(2, (before_cols->needed + before_cols->capacity - 1) / before_cols->capacity);
        continue;
      }
      if (row_step > 0 || col_blocks > 0) {
        const std::string how = col_blocks > 0 ? "each row in " + std::to_string(col_blocks) + " column blocks"
                                               : "the block's rows " + std::to_string(rows.group_rows) + " at a time";
        throw CapacityError(first_ub->message(), first_ub->span(),
                            first_ub->hint() + (first_ub->hint().empty() ? "" : "; ") + "the compiler tried " + how +
                                ", which fails at line " + std::to_string(other.span().line) + " (" + other.message() +
                                (other.hint().empty() ? "" : "; " + other.hint()) + ")",
                            first_ub->mem, first_ub->needed, first_ub->capacity, first_ub->stages);
      }
      throw;
    }
    if (first)
      ir::for_each_stmt(input->body, [&](const ir::Stmt& s) {
        if (s->kind != ir::StmtKind::For) return;
        auto* f = ir::as<ir::ForNode>(s);
        if (f->for_kind != ir::ForKind::pipelined || f->num_stages <= max_stages) return;
        p.notes.push_back({"T.Pipelined(..., num_stages=" + std::to_string(f->num_stages) + ") runs with " +
                               std::to_string(max_stages) + " stage" + (max_stages == 1 ? "" : "s") + " on " +
                               target.name + ": with " + std::to_string(f->num_stages) + " the staged tiles overflow " +
                               std::string(mem_name(first->mem)) + " (" + std::to_string(first->needed) + " B needed, " +
                               std::to_string(first->capacity) + " B available); num_stages is a hint, the most "
                               "stages that fit are used",
                           s->span});
      });
    if (row_step > 0)
      p.notes.push_back({"the block's " + std::to_string(rows.rows) + " rows run " + std::to_string(rows.group_rows) +
                             " at a time on " + target.name + " (tiles " + rows.row_tiles + "; " +
                             (rows.as_blocks ? "each group a block of the grid" : "the groups in a loop in each block") +
                             (rows.carried.empty() ? "" : "; the sums across the rows into " + rows.carried +
                                                              " carried from group to group, row by row") +
                             (rows.online.empty() ? "" : " (online: the max " + rows.online +
                                                             " merged group by group, its exp's sum rescaled to it)") +
                             "): with all rows the tiles overflow " +
                             std::string(mem_name(first_ub->mem)) + " (" + std::to_string(first_ub->needed) + " B needed, " +
                             std::to_string(first_ub->capacity) + " B available)",
                         first_ub->span()});
    if (col_blocks > 0)
      p.notes.push_back({"each row of " + std::to_string(cols.cols) + " columns runs in " + std::to_string(cols.blocks) +
                             " column blocks of " + std::to_string(cols.block_cols) + " on " + target.name + " (tiles " +
                             cols.col_tiles + (cols.copies > 1 ? ", two copies of " + cols.doubled + ": block b + 1 loads while b computes" : "") +
                             "; " + std::to_string(cols.phases) + " pass" + (cols.phases == 1 ? "" : "es") +
                             " over the row, each reading it from the tensors): with whole rows the tiles overflow " +
                             std::string(mem_name(before_cols->mem)) + " (" + std::to_string(before_cols->needed) + " B needed, " +
                             std::to_string(before_cols->capacity) + " B available)",
                         first_ub->span()});
    // Row groups as blocks: while the group's largest tile is more than half the UB, a smaller
    // group is tried (a row reduction of a source of more than half the UB takes the unhalved, slow
    // form, legalize_vector; a smaller group costs a block more, not a loop): softmax 16 x 16384
    // float32 at block_M 8 takes 32397 simulated cycles in groups of 2 rows, 26670 in groups of 1.
    // Not while the UB is merely more than half full: rms_norm 1024 x 4096 float16 takes 40444
    // cycles in groups of 4, 58791 in groups of 1.
    // Column blocks likewise: one more block while the largest block tile is more than half the UB
    // (softmax 64 x 151936 float32: 355003 simulated cycles in 4 blocks of 38016, 270499 in 8).
    const bool smaller = col_blocks == 0 && row_step > 0 && rows.as_blocks && row_step < rows.steps &&
                         2 * rows.group_rows * rows.row_bytes > first_ub->capacity;
    const bool narrower = col_blocks > 0 && col_blocks < (cols.cols + cols.step - 1) / cols.step &&
                          2 * cols.block_bytes > first_ub->capacity;
    auto program = std::make_shared<const Program>(std::move(p));
    log.dump("ascend_program.txt", print_program(*program));
    LoweredAscend lowered{log.kernel(), std::move(program), log.stages()};
    if (!smaller && !narrower) return lowered;
    fitted = std::move(lowered);
    if (narrower)
      ++col_blocks;
    else  // the largest group whose largest tile is at most half the UB (the ones between would be tried and passed)
      for (++row_step; row_step < rows.steps && 2 * rows.groups[row_step - 1] * rows.row_bytes > first_ub->capacity;)
        ++row_step;
  }
}

}  // namespace

// T.unroll loops stay loops (the AscendC compiler unrolls them; docs/language.md "T.unroll") unless
// the kernel lowers only with them written out: then they are (unroll_loops), and an `if` on the
// variable folds per copy, a tile handed along the copies is a sequence of hand-offs (hunt36 F1).
// Not always: insert_sync's colouring still grows about as the cube of a straight-line program's
// flag pairs (each relayed pair that runs out of ids colours them all again; hunt36's MLP written
// out: 16 layers 0.12 s, 32 layers 0.6 s, 64 layers 4.6 s of CPU; docs/performance.md "Session 38:
// insert_sync on long straight-line programs"), so the retry writes out at most kMaxUnrollCopies
// copies (the product of the kernel's T.unroll counts, an upper bound); past that the loop form's
// error stands, its hint saying why. An error of the unrolled kernel is the one reported.
constexpr int64_t kMaxUnrollCopies = 64;

LoweredAscend lower_ascend(const ir::Kernel& input, const target::Target& target) {
  try {
    return lower_fitted(input, target, /*unroll=*/false);
  } catch (const ir::Error& e) {
    int64_t copies = 1;
    bool unrolled = false;
    ir::for_each_stmt(input->body, [&](const ir::Stmt& s) {
      if (s->kind != ir::StmtKind::For || ir::as<ir::ForNode>(s)->for_kind != ir::ForKind::unroll) return;
      unrolled = true;
      auto n = ir::as_const_int(ir::as<ir::ForNode>(s)->extent);
      copies = n ? std::min<int64_t>(copies * std::max<int64_t>(*n, 1), kMaxUnrollCopies + 1)
               : kMaxUnrollCopies + 1;
    });
    if (input->is_npu() || !unrolled) throw;
    if (copies > kMaxUnrollCopies) {
      if (typeid(e) != typeid(ir::Error)) throw;
      throw ir::Error(e.message(), e.span(),
                      (e.hint().empty() ? "" : e.hint() + "; ") + "ascend910b writes T.unroll loops out only up to " +
                          std::to_string(kMaxUnrollCopies) +
                          " copies of their bodies in all (its synchronisation pass grows about as the cube of the copies; 64 take seconds): "
                          "write fewer copies, or the layers out by hand");
    }
    return lower_fitted(input, target, /*unroll=*/true);
  }
}

}  // namespace tw::ascend
