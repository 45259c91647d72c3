import { createHmac } from 'node:crypto';
import { GatewayError } from '../errors.js';

/**
 * The gateway's name in `Via` (RFC 9110 §7.6.3), and the loop it shows. Every request
 * the gateway forwards says it passed here (`Via: 1.1 wakegate-3f2a9c1e`), as an HTTP
 * gateway MUST; one that comes back with this name in its `Via` has gone round: a route
 * whose origin is the gateway itself (ORIGIN_URL given the gateway's own port, a load
 * balancer in front of the fleet). Unchecked, one anonymous request fanned out into
 * every connection to the origin (512), each recorded as a wake, until the origin's
 * queue timed out. It is refused at its second pass, 508.
 *
 * The name is the same on every thread and across restarts, and on every instance of a
 * fleet (from the key that seals the data directory's secrets, which a fleet shares), so
 * a loop through another instance is seen too; another installation's name differs, so
 * gateways chained on purpose pass.
 */
export function viaName(sealingKey: Uint8Array): string {
  return `wakegate-${createHmac('sha256', sealingKey).update('wakegate via v1').digest('hex').slice(0, 8)}`;
}

/** The `Via` values this gateway adds, by the client's protocol version (`2` for HTTP/2). */
export class ViaValues {
  private readonly v11: string;
  private readonly v10: string;
  private readonly v2: string;

  constructor(readonly name: string) {
    this.v11 = `1.1 ${name}`;
    this.v10 = `1.0 ${name}`;
    this.v2 = `2 ${name}`;
  }

  /** The value for a request received as HTTP/`major`.`minor`. */
  of(major: number, minor: number): string {
    if (major === 2) return this.v2;
    return minor === 0 ? this.v10 : this.v11;
  }

  /** Whether a request's `Via` says it has passed this gateway already (compared without case: an intermediary may fold it). */
  passed(via: string | undefined): boolean {
    if (via === undefined) return false;
    return via.includes(this.name) || via.toLowerCase().includes(this.name);
  }
}

/** 508 Loop Detected (RFC 5842 §7.2): the origin's answer to the gateway would be the gateway's own. */
class LoopDetected extends GatewayError {
  override readonly status: number = 508;
}

export const LOOP_REFUSED = new LoopDetected(
  'upstream_unavailable',
  "this request has passed through this gateway before (its Via names it): the route's origin leads back to the gateway; point the route at the application, not at the gateway's own address",
  'via',
);
