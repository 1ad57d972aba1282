// The built-in software provider (binding/soft/, linked in) as a discovery driver: listed first, and the provider
// of 'soft', and off Windows also of 'auto' (on Windows 'auto' means the system providers: catalog_win.cc).
#include "providers/driver.h"
#include "soft/provider.h"

namespace netdirect {

namespace {

constexpr const char* kSoftName = "soft";

void List(std::vector<ProviderInfo>* out) {
  ProviderInfo soft;
  soft.name = kSoftName;
  soft.kind = "builtin";
  soft.guid = GuidString(NETDIRECT_SOFT_PROVIDER_ID);
  soft.ndVersion = ND_VERSION_2;
  out->push_back(soft);
}

bool Claims(const std::string& spec) {
#ifdef _WIN32
  return spec == kSoftName;
#else
  return spec == kSoftName || spec == "auto" || spec.empty();
#endif
}

HRESULT Get(const std::string& /*spec*/, NdPtr<IND2Provider>* provider, std::string* resolvedName,
            std::string* why) {
  HRESULT hr = NdSoftGetProvider(IID_IND2Provider, provider->put());
  if (FAILED(hr)) {
    *why = "the built-in software provider could not be created";
    return hr;
  }
  *resolvedName = kSoftName;
  return ND_SUCCESS;
}

const ProviderDriver kSoftDriver{0, kSoftName, List, Claims, Get, nullptr};

}  // namespace

NETDIRECT_PROVIDER_DRIVER(kSoftDriver);

}  // namespace netdirect
