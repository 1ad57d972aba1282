// The verbs provider (binding/verbs/, docs/verbs.md) as a discovery driver, in builds made with rdma-core's
// headers (NETDIRECT_HAVE_VERBS, CMakeLists.txt; elsewhere this file compiles to nothing): listed when rdma-core
// loads and reports a device, the provider of 'verbs', and under 'auto' the provider of an address an RDMA device
// serves (PreferDeviceProvider).
#ifdef NETDIRECT_HAVE_VERBS

#include <arpa/inet.h>
#include <netinet/in.h>

#include <utility>

#include "providers/driver.h"
#include "verbs/provider.h"

namespace netdirect {

namespace {

constexpr const char* kVerbsName = "verbs";

void List(std::vector<ProviderInfo>* out) {
  IND2Provider* verbs = nullptr;
  std::string why;
  if (SUCCEEDED(verbs::get_provider(&verbs, &why))) {
    verbs->Release();
    ProviderInfo v;
    v.name = kVerbsName;
    v.kind = "builtin";
    v.guid = GuidString(verbs::NETDIRECT_VERBS_PROVIDER_ID);
    out->push_back(v);
  }
}

bool Claims(const std::string& spec) { return spec == kVerbsName; }

HRESULT Get(const std::string& /*spec*/, NdPtr<IND2Provider>* provider, std::string* resolvedName,
            std::string* why) {
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

bool Prefer(const sockaddr* address, ULONG addressLength, NdPtr<IND2Provider>* provider,
            std::string* resolvedName) {
  // Loopback stays on the software provider: siw attaches to lo too (siw_lo), but a connection to oneself
  // through the kernel's software device gains nothing over the built-in provider.
  if (address->sa_family == AF_INET) {
    if (addressLength < sizeof(sockaddr_in)) return false;
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127 || in->sin_addr.s_addr == htonl(INADDR_ANY)) return false;
  } else if (address->sa_family == AF_INET6) {
    if (addressLength < sizeof(sockaddr_in6)) return false;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) ||
        IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return false;
    }
  } else {
    return false;
  }
  IND2Provider* v = nullptr;
  std::string why;
  if (FAILED(verbs::get_provider(&v, &why))) return false;  // no rdma-core or no device: the software provider
  NdPtr<IND2Provider> verbs = NdPtr<IND2Provider>::Adopt(v);
  UINT64 id = 0;
  if (FAILED(verbs->ResolveAddress(address, addressLength, &id))) return false;  // no device serves it
  *provider = std::move(verbs);
  *resolvedName = kVerbsName;
  return true;
}

const ProviderDriver kVerbsDriver{10, kVerbsName, List, Claims, Get, Prefer};

}  // namespace

NETDIRECT_PROVIDER_DRIVER(kVerbsDriver);

}  // namespace netdirect

#endif  // NETDIRECT_HAVE_VERBS
