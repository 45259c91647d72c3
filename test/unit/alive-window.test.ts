import { describe, expect, it } from 'vitest';
import { ALIVE_MS, Heartbeat } from '../../src/fleet/alive.js';
import type { Coordinator } from '../../src/fleet/redis.js';

/** A coordinator whose ALIVE answers whatever `answer` holds. */
const redisSaying = (answer: { n: number }) =>
  ({ owner: 'me', run: async () => answer.n, command: async () => 0 }) as unknown as Coordinator;

describe('the count of instances an instance splits by', () => {
  it('is the most Redis said in the last minute: a restart that empties the set does not shrink it at once', async () => {
    const answer = { n: 3 };
    let t = 1_000_000;
    const heard: number[] = [];
    const beat = new Heartbeat(
      redisSaying(answer),
      (n) => heard.push(n),
      1,
      () => t,
    );
    expect(await beat.beat()).toBe(3);
    // Redis restarted empty: this instance is the first to say it is alive again.
    answer.n = 1;
    t += 3000;
    expect(await beat.beat()).toBe(3);
    // The others never came back: a minute after they were last counted, the count is Redis's.
    t += ALIVE_MS - 3000;
    expect(await beat.beat()).toBe(1);
    // A fleet that grows is split by at once.
    answer.n = 5;
    t += 3000;
    expect(await beat.beat()).toBe(5);
    expect(heard).toEqual([3, 3, 1, 5]);
  });
});
