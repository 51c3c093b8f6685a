// Internal state of the simulator: the machine (cores, pipes, memories, flags), the compiled
// program interpreter and the scheduler. Implemented across machine.cpp (interpreter and
// scheduler), functional.cpp (data semantics), timing.cpp (costs), checker.cpp (checks).
#pragma once

#include <deque>
#include <list>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "target/ascend/simulator/simulator.h"

namespace tw::ascend::sim {

// ---------------------------------------------------------------------------------------------
// Compiled scalar expressions (flat, slot-indexed)

struct CNode {
  uint8_t kind;  // ir::ExprKind
  uint8_t op;    // BinOp / UnOp / MathFn
  bool is_float;
  bool float_operands = false;  // Binary: either operand is a float (the operation is done in double)
  int a = -1, b = -1, c = -1;
  int64_t i = 0;
  double f = 0;
  // Var: the variable's slot. A checked node (below): its index into Machine::guards_.
  int slot = -1;
  ir::DTypeCode dtype = ir::DTypeCode::i64;  // the node's type (the shifts need it)
  // The printed C++ holds the value in `int` (an integer type narrower than 64 bits, promoted;
  // compile_expr). An integer + - * or unary - of narrow operands is checked: the printed C++
  // computes it in int, so a result outside int32 is signed overflow there (session 30, h-i32guard),
  // reported by eval_node.
  bool narrow = false;
  // An integer `//`, `%` or ceildiv the printed C++ computes with C's truncating / and %
  // (Program::c_divisions), checked: a negative dividend is a report (truncation is not the
  // language's floor there), and so is ceildiv's `a + b - 1` outside int32 when narrow (session 31).
  bool c_division = false;
};
// 40 bytes (48 before session 30, 56 in it): the check's data shares `slot` and the padding.
static_assert(sizeof(CNode) == 40, "CNode: keep the compiled scalar node small (eval_node walks them)");
struct Value {
  int64_t i = 0;
  double f = 0;
};

// ---------------------------------------------------------------------------------------------
// Resolved instructions: every expression evaluated at issue time.

struct RMem {       // a base address: GM tensor/workspace or on-chip buffer
  bool gm = false;
  int index = -1;   // param (-1 workspace) or buffer
  int64_t off = 0;  // bytes from the base
};
// Call-level moves (program.h): the API fields as issued, executed with the API's semantics.
struct RInitConst { RMem dst; ir::DTypeCode dt; int64_t repeat, blocks, gap; double value; };
struct RNd2Nz {
  RMem src, dst; ir::DTypeCode dt;
  int64_t nd_num, n, d, src_nd_stride, src_d, c0_stride, n_stride, nz_matrix_stride;
  int64_t col_start = 0;  // DataCopyNd2Nz::col_start (0 when not set): negative = a read before column 0
};
// The first index of an element access (or of a window's indices start .. start + count - 1) outside its
// dimension (program.h DimIndex); dim -1: none.
struct ROutsideDim { int dim = -1; int64_t index = 0, extent = 0, start = 0, count = 1; };
// A preload's copy out (program.h WindowCheck::preload): the window's dims, each element of the window at
// tile + sum(i_d * stride_d) elements, of which the first `used` of each dim are the user's (program.h DimIndex);
// written.h reports an element outside the tensor the preload no longer holds.
struct RKept {
  struct Dim { int dim; int64_t start, extent, count, stride, used; };
  int param = -1;  // -1: no such check
  RMem tile;
  std::vector<Dim> dims;
};
// DataCopyPad (GM -> UB, UB -> GM) and DataCopy (UB -> UB) in the API's fields; the byte geometry
// the fields describe is given by the member functions.
struct RDataCopy {
  enum Kind : uint8_t { GmToUb, UbToGm, UbToUb } kind;
  RMem src, dst; ir::DTypeCode dt;
  int64_t count = 0, len = 0, src_stride = 0, dst_stride = 0;
  bool is_pad = false;
  int64_t left = 0, right = 0;
  double pad_value = 0;
  bool atomic = false;  // UbToGm after SetAtomicAdd<dt>: added into GM (program.h DataCopyPadUbToGm)
  int window_param = -1;  // UbToGm: the tensor of the window check it carries (program.h WindowCheck)
  ROutsideDim window;
  bool preload = false;  // GmToUb: a preload's copy in (program.h WindowCheck::preload)
  RKept kept;            // UbToGm: a preload's copy out
  int es() const { return ir::DType(dt).bytes(); }
  int64_t bytes() const { return kind == UbToUb ? len * 32 : len; }  // data bytes of one burst
  // bytes one UB burst occupies (GM -> UB: padding elements + data rounded up to 32 B)
  int64_t ub_burst() const {
    return kind == UbToUb ? len * 32 : (kind == GmToUb ? (left + right) * es() + len + 31 : len + 31) / 32 * 32;
  }
  int64_t src_pitch() const {  // bytes from one source burst to the next
    return kind == GmToUb ? len + src_stride : ub_burst() + src_stride * 32;
  }
  int64_t dst_pitch() const { return kind == UbToGm ? len + dst_stride : ub_burst() + dst_stride * 32; }
};
struct RLoad2D { RMem src, dst; ir::DTypeCode dt; int64_t start, repeat, src_stride, sid, dst_gap; bool transpose; };
struct RLoad3D {
  RMem src, dst; ir::DTypeCode dt;
  int64_t l1h, l1w, channels, kext, mext, kstart, mstart;
  bool unit_kernel;  // 1 x 1 kernel, stride 1, dilation 1, every flag false (the only modelled form)
};
struct RMmad { RMem a, b, c; ir::DTypeCode in, acc; int64_t m, n, k; bool init; };
struct RFixpipe {
  RMem src, dst; ir::DTypeCode from, to;
  int64_t n, m, src_stride, dst_stride, nd_num; QuantMode quant; bool relu;
  bool atomic = false;  // after SetAtomicAdd<to>: the converted values are added into GM
  bool nz = false;      // FixpipeL1: into L1 in Nz (CFG_NZ), dst_stride the strip pitch in 32 B blocks
};
// VecCallL2 / VecCallL0 (program.h). A level-2 call is executed as one repeat of `mask = count`
// contiguous elements (block stride 1); `l0` keeps which form it was for the API rules and costs.
struct RVecCall {
  VecApi api = VecApi::Add;
  bool l0 = false;
  ir::DTypeCode dt = ir::DTypeCode::f32, src_dt = ir::DTypeCode::f32;
  RoundMode round = RoundMode::None;
  RMem dst, src0, src1, sel;  // sel: Select's bit mask
  CmpMode cmp = CmpMode::LT;
  double scalar = 0;  // converted to vec_scalar_dtype as the printed static_cast (machine.cpp build)
  int64_t mask = 0, repeat = 0;
  int64_t blk[3] = {1, 1, 1}, rep[3] = {0, 0, 0};  // dst, src0, src1 (32 B blocks)
  int window_param = -1;  // Duplicate: the tensor of the window check it carries (program.h WindowCheck)
  ROutsideDim window;
  bool preload = false;  // Duplicate: a preload's zero fill (program.h WindowCheck::preload)
};
struct RWholeReduce { ReduceOp op; ir::DTypeCode dt; RMem dst, src; int64_t mask, repeat, dst_rep, src_blk, src_rep; };
struct RBrcb { ir::DTypeCode dt; RMem dst, src; int64_t repeat, dst_blk, dst_rep; };
struct RGather { ir::DTypeCode dt; RMem dst, src, offset; int64_t base, count, src_elems; };
struct RScalarLoad { RMem src; ir::DTypeCode dt; int64_t tile_end = 0; ROutsideDim outside; };  // Global/LocalTensor::GetValue (pipe S)
struct RScalarStore { RMem dst; ir::DTypeCode dt; Value value; int64_t tile_end = 0; ROutsideDim outside; };  // LocalTensor::SetValue (pipe S)
struct RFlag { Pipe src, dst; int64_t event; bool set; };
struct RBarrier { Pipe pipe; };
struct RCross { int mode; int64_t id; bool set; };
using ROp = std::variant<RInitConst, RNd2Nz, RDataCopy, RLoad2D, RLoad3D, RMmad, RFixpipe, RVecCall, RWholeReduce, RBrcb, RGather,
                         RScalarLoad, RScalarStore, RFlag, RBarrier, RCross>;

struct RInstr {
  const Instr* in = nullptr;
  uint32_t uid = 0;     // executed-instruction record (checker) or 0
  Pipe pipe = Pipe::S;
  bool valid = true;    // false: rejected at issue (reported), executes as a no-op
  int64_t issue = 0;    // issue time (cycles)
  int64_t seq = 0;      // index among the instructions issued to its pipe
  // checker: what the scalar unit knew at issue (Checker::hold_s / join_issue): a held snapshot of
  // S's clock, kSNow (issued just now: S's clock as it is) or kSJoined (already joined by its pipe)
  static constexpr int kSNow = -1, kSJoined = -2;
  int s_snap = kSNow;
  ROp op;
};

// A byte rectangle in one address space: rows of row_bytes, `stride` bytes apart.
struct Rect {
  int64_t start = 0, rows = 1, row_bytes = 0, stride = 0;
  int64_t end() const { return rows <= 0 || row_bytes <= 0 ? start : start + (rows - 1) * stride + row_bytes; }
};

// ---------------------------------------------------------------------------------------------
// Code: the structured statements compiled to a flat bytecode.

struct BC {
  enum Op : uint8_t { Instr, Let, ForBegin, ForEnd, IfFalse, Jump, End } op = End;
  int slot = -1, slot2 = -1;  // Let/For/ScalarLoad var; For extent slot
  int expr = -1;              // value / extent / condition
  int target = -1;            // jump target
  const ascend::Instr* instr = nullptr;
  std::vector<int> exprs;     // instr: compiled operand expressions (see resolve())
};
struct Code {
  std::vector<BC> ops;
};

// ---------------------------------------------------------------------------------------------
// Machine state

struct FlagEntry {
  int64_t fire = 0;
  uint32_t uid = 0;
  int vc = -1;         // checker snapshot id
  bool tpipe = false;  // set by TPipe's constructor (Program::tpipe_destroy)
};

// Per-core state of the API rules that span instructions (api_rules.h: the Mmad accumulation
// barrier).
struct ApiRuleState {
  std::vector<RMem> mmad_dsts;  // L0C destinations of the Mmads issued since the last PIPE_M/ALL barrier
};

// A FIFO that does not allocate while empty (there are many of them).
struct FlagQueue {
  std::vector<FlagEntry> v;
  size_t head = 0;
  // The checker's record of the last WaitFlag that took a set: its thread and clock (a later
  // SetFlag must be ordered after it, whatever the timing), and whether that was reported.
  int wait_tid = -1;
  uint32_t wait_clk = 0, wait_uid = 0;
  bool unordered_reported = false;
  bool empty() const { return head == v.size(); }
  size_t size() const { return v.size() - head; }
  FlagEntry& front() { return v[head]; }
  void push(const FlagEntry& e) { v.push_back(e); }
  FlagEntry pop() {
    FlagEntry e = v[head++];
    if (head == v.size()) { v.clear(); head = 0; }
    return e;
  }
};

// The checker's record of one cross-core counter (a core's id): how many sets reached it and how
// many waits took one, and the last 15 (chip.cross_flag_max_pending) waits' thread, clock and
// record, so that set n can be checked against the wait that took set n - 15.
struct CrossWaits {
  struct Wait { int tid; uint32_t clk, uid; };
  std::vector<Wait> ring;
  int64_t sets = 0, waits = 0;
};

struct PipeState {
  int64_t free = 0;           // next start allowed
  int64_t last_complete = 0;  // all issued instructions complete
  std::deque<RInstr> pending; // issued, waiting (the head is an unsatisfied wait)
  std::vector<int64_t> ring;  // start times of the last `depth` instructions (queue model)
  int64_t count = 0;          // instructions issued to this pipe
  int64_t busy = 0;
  uint32_t s_version = 0;     // checker: the version of S's clock this pipe joined last
};

// Every on-chip memory (L1, L0A/B/C, UB) starts filled with this byte: on the chip they hold
// whatever the previous kernel left, so a kernel that reads on-chip memory it never wrote must
// not get zeros. 0x7B bytes read as large finite values in every dtype (fp16 61280, bf16 and
// fp32 1.3e36, int32 2071690107, int8 123): sums, maxima and products over them are visibly
// wrong. Zeroing that the chip does (Mmad's init, DataCopyPad's padding) is modelled by those
// instructions.
inline constexpr uint8_t kPoisonByte = 0x7B;

struct Core {
  CoreType type = CoreType::AIC;
  int index = 0;        // global core index (AICs first, then AIVs)
  int slot = 0;         // physical index among cores of its type
  int block = -1, sub = 0;
  std::vector<int> blocks;  // blocks this core runs, in order
  size_t next_block = 0;
  std::string name;
  const Code* code = nullptr;
  size_t pc = 0;
  std::vector<Value> slots;
  int64_t scalar_time = 0;
  bool running = false, finished = false;
  enum Block : uint8_t { None, QueueFull, SWait, BarrierAll } blocked = None;
  RInstr blocked_instr;  // SWait / BarrierAll: the instruction the scalar waits on
  PipeState pipes[kNumPipes];
  std::vector<FlagQueue> flags;  // [(src*8+dst)*ids + id]
  std::vector<FlagQueue> cross;  // [id]: arrivals
  std::vector<CrossWaits> cross_waits;  // [id]: the checker's counter rule
  int blocked_pipe = -1;         // QueueFull: the full pipe
  std::vector<uint8_t> mem[kNumMems];        // on-chip memories (GM unused)
  ApiRuleState api;
  int64_t mmad_mac_cycles = 0;
  std::unordered_set<int64_t> dcache;  // the scalar DataCache: lines read (space << 40 | line)
  // The atomic mode register (program.h SetAtomic): the dtype of SetAtomicAdd<T> while it is on,
  // and the instruction that turned it on (for reports). It outlives a block, as on the chip.
  std::optional<ir::DTypeCode> atomic;
  const Instr* atomic_set = nullptr;
};

class Checker;
class FunctionalQueue;
class Timing;
class Written;

class Machine {
 public:
  Machine(const Program& p, const target::AscendParams& chip, std::vector<Arg> args,
          const std::vector<int64_t>& shape_values, const Options& opt);
  ~Machine();
  Result run();

