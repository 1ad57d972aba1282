// The native tests' checks: CHECK(cond) and CHECK_ST(status, expected ND status) count passes and failures and
// print each failure (up to a cap) with the running case's name, g_test; main() ends with "N passed, M failed".
// Header-only, one copy per test executable.
#ifndef NETDIRECT_TEST_NATIVE_CHECK_H_
#define NETDIRECT_TEST_NATIVE_CHECK_H_

#include <cstdio>
#include <string>

#include "nd/nd2.h"

namespace {

int g_passed = 0;
int g_failed = 0;
std::string g_test;           // the case running now
constexpr int kMaxPrinted = 100;  // failures printed at most (a mutation loop may fail thousands of times)

inline bool report(bool ok, const char* expr, const char* file, int line) {
  if (ok) {
    ++g_passed;
  } else if (++g_failed <= kMaxPrinted) {
    std::printf("FAIL [%s] %s:%d: %s\n", g_test.c_str(), file, line, expr);
  }
  return ok;
}

inline const char* st_name(HRESULT h) {
  const char* n = NdStatusName(h);
  return n != nullptr ? n : "?";
}

inline bool report_st(HRESULT got, HRESULT want, const char* expr, const char* file, int line) {
  if (got == want) {
    ++g_passed;
  } else if (++g_failed <= kMaxPrinted) {
    std::printf("FAIL [%s] %s:%d: %s = %s (0x%08x), expected %s\n", g_test.c_str(), file, line, expr, st_name(got),
                static_cast<unsigned>(got), st_name(want));
  }
  return got == want;
}

// The last line every native test prints (test/build/native.test.ts reads it); the exit code.
inline int finish() {
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}

}  // namespace

#define CHECK(c) report(static_cast<bool>(c), #c, __FILE__, __LINE__)
#define CHECK_ST(a, b) report_st((a), (b), #a, __FILE__, __LINE__)

#endif  // NETDIRECT_TEST_NATIVE_CHECK_H_
