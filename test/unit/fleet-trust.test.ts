import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { withState } from '../../src/fleet/dispatch.js';
import { channelKey, openAnnouncement, signAnnouncement } from '../../src/fleet/signed.js';
import type { DeliveryRecord } from '../../src/webhooks/records.js';

const sealing = randomBytes(32);
const key = channelKey(sealing);
const CH = 'wakegate:keys';

describe('fleet channel announcements', () => {
  it('derives a key of its own from the sealing key (not the sealing key, not the redaction key)', () => {
    expect(key).toHaveLength(32);
    expect(key.equals(sealing)).toBe(false);
    expect(channelKey(sealing).equals(key)).toBe(true);
    expect(channelKey(randomBytes(32)).equals(key)).toBe(false);
  });

  it('opens what an instance with the same key signed, on the same channel only', () => {
    const m = signAnnouncement(key, CH, 'abc123', { id: 'key_x', version: 1795600000123, revoked: true });
    expect(openAnnouncement(key, CH, m)).toEqual({
      owner: 'abc123',
      id: 'key_x',
      version: 1795600000123,
      revoked: true,
    });
    expect(openAnnouncement(key, 'wakegate:endpoints', m)).toBeNull();
    expect(openAnnouncement(key, 'other:keys', m)).toBeNull();
    expect(openAnnouncement(channelKey(randomBytes(32)), CH, m)).toBeNull();
  });

  it('property: any change to a signed message (owner, id, version, flag, MAC) fails its check', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[0-9a-f]{12}$/),
        fc.stringMatching(/^[A-Za-z0-9_]{1,40}$/),
        fc.integer({ min: 0, max: 2 ** 50 }),
        fc.boolean(),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        (owner, id, version, revoked, at, flip) => {
          const m = signAnnouncement(key, CH, owner, { id, version, revoked });
          expect(openAnnouncement(key, CH, m)).toEqual({ owner, id, version, revoked });
          const i = at % m.length;
          const changed = m.slice(0, i) + String.fromCharCode(m.charCodeAt(i) ^ flip) + m.slice(i + 1);
          const opened = openAnnouncement(key, CH, changed);
          // Only a change that leaves the same meaning could pass: none does.
          expect(opened).toBeNull();
        },
      ),
      { numRuns: 500 },
    );
  });

  it('property: random strings and forged records never open, and never throw', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 600 }),
          fc.json().map((j) => `intruder ${j}`),
          fc
            .tuple(fc.base64String({ maxLength: 60 }), fc.string(), fc.integer())
            .map(([mac, id, v]) => `intruder ${mac} ${id} ${v}`),
        ),
        (m) => {
          expect(openAnnouncement(key, CH, m)).toBeNull();
        },
      ),
      { numRuns: 1000 },
    );
  });
});

const local: DeliveryRecord = {
  id: 'dlv_1',
  environment: 'production',
  endpoint_id: 'ep_1',
  event_id: 'evt_1',
  event_type: 'key.revoked',
  payload: '{"stored":true}',
  attempt: 2,
  max_attempts: 8,
  status: 'failed',
  response_status: 500,
  response_body: '',
  duration_ms: 1,
  is_replay: false,
  replay_of: null,
  created_at: 1,
  next_attempt_at: 1000,
  updated_at: 2,
};

describe('a delivery state read from Redis', () => {
  it('property: only the attempt count (between the copy and the last allowed) and the due time are taken', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc
            .record({
              attempt: fc.oneof(fc.integer(), fc.double(), fc.string()),
              next_attempt_at: fc.oneof(fc.integer(), fc.double(), fc.constant(null), fc.string()),
              payload: fc.string(),
              endpoint_id: fc.string(),
              max_attempts: fc.integer(),
              url: fc.string(),
              secret: fc.string(),
            })
            .map((r) => JSON.stringify(r)),
        ),
        (raw) => {
          const d = withState(local, raw);
          const { attempt, next_attempt_at, ...rest } = d;
          const { attempt: _a, next_attempt_at: _n, ...kept } = local;
          expect(rest).toEqual(kept);
          expect(Number.isSafeInteger(attempt)).toBe(true);
          expect(attempt).toBeGreaterThanOrEqual(local.attempt);
          expect(attempt).toBeLessThanOrEqual(local.max_attempts - 1);
          expect(next_attempt_at === null || Number.isFinite(next_attempt_at)).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('numbers on from another instance, never back', () => {
    expect(withState(local, '{"attempt":5,"next_attempt_at":2000}')).toMatchObject({
      attempt: 5,
      next_attempt_at: 2000,
    });
    expect(withState(local, '{"attempt":0,"next_attempt_at":0}')).toMatchObject({ attempt: 2, next_attempt_at: 0 });
    expect(withState(local, '{"attempt":99}')).toMatchObject({ attempt: 7, next_attempt_at: 1000 });
    expect(withState(local, 'not json')).toBe(local);
  });
});

describe('coordination.prefix', () => {
  it('is wakegate: unless set, and a plain name when set', () => {
    expect(loadConfig({ env: {} }).coordination.prefix).toBe('wakegate:');
    expect(loadConfig({ values: { coordination: { prefix: 'eu-1:{wg}:' } } }).coordination.prefix).toBe('eu-1:{wg}:');
    for (const bad of ['', 'has space', 'x'.repeat(65), 'new\nline', '*'])
      expect(() => loadConfig({ values: { coordination: { prefix: bad } } })).toThrow(/coordination\.prefix/);
  });
});
