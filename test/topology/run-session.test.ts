/**
 * Session reduce and aggregate on Redis (src/topology/run/fold-session.ts): each key's sessions are read,
 * merged and aggregated in JS as Kafka Streams' KStreamSessionWindowAggregate does, and written as a
 * `session` effect that sets the merged value, with `expect`. On generated inputs (several partitions,
 * out-of-order records that bridge sessions, late records, null values that delete a session, batches
 * cut at random points and replayed by a new owner) the outputs must equal the reference model's per
 * topic and key, in order (tombstones of the merged-away sessions, then the merged one), dead letters
 * and drops per partition, and a replay must re-emit the same outputs and change nothing. Another
 * writer adding a session between the read and the write sends the key round again (CONFLICT), and the
 * merged result holds its session. With emit('final') (aggregate, and count, both folded before the
 * calls and indexed by session end) the final results equal the model's too, the index is pruned
 * behind commits, and another writer between the read and the write fails the batch with
 * RF_CAS_CONFLICT: run again, it closes what the key then holds. The inputs hold ticks
 * (src/topology/tick.ts): they move the stream time and close sessions on both sides alike.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import type { CloseIndexRedis, StoreRedis } from '../../src/store/index.js';
import type { BuiltTopology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import {
  type Amounts,
  assertEqualToModel,
  generated,
  interfering,
  otherWriter,
  runOnRedis,
  sessionAggregate,
  sessionCount,
  sessionReduce,
} from './run-helpers.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 30);
const appName = () => uniqueName('ts').replace(/-/g, '_');

type Make = (app: string) => BuiltTopology;
/** Name, topology, and for emit final the same with emit update (its tombstones show the merges). */
const CASES: [string, Make, Make | null][] = [
  ['a session aggregate of amounts in order (gap 6, grace 4; null deletes)', sessionAggregate, null],
  ['a session aggregate dropping late records', (app) => sessionAggregate(app, 'drop'), null],
  ['a session reduce of numbers (gap 5, no grace)', sessionReduce, null],
  [
    'a session aggregate with emit final',
    (app) => sessionAggregate(app, 'dead-letter', 'final'),
    (app) => sessionAggregate(app, 'dead-letter', 'update'),
  ],
  [
    'a session count with emit final, late records dropped',
    (app) => sessionCount(app, 'drop', 'final'),
    (app) => sessionCount(app, 'drop', 'update'),
  ],
];

const rec = (offset: number, amount: number | null, timestamp: number) => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from('k'),
  value: amount === null ? null : Buffer.from(JSON.stringify({ amount })),
  timestamp,
});

