import { readFileSync } from 'node:fs';

/** Descriptors kept for what is not a client: the write-ahead logs, storage, origins' pools, the ops listener. */
export const RESERVED_DESCRIPTORS = 256;

/** The process's soft limit on open files (Linux's /proc/self/limits), or null where it cannot be read. */
export function descriptorLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (m === null) return null;
    return m[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(m[1]);
  } catch {
    return null;
  }
}

/**
 * How many tunnels may be open at once: `server.max_tunnels`, lowered so that tunnels
 * (two descriptors each) can never take the descriptors capture and storage need.
 */
export function tunnelBound(maxTunnels: number, limit = descriptorLimit()): number {
  if (limit === null || !Number.isFinite(limit)) return maxTunnels;
  return Math.max(1, Math.min(maxTunnels, Math.floor((limit - RESERVED_DESCRIPTORS) / 2)));
}

/**
 * A warning when the descriptor limit is below what the configured connections and
 * tunnels could use (a client connection each, a tunnel two, an origin's pool its
 * connections), or null.
 */
export function descriptorWarning(
  s: { max_connections: number; max_tunnels: number; upstream_connections?: number },
  limit = descriptorLimit(),
): string | null {
  if (limit === null) return null;
  const need = s.max_connections + 2 * s.max_tunnels + (s.upstream_connections ?? 0) + RESERVED_DESCRIPTORS;
  if (limit >= need) return null;
  return `the process may open ${limit} files, below the ${need} that server.max_connections (${s.max_connections}) and server.max_tunnels (${s.max_tunnels}) could use; raise the limit (ulimit -n, LimitNOFILE) or lower those settings. Tunnels are held to ${tunnelBound(s.max_tunnels, limit)} meanwhile`;
}
