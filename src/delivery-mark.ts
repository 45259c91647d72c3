import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The gateway's own webhook deliveries, told apart when one comes back to it: an
 * endpoint registered on one of its own routes (its public name, or a load balancer in
 * front of it). Each delivery carries a mark (an HMAC, under a key derived from the
 * sealing key, of its delivery id, time, method and request target), and the wake of a
 * request bearing a valid one, to that target, records it in its user agent: such a wake
 * raises no `wake.error` or `wake.slow`, so a failing delivery to the gateway itself is
 * not a new event, a new delivery, and so on without end. A mark is taken once (Marks):
 * whoever receives a delivery cannot replay its mark to hide their own failing requests,
 * beyond one request to its endpoint's path per delivery. A fleet shares the key
 * (`storage.encryption_key`).
 */

/** The user agent of the gateway's deliveries. */
export const DELIVERY_AGENT = 'wakegate-webhooks/1';
/** The header that carries the mark. */
export const MARK_HEADER = 'x-wakegate-mark';
/** A wake's user agent when its request was one of this gateway's (or its fleet's) own deliveries, verified. */
export const OWN_DELIVERY_AGENT = `${DELIVERY_AGENT} (this gateway's delivery)`;
/** A mark is taken for this long after the delivery's time (clock skew across a fleet, a slow proxy). */
const MARK_WINDOW_S = 300;

/** The key of the marks, from the redaction key (itself from the sealing key, domain-separated). */
export const markKey = (redactionKey: Buffer): Buffer =>
  createHmac('sha256', redactionKey).update('wakegate delivery mark v1').digest();

/** The request a mark is made for: its method and target (path and query, as sent). */
export interface MarkedRequest {
  method: string;
  target: string;
}

const tag = (key: Buffer, deliveryId: string, t: number, r: MarkedRequest): Buffer =>
  createHmac('sha256', key).update(`${deliveryId}\n${t}\n${r.method}\n${r.target}`).digest().subarray(0, 16);

/** The mark of delivery `deliveryId` sent at `t` (unix seconds) as request `r`: `<t>.<hex>`. */
export const deliveryMark = (key: Buffer, deliveryId: string, t: number, r: MarkedRequest): string =>
  `${t}.${tag(key, deliveryId, t, r).toString('hex')}`;

/** Whether `mark` is a valid mark of `deliveryId`, sent as `r`, made within the window around `nowMs`. */
export function isOwnDelivery(
  key: Buffer,
  deliveryId: string | string[] | undefined,
  mark: string | string[] | undefined,
  nowMs: number,
  r: MarkedRequest,
): boolean {
  if (typeof deliveryId !== 'string' || typeof mark !== 'string') return false;
  const dot = mark.indexOf('.');
  const t = Number(mark.slice(0, dot));
  const hex = mark.slice(dot + 1);
  if (dot <= 0 || !Number.isSafeInteger(t) || !/^[0-9a-f]{32}$/.test(hex)) return false;
  if (Math.abs(nowMs / 1000 - t) > MARK_WINDOW_S) return false;
  return timingSafeEqual(tag(key, deliveryId, t, r), Buffer.from(hex, 'hex'));
}

/** Marks taken, each once while it could be valid; at most this many remembered (the oldest go first). */
const MAX_MARKS = 4096;

/** The marks a recorder has taken: a mark shown a second time is not the gateway's delivery. */
export class Marks {
  private readonly taken = new Map<string, number>();

  /** True the first time `mark` is shown (within its window), false after. */
  take(mark: string, nowMs: number): boolean {
    if (this.taken.has(mark)) return false;
    if (this.taken.size >= MAX_MARKS) {
      for (const [m, at] of this.taken) {
        if (this.taken.size < MAX_MARKS && at > nowMs) break;
        this.taken.delete(m);
      }
    }
    this.taken.set(mark, nowMs + 2 * MARK_WINDOW_S * 1000);
    return true;
  }
}

/**
 * The user agent a wake records: `agent` as sent, except that the gateway's own, with a
 * valid mark, becomes OWN_DELIVERY_AGENT, and a client that sends that label itself is
 * told apart (it cannot silence its own errors' events by naming itself so).
 */
export function recordedAgent(
  agent: string,
  key: Buffer | null,
  req: {
    method?: string | undefined;
    url?: string | undefined;
    headers: Record<string, string | string[] | undefined>;
  },
  nowMs: number,
  marks: Marks,
): string {
  if (!agent.startsWith(DELIVERY_AGENT)) return agent;
  const mark = req.headers[MARK_HEADER];
  if (
    agent === DELIVERY_AGENT &&
    key !== null &&
    typeof mark === 'string' &&
    isOwnDelivery(key, req.headers['x-service-delivery-id'], mark, nowMs, {
      method: req.method ?? '',
      target: req.url ?? '',
    }) &&
    marks.take(mark, nowMs)
  )
    return OWN_DELIVERY_AGENT;
  return agent === OWN_DELIVERY_AGENT ? `${agent} (unverified)` : agent;
}
