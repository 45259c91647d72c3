import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ApiDeps } from './context.js';

/** `environment` on a list query or a by-id call: names the environment to act in. */
export const environmentParam = z.string().min(1).max(64).optional();

/**
 * The environment a call acts in: the key's own unless it names another. A key of
 * a live-class environment may name any configured environment; a test-class key
 * none but its own (404, as for an id of another environment).
 */
export function actingEnvironment(deps: ApiDeps, request: FastifyRequest, asked: string | undefined): string {
  return deps.keys.visibleEnvironment(request.key.environment, asked);
}
