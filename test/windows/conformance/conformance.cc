// The Windows conformance tier (issue #16): drives netdirect_soft.dll the way an ND v2 SDK program does — only
// through LoadLibrary, DllGetClassObject and the IND2* interfaces — and checks every status against what
// docs/nd2.md says the provider answers (section 7 for the overlapped rules, section 8 for this provider's
// statuses). Two adapters in one process: "port" has its overlapped file on an I/O completion port and waits
// there (GetQueuedCompletionStatus, then IND2Overlapped::GetOverlappedResult); "block" waits with
// GetOverlappedResult(bWait=TRUE) on an event. Port packets must carry the outcome: TRUE for a request that
// succeeded, FALSE for one that failed or was cancelled; requests that return ND_SUCCESS post nothing
// (FILE_SKIP_COMPLETION_PORT_ON_SUCCESS). Data moves with both completion styles: polling GetResults and
// CQ Notify through the port. A third, "posted", binds its file's port with INDCompletionPort (nd/netdirect_ext.h),
// as the addon does: its packets are posted by the provider and always dequeue TRUE.
//
//   conformance.exe <Windows path of netdirect_soft.dll>      (scripts/wine-test.sh builds and runs it)
//
// Prints one line per case with its time, failures as they happen, and "N passed, M failed" last.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../native/check.h"
#include "nd/netdirect_ext.h"

namespace {

// The software provider's id (binding/soft/provider.h; a consumer gets it from the Winsock catalog).
const GUID kSoftProviderId = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x6f, 0x66, 0x74, 0x00, 0x00, 0x00}};
constexpr DWORD kWaitMs = 10000;  // "does not hang" bound for one completion
constexpr ULONG kDepth = 64;
constexpr ULONG kBuf = 4096;

using Clock = std::chrono::steady_clock;
using GetClassObjectFn = HRESULT(STDMETHODCALLTYPE*)(REFCLSID, REFIID, void**);
using CanUnloadFn = HRESULT(STDMETHODCALLTYPE*)();

// NETDIRECT_CONFORMANCE_TRACE=1: a line per step with the time since the case began (where time goes).
bool g_trace = false;
Clock::time_point g_case_start;
void trace(const char* step) {
  if (g_trace)
    std::printf("    %8.1f ms  %s\n", std::chrono::duration<double, std::milli>(Clock::now() - g_case_start).count(),
                step);
}

template <typename T> void release(T*& p) {
  if (p != nullptr) p->Release();
  p = nullptr;
}

// 127.0.0.1, or another address of 127.0.0.0/8 (ip, host order).
sockaddr_in loopback(uint16_t port, uint32_t ip = INADDR_LOOPBACK) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ip);
  return a;
}
const sockaddr* sa(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

// A port nobody uses right now: bound by a plain socket, then released.
uint16_t free_port() {
  SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  sockaddr_in a = loopback(0);
  int len = sizeof a;
  uint16_t port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  closesocket(s);
  return port;
}

sockaddr_in address_of(IND2Connector* c, bool local) {
  sockaddr_in a{};
  ULONG cb = sizeof a;
  HRESULT hr = local ? c->GetLocalAddress(reinterpret_cast<sockaddr*>(&a), &cb)
                     : c->GetPeerAddress(reinterpret_cast<sockaddr*>(&a), &cb);
  CHECK_ST(hr, ND_SUCCESS);
  return a;
}
uint16_t port_of(IND2Connector* c, bool local) { return ntohs(address_of(c, local).sin_port); }
uint32_t ip_of(IND2Connector* c, bool local) { return ntohl(address_of(c, local).sin_addr.s_addr); }

// One adapter and how its overlapped requests are waited for.
struct Side {
  const char* name = "";
  bool port_style = false;
  IND2Adapter* adapter = nullptr;
  HANDLE file = nullptr;
  HANDLE iocp = nullptr;
  HANDLE event = nullptr;
  struct Packet {
    OVERLAPPED* ov;
    BOOL ok;
    DWORD error;
  };
  std::vector<Packet> stash;  // packets dequeued while waiting for another request
  bool check_no_packet = true;  // after each request that returns at once (off in loops: Wine's 0-ms wait is slow)
  bool posted = false;  // the file is bound to iocp with INDCompletionPort: every packet dequeues TRUE

  OVERLAPPED* ov(OVERLAPPED* o) {
    std::memset(o, 0, sizeof *o);
    if (!port_style) o->hEvent = event;
    return o;
  }

  // The packet of `o`, taken from the port (kWaitMs at most). false if none came.
  bool take_packet(OVERLAPPED* o, Packet* out) {
    for (;;) {
      auto it = std::find_if(stash.begin(), stash.end(), [o](const Packet& p) { return p.ov == o; });
      if (it != stash.end()) {
        *out = *it;
        stash.erase(it);
        return true;
      }
      DWORD bytes = 0;
      ULONG_PTR key = 0;
      OVERLAPPED* got = nullptr;
      BOOL ok = GetQueuedCompletionStatus(iocp, &bytes, &key, &got, kWaitMs);
      DWORD err = ok ? 0 : GetLastError();
      if (got == nullptr) return false;  // timed out
      CHECK(key == reinterpret_cast<ULONG_PTR>(this));
      stash.push_back(Packet{got, ok, err});
    }
  }

  // After an overlapped call returned `hr`: the request's final status. ND_PENDING -> exactly one notification,
  // whose port packet says success or failure as the request ended; anything else -> no notification.
  HRESULT finish(IND2Overlapped* obj, OVERLAPPED* o, HRESULT hr) {
    if (hr != ND_PENDING) {
      if (check_no_packet) CHECK(no_packet());
      return hr;
    }
    if (!port_style) return obj->GetOverlappedResult(o, TRUE);
    Packet p{};
    if (!CHECK(take_packet(o, &p))) return ND_IO_TIMEOUT;
    const HRESULT st = obj->GetOverlappedResult(o, FALSE);
    // #16.2: the packet carries the failure, as a failed IRP's does (docs/nd2.md, 7.2); a posted packet
    // (INDCompletionPort) always says success, and the status is GetOverlappedResult's alone.
    if (posted) {
      CHECK(p.ok != FALSE);
    } else {
      if (!CHECK((p.ok != FALSE) == SUCCEEDED(st))) std::printf("  packet ok=%d for status 0x%08lx\n", p.ok, st);
      if (!p.ok) CHECK(p.error == ERROR_OPERATION_ABORTED);
    }
    CHECK(o->Internal == static_cast<ULONG_PTR>(static_cast<ULONG>(st)));  // written back by GetOverlappedResult
    return st;
  }

  // Nothing queued on the port (skip-on-success, and nothing for immediate failures).
  bool no_packet() {
    if (!port_style) return true;
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* got = nullptr;
    BOOL ok = GetQueuedCompletionStatus(iocp, &bytes, &key, &got, 0);
    if (got != nullptr) {
      stash.push_back(Packet{got, ok, ok ? 0 : GetLastError()});
      return false;
    }
    return true;
  }
};

struct Provider {
  HMODULE dll = nullptr;
  CanUnloadFn can_unload = nullptr;
  IND2Provider* nd = nullptr;
};

Provider load(const wchar_t* path) {
  Provider p;
  p.dll = LoadLibraryW(path);
  if (!CHECK(p.dll != nullptr)) return p;
  auto get = reinterpret_cast<GetClassObjectFn>(reinterpret_cast<void*>(GetProcAddress(p.dll, "DllGetClassObject")));
  p.can_unload = reinterpret_cast<CanUnloadFn>(reinterpret_cast<void*>(GetProcAddress(p.dll, "DllCanUnloadNow")));
  if (!CHECK(get != nullptr && p.can_unload != nullptr)) return p;
  void* obj = nullptr;
  CHECK_ST(get(IID_IND2Adapter, IID_IND2Provider, &obj), CLASS_E_CLASSNOTAVAILABLE);  // not its provider id
  CHECK_ST(get(kSoftProviderId, IID_IND2Provider, &obj), S_OK);
  p.nd = static_cast<IND2Provider*>(obj);
  return p;
}

bool open_side(Provider& p, Side* s, const char* name, bool port_style) {
  s->name = name;
  s->port_style = port_style;
  sockaddr_in a = loopback(0);
  UINT64 id = 0;
  CHECK_ST(p.nd->ResolveAddress(sa(a), sizeof a, &id), ND_SUCCESS);
  void* obj = nullptr;
  if (!CHECK_ST(p.nd->OpenAdapter(IID_IND2Adapter, id, &obj), ND_SUCCESS)) return false;
  s->adapter = static_cast<IND2Adapter*>(obj);
  if (!CHECK_ST(s->adapter->CreateOverlappedFile(&s->file), ND_SUCCESS)) return false;
  if (port_style) {
    s->iocp = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
    CHECK(CreateIoCompletionPort(s->file, s->iocp, reinterpret_cast<ULONG_PTR>(s), 0) == s->iocp);
  } else {
    s->event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
  }
  return true;
}

void close_side(Side* s) {
  CHECK(s->stash.empty());
  release(s->adapter);
  if (s->file != nullptr) CloseHandle(s->file);
  if (s->iocp != nullptr) CloseHandle(s->iocp);
  if (s->event != nullptr) CloseHandle(s->event);
}

// ---- the objects of one connection end ------------------------------------------------------------------

struct End {
  Side* side = nullptr;
  IND2CompletionQueue* cq = nullptr;
  IND2QueuePair* qp = nullptr;
  IND2Connector* conn = nullptr;
  IND2MemoryRegion* mr = nullptr;
  std::vector<char> buf = std::vector<char>(kBuf * 2);
  OVERLAPPED ov{};
};

IND2MemoryRegion* new_mr(Side* s) {
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateMemoryRegion(IID_IND2MemoryRegion, s->file, &obj), ND_SUCCESS);
  return static_cast<IND2MemoryRegion*>(obj);
}

