import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isRevoked } from '../auth/authorize.js';
import { type KeyRecord, NAME_MAX } from '../auth/key.js';
import { GatewayError, missing } from '../errors.js';
import type { ApiDeps } from './context.js';
import { filterFingerprint } from './cursor.js';
import { actingEnvironment, environmentParam } from './env.js';
import { intParam, isRealDate, parseInput } from './parse.js';
import { listEnvelope } from './views.js';

/** What a label and a consumer may be (auth/key.ts checkName holds the rule; the service applies it). */
const NAME_RULE =
  'Unicode, normalized to NFC; 1 to 128 characters; no control characters; no whitespace at either end. ' +
  'Origins receive the consumer in x-wakegate-consumer, percent-encoded as UTF-8 (decodeURIComponent)';
/** Code points after NFC, as checkName counts them. */
const charsOf = (v: unknown): number => {
  let n = 0;
  if (typeof v === 'string') for (const _ of v.normalize('NFC')) n++;
  return n;
};
const name = (what: string) =>
  z
    .string()
    // A bound on the text's length before it is normalized and counted (checkName): what is said
    // past it is the rule, never this bound (no text of more than 1024 code points has 128 after NFC).
    .max(1024, { error: (iss) => `must be 1 to ${NAME_MAX} characters (it has ${charsOf(iss.input)})` })
    .meta({ minLength: 1, maxLength: 128, description: `${what}: ${NAME_RULE}` });

const NAMES_DESCRIPTION = [
  '`label` and `consumer` are Unicode text of 1 to 128 characters (code points), with no control characters and',
  'no whitespace at either end (U+180E, U+200B, U+2060 and U+FEFF count as whitespace there); a lone surrogate is',
  'refused. Both are normalized to NFC, and stored and returned so (`e` followed by U+0301 becomes `é`).',
  'Otherwise: 400 `invalid_request` naming `param`. The consumer defaults to the label (with `replaces`, to the',
  "replaced key's consumer). Origins receive it in `x-wakegate-consumer` with `%` and every byte outside visible",
  'ASCII (space included) percent-encoded as UTF-8: `東京チーム` arrives as',
  '`%E6%9D%B1%E4%BA%AC%E3%83%81%E3%83%BC%E3%83%A0`, `billing service` as `billing%20service`, `billing-service`',
  'unchanged; decode it with `decodeURIComponent`. A key may not take a consumer that a key it could not manage',
  'already has, compared after NFC and case folding (`Billing-Service` is `billing-service`): 403',
  '`insufficient_scope` naming `consumer`.',
].join(' ');

const POSITIVE = 'must be a positive whole number';
const AT_MOST_1E9 = 'must be at most 1000000000 (1e9)';

export const createKeyBody = z.strictObject({
  label: name('a name for people; the consumer by default'),
  environment: z.string().min(1).max(64),
  scopes: z
    .array(z.string().min(1).max(128))
    .max(100)
    .meta({ minItems: 1, uniqueItems: true, description: 'each a scope the calling key holds' }),
  consumer: name('the identity origins are told (x-wakegate-consumer)').optional(),
  // A policy of the config by name, or a policy of the key's own.
  rate_limit: z
    .union(
      [
        z.string().min(1).max(64),
        z.strictObject({
          // The bound before .int(): past 2^53 it would say that bound (it says the first issue), not 1e9.
          limit: z.number().positive(POSITIVE).max(1e9, AT_MOST_1E9).int(),
          burst: z.number().positive(POSITIVE).max(1e9, AT_MOST_1E9).int(),
          window: z.enum(['second', 'minute', 'hour', 'day']),
        }),
      ],
      { error: 'must be a policy name such as "reports", or {limit, burst, window}' },
    )
    .optional(),
  replaces: z.string().min(1).max(64).optional(),
  tls_fingerprint: z.string().max(128).nullable().optional().meta({
    description:
      'the SHA-256 fingerprint of the client certificate that names this key on routes with auth: mtls (hex, colons and case ignored)',
  }),
});

