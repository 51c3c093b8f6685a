#include "support/fork.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace tw::support {

namespace {

std::atomic<ForkSafeMutex*> g_mutexes{nullptr};  // every ForkSafeMutex, newest first
std::atomic<uint64_t> g_generation{0};
std::atomic<int> g_child_closed[kMaxChildClosedFds];  // descriptors a child closes, -1 for none

}  // namespace

struct ForkHandlers {
  static void prepare() {
    for (ForkSafeMutex* m = g_mutexes.load(); m; m = m->next_)
      if (m->leaf_) m->m_.lock();
  }
  static void parent() {
    for (ForkSafeMutex* m = g_mutexes.load(); m; m = m->next_)
      if (m->leaf_) m->m_.unlock();
  }
  static void child() {
    // The only thread here is the one that forked: it holds the leaf locks (prepare), and any
    // other lock's holder does not exist. Made afresh, unlocked (a std::mutex has no state
    // beyond its lock word, and nothing in this process waits on the old one).
    for (ForkSafeMutex* m = g_mutexes.load(); m; m = m->next_) new (&m->m_) std::mutex();
    g_generation.fetch_add(1);
    for (auto& slot : g_child_closed) {
      int fd = slot.exchange(-1);
      if (fd >= 0) close(fd);
    }
  }
  static void install() {
    static const bool once = [] {
      for (auto& slot : g_child_closed) slot.store(-1);
      pthread_atfork(prepare, parent, child);
      return true;
    }();
    (void)once;
  }
};

ForkSafeMutex::ForkSafeMutex(bool leaf) : leaf_(leaf) {
  ForkHandlers::install();
  // Pushed while a fork may run (prepare walks the list): a mutex made during a fork's prepare
  // is either in the list (locked and unlocked with the rest) or not yet (not held by anyone).
  ForkSafeMutex* head = g_mutexes.load();
  do next_ = head;
  while (!g_mutexes.compare_exchange_weak(head, this));
}

ForkSafeMutex& fork_safe_mutex(bool leaf) { return *new ForkSafeMutex(leaf); }

uint64_t fork_generation() {
  ForkHandlers::install();  // counted from the first question on (a pool asks when it is made)
  return g_generation.load(std::memory_order_relaxed);
}

void close_in_forked_child(int fd) {
  ForkHandlers::install();
  for (auto& slot : g_child_closed) {
    int none = -1;
    if (slot.compare_exchange_strong(none, fd)) return;
  }
}

void keep_in_forked_child(int fd) {
  for (auto& slot : g_child_closed) {
    int expected = fd;
    if (slot.compare_exchange_strong(expected, -1)) return;
  }
}

}  // namespace tw::support
