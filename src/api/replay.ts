import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { KeyRecord } from '../auth/key.js';
import type { ApiDeps } from './context.js';
import { actingEnvironment, environmentParam } from './env.js';
import { parseInput } from './parse.js';

/** What the API needs of the replayer (built by the proxy layer, handed in by app). */
export interface ReplayService {
  start(
    env: string,
    wakeId: string,
    o: { allowUnsafe: boolean; ignore: string[]; set?: Record<string, unknown> },
    caller: KeyRecord,
  ): Promise<{ wake: { id: string }; replayWakeId: string }>;
}

export const replayBody = z.strictObject({
  allow_unsafe: z.boolean().optional(),
  ignore: z.array(z.string().min(1).max(256)).max(100).optional(),
  /** Values for what redaction replaced: query or form names, JSON paths ($.a.b), `$`, or header names. */
  set: z
    .record(z.string().min(1).max(256), z.unknown())
    .refine((r) => Object.keys(r).length <= 100, 'at most 100 values')
    .optional(),
});
const params = z.strictObject({ wake_id: z.string().max(64) });
const query = z.strictObject({ environment: environmentParam });

/** POST /v2/wakes/{wake_id}/replay. */
export function replayPlugin(replayer: ReplayService) {
  return (app: FastifyInstance, deps: ApiDeps): void => {
    app.post(
      '/v2/wakes/:wake_id/replay',
      {
        config: {
          auth: { scope: 'wakes:write' },
          doc: {
            summary:
              'Re-send a captured request to the origin of its environment; the replay is a wake of its own, and replay.finished carries the diff',
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
            ...(body.set ? { set: body.set } : {}),
          },
          request.key,
        );
        reply.code(202);
        return { object: 'replay', wake_id: r.wake.id, replay_wake_id: r.replayWakeId, status: 'pending' };
      },
    );
  };
}
