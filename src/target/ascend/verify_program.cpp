#include "target/ascend/verify_program.h"

#include <type_traits>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"
#include "target/ascend/lower_scalar_math.h"
#include "target/ascend/program_printer.h"

namespace tw::ascend {

namespace {

class Verifier {
 public:
  Verifier(const Program& p, const target::Target& t, const std::string& pass) : p_(p), t_(t), pass_(pass) {}

  void run() {
    for (const auto& k : p_.params) {
      if (!k.is_tensor && k.var) scope_.insert(k.var.get());
      for (const auto& d : k.shape) declare_free_vars(d);
    }
    for (const auto& v : p_.shape_vars)
      if (v) scope_.insert(v.get());
    if (p_.block_idx) scope_.insert(p_.block_idx.get());
    check_expr(p_.block_dim, "the block count");
    check_expr(p_.workspace_bytes, "the workspace size");
    if (!runs_aic(p_.kernel_type) && p_.aic) fail("kernel type " + std::string(kernel_type_name(p_.kernel_type)) + " runs no AIC but the program has AIC code", p_.span);
    if (!runs_aiv(p_.kernel_type) && p_.aiv) fail("kernel type " + std::string(kernel_type_name(p_.kernel_type)) + " runs no AIV but the program has AIV code", p_.span);
    pools();
    core_ = CoreType::AIC;
    stmt(p_.aic);
    // sub_block_idx is AIV-only (program.h): the AscendC AIC branch does not declare it, and
    // select_instructions gives the AIC copy of replicated scalar code 0 for it
    if (p_.sub_block_idx) scope_.insert(p_.sub_block_idx.get());
    core_ = CoreType::AIV;
    stmt(p_.aiv);
  }

 private:
  [[noreturn]] void fail(const std::string& what, const ir::Span& span = {}) const {
    throw ir::Error("internal: the Ascend program after pass '" + pass_ + "' is malformed: " + what, span,
                    "this is a compiler bug; please report it with the kernel");
  }
  std::string where() const { return std::string(core_type_name(core_)) + " code"; }

  // Once a pool is set (plan_memory), every pool is a multiple of 32 B and covers every buffer of
  // its core and memory; GM has none.
  void pools() const {
    bool planned = false;
    for (const auto& per_core : p_.pool_bytes)
      for (int64_t n : per_core) planned = planned || n != 0;
    if (!planned) return;
    for (CoreType c : {CoreType::AIC, CoreType::AIV})
      for (int m = 0; m < kNumMems; ++m) {
        int64_t n = p_.pool(c, static_cast<Mem>(m));
        std::string name = std::string(core_type_name(c)) + " " + std::string(mem_name(static_cast<Mem>(m))) + " pool";
        if (n < 0 || n % 32 != 0 || (n != 0 && static_cast<Mem>(m) == Mem::GM))
          fail("the " + name + " has " + std::to_string(n) + " bytes (a multiple of 32 of an on-chip memory)", p_.span);
      }
    for (const auto& b : p_.buffers)
      if (b.bytes > 0 && b.mem != Mem::GM && b.offset + b.bytes > p_.pool(b.core, b.mem))
        fail("buffer '" + b.name + "' (" + std::string(core_type_name(b.core)) + " " + std::string(mem_name(b.mem)) + " @" +
                 std::to_string(b.offset) + " +" + std::to_string(b.bytes) + ") ends outside its pool of " +
                 std::to_string(p_.pool(b.core, b.mem)) + " bytes",
             b.span);
  }

  // Shape variables are declared by the parameter shapes they appear in.
  void declare_free_vars(const ir::Expr& e) {
    if (!e) return;
    ir::for_each_expr(e, [&](const ir::Expr& x) {
      if (x->kind == ir::ExprKind::Var) scope_.insert(x.get());
    });
  }
  // `what` names the expression (a string, or a callable that builds it: only on failure).
  template <class What>
  void check_expr(const ir::Expr& e, const What& what, const ir::Span& span = {}) const {
    if (!e) return;
    ir::for_each_expr(e, [&](const ir::Expr& x) {
      if (x->kind == ir::ExprKind::Call) {  // what lower_scalar_math leaves: the printer has no scalar math
        const std::string fn(ir::mathfn_name(as<ir::CallNode>(x)->fn));
        throw ir::Error("math function '" + fn + "' of a scalar here would run on the Ascend scalar unit, which has "
                        "no math functions (AscendC documents none for AICore code)",
                        x->span, scalar_math_hint(fn));
      }
      if (x->kind != ir::ExprKind::Var || scope_.count(x.get())) return;
      std::string name;
      if constexpr (std::is_invocable_v<What>) name = what();
      else name = what;
      fail(where() + ": " + name + " uses variable '" + static_cast<const ir::VarNode*>(x.get())->name +
                 "', which is not in scope there",
             span);
    });
  }

