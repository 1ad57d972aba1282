// The software provider driven from outside (INDProgress, binding/nd/netdirect_ext.h), as the addon's event-loop
// mode drives it: no engine thread while a consumer drives; the descriptor says when there is work; Progress()
// moves data; ND_PROGRESS_DEFER_TRANSMIT holds what the round and the driver's own posts would send until Flush();
// GetNextTimeout reports the engine's timers; SetExternalDriver(FALSE) hands progress back to the engine thread.
// Prints "N passed, M failed"; exits non-zero on failure.
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "nd/netdirect_ext.h"
#include "soft/adapter.h"
#include "soft/completion_queue.h"
#include "soft/memory_region.h"
#include "soft/queue_pair.h"
#include "soft/wire/mpa.h"

using namespace netdirect::soft;

namespace {


SoftAdapter* g_adapter = nullptr;
INDProgress* g_progress = nullptr;
HANDLE g_file = nullptr;
int g_fd = -1;

// Threads of this process named like the engine's.
int engine_threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "nd-engine") ++n;
  }
  closedir(d);
  return n;
}

// /proc lists a thread a moment before it named itself, and a joined thread a moment after it ended: wait a little.
bool engine_threads_become(int n) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (engine_threads() != n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

// The consumer's loop: wait on the descriptor (or the next timer), then one round; until pred() or ms pass.
bool drive_until(const std::function<bool()>& pred, int ms = 5000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    DWORD next = INFINITE;
    g_progress->GetNextTimeout(&next);
    readable(g_fd, next == INFINITE || next > 10 ? 10 : static_cast<int>(next));
    g_progress->Progress(0, nullptr);
  }
  return true;
}

// Runs fn on the driving thread (this one, through a posted task and a round).
void on_driver(std::function<void()> fn) {
  std::atomic<bool> done{false};
  g_adapter->engine().post([&] {
    fn();
    done = true;
  });
  CHECK(drive_until([&] { return done.load(); }));
}

struct Region {
  std::vector<uint8_t> mem;
  SoftMemoryRegion* mr = nullptr;
  explicit Region(size_t n) : mem(n) {
    SoftMemoryRegion::create(g_adapter, g_file, &mr);
    OVERLAPPED ov{};
    CHECK(mr->Register(mem.data(), n, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE |
                                           ND_MR_FLAG_ALLOW_REMOTE_READ, &ov) == ND_SUCCESS);
  }
  ~Region() {
    OVERLAPPED ov{};
    if (mr->Deregister(&ov) == ND_PENDING) drive_until([&] { return mr->GetOverlappedResult(&ov, FALSE) != ND_PENDING; });
    mr->Release();
  }
  ND2_SGE sge(size_t off, size_t len) { return ND2_SGE{mem.data() + off, static_cast<ULONG>(len), mr->GetLocalToken()}; }
  UINT64 addr(size_t off) { return reinterpret_cast<uintptr_t>(mem.data() + off); }
};

struct Events : ConnectionEvents {
  void on_rtr_received() override {}
  void on_connection_closed(HRESULT) override {}
};

struct Pair {
  SoftCompletionQueue* cq = nullptr;
  SoftQueuePair* a = nullptr;
  SoftQueuePair* b = nullptr;
  Events ea, eb;
  int fd_a = -1, fd_b = -1;
  Pair() {
    SoftCompletionQueue::create(g_adapter, g_file, 1024, &cq);
    SoftQueuePair::create(g_adapter, cq, cq, nullptr, reinterpret_cast<void*>(0xA), 64, 64, 4, 4, 64, &a);
    SoftQueuePair::create(g_adapter, cq, cq, nullptr, reinterpret_cast<void*>(0xB), 64, 64, 4, 4, 64, &b);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    fd_a = sv[0];
    fd_b = sv[1];
    for (int fd : sv) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (int side = 0; side < 2; ++side) {
      Connection c;
      c.socket = side == 0 ? fd_a : fd_b;
      c.initiator = side == 0;
      c.mss = 1460;
      c.mpa.crc = true;
      c.mpa.ord = 8;
      c.mpa.ird = 8;
      c.mpa.rtr = wire::kRtrNone;
      SoftQueuePair* qp = side == 0 ? a : b;
      CHECK(qp->begin_connect() == ND_SUCCESS);
      on_driver([&] { qp->attach(c, side == 0 ? static_cast<ConnectionEvents*>(&ea) : &eb); });
    }
  }
  ~Pair() {
    std::atomic<int> gone{0};
    a->disconnect([&] { gone++; });
    b->disconnect([&] { gone++; });
    drive_until([&] { return gone.load() == 2; });
    a->detach_events();
    b->detach_events();
    a->Release();
    b->Release();
    on_driver([] {});
    on_driver([] {});
    cq->Release();
  }
  bool next(ND2_RESULT* r) {
    return drive_until([&] { return cq->GetResults(r, 1) == 1; });
  }
};

