import net from 'node:net';
import tls from 'node:tls';

/** A tiny HTTP/2 frame writer and reader (RFC 9113 §4.1), for tests that speak raw frames over a socket. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const T = {
  DATA: 0,
  HEADERS: 1,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const F = { END_STREAM: 1, ACK: 1, END_HEADERS: 4 } as const;

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([h, payload]);
}

/** SETTINGS of [id, value] pairs. */
export const settings = (pairs: [number, number][] = []): Buffer => {
  const p = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, v], i) => {
    p.writeUInt16BE(id, i * 6);
    p.writeUInt32BE(v >>> 0, i * 6 + 2);
  });
  return frame(T.SETTINGS, 0, 0, p);
};

export const windowUpdate = (stream: number, increment: number): Buffer => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment >>> 0, 0);
  return frame(T.WINDOW_UPDATE, 0, stream, p);
};

export const rstStream = (stream: number, code: number): Buffer => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code, 0);
  return frame(T.RST_STREAM, 0, stream, p);
};

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1). */
function int(v: number, n: number, first: number): number[] {
  const max = (1 << n) - 1;
  if (v < max) return [first | v];
  const out = [first | max];
  let rest = v - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** An HPACK block of literal fields, never indexed, names and values as plain strings (RFC 7541 §6.2.2). */
export function hpack(fields: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0x10, ...int(n.length, 7, 0)]), n, Buffer.from(int(v.length, 7, 0)), v);
  }
  return Buffer.concat(parts);
}

/** The fields of a GET of `path` on h2c. */
export const request = (path: string, method = 'GET', scheme = 'http'): [string, string][] => [
  [':method', method],
  [':scheme', scheme],
  [':authority', 'localhost'],
  [':path', path],
];

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** A raw connection: writes frames, parses what comes back, says when it closed. */
export class RawH2 {
  readonly frames: Frame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  private readonly closing: Promise<void>;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        this.frames.push({
          type: this.buf[3] as number,
          flags: this.buf[4] as number,
          stream: this.buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.buf.subarray(9, 9 + len),
        });
        this.buf = this.buf.subarray(9 + len);
      }
    });
    socket.on('error', () => {});
    this.closing = new Promise((r) =>
      socket.on('close', () => {
        this.closed = true;
        r();
      }),
    );
  }

  static connect(port: number, preface = true): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => {
        const raw = new RawH2(s);
        if (preface) s.write(Buffer.concat([PREFACE, settings()]));
        resolve(raw);
      });
      s.once('error', reject);
    });
  }

  /** The same over TLS, h2 chosen by ALPN (the handshake done, the preface sent). */
  static connectTls(port: number, ca: string): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
        if (s.alpnProtocol !== 'h2') return reject(new Error(`ALPN chose ${String(s.alpnProtocol)}, not h2`));
        const raw = new RawH2(s);
        s.write(Buffer.concat([PREFACE, settings()]));
        resolve(raw);
      });
      s.once('error', reject);
    });
  }

  write(b: Buffer): boolean {
    return this.socket.writable ? this.socket.write(b) : false;
  }

  /** The GOAWAY's error code, once one came. */
  goawayCode(): number | null {
    const g = this.frames.find((f) => f.type === T.GOAWAY);
    return g === undefined ? null : g.payload.readUInt32BE(4);
  }

  /** Resolves when the server closed the connection, or after `ms` (false). */
  async closedWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), ms);
    });
    const r = await Promise.race([this.closing.then(() => true), late]);
    clearTimeout(timer);
    return r;
  }

  destroy(): void {
    this.socket.destroy();
  }
}
