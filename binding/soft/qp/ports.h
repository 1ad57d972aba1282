// What the queue pair's state machine (soft/qp/qp.h, QueuePairCore) needs of the other ND objects it was created
// with, as three small interfaces: the ND faces implement them (SoftCompletionQueue, soft/completion_queue.h;
// SoftSharedReceiveQueue, soft/shared_receive_queue.h), and the state machine reaches those objects through these
// alone. So soft/qp/ includes no ND face of the software provider (test/seams.test.ts holds that rule).
#ifndef NETDIRECT_SOFT_QP_PORTS_H_
#define NETDIRECT_SOFT_QP_PORTS_H_

#include <cstddef>

#include "nd/nd2.h"
#include "soft/memory/local_sge.h"

namespace netdirect::soft {

// Inline progress: a queue pair completing into a CQ lets a GetResults caller that found the CQ empty (a thread
// polling anyway: the JS thread in manual mode, the poller in its spin window) read and place its input itself, so
// a completion or a placed Write needs no engine-thread wake-up. Never blocks: a source that is busy (the engine
// thread holds it) is skipped.
class ProgressSource {
 public:
  virtual void poll_progress() = 0;
  // The polling thread armed a notification on the CQ, i.e. it stops polling and waits: progress goes back to the
  // engine at once rather than when the inline lease runs out. Called with no CQ lock held.
  virtual void polling_stopped() = 0;

 protected:
  ~ProgressSource() = default;
};

// A completion queue as the queue pair fills it (SoftCompletionQueue documents each call).
class CompletionSink {
 public:
  // One completion; false on overrun. `flush`: a completion of the queue pair's own flush (queued beyond depth).
  virtual bool push(const ND2_RESULT& result, bool solicited, bool flush) = 0;
  // n unsolicited completions at once (a consumer sees all of them or none).
  virtual bool push_many(const ND2_RESULT* results, size_t n) = 0;
  // The CQ overran: its queue pairs must fail.
  virtual bool failed() const = 0;
  // Inline progress sources; called without the source's own locks held, remove_source waits for a GetResults
  // round in progress.
  virtual void add_source(ProgressSource* s) = 0;
  virtual void remove_source(ProgressSource* s) = 0;

 protected:
  ~CompletionSink() = default;
};

// A shared receive queue as a queue pair takes from it.
class ReceiveSource {
 public:
  // Takes the oldest receive (its pins move to *out). False if none is posted.
  virtual bool pop(RecvRequest* out) = 0;

 protected:
  ~ReceiveSource() = default;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_QP_PORTS_H_
