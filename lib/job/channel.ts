// One peer's message channel: RDMA Sends into receives posted in advance, over the queue pair that also
// carries the window puts and gets to that peer. Every message starts with a 32-byte header:
//   u8 type (1 data, 2 credit, 3 notify, 4 abort, 5 exit, 6 poke, 7 wake)  u8 last fragment  u8 tag space (0 the collectives',
//   1 the user's send/recv)  u8 0  u32 credits returned  u32 tag  u32 aux
//   then the call's 16-byte signature (data messages; zeros otherwise, see lib/job/signature.ts): what the sending
//   rank called (kind, element type, operation, root, count), which the receiver compares with its own call.
// iWARP has no receiver-not-ready retry: a Send that finds no posted receive is an error of DDP's untagged
// model that ends the connection with a Terminate (RFC 5041 §7, RFC 5040 §5.4). So the sender counts credits: the peer posted SLOTS receives before connecting; each
// message uses one; the receiver reposts a receive as soon as it copied the message out and returns the credit
// in the header of its next message, or in a credit-only message once half its slots are owed. Data needs two
// credits, a credit message one: the last credit is kept so that two senders who both ran dry can still tell
// each other (the classic reserve that avoids the credit deadlock).
//
// Messages longer than a slot go as fragments, in order (one QP, one queue): the receiver joins them. Messages
// are matched by tag space and tag in arrival order (FIFO per peer and tag: MPI's non-overtaking rule, MPI 4.1
// §3.5), which is all the collectives and send/recv need.

import type { Adapter, Completion, CompletionQueue, MemoryRegion, QueuePair, Segment } from '../index.js';
import { bounded, peerError, type JobError, type Limit } from './errors.js';

export const SLOTS = 16;
export const SLOT_BYTES = 32 * 1024;
export const HEADER = 32;
/** Bytes of a call's signature in the header (lib/job/signature.ts). */
export const SIG_BYTES = 16;
export const PAYLOAD = SLOT_BYTES - HEADER;

const T_DATA = 1;
const T_CREDIT = 2;
const T_NOTIFY = 3;
const T_ABORT = 4;
const T_EXIT = 5;
/** Same host: "look at the notification flags I wrote into your windows" (lib/job/window.ts, docs/job.md). */
const T_POKE = 6;
/** Same host: aux 1 asks the peer for notify Sends instead of flags, aux 0 for flags (docs/job.md "Waking"). */
const T_WAKE = 7;

/** Tag spaces: the collectives' internal tags and the user's send/recv tags never match each other. */
export const SPACE_COLLECTIVE = 0;
export const SPACE_USER = 1;
const NO_SIG = new Uint8Array(SIG_BYTES);
const EMPTY = new Uint8Array(0);
const ignore = (): void => undefined;

/** A whole message and the signature of the call that sent it. */
export interface Message {
  bytes: Uint8Array;
  sig: Uint8Array;
}

interface Outgoing {
  type: number;
  space: number;
  sig: Uint8Array;
  tag: number;
  aux: number;
  data: Uint8Array;
  offset: number;
  resolve: () => void;
  reject: (err: Error) => void;
  sent: number;
  fragments: number;
}

interface Box {
  partial: Uint8Array[];
  /** The signature of the message being joined from fragments. */
  sig: Uint8Array | null;
  ready: Message[];
  waiters: Array<{ resolve: (m: Message) => void; reject: (e: Error) => void }>;
}

const boxKey = (space: number, tag: number) => space * 2 ** 32 + tag;

