// Tile IR printer. Grammar: see ir/parser.h.
#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace tw::ir {

// ---------------------------------------------------------------------------------------------
// Shared lexical helpers

namespace text {

namespace {
struct SuffixEntry { DTypeCode code; std::string_view suffix; };
constexpr SuffixEntry kSuffixes[] = {
    {DTypeCode::f16, "f16"}, {DTypeCode::bf16, "bf16"}, {DTypeCode::f32, "f32"}, {DTypeCode::f64, "f64"},
    {DTypeCode::i8, "i8"},   {DTypeCode::i32, "i32"},   {DTypeCode::i64, "i64"}, {DTypeCode::u8, "u8"},
    {DTypeCode::boolean, "b"},
};
}  // namespace

std::string_view dtype_suffix(DType t) {
  if (t == DType(DTypeCode::i32) || t == DType(DTypeCode::f32)) return "";
  for (const auto& e : kSuffixes)
    if (e.code == t.code) return e.suffix;
  return "";
}

std::optional<DType> dtype_from_suffix(std::string_view s) {
  for (const auto& e : kSuffixes)
    if (e.suffix == s) return DType(e.code);
  return std::nullopt;
}

bool is_reserved(std::string_view w) {
  static const std::set<std::string, std::less<>> kWords = {
      "kernel", "grid", "alloc", "for", "in", "if", "else", "let", "copy", "gemm", "fill", "reduce",
      "and", "or", "not", "true", "false", "cast", "where", "min", "max", "ceildiv", "scope", "sync",
      "sub_block"};
  if (kWords.count(w)) return true;
  if (parse_mathfn(w)) return true;
  for (std::string_view special : {"inf", "nan"}) {
    if (w.substr(0, 3) == special) {
      auto rest = w.substr(3);
      if (rest.empty() || dtype_from_suffix(rest)) return true;
    }
  }
  return false;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace text

// ---------------------------------------------------------------------------------------------
// Printer

namespace {


bool same_span(const Span& a, const Span& b) { return a.line == b.line && a.col == b.col && a.file == b.file; }

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    r += c;
  }
  return r + "\"";
}

std::string sanitize(const std::string& name) {
  std::string r;
  for (char c : name) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "v" + r;
  return r;
}

// Concatenates left to right. The printer names objects in the order it meets them, so the
// evaluation order of sub-printers must be fixed (operands of `+` are unsequenced in C++; the
// elements of a braced list are evaluated in order).
std::string cat(std::initializer_list<std::string> parts) {
  std::string r;
  for (const auto& p : parts) r += p;
  return r;
}

bool is_negative_literal(const Expr& e) {
  if (e->kind == ExprKind::IntImm) return !e->dtype.is_bool() && as<IntImmNode>(e)->value < 0;
  if (e->kind == ExprKind::FloatImm) {
    double v = as<FloatImmNode>(e)->value;
    return !std::isnan(v) && std::signbit(v);
  }
  return false;
}

int prec(const Expr& e) {
  switch (e->kind) {
    case ExprKind::Binary: return binop_prec(as<BinaryNode>(e)->op);
    case ExprKind::Unary: return as<UnaryNode>(e)->op == UnOp::Not ? kNotPrec : kUnaryPrec;
    case ExprKind::IntImm:
    case ExprKind::FloatImm: return is_negative_literal(e) ? kUnaryPrec : kCallPrec;
    case ExprKind::Var: case ExprKind::Call: case ExprKind::Cast: case ExprKind::Select: case ExprKind::Load:
      return kCallPrec;
  }
  return kCallPrec;  // not reached: the switch lists every enumerator
}

class Printer {
 public:
  explicit Printer(PrintOptions o) : opt_(o) {}

  template <class F>
  std::string run(F&& f) {
    collect_ = true;
    f();
    assign_names();
    collect_ = false;
    declared_.clear();
    os_.str("");
    indent_ = 0;
    f();
    return os_.str();
  }

