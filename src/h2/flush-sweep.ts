import type { Logger } from '../log.js';

/** What the sweep reads of an ended answer (H2Response). */
export interface Flushing {
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  /** Bytes handed to the stream and not yet sent (the client's flow control holds them). */
  readonly writableLength: number;
  destroy(): unknown;
}

/**
 * HTTP/2: an ended answer the client's flow control holds back (a window it never
 * opens) would keep its stream, and so its session, open for good, however small. One
 * sweep every `periodMs` (server.send_timeout_ms) looks at the ended answers still
 * unsent, rather than a timer per stream (that measured ~7 us a request): one whose
 * unsent bytes have not gone down between two sweeps is cut, so a client that never
 * opens its window holds a stream between one and two send timeouts, as a slow
 * HTTP/1.1 reader is cut after one.
 */
export class FlushSweep {
  /** Each answer watched, with its unsent bytes when the sweep last looked (-1: not looked yet). */
  private readonly watched = new Map<Flushing, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly periodMs: number,
    private readonly log: Logger,
  ) {}

  watch(r: Flushing): void {
    if (r.destroyed || r.writableFinished) return;
    this.watched.set(r, -1);
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.sweep(), this.periodMs);
    this.timer.unref();
  }

  /** Its stream closed: nothing left to look at. */
  unwatch(r: Flushing): void {
    this.watched.delete(r);
  }

  private sweep(): void {
    for (const [r, last] of this.watched) {
      const unsent = r.writableLength;
      if (r.destroyed || r.writableFinished) this.watched.delete(r);
      else if (last === -1 || unsent < last) this.watched.set(r, unsent);
      else {
        this.log.debug('answer cut: its client took none of it within send_timeout_ms', { protocol: 'h2' });
        this.watched.delete(r);
        r.destroy();
      }
    }
    if (this.watched.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.watched.clear();
  }
}
