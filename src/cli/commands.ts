import type { Args } from './args.js';
import { nearest, onlyFlags, operands, timeOption, UsageError } from './args.js';
import { ApiClient } from './client.js';
import { replay } from './replay.js';
import { fields, table } from './table.js';
import { wakesList, wakesShow, wakesTail } from './wakes.js';

export interface Io {
  out: (s: string) => void;
  env: NodeJS.ProcessEnv;
}

const COMMON = `Common options:
  --url URL        the gateway (default http://127.0.0.1:$PORT, else :8080; or WAKEGATE_URL)
  --key-file PATH  a file holding the key with the scopes the command needs;
                   --key-file - reads it from stdin (or set WAKEGATE_KEY)
  --key SECRET     works too, as mysql's -p does: the CLI warns and overwrites it in
                   its command line at once, but other users of the machine can read
                   it in /proc until then, and it stays in shell history
  --environment E  act in another environment (live-class keys only)
  --json           print the API's JSON instead of a table
  -h, --help       this help

Options are --name value or --name=value; -- ends them. An option a command does not
know, a missing value, or a one-value option given twice is one error line, exit 2.`;

export const HELP: Record<string, string> = {
  '': `wakegate: a reverse-proxy capture gateway

Usage: wakegate <command> [options]

Commands:
  serve                 run the gateway (the default)
  migrate               apply storage migrations and exit
  keys                  create, list, get and revoke API keys
  endpoints             list, create, test, disable and enable webhook endpoints
  deliveries            list, get (with attempts) and replay webhook deliveries
  wakes                 list, show and tail captured wakes
  replay                re-send a wake's request to its origin and print the diff

Run "wakegate <command> --help" for a command's options. --version prints the version.
Commands other than serve and migrate talk to a running gateway's /v2 API.`,
  serve: `Usage: wakegate serve [--config file.yaml]

Runs the proxy and /v2 on PORT (8080) and /metrics, /healthz, /readyz on OPS_PORT (8081).
The config file is --config, else WAKEGATE_CONFIG, else the package's config/default.yaml
(the built-in defaults when it is missing).
SIGTERM or SIGINT stops cleanly: in-flight requests finish, every wake is written.`,
  migrate: `Usage: wakegate migrate [--config file.yaml]

Applies storage migrations and exits. It opens the store directly: with the embedded
engine, stop the gateway that holds DATA_DIR first (a running gateway migrates on start).`,
  keys: `Usage:
  wakegate keys create --label L --environment E --scopes a:read,b:write [--consumer C]
                       [--rate-limit POLICY] [--replaces KEY_ID] [--offline]
  wakegate keys list [--status active|scheduled|revoked] [--label L] [--consumer C]
                     [--limit 1-100] [--cursor C]
  wakegate keys get KEY_ID
  wakegate keys revoke KEY_ID [--at 2026-12-01T00:00:00Z]   (a zone, Z or +hh:mm, is required)

The secret of a new key is printed once. --rate-limit names a policy of the config
(rate_limits). --offline writes the key straight into the store (recovery when no key
can reach the API); the gateway must be stopped for it. list prints one page, newest
first (--limit keys, default 20; --cursor for the next).

${COMMON}`,
  endpoints: `Usage:
  wakegate endpoints list
  wakegate endpoints create https://hooks.example.com/x --events wake.error,key.revoked
  wakegate endpoints test ENDPOINT_ID      (sends it a webhook.test event)
  wakegate endpoints disable ENDPOINT_ID
  wakegate endpoints enable ENDPOINT_ID

The signing secret of a new endpoint is printed once.

${COMMON}`,
  wakes: `Usage:
  wakegate wakes list [filters] [--limit 1-100] [--cursor C]
  wakegate wakes show WAKE_ID              (summary, request and response headers and bodies)
  wakegate wakes tail [filters] [--max N] [--interval-ms 1000]

Filters (those of GET /v2/wakes):
  --status 404 | --status-class 5xx   --method POST   --route NAME
  --path /v1/users/{id}/*   (a template: {name} is one segment, a trailing * any rest)
  --consumer C   --key-id KEY_ID   --min-latency-ms 500
  --trace-id 4bf92f3577b34da6a3ce929d0e0e4736   (the wakes of one W3C trace)
  --since 2026-11-22T10:00:00Z   --until ...   (ISO 8601 with a zone)
  --management include|exclude   (the gateway's own /v2 and console traffic)

list prints one page, newest first (--cursor for the next). tail polls every second
and prints each new wake once, oldest first, until Ctrl-C or --max N wakes (--json: one
JSON object a line); it leaves out the gateway's own traffic, its own polls among it,
unless --management include. A gateway restarting or busy, or a 429, is waited out
(said once on stderr).

${COMMON}`,
  replay: `Usage:
  wakegate replay WAKE_ID [--allow-unsafe] [--ignore $.updated_at,x-trace]
                          [--set NAME=VALUE ...] [--wait-ms 30000]

Re-sends the wake's captured request to the origin of its environment, waits for the
replay's own wake, and prints how its answer differs (status, headers, JSON body paths)
or that it is identical.
  --allow-unsafe   replay a method other than GET, HEAD or OPTIONS
  --ignore A,B     body paths or field names, or headers, not to compare (repeatable)
  --set NAME=VALUE a value for what redaction replaced (repeatable): a query or form
                   name, a JSON path ($.card.cvc) or a header; the API refuses a wake
                   holding redacted values until each is given. A VALUE that reads as
                   JSON (123, true, null, "text") is sent as that value, else as text.

${COMMON}`,
  deliveries: `Usage:
  wakegate deliveries list [--endpoint ENDPOINT_ID] [--status pending|delivered|failed|dead_lettered]
                           [--event-type TYPE]
  wakegate deliveries get DELIVERY_ID      (with each attempt)
  wakegate deliveries replay DELIVERY_ID

${COMMON}`,
};

