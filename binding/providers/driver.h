// How a provider joins discovery (providers.cc): it describes itself in a ProviderDriver and registers it with
// NETDIRECT_PROVIDER_DRIVER in a file of this folder, as an rdma-core provider does with PROVIDER_DRIVER
// (rdma-core's libibverbs/driver.h). Discovery walks the registered drivers in `order`; adding a provider is
// adding its driver file, never an #ifdef in the list. The built-in drivers: soft_driver.cc, verbs_driver.cc
// (Linux, when built with rdma-core's headers), catalog_win.cc (Windows: the Winsock catalog and DLL paths).
// netdirect_providers is an object library (CMakeLists.txt), so every registration is linked in.
#ifndef NETDIRECT_PROVIDERS_DRIVER_H_
#define NETDIRECT_PROVIDERS_DRIVER_H_

#include <string>
#include <vector>

#include "nd/nd2.h"
#include "providers/providers.h"

namespace netdirect {

struct ProviderDriver {
  // Listing order (listProviders(), and which driver is asked first for a spec): lower first.
  int order = 0;
  // A built-in provider's name (BuiltProviders, the addon's builtProviders); nullptr for the system catalog.
  const char* builtin = nullptr;
  // Appends what this driver offers to a listing (nothing when it has nothing usable here).
  void (*list)(std::vector<ProviderInfo>* out) = nullptr;
  // True when `spec` ('auto', '', a name or a path) is this driver's to resolve.
  bool (*claims)(const std::string& spec) = nullptr;
  // Resolves a spec it claims, as GetProvider (providers.h) says.
  HRESULT (*get)(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                 std::string* why) = nullptr;
  // Optional: under provider 'auto' (or none), takes over from the default when a device of its serves
  // `address` (PreferDeviceProvider, providers.h). True when it did.
  bool (*prefer)(const sockaddr* address, ULONG addressLength, NdPtr<IND2Provider>* provider,
                 std::string* resolvedName) = nullptr;
};

// Adds a driver to the registry (at static initialization: NETDIRECT_PROVIDER_DRIVER).
struct ProviderRegistration {
  explicit ProviderRegistration(const ProviderDriver& driver);
};

#define NETDIRECT_PROVIDER_DRIVER(driver) \
  static const ::netdirect::ProviderRegistration netdirect_provider_registration_##driver(driver)

}  // namespace netdirect

#endif  // NETDIRECT_PROVIDERS_DRIVER_H_
