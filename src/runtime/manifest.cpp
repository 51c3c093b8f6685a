// print_manifest / parse_manifest: the text form of an artifact's manifest (manifest.h).
#include "runtime/manifest.h"

#include <sstream>

namespace tw::runtime {

namespace {

constexpr ir::BinOp kLastBinOp = ir::all_of<ir::BinOp>().back();

std::string terms_text(const std::vector<DimTerm>& rpn) {
  if (rpn.empty()) return "-";
  std::string out;
  for (const DimTerm& t : rpn) {
    if (!out.empty()) out += ',';
    switch (t.kind) {
      case DimTerm::Const: out += "#" + std::to_string(t.value); break;
      case DimTerm::Var: out += "$" + std::to_string(t.value); break;
      case DimTerm::Op: out += std::string(ir::binop_name(t.op)); break;
    }
  }
  return out;
}

std::string span_text(const ir::Span& s) { return std::to_string(s.line) + " " + std::to_string(s.col) + " " + s.file; }

class Reader {
 public:
  Reader(const std::string& text, const std::string& path) : in_(text), path_(path) {}

  // Next non-empty line split into its first `fields` tokens and the rest; false at the end.
  bool next(std::vector<std::string>& tok, size_t fields) {
    std::string line;
    while (std::getline(in_, line)) {
      ++lineno_;
      if (line.empty()) continue;
      tok.clear();
      size_t pos = 0;
      for (size_t i = 0; i < fields && pos <= line.size(); ++i) {
        size_t sp = line.find(' ', pos);
        if (sp == std::string::npos) sp = line.size();
        tok.push_back(line.substr(pos, sp - pos));
        pos = sp + 1;
      }
      tok.push_back(pos <= line.size() ? line.substr(pos) : std::string());
      line_ = line;
      return true;
    }
    return false;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw ir::Error(path_ + ":" + std::to_string(lineno_) + ": malformed manifest line '" + line_ + "': " + what, {},
                    "the artifact is damaged or from an incompatible Tilewright; export it again");
  }
  int64_t integer(const std::string& s) const {
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
    fail("'" + s + "' is not an integer");
  }
  ir::Span span(const std::vector<std::string>& t, size_t at) const {
    return ir::Span{t.at(at + 2), static_cast<int>(integer(t.at(at))), static_cast<int>(integer(t.at(at + 1)))};
  }
  std::vector<DimTerm> terms(const std::string& s) const {
    std::vector<DimTerm> out;
    if (s == "-") return out;
    std::stringstream ss(s);
    std::string t;
    while (std::getline(ss, t, ',')) {
      if (t.size() > 1 && t[0] == '#') {
        out.push_back({DimTerm::Const, integer(t.substr(1)), {}});
      } else if (t.size() > 1 && t[0] == '$') {
        out.push_back({DimTerm::Var, integer(t.substr(1)), {}});
      } else {
        bool found = false;
        for (int op = 0; op <= static_cast<int>(kLastBinOp) && !found; ++op)
          if (ir::binop_name(static_cast<ir::BinOp>(op)) == t) {
            out.push_back({DimTerm::Op, 0, static_cast<ir::BinOp>(op)});
            found = true;
          }
        if (!found) fail("unknown dimension term '" + t + "'");
      }
    }
    return out;
  }