const KEY_COLUMNS = ['id', 'label', 'environment', 'consumer', 'status', 'scopes', 'last_used_at', 'revoke_at'];
const ENDPOINT_COLUMNS = ['id', 'status', 'environment', 'events', 'url'];
const DELIVERY_COLUMNS = ['id', 'status', 'event_type', 'endpoint_id', 'attempt', 'response_status', 'created_at'];
const ATTEMPT_COLUMNS = ['attempt', 'at', 'response_status', 'duration_ms', 'error'];

const operand = (args: Args, what: string): string => operands(args, 2, what) as string;

function print(io: Io, args: Args, data: unknown, show: (d: Record<string, unknown>) => string): void {
  io.out(args.bools.has('json') ? `${JSON.stringify(data, null, 2)}\n` : show(data as Record<string, unknown>));
}

const list = (d: Record<string, unknown>, cols: string[]) =>
  table(d.data as Record<string, unknown>[], cols) + (d.has_more ? `(more: --cursor ${d.next_cursor})\n` : '');

const secretNote = (what: string) => `\nThis is the only time the ${what} is shown. Store it now.\n`;

/** keys, endpoints and deliveries: each a call to the /v2 API. */
export async function apiCommand(args: Args, io: Io): Promise<void> {
  const [group, verb] = args.words;
  const f = args.flags;
  const env = f.get('environment');
  const api = () => ApiClient.from(f, io.env);
  if (group === 'replay') return replay(args, api, io.out);
  const csv = (name: string) => {
    const v = f.get(name);
    if (!v) throw new UsageError(`--${name} is required`);
    return v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  };
  switch (`${group} ${verb}`) {
    case 'wakes list':
      return wakesList(args, api, io.out);
    case 'wakes show':
      return wakesShow(args, api, io.out);
    case 'wakes tail':
      return wakesTail(args, api, io.out);
    case 'keys create': {
      onlyFlags(args, ['label', 'environment', 'scopes', 'consumer', 'rate-limit', 'replaces', 'offline']);
      operands(args, 2, null);
      const label = f.get('label');
      if (!label) throw new UsageError('--label is required');
      if (!env) throw new UsageError('--environment is required (the environment the key is bound to)');
      const body: Record<string, unknown> = { label, scopes: csv('scopes'), environment: env };
      if (f.get('consumer')) body.consumer = f.get('consumer');
      if (f.get('rate-limit')) body.rate_limit = f.get('rate-limit');
      if (f.get('replaces')) body.replaces = f.get('replaces');
      const k = (await api().call('POST', '/v2/api-keys', {}, stripUndefined(body))) as Record<string, unknown>;
      return print(io, args, k, (d) => fields(d) + secretNote('secret'));
    }
    case 'keys list': {
      onlyFlags(args, ['environment', 'status', 'label', 'consumer', 'cursor', 'limit']);
      operands(args, 2, null);
      const q = {
        environment: env,
        status: f.get('status'),
        label: f.get('label'),
        consumer: f.get('consumer'),
        cursor: f.get('cursor'),
        limit: f.get('limit'),
      };
      return print(io, args, await api().call('GET', '/v2/api-keys', q), (d) => list(d, KEY_COLUMNS));
    }
    case 'keys get': {
      onlyFlags(args, ['environment']);
      const id = operand(args, 'KEY_ID');
      return print(
        io,
        args,
        await api().call('GET', `/v2/api-keys/${encodeURIComponent(id)}`, { environment: env }),
        fields,
      );
    }
    case 'keys revoke': {
      onlyFlags(args, ['environment', 'at']);
      const id = operand(args, 'KEY_ID');
      // With its zone, always: a revocation is not undone, and the machine's zone is not the API's (UTC).
      const at = timeOption(args, 'at');
      const revokeAt = at === undefined ? undefined : new Date(at.ms).toISOString();
      const k = await api().call(
        'DELETE',
        `/v2/api-keys/${encodeURIComponent(id)}`,
        { environment: env },
        revokeAt ? { revoke_at: revokeAt } : undefined,
      );
      return print(io, args, k, fields);
    }
    case 'endpoints list': {
      onlyFlags(args, ['environment', 'cursor', 'limit']);
      operands(args, 2, null);
      const q = { environment: env, cursor: f.get('cursor'), limit: f.get('limit') };
      return print(io, args, await api().call('GET', '/v2/webhooks/endpoints', q), (d) => list(d, ENDPOINT_COLUMNS));
    }
    case 'endpoints create': {
      onlyFlags(args, ['environment', 'events']);
      const target = operand(args, 'ENDPOINT_URL (the receiver, https://...)');
      const e = await api().call(
        'POST',
        '/v2/webhooks/endpoints',
        {},
        stripUndefined({ url: target, events: csv('events'), environment: env }),
      );
      return print(io, args, e, (d) => fields(d) + secretNote('signing secret'));
    }
    case 'endpoints test': {
      onlyFlags(args, ['environment']);
      const id = operand(args, 'ENDPOINT_ID');
      const d = await api().call('POST', `/v2/webhooks/endpoints/${encodeURIComponent(id)}/test`, {
        environment: env,
      });
      return print(io, args, d, fields);
    }
    case 'endpoints disable':
    case 'endpoints enable': {
      onlyFlags(args, ['environment']);
      const id = operand(args, 'ENDPOINT_ID');
      const status = verb === 'enable' ? 'enabled' : 'disabled';
      const e = await api().call(
        'PATCH',
        `/v2/webhooks/endpoints/${encodeURIComponent(id)}`,
        { environment: env },
        { status },
      );
      return print(io, args, e, fields);
    }
    case 'deliveries list': {
      onlyFlags(args, ['environment', 'endpoint', 'status', 'event-type', 'cursor', 'limit']);
      operands(args, 2, null);
      const q = {
        environment: env,
        endpoint_id: f.get('endpoint'),
        status: f.get('status'),
        event_type: f.get('event-type'),
        cursor: f.get('cursor'),
        limit: f.get('limit'),
      };
      return print(io, args, await api().call('GET', '/v2/webhooks/deliveries', q), (d) => list(d, DELIVERY_COLUMNS));
    }
    case 'deliveries get': {
      onlyFlags(args, ['environment']);
      const id = operand(args, 'DELIVERY_ID');
      const d = (await api().call('GET', `/v2/webhooks/deliveries/${encodeURIComponent(id)}`, {
        environment: env,
      })) as Record<string, unknown> & { attempts?: Record<string, unknown>[] };
      return print(io, args, d, (x) => {
        const { attempts, payload: _, ...rest } = x as typeof d;
        return `${fields(rest)}\nAttempts:\n${list({ data: attempts ?? [] }, ATTEMPT_COLUMNS)}`;
      });
    }
    case 'deliveries replay': {
      onlyFlags(args, ['environment']);
      const id = operand(args, 'DELIVERY_ID');
      const d = await api().call('POST', `/v2/webhooks/deliveries/${encodeURIComponent(id)}/replay`, {
        environment: env,
      });
      return print(io, args, d, fields);
    }
  }
  const verbs = VERBS[group ?? ''] ?? [];
  const near = nearest(verb ?? '', verbs);
  throw new UsageError(
    `unknown command "${group} ${verb}"${near ? ` (did you mean ${group} ${near}?)` : `; ${group} has ${verbs.join(', ')}`}`,
  );
}

const VERBS: Record<string, string[]> = {
  keys: ['create', 'list', 'get', 'revoke'],
  endpoints: ['list', 'create', 'test', 'disable', 'enable'],
  deliveries: ['list', 'get', 'replay'],
  wakes: ['list', 'show', 'tail'],
};

function stripUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
