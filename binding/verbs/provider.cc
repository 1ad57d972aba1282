// IND2Provider of the verbs provider: the machine's IP addresses that rdma_cm binds to an RDMA device, each served
// by that device's adapter (adapter id = the device's index in rdma_get_devices()).
#include "verbs/provider.h"

#include <cstdint>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

ULONG sockaddr_length(const sockaddr* a) {
  if (a == nullptr) return 0;
  if (a->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (a->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

HRESULT copy_sockaddr(const sockaddr* from, sockaddr* to, ULONG* size) {
  if (size == nullptr) return ND_INVALID_PARAMETER_2;
  const ULONG need = sockaddr_length(from);
  if (need == 0) return ND_CONNECTION_INVALID;
  if (to == nullptr || *size < need) {
    *size = need;
    return ND_BUFFER_OVERFLOW;
  }
  std::memcpy(to, from, need);
  *size = need;
  return ND_SUCCESS;
}

namespace {

struct LocalAddress {
  sockaddr_storage addr;
  UINT64 device;
};

// Index of `ctx` in rdma_get_devices(), or -1.
int device_index(const Lib& lib, ibv_context* ctx) {
  int n = 0;
  ibv_context** list = lib.get_devices(&n);
  if (list == nullptr) return -1;
  int found = -1;
  for (int i = 0; i < n; ++i) {
    if (list[i] == ctx) found = i;
  }
  lib.free_devices(list);
  return found;
}

// The adapter id (device and port, adapter_id()) rdma_cm binds `addr` to (port 0), or -1 when no RDMA device
// serves it.
int64_t device_of(const Lib& lib, const sockaddr* addr) {
  rdma_event_channel* ch = lib.create_event_channel();
  if (ch == nullptr) return -1;
  rdma_cm_id* id = nullptr;
  int64_t found = -1;
  if (lib.create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0) {
    sockaddr_storage copy{};
    std::memcpy(&copy, addr, sockaddr_length(addr));
    reinterpret_cast<sockaddr_in*>(&copy)->sin_port = 0;  // same offset for sin6_port
    if (lib.bind_addr(id, reinterpret_cast<sockaddr*>(&copy)) == 0 && id->verbs != nullptr) {
      const int dev = device_index(lib, id->verbs);
      if (dev >= 0) found = static_cast<int64_t>(adapter_id(dev, id->port_num));
    }
    lib.destroy_id(id);
  }
  lib.destroy_event_channel(ch);
  return found;
}

std::vector<LocalAddress> local_addresses(const Lib& lib) {
  std::vector<LocalAddress> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    const int64_t dev = device_of(lib, i->ifa_addr);
    if (dev < 0) continue;
    LocalAddress la{};
    std::memcpy(&la.addr, i->ifa_addr, sockaddr_length(i->ifa_addr));
    la.device = static_cast<UINT64>(dev);
    out.push_back(la);
  }
  freeifaddrs(ifs);
  return out;
}

HRESULT write_list(const std::vector<LocalAddress>& addrs, SOCKET_ADDRESS_LIST* list, ULONG* size) {
  if (size == nullptr) return ND_INVALID_PARAMETER_2;
  const size_t head = offsetof(SOCKET_ADDRESS_LIST, Address) + addrs.size() * sizeof(SOCKET_ADDRESS);
  size_t need = head;
  for (const auto& a : addrs) need += sockaddr_length(reinterpret_cast<const sockaddr*>(&a.addr));
  if (list == nullptr || *size < need) {
    *size = static_cast<ULONG>(need);
    return ND_BUFFER_OVERFLOW;
  }
  auto* base = reinterpret_cast<uint8_t*>(list);
  size_t off = head;
  list->iAddressCount = static_cast<INT>(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    const ULONG len = sockaddr_length(reinterpret_cast<const sockaddr*>(&addrs[i].addr));
    std::memcpy(base + off, &addrs[i].addr, len);
    list->Address[i].lpSockaddr = reinterpret_cast<LPSOCKADDR>(base + off);
    list->Address[i].iSockaddrLength = static_cast<INT>(len);
    off += len;
  }
  *size = static_cast<ULONG>(need);
  return ND_SUCCESS;
}

class VerbsProvider final : public ComObject<IND2Provider> {
 public:
  explicit VerbsProvider(const Lib* lib) : lib_(lib) {}

  HRESULT ND_CALL QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) override {
    return write_list(local_addresses(*lib_), pAddressList, pcbAddressList);
  }

  HRESULT ND_CALL ResolveAddress(const sockaddr* pAddress, ULONG cbAddress, UINT64* pAdapterId) override {
    if (pAdapterId == nullptr) return ND_INVALID_PARAMETER_3;
    if (!valid_sockaddr(pAddress, cbAddress)) {
      return ND_INVALID_ADDRESS;
    }
    const int64_t dev = device_of(*lib_, pAddress);
    if (dev < 0) return ND_INVALID_ADDRESS;
    *pAdapterId = static_cast<UINT64>(dev);
    return ND_SUCCESS;
  }

  HRESULT ND_CALL OpenAdapter(REFIID iid, UINT64 adapterId, VOID** ppAdapter) override {
    if (ppAdapter == nullptr) return ND_INVALID_PARAMETER_3;
    *ppAdapter = nullptr;
    if (!IsEqualGUID(iid, IID_IND2Adapter)) return E_NOINTERFACE;
    VerbsAdapter* a = nullptr;
    HRESULT hr = VerbsAdapter::open(adapterId, &a);
    if (FAILED(hr)) return hr;
    *ppAdapter = static_cast<IND2Adapter*>(a);
    return ND_SUCCESS;
  }

 private:
  ~VerbsProvider() override = default;
  const Lib* lib_;
};

const char* port_state_name(int s) {
  switch (s) {
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    default: return "unknown";
  }
}

}  // namespace

HRESULT VerbsAdapter::QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) {
  std::vector<LocalAddress> mine;
  for (const auto& la : local_addresses(*lib_)) {
    if (la.device == index_) mine.push_back(la);
  }
  return write_list(mine, pAddressList, pcbAddressList);
}

