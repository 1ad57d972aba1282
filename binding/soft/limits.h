// The software provider's limits: reported in ND2_ADAPTER_INFO (adapter.cc) and enforced by the objects and the
// queue pair's units. Its own header so that the units testable on byte buffers (qp/, memory/local_sge.h) need
// nothing of the adapter.
#ifndef NETDIRECT_SOFT_LIMITS_H_
#define NETDIRECT_SOFT_LIMITS_H_

#include "nd/nd2.h"

namespace netdirect::soft {

// Limits reported in ND2_ADAPTER_INFO and enforced by the objects.
namespace limits {
constexpr ULONG kMaxSge = 16;                 // initiator, receive and read SGEs
constexpr ULONG kMaxTransferLength = 1u << 30;
constexpr ULONG kMaxInlineData = 256;
constexpr ULONG kMaxReadLimit = 128;          // IRD and ORD, as Linux siw
constexpr ULONG kMaxQueueDepth = 16384;       // receive, initiator and SRQ depth
constexpr ULONG kMaxCqDepth = 65536;
constexpr ULONG kInlineThreshold = 64;
constexpr ULONG kLargeRequestThreshold = 64 * 1024;
constexpr ULONG kMaxPrivateData = 252;        // 256 on the wire minus the 4 MPA v2 IRD/ORD bytes
constexpr SIZE_T kMaxRegistrationSize = SIZE_T{1} << 40;
constexpr ULONG kAdapterFlags = ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED | ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                                ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
constexpr UINT16 kVendorId = 0x4e44;  // "ND": not a PCI vendor; the software provider has no hardware
constexpr UINT16 kDeviceId = 0x0001;
}  // namespace limits

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_LIMITS_H_
