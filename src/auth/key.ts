import type { RateLimitPolicy } from '../config/index.js';

export type KeyRateLimit = Pick<RateLimitPolicy, 'limit' | 'burst' | 'window'>;

/** A stored API key. The secret itself is never stored, only its SHA-256. */
export interface KeyRecord {
  id: string;
  environment: string;
  label: string;
  consumer: string;
  scopes: string[];
  rate_limit: KeyRateLimit | null;
  replaces: string | null;
  secret_hash: string;
  created_at: number;
  revoke_at: number | null;
  revoked_at: number | null;
  updated_at: number;
}
