import { startServer, type TestServer } from './origin.js';

/** An origin that answers with the trace headers it received; /fail answers 500. */
export function traceOrigin(): Promise<TestServer> {
  return startServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify({
        traceparent: req.headers.traceparent ?? null,
        tracestate: req.headers.tracestate ?? null,
      });
      res.writeHead(req.url?.includes('/fail') ? 500 : 200, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
}

export async function get(url: string, headers: Record<string, string> = {}) {
  const r = await fetch(url, { headers });
  const text = await r.text();
  return {
    status: r.status,
    wakeId: r.headers.get('x-wake-id'),
    seen: (r.headers.get('content-type')?.includes('json') ? JSON.parse(text) : {}) as {
      traceparent: string | null;
      tracestate: string | null;
    },
  };
}

export async function metric(opsUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${opsUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.slice(line.length + 1));
}

export const routes = (origin: string) => [
  { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin } },
  {
    name: 'keyed',
    prefix: '/keyed',
    auth: 'required',
    scopes: { read: 'keyed:read', write: 'keyed:write' },
    origins: { production: origin },
  },
];
