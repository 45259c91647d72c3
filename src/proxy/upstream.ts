import type { Pool } from 'undici';
import type { Origin } from '../admission/routes.js';
import { undici } from '../lazy-require.js';
import { connectOptions } from '../tls/origin-trust.js';
import type { ClientRequest } from './client.js';
import { rawHeaderStrings } from './headers.js';
import { type OriginHandler, OriginPool, type OriginRequest, originParser } from './origin-client.js';

/** How the proxy sends a request to an origin: the lean client (origin-client.ts), or undici where it cannot run. */
export interface OriginDispatcher {
  dispatch(r: OriginRequest, h: OriginHandler): void;
  readonly destroyed: boolean;
  destroy(): Promise<void>;
}

/**
 * What the proxy holds per origin: its client (origin-client.ts, or undici's Pool where
 * that cannot run), its connection slots, and the undici Pool replays use. Each is made
 * once per origin and found again by the origin object, so the hot path builds no key.
 */
export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  private readonly byOrigin = new WeakMap<Origin, Pool>();
  private readonly slots = new Map<string, Slots>();
  private readonly slotsByOrigin = new WeakMap<Origin, Slots>();
  private readonly clients = new Map<string, OriginDispatcher>();
  private readonly clientsByOrigin = new WeakMap<Origin, OriginDispatcher>();

  constructor(readonly connections = 512) {}

  /** The proxy's client of an origin (`maxHeaderBytes`: the largest answer header block it accepts). */
  client(o: Origin, maxHeaderBytes: number): OriginDispatcher {
    return perOrigin(this.clientsByOrigin, this.clients, o, clientKey(o, maxHeaderBytes), () =>
      originParser !== null ? new OriginPool(o, originParser, maxHeaderBytes) : onUndici(this.pool(o, maxHeaderBytes)),
    );
  }

  /** The connection slots of an origin: a request holds one from dispatch to its end. */
  slotsOf(o: Origin): Slots {
    return perOrigin(this.slotsByOrigin, this.slots, o, `${o.protocol}//${o.host}`, () => new Slots(this.connections));
  }

  /** The undici Pool of an origin (`maxHeaderBytes`: the largest response header block it accepts). */
  pool(o: Origin, maxHeaderBytes = 16_384): Pool {
    return perOrigin(
      this.byOrigin,
      this.pools,
      o,
      clientKey(o, maxHeaderBytes),
      () =>
        new (undici().Pool)(`${o.protocol}//${o.host}`, {
          maxHeaderSize: maxHeaderBytes,
          connections: this.connections,
          pipelining: 1,
          keepAliveTimeout: 4_000,
          keepAliveMaxTimeout: 60_000,
          // https:// origins: the route's CAs and name, else the system CAs and the URL's host.
          connect: { timeout: o.connectTimeoutMs, ...connectOptions(o.trust) },
        }),
    );
  }

  async close(): Promise<void> {
    for (const s of this.slots.values()) s.cancelAll();
    await Promise.all([...this.pools.values(), ...this.clients.values()].map((p) => p.destroy()));
    this.pools.clear();
    this.clients.clear();
  }
}

/**
 * An origin's connections as slots: a request takes one only once its body has
 * arrived (or it streams), and waits for one at most `timeoutMs` (then the caller
 * answers 503), first come first served. So slow or stalled clients can never hold
 * the connections other requests to that origin need.
 */
export class Slots {
  active = 0;
  /**
   * Slots held by bodies that stream at a client's pace (uploads past the request
   * buffer, answers past the response buffer): at most `streamMax`, so a quarter of
   * the origin's connections always stays for requests that hold one only briefly,
   * however many addresses stream.
   */
  streams = 0;
  readonly streamMax: number;
  private readonly waiting: { go: (ok: boolean) => void; timer: NodeJS.Timeout | null }[] = [];

  constructor(readonly max: number) {
    this.streamMax = max <= 1 ? 1 : max - Math.ceil(max / 4);
  }

  /** Takes a streaming place; false when streams hold their whole share of the origin's connections. */
  takeStream(): boolean {
    if (this.streams >= this.streamMax) return false;
    this.streams++;
    return true;
  }

  giveStream(): void {
    this.streams--;
  }

  /** Takes a free slot at once (the usual case, allocating nothing), or says there is none. */
  tryTake(): boolean {
    if (this.active >= this.max || this.waiting.length !== 0) return false;
    this.active++;
    return true;
  }

