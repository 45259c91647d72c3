/** What bounds answers to clients that read slower than the origin sends (server.*). */
export interface DownloadLimits {
  /** buffer_response_body_bytes: an answer's bytes held for a slow client before the origin is paused. */
  bufferBytes: number;
  /** max_buffered_response_bytes: those bytes, all answers together; past it the origin is paused instead. */
  totalBytes: number;
  /** max_streaming_downloads_per_client: answers past the buffer streaming at once to one address. */
  perClient: number;
  /** send_timeout_ms: a client that reads nothing for this long is cut off. */
  sendTimeoutMs: number;
}

/**
 * Answers to slow clients, nginx's proxy_buffering: an answer up to the buffer is
 * read from the origin at the origin's speed whatever the client's (its connection
 * goes back to the pool), held in memory within a gateway-wide budget; a larger one
 * streams at the client's pace, holding its origin connection, and only so many of
 * those at once from one client address.
 */
export class Downloads {
  /** Answer bytes held for clients not reading them yet, all answers together. */
  held = 0;
  private readonly streaming = new Map<string, number>();

  constructor(readonly limits: DownloadLimits) {}

  /** True when an answer of this many bytes (or unknown: -1) is larger than the buffer. */
  large(length: number): boolean {
    return length > this.limits.bufferBytes;
  }

  /** Takes one of the address's streaming places; false when it holds them all. */
  take(ip: string): boolean {
    const open = this.streaming.get(ip) ?? 0;
    if (open >= this.limits.perClient) return false;
    this.streaming.set(ip, open + 1);
    return true;
  }

  give(ip: string): void {
    const left = (this.streaming.get(ip) ?? 1) - 1;
    if (left <= 0) this.streaming.delete(ip);
    else this.streaming.set(ip, left);
  }

  /**
   * May an answer whose client has `queued` bytes waiting (the last chunk, `n`, among
   * them; `had` of them counted before) go on reading its origin? Yes while what
   * waited before the chunk is within the answer's buffer and the gateway-wide budget
   * holds the queue; it is then counted at `queued`.
   */
  mayHold(had: number, queued: number, n: number): boolean {
    if (queued - n > this.limits.bufferBytes || this.held - had + queued > this.limits.totalBytes) return false;
    this.held += queued - had;
    return true;
  }

  release(n: number): void {
    this.held -= n;
  }

  streamsOf(ip: string): number {
    return this.streaming.get(ip) ?? 0;
  }
}

export const tooManyDownloads = (open: number): string =>
  `this address already has ${open} answers larger than server.buffer_response_body_bytes streaming (server.max_streaming_downloads_per_client); retry when one has ended`;