HRESULT register_mr(Side* s, IND2MemoryRegion* mr, const void* p, SIZE_T n, ULONG flags) {
  OVERLAPPED o;
  return s->finish(mr, &o, mr->Register(p, n, flags, s->ov(&o)));
}

HRESULT deregister_mr(Side* s, IND2MemoryRegion* mr) {
  OVERLAPPED o;
  return s->finish(mr, &o, mr->Deregister(s->ov(&o)));
}

bool make_end(Side* s, End* e, ULONG mr_flags) {
  e->side = s;
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s->file, kDepth * 2, 0, 0, &obj), ND_SUCCESS);
  e->cq = static_cast<IND2CompletionQueue*>(obj);
  if (e->cq == nullptr) return false;
  CHECK_ST(s->adapter->CreateQueuePair(IID_IND2QueuePair, e->cq, e->cq, e, kDepth, kDepth, 1, 1, 0, &obj),
           ND_SUCCESS);
  e->qp = static_cast<IND2QueuePair*>(obj);
  CHECK_ST(s->adapter->CreateConnector(IID_IND2Connector, s->file, &obj), ND_SUCCESS);
  e->conn = static_cast<IND2Connector*>(obj);
  e->mr = new_mr(s);
  return e->qp != nullptr && e->conn != nullptr && e->mr != nullptr &&
         CHECK_ST(register_mr(s, e->mr, e->buf.data(), e->buf.size(), mr_flags), ND_SUCCESS);
}

void free_end(End* e) {
  if (e->mr != nullptr) CHECK_ST(deregister_mr(e->side, e->mr), ND_SUCCESS);
  release(e->mr);
  release(e->conn);
  release(e->qp);
  release(e->cq);
}

// Polling completion style: GetResults until one result comes (kWaitMs at most).
bool poll_one(End* e, ND2_RESULT* r) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (Clock::now() < deadline) {
    if (e->cq->GetResults(r, 1) == 1) return true;
    Sleep(0);
  }
  return false;
}

// Notify completion style: drain, arm, wait for the notification, drain again.
bool notify_one(End* e, ND2_RESULT* r) {
  for (int round = 0; round < 1000; ++round) {
    if (e->cq->GetResults(r, 1) == 1) return true;
    OVERLAPPED o;
    HRESULT hr = e->cq->Notify(ND_CQ_NOTIFY_ANY, e->side->ov(&o));
    if (hr == ND_SUCCESS) continue;  // a result slipped in: not armed
    if (!CHECK_ST(e->side->finish(e->cq, &o, hr), ND_SUCCESS)) return false;
  }
  return false;
}

bool next_result(End* e, ND2_RESULT* r) {
  return e->side->port_style ? CHECK(notify_one(e, r)) : CHECK(poll_one(e, r));
}

// A listening listener on `port` (0: any) of 127.0.0.1 or `ip`.
IND2Listener* listen_on(Side* s, uint16_t port, uint16_t* bound, uint32_t ip = INADDR_LOOPBACK) {
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateListener(IID_IND2Listener, s->file, &obj), ND_SUCCESS);
  auto* l = static_cast<IND2Listener*>(obj);
  if (l == nullptr) return nullptr;
  sockaddr_in a = loopback(port, ip);
  CHECK_ST(l->Listen(0), ND_INVALID_DEVICE_STATE);  // not bound yet
  CHECK_ST(l->Bind(sa(a), sizeof a), ND_SUCCESS);
  CHECK_ST(l->Bind(sa(a), sizeof a), STATUS_ADDRESS_ALREADY_ASSOCIATED);
  CHECK_ST(l->Listen(0), ND_SUCCESS);
  CHECK_ST(l->Listen(0), ND_INVALID_DEVICE_STATE);  // #16.6: once only
  ULONG cb = sizeof a;
  CHECK_ST(l->GetLocalAddress(reinterpret_cast<sockaddr*>(&a), &cb), ND_SUCCESS);
  *bound = ntohs(a.sin_port);
  CHECK(port == 0 || *bound == port);
  CHECK(ntohl(a.sin_addr.s_addr) == ip);
  return l;
}