  // ---- kernels ----
  void kernel(const Kernel& k) {
    const Span& ks = k->span;
    std::string head;
    if (opt_.spans) head += span_text(ks, Span{}) + " ";  // always: it switches the parser to span mode
    head += "kernel " + sanitize(k->name) + "(";
    for (size_t i = 0; i < k->params.size(); ++i) {
      const Param& p = k->params[i];
      if (i) head += ", ";
      if (p.buffer) {
        head += name(p.buffer.get(), p.buffer->name) + post_span(p.buffer->span, ks) + ": " +
                std::string(scope_name(p.buffer->scope)) + " " + std::string(p.buffer->dtype.name());
        declaring_ = true;
        head += dims(p.buffer->shape, eff(p.buffer->span, ks));
        declaring_ = false;
      } else if (p.scalar) {
        bool fresh = declared_.insert(p.scalar.get()).second;
        head += name(p.scalar.get(), p.scalar->name) + (fresh ? post_span(p.scalar->span, ks) : "") + ": " +
                std::string(p.scalar->dtype.name());
      }
      if (p.is_output) head += " out";
    }
    head += ")";
    if (!k->block_vars.empty() || !k->grid.empty()) {
      line(head);
      std::string g = "    grid(";
      size_t n = std::max(k->block_vars.size(), k->grid.size());
      for (size_t i = 0; i < n; ++i) {
        if (i) g += ", ";
        g += i < k->block_vars.size() ? decl_var(k->block_vars[i], ks, false) : std::string("_");
        g += " = ";
        g += i < k->grid.size() ? expr(k->grid[i], ks) : std::string("?");
      }
      head = g + ")";
    }
    if (k->sub_block_var) head += " sub_block(" + decl_var(k->sub_block_var, ks, false) + ")";
    block(head, k->body, ks);
  }

  // ---- statements ----
  void stmt(const Stmt& s, const Span& parent) {
    if (!s) return;
    const Span sp = eff(s->span, parent);
    std::string pre = annotate(s->span, parent) ? span_text(sp, parent) + " " : "";
    for (auto a = s->annotations.rbegin(); a != s->annotations.rend(); ++a) pre = annotation_text(*a) + " " + pre;
    switch (s->kind) {
      case StmtKind::Seq: {
        line(pre + "{");
        ++indent_;
        for (const auto& c : as<SeqNode>(s)->body) stmt(c, sp);
        --indent_;
        line("}");
        return;
      }
      case StmtKind::For: {
        auto* n = as<ForNode>(s);
        std::string h = cat({pre, "for ", decl_var(n->var, sp, false), " in ", std::string(forkind_name(n->for_kind)),
                             "(", expr(n->min, sp), ", ", expr(n->extent, sp)});
        if (n->for_kind == ForKind::pipelined || n->num_stages != 0) h += ", stages=" + std::to_string(n->num_stages);
        if (n->user_extent) h += ", user=" + expr(n->user_extent, sp);
        h += ")";
        block(h, n->body, sp);
        return;
      }
      case StmtKind::If: {
        auto* n = as<IfNode>(s);
        std::string h = pre + "if " + expr(n->cond, sp);
        if (!n->else_body) {
          block(h, n->then_body, sp);
          return;
        }
        block(h, n->then_body, sp, /*close=*/false);
        block("} else", n->else_body, sp);
        return;
      }
      case StmtKind::Let: {
        auto* n = as<LetNode>(s);
        line(cat({pre, "let ", decl_var(n->var, sp, true), " = ", expr(n->value, sp)}));
        return;
      }
      case StmtKind::Store: {
        auto* n = as<StoreNode>(s);
        line(cat({pre, name(n->buffer.get(), n->buffer->name), "[", expr_list(n->indices, sp), "] = ",
                  expr(n->value, sp)}));
        return;
      }
      case StmtKind::Alloc: {
        auto* n = as<AllocNode>(s);
        const Buffer& b = n->buffer;
        line(cat({pre, "alloc ", name(b.get(), b->name), post_span(b->span, sp), ": ", std::string(scope_name(b->scope)),
                  " ", std::string(b->dtype.name()), dims(b->shape, eff(b->span, sp))}));
        return;
      }
      case StmtKind::Copy: {
        auto* n = as<CopyNode>(s);
        std::string used;
        for (const Expr& e : n->used) used += (used.empty() ? " used [" : ", ") + expr(e, sp);
        if (!used.empty()) used += "]";
        line(cat({pre, n->atomic ? "atomic_add " : n->checked ? "checked_copy " : n->preload ? "preload_copy " : "copy ", region(n->src, sp), " -> ",
                  region(n->dst, sp), used}));
        return;
      }
      case StmtKind::Gemm: {
        auto* n = as<GemmNode>(s);
        line(cat({pre, "gemm ", region(n->a, sp), ", ", region(n->b, sp), " -> ", region(n->c, sp),
                  " trans_a=", boolstr(n->trans_a), " trans_b=", boolstr(n->trans_b), " clear=", boolstr(n->clear),
                  n->band == GemmBand::none ? ""
                  : cat({n->band == GemmBand::a ? " band_a=(" : " band_c=(", expr(n->band_lo, sp), ", ",
                         expr(n->band_hi, sp), ")"}),
                  n->rows_lo && n->rows_hi ? cat({" rows=(", expr(n->rows_lo, sp), ", ", expr(n->rows_hi, sp), ")"}) : "",
                  n->cols_lo && n->cols_hi ? cat({" cols=(", expr(n->cols_lo, sp), ", ", expr(n->cols_hi, sp), ")"}) : ""}));
        return;
      }
      case StmtKind::Fill: {
        auto* n = as<FillNode>(s);
        line(cat({pre, "fill ", region(n->dst, sp), " = ", expr(n->value, sp)}));
        return;
      }
      case StmtKind::CoreScope: {
        auto* n = as<CoreScopeNode>(s);
        block(pre + "scope " + std::string(corekind_name(n->core)), n->body, sp);
        return;
      }
      case StmtKind::Sync: {
        auto* n = as<SyncNode>(s);
        std::string args;
        switch (n->sync) {
          case SyncKind::set_flag:
          case SyncKind::wait_flag:
            args = cat({std::string(pipe_name(n->pipe)), ", ", std::string(pipe_name(n->dst_pipe)), ", ", expr(n->id, sp)});
            break;
          case SyncKind::pipe_barrier: args = std::string(pipe_name(n->pipe)); break;
          case SyncKind::set_cross_flag:
            args = cat({std::to_string(n->mode), ", ", std::string(pipe_name(n->pipe)), ", ", expr(n->id, sp)});
            break;
          case SyncKind::wait_cross_flag:
            args = expr(n->id, sp);
            if (n->pipe != AscendPipe::S) args += ", " + std::string(pipe_name(n->pipe));
            break;
        }
        line(cat({pre, "sync ", std::string(synckind_name(n->sync)), "(", args, ")"}));
        return;
      }
      case StmtKind::Reduce: {
        auto* n = as<ReduceNode>(s);
        line(cat({pre, "reduce ", std::string(reducekind_name(n->reduce_kind)), " ", name(n->src.get(), n->src->name),
                  " -> ", name(n->dst.get(), n->dst->name), " axis=", std::to_string(n->axis),
                  " clear=", boolstr(n->clear)}));
        return;
      }
    }
  }

