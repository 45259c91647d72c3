/** What GET /v2/wakes may ask of the stored wakes (store/wakes.ts's WakeQuerier answers it). */
export interface WakeFilter {
  environment: string;
  status?: number;
  /** 2..5 for 2xx..5xx. */
  statusClass?: number;
  /** An RE2 pattern the whole path must match (built from a path template). */
  pathPattern?: string;
  /** A literal start every matching path has (narrows before the regex runs). */
  pathPrefix?: string;
  /** The exact path (a template with no placeholder). */
  pathExact?: string;
  consumer?: string;
  minLatencyMs?: number;
  keyId?: string;
  /** W3C trace id (32 lowercase hex digits): the wakes of one trace. */
  traceId?: string;
  /** Captured at or after (ms). */
  since?: number;
  /** Captured before (ms). */
  until?: number;
  method?: string;
  route?: string;
  /** Routes left out (MANAGEMENT_ROUTES: the gateway's own traffic). */
  excludeRoutes?: readonly string[];
}

/** The routes of the gateway's own traffic: the /v2 API's calls and the console's files. */
export const MANAGEMENT_ROUTES: readonly string[] = ['v2', 'console'];
