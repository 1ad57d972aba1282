// Diagnostic trace of connection failures to stderr, on when NETDIRECT_SOFT_TRACE is set. It exists to
// diagnose foreign programs (the ND SDK's examples under Wine, docs/testing.md) run against the provider DLL,
// where no debugger is at hand; it is not an interface. The environment is read once, by trace_init() on the
// thread opening an adapter (as the other settings: the engine thread does not read the environment).
#ifndef NETDIRECT_SOFT_TRACE_H_
#define NETDIRECT_SOFT_TRACE_H_

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "soft/env.h"

namespace netdirect::soft {

inline std::atomic<bool>& trace_flag() {
  static std::atomic<bool> on{false};
  return on;
}

inline void trace_init() {
  std::string storage;
  trace_flag().store(env_value("NETDIRECT_SOFT_TRACE", storage) != nullptr, std::memory_order_relaxed);
}

// A source file as the repository names it (binding/soft/...): __builtin_FILE() is the build machine's path.
inline const char* trace_source(const char* file) {
  for (const char* p = file; *p != '\0'; ++p) {
    if (std::strncmp(p, "binding/", 8) == 0 || std::strncmp(p, "binding\\", 8) == 0) return p;
  }
  return file;
}

inline bool trace_enabled() { return trace_flag().load(std::memory_order_relaxed); }

// One line, flushed at once (a process killed by a timeout loses nothing).
inline void trace(const char* fmt, ...) {
  if (!trace_enabled()) return;
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("[netdirect_soft] ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  va_end(ap);
}

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_TRACE_H_