// Connects `client` to `server` through `l` (listening on server_ip): Connect, GetConnectionRequest, Accept,
// CompleteConnect, each waited for in its side's style. local_port != 0 or a client_ip other than 127.0.0.1 binds
// the client's connector there first.
bool connect_pair(IND2Listener* l, uint16_t port, End* server, End* client, uint16_t local_port,
                  uint32_t server_ip = INADDR_LOOPBACK, uint32_t client_ip = INADDR_LOOPBACK) {
  Side* ss = server->side;
  Side* cs = client->side;
  if (local_port != 0 || client_ip != INADDR_LOOPBACK) {
    sockaddr_in me = loopback(local_port, client_ip);
    CHECK_ST(client->conn->Bind(sa(me), sizeof me), ND_SUCCESS);
  }
  OVERLAPPED gcr, con, acc, cc;
  HRESULT g = l->GetConnectionRequest(server->conn, ss->ov(&gcr));
  CHECK_ST(g, ND_PENDING);
  sockaddr_in dest = loopback(port, server_ip);
  HRESULT c = client->conn->Connect(client->qp, sa(dest), sizeof dest, 1, 1, "hello", 5, cs->ov(&con));
  CHECK_ST(c, ND_PENDING);
  if (!CHECK_ST(ss->finish(l, &gcr, g), ND_SUCCESS)) return false;
  char pd[16] = {};
  ULONG cb = sizeof pd;
  CHECK_ST(server->conn->GetPrivateData(pd, &cb), ND_SUCCESS);
  CHECK(cb >= 5 && std::memcmp(pd, "hello", 5) == 0);
  HRESULT a = server->conn->Accept(server->qp, 1, 1, nullptr, 0, ss->ov(&acc));
  CHECK(a == ND_PENDING || a == ND_SUCCESS);
  if (!CHECK_ST(cs->finish(client->conn, &con, c), ND_SUCCESS)) return false;
  if (!CHECK_ST(cs->finish(client->conn, &cc, client->conn->CompleteConnect(cs->ov(&cc))), ND_SUCCESS)) return false;
  if (!CHECK_ST(ss->finish(server->conn, &acc, a), ND_SUCCESS)) return false;
  if (local_port != 0) CHECK(port_of(client->conn, true) == local_port);
  CHECK(port_of(client->conn, false) == port);
  CHECK(port_of(server->conn, true) == port);
  CHECK(ip_of(client->conn, true) == client_ip && ip_of(server->conn, false) == client_ip);
  CHECK(ip_of(client->conn, false) == server_ip && ip_of(server->conn, true) == server_ip);
  CHECK(port_of(server->conn, false) == port_of(client->conn, true));
  return true;
}

// `from` disconnects; the other end's NotifyDisconnect completes; then it disconnects too.
void disconnect_pair(End* from, End* to) {
  OVERLAPPED nd, d1, d2;
  HRESULT n = to->conn->NotifyDisconnect(to->side->ov(&nd));
  CHECK_ST(n, ND_PENDING);
  CHECK_ST(from->side->finish(from->conn, &d1, from->conn->Disconnect(from->side->ov(&d1))), ND_SUCCESS);
  trace("first Disconnect done");
  const HRESULT ns = to->side->finish(to->conn, &nd, n);
  CHECK(ns == ND_SUCCESS || ns == STATUS_CONNECTION_DISCONNECTED);
  CHECK_ST(to->side->finish(to->conn, &d2, to->conn->Disconnect(to->side->ov(&d2))), ND_SUCCESS);
}

// Send/Receive both ways, an RDMA Write and a Read, each result checked (type, status, bytes, data).
void move_data(End* server, End* client) {
  ND2_RESULT r{};
  const ND2_SGE srv_in{server->buf.data(), 64, server->mr->GetLocalToken()};
  CHECK_ST(server->qp->Receive(&server->ov, &srv_in, 1), ND_SUCCESS);
  std::memcpy(client->buf.data(), "ping from the client", 21);
  const ND2_SGE cli_out{client->buf.data(), 21, client->mr->GetLocalToken()};
  CHECK_ST(client->qp->Send(&client->ov, &cli_out, 1, 0), ND_SUCCESS);
  if (next_result(client, &r)) {
    CHECK_ST(r.Status, ND_SUCCESS);
    CHECK(r.RequestType == Nd2RequestTypeSend && r.RequestContext == &client->ov);
  }
  if (next_result(server, &r)) {
    CHECK_ST(r.Status, ND_SUCCESS);
    CHECK(r.RequestType == Nd2RequestTypeReceive && r.BytesTransferred == 21);
    CHECK(std::memcmp(server->buf.data(), "ping from the client", 21) == 0);
  }
  // Write kBuf bytes into the server's second half, Read them back into the client's second half.
  for (ULONG i = 0; i < kBuf; ++i) client->buf[i] = static_cast<char>(i * 7 + 1);
  const UINT64 remote = reinterpret_cast<UINT64>(server->buf.data() + kBuf);
  const ND2_SGE w{client->buf.data(), kBuf, client->mr->GetLocalToken()};
  CHECK_ST(client->qp->Write(&client->ov, &w, 1, remote, server->mr->GetRemoteToken(), 0), ND_SUCCESS);
  if (next_result(client, &r)) {
    CHECK_ST(r.Status, ND_SUCCESS);
    CHECK(r.RequestType == Nd2RequestTypeWrite);
  }
  const ND2_SGE rd{client->buf.data() + kBuf, kBuf, client->mr->GetLocalToken()};
  CHECK_ST(client->qp->Read(&client->ov, &rd, 1, remote, server->mr->GetRemoteToken(), 0), ND_SUCCESS);
  if (next_result(client, &r)) {
    CHECK_ST(r.Status, ND_SUCCESS);
    CHECK(r.RequestType == Nd2RequestTypeRead);
    CHECK(std::memcmp(client->buf.data(), client->buf.data() + kBuf, kBuf) == 0);
  }
}

// ---- cases ---------------------------------------------------------------------------------------------

