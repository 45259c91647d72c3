import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Config } from '../config/index.js';
import { DELIVERY_AGENT, deliveryMark, MARK_HEADER } from '../delivery-mark.js';
import { headerValue } from '../proxy/header-value.js';
import { filteredLookup, isPublicAddress, type Resolver, systemResolver } from './address.js';
import { parseRetryAfter } from './backoff.js';
import type { EndpointService } from './endpoints.js';
import type { DeliveryRecord, EndpointRecord } from './records.js';
import { stillSigning } from './secrets.js';
import { sign, signStandard } from './signer.js';

/** Receiver response bodies are kept up to this many bytes. */
export const MAX_STORED_BODY = 20 * 1024;

/**
 * `text` cut to at most `max` bytes of UTF-8, at a character's end: a body of bytes that are
 * not UTF-8 decodes to U+FFFD, three bytes for each, so a cut by characters could store three
 * times the cap.
 */
export function utf8Prefix(text: string, max = MAX_STORED_BODY): string {
  if (text.length * 3 <= max) return text;
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return text;
  let end = max;
  // Back to the start of the character the cut falls in (a continuation byte is 10xxxxxx).
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

export interface SendOptions {
  /** This attempt's number (1..max_attempts), on the wire as x-service-attempt. */
  attempt: number;
  timeoutMs: number;
  allowPrivate: boolean;
  allowInsecure: boolean;
  /** Clock time, for the signature timestamp. */
  nowMs: number;
  /** How the host is resolved for this attempt (the system's, bounded at DNS_TIMEOUT_MS, unless given). */
  resolver?: Resolver;
  /** The key of the mark that tells the gateway its own deliveries apart (delivery-mark.ts), when it comes back to it. */
  markKey?: Buffer;
}

export interface AttemptOutcome {
  ok: boolean;
  /** The receiver's status, or 0 when there was no answer. */
  status: number;
  body: string;
  durationMs: number;
  /** Retry-After in seconds, on 429/503. */
  retryAfter: number | null;
  /** Why it failed without a status (timeout, refused, blocked address). */
  error: string | null;
}

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
};

/**
 * One signed POST of a delivery. A 2xx within the timeout is success; any other
 * status (a redirect included: it is never followed), a timeout or a connection
 * error is a failed attempt. Never throws.
 */
