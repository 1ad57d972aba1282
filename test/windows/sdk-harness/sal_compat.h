// Force-included (-include) by test/windows/sdk-harness/build.sh: the ND SDK's headers use old-style SAL
// annotations (__in, __out_bcount_part_opt(...) ...) that mingw-w64's headers do not define; they mean nothing
// to the compiler. libstdc++ names parameters __in and __out, so the C++ headers the SDK's programs use are
// included first (their include guards make later includes no-ops).
#pragma once
#include <algorithm>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <sal.h>
#define __in
#define __in_opt
#define __out
#define __out_opt
#define __inout
#define __inout_opt
#define __deref_out
#define __in_bcount(x)
#define __in_bcount_opt(x)
#define __in_ecount_opt(x)
#define __inout_bcount_opt(x)
#define __out_bcount_opt(x)
#define __out_bcount_part_opt(x, y)
#define __out_ecount_part(x, y)
#define __out_ecount_part_opt(x, y)
#ifndef __analysis_assume
#define __analysis_assume(x)
#endif
#ifndef _Analysis_noreturn_
#define _Analysis_noreturn_
#endif
#ifndef __callback
#define __callback
#endif
using std::max;
using std::min;