/** A certificate's SHA-256 as stored: lower-case hex, no colons; null when it is not one. */
export function fingerprintOf(v: string): string | null {
  const hex = v.replaceAll(':', '').toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? hex : null;
}

const fingerprintParam = (v: string | null | undefined): string | null | undefined => {
  if (v === undefined || v === null) return v;
  const fp = fingerprintOf(v);
  if (fp === null)
    throw new GatewayError(
      'invalid_request',
      'tls_fingerprint must be a SHA-256 fingerprint: 64 hex digits, colons allowed (openssl x509 -noout -fingerprint -sha256)',
      'tls_fingerprint',
    );
  return fp;
};

export const changeKeyBody = z.strictObject({
  tls_fingerprint: z
    .string()
    .max(128)
    .nullable()
    .meta({ description: 'the client certificate that names this key on auth: mtls routes; null clears it' }),
});

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;
/** The last instant storage's DateTime64(3) holds (a later one would be stored as another, past, instant). */
const LAST_STORED = '2299-12-31T23:59:59.999Z';
export const revokeKeyBody = z.strictObject({
  revoke_at: z
    .string()
    .regex(ISO_UTC, 'must be an ISO 8601 UTC timestamp such as 2026-12-01T00:00:00.000Z')
    .refine(isRealDate, 'is not a real date (no such day or time)')
    .refine((v) => Date.parse(v) <= Date.parse(LAST_STORED), `must be at most ${LAST_STORED}`)
    .meta({
      format: 'date-time',
      description: `in the future, at most ${LAST_STORED}; UTC, a day or time that does not exist is refused`,
    })
    .optional(),
});
export const keyIdParams = z.strictObject({ key_id: z.string().max(64) });
export const keyByIdQuery = z.strictObject({ environment: environmentParam });
export const listKeysQuery = z.strictObject({
  environment: environmentParam,
  status: z.enum(['active', 'scheduled', 'revoked']).optional(),
  label: z.string().min(1).max(200).optional(),
  consumer: z.string().min(1).max(256).optional(),
  limit: intParam(1, 100).optional(),
  cursor: z.string().min(1).max(512).optional(),
});

