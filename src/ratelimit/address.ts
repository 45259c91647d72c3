/**
 * The per-address bucket a client address draws from (requests without a key, and
 * refused keys under `unauthenticated`). An IPv4 address is its own bucket, also
 * IPv4-mapped (`::ffff:a.b.c.d`, as a dual-stack listener sees IPv4 clients). An IPv6
 * client is given at least a /64 (RFC 6177, RFC 7421) and may send from any of its
 * 2^64 addresses: its bucket is its /64, named `<first four groups>::/64`, so rotating
 * source addresses gets no fresh bucket (a zone, `%eth0`, is dropped). An IPv4 client
 * translated by NAT64's well-known prefix (`64:ff9b::a.b.c.d`) is its IPv4 address.
 *
 * IPv4, and what is not an IPv6 address, is returned as it is: no allocation on the
 * hot path. An address that does not parse is its own bucket.
 */
export function addressBucket(ip: string): string {
  // IPv4 (and ''): no colon.
  if (ip.indexOf(':') === -1) return ip;
  // IPv4-mapped, as node writes it: one IPv4 address, kept as it is.
  if (ip.startsWith('::ffff:') && ip.indexOf(':', 7) === -1 && ip.indexOf('.', 7) !== -1) {
    // With a zone (`%eth0`), the same IPv4 address: its bucket is the address alone.
    const zone = ip.indexOf('%', 7);
    return zone === -1 ? ip : ip.slice(0, zone);
  }
  return prefix64(ip) ?? ip;
}

/** The eight groups of the address being read (one per process: the work is synchronous). */
const groups = new Uint16Array(8);

/**
 * `ip`'s /64 (`2001:db8:0:1::/64`); its IPv4 address when it is IPv4-mapped in another
 * spelling (`::ffff:102:304` is `::ffff:1.2.3.4`) or NAT64 (`64:ff9b::1.2.3.4` is
 * `1.2.3.4`); null when it is no IPv6 address.
 */
export function prefix64(ip: string): string | null {
  const zone = ip.indexOf('%');
  const s = zone === -1 ? ip : ip.slice(0, zone);
  if (!parse6(s)) return null;
  const g = groups;
  const a = g[6] as number;
  const b = g[7] as number;
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return `::ffff:${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  }
  // The NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): IPv4 clients translated to IPv6
  // (SIIT-DC) are told apart by the IPv4 address it embeds, never folded into one /64.
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0) {
    return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  }
  return `${hex(0)}:${hex(1)}:${hex(2)}:${hex(3)}::/64`;
}

const hex = (i: number): string => (groups[i] as number).toString(16);

/** Reads the IPv6 address `s` (RFC 4291 §2.2 text, a trailing IPv4 part allowed) into `groups`. */
function parse6(s: string): boolean {
  const g = groups;
  g.fill(0);
  const gap = s.indexOf('::');
  const head: number[] = [];
  if (gap === -1) {
    if (!words(s, head, true) || head.length !== 8) return false;
  } else {
    const tail: number[] = [];
    if (s.indexOf('::', gap + 1) !== -1) return false;
    if (!words(s.slice(0, gap), head, false) || !words(s.slice(gap + 2), tail, true)) return false;
    if (head.length + tail.length > 7) return false;
    for (let i = 0; i < tail.length; i++) g[8 - tail.length + i] = tail[i] as number;
  }
  for (let i = 0; i < head.length; i++) g[i] = head[i] as number;
  return true;
}

const GROUP = /^[0-9a-fA-F]{1,4}$/;

/** The groups of `s` (`a:b:c`, '' for none) appended to `out`; a dotted IPv4 part may end it when `v4Last`. */
function words(s: string, out: number[], v4Last: boolean): boolean {
  if (s === '') return true;
  const parts = s.split(':');
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i] as string;
    if (v4Last && i === parts.length - 1 && p.includes('.')) {
      const v4 = ipv4(p);
      if (v4 === null) return false;
      out.push(v4 >>> 16, v4 & 0xffff);
    } else if (GROUP.test(p)) out.push(Number.parseInt(p, 16));
    else return false;
  }
  return true;
}

/** A dotted IPv4 address as a number, or null. */
function ipv4(s: string): number | null {
  const p = s.split('.');
  if (p.length !== 4) return null;
  let n = 0;
  for (const x of p) {
    if (!/^\d{1,3}$/.test(x)) return null;
    const v = Number(x);
    if (v > 255) return null;
    n = n * 256 + v;
  }
  return n;
}
