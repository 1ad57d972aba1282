// The small part of Win32 that ND v2 needs, for non-Windows builds: base types with Windows sizes (LLP64),
// GUID, IUnknown, OVERLAPPED, SOCKET_ADDRESS(_LIST), and a portable I/O completion port with the Win32
// names and semantics (CreateIoCompletionPort, GetQueuedCompletionStatus(Ex), PostQueuedCompletionStatus,
// events, CloseHandle). Consumers are written once against these names; on Windows the real ones are used.
// Providers complete a pending request with NdCompatCompleteOverlapped (on Windows a provider's driver does).
#pragma once
#ifdef _WIN32
#error "nd_compat.h is for non-Windows builds; nd2.h includes the Windows SDK instead"
#endif

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>

typedef void VOID;
typedef int INT;
typedef int32_t LONG;
typedef int32_t HRESULT;
typedef uint32_t ULONG;  // Windows ULONG is 32-bit even on 64-bit (LLP64)
typedef uint32_t DWORD;
typedef uint16_t USHORT;
typedef uint16_t UINT16;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uint64_t ULONG64;
typedef uint8_t BYTE;
typedef int BOOL;
typedef size_t SIZE_T;
typedef uintptr_t ULONG_PTR;
typedef uintptr_t KAFFINITY;
typedef void* HANDLE;
typedef DWORD* LPDWORD;
typedef ULONG* PULONG;
typedef ULONG_PTR* PULONG_PTR;

#ifndef TRUE
#define TRUE 1
#define FALSE 0
#endif

#define ND_CALL

constexpr HRESULT S_OK = 0;
constexpr HRESULT S_FALSE = 1;
constexpr HRESULT E_NOINTERFACE = static_cast<HRESULT>(0x80004002u);
constexpr HRESULT E_POINTER = static_cast<HRESULT>(0x80004003u);
constexpr HRESULT E_OUTOFMEMORY = static_cast<HRESULT>(0x8007000Eu);
constexpr HRESULT CLASS_E_CLASSNOTAVAILABLE = static_cast<HRESULT>(0x80040111u);
inline constexpr bool SUCCEEDED(HRESULT hr) { return hr >= 0; }
inline constexpr bool FAILED(HRESULT hr) { return hr < 0; }

typedef struct _GUID {
  uint32_t Data1;
  uint16_t Data2;
  uint16_t Data3;
  uint8_t Data4[8];
} GUID;
typedef GUID IID;
typedef GUID CLSID;
typedef const GUID& REFIID;
typedef const GUID& REFCLSID;
inline bool IsEqualGUID(const GUID& a, const GUID& b) { return std::memcmp(&a, &b, sizeof(GUID)) == 0; }
inline bool operator==(const GUID& a, const GUID& b) { return IsEqualGUID(a, b); }
inline bool operator!=(const GUID& a, const GUID& b) { return !IsEqualGUID(a, b); }

inline const GUID IID_IUnknown = {0x00000000, 0x0000, 0x0000, {0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}};
inline const GUID IID_IClassFactory = {0x00000001, 0x0000, 0x0000, {0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}};

struct IUnknown {
  virtual HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppvObject) = 0;
  virtual ULONG ND_CALL AddRef() = 0;
  virtual ULONG ND_CALL Release() = 0;
};

struct IClassFactory : public IUnknown {
  virtual HRESULT ND_CALL CreateInstance(IUnknown* pUnkOuter, REFIID riid, VOID** ppvObject) = 0;
  virtual HRESULT ND_CALL LockServer(BOOL fLock) = 0;
};

typedef struct _OVERLAPPED {
  ULONG_PTR Internal;      // ND: the request's status while/after it runs
  ULONG_PTR InternalHigh;  // bytes transferred
  union {
    struct {
      DWORD Offset;
      DWORD OffsetHigh;
    };
    VOID* Pointer;
  };
  HANDLE hEvent;
} OVERLAPPED, *LPOVERLAPPED;

