/**
 * The one error table: every error type the gateway returns, its HTTP status and
 * its default message (SPEC.md's Errors table, plus DESIGN.md's additions).
 */
export const ERROR_TYPES = {
  invalid_request: { status: 400, message: 'the request is not well formed' },
  authentication_required: { status: 401, message: 'an Authorization: Bearer header with a valid key is required' },
  key_revoked: { status: 401, message: 'this key has been revoked; issue a replacement' },
  insufficient_scope: { status: 403, message: 'this key lacks the scope this operation needs' },
  resource_missing: { status: 404, message: 'no such resource in this environment' },
  conflict: { status: 409, message: 'the resource is not in a state that allows this; re-read it and retry' },
  payload_too_large: { status: 413, message: 'the request body is larger than the limit' },
  request_header_fields_too_large: { status: 431, message: 'the request headers are larger than the limit' },
  unprocessable: { status: 422, message: 'the request is well formed but its values are not acceptable' },
  rate_limit_exceeded: { status: 429, message: 'rate limit exceeded; wait retry_after seconds' },
  internal_error: { status: 500, message: 'internal error; retry once with backoff, then report the wake_id' },
  upstream_unavailable: { status: 502, message: 'the origin could not be reached' },
  service_unavailable: { status: 503, message: 'the gateway is not ready' },
  upstream_timeout: { status: 504, message: 'the origin did not answer in time' },
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

export interface ErrorBody {
  error: {
    type: ErrorType;
    message: string;
    param: string | null;
    retry_after: number | null;
    wake_id: string | null;
  };
}

/** An error the gateway answers with; thrown by domain code, rendered by api/ and proxy/. */
export class GatewayError extends Error {
  readonly status: number;
  constructor(
    readonly type: ErrorType,
    message?: string,
    readonly param: string | null = null,
    readonly retryAfter: number | null = null,
  ) {
    super(message ?? ERROR_TYPES[type].message);
    this.name = 'GatewayError';
    this.status = ERROR_TYPES[type].status;
  }
}

export function errorBody(
  type: ErrorType,
  wakeId: string | null,
  message?: string,
  param: string | null = null,
  retryAfter: number | null = null,
): ErrorBody {
  return {
    error: { type, message: message ?? ERROR_TYPES[type].message, param, retry_after: retryAfter, wake_id: wakeId },
  };
}

export const unprocessable = (param: string, message: string): GatewayError =>
  new GatewayError('unprocessable', message, param);
export const missing = (what = 'resource', param: string | null = null): GatewayError =>
  new GatewayError('resource_missing', `no such ${what} in this environment`, param);
