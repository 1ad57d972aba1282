// ND v2 structures, enums and flags (microsoft/NetworkDirect nddef.h; layouts in docs/nd2.md §3, §4).
#pragma once

constexpr ULONG ND_VERSION_1 = 0x1;
constexpr ULONG ND_VERSION_2 = 0x20000;

constexpr ULONG ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED = 0x00000001;
constexpr ULONG ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED = 0x00000004;
constexpr ULONG ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED = 0x00000008;
constexpr ULONG ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED = 0x00000100;
constexpr ULONG ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED = 0x00010000;

constexpr ULONG ND_CQ_NOTIFY_ERRORS = 0;
constexpr ULONG ND_CQ_NOTIFY_ANY = 1;
constexpr ULONG ND_CQ_NOTIFY_SOLICITED = 2;

constexpr ULONG ND_MR_FLAG_ALLOW_LOCAL_WRITE = 0x00000001;
constexpr ULONG ND_MR_FLAG_ALLOW_REMOTE_READ = 0x00000002;
constexpr ULONG ND_MR_FLAG_ALLOW_REMOTE_WRITE = 0x00000005;  // includes LOCAL_WRITE: remote implies local
constexpr ULONG ND_MR_FLAG_RDMA_READ_SINK = 0x00000008;
constexpr ULONG ND_MR_FLAG_DO_NOT_SECURE_VM = 0x80000000;

constexpr ULONG ND_OP_FLAG_SILENT_SUCCESS = 0x00000001;
constexpr ULONG ND_OP_FLAG_READ_FENCE = 0x00000002;
constexpr ULONG ND_OP_FLAG_SEND_AND_SOLICIT_EVENT = 0x00000004;
constexpr ULONG ND_OP_FLAG_ALLOW_READ = 0x00000008;
constexpr ULONG ND_OP_FLAG_ALLOW_WRITE = 0x00000010;
constexpr ULONG ND_OP_FLAG_INLINE = 0x00000020;

typedef struct _ND2_ADAPTER_INFO {
  ULONG InfoVersion;
  UINT16 VendorId;
  UINT16 DeviceId;
  UINT64 AdapterId;
  SIZE_T MaxRegistrationSize;
  SIZE_T MaxWindowSize;
  ULONG MaxInitiatorSge;
  ULONG MaxReceiveSge;
  ULONG MaxReadSge;
  ULONG MaxTransferLength;
  ULONG MaxInlineDataSize;
  ULONG MaxInboundReadLimit;
  ULONG MaxOutboundReadLimit;
  ULONG MaxReceiveQueueDepth;
  ULONG MaxInitiatorQueueDepth;
  ULONG MaxSharedReceiveQueueDepth;
  ULONG MaxCompletionQueueDepth;
  ULONG InlineRequestThreshold;
  ULONG LargeRequestThreshold;
  ULONG MaxCallerData;
  ULONG MaxCalleeData;
  ULONG AdapterFlags;
} ND2_ADAPTER_INFO;

typedef enum _ND2_REQUEST_TYPE {
  Nd2RequestTypeReceive = 0,
  Nd2RequestTypeSend = 1,
  Nd2RequestTypeBind = 2,
  Nd2RequestTypeInvalidate = 3,
  Nd2RequestTypeRead = 4,
  Nd2RequestTypeWrite = 5,
} ND2_REQUEST_TYPE;

typedef struct _ND2_RESULT {
  HRESULT Status;
  ULONG BytesTransferred;  // meaningful for Receive only
  void* QueuePairContext;
  void* RequestContext;
  ND2_REQUEST_TYPE RequestType;
} ND2_RESULT;

typedef struct _ND2_SGE {
  void* Buffer;
  ULONG BufferLength;
  UINT32 MemoryRegionToken;
} ND2_SGE;
