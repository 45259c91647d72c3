import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Admission } from './admission/admission.js';
import { KEY_IN_URL } from './admission/refusal.js';
import { RouteTable } from './admission/routes.js';
import { replayPlugin } from './api/replay.js';
import { type ApiPlugin, buildApi } from './api/server.js';
import { webhooksPlugin } from './api/webhooks.js';
import { KeyRing } from './auth/keyring.js';
import { KeyService } from './auth/keys-service.js';
import { Batcher, type RowListener, type Sink } from './capture/batcher.js';
import { type Capture, createCapture, openLog, redactionKey, retentionOf } from './capture/pipeline.js';
import { EXCHANGE, PEER, type Recorder, type WithExchange, type WithPeer } from './capture/recorder.js';
import { holdsGatewayKey } from './capture/text.js';
import type { Wake } from './capture/wake.js';
import { type Clock, systemClock } from './clock.js';
import type { Config } from './config/index.js';
import { consoleHandler } from './console/serve.js';
import { createEdge, type Edge, isManagementPath } from './edge.js';
import { errorBody } from './errors.js';
import { EventBus } from './events/bus.js';
import { sloRules } from './events/slo.js';
import { wakeRules } from './events/wake-rules.js';
import { DeliveryLeases, FanoutLeader } from './fleet/dispatch.js';
import { coordinatorFor, limiterPart } from './fleet/limiter.js';
import type { Coordinator } from './fleet/redis.js';
import { createLogger, type Logger } from './log.js';
import { withBody } from './management-body.js';
import { createMetrics, type Metrics, primeSeries } from './metrics/index.js';
import { createOpsServer } from './ops.js';
import { descriptorWarning } from './proxy/descriptors.js';
import { Replayer } from './proxy/replay.js';
import { bucketsSaver, restoredBuckets } from './ratelimit/persist.js';
import { type Part, Parts } from './root.js';
import { loadSealingKey, SecretBox } from './seal.js';
import { checkServer, holdDataDir, listenError, resolveThreads, startLine, storageError } from './startup.js';
import { openStore, type Store } from './store/client.js';
import { type EventRecord, EventTable } from './store/events.js';
import { KeyTable } from './store/keys.js';
import { migrate, migrationsApplied } from './store/migrations.js';
import { LOG_SEGMENT_TAG, wakeLogCodec } from './store/wake-log.js';
import { WakeInserter, WakeQuerier } from './store/wakes.js';
import {
  applyDeliveryRetention,
  type DeliveryRecord,
  DeliveryTable,
  EndpointTable,
  FanoutCursorTable,
} from './store/webhooks.js';
import { cutWhenStalled } from './threads/answer-relay.js';
import { internalListener } from './threads/internal-listener.js';
import { EdgePool } from './threads/pool.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { EndpointService } from './webhooks/endpoints.js';
import { FanOut } from './webhooks/fanout.js';

/** How a gateway is built besides its config (GatewayOptions). */
export interface ControlOptions {
  clock?: Clock;
  log?: Logger;
  /** Replaces the wake inserter (tests inject a failing one). */
  wakeSink?: (real: Sink<Wake>) => Sink<Wake>;
  /** How often spooled batches are retried while storage is down. */
  spoolRetryMs?: number;
  /** Where the config came from, for the start line: its file, and ORIGIN_URL in drop-in mode. */
  source?: { file: string | null; dropIn: string | null };
  /** Test hooks (WAKEGATE_TEST_HOOKS=1): the serving thread in a header, and a way to crash an edge thread. */
  testHooks?: boolean;
}

/**
 * The control thread's composition root: what must be one per process (the store,
 * migrations, inserts, event rules, fan-out and dispatch, keys, /v2, the console and
 * the ops listener), then the edges: in this thread with `threads: 1`, else edge
 * threads. Each line builds one subsystem; they close in the reverse order.
 */
