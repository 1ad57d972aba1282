#include "verbs/lib.h"

#include <dlfcn.h>

#include <mutex>

namespace netdirect::verbs {

namespace {

struct Loaded {
  Lib lib{};
  bool ok = false;
  std::string why;
};

template <typename Fn>
bool resolve(void* handle, const char* name, Fn* out, std::string* why) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    if (why->empty()) *why = std::string("rdma-core is too old: it has no ") + name;
    return false;
  }
  *out = reinterpret_cast<Fn>(sym);
  return true;
}

void* open_library(const char* name, std::string* why) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr && why->empty()) {
    const char* err = dlerror();
    *why = std::string(name) + " could not be loaded (" + (err != nullptr ? err : "unknown error") +
           "); install rdma-core (Debian/Ubuntu: apt install libibverbs1 librdmacm1 ibverbs-providers)";
  }
  return h;
}

void load(Loaded* l) {
  void* v = open_library("libibverbs.so.1", &l->why);
  void* c = v != nullptr ? open_library("librdmacm.so.1", &l->why) : nullptr;
  if (v == nullptr || c == nullptr) return;
  Lib& t = l->lib;
  std::string* w = &l->why;
  bool ok = resolve(v, "ibv_get_device_list", &t.get_device_list, w) &
            resolve(v, "ibv_free_device_list", &t.free_device_list, w) &
            resolve(v, "ibv_get_device_name", &t.get_device_name, w) &
            resolve(v, "ibv_query_device", &t.query_device, w) & resolve(v, "ibv_query_port", &t.query_port, w) &
            resolve(v, "ibv_alloc_pd", &t.alloc_pd, w) & resolve(v, "ibv_dealloc_pd", &t.dealloc_pd, w) &
            resolve(v, "ibv_reg_mr", &t.reg_mr, w) & resolve(v, "ibv_dereg_mr", &t.dereg_mr, w) &
            resolve(v, "ibv_create_comp_channel", &t.create_comp_channel, w) &
            resolve(v, "ibv_destroy_comp_channel", &t.destroy_comp_channel, w) &
            resolve(v, "ibv_create_cq", &t.create_cq, w) & resolve(v, "ibv_resize_cq", &t.resize_cq, w) &
            resolve(v, "ibv_destroy_cq", &t.destroy_cq, w) & resolve(v, "ibv_get_cq_event", &t.get_cq_event, w) &
            resolve(v, "ibv_ack_cq_events", &t.ack_cq_events, w) & resolve(v, "ibv_create_qp", &t.create_qp, w) &
            resolve(v, "ibv_modify_qp", &t.modify_qp, w) & resolve(v, "ibv_destroy_qp", &t.destroy_qp, w) &
            resolve(v, "ibv_create_srq", &t.create_srq, w) & resolve(v, "ibv_modify_srq", &t.modify_srq, w) &
            resolve(v, "ibv_destroy_srq", &t.destroy_srq, w) & resolve(v, "ibv_wc_status_str", &t.wc_status_str, w) &
            resolve(v, "ibv_get_async_event", &t.get_async_event, w) &
            resolve(v, "ibv_ack_async_event", &t.ack_async_event, w) &
            resolve(c, "rdma_create_event_channel", &t.create_event_channel, w) &
            resolve(c, "rdma_destroy_event_channel", &t.destroy_event_channel, w) &
            resolve(c, "rdma_create_id", &t.create_id, w) & resolve(c, "rdma_destroy_id", &t.destroy_id, w) &
            resolve(c, "rdma_bind_addr", &t.bind_addr, w) & resolve(c, "rdma_resolve_addr", &t.resolve_addr, w) &
            resolve(c, "rdma_resolve_route", &t.resolve_route, w) & resolve(c, "rdma_connect", &t.connect, w) &
            resolve(c, "rdma_establish", &t.establish, w) & resolve(c, "rdma_listen", &t.listen, w) &
            resolve(c, "rdma_accept", &t.accept, w) & resolve(c, "rdma_reject", &t.reject, w) &
            resolve(c, "rdma_disconnect", &t.disconnect, w) & resolve(c, "rdma_get_cm_event", &t.get_cm_event, w) &
            resolve(c, "rdma_ack_cm_event", &t.ack_cm_event, w) &
            resolve(c, "rdma_init_qp_attr", &t.init_qp_attr, w) & resolve(c, "rdma_get_devices", &t.get_devices, w) &
            resolve(c, "rdma_free_devices", &t.free_devices, w) & resolve(c, "rdma_event_str", &t.event_str, w);
  l->ok = ok;  // the libraries stay loaded for the life of the process (the table points into them)
}

}  // namespace

const Lib* Lib::get(std::string* why) {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] { load(&loaded); });
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.lib;
}

}  // namespace netdirect::verbs