export class Channel {
  readonly qp: QueuePair;
  readonly cq: CompletionQueue;
  private recvRegion!: MemoryRegion;
  private sendRegion!: MemoryRegion;
  // The steady path allocates nothing per message of its own: one view over each region's headers, each receive
  // slot's segment and completion handlers, and each send slot's header-only segment (credit, notify) made once.
  private recvView!: DataView;
  private sendView!: DataView;
  private recvSlots: Array<{ segment: Segment; done: (c: Completion) => void }> = [];
  private headerOnly: Segment[] = [];
  private sendSlots: Array<{ message: Outgoing | null; sent: () => void; lost: (err: unknown) => void }> = [];
  private readonly freeSend: number[] = [];
  private credits = SLOTS;
  private owed = 0;
  private readonly queue: Outgoing[] = [];
  private readonly boxes = new Map<number, Box>();
  private failure: JobError | null = null;
  /** Called once per notify message: (window id, count). */
  onNotify: (windowId: number, count: number) => void = () => undefined;
  /** Called per poke: the peer wrote notification flags into this rank's windows (lib/job/window.ts). */
  onPoke: () => void = () => undefined;
  /**
   * Whether the peer asked for notify Sends instead of flags (a wake message with aux 1: it does not poll its
   * windows' flags while it waits; lib/job/window.ts). Set by the peer's wake messages only.
   */
  pokes = false;
  /** Whether this rank asked the peer for notify Sends (see wake()). */
  wakeAsked = false;
  /** Called when the channel fails (the peer died or the connection broke). */
  onFail: (err: JobError) => void = () => undefined;
  /**
   * Called with the signature of each collective message as its first fragment arrives, before it is delivered;
   * false drops it (the job has failed: the ranks disagree on that call).
   */
  onSignature: (tag: number, sig: Uint8Array) => boolean = () => true;
  /** The peer found the ranks disagree on a call and aborted the job: `text` says how. */
  onAbort: (text: string) => void = () => undefined;
  /** The peer's process is exiting without job.close(): `how` is what it said (lib/job/job.ts, exit hook). */
  onExit: (how: string) => void = () => undefined;
  closing = false;
  /** Counts messages received and sends completed: the job's progress loop tells from it that something moved. */
  progress = 0;
  /** A control message (abort, exit) waiting for a credit: sent even after the channel failed. */
  private control: { type: number; payload: Uint8Array } | null = null;

  constructor(
    readonly adapter: Adapter,
    readonly peer: number,
  ) {
    this.cq = adapter.createCompletionQueue({ depth: 4 * SLOTS + 512 });
    this.qp = adapter.createQueuePair({ receiveCq: this.cq, receiveDepth: SLOTS, initiatorDepth: 2 * SLOTS + 256, maxInitiatorSge: 4 });
  }

  /** Registers the slots and posts every receive: before connecting, so the peer's first Sends find them. */
  async prepare(): Promise<void> {
    this.recvRegion = await this.adapter.allocateMemory(SLOTS * SLOT_BYTES);
    this.sendRegion = await this.adapter.allocateMemory((SLOTS + 1) * SLOT_BYTES + 8);
    const r = this.recvRegion.buffer;
    const s = this.sendRegion.buffer;
    this.recvView = new DataView(r.buffer, r.byteOffset, r.byteLength);
    this.sendView = new DataView(s.buffer, s.byteOffset, s.byteLength);
    for (let i = 0; i <= SLOTS; i++) {
      this.freeSend.push(i);
      this.headerOnly.push(this.sendRegion.slice(i * SLOT_BYTES, HEADER));
      this.sendSlots.push({ message: null, sent: () => this.sendSettled(i, true), lost: (err) => this.sendSettled(i, false, err) });
    }
    for (let i = 0; i < SLOTS; i++) {
      this.recvSlots.push({ segment: this.recvRegion.slice(i * SLOT_BYTES, SLOT_BYTES), done: (c) => this.received(i, c.bytes) });
    }
    for (let i = 0; i < SLOTS; i++) this.postReceive(i);
    s[(SLOTS + 1) * SLOT_BYTES] = 1;
    this.one = this.sendRegion.slice((SLOTS + 1) * SLOT_BYTES, 1);
  }

  /**
   * A byte that holds 1 for the channel's life: the source of the windows' flag Writes (lib/job/window.ts). Those
   * complete silently and hold their source registered until a later request of the queue pair completes, which
   * for the last one may be only the queue pair's close: a window's own memory would not be freed before that.
   */
  one!: Segment;

