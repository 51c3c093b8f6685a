// Log messages of the runtime (compile times, cache hits/misses, simulator wall time).
// One sink per process: by default messages go to stderr when TW_VERBOSE is set and are dropped
// otherwise; the Python module installs a sink that forwards them to the `logging` logger
// "tilewright", so Python users choose levels and handlers the usual way.
#pragma once

#include <functional>
#include <string>

namespace tw::runtime {

// The levels of Python's logging module (the sink receives these numbers).
enum class LogLevel : int { debug = 10, info = 20, warning = 30 };

using LogSink = std::function<void(LogLevel, const std::string&)>;

// Replaces the sink (an empty function restores the default). Thread-safe.
void set_log_sink(LogSink sink);

// Sends one message to the sink. Thread-safe; never throws.
void log(LogLevel level, const std::string& message);

}  // namespace tw::runtime
