import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';

/** Where `npm run build` puts the console (dist/console-app), from src/ or dist/ alike. */
const ASSETS = join(import.meta.dirname, '..', '..', 'dist', 'console-app');

const TYPES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
};

/** Strict: only the gateway's own files, no inline script or style, no framing. */
const HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/** The trace URL template for the page, as an attribute value (escaped: it is config text). */
function traceMeta(url: string | null): string {
  if (url === null) return '';
  const v = url.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return `<meta name="wakegate-trace-url" content="${v}">`;
}

/**
 * Serves the console under `base` (default /console): the app shell for the path
 * itself, its script and stylesheet. The console keeps its pages in the URL hash,
 * so nothing else is needed. Files are read once, at start.
 */
export function consoleHandler(
  base: string,
  proxyPort: () => number,
  /** tracing.trace_url: a wake's trace is linked there ({trace_id} replaced); null: no link. */
  traceUrl: string | null = null,
): {
  owns: (url: string) => boolean;
  handle: (req: IncomingMessage, res: ServerResponse, wakeId: string) => number;
} {
  const files = new Map<string, Buffer>();
  for (const f of Object.keys(TYPES)) {
    const p = join(ASSETS, f);
    if (existsSync(p)) files.set(f, readFileSync(p));
  }
  const owns = (url: string): boolean => {
    if (!url.startsWith(base)) return false;
    const c = url.charCodeAt(base.length);
    return Number.isNaN(c) || c === 47 || c === 63;
  };
  const handle = (req: IncomingMessage, res: ServerResponse, wakeId: string): number => {
    const path = (req.url ?? '').split('?')[0] as string;
    const rest = path.slice(base.length).replace(/^\//, '');
    if (path === base) {
      // Relative asset URLs need the trailing slash.
      res.writeHead(308, { location: `${base}/`, 'x-wake-id': wakeId });
      res.end();
      return 308;
    }
    const name = rest === '' ? 'index.html' : rest;
    const body = files.get(name);
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'x-wake-id': wakeId, ...HEADERS });
      res.end();
      return 405;
    }
    if (!body) {
      const missing = files.size === 0;
      const text = missing ? 'the console is not built: run npm run build' : 'no such console file';
      res.writeHead(missing ? 503 : 404, {
        'content-type': 'text/plain; charset=utf-8',
        'x-wake-id': wakeId,
        ...HEADERS,
      });
      res.end(text);
      return missing ? 503 : 404;
    }
    // The console is served apart from the proxy: the page learns the proxy's port from a meta tag (no inline script).
    const sent =
      name === 'index.html'
        ? Buffer.from(
            body
              .toString('utf8')
              .replace(
                '</head>',
                `<meta name="wakegate-proxy-port" content="${proxyPort()}">${traceMeta(traceUrl)}</head>`,
              ),
          )
        : body;
    res.writeHead(200, {
      'content-type': TYPES[name] as string,
      'content-length': String(sent.length),
      'cache-control': name === 'index.html' ? 'no-cache' : 'public, max-age=300',
      'x-wake-id': wakeId,
      ...HEADERS,
    });
    res.end(method === 'HEAD' ? undefined : sent);
    return 200;
  };
  return { owns, handle };
}