  private readonly lost = (err: unknown): void => this.fail(err, 'lost its connection');
  private readonly unreceivable = (err: unknown): void => this.fail(err, 'could not be received from');

  private postReceive(slot: number): void {
    const s = this.recvSlots[slot];
    this.qp.receive(s.segment).then(s.done, this.lost).catch(this.unreceivable);
  }

  private received(slot: number, bytes: number): void {
    this.progress++;
    if (this.failure && this.control === null) return;
    const base = slot * SLOT_BYTES;
    const view = this.recvView;
    if (bytes < HEADER) return this.fail(undefined, `sent a ${bytes}-byte message, shorter than the ${HEADER}-byte header`);
    const type = view.getUint8(base);
    const last = view.getUint8(base + 1) !== 0;
    const space = view.getUint8(base + 2);
    const returned = view.getUint32(base + 4, true);
    const tag = view.getUint32(base + 8, true);
    const aux = view.getUint32(base + 12, true);
    // Copied out before the slot is reposted, and only for the types that carry them (credit and notify do not).
    const buf = this.recvRegion.buffer;
    const sig = type === T_DATA ? buf.slice(base + HEADER - SIG_BYTES, base + HEADER) : NO_SIG;
    const payload = type === T_CREDIT || type === T_NOTIFY || type === T_POKE || type === T_WAKE ? EMPTY : buf.slice(base + HEADER, base + bytes);
    this.postReceive(slot);
    this.owed++;
    if (returned > SLOTS || this.credits + returned > SLOTS) return this.fail(undefined, `returned ${returned} credits, more than it owed`);
    this.credits += returned;
    if (this.failure) return this.pump(); // only a pending control message is still waiting for these credits
    if (type === T_DATA) {
      if (space !== SPACE_COLLECTIVE && space !== SPACE_USER) return this.fail(undefined, `sent a message in unknown tag space ${space}`);
      this.deliver(space, tag, sig, payload, last);
    } else if (type === T_NOTIFY) this.onNotify(tag, aux);
    else if (type === T_POKE) this.onPoke();
    else if (type === T_WAKE) {
      this.pokes = aux !== 0;
      // Every flag this rank wrote before it heard this is covered by one poke now: it follows them on the queue pair.
      if (this.pokes) void this.poke();
    }
    else if (type === T_ABORT) return this.onAbort(new TextDecoder().decode(payload));
    else if (type === T_EXIT) return this.onExit(new TextDecoder().decode(payload));
    else if (type !== T_CREDIT) return this.fail(undefined, `sent a message of unknown type ${type}`);
    this.pump();
  }

  private box(key: number): Box {
    let b = this.boxes.get(key);
    if (b === undefined) {
      b = { partial: [], sig: null, ready: [], waiters: [] };
      this.boxes.set(key, b);
    }
    return b;
  }

  private deliver(space: number, tag: number, sig: Uint8Array, payload: Uint8Array, last: boolean): void {
    const key = boxKey(space, tag);
    const b = this.box(key);
    if (b.partial.length === 0) {
      // A message's first fragment: the receiver checks the call it belongs to before anything is delivered.
      if (space === SPACE_COLLECTIVE && !this.onSignature(tag, sig)) return;
      if (this.failure) return;
      b.sig = sig;
    }
    b.partial.push(payload);
    if (!last) return;
    const whole: Message = { bytes: b.partial.length === 1 ? b.partial[0] : Buffer.concat(b.partial), sig: b.sig ?? sig };
    b.partial = [];
    b.sig = null;
    const w = b.waiters.shift();
    if (w) w.resolve(whole);
    else b.ready.push(whole);
    if (b.waiters.length === 0 && b.ready.length === 0 && b.partial.length === 0) this.boxes.delete(key);
  }