typedef struct _OVERLAPPED_ENTRY {
  ULONG_PTR lpCompletionKey;
  LPOVERLAPPED lpOverlapped;
  ULONG_PTR Internal;
  DWORD dwNumberOfBytesTransferred;
} OVERLAPPED_ENTRY, *LPOVERLAPPED_ENTRY;

typedef struct sockaddr SOCKADDR;
typedef struct sockaddr* LPSOCKADDR;
typedef struct sockaddr_in SOCKADDR_IN;
typedef struct sockaddr_in6 SOCKADDR_IN6;

typedef struct _SOCKET_ADDRESS {
  LPSOCKADDR lpSockaddr;
  INT iSockaddrLength;
} SOCKET_ADDRESS;

typedef struct _SOCKET_ADDRESS_LIST {
  INT iAddressCount;
  SOCKET_ADDRESS Address[1];
} SOCKET_ADDRESS_LIST;

#define INVALID_HANDLE_VALUE (reinterpret_cast<HANDLE>(~uintptr_t(0)))
constexpr DWORD INFINITE = 0xFFFFFFFFu;
constexpr DWORD WAIT_OBJECT_0 = 0;
constexpr DWORD WAIT_TIMEOUT = 258;
constexpr DWORD WAIT_FAILED = 0xFFFFFFFFu;
constexpr DWORD ERROR_INVALID_HANDLE = 6;
constexpr DWORD ERROR_NOT_ENOUGH_MEMORY = 8;
constexpr DWORD ERROR_INVALID_PARAMETER = 87;
constexpr DWORD ERROR_ABANDONED_WAIT_0 = 735;

namespace nd_compat {

inline DWORD& last_error() {
  static thread_local DWORD e = 0;
  return e;
}

enum class Kind : uint32_t { kPort = 0x54524f50, kFile = 0x454c4946, kEvent = 0x544e5645, kDead = 0 };

struct Object {
  std::atomic<Kind> kind;
  explicit Object(Kind k) : kind(k) {}
};

struct Port : Object {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<OVERLAPPED_ENTRY> queue;
  std::atomic<int> refs{1};  // the port handle, one per associated file, one per completion posting to it
  bool closed = false;
  // Readable while packets are queued, once NdCompatPortDescriptor asked for it (an event loop watches it
  // instead of a thread blocking in GetQueuedCompletionStatus). Written on empty -> non-empty, drained when a
  // dequeue finds the queue empty (guarded by mu).
  int fd = -1;
  bool fd_signaled = false;  // fd holds an unread wake-up
  Port() : Object(Kind::kPort) {}
  ~Port() {
    if (fd >= 0) ::close(fd);
  }
  void unref() {
    if (refs.fetch_sub(1) == 1) {
      kind = Kind::kDead;
      delete this;
    }
  }
  void signal_fd_locked() {
    if (fd_signaled) return;
    uint64_t one = 1;
    ssize_t r = ::write(fd, &one, sizeof one);
    (void)r;  // EAGAIN: already readable
    fd_signaled = true;
  }
  void drain_fd_locked() {
    if (!fd_signaled) return;
    uint64_t v;
    ssize_t r = ::read(fd, &v, sizeof v);
    (void)r;
    fd_signaled = false;
  }
};

// An overlapped file lives, as a Windows file object does, while anything refers to it: the consumer's handle and
// the provider that made it (NdCompatReleaseOverlappedFile), so a request the provider completes after the consumer
// closed its handle finds the file, not freed memory. Closing the handle detaches the port (no packet is queued
// after that); mu orders that against a completion reading the port.
struct File : Object {
  std::mutex mu;
  Port* port = nullptr;         // referenced while associated (guarded by mu)
  ULONG_PTR key = 0;
  bool handle_closed = false;   // guarded by mu
  std::atomic<int> refs{2};     // the consumer's handle and the provider's reference
  File() : Object(Kind::kFile) {}
  void unref() {
    if (refs.fetch_sub(1) == 1) {
      kind = Kind::kDead;
      delete this;
    }
  }
  // The port a completion goes to, referenced (the caller unrefs it), or nullptr.
  Port* port_ref(ULONG_PTR* key_out) {
    std::lock_guard<std::mutex> lock(mu);
    if (port != nullptr) port->refs.fetch_add(1);
    *key_out = key;
    return port;
  }
};

struct Event : Object {
  std::mutex mu;
  std::condition_variable cv;
  bool signaled;
  bool manual_reset;
  Event(bool manual, bool initial) : Object(Kind::kEvent), signaled(initial), manual_reset(manual) {}
};

template <typename T>
inline T* as(HANDLE h, Kind k) {
  if (h == nullptr || h == INVALID_HANDLE_VALUE) return nullptr;
  auto* o = static_cast<Object*>(h);
  return o->kind.load() == k ? static_cast<T*>(o) : nullptr;
}

// The port a thread is about to drain itself (NdCompatPortDraining): its own posts need no wake-up.
inline Port*& draining_port() {
  static thread_local Port* p = nullptr;
  return p;
}

// The caller holds a reference to p (its handle, or Port::refs), so the notify after the unlock is safe.
inline void post(Port* p, const OVERLAPPED_ENTRY& e) {
  {
    std::lock_guard<std::mutex> lock(p->mu);
    p->queue.push_back(e);
    if (p->fd >= 0 && p->queue.size() == 1 && draining_port() != p) p->signal_fd_locked();
  }
  p->cv.notify_one();
}

// Notifies under the lock: a waiter that sees the event signalled may close it at once (a synchronous wait on a
// stack or heap event), so nothing may touch the event after the lock is released.
inline void signal(Event* ev) {
  std::lock_guard<std::mutex> lock(ev->mu);
  ev->signaled = true;
  if (ev->manual_reset)
    ev->cv.notify_all();
  else
    ev->cv.notify_one();
}

}  // namespace nd_compat