void case_discovery(Provider& p) {
  ULONG cb = 0;
  CHECK_ST(p.nd->QueryAddressList(nullptr, &cb), ND_BUFFER_OVERFLOW);
  CHECK(cb >= sizeof(SOCKET_ADDRESS_LIST));
  std::vector<char> list(cb);
  auto* l = reinterpret_cast<SOCKET_ADDRESS_LIST*>(list.data());
  CHECK_ST(p.nd->QueryAddressList(l, &cb), ND_SUCCESS);
  bool loop = false;
  for (INT i = 0; i < l->iAddressCount; ++i) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(l->Address[i].lpSockaddr);
    loop = loop || (in->sin_family == AF_INET && in->sin_addr.s_addr == htonl(INADDR_LOOPBACK));
  }
  CHECK(loop);
  sockaddr_in bad = loopback(0);
  bad.sin_addr.s_addr = htonl(0xC0000201);  // 192.0.2.1 (TEST-NET-1): not this host's
  UINT64 id = 0;
  CHECK_ST(p.nd->ResolveAddress(sa(bad), sizeof bad, &id), ND_INVALID_ADDRESS);
  void* obj = nullptr;
  sockaddr_in a = loopback(0);
  CHECK_ST(p.nd->ResolveAddress(sa(a), sizeof a, &id), ND_SUCCESS);
  CHECK_ST(p.nd->OpenAdapter(IID_IND2Adapter, id, &obj), ND_SUCCESS);
  auto* ad = static_cast<IND2Adapter*>(obj);
  if (ad == nullptr) return;
  ND2_ADAPTER_INFO info{};
  cb = 0;
  CHECK_ST(ad->Query(&info, &cb), ND_BUFFER_OVERFLOW);
  CHECK(cb == sizeof info);
  info.InfoVersion = ND_VERSION_2;
  CHECK_ST(ad->Query(&info, &cb), ND_SUCCESS);
  CHECK(info.MaxCompletionQueueDepth >= kDepth * 2 && info.MaxReceiveQueueDepth >= kDepth);
  CHECK(p.can_unload() == S_FALSE);  // objects alive
  ad->Release();
}

// The overlapped file's notification modes (IND2Adapter::CreateOverlappedFile requires both), read back with
// NtQueryInformationFile(FileIoCompletionNotificationInformation) where the system answers it.
void case_file_modes(Side* s) {
  using QueryFn = LONG(NTAPI*)(HANDLE, void*, void*, ULONG, int);
  auto q = reinterpret_cast<QueryFn>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationFile")));
  ULONG_PTR iosb[2] = {};
  ULONG flags = 0;
  const LONG st = q != nullptr ? q(s->file, iosb, &flags, sizeof flags, 41 /* FileIoCompletionNotification */) : -1;
  if (st == 0) {
    CHECK((flags & FILE_SKIP_COMPLETION_PORT_ON_SUCCESS) != 0);
    CHECK((flags & FILE_SKIP_SET_EVENT_ON_HANDLE) != 0);
  } else {
    std::printf("  (the system does not report the file's modes: 0x%08lx; the behaviour is checked instead)\n", st);
  }
  // Setting them again is harmless (consumers do: binding/addon/adapter.cc).
  CHECK(SetFileCompletionNotificationModes(s->file, FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE));
}

// CQ Notify: pending until cancelled; both requests complete ND_CANCELED, each with one failed packet.
void case_notify_cancel(Side* s) {
  End e;
  e.side = s;
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s->file, kDepth, 0, 0, &obj), ND_SUCCESS);
  e.cq = static_cast<IND2CompletionQueue*>(obj);
  if (e.cq == nullptr) return;
  OVERLAPPED o1, o2;
  HRESULT h1 = e.cq->Notify(ND_CQ_NOTIFY_ANY, s->ov(&o1));
  HRESULT h2 = e.cq->Notify(ND_CQ_NOTIFY_ERRORS, s->ov(&o2));
  CHECK_ST(h1, ND_PENDING);
  CHECK_ST(h2, ND_PENDING);
  CHECK_ST(e.cq->GetOverlappedResult(&o1, FALSE), ND_PENDING);
  CHECK_ST(e.cq->CancelOverlappedRequests(), ND_SUCCESS);
  CHECK_ST(s->finish(e.cq, &o1, h1), ND_CANCELED);
  CHECK_ST(s->finish(e.cq, &o2, h2), ND_CANCELED);
  CHECK_ST(e.cq->Notify(7, s->ov(&o1)), ND_INVALID_PARAMETER_1);  // no such type: fails at once, no packet
  CHECK(s->no_packet());
  release(e.cq);
}

// INDCompletionPort (nd/netdirect_ext.h): a file bound to its port once, by the adapter that made it; after that
// its completions are posted (TRUE, the key given, the status from GetOverlappedResult), an OVERLAPPED whose hEvent
// has the low bit set gets its event and no packet, and a port handle the consumer closed is not the provider's.
void case_bind_port(Provider& p, Side* s, Side* other) {
  INDCompletionPort* cp = nullptr;
  if (!CHECK_ST(s->adapter->QueryInterface(IID_INDCompletionPort, reinterpret_cast<void**>(&cp)), S_OK)) return;
  const ULONG_PTR key = reinterpret_cast<ULONG_PTR>(s);
  CHECK_ST(cp->BindCompletionPort(other->file, s->iocp, key), ND_INVALID_PARAMETER_1);  // another adapter's file
  CHECK_ST(cp->BindCompletionPort(s->file, nullptr, key), ND_INVALID_PARAMETER_2);
  // A port handle of our own, closed after binding: the provider posts through its own handle.
  HANDLE dup = nullptr;
  CHECK(DuplicateHandle(GetCurrentProcess(), s->iocp, GetCurrentProcess(), &dup, 0, FALSE, DUPLICATE_SAME_ACCESS));
  CHECK_ST(cp->BindCompletionPort(s->file, dup, key), ND_SUCCESS);
  CloseHandle(dup);
  CHECK_ST(cp->BindCompletionPort(s->file, s->iocp, key), ND_INVALID_PARAMETER_1);  // bound already
  s->posted = true;
  // Cancelled Notify requests: one success packet each, ND_CANCELED from GetOverlappedResult (finish checks).
  case_notify_cancel(s);
  // The event-only rule: hEvent's low bit set, no packet.
  End e;
  e.side = s;
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s->file, kDepth, 0, 0, &obj), ND_SUCCESS);
  e.cq = static_cast<IND2CompletionQueue*>(obj);
  HANDLE ev = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (e.cq != nullptr && ev != nullptr) {
    OVERLAPPED o{};
    o.hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ev) | 1);
    CHECK_ST(e.cq->Notify(ND_CQ_NOTIFY_ANY, &o), ND_PENDING);
    CHECK_ST(e.cq->CancelOverlappedRequests(), ND_SUCCESS);
    CHECK(WaitForSingleObject(ev, kWaitMs) == WAIT_OBJECT_0);
    CHECK_ST(e.cq->GetOverlappedResult(&o, FALSE), ND_CANCELED);
    CHECK(s->no_packet());
  }
  if (ev != nullptr) CloseHandle(ev);
  release(e.cq);
  cp->Release();
  (void)p;
}

