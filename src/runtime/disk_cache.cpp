#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "runtime/log.h"
#include "support/fork.h"
#include "support/interrupt.h"
#include "support/sha256.h"

namespace fs = std::filesystem;

namespace tw::runtime {

// ---------------------------------------------------------------- DiskCache

namespace {

struct Manifest {
    std::string key;  // the entry's key: a manifest moved under another key is rejected
    std::string name;
    uint64_t size = 0;
    std::string sha256;
};

constexpr const char* kManifestHeader = "tilewright-cache-manifest 2";

std::string format_manifest(const Manifest& m) {
    return std::string(kManifestHeader) + "\nkey " + m.key + "\nname " + m.name + "\nsize " +
           std::to_string(m.size) + "\nsha256 " + m.sha256 + "\n";
}

std::optional<Manifest> parse_manifest(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != kManifestHeader) return std::nullopt;
    Manifest m;
    bool has_key = false, has_name = false, has_size = false, has_sha = false;
    while (std::getline(in, line)) {
        size_t sp = line.find(' ');
        if (sp == std::string::npos) return std::nullopt;
        std::string k = line.substr(0, sp), v = line.substr(sp + 1);
        if (k == "key") {
            m.key = v;
            has_key = true;
        } else if (k == "name") {
            m.name = v;
            has_name = true;
        } else if (k == "size") {
            if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
                return std::nullopt;
            m.size = std::stoull(v);
            has_size = true;
        } else if (k == "sha256") {
            if (v.size() != 64 || v.find_first_not_of("0123456789abcdef") != std::string::npos)
                return std::nullopt;
            m.sha256 = v;
            has_sha = true;
        }
    }
    if (!has_key || !has_name || !has_size || !has_sha) return std::nullopt;
    return m;
}

// Reads an entry's manifest (a few hundred bytes). Only a regular file is read, and at most
// kMaxSmallFile bytes of it: a FIFO planted there blocked the open forever, and a link to
// /dev/zero was read until memory ran out (h-rel17 F3); O_NOFOLLOW refuses a link, O_NONBLOCK opens
// a FIFO without waiting for a writer, and the fstat refuses it. False (a bad entry) otherwise.
constexpr off_t kMaxSmallFile = 64 << 10;

bool read_small_file(const std::string& path, std::string& out) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxSmallFile;
    out.clear();
    char buf[4096];
    while (ok) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 || out.size() + static_cast<size_t>(k) > static_cast<size_t>(kMaxSmallFile)) ok = false;
        if (k <= 0) break;
        out.append(buf, static_cast<size_t>(k));
    }
    close(fd);
    return ok;
}

void write_file_or_throw(const std::string& path, const std::string& data) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
    size_t off = 0;
    while (off < data.size()) {
        ssize_t k = write(fd, data.data() + off, data.size() - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            throw std::runtime_error("cannot write '" + path + "': " + std::strerror(e));
        }
        off += static_cast<size_t>(k);
    }
    if (close(fd) != 0)
        throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
}

void copy_file_or_throw(const std::string& from, const std::string& to) {
    std::error_code ec;
    fs::copy_file(from, to, ec);
    if (ec) throw std::runtime_error("cannot copy '" + from + "' to '" + to + "': " + ec.message());
}

// mkdir -p; components we create get mode 0700.
void make_private_dirs(const std::string& dir) {
    std::string cur;
    size_t pos = 0;
    while (pos <= dir.size()) {
        size_t next = dir.find('/', pos);
        if (next == std::string::npos) next = dir.size();
        cur = dir.substr(0, next);
        pos = next + 1;
        if (cur.empty()) continue;
        if (mkdir(cur.c_str(), 0700) == 0) {
            chmod(cur.c_str(), 0700);  // in case the umask removed user bits
        } else if (errno != EEXIST) {
            throw std::runtime_error("cannot create directory '" + cur +
                                     "': " + std::strerror(errno) +
                                     "; set TW_CACHE_DIR to a writable directory or "
                                     "TW_CACHE_DISABLE=1");
        }
    }
}

bool valid_key(const std::string& k) {
    if (k.size() < 2 || k.size() > 128) return false;
    for (char c : k)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
    return true;
}

bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 200 || n == "." || n == ".." || n == DiskCache::kManifestName)
        return false;
    if (n[0] == '.') return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