void test_driven_from_outside() {
  g_test = "external driver";
  CHECK(engine_threads() == 0);
  UINT64 fd = 0;
  CHECK(g_progress->GetDescriptor(&fd) == ND_SUCCESS);
  g_fd = static_cast<int>(fd);
  CHECK(g_progress->SetExternalDriver(TRUE) == ND_SUCCESS);
  DWORD next = 0;
  CHECK(g_progress->GetNextTimeout(&next) == ND_SUCCESS && next == INFINITE);  // idle: nothing due, ever
  {
    Pair p;
    Region src(8192), dst(8192);
    for (size_t i = 0; i < 4096; ++i) src.mem[i] = static_cast<uint8_t>(i * 7 + 1);
    ND2_SGE s = src.sge(0, 4096);
    CHECK(p.a->Write(reinterpret_cast<void*>(1), &s, 1, dst.addr(100), dst.mr->GetRemoteToken(), 0) == ND_SUCCESS);
    ND2_RESULT r{};
    CHECK(p.next(&r) && r.Status == ND_SUCCESS && r.RequestType == Nd2RequestTypeWrite);
    CHECK(std::memcmp(dst.mem.data() + 100, src.mem.data(), 4096) == 0);

    // The descriptor becomes readable when the peer's data arrives, with nobody calling Progress.
    ND2_SGE rs = dst.sge(0, 64);
    CHECK(p.b->Receive(reinterpret_cast<void*>(2), &rs, 1) == ND_SUCCESS);
    ND2_SGE ss = src.sge(0, 16);
    CHECK(p.a->Send(reinterpret_cast<void*>(3), &ss, 1, 0) == ND_SUCCESS);
    CHECK(readable(g_fd, 2000));
    bool got_recv = false, got_send = false;
    CHECK(drive_until([&] {
      ND2_RESULT x{};
      while (p.cq->GetResults(&x, 1) == 1) {
        if (x.RequestType == Nd2RequestTypeReceive && x.Status == ND_SUCCESS && x.BytesTransferred == 16) got_recv = true;
        if (x.RequestType == Nd2RequestTypeSend && x.Status == ND_SUCCESS) got_send = true;
      }
      return got_recv && got_send;
    }));

    // Deferred transmit: between Progress(DEFER) and Flush, this thread's posts stay off the wire.
    g_test = "deferred transmit";
    CHECK(g_progress->Progress(ND_PROGRESS_DEFER_TRANSMIT, nullptr) == ND_SUCCESS);
    CHECK(p.b->Receive(reinterpret_cast<void*>(4), &rs, 1) == ND_SUCCESS);
    CHECK(p.a->Send(reinterpret_cast<void*>(5), &ss, 1, 0) == ND_SUCCESS);
    uint8_t peek[8];
    CHECK(::recv(p.fd_b, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT) < 0);  // nothing sent yet
    CHECK(g_progress->Flush() == ND_SUCCESS);
    CHECK(::recv(p.fd_b, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT) > 0);  // out with the flush
    got_recv = got_send = false;
    CHECK(drive_until([&] {
      ND2_RESULT x{};
      while (p.cq->GetResults(&x, 1) == 1) {
        if (x.RequestType == Nd2RequestTypeReceive && x.Status == ND_SUCCESS) got_recv = true;
        if (x.RequestType == Nd2RequestTypeSend && x.Status == ND_SUCCESS) got_send = true;
      }
      return got_recv && got_send;
    }));
    // Another thread's post is never held back by this thread's deferral.
    CHECK(g_progress->Progress(ND_PROGRESS_DEFER_TRANSMIT, nullptr) == ND_SUCCESS);
    CHECK(p.b->Receive(reinterpret_cast<void*>(6), &rs, 1) == ND_SUCCESS);
    std::thread([&] { CHECK(p.a->Send(reinterpret_cast<void*>(7), &ss, 1, 0) == ND_SUCCESS); }).join();
    CHECK(readable(p.fd_b, 0) || ::recv(p.fd_b, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT) > 0);
    CHECK(g_progress->Flush() == ND_SUCCESS);
    got_recv = got_send = false;
    CHECK(drive_until([&] {
      ND2_RESULT x{};
      while (p.cq->GetResults(&x, 1) == 1) {
        if (x.RequestType == Nd2RequestTypeReceive && x.Status == ND_SUCCESS) got_recv = true;
        if (x.RequestType == Nd2RequestTypeSend && x.Status == ND_SUCCESS) got_send = true;
      }
      return got_recv && got_send;
    }));

    // Timers: the deadline is reported, and the round that runs after it fires the timer.
    g_test = "timers";
    std::atomic<bool> fired{false};
    g_adapter->engine().add_timer(40, [&] { fired = true; });
    CHECK(g_progress->GetNextTimeout(&next) == ND_SUCCESS && next != INFINITE && next <= 41);
    CHECK(drive_until([&] { return fired.load(); }));
    CHECK(engine_threads() == 0);  // all of the above without an engine thread

    // Handing back: the engine thread takes over; completions come with nobody calling Progress.
    g_test = "hand back";
    CHECK(g_progress->SetExternalDriver(FALSE) == ND_SUCCESS);
    CHECK(engine_threads_become(1));
    CHECK(p.a->Write(reinterpret_cast<void*>(8), &s, 1, dst.addr(0), dst.mr->GetRemoteToken(), 0) == ND_SUCCESS);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool got = false;
    while (!got && std::chrono::steady_clock::now() < until) {
      ND2_RESULT x{};
      got = p.cq->GetResults(&x, 1) == 1 && x.Status == ND_SUCCESS && x.RequestType == Nd2RequestTypeWrite;
      if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(got);
    // And a consumer can take it again.
    CHECK(g_progress->SetExternalDriver(TRUE) == ND_SUCCESS);
    CHECK(engine_threads_become(0));
  }
  CHECK(g_progress->SetExternalDriver(FALSE) == ND_SUCCESS);
}

// The consumer's loop watching the engine's sockets itself (INDProgressDescriptors), as the addon's LoopWatch does:
// told of every socket (those registered before SetWatcher too), on the thread that set it (a change made on
// another thread comes with the next round the wake-up descriptor brings), each unwatched before it is closed;
// ProgressReady for a socket found ready moves its data with no wait on the engine's own set.
struct TestWatcher final : INDProgressWatcher {
  struct Entry {
    void* token;
    ULONG events;
  };
  std::map<int, Entry> fds;
  std::thread::id thread = std::this_thread::get_id();
  int foreign_calls = 0;    // calls made on another thread than the one that set the watcher
  int closed_watched = 0;   // Unwatch of a descriptor that was closed already
  void ND_CALL Watch(UINT64 d, VOID* token, ULONG events) override {
    if (std::this_thread::get_id() != thread) ++foreign_calls;
    fds[static_cast<int>(d)] = Entry{token, events};
  }
  void ND_CALL Unwatch(UINT64 d) override {
    if (std::this_thread::get_id() != thread) ++foreign_calls;
    if (::fcntl(static_cast<int>(d), F_GETFD) < 0) ++closed_watched;
    fds.erase(static_cast<int>(d));
  }
};

INDProgressDescriptors* g_descriptors = nullptr;
int g_wake = -1;
int g_ready_rounds = 0;

// A loop over the watched sockets and the wake-up descriptor (poll(2) standing for libuv).
bool drive_watched(TestWatcher& w, const std::function<bool()>& pred, int ms = 5000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::vector<pollfd> p{{g_wake, POLLIN, 0}};
    for (auto& [fd, e] : w.fds) {
      if (e.events != 0) p.push_back({fd, static_cast<short>(((e.events & ND_PROGRESS_READ) ? POLLIN : 0) | ((e.events & ND_PROGRESS_WRITE) ? POLLOUT : 0)), 0});
    }
    DWORD next = INFINITE;
    g_progress->GetNextTimeout(&next);
    const int n = ::poll(p.data(), p.size(), next == INFINITE || next > 10 ? 10 : static_cast<int>(next));
    if (n <= 0 || (p[0].revents & POLLIN) != 0) g_progress->Progress(0, nullptr);  // a wake-up or a deadline
    for (size_t i = 1; i < p.size(); ++i) {
      if (p[i].revents == 0) continue;
      auto it = w.fds.find(p[i].fd);
      if (it == w.fds.end()) continue;  // unwatched by an earlier round of this pass
      ULONG ev = 0;
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) ev |= ND_PROGRESS_READ;
      if (p[i].revents & POLLOUT) ev |= ND_PROGRESS_WRITE;
      if (p[i].revents & (POLLHUP | POLLERR)) ev |= ND_PROGRESS_HANGUP;
      CHECK(g_descriptors->ProgressReady(it->second.token, ev, 0, nullptr) == ND_SUCCESS);
      ++g_ready_rounds;
    }
  }
  return true;
}

