import net from 'node:net';

/** A raw TCP origin scripted by a test, with the request heads and bytes it read and its live sockets. */
export interface Scripted {
  port: number;
  url: string;
  connections: number;
  heads: string[];
  /** Bytes received on each connection, in order (latin1). */
  raw: string[];
  sockets: Set<net.Socket>;
  close: () => Promise<void>;
}

/** `answer(head, conn, n, socket, body)` writes what it likes; bodies are read by Content-Length or chunked. */
export async function scripted(
  answer: (head: string, conn: number, n: number, s: net.Socket, body: string) => void,
): Promise<Scripted> {
  const sockets = new Set<net.Socket>();
  const o: Scripted = { port: 0, url: '', connections: 0, heads: [], raw: [], sockets, close: async () => {} };
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    const conn = o.connections++;
    o.raw[conn] = '';
    let n = 0;
    let buf = '';
    s.on('data', (d) => {
      o.raw[conn] += d.toString('latin1');
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buf.slice(0, end);
        let body = '';
        let rest: string;
        if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
          const term = buf.indexOf('\r\n0\r\n\r\n', end);
          const empty = buf.slice(end + 4, end + 9) === '0\r\n\r\n';
          if (empty) {
            rest = buf.slice(end + 9);
          } else {
            if (term === -1) return;
            body = buf.slice(end + 4, term + 2);
            rest = buf.slice(term + 7);
          }
        } else {
          const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (buf.length < end + 4 + len) return;
          body = buf.slice(end + 4, end + 4 + len);
          rest = buf.slice(end + 4 + len);
        }
        buf = rest;
        o.heads.push(head);
        answer(head, conn, n++, s, body);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  o.port = (server.address() as net.AddressInfo).port;
  o.url = `http://127.0.0.1:${o.port}`;
  o.close = () =>
    new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return o;
}

export const ok = (body: string, extra = '') =>
  `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const route = (name: string, url: string, extra: Record<string, unknown> = {}) => ({
  name,
  prefix: `/${name}`,
  auth: 'none',
  origins: { production: url },
  ...extra,
});
