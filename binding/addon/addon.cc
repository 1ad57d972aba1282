// Module entry: exports per lib/native.ts (NativeBinding), the NdError plumbing and shared helpers.
#include "addon/addon.h"

#ifndef _WIN32
#include <dlfcn.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef _WIN32
#include <arpa/inet.h>  // inet_pton/inet_ntop (ws2tcpip.h, included by nd2.h, on Windows)
#endif

#include "addon/adapter.h"
#include "addon/completion_queue.h"
#include "addon/connector.h"
#include "addon/listener.h"
#include "addon/memory_region.h"
#include "addon/memory_window.h"
#include "providers/providers.h"
#include "addon/queue_pair.h"
#include "delivery/records.h"
#include "addon/shared_receive_queue.h"
#include "bench/bench.h"

#ifndef NETDIRECT_VERSION
#define NETDIRECT_VERSION "0.0.0-dev"
#endif

namespace netdirect {

AddonData* GetAddonData(Napi::Env env) { return env.GetInstanceData<AddonData>(); }

// ---- errors ----------------------------------------------------------------------------------------------

void ThrowNdError(Napi::Env env, const char* code, HRESULT status, const char* operation, const std::string& message) {
  const double ustatus = static_cast<double>(static_cast<uint32_t>(status));
  AddonData* data = GetAddonData(env);
  if (data != nullptr && !data->errorFactory.IsEmpty()) {
    Napi::Value err = data->errorFactory.Call({Napi::String::New(env, code), Napi::Number::New(env, ustatus),
                                               Napi::String::New(env, operation), Napi::String::New(env, message)});
    if (err.IsObject()) throw Napi::Error(env, err);
  }
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  e.Set("status", Napi::Number::New(env, ustatus));
  e.Set("operation", Napi::String::New(env, operation));
  throw e;
}

void ThrowNdStatus(Napi::Env env, HRESULT status, const char* operation) {
  const char* name = NdStatusName(status);
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%08X", static_cast<unsigned>(status));
  std::string code = name != nullptr ? name : std::string("ND_STATUS_") + hex;
  ThrowNdError(env, code.c_str(), status, operation, std::string(operation) + " failed: " + code + " (" + hex + ")");
}

void ThrowMisuse(Napi::Env env, const char* code, const char* operation, const std::string& message) {
  ThrowNdError(env, code, 0, operation, std::string(operation) + ": " + message);
}

// ---- type tags -------------------------------------------------------------------------------------------

void TagObject(Napi::Object obj, const napi_type_tag& tag) {
  napi_status s = napi_type_tag_object(obj.Env(), obj, &tag);
  if (s != napi_ok) NAPI_THROW_VOID(Napi::Error::New(obj.Env(), "netdirect: napi_type_tag_object failed"));
}

bool HasTag(Napi::Value value, const napi_type_tag& tag) {
  if (!value.IsObject()) return false;
  bool result = false;
  if (napi_check_object_type_tag(value.Env(), value, &tag, &result) != napi_ok) return false;
  return result;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// ---- arguments -------------------------------------------------------------------------------------------

std::string ArgString(const Napi::CallbackInfo& info, size_t i, const char* operation, const char* what) {
  if (!info[i].IsString())
    ThrowMisuse(info.Env(), "ERR_ND_INVALID_ARGUMENT", operation, std::string(what) + " must be a string");
  return info[i].As<Napi::String>().Utf8Value();
}

Bytes ArgBytesOrNull(const Napi::CallbackInfo& info, size_t i, const char* operation) {
  Bytes b;
  Napi::Value v = info[i];
  if (v.IsNull() || v.IsUndefined()) return b;
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    ThrowMisuse(info.Env(), "ERR_ND_INVALID_ARGUMENT", operation, "private data must be a Uint8Array or null");
  Napi::Uint8Array a = v.As<Napi::Uint8Array>();
  b.data = a.Data();
  b.length = a.ByteLength();
  return b;
}

SockAddr ParseAddress(Napi::Env env, const std::string& hostIn, uint32_t port, const char* operation) {
  SockAddr out;
  std::memset(&out.storage, 0, sizeof(out.storage));
  std::string host = hostIn;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port > 65535) ThrowMisuse(env, "ERR_ND_INVALID_ADDRESS", operation, "port " + std::to_string(port) + " > 65535");
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out.length = sizeof(sockaddr_in);
    return out;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  std::string addr = host;
  uint32_t scope = 0;
  const size_t pct = host.find('%');
  if (pct != std::string::npos) {
    addr = host.substr(0, pct);
    const std::string zone = host.substr(pct + 1);
    char* end = nullptr;
    scope = static_cast<uint32_t>(std::strtoul(zone.c_str(), &end, 10));
    if (zone.empty() || end == nullptr || *end != '\0')
      ThrowMisuse(env, "ERR_ND_INVALID_ADDRESS", operation, "IPv6 zone must be numeric in '" + hostIn + "'");
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    v6->sin6_scope_id = scope;
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  ThrowMisuse(env, "ERR_ND_INVALID_ADDRESS", operation,
              "'" + hostIn + "' is not a numeric IPv4 or IPv6 address");
}

bool FormatAddress(const sockaddr* sa, std::string* host, uint16_t* port) {
  char buf[64];
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    if (inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf)) == nullptr) return false;
    *host = buf;
    *port = ntohs(v4->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf)) == nullptr) return false;
    *host = buf;
    if (v6->sin6_scope_id != 0) *host += "%" + std::to_string(v6->sin6_scope_id);
    *port = ntohs(v6->sin6_port);
    return true;
  }
  return false;
}

