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
 * Concurrent connections below which a descriptor limit is a real constraint: a
 * limit that still leaves this many clients (or every configured one, if fewer) room
 * beside the pools and the log is not worth a warning at every start.
 */
export const CONNECTIONS_WORTH_WARNING = 4096;

/**
 * A warning when the descriptor limit would bite: when it leaves fewer than
 * CONNECTIONS_WORTH_WARNING client connections (or fewer than `max_connections`, if
 * that is smaller) beside the origins' pools and what is reserved, or holds tunnels
 * below the same mark; else null. Tunnels are always held below the limit
 * (tunnelBound), so a limit under what every tunnel could use is only worth a line
 * when that hold is low enough to matter.
 */
export function descriptorWarning(
  s: { max_connections: number; max_tunnels: number; upstream_connections?: number },
  limit = descriptorLimit(),
): string | null {
  if (limit === null || !Number.isFinite(limit)) return null;
  const room = limit - RESERVED_DESCRIPTORS - (s.upstream_connections ?? 0);
  const tunnels = tunnelBound(s.max_tunnels, limit);
  const bites =
    room < Math.min(s.max_connections, CONNECTIONS_WORTH_WARNING) ||
    tunnels < Math.min(s.max_tunnels, CONNECTIONS_WORTH_WARNING);
  if (!bites) return null;
  const need = s.max_connections + 2 * s.max_tunnels + (s.upstream_connections ?? 0) + RESERVED_DESCRIPTORS;
  return `the process may open ${limit} files, below the ${need} that server.max_connections (${s.max_connections}) and server.max_tunnels (${s.max_tunnels}) could use; raise the limit (ulimit -n, LimitNOFILE) or lower those settings. Tunnels are held to ${tunnels} meanwhile`;
}
