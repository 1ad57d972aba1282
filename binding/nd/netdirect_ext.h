// netdirect's optional extension interfaces. Not part of ND v2: a consumer discovers them with
// QueryInterface on an ND object and carries on with plain ND semantics when a provider does not answer
// (as with vendor extensions such as IND2QueuePairsPool, nd2-facts.md §2.11). The built-in software
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
// are the same either way.
struct INDPollingHint : public IUnknown {
  virtual HRESULT ND_CALL SetPollingThread(BOOL polling) = 0;
};