export function sendAttempt(d: DeliveryRecord, ep: EndpointRecord, o: SendOptions): Promise<AttemptOutcome> {
  const t0 = performance.now();
  const fail = (error: string, status = 0): AttemptOutcome => ({
    ok: false,
    status,
    body: '',
    durationMs: Math.round(performance.now() - t0),
    retryAfter: null,
    error,
  });
  let url: URL;
  try {
    url = new URL(ep.url);
  } catch {
    return Promise.resolve(fail('invalid endpoint url'));
  }
  const isHttps = url.protocol === 'https:';
  if (!isHttps && !(url.protocol === 'http:' && o.allowInsecure)) return Promise.resolve(fail('endpoint is not https'));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // IP literals never go through lookup, so they are checked here.
  if (net.isIP(host) && !o.allowPrivate && !isPublicAddress(host))
    return Promise.resolve(fail('address is not public'));
  const body = d.payload;
  const t = Math.floor(o.nowMs / 1000);
  // Secrets rotated away keep signing alongside the current one, each until its own overlap ends.
  const previous = stillSigning(ep, o.nowMs);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'user-agent': DELIVERY_AGENT,
    'x-service-signature': sign(body, ep.secret, t, previous),
    // Standard Webhooks: receivers can verify with the standardwebhooks or svix libraries.
    // Ids and types as stored, through the one header encoder: no stored value can fail the request.
    'webhook-id': headerValue(d.event_id),
    'webhook-timestamp': String(t),
    'webhook-signature': signStandard(body, d.event_id, t, ep.secret, previous),
    'x-service-event-id': headerValue(d.event_id),
    'x-service-event-type': headerValue(d.event_type),
    'x-service-delivery-id': headerValue(d.id),
    'x-service-attempt': `${o.attempt}/${d.max_attempts}`,
  };
  if (d.is_replay) headers['x-service-replay'] = 'true';
  if (o.markKey)
    headers[MARK_HEADER] = deliveryMark(o.markKey, d.id, t, { method: 'POST', target: `${url.pathname}${url.search}` });
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = (isHttps ? https : http).request(url, {
      method: 'POST',
      headers,
      agent: isHttps ? agents.https : agents.http,
      lookup: filteredLookup(o.allowPrivate, o.resolver ?? systemResolver) as unknown as net.LookupFunction,
    });
    /** Settles on the receiver's answer as far as it came (set once its status line is in). */
    let answered: (() => void) | null = null;
    // The attempt ends at its timeout whatever the request's state: one already destroyed
    // (Node closes the socket of an answer it takes for an upgrade) raises no event then.
    // An answer whose status came in time is the receiver's word, however its body ends (a
    // 2xx that trickles or never ends is delivered: sending it again would repeat the event).
    const timer = setTimeout(() => {
      if (answered) answered();
      else done(fail(`no answer within ${o.timeoutMs} ms`));
      req.destroy();
    }, o.timeoutMs);
    // A 101 Switching Protocols (or any upgrade) is no delivery: Node hands it to 'upgrade', never to 'response'.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      done({
        ok: false,
        status: res.statusCode ?? 101,
        body: '',
        durationMs: Math.round(performance.now() - t0),
        retryAfter: null,
        error: 'the endpoint answered with an upgrade',
      });
    });
    // Closed with nothing settled (neither an answer nor an error came): a failed attempt, not a hang.
    req.on('close', () => {
      if (!settled && !req.writableFinished) done(fail('the connection closed without an answer'));
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let kept = 0;
      const finish = () =>
        done({
          ok: status >= 200 && status < 300,
          status,
          body: utf8Prefix(Buffer.concat(chunks).toString('utf8')),
          durationMs: Math.round(performance.now() - t0),
          retryAfter: status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after'], o.nowMs) : null,
          error: null,
        });
      answered = finish;
      res.on('data', (c: Buffer) => {
        const part = c.subarray(0, MAX_STORED_BODY - kept);
        chunks.push(part);
        kept += part.length;
        // What is kept is all there is to read: the rest of an endless body is not read for the whole timeout.
        if (kept >= MAX_STORED_BODY) {
          finish();
          res.destroy();
        }
      });
      res.on('end', finish);
      res.on('error', finish);
      res.on('aborted', finish);
    });
    req.on('error', (e: NodeJS.ErrnoException) => done(fail(e.code ?? e.message)));
    req.end(body);
  });
}

/** Sends attempt `attemptNo` of a delivery at clock time `nowMs` (the dispatcher's only way out). */
export type Send = (d: DeliveryRecord, attemptNo: number, nowMs: number) => Promise<AttemptOutcome>;

/** Sends to the endpoint as this instance holds it now (its URL and secrets may have changed since the delivery was made). */
export function endpointSender(
  cfg: Pick<Config, 'webhooks'>,
  endpoints: Pick<EndpointService, 'get'>,
  resolver: Resolver = systemResolver,
  markKey?: Buffer,
): Send {
  const w = cfg.webhooks;
  return (d, attempt, nowMs) => {
    const ep = endpoints.get(d.endpoint_id);
    if (!ep)
      return Promise.resolve({
        ok: false,
        status: 0,
        body: '',
        durationMs: 0,
        retryAfter: null,
        error: 'endpoint gone',
      });
    return sendAttempt(d, ep, {
      attempt,
      timeoutMs: w.timeout_ms,
      allowPrivate: w.allow_private_networks,
      allowInsecure: w.allow_insecure_http,
      nowMs,
      resolver,
      ...(markKey ? { markKey } : {}),
    });
  };
}
