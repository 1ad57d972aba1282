// The software provider's provider-variance test mode (binding/soft/variance.h, docs/testing.md), through the ND
// interfaces as a consumer sees it: the names parse; with NETDIRECT_SOFT_VARIANCE=all each behaviour shows up
// (both the plain and the varied answer, since each call takes its variant with probability 1/2) and every
// varied answer still keeps ND's rules — one packet per ND_PENDING, the status from GetOverlappedResult, the data
// after the retry a size query asks for. Prints "N passed, M failed"; exits non-zero on failure.
#include <net/if.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "check.h"
#include "soft/adapter.h"
#include "soft/completion_queue.h"
#include "soft/memory_region.h"
#include "soft/variance.h"

using namespace netdirect::soft;

namespace {

SoftAdapter* g_adapter = nullptr;
HANDLE g_file = nullptr;
HANDLE g_port = nullptr;

void test_parse() {
  g_test = "parse";
  const char* bad = nullptr;
  CHECK(variance::parse("", &bad) == 0 && bad == nullptr);
  CHECK(variance::parse("pending,short-poll", &bad) == (variance::kPending | variance::kShortPoll) && bad == nullptr);
  CHECK(variance::parse("all", &bad) == (variance::kPending | variance::kFailAsync | variance::kOverflow |
                                         variance::kShortPoll | variance::kSpuriousNotify | variance::kPhased));
  CHECK(variance::parse("overflow,nonsense,phased", &bad) == (variance::kOverflow | variance::kPhased));
  CHECK(bad != nullptr && std::string(bad).rfind("nonsense", 0) == 0);
  CHECK(variance::enabled() == variance::parse("all", &bad));  // what main() set
}

// Waits for the packet of `ov` and asks its issuer for the status, as the ND docs require; a second phase
// (GetOverlappedResult answering ND_PENDING) means another packet. *phases counts the packets.
HRESULT await_packet(IND2Overlapped* issuer, OVERLAPPED* ov, int* phases) {
  for (*phases = 1;; ++*phases) {
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* got = nullptr;
    GetQueuedCompletionStatus(g_port, &bytes, &key, &got, 2000);
    if (!CHECK(got == ov)) return ND_INTERNAL_ERROR;
    HRESULT hr = issuer->GetOverlappedResult(ov, FALSE);
    if (hr != ND_PENDING) return hr;
    if (*phases == 4) return hr;
  }
}

bool port_empty() {
  OVERLAPPED_ENTRY e;
  ULONG n = 0;
  return !GetQueuedCompletionStatusEx(g_port, &e, 1, &n, 20, FALSE);
}

// pending, phased: Register/Deregister finish inside the call in this provider; here some say ND_PENDING and end
// with exactly one packet (two when phased), and the status is ND_SUCCESS either way.
void test_pending() {
  g_test = "pending";
  SoftMemoryRegion* mr = nullptr;
  CHECK_ST(SoftMemoryRegion::create(g_adapter, g_file, &mr), ND_SUCCESS);
  std::vector<char> buf(4096);
  int inline_done = 0, pending = 0, two_phase = 0;
  for (int i = 0; i < 64; ++i) {
    OVERLAPPED ov{};
    HRESULT hr = i % 2 == 0 ? mr->Register(buf.data(), buf.size(), ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov) : mr->Deregister(&ov);
    if (hr == ND_PENDING) {
      ++pending;
      int phases = 0;
      CHECK_ST(await_packet(mr, &ov, &phases), ND_SUCCESS);
      if (phases == 2) ++two_phase;
    } else {
      CHECK_ST(hr, ND_SUCCESS);
      CHECK_ST(mr->GetOverlappedResult(&ov, FALSE), ND_SUCCESS);  // complete, although no packet
      ++inline_done;
    }
  }
  CHECK(port_empty());  // one packet per phase, no more
  CHECK(inline_done > 0 && pending > 0);
  CHECK(two_phase > 0);
  mr->Release();
}

// fail-async: a Register refused in the call (unknown flags) is sometimes a failed completion instead; the port
// packet then says it failed (GetQueuedCompletionStatus FALSE) and GetOverlappedResult gives the same status.
void test_fail_async() {
  g_test = "fail-async";
  SoftMemoryRegion* mr = nullptr;
  CHECK_ST(SoftMemoryRegion::create(g_adapter, g_file, &mr), ND_SUCCESS);
  std::vector<char> buf(64);
  int sync = 0, async = 0;
  for (int i = 0; i < 64; ++i) {
    OVERLAPPED ov{};
    HRESULT hr = mr->Register(buf.data(), buf.size(), 0x40000, &ov);
    if (hr == ND_PENDING) {
      ++async;
      int phases = 0;
      CHECK_ST(await_packet(mr, &ov, &phases), ND_INVALID_PARAMETER_3);
    } else {
      CHECK_ST(hr, ND_INVALID_PARAMETER_3);
      ++sync;
    }
  }
  CHECK(sync > 0 && async > 0);
  CHECK(port_empty());
  mr->Release();
}

// overflow: a QueryAddressList given exactly the size it asked for sometimes asks for more (the list grew), never
// twice in a row; the retry with the size it named returns the list, and the final size is the true one.
void test_overflow() {
  g_test = "overflow";
  int grown = 0;
  for (int i = 0; i < 32; ++i) {
    ULONG size = 0;
    CHECK_ST(g_adapter->QueryAddressList(nullptr, &size), ND_BUFFER_OVERFLOW);
    const ULONG need = size;
    std::vector<uint64_t> buf(64);
    HRESULT hr = g_adapter->QueryAddressList(reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf.data()), &size);
    if (hr == ND_BUFFER_OVERFLOW) {
      ++grown;
      CHECK(size > need);
      CHECK_ST(g_adapter->QueryAddressList(reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf.data()), &size), ND_SUCCESS);
    } else {
      CHECK_ST(hr, ND_SUCCESS);
    }
    CHECK(size == need);
    CHECK(reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf.data())->iAddressCount >= 1);
  }
  CHECK(grown > 0 && grown < 32);
}

