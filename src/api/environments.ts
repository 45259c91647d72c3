import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from './context.js';

/**
 * GET /v2/environments: the configured environments and the calling key itself
 * (its id, environment and scopes), so a client (the console) knows where it may
 * act. Any valid key may ask; a test-class key sees only its own environment.
 */
export function environmentsPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.get(
    '/v2/environments',
    {
      config: {
        auth: { scope: '' },
        doc: {
          summary: 'The environments this key may act in, and the key itself (id, environment, scopes)',
          success: 200,
          object: 'list of environment',
          errors: [401],
        },
      },
    },
    async (request) => {
      const own = request.key.environment;
      const live = Object.hasOwn(deps.config.environments, own) && deps.config.environments[own]?.class === 'live';
      const data = Object.entries(deps.config.environments)
        .filter(([name]) => live || name === own)
        .map(([name, e]) => ({
          object: 'environment',
          name,
          class: e.class,
          wake_retention_days: e.wake_retention_days,
        }));
      const k = request.key;
      return {
        object: 'list',
        has_more: false,
        next_cursor: null,
        data,
        key: { id: k.id, label: k.label, environment: own, scopes: [...k.scopes] },
      };
    },
  );
}
