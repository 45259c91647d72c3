import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';

export interface H2Answer {
  status: number;
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

/** An HTTP/2 session to `url` (h2c with prior knowledge for http://); closed by the caller. */
export function h2connect(url: string): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** One request on `session` (Node's own HTTP/2 client): status, headers, trailers, body. */
export function h2request(
  session: ClientHttp2Session,
  headers: OutgoingHttpHeaders,
  body?: Buffer | string,
  trailers?: OutgoingHttpHeaders,
): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const r = session.request(
      { ':method': body === undefined ? 'GET' : 'POST', ...headers },
      trailers ? { waitForTrailers: true } : {},
    );
    if (trailers) r.once('wantTrailers', () => r.sendTrailers(trailers));
    const chunks: Buffer[] = [];
    let head: IncomingHttpHeaders = {};
    let tail: IncomingHttpHeaders = {};
    r.on('response', (h) => {
      head = h;
    });
    r.on('trailers', (t) => {
      tail = t;
    });
    r.on('data', (c: Buffer) => chunks.push(c));
    r.on('end', () => {
      const b = Buffer.concat(chunks);
      resolve({ status: Number(head[':status']), headers: head, trailers: tail, body: b, text: b.toString() });
    });
    r.on('error', reject);
    r.end(body);
  });
}

/** One request on a session of its own. */
export async function h2once(url: string, headers: OutgoingHttpHeaders, body?: Buffer | string): Promise<H2Answer> {
  const s = await h2connect(url);
  try {
    return await h2request(s, headers, body);
  } finally {
    s.close();
  }
}
