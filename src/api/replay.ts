import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { KeyRecord } from '../auth/key.js';
import { GatewayError } from '../errors.js';
import type { ApiDeps } from './context.js';
import { actingEnvironment, environmentParam } from './env.js';
import { parseInput } from './parse.js';

/** What the API needs of the replayer (built by the proxy layer, handed in by app). */
export interface ReplayService {
  start(
    env: string,
    wakeId: string,
    o: {
      allowUnsafe: boolean;
      ignore: string[];
      set?: Record<string, unknown>;
      /** Told the rate-limit headers of the replay's one charge (its own admission). */
      limitHeaders?: (headers: readonly string[]) => void;
    },
    caller: KeyRecord,
  ): Promise<{ wake: { id: string }; replayWakeId: string }>;
}

export const replayBody = z.strictObject({
  allow_unsafe: z.boolean().optional(),
  ignore: z.array(z.string().min(1).max(256)).max(100).optional(),
  /** Values for what redaction replaced: query or form names, JSON paths ($.a.b), or header names; scalars. */
  set: z
    .record(z.string().min(1).max(256), z.unknown())
    .refine((r) => Object.keys(r).length <= 100, 'at most 100 values')
    .optional(),
});
const params = z.strictObject({ wake_id: z.string().max(64) });

/**
 * `set` as the client sent it: every own name, `__proto__` included (the schema's
 * record copies by assignment, which would drop that name silently, so a name the
 * request holds no marker for would go unrefused).
 */
function setAsSent(body: unknown): Record<string, unknown> {
  const raw = (body as { set: Record<string, unknown> }).set;
  const set = Object.fromEntries(Object.entries(raw));
  if (Object.keys(set).length > 100) throw new GatewayError('invalid_request', 'set: at most 100 values', 'set');
  return set;
}

/** What docs/api.md says of a replay beyond its summary: routes, `set` and the refusals. */
const REPLAY_DESCRIPTION = [
  "The captured method, path, query, headers (redacted ones left out) and body are sent through the route that matches the path now, to its origin for the wake's environment, with `x-wakegate-replay-of` and `x-wakegate-replayed-by`, waiting for the answer's head as long as the route's `timeout_ms`, however many `1xx` answers come first, and for the whole answer 60 s (or `timeout_ms` when longer): then 504 `upstream_timeout` in the replay's wake (an origin that streams without end, server-sent events say, ends there). A stop gives replays still running 2 s after the listeners have drained, then records them as 503. An `Authorization` is the gateway's, and left out, only when it carried the original request's key: on a keyless route it is the origin's own, sent from `set` when it was redacted. The replaying key needs that route's scope (read for GET, HEAD and OPTIONS, else write), as if it sent the request itself, and is charged once, as that request: its own bucket and the route's policy, all or nothing, the answer's rate-limit headers telling that charge. A replay refused (an unknown wake, or one of the refusals below) takes one token of the caller's own bucket instead, and past it is 429, so that no key looks wakes up without limit. Refused: no route matching the path now, or no origin for the environment (409); the original key revoked, the path cut, the body not captured whole (409); a method other than GET, HEAD or OPTIONS without `allow_unsafe: true` (422, `param: \"allow_unsafe\"`); another environment's wake (404). Replays running at once (until the origin's answer is recorded) are bounded: 8 per calling key and 64 for the keys of each environment on a gateway process (a sandbox's replays never take production's places); past either, 429 `rate_limit_exceeded` with `Retry-After` and `retry_after`, and nothing is charged or sent.",
  '',
  '### Redacted values: `set`',
  '',
  'A redaction marker is never sent as if it were the value. A wake whose query or body holds redacted values is refused with 409 `conflict`, `param: "set"`, and a message naming them, until the call gives each in `set`:',
  '',
  '```json',
  '{ "allow_unsafe": true, "set": { "$.card.cvc": "123", "token": "tok_test_1", "x-api-key": "key_test" } }',
  '```',
  '',
  '`set` names a query parameter or form field (by its decoded name), a JSON value by JSON path (`$.card.cvc`, `$.items[0].token`, `$["odd key"]`), or a redacted header (by name in any case; left out when not given). It fills redacted values only: each name must hold a marker, whole, in the captured request, and each value is a JSON scalar (string, number, boolean or null); a string holding a redaction marker (copied from the wake: it is not the value) or a lone surrogate is refused. `$` (the whole body), a whole object, a field that was not redacted, a name that matches nothing, or an object or array value, is 400 `invalid_request` with `param: "set.<name>"`, and nothing is sent. A marker no name can reach (inside a string, in a body neither JSON nor a form) is 409: that wake cannot be replayed.',
  '',
  "The replay's own wake marks the values from `set`, and the redacted values of its answer, with a salt of its own, so its markers never tell whether a value given equals the original. Without `set`, a replay is marked as the wake it replays (a replay of a replay as the first wake of the chain), so their diff tells equal from changed.",
].join('\n');
const query = z.strictObject({ environment: environmentParam });

/** POST /v2/wakes/{wake_id}/replay. */
export function replayPlugin(replayer: ReplayService) {
  return (app: FastifyInstance, deps: ApiDeps): void => {
    app.post(
      '/v2/wakes/:wake_id/replay',
      {
        config: {
          // Charged once, by the replay's own admission (the request it sends), not here too.
          auth: { scope: 'wakes:write', charged: false },
          doc: {
            summary:
              'Re-send a captured request to the origin of its environment; the replay is a wake of its own, and replay.finished carries the diff',
            description: REPLAY_DESCRIPTION,
            query,
            body: replayBody,
            success: 202,
            object: 'replay',
            errors: [400, 401, 403, 404, 409, 422, 429],
          },
        },
      },
      async (request, reply) => {
        const { wake_id } = parseInput(params, request.params, 'query');
        const q = parseInput(query, request.query, 'query');
        const body = parseInput(replayBody, request.body, 'body');
        const env = actingEnvironment(deps, request, q.environment);
        const r = await replayer.start(
          env,
          wake_id,
          {
            allowUnsafe: body.allow_unsafe ?? false,
            ignore: body.ignore ?? [],
            ...(body.set ? { set: setAsSent(request.body) } : {}),
            limitHeaders: (h) => {
              for (let i = 0; i < h.length; i += 2) reply.header(h[i] as string, h[i + 1]);
            },
          },
          request.key,
        );
        reply.code(202);
        return { object: 'replay', wake_id: r.wake.id, replay_wake_id: r.replayWakeId, status: 'pending' };
      },
    );
  };
}
