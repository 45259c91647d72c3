import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const script = join(import.meta.dirname, '../../scripts/check-cycles.mjs');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder `src` of modules, each file's text given. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-cycles-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, 'src', name, '..'), { recursive: true });
    writeFileSync(join(dir, 'src', name), text);
  }
  return join(dir, 'src');
}
const check = (src: string) => spawnSync(process.execPath, [script, src], { encoding: 'utf8' });

describe('scripts/check-cycles.mjs', () => {
  it('fails on a circle of imports (a type-only one too) and prints it as a chain of files', () => {
    const src = tree({
      'store/client.ts': "import { CLUSTER } from './cluster.js';\nexport const open = () => CLUSTER;\n",
      'store/cluster.ts': "import type { Open } from './table.js';\nexport const CLUSTER = 1;\n",
      'store/table.ts': "import type { open } from './client.js';\nexport type Open = typeof open;\n",
      'leaf.ts': "import { open } from './store/client.js';\nexport const x = open;\n",
    });
    const r = check(src);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('1 import cycle(s):');
    expect(r.stderr).toContain(
      'src/store/client.ts -> src/store/cluster.ts -> src/store/table.ts -> src/store/client.ts',
    );
    expect(r.stderr).not.toContain('leaf.ts');
  });

  it('passes a tree that flows one way; comments and lazy import() are not imports', () => {
    const src = tree({
      'a.ts': "import { b } from './b.js';\nexport const a = b;\n",
      'b.ts': [
        "export { c } from './c/index.js';",
        "// import { a } from '../a.js';",
        "/* export * from './a.js'; */",
        "export const b = async () => (await import('./a.js')).a;",
      ].join('\n'),
      'c/index.ts': 'export const c = 1;\n',
    });
    const r = check(src);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('no import cycles among 3 modules');
    expect(r.status).toBe(0);
  });

  it('finds every circle of a tangle, and a module that imports itself', () => {
    const src = tree({
      'a.ts': "import './b.js';\nimport './c.js';\n",
      'b.ts': "import './a.js';\n",
      'c.ts': "export * from './a.js';\n",
      'self.ts': "import type { T } from './self.js';\nexport type T = number;\n",
    });
    const r = check(src);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('3 import cycle(s):');
    expect(r.stderr).toContain('src/a.ts -> src/b.ts -> src/a.ts');
    expect(r.stderr).toContain('src/a.ts -> src/c.ts -> src/a.ts');
    expect(r.stderr).toContain('src/self.ts -> src/self.ts');
  });
});
