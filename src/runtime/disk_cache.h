// The on-disk kernel cache (artefacts checked by SHA-256, support/sha256.h).
//
// Layout: <dir>/<key[0:2]>/<key>/{<name>, manifest}. One artefact per key; the manifest
// records the key it belongs to, the artefact's name, size and sha256. Entries are private to
// the user (directories 0700; a cache dir owned by another user or writable by others is
// refused), published atomically (built in a temp dir inside <dir>, then rename()d into place;
// a lost race keeps the winner's entry), verified on every lookup (manifest bound to the key,
// artefact a regular file owned by this user and not writable by others, size and sha256 as
// recorded; a bad entry is a miss and is removed), and bounded in size by LRU eviction (a hit
// touches the entry's mtime). A lookup and a publish cost the same however many entries the
// cache holds: the cache's size is kept in a small index (<dir>/.usage, under an flock whose wait
// is bounded: a stuck holder makes a publish skip the update, never fail or hang), and the
// entries are scanned only when a publish takes the cache over its limit; that scan then evicts
// down to 90% of the limit, so it happens once per tenth of the limit published.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tw::runtime {

// Creates `dir` (and missing parents, mode 0700) if needed, then checks that it is a directory
// owned by this user and not writable by group/others. Throws std::runtime_error saying what
// is wrong and how to fix it otherwise; never changes the mode of an existing directory.
// `what` names the directory in messages (e.g. "cache directory").
void ensure_private_dir(const std::string& dir, const std::string& what);

// A name part no other process or thread uses at the same time: pid, a counter, the time.
std::string unique_suffix();

// Checks every directory above `dir` (as written, and with its links resolved): each must be
// owned by this user or root and not writable by group/others unless sticky (like /tmp), or
// another user could rename `dir` away and put their own in its place between a lookup's
// verification and the dlopen. `dir` need not exist yet. Throws std::runtime_error naming the
// directory and `fix` (e.g. "set TW_CACHE_DIR to ...").
void ensure_safe_ancestors(const std::string& dir, const std::string& what, const std::string& fix);

class DiskCache {
public:
    // Creates `dir` (and missing parents) with mode 0700. Throws std::runtime_error if `dir`
    // exists but is not a directory owned by this user or is writable by group/others.
    // `usage_wait` bounds the wait for the usage index's lock (publish, clear, evict_to_limit):
    // past it they go on without updating the index (a warning is logged), so a stopped process
    // holding it stalls nobody for longer; a lookup never takes it.
    static constexpr std::chrono::milliseconds kUsageWait{5'000};
    DiskCache(std::string dir, uint64_t max_bytes, std::chrono::milliseconds usage_wait = kUsageWait);

    // Path of the verified artefact `name` of entry `key`, or nullopt (miss). A corrupt or
    // partial entry is removed and reported as a miss. A hit refreshes the entry's LRU time.
    // key: 2..128 chars of [0-9A-Za-z_-]; name: a plain file name (not "manifest").
    std::optional<std::string> lookup(const std::string& key, const std::string& name);

    // An artefact verified through an open descriptor: load it through `fd`
    // (SharedLibrary::from_fd), not by `path`, so that the bytes loaded are the bytes verified.
    class Verified {
    public:
        Verified(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
        Verified(Verified&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
        Verified& operator=(Verified&& o) noexcept;
        Verified(const Verified&) = delete;
        Verified& operator=(const Verified&) = delete;
        ~Verified();
        const std::string& path() const { return path_; }
        int fd() const { return fd_; }

    private:
        std::string path_;
        int fd_;
    };
    // lookup(), keeping open the descriptor the artefact was verified through (the checks and the
    // sha256 are made on the open file, not on its path).
    std::optional<Verified> lookup_open(const std::string& key, const std::string& name);

    // Moves `staged_file` into the cache as entry `key`/`name` (the staged file is consumed)
    // and returns the final path. If a valid entry already exists (another process won the
    // race) that entry is kept, ours is discarded, and its path is returned. Then adds the new
    // entry's size to the usage index and, if that takes the cache over its limit, evicts least
    // recently used entries down to 90% of the limit (never the entry just returned). Throws
    // std::runtime_error on I/O errors and std::invalid_argument if `key` already holds an
    // artefact with another name.
    std::string publish(const std::string& key, const std::string& name,
                        const std::string& staged_file);

    // Marks entry `key` as just used (its LRU time), without verifying it. No-op if absent.
    void touch(const std::string& key);

    // Removes entry `key` (e.g. its artefact verified but could not be loaded). No-op if absent.
    void remove(const std::string& key);

    // Holds an exclusive lock on `key` across processes (flock on <dir>/.locks/<key>) for its
    // lifetime: take it after a miss, look up again, and only then build and publish, so that N
    // processes missing the same key run the compiler once. The kernel drops a flock when its
    // holder dies, so a crashed process never leaves a stale lock behind; the lock file is
    // removed on release (a waiter then holds an unlinked file and finds the published entry).
    // The wait is bounded by `max_wait`: a holder that makes no progress (a stopped process, a
    // hung compiler) does not hang the others; past it the returned lock is not held(), and the
    // caller builds the key itself (publish keeps one entry if both finish).
    class KeyLock {
    public:
        bool held() const { return fd_ >= 0; }
        KeyLock(KeyLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
        KeyLock(const KeyLock&) = delete;
        KeyLock& operator=(const KeyLock&) = delete;
        ~KeyLock();

    private:
        friend class DiskCache;
        KeyLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
        int fd_;
        std::string path_;
    };
    static constexpr std::chrono::milliseconds kLockWait{600'000};  // 10 minutes: a very slow compile
    KeyLock lock(const std::string& key, std::chrono::milliseconds max_wait = kLockWait);

    // Number of entries; removes every entry (tw.clear_cache(disk=True)).
    size_t entries() const;
    void clear();

    // Removes least-recently-used entries until the total size is <= max_bytes and records the
    // size in the usage index; also removes temp/trash directories left behind by crashed
    // processes (older than one hour). Like every scan of the entries (entries(), total_bytes()),
    // it holds one entry at a time in memory (and the entries it removes), not a list of them all.
    void evict_to_limit();

    // Entries visited by this instance's scans so far (tests: a lookup, or a publish that does
    // not take the cache over its limit, visits none).
    uint64_t scanned_entries() const { return scanned_.load(); }

    // Total bytes of all entries (artefacts + manifests).
    uint64_t total_bytes() const;

    const std::string& dir() const { return dir_; }
    uint64_t max_bytes() const { return max_bytes_; }
    std::string entry_dir(const std::string& key) const;

    static constexpr const char* kManifestName = "manifest";

private:
    void remake_if_removed() const;
    uint64_t evict(const std::string& keep_entry, uint64_t target);
    void account(const std::string& entry, uint64_t bytes);
    void remove_entry(const std::string& entry);

    std::string dir_;
    uint64_t max_bytes_;
    std::chrono::milliseconds usage_wait_;
    mutable std::atomic<uint64_t> scanned_{0};
};

}  // namespace tw::runtime