void test_watched_descriptors() {
  g_test = "watched descriptors";
  void* q = nullptr;
  CHECK(g_adapter->QueryInterface(IID_INDProgressDescriptors, &q) == S_OK && q != nullptr);
  g_descriptors = static_cast<INDProgressDescriptors*>(q);
  TestWatcher w;
  UINT64 wake = 0;
  CHECK(g_descriptors->SetWatcher(&w, &wake) == ND_INVALID_DEVICE_STATE);  // only while a consumer drives
  UINT64 fd = 0;
  CHECK(g_progress->GetDescriptor(&fd) == ND_SUCCESS);
  g_fd = static_cast<int>(fd);
  CHECK(g_progress->SetExternalDriver(TRUE) == ND_SUCCESS);
  {
    Pair p;  // connected before the watcher is set: both sockets are reported when it is
    CHECK(g_descriptors->SetWatcher(&w, &wake) == ND_SUCCESS);
    g_wake = static_cast<int>(wake);
    CHECK(g_wake >= 0 && g_wake != g_fd);
    CHECK(w.fds.count(p.fd_a) == 1 && w.fds.count(p.fd_b) == 1);
    CHECK(w.fds[p.fd_a].events == ND_PROGRESS_READ && w.fds[p.fd_b].events == ND_PROGRESS_READ);

    Region src(8192), dst(8192);
    for (size_t i = 0; i < 4096; ++i) src.mem[i] = static_cast<uint8_t>(i * 5 + 3);
    ND2_SGE rs = dst.sge(0, 4096);
    CHECK(p.b->Receive(reinterpret_cast<void*>(1), &rs, 1) == ND_SUCCESS);
    ND2_SGE ss = src.sge(0, 4096);
    CHECK(p.a->Send(reinterpret_cast<void*>(2), &ss, 1, 0) == ND_SUCCESS);
    bool got_recv = false, got_send = false;
    g_ready_rounds = 0;
    CHECK(drive_watched(w, [&] {
      ND2_RESULT x{};
      while (p.cq->GetResults(&x, 1) == 1) {
        if (x.RequestType == Nd2RequestTypeReceive && x.Status == ND_SUCCESS && x.BytesTransferred == 4096) got_recv = true;
        if (x.RequestType == Nd2RequestTypeSend && x.Status == ND_SUCCESS) got_send = true;
      }
      return got_recv && got_send;
    }));
    CHECK(g_ready_rounds > 0);
    CHECK(std::memcmp(dst.mem.data(), src.mem.data(), 4096) == 0);

    // A change made on another thread reaches the watcher on its own thread, with the round the wake-up brings.
    g_test = "watched descriptors: another thread";
    // A socket of another owner, registered, changed and removed on another thread: each reaches the watcher on its
    // own thread with the round the wake-up brings; ProgressReady hands its readiness to its handler.
    struct Counting final : Engine::Handler {
      std::atomic<int> reads{0};
      int fd = -1;
      void on_io(uint32_t events) override {
        char b[16];
        if ((events & Engine::kRead) && ::recv(fd, b, sizeof b, MSG_DONTWAIT) > 0) ++reads;
      }
    } mine;
    int sv[2];
    CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mine.fd = sv[0];
    std::thread([&] { CHECK(g_adapter->engine().add(sv[0], &mine, Engine::kRead)); }).join();
    CHECK(w.fds.count(sv[0]) == 0);  // not yet
    CHECK(readable(g_wake, 2000));
    CHECK(drive_watched(w, [&] { return w.fds.count(sv[0]) == 1; }));
    CHECK(w.fds[sv[0]].token == &mine && w.fds[sv[0]].events == ND_PROGRESS_READ);
    CHECK(::send(sv[1], "x", 1, 0) == 1);
    CHECK(drive_watched(w, [&] { return mine.reads.load() == 1; }));
    std::thread([&] { CHECK(g_adapter->engine().modify(sv[0], &mine, Engine::kRead | Engine::kWrite)); }).join();
    CHECK(w.fds[sv[0]].events == ND_PROGRESS_READ);  // not yet
    CHECK(drive_watched(w, [&] { return w.fds[sv[0]].events == (ND_PROGRESS_READ | ND_PROGRESS_WRITE); }));
    CHECK(g_adapter->engine().modify(sv[0], &mine, Engine::kRead));  // on this thread: at once
    CHECK(w.fds[sv[0]].events == ND_PROGRESS_READ);
    g_adapter->engine().remove(sv[0], &mine);  // on this thread: unwatched before it returns
    CHECK(w.fds.count(sv[0]) == 0);
    ::close(sv[0]);
    ::close(sv[1]);
    CHECK(w.foreign_calls == 0);
  }
  // The pair's teardown closed both sockets, each unwatched while still open.
  g_test = "watched descriptors: teardown";
  CHECK(w.fds.empty());
  CHECK(w.closed_watched == 0);
  CHECK(w.foreign_calls == 0);
  CHECK(g_descriptors->SetWatcher(nullptr, nullptr) == ND_SUCCESS);
  {
    Pair p;  // not told any more
    CHECK(w.fds.empty());
  }
  CHECK(g_progress->SetExternalDriver(FALSE) == ND_SUCCESS);
  g_descriptors->Release();
  g_descriptors = nullptr;
}

