import { lookup as dnsLookup } from 'node:dns';
import net from 'node:net';

/**
 * Addresses a webhook may never reach unless `allow_private_networks` is set:
 * loopback, private, link-local, CGNAT, multicast, documentation, benchmarking
 * and other special-purpose ranges (IANA special-purpose registries).
 */
const blocked = new net.BlockList();
for (const [a, p] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(a, p, 'ipv4');
}
for (const [a, p] of [
  ['::', 128],
  ['::1', 128],
  ['::', 96],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(a, p, 'ipv6');
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::/96) IPv6 address. */
function embeddedV4(ip: string): string | null {
  const lower = ip.toLowerCase();
  const m = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/.exec(lower);
  if (!m) {
    const full = /^0{0,4}(?::0{0,4}){4}:ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
    if (!full) return null;
    return hexToV4(full[1] as string, full[2] as string);
  }
  if (m[1]) return m[1];
  return hexToV4(m[2] as string, m[3] as string);
}

const hexToV4 = (hi: string, lo: string): string => {
  const a = Number.parseInt(hi, 16);
  const b = Number.parseInt(lo, 16);
  return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
};

/** True for a globally routable unicast address. */
export function isPublicAddress(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) return !blocked.check(ip, 'ipv4');
  if (family === 6) {
    const v4 = embeddedV4(ip);
    if (v4 !== null) return net.isIP(v4) === 4 && !blocked.check(v4, 'ipv4');
    return !blocked.check(ip, 'ipv6');
  }
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

/**
 * A `lookup` for http.request that resolves the name and hands back only the
 * addresses that may be reached, so the socket dials exactly what was checked
 * (no second resolution a DNS rebinding could change).
 */
export function filteredLookup(allowPrivate: boolean): LookupFn {
  return (hostname, options, cb) => {
    dnsLookup(hostname, { all: true }, (err, addresses) => {
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

/** Resolves a hostname (or takes an IP literal) and says whether every address may be reached. */
export async function hostIsReachable(
  hostname: string,
  allowPrivate: boolean,
): Promise<{ ok: boolean; reason?: string }> {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (allowPrivate) return { ok: true };
  if (net.isIP(bare))
    return isPublicAddress(bare) ? { ok: true } : { ok: false, reason: `${bare} is not a public address` };
  const addresses = await new Promise<{ address: string }[]>((resolve) =>
    dnsLookup(bare, { all: true }, (err, a) => resolve(err ? [] : a)),
  );
  if (addresses.length === 0) return { ok: false, reason: `${bare} does not resolve` };
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  return bad
    ? { ok: false, reason: `${bare} resolves to ${bad.address}, which is not a public address` }
    : { ok: true };
}