export async function buildControl(cfg: Readonly<Config>, opts: ControlOptions = {}) {
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(cfg.log.level);
  const metrics = createMetrics();
  primeSeries(metrics, Object.keys(cfg.rate_limits));
  const { threads, why } = resolveThreads(cfg);
  const parts = new Parts();
  const state = { stopping: false, generatedAdminSecret: null as string | null };
  try {
    const storage = parts.add(await openStorage(cfg, log));
    const store = storage.store;
    const sealingKey = loadSealingKey(cfg.storage.encryption_key, cfg.storage.data_dir);
    const keyring = parts.add(await keyRing(store, log));
    const ring = keyring.ring;
    const bus = new EventBus(new EventTable(store), clock, log, openLog<EventRecord>(cfg, log, 'events'));
    bus.onDrop = (n, reason) => metrics.eventsDropped.labels(reason).inc(n);
    const co = await coordinatorFor(cfg, log, metrics);
    // Channel messages are authenticated with a key derived from the sealing key (Redis never sees it).
    co?.authenticate(sealingKey);
    // The fleet's Redis connection closes last of what uses it.
    if (co) parts.add({ name: 'coordination', close: () => co.close() });
    const webhooks = parts.add(await webhooksPart(cfg, store, sealingKey, bus, clock, log, metrics, co));
    // The event log closes before the webhooks that fan it out: added after them.
    parts.add({ name: 'events', close: () => bus.stop() });
    const keys = parts.add(keyService(cfg, keyring.table, ring, bus, clock, log));
    if (co) await announceKeys(co, keys.keys, ring, clock, log);
    // A lone gateway's buckets and quota windows outlive a restart (saved in DATA_DIR; a fleet's live in Redis).
    const layout = co ? undefined : restoredBuckets(cfg, clock.now(), log);
    const limiter = parts.add(limiterPart(cfg, { co, events: bus, metrics, log, now: () => clock.now(), layout }));
    const dir = cfg.storage.data_dir;
    if (limiter.layout) parts.add(bucketsSaver({ layout: limiter.layout, dir, now: () => clock.now(), log }));
    const inserter = new WakeInserter(store, retentionOf(cfg));
    const realSink: Sink<Wake> = (rows, token, file) => inserter.insert(rows, token, file);
    const sink = opts.wakeSink ? opts.wakeSink(realSink) : realSink;
    const once = co ? (name: string, ttlMs: number) => co.once(name, ttlMs) : null;
    const rules = [wakeRules(cfg, bus), sloRules(cfg, bus, once)] as const;
    const capture = parts.add(
      createCapture({
        cfg,
        clock,
        log,
        metrics,
        stream: 'wakes',
        sink,
        redactionKey: redactionKey(sealingKey),
        ...(opts.spoolRetryMs === undefined ? {} : { retryMs: opts.spoolRetryMs }),
      }),
    );
    for (const r of rules) capture.batcher.onRows(r);
    await storeOrphanLogs(cfg, log, threads, sink, rules);
    const wakes = new WakeQuerier(store);
    const routes = new RouteTable(cfg.routes, cfg.environments, cfg.capture);
    // The one admission of this thread's /v2 calls and replays (each edge has its own, of the same rules).
    const admission = new Admission({ routes, ring, limiter: limiter.limiter, metrics, clock });
    const replay = parts.add(
      replayPart(
        new Replayer({
          wakes,
          admission,
          recorder: capture.recorder,
          redactor: capture.redactor,
          events: bus,
          log,
        }),
      ),
    );
    const management = http.createServer({
      maxHeaderSize: cfg.server.max_header_bytes,
      headersTimeout: cfg.server.headers_timeout_ms,
    });
    const api = parts.add(
      await apiPart(
        cfg,
        { clock, log, ring, keys: keys.keys, wakes, admission, metrics },
        management,
        [webhooks.plugin, replayPlugin(replay.replayer)],
        capture.recorder,
        routes.fallbackEnvironment,
      ),
    );
    const ports = { main: cfg.server.port };
    const edges = threads === 1 ? null : new EdgeSlot();
    const listeners = parts.add(
      listenersPart({
        cfg,
        metrics,
        management,
        api,
        recorder: capture.recorder,
        fallbackEnv: routes.fallbackEnvironment,
        mainPort: () => ports.main,
        pool: () => edges?.pool ?? null,
        testHooks: opts.testHooks === true,
        threads,
        refresh: () => {
          capture.refreshGauges();
          metrics.storageUp.set(capture.batcher.stats.storageUp ? 1 : 0);
          metrics.keysHeld.set(ring.size);
          metrics.buckets.set(limiter.size());
        },
        ready: () => readiness(store, capture, bus, state.stopping).then((r) => withCoordination(r, limiter)),
      }),
    );
    // With one thread the edge is this thread's; with more, edge threads start when the gateway listens.
    const edge =
      edges === null
        ? parts.add(
            createEdge({
              cfg,
              clock,
              log,
              metrics,
              ring,
              limiter: limiter.limiter,
              capture,
              manage: (req, res, body) => {
                // A client that takes no byte of its /v2 answer for send_timeout_ms is cut.
                cutWhenStalled(res, cfg.server.send_timeout_ms);
                api.manage(withBody(req, body), res);
              },
              reusePort: false,
              threadLabel: opts.testHooks ? '1' : null,
            }),
          )
        : null;
    if (edges) {
      parts.add(edges);
      ring.publisher = (k) => edges.pool?.publish(k) ?? Promise.resolve();
    }

    ring.start(cfg.storage.key_poll_interval_ms);
    keys.keys.start();
    // What the write-ahead logs hold from an earlier run goes in now, while serving,
    // with every listener (event rules, fan-out) in place: availability first.
    bus.resume();
    capture.batcher.resume();
    webhooks.dispatcher.resumeLog();

    /** Starts the edges (this thread's, or the edge threads), then the ops and management listeners. */
    const listen = async (
      beforeAnnounce?: () => void,
    ): Promise<{ port: number; opsPort: number; managementPort: number }> => {
      await listeners.internal(edges !== null);
      if (edge) ports.main = await edge.listen(cfg.server.port);
      else if (edges) {
        edges.pool = new EdgePool({
          cfg,
          log,
          metrics,
          threads,
          buckets: limiter.layout,
          keys: () => [...ring.all()],
          redactionKey: redactionKey(sealingKey),
          internal: listeners.internalAddress(),
          retryMs: opts.spoolRetryMs,
          testHooks: opts.testHooks === true,
          insert: sink,
          events: bus,
          slo: rules[1],
          usage: (id, sec) => ring.used(id, sec),
        });
        ports.main = await edges.pool.start(cfg.server.port);
      }
      if (edge) metrics.edgeThreads.set(1);
      const { opsPort, managementPort } = await listeners.listen();
      // The bootstrap admin key is made only once the gateway listens: a start that
      // fails (a port in use) leaves no key behind that was never shown.
      const boot = await keys.keys.bootstrap(cfg.admin_key);
      state.generatedAdminSecret = boot.secret;
      if (boot.replaced.length > 0) {
        // One line for a rotation (never the secret); the old key is revoked.
        log.info('bootstrap admin key rotated', {
          key_id: (boot.created ?? boot.current)?.id,
          replaces: boot.replaced.map((k) => k.id),
        });
      } else if (boot.created) log.info('bootstrap admin key installed', { key_id: boot.created.id });
      const fds = descriptorWarning(cfg.server);
      if (fds) log.warn(fds);
      beforeAnnounce?.();
      if (why) log.info(why);
      log.info(
        'wakegate listening',
        startLine(cfg, {
          file: opts.source?.file ?? null,
          dropIn: opts.source?.dropIn ?? null,
          port: ports.main,
          opsPort,
          managementPort,
          threads,
        }),
      );
      return { port: ports.main, opsPort, managementPort };
    };

    const control = {
      log,
      metrics,
      store,
      ring,
      keys: keys.keys,
      events: bus,
      limiter: limiter.limiter,
      capture,
      wakes,
      replayer: replay.replayer,
      endpoints: webhooks.endpoints,
      endpointTable: webhooks.endpointTable,
      deliveries: webhooks.deliveries,
      dispatcher: webhooks.dispatcher,
      fanout: webhooks.fanout,
      edge,
      listen,
      state,
      /** Drains the edges, then closes every subsystem, last built first. */
      async close(graceMs: number): Promise<void> {
        state.stopping = true;
        if (edge) await edge.drain(graceMs);
        if (edges) edges.graceMs = graceMs;
        await parts.close(log);
        log.info('wakegate stopped');
      },
    };
    return control;
  } catch (e) {
    await parts.close(log);
    throw e;
  }
}

