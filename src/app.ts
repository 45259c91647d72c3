import { createHmac } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from './api/context.js';
import { replayPlugin } from './api/replay.js';
import { type ApiPlugin, buildApi } from './api/server.js';
import { webhooksPlugin } from './api/webhooks.js';
import { authenticate } from './auth/authorize.js';
import { KeyRing } from './auth/keyring.js';
import { KeyService } from './auth/keys-service.js';
import { accessLog } from './capture/access-log.js';
import { Batcher, type Sink } from './capture/batcher.js';
import { DetailBudget, detailSize } from './capture/detail.js';
import { EXCHANGE, Recorder, type WithExchange } from './capture/recorder.js';
import { Redactor } from './capture/redact.js';
import { holdsGatewayKey } from './capture/text.js';
import type { Wake } from './capture/wake.js';
import { Wal, type WalCodec } from './capture/wal.js';
import { type Clock, systemClock } from './clock.js';
import type { Config } from './config/index.js';
import { consoleHandler } from './console/serve.js';
import { errorBody } from './errors.js';
import { EventBus } from './events/bus.js';
import { sloRules } from './events/slo.js';
import { wakeRules } from './events/wake-rules.js';
import { createLogger, type Logger } from './log.js';
import { createMetrics, type Metrics, primeSeries } from './metrics/index.js';
import { createOpsServer } from './ops.js';
import { KEY_IN_URL } from './proxy/admit.js';
import { descriptorWarning, tunnelBound } from './proxy/descriptors.js';
import { ProxyHandler } from './proxy/handler.js';
import { Replayer } from './proxy/replay.js';
import { RouteTable } from './proxy/routes.js';
import { trustedProxies } from './proxy/trust.js';
import { handleUpgrade, TunnelSet } from './proxy/websocket.js';
import { RateLimiter } from './ratelimit/limiter.js';
import { loadSealingKey, SecretBox } from './seal.js';
import { checkDataDir, checkServer, listenError, startLine, storageError } from './startup.js';
import { openStore, type Store } from './store/client.js';
import { type EventRecord, EventTable } from './store/events.js';
import { KeyTable } from './store/keys.js';
import { migrate, migrationsApplied } from './store/migrations.js';
import { claimOwner, releaseOwner } from './store/owner.js';
import { LOG_SEGMENT_TAG, WakeInserter, WakeQuerier, wakeLogCodec } from './store/wakes.js';
import {
  applyDeliveryRetention,
  type DeliveryRecord,
  DeliveryTable,
  EndpointTable,
  FanoutCursorTable,
} from './store/webhooks.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { EndpointService } from './webhooks/endpoints.js';
import { FanOut } from './webhooks/fanout.js';

export interface GatewayOptions {
  clock?: Clock;
  log?: Logger;
  /** Replaces the wake inserter (tests inject a failing one). */
  wakeSink?: (real: Sink<Wake>) => Sink<Wake>;
  /** How often spooled batches are retried while storage is down. */
  spoolRetryMs?: number;
  /** Where the config came from, for the start line: its file, and ORIGIN_URL in drop-in mode. */
  source?: { file: string | null; dropIn: string | null };
}

/** During a stop, idle connections are closed once no request has been in flight for this long. */
const DRAIN_QUIET_MS = 250;

const MANAGEMENT = ['/v2/wakes', '/v2/api-keys', '/v2/webhooks', '/v2/stats', '/v2/environments', '/v2/openapi.json'];

/** True for the paths the /v2 management API owns; everything else is proxied. */
export function isManagementPath(url: string): boolean {
  if (url.charCodeAt(1) !== 118 || !url.startsWith('/v2/')) return false;
  for (const p of MANAGEMENT) {
    if (url.startsWith(p)) {
      const c = url.charCodeAt(p.length);
      if (Number.isNaN(c) || c === 47 || c === 63) return true;
    }
  }
  return false;
}