// Connect to a port nobody listens on: the request fails asynchronously with ND_CONNECTION_REFUSED.
void case_refused(Side* s) {
  End e;
  if (!make_end(s, &e, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) return free_end(&e);
  sockaddr_in dest = loopback(free_port());
  OVERLAPPED o;
  HRESULT hr = e.conn->Connect(e.qp, sa(dest), sizeof dest, 0, 0, nullptr, 0, s->ov(&o));
  CHECK_ST(hr, ND_PENDING);
  CHECK_ST(s->finish(e.conn, &o, hr), ND_CONNECTION_REFUSED);
  free_end(&e);
}

// A Connect to the unspecified address names no host: STATUS_BAD_NETWORK_NAME at once (the SDK's NdInvalidIP);
// port 0 is a parameter error. Neither uses the connector up.
void case_no_destination(Side* s) {
  End e;
  if (!make_end(s, &e, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) return free_end(&e);
  OVERLAPPED o;
  sockaddr_in any = loopback(free_port(), INADDR_ANY);
  CHECK_ST(e.conn->Connect(e.qp, sa(any), sizeof any, 0, 0, nullptr, 0, s->ov(&o)), STATUS_BAD_NETWORK_NAME);
  sockaddr_in port0 = loopback(0);
  CHECK_ST(e.conn->Connect(e.qp, sa(port0), sizeof port0, 0, 0, nullptr, 0, s->ov(&o)), ND_INVALID_ADDRESS);
  free_end(&e);
}

// The same with the connector bound to the destination port: TCP's simultaneous open joins the socket to itself,
// nobody listens, so the Connect is refused as from any other source port (not aborted by its own MPA Request).
void case_refused_self(Side* s) {
  End e;
  if (!make_end(s, &e, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) return free_end(&e);
  sockaddr_in dest = loopback(free_port());
  CHECK_ST(e.conn->Bind(sa(dest), sizeof dest), ND_SUCCESS);
  OVERLAPPED o;
  HRESULT hr = e.conn->Connect(e.qp, sa(dest), sizeof dest, 0, 0, nullptr, 0, s->ov(&o));
  CHECK_ST(hr, ND_PENDING);
  CHECK_ST(s->finish(e.conn, &o, hr), ND_CONNECTION_REFUSED);
  free_end(&e);
}

// The server rejects: the client's Connect completes ND_CONNECTION_REFUSED with the reject's private data.
void case_reject(Side* server, Side* client) {
  uint16_t port = 0;
  IND2Listener* l = listen_on(server, 0, &port);
  End se, ce;
  if (l != nullptr && make_end(server, &se, ND_MR_FLAG_ALLOW_LOCAL_WRITE) &&
      make_end(client, &ce, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
    OVERLAPPED gcr, con;
    HRESULT g = l->GetConnectionRequest(se.conn, server->ov(&gcr));
    sockaddr_in dest = loopback(port);
    HRESULT c = ce.conn->Connect(ce.qp, sa(dest), sizeof dest, 0, 0, nullptr, 0, client->ov(&con));
    CHECK_ST(c, ND_PENDING);
    CHECK_ST(server->finish(l, &gcr, g), ND_SUCCESS);
    CHECK_ST(se.conn->Reject("no", 2), ND_SUCCESS);
    CHECK_ST(client->finish(ce.conn, &con, c), ND_CONNECTION_REFUSED);
    char pd[8] = {};
    ULONG cb = sizeof pd;
    CHECK_ST(ce.conn->GetPrivateData(pd, &cb), ND_SUCCESS);
    CHECK(cb >= 2 && std::memcmp(pd, "no", 2) == 0);
  }
  free_end(&ce);
  free_end(&se);
  release(l);
}

// The initiator declines after its Connect succeeded, by Reject or by releasing its connector before
// CompleteConnect (the SDK's ways to abandon a connection): the server's pending Accept completes
// ND_CONNECTION_REFUSED (docs/nd2.md §3.6; the SDK's NdConnReject, NdConnClose and NdDualConnection).
void case_decline(Side* server, Side* client, bool by_release) {
  uint16_t port = 0;
  IND2Listener* l = listen_on(server, 0, &port);
  End se, ce;
  if (l != nullptr && make_end(server, &se, ND_MR_FLAG_ALLOW_LOCAL_WRITE) &&
      make_end(client, &ce, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
    OVERLAPPED gcr, con, acc;
    HRESULT g = l->GetConnectionRequest(se.conn, server->ov(&gcr));
    sockaddr_in dest = loopback(port);
    HRESULT c = ce.conn->Connect(ce.qp, sa(dest), sizeof dest, 1, 1, nullptr, 0, client->ov(&con));
    CHECK_ST(c, ND_PENDING);
    CHECK_ST(server->finish(l, &gcr, g), ND_SUCCESS);
    HRESULT a = se.conn->Accept(se.qp, 1, 1, nullptr, 0, server->ov(&acc));
    CHECK_ST(a, ND_PENDING);
    CHECK_ST(client->finish(ce.conn, &con, c), ND_SUCCESS);
    if (by_release) {
      release(ce.conn);
    } else {
      CHECK_ST(ce.conn->Reject(nullptr, 0), ND_SUCCESS);
    }
    CHECK_ST(server->finish(se.conn, &acc, a), ND_CONNECTION_REFUSED);
  }
  free_end(&ce);
  free_end(&se);
  release(l);
}

// Connect, move data, disconnect, n times; the client binds an explicit local port on every other round, and
// the roles of the two sides swap every round (each side is server and client, each waits its own way).
void case_cycles(Side* a, Side* b, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    Side* server = (i & 1) ? b : a;
    Side* client = (i & 1) ? a : b;
    uint16_t port = 0;
    IND2Listener* l = listen_on(server, (i % 4 == 0) ? free_port() : 0, &port);
    End se, ce;
    const ULONG flags = ND_MR_FLAG_ALLOW_REMOTE_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ;
    if (l != nullptr && make_end(server, &se, flags) && make_end(client, &ce, flags) &&
        connect_pair(l, port, &se, &ce, (i & 2) ? free_port() : 0)) {
      trace("connected");
      move_data(&se, &ce);
      trace("data moved");
      if (i & 1)
        disconnect_pair(&se, &ce);
      else
        disconnect_pair(&ce, &se);
      trace("disconnected");
    }
    free_end(&ce);
    free_end(&se);
    release(l);
    trace("released");
  }
}

// Notify on a CQ that already holds a matching result (docs/nd2.md 7.3): ND_PENDING, and the notification follows at
// once through the overlapped file (a packet on the port, the event), as a kernel provider's armed CQ fires. The SDK's
// programs drain, arm and return, taking any Notify that did not fail as armed (ndconn): an ND_SUCCESS here, which
// posts nothing, left their completions in the CQ for good.
void case_notify_queued(Side* server_side, Side* client_side) {
  uint16_t port = 0;
  IND2Listener* l = listen_on(server_side, 0, &port);
  End se, ce;
  if (l != nullptr && make_end(server_side, &se, ND_MR_FLAG_ALLOW_LOCAL_WRITE) &&
      make_end(client_side, &ce, ND_MR_FLAG_ALLOW_LOCAL_WRITE) &&
      connect_pair(l, port, &se, &ce, 0)) {
    const ND2_SGE in{se.buf.data(), 64, se.mr->GetLocalToken()};
    CHECK_ST(se.qp->Receive(&se.ov, &in, 1), ND_SUCCESS);
    OVERLAPPED first, second;
    const HRESULT armed = se.cq->Notify(ND_CQ_NOTIFY_ANY, server_side->ov(&first));
    CHECK_ST(armed, ND_PENDING);  // nothing queued yet
    const ND2_SGE out{ce.buf.data(), 8, ce.mr->GetLocalToken()};
    CHECK_ST(ce.qp->Send(&ce.ov, &out, 1, 0), ND_SUCCESS);
    CHECK_ST(server_side->finish(se.cq, &first, armed), ND_SUCCESS);  // the Receive is queued now, not taken
    const HRESULT again = se.cq->Notify(ND_CQ_NOTIFY_ANY, server_side->ov(&second));
    CHECK_ST(again, ND_PENDING);
    CHECK_ST(server_side->finish(se.cq, &second, again), ND_SUCCESS);
    ND2_RESULT r{};
    CHECK(se.cq->GetResults(&r, 1) == 1);
    CHECK(r.RequestType == Nd2RequestTypeReceive && r.Status == ND_SUCCESS);
    if (next_result(&ce, &r)) CHECK(r.RequestType == Nd2RequestTypeSend);
    disconnect_pair(&ce, &se);
  }
  free_end(&ce);
  free_end(&se);
  release(l);
}

// All of 127.0.0.0/8 is this host (RFC 1122 section 3.2.1.3), routed to loopback and bindable on Windows and
// Linux; programs give each process its own loopback address (the SDK's ndmpic). The loopback adapter serves the
// range: 127.0.0.2 resolves to it, and a connection from 127.0.0.2 to a listener on 127.0.0.3 reports those
// addresses at both ends and moves data. The address lists keep the interface's own address (127.0.0.1).
void case_loopback_range(Provider& p, Side* server, Side* client) {
  constexpr uint32_t kTwo = 0x7f000002, kThree = 0x7f000003;
  UINT64 id1 = 0, id2 = 0;
  sockaddr_in one = loopback(0), two = loopback(0, kTwo);
  CHECK_ST(p.nd->ResolveAddress(sa(one), sizeof one, &id1), ND_SUCCESS);
  CHECK_ST(p.nd->ResolveAddress(sa(two), sizeof two, &id2), ND_SUCCESS);
  CHECK(id1 == id2);
  ULONG cb = 0;
  CHECK_ST(p.nd->QueryAddressList(nullptr, &cb), ND_BUFFER_OVERFLOW);
  std::vector<char> list(cb);
  auto* al = reinterpret_cast<SOCKET_ADDRESS_LIST*>(list.data());
  if (CHECK_ST(p.nd->QueryAddressList(al, &cb), ND_SUCCESS)) {
    for (INT i = 0; i < al->iAddressCount; ++i) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(al->Address[i].lpSockaddr);
      CHECK(in->sin_family != AF_INET || in->sin_addr.s_addr != htonl(kTwo));
    }
  }
  uint16_t port = 0;
  IND2Listener* l = listen_on(server, 0, &port, kThree);
  End se, ce;
  const ULONG flags = ND_MR_FLAG_ALLOW_REMOTE_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ;
  if (l != nullptr && make_end(server, &se, flags) && make_end(client, &ce, flags) &&
      connect_pair(l, port, &se, &ce, 0, kThree, kTwo)) {
    move_data(&se, &ce);
    disconnect_pair(&ce, &se);
  }
  free_end(&ce);
  free_end(&se);
  release(l);
}

// A connector bound to a port another connector holds cannot have it.
void case_port_in_use(Side* s) {
  End e1, e2;
  if (make_end(s, &e1, ND_MR_FLAG_ALLOW_LOCAL_WRITE) && make_end(s, &e2, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
    uint16_t port = 0;
    IND2Listener* l = listen_on(s, 0, &port);
    sockaddr_in same = loopback(port);
    CHECK_ST(e1.conn->Bind(sa(same), sizeof same), ND_SHARING_VIOLATION);  // the listener's port
    const uint16_t p = free_port();
    sockaddr_in me = loopback(p);
    CHECK_ST(e1.conn->Bind(sa(me), sizeof me), ND_SUCCESS);
    CHECK_ST(e1.conn->Bind(sa(me), sizeof me), STATUS_ADDRESS_ALREADY_ASSOCIATED);
    release(l);
  }
  free_end(&e2);
  free_end(&e1);
}

// Remote access the target's region does not grant: the initiator's request completes ND_ACCESS_VIOLATION.
void case_access_violation(Side* server, Side* client, bool write) {
  uint16_t port = 0;
  IND2Listener* l = listen_on(server, 0, &port);
  End se, ce;
  // The server grants the opposite of what the client attempts.
  const ULONG srv = write ? ND_MR_FLAG_ALLOW_REMOTE_READ : ND_MR_FLAG_ALLOW_REMOTE_WRITE;
  if (l != nullptr && make_end(server, &se, srv) &&
      make_end(client, &ce, ND_MR_FLAG_ALLOW_LOCAL_WRITE) && connect_pair(l, port, &se, &ce, 0)) {
    const ND2_SGE sge{ce.buf.data(), kBuf, ce.mr->GetLocalToken()};
    const UINT64 remote = reinterpret_cast<UINT64>(se.buf.data());
    const HRESULT hr = write ? ce.qp->Write(&ce.ov, &sge, 1, remote, se.mr->GetRemoteToken(), 0)
                             : ce.qp->Read(&ce.ov, &sge, 1, remote, se.mr->GetRemoteToken(), 0);
    CHECK_ST(hr, ND_SUCCESS);
    ND2_RESULT r{};
    if (next_result(&ce, &r)) CHECK_ST(r.Status, ND_ACCESS_VIOLATION);
  }
  free_end(&ce);
  free_end(&se);
  release(l);
}

// A flood of Connects (docs/nd2.md "Listen backlog"): n at once to a listener with backlog 8 that takes requests
// one at a time (as the SDK's ndconn server does), or to a port nobody listens on. Every Connect completes
// ND_SUCCESS or ND_CONNECTION_REFUSED within the "does not hang" bound; none times out. Polls the requests
// (GetOverlappedResult(FALSE)), so it runs on the event-style side. Prints the outcome.
struct FloodEnd {
  IND2Connector* conn = nullptr;
  IND2QueuePair* qp = nullptr;
  OVERLAPPED op{}, done{};  // Connect or GetConnectionRequest; CompleteConnect or Accept
  HRESULT st = ND_PENDING;
  bool second = false;  // `done` is in use
};

bool flood_end(Side* s, IND2CompletionQueue* cq, FloodEnd* e) {
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateConnector(IID_IND2Connector, s->file, &obj), ND_SUCCESS);
  e->conn = static_cast<IND2Connector*>(obj);
  CHECK_ST(s->adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, e, 1, 1, 1, 1, 0, &obj), ND_SUCCESS);
  e->qp = static_cast<IND2QueuePair*>(obj);
  return e->conn != nullptr && e->qp != nullptr;
}

// Polls an overlapped request until it ends (kWaitMs at most).
HRESULT flood_wait(IND2Overlapped* obj, OVERLAPPED* o) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  HRESULT hr = obj->GetOverlappedResult(o, FALSE);
  while (hr == ND_PENDING && Clock::now() < deadline) {
    Sleep(1);
    hr = obj->GetOverlappedResult(o, FALSE);
  }
  return hr;
}

void case_connect_flood(Side* s, int n, bool listening) {
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s->file, 8 * n, 0, 0, &obj), ND_SUCCESS);
  auto* cq = static_cast<IND2CompletionQueue*>(obj);
  if (cq == nullptr) return;
  IND2Listener* l = nullptr;
  sockaddr_in dest = loopback(free_port());
  if (listening) {
    CHECK_ST(s->adapter->CreateListener(IID_IND2Listener, s->file, &obj), ND_SUCCESS);
    l = static_cast<IND2Listener*>(obj);
    sockaddr_in a = loopback(0);
    ULONG cb = sizeof a;
    if (l == nullptr || !CHECK_ST(l->Bind(sa(a), sizeof a), ND_SUCCESS) || !CHECK_ST(l->Listen(8), ND_SUCCESS) ||
        !CHECK_ST(l->GetLocalAddress(reinterpret_cast<sockaddr*>(&dest), &cb), ND_SUCCESS)) {
      release(l);
      release(cq);
      return;
    }
  }
  std::vector<FloodEnd> clients(n);
  std::vector<FloodEnd*> servers;
  bool made = true;
  for (auto& c : clients) made = made && flood_end(s, cq, &c);
  const auto t0 = Clock::now();
  for (auto& c : clients) {
    if (!made) break;
    CHECK_ST(c.conn->Connect(c.qp, sa(dest), sizeof dest, 0, 0, nullptr, 0, &c.op), ND_PENDING);
  }
  int resolved = 0, connected = 0, refused = 0;
  FloodEnd* next = nullptr;
  const auto deadline = t0 + std::chrono::seconds(60);
  while (made && resolved < n && Clock::now() < deadline) {
    if (l != nullptr && next == nullptr) {
      next = new FloodEnd;
      if (!flood_end(s, cq, next)) break;
      CHECK_ST(l->GetConnectionRequest(next->conn, &next->op), ND_PENDING);
    }
    if (next != nullptr && l->GetOverlappedResult(&next->op, FALSE) == ND_SUCCESS) {
      const HRESULT a = next->conn->Accept(next->qp, 0, 0, nullptr, 0, &next->done);
      CHECK(a == ND_PENDING || a == ND_SUCCESS);
      servers.push_back(next);
      next = nullptr;
    }
    for (auto& c : clients) {
      if (c.st != ND_PENDING || (c.st = c.conn->GetOverlappedResult(&c.op, FALSE)) == ND_PENDING) continue;
      ++resolved;
      if (c.st == ND_SUCCESS) {
        ++connected;
        const HRESULT cc = c.conn->CompleteConnect(&c.done);
        CHECK(cc == ND_PENDING || cc == ND_SUCCESS);
        c.second = true;
      } else if (CHECK_ST(c.st, ND_CONNECTION_REFUSED)) {
        ++refused;
      }
    }
    Sleep(1);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(resolved == n);
  CHECK(connected + refused == n);
  CHECK(listening ? connected >= 1 : connected == 0);
  CHECK(static_cast<int>(servers.size()) == connected);
  for (auto& c : clients) {
    if (c.second) CHECK_ST(flood_wait(c.conn, &c.done), ND_SUCCESS);
  }
  for (FloodEnd* e : servers) CHECK_ST(flood_wait(e->conn, &e->done), ND_SUCCESS);
  std::printf("  %d Connects %s: %d connected, %d refused, all done in %.2f s\n", n,
              listening ? "to backlog 8" : "to a closed port", connected, refused, secs);
  if (next != nullptr) servers.push_back(next);
  if (l != nullptr) l->CancelOverlappedRequests();
  for (FloodEnd* e : servers) {
    release(e->conn);
    release(e->qp);
    delete e;
  }
  for (auto& c : clients) {
    release(c.conn);
    release(c.qp);
  }
  release(l);
  release(cq);
}

