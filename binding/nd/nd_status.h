// ND v2 status codes (HRESULT values of microsoft/NetworkDirect ndstatus.mc; each equals the NTSTATUS of
// similar name). One X-macro list so native code and the TypeScript name table share a single source.
#pragma once

#define ND_STATUS_LIST(X)                                   \
  X(ND_SUCCESS, 0x00000000u)                                \
  X(ND_TIMEOUT, 0x00000102u)                                \
  X(ND_PENDING, 0x00000103u)                                \
  X(ND_BUFFER_OVERFLOW, 0x80000005u)                        \
  X(ND_DEVICE_BUSY, 0x80000011u)                            \
  X(ND_NO_MORE_ENTRIES, 0x8000001Au)                        \
  X(ND_UNSUCCESSFUL, 0xC0000001u)                           \
  X(ND_ACCESS_VIOLATION, 0xC0000005u)                       \
  X(ND_INVALID_HANDLE, 0xC0000008u)                         \
  X(ND_INVALID_PARAMETER, 0xC000000Du)                      \
  X(ND_INVALID_DEVICE_REQUEST, 0xC0000010u)                 \
  X(ND_NO_MEMORY, 0xC0000017u)                              \
  X(ND_INVALID_PARAMETER_MIX, 0xC0000030u)                  \
  X(ND_DATA_OVERRUN, 0xC000003Cu)                           \
  X(ND_SHARING_VIOLATION, 0xC0000043u)                      \
  X(ND_INSUFFICIENT_RESOURCES, 0xC000009Au)                 \
  X(ND_DEVICE_NOT_READY, 0xC00000A3u)                       \
  X(ND_IO_TIMEOUT, 0xC00000B5u)                             \
  X(ND_NOT_SUPPORTED, 0xC00000BBu)                          \
  X(ND_INTERNAL_ERROR, 0xC00000E5u)                         \
  X(ND_INVALID_PARAMETER_1, 0xC00000EFu)                    \
  X(ND_INVALID_PARAMETER_2, 0xC00000F0u)                    \
  X(ND_INVALID_PARAMETER_3, 0xC00000F1u)                    \
  X(ND_INVALID_PARAMETER_4, 0xC00000F2u)                    \
  X(ND_INVALID_PARAMETER_5, 0xC00000F3u)                    \
  X(ND_INVALID_PARAMETER_6, 0xC00000F4u)                    \
  X(ND_INVALID_PARAMETER_7, 0xC00000F5u)                    \
  X(ND_INVALID_PARAMETER_8, 0xC00000F6u)                    \
  X(ND_INVALID_PARAMETER_9, 0xC00000F7u)                    \
  X(ND_INVALID_PARAMETER_10, 0xC00000F8u)                   \
  X(ND_CANCELED, 0xC0000120u)                               \
  X(ND_REMOTE_ERROR, 0xC000013Du)                           \
  X(ND_INVALID_ADDRESS, 0xC0000141u)                        \
  X(ND_INVALID_DEVICE_STATE, 0xC0000184u)                   \
  X(ND_INVALID_BUFFER_SIZE, 0xC0000206u)                    \
  X(ND_TOO_MANY_ADDRESSES, 0xC0000209u)                     \
  X(ND_ADDRESS_ALREADY_EXISTS, 0xC000020Au)                 \
  X(ND_CONNECTION_REFUSED, 0xC0000236u)                     \
  X(ND_CONNECTION_INVALID, 0xC000023Au)                     \
  X(ND_CONNECTION_ACTIVE, 0xC000023Bu)                      \
  X(ND_NETWORK_UNREACHABLE, 0xC000023Cu)                    \
  X(ND_HOST_UNREACHABLE, 0xC000023Du)                       \
  X(ND_CONNECTION_ABORTED, 0xC0000241u)                     \
  X(ND_DEVICE_REMOVED, 0xC00002B6u)

// Non-ND NTSTATUS values that ND providers and consumers exchange in practice (docs/nd2.md §5).
#define ND_EXTRA_STATUS_LIST(X)                             \
  X(STATUS_CONNECTION_DISCONNECTED, 0xC000020Cu)            \
  X(STATUS_BAD_NETWORK_NAME, 0xC00000CCu)                   \
  X(STATUS_ADDRESS_ALREADY_ASSOCIATED, 0xC0000238u)         \
  X(STATUS_DATA_ERROR, 0xC000003Eu)

#define ND_DEFINE_STATUS_(name, value) constexpr HRESULT name = static_cast<HRESULT>(value);
ND_STATUS_LIST(ND_DEFINE_STATUS_)
#ifndef _WIN32
ND_EXTRA_STATUS_LIST(ND_DEFINE_STATUS_)
#endif
#undef ND_DEFINE_STATUS_

// v1 -> v2 name aliases kept by ndstatus.h.
constexpr HRESULT ND_LOCAL_LENGTH = ND_DATA_OVERRUN;
constexpr HRESULT ND_INVALIDATION_ERROR = ND_INVALID_DEVICE_REQUEST;

// Name of a status for messages; nullptr when unknown.
inline const char* NdStatusName(HRESULT hr) {
  switch (static_cast<unsigned>(hr)) {
#define ND_NAME_CASE_(name, value) \
  case value:                      \
    return #name;
    ND_STATUS_LIST(ND_NAME_CASE_)
    ND_EXTRA_STATUS_LIST(ND_NAME_CASE_)
#undef ND_NAME_CASE_
    default:
      return nullptr;
  }
}
