// Provider discovery. Built-in: the software provider, linked in (binding/soft/), and on Linux the verbs provider
// (binding/verbs/, docs/verbs.md: RDMA devices through rdma-core, loaded at run time), listed when rdma-core
// loads and reports a device. System providers (the
// Winsock catalog's ND v2 entries: WSCEnumProtocols -> LoadLibrary -> DllGetClassObject, and provider DLLs
// by path) exist on Windows only (catalog_win.cc); elsewhere every other name or path is refused with
// ND_NOT_SUPPORTED.
#include "providers/providers.h"

#include <cstdio>
#include <utility>

#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#endif

#include "soft/provider.h"
#ifdef NETDIRECT_HAVE_VERBS
#include "verbs/provider.h"
#endif

#ifdef _WIN32
#include "providers/catalog_win.h"
#endif

namespace netdirect {

namespace {

constexpr const char* kSoftName = "soft";
constexpr const char* kVerbsName = "verbs";

bool IsSoftSpec(const std::string& spec) {
#ifdef _WIN32
  return spec == kSoftName;  // 'auto' on Windows means the system providers (catalog_win.cc)
#else
  return spec == kSoftName || spec == "auto" || spec.empty();
#endif
}

}  // namespace

std::string GuidString(const GUID& g) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "{%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X}", static_cast<unsigned>(g.Data1),
                g.Data2, g.Data3, g.Data4[0], g.Data4[1], g.Data4[2], g.Data4[3], g.Data4[4], g.Data4[5], g.Data4[6],
                g.Data4[7]);
  return buf;
}

std::vector<ProviderInfo> ListProviders() {
  ProviderInfo soft;
  soft.name = kSoftName;
  soft.kind = "builtin";
  soft.guid = GuidString(NETDIRECT_SOFT_PROVIDER_ID);
  soft.ndVersion = ND_VERSION_2;
#ifdef _WIN32
  std::vector<ProviderInfo> list = ListSystemProviders();
  list.insert(list.begin(), soft);
  return list;
#else
  std::vector<ProviderInfo> list{soft};
#ifdef NETDIRECT_HAVE_VERBS
  IND2Provider* verbs = nullptr;
  std::string why;
  if (SUCCEEDED(verbs::get_provider(&verbs, &why))) {
    verbs->Release();
    ProviderInfo v;
    v.name = kVerbsName;
    v.kind = "builtin";
    v.guid = GuidString(verbs::NETDIRECT_VERBS_PROVIDER_ID);
    list.push_back(v);
  }
#endif
  return list;
#endif
}

HRESULT GetProvider(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                    std::string* why) {
  if (IsSoftSpec(spec)) {
    HRESULT hr = NdSoftGetProvider(IID_IND2Provider, provider->put());
    if (FAILED(hr)) {
      *why = "the built-in software provider could not be created";
      return hr;
    }
    *resolvedName = kSoftName;
    return ND_SUCCESS;
  }
#ifdef NETDIRECT_HAVE_VERBS
  if (spec == kVerbsName) {
    IND2Provider* p = nullptr;
    HRESULT hr = verbs::get_provider(&p, why);
    *provider = NdPtr<IND2Provider>::Adopt(p);
    if (FAILED(hr)) {
      *why = "provider 'verbs': " + *why;
      return hr;
    }
    *resolvedName = kVerbsName;
    return ND_SUCCESS;
  }
#endif
#ifdef _WIN32
  return GetSystemProvider(spec, provider, resolvedName, why);
#else
  *why = "provider '" + spec +
         "': only the built-in software provider ('soft' or 'auto') exists on this platform; system ND v2 "
         "providers (DLLs) are loaded on Windows only";
  return ND_NOT_SUPPORTED;
#endif
}

void PreferDeviceProvider(const std::string& spec, const sockaddr* address, ULONG addressLength,
                          NdPtr<IND2Provider>* provider, std::string* resolvedName) {
#if defined(NETDIRECT_HAVE_VERBS) && !defined(_WIN32)
  if (spec != "auto" && !spec.empty()) return;
  if (address == nullptr) return;
  // Loopback stays on the software provider: siw attaches to lo too (siw_lo), but a connection to oneself
  // through the kernel's software device gains nothing over the built-in provider.
  if (address->sa_family == AF_INET) {
    if (addressLength < sizeof(sockaddr_in)) return;
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127 || in->sin_addr.s_addr == htonl(INADDR_ANY)) return;
  } else if (address->sa_family == AF_INET6) {
    if (addressLength < sizeof(sockaddr_in6)) return;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) ||
        IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return;
    }
  } else {
    return;
  }
  IND2Provider* v = nullptr;
  std::string why;
  if (FAILED(verbs::get_provider(&v, &why))) return;  // no rdma-core or no device: the software provider
  NdPtr<IND2Provider> verbs = NdPtr<IND2Provider>::Adopt(v);
  UINT64 id = 0;
  if (FAILED(verbs->ResolveAddress(address, addressLength, &id))) return;  // no device serves it
  *provider = std::move(verbs);
  *resolvedName = kVerbsName;
#else
  (void)spec;
  (void)address;
  (void)addressLength;
  (void)provider;
  (void)resolvedName;
#endif
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