  // --- shared with functional/timing/checker
  const Program& prog;
  const target::AscendParams& chip;
  Options opt;
  std::vector<Arg> args;
  std::vector<uint8_t> workspace;
  std::vector<Core> cores;
  std::vector<CNode> cnodes;
  Result result;
  std::unique_ptr<Checker> checker;
  std::unique_ptr<Written> written;  // the checker's written state of on-chip bytes (written.h)
  std::unique_ptr<Timing> timing;
  std::vector<std::vector<int64_t>> param_shapes;  // per parameter: a tensor's shape (empty for scalars)

  // Memory of an operand: pointer to its base and the bytes addressable from it.
  struct Span { uint8_t* data; int64_t size; int space; Mem mem; int64_t abs_base; };
  Span base(const Core& c, const RMem& m);
  int space_id(const Core& c, Mem m) const;  // checker address space
  void wait_data();  // waits until every data effect issued so far ran (the functional queue)
  int num_spaces() const;
  std::string space_name(int space) const;
  // The name a report gives operand m (one place): a tensor parameter "GM tensor A", the workspace "the GM
  // workspace", an on-chip buffer "<local> y (UB)"; brief: "tensor A", "tile y" (local "tile").
  std::string buffer_name(const RMem& m, bool brief = false, const char* local = "tile") const;

