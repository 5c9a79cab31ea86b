/**
 * Why pending outputs exist. The same history harness pointed at seed 000's sketch (last offset
 * only, re-emit only when offset == lastOffset) finds a lost output: two records of one key in one
 * batch are applied, the process dies before producing, and the replay SKIPs the first one. The
 * same histories against redfence's fence lose nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { standalone, uniqueName } from '../helpers/env.js';
import { type History, historyArb, recordsArb, runHistory, violations } from './harness.js';
import { redfenceFence, seedSketchFence } from './implementations.js';

const setOnly = historyArb(recordsArb({ ops: ['set'], outputs: ['state'] }));

/** The smallest form of the failure, written out: apply both, crash before produce, replay. */
const KNOWN: History = {
  mode: 'alo',
  staleCommitsLand: false,
  records: [
    { offset: 1, key: 'a', op: 'set', arg: 'x', output: 'state' },
    { offset: 2, key: 'a', op: 'set', arg: 'y', output: 'state' },
  ],
  actions: [
    { kind: 'step', owner: 0, batch: 2 }, // Redis write of both records
    { kind: 'crash', owner: 0, batch: 1 }, // dies before produce; a new owner replays from offset 0
  ],
};

describe('seed 000 sketch vs pending outputs', () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('the sketch loses the first output of a two-record batch replayed after a crash', async () => {
    const trace = await runHistory(KNOWN, seedSketchFence(redis, uniqueName('seed')));
    assert.deepEqual(violations(KNOWN, trace), ['offset 1: output lost (never emitted)']);
  });

  it('the harness finds a lost output in the sketch on its own', async () => {
    let n = 0;
    const prefix = uniqueName('seedgen');
    const result = await fc.check(
      fc.asyncProperty(setOnly, async (h) => {
        const trace = await runHistory(h, seedSketchFence(redis, `${prefix}-${n++}`));
        assert.deepEqual(violations(h, trace), []);
      }),
      { numRuns: 2000, seed: 42 },
    );
    assert.equal(result.failed, true, 'expected the sketch to lose an output');
    assert.match(String(result.errorInstance), /lost \(never emitted\)/);
  });

  it('redfence keeps every output on the same histories', async () => {
    const prefix = uniqueName('seedrf');
    let n = 0;
    const known = await runHistory(KNOWN, redfenceFence(redis, 'strict', `${prefix}_${n++}`));
    assert.deepEqual(violations(KNOWN, known), []);
    await fc.assert(
      fc.asyncProperty(setOnly, async (h) => {
        const trace = await runHistory(h, redfenceFence(redis, 'strict', `${prefix}_${n++}`));
        assert.deepEqual(violations(h, trace), []);
      }),
      { numRuns: 500, seed: 42 },
    );
  });
});
