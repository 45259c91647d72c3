import { describe, expect, it } from 'vitest';
import {
  DELIVERY_AGENT,
  deliveryMark,
  isOwnDelivery,
  MARK_HEADER,
  markKey,
  OWN_DELIVERY_AGENT,
  recordedAgent,
} from '../../src/delivery-mark.js';

const key = markKey(Buffer.alloc(32, 7));
const now = 1_800_000_000_000;
const t = now / 1000;

describe("the mark of the gateway's own deliveries", () => {
  it('verifies its own mark of a delivery id, within five minutes of its time', () => {
    const mark = deliveryMark(key, 'dlv_1', t);
    expect(isOwnDelivery(key, 'dlv_1', mark, now)).toBe(true);
    expect(isOwnDelivery(key, 'dlv_1', mark, now + 299_000)).toBe(true);
    expect(isOwnDelivery(key, 'dlv_1', mark, now + 301_000)).toBe(false);
    expect(isOwnDelivery(key, 'dlv_2', mark, now)).toBe(false);
    expect(isOwnDelivery(markKey(Buffer.alloc(32, 8)), 'dlv_1', mark, now)).toBe(false);
  });

  it('refuses marks that are not its own shape', () => {
    const good = deliveryMark(key, 'dlv_1', t);
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
      expect(isOwnDelivery(key, 'dlv_1', bad, now), bad).toBe(false);
    expect(isOwnDelivery(key, ['dlv_1', 'dlv_1'], good, now)).toBe(false);
    expect(isOwnDelivery(key, 'dlv_1', [good, good], now)).toBe(false);
    expect(isOwnDelivery(key, undefined, good, now)).toBe(false);
  });

  it("records the gateway's agent only for a valid mark, and tells a client naming itself so apart", () => {
    const headers = { 'x-service-delivery-id': 'dlv_1', [MARK_HEADER]: deliveryMark(key, 'dlv_1', t) };
    expect(recordedAgent(DELIVERY_AGENT, key, headers, now)).toBe(OWN_DELIVERY_AGENT);
    expect(recordedAgent(DELIVERY_AGENT, null, headers, now)).toBe(DELIVERY_AGENT);
    expect(recordedAgent(DELIVERY_AGENT, key, { 'x-service-delivery-id': 'dlv_1' }, now)).toBe(DELIVERY_AGENT);
    expect(recordedAgent(OWN_DELIVERY_AGENT, key, headers, now)).toBe(`${OWN_DELIVERY_AGENT} (unverified)`);
    expect(recordedAgent('curl/8', key, headers, now)).toBe('curl/8');
  });
});