inline DWORD GetLastError() { return nd_compat::last_error(); }
inline void SetLastError(DWORD e) { nd_compat::last_error() = e; }

// file == INVALID_HANDLE_VALUE creates a port; otherwise associates the overlapped file with existingPort.
inline HANDLE CreateIoCompletionPort(HANDLE file, HANDLE existingPort, ULONG_PTR key, DWORD /*threads*/) {
  using namespace nd_compat;
  if (file == INVALID_HANDLE_VALUE) {
    if (existingPort != nullptr) {
      SetLastError(ERROR_INVALID_PARAMETER);
      return nullptr;
    }
    return static_cast<Object*>(new Port());
  }
  File* f = as<File>(file, Kind::kFile);
  Port* p = as<Port>(existingPort, Kind::kPort);
  if (f == nullptr || p == nullptr) {
    SetLastError(ERROR_INVALID_HANDLE);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(f->mu);
  if (f->port != nullptr || f->handle_closed) {  // a file belongs to one port, as on Windows
    SetLastError(f->handle_closed ? ERROR_INVALID_HANDLE : ERROR_INVALID_PARAMETER);
    return nullptr;
  }
  p->refs.fetch_add(1);
  f->port = p;
  f->key = key;  // associate before any request is issued on the file, as Windows requires
  return existingPort;
}

inline BOOL PostQueuedCompletionStatus(HANDLE port, DWORD bytes, ULONG_PTR key, LPOVERLAPPED ov) {
  using namespace nd_compat;
  Port* p = as<Port>(port, Kind::kPort);
  if (p == nullptr) {
    SetLastError(ERROR_INVALID_HANDLE);
    return FALSE;
  }
  post(p, OVERLAPPED_ENTRY{key, ov, 0, bytes});
  return TRUE;
}

// Dequeues up to `count` packets, waiting up to `ms` for the first. FALSE + WAIT_TIMEOUT when none came.
inline BOOL GetQueuedCompletionStatusEx(HANDLE port, LPOVERLAPPED_ENTRY entries, ULONG count, PULONG removed,
                                        DWORD ms, BOOL /*alertable*/) {
  using namespace nd_compat;
  Port* p = as<Port>(port, Kind::kPort);
  *removed = 0;
  if (p == nullptr || count == 0) {
    SetLastError(p == nullptr ? ERROR_INVALID_HANDLE : ERROR_INVALID_PARAMETER);
    return FALSE;
  }
  std::unique_lock<std::mutex> lock(p->mu);
  auto ready = [p] { return !p->queue.empty() || p->closed; };
  if (ms == INFINITE) {
    p->cv.wait(lock, ready);
  } else if (ms == 0 ? !ready() : !p->cv.wait_for(lock, std::chrono::milliseconds(ms), ready)) {
    if (p->fd >= 0) p->drain_fd_locked();
    SetLastError(WAIT_TIMEOUT);
    return FALSE;
  }
  if (p->queue.empty()) {
    SetLastError(ERROR_ABANDONED_WAIT_0);
    return FALSE;
  }
  ULONG n = 0;
  while (n < count && !p->queue.empty()) {
    entries[n++] = p->queue.front();
    p->queue.pop_front();
  }
  if (p->fd >= 0 && p->queue.empty()) p->drain_fd_locked();
  *removed = n;
  return TRUE;
}

// netdirect's addition: the calling thread will dequeue from `port` (or nullptr: no port) before it next waits,
// so packets it posts meanwhile need not signal the port's descriptor (two system calls per packet saved on the
// event-loop path, which runs the provider's progress and then drains the port on the same thread).
inline void NdCompatPortDraining(HANDLE port) {
  nd_compat::draining_port() = nd_compat::as<nd_compat::Port>(port, nd_compat::Kind::kPort);
}

// netdirect's addition (no Win32 counterpart): a descriptor that is readable while the port has packets, for a
// consumer that waits in an event loop rather than in GetQueuedCompletionStatus. -1 if it cannot be made.
inline int NdCompatPortDescriptor(HANDLE port) {
  using namespace nd_compat;
  Port* p = as<Port>(port, Kind::kPort);
  if (p == nullptr) return -1;
  std::lock_guard<std::mutex> lock(p->mu);
  if (p->fd < 0) {
    p->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->fd >= 0 && !p->queue.empty()) p->signal_fd_locked();
  }
  return p->fd;
}