ND2_RESULT result(uintptr_t context) {
  ND2_RESULT r{};
  r.Status = ND_SUCCESS;
  r.RequestContext = reinterpret_cast<void*>(context);
  r.RequestType = Nd2RequestTypeSend;
  return r;
}

// short-poll: GetResults returns fewer than asked while more are queued; draining until it returns 0 and Notify
// says ND_SUCCESS (something is queued: drain again) still yields every result, in order.
// spurious-notify: an armed Notify on an empty CQ sometimes completes ND_SUCCESS with nothing to take.
void test_cq() {
  g_test = "short-poll";
  SoftCompletionQueue* cq = nullptr;
  CHECK_ST(SoftCompletionQueue::create(g_adapter, g_file, 64, &cq), ND_SUCCESS);
  int short_answers = 0;
  uintptr_t next_in = 1, next_out = 1;
  for (int round = 0; round < 16; ++round) {
    for (int i = 0; i < 8; ++i) CHECK(cq->push(result(next_in++), false));
    for (;;) {
      ND2_RESULT out[8];
      const ULONG n = cq->GetResults(out, 8);
      for (ULONG i = 0; i < n; ++i) CHECK(reinterpret_cast<uintptr_t>(out[i].RequestContext) == next_out++);
      if (n < 8 && cq->count() > 0) ++short_answers;
      if (n == 8 || cq->count() > 0) continue;
      break;
    }
  }
  CHECK(next_out == next_in);
  CHECK(short_answers > 0);

  g_test = "spurious-notify";
  int spurious = 0, quiet = 0;
  for (int i = 0; i < 16; ++i) {
    OVERLAPPED ov{};
    HRESULT hr = cq->Notify(ND_CQ_NOTIFY_ANY, &ov);
    if (!CHECK_ST(hr, ND_PENDING)) continue;  // empty CQ: nothing can satisfy it at once
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* got = nullptr;
    if (GetQueuedCompletionStatus(g_port, &bytes, &key, &got, 50) && got == &ov) {
      CHECK_ST(cq->GetOverlappedResult(&ov, FALSE), ND_SUCCESS);
      ND2_RESULT out[1];
      CHECK(cq->GetResults(out, 1) == 0);
      ++spurious;
    } else {
      ++quiet;
      CHECK_ST(cq->CancelOverlappedRequests(), ND_SUCCESS);
      int phases = 0;
      const HRESULT st = await_packet(cq, &ov, &phases);
      CHECK(st == ND_CANCELED || st == ND_SUCCESS);  // a spurious fire may win the race with the cancel
    }
  }
  CHECK(spurious > 0 && quiet > 0);
  CHECK(port_empty());
  cq->Release();
}

}  // namespace

int main() {
  // Before the provider first reads them (once per process).
  setenv("NETDIRECT_SOFT_VARIANCE", "all", 1);
  setenv("NETDIRECT_SOFT_VARIANCE_SEED", "42", 1);
  unsigned lo = if_nametoindex("lo");
  if (SoftAdapter::open(lo, &g_adapter) != ND_SUCCESS) {
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
  g_adapter->CreateOverlappedFile(&g_file);
  g_port = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
  CHECK(CreateIoCompletionPort(g_file, g_port, 1, 0) == g_port);
  test_parse();
  test_pending();
  test_fail_async();
  test_overflow();
  test_cq();
  CloseHandle(g_file);
  CloseHandle(g_port);
  g_adapter->Release();
  return finish();
}
