// rdma-core loaded at run time (docs/verbs.md §1). The addon must load on machines without rdma-core, so it
// links neither libibverbs nor librdmacm: Lib::get() dlopens libibverbs.so.1 and librdmacm.so.1 once and
// resolves the exported functions this provider calls into a table. The headers (Debian's libibverbs-dev /
// librdmacm-dev) are used for the types and for the data-path calls that are inline in verbs.h
// (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq): those go through the context's ops table,
// which the loaded provider library fills in, so they need no symbol. Members are named without the ibv_/rdma_
// prefix because verbs.h defines function-like macros for some exported names (ibv_reg_mr, ibv_query_port).
#ifndef NETDIRECT_VERBS_LIB_H_
#define NETDIRECT_VERBS_LIB_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <string>

namespace netdirect::verbs {

struct Lib {
  // libibverbs
  struct ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(struct ibv_device**);
  const char* (*get_device_name)(struct ibv_device*);
  int (*query_device)(struct ibv_context*, struct ibv_device_attr*);
  int (*query_port)(struct ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  struct ibv_pd* (*alloc_pd)(struct ibv_context*);
  int (*dealloc_pd)(struct ibv_pd*);
  struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int);
  int (*dereg_mr)(struct ibv_mr*);
  struct ibv_comp_channel* (*create_comp_channel)(struct ibv_context*);
  int (*destroy_comp_channel)(struct ibv_comp_channel*);
  struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
  int (*resize_cq)(struct ibv_cq*, int);
  int (*destroy_cq)(struct ibv_cq*);
  int (*get_cq_event)(struct ibv_comp_channel*, struct ibv_cq**, void**);
  void (*ack_cq_events)(struct ibv_cq*, unsigned int);
  struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
  int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
  int (*destroy_qp)(struct ibv_qp*);
  struct ibv_srq* (*create_srq)(struct ibv_pd*, struct ibv_srq_init_attr*);
  int (*modify_srq)(struct ibv_srq*, struct ibv_srq_attr*, int);
  int (*destroy_srq)(struct ibv_srq*);
  const char* (*wc_status_str)(enum ibv_wc_status);
  int (*get_async_event)(struct ibv_context*, struct ibv_async_event*);
  void (*ack_async_event)(struct ibv_async_event*);
  // librdmacm
  struct rdma_event_channel* (*create_event_channel)();
  void (*destroy_event_channel)(struct rdma_event_channel*);
  int (*create_id)(struct rdma_event_channel*, struct rdma_cm_id**, void*, enum rdma_port_space);
  int (*destroy_id)(struct rdma_cm_id*);
  int (*bind_addr)(struct rdma_cm_id*, struct sockaddr*);
  int (*resolve_addr)(struct rdma_cm_id*, struct sockaddr*, struct sockaddr*, int);
  int (*resolve_route)(struct rdma_cm_id*, int);
  int (*connect)(struct rdma_cm_id*, struct rdma_conn_param*);
  int (*establish)(struct rdma_cm_id*);
  int (*listen)(struct rdma_cm_id*, int);
  int (*accept)(struct rdma_cm_id*, struct rdma_conn_param*);
  int (*reject)(struct rdma_cm_id*, const void*, uint8_t);
  int (*disconnect)(struct rdma_cm_id*);
  int (*get_cm_event)(struct rdma_event_channel*, struct rdma_cm_event**);
  int (*ack_cm_event)(struct rdma_cm_event*);
  int (*init_qp_attr)(struct rdma_cm_id*, struct ibv_qp_attr*, int*);
  struct ibv_context** (*get_devices)(int*);
  void (*free_devices)(struct ibv_context**);
  const char* (*event_str)(enum rdma_cm_event_type);

  // The table, or nullptr when rdma-core cannot be loaded; *why (optional) then says what is missing.
  static const Lib* get(std::string* why = nullptr);
};

}  // namespace netdirect::verbs

#endif  // NETDIRECT_VERBS_LIB_H_
