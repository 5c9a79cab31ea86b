/**
 * The assignment offset check's own rules (src/kafka/offset-resets.ts), without a broker: which
 * committed offsets are reported and why, and its bounds (a failing read, one not answered by the
 * deadline, one watermarks call per topic). On the real broker and Redis:
 * test/processor/offset-resets.test.ts and offset-resets-runtimes.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkAssigned, type OffsetReset, offsetResets } from '../../src/kafka/offset-resets.js';

describe('the assignment check on its own', () => {
  const tps = [0, 1, 2, 3, 4].map((partition) => ({ topic: 't', partition }));
  const marks = new Map([
    [
      't',
      new Map([
        [0, { low: 10, high: 20 }],
        [1, { low: 10, high: 20 }],
        [2, { low: 10, high: 20 }],
        [3, { low: 10, high: 20 }],
      ]),
    ],
  ]);
  const at = (pairs: [number, number][]) =>
    new Map(pairs.map(([p, offset]) => [`t/${p}`, { offset, metadata: '' }]));

  it('reports below the log start and above its end only; never a partition without a commit or watermarks', () => {
    const found = offsetResets(
      'g',
      tps,
      at([
        [0, 4],
        [1, 10],
        [2, 20],
        [3, 21],
        [4, 3],
      ]),
      marks,
    );
    assert.deepEqual(found, [
      {
        group: 'g',
        topic: 't',
        partition: 0,
        committed: 4,
        logStart: 10,
        logEnd: 20,
        reason: 'retention',
        skipped: 6,
      },
      {
        group: 'g',
        topic: 't',
        partition: 3,
        committed: 21,
        logStart: 10,
        logEnd: 20,
        reason: 'beyond_end',
        skipped: 0,
      },
    ]);
    assert.deepEqual(offsetResets('g', tps, at([[0, -1]]), marks), []);
  });

  it('a failing read, or one not answered by the deadline, is reported as failed and never rejects; one watermarks call per topic', async () => {
    const failed: string[][] = [];
    const resets: OffsetReset[] = [];
    const report = {
      reset: (r: OffsetReset) => resets.push(r),
      failed: (t: readonly string[]) => failed.push([...t]),
    };
    const calls: string[] = [];
    await checkAssigned(
      {
        group: 'g',
        committed: async () => at([[0, 1]]),
        watermarks: async (topic) => {
          calls.push(topic);
          return marks.get('t') ?? new Map();
        },
      },
      [...tps, { topic: 'u', partition: 0 }],
      report,
      new Promise(() => undefined),
    );
    assert.deepEqual(calls.sort(), ['t', 'u']);
    assert.equal(resets.length, 1);
    await checkAssigned(
      {
        group: 'g',
        committed: async () => Promise.reject(new Error('down')),
        watermarks: async () => new Map(),
      },
      tps,
      report,
      new Promise(() => undefined),
    );
    // a committed read that never answers: the check settles once its deadline does, not before
    let passDeadline: () => void = () => undefined;
    const deadline = new Promise<void>((resolve) => {
      passDeadline = resolve;
    });
    let settled = false;
    const check = checkAssigned(
      { group: 'g', committed: () => new Promise(() => undefined), watermarks: async () => new Map() },
      tps,
      report,
      deadline,
    ).then(() => {
      settled = true;
    });
    await Promise.resolve();
    assert.equal(settled, false, 'waits for its reads until the deadline');
    passDeadline();
    await check;
    assert.ok(settled, 'settled at its deadline');
    assert.deepEqual(failed, [['t'], ['t']]);
    assert.equal(resets.length, 1);
  });
});