// CreateConnector with every connect place taken (docs/nd2.md "Connect flood"): 256 Connects to a TCP listener that
// never answers MPA fill the adapter's places (16 running to that destination, 240 waiting for a slot). A program
// like this one, which loads the DLL, then gets its connector once a place frees: the call waits (here on a second
// thread) until a running Connect is cancelled, and succeeds. Asked through INDConnectAdmission (as the addon asks),
// the adapter refuses at once instead.
void case_connector_admission(Side* s) {
  constexpr int kPlaces = 256;  // binding/soft/cm/connect_gate.h: kActive + kWaiting
  SOCKET silent = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  sockaddr_in dest = loopback(0);
  int len = sizeof dest;
  if (!CHECK(bind(silent, reinterpret_cast<sockaddr*>(&dest), sizeof dest) == 0) ||
      !CHECK(listen(silent, SOMAXCONN) == 0) ||
      !CHECK(getsockname(silent, reinterpret_cast<sockaddr*>(&dest), &len) == 0)) {
    closesocket(silent);
    return;
  }
  void* obj = nullptr;
  CHECK_ST(s->adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s->file, 4 * kPlaces, 0, 0, &obj), ND_SUCCESS);
  auto* cq = static_cast<IND2CompletionQueue*>(obj);
  std::vector<FloodEnd> ends(kPlaces);
  bool made = cq != nullptr;
  for (auto& e : ends) made = made && flood_end(s, cq, &e);
  for (auto& e : ends) {
    if (!made) break;
    made = CHECK_ST(e.conn->Connect(e.qp, sa(dest), sizeof dest, 0, 0, nullptr, 0, &e.op), ND_PENDING);
  }
  trace("places taken");
  IND2Connector* late = nullptr;
  if (made) {
    // Asked to refuse: at once.
    INDConnectAdmission* admission = nullptr;
    CHECK_ST(s->adapter->QueryInterface(IID_INDConnectAdmission, reinterpret_cast<void**>(&admission)), S_OK);
    if (admission != nullptr) {
      CHECK_ST(admission->SetCreateConnectorWait(FALSE), ND_SUCCESS);
      const auto t = Clock::now();
      CHECK_ST(s->adapter->CreateConnector(IID_IND2Connector, s->file, &obj), ND_INSUFFICIENT_RESOURCES);
      CHECK(Clock::now() - t < std::chrono::milliseconds(1000));
      CHECK_ST(admission->SetCreateConnectorWait(TRUE), ND_SUCCESS);
      admission->Release();
    }
    // By default: waits for a place.
    struct Call {
      IND2Adapter* adapter;
      HANDLE file;
      void* conn = nullptr;
      HRESULT hr = ND_PENDING;
    } call{s->adapter, s->file};
    HANDLE th = CreateThread(
        nullptr, 0,
        [](void* p) -> DWORD {
          auto* c = static_cast<Call*>(p);
          c->hr = c->adapter->CreateConnector(IID_IND2Connector, c->file, &c->conn);
          return 0;
        },
        &call, 0, nullptr);
    if (CHECK(th != nullptr)) {
      CHECK(WaitForSingleObject(th, 500) == WAIT_TIMEOUT);  // every place still taken: it waits
      trace("cancelling a running Connect");
      CHECK_ST(ends[0].conn->CancelOverlappedRequests(), ND_SUCCESS);  // the first 16 run: its place frees
      CHECK(WaitForSingleObject(th, kWaitMs) == WAIT_OBJECT_0);
      CloseHandle(th);
      CHECK_ST(call.hr, ND_SUCCESS);
      late = static_cast<IND2Connector*>(call.conn);
      CHECK(late != nullptr);
      CHECK_ST(flood_wait(ends[0].conn, &ends[0].op), ND_CANCELED);
    }
  }
  release(late);
  for (auto& e : ends) {
    if (e.conn != nullptr) e.conn->CancelOverlappedRequests();
    release(e.conn);
    release(e.qp);
  }
  release(cq);
  closesocket(silent);
}

