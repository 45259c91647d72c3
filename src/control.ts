import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { Admission } from './admission/admission.js';
import { keyedPathsExposed } from './admission/exposure.js';
import { RouteTable } from './admission/routes.js';
import { ViaValues, viaName } from './admission/via.js';
import type { OpenApiServer } from './api/context.js';
import { Cursors, cursorKey } from './api/cursor.js';
import { type ListenerAddress, listenerServer } from './api/openapi.js';
import { replayPlugin } from './api/replay.js';
import { type ApiPlugin, buildApi } from './api/server.js';
import { webhooksPlugin } from './api/webhooks.js';
import type { KeyRecord } from './auth/key.js';
import { KeyHolds } from './auth/key-holds.js';
import { KeyRing } from './auth/keyring.js';
import { KeyService } from './auth/keys-service.js';
import type { Sink } from './capture/batcher.js';
import { storeOrphanLogs } from './capture/orphans.js';
import { createCapture, openLog, redactionKey, retentionOf } from './capture/pipeline.js';
import { EXCHANGE, PEER, type Recorder, type WithExchange, type WithPeer } from './capture/recorder.js';
import type { Wake } from './capture/wake.js';
import { wakeLogCodec } from './capture/wake-log.js';
import { type Clock, systemClock } from './clock.js';
import type { Config } from './config/index.js';
import { markKey } from './delivery-mark.js';
import { captureShare, createEdge, routesUnderManagement } from './edge.js';
import { EventBus } from './events/bus.js';
import { type EventRecord, eventLogCodec } from './events/event.js';
import { QUIET_MS, sloRules } from './events/slo.js';
import { wakeRules } from './events/wake-rules.js';
import { instancesMemory, localDeciders, rememberedInstances } from './fleet/alive.js';
import { FleetQueue } from './fleet/delivery-queue.js';
import { DeliveryLeases, FanoutLeader } from './fleet/dispatch.js';
import { coordinatorFor, limiterPart } from './fleet/limiter.js';
import type { Coordinator } from './fleet/redis.js';
import { gatewayServer } from './http-server.js';
import { listenersPart } from './listeners.js';
import { createLogger, type Logger } from './log.js';
import { apiBodyLimits, bodyRefusal, withBody } from './management-body.js';
import { createMetrics, type Metrics, primeSeries } from './metrics/index.js';
import { descriptorWarning } from './proxy/descriptors.js';
import { Replayer } from './proxy/replay.js';
import { trustedProxies } from './proxy/trust.js';
import { bucketsSaver, restoredBuckets } from './ratelimit/persist.js';
import { readiness, withCoordination } from './readiness.js';
import { type Part, Parts } from './root.js';
import { loadSealingKey, SecretBox } from './seal.js';
import { startProbe } from './start-probe.js';
import { checkServer, holdDataDir, portFree, resolveThreads, startLine, storageError } from './startup.js';
import { openStore } from './store/client.js';
import { releaseEngineLoadPages } from './store/engine-pages.js';
import { EventTable } from './store/events.js';
import { KeyTable } from './store/keys.js';
import { migrate } from './store/migrations.js';
import type { Store } from './store/store.js';
import { WakeInserter, WakeQuerier } from './store/wakes.js';
import { applyDeliveryRetention, DeliveryTable, EndpointTable, FanoutCursorTable } from './store/webhooks.js';
import { cutWhenStalled } from './threads/answer-relay.js';
import { EdgePool } from './threads/pool.js';
import { loadEdgeTls } from './tls/edge-tls.js';
import type { TlsMaterial } from './tls/material.js';
import { insecureOrigins } from './tls/origin-trust.js';
import { tlsPart } from './tls/part.js';
import type { WatchFiles } from './tls/reloader.js';
import { exposedTicketFiles, secretTlsFiles } from './tls/tickets.js';
import { traceStart } from './tracing/context.js';
import { createTracing, type Tracing } from './tracing/index.js';
import { tracedSend } from './tracing/webhook-spans.js';
import type { Resolver } from './webhooks/address.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { EndpointService } from './webhooks/endpoints.js';
import { FanOut } from './webhooks/fanout.js';
import { LocalQueue } from './webhooks/local-queue.js';
import type { DeliveryRecord } from './webhooks/records.js';
import { endpointSender } from './webhooks/sender.js';

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
  /** Ends a start that waits for another instance's migrations (a stop asked meanwhile). */
  startSignal?: AbortSignal;
  /**
   * Where a generated bootstrap admin key's secret would be shown cannot be read (stdout is
   * /dev/null): none is generated, as one shown nowhere could never be used.
   */
  secretUnseen?: boolean;
  /** Test hooks (WAKEGATE_TEST_HOOKS=1): the serving thread in a header, and a way to crash an edge thread. */
  testHooks?: boolean;
  /** How certificate files are watched for changes (tests trigger reloads themselves); and their debounce. */
  tlsWatch?: { watch?: WatchFiles; debounceMs?: number };
  /** How webhook hosts are resolved, at registration and for each attempt (tests answer without a network). */
  webhookResolver?: Resolver;
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
    // The certificates and ticket keys first: a file that does not load stops the start before anything opens.
    let mainTls = loadEdgeTls(cfg);
    // A port in use is said before the store is opened and migrated (which can take a while).
    await portsFree(cfg, threads > 1);
    // /healthz is alive (and /readyz says starting) while storage opens and migrates.
    const probe = await startProbe(cfg);
    if (probe !== null) parts.add(probe);
    const storage = parts.add(await openStorage(cfg, log, opts.startSignal));
    const store = storage.store;
    const sealingKey = loadSealingKey(cfg.storage.encryption_key, cfg.storage.data_dir);
    // The edge threads start when the gateway listens; key versions reach them through this slot.
    const edges = threads === 1 ? null : new EdgeSlot();
    // The tunnels of this thread's edge (threads: 1), by key: cut as this ring learns their keys
    // revoked. Edge threads keep their own, told by their copies of the ring; here it then holds nothing.
    const holds = new KeyHolds(() => clock.now(), log);
    const keyring = parts.add(await keyRing(store, log, edges, holds));
    const ring = keyring.ring;
    const bus = new EventBus(
      new EventTable(store),
      clock,
      log,
      openLog<EventRecord>(cfg, log, 'events', eventLogCodec),
      {
        onDrop: (n, reason) => metrics.eventsDropped.labels(reason).inc(n),
      },
    );
    const co = await coordinatorFor(cfg, log, metrics);
    // Channel messages are authenticated with a key derived from the sealing key (Redis never sees it).
    co?.authenticate(sealingKey);
    // The fleet's Redis connection closes last of what uses it.
    if (co) parts.add({ name: 'coordination', close: () => co.close() });
    // Spans are built and exported here, for every thread; it closes after what feeds it.
    const tracing = parts.add(createTracing({ cfg, log, metrics }));
    const webhooks = parts.add(
      await webhooksPart({
        cfg,
        store,
        sealingKey,
        bus,
        clock,
        log,
        metrics,
        co,
        tracing,
        resolver: opts.webhookResolver,
      }),
    );
    // The event log closes before the webhooks that fan it out: added after them.
    parts.add({ name: 'events', close: () => bus.stop() });
    const announce = co ? await keyAnnouncer(co, ring, clock, log) : null;
    const keys = parts.add(keyService({ cfg, table: keyring.table, ring, events: bus, clock, log, announce }));
    // A lone gateway's buckets and quota windows outlive a restart (saved in DATA_DIR; a fleet's live in Redis).
    const layout = co ? undefined : restoredBuckets(cfg, clock.now(), log);
    const dir = cfg.storage.data_dir;
    const limiter = parts.add(
      limiterPart(cfg, {
        co,
        events: bus,
        metrics,
        log,
        now: () => clock.now(),
        layout,
        // A start while Redis is away splits buckets by the fleet's last count, not by 1.
        instancesAtStart: Math.max(rememberedInstances(dir), localDeciders(threads)),
        remember: instancesMemory(dir, (e) =>
          log.warn('coordination: the count of instances could not be remembered in DATA_DIR', { err: e }),
        ),
      }),
    );
    if (limiter.layout) parts.add(bucketsSaver({ layout: limiter.layout, dir, now: () => clock.now(), log }));
    const inserter = new WakeInserter(store, wakeLogCodec(retentionOf(cfg)));
    const realSink: Sink<Wake> = (rows, token, file) => inserter.insert(rows, token, file);
    const sink = opts.wakeSink ? opts.wakeSink(realSink) : realSink;
    const once = co ? (name: string, ttlMs: number) => co.once(name, ttlMs) : null;
    // The burns of the last hour, stored: a gateway started again keeps their quiet hour.
    const burns = await new EventTable(store).since('slo.burn', clock.now() - QUIET_MS).catch((e: Error) => {
      log.warn('the SLO burns of the last hour could not be read: one may be raised again', { err: e });
      return [];
    });
    const rules = [wakeRules(cfg, bus), sloRules(cfg, bus, once, burns)] as const;
    const capture = parts.add(
      createCapture({
        // With edge threads, this thread's pipeline (the /v2 calls' wakes) keeps its share of capture's bounds.
        cfg: threads > 1 ? captureShare(cfg, threads, true) : cfg,
        clock,
        log,
        metrics,
        stream: 'wakes',
        sink,
        redactionKey: redactionKey(sealingKey),
        ...(opts.spoolRetryMs === undefined ? {} : { retryMs: opts.spoolRetryMs }),
        trace: tracing.hook,
      }),
    );
    for (const r of rules) capture.batcher.onRows(r);
    parts.add(storeOrphanLogs(cfg, log, threads, sink, rules, opts.spoolRetryMs));
    const wakes = new WakeQuerier(store);
    const routes = new RouteTable(cfg.routes, cfg.environments, cfg.capture);
    // The one admission of this thread's /v2 calls and replays (each edge has its own, of the same rules).
    // Behind server.trusted_proxies a /v2 call is its X-Forwarded-For client's, on every listener, as a proxied request is.
    const trusted = trustedProxies(cfg.server.trusted_proxies);
    const admission = new Admission({ routes, ring, limiter: limiter.limiter, metrics, clock, trusted });
    // The gateway's name in Via, the same on every thread and instance of an installation (admission/via.ts).
    const via = new ViaValues(viaName(sealingKey));
    const replay = parts.add(
      replayPart(
        new Replayer({
          wakes,
          admission,
          recorder: capture.recorder,
          redactor: capture.redactor,
          events: bus,
          log,
          trace: traceStart(cfg),
          via,
        }),
      ),
    );
    // The main listener's limits and answers to malformed heads, on this listener too.
    const management = gatewayServer(cfg.server);
    // The ports listened on (the main one's, and the management listener's: the ops one's unless separate).
    const ports = { main: cfg.server.port, management: 0 };
    const api = parts.add(
      await apiPart(
        cfg,
        {
          clock,
          log,
          ring,
          keys: keys.keys,
          wakes,
          admission,
          metrics,
          cursors: new Cursors(cursorKey(sealingKey)),
          servedFrom: servedFrom(cfg, ports, trusted),
        },
        management,
        [webhooks.plugin, replayPlugin(replay.replayer)],
        capture.recorder,
        routes.fallbackEnvironment,
      ),
    );
    const listeners = parts.add(
      listenersPart({
        cfg,
        metrics,
        management,
        api,
        clientOf: (req, x) => admission.clientOf(req, x),
        recorder: capture.recorder,
        fallbackEnv: routes.fallbackEnvironment,
        mainPort: () => ports.main,
        pool: () => edges?.running ?? null,
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
              holds,
              limiter: limiter.limiter,
              capture,
              manage: (req, res, body, refused) => {
                // A client that takes no byte of its /v2 answer for send_timeout_ms is cut.
                cutWhenStalled(res, cfg.server.send_timeout_ms);
                api.manage(
                  withBody(req, body, refused ? bodyRefusal(refused, apiBodyLimits(cfg.server)) : null),
                  res,
                  'main',
                );
              },
              reusePort: false,
              threadLabel: opts.testHooks ? '1' : null,
              tls: mainTls,
              via,
            }),
          )
        : null;
    if (edges) parts.add(edges);
    const applyMain = (material: TlsMaterial) => {
      if (mainTls) mainTls = { ...mainTls, material };
      edge?.setTls(material);
      edges?.running?.publishTls(material);
    };
    const tls = parts.add(
      tlsPart({
        log,
        metrics,
        listeners: [
          ...(cfg.server.tls && mainTls
            ? [
                {
                  listener: 'main',
                  at: 'server.tls',
                  settings: cfg.server.tls,
                  initial: mainTls.material,
                  apply: applyMain,
                },
              ]
            : []),
          ...listeners.reloadable,
        ],
        ...opts.tlsWatch,
      }),
    );

    ring.start(cfg.storage.key_poll_interval_ms, undefined, store.changes);
    keys.keys.start();
    // What the write-ahead logs hold from an earlier run goes in now, while serving,
    // with every listener (event rules, fan-out) in place: availability first. (The
    // deliveries' log went in already, before the dispatcher resumed: webhooksPart.)
    bus.resume();
    capture.batcher.resume();

    // Drains the edges, then closes every subsystem, last built first: once, for a stop or for a start that failed.
    let closing: Promise<void> | null = null;
    const closeAll = (graceMs: number): Promise<void> => {
      closing ??= (async () => {
        state.stopping = true;
        if (edge) await edge.drain(graceMs);
        edges?.stopWithin(graceMs);
        await parts.close(log);
      })();
      return closing;
    };

    /**
     * Starts the edges (this thread's, or the edge threads), then the ops and management
     * listeners. A start that fails here (a host this machine does not have, a port taken
     * since it was checked) closes what it opened, as a build that fails does: the
     * listeners already bound, the edge threads, the store and its engine, every timer.
     * The caller may then exit at once: nothing of this start is left running.
     */
    const listen = async (
      beforeAnnounce?: () => void,
    ): Promise<{ port: number; opsPort: number; managementPort: number }> => {
      try {
        return await open(beforeAnnounce);
      } catch (e) {
        // Nothing was served yet that a grace period would let finish.
        await closeAll(0);
        throw e;
      }
    };
    const open = async (
      beforeAnnounce?: () => void,
    ): Promise<{ port: number; opsPort: number; managementPort: number }> => {
      // WAKEGATE_ADMIN_KEY (its secret is the operator's) is installed, and the key it
      // replaces revoked, before anything listens: a replaced key, perhaps the leaked one
      // the rotation is for, is never served by the start that revokes it.
      const early = cfg.admin_key === null ? null : await keys.keys.bootstrap(cfg.admin_key);
      await listeners.internal(edges !== null);
      if (edge) ports.main = await edge.listen(cfg.server.port);
      else if (edges) {
        ports.main = await edges.start(cfg.server.port, {
          cfg,
          log,
          metrics,
          threads,
          buckets: limiter.layout,
          authorityBuckets: limiter.authorityLayout,
          keys: () => [...ring.all()],
          redactionKey: redactionKey(sealingKey),
          via: via.name,
          internal: listeners.internalAddress(),
          retryMs: opts.spoolRetryMs,
          testHooks: opts.testHooks === true,
          insert: sink,
          events: bus,
          slo: rules[1],
          usage: (id, sec) => ring.used(id, sec),
          tls: mainTls,
          spans: (s) => tracing.add(s),
        });
      }
      if (edge) metrics.edgeThreads.set(1);
      // The ops port passes from the start's probe to the ops listener.
      await probe?.close();
      const { opsPort, managementPort } = await listeners.listen();
      ports.management = managementPort;
      // A generated admin key is made only once the gateway listens: a start that fails
      // (a port in use) leaves no key behind that was never shown.
      const boot = early ?? (await keys.keys.bootstrap(cfg.admin_key, { generate: opts.secretUnseen !== true }));
      if (boot.unseen) {
        log.warn('no key exists, and none was generated: stdout is /dev/null, where its secret would be shown once', {
          fix: 'start once with stdout to a terminal or a file, or set WAKEGATE_ADMIN_KEY, or run `wakegate keys create --offline`',
        });
      }
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
      const insecure = insecureOrigins(cfg);
      if (insecure) log.warn(insecure);
      for (const line of keyedPathsExposed(routes)) log.warn(line);
      for (const line of routesUnderManagement(cfg)) log.warn(line);
      for (const w of exposedTicketFiles(secretTlsFiles(cfg))) log.warn(w);
      beforeAnnounce?.();
      if (why) log.info(why);
      // The embedded engine has loaded, migrated and read its tables: what only that touched of its library leaves the resident set.
      const released = store.readsFiles ? releaseEngineLoadPages() : null;
      if (released !== null)
        log.info("storage engine: its library's load-time pages let go", { mb: Math.round(released / 2 ** 20) });
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
      /** Reads every TLS listener's certificates again now (SIGHUP); true when all load. */
      reloadTls: () => tls.reload(),
      /** Drains the edges, then closes every subsystem, last built first (at once when a failed start closed them). */
      async close(graceMs: number): Promise<void> {
        const first = closing === null;
        await closeAll(graceMs);
        if (first) log.info('wakegate stopped');
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
  private pool: EdgePool | null = null;
  private graceMs = 10_000;
  /** Starts the edge threads on `port`; resolves with the port they listen on. */
  start(port: number, o: ConstructorParameters<typeof EdgePool>[0]): Promise<number> {
    this.pool = new EdgePool(o);
    return this.pool.start(port);
  }
  get running(): EdgePool | null {
    return this.pool;
  }
  /** The grace period of the stop to come (the gateway's stop is given it). */
  stopWithin(graceMs: number): void {
    this.graceMs = graceMs;
  }
  close(): Promise<void> | undefined {
    return this.pool?.close(this.graceMs);
  }
  /** Key versions for the edge threads (none before they start: they start with every key). */
  publish(keys: KeyRecord[]): Promise<void> {
    return this.pool?.publish(keys) ?? Promise.resolve();
  }
}

/** The ports this gateway will listen on, each tried as it will be (edge threads share the main one). */
async function portsFree(cfg: Readonly<Config>, sharedMain: boolean): Promise<void> {
  const s = cfg.server;
  await portFree(s.port, s.host, sharedMain, { name: 'PORT', setting: 'server.port' });
  await portFree(s.ops_port, s.ops_host, false, { name: 'OPS_PORT', setting: 'server.ops_port' });
  const m = cfg.management;
  if (m.listener === 'separate')
    await portFree(m.port, m.host, false, { name: 'management.port', setting: 'management.port' });
}

/** The store, opened and migrated; this process the owner of its data directory. */
async function openStorage(cfg: Readonly<Config>, log: Logger, signal?: AbortSignal) {
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
    const applied = await migrate(store, undefined, {
      waiting: (holder) => log.info('waiting for another instance to apply migrations', { holder }),
      ...(signal ? { signal } : {}),
    });
    if (applied.length) log.info('migrations applied', { versions: applied });
  } catch (e) {
    await close();
    throw e;
  }
  return { name: 'storage', store, close };
}

