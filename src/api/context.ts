import type { IncomingMessage } from 'node:http';
import type { Admission } from '../admission/admission.js';
import type { KeyRecord } from '../auth/key.js';
import type { KeyRing } from '../auth/keyring.js';
import type { KeyService } from '../auth/keys-service.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { WakeQuerier } from '../store/wakes.js';
import type { Cursors } from './cursor.js';

/** An OpenAPI Server Object: where the document's operations are called (openapi.ts listenerServer). */
export interface OpenApiServer {
  readonly url: string;
  readonly description: string;
}

/** What the /v2 API is handed; each plugin takes what it needs from here. */
export interface ApiDeps {
  config: Readonly<Config>;
  clock: Clock;
  log: Logger;
  ring: KeyRing;
  keys: KeyService;
  wakes: WakeQuerier;
  /** The admission every call with an `auth` scope passes (key, scope, buckets), as proxied requests do. */
  admission: Admission;
  metrics: Metrics;
  /** Makes and reads this installation's signed list cursors. */
  cursors: Cursors;
  /**
   * The server a call was served from (the listener it came on), which `/v2/openapi.json`
   * names in `servers`; absent or null: none is named.
   */
  servedFrom?: (req: IncomingMessage) => OpenApiServer | null;
  /** Optional services added by later layers (webhooks, replay). */
  extra?: Record<string, unknown>;
}

/** Per-route settings read by the auth hook. */
export interface RouteAuth {
  /** Scope the operation needs; null for public documents; '' for any valid key (no scope). */
  scope: string | null;
  /** A rate-limit policy drawn from in addition to the key's bucket. */
  policy?: string;
  /**
   * False: the call takes no token here; the operation charges the key once, in its own
   * admission (a replay, as the request it sends: all or nothing, its headers on the answer).
   */
  charged?: false;
}

declare module 'fastify' {
  interface FastifyRequest {
    key: KeyRecord;
  }
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
}
