export { wakeDetailView, wakeView } from '../capture/view.js';

export const iso = (ms: number): string => new Date(ms).toISOString();

export function listEnvelope<T>(data: T[], hasMore: boolean, nextCursor: string | null) {
  return { object: 'list' as const, has_more: hasMore, next_cursor: nextCursor, data };
}
