#include "support/env.h"

#include <filesystem>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace tw::support {
namespace {

const char* get(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}

// The value as it is shown in a message: bytes that are not printable ASCII (not UTF-8, control
// characters) written \xNN, so the message is text whatever the variable holds (rel30 F1).
std::string shown(const char* value) {
    std::string out;
    for (const char* p = value; *p; ++p) {
        const auto c = static_cast<unsigned char>(*p);
        if (c >= 0x20 && c < 0x7f) {
            out += *p;
        } else {
            const char hex[] = "0123456789abcdef";
            out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        }
    }
    return out;
}

// A number or switch's value without the spaces or tabs around it (`TW_NUM_THREADS=" 4"` and
// `TW_BOUNDS_CHECK=" 1"` read alike, api35); empty, or only spaces, is unset like an empty value.
std::optional<std::string> get_value(const char* name) {
    const char* v = get(name);
    if (!v) return std::nullopt;
    std::string s(v);
    const auto first = s.find_first_not_of(" \t");
    if (first == std::string::npos) return std::nullopt;
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

[[noreturn]] void bad(const char* name, const char* value, const char* accepted) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + shown(value) +
                                "' is invalid: expected " + accepted);
}

bool read_bool(const char* name) {
    const std::optional<std::string> t = get_value(name);
    if (!t) return false;
    const std::string& s = *t;
    const char* v = s.c_str();
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off") return false;
    bad(name, v, "1 or 0 (also true/false, yes/no, on/off)");
}

}  // namespace

std::optional<uint64_t> parse_byte_count(const std::string& v) {
    if (v.empty() || v[0] < '0' || v[0] > '9') return std::nullopt;
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (errno == ERANGE) return std::nullopt;
    uint64_t mult = 1;
    const std::string suffix(end);
    if (suffix == "" || suffix == "B") mult = 1;
    else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ull << 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ull << 30;
    else if (suffix == "T" || suffix == "t" || suffix == "TiB") mult = 1ull << 40;
    else return std::nullopt;
    if (n > UINT64_MAX / mult) return std::nullopt;
    return n * mult;
}

namespace {

// A positive byte count (parse_byte_count), or `dflt` when unset.
uint64_t read_bytes(const char* name, uint64_t dflt) {
    const std::optional<std::string> t = get_value(name);
    if (!t) return dflt;
    const char* v = t->c_str();
    const char* accepted = "a positive byte count, optionally with a suffix K, M, G or T "
                           "(powers of 1024), e.g. 2G or 500M";
    const std::optional<uint64_t> n = parse_byte_count(v);
    if (!n || *n == 0) bad(name, v, accepted);
    return *n;
}

// An integer in [lo, hi], or `dflt` when unset.
int read_int(const char* name, int dflt, long lo, long hi, const char* accepted) {
    const std::optional<std::string> value = get_value(name);
    if (!value) return dflt;
    const char* t = value->c_str();
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(t, &end, 10);
    if (errno || *end != '\0' || n < lo || n > hi) bad(name, t, accepted);
    return static_cast<int>(n);
}

std::string absolute_dir(const char* name, const std::string& dir) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(dir, ec);
    if (ec) bad(name, dir.c_str(), ("a directory (made absolute against the working directory, which failed: " +
                                    ec.message() + ")").c_str());
    return p.string();
}

}  // namespace

int available_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    unsigned hc = std::thread::hardware_concurrency();
    return hc ? static_cast<int>(hc) : 1;
}

int env_num_threads() {
    return read_int("TW_NUM_THREADS", available_cpus(), 1, 4096,
                    "an integer from 1 to 4096 (number of worker threads including the caller)");
}

bool env_cpu_amx() { return get_value("TW_CPU_AMX") ? read_bool("TW_CPU_AMX") : true; }

bool env_verbose() { return read_bool("TW_VERBOSE"); }

Env read_env() {
    Env e;
    if (const char* d = get("TW_CACHE_DIR")) {
        e.cache_dir = d;
    } else if (const char* x = get("XDG_CACHE_HOME")) {
        e.cache_dir = std::string(x) + "/tilewright";
    } else if (const char* h = get("HOME")) {
        e.cache_dir = std::string(h) + "/.cache/tilewright";
    } else {
        e.cache_dir = "/tmp/tilewright-cache-" + std::to_string(static_cast<long>(getuid()));
    }
    // Relative directories are made absolute now, against the working directory at start-up: a
    // later chdir must not move the cache, and a relative path starting with '-' must not reach
    // the compiler's command line as an option (`-I-1/include`).
    e.cache_dir = absolute_dir("TW_CACHE_DIR", e.cache_dir);
    e.cache_disabled = read_bool("TW_CACHE_DISABLE");
    e.cache_max_bytes = read_bytes("TW_CACHE_MAX_BYTES", 2ull << 30);
    if (const char* d = get("TW_DUMP_IR")) e.dump_ir_dir = absolute_dir("TW_DUMP_IR", d);
    if (const char* c = get("TW_CXX")) e.cxx = c;
    else if (const char* c2 = get("CXX")) e.cxx = c2;
    else e.cxx = "g++";

    e.num_threads = env_num_threads();
    e.memory_cache_max = read_int("TW_MEMORY_CACHE_MAX", 512, 1, 1000000,
                                  "an integer from 1 to 1000000 (compiled kernels kept loaded in memory)");
    e.verbose = env_verbose();
    e.frozen = read_bool("TW_FROZEN");
    e.bounds_check = read_bool("TW_BOUNDS_CHECK");
    e.progress = get_value("TW_PROGRESS") ? read_bool("TW_PROGRESS") : true;
    e.cpu_amx = env_cpu_amx();
    e.cpu_arch = "native";
    if (const char* a = get("TW_CPU_ARCH")) {
        // A -march value: a word, never a flag or a path. Whether the compiler knows it is
        // checked on first use (runtime::target_cpu_features), which needs the compiler.
        std::string s(a);
        bool word = s.size() <= 64 && (std::isalnum(static_cast<unsigned char>(s[0])) != 0);
        for (char c : s) word = word && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
        if (!word)
            bad("TW_CPU_ARCH", a, "native or a -march value of the host compiler, e.g. x86-64-v3, haswell, znver3, "
                                  "skylake-avx512 (letters, digits, '-', '_', '.')");
        e.cpu_arch = s;
    }
    return e;
}

const Env& env() {
    static const Env e = read_env();  // magic static: initialised once, thread-safe
    return e;
}

namespace {
std::atomic<bool> g_frozen{false};
}

void freeze(bool on) { g_frozen.store(on, std::memory_order_relaxed); }

bool frozen() { return g_frozen.load(std::memory_order_relaxed) || env().frozen; }

}  // namespace tw::support
