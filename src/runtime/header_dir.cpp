#include "runtime/header_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "runtime/disk_cache.h"
#include "support/sha256.h"
#include "runtime/embedded_headers.h"

namespace tw::runtime {

namespace fs = std::filesystem;

const std::string& embedded_headers_hash() {
  static const std::string h = [] {
    std::string all;
    for (const auto& [path, text] : embedded_cpu_headers()) {
      all += path;
      all += '\0';
      all += text;
      all += '\0';
    }
    return support::sha256_hex(all);
  }();
  return h;
}

namespace {

constexpr const char* kComplete = ".complete";

// Owned by us, not writable by others, and a directory or a regular file (lstat: no links).
bool private_node(const fs::path& p, bool* is_dir) {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return false;
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) return false;
  *is_dir = S_ISDIR(st.st_mode);
  return *is_dir || S_ISREG(st.st_mode);
}

// Out of descriptors is not a bad header directory: it would be rewritten three times and then
// reported as changed by another process (rel30 F4).
bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

[[noreturn]] void no_descriptor(const fs::path& p) {
  throw std::runtime_error("cannot verify the runtime headers: cannot open '" + p.string() +
                           "': too many open files (the descriptor limit, RLIMIT_NOFILE, is reached); raise it "
                           "(`ulimit -n`, resource.setrlimit) or keep fewer kernels loaded (a lower "
                           "TW_MEMORY_CACHE_MAX, fewer Kernel objects held)");
}

bool same_contents(const fs::path& p, std::string_view expected) {
  errno = 0;
  std::ifstream in(p, std::ios::binary);
  if (!in && out_of_descriptors(errno)) no_descriptor(p);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  return !in.bad() && ss.str() == expected;
}

// True when `dir` holds exactly the embedded headers plus the completion marker, all private.
bool verify(const fs::path& dir) {
  bool is_dir = false;
  if (!private_node(dir, &is_dir) || !is_dir) return false;
  std::map<std::string, std::string_view> expected;
  for (const auto& [rel, text] : embedded_cpu_headers()) expected.emplace(std::string(rel), text);
  expected.emplace(kComplete, std::string_view(embedded_headers_hash()));
  size_t seen = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; it != end;
       it.increment(ec)) {
    if (ec && out_of_descriptors(ec.value())) no_descriptor(dir);
    if (ec) return false;
    if (!private_node(it->path(), &is_dir)) return false;
    if (is_dir) continue;
    auto e = expected.find(it->path().lexically_relative(dir).generic_string());
    if (e == expected.end() || !same_contents(it->path(), e->second)) return false;
    ++seen;
  }
  if (ec && out_of_descriptors(ec.value())) no_descriptor(dir);
  return !ec && seen == expected.size();
}

void write_private_file(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  fs::permissions(p.parent_path(), fs::perms::owner_all, fs::perm_options::replace);
  std::ofstream out(p, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write '" + p.string() + "' (disk full?)");
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
}

}  // namespace

std::string verified_header_dir(const std::string& root) {
  fs::path parent = fs::path(root) / "include";
  ensure_private_dir(parent.string(), "runtime header directory");
  fs::path final_dir = parent / embedded_headers_hash().substr(0, 16);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (verify(final_dir)) return final_dir.string();
    std::error_code ec;
    if (fs::symlink_status(final_dir, ec).type() != fs::file_type::not_found) {
      // Bad or planted: move it aside (atomic for other processes) and delete it.
      fs::path trash = parent / ("trash." + unique_suffix());
      fs::rename(final_dir, trash, ec);
      fs::remove_all(ec ? final_dir : trash, ec);
      if (ec)
        throw std::runtime_error("the runtime headers in '" + final_dir.string() +
                                 "' failed verification and cannot be removed (" + ec.message() +
                                 "); delete that directory or set TW_CACHE_DIR");
    }
    fs::path stage = parent / ("stage." + unique_suffix());
    try {
      fs::create_directory(stage);
      fs::permissions(stage, fs::perms::owner_all, fs::perm_options::replace);
      for (const auto& [rel, text] : embedded_cpu_headers()) write_private_file(stage / std::string(rel), text);
      write_private_file(stage / kComplete, embedded_headers_hash());
    } catch (const std::exception& e) {
      fs::remove_all(stage, ec);
      throw std::runtime_error("cannot write the CPU runtime headers under '" + parent.string() +
                               "': " + e.what() + "; free disk space or set TW_CACHE_DIR");
    }
    fs::rename(stage, final_dir, ec);  // atomic publish; if another process won, check theirs
    if (ec) fs::remove_all(stage, ec);
  }
  throw std::runtime_error("the runtime headers in '" + final_dir.string() +
                           "' keep failing verification (another process is changing them); "
                           "set TW_CACHE_DIR to a directory only this user can write");
}

}  // namespace tw::runtime
