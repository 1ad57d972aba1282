// Windows system ND v2 providers (catalog_win.cc): the Winsock catalog and provider DLLs loaded by path.
// Registered as the last discovery driver (providers/driver.h), in Windows builds only.
#ifndef NETDIRECT_PROVIDERS_CATALOG_WIN_H_
#define NETDIRECT_PROVIDERS_CATALOG_WIN_H_

#ifdef _WIN32

#include "providers/providers.h"

namespace netdirect {

// The catalog's ND v2 providers (name, GUID, expanded DLL path); empty under Wine (its catalog is a stub).
std::vector<ProviderInfo> ListSystemProviders();

// 'auto' (every catalog provider, or the one NETDIRECT_PROVIDER names), a catalog name or DLL name
// ('i40wb'), a DLL path, or 'path#{GUID}'.
HRESULT GetSystemProvider(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                          std::string* why);

}  // namespace netdirect

#endif  // _WIN32
#endif  // NETDIRECT_PROVIDERS_CATALOG_WIN_H_