/** The whole gateway, built from a config: start() listens, stop() drains and flushes. */
export class Gateway {
  readonly metrics: Metrics;
  readonly clock: Clock;
  readonly log: Logger;
  readonly server: http.Server;
  readonly ops: http.Server;
  /** Where the console and /v2 are served apart from proxied paths: the ops listener, or its own. */
  readonly management: http.Server;
  private api: FastifyInstance | null = null;
  private stopping: Promise<void> | null = null;
  /** A stop under way: requests still come on open connections and are served with Connection: close. */
  private readonly drain = { on: false, open: () => 0, tunnels: () => 0 };
  /** Open WebSocket tunnels, ended by a clean stop after its grace period. */
  readonly tunnels: TunnelSet;
  /** Secret of a bootstrap admin key generated on this start (printed once by main). */
  generatedAdminSecret: string | null = null;
  ring!: KeyRing;
  keys!: KeyService;
  events!: EventBus;
  batcher!: Batcher<Wake>;
  wakes!: WakeQuerier;
  proxy!: ProxyHandler;
  limiter!: RateLimiter;
  store!: Store;
  endpoints!: EndpointService;
  endpointTable!: EndpointTable;
  deliveries!: DeliveryTable;
  dispatcher!: Dispatcher;
  fanout!: FanOut;
  private sealingKey!: Buffer;
  replayer!: Replayer;

  constructor(
    readonly config: Readonly<Config>,
    private readonly opts: GatewayOptions = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.log = opts.log ?? createLogger(config.log.level);
    this.metrics = createMetrics();
    primeSeries(this.metrics, Object.keys(config.rate_limits));
    const s = config.server;
    this.server = http.createServer({
      maxHeaderSize: s.max_header_bytes,
      headersTimeout: s.headers_timeout_ms,
      requestTimeout: s.request_timeout_ms,
      keepAliveTimeout: s.keep_alive_timeout_ms,
      // Node only enforces headersTimeout/requestTimeout when it checks connections
      // (every 30 s by default); check often enough for the configured timeouts to bite.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(s.headers_timeout_ms / 4))),
      // The gateway answers 431 / 400 itself for malformed requests (see clientError below).
      requireHostHeader: false,
    });
    this.server.maxConnections = s.max_connections;
    this.tunnels = new TunnelSet(tunnelBound(s.max_tunnels), s.max_tunnels_per_client);
    const separate = config.management.listener === 'separate';
    this.management = http.createServer({ maxHeaderSize: s.max_header_bytes, headersTimeout: s.headers_timeout_ms });
    this.ops = createOpsServer({
      metrics: this.metrics,
      refresh: () => this.refreshGauges(),
      ready: () => this.readiness(),
      // The ops listener's other paths are the management listener's, unless that has its own port.
      other: separate ? null : (req, res) => this.management.emit('request', req, res),
    });
  }

  /** The write-ahead log of one stream, taking over what an earlier version left in its spool. */
  private openWal<T>(name: string, codec?: WalCodec<T>, tag?: string): Wal<T> {
    const cfg = this.config;
    const wal = new Wal<T>(
      join(cfg.storage.data_dir, 'wal', name),
      cfg.storage.spool_max_bytes,
      { syncIntervalMs: cfg.wal.sync_interval_ms, fsyncIntervalMs: cfg.wal.fsync_interval_ms, ...(tag ? { tag } : {}) },
      this.log,
      codec,
    );
    const adopted = wal.adoptLegacySpool(join(cfg.storage.data_dir, 'spool', name));
    if (adopted)
      this.log.info('spooled batches of an earlier version taken into the write-ahead log', { name, batches: adopted });
    // What an earlier run (a crash, or storage down at its stop) left: stored now, each row once.
    if (wal.length > 0)
      this.log.info('recovering from the write-ahead log', { log: name, segments: wal.length, bytes: wal.size });
    return wal;
  }

