import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { openStore } from '../../src/store/client.js';
import { migrate } from '../../src/store/migrations.js';
import type { Store } from '../../src/store/store.js';

/** A fresh embedded store in its own temporary directory (one per test file/process). */
export async function tempStore(): Promise<{ store: Store; dir: string; cleanup: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-test-'));
  const cfg = loadConfig({ env: { DATA_DIR: dir } });
  const store = await openStore(cfg.storage);
  await migrate(store);
  return {
    store,
    dir,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
