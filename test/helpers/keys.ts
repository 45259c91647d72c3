import type { KeyRecord } from '../../src/auth/key.js';

/** A key record as the ring holds it, for limiter tests: its id is its label, consumer and hash. */
export const keyRecord = (id: string, env = 'production', rate_limit: KeyRecord['rate_limit'] = null): KeyRecord => ({
  id,
  environment: env,
  label: id,
  consumer: id,
  scopes: [],
  rate_limit,
  replaces: null,
  secret_hash: id,
  created_at: 0,
  revoke_at: null,
  revoked_at: null,
  updated_at: 0,
});
