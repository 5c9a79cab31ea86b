/**
 * The hot path calls decode and operation directly and hands a throw to the user caller as its first
 * attempt (firstThrow): the retries, the calls made and the error returned are those of callUser alone.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InRecord } from '../../src/kafka/types.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { plan } from '../../src/processor/plan.js';
import { firstThrow, userCaller } from '../../src/processor/user-call.js';

const retriable = (message: string) => Object.assign(new Error(message), { retriable: true });

function record(key: string): InRecord {
  return {
    topic: 't',
    partition: 0,
    offset: '7',
    key: Buffer.from(key),
    value: Buffer.from('{}'),
    headers: {},
    timestamp: '1',
  };
}
const key = (() => {
  for (let i = 0; ; i++) if (partitionFor(Buffer.from(`k${i}`), 1) === 0) return `k${i}`;
})();

describe('firstThrow', () => {
  it('throws the given error once, then calls the function', () => {
    const e = new Error('first');
    let calls = 0;
    const fn = firstThrow(e, () => ++calls);
    assert.throws(fn, (x) => x === e);
    assert.equal(fn(), 1);
    assert.equal(fn(), 2);
  });

  for (const [name, fails, retries, ok] of [
    ['a retriable throw retried until it succeeds', 2, 3, true],
    ['a retriable throw past the retries', 5, 2, false],
    ['a throw without retries', 1, 0, false],
  ] as const) {
    it(`plan: ${name}: the same calls and outcome as callUser alone`, async () => {
      const run = async (direct: boolean) => {
        let calls = 0;
        const decode = () => {
          calls++;
          if (calls <= fails) throw retriable(`fail ${calls}`);
          return { fine: true };
        };
        const callUser = userCaller(retries, new AbortController().signal);
        if (!direct) {
          const r = await callUser(decode);
          return { calls, ok: r.ok, error: r.ok ? undefined : (r.error as Error).message };
        }
        const [p] = await plan({ decode, partitionCount: 1, partitionCounts: [1], callUser }, 't', 0, [
          record(key),
        ]);
        return { calls, ok: p?.dead === undefined, error: (p?.dead?.error as Error | undefined)?.message };
      };
      const [viaPlan, alone] = [await run(true), await run(false)];
      assert.deepEqual(viaPlan, alone);
      assert.equal(viaPlan.ok, ok);
    });
  }
});
