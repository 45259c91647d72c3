import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/**
 * What the proxy reads of a client's request: exactly the members of Node's
 * IncomingMessage that handler.ts uses, so an HTTP/1.1 request is passed as it is
 * (no wrapper, no cost) and an HTTP/2 stream by a lean stand-in (src/h2/exchange.ts).
 */
export interface ClientRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  /** Name, value, ...: as the client sent them (an HTTP/2 request's pseudo-headers are not among them; Host is). */
  readonly rawHeaders: string[];
  readonly rawTrailers: string[];
  /** The whole body has arrived. */
  readonly complete: boolean;
  /** 1 or 2, and 0 or 1 after it on HTTP/1: the wake records the client's protocol. */
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  /** The client's connection (an HTTP/2 stream's: its session's socket, TLS or not). */
  readonly socket: Socket;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  off(event: 'data', listener: (chunk: Buffer) => void): unknown;
  off(event: 'end', listener: () => void): unknown;
  pause(): unknown;
  resume(): unknown;
  iterator(options: { destroyOnReturn: boolean }): AsyncIterableIterator<unknown>;
}

/** What the proxy does with a client's response: the members of Node's ServerResponse that handler.ts uses. */
export interface ClientResponse {
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  readonly writableLength: number;
  /** True when trailer fields may follow the body (HTTP/1.1: chunked; HTTP/2: no Content-Length, or announced by Trailer). */
  readonly chunkedEncoding: boolean;
  sendDate: boolean;
  shouldKeepAlive: boolean;
  writeHead(status: number, headers: string[]): unknown;
  writeHead(status: number, statusText: string, headers: string[]): unknown;
  writeContinue(): void;
  write(chunk: Buffer): boolean;
  end(body?: string): unknown;
  destroy(): unknown;
  addTrailers(pairs: [string, string][]): void;
  setTimeout(ms: number, onTimeout: () => void): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  once(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

/**
 * Whether HTTP/2 can carry an answer's status (RFC 9113 §8.3.2: 200-599; a final 1xx or
 * 600-999 that HTTP/1.1 lets an origin say cannot be sent): the h2 answer (exchange.ts)
 * gives a 502 in its place, and the proxy records that 502.
 */
export const h2Carries = (status: number): boolean => status >= 200 && status <= 599;
