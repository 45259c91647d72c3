import type { EventEmitter } from 'node:events';
import { GatewayError } from './errors.js';

/**
 * `server.request_timeout_ms` running out on an HTTP/1.1 request whose body is still
 * arriving. Node's connection check finds it (src/http-server.ts gets the connection and
 * the answer in flight), but only the code reading the body knows its wake: that code
 * takes the timeout on the request's answer (`onRequestTimeout`) and ends the exchange
 * itself: a 408 carrying the wake's id while no answer has begun, else the cut of the
 * connection; its wake says 408 either way. Nothing is registered for a request without
 * a body (it is whole at its head; Node never times it out).
 */

/** The event an answer is told of its request's timeout by (emitted at most once per answer). */
const REQUEST_TIMEOUT: unique symbol = Symbol('wakegate.requestTimeout');

/** What the 408 of a request cut by server.request_timeout_ms says (its status: 408). */
export const REQUEST_TIMED_OUT: GatewayError = Object.assign(
  new GatewayError('invalid_request', 'request timed out: its body was not whole within server.request_timeout_ms'),
  { status: 408 },
);

/**
 * `answer` (node:http's ServerResponse, whatever type its reader knows it by) is told when
 * request_timeout_ms cuts its request: `take` answers 408 (or cuts the connection) and records the wake.
 */
export function onRequestTimeout(answer: object, take: () => void): void {
  (answer as EventEmitter).on(REQUEST_TIMEOUT, take);
}

/** Tells the answer its request timed out: false when nothing took it (the gateway's own 408 is then sent). */
export function requestTimedOut(answer: Pick<EventEmitter, 'emit'>): boolean {
  return answer.emit(REQUEST_TIMEOUT);
}
