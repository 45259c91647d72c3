import net from 'node:net';

/**
 * `server.trusted_proxies`: addresses or CIDR blocks of proxies in front of the
 * gateway whose X-Forwarded-* values may be kept. Empty (the default) trusts none.
 */
export function trustedProxies(list: readonly string[]): (ip: string) => boolean {
  if (list.length === 0) return () => false;
  const b = new net.BlockList();
  for (const entry of list) {
    const [addr, bits] = entry.split('/') as [string, string | undefined];
    const family = net.isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) b.addAddress(addr, family);
    else b.addSubnet(addr, Number(bits), family);
  }
  return (ip) => {
    if (ip === '') return false;
    const v4 = ip.startsWith('::ffff:') && net.isIP(ip.slice(7)) === 4 ? ip.slice(7) : null;
    return v4 !== null ? b.check(v4, 'ipv4') : b.check(ip, net.isIP(ip) === 6 ? 'ipv6' : 'ipv4');
  };
}

/** Validates one trusted_proxies entry (config schema). */
export function isAddressOrCidr(v: string): boolean {
  const [addr, bits, more] = v.split('/');
  if (more !== undefined || addr === undefined) return false;
  const fam = net.isIP(addr);
  if (fam === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (fam === 4 ? 32 : 128);
}