Napi::Object AddressObject(Napi::Env env, const sockaddr* sa) {
  std::string host;
  uint16_t port = 0;
  FormatAddress(sa, &host, &port);
  Napi::Object o = Napi::Object::New(env);
  o.Set("host", Napi::String::New(env, host));
  o.Set("port", Napi::Number::New(env, port));
  return o;
}

// ---- module functions ------------------------------------------------------------------------------------

namespace {

Napi::Value SetErrorFactory(const Napi::CallbackInfo& info) {
  if (!info[0].IsFunction())
    ThrowMisuse(info.Env(), "ERR_ND_INVALID_ARGUMENT", "setErrorFactory", "factory must be a function");
  GetAddonData(info.Env())->errorFactory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Value ListProvidersJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<ProviderInfo> list = ListProviders();
  Napi::Array out = Napi::Array::New(env, list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", list[i].name);
    o.Set("kind", list[i].kind);
    if (!list[i].path.empty()) o.Set("path", list[i].path);
    if (!list[i].guid.empty()) o.Set("guid", list[i].guid);
    o.Set("ndVersion", Napi::Number::New(env, list[i].ndVersion));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

// catalogInstall(dllPath) / catalogUninstall(): netdirect_soft.dll in the Winsock catalog (catalog_win.cc);
// returns what was done, throws NdError with the reason (ND_NOT_SUPPORTED off Windows and where the catalog does
// not keep the entry, as under Wine).
Napi::Value CatalogInstall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "providerInstall";
  std::string path = ArgString(info, 0, op, "dllPath");
#ifdef _WIN32
  std::string how, why;
  HRESULT hr = InstallSoftProvider(path, &how, &why);
  if (FAILED(hr)) ThrowNdError(env, NdStatusName(hr) ? NdStatusName(hr) : "ND_UNSUCCESSFUL", hr, op, why);
  return Napi::String::New(env, how);
#else
  (void)path;
  ThrowNdError(env, "ND_NOT_SUPPORTED", ND_NOT_SUPPORTED, op, "the Winsock catalog exists on Windows only");
#endif
}

Napi::Value CatalogUninstall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "providerUninstall";
#ifdef _WIN32
  std::string how, why;
  HRESULT hr = UninstallSoftProvider(&how, &why);
  if (FAILED(hr)) ThrowNdError(env, NdStatusName(hr) ? NdStatusName(hr) : "ND_UNSUCCESSFUL", hr, op, why);
  return Napi::String::New(env, how);
#else
  ThrowNdError(env, "ND_NOT_SUPPORTED", ND_NOT_SUPPORTED, op, "the Winsock catalog exists on Windows only");
#endif
}

Napi::Value ListAddresses(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "listAddresses";
  std::string spec = ArgString(info, 0, op, "provider");
  NdPtr<IND2Provider> provider;
  std::string name, why;
  HRESULT hr = GetProvider(spec, &provider, &name, &why);
  if (FAILED(hr)) ThrowNdError(env, NdStatusName(hr) ? NdStatusName(hr) : "ND_UNSUCCESSFUL", hr, op, why);
  std::vector<std::string> list;
  IND2Provider* p = provider.get();
  hr = QueryAddressStrings([p](SOCKET_ADDRESS_LIST* l, ULONG* cb) { return p->QueryAddressList(l, cb); }, &list);
  if (FAILED(hr)) ThrowNdStatus(env, hr, op);
  Napi::Array out = Napi::Array::New(env, list.size());
  for (size_t i = 0; i < list.size(); ++i) out.Set(static_cast<uint32_t>(i), list[i]);
  return out;
}

Napi::Value HardwareCrc32c(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), SoftHardwareCrc32c());
}

