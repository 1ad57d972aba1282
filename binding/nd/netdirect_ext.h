// netdirect's optional extension interfaces. Not part of ND v2: a consumer discovers them with
// QueryInterface on an ND object and carries on with plain ND semantics when a provider does not answer
// (as with vendor extensions such as IND2QueuePairsPool, docs/nd2.md §2). The built-in software
// provider implements them; any other provider may.
#pragma once

#include "nd2.h"

// {6E657464-6972-6563-7470-6F6C6C000001}
inline const GUID IID_INDPollingHint = {0x6e657464, 0x6972, 0x6563, {0x74, 0x70, 0x6f, 0x6c, 0x6c, 0x00, 0x00, 0x01}};

// On an IND2CompletionQueue: the consumer tells the provider that the calling thread polls this CQ in a
// loop (GetResults until something arrives). While set, a provider without hardware (or with a progress
// thread of its own) may run its receive progress on the polling thread when the CQ is empty, saving a
// thread wake-up per message. Arming a notification on the CQ (Notify) ends it: the consumer then waits
// instead of polling, and the provider's own progress takes over at once. Purely a hint: results and ordering
// are the same either way. A consumer that asks for the interface marks its polling threads itself; for one that
// never does, the built-in provider infers polling (binding/soft/completion_queue.cc polling_inferred).
struct INDPollingHint : public IUnknown {
  virtual HRESULT ND_CALL SetPollingThread(BOOL polling) = 0;
};

// {6E657464-6972-6563-7470-726F67720001}
inline const GUID IID_INDProgress = {0x6e657464, 0x6972, 0x6563, {0x74, 0x70, 0x72, 0x6f, 0x67, 0x72, 0x00, 0x01}};

// On an IND2Adapter: progress that the consumer's own loop can drive (a provider without hardware has to make
// progress on some thread; this lets it be one the consumer already has). The pattern is libfabric's manual
// progress (fi_trywait + wait on a descriptor + fi_cq_read), and libusb's pollfds driven by an event loop.
//   1. SetExternalDriver(TRUE): the provider stops waking a thread of its own for the adapter.
//   2. The consumer watches GetDescriptor()'s descriptor for readability and waits at most GetNextTimeout().
//   3. When either fires, Progress(): one non-blocking round (read and place input, answer Read Requests,
//      continue blocked sends, run due timers and deferred work). Completions and overlapped results are then
//      delivered as usual: CQ entries, Notify and overlapped completions to the adapter's overlapped file.
//      With ND_PROGRESS_DEFER_TRANSMIT the provider may hold back what the round would transmit (answers to the
//      peer's Read Requests) until Flush(), which the consumer calls once it has handled the completions and
//      before it waits again: requests the consumer posts in between (the application's reply) then leave in
//      the same segment as the held-back answers, as TCP's delayed acknowledgement rides on the reply.
//   4. SetExternalDriver(FALSE) before the consumer stops driving (and before it waits for outstanding
//      overlapped requests to end): the provider's own thread takes over again.
// A consumer that stops calling Progress() stalls the adapter's connections (the peers' TCP flow control holds
// their data back); nothing is lost.
constexpr ULONG ND_PROGRESS_DEFER_TRANSMIT = 0x1;

struct INDProgress : public IUnknown {
  // The file descriptor (POSIX) to watch for readability; ND_NOT_SUPPORTED where there is none (then the
  // provider keeps driving itself and the other methods are not used).
  virtual HRESULT ND_CALL GetDescriptor(UINT64* pDescriptor) = 0;
  virtual HRESULT ND_CALL SetExternalDriver(BOOL external) = 0;
  // *pWork (optional): socket events, tasks and timers handled; 0 means there was nothing to do.
  virtual HRESULT ND_CALL Progress(ULONG flags, ULONG* pWork) = 0;
  // Transmits what Progress(ND_PROGRESS_DEFER_TRANSMIT) held back.
  virtual HRESULT ND_CALL Flush() = 0;
  // Milliseconds until Progress() must run even if the descriptor stays quiet: 0 = at once, INFINITE = never.
  virtual HRESULT ND_CALL GetNextTimeout(DWORD* pMilliseconds) = 0;
};

// {6E657464-6972-6563-7470-726F67720002}
inline const GUID IID_INDProgressDescriptors = {0x6e657464, 0x6972, 0x6563, {0x74, 0x70, 0x72, 0x6f, 0x67, 0x72, 0x00, 0x02}};

