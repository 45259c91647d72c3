import { isRevoked } from './authorize.js';
import type { KeyRecord } from './key.js';
import { MANAGEMENT_SCOPES } from './scopes.js';

/** The label a bootstrap admin key is stored with (and how one made before the marker is known). */
export const BOOTSTRAP_LABEL = 'bootstrap admin';

/**
 * A bootstrap admin key stored before keys carried the marker (migration 15): the
 * label and consumer the gateway gave it, all six management scopes, replacing none.
 */
function legacyBootstrap(k: KeyRecord): boolean {
  return (
    k.label === BOOTSTRAP_LABEL &&
    k.consumer === 'admin' &&
    k.replaces === null &&
    MANAGEMENT_SCOPES.every((s) => k.scopes.includes(s))
  );
}

/**
 * The active bootstrap admin keys, newest first: those marked, or, while no key has
 * ever been marked (a store from before the marker), those the gateway made the old way
 * (each start with a new WAKEGATE_ADMIN_KEY added one). One at most once a start has run.
 */
export function activeBootstrapKeys(keys: Iterable<KeyRecord>, now: number): KeyRecord[] {
  const all = [...keys];
  const marked = all.some((k) => k.bootstrap === true);
  return all
    .filter((k) => (marked ? k.bootstrap === true : legacyBootstrap(k)) && !isRevoked(k, now))
    .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1));
}
