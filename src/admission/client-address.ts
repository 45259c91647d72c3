import net from 'node:net';

/**
 * The client's address of a request: its connection's (`peer`), or, when that is a
 * trusted proxy (`server.trusted_proxies`), the address X-Forwarded-For names for the
 * client, read from the right: each hop a trusted proxy appended is passed over, and
 * the first address no trusted proxy holds is the client (what a client writes to the
 * left of it is never read, so it cannot choose its address). An entry that is not an
 * address ends the walk at the last trusted hop. As nginx's realip module
 * (`real_ip_recursive on`) and Kong's `trusted_ips` read it.
 */
export function clientAddress(
  peer: string,
  forwardedFor: string | string[] | undefined,
  trusted: (ip: string) => boolean,
): string {
  if (forwardedFor === undefined || !trusted(peer)) return peer;
  const list = typeof forwardedFor === 'string' ? forwardedFor : forwardedFor.join(',');
  let last = peer;
  let end = list.length;
  while (end > 0) {
    const comma = list.lastIndexOf(',', end - 1);
    const ip = bareAddress(list.slice(comma + 1, end).trim());
    end = comma === -1 ? 0 : comma;
    if (ip === '') return last;
    if (!trusted(ip)) return ip;
    last = ip;
  }
  return last;
}

/** An X-Forwarded-For entry as an address (`[2001:db8::1]:443` and `192.0.2.1:80` lose the port), or '' when it is none. */
function bareAddress(entry: string): string {
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    const inner = close === -1 ? '' : entry.slice(1, close);
    return net.isIP(inner) === 6 ? inner : '';
  }
  if (net.isIP(entry) !== 0) return entry;
  const colon = entry.indexOf(':');
  if (colon !== -1 && entry.indexOf(':', colon + 1) === -1 && net.isIP(entry.slice(0, colon)) === 4)
    return entry.slice(0, colon);
  return '';
}
