// Checks binding/nd against docs/nd2.md: x64 struct sizes/offsets (compile time), IID values, vtable slot
// order of every interface (through the Itanium pointer-to-virtual-member encoding), status values.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nd/nd2.h"

#define OFF(type, field, x64) static_assert(offsetof(type, field) == (x64), #type "." #field " offset")

static_assert(sizeof(void*) == 8, "netdirect targets 64-bit only");
static_assert(sizeof(ULONG) == 4 && sizeof(HRESULT) == 4 && sizeof(BOOL) == 4, "LLP64 base types");
static_assert(sizeof(OVERLAPPED) == 32, "OVERLAPPED");
static_assert(sizeof(sockaddr_in) == 16 && sizeof(sockaddr_in6) == 28, "sockaddr sizes");
static_assert(sizeof(SOCKET_ADDRESS) == 16 && sizeof(SOCKET_ADDRESS_LIST) == 24, "SOCKET_ADDRESS(_LIST)");
static_assert(sizeof(GUID) == 16, "GUID");

static_assert(sizeof(ND2_ADAPTER_INFO) == 96, "ND2_ADAPTER_INFO size");
OFF(ND2_ADAPTER_INFO, InfoVersion, 0);
OFF(ND2_ADAPTER_INFO, VendorId, 4);
OFF(ND2_ADAPTER_INFO, DeviceId, 6);
OFF(ND2_ADAPTER_INFO, AdapterId, 8);
OFF(ND2_ADAPTER_INFO, MaxRegistrationSize, 16);
OFF(ND2_ADAPTER_INFO, MaxWindowSize, 24);
OFF(ND2_ADAPTER_INFO, MaxInitiatorSge, 32);
OFF(ND2_ADAPTER_INFO, MaxReceiveSge, 36);
OFF(ND2_ADAPTER_INFO, MaxReadSge, 40);
OFF(ND2_ADAPTER_INFO, MaxTransferLength, 44);
OFF(ND2_ADAPTER_INFO, MaxInlineDataSize, 48);
OFF(ND2_ADAPTER_INFO, MaxInboundReadLimit, 52);
OFF(ND2_ADAPTER_INFO, MaxOutboundReadLimit, 56);
OFF(ND2_ADAPTER_INFO, MaxReceiveQueueDepth, 60);
OFF(ND2_ADAPTER_INFO, MaxInitiatorQueueDepth, 64);
OFF(ND2_ADAPTER_INFO, MaxSharedReceiveQueueDepth, 68);
OFF(ND2_ADAPTER_INFO, MaxCompletionQueueDepth, 72);
OFF(ND2_ADAPTER_INFO, InlineRequestThreshold, 76);
OFF(ND2_ADAPTER_INFO, LargeRequestThreshold, 80);
OFF(ND2_ADAPTER_INFO, MaxCallerData, 84);
OFF(ND2_ADAPTER_INFO, MaxCalleeData, 88);
OFF(ND2_ADAPTER_INFO, AdapterFlags, 92);

static_assert(sizeof(ND2_RESULT) == 32, "ND2_RESULT size");
static_assert(sizeof(ND2_REQUEST_TYPE) == 4, "ND2_REQUEST_TYPE size");
OFF(ND2_RESULT, Status, 0);
OFF(ND2_RESULT, BytesTransferred, 4);
OFF(ND2_RESULT, QueuePairContext, 8);
OFF(ND2_RESULT, RequestContext, 16);
OFF(ND2_RESULT, RequestType, 24);

static_assert(sizeof(ND2_SGE) == 16, "ND2_SGE size");
OFF(ND2_SGE, Buffer, 0);
OFF(ND2_SGE, BufferLength, 8);
OFF(ND2_SGE, MemoryRegionToken, 12);

OFF(OVERLAPPED, Internal, 0);
OFF(OVERLAPPED, InternalHigh, 8);
OFF(OVERLAPPED, hEvent, 24);

static_assert(Nd2RequestTypeReceive == 0 && Nd2RequestTypeSend == 1 && Nd2RequestTypeBind == 2 &&
                  Nd2RequestTypeInvalidate == 3 && Nd2RequestTypeRead == 4 && Nd2RequestTypeWrite == 5,
              "ND2_REQUEST_TYPE values (released header, not the draft)");
