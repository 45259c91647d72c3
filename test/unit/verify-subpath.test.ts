import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

describe('wakegate/verify', () => {
  it('is importable by package name and loads no gateway and no storage engine', () => {
    // A receiver's script, run as its own process from the package root (self-reference).
    const script = `
      import { verifySignature, sign } from 'wakegate/verify';
      const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
      const body = '{"id":"evt_1"}';
      const t = Math.floor(Date.now() / 1000);
      const ok = verifySignature(body, sign(body, secret, t), secret);
      const bad = verifySignature(body + ' ', sign(body, secret, t), secret);
      console.log(JSON.stringify({ ok, bad
, rss: process.memoryUsage().rss }));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    const r = JSON.parse(out);
    expect(r.ok).toBe(true);
    expect(r.bad).toBe(false);
    // The embedded engine alone is over 200 MB of RSS; a bare node is about 40 MB.
    expect(r.rss).toBeLessThan(80 * 1024 * 1024);
    // Every module it loads, followed through its imports: only node:crypto and its own files.
    const seen = new Set<string>();
    const walk = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const m of readFileSync(file, 'utf8').matchAll(/(?:^|\n)(?:import|export)[^'"]*from\s*'([^']+)'/g)) {
        const spec = m[1] as string;
        if (spec.startsWith('.')) walk(join(dirname(file), spec));
        else expect(spec, `${file} imports ${spec}`).toMatch(/^node:/);
      }
    };
    walk(join(ROOT, 'dist', 'verify.js'));
    expect([...seen].map((f) => f.slice(ROOT.length))).toEqual(['/dist/verify.js', '/dist/webhooks/signer.js']);
  });
});
