// Completion of pending overlapped requests on Windows: the software provider's counterpart of a kernel
// driver completing an IRP on the file returned by IND2Adapter::CreateOverlappedFile.
//
// The problem: a consumer associates that file with *its* I/O completion port (CreateIoCompletionPort or
// BindIoCompletionCallback), or waits on OVERLAPPED.hEvent, and the provider must deliver exactly one
// notification there per ND_PENDING request, carrying the request's outcome the way an IRP's status does:
// GetQueuedCompletionStatus returns TRUE for a request that succeeded and FALSE for one that failed. A
// user-mode provider cannot learn the port from a file handle (PostQueuedCompletionStatus needs it, and it
// can only post success), so it makes the kernel deliver the notification instead, with a carrier I/O on the
// consumer's file whose own outcome we control (docs/windows-event-loop.md, "Completion packets"):
//   * The "overlapped file" is the server end of a private, single-instance named pipe (inbound, byte mode,
//     FILE_FLAG_OVERLAPPED). The consumer gets a duplicate handle; the provider keeps the original handle
//     (same file object, so the same port association and notification modes) and the pipe's client end.
//   * Completing a request = ReadFile(1 byte, the consumer's OVERLAPPED) on the provider's handle, which pends
//     (the pipe is empty: every byte written satisfies a read that is already queued, and a cancelled read
//     consumed nothing), then either
//       - success: WriteFile(1 byte) into the client end, so the read completes with STATUS_SUCCESS, or
//       - failure: CancelIoEx on that read, so it completes with STATUS_CANCELLED: GetQueuedCompletionStatus
//         returns FALSE with ERROR_OPERATION_ABORTED, as for any failed IRP.
//     Either way the I/O manager queues the packet to the consumer's port with the consumer's key and
//     OVERLAPPED, signals hEvent, and honours the hEvent low-bit rule — all Win32's own.
//   * The carrier read overwrites OVERLAPPED.Internal/InternalHigh (its own status, 1 or 0 bytes), so the ND
//     status and byte count are kept in a side table keyed by the OVERLAPPED; IND2Overlapped::GetOverlappedResult
//     (overlapped_result) takes them from there once the carrier read has finished and writes them back
//     into Internal/InternalHigh, as ND consumers expect. The port packet says success or failure; the exact
//     ND status (ND_CONNECTION_REFUSED, ND_CANCELED, ...) is GetOverlappedResult's answer, as ND requires.
// A consumer that names the port it associated the file with, and reads every status with GetOverlappedResult
// (INDCompletionPort, nd/netdirect_ext.h: the addon does), gets no carrier: a completion writes the status into the
// OVERLAPPED and posts the packet itself, PostQueuedCompletionStatus to our own handle of that port (under Wine
// one wineserver request, against a pipe read and write whose completion the issuing thread must also be
// interrupted to finish: docs/windows-event-loop.md "Completions posted to the consumer's port").
// The file has FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE set, as the SDK's
// IND2Adapter::CreateOverlappedFile requires: a request that returns ND_SUCCESS (or fails) at once issues no
// carrier read, so no packet follows it; carrier reads always pend, so every ND_PENDING request gets its packet.
// Proven under Wine 8 (test/windows/conformance) — the same mechanism the Windows I/O manager uses on Windows.
#ifdef _WIN32

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ndkit/object.h"

namespace netdirect::ndkit {

namespace {

constexpr ULONG_PTR kStatusPending = 0x103;  // STATUS_PENDING == ND_PENDING

struct PipeFile {
  const void* owner = nullptr;
  HANDLE server = INVALID_HANDLE_VALUE;  // the provider's handle to the consumer's file object
  HANDLE client = INVALID_HANDLE_VALUE;  // write end: one byte completes one carrier read
  std::mutex mu;                         // a read and its byte go in together, in order
  // INDCompletionPort: our own handle to the consumer's port (set once, under mu; `key` before it), or null.
  std::atomic<HANDLE> port{nullptr};
  ULONG_PTR key = 0;
  ~PipeFile() {
    if (server != INVALID_HANDLE_VALUE) CloseHandle(server);
    if (client != INVALID_HANDLE_VALUE) CloseHandle(client);
    if (HANDLE p = port.load()) CloseHandle(p);
  }
};

struct Result {
  HRESULT status;
  ULONG bytes;
};

struct State {
  std::mutex mu;
  std::unordered_map<HANDLE, std::shared_ptr<PipeFile>> files;  // by the consumer's handle
  std::mutex results_mu;
  std::unordered_map<OVERLAPPED*, Result> results;  // completed, not yet collected by GetOverlappedResult
};

State& state() {
  static State* s = new State();  // never destroyed: completions may race with process exit
  return *s;
}

char g_sink[1];  // carrier reads land here (every one writes the same byte)

std::atomic<ULONG_PTR>& internal_of(OVERLAPPED* ov) { return *reinterpret_cast<std::atomic<ULONG_PTR>*>(&ov->Internal); }

HANDLE event_of(OVERLAPPED* ov) {
  return reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ov->hEvent) & ~uintptr_t(1));
}

