import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type List, type Query } from './api';

/**
 * A /v2 list shown page by page, as the Wakes page pages: the newest `limit` first, then
 * `next_cursor` sent back unchanged for each older page the user asks for (`more`), so
 * every item can be reached. `reload` asks again for as many items as are shown (the
 * pages walked from the first), so an action on an item of an older page (a key revoked)
 * leaves it in view with its new state. A new `query` starts again from the first page;
 * an answer to an older load (a filter changed meanwhile) is dropped.
 */
export function usePaged<T>(path: string, query: Query, deps: unknown[]) {
  const [rows, setRows] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);
  const seq = useRef(0);
  /** The load running, if any (a poll does not cut into it). */
  const busy = useRef(false);
  const shown = useRef(0);
  shown.current = rows.length;
  const q = useRef(query);
  q.current = query;

  /** Pages from `after` (null: the first) until `want` items are had or there are no more (`quiet`: no loading state). */
  const walk = async (after: string | null, want: number, quiet = false) => {
    const mine = ++seq.current;
    busy.current = true;
    if (!quiet) setLoading(true);
    try {
      const got: T[] = [];
      let next = after;
      do {
        const l = await api<List<T>>('GET', path, { query: { ...q.current, cursor: next } });
        if (mine !== seq.current) return;
        got.push(...l.data);
        next = l.has_more ? l.next_cursor : null;
      } while (next !== null && got.length < want);
      setRows((r) => (after ? [...r, ...got] : got));
      setCursor(next);
      setErr(null);
    } catch (e) {
      if (mine === seq.current) setErr(e);
    } finally {
      if (mine === seq.current) {
        busy.current = false;
        setLoading(false);
      }
    }
  };
  useEffect(() => {
    // The cursor belongs to the query it came with: none until the new query's first page.
    setCursor(null);
    void walk(null, 1);
  }, deps);
  return {
    rows,
    err,
    loading,
    /** There are older items than the ones shown. */
    hasMore: cursor !== null,
    /** The next older page, added below the shown ones. */
    more: () => (cursor ? walk(cursor, 1) : Promise.resolve()),
    /** The same items again (as many as shown, at least a page), fresh. */
    reload: () => walk(null, Math.max(1, shown.current)),
    /** reload, unless a load is running (a timer's refresh does not drop the page just asked for). */
    poll: () => (busy.current ? Promise.resolve() : walk(null, Math.max(1, shown.current), true)),
  };
}

/**
 * Below a paged list, while there are more: a button for the next page (`label`,
 * "Older" for a list newest first) and how many are shown (`note`, after the count).
 */
export function More({
  shown,
  hasMore,
  loading,
  onMore,
  label = 'Older',
  note,
}: {
  shown: number;
  hasMore: boolean;
  loading: boolean;
  onMore: () => void;
  label?: string;
  note: string;
}) {
  if (!hasMore) return null;
  return (
    <p class="more">
      <button type="button" class="secondary" disabled={loading} onClick={onMore}>
        {label}
      </button>{' '}
      <span class="muted small">
        {shown.toLocaleString('en')} {note}
      </span>
    </p>
  );
}
