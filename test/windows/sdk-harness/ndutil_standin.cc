// A stand-in for the ND SDK's ndutil entry points (NdStartup, NdQueryAddressList, NdResolveAddress,
// NdCheckAddress, NdOpenAdapter ...; their declarations are the SDK's ndsupport.h), so the SDK's examples and
// unit tests can run against one provider DLL named by path instead of one found in the Winsock catalog (Wine's
// catalog has no ND providers). Only for running those programs under Wine (test/windows/sdk-harness/run.sh,
// docs/testing.md); it is our code, built against the SDK's headers, and never part of the package.
//
//   NETDIRECT_SDK_PROVIDER=<Windows path of netdirect_soft.dll>
//
// The provider is loaded once (NdStartup) with LoadLibrary, its IND2Provider obtained through
// DllGetClassObject(<its provider id>, IID_IND2Provider) and released again by NdCleanup.
#include <winsock2.h>
#include <ws2tcpip.h>
#include <initguid.h>
#include <ndsupport.h>
#include <ndstatus.h>

#include <cstdio>
#include <cstdlib>

namespace {

// The software provider's id (binding/soft/provider.h).
const GUID kSoftProviderId = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x6f, 0x66, 0x74, 0x00, 0x00, 0x00}};
using GetClassObjectFn = HRESULT(STDMETHODCALLTYPE*)(REFCLSID, REFIID, void**);

HMODULE g_dll = nullptr;
IND2Provider* g_provider = nullptr;
LONG g_startups = 0;

HRESULT load() {
  if (g_provider != nullptr) return S_OK;
  wchar_t path[MAX_PATH];
  if (GetEnvironmentVariableW(L"NETDIRECT_SDK_PROVIDER", path, MAX_PATH) == 0) {
    std::fprintf(stderr, "ndutil stand-in: set NETDIRECT_SDK_PROVIDER to the provider DLL's path\n");
    return ND_DEVICE_NOT_READY;
  }
  g_dll = LoadLibraryW(path);
  if (g_dll == nullptr) {
    std::fprintf(stderr, "ndutil stand-in: LoadLibrary failed (%lu)\n", GetLastError());
    return ND_DEVICE_NOT_READY;
  }
  auto get = reinterpret_cast<GetClassObjectFn>(reinterpret_cast<void*>(GetProcAddress(g_dll, "DllGetClassObject")));
  if (get == nullptr) return ND_DEVICE_NOT_READY;
  void* obj = nullptr;
  const HRESULT hr = get(kSoftProviderId, IID_IND2Provider, &obj);
  if (FAILED(hr)) return hr;
  g_provider = static_cast<IND2Provider*>(obj);
  return S_OK;
}

}  // namespace

extern "C" {

HRESULT ND_HELPER_API NdStartup(VOID) {
  WSADATA wsa;
  if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) return HRESULT_FROM_WIN32(WSAGetLastError());
  const HRESULT hr = load();
  if (SUCCEEDED(hr)) ++g_startups;
  return hr;
}

HRESULT ND_HELPER_API NdCleanup(VOID) {
  if (g_startups > 0 && --g_startups == 0 && g_provider != nullptr) {
    g_provider->Release();
    g_provider = nullptr;
  }
  WSACleanup();
  return S_OK;
}

VOID ND_HELPER_API NdFlushProviders(VOID) {}

HRESULT ND_HELPER_API NdQueryAddressList(DWORD flags, SOCKET_ADDRESS_LIST* pAddressList, SIZE_T* pcbAddressList) {
  if (g_provider == nullptr) return ND_DEVICE_NOT_READY;
  if ((flags & ND_QUERY_EXCLUDE_NDv2_ADDRESSES) != 0) {
    if (*pcbAddressList < sizeof(SOCKET_ADDRESS_LIST)) {
      *pcbAddressList = sizeof(SOCKET_ADDRESS_LIST);
      return ND_BUFFER_OVERFLOW;
    }
    pAddressList->iAddressCount = 0;
    return ND_SUCCESS;
  }
  ULONG cb = static_cast<ULONG>(*pcbAddressList);
  const HRESULT hr = g_provider->QueryAddressList(pAddressList, &cb);
  *pcbAddressList = cb;
  return hr;
}

HRESULT ND_HELPER_API NdResolveAddress(const struct sockaddr* pRemoteAddress, SIZE_T cbRemoteAddress,
                                       struct sockaddr* pLocalAddress, SIZE_T* pcbLocalAddress) {
  // As ndutil does: the local address the system routes to the remote one, if a provider serves it.
  SOCKET s = socket(pRemoteAddress->sa_family, SOCK_DGRAM, IPPROTO_UDP);
  if (s == INVALID_SOCKET) return HRESULT_FROM_WIN32(WSAGetLastError());
  DWORD bytes = 0;
  int rc = WSAIoctl(s, SIO_ROUTING_INTERFACE_QUERY, const_cast<sockaddr*>(pRemoteAddress),
                    static_cast<DWORD>(cbRemoteAddress), pLocalAddress, static_cast<DWORD>(*pcbLocalAddress), &bytes,
                    nullptr, nullptr);
  if (rc == SOCKET_ERROR) {
    // Wine may not implement the routing query for every address; loopback answers loopback.
    const int err = WSAGetLastError();
    closesocket(s);
    if (pRemoteAddress->sa_family != AF_INET || *pcbLocalAddress < sizeof(sockaddr_in))
      return HRESULT_FROM_WIN32(err);
    sockaddr_in* out = reinterpret_cast<sockaddr_in*>(pLocalAddress);
    *out = {};
    out->sin_family = AF_INET;
    out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bytes = sizeof(sockaddr_in);
  } else {
    closesocket(s);
  }
  *pcbLocalAddress = bytes;
  return NdCheckAddress(pLocalAddress, bytes);
}

HRESULT ND_HELPER_API NdCheckAddress(const struct sockaddr* pAddress, SIZE_T cbAddress) {
  if (g_provider == nullptr) return ND_DEVICE_NOT_READY;
  UINT64 id = 0;
  return g_provider->ResolveAddress(pAddress, static_cast<ULONG>(cbAddress), &id);
}

HRESULT ND_HELPER_API NdOpenAdapter(REFIID iid, const struct sockaddr* pAddress, SIZE_T cbAddress,
                                    VOID** ppIAdapter) {
  if (g_provider == nullptr) return ND_DEVICE_NOT_READY;
  UINT64 id = 0;
  HRESULT hr = g_provider->ResolveAddress(pAddress, static_cast<ULONG>(cbAddress), &id);
  if (FAILED(hr)) return hr;
  return g_provider->OpenAdapter(iid, id, ppIAdapter);
}

HRESULT ND_HELPER_API NdOpenV1Adapter(const struct sockaddr*, SIZE_T, INDAdapter**) { return ND_NOT_SUPPORTED; }

}  // extern "C"