 private:
  std::istringstream in_;
  std::string path_, line_;
  int lineno_ = 0;
};

}  // namespace

std::string print_manifest(const Manifest& m) {
  std::string o = "tilewright-artifact " + std::to_string(kManifestFormat) + "\n";
  o += "tilewright " + m.version + "\n";
  o += "target " + m.target + "\n";
  if (!m.library.empty()) {
    o += "abi " + std::to_string(m.abi) + "\n";
    o += "compiler " + m.compiler + "\n";
    o += "cpu_arch " + m.cpu_arch + "\n";
    o += "cpu_features " + m.cpu_features + "\n";
    o += "library " + m.library + "\n";
    if (!m.runtime.empty()) o += "runtime " + m.runtime + "\n";
  }
  for (const auto& f : m.files) o += "file " + f.sha256 + " " + std::to_string(f.bytes) + " " + f.name + "\n";
  for (const auto& k : m.kernels) {
    const Signature& s = k.signature;
    o += "kernel " + s.kernel + " " + k.symbol + " " + std::to_string(k.tile_bytes) + "\n";
    o += "span " + span_text(s.span) + "\n";
    for (const auto& v : s.shape_vars) o += "var " + v.name + " " + span_text(v.span) + "\n";
    for (const auto& p : s.params) {
      o += std::string("param ") + (p.is_output ? "out" : "in") + " " + (p.is_scalar ? "scalar" : "tensor") + " " +
           std::string(p.dtype.name()) + " " + p.name + "\n";
      for (const auto& d : p.shape) o += "dim " + terms_text(d.rpn) + " " + d.text + "\n";
    }
    o += "end\n";
  }
  return o;
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  Reader r(text, path);
  Manifest m;
  std::vector<std::string> t;
  if (!r.next(t, 1) || t[0] != "tilewright-artifact")
    throw ir::Error(path + " is not a Tilewright artifact manifest (it must start with 'tilewright-artifact')", {},
                    "point at the directory written by kernel.export(dir)");
  if (r.integer(t[1]) != kManifestFormat)
    throw ir::Error(path + " has manifest format " + t[1] + ", this runtime reads format " +
                        std::to_string(kManifestFormat),
                    {}, "export the kernels again with the Tilewright version of this runtime");
  ManifestKernel* k = nullptr;
  SignatureParam* p = nullptr;
  while (r.next(t, 1)) {
    const std::string& key = t[0];
    if (key == "tilewright") m.version = t[1];
    else if (key == "target") m.target = t[1];
    else if (key == "abi") m.abi = static_cast<int>(r.integer(t[1]));
    else if (key == "compiler") m.compiler = t[1];
    else if (key == "cpu_arch") m.cpu_arch = t[1];
    else if (key == "cpu_features") m.cpu_features = t[1];
    else if (key == "library") m.library = t[1];
    else if (key == "runtime") m.runtime = t[1];
    else if (key == "file") {
      std::istringstream ss(t[1]);
      ManifestFile f;
      std::string bytes;
      if (!(ss >> f.sha256 >> bytes) || !std::getline(ss >> std::ws, f.name) || f.name.empty()) r.fail("expected 'file <sha256> <bytes> <name>'");
      f.bytes = static_cast<uint64_t>(r.integer(bytes));
      m.files.push_back(std::move(f));
    } else if (key == "kernel") {
      std::istringstream ss(t[1]);
      ManifestKernel nk;
      std::string tiles;
      if (!(ss >> nk.signature.kernel >> nk.symbol >> tiles)) r.fail("expected 'kernel <name> <symbol> <tile bytes>'");
      nk.tile_bytes = r.integer(tiles);
      nk.signature.target = m.target;
      m.kernels.push_back(std::move(nk));
      k = &m.kernels.back();
      p = nullptr;
    } else if (key == "end") {
      if (!k) r.fail("'end' outside a kernel");
      k = nullptr;
      p = nullptr;
    } else if (key == "span" || key == "var" || key == "param" || key == "dim") {
      if (!k) r.fail("'" + key + "' outside a kernel");
      std::istringstream ss(t[1]);
      std::vector<std::string> f;
      std::string w;
      const size_t want = key == "span" ? 2 : key == "var" ? 3 : key == "param" ? 3 : 1;
      for (size_t i = 0; i < want && ss >> w; ++i) f.push_back(w);
      if (f.size() != want) r.fail("too few fields");
      std::string rest;
      std::getline(ss >> std::noskipws, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      f.push_back(rest);
      if (key == "span") {
        k->signature.span = r.span(f, 0);
      } else if (key == "var") {
        k->signature.shape_vars.push_back({f[0], r.span(f, 1)});
      } else if (key == "param") {
        SignatureParam np;
        if (f[0] != "in" && f[0] != "out") r.fail("expected 'in' or 'out'");
        if (f[1] != "tensor" && f[1] != "scalar") r.fail("expected 'tensor' or 'scalar'");
        np.is_output = f[0] == "out";
        np.is_scalar = f[1] == "scalar";
        auto dt = ir::parse_dtype(f[2]);
        if (!dt) r.fail("unknown dtype '" + f[2] + "'");
        np.dtype = *dt;
        np.name = f[3];
        k->signature.params.push_back(std::move(np));
        p = &k->signature.params.back();
      } else {
        if (!p || p->is_scalar) r.fail("'dim' outside a tensor parameter");
        p->shape.push_back({r.terms(f[0]), f[1]});
      }
    } else {
      r.fail("unknown key '" + key + "'");
    }
  }
  if (k) r.fail("kernel '" + k->signature.kernel + "' has no 'end'");
  return m;
}

}  // namespace tw::runtime