const rows = (outputs: readonly { value: Buffer | null; timestamp: number }[]) =>
  outputs.map((o) => `${o.value?.toString()} @${o.timestamp}`);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`session reduce and aggregate on ${target.name}`, { timeout: 120_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, make, update] of CASES) {
      it(`${name}: outputs equal the model's per topic and key; replays re-emit and change nothing`, async () => {
        const seen = { outputs: 0, late: 0, merges: 0, deleted: 0, replays: 0, partitions: 0, pruned: 0 };
        await fc.assert(
          fc.asyncProperty(generated(4, 20, 1, false, true), async (g) => {
            const built = make(appName());
            const model = runModel(built, g.input, { partitions: { in: g.partitions } });
            const got = await runOnRedis(redis, built, g, null);
            assertEqualToModel(model, got);
            seen.outputs += got.outputs.length;
            seen.late += model.deadLetters.length + model.dropped.filter((d) => d.reason === 'late').length;
            // a merge forwards a tombstone (null) for each merged-away session
            seen.merges += got.outputs.filter((o) => /"(a|sum)":null/.test(o.value?.toString() ?? '')).length;
            // a deleted session: a null that is the record's last output (a tombstone is followed by its merge)
            seen.deleted += got.outputs.filter(
              (o, i) => o.value?.includes('"a":null') === true && got.outputs[i + 1]?.offset !== o.offset,
            ).length;
            seen.replays += got.replays;
            seen.pruned += got.pruned;
            if (update !== null) {
              // emit final: the same input with emit update shows the merges (their sessions never final)
              const upd = runModel(update(appName()), g.input, { partitions: { in: g.partitions } });
              seen.merges += upd.outputs.filter((o) => /"(a|n)":null/.test(o.value?.toString() ?? '')).length;
            }
            seen.partitions = Math.max(seen.partitions, g.partitions);
          }),
          { numRuns: RUNS },
        );
        assert.ok(seen.outputs > 0, 'some outputs');
        assert.ok(seen.replays > 0, 'some batches were replayed');
        assert.ok(seen.partitions > 1, 'several partitions');
        assert.ok(seen.late > 0, 'some records were late');
        assert.ok(seen.merges > 0, 'some sessions merged');
        if (name.includes('null deletes')) assert.ok(seen.deleted > 0, 'some sessions were deleted');
        if (update !== null) assert.ok(seen.pruned > 0, 'the index dropped entries behind commits');
      });
    }

    it('a record bridging two sessions merges them (merger in end order), tombstones first; a replay re-emits', async () => {
      const built = sessionAggregate(appName());
      const records = [rec(0, 1, 10), rec(1, 2, 19), rec(2, 3, 14), rec(3, null, 40), rec(4, 4, 41)];
      const exec = new TopologyExecutor(built, { redis });
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records };
      const first = await exec.runBatch(batch);
      const expected = [
        '{"start":10,"end":10,"a":{"n":1,"amounts":[1]}} @10',
        '{"start":19,"end":19,"a":{"n":1,"amounts":[2]}} @19',
        // 14 is within 6 of both: [10,10] then [19,19] merge into [10,19], then 3 is added
        '{"start":10,"end":10,"a":null} @10',
        '{"start":19,"end":19,"a":null} @19',
        '{"start":10,"end":19,"a":{"n":3,"amounts":[1,2,3]}} @19',
        // a null value: the aggregator gives null, the new session [40,40] is deleted (forwarded null)
        '{"start":40,"end":40,"a":null} @40',
        '{"start":41,"end":41,"a":{"n":1,"amounts":[4]}} @41',
      ];
      assert.deepEqual(rows(first.outputs), expected);
      assert.deepEqual(rows(first.outputs), rows(runModel(built, records).outputs));
      const fence = exec.store.keys.fence(Buffer.from('k'));
      const store = [...exec.plan.aggregates.values()][0]?.valueStore ?? -1;
      const stored = await redis.hgetall(exec.store.keys.session(fence, store));
      // [10,19] ended more than gap + grace before the newest session end (40): beyond retention, removed
      assert.deepEqual(stored, { '41:41': '{"n":1,"amounts":[4]}' });
      // queryable state reads the session store through the same serde
      const sessions = new TopologyState(built, { redis: redis as Redis }).sessionStore<string, Amounts>(
        'session-amounts',
      );
      assert.deepEqual((await sessions.fetch('k')).sessions, [
        { start: 41, end: 41, value: { n: 1, amounts: [4] } },
      ]);
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.outputs, first.outputs);
      assert.deepEqual(again.verdicts, { APPLY: 0, REBASE: 0, SKIP: 0, REEMIT: 5, REJECT: 0, CONFLICT: 0 });
      assert.deepEqual(await redis.hgetall(exec.store.keys.session(fence, store)), stored);
    });

    /** Another writer's call on key k: a session [12, 12] of the topology's store. */
    const sessionWriter = (built: BuiltTopology) => {
      const agg = [...new TopologyExecutor(built, { redis }).plan.aggregates.values()][0];
      assert.ok(agg !== undefined);
      const other = otherWriter(redis, built.applicationId);
      return async () => {
        await other(
          [
            {
              store: agg.valueStore,
              kind: 'session',
              time: 12,
              lowEnd: 6,
              highStart: 18,
              closeTime: -1_000,
              dropBefore: -1_000,
              expireAt: Date.now() + 60_000,
              op: { op: 'set', value: '{"n":100,"amounts":[100]}' },
            },
          ],
          100,
        );
      };
    };

    it('another writer adds a session between the read and the write: CONFLICT, read and merged again', async () => {
      const built = sessionAggregate(appName());
      const proxy = interfering(redis as unknown as StoreRedis, 1, sessionWriter(built));
      const exec = new TopologyExecutor(built, { redis: proxy.redis });
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records: [rec(0, 2, 10)] };
      const first = await exec.runBatch(batch);
      assert.equal(proxy.reads(), 1);
      assert.deepEqual(first.verdicts, { APPLY: 0, REBASE: 1, SKIP: 0, REEMIT: 0, REJECT: 0, CONFLICT: 1 });
      assert.deepEqual(rows(first.outputs), [
        '{"start":12,"end":12,"a":null} @12',
        '{"start":10,"end":12,"a":{"n":101,"amounts":[100,2]}} @12',
      ]);
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.outputs, first.outputs, 'a replay re-emits the same bytes');
    });

    it('emit final: another writer between the read and the write fails the batch (RF_CAS_CONFLICT); run again, it closes the merged session', async () => {
      const built = sessionAggregate(appName(), 'dead-letter', 'final');
      const proxy = interfering(redis as unknown as StoreRedis, 1, sessionWriter(built));
      const index = redis as unknown as CloseIndexRedis;
      const exec = new TopologyExecutor(built, {
        redis: {
          ...proxy.redis,
          zadd: index.zadd.bind(index),
          zrangebyscoreBuffer: index.zrangebyscoreBuffer.bind(index),
          zremrangebyscore: index.zremrangebyscore.bind(index),
        } as unknown as Redis,
      });
      const batch = {
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 0,
        records: [rec(0, 2, 10), rec(1, 5, 40)], // one key: the proxy is one Redis to KeyStore
      };
      await assert.rejects(exec.runBatch(batch), (err: unknown) => {
        assert.ok(RedfenceError.is(err, 'RF_CAS_CONFLICT') && RedfenceError.isRetriable(err), String(err));
        return true;
      });
      assert.deepEqual(exec.streamTime(0), {}, 'the failed batch left the stream time as it was');
      // run again: the record at 10 merges with the other writer's session, closed by the one at 40 (40 - 10 > 12)
      const again = await exec.runBatch(batch);
      assert.deepEqual(rows(again.outputs), ['{"start":10,"end":12,"a":{"n":101,"amounts":[100,2]}} @12']);
      exec.setStreamTime(0, {}); // a new owner starts from the committed stream time
      const replay = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(replay.outputs, again.outputs, 'a replay re-emits the final result');
    });
  });
}