// Register/Deregister in a tight loop, either completion style: every request ends ND_SUCCESS, a synchronous
// one leaves its OVERLAPPED saying so and posts nothing. Prints the rate.
void case_mr_loop(Side* s, int n) {
  IND2MemoryRegion* mr = new_mr(s);
  if (mr == nullptr) return;
  std::vector<char> mem(64 * 1024);
  int inline_done = 0;
  s->check_no_packet = false;  // once at the end: a stray packet would still be queued then
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    OVERLAPPED o;
    const SIZE_T len = 4096 + (i % 15) * 4096;
    HRESULT hr = mr->Register(mem.data() + (i % 7) * 64, len, ND_MR_FLAG_ALLOW_LOCAL_WRITE, s->ov(&o));
    if (hr == ND_SUCCESS) {
      ++inline_done;
      if (!CHECK_ST(mr->GetOverlappedResult(&o, FALSE), ND_SUCCESS)) break;
    }
    if (!CHECK_ST(s->finish(mr, &o, hr), ND_SUCCESS)) break;
    CHECK(mr->GetLocalToken() != 0);
    hr = mr->Deregister(s->ov(&o));
    if (hr == ND_SUCCESS) ++inline_done;
    if (!CHECK_ST(s->finish(mr, &o, hr), ND_SUCCESS)) break;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("  %d Register+Deregister (%s): %.0f pairs/s, %d of %d requests done inline\n", n, s->name,
              n / secs, inline_done, 2 * n);
  s->check_no_packet = true;
  OVERLAPPED o;
  CHECK_ST(mr->Deregister(s->ov(&o)), ND_INVALID_DEVICE_STATE);  // nothing registered: fails at once
  CHECK(s->no_packet());
  mr->Release();
}