export type Control = Awaited<ReturnType<typeof buildControl>>;

/** The edge threads, once they are started: stopped (drained) first, as the last part built. */
class EdgeSlot implements Part {
  readonly name = 'edges';
  pool: EdgePool | null = null;
  graceMs = 10_000;
  close(): Promise<void> | undefined {
    return this.pool?.close(this.graceMs);
  }
}

/** The store, opened and migrated; this process the owner of its data directory. */
async function openStorage(cfg: Readonly<Config>, log: Logger) {
  const lock = await holdDataDir(cfg);
  let store: Store;
  try {
    store = await openStore(cfg.storage);
  } catch (e) {
    await lock?.release();
    throw storageError(cfg, e);
  }
  const close = async () => {
    await store.close();
    await lock?.release();
  };
  try {
    await checkServer(cfg, store);
    const applied = await migrate(store);
    if (applied.length) log.info('migrations applied', { versions: applied });
  } catch (e) {
    await close();
    throw e;
  }
  return { name: 'storage', store, close };
}

/** Every key, in memory (polled from the table; handed to the edge threads). */
async function keyRing(store: Store, log: Logger) {
  const table = new KeyTable(store);
  const ring = new KeyRing(table, log);
  await ring.load();
  return { name: 'keyring', ring, table, close: () => ring.stop() };
}