  /** Opens storage, applies migrations, loads keys, builds the pipeline. Does not listen yet. */
  async init(): Promise<void> {
    const cfg = this.config;
    checkDataDir(cfg);
    try {
      this.store = await openStore(cfg.storage);
    } catch (e) {
      throw storageError(cfg, e);
    }
    await checkServer(cfg, this.store);
    if (!cfg.storage.clickhouse_url) claimOwner(cfg.storage.data_dir);
    const applied = await migrate(this.store);
    if (applied.length) this.log.info('migrations applied', { versions: applied });
    const keyTable = new KeyTable(this.store);
    this.ring = new KeyRing(keyTable, this.log);
    await this.ring.load();
    this.events = new EventBus(new EventTable(this.store), this.clock, this.log, this.openWal<EventRecord>('events'));
    this.events.onDrop = (n, reason) => this.metrics.eventsDropped.labels(reason).inc(n);
    this.keys = new KeyService(cfg, keyTable, this.ring, this.events, this.clock, this.log);

    const inserter = new WakeInserter(this.store, (env) => cfg.environments[env]?.wake_retention_days ?? 30);
    const realSink: Sink<Wake> = (rows, token, file) => inserter.insert(rows, token, file);
    const sink = this.opts.wakeSink ? this.opts.wakeSink(realSink) : realSink;
    // Detail waiting in memory is bounded (the budget); once a wake's line is queued
    // in the log its detail is let go, and its share of the budget comes back.
    const budget = new DetailBudget(cfg.capture.detail_max_buffered_bytes);
    const spool = this.openWal<Wake>(
      'wakes',
      wakeLogCodec(
        (env) => cfg.environments[env]?.wake_retention_days ?? 30,
        (d) => budget.give(detailSize(d)),
      ),
      // Its segments are inserted through the log table (migration 13), told apart from an earlier version's.
      LOG_SEGMENT_TAG,
    );
    this.batcher = new Batcher<Wake>(
      {
        batchRows: cfg.capture.batch_rows,
        flushIntervalMs: cfg.capture.flush_interval_ms,
        maxBufferedRows: cfg.capture.max_buffered_rows,
        maxInflight: cfg.capture.max_inflight_batches,
        retryIntervalMs: this.opts.spoolRetryMs ?? 1000,
        // A wake is its log line from the moment it is pushed: nothing holds it until its batch is stored.
        rowsInLog: true,
      },
      sink,
      spool,
      this.log,
    );
    this.batcher.onDrop = (n, reason) => this.metrics.wakesDropped.labels(reason).inc(n);
    this.batcher.onFlush = (n, ms) => {
      this.metrics.wakesFlushed.inc(n);
      this.metrics.flushDuration.observe(ms / 1000);
    };
    this.wakes = new WakeQuerier(this.store);
    this.limiter = new RateLimiter(cfg);
    this.limiter.onWarning = (w) =>
      this.events.emit('consumer.quota.warning', w.key.environment, {
        key_id: w.key.id,
        consumer: w.key.consumer,
        threshold: w.threshold,
        limit: w.limit,
        used: w.used,
        window: w.window,
      });
    this.limiter.start(() => this.clock.now());
    // One instance key seals signing secrets and keys the redaction HMAC (domain-separated).
    this.sealingKey = loadSealingKey(cfg.storage.encryption_key, cfg.storage.data_dir);
    // Both series are shown from the start, at 0.
    const skipped = {
      rate: this.metrics.detailsSkipped.labels('rate'),
      memory: this.metrics.detailsSkipped.labels('memory'),
    };
    const detailDeps = {
      redactor: new Redactor(
        createHmac('sha256', this.sealingKey).update('wakegate redaction v1').digest(),
        cfg.capture.redact_headers,
        cfg.capture.redact_fields,
      ),
      budget,
      onSkip: (reason: 'rate' | 'memory') => skipped[reason].inc(),
    };
    const access = cfg.log.access ? accessLog() : null;
    const retention = (env: string) => cfg.environments[env]?.wake_retention_days ?? 30;
    const recorder = new Recorder(
      this.clock,
      this.metrics,
      cfg.server.region,
      (w) => {
        w.retention_days = retention(w.environment);
        access?.(w);
        // A wake the batcher refused (counted as dropped) never reaches the log, which
        // gives a detail's share of the budget back once its line is queued: give it here.
        if (!this.batcher.push(w) && w.detail) budget.give(detailSize(w.detail));
      },
      detailDeps,
    );
    const proxyDeps = {
      routes: new RouteTable(cfg.routes, cfg.environments, cfg.capture),
      ring: this.ring,
      limiter: this.limiter,
      recorder,
      metrics: this.metrics,
      log: this.log,
      trusted: trustedProxies(cfg.server.trusted_proxies),
      server: {
        bufferBytes: cfg.server.buffer_request_body_bytes,
        bufferTotal: cfg.server.max_buffered_request_bytes,
        streamsPerClient: cfg.server.max_streaming_uploads_per_client,
        connections: cfg.server.upstream_connections,
      },
    };
    this.proxy = new ProxyHandler(proxyDeps);
    const webhooksApi = await this.initWebhooks();
    const apiDeps: ApiDeps = {
      config: cfg,
      clock: this.clock,
      log: this.log,
      ring: this.ring,
      keys: this.keys,
      wakes: this.wakes,
      limiter: this.limiter,
      metrics: this.metrics,
    };
    this.replayer = new Replayer({
      wakes: this.wakes,
      limiter: this.limiter,
      routes: proxyDeps.routes,
      recorder,
      redactor: detailDeps.redactor,
      events: this.events,
      ring: this.ring,
      clock: this.clock,
      log: this.log,
    });
    const { app, handler: apiHandler } = await buildApi(apiDeps, this.server, [
      webhooksApi,
      replayPlugin(this.replayer),
    ]);
    this.api = app;
    const fallbackEnv = proxyDeps.routes.fallbackEnvironment;
    /** A /v2 call, from whichever listener: a wake like any other (route v2). */
    const manage = (req: IncomingMessage, res: ServerResponse) => {
      const x = recorder.begin();
      x.route = 'v2';
      x.environment = fallbackEnv;
      (req as WithExchange)[EXCHANGE] = x;
      res.setHeader('x-wake-id', x.id);
      res.on('close', () => {
        x.status = res.writableFinished ? res.statusCode : 499;
        x.reqBytes = Number(req.headers['content-length'] ?? 0) || 0;
        x.resBytes = Number(res.getHeader('content-length') ?? 0) || 0;
        recorder.finish(req, x);
      });
      apiHandler(req, res);
    };
    const onMain = cfg.management.on_main;
    // The main listener proxies; /v2 is answered there too unless management.on_main is
    // false. A gateway key in a /v2 URL is refused like any other (admission's first checks).
    this.drain.open = () => recorder.open;
    this.drain.tunnels = () => this.tunnels.size;
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      // Draining: served, then the connection closes (the client knows not to reuse it).
      if (this.drain.on) res.shouldKeepAlive = false;
      const url = req.url ?? '/';
      if (!onMain || !isManagementPath(url) || holdsGatewayKey(url)) return this.proxy.handle(req, res);
      manage(req, res);
    };
    this.server.on('request', onRequest);
    // Expect: 100-continue (RFC 9110 §10.1.1): the body is invited only once the
    // request would be accepted, so a refused key never gets a 100 Continue.
    const continueFor = (req: IncomingMessage, res: ServerResponse) => {
      // /v2: continue only for a key that is known and live; fastify answers the rest.
      if (authenticate(this.ring, req.headers.authorization, this.clock.now()).error === null) res.writeContinue();
    };
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      const url = req.url ?? '/';
      if (!onMain || !isManagementPath(url) || holdsGatewayKey(url)) return this.proxy.handle(req, res, true);
      continueFor(req, res);
      manage(req, res);
    });
    this.management.on('request', this.managementHandler(manage, recorder, fallbackEnv));
    this.management.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      continueFor(req, res);
      this.management.emit('request', req, res);
    });
    const upgradeDeps = { ...proxyDeps, tunnels: this.tunnels, idleTimeoutMs: cfg.server.tunnel_idle_timeout_ms };
    this.server.on('upgrade', (req, socket, head) => handleUpgrade(upgradeDeps, req, socket, head));
    // fastify adds its own clientError listener to the server it is given; the gateway
    // answers malformed requests itself, with its own error body, so only ours stays.
    this.server.removeAllListeners('clientError');
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (!socket.writable) return socket.destroy();
      const code = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
      const type = code === 431 ? 'request_header_fields_too_large' : 'invalid_request';
      const body = JSON.stringify({
        error: {
          type,
          message: code === 408 ? 'request timed out' : 'malformed request',
          param: null,
          retry_after: null,
          wake_id: null,
        },
      });
      const text = code === 431 ? 'Request Header Fields Too Large' : code === 408 ? 'Request Timeout' : 'Bad Request';
      // Answer, then let go of the socket even if the client never reads or closes.
      socket.end(
        `HTTP/1.1 ${code} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        () => socket.destroy(),
      );
    });
    this.ring.start(cfg.storage.key_poll_interval_ms);
    this.keys.start();
    // What the write-ahead logs hold from an earlier run goes in now, while serving,
    // with every listener (event rules, fan-out) in place: availability first.
    this.events.resume();
    this.batcher.resume();
    this.dispatcher.resumeLog();
  }

  /**
   * What the management listener serves (the ops listener's other paths, or a
   * listener of its own): the console and /v2, and nothing it would proxy. The
   * console never shares an origin with a proxied app, whose pages could otherwise
   * read the signed-in key.
   */
  private managementHandler(
    manage: (req: IncomingMessage, res: ServerResponse) => void,
    recorder: Recorder,
    fallbackEnv: string,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    const cfg = this.config;
    const consoleApp = cfg.console.enabled ? consoleHandler(cfg.console.path, () => this.port) : null;
    return (req, res) => {
      const url = req.url ?? '/';
      if (consoleApp?.owns(url)) {
        const x = recorder.begin();
        x.route = 'console';
        x.environment = fallbackEnv;
        x.status = consoleApp.handle(req, res, x.id);
        req.resume();
        return recorder.finish(req, x);
      }
      const keyInUrl = holdsGatewayKey(url);
      if (isManagementPath(url) && !keyInUrl) return manage(req, res);
      const body = JSON.stringify(
        keyInUrl
          ? errorBody(KEY_IN_URL.type, null, KEY_IN_URL.message, KEY_IN_URL.param)
          : errorBody(
              'resource_missing',
              null,
              'this listener serves the console and /v2 only; requests are proxied on the main listener',
            ),
      );
      req.resume();
      res.writeHead(keyInUrl ? 400 : 404, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    };
  }

  /** The main listener's port once it listens (the console shows it in copied curl commands). */
  get port(): number {
    const a = this.server.address();
    return a !== null && typeof a === 'object' ? a.port : this.config.server.port;
  }

  /** Endpoints, deliveries, fan-out from the events table, and the wake rules that raise events. */
  private async initWebhooks(): Promise<ApiPlugin> {
    const cfg = this.config;
    const box = new SecretBox(this.sealingKey);
    this.endpointTable = new EndpointTable(this.store, box);
    this.endpointTable.onUnsealable = (id) =>
      this.log.warn('webhook endpoint skipped: its signing secret does not open (wrong sealing key, or altered)', {
        endpoint_id: id,
      });
    this.endpoints = new EndpointService(cfg, this.endpointTable, this.events, this.clock, this.log);
    await this.endpoints.load();
    this.deliveries = new DeliveryTable(this.store);
    await applyDeliveryRetention(this.store, cfg.webhooks.dead_letter_retention_days);
    this.dispatcher = new Dispatcher(
      cfg,
      this.deliveries,
      this.endpoints,
      this.clock,
      this.log,
      this.metrics,
      this.openWal<DeliveryRecord>('deliveries'),
    );
    this.fanout = new FanOut(
      cfg,
      new EventTable(this.store),
      this.deliveries,
      this.endpoints,
      this.dispatcher,
      this.clock,
      this.log,
      this.metrics,
      new FanoutCursorTable(this.store),
      cfg.instance.index,
    );
    await this.fanout.init();
    await this.dispatcher.resume();
    this.events.onRecorded(() => void this.fanout.poll());
    this.batcher.onRows(wakeRules(cfg, this.events));
    this.batcher.onRows(sloRules(cfg, this.events));

    this.endpoints.start(cfg.storage.key_poll_interval_ms);
    this.dispatcher.start();
    // Alone (instance.count 1), this instance records every event and polls as it does.
    this.fanout.start(250, cfg.instance.count === 1);
    return webhooksPlugin({ endpoints: this.endpoints, deliveries: this.deliveries, dispatcher: this.dispatcher });
  }

  /**
   * Opens storage (if init has not), listens, then installs the bootstrap admin key.
   * `beforeAnnounce` runs after that and before the "listening" log line (main prints
   * a generated key there).
   */
  async start(beforeAnnounce?: () => void): Promise<{ port: number; opsPort: number; managementPort: number }> {
    if (!this.store) await this.init();
    const s = this.config.server;
    const listen = (server: http.Server, port: number, host: string, name: string, setting: string) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', (e) => reject(listenError(e, { name, setting, port })));
        server.listen(port, host, () => resolve());
      });
    await listen(this.server, s.port, s.host, 'PORT', 'server.port');
    await listen(this.ops, s.ops_port, s.ops_host, 'OPS_PORT', 'server.ops_port');
    const m = this.config.management;
    if (m.listener === 'separate') await listen(this.management, m.port, m.host, 'management.port', 'management.port');
    // The bootstrap admin key is made only once the gateway listens: a start that
    // fails (a port in use) leaves no key behind that was never shown.
    const boot = await this.keys.bootstrap(this.config.admin_key);
    this.generatedAdminSecret = boot.secret;
    if (boot.created) this.log.info('bootstrap admin key installed', { key_id: boot.created.id });
    const fds = descriptorWarning(this.config.server);
    if (fds) this.log.warn(fds);
    beforeAnnounce?.();
    const port = (this.server.address() as AddressInfo).port;
    const opsPort = (this.ops.address() as AddressInfo).port;
    const managementPort = m.listener === 'separate' ? (this.management.address() as AddressInfo).port : opsPort;
    this.log.info(
      'wakegate listening',
      startLine(this.config, {
        file: this.opts.source?.file ?? null,
        dropIn: this.opts.source?.dropIn ?? null,
        port,
        opsPort,
        managementPort,
      }),
    );
    return { port, opsPort, managementPort };
  }

  refreshGauges(): void {
    const m = this.metrics;
    const st = this.batcher.stats;
    m.wakesBuffered.set(this.batcher.buffered);
    m.spoolBytes.set(st.spoolBytes);
    m.spoolBatches.set(st.spoolBatches);
    m.storageUp.set(st.storageUp ? 1 : 0);
    m.keysHeld.set(this.ring.size);
    m.buckets.set(this.limiter.size);
  }

  private async readiness(): Promise<{ ok: boolean; body: Record<string, unknown> }> {
    if (!this.store || this.stopping) return { ok: false, body: { status: this.stopping ? 'stopping' : 'starting' } };
    const st = this.batcher.stats;
    let storage = 'up';
    let migrations = false;
    try {
      migrations = await migrationsApplied(this.store);
    } catch {
      storage = 'down';
    }
    if (!st.storageUp || !this.events.stats.storageUp) storage = 'down';
    // During a storage outage the gateway still serves (wakes go to the spool),
    // so it stays ready; the body and the metrics show the outage.
    const ok = storage === 'up' ? migrations : st.spoolBatches >= 0;
    return {
      ok,
      body: {
        status: storage === 'up' ? (migrations ? 'ready' : 'migrations pending') : 'degraded',
        storage,
        migrations_applied: migrations,
        wakes_buffered: this.batcher.buffered,
        spool_bytes: st.spoolBytes,
        spool_batches: st.spoolBatches,
        events_spool_batches: this.events.stats.spoolBatches,
      },
    };
  }

  /**
   * Stops accepting, drains, then flushes every buffered wake and event. Draining:
   * the listener stops accepting at once, but open connections are not cut: a request
   * arriving on one is still served, with `Connection: close`, until the grace period
   * ends. Idle connections are closed last, once no request has been in flight for a
   * moment, so a keep-alive client under load sees no reset on a request it sent.
   */
  stop(graceMs = 10_000): Promise<void> {
    this.stopping ??= (async () => {
      this.drain.on = true;
      // net.Server's close: stop accepting; http.Server's would also drop idle keep-alive
      // connections at once, racing clients that are sending on them.
      const closed = new Promise<void>((r) => net.Server.prototype.close.call(this.server, () => r()));
      let quietSince = performance.now();
      const idle = setInterval(() => {
        if (this.drain.open() - this.drain.tunnels() > 0) quietSince = performance.now();
        else if (performance.now() - quietSince >= DRAIN_QUIET_MS) this.server.closeIdleConnections();
      }, 25);
      const force = setTimeout(() => {
        this.server.closeAllConnections();
        // Upgraded sockets are no longer the HTTP server's to close.
        this.tunnels.destroyAll();
      }, graceMs);
      await closed;
      clearInterval(idle);
      clearTimeout(force);
      this.keys?.stop();
      this.limiter?.stop();
      // Running replays finish (and are recorded) before capture stops.
      await this.replayer?.close();
      await this.batcher?.stop();
      await this.events?.stop();
      // Turn the last events into (persisted) deliveries, then let running attempts finish.
      await this.fanout?.poll();
      await this.fanout?.stop();
      await this.dispatcher?.stop();
      this.endpoints?.stop();
      await this.ring?.stop();
      await this.proxy?.close();
      await this.api?.close();
      await new Promise<void>((r) => this.ops.close(() => r()));
      this.ops.closeAllConnections();
      if (this.management.listening) {
        await new Promise<void>((r) => this.management.close(() => r()));
        this.management.closeAllConnections();
      }
      await this.store?.close();
      if (!this.config.storage.clickhouse_url) releaseOwner(this.config.storage.data_dir);
      this.log.info('wakegate stopped');
    })();
    return this.stopping;
  }
}
