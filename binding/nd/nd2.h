// The ND v2 ABI in one include: on Windows the SDK's Win32 types, elsewhere nd_compat.h; then the status
// codes, structs/flags and interfaces. Self-contained: includes nothing else of netdirect's.
#pragma once

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
// ntstatus.h supplies the NTSTATUS names ND providers exchange (STATUS_CONNECTION_DISCONNECTED, ...);
// WIN32_NO_STATUS keeps winnt.h's subset of them from clashing with it.
#define WIN32_NO_STATUS
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#undef WIN32_NO_STATUS
#if !defined(_NTDEF_) && !defined(_NTSTATUS_PSDK)  // the SDK's own guard for this typedef
#define _NTSTATUS_PSDK
typedef LONG NTSTATUS, *PNTSTATUS;
#endif
#include <ntstatus.h>
#include <unknwn.h>
#define ND_CALL STDMETHODCALLTYPE
#else
#include "nd_compat.h"
#endif

#include "nd_status.h"
#include "nd_def.h"
#include "nd_spi.h"