template <typename F> void run_case(const char* name, F f) {
  g_test = name;
  const int failed = g_failed;
  const auto t0 = Clock::now();
  g_case_start = t0;
  f();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("%-36s %s %8.1f ms\n", name, g_failed == failed ? "ok  " : "FAIL", ms);
  std::fflush(stdout);
}

}  // namespace

int wmain(int argc, wchar_t** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc < 2) {
    std::printf("usage: conformance.exe <path of netdirect_soft.dll>\n");
    return 2;
  }
  g_trace = GetEnvironmentVariableW(L"NETDIRECT_CONFORMANCE_TRACE", nullptr, 0) != 0;
  WSADATA wsa;
  WSAStartup(MAKEWORD(2, 2), &wsa);
  const auto t0 = Clock::now();
  Provider p = load(argv[1]);
  if (p.nd == nullptr) return finish();
  Side port, block;
  run_case("discovery", [&] { case_discovery(p); });
  if (open_side(p, &port, "port", true) && open_side(p, &block, "block", false)) {
    run_case("overlapped file modes", [&] { case_file_modes(&port); });
    run_case("notify cancel (port)", [&] { case_notify_cancel(&port); });
    run_case("notify cancel (block)", [&] { case_notify_cancel(&block); });
    run_case("connect refused (port)", [&] { case_refused(&port); });
    run_case("connect refused (block)", [&] { case_refused(&block); });
    run_case("connect to 0.0.0.0 and to port 0", [&] { case_no_destination(&port); });
    run_case("connect to itself (port)", [&] { case_refused_self(&port); });
    run_case("reject (port server)", [&] { case_reject(&port, &block); });
    run_case("reject (block server)", [&] { case_reject(&block, &port); });
    run_case("initiator rejects after Connect (port server)", [&] { case_decline(&port, &block, false); });
    run_case("initiator releases its connector (block server)", [&] { case_decline(&block, &port, true); });
    run_case("connect/data/disconnect x12", [&] { case_cycles(&port, &block, 12); });
    run_case("notify with a result queued (port)", [&] { case_notify_queued(&port, &block); });
    run_case("notify with a result queued (block)", [&] { case_notify_queued(&block, &port); });
    run_case("explicit ports in use", [&] { case_port_in_use(&port); });
    run_case("127.0.0.2 to 127.0.0.3", [&] { case_loopback_range(p, &port, &block); });
    run_case("write access violation", [&] { case_access_violation(&port, &block, true); });
    run_case("read access violation", [&] { case_access_violation(&block, &port, false); });
    run_case("connect flood (backlog 8)", [&] { case_connect_flood(&block, 200, true); });
    run_case("connect flood (closed port)", [&] { case_connect_flood(&block, 200, false); });
    run_case("CreateConnector with every place taken", [&] { case_connector_admission(&block); });
    run_case("register loop (port)", [&] { case_mr_loop(&port, 1000); });
    run_case("register loop (block)", [&] { case_mr_loop(&block, 1000); });
  }
  // A third adapter whose file is bound to its port with INDCompletionPort (what the addon does): the same
  // requests, their packets posted by the provider instead of carried by the pipe.
  Side posted;
  if (port.adapter != nullptr && block.adapter != nullptr && open_side(p, &posted, "posted", true)) {
    run_case("bind the port (INDCompletionPort)", [&] { case_bind_port(p, &posted, &port); });
    run_case("connect refused (posted)", [&] { case_refused(&posted); });
    run_case("connect/data/disconnect x4 (posted)", [&] { case_cycles(&posted, &block, 4); });
    run_case("notify with a result queued (posted)", [&] { case_notify_queued(&posted, &block); });
    run_case("register loop (posted)", [&] { case_mr_loop(&posted, 1000); });
  }
  close_side(&port);
  close_side(&block);
  close_side(&posted);
  release(p.nd);
  g_test = "unload";
  // Every object released: the DLL may be unloaded once the provider's threads let go of theirs (a closing
  // connection finishes on the engine thread), within the "does not hang" bound.
  const auto unload_start = Clock::now();
  HRESULT unload = p.can_unload();
  while (unload != S_OK && Clock::now() - unload_start < std::chrono::milliseconds(kWaitMs)) {
    Sleep(10);
    unload = p.can_unload();
  }
  CHECK_ST(unload, S_OK);
  std::printf("DllCanUnloadNow S_OK after %.1f ms\n",
              std::chrono::duration<double, std::milli>(Clock::now() - unload_start).count());
  std::printf("conformance: %.1f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
  return finish();
}