Napi::Value Crc32cImplementation(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), SoftCrc32cImplementation());
}

Napi::Object StatusNames(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
#define ND_NAME_ENTRY_(name, value) o.Set(Napi::Number::New(env, static_cast<double>(value)), #name);
  ND_STATUS_LIST(ND_NAME_ENTRY_)
  ND_EXTRA_STATUS_LIST(ND_NAME_ENTRY_)
#undef ND_NAME_ENTRY_
  return o;
}

// The record kind table of records.h, jsName -> value: a test compares it with lib/records.ts RECORD_KINDS.
Napi::Object RecordKinds(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
#define RECORD_KIND_ENTRY_(name, value, jsName) o.Set(jsName, Napi::Number::New(env, static_cast<double>(kKind##name)));
  NETDIRECT_RECORD_KINDS(RECORD_KIND_ENTRY_)
#undef RECORD_KIND_ENTRY_
  return o;
}

// Keeps this module mapped until the process ends. Node unloads an addon when the last environment that loaded it
// goes away (a worker that exits); but the provider's threads may still be finishing a teardown then (an engine
// thread destroying its adapter), and libuv runs the close callbacks of the event-loop mode's handles after the
// cleanup hooks — all code of this module. Pinned, none of it can be unmapped under them.
void PinModule() {
  static bool pinned = [] {
#ifdef _WIN32
    HMODULE self = nullptr;
    return GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                              reinterpret_cast<LPCWSTR>(&PinModule), &self) != FALSE;
#else
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&PinModule), &info) != 0 && info.dli_fname != nullptr &&
           dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;
#endif
  }();
  (void)pinned;  // if it fails the module is merely unloadable, as any addon
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  PinModule();
  auto* data = new AddonData();
  env.SetInstanceData<AddonData>(data);
  data->adapterCtor = Napi::Persistent(Adapter::Init(env));
  data->completionQueueCtor = Napi::Persistent(CompletionQueue::Define(env));
  data->queuePairCtor = Napi::Persistent(QueuePair::Define(env));
  data->memoryRegionCtor = Napi::Persistent(MemoryRegion::Define(env));
  data->memoryWindowCtor = Napi::Persistent(MemoryWindow::Define(env));
  data->sharedReceiveQueueCtor = Napi::Persistent(SharedReceiveQueue::Define(env));
  data->connectorCtor = Napi::Persistent(Connector::Define(env));
  data->listenerCtor = Napi::Persistent(Listener::Define(env));

  exports.Set("version", Napi::String::New(env, NETDIRECT_VERSION));
  exports.Set("statusNames", StatusNames(env));
  exports.Set("recordKinds", RecordKinds(env));
  exports.Set("recordWords", Napi::Number::New(env, kRecordWords));
  exports.Set("recordSilent", Napi::Number::New(env, kRecordSilent));
  exports.Set("setErrorFactory", Napi::Function::New(env, SetErrorFactory, "setErrorFactory"));
  exports.Set("listProviders", Napi::Function::New(env, ListProvidersJs, "listProviders"));
  // The providers compiled into this addon, whether or not this machine can run them (listProviders() says that):
  // lets lib/ and the install script tell "not built" from "no rdma-core" or "no device".
  Napi::Array built = Napi::Array::New(env);
  for (const std::string& name : BuiltProviders()) built.Set(built.Length(), Napi::String::New(env, name));
  exports.Set("builtProviders", built);
  exports.Set("listAddresses", Napi::Function::New(env, ListAddresses, "listAddresses"));
  exports.Set("catalogInstall", Napi::Function::New(env, CatalogInstall, "catalogInstall"));
  exports.Set("catalogUninstall", Napi::Function::New(env, CatalogUninstall, "catalogUninstall"));
  exports.Set("hardwareCrc32c", Napi::Function::New(env, HardwareCrc32c, "hardwareCrc32c"));
  exports.Set("crc32cImplementation", Napi::Function::New(env, Crc32cImplementation, "crc32cImplementation"));
  exports.Set("Adapter", data->adapterCtor.Value());
  InitBenchTcp(env, exports);
  InitBenchNd(env, exports);
  return exports;
}

}  // namespace

}  // namespace netdirect

static Napi::Object InitNetdirect(Napi::Env env, Napi::Object exports) { return netdirect::Init(env, exports); }

NODE_API_MODULE(netdirect, InitNetdirect)