// No pipe (a handle that is not ours, or the carrier read failed): event-only completion, like a file that
// is not associated with a port.
void complete_without_port(OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  ov->InternalHigh = bytes;
  internal_of(ov).store(static_cast<ULONG_PTR>(static_cast<ULONG>(status)));
  HANDLE ev = event_of(ov);
  if (ev != nullptr) SetEvent(ev);
}

// The carrier read of `ov` is pending on f.server (f.mu held): complete it with the request's outcome.
void finish_carrier(PipeFile& f, OVERLAPPED* ov, HRESULT status) {
  if (FAILED(status) && CancelIoEx(f.server, ov)) return;  // STATUS_CANCELLED: the packet says "failed"
  const char one = 1;  // success (or, should the cancel be refused, a success packet: the ND status is kept)
  DWORD written = 0;
  WriteFile(f.client, &one, 1, &written, nullptr);
}

}  // namespace

HANDLE create_overlapped_file(const void* owner) {
  static std::atomic<unsigned> counter{0};
  wchar_t name[96];
  std::swprintf(name, sizeof name / sizeof name[0], L"\\\\.\\pipe\\netdirect-soft-%lu-%u-%llu",
                static_cast<unsigned long>(GetCurrentProcessId()), counter.fetch_add(1),
                static_cast<unsigned long long>(GetTickCount64()));
  auto f = std::make_shared<PipeFile>();
  f->owner = owner;
  f->server = CreateNamedPipeW(name, PIPE_ACCESS_INBOUND | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                               PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, 0,
                               4096, 0, nullptr);
  if (f->server == INVALID_HANDLE_VALUE) return nullptr;
  f->client = CreateFileW(name, GENERIC_WRITE, 0, nullptr, OPEN_EXISTING, 0, nullptr);
  if (f->client == INVALID_HANDLE_VALUE) return nullptr;
  // The client is connected once CreateFileW returns; no ConnectNamedPipe needed. The modes belong to the file
  // object, so the consumer's duplicate has them too (IND2Adapter::CreateOverlappedFile requires both).
  if (!SetFileCompletionNotificationModes(f->server,
                                          FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE)) {
    return nullptr;
  }
  HANDLE consumer = nullptr;
  if (!DuplicateHandle(GetCurrentProcess(), f->server, GetCurrentProcess(), &consumer, 0, FALSE,
                       DUPLICATE_SAME_ACCESS)) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(state().mu);
  // A reused handle value means the consumer closed the old file; its pipe goes with the new entry.
  state().files.insert_or_assign(consumer, std::move(f));
  return consumer;
}

void release_overlapped_files(const void* owner) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto& files = state().files;
  for (auto it = files.begin(); it != files.end();) {
    if (it->second->owner == owner)
      it = files.erase(it);
    else
      ++it;
  }
}

HRESULT bind_overlapped_port(const void* owner, HANDLE overlapped_file, HANDLE port, ULONG_PTR key) {
  if (port == nullptr || port == INVALID_HANDLE_VALUE) return ND_INVALID_PARAMETER_2;
  std::shared_ptr<PipeFile> f;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    auto it = state().files.find(overlapped_file);
    if (it == state().files.end() || it->second->owner != owner) return ND_INVALID_PARAMETER_1;
    f = it->second;
  }
  // Our own handle: the consumer may close its handle of the port (libuv closes the loop's at uv_loop_close)
  // while a completion is still to come, and a handle value can be reused for anything.
  HANDLE mine = nullptr;
  if (!DuplicateHandle(GetCurrentProcess(), port, GetCurrentProcess(), &mine, 0, FALSE, DUPLICATE_SAME_ACCESS))
    return ND_INVALID_PARAMETER_2;
  std::lock_guard<std::mutex> lock(f->mu);
  if (f->port.load() != nullptr) {
    CloseHandle(mine);
    return ND_INVALID_PARAMETER_1;  // bound already: a file has one port
  }
  f->key = key;
  f->port.store(mine, std::memory_order_release);
  return ND_SUCCESS;
}

