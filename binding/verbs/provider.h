// The verbs provider's entry points for binding/providers/providers.cc (docs/verbs.md). Linux only.
#ifndef NETDIRECT_VERBS_PROVIDER_H_
#define NETDIRECT_VERBS_PROVIDER_H_

#include <string>
#include <vector>

#include "nd/nd2.h"

namespace netdirect::verbs {

// {6E657464-6972-6563-7476-726273000002}
inline const GUID NETDIRECT_VERBS_PROVIDER_ID = {0x6e657464, 0x6972, 0x6563,
                                                 {0x74, 0x76, 0x72, 0x62, 0x73, 0x00, 0x00, 0x02}};

// Creates the provider; ND_DEVICE_NOT_READY with *why when rdma-core cannot be loaded or has no device.
HRESULT get_provider(IND2Provider** out, std::string* why);

// What `netdirect doctor` and listProviders() show about each device.
struct DeviceInfo {
  std::string name;       // ibv device name (siw0, rxe0, mlx5_0, irdma0, ...)
  std::string transport;  // iwarp | infiniband | roce
  std::string state;      // port 1: active | down | init | armed | unknown
  std::vector<std::string> addresses;  // IP addresses the device serves (rdma_cm binds them to it)
  bool usable = false;    // a protection domain, CQ and QP could be created
  std::string why;        // when not usable
};
// Empty with *why when rdma-core is missing.
std::vector<DeviceInfo> list_devices(std::string* why);

}  // namespace netdirect::verbs

#endif  // NETDIRECT_VERBS_PROVIDER_H_
