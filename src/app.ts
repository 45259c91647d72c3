import { type Config, drainTimeoutMs } from './config/index.js';
import { buildControl, type Control, type ControlOptions } from './control.js';
import type { Logger } from './log.js';

export type GatewayOptions = ControlOptions;

/**
 * The whole gateway, built from a config: start() builds the control root
 * (control.ts) and listens, stop() drains the edges and closes the rest. What it
 * shows of the control root is what embedders and tests reach for.
 */
export class Gateway {
  private control: Control | null = null;
  private stopping: Promise<void> | null = null;

  constructor(
    readonly config: Readonly<Config>,
    private readonly opts: GatewayOptions = {},
  ) {}

  /** Opens storage, applies migrations, loads keys, builds every subsystem. Does not listen yet. */
  async init(): Promise<void> {
    this.control ??= await buildControl(this.config, this.opts);
  }

  private get c(): Control {
    if (!this.control) throw new Error('the gateway is not started');
    return this.control;
  }

  get log(): Logger {
    return this.c.log;
  }
  get store() {
    return this.c.store;
  }
  get ring() {
    return this.c.ring;
  }
  get keys() {
    return this.c.keys;
  }
  get events() {
    return this.c.events;
  }
  get wakes() {
    return this.c.wakes;
  }
  get limiter() {
    return this.c.limiter;
  }
  get metrics() {
    return this.c.metrics;
  }
  get endpoints() {
    return this.c.endpoints;
  }
  get endpointTable() {
    return this.c.endpointTable;
  }
  get deliveries() {
    return this.c.deliveries;
  }
  get dispatcher() {
    return this.c.dispatcher;
  }
  get fanout() {
    return this.c.fanout;
  }
  get replayer() {
    return this.c.replayer;
  }
  /** The control thread's wakes (with `threads: 1`, every wake). */
  get batcher() {
    return this.c.capture.batcher;
  }
  /** The edge of this thread (`threads: 1`); null with edge threads. */
  get edge() {
    return this.c.edge;
  }
  get tunnels() {
    const e = this.c.edge;
    if (!e) throw new Error('tunnels are the edge threads’ (threads > 1)');
    return e.tunnels;
  }
  /** Reads the TLS certificates again (SIGHUP): true when the new ones serve, false when the old ones stay, null with no TLS listener. */
  reloadTls(): boolean | null {
    return this.c.reloadTls();
  }
  /** Secret of a bootstrap admin key generated on this start (printed once by main). */
  get generatedAdminSecret(): string | null {
    return this.control?.state.generatedAdminSecret ?? null;
  }

  /**
   * Builds (if init has not), listens, then installs the bootstrap admin key.
   * `beforeAnnounce` runs after that and before the "listening" log line (main prints
   * a generated key there). A start that fails, while building or while opening its
   * listeners, has closed what it opened by the time it rejects (stop() then has
   * nothing left to do): the process may exit at once.
   */
  async start(beforeAnnounce?: () => void): Promise<{ port: number; opsPort: number; managementPort: number }> {
    await this.init();
    return this.c.listen(beforeAnnounce);
  }

  /**
   * Stops accepting, drains, then flushes every buffered wake and event. Draining:
   * the listeners stop accepting at once, but open connections are not cut: a request
   * arriving on one is still served, with `Connection: close`, until the grace period
   * ends. Idle connections are closed last, once no request has been in flight for a
   * moment, so a keep-alive client under load sees no reset on a request it sent.
   * The grace period is `server.drain_timeout_ms` (default: the longest route
   * `timeout_ms` plus 5 s).
   */
  stop(graceMs = drainTimeoutMs(this.config)): Promise<void> {
    const stopping = this.stopping ?? (this.control ? this.control.close(graceMs) : Promise.resolve());
    this.stopping = stopping;
    return stopping;
  }
}
