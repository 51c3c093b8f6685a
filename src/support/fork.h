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

// Descriptors a forked child closes its copy of: ones whose copy in the child would change what
// the parent sees. An flock's (the lock belongs to the open file both copies share: it would
// last as long as the child; the holder also unlocks with LOCK_UN before closing, which releases
// it for every copy) and the write end of a pipe the parent reads to EOF (a compiler's output:
// the child's copy kept the parent's read from ever ending, and its compile hung while the
// child lived). Registered while the parent uses it; unregistered before it is closed. At most
// kMaxChildClosedFds at once; the extra ones are not closed in a child.
constexpr int kMaxChildClosedFds = 64;
void close_in_forked_child(int fd);
void keep_in_forked_child(int fd);

}  // namespace tw::support