// A consumer that never asks for INDPollingHint (an ND program of its own) and spins on GetResults drives its
// connections itself (completion_queue.cc polling_inferred): here nothing else could, since the consumer holds the
// engine (external driver) and never calls Progress(). One empty GetResults between Notifies is a waiting
// consumer's habit and drives nothing.
void test_polling_inferred() {
  g_test = "polling inferred";
  CHECK(g_progress->SetExternalDriver(TRUE) == ND_SUCCESS);
  CHECK(engine_threads_become(0));
  {
    Pair p;
    Region src(8192), dst(8192);
    ND2_SGE rs = dst.sge(0, 64);
    ND2_SGE ss = src.sge(0, 16);
    std::memcpy(src.mem.data(), "polled by itself", 16);
    CHECK(p.b->Receive(reinterpret_cast<void*>(1), &rs, 1) == ND_SUCCESS);
    CHECK(p.a->Send(reinterpret_cast<void*>(2), &ss, 1, 0) == ND_SUCCESS);  // a post transmits at once
    uint8_t peek[8];
    CHECK(::recv(p.fd_b, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT) > 0);

    // The waiting habit: GetResults once, Notify, GetResults once more. Nothing is read.
    OVERLAPPED ov{};
    ND2_RESULT x{};
    CHECK(p.cq->GetResults(&x, 1) == 0);
    CHECK(p.cq->Notify(ND_CQ_NOTIFY_ANY, &ov) == ND_PENDING);
    CHECK(p.cq->GetResults(&x, 1) == 0);
    CHECK(::recv(p.fd_b, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT) > 0);  // still in the socket
    CHECK(p.cq->CancelOverlappedRequests() == ND_SUCCESS);

    // The polling habit: the second empty GetResults in a row reads and places the message, the following ones
    // answer the confirmation Read, and both completions arrive, with no Progress() and no engine thread.
    bool got_recv = false, got_send = false;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(got_recv && got_send) && std::chrono::steady_clock::now() < until) {
      while (p.cq->GetResults(&x, 1) == 1) {
        if (x.RequestType == Nd2RequestTypeReceive && x.Status == ND_SUCCESS && x.BytesTransferred == 16) got_recv = true;
        if (x.RequestType == Nd2RequestTypeSend && x.Status == ND_SUCCESS) got_send = true;
      }
    }
    CHECK(got_recv && got_send);
    CHECK(std::memcmp(dst.mem.data(), "polled by itself", 16) == 0);
    CHECK(engine_threads() == 0);
  }
  CHECK(g_progress->SetExternalDriver(FALSE) == ND_SUCCESS);
}

}  // namespace

int main() {
  unsigned lo = if_nametoindex("lo");
  if (SoftAdapter::open(lo, &g_adapter) != ND_SUCCESS) {
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
  g_adapter->CreateOverlappedFile(&g_file);
  void* p = nullptr;
  CHECK(g_adapter->QueryInterface(IID_INDProgress, &p) == S_OK && p != nullptr);
  g_progress = static_cast<INDProgress*>(p);
  test_driven_from_outside();
  test_watched_descriptors();
  test_polling_inferred();
  g_progress->Release();
  CloseHandle(g_file);
  g_adapter->Release();
  return finish();
}
