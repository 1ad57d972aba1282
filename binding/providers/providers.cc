// Provider discovery: the registry of provider drivers (providers/driver.h) and the selection over it. The
// drivers register themselves: soft_driver.cc (the software provider, linked in: binding/soft/), verbs_driver.cc
// (on Linux, binding/verbs/, docs/verbs.md: RDMA devices through rdma-core, loaded at run time; listed when
// rdma-core loads and reports a device) and catalog_win.cc (system providers on Windows: the Winsock catalog's ND
// v2 entries, WSCEnumProtocols -> LoadLibrary -> DllGetClassObject, and provider DLLs by path). A spec no driver
// claims is refused with ND_NOT_SUPPORTED.
#include "providers/providers.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "providers/driver.h"
#include "soft/provider.h"

namespace netdirect {

namespace {

// Constructed on first use: registrations run during static initialization, in no defined order.
std::vector<const ProviderDriver*>& Drivers() {
  static std::vector<const ProviderDriver*> drivers;
  return drivers;
}

}  // namespace

ProviderRegistration::ProviderRegistration(const ProviderDriver& driver) {
  std::vector<const ProviderDriver*>& d = Drivers();
  d.insert(std::upper_bound(d.begin(), d.end(), &driver,
                            [](const ProviderDriver* a, const ProviderDriver* b) { return a->order < b->order; }),
           &driver);
}

std::string GuidString(const GUID& g) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "{%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X}", static_cast<unsigned>(g.Data1),
                g.Data2, g.Data3, g.Data4[0], g.Data4[1], g.Data4[2], g.Data4[3], g.Data4[4], g.Data4[5], g.Data4[6],
                g.Data4[7]);
  return buf;
}

std::vector<ProviderInfo> ListProviders() {
  std::vector<ProviderInfo> list;
  for (const ProviderDriver* d : Drivers()) d->list(&list);
  return list;
}

std::vector<std::string> BuiltProviders() {
  std::vector<std::string> names;
  for (const ProviderDriver* d : Drivers()) {
    if (d->builtin != nullptr) names.emplace_back(d->builtin);
  }
  return names;
}

HRESULT GetProvider(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                    std::string* why) {
  for (const ProviderDriver* d : Drivers()) {
    if (d->claims(spec)) return d->get(spec, provider, resolvedName, why);
  }
  *why = "provider '" + spec +
         "': only the built-in software provider ('soft' or 'auto') exists on this platform; system ND v2 "
         "providers (DLLs) are loaded on Windows only";
  return ND_NOT_SUPPORTED;
}

void PreferDeviceProvider(const std::string& spec, const sockaddr* address, ULONG addressLength,
                          NdPtr<IND2Provider>* provider, std::string* resolvedName) {
  if (spec != "auto" && !spec.empty()) return;
  if (address == nullptr) return;
  for (const ProviderDriver* d : Drivers()) {
    if (d->prefer != nullptr && d->prefer(address, addressLength, provider, resolvedName)) return;
  }
}

HRESULT OpenAdapter(IND2Provider* provider, const sockaddr* address, ULONG addressLength,
                    NdPtr<IND2Adapter>* adapter, std::string* why) {
  UINT64 adapterId = 0;
  HRESULT hr = provider->ResolveAddress(address, addressLength, &adapterId);
  if (FAILED(hr)) {
    *why = "no adapter of this provider serves the address (ResolveAddress)";
    return hr;
  }
  hr = provider->OpenAdapter(IID_IND2Adapter, adapterId, adapter->put());
  if (FAILED(hr)) {
    *why = "OpenAdapter failed";
    return hr;
  }
  return ND_SUCCESS;
}

bool SoftHardwareCrc32c() { return NdSoftHardwareCrc32c(); }

const char* SoftCrc32cImplementation() { return NdSoftCrc32cImplementation(); }

}  // namespace netdirect
