/**
 * Changes to tables, told by the code in this process that writes them. Only for a
 * store no other process writes (the embedded engine, its directory held by this
 * process): there a mirror of a table (the key ring, the webhook endpoints) reads it
 * again when told, instead of polling. A leaf: imports nothing of the store's.
 */
export class TableChanges {
  private readonly listeners = new Map<string, Set<() => void>>();

  /** Calls `fn` after each write to `table`; returns the call that stops it. */
  on(table: string, fn: () => void): () => void {
    let set = this.listeners.get(table);
    if (!set) {
      set = new Set();
      this.listeners.set(table, set);
    }
    set.add(fn);
    return () => {
      set.delete(fn);
    };
  }

  /** `table` was written (the write has completed). */
  changed(table: string): void {
    for (const fn of this.listeners.get(table) ?? []) fn();
  }
}

/**
 * Keeps a mirror of a table fresh with `read` (true when it succeeded). With no
 * `changes` (a ClickHouse server, which other instances write too) it reads every
 * `everyMs`. With `changes` it reads when the table changes, and again every `everyMs`
 * only while its last read failed: an idle gateway reads nothing. A change during a
 * read is read again after it (that read may have started before the write).
 * Returns the call that stops it.
 */
export function follow(o: {
  table: string;
  changes: TableChanges | null;
  everyMs: number;
  read: () => Promise<boolean>;
}): () => void {
  if (o.changes === null) {
    const timer = setInterval(() => void o.read(), o.everyMs);
    timer.unref();
    return () => clearInterval(timer);
  }
  let stopped = false;
  let running = false;
  let again = false;
  let retry: NodeJS.Timeout | null = null;
  const run = async (): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    let ok = true;
    do {
      again = false;
      ok = await o.read();
    } while (again && ok && !stopped);
    running = false;
    if (!ok && !stopped && retry === null) {
      retry = setTimeout(() => {
        retry = null;
        void run();
      }, o.everyMs);
      retry.unref();
    }
  };
  const off = o.changes.on(o.table, () => {
    if (stopped) return;
    if (retry) clearTimeout(retry);
    retry = null;
    void run();
  });
  return () => {
    stopped = true;
    off();
    if (retry) clearTimeout(retry);
    retry = null;
  };
}
