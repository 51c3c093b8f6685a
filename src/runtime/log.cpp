#include "runtime/log.h"

#include <cstdio>
#include <memory>
#include <mutex>

#include "support/env.h"
#include "support/fork.h"

namespace tw::runtime {
namespace {

// A leaf lock (support/fork.h): held only to copy the sink's pointer (never while it runs).
support::ForkSafeMutex& sink_mutex() {
  static auto& mu = support::fork_safe_mutex(/*leaf=*/true);  // never destroyed: logging may happen at exit
  return mu;
}

std::shared_ptr<const LogSink>& sink_slot() {
  static auto* slot = new std::shared_ptr<const LogSink>;
  return *slot;
}

}  // namespace

void set_log_sink(LogSink sink) {
  auto p = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  {
    std::lock_guard<support::ForkSafeMutex> lock(sink_mutex());
    sink_slot().swap(p);
  }
  // the old sink is released here, outside the lock
}

void log(LogLevel level, const std::string& message) {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard<support::ForkSafeMutex> lock(sink_mutex());
    sink = sink_slot();
  }
  try {
    if (sink) {
      (*sink)(level, message);
    } else if (support::env_verbose()) {
      std::fprintf(stderr, "tilewright: %s\n", message.c_str());
    }
  } catch (...) {
    // a failing sink must not turn a log line into an error of the caller
  }
}

}  // namespace tw::runtime
