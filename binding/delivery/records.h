// Completion records: what the poller (and cq.poll()) hand to lib/, kRecordWords uint32 words per record:
//   [id, status, bytes, kind, qpId]
// The one C++ declaration of the record kinds. lib/records.ts is the TypeScript one; the addon exports this
// table (binding.recordKinds, binding.recordWords, see addon.cc) and a test compares the two, so a kind changed
// on one side only fails the test suite.
#ifndef NETDIRECT_RECORDS_H_
#define NETDIRECT_RECORDS_H_

#include <cstdint>

#include "nd/nd2.h"

namespace netdirect {

constexpr uint32_t kRecordWords = 5;  // [id, status, bytes, kind, qpId] (lib/records.ts RECORD_WORDS)

// Or'ed into the kind of a silent request's completion (a failure or a flush: successes of silent requests produce
// none): its id is the request's number among its queue pair's silent requests, which lib/ keeps without a request
// table entry (lib/requests.ts SilentRequests; lib/records.ts K_SILENT).
constexpr uint32_t kRecordSilent = 0x100;

// X(Name, value, jsName): every kind a record may carry. 0..5 are ND2_REQUEST_TYPE (CQ completions, the
// value ND2_RESULT::RequestType holds); overlapped requests (qpId 0) from 16; cqError is no request: the CQ
// whose id the record carries failed (overrun, device removed) with its status. jsName is the key in
// lib/records.ts RECORD_KINDS.
#define NETDIRECT_RECORD_KINDS(X)                         \
  X(Receive, 0, "receive")                                \
  X(Send, 1, "send")                                      \
  X(Bind, 2, "bind")                                      \
  X(Invalidate, 3, "invalidate")                          \
  X(Read, 4, "read")                                      \
  X(Write, 5, "write")                                    \
  X(Register, 16, "register")                             \
  X(Deregister, 17, "deregister")                         \
  X(Connect, 18, "connect")                               \
  X(CompleteConnect, 19, "completeConnect")               \
  X(Accept, 20, "accept")                                 \
  X(Disconnect, 21, "disconnect")                         \
  X(NotifyDisconnect, 22, "notifyDisconnect")             \
  X(GetConnectionRequest, 23, "getConnectionRequest")     \
  X(SrqNotify, 24, "srqNotify")                           \
  X(CqError, 25, "cqError")

enum RecordKind : uint8_t {
#define NETDIRECT_RECORD_KIND_ENUMERATOR_(name, value, jsName) kKind##name = value,
  NETDIRECT_RECORD_KINDS(NETDIRECT_RECORD_KIND_ENUMERATOR_)
#undef NETDIRECT_RECORD_KIND_ENUMERATOR_
  kKindCqNotify = 255,  // internal: a CQ's Notify (thread mode), never delivered (not in the table above)
  kKindCqTaken = 254,   // internal: in a poller batch, a CQ's undelivered results (poller.h Batch), never delivered
};

static_assert(int{kKindReceive} == int{Nd2RequestTypeReceive}, "record kind 0 is ND2_REQUEST_TYPE Receive");
static_assert(int{kKindSend} == int{Nd2RequestTypeSend}, "record kind 1 is ND2_REQUEST_TYPE Send");
static_assert(int{kKindBind} == int{Nd2RequestTypeBind}, "record kind 2 is ND2_REQUEST_TYPE Bind");
static_assert(int{kKindInvalidate} == int{Nd2RequestTypeInvalidate}, "record kind 3 is ND2_REQUEST_TYPE Invalidate");
static_assert(int{kKindRead} == int{Nd2RequestTypeRead}, "record kind 4 is ND2_REQUEST_TYPE Read");
static_assert(int{kKindWrite} == int{Nd2RequestTypeWrite}, "record kind 5 is ND2_REQUEST_TYPE Write");
static_assert(kKindRegister > kKindWrite, "overlapped kinds must not collide with ND2_REQUEST_TYPE values");

}  // namespace netdirect

#endif  // NETDIRECT_RECORDS_H_
