// netdirect: NetworkDirect v2 (RDMA) for Node.js. See README.md and docs/architecture.md.

export { listProviders, listAddresses, openAdapter, nativeVersion, type ProviderInfo, type AdapterSelection } from './discovery.js';
export { doctor, diagnose, type DoctorReport, type DoctorCheck, type DoctorOptions, type DoctorFacts, type CheckStatus } from './doctor/index.js';
export {
  Adapter,
  decodeAdapterFlags,
  type AdapterOptions,
  type AdapterInfo,
  type AdapterFlags,
  type AdapterStats,
  type CompletionMode,
  type CompletionOption,
  type RequestType,
} from './adapter.js';
export { CompletionQueue, CompletionArrays, type Completion, type RawCompletion, type SrqCompletion } from './completion-queue.js';
export {
  QueuePair,
  DEFAULT_MAX_QUEUED,
  type QueuePairOptions,
  type SendOptions,
  type WriteOptions,
  type ReadOptions,
  type PostOptions,
  type ReceiveOptions,
  type RequestSignalOption,
} from './queue-pair.js';
export type { AbortedRequestError } from './waiting.js';
export {
  MemoryRegion,
  encodeRemote,
  decodeRemote,
  type Access,
  type Segment,
  type RemoteMemory,
  type Local,
} from './memory-region.js';
export { MemoryWindow } from './memory-window.js';
export { SharedReceiveQueue, type SharedReceiveQueueOptions } from './shared-receive-queue.js';
export { PostBatch, type BatchOptions } from './batch.js';
export { PreparedRequest, type PostManyOptions, type PrepareOptions } from './prepared.js';
export { Connector, parseAddress, type ConnectOptions, type AcceptOptions, type ConnectorState, type Endpoint } from './connector.js';
export { Listener, type ListenOptions, type ConnectionRequestOptions } from './listener.js';
export {
  NdError,
  ndStatusName,
  ndStatusValue,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_CLOSED,
  ERR_ND_WRONG_ADAPTER,
  ERR_ND_OUT_OF_RANGE,
  ERR_ND_TOO_MANY_SGES,
  ERR_ND_DETACHED,
  ERR_ND_BUSY,
  ERR_ND_ABORTED,
  ERR_ND_INVALID_ADDRESS,
  ERR_ND_ILLEGAL_CONSTRUCTOR,
  ERR_ND_FOREIGN_OBJECT,
  ERR_ND_INVALID_REGION,
  type NdErrorCode,
  type NdMisuseCode,
  type NdStatusName,
} from './errors.js';
