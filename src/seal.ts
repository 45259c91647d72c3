import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { replaceFile } from './durable.js';
import { privateDir } from './private-dir.js';

const V1 = 'sealed:v1:';
const V2 = 'sealed:v2:';

/**
 * Seals secrets the gateway must keep readable (webhook signing secrets) with
 * AES-256-GCM, so stored rows and backups never hold them in clear.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('the sealing key must be 32 bytes');
  }

  /**
   * Seals `plain` bound to `boundTo` (the id of the row that holds it) as GCM's
   * associated data: a sealed value copied into another row does not open there.
   */
  seal(plain: string, boundTo: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    c.setAAD(Buffer.from(boundTo, 'utf8'));
    const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return V2 + Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64url');
  }

  /**
   * Opens a value sealed for row `boundTo`; throws when it was sealed for another
   * row or altered. Values sealed before binding existed (v1) and values stored
   * before sealing existed are still read.
   */
  open(stored: string, boundTo: string): string {
    const v2 = stored.startsWith(V2);
    if (!v2 && !stored.startsWith(V1)) return stored;
    const raw = Buffer.from(stored.slice(V2.length), 'base64url');
    const d = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    if (v2) d.setAAD(Buffer.from(boundTo, 'utf8'));
    d.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
  }
}

/**
 * The sealing key: WAKEGATE_ENCRYPTION_KEY (base64 of 32 bytes; every instance
 * sharing a ClickHouse server needs the same one), else `DATA_DIR/secret.key`,
 * made on the first start with mode 0600.
 */
export function loadSealingKey(configured: string | null, dataDir: string): Buffer {
  if (configured) return Buffer.from(configured, 'base64');
  const file = join(dataDir, 'secret.key');
  if (existsSync(file)) {
    const k = readFileSync(file);
    // Empty: a kill cut its first write short (nothing was ever sealed with it), so it is made
    // again. Any other length is refused where it is used, naming the rule.
    if (k.length !== 0) return k;
  }
  privateDir(dataDir);
  const key = randomBytes(32);
  replaceFile(file, key);
  chmodSync(file, 0o600);
  return key;
}