  /** The next whole message with this tag (in this tag space) from this peer, with its sender's signature. */
  recv(tag: number, space = SPACE_COLLECTIVE, limit?: Limit, operation = 'recv'): Promise<Message> {
    if (this.failure) return Promise.reject(this.failure);
    const key = boxKey(space, tag);
    const b = this.box(key);
    const m = b.ready.shift();
    if (m !== undefined) {
      if (b.ready.length === 0 && b.partial.length === 0) this.boxes.delete(key);
      return Promise.resolve(m);
    }
    let waiter!: { resolve: (m: Message) => void; reject: (e: Error) => void };
    const got = new Promise<Message>((resolve, reject) => b.waiters.push((waiter = { resolve, reject })));
    // A receive that gives up leaves the queue: the message, when it comes, goes to the next receive (none is lost).
    return bounded(got, limit, operation, `no message from rank ${this.peer} with tag ${tag} came`, () => {
      const i = b.waiters.indexOf(waiter);
      if (i >= 0) b.waiters.splice(i, 1);
      if (b.waiters.length === 0 && b.ready.length === 0 && b.partial.length === 0 && this.boxes.get(key) === b) this.boxes.delete(key);
    });
  }

  /** The signature of the first message with this collective tag that arrived (whole or in part) and waits, if any. */
  waitingSignature(tag: number): Uint8Array | null {
    const b = this.boxes.get(boxKey(SPACE_COLLECTIVE, tag));
    if (b === undefined) return null;
    return b.ready.length > 0 ? b.ready[0].sig : b.sig;
  }

  /** Sends a message; resolves when every fragment's Send completed locally. */
  send(tag: number, data: Uint8Array, sig: Uint8Array = NO_SIG, space = SPACE_COLLECTIVE): Promise<void> {
    return this.enqueue(T_DATA, space, sig, tag, 0, data);
  }

  /** A notify message: `count` writes to window `windowId` have been posted before it on this QP. */
  notify(windowId: number, count: number): Promise<void> {
    return this.enqueue(T_NOTIFY, 0, NO_SIG, windowId, count, EMPTY);
  }

  /**
   * Same host: a poke, after notification flags this rank wrote into the peer's windows (RDMA Writes before it on
   * this queue pair, so placed when the peer takes it: RFC 5040 §5.5). It carries no count: the flags do.
   */
  poke(): Promise<void> {
    return this.enqueue(T_POKE, 0, NO_SIG, 0, 0, EMPTY);
  }

  /**
   * Same host: asks the peer to count its notified puts with notify Sends again (`on`: this rank will not poll its
   * flags while it waits; the peer answers with one poke, after every flag it wrote before), or tells it that
   * flags will do.
   */
  wake(on: boolean): void {
    if (this.wakeAsked === on || this.failure) return;
    this.wakeAsked = on;
    void this.enqueue(T_WAKE, 0, NO_SIG, 0, on ? 1 : 0, EMPTY);
  }

  /** Whether the connection moves through shared memory (qp.transport 'shm'), asked once it says. */
  get sameHost(): boolean {
    if (this._sameHost === undefined) {
      const t = this.qp.transport;
      if (t === undefined) return false;
      this._sameHost = t === 'shm';
    }
    return this._sameHost;
  }
  private _sameHost: boolean | undefined;

  /**
   * An abort (the ranks disagree: `text` says how) or exit message, ahead of anything queued and even after the
   * channel failed: it takes the last credit, which the credit reserve keeps otherwise (nothing follows it).
   * Posted at once when a credit and a slot are free, else as soon as they are.
   */
  sendControl(kind: 'abort' | 'exit', text: string): void {
    if (this.control !== null) return;
    const payload = new TextEncoder().encode(text).subarray(0, PAYLOAD);
    this.control = { type: kind === 'abort' ? T_ABORT : T_EXIT, payload };
    this.pumpControl();
  }

  private pumpControl(): void {
    const c = this.control;
    if (c === null || this.credits < 1 || this.freeSend.length === 0) return;
    this.control = null;
    this.post(c.type, true, SPACE_COLLECTIVE, NO_SIG, 0, 0, c.payload, null);
  }

