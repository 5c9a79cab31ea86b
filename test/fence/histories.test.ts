/**
 * Model-based test of the fence: fast-check generates histories (owners with old and new epochs,
 * several records per key per batch, crashes between Redis write / produce / commit, replays from the
 * last committed offset, zombies acting late, stale commits landing or not, at-least-once and
 * exactly-once commit semantics) and runs each against real Redis. Each history must keep the contract:
 * state = fold of the records applied once, every output (and dead letter) emitted at least once with
 * the right bytes (exactly once under read_committed in exactly-once mode), no lower-epoch write after a
 * higher epoch wrote a key, and the scripts agreeing with the reference model on every call.
 *
 * RF_HISTORIES sets the number of histories per set-up (default 3400: > 10,000 over the three).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { historyArb, runHistory, violations } from './harness.js';
import { redfenceFence } from './implementations.js';

const RUNS = Number(process.env.RF_HISTORIES ?? 3400);

for (const target of TARGETS) {
  describe(`histories on ${target.name}`, () => {
    let redis: Redis | Cluster;
    before(() => {
      redis = target.connect();
    });
    after(() => redis.disconnect());

    it(`keeps the contract over ${RUNS} generated histories`, { timeout: 15 * 60_000 }, async () => {
      const prefix = uniqueName('hist').replace(/-/g, '_');
      let n = 0;
      let calls = 0;
      const verdicts = new Map<string, number>();
      await fc.assert(
        fc.asyncProperty(historyArb(), async (h) => {
          const fence = redfenceFence(redis, target.mode, `${prefix}_${n++}`);
          const trace = await runHistory(h, fence);
          calls += trace.calls.length;
          for (const c of trace.calls)
            for (const r of c.results) verdicts.set(r.verdict, (verdicts.get(r.verdict) ?? 0) + 1);
          assert.deepEqual(fence.disagreements, []);
          assert.deepEqual(violations(h, trace), []);
        }),
        { numRuns: RUNS },
      );
      assert.equal(n >= RUNS, true);
      assert.ok(calls > RUNS, `histories exercised ${calls} apply calls`);
      // The generator really reaches every interesting row (replays, zombies, rejects), not just APPLY.
      for (const v of ['APPLY', 'SKIP', 'REEMIT', 'FENCE', 'REJECT']) {
        assert.ok(
          (verdicts.get(v) ?? 0) > 0,
          `no ${v} verdict in ${RUNS} histories: ${JSON.stringify([...verdicts])}`,
        );
      }
      process.stderr.write(
        `# ${target.name}: ${RUNS} histories, ${calls} apply calls, verdicts ${JSON.stringify(Object.fromEntries(verdicts))}\n`,
      );
    });
  });
}