void check_args(const std::string& key, const std::string& name) {
    if (!valid_key(key))
        throw std::invalid_argument("DiskCache: invalid key '" + key +
                                    "': expected 2-128 characters of [0-9A-Za-z_-] "
                                    "(e.g. a sha256 hex digest)");
    if (!valid_name(name))
        throw std::invalid_argument("DiskCache: invalid artefact name '" + name +
                                    "': expected a plain file name of [0-9A-Za-z._-], not "
                                    "starting with '.', and not 'manifest'");
}

struct EntryInfo {
    std::string path;
    uint64_t bytes;
    struct timespec mtime;
};

}  // namespace

std::string unique_suffix() {
    static std::atomic<uint64_t> counter{0};
    return std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

void ensure_private_dir(const std::string& dir, const std::string& what) {
    make_private_dirs(dir);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0)
        throw std::runtime_error("cannot access " + what + " '" + dir + "': " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode))
        throw std::runtime_error(what + " '" + dir + "' is not a directory; set TW_CACHE_DIR");
    if (st.st_uid != geteuid())
        throw std::runtime_error("refusing to use " + what + " '" + dir + "': it is owned by uid " +
                                 std::to_string(st.st_uid) + ", not by this user (uid " +
                                 std::to_string(geteuid()) +
                                 "), who could plant code that Tilewright would load; set "
                                 "TW_CACHE_DIR to a directory you own");
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        // Through a link (kernels -> /tmp) `chmod 700 <dir>` would lock everyone out of the shared
        // directory it points at: the fix is the link (h-rel32 F8).
        struct stat lst;
        std::error_code ec;
        if (lstat(dir.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
            throw std::runtime_error("refusing to use " + what + " '" + dir + "': it is a link to '" +
                                     fs::canonical(dir, ec).string() + "', which is writable by other users (mode " +
                                     mode + "), so they could plant code that Tilewright would load; remove the "
                                     "link (Tilewright makes a private directory in its place) or set TW_CACHE_DIR "
                                     "to a private directory; do not chmod the shared one");
        throw std::runtime_error("refusing to use " + what + " '" + dir +
                                 "': it is writable by other users (mode " + mode +
                                 "), so they could plant code that Tilewright would load; "
                                 "run `chmod 700 " + dir + "` or set TW_CACHE_DIR");
    }
}

namespace {

// Why another user could rename entries of directory `st` (so replace what is below it), or "".
std::string foreign_control(const struct stat& st) {
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return "is owned by uid " + std::to_string(st.st_uid) + " (neither this user nor root)";
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return std::string("is writable by other users without the sticky bit (mode ") + mode + ")";
    }
    return "";
}

}  // namespace

void ensure_safe_ancestors(const std::string& dir, const std::string& what, const std::string& fix) {
    // The path as written (its links live in these directories too) and the one it resolves to.
    std::error_code ec;
    const fs::path lexical = fs::absolute(dir, ec).lexically_normal();
    const fs::path resolved = fs::weakly_canonical(dir, ec);  // `dir` itself may not exist yet
    if (ec) throw std::runtime_error("cannot resolve " + what + " '" + dir + "': " + ec.message());
    for (const fs::path& path : {lexical, resolved}) {
        fs::path a = path;
        while (!a.empty() && a.filename().empty()) a = a.parent_path();  // a trailing '/'
        for (a = a.parent_path(); !a.empty(); a = a.parent_path()) {
            struct stat st;
            if (stat(a.c_str(), &st) != 0)
                throw std::runtime_error("cannot access '" + a.string() + "', a parent of " + what + " '" + dir +
                                         "': " + std::strerror(errno));
            const std::string why = foreign_control(st);
            if (!why.empty())
                throw std::runtime_error(
                    "refusing to use " + what + " '" + dir + "': its parent directory '" + a.string() + "' " + why +
                    ", so another user could replace the directory, and the code Tilewright loads from it, after "
                    "it is checked; " + fix + ", or fix that directory's owner / mode");
            if (a == a.root_path()) break;
        }
    }
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes, std::chrono::milliseconds usage_wait)
    : dir_(std::move(dir)), max_bytes_(max_bytes), usage_wait_(usage_wait) {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    if (dir_.empty()) throw std::invalid_argument("DiskCache: empty cache directory");
    ensure_private_dir(dir_, "cache directory");
}

// The cache directory removed under a running process (an operator's `rm -rf`, tmpfiles ageing
// out /tmp): made again, with the same checks, rather than failing every later compile
// (session 23, h-hunt11b F5).
void DiskCache::remake_if_removed() const {
    struct stat st;
    if (lstat(dir_.c_str(), &st) != 0 && errno == ENOENT) ensure_private_dir(dir_, "cache directory");
}

