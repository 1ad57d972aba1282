// IND2Provider of the software provider: the machine's IPv4/IPv6 addresses, each served by the adapter of
// its network interface (adapter id = interface index); the loopback interface's adapter serves all of
// 127.0.0.0/8.
#include "soft/provider.h"

#include "soft/adapter.h"
#include "soft/wire/crc32c.h"
#include "soft/object.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

// Defined in adapter.cc: the SOCKET_ADDRESS_LIST size protocol shared by provider and adapter.
HRESULT write_address_list(const std::vector<net::Address>& addrs, SOCKET_ADDRESS_LIST* list, ULONG* size);

namespace {

class SoftProvider final : public ComObject<IND2Provider> {
 public:
  HRESULT ND_CALL QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) override {
    std::vector<net::Address> addrs;
    for (const auto& la : net::local_addresses()) addrs.push_back(la.address);
    return write_address_list(addrs, pAddressList, pcbAddressList);
  }

  HRESULT ND_CALL ResolveAddress(const sockaddr* pAddress, ULONG cbAddress, UINT64* pAdapterId) override {
    if (pAdapterId == nullptr) return ND_INVALID_PARAMETER_3;
    net::Address a;
    HRESULT hr = net::address_from(pAddress, cbAddress, &a);
    if (FAILED(hr)) return hr;
    const std::vector<net::LocalAddress> locals = net::local_addresses();
    for (const auto& la : locals) {
      if (la.address.same_ip(a)) {
        *pAdapterId = la.if_index;
        return ND_SUCCESS;
      }
    }
    // Any other 127.0.0.0/8 address: the loopback interface's adapter (the one holding 127.0.0.1), which serves
    // them all (net::Address::answers_for); QueryAddressList lists only the interface's own addresses.
    for (const auto& la : locals) {
      if (la.address.answers_for(a)) {
        *pAdapterId = la.if_index;
        return ND_SUCCESS;
      }
    }
    return ND_INVALID_ADDRESS;
  }

  HRESULT ND_CALL OpenAdapter(REFIID iid, UINT64 adapterId, VOID** ppAdapter) override {
    if (ppAdapter == nullptr) return ND_INVALID_PARAMETER_3;
    *ppAdapter = nullptr;
    if (!IsEqualGUID(iid, IID_IND2Adapter)) return E_NOINTERFACE;
    SoftAdapter* adapter = nullptr;
    HRESULT hr = SoftAdapter::open(adapterId, &adapter);
    if (FAILED(hr)) return hr;
    *ppAdapter = static_cast<IND2Adapter*>(adapter);
    return ND_SUCCESS;
  }

 private:
  ~SoftProvider() override = default;
};

}  // namespace
}  // namespace netdirect::soft

extern "C" HRESULT NdSoftGetProvider(REFIID iid, VOID** ppProvider) {
  if (ppProvider == nullptr) return E_POINTER;
  *ppProvider = nullptr;
  if (!IsEqualGUID(iid, IID_IND2Provider) && !IsEqualGUID(iid, IID_IUnknown)) return E_NOINTERFACE;
  auto* p = new (std::nothrow) netdirect::soft::SoftProvider();
  if (p == nullptr) return ND_NO_MEMORY;
  *ppProvider = static_cast<IND2Provider*>(p);
  return ND_SUCCESS;
}

extern "C" bool NdSoftHardwareCrc32c() { return netdirect::soft::crc32c_hardware(); }

extern "C" const char* NdSoftCrc32cImplementation() {
  return netdirect::soft::crc32c_isa_name(netdirect::soft::crc32c_isa());
}

