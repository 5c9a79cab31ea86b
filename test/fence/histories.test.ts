/**
 * Model-based test of the fence: fast-check generates histories (owners with old and new epochs,
 * several records per key per batch, crashes between Redis write / produce / commit, replays from the
 * last committed offset, zombies acting late, stale commits landing or not, at-least-once and
 * exactly-once commit semantics) and runs each against real Redis. Each history must keep the contract:
 * state = fold of the records applied once, every output (and dead letter) emitted at least once with
 * the right bytes (exactly once under read_committed in exactly-once mode), no lower-epoch write after a
 * higher epoch wrote a key, and the scripts agreeing with the reference model on every call.
 *
 * A third of the histories have owners that fold in JS through the processor's own reducer path, most of them
 * keeping owner-local state (the processor's cache: a key's state and token reused under the same epoch
 * for records newer than the token, the write token-checked, CONFLICT -> forgotten and read again), and
 * every history may have `reconcile --repair`'s script rewrite a committed key between two steps,
 * bumping its generation, so an owner's cached token from before it answers CONFLICT. The run must show
 * those paths taken: cache hits, repairs, and CONFLICTs whose current token carries a generation.
 *
 * RF_HISTORIES sets the number of histories per set-up (default 2600: 7,800 over the three; a reducer
 * history costs about three times an operation one, so the file takes about the time 3,400 operation
 * histories per set-up took).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { cachedHistoryArb, historyArb, runHistory, violations } from './harness.js';
import { type CacheCounts, redfenceFence } from './implementations.js';

const RUNS = Number(process.env.RF_HISTORIES ?? 2600);

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
      let repairs = 0;
      let cachedHistories = 0;
      const cache: CacheCounts = { hits: 0, misses: 0, conflicts: 0, generationConflicts: 0 };
      const verdicts = new Map<string, number>();
      await fc.assert(
        fc.asyncProperty(
          fc.oneof({ arbitrary: historyArb(), weight: 2 }, { arbitrary: cachedHistoryArb(), weight: 1 }),
          async (h) => {
            const fence = redfenceFence(redis, target.mode, `${prefix}_${n++}`, {
              reduce: h.reduce === true,
            });
            const trace = await runHistory(h, fence);
            calls += trace.calls.length;
            repairs += trace.repairs;
            if (h.reduce) cachedHistories++;
            const c = fence.counts();
            for (const k of Object.keys(cache) as (keyof CacheCounts)[]) cache[k] += c[k];
            for (const c of trace.calls)
              for (const r of c.results) verdicts.set(r.verdict, (verdicts.get(r.verdict) ?? 0) + 1);
            assert.deepEqual(fence.disagreements, []);
            assert.deepEqual(violations(h, trace), []);
          },
        ),
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
      // ... and the owner-local state and the outside writer's paths
      assert.ok(cachedHistories > 0 && cachedHistories < n, `${cachedHistories} reducer histories of ${n}`);
      assert.ok(cache.hits > 0, `no owner-local state hit: ${JSON.stringify(cache)}`);
      assert.ok(repairs > 0, 'no key repaired');
      assert.ok(
        cache.generationConflicts > 0,
        `no CONFLICT after a repair (a cached token from before it): ${JSON.stringify(cache)}`,
      );
      process.stderr.write(
        `# ${target.name}: ${RUNS} histories (${cachedHistories} reducer), ${calls} apply calls, verdicts ${JSON.stringify(Object.fromEntries(verdicts))}, ${repairs} repairs, owner state ${JSON.stringify(cache)}\n`,
      );
    });
  });
}
