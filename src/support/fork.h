// Fork safety: what a child forked while other threads of the parent ran kernels or compiled
// needs (docs/testing.md, "fork"). fork() copies memory as it is but only the calling thread: a
// lock another thread held at that moment is held forever in the child, and that thread's work
// (a half-updated structure) is never finished there.
#pragma once

#include <cstdint>
#include <mutex>

namespace tw::support {

// A mutex of static storage duration (never destroyed) that a forked child gets unlocked.
//
// Leaf locks (`leaf = true`: held for a few instructions, nothing else taken and no Python
// called while held) are taken by the fork's prepare handler and released on both sides, so the
// child also sees the data they guard whole. Only a thread that holds one may not fork (Python
// code never runs while one is held, and only Python forks here).
//
// The others (held across a kernel launch, a dlopen, a compiler run) are not waited for: the
// child makes them afresh, unlocked. What they guard is either nothing (serialisation only) or
// written once before the lock is released (a cache filled on first use), or built by the
// holder thread and published after it (never seen half-done by the child).
class ForkSafeMutex {
 public:
  explicit ForkSafeMutex(bool leaf = false);
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;
  ~ForkSafeMutex() = delete;  // registered for good: create with new, or as a never-destroyed member

  void lock() { m_.lock(); }
  void unlock() { m_.unlock(); }
  bool try_lock() { return m_.try_lock(); }

 private:
  friend struct ForkHandlers;
  std::mutex m_;
  const bool leaf_;
  ForkSafeMutex* next_ = nullptr;
};

// A new ForkSafeMutex, never destroyed: `static auto& mu = fork_safe_mutex();`.
ForkSafeMutex& fork_safe_mutex(bool leaf = false);

// Increases by one in every forked child (0 in the first process): an object that owns threads
// records it and, seeing another value, knows its threads are not in this process.
uint64_t fork_generation();

// A file descriptor holding an flock: a forked child closes its copy of every registered one, so
// that the lock ends with the parent's (or the parent's death), not with the child's life. The
// holder registers it once the lock is taken and, to release it, unlocks (flock LOCK_UN, which
// releases it for every copy), unregisters, then closes. At most kMaxHeldLocks at once; more are
// held correctly, only the child keeps its copy of the extra ones (released by LOCK_UN as well).
constexpr int kMaxHeldLocks = 64;
void register_held_lock(int fd);
void unregister_held_lock(int fd);

}  // namespace tw::support
