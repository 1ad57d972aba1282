// What any ND v2 provider implemented in this repository needs, whatever moves its data: COM-style reference
// counting and QueryInterface over a fixed interface list (ComObject), recovery of our own implementation from an
// IUnknown* a consumer passed in (from_unknown), and completion of pending overlapped requests (on Windows through
// the overlapped file's carrier pipe, overlapped_win.cc; elsewhere through nd/nd_compat.h's port). The software
// provider (binding/soft/) is built on it; another provider would be too.
#ifndef NETDIRECT_NDKIT_OBJECT_H_
#define NETDIRECT_NDKIT_OBJECT_H_

#include <atomic>
#include <type_traits>

#include "nd/nd2.h"

namespace netdirect::ndkit {

// Number of live provider objects; a provider DLL (Windows, DllCanUnloadNow) stays loaded while > 0.
std::atomic<long>& live_objects();

template <typename Iface> const GUID& iid_of();
template <> inline const GUID& iid_of<IND2Provider>() { return IID_IND2Provider; }
template <> inline const GUID& iid_of<IND2Adapter>() { return IID_IND2Adapter; }
template <> inline const GUID& iid_of<IND2CompletionQueue>() { return IID_IND2CompletionQueue; }
template <> inline const GUID& iid_of<IND2SharedReceiveQueue>() { return IID_IND2SharedReceiveQueue; }
template <> inline const GUID& iid_of<IND2MemoryRegion>() { return IID_IND2MemoryRegion; }
template <> inline const GUID& iid_of<IND2MemoryWindow>() { return IID_IND2MemoryWindow; }
template <> inline const GUID& iid_of<IND2QueuePair>() { return IID_IND2QueuePair; }
template <> inline const GUID& iid_of<IND2Connector>() { return IID_IND2Connector; }
template <> inline const GUID& iid_of<IND2Listener>() { return IID_IND2Listener; }

// Implements IUnknown for a class deriving from one ND interface `Iface` (which may derive from
// IND2Overlapped). QueryInterface answers IID_IUnknown, the interface's own IID, `Marker` and, for overlapped
// interfaces, IID_IND2Overlapped. `Marker` is a private interface id answered only by one provider's objects: it
// lets a method taking IUnknown* refuse objects of another provider (or of another kind) instead of casting
// blindly. Objects start with one reference owned by the creator.
template <typename Iface, const GUID& Marker>
class ComObject : public Iface {
 public:
  ComObject() { live_objects().fetch_add(1); }
  ComObject(const ComObject&) = delete;
  ComObject& operator=(const ComObject&) = delete;

  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override {
    if (ppv == nullptr) return E_POINTER;
    if (IsEqualGUID(riid, IID_IUnknown) || IsEqualGUID(riid, iid()) || IsEqualGUID(riid, Marker) ||
        (is_overlapped() && IsEqualGUID(riid, IID_IND2Overlapped))) {
      this->AddRef();
      *ppv = static_cast<Iface*>(this);
      return S_OK;
    }
    *ppv = nullptr;
    return E_NOINTERFACE;
  }
  ULONG ND_CALL AddRef() override { return static_cast<ULONG>(refs_.fetch_add(1) + 1); }
  ULONG ND_CALL Release() override {
    long left = refs_.fetch_sub(1) - 1;
    if (left == 0) delete this;
    return static_cast<ULONG>(left);
  }

  static const GUID& iid() { return iid_of<Iface>(); }
  static constexpr bool is_overlapped() { return std::is_base_of<IND2Overlapped, Iface>::value; }

 protected:
  // Declared after every interface method, so the ND vtable slots are unaffected.
  virtual ~ComObject() { live_objects().fetch_sub(1); }