// As on Windows: FALSE with *ov != nullptr when the dequeued request failed (its status is in ov->Internal).
inline BOOL GetQueuedCompletionStatus(HANDLE port, LPDWORD bytes, PULONG_PTR key, LPOVERLAPPED* ov, DWORD ms) {
  OVERLAPPED_ENTRY e;
  ULONG n = 0;
  *ov = nullptr;
  if (!GetQueuedCompletionStatusEx(port, &e, 1, &n, ms, FALSE)) return FALSE;
  *bytes = e.dwNumberOfBytesTransferred;
  *key = e.lpCompletionKey;
  *ov = e.lpOverlapped;
  if (e.lpOverlapped != nullptr && FAILED(static_cast<HRESULT>(e.lpOverlapped->Internal))) {
    SetLastError(static_cast<DWORD>(e.lpOverlapped->Internal));
    return FALSE;
  }
  return TRUE;
}

inline HANDLE CreateEventW(void* /*security*/, BOOL manualReset, BOOL initialState, const wchar_t* /*name*/) {
  return static_cast<nd_compat::Object*>(new nd_compat::Event(manualReset != FALSE, initialState != FALSE));
}

inline BOOL SetEvent(HANDLE h) {
  auto* ev = nd_compat::as<nd_compat::Event>(h, nd_compat::Kind::kEvent);
  if (ev == nullptr) return FALSE;
  nd_compat::signal(ev);
  return TRUE;
}

inline BOOL ResetEvent(HANDLE h) {
  auto* ev = nd_compat::as<nd_compat::Event>(h, nd_compat::Kind::kEvent);
  if (ev == nullptr) return FALSE;
  std::lock_guard<std::mutex> lock(ev->mu);
  ev->signaled = false;
  return TRUE;
}