function keyService(cfg: Readonly<Config>, table: KeyTable, ring: KeyRing, bus: EventBus, clock: Clock, log: Logger) {
  const keys = new KeyService(cfg, table, ring, bus, clock, log);
  return { name: 'key-service', keys, close: () => keys.stop() };
}

/**
 * Key versions reach the fleet within 100 ms: each one this instance stores is
 * announced (its id and version, authenticated), and each one another instance
 * announces is re-read from storage and applied if newer (and so handed to the edge
 * threads). Nothing on the channel is taken as a key. The key poll stays the backstop.
 */
async function announceKeys(co: Coordinator, keys: KeyService, ring: KeyRing, clock: Clock, log: Logger) {
  const publish = await co.channel(KEYS_CHANNEL, (a) => void ring.announced(a.id, a.version, a.revoked, clock.now()));
  keys.announce = (k) =>
    publish({ id: k.id, version: k.updated_at, revoked: k.revoked_at !== null }).catch((e: Error) =>
      log.warn('key change not published to the fleet; the others see it at their next key poll', {
        key_id: k.id,
        err: e,
      }),
    );
}
/** Channel names, after coordination.prefix. */
const KEYS_CHANNEL = 'keys';
const ENDPOINTS_CHANNEL = 'endpoints';

/** A delivery's lease outlasts its attempt (webhooks.timeout_ms) by this. */
const LEASE_MARGIN_MS = 5000;

/** Endpoints, deliveries, fan-out from the events table, and dispatch. */
async function webhooksPart(
  cfg: Readonly<Config>,
  store: Store,
  sealingKey: Buffer,
  bus: EventBus,
  clock: Clock,
  log: Logger,
  metrics: Metrics,
  co: Coordinator | null,
) {
  const endpointTable = new EndpointTable(store, new SecretBox(sealingKey));
  endpointTable.onUnsealable = (id) =>
    log.warn('webhook endpoint skipped: its signing secret does not open (wrong sealing key, or altered)', {
      endpoint_id: id,
    });
  const endpoints = new EndpointService(cfg, endpointTable, bus, clock, log);
  await endpoints.load();
  const deliveries = new DeliveryTable(store);
  await applyDeliveryRetention(store, cfg.webhooks.dead_letter_retention_days);
  const dispatcher = new Dispatcher(
    cfg,
    deliveries,
    endpoints,
    clock,
    log,
    metrics,
    openLog<DeliveryRecord>(cfg, log, 'deliveries'),
  );
  const fanout = new FanOut(
    cfg,
    new EventTable(store),
    deliveries,
    endpoints,
    dispatcher,
    clock,
    log,
    metrics,
    new FanoutCursorTable(store),
    co ? new FanoutLeader(co) : null,
  );
  if (co) {
    // A fleet's deliveries are attempted under leases, by whichever instance is free,
    // and an endpoint registered or changed on one instance is read at once by the others.
    dispatcher.leases = new DeliveryLeases(co, cfg.webhooks.timeout_ms + LEASE_MARGIN_MS);
    // Announced (id and version, authenticated): the others read it from storage unless they hold it.
    const touched = await co.channel(ENDPOINTS_CHANNEL, (a) => {
      if ((endpoints.get(a.id)?.updated_at ?? -1) < a.version) void endpoints.poll();
    });
    // Not published (Redis down): the others read it at their endpoint poll.
    endpoints.changed = (e) => touched({ id: e.id, version: e.updated_at, revoked: false }).catch(() => {});
  }
  await fanout.init();
  await dispatcher.resume();
  bus.onRecorded(() => void fanout.poll());
  endpoints.start(cfg.storage.key_poll_interval_ms);
  dispatcher.start();
  // Alone, this instance records every event and polls as it does.
  fanout.start(250, co === null);
  const plugin: ApiPlugin = webhooksPlugin({ endpoints, deliveries, dispatcher });
  return {
    name: 'webhooks',
    endpoints,
    endpointTable,
    deliveries,
    dispatcher,
    fanout,
    plugin,
    async close() {
      // Turn the last events into (persisted) deliveries, then let running attempts finish.
      await fanout.poll();
      await fanout.stop();
      await dispatcher.stop();
      endpoints.stop();
    },
  };
}

