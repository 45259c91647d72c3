import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/** Every module an entry reaches through its static imports (type-only ones left out: erased), and the packages they name. */
function reach(entry: string): { modules: Set<string>; packages: Set<string> } {
  const modules = new Set<string>();
  const packages = new Set<string>();
  const walk = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\s)[^'";]*?from\s+'([^']+)'/gm)) {
      const spec = m[1] as string;
      if (spec.startsWith('.')) walk(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      else packages.add(spec);
    }
  };
  walk(join(SRC, entry));
  return { modules, packages };
}

describe('the request threads load nothing of OpenTelemetry', () => {
  it('an edge thread reaches no @opentelemetry package and no span builder', () => {
    const { modules, packages } = reach('threads/edge-main.ts');
    expect([...packages].filter((p) => p.startsWith('@opentelemetry'))).toEqual([]);
    expect([...modules].some((m) => m.endsWith('tracing/context.ts'))).toBe(true);
    for (const m of ['tracing/index.ts', 'tracing/spans.ts', 'tracing/exporter.ts', 'tracing/otlp.ts'])
      expect([...modules].some((x) => x.endsWith(m))).toBe(false);
  });

  it('the control thread does (where spans are written): the conventions names, and our OTLP encoder', () => {
    const { modules, packages } = reach('control.ts');
    expect([...packages]).toContain('@opentelemetry/semantic-conventions');
    expect([...modules].some((m) => m.endsWith('tracing/otlp.ts'))).toBe(true);
    // The generic serializer is the tests' oracle (test/unit/otlp.test.ts), not run by the gateway.
    expect([...packages]).not.toContain('@opentelemetry/otlp-transformer');
  });
});
