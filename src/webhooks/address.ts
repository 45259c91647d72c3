import { lookup as dnsLookup } from 'node:dns';
import net from 'node:net';

/**
 * Addresses a webhook may never reach unless `allow_private_networks` is set. IPv4:
 * every block of the IANA IPv4 Special-Purpose Address Registry that is not
 * globally reachable (loopback, private, link-local, CGNAT, multicast,
 * documentation, benchmarking, reserved). IPv6: only global unicast (2000::/3) is
 * allowed, minus the special-purpose blocks inside it; everything outside it
 * (loopback, ULA, link-local, multicast, IPv4-mapped ::ffff:0:0/96, IPv4-translated
 * ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, discard 100::/64,
 * SRv6 5f00::/16) is refused.
 */
const blockedV4 = new net.BlockList();
for (const [a, p] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.31.196.0', 24],
  ['192.52.193.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['192.175.48.0', 24],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blockedV4.addSubnet(a, p, 'ipv4');
}
const globalV6 = new net.BlockList();
globalV6.addSubnet('2000::', 3, 'ipv6');
const blockedV6 = new net.BlockList();
for (const [a, p] of [
  ['2001::', 23], // IETF protocol assignments (Teredo, benchmarking, ORCHID...)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: an IPv4 address inside
  ['2620:4f:8000::', 48], // AS112 direct delegation
  ['3fff::', 20], // documentation (RFC 9637)
] as const) {
  blockedV6.addSubnet(a, p, 'ipv6');
}

/** True for a globally routable unicast address. */
export function isPublicAddress(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) return !blockedV4.check(ip, 'ipv4');
  if (family === 6) return globalV6.check(ip, 'ipv6') && !blockedV6.check(ip, 'ipv6');
  return false;
}

export type LookupFn = (
  hostname: string,
  options: { all?: boolean; family?: number },
  cb: (
    err: NodeJS.ErrnoException | null,
    address: string | { address: string; family: number }[],
    family?: number,
  ) => void,
) => void;

/** How long a webhook host's name may take to resolve (registration and each attempt), in ms. */
export const DNS_TIMEOUT_MS = 5000;

/** Every address of a name, as `dns.lookup(name, {all: true})` answers. */
export type LookupAll = (
  hostname: string,
  cb: (err: NodeJS.ErrnoException | null, addresses: readonly { address: string; family: number }[]) => void,
) => void;

/** How webhook hosts are resolved: the lookup, and how long an answer may take. */
export interface Resolver {
  lookup: LookupAll;
  timeoutMs: number;
}

/** The system's resolver (getaddrinfo: /etc/hosts, then DNS), bounded at DNS_TIMEOUT_MS. */
export const systemResolver: Resolver = {
  lookup: (hostname, cb) => dnsLookup(hostname, { all: true }, cb),
  timeoutMs: DNS_TIMEOUT_MS,
};

/**
 * Resolves `hostname` with `r`, answering once: its addresses, its error, or after
 * `r.timeoutMs` an ETIMEOUT error (a late answer is dropped). getaddrinfo itself
 * cannot be cancelled; what waits on it no longer hangs.
 */
function resolveWithin(r: Resolver, hostname: string, cb: Parameters<LookupAll>[1]): void {
  let done = false;
  const timer = setTimeout(() => {
    if (done) return;
    done = true;
    const e: NodeJS.ErrnoException = new Error(`${hostname} did not resolve within ${r.timeoutMs} ms`);
    e.code = 'ETIMEOUT';
    cb(e, []);
  }, r.timeoutMs);
  // A stop does not wait on it (a hung resolver would hold the process for its length).
  timer.unref();
  try {
    r.lookup(hostname, (err, addresses) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      cb(err, addresses);
    });
  } catch (e) {
    if (done) return;
    done = true;
    clearTimeout(timer);
    cb(e as NodeJS.ErrnoException, []);
  }
}

/**
 * A `lookup` for http.request that resolves the name (within the resolver's bound)
 * and hands back only the addresses that may be reached, so the socket dials exactly
 * what was checked (no second resolution a DNS rebinding could change).
 */
export function filteredLookup(allowPrivate: boolean, resolver: Resolver = systemResolver): LookupFn {
  return (hostname, options, cb) => {
    resolveWithin(resolver, hostname, (err, addresses) => {
      if (err) return cb(err, []);
      const ok = addresses.filter((a) => allowPrivate || isPublicAddress(a.address));
      if (ok.length === 0) {
        const e: NodeJS.ErrnoException = new Error(`${hostname} resolves only to addresses webhooks may not reach`);
        e.code = 'ENOTPUBLIC';
        return cb(e, []);
      }
      if (options.all) return cb(null, ok);
      const first = ok[0] as { address: string; family: number };
      cb(null, first.address, first.family);
    });
  };
}

/**
 * Resolves a hostname (or takes an IP literal) and says whether every address may be
 * reached. `timedOut`: the resolver did not answer within its bound (nothing is known).
 */
export async function hostIsReachable(
  hostname: string,
  allowPrivate: boolean,
  resolver: Resolver = systemResolver,
): Promise<{ ok: boolean; reason?: string; timedOut?: boolean }> {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (allowPrivate) return { ok: true };
  if (net.isIP(bare))
    return isPublicAddress(bare) ? { ok: true } : { ok: false, reason: `${bare} is not a public address` };
  const answer = await new Promise<{ addresses: readonly { address: string }[]; timedOut: boolean }>((resolve) =>
    resolveWithin(resolver, bare, (err, a) => resolve({ addresses: err ? [] : a, timedOut: err?.code === 'ETIMEOUT' })),
  );
  if (answer.timedOut)
    return { ok: false, timedOut: true, reason: `${bare} did not resolve within ${resolver.timeoutMs} ms` };
  // The reason never says what a name resolves to, nor whether it resolves at all: that
  // would make registration a DNS oracle into the gateway's network for any webhooks:write key.
  const bad = answer.addresses.length === 0 || answer.addresses.some((a) => !isPublicAddress(a.address));
  return bad ? { ok: false, reason: `${bare} does not resolve to a public address` } : { ok: true };
}