static_assert(ND_MR_FLAG_ALLOW_REMOTE_WRITE == 5 && ND_OP_FLAG_INLINE == 0x20, "flags");

static int g_pass = 0, g_fail = 0;
static void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_pass;
  } else {
    ++g_fail;
    std::printf("FAIL %s\n", what.c_str());
  }
}

// Itanium C++ ABI: a pointer to a virtual member function stores 1 + the byte offset of its vtable slot.
template <typename M>
static long slot_of(M pmf) {
  static_assert(sizeof(M) == 2 * sizeof(void*), "Itanium member pointer");
  uintptr_t raw[2];
  std::memcpy(raw, &pmf, sizeof raw);
  if ((raw[0] & 1) == 0) return -1;
  return static_cast<long>((raw[0] - 1) / sizeof(void*));
}

#define SLOT(iface, method, n) check(slot_of(&iface::method) == (n), #iface "::" #method " slot " #n)

static std::string guid_str(const GUID& g) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X", g.Data1, g.Data2, g.Data3,
                g.Data4[0], g.Data4[1], g.Data4[2], g.Data4[3], g.Data4[4], g.Data4[5], g.Data4[6], g.Data4[7]);
  return buf;
}
#define IIDCHK(name, text) check(guid_str(name) == (text), #name " = " text)