  /** Calls `go(true)` once a slot is held, or `go(false)` after `timeoutMs`; returns how to leave the queue. */
  take(timeoutMs: number, go: (ok: boolean) => void): () => void {
    if (this.tryTake()) {
      go(true);
      return NOOP;
    }
    const w: { go: (ok: boolean) => void; timer: NodeJS.Timeout | null } = { go, timer: null };
    w.timer = setTimeout(() => {
      const i = this.waiting.indexOf(w);
      if (i !== -1) this.waiting.splice(i, 1);
      go(false);
    }, timeoutMs);
    this.waiting.push(w);
    // Given up before a slot came (the client left): out of the queue.
    return () => {
      const i = this.waiting.indexOf(w);
      if (i === -1) return;
      this.waiting.splice(i, 1);
      if (w.timer) clearTimeout(w.timer);
    };
  }

  give(): void {
    const next = this.waiting.shift();
    if (next === undefined) {
      this.active--;
      return;
    }
    if (next.timer) clearTimeout(next.timer);
    next.go(true);
  }

  cancelAll(): void {
    for (const w of this.waiting.splice(0)) {
      if (w.timer) clearTimeout(w.timer);
      w.go(false);
    }
  }
}

const NOOP = (): void => {};

/** Origins of one place, header limit and trust share one client (and one undici Pool). */
const clientKey = (o: Origin, maxHeaderBytes: number): string =>
  `${o.protocol}//${o.host} ${maxHeaderBytes} ${o.trust?.id ?? ''} ${o.connectTimeoutMs}`;

/** What is kept for an origin: found by the origin object, else by `key` (made once), else made. */
function perOrigin<T extends object>(
  byOrigin: WeakMap<Origin, T>,
  byKey: Map<string, T>,
  o: Origin,
  key: string,
  make: () => T,
): T {
  const known = byOrigin.get(o);
  if (known !== undefined && !gone(known)) return known;
  let v = byKey.get(key);
  if (v === undefined || gone(v)) {
    v = make();
    byKey.set(key, v);
  }
  byOrigin.set(o, v);
  return v;
}

const gone = (v: object): boolean => (v as { destroyed?: boolean }).destroyed === true;

/**
 * undici's Pool as the proxy's client, where Node's parser cannot be loaded: its handler
 * hears raw header Buffers, turned here into the strings the proxy's handler takes.
 */
export function onUndici(pool: Pool): OriginDispatcher {
  return {
    dispatch(r, h) {
      pool.dispatch(
        {
          path: r.path,
          method: r.method as 'GET',
          headers: r.headers,
          body: r.body,
          headersTimeout: r.headersTimeout,
          bodyTimeout: 0,
        },
        {
          onConnect: (abort: (err?: Error) => void) => h.onConnect(abort),
          onHeaders: (status: number, raw: Buffer[], resume: () => void, text: string) =>
            h.onHeaders(status, rawHeaderStrings(raw), resume, text),
          onData: (chunk: Buffer) => h.onData(chunk),
          // Buffers on the wire, though undici's types say strings.
          onComplete: (trailers: (Buffer | string)[] | null) =>
            h.onComplete(
              trailers === null ? null : trailers.map((v) => (typeof v === 'string' ? v : v.toString('latin1'))),
            ),
          onError: (err: Error) => h.onError(err),
        },
      );
    },
    get destroyed() {
      return pool.destroyed;
    },
    destroy: () => pool.destroy(),
  };
}

/**
 * The request body as the origin's client reads it: what was read already (counted), then
 * the rest, `seen` counting (and perhaps copying the start of) each chunk as it passes;
 * `ended` once the client's body has all come (its trailer fields with it), which may
 * throw to fail the body before its end is sent (the key scan still holds its last bytes).
 */
export async function* countedBody(
  req: ClientRequest,
  read: Buffer[],
  seen: (chunk: Buffer) => void,
  ended?: () => void,
): AsyncGenerator<Buffer> {
  for (const c of read) yield c;
  // Not destroyed when undici stops early (the origin failed, or the key scan refused the
  // body): the client's connection stays, to be answered and drained.
  for await (const chunk of req.iterator({ destroyOnReturn: false })) {
    seen(chunk as Buffer);
    yield chunk as Buffer;
  }
  ended?.();
}
