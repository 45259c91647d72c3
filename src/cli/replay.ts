import { type Args, onlyFlags, operands, UsageError } from './args.js';
import { type ApiClient, ApiError } from './client.js';
import { type Diff, diffText, intOption } from './wakes.js';

/**
 * `--set name=value`: the name is cut at the first `=` outside brackets (so
 * `$["a=b"]=1` names `$["a=b"]`); a value that reads as a JSON scalar (`123`, `true`,
 * `null`, `"text"`) is sent as that value, anything else as the string given.
 */
export function parseSet(items: readonly string[]): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (const item of items) {
    let depth = 0;
    let cut = -1;
    for (let i = 0; i < item.length && cut < 0; i++) {
      const c = item[i];
      if (c === '[') depth++;
      else if (c === ']') depth = Math.max(0, depth - 1);
      else if (c === '=' && depth === 0) cut = i;
    }
    if (cut <= 0)
      throw new UsageError(
        '--set takes name=value (a query or form name, a JSON path such as $.card.cvc, or a header)',
      );
    const name = item.slice(0, cut);
    if (Object.hasOwn(set, name)) throw new UsageError(`--set gives ${JSON.stringify(name)} more than once`);
    set[name] = scalar(item.slice(cut + 1));
  }
  return set;
}

function scalar(v: string): unknown {
  try {
    const j: unknown = JSON.parse(v);
    if (j === null || ['string', 'number', 'boolean'].includes(typeof j)) return j;
  } catch {
    // Not JSON: the text itself.
  }
  return v;
}

const HINTS: Record<string, string> = {
  set: 'give each with --set NAME=VALUE',
  allow_unsafe: 'with the CLI: --allow-unsafe',
};

interface Started {
  object: 'replay';
  wake_id: string;
  replay_wake_id: string;
  status: string;
}

/**
 * replay WAKE_ID: POST /v2/wakes/{id}/replay, then reads the replay's wake until its
 * diff is in (every 250 ms, for at most --wait-ms, 30000), and prints the diff.
 */
export async function replay(args: Args, api: () => ApiClient, out: (s: string) => void): Promise<void> {
  onlyFlags(args, ['environment', 'allow-unsafe', 'ignore', 'set', 'wait-ms']);
  const id = operands(args, 1, 'WAKE_ID (wakegate replay WAKE_ID)') as string;
  const wait = intOption(args, 'wait-ms', { min: 0, max: 600_000, fallback: 30_000 });
  const ignore = (args.lists.get('ignore') ?? []).flatMap((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );
  const set = parseSet(args.lists.get('set') ?? []);
  const body: Record<string, unknown> = {};
  if (args.bools.has('allow-unsafe')) body.allow_unsafe = true;
  if (ignore.length) body.ignore = ignore;
  if (Object.keys(set).length) body.set = set;
  const environment = args.flags.get('environment');
  const client = api();
  const started = (await client
    .call('POST', `/v2/wakes/${encodeURIComponent(id)}/replay`, { environment }, body)
    .catch((e: unknown) => {
      // The 409 asking for `set` and the 422 asking for allow_unsafe: say how to give them here.
      const hint = e instanceof ApiError ? HINTS[e.body.error?.param ?? ''] : undefined;
      if (!(e instanceof ApiError) || hint === undefined) throw e;
      throw new ApiError(e.status, { error: { ...e.body.error, message: `${e.body.error?.message}; ${hint}` } });
    })) as Started;
  const deadline = Date.now() + wait;
  // The replay is sent from here on: a failure to read its wake (a key without wakes:read,
  // the gateway gone) says so, or the operator, told only of the failure, sends it again.
  const sent = `replay ${started.replay_wake_id} of ${started.wake_id} was sent`;
  for (;;) {
    const w = await replayWake(client, started.replay_wake_id, environment).catch((e: unknown) => {
      throw new Error(`${sent}; its diff cannot be read: ${e instanceof Error ? e.message : String(e)}`);
    });
    const diff = (w?.diff ?? null) as Diff | null;
    if (diff) {
      if (args.bools.has('json')) return out(`${JSON.stringify({ ...started, status: 'finished', diff }, null, 2)}\n`);
      return out(
        `replay ${started.replay_wake_id} of ${started.wake_id}: ${w?.status ?? '-'} (${w?.latency_ms ?? '-'} ms)\n${diffText(diff)}`,
      );
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `${sent}, but its diff is not in after ${wait} ms; see wakegate wakes show ${started.replay_wake_id}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The replay's wake, or null while it is not yet written. */
async function replayWake(
  client: ApiClient,
  id: string,
  environment: string | undefined,
): Promise<Record<string, unknown> | null> {
  try {
    return (await client.call('GET', `/v2/wakes/${encodeURIComponent(id)}`, { environment })) as Record<
      string,
      unknown
    >;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}