/** Replays: running ones finish (and are recorded) before capture closes. */
function replayPart(replayer: Replayer) {
  return { name: 'replay', replayer, close: () => replayer.close() };
}

/** The /v2 API, and `manage`: a /v2 call from whichever listener, recorded as a wake like any other (route v2). */
async function apiPart(
  cfg: Readonly<Config>,
  deps: Omit<Parameters<typeof buildApi>[0], 'config'>,
  server: http.Server,
  plugins: ApiPlugin[],
  recorder: Recorder,
  fallbackEnv: string,
) {
  const { app, handler } = await buildApi({ config: cfg, ...deps }, server, plugins);
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
    handler(req, res);
  };
  return { name: 'api', app: app as FastifyInstance, manage, close: () => app.close() };
}

interface ListenerDeps {
  cfg: Readonly<Config>;
  metrics: Metrics;
  management: http.Server;
  api: { manage: (req: IncomingMessage, res: ServerResponse) => void };
  recorder: Recorder;
  fallbackEnv: string;
  mainPort: () => number;
  pool: () => EdgePool | null;
  testHooks: boolean;
  /** Edge threads (the internal listener's connection limit follows). */
  threads: number;
  refresh: () => void;
  ready: () => Promise<{ ok: boolean; body: Record<string, unknown> }>;
}

/**
 * The control thread's listeners: ops (/metrics of every thread, /healthz, /readyz,
 * and by default the console and /v2), the management listener when it has its own
 * port, and with edge threads a loopback listener for the /v2 calls they hand over.
 */
function listenersPart(d: ListenerDeps): Part & {
  ops: http.Server;
  management: http.Server;
  internal: (needed: boolean) => Promise<void>;
  internalAddress: () => { port: number; token: string };
  listen: () => Promise<{ opsPort: number; managementPort: number }>;
} {
  const { cfg } = d;
  const separate = cfg.management.listener === 'separate';
  const ops = createOpsServer({
    scrape: async () => {
      d.refresh();
      const pool = d.pool();
      return pool ? pool.metrics(await d.metrics.registry.getMetricsAsJSON()) : d.metrics.registry.metrics();
    },
    contentType: d.metrics.registry.contentType,
    ready: d.ready,
    // The ops listener's other paths are the management listener's, unless that has its own port.
    other: separate ? null : (req, res) => d.management.emit('request', req, res),
  });
  const serve = managementHandler(d);
  d.management.on('request', serve);
  d.management.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    res.writeContinue();
    serve(req, res);
  });
  const token = randomBytes(32).toString('base64url');
  // Only connections that showed the token count against the edges' pools (internal-listener.ts).
  const internal = internalListener({
    token,
    threads: d.threads,
    serve: (req, res, peer) => {
      (req as WithPeer)[PEER] = peer;
      d.api.manage(req, res);
    },
  });
  const listen = (server: http.Server, port: number, host: string, name: string, setting: string) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', (e) => reject(listenError(e, { name, setting, port })));
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  const close = async (server: http.Server) => {
    if (!server.listening) return;
    await new Promise<void>((r) => server.close(() => r()));
    server.closeAllConnections();
  };
  return {
    name: 'listeners',
    ops,
    management: d.management,
    /** With edge threads: the loopback listener they hand /v2 calls to. */
    internal: async (needed: boolean) => {
      if (needed) await listen(internal, 0, '127.0.0.1', 'internal', 'server.threads');
    },
    internalAddress: () => ({ port: (internal.address() as AddressInfo).port, token }),
    async listen() {
      const s = cfg.server;
      const m = cfg.management;
      const opsPort = await listen(ops, s.ops_port, s.ops_host, 'OPS_PORT', 'server.ops_port');
      const managementPort = separate
        ? await listen(d.management, m.port, m.host, 'management.port', 'management.port')
        : opsPort;
      return { opsPort, managementPort };
    },
    async close() {
      await close(internal);
      await close(ops);
      await close(d.management);
    },
  };
}

