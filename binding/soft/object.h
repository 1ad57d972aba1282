// The software provider's use of binding/ndkit/object.h: its marker interface id and the names its objects
// use unqualified (ComObject, from_unknown, complete_overlapped, ...).
#ifndef NETDIRECT_SOFT_OBJECT_H_
#define NETDIRECT_SOFT_OBJECT_H_

#include "ndkit/object.h"

namespace netdirect::soft {

// Answered only by this provider's objects (ndkit::ComObject's Marker).
inline const GUID IID_NdSoftObject = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x6f, 0x66, 0x74, 0x00, 0x00, 0x01}};

template <typename Iface>
using ComObject = ndkit::ComObject<Iface, IID_NdSoftObject>;

template <typename Impl, typename Iface>
Impl* from_unknown(IUnknown* unk) {
  return ndkit::from_unknown<Impl, Iface, IID_NdSoftObject>(unk);
}

using ndkit::complete_overlapped;
using ndkit::live_objects;
using ndkit::mark_done;
using ndkit::mark_pending;
using ndkit::overlapped_result;
using ndkit::succeed_overlapped;
using ndkit::create_overlapped_file;
using ndkit::release_overlapped_files;

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_OBJECT_H_