  // `@name` or `@name(1, 2)` (see ir::Annotation)
  static std::string annotation_text(const Annotation& a) {
    std::string t = "@" + a.name;
    for (size_t i = 0; i < a.args.size(); ++i) t += (i ? ", " : "(") + std::to_string(a.args[i]);
    return a.args.empty() ? t : t + ")";
  }

  // ---- expressions ----
  std::string expr(const Expr& e, const Span& parent, int min_prec = 0) {
    if (!e) return "<null>";
    if (e->kind != ExprKind::Var && annotate(e->span, parent))
      return "(" + span_text(e->span, parent) + " " + expr_body(e, parent) + ")";
    std::string s = expr_body(e, parent);
    return prec(e) < min_prec ? "(" + s + ")" : s;
  }

  std::string region(const Region& r, const Span& parent, bool allow_short = true) {
    std::string nm = name(r.buffer.get(), r.buffer->name);
    if (allow_short && is_full(r, parent)) return nm;
    std::string s = nm + "[";
    size_t n = std::max(r.starts.size(), r.extents.size());
    for (size_t i = 0; i < n; ++i) {
      if (i) s += ", ";
      s += i < r.starts.size() ? expr(r.starts[i], parent) : std::string("?");
      s += ":+";
      s += i < r.extents.size() ? expr(r.extents[i], parent, kUnaryPrec) : std::string("?");
    }
    return s + "]";
  }

  std::string dims(const std::vector<Expr>& shape, const Span& parent) {
    return "[" + expr_list(shape, parent) + "]";
  }