int main() {
#if defined(__GNUC__) && !defined(_WIN32)
  SLOT(IUnknown, QueryInterface, 0);
  SLOT(IUnknown, AddRef, 1);
  SLOT(IUnknown, Release, 2);
  SLOT(IND2Provider, QueryAddressList, 3);
  SLOT(IND2Provider, ResolveAddress, 4);
  SLOT(IND2Provider, OpenAdapter, 5);
  SLOT(IND2Adapter, CreateOverlappedFile, 3);
  SLOT(IND2Adapter, Query, 4);
  SLOT(IND2Adapter, QueryAddressList, 5);
  SLOT(IND2Adapter, CreateCompletionQueue, 6);
  SLOT(IND2Adapter, CreateMemoryRegion, 7);
  SLOT(IND2Adapter, CreateMemoryWindow, 8);
  SLOT(IND2Adapter, CreateSharedReceiveQueue, 9);
  SLOT(IND2Adapter, CreateQueuePair, 10);
  SLOT(IND2Adapter, CreateQueuePairWithSrq, 11);
  SLOT(IND2Adapter, CreateConnector, 12);
  SLOT(IND2Adapter, CreateListener, 13);
  SLOT(IND2Overlapped, CancelOverlappedRequests, 3);
  SLOT(IND2Overlapped, GetOverlappedResult, 4);
  SLOT(IND2CompletionQueue, CancelOverlappedRequests, 3);
  SLOT(IND2CompletionQueue, GetNotifyAffinity, 5);
  SLOT(IND2CompletionQueue, Resize, 6);
  SLOT(IND2CompletionQueue, Notify, 7);
  SLOT(IND2CompletionQueue, GetResults, 8);
  SLOT(IND2SharedReceiveQueue, GetNotifyAffinity, 5);
  SLOT(IND2SharedReceiveQueue, Modify, 6);
  SLOT(IND2SharedReceiveQueue, Notify, 7);
  SLOT(IND2SharedReceiveQueue, Receive, 8);
  SLOT(IND2MemoryRegion, GetOverlappedResult, 4);
  SLOT(IND2MemoryRegion, Register, 5);
  SLOT(IND2MemoryRegion, Deregister, 6);
  SLOT(IND2MemoryRegion, GetLocalToken, 7);
  SLOT(IND2MemoryRegion, GetRemoteToken, 8);
  SLOT(IND2MemoryWindow, GetRemoteToken, 3);
  SLOT(IND2QueuePair, Flush, 3);
  SLOT(IND2QueuePair, Send, 4);
  SLOT(IND2QueuePair, Receive, 5);
  SLOT(IND2QueuePair, Bind, 6);
  SLOT(IND2QueuePair, Invalidate, 7);
  SLOT(IND2QueuePair, Read, 8);
  SLOT(IND2QueuePair, Write, 9);
  SLOT(IND2Connector, Bind, 5);
  SLOT(IND2Connector, Connect, 6);
  SLOT(IND2Connector, CompleteConnect, 7);
  SLOT(IND2Connector, Accept, 8);
  SLOT(IND2Connector, Reject, 9);
  SLOT(IND2Connector, GetReadLimits, 10);
  SLOT(IND2Connector, GetPrivateData, 11);
  SLOT(IND2Connector, GetLocalAddress, 12);
  SLOT(IND2Connector, GetPeerAddress, 13);
  SLOT(IND2Connector, NotifyDisconnect, 14);
  SLOT(IND2Connector, Disconnect, 15);
  SLOT(IND2Listener, Bind, 5);
  SLOT(IND2Listener, Listen, 6);
  SLOT(IND2Listener, GetLocalAddress, 7);
  SLOT(IND2Listener, GetConnectionRequest, 8);
#endif
  IIDCHK(IID_IND2Provider, "49EAE6C1-76C4-46D0-8003-5C2EAA2C9A8E");
  IIDCHK(IID_IND2Adapter, "D89C798C-4823-4D69-846C-DFDCCFF9E5F3");
  IIDCHK(IID_IND2Overlapped, "ABF72719-B016-4A40-A6F7-622791A7044C");
  IIDCHK(IID_IND2CompletionQueue, "20CC445E-64A0-4CBB-AA75-F6A7251FDA9E");
  IIDCHK(IID_IND2SharedReceiveQueue, "AABD67DC-459A-4DB1-826B-56CFCC278883");
  IIDCHK(IID_IND2MemoryRegion, "55DFEA2F-BC56-4982-8A45-0301BE46C413");
  IIDCHK(IID_IND2MemoryWindow, "070FE1F5-0AB5-4361-88DB-974BA704D4B9");
  IIDCHK(IID_IND2QueuePair, "EEF2F332-B75D-4063-BCE3-3A0BAD2D02CE");
  IIDCHK(IID_IND2Connector, "7DD615C4-6B4C-4866-950C-F3B1D25A5302");
  IIDCHK(IID_IND2Listener, "65D23D83-3A57-4E02-86A4-350165C2D130");

  check(static_cast<uint32_t>(ND_ACCESS_VIOLATION) == 0xC0000005u, "ND_ACCESS_VIOLATION value");
  check(static_cast<uint32_t>(ND_CANCELED) == 0xC0000120u, "ND_CANCELED value");
  check(static_cast<uint32_t>(ND_REMOTE_ERROR) == 0xC000013Du, "ND_REMOTE_ERROR value");
  check(static_cast<uint32_t>(ND_INVALID_PARAMETER_10) == 0xC00000F8u, "ND_INVALID_PARAMETER_10 value");
  check(SUCCEEDED(ND_PENDING) && SUCCEEDED(ND_TIMEOUT) && FAILED(ND_BUFFER_OVERFLOW), "status classes");
  check(std::string(NdStatusName(ND_DEVICE_REMOVED)) == "ND_DEVICE_REMOVED", "NdStatusName");
  check(NdStatusName(static_cast<HRESULT>(0xDEADBEEFu)) == nullptr, "NdStatusName unknown");

#ifndef _WIN32
  // The portable completion port: skip-on-success is the provider's job; a pending completion queues one
  // packet with the file's key, the hEvent low bit suppresses it, and failures dequeue as FALSE + overlapped.
  HANDLE port = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
  HANDLE file = NdCompatCreateOverlappedFile();
  check(CreateIoCompletionPort(file, port, 42, 0) == port, "associate file");
  check(CreateIoCompletionPort(file, port, 43, 0) == nullptr, "a file belongs to one port");
  OVERLAPPED ov{};
  ov.Internal = static_cast<ULONG_PTR>(ND_PENDING);
  NdCompatCompleteOverlapped(file, &ov, ND_SUCCESS, 7);
  DWORD bytes = 0;
  ULONG_PTR key = 0;
  OVERLAPPED* got = nullptr;
  check(GetQueuedCompletionStatus(port, &bytes, &key, &got, 1000) == TRUE && got == &ov && key == 42 && bytes == 7,
        "packet for a pending completion");
  check(GetQueuedCompletionStatus(port, &bytes, &key, &got, 0) == FALSE && got == nullptr &&
            GetLastError() == WAIT_TIMEOUT,
        "empty port times out");
  HANDLE ev = CreateEventW(nullptr, FALSE, FALSE, nullptr);
  ov.hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ev) | 1);
  NdCompatCompleteOverlapped(file, &ov, ND_CANCELED, 0);
  check(WaitForSingleObject(ev, 1000) == WAIT_OBJECT_0, "event signalled");
  check(GetQueuedCompletionStatus(port, &bytes, &key, &got, 0) == FALSE && got == nullptr, "low bit: no packet");
  ov.hEvent = nullptr;
  NdCompatCompleteOverlapped(file, &ov, ND_CANCELED, 0);
  check(GetQueuedCompletionStatus(port, &bytes, &key, &got, 1000) == FALSE && got == &ov &&
            static_cast<HRESULT>(ov.Internal) == ND_CANCELED,
        "failed request dequeues as FALSE with its overlapped");
  check(CloseHandle(port) == TRUE, "close port while a file is associated");
  check(CloseHandle(file) == TRUE, "close file after its port");
  check(CloseHandle(file) == FALSE && GetLastError() == ERROR_INVALID_HANDLE,
        "the provider's reference keeps a closed file readable: a second close is refused");
  // The provider completes a request after the consumer closed its handles: the OVERLAPPED says how it ended,
  // no packet goes anywhere, nothing freed is touched (the sanitizer tier would say so).
  ov.hEvent = nullptr;
  NdCompatCompleteOverlapped(file, &ov, ND_SUCCESS, 3);
  check(static_cast<HRESULT>(ov.Internal) == ND_SUCCESS && ov.InternalHigh == 3, "completed after the handle closed");
  NdCompatReleaseOverlappedFile(file);
  check(CloseHandle(ev) == TRUE, "close event");
  // A closed handle is never used again (as on Windows, where its value may already name another object): closing
  // ev twice would read the freed Event. What CloseHandle refuses without touching memory: no handle at all.
  check(CloseHandle(nullptr) == FALSE && GetLastError() == ERROR_INVALID_HANDLE, "close no handle");
  check(CloseHandle(INVALID_HANDLE_VALUE) == FALSE, "close INVALID_HANDLE_VALUE");
  // A consumer may close what it waited on the moment its wait ends, while completing threads are still inside
  // completions: here a thread completes a burst of requests, and the consumer closes its file and port as soon as
  // the first packet is out (the later ones then find the file detached), and a synchronous wait's event as soon
  // as the wait ends. The sanitizer tier reports any touch of what was closed.
  for (int round = 0; round < 200; ++round) {
    HANDLE p = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
    HANDLE f = NdCompatCreateOverlappedFile();
    CreateIoCompletionPort(f, p, 1, 0);
    HANDLE e = CreateEventW(nullptr, round % 2 == 0, FALSE, nullptr);
    constexpr int kBurst = 256;
    std::vector<OVERLAPPED> ovs(kBurst + 1);
    ovs[kBurst].hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(e) | 1);
    std::thread completer([&] {
      for (auto& o : ovs) NdCompatCompleteOverlapped(f, &o, ND_SUCCESS, 0);
    });
    OVERLAPPED* got = nullptr;
    DWORD n = 0;
    ULONG_PTR k = 0;
    BOOL dequeued = FALSE;  // polled, so the first packet is taken the instant it is queued
    for (int spin = 0; spin < 100000000 && dequeued == FALSE; ++spin) dequeued = GetQueuedCompletionStatus(p, &n, &k, &got, 0);
    CloseHandle(f);
    CloseHandle(p);
    const DWORD waited = WaitForSingleObject(e, 5000);
    CloseHandle(e);
    completer.join();
    NdCompatReleaseOverlappedFile(f);
    if (dequeued != TRUE || got != &ovs[0] || waited != WAIT_OBJECT_0) {
      check(false, "close right after the wait ends");
      break;
    }
  }
#endif

  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