  void report(ReportKind k, std::string msg, std::vector<ReportInstr> instrs);
  // The report of a map's staged window of tensor `param` leaving dim o.dim (functional.cpp, written.h): its
  // element `verb` ("reads" / "stores"); here: what the copy did there; fix: the hint's ways after "keep each
  // index within its dimension (".
  std::string window_text(int param, const ROutsideDim& o, const std::string& verb, const std::string& here,
                          const std::string& fix) const;
  ReportInstr describe(const Core& c, const Instr* in, int64_t cycle) const;

  // functional.cpp: performs the data effect. Returns false if an operand was rejected
  // (out of bounds) and nothing was done.
  void functional(Core& c, const RInstr& r);
  // Bounds/alignment validation and access list (functional.cpp); rects are per operand.
  // atomic: a write that adds into GM (SetAtomicAdd): atomic writes of different cores do not
  // conflict with each other (checker.h), only with plain reads and writes.
  struct Access { int space; Rect rect; bool write; bool atomic = false; };
  bool accesses(Core& c, const RInstr& r, std::vector<Access>& out);

 private:
  void compile();
  int compile_expr(const ir::Expr& e);
  void compile_stmt(const StmtPtr& s, Code& code);
  // Constants and variables (most operands of an instruction) inline, the rest in eval_node.
  [[gnu::always_inline]] Value eval(int node, const std::vector<Value>& slots) {
    const CNode& n = cnodes[static_cast<size_t>(node)];
    if (n.kind == static_cast<uint8_t>(ir::ExprKind::IntImm)) return Value{n.i, n.f};
    if (n.kind == static_cast<uint8_t>(ir::ExprKind::Var)) return slots[static_cast<size_t>(n.slot)];
    return eval_node(n, slots);
  }
  Value eval_node(const CNode& n, const std::vector<Value>& slots);
  // An int32 + - * or unary - node of the printed C++ gave v, outside int32 (eval_node), or part of it
  // did (part: which; ceildiv's dividend sum): reported once per node.
  [[gnu::cold]] void int32_overflow(const CNode& n, int64_t v, const char* part = nullptr);
  // A C division node (CNode::c_division) met dividend a (negative) and divisor b: reported once per node.
  [[gnu::cold]] void negative_dividend(const CNode& n, int64_t a, int64_t b);
  struct Guard { ir::Expr e; bool reported = false; };
  std::optional<ReportInstr> first_guard_report(const CNode& n);
  std::vector<Guard> guards_;
  const Core* cur_core_ = nullptr;  // the core whose scalar runs (step); null at launch
  RInstr resolve(Core& c, const BC& bc);
  void start_block(Core& c);
  void step(Core& c);  // runs the scalar until blocked, finished or past horizon_
  void issue(Core& c, RInstr r);
  void scalar_load(Core& c, const BC& bc, RInstr r);
  void set_atomic(Core& c, const SetAtomic& a, const Instr* in);
  void atomic_mode(Core& c, RInstr& r);  // a copy into GM takes the core's atomic mode (reported if unmarked)
  bool try_execute(Core& c, PipeState& ps, RInstr& r);  // false: unsatisfied wait
  void execute(Core& c, PipeState& ps, RInstr& r);
  bool try_scalar_wait(Core& c);
  void drain(Core& c, int pipe);
  void drain_wakes();
  void cross_set(Core& c, const RCross& x, int64_t fire, const RInstr& r);
  void tpipe_construct(Core& c);
  void tpipe_destruct(Core& c);
  void finish();