// What a consumer of INDProgressDescriptors implements (not a COM object: the provider holds no reference).
// Called on the thread that set it, from inside the provider's calls (Progress, ProgressReady, Flush, a post).
constexpr ULONG ND_PROGRESS_READ = 0x1;
constexpr ULONG ND_PROGRESS_WRITE = 0x2;
constexpr ULONG ND_PROGRESS_HANGUP = 0x4;  // with ND_PROGRESS_READ: the peer closed or the descriptor failed
struct INDProgressWatcher {
  // Watch `descriptor` for `events` (ND_PROGRESS_READ | ND_PROGRESS_WRITE, level-triggered; 0: not now), and
  // pass `token` to ProgressReady when it is ready. A descriptor watched already gets its new events and token.
  virtual void ND_CALL Watch(UINT64 descriptor, VOID* token, ULONG events) = 0;
  // Stop watching `descriptor` before this returns: the provider closes it next.
  virtual void ND_CALL Unwatch(UINT64 descriptor) = 0;

 protected:
  ~INDProgressWatcher() = default;
};

// On an IND2Adapter that offers INDProgress: the descriptors behind GetDescriptor()'s one, for a consumer whose
// loop waits in the OS's readiness API itself (libusb_set_pollfd_notifiers). Watching one descriptor that
// stands for a set (an epoll set in the loop's epoll set) costs a second wait per wake-up, a system call
// through the nested set; watching the connections directly, the loop's wait says which one is ready.
//   1. After SetExternalDriver(TRUE), SetWatcher(watcher, &wake): the provider calls the watcher for every
//      descriptor it has and will have; the consumer watches `wake` instead of GetDescriptor()'s descriptor
//      (readable when work was posted from another thread) and still calls Progress() when it is readable or
//      GetNextTimeout() has passed.
//   2. A descriptor found ready: ProgressReady(token, events): the same round as Progress(), for that one.
//   3. SetWatcher(nullptr, nullptr) before SetExternalDriver(FALSE): the provider unwatches nothing (the
//      consumer drops what it watched) and waits on its own set again.
// ND_NOT_SUPPORTED where the provider has no such descriptors (then the consumer watches GetDescriptor()'s).
struct INDProgressDescriptors : public IUnknown {
  virtual HRESULT ND_CALL SetWatcher(INDProgressWatcher* pWatcher, UINT64* pWakeDescriptor) = 0;
  virtual HRESULT ND_CALL ProgressReady(VOID* token, ULONG events, ULONG flags, ULONG* pWork) = 0;
};

// {6E657464-6972-6563-7473-686D00000001}
inline const GUID IID_INDSharedMemory = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x68, 0x6d, 0x00, 0x00, 0x00, 0x01}};

// On an IND2Adapter: connections between two processes on one host may move their data through shared memory
// instead of the network stack, with the same ND semantics (the built-in provider: docs/shm.md). Applies to
// connections set up after the call (Connect, and Listen for the responder side); the default is the provider's.
struct INDSharedMemory : public IUnknown {
  virtual HRESULT ND_CALL SetSharedMemory(BOOL enable) = 0;
  virtual HRESULT ND_CALL GetSharedMemory(BOOL* pEnabled) = 0;
  // How long a consumer that drives progress itself (INDProgress) should keep polling, without waiting, after a
  // message was posted or completed: 0 while the adapter has no connection on shared memory (or the provider
  // wants none). On a same-host connection a poll finds the peer's message with no system call, so a short window
  // saves the peer's doorbell and this side's wake-up per message (docs/shm.md "Waking").
  virtual HRESULT ND_CALL GetBusyPollMicros(ULONG* pMicros) = 0;
};

// {6E657464-6972-6563-7473-686D62756601}
inline const GUID IID_INDSharedBuffers = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x68, 0x6d, 0x62, 0x75, 0x66, 0x01}};

// On an IND2Adapter: memory the provider allocates so that a same-host peer can map it. A region registered over
// such a buffer takes the peer's RDMA Writes with a store into the peer's own mapping instead of a system call
// (the built-in provider: docs/shm.md "Mapped regions"); any other memory works as before.
struct INDSharedBuffers : public IUnknown {
  // Allocates cb zero-filled bytes at a page-aligned address (*ppAddress). *ppBuffer owns them, independently of
  // the adapter: its last Release unmaps the memory, which the consumer must first have deregistered (as for any
  // memory it registers). ND_NO_MEMORY when the provider cannot have such memory now (the consumer then allocates
  // plain memory).
  virtual HRESULT ND_CALL AllocateBuffer(SIZE_T cb, IUnknown** ppBuffer, VOID** ppAddress) = 0;
};