export function keysPlugin(app: FastifyInstance, deps: ApiDeps): void {
  app.post(
    '/v2/api-keys',
    {
      config: {
        auth: { scope: 'keys:write' },
        doc: {
          summary: 'Issue a key; its secret is in this response only',
          description: NAMES_DESCRIPTION,
          body: createKeyBody,
          success: 201,
          object: 'api_key',
          errors: [400, 401, 403, 404, 409, 422, 429],
        },
      },
    },
    async (request, reply) => {
      const body = parseInput(createKeyBody, request.body, 'body');
      const { rate_limit, tls_fingerprint, ...rest } = body;
      const input = {
        ...rest,
        ...(rate_limit !== undefined ? { rate_limit: deps.keys.ratePolicy(rate_limit) } : {}),
        tls_fingerprint: fingerprintParam(tls_fingerprint) ?? null,
      };
      const { key, secret } = await deps.keys.create(input, request.key.environment, request.key);
      reply.code(201).header('cache-control', 'no-store');
      return deps.keys.view(key, secret);
    },
  );

  app.get(
    '/v2/api-keys',
    {
      config: {
        auth: { scope: 'keys:read' },
        doc: {
          summary: 'List keys, newest first; filters status (active, scheduled, revoked), label, consumer',
          query: listKeysQuery,
          success: 200,
          object: 'list of api_key',
          errors: [400, 401, 403, 404],
        },
      },
    },
    async (request) => {
      const q = parseInput(listKeysQuery, request.query, 'query');
      const env = actingEnvironment(deps, request, q.environment);
      const now = deps.clock.now();
      const fp = filterFingerprint({ what: 'keys', env, s: q.status, l: q.label, c: q.consumer });
      const after = q.cursor !== undefined ? deps.cursors.decode(q.cursor, fp) : null;
      // Stored names are NFC: a filter given decomposed finds them too.
      const label = q.label?.normalize('NFC');
      const consumer = q.consumer?.normalize('NFC');
      const status = (k: KeyRecord) => (isRevoked(k, now) ? 'revoked' : k.revoke_at !== null ? 'scheduled' : 'active');
      const all = [...deps.ring.all()]
        .filter(
          (k) =>
            k.environment === env &&
            (q.status === undefined || status(k) === q.status) &&
            (label === undefined || k.label === label) &&
            (consumer === undefined || k.consumer === consumer),
        )
        .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1))
        .filter((k) => after === null || k.created_at < after.t || (k.created_at === after.t && k.id < after.id));
      const limit = q.limit ?? 20;
      const page = all.slice(0, limit);
      const last = page[page.length - 1];
      const more = all.length > limit;
      // last_used_at as GET /v2/api-keys/{id} gives it: stored uses count, not only this run's.
      const views = await deps.keys.views(page);
      return listEnvelope(
        views.map((v, i) => ({ ...v, status: status(page[i] as KeyRecord) })),
        more,
        more && last ? deps.cursors.encode({ t: last.created_at, id: last.id }, fp) : null,
      );
    },
  );

  app.get(
    '/v2/api-keys/:key_id',
    {
      config: {
        auth: { scope: 'keys:read' },
        doc: {
          summary: 'Read a key, with last_used_at to the second',
          query: keyByIdQuery,
          success: 200,
          object: 'api_key',
          errors: [401, 403, 404],
        },
      },
    },
    async (request) => {
      const { key_id } = parseInput(keyIdParams, request.params, 'query');
      const { environment } = parseInput(keyByIdQuery, request.query, 'query');
      const k = deps.keys.get(key_id, actingEnvironment(deps, request, environment));
      const [view] = await deps.keys.views([k]);
      return view;
    },
  );

  app.patch(
    '/v2/api-keys/:key_id',
    {
      config: {
        auth: { scope: 'keys:write' },
        doc: {
          summary: 'Set or clear the client certificate that names a key (tls_fingerprint, for auth: mtls routes)',
          query: keyByIdQuery,
          body: changeKeyBody,
          success: 200,
          object: 'api_key',
          errors: [400, 401, 403, 404, 409],
        },
      },
    },
    async (request) => {
      const { key_id } = parseInput(keyIdParams, request.params, 'query');
      const { environment } = parseInput(keyByIdQuery, request.query, 'query');
      const body = parseInput(changeKeyBody, request.body, 'body');
      const env = actingEnvironment(deps, request, environment);
      if (!key_id.startsWith('key_')) throw missing('key', 'key_id');
      const fp = fingerprintParam(body.tls_fingerprint) ?? null;
      const k = await deps.keys.setCertificate(key_id, env, fp, request.key);
      const [view] = await deps.keys.views([k]);
      return view;
    },
  );

  app.delete(
    '/v2/api-keys/:key_id',
    {
      config: {
        auth: { scope: 'keys:write' },
        doc: {
          summary: 'Revoke a key now, or at revoke_at; cannot be undone',
          description:
            'A key already revoked is returned unchanged. A scheduled revocation can be brought forward (an earlier ' +
            '`revoke_at`, or none to revoke now) but never pushed back: the same `revoke_at` again returns the key ' +
            'unchanged, a later one is 409 `conflict` naming `revoke_at`.',
          query: keyByIdQuery,
          body: revokeKeyBody,
          success: 200,
          object: 'api_key',
          // 409: revoke_at later than the key's scheduled revocation (it can only be brought forward).
          errors: [400, 401, 403, 404, 409, 422],
        },
      },
    },
    async (request) => {
      const { key_id } = parseInput(keyIdParams, request.params, 'query');
      const { environment } = parseInput(keyByIdQuery, request.query, 'query');
      const body = parseInput(revokeKeyBody, request.body, 'body');
      const env = actingEnvironment(deps, request, environment);
      if (!key_id.startsWith('key_')) throw missing('key', 'key_id');
      const at = body.revoke_at !== undefined ? Date.parse(body.revoke_at) : undefined;
      const k = await deps.keys.revoke(key_id, env, at, request.key);
      return deps.keys.view(k);
    },
  );
}