inline DWORD WaitForSingleObject(HANDLE h, DWORD ms) {
  auto* ev = nd_compat::as<nd_compat::Event>(h, nd_compat::Kind::kEvent);
  if (ev == nullptr) {
    SetLastError(ERROR_INVALID_HANDLE);
    return WAIT_FAILED;
  }
  std::unique_lock<std::mutex> lock(ev->mu);
  auto ready = [ev] { return ev->signaled; };
  if (ms == INFINITE)
    ev->cv.wait(lock, ready);
  else if (!ev->cv.wait_for(lock, std::chrono::milliseconds(ms), ready))
    return WAIT_TIMEOUT;
  if (!ev->manual_reset) ev->signaled = false;
  return WAIT_OBJECT_0;
}

// Closing a port wakes its waiters; the port memory lives until its last associated file is closed too.
inline BOOL CloseHandle(HANDLE h) {
  using namespace nd_compat;
  if (auto* p = as<Port>(h, Kind::kPort)) {
    {
      std::lock_guard<std::mutex> lock(p->mu);
      p->closed = true;
    }
    p->cv.notify_all();
    p->unref();
    return TRUE;
  }
  if (auto* f = as<File>(h, Kind::kFile)) {
    Port* p;
    {
      std::lock_guard<std::mutex> lock(f->mu);
      if (f->handle_closed) {
        SetLastError(ERROR_INVALID_HANDLE);
        return FALSE;
      }
      f->handle_closed = true;
      p = f->port;
      f->port = nullptr;
    }
    if (p != nullptr) p->unref();
    f->unref();
    return TRUE;
  }
  if (auto* ev = as<Event>(h, Kind::kEvent)) {
    ev->kind = Kind::kDead;
    delete ev;
    return TRUE;
  }
  SetLastError(ERROR_INVALID_HANDLE);
  return FALSE;
}

// ---- provider side ----------------------------------------------------------------------------------------

// What IND2Adapter::CreateOverlappedFile returns on non-Windows (skip-on-success semantics are implied). The
// provider keeps a reference until NdCompatReleaseOverlappedFile: it may complete requests on the file until then,
// whether or not the consumer has closed its handle (an adapter releases its files when it goes; its children hold
// it, as on Windows, binding/ndkit/overlapped_win.cc).
inline HANDLE NdCompatCreateOverlappedFile() { return static_cast<nd_compat::Object*>(new nd_compat::File()); }

inline void NdCompatReleaseOverlappedFile(HANDLE file) {
  if (auto* f = nd_compat::as<nd_compat::File>(file, nd_compat::Kind::kFile)) f->unref();
}

// Completes a request that returned ND_PENDING: records status and bytes in the OVERLAPPED, then signals its
// event and/or queues a packet to the port the file is associated with. An hEvent with the low bit set
// suppresses the port packet (the Win32 rule consumers use for synchronous waits).
inline void NdCompatCompleteOverlapped(HANDLE file, OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  using namespace nd_compat;
  const uintptr_t ev_bits = reinterpret_cast<uintptr_t>(ov->hEvent);
  Event* ev = as<Event>(reinterpret_cast<HANDLE>(ev_bits & ~uintptr_t(1)), Kind::kEvent);
  File* f = as<File>(file, Kind::kFile);
  ULONG_PTR key = 0;
  // Referenced: the consumer may close its handles (file, then port) the moment it has dequeued the packet.
  Port* p = (f != nullptr && (ev_bits & 1) == 0) ? f->port_ref(&key) : nullptr;
  ov->InternalHigh = bytes;
  // Publish the status last: GetOverlappedResult(wait=FALSE) polls it.
  reinterpret_cast<std::atomic<ULONG_PTR>*>(&ov->Internal)->store(static_cast<ULONG_PTR>(static_cast<ULONG>(status)));
  if (ev != nullptr) signal(ev);
  if (p != nullptr) {
    post(p, OVERLAPPED_ENTRY{key, ov, 0, bytes});
    p->unref();
  }
}
