// Reading the provider's settings from the environment (NETDIRECT_SOFT_*, NETDIRECT_HANDSHAKE_TIMEOUT_MS).
// On Windows the C runtime's getenv() sees the environment as it was when the runtime started, while Node's
// process.env writes go to the Win32 environment (SetEnvironmentVariableW): a program that sets a variable before
// it opens an adapter must be seen, so Windows reads the Win32 environment (GetEnvironmentVariableA).
#ifndef NETDIRECT_SOFT_ENV_H_
#define NETDIRECT_SOFT_ENV_H_

#include <cstdlib>
#include <string>

#ifdef _WIN32
#include "nd/nd2.h"  // windows.h after winsock2.h, the order every file of the provider needs
#endif

namespace netdirect::soft {

// The variable's value, or nullptr when it is unset. The pointer stays valid until the next call for the same
// `storage`.
inline const char* env_value(const char* name, std::string& storage) {
#ifdef _WIN32
  char buf[256];
  const DWORD n = GetEnvironmentVariableA(name, buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) return nullptr;  // unset, or longer than any setting of ours
  storage.assign(buf, n);
  return storage.c_str();
#else
  (void)storage;
  return std::getenv(name);
#endif
}

// An on/off setting: "0" turns it off, "1" on; unset, empty or anything else leaves `fallback`.
inline bool env_switch(const char* name, bool fallback) {
  std::string storage;
  const char* v = env_value(name, storage);
  if (v == nullptr || v[0] == '\0' || v[1] != '\0') return fallback;
  if (v[0] == '0') return false;
  if (v[0] == '1') return true;
  return fallback;
}

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_ENV_H_
