// `node ...FROM_SOURCES make-store-template.ts DIR`: an embedded store in DIR/clickhouse
// with every migration applied (store-template.ts copies it into new data directories).
import { loadConfig } from '../../src/config/index.js';
import { openStore } from '../../src/store/client.js';
import { migrate } from '../../src/store/migrations.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: make-store-template.ts DIR');
const store = await openStore(loadConfig({ env: { DATA_DIR: dir } }).storage);
await migrate(store);
await store.close();