namespace {

// The request's outcome goes into the OVERLAPPED, then the packet to the consumer's port, as the I/O manager
// completes an IRP (the status before the packet: whoever dequeues it may read the status at once and reuse the
// OVERLAPPED). A post that fails (the system out of memory) leaves the event and the status, as for a file with no
// port; there is no second way that would not race with a consumer who already saw the status.
void post_to_port(HANDLE port, ULONG_PTR key, OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  ov->InternalHigh = bytes;
  internal_of(ov).store(static_cast<ULONG_PTR>(static_cast<ULONG>(status)));
  HANDLE ev = event_of(ov);
  if (ev != nullptr) SetEvent(ev);
  PostQueuedCompletionStatus(port, bytes, key, ov);
}

// The carrier read of `ov`, a post to the consumer's port (INDCompletionPort), or, without a pipe, its event
// delivers the request's outcome.
void deliver(const std::shared_ptr<PipeFile>& f, OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  if (!f) return complete_without_port(ov, status, bytes);
  if (HANDLE port = f->port.load(std::memory_order_acquire)) {
    // hEvent's low bit: the consumer wants its event and no packet (as the I/O manager honours it).
    if ((reinterpret_cast<uintptr_t>(ov->hEvent) & 1) != 0) return complete_without_port(ov, status, bytes);
    return post_to_port(port, f->key, ov, status, bytes);
  }
  {
    std::lock_guard<std::mutex> lock(state().results_mu);
    state().results[ov] = Result{status, bytes};
  }
  std::lock_guard<std::mutex> lock(f->mu);
  if (!ReadFile(f->server, g_sink, 1, nullptr, ov)) {
    if (GetLastError() == ERROR_IO_PENDING) return finish_carrier(*f, ov, status);
  }
  // The read failed at once, or completed at once (a byte left in the pipe, which the ordering above rules
  // out): with skip-on-success no packet follows either, so deliver through the event only.
  {
    std::lock_guard<std::mutex> rl(state().results_mu);
    state().results.erase(ov);
  }
  complete_without_port(ov, status, bytes);
}

struct Deferred {
  std::shared_ptr<PipeFile> file;  // held: the pipe outlives an adapter released before the scope closes
  OVERLAPPED* ov;
  HRESULT status;
  ULONG bytes;
};

thread_local int t_defer_depth = 0;
thread_local std::vector<Deferred>* t_deferred = nullptr;  // the outermost scope's list, once one is deferred

}  // namespace

DeferCompletions::DeferCompletions() { ++t_defer_depth; }

DeferCompletions::~DeferCompletions() {
  if (--t_defer_depth > 0 || t_deferred == nullptr) return;
  std::unique_ptr<std::vector<Deferred>> list(t_deferred);
  t_deferred = nullptr;
  // Delivering runs no consumer code, so nothing new is deferred meanwhile.
  for (const Deferred& d : *list) deliver(d.file, d.ov, d.status, d.bytes);
}

void complete_overlapped(HANDLE overlapped_file, OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  std::shared_ptr<PipeFile> f;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    auto it = state().files.find(overlapped_file);
    if (it != state().files.end()) f = it->second;
  }
  if (t_defer_depth > 0) {
    try {
      if (t_deferred == nullptr) t_deferred = new std::vector<Deferred>();
      t_deferred->push_back(Deferred{f, ov, status, bytes});
      return;
    } catch (...) {
      // No memory to defer: deliver now, as without a scope.
    }
  }
  deliver(f, ov, status, bytes);
}

HRESULT overlapped_result(OVERLAPPED* ov, BOOL wait) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(state().results_mu);
      const ULONG_PTR internal = internal_of(ov).load();
      auto it = state().results.find(ov);
      if (it != state().results.end()) {
        if (internal != kStatusPending) {  // the carrier read is done: hand over the ND result
          const Result r = it->second;
          state().results.erase(it);
          ov->InternalHigh = r.bytes;
          internal_of(ov).store(static_cast<ULONG_PTR>(static_cast<ULONG>(r.status)));
          return r.status;
        }
      } else if (internal != kStatusPending) {
        return static_cast<HRESULT>(static_cast<ULONG>(internal));
      }
    }
    if (!wait) return ND_PENDING;
    HANDLE ev = event_of(ov);
    if (ev != nullptr)
      WaitForSingleObject(ev, 20);
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace netdirect::ndkit

#endif  // _WIN32
