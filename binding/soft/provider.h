// The software ND v2 provider's entry points. In the addon it is linked in and reached through
// NdSoftGetProvider; built as a Windows provider DLL the same object is returned by DllGetClassObject.
#ifndef NETDIRECT_SOFT_PROVIDER_H_
#define NETDIRECT_SOFT_PROVIDER_H_

#include "nd/nd2.h"

// The provider's id ("ProviderId" GUID of its Winsock catalog entry when installed on Windows).
// {6E657464-6972-6563-7473-6F6674000000}
inline const GUID NETDIRECT_SOFT_PROVIDER_ID = {0x6e657464, 0x6972, 0x6563, {0x74, 0x73, 0x6f, 0x66, 0x74, 0x00, 0x00, 0x00}};

// Returns a new IND2Provider (iid must be IID_IND2Provider or IID_IUnknown).
extern "C" HRESULT NdSoftGetProvider(REFIID iid, VOID** ppProvider);
// True when the provider's CRC32c runs on the CPU's crc32 instruction.
extern "C" bool NdSoftHardwareCrc32c();
// Which CRC32c implementation runs: "avx512-vpclmulqdq", "pclmulqdq", "sse4.2" or "table".
extern "C" const char* NdSoftCrc32cImplementation();

#endif  // NETDIRECT_SOFT_PROVIDER_H_
