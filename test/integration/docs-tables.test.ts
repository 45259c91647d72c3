import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/events/bus.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DOCS = readdirSync(join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');

/** `GET /v2/webhooks/endpoints/{endpoint_id}` → `GET /v2/webhooks/endpoints/{}`: parameter names differ between pages. */
const norm = (op: string) => op.replace(/\{[^}]*\}/g, '{}');

/** Every `METHOD /path` named in the first cell of a table row of `text` (`…/x` abbreviates a path's start). */
function tableOps(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const first = /^\|([^|]*)\|/.exec(line)?.[1] ?? '';
    for (const m of first.matchAll(/`(GET|POST|PUT|PATCH|DELETE) ([^`]+)`/g)) out.push(`${m[1]} ${m[2]}`);
  }
  return out;
}

/** Issue #36: the docs' tables say what the API and the event list say, and nothing else. */
describe('docs tables against the OpenAPI document and the event list', () => {
  let t: TestGateway;
  let ops: Set<string>;

  beforeAll(async () => {
    t = await startGateway();
    const doc = (await (await fetch(`${t.url}/v2/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    // The document is served at a path it does not list itself.
    ops = new Set(['GET /v2/openapi.json']);
    for (const [p, byMethod] of Object.entries(doc.paths))
      for (const m of Object.keys(byMethod)) ops.add(norm(`${m.toUpperCase()} ${p}`));
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('every operation a docs table names exists in the API (an abbreviated path matches exactly one)', () => {
    let named = 0;
    for (const f of [...DOCS, 'README.md']) {
      for (const op of tableOps(read(f))) {
        named++;
        const [method, path] = op.split(' ') as [string, string];
        if (path.startsWith('…')) {
          const tail = norm(path.slice(1));
          const hits = [...ops].filter((o) => o.startsWith(`${method} `) && o.endsWith(tail));
          expect(hits, `${f}: ${op}`).toHaveLength(1);
        } else expect(ops.has(norm(op)), `${f} names ${op}, which the API does not have`).toBe(true);
      }
    }
    expect(named).toBeGreaterThan(20);
  });

  it('the /v2 tables of docs/proxy.md and docs/api.md list every operation of the API', () => {
    for (const f of ['docs/proxy.md', 'docs/api.md']) {
      const listed = tableOps(read(f)).map((op) => {
        const [method, path] = op.split(' ') as [string, string];
        if (!path.startsWith('…')) return norm(op);
        const tail = norm(path.slice(1));
        return [...ops].find((o) => o.startsWith(`${method} `) && o.endsWith(tail)) ?? op;
      });
      const missing = [...ops].filter((o) => !listed.includes(o) && !o.includes('openapi.json'));
      expect(missing, `${f} lacks these operations`).toEqual([]);
    }
  });

  it('every event type, webhook.test included, is described in docs/webhooks.md and docs/events.md', () => {
    for (const f of ['docs/webhooks.md', 'docs/events.md']) {
      const text = read(f);
      for (const type of [...EVENT_TYPES, 'webhook.test'])
        expect(text, `${f} describes ${type}`).toContain(`\`${type}\``);
    }
  });
});