/** Every key, in memory (polled from the table; handed to the edge threads). */
async function keyRing(store: Store, log: Logger, edges: EdgeSlot | null, holds: KeyHolds) {
  const table = new KeyTable(store);
  const ring = new KeyRing(table, log, edges ? (k) => edges.publish(k) : null, (k) => holds.applied(k));
  await ring.load();
  return { name: 'keyring', ring, table, close: () => ring.stop() };
}

function keyService(o: ConstructorParameters<typeof KeyService>[0]) {
  const keys = new KeyService(o);
  return { name: 'key-service', keys, close: () => keys.stop() };
}

/**
 * Key versions reach the fleet within 100 ms: each one this instance stores is
 * announced (its id and version, authenticated), and each one another instance
 * announces is re-read from storage and applied if newer (and so handed to the edge
 * threads). Nothing on the channel is taken as a key. The key poll stays the backstop.
 */
async function keyAnnouncer(co: Coordinator, ring: KeyRing, clock: Clock, log: Logger) {
  const publish = await co.channel(KEYS_CHANNEL, (a) => void ring.announced(a.id, a.version, a.revoked, clock.now()));
  return (k: KeyRecord) =>
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

interface WebhooksDeps {
  cfg: Readonly<Config>;
  store: Store;
  sealingKey: Buffer;
  bus: EventBus;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** The fleet's Redis (deliveries attempted under leases, one fan-out leader); null: alone. */
  co: Coordinator | null;
  /** Each attempt's outcome becomes a CLIENT span (tracing on). */
  tracing: Tracing;
  /** How webhook hosts are resolved; the system's resolver unless given. */
  resolver: Resolver | undefined;
}

/** Endpoints, deliveries, fan-out from the events table, and dispatch. */
async function webhooksPart({ cfg, store, sealingKey, bus, clock, log, metrics, co, tracing, resolver }: WebhooksDeps) {
  // Deliveries carry a mark the gateway knows them by, should one come back to it (delivery-mark.ts).
  const marks = markKey(redactionKey(sealingKey));
  const endpointTable = new EndpointTable(store, new SecretBox(sealingKey), (id) =>
    log.warn('webhook endpoint skipped: its signing secret does not open (wrong sealing key, or altered)', {
      endpoint_id: id,
    }),
  );
  // In a fleet, an endpoint registered or changed here is announced (id and version,
  // authenticated); the others read it from storage unless they hold it.
  const publish = co ? co.publisher(ENDPOINTS_CHANNEL) : null;
  const endpoints = new EndpointService({
    cfg,
    table: endpointTable,
    events: bus,
    clock,
    log,
    // Not published (Redis down): the others read it at their endpoint poll.
    announce: publish && ((e) => publish({ id: e.id, version: e.updated_at, revoked: false }).catch(() => {})),
    ...(resolver ? { resolver } : {}),
  });
  await endpoints.load();
  const deliveries = new DeliveryTable(store);
  await applyDeliveryRetention(store, cfg.webhooks.dead_letter_retention_days);
  const spool = openLog<DeliveryRecord>(cfg, log, 'deliveries');
  // A fleet's deliveries are attempted under leases, by whichever instance is free.
  const queue = co
    ? new FleetQueue({
        rows: deliveries,
        spool,
        clock,
        log,
        leases: new DeliveryLeases(co, cfg.webhooks.timeout_ms + LEASE_MARGIN_MS),
      })
    : new LocalQueue({ rows: deliveries, spool, clock, log });
  const dispatcher = new Dispatcher({
    cfg,
    queue,
    endpoints,
    send:
      tracing.hook === null
        ? endpointSender(cfg, endpoints, resolver, marks)
        : tracedSend(endpointSender(cfg, endpoints, resolver, marks), endpoints, tracing.webhook),
    clock,
    log,
    metrics,
  });
  const fanout = new FanOut({
    cfg,
    events: new EventTable(store),
    deliveries,
    endpoints,
    dispatcher,
    clock,
    log,
    metrics,
    cursors: new FanoutCursorTable(store),
    leader: co ? new FanoutLeader(co) : null,
  });
  if (co) {
    await co.channel(ENDPOINTS_CHANNEL, (a) => {
      if ((endpoints.get(a.id)?.updated_at ?? -1) < a.version) void endpoints.poll();
    });
  }
  await fanout.init();
  // Stores the outcomes the deliveries' log holds from the earlier run, then resumes what is unfinished.
  await dispatcher.resume();
  bus.onRecorded(() => void fanout.poll());
  endpoints.start(cfg.storage.key_poll_interval_ms, store.changes);
  dispatcher.start();
  // Alone, this instance records every event and polls as it does; on the embedded store
  // (no other process writes it) the timer only retries a poll that failed.
  fanout.start(250, co === null, store.changes !== null);
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

/** Which listener a /v2 call came on: the main one (on this thread's edge, or handed over by an edge thread), or the management one. */
type CalledOn = 'main' | 'management';
const CALLED_ON: unique symbol = Symbol('wakegate.called-on');
type WithCalledOn = { [CALLED_ON]?: CalledOn };

/**
 * The server a /v2 call was served from, as `/v2/openapi.json` names it (openapi.ts
 * listenerServer): the listener it came on (apiPart's manage says which), at its
 * configured host and the port it listens on; `/` through a trusted proxy.
 */
function servedFrom(
  cfg: Readonly<Config>,
  ports: { readonly main: number; readonly management: number },
  trusted: (ip: string) => boolean,
): (req: IncomingMessage) => OpenApiServer | null {
  const separate = cfg.management.listener === 'separate';
  const address = (on: CalledOn): ListenerAddress =>
    on === 'main'
      ? { name: 'main', tls: cfg.server.tls !== null, host: cfg.server.host, port: ports.main }
      : separate
        ? { name: 'management', tls: cfg.management.tls !== null, host: cfg.management.host, port: ports.management }
        : { name: 'ops', tls: cfg.server.ops_tls !== null, host: cfg.server.ops_host, port: ports.management };
  // Made once per listener and way in (directly, or through a trusted proxy), once it listens.
  const made = new Map<string, OpenApiServer>();
  return (req) => {
    const on = (req as WithCalledOn)[CALLED_ON];
    if (on === undefined) return null;
    const viaProxy = trusted((req as WithPeer)[PEER] ?? req.socket.remoteAddress ?? '');
    const l = address(on);
    const key = `${on} ${viaProxy} ${l.port}`;
    let server = made.get(key);
    if (server === undefined) {
      server = listenerServer(l, viaProxy);
      made.set(key, server);
    }
    return server;
  };
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
  const manage = (req: IncomingMessage, res: ServerResponse, on: CalledOn) => {
    const x = recorder.begin();
    x.route = 'v2';
    x.environment = fallbackEnv;
    (req as WithCalledOn)[CALLED_ON] = on;
    // Behind a trusted proxy the wake's client_ip is X-Forwarded-For's client, whether or not the call is admitted.
    deps.admission.clientOf(req, x);
    // Over HTTP/2 on the ops or management listener (the console in a browser).
    if (req.httpVersionMajor === 2) x.protocol = 'h2';
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
