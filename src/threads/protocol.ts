import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { KeyRecord } from '../auth/key.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import type { EventType } from '../events/bus.js';
import type { SharedBucketsLayout } from '../ratelimit/shared-buckets.js';
import type { EdgeTls } from '../tls/edge-tls.js';
import type { TlsMaterial } from '../tls/material.js';
import type { SpanInput } from '../tracing/span-input.js';

/**
 * The messages between the control thread and its edge threads: everything either
 * side says to the other is one of these, and nothing else crosses.
 */

/** What an edge thread is started with. */
export interface EdgeData {
  config: Readonly<Config>;
  /** 1..threads: names the thread's log stream (wal/wakes-<index>). */
  index: number;
  threads: number;
  /** The port to listen on (with SO_REUSEPORT); 0 for the first edge of a start on port 0. */
  port: number;
  /** The shared-memory buckets; null in a fleet (each edge thread leases from Redis). */
  buckets: SharedBucketsLayout | null;
  /** In a fleet: the buckets of keys that hold keys:write, limited by this process alone (fleet/authority-local.ts). */
  authorityBuckets: SharedBucketsLayout | null;
  keys: KeyRecord[];
  redactionKey: Uint8Array;
  /** The gateway's `Via` name (admission/via.ts), the same on every thread. */
  via: string;
  /** The control thread's loopback listener for /v2 calls, and the token it asks of them. */
  internal: { port: number; token: string };
  retryMs: number | undefined;
  testHooks: boolean;
  /** server.tls: the certificates as last loaded, and the process's session-ticket keys (the same on every thread). */
  tls?: EdgeTls | null;
}

/** A wake's share of the SLO rules, which the control thread keeps for every thread at once. */
export type SloRow = [route: string, environment: string, capturedAt: number, status: number, latencyMs: number];

export interface EmittedEvent {
  type: EventType;
  environment: string;
  data: Record<string, unknown>;
  at: number | undefined;
  dedupeKey: string | undefined;
  idAt: number | undefined;
}

export type ToEdge =
  /** New key versions: applied, then acknowledged with `keys-held` and the same seq. */
  | { type: 'keys'; seq: number; keys: KeyRecord[] }
  /** The answer to an edge's insert. */
  | { type: 'inserted'; id: number; error: string | null; refused?: boolean }
  | { type: 'metrics'; seq: number }
  | { type: 'stop'; graceMs: number }
  /** Certificates reloaded (and checked) by the control thread: for new handshakes. */
  | { type: 'tls'; material: TlsMaterial }
  /** Tests only: the edge thread throws, as a bug would. */
  | { type: 'crash' };

export type FromEdge =
  | { type: 'listening'; port: number }
  /** The edge could not start (its port in use): the start fails with this line. */
  | { type: 'failed'; message: string }
  | { type: 'keys-held'; seq: number }
  /** A sealed batch of the edge's log to store: its file, or its rows when the log could not write it whole. */
  | { type: 'insert'; id: number; token: string; file: string | null; rows: Wake[] }
  | { type: 'events'; events: EmittedEvent[] }
  | { type: 'slo'; rows: SloRow[] }
  /** Finished requests whose spans are exported (tracing on): built and exported by the control thread. */
  | { type: 'spans'; spans: SpanInput[] }
  | { type: 'usage'; used: [id: string, sec: number][] }
  | { type: 'metrics'; seq: number; metrics: MetricObjectWithValues<MetricValue<string>>[] }
  | { type: 'stopped' };