  private enqueue(type: number, space: number, sig: Uint8Array, tag: number, aux: number, data: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const sent = new Promise<void>((resolve, reject) => {
      const fragments = Math.max(1, Math.ceil(data.byteLength / PAYLOAD));
      this.queue.push({ type, space, sig, tag, aux, data, offset: 0, resolve, reject, sent: 0, fragments });
    });
    // A collective may have stopped waiting for this Send (another peer failed first): the job's failure reaches
    // the caller through the collective, so a rejection nobody awaits is not an error of its own.
    sent.catch(ignore);
    this.pump();
    return sent;
  }

  private pump(): void {
    this.pumpControl();
    if (this.failure) return;
    while (this.queue.length > 0 && this.credits >= 2 && this.freeSend.length > 0) {
      const m = this.queue[0];
      const n = Math.min(PAYLOAD, m.data.byteLength - m.offset);
      const last = m.offset + n >= m.data.byteLength;
      const fragment = n === m.data.byteLength ? m.data : m.data.subarray(m.offset, m.offset + n);
      this.post(m.type, last, m.space, m.sig, m.tag, m.aux, fragment, m);
      m.offset += n;
      if (last) this.queue.shift();
    }
    if (this.owed >= SLOTS / 2 && this.credits >= 1 && this.freeSend.length > 0) {
      this.post(T_CREDIT, true, SPACE_COLLECTIVE, NO_SIG, 0, 0, EMPTY, null);
    }
  }

  /** Posts one Send from a free slot; `m`, the message it is a fragment of (null: credit, abort, exit), hears how it went. */
  private post(type: number, last: boolean, space: number, sig: Uint8Array, tag: number, aux: number, payload: Uint8Array, m: Outgoing | null): void {
    const slot = this.freeSend.pop()!;
    const base = slot * SLOT_BYTES;
    const buf = this.sendRegion.buffer;
    const view = this.sendView;
    view.setUint8(base, type);
    view.setUint8(base + 1, last ? 1 : 0);
    view.setUint8(base + 2, space);
    view.setUint8(base + 3, 0);
    view.setUint32(base + 4, this.owed, true);
    view.setUint32(base + 8, tag, true);
    view.setUint32(base + 12, aux, true);
    buf.set(sig, base + HEADER - SIG_BYTES);
    if (payload.byteLength > 0) buf.set(payload, base + HEADER);
    this.owed = 0;
    this.credits--;
    let promise;
    try {
      promise = this.qp.send(payload.byteLength === 0 ? this.headerOnly[slot] : this.sendRegion.slice(base, HEADER + payload.byteLength));
    } catch (err) {
      this.freeSend.push(slot);
      this.fail(err, 'could not be sent to');
      m?.reject(this.failure!);
      return;
    }
    const s = this.sendSlots[slot];
    s.message = m;
    promise.then(s.sent, s.lost);
  }

  /** A send slot's Send completed (`ok`) or failed: the slot is free again, its message hears of it. */
  private sendSettled(slot: number, ok: boolean, err?: unknown): void {
    this.progress++;
    const s = this.sendSlots[slot];
    const m = s.message;
    s.message = null;
    this.freeSend.push(slot);
    if (ok) {
      if (m !== null && ++m.sent === m.fragments) m.resolve();
      this.pump();
    } else {
      this.fail(err, 'lost its connection');
      m?.reject(this.failure!);
    }
  }

  /** Fails every pending receive and send of this channel with `err` (the job's failure). */
  abort(err: JobError): void {
    if (this.failure === null) this.failure = err;
    for (const m of this.queue.splice(0)) m.reject(err);
    for (const b of this.boxes.values()) for (const w of b.waiters.splice(0)) w.reject(err);
  }

  private fail(cause: unknown, what: string): void {
    if (this.failure) return;
    const err = peerError(this.peer, 'job', this.closing ? 'closed its connection' : what, cause);
    this.abort(err);
    if (!this.closing) this.onFail(err);
  }

  get failed(): JobError | null {
    return this.failure;
  }
}