  void stmt(const StmtPtr& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<const ir::ExprNode*> lets;
        for (const auto& b : s->body) {
          if (!b) fail(where() + ": a statement list holds a null statement", s->span);
          stmt(b);
          if (b->kind == StmtKind::Let) lets.push_back(b->var.get());
          if (auto* load = b->kind == StmtKind::Instr ? std::get_if<ScalarLoad>(&b->instr.op) : nullptr)
            lets.push_back(load->var.get());
        }
        for (auto* v : lets) scope_.erase(v);
        break;
      }
      case StmtKind::For:
        if (!s->var || !s->value || s->body.size() != 1 || !s->body[0]) fail(where() + ": a loop lacks its parts", s->span);
        check_expr(s->value, "the extent of loop '" + s->var->name + "'", s->span);
        scope_.insert(s->var.get());
        stmt(s->body[0]);
        scope_.erase(s->var.get());
        break;
      case StmtKind::If:
        if (!s->value || s->body.size() != 1 || !s->body[0]) fail(where() + ": an if lacks its parts", s->span);
        check_expr(s->value, "an if condition", s->span);
        stmt(s->body[0]);
        stmt(s->else_body);
        break;
      case StmtKind::Let:
        if (!s->var || !s->value) fail(where() + ": a let lacks its parts", s->span);
        check_expr(s->value, "the value of '" + s->var->name + "'", s->span);
        scope_.insert(s->var.get());
        break;
      case StmtKind::Instr:
        instr(s->instr);
        if (auto* load = std::get_if<ScalarLoad>(&s->instr.op)) {
          if (!load->var) fail(where() + ": a ScalarLoad lacks its variable", s->instr.span);
          scope_.insert(load->var.get());
        }
        break;
    }
  }

  void local(const LocalRef& r, const Instr& in, const char* field) const {
    auto at = [&] { return where() + ": `" + print_instr(p_, in, false) + "`: " + field; };
    if (r.buffer < 0 || r.buffer >= static_cast<int>(p_.buffers.size()))
      fail(at() + " names buffer #" + std::to_string(r.buffer) + ", which is not declared (the program has " +
               std::to_string(p_.buffers.size()) + ")",
           in.span);
    const BufferDecl& b = p_.buffers[r.buffer];
    if (b.core != core_) fail(at() + " names buffer '" + b.name + "' of the " + std::string(core_type_name(b.core)), in.span);
    check_expr(r.offset, [&] { return at() + " offset"; }, in.span);
    if (auto c = ir::as_const_int(r.offset); c && (*c < 0 || (b.bytes > 0 && *c >= b.bytes)))
      fail(at() + " starts at byte " + std::to_string(*c) + ", outside buffer '" + b.name + "' (" +
               std::to_string(b.bytes) + " bytes)",
           in.span);
  }
  void gm(const GmRef& r, const Instr& in, const char* field) const {
    auto at = [&] { return where() + ": `" + print_instr(p_, in, false) + "`: " + field; };
    if (r.param >= static_cast<int>(p_.params.size()) || r.param < -1 || (r.param >= 0 && !p_.params[r.param].is_tensor))
      fail(at() + " names parameter #" + std::to_string(r.param) + ", which is not a tensor parameter", in.span);
    check_expr(r.offset, [&] { return at() + " offset"; }, in.span);
  }
  void operand(const LocalRef& r, const Instr& in, const char* f) const { local(r, in, f); }
  void operand(const GmRef& r, const Instr& in, const char* f) const { gm(r, in, f); }
  template <class NotAnOperand>  // a field named like an operand that is not one (SetFlag's src / dst pipes)
  void operand(const NotAnOperand&, const Instr&, const char*) const {}
  void operand(const VecOperand& v, const Instr& in, const char* f) const {
    local(v.at, in, f);
    check_expr(v.row_stride, [&] { return where() + ": `" + print_instr(p_, in, false) + "`: " + f + " row stride"; }, in.span);
  }

