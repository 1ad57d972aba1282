// netdirect_soft.dll: the software provider as a Windows ND v2 provider DLL, instantiated exactly like a
// vendor's (i40wb.dll): DllGetClassObject(ProviderId, IID_IND2Provider) returns the provider directly
// (ndutil's route); DllGetClassObject(ProviderId, IID_IClassFactory) returns a class factory whose
// CreateInstance(NULL, IID_IND2Provider) does (libfabric's route). DllCanUnloadNow says S_OK once no
// provider object is alive and the factory is not locked.
#ifdef _WIN32

#include <atomic>
#include <new>

#include "soft/object.h"
#include "soft/provider.h"

namespace {

std::atomic<long> g_locks{0};

class ClassFactory final : public IClassFactory {
 public:
  HRESULT STDMETHODCALLTYPE QueryInterface(REFIID riid, void** ppv) override {
    if (ppv == nullptr) return E_POINTER;
    if (IsEqualGUID(riid, IID_IUnknown) || IsEqualGUID(riid, IID_IClassFactory)) {
      *ppv = static_cast<IClassFactory*>(this);
      AddRef();
      return S_OK;
    }
    *ppv = nullptr;
    return E_NOINTERFACE;
  }
  // A static object: references only keep the DLL loaded.
  ULONG STDMETHODCALLTYPE AddRef() override { return static_cast<ULONG>(g_locks.fetch_add(1) + 1); }
  ULONG STDMETHODCALLTYPE Release() override { return static_cast<ULONG>(g_locks.fetch_sub(1) - 1); }
  HRESULT STDMETHODCALLTYPE CreateInstance(IUnknown* outer, REFIID riid, void** ppv) override {
    if (ppv == nullptr) return E_POINTER;
    *ppv = nullptr;
    if (outer != nullptr) return CLASS_E_NOAGGREGATION;
    return NdSoftGetProvider(riid, ppv);
  }
  HRESULT STDMETHODCALLTYPE LockServer(BOOL lock) override {
    if (lock)
      g_locks.fetch_add(1);
    else
      g_locks.fetch_sub(1);
    return S_OK;
  }
};

ClassFactory g_factory;

// The provider's threads can run this DLL's code for a moment after its last object is gone and
// DllCanUnloadNow has said S_OK: an engine thread on its way out, and the thread that destroys an engine whose
// last reference went on that engine's own thread (soft/adapter.cc). A consumer that unloads as soon as it may
// (ndutil's NdFlushProviders, and the addon's provider cache on every openAdapter: binding/providers/catalog_win.cc)
// would pull the code from under them: under Wine that was an execute page fault inside the unloaded DLL, or a
// failed std::thread join, in about 1 of 4 runs of test/posting.test.ts. So the module pins itself in the
// process once it hands out a provider (GetModuleHandleExW with GET_MODULE_HANDLE_EX_FLAG_PIN), as the addon
// pins itself; DllCanUnloadNow still tells the truth about live objects.
void pin_module() {
  static std::atomic<bool> pinned{false};
  if (pinned.exchange(true)) return;
  HMODULE self = nullptr;
  GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                     reinterpret_cast<LPCWSTR>(reinterpret_cast<void*>(&pin_module)), &self);
}

}  // namespace

extern "C" HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void** ppv) {
  if (ppv == nullptr) return E_POINTER;
  *ppv = nullptr;
  if (!IsEqualGUID(rclsid, NETDIRECT_SOFT_PROVIDER_ID)) return CLASS_E_CLASSNOTAVAILABLE;
  pin_module();
  if (IsEqualGUID(riid, IID_IND2Provider)) return NdSoftGetProvider(riid, ppv);
  return g_factory.QueryInterface(riid, ppv);
}

extern "C" HRESULT STDMETHODCALLTYPE DllCanUnloadNow() {
  return netdirect::soft::live_objects().load() == 0 && g_locks.load() == 0 ? S_OK : S_FALSE;
}

#endif  // _WIN32