 private:
  std::string expr_body(const Expr& e, const Span& parent) {
    const Span sp = eff(e->span, parent);
    switch (e->kind) {
      case ExprKind::IntImm: {
        int64_t v = as<IntImmNode>(e)->value;
        if (e->dtype.is_bool() && (v == 0 || v == 1)) return v ? "true" : "false";
        return std::to_string(v) + std::string(text::dtype_suffix(e->dtype));
      }
      case ExprKind::FloatImm:
        return text::format_float(as<FloatImmNode>(e)->value) + std::string(text::dtype_suffix(e->dtype));
      case ExprKind::Var: {
        auto* v = as<VarNode>(e);
        if (declaring_ && declared_.insert(v).second) {
          // First occurrence of a shape variable in the parameter list: its declaration.
          std::string s = name(v, v->name) + post_span(v->span, parent);
          if (v->dtype != kIndexType) s += ": " + std::string(v->dtype.name());
          return s;
        }
        return name(v, v->name);
      }
      case ExprKind::Binary: {
        auto* n = as<BinaryNode>(e);
        int p = binop_prec(n->op);
        if (p == kCallPrec) return cat({std::string(binop_name(n->op)), "(", expr(n->a, sp), ", ", expr(n->b, sp), ")"});
        // Left-associative; comparisons do not chain, so they parenthesise both sides.
        int lp = p == 4 ? p + 1 : p;
        return cat({expr(n->a, sp, lp), " ", std::string(binop_symbol(n->op)), " ", expr(n->b, sp, p + 1)});
      }
      case ExprKind::Unary: {
        auto* n = as<UnaryNode>(e);
        if (n->op == UnOp::Not) return std::string(unop_symbol(n->op)) + expr(n->a, sp, kNotPrec);
        bool lit = n->op == UnOp::Neg && (n->a->kind == ExprKind::IntImm || n->a->kind == ExprKind::FloatImm);
        // -(2) is a negation node, -2 a literal
        return std::string(unop_symbol(n->op)) + expr(n->a, sp, lit ? kCallPrec + 1 : kUnaryPrec);
      }
      case ExprKind::Call: {
        auto* n = as<CallNode>(e);
        return std::string(mathfn_name(n->fn)) + "(" + expr_list(n->args, sp) + ")";
      }
      case ExprKind::Cast: {
        auto* n = as<CastNode>(e);
        return "cast<" + std::string(e->dtype.name()) + ">(" + expr(n->value, sp) + ")";
      }
      case ExprKind::Select: {
        auto* n = as<SelectNode>(e);
        return cat({"where(", expr(n->cond, sp), ", ", expr(n->t, sp), ", ", expr(n->f, sp), ")"});
      }
      case ExprKind::Load: {
        auto* n = as<LoadNode>(e);
        return cat({name(n->buffer.get(), n->buffer->name), "[", expr_list(n->indices, sp), "]"});
      }
    }
    return "?";
  }

