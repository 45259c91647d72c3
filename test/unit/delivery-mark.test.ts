import { describe, expect, it } from 'vitest';
import {
  DELIVERY_AGENT,
  deliveryMark,
  isOwnDelivery,
  MARK_HEADER,
  Marks,
  markKey,
  OWN_DELIVERY_AGENT,
  recordedAgent,
} from '../../src/delivery-mark.js';

const key = markKey(Buffer.alloc(32, 7));
const now = 1_800_000_000_000;
const t = now / 1000;
const hook = { method: 'POST', target: '/api/hook?x=1' };

describe("the mark of the gateway's own deliveries", () => {
  it('verifies its own mark of a delivery id and request, within five minutes of its time', () => {
    const mark = deliveryMark(key, 'dlv_1', t, hook);
    expect(isOwnDelivery(key, 'dlv_1', mark, now, hook)).toBe(true);
    expect(isOwnDelivery(key, 'dlv_1', mark, now + 299_000, hook)).toBe(true);
    expect(isOwnDelivery(key, 'dlv_1', mark, now + 301_000, hook)).toBe(false);
    expect(isOwnDelivery(key, 'dlv_2', mark, now, hook)).toBe(false);
    expect(isOwnDelivery(markKey(Buffer.alloc(32, 8)), 'dlv_1', mark, now, hook)).toBe(false);
    // Bound to the request it was made for: another path, query or method is not it.
    expect(isOwnDelivery(key, 'dlv_1', mark, now, { method: 'POST', target: '/api/other' })).toBe(false);
    expect(isOwnDelivery(key, 'dlv_1', mark, now, { method: 'POST', target: '/api/hook' })).toBe(false);
    expect(isOwnDelivery(key, 'dlv_1', mark, now, { method: 'GET', target: '/api/hook?x=1' })).toBe(false);
  });

  it('refuses marks that are not its own shape', () => {
    const good = deliveryMark(key, 'dlv_1', t, hook);
    for (const bad of [
      '',
      '.',
      `${t}.`,
      `x.${'0'.repeat(32)}`,
      `${t}.${'0'.repeat(31)}`,
      `${t}.${'G'.repeat(32)}`,
      good.toUpperCase(),
      `${good}0`,
    ])
      expect(isOwnDelivery(key, 'dlv_1', bad, now, hook), bad).toBe(false);
    expect(isOwnDelivery(key, ['dlv_1', 'dlv_1'], good, now, hook)).toBe(false);
    expect(isOwnDelivery(key, 'dlv_1', [good, good], now, hook)).toBe(false);
    expect(isOwnDelivery(key, undefined, good, now, hook)).toBe(false);
  });

  it("records the gateway's agent for a valid mark once, and tells a client naming itself so apart", () => {
    const mark = deliveryMark(key, 'dlv_1', t, hook);
    const req = (ua: string, m: string | null = mark) => ({
      method: 'POST',
      url: '/api/hook?x=1',
      headers: { 'user-agent': ua, 'x-service-delivery-id': 'dlv_1', ...(m ? { [MARK_HEADER]: m } : {}) },
    });
    const marks = new Marks();
    expect(recordedAgent(DELIVERY_AGENT, key, req(DELIVERY_AGENT), now, marks)).toBe(OWN_DELIVERY_AGENT);
    // The same mark again (a replay of a captured delivery): not the gateway's delivery.
    expect(recordedAgent(DELIVERY_AGENT, key, req(DELIVERY_AGENT), now, marks)).toBe(DELIVERY_AGENT);
    expect(recordedAgent(DELIVERY_AGENT, null, req(DELIVERY_AGENT), now, new Marks())).toBe(DELIVERY_AGENT);
    expect(recordedAgent(DELIVERY_AGENT, key, req(DELIVERY_AGENT, null), now, new Marks())).toBe(DELIVERY_AGENT);
    expect(recordedAgent(OWN_DELIVERY_AGENT, key, req(OWN_DELIVERY_AGENT), now, new Marks())).toBe(
      `${OWN_DELIVERY_AGENT} (unverified)`,
    );
    expect(recordedAgent('curl/8', key, req('curl/8'), now, new Marks())).toBe('curl/8');
  });

  it('remembers a bounded number of marks, letting the oldest go', () => {
    const marks = new Marks();
    for (let i = 0; i < 5000; i++) expect(marks.take(`m${i}`, now)).toBe(true);
    expect(marks.take('m4999', now)).toBe(false);
    // The oldest were let go to stay within the bound.
    expect(marks.take('m0', now)).toBe(true);
  });
});
