import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/index.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

describe('what users get with the repository', () => {
  it('every installed package fits the Node versions package.json declares (npm install prints no EBADENGINE)', () => {
    const ours = JSON.parse(read('package.json')).engines.node as string;
    const lowest = semver.minVersion(ours)?.version as string;
    const lock = JSON.parse(read('package-lock.json')) as {
      packages: Record<string, { engines?: { node?: string } | string[]; version?: string }>;
    };
    const misfits = Object.entries(lock.packages)
      .filter(([name, p]) => name !== '' && p.engines && !Array.isArray(p.engines) && p.engines.node)
      .filter(([, p]) => !semver.satisfies(lowest, (p.engines as { node: string }).node))
      .map(([name, p]) => `${name}@${p.version} wants node ${(p.engines as { node: string }).node}`);
    expect(misfits, `package.json declares node ${ours}`).toEqual([]);
  });

  it('README and docs/ stand alone: no reference to files outside the repository', () => {
    const files = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    for (const f of files) {
      const text = read(f);
      expect(text, f).not.toMatch(/shared\/|SPEC\.md|DESIGN\.md/);
      for (const m of text.matchAll(/\]\(([^)#:]+)\)/g)) {
        expect(
          () => readFileSync(join(ROOT, f.includes('/') ? 'docs' : '', m[1] as string)),
          `${f} links ${m[1]}`,
        ).not.toThrow();
      }
    }
    const readme = read('README.md');
    for (const c of ['npm install', 'npm start', 'npm test', 'allow_insecure_http', 'allow_private_networks']) {
      expect(readme).toContain(c);
    }
  });

  it('every YAML example in README and docs/ is a config the gateway starts with', () => {
    const files = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    let n = 0;
    for (const f of files)
      for (const m of read(f).matchAll(/```yaml\n([\s\S]*?)```/g)) {
        n++;
        expect(
          () => loadConfig({ values: parse(m[1] as string), env: {} }),
          `${f}: ${(m[1] as string).slice(0, 60)}`,
        ).not.toThrow();
      }
    expect(n).toBeGreaterThan(3);
  });

  it('compose.yaml reaches the Docker host on Linux, keeps the sealing key in a data volume, and states the key rule', () => {
    const c = parse(read('compose.yaml'));
    const w = c.services.wakegate;
    expect(w.extra_hosts).toContain('host.docker.internal:host-gateway');
    expect(w.volumes.join(' ')).not.toMatch(/spool/);
    expect(w.environment.WAKEGATE_ADMIN_KEY).toContain('32 to 128');
    expect(read('Dockerfile')).toMatch(/FROM node:26/);
  });
});