HRESULT get_provider(IND2Provider** out, std::string* why) {
  *out = nullptr;
  const Lib* lib = Lib::get(why);
  if (lib == nullptr) return ND_DEVICE_NOT_READY;
  int n = 0;
  ibv_context** list = lib->get_devices(&n);
  if (list != nullptr) lib->free_devices(list);
  if (n <= 0) {
    *why = "rdma-core is installed but reports no RDMA device (ibv_devices lists none; for a software device: "
           "rdma link add rxe0 type rxe netdev <if>, or type siw)";
    return ND_DEVICE_NOT_READY;
  }
  auto* p = new (std::nothrow) VerbsProvider(lib);
  if (p == nullptr) return ND_NO_MEMORY;
  *out = p;
  return ND_SUCCESS;
}

std::vector<DeviceInfo> list_devices(std::string* why) {
  std::vector<DeviceInfo> out;
  const Lib* lib = Lib::get(why);
  if (lib == nullptr) return out;
  int n = 0;
  ibv_context** list = lib->get_devices(&n);
  if (list == nullptr) return out;
  const std::vector<LocalAddress> addrs = local_addresses(*lib);
  for (int i = 0; i < n; ++i) {
    DeviceInfo d;
    d.name = lib->get_device_name(list[i]->device);
    ibv_port_attr port{};
    const bool have_port = lib->query_port(list[i], 1, reinterpret_cast<_compat_ibv_port_attr*>(&port)) == 0;
    d.state = have_port ? port_state_name(port.state) : "unknown";
    if (list[i]->device->transport_type == IBV_TRANSPORT_IWARP) {
      d.transport = "iwarp";
    } else {
      d.transport = have_port && port.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "infiniband";
    }
    for (const auto& la : addrs) {
      if (device_of_id(la.device) != i) continue;
      char text[64] = {0};
      const auto* sa = reinterpret_cast<const sockaddr*>(&la.addr);
      if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
      } else {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof(text));
      }
      d.addresses.emplace_back(text);
    }
    VerbsAdapter* a = nullptr;
    const HRESULT hr = VerbsAdapter::open(adapter_id(i, 1), &a);
    if (SUCCEEDED(hr)) {
      a->Release();
      d.usable = d.state == "active" && !d.addresses.empty();
      if (!d.usable) d.why = d.state != "active" ? "port 1 is not active" : "no IP address is bound to the device";
    } else {
      d.why = "the device could not be opened (" + std::string(NdStatusName(hr) ? NdStatusName(hr) : "error") + ")";
    }
    out.push_back(d);
  }
  lib->free_devices(list);
  return out;
}

}  // namespace netdirect::verbs
