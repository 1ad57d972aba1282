// Completion records: the one TypeScript declaration of their layout and kinds (binding/delivery/records.h is the C++
// one; test/records.test.ts checks that the addon's binding.recordKinds and binding.recordWords equal these).
// A leaf module: it imports nothing, so every lib/ module can read these constants whatever the load order.
//
// The addon hands records over as a Uint32Array of RECORD_WORDS words per record:
//   [id, status, bytes, kind, qpId]
// kind: 0..5 = ND2_REQUEST_TYPE (receive, send, bind, invalidate, read, write) for CQ completions;
//       16.. for overlapped completions (qpId 0).

export const RECORD_WORDS = 5;

/**
 * Or'ed into the kind of a silent request's record (binding/delivery/records.h kRecordSilent): its id is the request's
 * number among its queue pair's silent requests (lib/requests.ts SilentRequests), not a request table id.
 */
export const K_SILENT = 0x100;

export const K_RECEIVE = 0;
export const K_SEND = 1;
export const K_BIND = 2;
export const K_INVALIDATE = 3;
export const K_READ = 4;
export const K_WRITE = 5;
export const K_REGISTER = 16;
export const K_DEREGISTER = 17;
export const K_CONNECT = 18;
export const K_COMPLETE_CONNECT = 19;
export const K_ACCEPT = 20;
export const K_DISCONNECT = 21;
export const K_NOTIFY_DISCONNECT = 22;
export const K_GET_CONNECTION_REQUEST = 23;
export const K_SRQ_NOTIFY = 24;
/** No request: the CQ named by the record's id failed (overrun, device removed) with the record's status. */
export const K_CQ_ERROR = 25;

/** Every record kind by name: the addon's binding.recordKinds must equal this (test/records.test.ts). */
export const RECORD_KINDS = {
  receive: K_RECEIVE,
  send: K_SEND,
  bind: K_BIND,
  invalidate: K_INVALIDATE,
  read: K_READ,
  write: K_WRITE,
  register: K_REGISTER,
  deregister: K_DEREGISTER,
  connect: K_CONNECT,
  completeConnect: K_COMPLETE_CONNECT,
  accept: K_ACCEPT,
  disconnect: K_DISCONNECT,
  notifyDisconnect: K_NOTIFY_DISCONNECT,
  getConnectionRequest: K_GET_CONNECTION_REQUEST,
  srqNotify: K_SRQ_NOTIFY,
  cqError: K_CQ_ERROR,
} as const;

/** Completion.type of kinds 0..5, indexed by kind (ND2_REQUEST_TYPE order). */
export const REQUEST_TYPES = ['receive', 'send', 'bind', 'invalidate', 'read', 'write'] as const;
export type RequestType = (typeof REQUEST_TYPES)[number];
