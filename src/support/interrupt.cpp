#include "support/interrupt.h"

#include <atomic>

namespace tw::support {

namespace {
std::atomic<InterruptCheck> g_check{nullptr};
std::atomic<unsigned long> g_epoch{0};
}  // namespace

void set_interrupt_check(InterruptCheck check) { g_check.store(check); }

bool interrupt_check_installed() { return g_check.load(std::memory_order_relaxed) != nullptr; }

void interrupt_all() { g_epoch.fetch_add(1); }

unsigned long interrupt_epoch() { return g_epoch.load(); }

bool interrupt_requested(unsigned long epoch) {
  if (g_epoch.load() != epoch) return true;
  InterruptCheck check = g_check.load();
  return check && check();
}

}  // namespace tw::support
