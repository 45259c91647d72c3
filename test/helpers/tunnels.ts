import net from 'node:net';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The head of an Upgrade: websocket request for `path`, with `extra` header lines (each ending in \r\n). */
export const upgradeHead = (path: string, extra = ''): string =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${extra}\r\n`;

/** Sends `data` on a new connection (optionally from `localAddress`) and resolves with the status of the first answer head. */
export function firstStatus(
  port: number,
  data: string,
  localAddress?: string,
): Promise<{ status: number; socket: net.Socket }> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
    s.on('error', () => {});
    let text = '';
    const done = () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), socket: s });
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (text.includes('\r\n\r\n')) done();
    });
    s.on('close', done);
    s.write(data);
  });
}
