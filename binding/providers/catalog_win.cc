// System ND v2 providers on Windows: the Winsock catalog discovery and lazy loading of ndutil (docs/nd2.md
// §6) — WSCEnumProtocols with the ND v2 filters, WSCGetProviderPath + ExpandEnvironmentStrings,
// LoadLibraryEx, DllGetClassObject(ProviderId, IID_IND2Provider) with the IClassFactory route as fallback,
// DllCanUnloadNow before FreeLibrary — plus loading one provider DLL by path ('path' or 'path#{GUID}'),
// which is how the Wine tier reaches netdirect_soft.dll (Wine's catalog is a stub) and how a user pins a
// vendor. 'auto' is an aggregate IND2Provider over every catalog provider, so openAdapter(address) opens the
// adapter of the provider that owns the address, trying the next owner on failure, as NdOpenAdapter does.
#ifdef _WIN32

#include "providers/catalog_win.h"
#include "providers/driver.h"

#include <ws2spi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "soft/provider.h"

namespace netdirect {

namespace {

constexpr DWORD kNdServiceFlags = XP1_GUARANTEED_DELIVERY | XP1_GUARANTEED_ORDER | XP1_MESSAGE_ORIENTED | XP1_CONNECT_DATA;
constexpr DWORD kNdProviderFlags = PFL_HIDDEN | PFL_NETWORKDIRECT_PROVIDER;

using DllGetClassObjectFn = HRESULT(STDAPICALLTYPE*)(REFCLSID, REFIID, void**);
using DllCanUnloadNowFn = HRESULT(STDAPICALLTYPE*)();

std::string Utf8(const std::wstring& w) {
  if (w.empty()) return {};
  int n = WideCharToMultiByte(CP_UTF8, 0, w.c_str(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w.c_str(), static_cast<int>(w.size()), s.data(), n, nullptr, nullptr);
  return s;
}

std::wstring Wide(const std::string& s) {
  if (s.empty()) return {};
  int n = MultiByteToWideChar(CP_UTF8, 0, s.c_str(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.c_str(), static_cast<int>(s.size()), w.data(), n);
  return w;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string BaseName(const std::string& path) {
  size_t p = path.find_last_of("\\/");
  return p == std::string::npos ? path : path.substr(p + 1);
}

bool ParseGuid(const std::string& text, GUID* out) {
  unsigned long d1 = 0;
  unsigned d2 = 0, d3 = 0, b[8] = {};
  char tail = 0;
  std::string t = text;
  if (!t.empty() && t.front() == '{') t = t.substr(1);
  if (!t.empty() && t.back() == '}') t.pop_back();
  if (std::sscanf(t.c_str(), "%8lx-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x%c", &d1, &d2, &d3, &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &b[6], &b[7], &tail) != 11) {
    return false;
  }
  out->Data1 = d1;
  out->Data2 = static_cast<unsigned short>(d2);
  out->Data3 = static_cast<unsigned short>(d3);
  for (int i = 0; i < 8; ++i) out->Data4[i] = static_cast<unsigned char>(b[i]);
  return true;
}

bool WinsockReady() {
  static const bool ok = [] {
    WSADATA data;
    return WSAStartup(MAKEWORD(2, 2), &data) == 0;
  }();
  return ok;
}

// ---- the catalog ---------------------------------------------------------------------------------------

struct CatalogEntry {
  std::string name;  // szProtocol
  GUID id;
  std::wstring path;  // expanded
};

std::vector<CatalogEntry> EnumerateCatalog(std::string* why) {
  std::vector<CatalogEntry> out;
  if (!WinsockReady()) {
    if (why) *why = "WSAStartup failed";
    return out;
  }
  DWORD len = 0;
  INT err = 0;
  std::vector<unsigned char> buf;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int n = WSCEnumProtocols(nullptr, buf.empty() ? nullptr : reinterpret_cast<WSAPROTOCOL_INFOW*>(buf.data()), &len, &err);
    if (n != SOCKET_ERROR) {
      auto* infos = reinterpret_cast<WSAPROTOCOL_INFOW*>(buf.data());
      for (int i = 0; i < n; ++i) {
        const WSAPROTOCOL_INFOW& p = infos[i];
        if ((p.dwServiceFlags1 & kNdServiceFlags) != kNdServiceFlags) continue;
        if (p.iVersion != ND_VERSION_2 || (p.dwProviderFlags & kNdProviderFlags) != kNdProviderFlags) continue;
        if (p.iAddressFamily != AF_INET && p.iAddressFamily != AF_INET6) continue;
        if (p.iSocketType != -1 || p.iProtocol != 0 || p.iProtocolMaxOffset != 0) continue;
        bool dup = false;
        for (const auto& e : out) dup = dup || IsEqualGUID(e.id, p.ProviderId);
        if (dup) continue;
        CatalogEntry e;
        e.name = Utf8(p.szProtocol);
        e.id = p.ProviderId;
        WCHAR raw[MAX_PATH] = {};
        INT rawLen = MAX_PATH;
        GUID id = p.ProviderId;
        if (WSCGetProviderPath(&id, raw, &rawLen, &err) != 0 || raw[0] == L'\0') continue;
        WCHAR expanded[MAX_PATH] = {};
        DWORD m = ExpandEnvironmentStringsW(raw, expanded, MAX_PATH);
        e.path = (m == 0 || m > MAX_PATH) ? std::wstring(raw) : std::wstring(expanded);
        out.push_back(e);
      }
      return out;
    }
    if (err != WSAENOBUFS) {
      if (why) *why = "WSCEnumProtocols failed (error " + std::to_string(err) + ")";
      return out;
    }
    buf.resize(len);
  }
  return out;
}

// ---- loaded provider DLLs --------------------------------------------------------------------------------

struct Module {
  HMODULE handle = nullptr;
  DllGetClassObjectFn getClassObject = nullptr;
  DllCanUnloadNowFn canUnloadNow = nullptr;
};

std::mutex g_modulesMu;
std::map<std::wstring, Module>& Modules() {
  static auto* m = new std::map<std::wstring, Module>();  // by lower-cased path
  return *m;
}

// ndutil's NdFlushProviders: unload every DLL that says it has no live objects.
void FlushModules() {
  std::lock_guard<std::mutex> lock(g_modulesMu);
  auto& mods = Modules();
  for (auto it = mods.begin(); it != mods.end();) {
    if (it->second.canUnloadNow() == S_OK) {
      FreeLibrary(it->second.handle);
      it = mods.erase(it);
    } else {
      ++it;
    }
  }
}

HRESULT LoadModule(const std::wstring& path, Module* out, std::string* why) {
  std::wstring key = path;
  std::transform(key.begin(), key.end(), key.begin(), ::towlower);
  std::lock_guard<std::mutex> lock(g_modulesMu);
  auto& mods = Modules();
  auto it = mods.find(key);
  if (it != mods.end()) {
    *out = it->second;
    return ND_SUCCESS;
  }
  Module m;
  m.handle = LoadLibraryExW(path.c_str(), nullptr, 0);
  if (m.handle == nullptr) {
    *why = "LoadLibrary(" + Utf8(path) + ") failed with Win32 error " + std::to_string(GetLastError());
    return ND_NOT_SUPPORTED;
  }
  m.getClassObject = reinterpret_cast<DllGetClassObjectFn>(reinterpret_cast<void*>(GetProcAddress(m.handle, "DllGetClassObject")));
  m.canUnloadNow = reinterpret_cast<DllCanUnloadNowFn>(reinterpret_cast<void*>(GetProcAddress(m.handle, "DllCanUnloadNow")));
  if (m.getClassObject == nullptr || m.canUnloadNow == nullptr) {
    FreeLibrary(m.handle);
    *why = Utf8(path) + " is not an ND provider DLL (it lacks DllGetClassObject or DllCanUnloadNow)";
    return ND_NOT_SUPPORTED;
  }
  mods.emplace(key, m);
  *out = m;
  return ND_SUCCESS;
}

// ndutil's route first (the provider directly), then libfabric's (through the class factory).
HRESULT Instantiate(const Module& m, const GUID& id, NdPtr<IND2Provider>* provider) {
  HRESULT hr = m.getClassObject(id, IID_IND2Provider, reinterpret_cast<void**>(provider->put()));
  if (SUCCEEDED(hr) && provider->get() != nullptr) return ND_SUCCESS;
  IClassFactory* factory = nullptr;
  HRESULT hf = m.getClassObject(id, IID_IClassFactory, reinterpret_cast<void**>(&factory));
  if (FAILED(hf) || factory == nullptr) return FAILED(hr) ? hr : hf;
  hr = factory->CreateInstance(nullptr, IID_IND2Provider, reinterpret_cast<void**>(provider->put()));
  factory->Release();
  return hr;
}

HRESULT OpenCatalogEntry(const CatalogEntry& e, NdPtr<IND2Provider>* provider, std::string* why) {
  Module m;
  HRESULT hr = LoadModule(e.path, &m, why);
  if (FAILED(hr)) return hr;
  hr = Instantiate(m, e.id, provider);
  if (FAILED(hr)) *why = "provider '" + e.name + "' (" + Utf8(e.path) + ") could not be instantiated";
  return hr;
}

// ---- 'auto': every catalog provider behind one IND2Provider ----------------------------------------------

HRESULT AddressList(IND2Provider* p, std::vector<unsigned char>* buf) {
  ULONG size = 0;
  HRESULT hr = p->QueryAddressList(nullptr, &size);
  for (int i = 0; i < 4 && hr == ND_BUFFER_OVERFLOW; ++i) {
    buf->assign(size, 0);
    hr = p->QueryAddressList(reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf->data()), &size);
  }
  if (hr == ND_SUCCESS && size == 0) buf->clear();
  return hr;
}

class AutoProvider final : public IND2Provider {
 public:
  struct Member {
    std::string name;
    NdPtr<IND2Provider> provider;
  };
  explicit AutoProvider(std::vector<Member> members) : members_(std::move(members)) {}

  HRESULT STDMETHODCALLTYPE QueryInterface(REFIID riid, void** ppv) override {
    if (ppv == nullptr) return E_POINTER;
    if (IsEqualGUID(riid, IID_IUnknown) || IsEqualGUID(riid, IID_IND2Provider)) {
      AddRef();
      *ppv = static_cast<IND2Provider*>(this);
      return S_OK;
    }
    *ppv = nullptr;
    return E_NOINTERFACE;
  }
  ULONG STDMETHODCALLTYPE AddRef() override { return static_cast<ULONG>(refs_.fetch_add(1) + 1); }
  ULONG STDMETHODCALLTYPE Release() override {
    long left = refs_.fetch_sub(1) - 1;
    if (left == 0) delete this;
    return static_cast<ULONG>(left);
  }

  // The members' addresses, IPv4 entries ≥ 16 bytes and IPv6 ≥ 28 (ndutil), in member order.
  HRESULT STDMETHODCALLTYPE QueryAddressList(SOCKET_ADDRESS_LIST* list, ULONG* size) override {
    if (size == nullptr) return ND_INVALID_PARAMETER_2;
    std::vector<std::vector<unsigned char>> addrs;
    for (auto& m : members_) {
      std::vector<unsigned char> buf;
      if (FAILED(AddressList(m.provider.get(), &buf)) || buf.empty()) continue;
      auto* l = reinterpret_cast<SOCKET_ADDRESS_LIST*>(buf.data());
      for (INT i = 0; i < l->iAddressCount; ++i) {
        const SOCKET_ADDRESS& a = l->Address[i];
        if (a.lpSockaddr == nullptr) continue;
        const INT need = a.lpSockaddr->sa_family == AF_INET6 ? 28 : 16;
        if ((a.lpSockaddr->sa_family != AF_INET && a.lpSockaddr->sa_family != AF_INET6) || a.iSockaddrLength < need) continue;
        auto* p = reinterpret_cast<const unsigned char*>(a.lpSockaddr);
        addrs.emplace_back(p, p + need);
      }
    }
    const size_t head = offsetof(SOCKET_ADDRESS_LIST, Address) + addrs.size() * sizeof(SOCKET_ADDRESS);
    size_t need = head;
    for (const auto& a : addrs) need += a.size();
    if (list == nullptr || *size < need) {
      *size = static_cast<ULONG>(need);
      return ND_BUFFER_OVERFLOW;
    }
    auto* base = reinterpret_cast<unsigned char*>(list);
    size_t off = head;
    list->iAddressCount = static_cast<INT>(addrs.size());
    for (size_t i = 0; i < addrs.size(); ++i) {
      std::memcpy(base + off, addrs[i].data(), addrs[i].size());
      list->Address[i].lpSockaddr = reinterpret_cast<LPSOCKADDR>(base + off);
      list->Address[i].iSockaddrLength = static_cast<INT>(addrs[i].size());
      off += addrs[i].size();
    }
    *size = static_cast<ULONG>(need);
    return ND_SUCCESS;
  }

  // The adapter id handed out is a token naming the address; OpenAdapter resolves it with each owner in turn.
  HRESULT STDMETHODCALLTYPE ResolveAddress(const sockaddr* address, ULONG length, UINT64* adapterId) override {
    if (adapterId == nullptr) return ND_INVALID_PARAMETER_3;
    if (address == nullptr || length < sizeof(sockaddr) || length > 128) return ND_INVALID_PARAMETER;
    HRESULT last = ND_INVALID_ADDRESS;
    for (auto& m : members_) {
      UINT64 id = 0;
      HRESULT hr = m.provider->ResolveAddress(address, length, &id);
      if (SUCCEEDED(hr)) {
        std::lock_guard<std::mutex> lock(mu_);
        Resolved r;
        r.address.assign(reinterpret_cast<const unsigned char*>(address), reinterpret_cast<const unsigned char*>(address) + length);
        *adapterId = nextToken_;
        tokens_[nextToken_++] = r;
        return ND_SUCCESS;
      }
      last = hr;
    }
    return last;
  }

  HRESULT STDMETHODCALLTYPE OpenAdapter(REFIID iid, UINT64 adapterId, void** adapter) override {
    if (adapter == nullptr) return ND_INVALID_PARAMETER_3;
    *adapter = nullptr;
    Resolved r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tokens_.find(adapterId);
      if (it == tokens_.end()) return ND_INVALID_PARAMETER_2;
      r = it->second;
    }
    HRESULT last = ND_INVALID_ADDRESS;
    const auto* sa = reinterpret_cast<const sockaddr*>(r.address.data());
    for (auto& m : members_) {
      UINT64 id = 0;
      HRESULT hr = m.provider->ResolveAddress(sa, static_cast<ULONG>(r.address.size()), &id);
      if (SUCCEEDED(hr)) hr = m.provider->OpenAdapter(iid, id, adapter);
      if (SUCCEEDED(hr)) return hr;
      last = hr;
    }
    return last;
  }

 private:
  ~AutoProvider() = default;
  struct Resolved {
    std::vector<unsigned char> address;
  };
  std::vector<Member> members_;
  std::atomic<long> refs_{1};
  std::mutex mu_;
  std::map<UINT64, Resolved> tokens_;
  UINT64 nextToken_ = 1;
};

const char* kNoProviderAdvice =
    "no ND v2 provider is registered in the Winsock catalog. Install the adapter vendor's ND v2 provider (Intel "
    "Ethernet: the user-mode iWARP/RDMA feature of the driver package, i40wb.dll), check it with `netdirect doctor`, "
    "or choose one explicitly: provider: 'soft' (built in) or '<path to provider DLL>[#{GUID}]'";

}  // namespace

std::vector<ProviderInfo> ListSystemProviders() {
  std::vector<ProviderInfo> out;
  for (const auto& e : EnumerateCatalog(nullptr)) {
    ProviderInfo p;
    p.name = e.name;
    p.kind = "system";
    p.path = Utf8(e.path);
    p.guid = GuidString(e.id);
    p.ndVersion = ND_VERSION_2;
    out.push_back(p);
  }
  return out;
}

HRESULT GetSystemProvider(const std::string& spec, NdPtr<IND2Provider>* provider, std::string* resolvedName,
                          std::string* why) {
  FlushModules();
  if (spec == "auto" || spec.empty()) {
    // The test seam: Wine has no catalog, so the Windows tier names the provider DLL in the environment.
    const char* env = std::getenv("NETDIRECT_PROVIDER");
    if (env != nullptr && *env != '\0' && std::strcmp(env, "auto") != 0) {
      return GetSystemProvider(env, provider, resolvedName, why);
    }
    std::string enumWhy;
    std::vector<CatalogEntry> catalog = EnumerateCatalog(&enumWhy);
    std::vector<AutoProvider::Member> members;
    std::string names, lastWhy;
    for (const auto& e : catalog) {
      AutoProvider::Member m;
      m.name = e.name;
      if (FAILED(OpenCatalogEntry(e, &m.provider, &lastWhy))) continue;  // one bad provider does not stop the rest
      names += (names.empty() ? "" : ", ") + e.name;
      members.push_back(std::move(m));
    }
    if (members.empty()) {
      *why = catalog.empty() ? (enumWhy.empty() ? std::string(kNoProviderAdvice) : enumWhy + "; " + kNoProviderAdvice)
                             : "no ND v2 provider of the Winsock catalog could be loaded: " + lastWhy;
      return ND_NOT_SUPPORTED;
    }
    auto* agg = new (std::nothrow) AutoProvider(std::move(members));
    if (agg == nullptr) return ND_NO_MEMORY;
    provider->reset();
    *provider->put() = agg;
    *resolvedName = names;
    return ND_SUCCESS;
  }

  // 'path#{GUID}', a DLL path, or a catalog name / DLL name.
  std::string path = spec;
  GUID id{};
  bool haveId = false;
  size_t hash = spec.rfind('#');
  if (hash != std::string::npos) {
    if (!ParseGuid(spec.substr(hash + 1), &id)) {
      *why = "provider '" + spec + "': the part after '#' is not a GUID like {6E657464-6972-6563-7473-6F6674000000}";
      return ND_INVALID_PARAMETER;
    }
    haveId = true;
    path = spec.substr(0, hash);
  }
  const bool isPath = path.find_first_of("\\/") != std::string::npos;
  std::vector<CatalogEntry> catalog = EnumerateCatalog(nullptr);
  for (const auto& e : catalog) {
    const std::string p = Lower(Utf8(e.path));
    const bool match = isPath ? p == Lower(path)
                              : Lower(e.name) == Lower(path) || Lower(BaseName(p)) == Lower(path) ||
                                    Lower(BaseName(p)) == Lower(path) + ".dll";
    if (match && (!haveId || IsEqualGUID(id, e.id))) {
      HRESULT hr = OpenCatalogEntry(e, provider, why);
      if (SUCCEEDED(hr)) *resolvedName = e.name;
      return hr;
    }
  }
  if (!isPath) {
    *why = "provider '" + spec + "' is neither 'soft', 'auto', a provider of the Winsock catalog (" +
           std::to_string(catalog.size()) + " ND v2 provider(s) there) nor a DLL path";
    return ND_NOT_SUPPORTED;
  }
  Module m;
  HRESULT hr = LoadModule(Wide(path), &m, why);
  if (FAILED(hr)) return hr;
  // Not in the catalog and no GUID given: the built-in provider's id is the one a netdirect_soft.dll answers.
  hr = Instantiate(m, haveId ? id : NETDIRECT_SOFT_PROVIDER_ID, provider);
  if (FAILED(hr)) {
    *why = "provider DLL " + path + " refused DllGetClassObject" +
           (haveId ? std::string(" for ") + GuidString(id) : std::string("; give its provider GUID as '") + path + "#{GUID}'");
    return hr;
  }
  *resolvedName = spec;
  return ND_SUCCESS;
}

namespace {

void ListCatalog(std::vector<ProviderInfo>* out) {
  std::vector<ProviderInfo> system = ListSystemProviders();
  out->insert(out->end(), system.begin(), system.end());
}

// Every spec the built-in drivers before it did not claim: 'auto', a catalog name, a DLL name or path.
bool ClaimsAny(const std::string& /*spec*/) { return true; }

const ProviderDriver kCatalogDriver{20, nullptr, ListCatalog, ClaimsAny, GetSystemProvider, nullptr};

}  // namespace

NETDIRECT_PROVIDER_DRIVER(kCatalogDriver);

// ---- registering netdirect_soft.dll (netdirect provider install|uninstall) --------------------------------
//
// As vendor ND v2 installers do (docs/nd2.md §6; NetworkDirectSPI.md in microsoft/NetworkDirect): one WSAPROTOCOL_INFOW per
// address family, with the ND service and provider flags, iVersion ND_VERSION_2, iSocketType -1, iProtocol 0 and
// the provider's GUID, through WSCInstallProvider64_32 (64-bit and 32-bit catalogs under one catalog id) where
// ws2_32 exports it, else WSCInstallProvider. A reported success is not trusted: the catalog is read back, and
// an entry that did not appear fails with the reason (Wine's WSCInstallProvider returns 0 and records nothing).

namespace {

using InstallFn = int(WSPAPI*)(LPGUID, const WCHAR*, LPWSAPROTOCOL_INFOW, DWORD, LPINT);
using DeinstallFn = int(WSPAPI*)(LPGUID, LPINT);

FARPROC Ws2Proc(const char* name) {
  HMODULE ws2 = GetModuleHandleW(L"ws2_32.dll");
  return ws2 == nullptr ? nullptr : GetProcAddress(ws2, name);
}

bool SoftInCatalog(std::wstring* path) {
  std::string why;
  for (const CatalogEntry& e : EnumerateCatalog(&why)) {
    if (IsEqualGUID(e.id, NETDIRECT_SOFT_PROVIDER_ID)) {
      if (path != nullptr) *path = e.path;
      return true;
    }
  }
  return false;
}

}  // namespace

HRESULT InstallSoftProvider(const std::string& dllPath, std::string* how, std::string* why) {
  if (!WinsockReady()) {
    *why = "WSAStartup failed";
    return ND_UNSUCCESSFUL;
  }
  const std::wstring path = Wide(dllPath);
  const DWORD attrs = GetFileAttributesW(path.c_str());
  if (attrs == INVALID_FILE_ATTRIBUTES || (attrs & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    *why = dllPath + " is not a file";
    return ND_INVALID_PARAMETER;
  }
  std::wstring existing;
  if (SoftInCatalog(&existing)) {
    if (_wcsicmp(existing.c_str(), path.c_str()) == 0) {
      *how = "already registered";
      return ND_SUCCESS;
    }
    *why = "the catalog already has netdirect's provider at " + Utf8(existing) +
           "; run 'netdirect provider uninstall' first";
    return ND_INVALID_PARAMETER;
  }
  WSAPROTOCOL_INFOW infos[2] = {};
  const int families[2] = {AF_INET, AF_INET6};
  for (int i = 0; i < 2; ++i) {
    WSAPROTOCOL_INFOW& p = infos[i];
    p.dwServiceFlags1 = kNdServiceFlags;
    p.dwProviderFlags = kNdProviderFlags;
    p.ProviderId = NETDIRECT_SOFT_PROVIDER_ID;
    p.ProtocolChain.ChainLen = BASE_PROTOCOL;
    p.iVersion = ND_VERSION_2;
    p.iAddressFamily = families[i];
    p.iMaxSockAddr = static_cast<int>(sizeof(sockaddr_in6));
    p.iMinSockAddr = static_cast<int>(families[i] == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    p.iSocketType = -1;
    p.iProtocol = 0;
    p.iProtocolMaxOffset = 0;
    p.iNetworkByteOrder = BIGENDIAN;
    p.iSecurityScheme = SECURITY_PROTOCOL_NONE;
    wcsncpy(p.szProtocol, families[i] == AF_INET ? L"netdirect software iWARP (ND v2, IPv4)" : L"netdirect software iWARP (ND v2, IPv6)",
            WSAPROTOCOL_LEN);
  }
  auto install64_32 = reinterpret_cast<InstallFn>(reinterpret_cast<void*>(Ws2Proc("WSCInstallProvider64_32")));
  InstallFn install = install64_32 != nullptr ? install64_32 : &WSCInstallProvider;
  *how = install64_32 != nullptr ? "WSCInstallProvider64_32" : "WSCInstallProvider (ws2_32 has no WSCInstallProvider64_32)";
  GUID id = NETDIRECT_SOFT_PROVIDER_ID;
  INT err = 0;
  if (install(&id, path.c_str(), infos, 2, &err) != 0) {
    *why = std::string(install64_32 != nullptr ? "WSCInstallProvider64_32" : "WSCInstallProvider") + " failed (Winsock error " +
           std::to_string(err) + (err == WSAEACCES || err == WSANO_RECOVERY ? "; run as Administrator" : "") + ")";
    return ND_UNSUCCESSFUL;
  }
  if (!SoftInCatalog(nullptr)) {
    *why = *how + " reported success but the catalog has no entry for {6E657464-6972-6563-7473-6F6674000000} "
           "afterwards (Wine's ws2_32 implements it as a stub that records nothing)";
    return ND_NOT_SUPPORTED;
  }
  return ND_SUCCESS;
}

HRESULT UninstallSoftProvider(std::string* how, std::string* why) {
  if (!WinsockReady()) {
    *why = "WSAStartup failed";
    return ND_UNSUCCESSFUL;
  }
  if (!SoftInCatalog(nullptr)) {
    *how = "not registered";
    return ND_SUCCESS;
  }
  GUID id = NETDIRECT_SOFT_PROVIDER_ID;
  INT err = 0;
  if (WSCDeinstallProvider(&id, &err) != 0) {
    *why = "WSCDeinstallProvider failed (Winsock error " + std::to_string(err) +
           (err == WSAEACCES || err == WSANO_RECOVERY ? "; run as Administrator" : "") + ")";
    return ND_UNSUCCESSFUL;
  }
  *how = "WSCDeinstallProvider";
  // The 32-bit catalog's entry (WSCInstallProvider64_32 made one there too).
  if (auto deinstall32 = reinterpret_cast<DeinstallFn>(reinterpret_cast<void*>(Ws2Proc("WSCDeinstallProvider32")))) {
    err = 0;
    if (deinstall32(&id, &err) == 0) *how += " + WSCDeinstallProvider32";
  }
  if (SoftInCatalog(nullptr)) {
    *why = "WSCDeinstallProvider reported success but the catalog still lists netdirect's provider";
    return ND_UNSUCCESSFUL;
  }
  return ND_SUCCESS;
}

}  // namespace netdirect

#endif  // _WIN32