 private:
  std::atomic<long> refs_{1};
};

// Recovers our implementation from an IUnknown* a consumer passed in (a QP, CQ, MR, MW, SRQ, connector),
// refusing pointers that are not ours or not of that kind: the object must answer QueryInterface for
// `Iface` and for the provider's `Marker` with the same pointer. Each Iface has exactly one Impl in a
// provider. Returns nullptr otherwise; the caller does not get a reference.
template <typename Impl, typename Iface, const GUID& Marker>
Impl* from_unknown(IUnknown* unk) {
  if (unk == nullptr) return nullptr;
  VOID* as_iface = nullptr;
  VOID* as_ours = nullptr;
  if (FAILED(unk->QueryInterface(iid_of<Iface>(), &as_iface))) return nullptr;
  static_cast<IUnknown*>(as_iface)->Release();
  if (FAILED(unk->QueryInterface(Marker, &as_ours))) return nullptr;
  static_cast<IUnknown*>(as_ours)->Release();
  if (as_iface != as_ours) return nullptr;
  return static_cast<Impl*>(static_cast<Iface*>(as_iface));
}

// Completes an overlapped request that returned ND_PENDING: stores status/bytes in the OVERLAPPED and
// notifies the consumer (event and/or completion port of the overlapped file). The platform seam: on
// non-Windows the nd_compat port, on Windows the carrier pipe of overlapped_win.cc.
void complete_overlapped(HANDLE overlapped_file, OVERLAPPED* ov, HRESULT status, ULONG bytes = 0);

// While one of these is open on a thread, complete_overlapped() on that thread only records the completion; the
// outermost scope delivers them in order when it closes. The engine opens one around each round, so the
// notification that wakes a consumer leaves after the round has released the object locks the consumer's next
// call takes (the CQ's for GetResults, the QP's for the next post): a woken consumer never waits for the thread
// that woke it. Windows only, where a delivery is several system calls (the carrier pipe, overlapped_win.cc);
// elsewhere a delivery is a queue push and the scope does nothing.
class DeferCompletions {
 public:
#ifdef _WIN32
  DeferCompletions();
  ~DeferCompletions();
#else
  DeferCompletions() {}  // nothing to defer, and inline: no call on the engine's round
  ~DeferCompletions() {}  // (user-provided, so a scope variable is not "unused")
#endif
  DeferCompletions(const DeferCompletions&) = delete;
  DeferCompletions& operator=(const DeferCompletions&) = delete;
};

// IND2Adapter::CreateOverlappedFile. `owner` is the adapter: the provider's side of its files lives until
// release_overlapped_files(owner) in the adapter's destructor (children hold their adapter), so a request completed
// after the consumer closed its handle still finds the file (Windows keeps a file object while a driver holds it).
// Windows (overlapped_win.cc): one end of a private named pipe, which the consumer associates with its IOCP; a
// completion is a 1-byte pipe read issued with the consumer's OVERLAPPED. Elsewhere: the nd_compat file.
HANDLE create_overlapped_file(const void* owner);
void release_overlapped_files(const void* owner);
#ifdef _WIN32
// INDCompletionPort::BindCompletionPort (nd/netdirect_ext.h) for a file `owner` made: its completions are posted to
// `port` with `key` instead of going through the carrier pipe (overlapped_win.cc).
HRESULT bind_overlapped_port(const void* owner, HANDLE overlapped_file, HANDLE port, ULONG_PTR key);
#endif

// Marks an OVERLAPPED as in progress before returning ND_PENDING.
inline void mark_pending(OVERLAPPED* ov) {
  reinterpret_cast<std::atomic<ULONG_PTR>*>(&ov->Internal)
      ->store(static_cast<ULONG_PTR>(static_cast<ULONG>(ND_PENDING)));
}

// A request that finished inside the call (ND_SUCCESS or a failure, so no notification follows: skip-on-success):
// the OVERLAPPED still says how it ended, so GetOverlappedResult answers at once with that status instead of
// ND_PENDING forever (the ND SDK's ndmrlat waits on it after a synchronous Deregister).
inline void mark_done(OVERLAPPED* ov, HRESULT status) {
  ov->InternalHigh = 0;
  reinterpret_cast<std::atomic<ULONG_PTR>*>(&ov->Internal)->store(static_cast<ULONG_PTR>(static_cast<ULONG>(status)));
}

// A request that succeeded inside the call (Register, Deregister), reported the way a kernel provider whose driver
// pends the IRP reports it. On Windows: ND_PENDING, then its completion through the overlapped file at once, so a
// consumer that always waits on its port or event for these calls (the SDK's ndmrlat and ndmrrate do) gets its
// notification (docs/nd2.md, 7.2). Elsewhere: ND_SUCCESS with the OVERLAPPED complete (skip-on-success).
inline HRESULT succeed_overlapped(HANDLE overlapped_file, OVERLAPPED* ov) {
#ifdef _WIN32
  mark_pending(ov);
  complete_overlapped(overlapped_file, ov, ND_SUCCESS);
  return ND_PENDING;
#else
  (void)overlapped_file;
  mark_done(ov, ND_SUCCESS);
  return ND_SUCCESS;
#endif
}

// IND2Overlapped::GetOverlappedResult for requests completed through complete_overlapped: the stored
// status, or ND_PENDING / a wait on ov->hEvent when bWait.
HRESULT overlapped_result(OVERLAPPED* ov, BOOL wait);

}  // namespace netdirect::ndkit

#endif  // NETDIRECT_NDKIT_OBJECT_H_
