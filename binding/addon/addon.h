// Shared pieces of the addon: per-env instance data, NdError construction, type tags, argument helpers.
#ifndef NETDIRECT_ADDON_H_
#define NETDIRECT_ADDON_H_

#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nd/nd2.h"

namespace netdirect {

// Per-env state (main thread and each worker get their own).
struct AddonData {
  Napi::FunctionReference errorFactory;
  Napi::FunctionReference adapterCtor;
  Napi::FunctionReference completionQueueCtor;
  Napi::FunctionReference queuePairCtor;
  Napi::FunctionReference memoryRegionCtor;
  Napi::FunctionReference memoryWindowCtor;
  Napi::FunctionReference sharedReceiveQueueCtor;
  Napi::FunctionReference connectorCtor;
  Napi::FunctionReference listenerCtor;
  // Set by the adapter around ctor.New(): child constructors refuse to run without it, so JS cannot build a
  // child around arbitrary arguments through `obj.constructor`.
  void* constructing = nullptr;
};

AddonData* GetAddonData(Napi::Env env);

// Throws the NdError built by the factory lib/ registered (fallback: Error with code/status/operation).
[[noreturn]] void ThrowNdError(Napi::Env env, const char* code, HRESULT status, const char* operation,
                               const std::string& message);
// Throws for a failed ND call: code = the status name, message names the operation and the status.
[[noreturn]] void ThrowNdStatus(Napi::Env env, HRESULT status, const char* operation);
// Misuse: ERR_ND_* code, status 0.
[[noreturn]] void ThrowMisuse(Napi::Env env, const char* code, const char* operation, const std::string& message);

// Type tags: one per wrapped class (napi_type_tag_object), so foreign objects are refused, never cast.
namespace tags {
constexpr napi_type_tag kAdapter = {0x6e6574646972ec01ull, 0x9a3f4c1d2b5e6f01ull};
constexpr napi_type_tag kCompletionQueue = {0x6e6574646972ec02ull, 0x9a3f4c1d2b5e6f02ull};
constexpr napi_type_tag kQueuePair = {0x6e6574646972ec03ull, 0x9a3f4c1d2b5e6f03ull};
constexpr napi_type_tag kMemoryRegion = {0x6e6574646972ec04ull, 0x9a3f4c1d2b5e6f04ull};
constexpr napi_type_tag kMemoryWindow = {0x6e6574646972ec05ull, 0x9a3f4c1d2b5e6f05ull};
constexpr napi_type_tag kSharedReceiveQueue = {0x6e6574646972ec06ull, 0x9a3f4c1d2b5e6f06ull};
constexpr napi_type_tag kConnector = {0x6e6574646972ec07ull, 0x9a3f4c1d2b5e6f07ull};
constexpr napi_type_tag kListener = {0x6e6574646972ec08ull, 0x9a3f4c1d2b5e6f08ull};
}  // namespace tags

void TagObject(Napi::Object obj, const napi_type_tag& tag);
bool HasTag(Napi::Value value, const napi_type_tag& tag);

// Unwraps `value` as T (tag-checked). Throws ERR_ND_FOREIGN_OBJECT for anything else.
template <typename T>
T* UnwrapTagged(Napi::Value value, const char* operation, const char* what) {
  if (!HasTag(value, T::kTag))
    ThrowMisuse(value.Env(), "ERR_ND_FOREIGN_OBJECT", operation,
                std::string(what) + " is not a netdirect " + T::kClassName + " object");
  return T::Unwrap(value.As<Napi::Object>());
}

// A getter for DefineClass that checks the receiver's tag BEFORE any member of T is called: accessors have no
// signature, so `this` may be any object. InstanceAccessor<&T::Get> unwraps it unchecked and calls T::Get on
// whatever it wraps: on a foreign netdirect object that is a member call on an object of another class,
// undefined behaviour even if T::Get checks the tag first (UBSan's vptr check reports it: npm run test:asan).
// A foreign receiver throws ERR_ND_FOREIGN_OBJECT; `name` is also the operation in messages.
template <typename T, Napi::Value (T::*Getter)(const Napi::CallbackInfo&)>
napi_value TaggedGetter(napi_env env, napi_callback_info cbinfo) {
  try {
    Napi::CallbackInfo info(env, cbinfo);
    if (!HasTag(info.This(), T::kTag))
      ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", static_cast<const char*>(info.Data()),
                  std::string("receiver is not a netdirect ") + T::kClassName + " object");
    T* self = T::Unwrap(info.This().As<Napi::Object>());
    return (self->*Getter)(info);
  } catch (const Napi::Error& e) {
    e.ThrowAsJavaScriptException();
    return nullptr;
  }
}

template <typename T, Napi::Value (T::*Getter)(const Napi::CallbackInfo&)>
Napi::ClassPropertyDescriptor<T> TaggedAccessor(const char* name) {
  napi_property_descriptor d{};
  d.utf8name = name;
  d.getter = &TaggedGetter<T, Getter>;
  d.attributes = napi_default;  // as InstanceAccessor's default
  d.data = const_cast<char*>(name);
  return Napi::ClassPropertyDescriptor<T>(d);
}

// A number for messages: integers without decimals.
std::string Num(double v);

// Argument readers (lib/ validates; these only coerce).
inline uint32_t ArgU32(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().Uint32Value(); }
inline double ArgDouble(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().DoubleValue(); }
std::string ArgString(const Napi::CallbackInfo& info, size_t i, const char* operation, const char* what);

// Numeric IPv4/IPv6 text (optionally [bracketed], IPv6 with %scope) + port -> sockaddr. Throws
// ERR_ND_INVALID_ADDRESS on bad text.
struct SockAddr {
  sockaddr_storage storage;
  ULONG length;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};
SockAddr ParseAddress(Napi::Env env, const std::string& host, uint32_t port, const char* operation);
// sockaddr -> { host, port }; false for a family we do not know.
bool FormatAddress(const sockaddr* sa, std::string* host, uint16_t* port);
Napi::Object AddressObject(Napi::Env env, const sockaddr* sa);
// Private data argument (Uint8Array or null) -> pointer/length.
struct Bytes {
  const uint8_t* data = nullptr;
  size_t length = 0;
};
Bytes ArgBytesOrNull(const Napi::CallbackInfo& info, size_t i, const char* operation);

// Runs a QueryAddressList-style call (size probe, retry while the list grows) and formats every address.
template <typename Fn>
HRESULT QueryAddressStrings(Fn&& query, std::vector<std::string>* out) {
  std::vector<uint64_t> buf;  // 8-byte aligned storage for SOCKET_ADDRESS_LIST
  ULONG size = 0;
  HRESULT hr = query(nullptr, &size);
  for (int attempt = 0; attempt < 8 && hr == ND_BUFFER_OVERFLOW; ++attempt) {
    buf.assign((size + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
    hr = query(reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf.data()), &size);
  }
  if (FAILED(hr)) return hr;
  out->clear();
  if (buf.empty()) return hr;  // an empty list fits in no buffer
  const auto* list = reinterpret_cast<const SOCKET_ADDRESS_LIST*>(buf.data());
  for (INT i = 0; i < list->iAddressCount; ++i) {
    std::string host;
    uint16_t port = 0;
    if (list->Address[i].lpSockaddr != nullptr && FormatAddress(list->Address[i].lpSockaddr, &host, &port))
      out->push_back(host);
  }
  return hr;
}

}  // namespace netdirect

#endif  // NETDIRECT_ADDON_H_
