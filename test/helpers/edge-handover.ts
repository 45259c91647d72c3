import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readWhole } from '../../src/management-body.js';
import type { handOver } from '../../src/threads/handover.js';

/** An edge's /v2 side on a loopback port: each body read whole, then handed over by `hand`. */
export async function edgeInFront(hand: ReturnType<typeof handOver>): Promise<{ edge: http.Server; port: number }> {
  const edge = http.createServer((req, res) =>
    readWhole(req, res, { maxBytes: 65_536, timeoutMs: 30_000 }, (b) => hand(req, res, b)),
  );
  await new Promise<void>((r) => edge.listen(0, '127.0.0.1', r));
  return { edge, port: (edge.address() as AddressInfo).port };
}

/** Closes the edge, then the internal listener, cutting what is still connected. */
export async function closeBoth(edge: http.Server, internal: http.Server): Promise<void> {
  edge.closeAllConnections();
  internal.closeAllConnections();
  await new Promise((r) => edge.close(r));
  await new Promise((r) => internal.close(r));
}