std::string DiskCache::entry_dir(const std::string& key) const {
    return dir_ + "/" + key.substr(0, 2) + "/" + key;
}

void DiskCache::touch(const std::string& key) {
    check_args(key, "x");
    utimensat(AT_FDCWD, entry_dir(key).c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

void DiskCache::remove(const std::string& key) {
    check_args(key, "x");
    remove_entry(entry_dir(key));
}

void DiskCache::remove_entry(const std::string& entry) {
    // Rename first so other processes never see a half-deleted entry.
    std::string trash = dir_ + "/.trash-" + unique_suffix();
    std::error_code ec;
    if (rename(entry.c_str(), trash.c_str()) == 0) {
        fs::remove_all(trash, ec);
    } else if (errno != ENOENT) {
        fs::remove_all(entry, ec);
    }
    // The entry's prefix directory (dir_/<2 hex digits>), once empty, goes too: rmdir removes only
    // an empty directory, and a publish that finds its prefix gone recreates it (publish).
    const std::string prefix = entry.substr(0, entry.rfind('/'));
    if (prefix != dir_) rmdir(prefix.c_str());
}

DiskCache::Verified& DiskCache::Verified::operator=(Verified&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) close(fd_);
        path_ = std::move(o.path_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

DiskCache::Verified::~Verified() {
    if (fd_ >= 0) close(fd_);
}

std::optional<std::string> DiskCache::lookup(const std::string& key, const std::string& name) {
    if (auto hit = lookup_open(key, name)) return hit->path();
    return std::nullopt;
}

std::optional<DiskCache::Verified> DiskCache::lookup_open(const std::string& key, const std::string& name) {
    check_args(key, name);
    std::string entry = entry_dir(key);
    auto corrupt = [&]() -> std::optional<Verified> {
        remove_entry(entry);
        return std::nullopt;
    };

    // The prefix directory and the entry must be directories of this user (not links, e.g. to a
    // directory outside the cache) that nobody else can write: what is below them is what we load.
    // A bad one is removed by its name in the cache, never by what a link points at.
    auto private_dir = [](const struct stat& ds) {
        return S_ISDIR(ds.st_mode) && ds.st_uid == geteuid() && !(ds.st_mode & (S_IWGRP | S_IWOTH));
    };
    const std::string prefix = entry.substr(0, entry.rfind('/'));
    struct stat ds;
    if (lstat(prefix.c_str(), &ds) == 0 && !private_dir(ds)) {
        remove_entry(prefix);  // renames the link itself (or the directory) away, then removes it
        return std::nullopt;
    }
    if (lstat(entry.c_str(), &ds) == 0 && !private_dir(ds)) return corrupt();

    std::string text;
    if (!read_small_file(entry + "/" + kManifestName, text)) {
        struct stat st;
        if (stat(entry.c_str(), &st) == 0) return corrupt();  // entry without manifest
        return std::nullopt;
    }
    std::optional<Manifest> m = parse_manifest(text);
    if (!m || m->key != key || !valid_name(m->name)) return corrupt();
    if (m->name != name) return std::nullopt;  // a valid entry holding another artefact

    // The artefact must be a regular file (not a link) of this user that nobody else can write,
    // with the size and sha256 recorded for this key: checked on every lookup, on the open file
    // the caller then loads (lookup_open), so a swapped or modified file is never loaded. lstat
    // first: a FIFO or device planted there is refused without being opened.
    std::string file = entry + "/" + name;
    auto bad_file = [&](const struct stat& st) {
        return !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
               static_cast<uint64_t>(st.st_size) != m->size;
    };
    struct stat st;
    if (lstat(file.c_str(), &st) != 0 || bad_file(st)) return corrupt();
    Verified hit(file, open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (hit.fd() < 0 || fstat(hit.fd(), &st) != 0 || bad_file(st)) return corrupt();
    std::string digest;
    try {
        digest = support::sha256_fd_hex(hit.fd(), file);
    } catch (const std::runtime_error&) {
        return corrupt();
    }
    if (digest != m->sha256) return corrupt();
    utimensat(AT_FDCWD, entry.c_str(), nullptr, 0);  // LRU: mark as recently used
    return std::optional<Verified>(std::move(hit));
}

std::string DiskCache::publish(const std::string& key, const std::string& name,
                               const std::string& staged_file) {
    check_args(key, name);
    struct stat st;
    if (stat(staged_file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        throw std::runtime_error("DiskCache::publish: staged file '" + staged_file +
                                 "' is not a readable regular file");

    remake_if_removed();
    std::string tmpl = dir_ + "/.tmp-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
        throw std::runtime_error("cannot create a temporary directory in cache '" + dir_ +
                                 "': " + std::strerror(errno));
    std::string tmp(buf.data());
    struct TmpGuard {
        std::string path;
        ~TmpGuard() {
            if (!path.empty()) {
                std::error_code ec;
                fs::remove_all(path, ec);
            }
        }
    } guard{tmp};

    std::string tmp_file = tmp + "/" + name;
    if (rename(staged_file.c_str(), tmp_file.c_str()) != 0) {
        if (errno != EXDEV)
            throw std::runtime_error("cannot move '" + staged_file + "' into the cache: " +
                                     std::strerror(errno));
        copy_file_or_throw(staged_file, tmp_file);
        unlink(staged_file.c_str());
    }
    // The compiler wrote it with the process umask: under umask 002 or 000 it is group- or
    // world-writable, which lookups refuse as another user's plant (session 23, h-hunt11b F14).
    // The entry's mode is the cache's, not the umask's.
    if (chmod(tmp_file.c_str(), 0600) != 0)
        throw std::runtime_error("cannot set the mode of '" + tmp_file + "': " + std::strerror(errno));
    Manifest m;
    m.key = key;
    m.name = name;
    if (stat(tmp_file.c_str(), &st) != 0)
        throw std::runtime_error("cannot stat '" + tmp_file + "': " + std::strerror(errno));
    m.size = static_cast<uint64_t>(st.st_size);
    m.sha256 = support::sha256_file_hex(tmp_file);
    write_file_or_throw(tmp + "/" + kManifestName, format_manifest(m));

    std::string prefix = dir_ + "/" + key.substr(0, 2);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
        throw std::runtime_error("cannot create '" + prefix + "': " + std::strerror(errno));
    std::string entry = entry_dir(key);
    std::string final_file = entry + "/" + name;

    const uint64_t entry_bytes = m.size + format_manifest(m).size();
    for (int attempt = 0; attempt < 4; ++attempt) {
        if (rename(tmp.c_str(), entry.c_str()) == 0) {
            guard.path.clear();
            utimensat(AT_FDCWD, entry.c_str(), nullptr, 0);
            account(entry, entry_bytes);
            return final_file;
        }
        if (errno != EEXIST && errno != ENOTEMPTY) {
            if (errno == ENOENT) {  // prefix dir removed under us; recreate and retry
                mkdir(prefix.c_str(), 0700);
                continue;
            }
            throw std::runtime_error("cannot publish cache entry '" + entry +
                                     "': " + std::strerror(errno));
        }
        // Someone else published this key first: keep theirs if it is valid.
        if (auto hit = lookup(key, name)) return *hit;
        std::string text;
        if (read_small_file(entry + "/" + kManifestName, text)) {
            auto other = parse_manifest(text);
            if (other && other->name != name)
                throw std::invalid_argument("DiskCache::publish: key '" + key +
                                            "' already holds artefact '" + other->name +
                                            "', cannot add '" + name +
                                            "' (one artefact per key)");
        }
        // The existing entry was corrupt and has been removed: retry.
    }
    throw std::runtime_error("cannot publish cache entry '" + entry +
                             "': it keeps being replaced concurrently");
}

namespace {

// Calls visit(path, bytes, mtime) for every entry <dir>/<xx>/<key> and removes stale temp/trash
// dirs (clean_stale). One entry's path is held at a time: the memory a scan takes does not grow
// with the number of entries (a list of them all, 100-odd bytes of heap per entry, raised the
// process's heap high-water mark, and so its resident memory, with every new kernel published).
template <class Visit>
void for_each_entry(const std::string& dir, bool clean_stale, std::atomic<uint64_t>& visited, Visit&& visit) {
    std::error_code ec;
    time_t now = time(nullptr);
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string base = it->path().filename().string();
        std::string p = it->path().string();
        struct stat st;
        if (lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (base.rfind(".tmp-", 0) == 0 || base.rfind(".trash-", 0) == 0) {
            if (clean_stale && now - st.st_mtime > 3600) {
                std::error_code ec2;
                fs::remove_all(p, ec2);
            }
            continue;
        }
        if (base.size() != 2) continue;
        std::error_code ec2;
        for (fs::directory_iterator e(p, ec2), e_end; !ec2 && e != e_end; e.increment(ec2)) {
            const std::string& ep = e->path().native();
            struct stat est;
            if (lstat(ep.c_str(), &est) != 0 || !S_ISDIR(est.st_mode)) continue;
            uint64_t bytes = 0;
            std::error_code ec3;
            for (fs::directory_iterator f(ep, ec3), f_end; !ec3 && f != f_end; f.increment(ec3)) {
                struct stat fst;
                if (lstat(f->path().c_str(), &fst) == 0 && S_ISREG(fst.st_mode))
                    bytes += static_cast<uint64_t>(fst.st_size);
            }
            ++visited;
            visit(ep, bytes, est.st_mtim);
        }
    }
}

// Releases the flock `fd` holds and closes it. Unlocked first: a child forked while it was held
// has a copy of the descriptor, and the lock (of the open file, which both copies share) would
// otherwise last as long as that copy; the child closes the copies registered (support/fork.h).
void release_flock(int fd) {
    flock(fd, LOCK_UN);
    support::keep_in_forked_child(fd);
    close(fd);
}

// Least recently used first; equal times by path.
bool older(const EntryInfo& a, const EntryInfo& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.path < b.path;
}

}  // namespace

DiskCache::KeyLock::~KeyLock() {
    if (fd_ < 0) return;
    unlink(path_.c_str());
    release_flock(fd_);
}

DiskCache::KeyLock DiskCache::lock(const std::string& key, std::chrono::milliseconds max_wait) {
    check_args(key, "x");
    remake_if_removed();
    std::string dir = dir_ + "/.locks";
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw std::runtime_error("cannot create '" + dir + "': " + std::strerror(errno));
    std::string path = dir + "/" + key;
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) throw std::runtime_error("cannot open lock file '" + path + "': " + std::strerror(errno));
    // Polled rather than blocking, and bounded: a holder that makes no progress (a stopped
    // process, a hung compiler) must not hang every process that needs this key.
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    const unsigned long epoch = support::interrupt_epoch();
    for (useconds_t nap = 1000;; nap = std::min<useconds_t>(nap * 2, 100000)) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            support::close_in_forked_child(fd);  // a forked child closes its copy
            return KeyLock(fd, path);
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            throw std::runtime_error("cannot lock '" + path + "': " + std::strerror(e));
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            close(fd);
            return KeyLock(-1, "");  // not held: the caller builds the key itself
        }
        if (support::interrupt_requested(epoch)) {  // Ctrl-C while another process compiles the key
            close(fd);
            throw support::Interrupted{};
        }
        usleep(nap);
    }
}

// The usage index, <dir>/.usage: the cache's size in bytes (decimal) as the last publisher left
// it, read and written under an flock on the file itself. It is what makes a publish O(1) in the
// number of entries: only when it says the cache is over its limit does a publish scan the entries.
// It is bookkeeping, never needed to find or load an entry: the lock is polled for at most
// `max_wait`, and an index whose holder makes no progress (a stopped process) is not held(): the
// caller goes on without it (load() gives nullopt, store() does nothing), so the recorded size
// misses that change until a later scan measures the cache again (it is scanned when the record
// says the cache is over its limit, or is missing).
class UsageIndex {
public:
    UsageIndex(const std::string& dir, std::chrono::milliseconds max_wait) : path_(dir + "/.usage") {
        fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd_ < 0)
            throw std::runtime_error("cannot open the cache's usage index '" + path_ + "': " + std::strerror(errno));
        struct stat st;
        if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
            close(fd_);
            throw std::runtime_error("the cache's usage index '" + path_ +
                                     "' is not a regular file of this user; remove it");
        }
        const auto deadline = std::chrono::steady_clock::now() + max_wait;
        for (useconds_t nap = 1000;; nap = std::min<useconds_t>(nap * 2, 50000)) {
            if (flock(fd_, LOCK_EX | LOCK_NB) == 0) {
                support::close_in_forked_child(fd_);  // a forked child closes its copy
                return;
            }
            if (errno != EWOULDBLOCK && errno != EINTR) {
                int e = errno;
                close(fd_);
                throw std::runtime_error("cannot lock '" + path_ + "': " + std::strerror(e));
            }
            if (std::chrono::steady_clock::now() >= deadline) break;
            usleep(nap);
        }
        close(fd_);
        fd_ = -1;
        log(LogLevel::warning, "the kernel cache's usage index '" + path_ + "' has been locked by another process for " +
                                   std::to_string(max_wait.count()) + " ms (stopped or hung?): going on without "
                                   "updating it (the recorded size is corrected by a later scan of the cache); "
                                   "continue or end that process (fuser " + path_ + " names it)");
    }
    bool held() const { return fd_ >= 0; }
    UsageIndex(const UsageIndex&) = delete;
    UsageIndex& operator=(const UsageIndex&) = delete;
    ~UsageIndex() {
        if (fd_ >= 0) release_flock(fd_);
    }

    // The recorded size, or nullopt when there is none (a new cache, one written by an older
    // version, a write cut short by a crash): the caller then scans.
    std::optional<uint64_t> load() const {
        if (fd_ < 0) return std::nullopt;
        char buf[32];
        ssize_t n = pread(fd_, buf, sizeof buf, 0);
        if (n < 2 || n > 21 || buf[n - 1] != '\n') return std::nullopt;
        uint64_t v = 0;
        for (ssize_t i = 0; i + 1 < n; ++i) {
            if (buf[i] < '0' || buf[i] > '9') return std::nullopt;
            v = v * 10 + static_cast<uint64_t>(buf[i] - '0');
        }
        return v;
    }
    void store(uint64_t bytes) const {
        if (fd_ < 0) return;
        std::string text = std::to_string(bytes) + "\n";
        // Truncated first, so that a crash mid-write leaves no parsable but wrong number.
        if (ftruncate(fd_, 0) != 0 || pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
            throw std::runtime_error("cannot write the cache's usage index '" + path_ + "': " + std::strerror(errno));
    }

private:
    std::string path_;
    int fd_ = -1;
};

size_t DiskCache::entries() const {
    size_t n = 0;
    for_each_entry(dir_, false, scanned_, [&](const std::string&, uint64_t, const struct timespec&) { ++n; });
    return n;
}

void DiskCache::clear() {
    UsageIndex index(dir_, usage_wait_);
    std::vector<std::string> all;  // removed after the scan, not while its directories are read
    for_each_entry(dir_, true, scanned_, [&](const std::string& p, uint64_t, const struct timespec&) { all.push_back(p); });
    for (const auto& p : all) remove_entry(p);
    index.store(0);
}

uint64_t DiskCache::total_bytes() const {
    uint64_t total = 0;
    for_each_entry(dir_, false, scanned_, [&](const std::string&, uint64_t bytes, const struct timespec&) { total += bytes; });
    return total;
}

void DiskCache::evict_to_limit() {
    UsageIndex index(dir_, usage_wait_);
    index.store(evict("", max_bytes_));
}

void DiskCache::account(const std::string& entry, uint64_t bytes) {
    UsageIndex index(dir_, usage_wait_);
    std::optional<uint64_t> recorded = index.load();
    // Without a record, one scan measures the cache (the new entry included).
    uint64_t total = recorded ? *recorded + bytes : evict("", UINT64_MAX);
    if (total > max_bytes_) total = evict(entry, max_bytes_ - max_bytes_ / 10);
    index.store(total);
}

// Two scans, neither holding the whole list: the first sums the sizes; when over `target`, the
// second keeps only the least recently used entries that must go (a max-heap by age, the newest
// dropped while the rest still cover the excess), which it then removes, oldest first. Returns
// the size left.
uint64_t DiskCache::evict(const std::string& keep_entry, uint64_t target) {
    uint64_t total = 0;
    for_each_entry(dir_, true, scanned_, [&](const std::string&, uint64_t bytes, const struct timespec&) { total += bytes; });
    if (total <= target) return total;
    const uint64_t excess = total - target;
    std::vector<EntryInfo> victims;  // a heap, newest on top
    uint64_t held = 0;
    for_each_entry(dir_, false, scanned_, [&](const std::string& p, uint64_t bytes, const struct timespec& mtime) {
        if (p == keep_entry) return;
        victims.push_back({p, bytes, mtime});
        std::push_heap(victims.begin(), victims.end(), older);
        held += bytes;
        while (held - victims.front().bytes >= excess) {
            held -= victims.front().bytes;
            std::pop_heap(victims.begin(), victims.end(), older);
            victims.pop_back();
        }
    });
    std::sort_heap(victims.begin(), victims.end(), older);
    for (const auto& e : victims) remove_entry(e.path);
    return total > held ? total - held : 0;
}

}  // namespace tw::runtime