/**
 * What the management listener serves (the ops listener's other paths, or a
 * listener of its own): the console and /v2, and nothing it would proxy. The
 * console never shares an origin with a proxied app, whose pages could otherwise
 * read the signed-in key.
 */
function managementHandler(d: ListenerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const cfg = d.cfg;
  const consoleApp = cfg.console.enabled ? consoleHandler(cfg.console.path, d.mainPort) : null;
  const crash = /^\/__test\/edges\/(\d+)\/crash$/;
  return (req, res) => {
    const url = req.url ?? '/';
    if (consoleApp?.owns(url)) {
      const x = d.recorder.begin();
      x.route = 'console';
      x.environment = d.fallbackEnv;
      x.status = consoleApp.handle(req, res, x.id);
      req.resume();
      return d.recorder.finish(req, x);
    }
    const hook = d.testHooks && req.method === 'POST' ? crash.exec(url) : null;
    if (hook) {
      const ok = d.pool()?.crash(Number(hook[1])) ?? false;
      res.writeHead(ok ? 202 : 404).end();
      return;
    }
    const keyInUrl = holdsGatewayKey(url);
    if (isManagementPath(url) && !keyInUrl) return d.api.manage(req, res);
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

async function readiness(
  store: Store,
  capture: Capture,
  bus: EventBus,
  stopping: boolean,
): Promise<{ ok: boolean; body: Record<string, unknown> }> {
  if (stopping) return { ok: false, body: { status: 'stopping' } };
  const st = capture.batcher.stats;
  let storage = 'up';
  let migrations = false;
  try {
    migrations = await migrationsApplied(store);
  } catch {
    storage = 'down';
  }
  if (!st.storageUp || !bus.stats.storageUp) storage = 'down';
  // During a storage outage the gateway still serves (wakes go to the spool),
  // so it stays ready; the body and the metrics show the outage.
  const ok = storage === 'up' ? migrations : st.spoolBatches >= 0;
  return {
    ok,
    body: {
      status: storage === 'up' ? (migrations ? 'ready' : 'migrations pending') : 'degraded',
      storage,
      migrations_applied: migrations,
      wakes_buffered: capture.batcher.buffered,
      spool_bytes: st.spoolBytes,
      spool_batches: st.spoolBatches,
      events_spool_batches: bus.stats.spoolBatches,
    },
  };
}

/**
 * A fleet's /readyz also shows its coordination: whether Redis answers, what decisions
 * do while it does not (on_unavailable) and how many instances share each bucket. A
 * Redis outage leaves the gateway ready (every instance loses it at once, and
 * on_unavailable says how it serves meanwhile); the status says degraded.
 */
function withCoordination(
  r: { ok: boolean; body: Record<string, unknown> },
  limiter: { coordination(): { redis: 'up' | 'down' } | null },
): { ok: boolean; body: Record<string, unknown> } {
  const c = limiter.coordination();
  if (c === null) return r;
  const status = c.redis === 'down' && r.body.status === 'ready' ? 'degraded' : r.body.status;
  return { ok: r.ok, body: { ...r.body, status, coordination: c } };
}

/**
 * The logs of edge threads that this start will not run (fewer threads than the
 * last run): their wakes are stored now, each once, and heard by the event rules.
 */
async function storeOrphanLogs(
  cfg: Readonly<Config>,
  log: Logger,
  threads: number,
  sink: Sink<Wake>,
  rules: readonly RowListener<Wake>[],
): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(join(cfg.storage.data_dir, 'wal'));
  } catch {
    return;
  }
  const kept = threads === 1 ? 0 : threads;
  for (const name of names) {
    const m = /^wakes-(\d+)$/.exec(name);
    if (!m || Number(m[1]) <= kept) continue;
    const wal = openLog<Wake>(cfg, log, name, wakeLogCodec(retentionOf(cfg)), LOG_SEGMENT_TAG);
    if (wal.length === 0) {
      wal.close();
      continue;
    }
    const b = new Batcher<Wake>(
      {
        batchRows: cfg.capture.batch_rows,
        flushIntervalMs: cfg.capture.flush_interval_ms,
        maxBufferedRows: 1,
        rowsInLog: true,
      },
      sink,
      wal,
      log,
    );
    for (const r of rules) b.onRows(r);
    // What storage does not take stays in the log for the next start.
    await b.stop();
  }
}
