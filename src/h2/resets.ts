/** The window the rapid-reset limit (server.http2_limits.max_resets_per_10s) counts in. */
export const RESET_WINDOW_MS = 10_000;

/**
 * Streams a client reset on one HTTP/2 session, counted in fixed 10 s windows: the
 * "rapid reset" attack (CVE-2023-44487) opens and cancels streams so that the
 * server starts work the client never waits for. Past the limit the session is
 * sent GOAWAY (ENHANCE_YOUR_CALM). A fixed window lets at most twice the limit
 * through across one boundary, which still bounds the work to a constant rate.
 */
export class ResetWindow {
  private start = 0;
  private count = 0;

  constructor(private readonly max: number) {}

  /**
   * Counts one reset at `now` (ms); true when the session is past its limit. A `now` before
   * the window's start (a wall clock stepped back, by NTP) starts a new window too: otherwise
   * the window would last until the clock is back past its start, an hour for a one-hour step,
   * and a session resetting well under the limit would be sent GOAWAY. That costs at most one
   * more boundary, as any window's end does.
   */
  reset(now: number): boolean {
    if (now - this.start >= RESET_WINDOW_MS || now < this.start) {
      this.start = now;
      this.count = 0;
    }
    return ++this.count > this.max;
  }
}