  void flag(const ir::Expr& id, int count, const char* what, const Instr& in) const {
    check_expr(id, [&] { return std::string("`") + print_instr(p_, in, false) + "`: the " + what; }, in.span);
    auto c = ir::as_const_int(id);  // a runtime id (expert ping-pong flags) is the simulator's to check
    if (c && (*c < 0 || *c >= count))
      fail(where() + ": `" + print_instr(p_, in, false) + "`: the " + what + " " + std::to_string(*c) +
               " is out of range 0.." + std::to_string(count - 1),
           in.span);
  }

  void instr(const Instr& in) const {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (requires { x.src; }) operand(x.src, in, "src");
          if constexpr (requires { x.dst; }) operand(x.dst, in, "dst");
          if constexpr (requires { x.a; }) operand(x.a, in, "a");
          if constexpr (std::is_same_v<T, VecSelect>) {  // b and y may be scalars
            if (x.b.at.buffer >= 0) operand(x.b, in, "b");
            operand(x.x, in, "x");
            if (x.y.at.buffer >= 0) operand(x.y, in, "y");
          } else if constexpr (requires { x.b; }) {
            operand(x.b, in, "b");
          }
          if constexpr (requires { x.c; }) operand(x.c, in, "c");
          // a vector instruction's scalar operand is scalar code too (a math call in it: port37 F1's 3-D maps,
          // where legalize_vector reads a row's value into a let and the call of it became scalar)
          if constexpr (requires { x.scalar; })
            check_expr(x.scalar, [&] { return where() + ": `" + print_instr(p_, in, false) + "`: the scalar"; }, in.span);
          if constexpr (std::is_same_v<T, VecDup>)
            check_expr(x.value, [&] { return where() + ": `" + print_instr(p_, in, false) + "`: the value"; }, in.span);
          if constexpr (requires { x.vec; }) operand(x.vec, in, "vec");
          if constexpr (std::is_same_v<T, Gather>) operand(x.offset, in, "offset");
          if constexpr (requires { x.src0; }) {  // call-level vector instructions: sources per API
            if (vec_api_sources(x.api) >= 1) operand(x.src0, in, "src0");
            if (vec_api_sources(x.api) == 2) operand(x.src1, in, "src1");
          }
          if constexpr (requires { x.sel; })
            if (x.api == VecApi::Select || x.api == VecApi::SelectScalar) operand(x.sel, in, "sel");
          if constexpr (std::is_same_v<T, ScalarLoad> || std::is_same_v<T, ScalarStore>) {
            const LocalRef& r = [&]() -> const LocalRef& {
              if constexpr (std::is_same_v<T, ScalarLoad>) return x.ub;
              else return x.dst;
            }();
            if constexpr (std::is_same_v<T, ScalarLoad>)
              if (r.buffer >= 0) operand(r, in, "ub");
            if constexpr (std::is_same_v<T, ScalarStore>)
              check_expr(x.value, [&] { return where() + ": `" + print_instr(p_, in, false) + "`: the value"; }, in.span);
            if (r.buffer >= 0 && p_.buffers[r.buffer].mem != Mem::UB)
              fail(where() + ": `" + print_instr(p_, in, false) + "`: GetValue/SetValue address UB buffers only", in.span);
          }
          if constexpr (std::is_same_v<T, SetFlag> || std::is_same_v<T, WaitFlag>) {
            if (!flag_pair_legal(core_, x.src, x.dst))
              fail(where() + ": `" + print_instr(p_, in, false) + "` is not a flag pair of this core", in.span);
            flag(x.event, t_.ascend.flag_event_ids, "event id", in);
          }
          if constexpr (std::is_same_v<T, CrossCoreSetFlag>) {
            if (x.mode < 0 || x.mode > 2) fail(where() + ": `" + print_instr(p_, in, false) + "`: mode is not 0, 1 or 2", in.span);
            flag(x.id, t_.ascend.cross_flag_ids, "cross-core flag id", in);
          }
          if constexpr (std::is_same_v<T, CrossCoreWaitFlag>) flag(x.id, t_.ascend.cross_flag_ids, "cross-core flag id", in);
        },
        in.op);
  }

  const Program& p_;
  const target::Target& t_;
  const std::string& pass_;
  CoreType core_ = CoreType::AIC;
  std::unordered_set<const ir::ExprNode*> scope_;
};

}  // namespace

void verify_program(const Program& p, const target::Target& target, const std::string& pass) {
  Verifier(p, target, pass).run();
}

}  // namespace tw::ascend