  std::string expr_list(const std::vector<Expr>& v, const Span& parent) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      s += expr(v[i], parent);
    }
    return s;
  }

  // A region that covers its whole buffer prints as the bare buffer name.
  bool is_full(const Region& r, const Span& parent) {
    const Buffer& b = r.buffer;
    if (r.starts.size() != b->shape.size() || r.extents.size() != b->shape.size()) return false;
    for (size_t i = 0; i < r.starts.size(); ++i) {
      const Expr& s = r.starts[i];
      if (!s || s->kind != ExprKind::IntImm || s->dtype != kIndexType || as<IntImmNode>(s)->value != 0) return false;
      if (opt_.spans) {
        if (annotate(s->span, parent) || r.extents[i] != b->shape[i]) return false;
      } else {
        if (!r.extents[i]) return false;
        if (r.extents[i] != b->shape[i] && !structurally_equal(r.extents[i], b->shape[i])) return false;
      }
    }
    return true;
  }

  bool structurally_equal(const Expr& a, const Expr& b) {
    // Names may be ambiguous in a fresh printer, so compare with the object identities: print with
    // the current naming (this printer's table) but without spans.
    bool saved = opt_.spans;
    bool saved_decl = declaring_;
    opt_.spans = false;
    declaring_ = false;
    std::string x = expr(a, Span{}), y = expr(b, Span{});
    opt_.spans = saved;
    declaring_ = saved_decl;
    return x == y && !collect_;  // during collection names are not final: be conservative
  }

  std::string decl_var(const Var& v, const Span& parent, bool always_type) {
    std::string s = name(v.get(), v->name) + post_span(v->span, parent);
    if (always_type || v->dtype != kIndexType) s += ": " + std::string(v->dtype.name());
    return s;
  }

  static std::string boolstr(bool b) { return b ? "true" : "false"; }

  std::string span_text(const Span& s, const Span& parent) {
    std::string r = "@";
    if (s.file != parent.file) r += quote(s.file) + ":";
    return r + std::to_string(s.line) + ":" + std::to_string(s.col);
  }
  // A span is printed when it is known and differs from the enclosing node's; an unknown span
  // is not printed, so on parsing it takes the enclosing node's span (its effective span).
  bool annotate(const Span& s, const Span& parent) const { return opt_.spans && s.known() && !same_span(s, parent); }
  static Span eff(const Span& s, const Span& parent) { return s.known() ? s : parent; }
  std::string post_span(const Span& s, const Span& parent) {
    if (!annotate(s, parent)) return "";
    return " " + span_text(s, parent);
  }

  void line(const std::string& s) {
    for (int i = 0; i < indent_; ++i) os_ << "  ";
    os_ << s << "\n";
  }

  // Prints "<head> {", the body's statements one level deeper, and "}".
  void block(const std::string& head, const Stmt& body, const Span& parent, bool close = true) {
    Span inner = parent;
    std::string open = head + " ";
    if (body && body->kind == StmtKind::Seq) {
      if (annotate(body->span, parent)) open += span_text(body->span, parent) + " ";
      inner = eff(body->span, parent);
    }
    line(open + "{");
    ++indent_;
    if (body && body->kind == StmtKind::Seq) {
      for (const auto& c : as<SeqNode>(body)->body) stmt(c, inner);
    } else if (body) {
      stmt(body, inner);
    }
    --indent_;
    if (close) line("}");
  }

  // ---- naming ----
  std::string name(const void* p, const std::string& desired) {
    if (collect_) {
      if (index_.emplace(p, order_.size()).second) order_.push_back({p, desired});
      return desired;
    }
    auto it = names_.find(p);
    return it != names_.end() ? it->second : sanitize(desired);
  }

  void assign_names() {
    std::unordered_set<std::string> wanted, taken;
    for (const auto& [p, d] : order_) wanted.insert(sanitize(d));
    for (const auto& [p, d] : order_) {
      std::string base = sanitize(d);
      std::string n = base;
      if (taken.count(n) || text::is_reserved(n)) {
        for (int k = 1;; ++k) {
          n = base + "_" + std::to_string(k);
          if (!taken.count(n) && !wanted.count(n) && !text::is_reserved(n)) break;
        }
      }
      taken.insert(n);
      names_[p] = n;
    }
  }

  PrintOptions opt_;
  bool collect_ = false;
  bool declaring_ = false;  // printing parameter shapes: first use of a shape var declares it
  std::unordered_set<const void*> declared_;
  std::unordered_map<const void*, size_t> index_;
  std::vector<std::pair<const void*, std::string>> order_;
  std::unordered_map<const void*, std::string> names_;
  std::ostringstream os_;
  int indent_ = 0;
};

}  // namespace

std::string print(const Kernel& k, const PrintOptions& opt) {
  if (!k) return "<null kernel>\n";
  Printer p(opt);
  return p.run([&] { p.kernel(k); });
}

std::string print(const Stmt& s, const PrintOptions& opt) {
  Printer p(opt);
  return p.run([&] { p.stmt(s, Span{}); });
}

std::string print(const Expr& e, const PrintOptions& opt) {
  Printer p(opt);
  std::string out;
  p.run([&] { out = p.expr(e, Span{}); });
  return out;
}

std::string print(const Region& r) {
  Printer p(PrintOptions{});
  std::string out;
  p.run([&] { out = p.region(r, Span{}, false); });
  return out;
}

std::string print_shape(const std::vector<Expr>& shape) {
  std::string s;
  bool all_const = true;
  for (const auto& d : shape) all_const &= as_const_int(d).has_value();
  if (all_const && !shape.empty()) {
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(*as_const_int(shape[i]));
    return s;
  }
  Printer p(PrintOptions{});
  p.run([&] { s = p.dims(shape, Span{}); });
  return s;
}

}  // namespace tw::ir
