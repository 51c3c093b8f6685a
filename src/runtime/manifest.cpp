// print_manifest / parse_manifest: the text form of an artifact's manifest (manifest.h).
#include "runtime/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "support/sha256.h"

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

// A source path is the last field of its line and may hold any byte: '%', '\n' and '\r' are
// written as %25, %0A and %0D, so the line stays one line and reads back as written.
std::string escape_path(const std::string& path) {
  std::string out;
  for (char c : path) out += c == '%' ? "%25" : c == '\n' ? "%0A" : c == '\r' ? "%0D" : std::string(1, c);
  return out;
}

std::string span_text(const ir::Span& s) {
  return std::to_string(s.line) + " " + std::to_string(s.col) + " " + escape_path(s.file);
}

constexpr const char* kChecksumKey = "checksum sha256 ";

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
    return ir::Span{unescape_path(t.at(at + 2)), static_cast<int>(integer(t.at(at))),
                    static_cast<int>(integer(t.at(at + 1)))};
  }
  std::string unescape_path(const std::string& s) const {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '%') {
        out += s[i];
        continue;
      }
      const std::string code = s.substr(i + 1, 2);
      if (code == "25") out += '%';
      else if (code == "0A") out += '\n';
      else if (code == "0D") out += '\r';
      else fail("unknown escape '%" + code + "' in a source path");
      i += 2;
    }
    return out;
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
  return o + kChecksumKey + support::sha256_hex(o) + "\n";
}

// The text of manifest `path` before its last line, after checking that line: the sha256 of
// that text. A damaged byte anywhere (a bad copy, a truncated file) is an error here, before its
// shapes size any output (the manifest is not signed: whoever can write the directory can rewrite
// it and its checksum, docs/deploying.md).
static std::string checked_body(const std::string& text, const std::string& path) {
  const std::string key = kChecksumKey;
  const std::string fix = "export the kernels again (kernel.export(dir) / tw.export(kernels, dir)) and copy the "
                          "whole directory";
  const size_t last = text.rfind(key);
  std::string line = last == std::string::npos ? "" : text.substr(last);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  if (last == std::string::npos || (last > 0 && text[last - 1] != '\n') || line.find('\n') != std::string::npos)
    throw ir::Error(path + " does not end with its checksum line: the manifest is truncated or damaged", {}, fix);
  const std::string body = text.substr(0, last), digest = support::sha256_hex(body);
  if (line.substr(key.size()) != digest)
    throw ir::Error(path + " does not match its checksum (the sha256 of its text is " + digest +
                        ", its last line says " + line.substr(key.size()) + "): the manifest was modified or damaged",
                    {}, fix);
  // Its strings reach Python as str: bytes that are not UTF-8 are damage too (h-hunt11b F13).
  int line_no = 1;
  for (size_t i = 0; i < body.size();) {
    const unsigned char c = static_cast<unsigned char>(body[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= body.size();
    for (size_t j = 1; ok && j < n; ++j) ok = (static_cast<unsigned char>(body[i + j]) >> 6) == 0x2;
    if (!ok)
      throw ir::Error(path + ":" + std::to_string(line_no) + ": the manifest is not UTF-8 text: it was damaged", {},
                      fix);
    if (c == '\n') ++line_no;
    i += n;
  }
  return body;
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  std::vector<std::string> t;
  Reader head(text, path);
  if (!head.next(t, 1) || t[0] != "tilewright-artifact")
    throw ir::Error(path + " is not a Tilewright artifact manifest (it must start with 'tilewright-artifact')", {},
                    "point at the directory written by kernel.export(dir)");
  if (head.integer(t[1]) != kManifestFormat)
    throw ir::Error(path + " has manifest format " + t[1] + ", this runtime reads format " +
                        std::to_string(kManifestFormat),
                    {}, "export the kernels again with the Tilewright version of this runtime");
  Reader r(checked_body(text, path), path);
  r.next(t, 1);  // the format line, read above
  Manifest m;
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

namespace {
const char* kExportAgain = "export the kernels again (kernel.export(dir) / tw.export(kernels, dir))";
}

int open_regular_file(const std::string& path, uint64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("'" + path + "' is " + (S_ISREG(st.st_mode) ? std::strerror(e) : "not a regular file"));
  }
  *bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

Manifest read_manifest(const std::string& dir) {
  if (dir.empty())  // "" + "/tilewright.manifest" would name the root directory's
    throw ir::Error("the artifact directory is an empty path", {},
                    "pass the directory written by kernel.export(dir) or tw.export(kernels, dir)");
  const std::string path = dir + "/" + kManifestFile;
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT)
    throw ir::Error("cannot read " + path + ": no such artifact", {},
                    "pass the directory written by kernel.export(dir) or tw.export(kernels, dir)");
  uint64_t bytes = 0;
  int fd = -1;
  try {
    fd = open_regular_file(path, &bytes);
  } catch (const std::exception& e) {
    throw ir::Error(std::string("cannot read the manifest of the artifact: ") + e.what(), {}, kExportAgain);
  }
  std::string text;
  constexpr uint64_t kMax = uint64_t{64} << 20;
  if (bytes <= kMax) {
    text.resize(bytes);
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (bytes > kMax)
    throw ir::Error("the manifest " + path + " is " + std::to_string(bytes) + " bytes: not a Tilewright manifest", {},
                    kExportAgain);
  return parse_manifest(text, path);
}

}  // namespace tw::runtime