  Code aic_code_, aiv_code_;
  std::unordered_map<const ir::VarNode*, int> var_slot_;
  int nslots_ = 0;
  std::vector<Value> base_slots_;
  std::vector<std::pair<Core*, int>> wakes_;
  // cross-core groups: key -> per member queue of contributions
  struct Contribution { int64_t fire; uint32_t uid; int vc; };
  struct Group { std::vector<int> members, targets; std::vector<std::deque<Contribution>> q; };
  std::unordered_map<uint64_t, Group> groups_;
  std::vector<char> reported_overflow_;
  std::unordered_map<uint64_t, bool> report_keys_;
  int aic_phys_ = 0, aiv_phys_ = 0;
  int64_t workspace_bytes_ = 0;
  // per parameter: a tensor's row length in elements (its last dimension; 0 for scalars and 1-D
  // tensors): an Nd2Nz source row must lie inside one row of its tensor (accesses)
  std::vector<int64_t> gm_row_elems_;
  int64_t events_ = 0;  // executed instructions incl. flags (progress detection)
  // The cores take turns (run()): a core's scalar unit stops issuing once its time passes the
  // horizon, so the shared L2 and HBM see the cores' accesses in about the order of simulated
  // time, not one core's whole run after another's (the L2's LRU order is an order in time).
  static constexpr int64_t kTurnCycles = 1024;
  int64_t horizon_ = 0;
  // GM byte ranges [lo, hi) each tensor parameter has been written in this run (the DataCache rule)
  std::vector<std::vector<std::pair<int64_t, int64_t>>> gm_written_;
  std::vector<char> scalar_read_;  // per GM space: read by a ScalarLoad of the program
  // data effects on worker threads (functional_queue.h); null: on the calling thread. Last, so
  // it stops its workers before the cores they write are destroyed.
  std::unique_ptr<FunctionalQueue> queue_;
  friend class Checker;
};

}  // namespace tw::ascend::sim
