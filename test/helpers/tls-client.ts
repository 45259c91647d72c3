import http2, { type ClientHttp2Session } from 'node:http2';
import https from 'node:https';
import tls from 'node:tls';

export interface TlsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS request (Node's https, a client nobody here wrote) trusting `ca`. */
export function httpsGet(
  url: string,
  opts: {
    ca: string;
    servername?: string;
    agent?: https.Agent | false;
    cert?: string;
    key?: string;
    headers?: Record<string, string>;
  },
): Promise<TlsAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        ca: opts.ca,
        agent: opts.agent ?? false,
        headers: opts.headers,
        ...(opts.servername ? { servername: opts.servername } : {}),
        ...(opts.cert ? { cert: opts.cert, key: opts.key } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export interface Handshake {
  /** The certificate the server showed. */
  peer: tls.PeerCertificate;
  reused: boolean;
  alpn: string | false;
  /** A session to resume with (TLS 1.3 sends it after the handshake). */
  session: Buffer | null;
  /** The answer to the GET sent on it. */
  response: string;
}

/** A bare TLS handshake against `port`, then the connection is closed. */
export function handshake(
  port: number,
  opts: {
    ca: string;
    servername?: string;
    session?: Buffer;
    alpn?: string[];
    cert?: string;
    key?: string;
    path?: string;
  },
): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    let session: Buffer | null = null;
    const s = tls.connect({
      host: '127.0.0.1',
      port,
      ca: opts.ca,
      servername: opts.servername ?? 'localhost',
      ...(opts.session ? { session: opts.session } : {}),
      ...(opts.alpn ? { ALPNProtocols: opts.alpn } : {}),
      ...(opts.cert ? { cert: opts.cert, key: opts.key } : {}),
    });
    s.on('session', (b: Buffer) => {
      session = b;
    });
    s.once('secureConnect', () => {
      const out = { peer: s.getPeerCertificate(), reused: s.isSessionReused(), alpn: s.alpnProtocol ?? false };
      // TLS 1.3 tickets arrive just after the handshake: a request and its answer let them in.
      s.write(`GET ${opts.path ?? '/__tls'} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`);
      let response = '';
      s.on('data', (c: Buffer) => {
        response += c.toString();
      });
      s.once('close', () => resolve({ ...out, session, response }));
    });
    s.on('error', reject);
  });
}

/** A peer certificate's SHA-256 as Pair.fingerprint spells it (lower-case hex, no colons). */
export const peerPrint = (c: tls.PeerCertificate): string => c.fingerprint256.replaceAll(':', '').toLowerCase();

/** An HTTP/2 session over TLS (ALPN h2, Node's client) to `url`, with the TLS socket it runs on; closed by the caller. */
export function h2tls(url: string, ca: string): Promise<{ s: ClientHttp2Session; socket: tls.TLSSocket }> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url, { ca }, (_s, socket) => resolve({ s, socket: socket as tls.TLSSocket }));
    s.once('error', reject);
  });
}

/** One HTTPS/1.1 GET on `agent` (keep-alive or not): its status, the certificate its connection saw, the answer's thread (test hooks). */
export function httpsOn(url: string, agent: https.Agent): Promise<{ status: number; cert: string; thread?: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { agent }, (res) => {
      const cert = peerPrint((res.socket as tls.TLSSocket).getPeerCertificate());
      const thread = res.headers['x-wakegate-thread'];
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, cert, ...(typeof thread === 'string' ? { thread } : {}) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
