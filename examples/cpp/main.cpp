// Runs one kernel of an exported artifact on .npy inputs from several threads at once and
// checks every result against a reference .npy (docs/deploying.md).
//
//   consumer ARTIFACT KERNEL REFERENCE.npy INPUT.npy... [--threads T] [--launches N] [--bench N]
//
// --bench N afterwards times N more launches on one thread into preallocated outputs and
// prints the time per launch and the resident memory before and after.
#include <tilewright/artifact.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// A float32 .npy file (C order), as numpy.save writes it.
struct Npy {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Npy read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t n;
    f.read(reinterpret_cast<char*>(&n), 2);
    header_len = n;
  } else {
    f.read(reinterpret_cast<char*>(&header_len), 4);
  }
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (header.find("'descr': '<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(path + ": expected a C-ordered float32 array");
  Npy a;
  std::istringstream dims(header.substr(header.find('(') + 1, header.find(')') - header.find('(') - 1));
  for (std::string d; std::getline(dims, d, ',');)
    if (d.find_first_of("0123456789") != std::string::npos) a.shape.push_back(std::stoll(d));
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  a.data.resize(static_cast<size_t>(n));
  if (!f.read(reinterpret_cast<char*>(a.data.data()), n * 4)) throw std::runtime_error(path + ": truncated");
  return a;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

// The value of a count option, in [lo, hi]; nullopt (and a message) when it is not one.
std::optional<long> count_option(const std::string& flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno == 0 && end != text && *end == '\0' && v >= lo && v <= hi) return v;
  std::cerr << flag << " takes a whole number from " << lo << " to " << hi << ", got '" << text << "'\n";
  return std::nullopt;
}

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  long threads = 4, launches = 20, bench = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    long* option = a == "--threads" ? &threads : a == "--launches" ? &launches : a == "--bench" ? &bench : nullptr;
    if (option && i + 1 < argc) {
      std::optional<long> v = count_option(a, argv[++i], option == &bench ? 0 : 1, option == &threads ? 256 : 1L << 40);
      if (!v) return 2;
      *option = *v;
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() < 3) {
    std::cerr << "usage: consumer ARTIFACT KERNEL REFERENCE.npy INPUT.npy... [--threads T] [--launches N] [--bench N]\n";
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<const tw::Artifact> lib = tw::Artifact::load(pos[0]);  // verifies, then loads
    double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const tw::AotKernel& kernel = lib->kernel(pos[1]);
    Npy ref = read_npy(pos[2]);
    std::vector<Npy> ins;
    std::vector<tw::Arg> args;
    for (size_t i = 3; i < pos.size(); ++i) ins.push_back(read_npy(pos[i]));
    for (const Npy& in : ins) args.push_back(tw::view(in.data.data(), in.shape));

    // Several threads launch concurrently; each checks its own outputs.
    std::vector<std::string> errors(threads);
    std::vector<std::thread> pool;
    for (long t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          for (long i = 0; i < launches; ++i) {
            std::vector<tw::Tensor> out = kernel.run(args);
            if (out.size() != 1 || out[0].shape() != ref.shape) throw std::runtime_error("unexpected output shape");
            const float* got = out[0].data_as<float>();
            for (size_t j = 0; j < ref.data.size(); ++j)
              if (std::fabs(got[j] - ref.data[j]) > 1e-3f * (1.0f + std::fabs(ref.data[j])))
                throw std::runtime_error("element " + std::to_string(j) + " is " + std::to_string(got[j]) +
                                         ", expected " + std::to_string(ref.data[j]));
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (auto& th : pool) th.join();
    for (long t = 0; t < threads; ++t)
      if (!errors[t].empty()) {
        std::cerr << "thread " << t << ": " << errors[t] << "\n";
        return 1;
      }
    std::printf("ok: %ld threads x %ld launches of %s match the reference (load %.2f ms)\n", threads, launches,
                kernel.name().c_str(), load_ms);

    if (bench > 0) {
      tw::Binding b = kernel.bind(args);
      std::vector<tw::Tensor> outs;
      std::vector<tw::TensorArg> out_args;
      for (const auto& spec : b.outputs) outs.emplace_back(spec.dtype, spec.shape);
      for (const auto& o : outs) out_args.push_back(o.arg());
      for (int i = 0; i < 1000; ++i) kernel.run(args, out_args);  // warm up
      long rss0 = rss_kib();
      auto b0 = std::chrono::steady_clock::now();
      for (long i = 0; i < bench; ++i) kernel.run(args, out_args);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - b0).count() / bench;
      std::printf("bench: %ld launches, %.3f us per launch, rss %ld KiB -> %ld KiB\n", bench, us, rss0, rss_kib());
    }
  } catch (const std::exception& e) {  // tw::ir::Error: what() says what, where and how to fix it
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
