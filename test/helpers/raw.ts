import net from 'node:net';

/** Sends raw bytes on a new connection and collects what comes back until close or timeout. */
export function rawExchange(
  port: number,
  data: string | Buffer,
  timeoutMs = 3000,
): Promise<{ text: string; closed: boolean; ms: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ text, closed, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    s.on('data', (c) => {
      text += c.toString('latin1');
    });
    s.on('close', () => finish(true));
    s.on('error', () => finish(true));
    s.write(data);
  });
}

export const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