// {6E657464-6972-6563-7474-72616E730001}
inline const GUID IID_INDTransport = {0x6e657464, 0x6972, 0x6563, {0x74, 0x74, 0x72, 0x61, 0x6e, 0x73, 0x00, 0x01}};

// On an IND2QueuePair: the transport its connection uses (ND_TRANSPORT_*); ND_CONNECTION_INVALID before it is
// connected.
constexpr ULONG ND_TRANSPORT_TCP = 0;
constexpr ULONG ND_TRANSPORT_SHM = 1;
struct INDTransport : public IUnknown {
  virtual HRESULT ND_CALL GetTransport(ULONG* pTransport) = 0;
};

// {6E657464-6972-6563-7462-617463680001}
inline const GUID IID_INDPostBatch = {0x6e657464, 0x6972, 0x6563, {0x74, 0x62, 0x61, 0x74, 0x63, 0x68, 0x00, 0x01}};

// On an IND2QueuePair: the consumer is about to post several requests at once (as ibv_wr_start/ibv_wr_complete
// bracket a list of work requests). Between BeginBatch and the matching EndBatch the provider may hold back the
// transmission of Send/Write/Read requests and start them together at EndBatch (a software provider: one gather
// send for the whole batch instead of one system call per request). Purely a hint: admission (each call's
// result), order, and completions are those of the same posts without it. Batches nest; every BeginBatch needs
// its EndBatch, from the same thread, before that thread waits for any of the batch's completions.
struct INDPostBatch : public IUnknown {
  virtual HRESULT ND_CALL BeginBatch() = 0;
  virtual HRESULT ND_CALL EndBatch() = 0;
};

// {6E657464-6972-6563-7461-646D69740001}
inline const GUID IID_INDConnectAdmission = {0x6e657464, 0x6972, 0x6563, {0x74, 0x61, 0x64, 0x6d, 0x69, 0x74, 0x00, 0x01}};

// On an IND2Adapter: what CreateConnector does while the provider is out of connection-setup resources (the built-in
// provider: 256 Connects running or waiting for a slot, binding/soft/cm/connect_gate.h). By default it waits for a
// setup to end and makes the connector then, as a blocking allocation would, failing ND_INSUFFICIENT_RESOURCES only
// if none ends within the handshake deadline: that is what ND programs written for hardware providers expect
// (docs/nd2.md "Connect flood"). SetCreateConnectorWait(FALSE): it fails ND_INSUFFICIENT_RESOURCES at once, for a
// consumer whose calling thread must not block (an event loop: the addon asks for this on every adapter it opens).
struct INDConnectAdmission : public IUnknown {
  virtual HRESULT ND_CALL SetCreateConnectorWait(BOOL wait) = 0;
};

// {6E657464-6972-6563-7469-6F6370000001}
inline const GUID IID_INDCompletionPort = {0x6e657464, 0x6972, 0x6563, {0x74, 0x69, 0x6f, 0x63, 0x70, 0x00, 0x00, 0x01}};

// On an IND2Adapter (Windows): the consumer names the I/O completion port, and the key, it associated one of this
// adapter's overlapped files with, and promises to read every request's status with GetOverlappedResult (which ND
// requires anyway) rather than from the packet. A provider in user mode cannot learn a file's port (Windows has no
// query for it), so without this it has the kernel queue each packet (the built-in provider: a 1-byte pipe read
// per completion, docs/windows-event-loop.md "Completion packets"); with it, a completion is one
// PostQueuedCompletionStatus(port, bytes, key, OVERLAPPED). Such a packet always dequeues as a success (TRUE),
// a failed request's too. An OVERLAPPED whose hEvent has its low bit set still gets its event and no packet; a
// non-null hEvent is set before the packet is posted. The provider keeps a handle of its own to the port, so a
// completion that comes after the consumer closed its handle (or its port) posts into a port nobody reads
// instead of a handle value that may have been reused. One port per file, bound once: a second call for the
// same file fails ND_INVALID_PARAMETER, as does a file this adapter did not make.
struct INDCompletionPort : public IUnknown {
  virtual HRESULT ND_CALL BindCompletionPort(HANDLE hOverlappedFile, HANDLE hIoCompletionPort, ULONG_PTR key) = 0;
};
