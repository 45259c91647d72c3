/** An event as it is raised, recorded and fanned out (SPEC.md's event envelope without its delivery fields). */
export interface EventRecord {
  id: string;
  type: string;
  environment: string;
  /** Milliseconds since the epoch. */
  created_at: number;
  data: Record<string, unknown>;
}
