// The AOT path in C++: manifest text round trip, tw::bind on a parsed signature (derived
// dimensions included), tw::check_outputs, and export -> Artifact::load -> concurrent runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ir/parser.h"
#include "runtime/aot_export.h"
#include "runtime/manifest.h"
#include "support/sha256.h"
#include "tilewright/artifact.h"
#include "tilewright/runtime.h"

namespace {

using namespace tw;
using tw::ir::DTypeCode;

// dst(M * 2) <- src(M): a derived output dimension.
Signature doubled() {
  Signature s;
  s.kernel = "dup";
  s.target = "cpu";
  s.span = ir::Span{"k.py", 3, 5};
  s.shape_vars = {{"M", ir::Span{"k.py", 1, 1}}};
  SignatureParam in{"src", DTypeCode::f32, false, false, {{{{DimTerm::Var, 0, {}}}, "M"}}};
  SignatureParam sc{"alpha", DTypeCode::i8, false, true, {}};
  SignatureParam out{"dst", DTypeCode::f32, true, false,
                     {{{{DimTerm::Var, 0, {}}, {DimTerm::Const, 2, {}}, {DimTerm::Op, 0, ir::BinOp::Mul}}, "M * 2"}}};
  s.params = {in, sc, out};
  return s;
}

TEST(AotManifest, RoundTripsAndBindsDerivedDims) {
  runtime::Manifest m;
  m.version = "9.9.9";
  m.target = "cpu";
  m.abi = 1;
  m.compiler = "g++ (X) 1";
  m.cpu_features = "avx2 fma";
  m.library = "libx.so";
  m.files = {{"libx.so", std::string(64, 'a'), 10}, {"x.h", std::string(64, 'b'), 3}};
  m.kernels = {{doubled(), "x_dup", 128}};
  const std::string text = runtime::print_manifest(m);
  runtime::Manifest p = runtime::parse_manifest(text, "m");
  EXPECT_EQ(runtime::print_manifest(p), text);
  ASSERT_EQ(p.kernels.size(), 1u);
  const Signature& s = p.kernels[0].signature;
  EXPECT_EQ(s.span.file, "k.py");
  EXPECT_EQ(s.params[2].shape[0].text, "M * 2");
  float buf[5] = {};
  Binding b = bind(s, {TensorArg{buf, DTypeCode::f32, {5}}, int64_t(3)});
  EXPECT_EQ(b.shape_vars, std::vector<int64_t>{5});
  EXPECT_EQ(b.outputs.at(0).shape, std::vector<int64_t>{10});
  try {
    bind(s, {TensorArg{buf, DTypeCode::f32, {5}}, int64_t(300)});
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    EXPECT_EQ(e.message(), "argument 'alpha' of kernel 'dup' is int8, but 300 is out of its range [-128, 127]");
    EXPECT_EQ(e.span().line, 3);
  }
}

// A manifest's text with its checksum line (what export writes last).
std::string with_checksum(const std::string& text) { return text + "checksum sha256 " + support::sha256_hex(text) + "\n"; }

TEST(AotManifest, MalformedLinesAreErrors) {
  const std::string head = "tilewright-artifact 2\ntarget cpu\n";
  for (auto [text, what] : std::vector<std::pair<std::string, std::string>>{
           {head + "colour blue\n", "unknown key 'colour'"},
           {head + "dim $0 M\n", "'dim' outside a kernel"},
           {head + "kernel k k_k 0\nparam in tensor float99 X\nend\n", "unknown dtype 'float99'"},
           {head + "kernel k k_k 0\nparam in tensor float32 X\ndim $0,pow M\nend\n", "unknown dimension term 'pow'"},
           {head + "kernel k k_k zero\n", "'zero' is not an integer"},
           {head + "kernel k k_k 0\n", "kernel 'k' has no 'end'"},
           {"tilewright-artifact 7\n", "manifest format 7"},
           {"hello\n", "is not a Tilewright artifact manifest"},
           {head + "kernel k k_k 0\nspan 3 1 /a/%0Ab.py\nspan 3 1 /a/%7b.py\nend\n", "unknown escape '%7b'"}}) {
    if (text.rfind("tilewright-artifact 2", 0) == 0) text = with_checksum(text);
    try {
      runtime::parse_manifest(text, "the.manifest");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ir::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

// What print_manifest writes, parse_manifest reads back: a source path with '%', a newline and a
// carriage return included (session 23, h-hunt11b F8: such a path made the manifest unreadable);
// one changed byte or a cut-off end is refused by the checksum (F1: a damaged shape sized outputs).
TEST(AotManifest, RoundTripAndChecksum) {
  runtime::Manifest m;
  m.version = "9.9";
  m.target = "cpu";
  runtime::ManifestKernel k;
  k.signature.kernel = "k";
  k.signature.span = ir::Span{"/a\nb/100%\r.py", 3, 5};
  k.symbol = "k_k";
  m.kernels.push_back(k);
  const std::string text = runtime::print_manifest(m);
  const runtime::Manifest back = runtime::parse_manifest(text, "the.manifest");
  ASSERT_EQ(back.kernels.size(), 1u);
  EXPECT_EQ(back.kernels[0].signature.span.file, "/a\nb/100%\r.py");
  EXPECT_EQ(back.kernels[0].signature.span.line, 3);
  auto error = [](const std::string& t) {
    try {
      runtime::parse_manifest(t, "the.manifest");
    } catch (const ir::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string flipped = text;
  flipped[flipped.find("k_k")] = 'j';
  EXPECT_NE(error(flipped).find("does not match its checksum"), std::string::npos) << error(flipped);
  EXPECT_NE(error(text.substr(0, text.size() - 20)).find("does not match its checksum"), std::string::npos);
  EXPECT_NE(error(text.substr(0, text.find("checksum"))).find("does not end with its checksum line"),
            std::string::npos);
  EXPECT_NE(error(text + "end\n").find("does not end with its checksum line"), std::string::npos);
}

TEST(AotManifest, CheckOutputs) {
  Signature s = doubled();
  float in[4] = {}, out[8] = {};
  Binding b = bind(s, {TensorArg{in, DTypeCode::f32, {4}}, int64_t(1)});
  check_outputs(s, b, {TensorArg{out, DTypeCode::f32, {8}}});
  auto message = [&](std::vector<TensorArg> outs) {
    try {
      check_outputs(s, b, outs);
    } catch (const ir::Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({}), "kernel 'dup' has 1 output(s), got 0");
  EXPECT_EQ(message({TensorArg{out, DTypeCode::f32, {7}}}),
            "output 'dst' of kernel 'dup' must have shape (8,) for these inputs, got (7,)");
  EXPECT_EQ(message({TensorArg{out, DTypeCode::i32, {8}}}), "output 'dst' of kernel 'dup' must have dtype float32, got int32");
  EXPECT_EQ(message({TensorArg{nullptr, DTypeCode::f32, {8}}}), "output 'dst' of kernel 'dup' has a null data pointer");
}

// An output whose byte size passes int64 (an (M * 2) output of a huge M) is refused, not
// allocated with a wrapped size (session 22, h-hunt10b F7: the kernel then wrote past it).
TEST(AotTensor, SizesPastTheAddressSpaceAreErrors) {
  auto message = [](std::vector<int64_t> shape) {
    try {
      Tensor t(DTypeCode::f32, shape);
    } catch (const ir::Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({int64_t{46116860184273879}, 96}),
            "a tensor of shape (46116860184273879, 96) does not fit in memory (over 2^62 bytes)");
  EXPECT_EQ(message({int64_t{1} << 31, int64_t{1} << 31, 4}),
            "a tensor of shape (2147483648, 2147483648, 4) does not fit in memory (over 2^62 bytes)");
  EXPECT_EQ(message({0, int64_t{1} << 62}), "no error");
  EXPECT_EQ(message({int64_t{1} << 62, int64_t{1} << 62, 0}), "no error");
  EXPECT_EQ(message({3, -1}), "a tensor dimension cannot be negative");
  Tensor ok(DTypeCode::f32, {3, 5});
  EXPECT_EQ(ok.nbytes(), 60);
}

// An empty path named the root directory's manifest (F8).
TEST(AotArtifact, AnEmptyDirectoryPathIsRefused) {
  try {
    Artifact::load("");
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    EXPECT_EQ(e.message(), "the artifact directory is an empty path");
  }
}

constexpr const char* kAxpb = R"(kernel axpb(X: global float32[M], Y: global float32[M] out)
    grid(bx = ceildiv(M, 16)) {
  for i in parallel(0, 16) {
    if bx * 16 + i < M {
      Y[bx * 16 + i] = X[bx * 16 + i] * 2.0 + 1.0
    }
  }
}
)";

TEST(AotArtifact, ExportLoadAndRunFromManyThreads) {
  namespace fs = std::filesystem;
  auto exe = tw::compile(ir::parse_kernel(kAxpb, "axpb.tir"), "cpu");
  fs::path dir = fs::temp_directory_path() / ("tw_aot_test_" + std::to_string(::getpid()));
  runtime::export_artifact({exe}, dir.string(), "t");
  auto art = Artifact::load(dir.string());
  EXPECT_EQ(art->kernel_names(), std::vector<std::string>{"axpb"});
  const AotKernel& k = art->kernel("axpb");
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const int64_t n = 1 + (t * 50 + i) % 100;  // every size: the dimension is symbolic
        std::vector<float> x(n);
        for (int64_t j = 0; j < n; ++j) x[j] = float(j + t);
        std::vector<Tensor> y = k.run({view(x.data(), {n})});
        std::vector<float> z(n);
        k.run({view(x.data(), {n})}, {view(z.data(), {n})});
        for (int64_t j = 0; j < n; ++j)
          if (y[0].data_as<float>()[j] != 2.0f * x[j] + 1.0f || z[j] != y[0].data_as<float>()[j]) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  std::vector<float> z(3);
  EXPECT_THROW(k.run({view(z.data(), {3})}, {view(z.data(), {4})}), ir::Error);
  EXPECT_THROW(art->kernel("axpc"), ir::Error);
  fs::remove_all(dir);
}

// Two artifacts with a kernel of the same name, loaded one after the other (the first one kept,
// then dropped): each runs its own code. Libraries are loaded through /proc/self/fd/<n>, a name
// glibc remembers; a descriptor number reused while a library holds that name loaded the first
// artifact's library in place of the second's.
TEST(AotArtifact, TwoArtifactsRunTheirOwnCode) {
  namespace fs = std::filesystem;
  std::string text3 = kAxpb;
  const size_t at = text3.find("* 2.0 + 1.0");
  ASSERT_NE(at, std::string::npos);
  text3.replace(at, 11, "* 3.0 + 1.0");
  const fs::path base = fs::temp_directory_path() / ("tw_aot_two_" + std::to_string(::getpid()));
  runtime::export_artifact({tw::compile(ir::parse_kernel(kAxpb, "axpb.tir"), "cpu")}, (base / "two").string(), "t");
  runtime::export_artifact({tw::compile(ir::parse_kernel(text3, "axpb3.tir"), "cpu")}, (base / "three").string(),
                           "t");
  std::vector<float> x{1.0f, 2.0f};
  auto first = [&](const std::shared_ptr<const Artifact>& art) {
    return art->kernel("axpb").run({view(x.data(), {2})})[0].data_as<float>()[1];
  };
  {
    auto two = Artifact::load((base / "two").string());
    auto three = Artifact::load((base / "three").string());
    EXPECT_EQ(first(two), 5.0f);
    EXPECT_EQ(first(three), 7.0f);
  }
  {  // the same artifact loaded again while loaded (glibc matches the file, adds the name as an
     // alias); then the other one through the numbers those names held
    auto two = Artifact::load((base / "two").string());
    auto again = Artifact::load((base / "two").string());
    EXPECT_EQ(first(again), 5.0f);
    EXPECT_EQ(first(two), 5.0f);
    EXPECT_EQ(first(Artifact::load((base / "three").string())), 7.0f);
  }
  for (int i = 0; i < 3; ++i) {  // loaded, dropped and loaded again, in turns
    EXPECT_EQ(first(Artifact::load((base / "three").string())), 7.0f);
    EXPECT_EQ(first(Artifact::load((base / "two").string())), 5.0f);
  }
  fs::remove_all(base);
}

}  // namespace
