// Regression tests from a review of `wakegate/verify` (src/verify.ts -> src/webhooks/signer.ts)
// as an attacker who can send any HTTP request to a receiver written as docs/webhooks.md,
// docs/events.md and examples/receiver.mjs show. Each failed before the fix: the library
// accepted signatures made with a guessable secret, took a NaN tolerance or clock as no
// replay window, and threw on a body that was not the raw bytes.
import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sign, verifySignature } from '../../src/verify.js';

const NOW = 1_795_000_000;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const BODY = '{"id":"evt_1","type":"wake.error","created":1795000000,"environment":"production","data":{}}';

/** What the attacker sends when it knows the key (here: a key anyone can guess). */
const forge = (key: string, body: string, t = NOW) =>
  `t=${t},v1=${createHmac('sha256', key).update(`${t}.`).update(body).digest('hex')}`;

/** A verdict that counts a thrown error as a rejection (only `true` is acceptance). */
const accepted = (f: () => boolean): boolean => {
  try {
    return f() === true;
  } catch {
    return false;
  }
};

describe('verifySignature fails open on guessable secrets', () => {
  // docs/webhooks.md:116 and docs/events.md:53 pass `process.env.WAKEGATE_WHSEC` straight in.
  // `WAKEGATE_WHSEC=` in an env file / compose file gives '', `${process.env.WAKEGATE_WHSEC}`
  // gives 'undefined'; the library keys an HMAC with whatever string it gets.
  it.each([
    ['an empty secret (WAKEGATE_WHSEC= in an env file)', ''],
    ["the string 'undefined' (a template literal of an unset variable)", 'undefined'],
    ["the bare prefix 'whsec_'", 'whsec_'],
  ])('%s verifies nothing an attacker can sign', (_label, secret) => {
    const evil = '{"id":"evt_evil","type":"key.revoked","created":1795000000,"environment":"production","data":{}}';
    expect(accepted(() => verifySignature(evil, forge(secret, evil), secret, 300, NOW))).toBe(false);
  });
});

describe('verifySignature fails open on a tolerance or clock that is not a number', () => {
  // `verifySignature(raw, h, secret, Number(process.env.WEBHOOK_TOLERANCE))` with the variable
  // unset passes NaN; `Math.abs(now - t) > NaN` is false, so no timestamp is ever too old.
  const yearOld = NOW - 365 * 86_400;
  it('a NaN tolerance does not switch the replay window off', () => {
    const captured = sign(BODY, SECRET, yearOld);
    expect(accepted(() => verifySignature(BODY, captured, SECRET, Number(undefined), NOW))).toBe(false);
  });
  it('a NaN clock does not switch the replay window off', () => {
    const captured = sign(BODY, SECRET, yearOld);
    expect(accepted(() => verifySignature(BODY, captured, SECRET, 300, Number.NaN))).toBe(false);
  });
});

describe('verifySignature throws instead of rejecting', () => {
  // The documented express receiver (docs/webhooks.md:115) uses express.raw({type:'application/json'}).
  // body-parser 1.x (Express 4) sets `req.body = req.body || {}` and skips parsing when the
  // content-type does not match (lib/types/raw.js); body-parser 2.x (Express 5) leaves it
  // undefined. So an attacker with no secret sends `content-type: text/plain` and a header of
  // the right shape, and verifySignature throws a TypeError from createHmac().update(): the
  // handler fails with a 500 (a stack trace in Express's development mode) instead of the 400.
  // A receiver that parsed first (express.json()) gets the same throw on every request.
  const header = `t=${NOW},v1=${'0'.repeat(64)}`;
  it.each([
    ['{} (express.raw, content-type not application/json, Express 4)', {}],
    ['undefined (express.raw, content-type not application/json, Express 5)', undefined],
    ['a parsed JSON object (express.json() ran first)', JSON.parse(BODY)],
  ])('a body of %s is a clean `false`, not a TypeError', (_label, body) => {
    let verdict: unknown;
    expect(() => {
      verdict = verifySignature(body as unknown as string, header, SECRET, 300, NOW);
    }).not.toThrow();
    expect(verdict).toBe(false);
  });
});
