// Tile IR parser: text form -> Kernel. Grammar: see ir/parser.h.
#include "ir/parser.h"

#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "ir/printer.h"

namespace tw::ir {

namespace {

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok { Ident, Number, String, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;    // identifier, punctuation, string contents, or the digits of a number
  std::string suffix;  // numbers: dtype suffix ("" if none)
  int line = 0, col = 0;
};

std::vector<Token> lex(std::string_view s, const std::string& file, int line = 1, int col = 1) {
  std::vector<Token> out;
  size_t i = 0;
  auto adv = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
  };
  auto is_id = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (i < s.size()) {
    char c = s[i];
    if (c == '#') { while (i < s.size() && s[i] != '\n') adv(1); continue; }
    if (std::isspace(static_cast<unsigned char>(c))) { adv(1); continue; }
    Token t;
    t.line = line;
    t.col = col;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && is_id(s[j])) ++j;
      t.kind = Tok::Ident;
      t.text = std::string(s.substr(i, j - i));
      adv(j - i);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '.') {
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
          j = k;
        }
      }
      t.kind = Tok::Number;
      t.text = std::string(s.substr(i, j - i));
      size_t k = j;
      while (k < s.size() && is_id(s[k])) ++k;
      t.suffix = std::string(s.substr(j, k - j));
      adv(k - i);
    } else if (c == '"') {
      std::string v;
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') {
        if (s[j] == '\\' && j + 1 < s.size()) {
          ++j;
          v += s[j] == 'n' ? '\n' : s[j];
        } else {
          v += s[j];
        }
        ++j;
      }
      if (j >= s.size()) throw Error("unterminated string", Span{file, line, col}, "close it with '\"'");
      t.kind = Tok::String;
      t.text = v;
      adv(j + 1 - i);
    } else {
      static const char* kTwo[] = {"->", "//", "==", "!=", "<=", ">=", "<<", ">>"};
      t.kind = Tok::Punct;
      for (const char* two : kTwo)
        if (s.substr(i, 2) == two) t.text = two;
      if (t.text.empty()) {
        if (std::string_view("()[]{},:=<>+-*/%@&|^~").find(c) == std::string_view::npos)
          throw Error(std::string("unexpected character '") + c + "'", Span{file, line, col});
        t.text = std::string(1, c);
      }
      adv(t.text.size());
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::End;
  end.line = line;
  end.col = col;
  out.push_back(end);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Symbol {
  Var var;
  Buffer buf;
  bool shape_var = false;
};

bool is_float_text(const std::string& t) { return t.find_first_of(".eE") != std::string::npos; }

class Parser {
 public:
  Parser(std::string_view text, std::string file, int line = 1, int col = 1)
      : file_(std::move(file)), toks_(lex(text, file_, line, col)) {}

  // parse_expr_prefix: the expression at the start of the text; unknown names are declared as
  // int32 variables when `declare` (shape variables), else they are errors.
  std::pair<Expr, size_t> expr_prefix(std::unordered_map<std::string, Var>& vars, bool declare, int col) {
    scopes_.emplace_back();
    for (const auto& [n, v] : vars) scopes_.back().emplace(n, Symbol{v, nullptr, false});
    declaring_shape_ = declare;
    Expr e = expr(Span{});
    for (const auto& [n, sym] : scopes_.back())
      if (sym.var) vars.emplace(n, sym.var);
    const Token& t = peek();
    return {e, t.kind == Tok::End ? std::string::npos : static_cast<size_t>(t.col - col)};
  }

  Kernel kernel() {
    if (is_punct(peek(), "@")) spans_ = true;
    auto ann = opt_span(Span{});
    const Token& kt = peek();
    if (!is_word(kt, "kernel")) fail(kt, "expected 'kernel' at the start of the text, got " + describe(kt));
    next();
    Span ks = ann ? *ann : at(kt);
    std::string name = expect_name("kernel name").text;
    expect("(");
    scopes_.emplace_back();
    std::vector<Param> params;
    if (!is_punct(peek(), ")")) {
      do params.push_back(param(ks));
      while (accept(","));
    }
    expect(")");
    std::vector<Var> block_vars;
    std::vector<Expr> grid;
    if (is_word(peek(), "grid")) {
      next();
      expect("(");
      std::vector<Var> pending;
      do {
        const Token& nt = expect_name("block variable");
        Span vs = span_or(nt, ks);
        DType t = kIndexType;
        if (accept(":")) t = dtype();
        expect("=");
        grid.push_back(expr(ks));
        block_vars.push_back(var(nt.text, t, vs));
        pending.push_back(block_vars.back());
        if (pending.size() > 1)
          for (size_t i = 0; i + 1 < pending.size(); ++i)
            if (pending[i]->name == nt.text) fail(nt, "block variable '" + nt.text + "' is declared twice");
      } while (accept(","));
      expect(")");
      for (const auto& v : block_vars) define(v->name, Symbol{v, nullptr, false}, peek());
    }
    Var sub_block;
    if (is_word(peek(), "sub_block")) {  // Ascend expert mode: T.Kernel(n, is_npu=True) as (cid, vid)
      next();
      expect("(");
      const Token& nt = expect_name("sub-block variable");
      Span vs = span_or(nt, ks);
      DType t = kIndexType;
      if (accept(":")) t = dtype();
      expect(")");
      sub_block = var(nt.text, t, vs);
      define(nt.text, Symbol{sub_block, nullptr, false}, nt);
    }
    Stmt body = block(ks);
    if (peek().kind != Tok::End) fail(peek(), "unexpected " + describe(peek()) + " after the kernel body");
    return std::make_shared<KernelNode>(name, std::move(params), std::move(block_vars), std::move(grid),
                                        std::move(body), ks, std::move(sub_block));
  }

 private:
  // ---- tokens ----
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  static bool is_punct(const Token& t, std::string_view p) { return t.kind == Tok::Punct && t.text == p; }
  static bool is_word(const Token& t, std::string_view w) { return t.kind == Tok::Ident && t.text == w; }
  bool accept(std::string_view p) {
    if (!is_punct(peek(), p)) return false;
    next();
    return true;
  }
  void expect(std::string_view p) {
    if (!accept(p)) fail(peek(), "expected '" + std::string(p) + "', got " + describe(peek()));
  }
  void expect_word(std::string_view w) {
    if (!is_word(peek(), w)) fail(peek(), "expected '" + std::string(w) + "', got " + describe(peek()));
    next();
  }
  const Token& expect_name(const std::string& what) {
    const Token& t = peek();
    if (t.kind != Tok::Ident) fail(t, "expected " + what + ", got " + describe(t));
    if (text::is_reserved(t.text))
      fail(t, "'" + t.text + "' is a reserved word and cannot be used as " + what, "rename it, e.g. '" + t.text + "_'");
    return next();
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of text";
      case Tok::String: return "string \"" + t.text + "\"";
      case Tok::Number: return "number '" + t.text + t.suffix + "'";
      case Tok::Ident: case Tok::Punct: return "'" + t.text + "'";
    }
    return "'" + t.text + "'";  // not reached: the switch lists every enumerator
  }
  Span at(const Token& t) const { return Span{file_, t.line, t.col}; }
  [[noreturn]] void fail(const Token& t, const std::string& msg, const std::string& hint = {}) const {
    throw Error(msg, at(t), hint);
  }
  // The span of a node that starts at token t and has no annotation.
  Span node_span(const Token& t, const Span& parent) const { return spans_ ? parent : at(t); }

  // '@' [STRING ':'] INT ':' INT
  std::optional<Span> opt_span(const Span& parent) {
    if (!is_punct(peek(), "@")) return std::nullopt;
    next();
    Span s;
    s.file = spans_ ? parent.file : file_;
    if (peek().kind == Tok::String) {
      s.file = next().text;
      expect(":");
    }
    s.line = static_cast<int>(int_value(next(), "line number"));
    expect(":");
    s.col = static_cast<int>(int_value(next(), "column number"));
    return s;
  }
  Span span_or(const Token& t, const Span& parent) {
    auto s = opt_span(parent);
    return s ? *s : node_span(t, parent);
  }
  int64_t int_value(const Token& t, const std::string& what) {
    if (t.kind != Tok::Number || is_float_text(t.text) || !t.suffix.empty())
      fail(t, "expected " + what + " (an integer), got " + describe(t));
    errno = 0;
    long long v = std::strtoll(t.text.c_str(), nullptr, 10);
    if (errno) fail(t, "integer out of range: " + t.text);
    return v;
  }
  bool bool_value(const Token& t) {
    if (is_word(t, "true")) return true;
    if (is_word(t, "false")) return false;
    fail(t, "expected true or false, got " + describe(t));
  }
  DType dtype() {
    const Token& t = peek();
    auto d = t.kind == Tok::Ident ? parse_dtype(t.text) : std::nullopt;
    if (!d) fail(t, "expected a dtype, got " + describe(t), "dtypes: float16 bfloat16 float32 float64 int8 int32 int64 uint8 bool");
    next();
    return *d;
  }
  Scope scope_kw() {
    const Token& t = peek();
    auto s = t.kind == Tok::Ident ? parse_scope(t.text) : std::nullopt;
    if (!s) fail(t, "expected a memory scope, got " + describe(t), "scopes: global shared fragment L1 L0A L0B L0C UB");
    next();
    return *s;
  }

  // Re-raise builder (typing) errors at the position in the text when spans come from annotations.
  template <class F>
  auto build(const Token& t, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      if (!spans_) throw;
      throw Error(e.message(), at(t), e.hint());
    }
  }

  // ---- names ----
  Symbol* lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }
  void define(const std::string& n, Symbol s, const Token& t) {
    auto& frame = scopes_.back();
    if (frame.count(n)) fail(t, "'" + n + "' is already defined in this scope", "use a different name");
    frame.emplace(n, std::move(s));
  }
  Buffer lookup_buffer(const Token& t) {
    if (t.kind != Tok::Ident) fail(t, "expected a buffer name, got " + describe(t));
    Symbol* s = lookup(t.text);
    if (!s) fail(t, "undefined buffer '" + t.text + "'", "declare it as a kernel parameter or with 'alloc' before use");
    if (!s->buf) fail(t, "'" + t.text + "' is a scalar variable, not a buffer");
    return s->buf;
  }

  // ---- kernel parts ----
  Param param(const Span& ks) {
    const Token& nt = expect_name("parameter name");
    Span ps = span_or(nt, ks);
    expect(":");
    Param p;
    if (peek().kind == Tok::Ident && parse_scope(peek().text)) {
      Scope sc = scope_kw();
      DType t = dtype();
      expect("[");
      std::vector<Expr> shape;
      declaring_shape_ = true;
      if (!is_punct(peek(), "]")) {
        do shape.push_back(expr(ps));
        while (accept(","));
      }
      declaring_shape_ = false;
      expect("]");
      p.buffer = build(nt, [&] { return buffer(nt.text, t, shape, sc, ps); });
      define(nt.text, Symbol{nullptr, p.buffer, false}, nt);
    } else {
      DType t = dtype();
      Symbol* prev = scopes_.back().count(nt.text) ? &scopes_.back()[nt.text] : nullptr;
      if (prev && prev->shape_var) {
        // A scalar parameter that an earlier tensor's shape already used (and so declared).
        if (prev->var->dtype != t)
          fail(nt, "scalar parameter '" + nt.text + "' is " + std::string(t.name()) + " but was used in a shape as " +
                       std::string(prev->var->dtype.name()));
        prev->shape_var = false;
        p.scalar = prev->var;
      } else {
        p.scalar = var(nt.text, t, ps);
        define(nt.text, Symbol{p.scalar, nullptr, false}, nt);
      }
    }
    if (is_word(peek(), "out")) {
      next();
      p.is_output = true;
    }
    return p;
  }

  // ---- statements ----
  // [span] '{' stmt* '}'
  Stmt block(const Span& parent) {
    auto ann = opt_span(parent);
    const Token& open = peek();
    expect("{");
    Span bs = ann ? *ann : node_span(open, parent);
    return block_rest(bs);
  }
  Stmt block_rest(const Span& bs) {
    scopes_.emplace_back();
    std::vector<Stmt> body;
    while (!is_punct(peek(), "}")) {
      if (peek().kind == Tok::End) fail(peek(), "missing '}' at the end of a block");
      body.push_back(stmt(bs));
    }
    next();
    scopes_.pop_back();
    return std::make_shared<SeqNode>(std::move(body), bs);
  }

  // Recursive descent recurses once per nesting level of the text (a parenthesis, a block, a
  // unary operator), through up to nine functions with large frames: far more stack per level
  // than a pass over the IR. 256 levels fit an 8 MiB stack even under AddressSanitizer (1000 did
  // not), so deeper text is an error, not a stack overflow. Text printed from IR taller than
  // that (right-nested) does not parse back.
  static constexpr int kMaxTextNesting = 256;
  struct Nest {
    Parser& p;
    Nest(Parser& q, const Token& t) : p(q) {
      if (++p.nest_ > kMaxTextNesting)
        p.fail(t, "the text is nested more than " + std::to_string(kMaxTextNesting) + " levels deep",
               "split deep expressions with intermediate variables (let)");
    }
    ~Nest() { --p.nest_; }
  };

  // {annotation} statement; annotation := '@' NAME ['(' INT {',' INT} ')'] (see ir::Annotation)
  Stmt stmt(const Span& parent) {
    std::vector<Annotation> anns;
    while (is_punct(peek(), "@") && peek(1).kind == Tok::Ident) {
      next();
      Annotation a{next().text, {}};
      if (accept("(")) {
        do a.args.push_back(int_value(next(), "annotation argument"));
        while (accept(","));
        expect(")");
      }
      anns.push_back(std::move(a));
    }
    Stmt s = plain_stmt(parent);
    for (auto& a : anns) s = with_annotation(s, std::move(a));
    return s;
  }

  Stmt plain_stmt(const Span& parent) {
    Nest nest(*this, peek());
    auto ann = opt_span(parent);
    const Token& t = peek();
    Span sp = ann ? *ann : node_span(t, parent);
    if (is_punct(t, "{")) {
      next();
      return block_rest(sp);
    }
    if (t.kind != Tok::Ident) fail(t, "expected a statement, got " + describe(t));
    const std::string& w = t.text;
    if (w == "for") return for_stmt(sp);
    if (w == "if") return if_stmt(sp);
    if (w == "let") return let_stmt(sp);
    if (w == "alloc") return alloc_stmt(sp);
    if (w == "copy" || w == "atomic_add" || w == "checked_copy" || w == "preload_copy") {
      bool atomic = w == "atomic_add", checked = w == "checked_copy", preload = w == "preload_copy";
      next();
      Region src = region(sp);
      expect("->");
      Region dst = region(sp);
      std::vector<Expr> used;
      if ((checked || preload) && is_word(peek(), "used")) {
        next();
        expect("[");
        do used.push_back(expr(sp));
        while (accept(","));
        expect("]");
      }
      return std::make_shared<CopyNode>(std::move(src), std::move(dst), sp, atomic, checked, std::move(used), preload);
    }
    if (w == "gemm") return gemm_stmt(sp);
    if (w == "fill") {
      next();
      Region dst = region(sp);
      expect("=");
      Expr v = expr(sp);
      return std::make_shared<FillNode>(std::move(dst), std::move(v), sp);
    }
    if (w == "reduce") return reduce_stmt(sp);
    if (w == "scope") {
      next();
      const Token& ct = peek();
      auto core = ct.kind == Tok::Ident ? parse_corekind(ct.text) : std::nullopt;
      if (!core) fail(ct, "expected a core kind (C or V) after 'scope', got " + describe(ct));
      next();
      Stmt body = block(sp);
      return std::make_shared<CoreScopeNode>(*core, std::move(body), sp);
    }
    if (w == "sync") return sync_stmt(sp);
    if (is_punct(peek(1), "[")) {  // store
      Buffer b = lookup_buffer(next());
      expect("[");
      std::vector<Expr> idx = expr_list("]", sp);
      expect("=");
      Expr v = expr(sp);
      return std::make_shared<StoreNode>(std::move(b), std::move(idx), std::move(v), sp);
    }
    fail(t, "expected a statement, got " + describe(t),
         "statements: alloc, for, if, let, copy, gemm, fill, reduce, scope, sync, or a store 'buf[i, j] = value'");
  }

  AscendPipe pipe_kw() {
    const Token& t = peek();
    auto p = t.kind == Tok::Ident ? parse_pipe(t.text) : std::nullopt;
    if (!p) fail(t, "expected a pipe, got " + describe(t), "pipes: S V M MTE1 MTE2 MTE3 FIX ALL");
    next();
    return *p;
  }

  // 'sync' KIND '(' args ')'; see the grammar at the top of parser.h.
  Stmt sync_stmt(const Span& sp) {
    next();
    const Token& kt = peek();
    auto kind = kt.kind == Tok::Ident ? parse_synckind(kt.text) : std::nullopt;
    if (!kind)
      fail(kt, "expected a synchronisation (set_flag, wait_flag, pipe_barrier, set_cross_flag, wait_cross_flag), got " +
                   describe(kt));
    next();
    expect("(");
    AscendPipe pipe = AscendPipe::S, dst = AscendPipe::S;
    int mode = 0;
    Expr id;
    switch (*kind) {
      case SyncKind::set_flag:
      case SyncKind::wait_flag:
        pipe = pipe_kw();
        expect(",");
        dst = pipe_kw();
        expect(",");
        id = expr(sp);
        break;
      case SyncKind::pipe_barrier: pipe = pipe_kw(); break;
      case SyncKind::set_cross_flag:
        mode = static_cast<int>(int_value(next(), "cross-core flag mode"));
        expect(",");
        pipe = pipe_kw();
        expect(",");
        id = expr(sp);
        break;
      case SyncKind::wait_cross_flag:
        id = expr(sp);
        if (accept(",")) pipe = pipe_kw();
        break;
    }
    expect(")");
    return std::make_shared<SyncNode>(*kind, pipe, dst, mode, std::move(id), sp);
  }

  Stmt for_stmt(const Span& sp) {
    next();
    const Token& nt = expect_name("loop variable");
    Span vs = span_or(nt, sp);
    DType vt = kIndexType;
    if (accept(":")) vt = dtype();
    expect_word("in");
    const Token& kt = peek();
    auto kind = kt.kind == Tok::Ident ? parse_forkind(kt.text) : std::nullopt;
    if (!kind) fail(kt, "expected a loop kind, got " + describe(kt), "loop kinds: serial parallel pipelined unroll");
    next();
    expect("(");
    Expr mn = expr(sp);
    expect(",");
    Expr ext = expr(sp);
    int stages = 0;
    Expr user;
    while (accept(",")) {
      if (is_word(peek(), "user")) {
        next();
        expect("=");
        user = expr(sp);
        continue;
      }
      expect_word("stages");
      expect("=");
      stages = static_cast<int>(int_value(next(), "number of stages"));
    }
    expect(")");
    Var v = var(nt.text, vt, vs);
    scopes_.emplace_back();
    define(nt.text, Symbol{v, nullptr, false}, nt);
    Stmt body = block(sp);
    scopes_.pop_back();
    return std::make_shared<ForNode>(v, mn, ext, *kind, stages, body, sp, user);
  }

  Stmt if_stmt(const Span& sp) {
    next();
    Expr c = expr(sp);
    Stmt then_body = block(sp);
    Stmt else_body;
    if (is_word(peek(), "else")) {
      next();
      else_body = block(sp);
    }
    return std::make_shared<IfNode>(std::move(c), std::move(then_body), std::move(else_body), sp);
  }

  Stmt let_stmt(const Span& sp) {
    next();
    const Token& nt = expect_name("variable name");
    Span vs = span_or(nt, sp);
    expect(":");
    DType t = dtype();
    expect("=");
    Expr value = expr(sp);
    Var v = var(nt.text, t, vs);
    define(nt.text, Symbol{v, nullptr, false}, nt);
    return std::make_shared<LetNode>(v, std::move(value), sp);
  }

  Stmt alloc_stmt(const Span& sp) {
    next();
    const Token& nt = expect_name("buffer name");
    Span bs = span_or(nt, sp);
    expect(":");
    Scope sc = scope_kw();
    DType t = dtype();
    expect("[");
    std::vector<Expr> shape = expr_list("]", bs);
    Buffer b = build(nt, [&] { return buffer(nt.text, t, shape, sc, bs); });
    define(nt.text, Symbol{nullptr, b, false}, nt);
    return std::make_shared<AllocNode>(b, sp);
  }

  Stmt gemm_stmt(const Span& sp) {
    next();
    Region a = region(sp);
    expect(",");
    Region b = region(sp);
    expect("->");
    Region c = region(sp);
    bool ta = false, tb = false, clear = false;
    GemmBand band = GemmBand::none;
    Expr lo, hi, r0, r1, c0, c1;
    while (peek().kind == Tok::Ident && is_punct(peek(1), "=")) {
      const Token& k = next();
      next();
      auto pair = [&](Expr& x, Expr& y) {  // (x, y)
        expect("(");
        x = expr(sp);
        expect(",");
        y = expr(sp);
        expect(")");
      };
      if (k.text == "band_a" || k.text == "band_c") {  // band_a=(lo, hi)
        band = k.text == "band_a" ? GemmBand::a : GemmBand::c;
        pair(lo, hi);
        continue;
      }
      if (k.text == "rows" || k.text == "cols") {  // rows=(r0, r1), cols=(c0, c1): the band's rectangle
        if (k.text == "rows") pair(r0, r1);
        else pair(c0, c1);
        continue;
      }
      bool v = bool_value(next());
      if (k.text == "trans_a") ta = v;
      else if (k.text == "trans_b") tb = v;
      else if (k.text == "clear") clear = v;
      else fail(k, "unknown gemm option '" + k.text + "'", "options: trans_a, trans_b, clear, band_a, band_c, rows, cols");
    }
    return std::make_shared<GemmNode>(std::move(a), std::move(b), std::move(c), ta, tb, clear, sp, band,
                                      std::move(lo), std::move(hi), std::move(r0), std::move(r1), std::move(c0),
                                      std::move(c1));
  }

  Stmt reduce_stmt(const Span& sp) {
    next();
    const Token& kt = peek();
    auto kind = kt.kind == Tok::Ident ? parse_reducekind(kt.text) : std::nullopt;
    if (!kind) fail(kt, "expected a reduction (sum, max, min), got " + describe(kt));
    next();
    Buffer src = lookup_buffer(next());
    expect("->");
    Buffer dst = lookup_buffer(next());
    int axis = 0;
    bool clear = true;
    bool have_axis = false;
    while (peek().kind == Tok::Ident && is_punct(peek(1), "=")) {
      const Token& k = next();
      next();
      if (k.text == "axis") {
        const Token& v = next();
        if (is_punct(v, "-")) axis = -static_cast<int>(int_value(next(), "axis"));
        else axis = static_cast<int>(int_value(v, "axis"));
        have_axis = true;
      } else if (k.text == "clear") {
        clear = bool_value(next());
      } else {
        fail(k, "unknown reduce option '" + k.text + "'", "options: axis, clear");
      }
    }
    if (!have_axis) fail(peek(), "reduce needs 'axis=<n>'");
    return std::make_shared<ReduceNode>(src, dst, *kind, axis, clear, sp);
  }

  Region region(const Span& parent) {
    const Token& nt = peek();
    Buffer b = lookup_buffer(next());
    Region r{b, {}, {}};
    if (!accept("[")) {  // whole buffer
      for (const auto& d : b->shape) {
        r.starts.push_back(int_imm(0, kIndexType, node_span(nt, parent)));
        r.extents.push_back(d);
      }
      return r;
    }
    if (accept("]")) return r;
    do {
      r.starts.push_back(expr(parent));
      expect(":");
      expect("+");
      r.extents.push_back(expr(parent));
    } while (accept(","));
    expect("]");
    return r;
  }

  // ---- expressions ----
  std::vector<Expr> expr_list(std::string_view close, const Span& parent) {
    std::vector<Expr> out;
    if (accept(close)) return out;
    do out.push_back(expr(parent));
    while (accept(","));
    expect(close);
    return out;
  }

  Expr expr(const Span& parent) {
    Nest nest(*this, peek());
    return or_expr(parent);
  }

  Expr or_expr(const Span& p) {
    Expr a = and_expr(p);
    while (is_word(peek(), "or")) {
      const Token& t = next();
      Expr b = and_expr(p);
      a = build(t, [&] { return binary(BinOp::Or, a, b, node_span(t, p)); });
    }
    return a;
  }
  Expr and_expr(const Span& p) {
    Expr a = not_expr(p);
    while (is_word(peek(), "and")) {
      const Token& t = next();
      Expr b = not_expr(p);
      a = build(t, [&] { return binary(BinOp::And, a, b, node_span(t, p)); });
    }
    return a;
  }
  Expr not_expr(const Span& p) {
    if (is_word(peek(), "not")) {
      Nest nest(*this, peek());
      const Token& t = next();
      Expr a = not_expr(p);
      return build(t, [&] { return unary(UnOp::Not, a, node_span(t, p)); });
    }
    return cmp_expr(p);
  }
  // The infix operator of precedence `prec` (TW_BINOPS in ir.h) that the token spells, if any.
  static std::optional<BinOp> infix(const Token& t, int prec) {
    for (BinOp op : all_of<BinOp>())
      if (binop_prec(op) == prec && is_punct(t, binop_symbol(op))) return op;
    return std::nullopt;
  }
  // The infix levels below the comparisons: | ^ & (<< >>) (+ -) (* / // %), each left-associative.
  static constexpr int kCmpPrec = 4, kBitOrPrec = 5, kMulPrec = 10;
  Expr cmp_expr(const Span& p) {
    Expr a = infix_expr(p, kBitOrPrec);
    auto op = infix(peek(), kCmpPrec);
    if (!op) return a;
    const Token& t = next();
    Expr b = infix_expr(p, kBitOrPrec);
    if (infix(peek(), kCmpPrec))
      fail(peek(), "comparisons do not chain", "use 'and': (a < b) and (b < c), or parenthesise");
    return build(t, [&] { return binary(*op, a, b, node_span(t, p)); });
  }
  Expr infix_expr(const Span& p, int prec) {
    if (prec > kMulPrec) return unary_expr(p);
    return left_assoc(p, prec, [&] { return infix_expr(p, prec + 1); });
  }
  // operand (op operand)* for the infix operators of one precedence, left to right.
  template <class F>
  Expr left_assoc(const Span& p, int prec, F&& operand) {
    Expr a = operand();
    while (auto op = infix(peek(), prec)) {
      const Token& t = next();
      Expr b = operand();
      BinOp o = *op;
      a = build(t, [&] { return binary(o, a, b, node_span(t, p)); });
    }
    return a;
  }
  Expr unary_expr(const Span& p) {
    if (is_punct(peek(), "~")) {
      const Token& t = next();
      Nest nest(*this, t);
      Expr a = unary_expr(p);
      return build(t, [&] { return unary(UnOp::BitNot, a, node_span(t, p)); });
    }
    if (is_punct(peek(), "-")) {
      const Token& t = next();
      if (peek().kind == Tok::Number) return number(next(), true, node_span(t, p), t);
      if (peek().kind == Tok::Ident && special_float(peek().text)) return special(next(), true, node_span(t, p), t);
      Nest nest(*this, t);
      Expr a = unary_expr(p);
      return build(t, [&] { return unary(UnOp::Neg, a, node_span(t, p)); });
    }
    return primary(p);
  }

  static std::optional<std::pair<double, DType>> special_float(const std::string& w) {
    for (std::string_view base : {"inf", "nan"}) {
      if (w.compare(0, 3, base) != 0) continue;
      std::string_view rest = std::string_view(w).substr(3);
      DType t = DTypeCode::f32;
      if (!rest.empty()) {
        auto d = text::dtype_from_suffix(rest);
        if (!d || !d->is_float()) return std::nullopt;
        t = *d;
      }
      double v = base == "inf" ? HUGE_VAL : std::nan("");
      return std::make_pair(v, t);
    }
    return std::nullopt;
  }
  Expr special(const Token& t, bool neg, const Span& s, const Token& start) {
    auto sp = *special_float(t.text);
    return build(start, [&] { return float_imm(neg ? -sp.first : sp.first, sp.second, s); });
  }

  Expr number(const Token& t, bool neg, const Span& s, const Token& start) {
    DType dt = is_float_text(t.text) ? DType(DTypeCode::f32) : kIndexType;
    if (!t.suffix.empty()) {
      auto d = text::dtype_from_suffix(t.suffix);
      if (!d) fail(t, "unknown literal suffix '" + t.suffix + "'", "suffixes: i8 i32 i64 u8 b f16 bf16 f32 f64");
      dt = *d;
      if (is_float_text(t.text) && !dt.is_float())
        fail(t, "a float literal cannot have the integer suffix '" + t.suffix + "'");
    }
    if (dt.is_float()) {
      std::string txt = (neg ? "-" : "") + t.text;
      double v = std::strtod(txt.c_str(), nullptr);
      return build(start, [&] { return float_imm(v, dt, s); });
    }
    errno = 0;
    unsigned long long mag = std::strtoull(t.text.c_str(), nullptr, 10);
    const unsigned long long lim = neg ? 9223372036854775808ull : 9223372036854775807ull;
    if (errno || mag > lim) fail(t, "integer literal out of range: " + std::string(neg ? "-" : "") + t.text);
    int64_t v = neg ? static_cast<int64_t>(0ull - mag) : static_cast<int64_t>(mag);
    return build(start, [&] { return int_imm(v, dt, s); });
  }

  Expr primary(const Span& p) {
    const Token& t = peek();
    if (t.kind == Tok::Number) {
      next();
      return number(t, false, node_span(t, p), t);
    }
    if (is_punct(t, "(")) {
      next();
      auto ann = opt_span(p);
      Expr e = expr(ann ? *ann : p);
      expect(")");
      return e;
    }
    if (t.kind != Tok::Ident) fail(t, "expected an expression, got " + describe(t));
    const std::string& w = t.text;
    Span s = node_span(t, p);
    if (w == "true" || w == "false") {
      next();
      return int_imm(w == "true" ? 1 : 0, DTypeCode::boolean, s);
    }
    if (special_float(w)) return special(next(), false, s, t);
    if (auto op = parse_binop(w); op && binop_prec(*op) == kCallPrec && is_punct(peek(1), "(")) {  // min max ceildiv
      next();
      next();
      Expr a = expr(p);
      expect(",");
      Expr b = expr(p);
      expect(")");
      BinOp o = *op;
      return build(t, [&] { return binary(o, a, b, s); });
    }
    if (auto fn = parse_mathfn(w); fn && is_punct(peek(1), "(")) {
      next();
      next();
      std::vector<Expr> args = expr_list(")", p);
      return build(t, [&] { return call(*fn, args, s); });
    }
    if (w == "where") {
      next();
      expect("(");
      std::vector<Expr> args = expr_list(")", p);
      if (args.size() != 3) fail(t, "where() takes 3 arguments (cond, a, b), got " + std::to_string(args.size()));
      return build(t, [&] { return select(args[0], args[1], args[2], s); });
    }
    if (w == "cast") {
      next();
      expect("<");
      DType dt = dtype();
      expect(">");
      expect("(");
      Expr v = expr(p);
      expect(")");
      return build(t, [&] { return cast(v, dt, s); });
    }
    if (text::is_reserved(w)) fail(t, "unexpected '" + w + "' in an expression");
    next();
    if (is_punct(peek(), "[")) {  // load
      Buffer b = lookup_buffer(t);
      next();
      std::vector<Expr> idx = expr_list("]", p);
      return std::make_shared<LoadNode>(b, std::move(idx), b->dtype, s);
    }
    Symbol* sym = lookup(w);
    if (!sym && declaring_shape_) {  // first use of a shape variable declares it
      Span vs = span_or(t, p);
      DType vt = kIndexType;
      if (accept(":")) vt = dtype();
      Var v = var(w, vt, vs);
      define(w, Symbol{v, nullptr, true}, t);
      return v;
    }
    if (!sym)
      fail(t, "undefined variable '" + w + "'",
           "define it with 'let', a loop, the grid, or as a kernel parameter before this use");
    if (!sym->var) fail(t, "'" + w + "' is a buffer; index it like " + w + "[i, j]");
    return sym->var;
  }

  std::string file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  bool spans_ = false;
  bool declaring_shape_ = false;
  std::vector<std::unordered_map<std::string, Symbol>> scopes_;
  int nest_ = 0;  // current recursion depth (Nest)
};

}  // namespace

Kernel parse_kernel(std::string_view text, const std::string& filename) {
  Parser p(text, filename);
  return p.kernel();
}

std::pair<Expr, size_t> parse_expr_prefix(std::string_view text, std::unordered_map<std::string, Var>& vars,
                                          const Span& at, bool declare) {
  Parser p(text, at.file, at.line, at.col);
  return p.expr_prefix(vars, declare, at.col);
}

}  // namespace tw::ir
