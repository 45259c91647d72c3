import type { Config } from '../config/index.js';

/** The management scopes of the /v2 API. The bootstrap admin key holds all six. */
export const MANAGEMENT_SCOPES = [
  'wakes:read',
  'wakes:write',
  'keys:read',
  'keys:write',
  'webhooks:read',
  'webhooks:write',
] as const;

/** Every scope a key may hold: the management scopes and every scope a route names. */
export function knownScopes(cfg: Pick<Config, 'routes'>): Set<string> {
  const s = new Set<string>(MANAGEMENT_SCOPES);
  for (const r of cfg.routes) {
    if (r.scopes) {
      s.add(r.scopes.read);
      s.add(r.scopes.write);
    }
  }
  return s;
}
