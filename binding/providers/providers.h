// Provider selection and adapter opening (NdOpenAdapter semantics), Node-free (netdirect_providers). The shims
// above this file only ever see the IND2Provider / IND2Adapter pointers it returns; which provider is behind them is
// decided here alone, by the drivers registered with it (providers/driver.h).
#ifndef NETDIRECT_PROVIDERS_H_
#define NETDIRECT_PROVIDERS_H_

#include <string>
#include <vector>

#include "nd/nd2.h"
#include "ndkit/nd_ptr.h"

namespace netdirect {

struct ProviderInfo {
  std::string name;  // 'soft' for the built-in provider
  std::string kind;  // 'builtin' | 'system'
  std::string path;  // provider DLL (system providers)
  std::string guid;  // {XXXXXXXX-...}
  uint32_t ndVersion = ND_VERSION_2;
};

std::vector<ProviderInfo> ListProviders();

// The built-in providers compiled in ('soft', and 'verbs' where built), whether or not they can run here.
std::vector<std::string> BuiltProviders();

// Resolves `spec` ('auto', 'soft', a listed provider name or a DLL path) to a provider instance.
// On failure returns the status and fills *why with a sentence a person can act on.
HRESULT GetProvider(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                    std::string* why);

// provider 'auto' (or none) on Linux: when an RDMA device serves `address` (the verbs provider resolves it) and
// the address is not a loopback one, *provider becomes the verbs provider and *resolvedName 'verbs'; otherwise
// both stay as they are (the software provider). Elsewhere, or with any other spec, it does nothing.
void PreferDeviceProvider(const std::string& spec, const sockaddr* address, ULONG addressLength,
                          NdPtr<IND2Provider>* provider, std::string* resolvedName);

// NdOpenAdapter: ResolveAddress(local address, port 0) -> OpenAdapter(IID_IND2Adapter).
HRESULT OpenAdapter(IND2Provider* provider, const sockaddr* address, ULONG addressLength,
                    NdPtr<IND2Adapter>* adapter, std::string* why);

// True when the built-in provider's CRC32c uses the CPU's crc32 instruction.
bool SoftHardwareCrc32c();
const char* SoftCrc32cImplementation();  // NdSoftCrc32cImplementation

std::string GuidString(const GUID& g);

#ifdef _WIN32
// Windows (providers/catalog_win.cc): registers dllPath as netdirect's ND v2 provider (NETDIRECT_SOFT_PROVIDER_ID)
// in the Winsock catalog / removes it, then reads the catalog back. *how names the call made ("already
// registered", "not registered" when nothing was to do); a failure's *why says what to do.
HRESULT InstallSoftProvider(const std::string& dllPath, std::string* how, std::string* why);
HRESULT UninstallSoftProvider(std::string* how, std::string* why);
#endif

}  // namespace netdirect

#endif  // NETDIRECT_PROVIDERS_H_
