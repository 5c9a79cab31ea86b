/**
 * Aggregations in two sub-topologies on Redis (standalone and Cluster), against the reference model: a
 * windowed count per key, its updates re-keyed by region (a repartition topic), then an unwindowed
 * count and a windowed reduce of them per region, on generated inputs (several partitions,
 * out-of-order and late timestamps, null keys and values, offset holes, batches cut at random points,
 * replays by a new owner). The input's batches run in turn; the records a batch sends to the
 * repartition topic run at once as batches of that topic (each in its key's murmur2 partition, offsets
 * going on per partition), some replayed too. The model is given the input in the order the batches
 * ran, so each repartition partition gets its records in the same order on both sides. Outputs must
 * equal the model's per topic and key, in order; dead letters and drops per topic and partition. The
 * second aggregation's keys live in their own fence space (`rf:{<app>@<repartition topic>:<key>}`),
 * fenced by the repartition partition's epoch, never the input's, and its stores are read by name
 * (TopologyState), stamped with the repartition topic's record.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { RedfenceError } from '../../src/errors/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, type ModelResult, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { TopologyBatch, TopologyBatchResult } from '../../src/topology/run/types.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { assertReplayDeadLetters, type Generated, generated } from './run-helpers.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 30);
const s = serdes.string();
const appName = () => uniqueName('t2').replace(/-/g, '_');
type Order = { amount: number };

/**
 * Keys a..e to two regions, named `a` and `b` as two of the input's keys are: the same key in both
 * sub-topologies, with an offset order each (one fence hash for both would judge one topic's offsets
 * against the other's). Each region gets updates from keys of several input partitions.
 */
const region = (key: string): string => (key.charCodeAt(0) % 2 === 1 ? 'a' : 'b');

/** Which code throws: none, the region reduce's reducer, or nodes downstream of the counts. */
type Throwing = false | 'fold' | 'downstream';

/**
 * in -> windowed count per key (tumbling 10, grace 3, emit as given) -> its updates re-keyed by region
 * (`repartition()` to `<app>-by-region-repartition`) -> a count of the updates per region, and a tumbling-window sum of
 * them (size 20, grace 2: updates late for it are common, emit as given) per region.
 */
function twoStages(app: string, emit: 'update' | 'final', throwing: Throwing = false): BuiltTopology {
  const t = topology({ applicationId: app });
  const updates = t
    .stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(10, 3))
    .emit(emit)
    .count({ name: 'per-key' })
    .toStream();
  updates.map((wk, n) => [wk.key, { start: wk.start, n }] as const).to('per-key', { key: s });
  // repartition() then groupByKey(): both aggregations in the one sub-topology reading the topic
  const byRegion = updates
    .map((wk, n) => [region(wk.key), n] as const)
    .repartition({ name: 'by-region', key: s })
    .groupByKey();
  byRegion
    .count({ name: 'region-updates' })
    .toStream()
    .mapValues((n) => {
      // downstream: every fourth update of a region throws (the repartition record a dead letter, its count kept)
      if (throwing === 'downstream' && n % 4 === 0) throw new TypeError('a fourth update is refused');
      return n;
    })
    .to('region-updates', { key: s });
  if (throwing === 'downstream')
    // after the repartition branch: an update that throws here takes its repartition record back
    updates
      .filter((_wk, n) => {
        if (n === 3) throw new RangeError('a count of three is refused');
        return true;
      })
      .map((wk, n) => [wk.key, n] as const)
      .to('not-three', { key: s });
  byRegion
    .windowedBy(TimeWindows.ofSizeAndGrace(20, 2))
    .emit(emit)
    .reduce(
      (a, b) => {
        // throwing: a 3 on an odd sum is refused (the repartition record a dead letter, its effects none)
        if (throwing === 'fold' && b === 3 && a % 2 === 1) throw new RangeError('3 on an odd sum is refused');
        return a + b;
      },
      { name: 'region-sums' },
    )
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, v }] as const)
    .to('region-sums', { key: s });
  return t.build();
}

/** One partition batch of the input, in the order the run takes them (one partition's after another's in turn). */
function inputBatches(g: Generated): ModelInput[][] {
  const per: ModelInput[][][] = [];
  for (let p = 0; p < g.partitions; p++) {
    const recs = g.input.filter((r) => r.partition === p);
    const out: ModelInput[][] = [];
    let from = 0;
    for (const size of [...(g.cuts[p] ?? []), recs.length]) {
      if (from >= recs.length) break;
      out.push(recs.slice(from, from + size));
      from += size;
    }
    per.push(out);
  }
  const all: ModelInput[][] = [];
  for (let i = 0; per.some((b) => b[i] !== undefined); i++)
    for (const b of per) {
      const x = b[i];
      if (x !== undefined) all.push(x);
    }
  return all;
}

interface Totals {
  outputs: TopologyBatchResult['outputs'][number][];
  deadLetters: TopologyBatchResult['deadLetters'][number][];
  dropped: TopologyBatchResult['dropped'][number][];
  replays: number;
  repartitioned: number;
}

/**
 * Runs the input's batches; each batch's repartition records run at once as batches of that topic, one
 * per repartition partition. A batch marked for replay runs again as a new owner would (epoch + 1, the
 * stream time it started with, before its commit): the same results, REEMIT only.
 */
async function runTwoStages(exec: TopologyExecutor, g: Generated, rep: string): Promise<Totals> {
  const totals: Totals = { outputs: [], deadLetters: [], dropped: [], replays: 0, repartitioned: 0 };
  const epochs = new Map<string, number>();
  const nextOffset = new Map<number, number>();
  let i = 0;
  const run = async (topic: string, partition: number, records: ModelInput[]): Promise<void> => {
    const tp = `${topic}/${partition}`;
    const epoch = epochs.get(tp) ?? 1;
    const committedOffset = records[0]?.offset ?? -1;
    await exec.committed(topic, partition, committedOffset);
    const batch: TopologyBatch = { topic, partition, epoch, committedOffset, records };
    const before = exec.streamTime(partition, topic);
    const first = await exec.runBatch(batch);
    if (g.replays[i++ % g.replays.length] === true) {
      exec.setStreamTime(partition, before, topic);
      epochs.set(tp, epoch + 1);
      const again = await exec.runBatch({ ...batch, epoch: epoch + 1 });
      assert.deepEqual(again.outputs, first.outputs, 'a replay re-emits the same outputs');
      assertReplayDeadLetters(again.deadLetters, first.deadLetters);
      assert.deepEqual(again.dropped, first.dropped);
      assert.deepEqual(again.streamTime, first.streamTime);
      assert.equal(again.verdicts.APPLY + again.verdicts.REBASE, 0, 'a replay applies nothing');
      totals.replays++;
    }
    totals.deadLetters.push(...first.deadLetters);
    totals.dropped.push(...first.dropped);
    const down = new Map<number, ModelInput[]>();
    for (const { offset: _offset, ...o } of first.outputs) {
      if (o.topic !== rep) {
        totals.outputs.push(o as (typeof totals.outputs)[number]);
        continue;
      }
      assert.ok(o.key !== null, 'a grouping drops null keys before its repartition topic');
      const p = partitionFor(o.key, g.partitions);
      const offset = nextOffset.get(p) ?? 0;
      nextOffset.set(p, offset + 1);
      down.set(p, [...(down.get(p) ?? []), { ...o, partition: p, offset }]);
      totals.repartitioned++;
    }
    for (const [p, recs] of down) await run(rep, p, recs);
  };
  for (const b of inputBatches(g)) await run('in', b[0]?.partition ?? 0, b);
  return totals;
}

/** Outputs per topic and key, in order (hex bytes and timestamps). */
function perKey(
  outputs: readonly { topic: string; key: Buffer | null; value: Buffer | null; timestamp: number }[],
) {
  const m = new Map<string, string[]>();
  for (const o of outputs) {
    const k = `${o.topic} ${o.key?.toString() ?? '-'}`;
    m.set(k, [...(m.get(k) ?? []), `${o.value?.toString() ?? '-'} @${o.timestamp}`]);
  }
  return m;
}

/** Dead letters and drops per source topic and partition, by offset. */
function perSource(items: readonly { source: ModelInput; node: string; reason: string }[]) {
  const m = new Map<string, string[]>();
  const sorted = [...items].sort((a, b) => a.source.offset - b.source.offset);
  for (const x of sorted) {
    const k = `${x.source.topic}/${x.source.partition}`;
    const applied = (x as { stateApplied?: true }).stateApplied === true ? ' state-applied' : '';
    m.set(k, [...(m.get(k) ?? []), `${x.source.offset} ${x.node} ${x.reason}${applied}`]);
  }
  return m;
}

function assertEqual(model: ModelResult, got: Totals): void {
  assert.deepEqual(perKey(got.outputs), perKey(model.outputs), 'outputs per topic and key');
  assert.deepEqual(
    perSource(got.deadLetters),
    perSource([...model.deadLetters, ...model.failed]),
    'dead letters',
  );
  assert.deepEqual(perSource(got.dropped), perSource(model.dropped), 'drops');
}

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`two aggregations across a repartition on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [emit, throwing] of [
      ['update', false],
      ['final', false],
      ['update', 'fold'],
      ['update', 'downstream'],
      ['final', 'downstream'],
    ] as const)
      it(`windowed count -> re-key -> count and windowed reduce (emit ${emit}${throwing === 'fold' ? ', the reduce throwing on some records' : throwing === 'downstream' ? ', nodes downstream of the counts throwing' : ''}): outputs equal the model's; replays re-emit`, async () => {
        const seen = {
          outputs: 0,
          regions: 0,
          late: 0,
          lateDownstream: 0,
          replays: 0,
          repartitioned: 0,
          threw: 0,
        };
        // the topics whose records threw downstream (their state applied)
        const applied = new Set<string>();
        await fc.assert(
          fc.asyncProperty(generated(4, 20, 1), async (g) => {
            const app = appName();
            const built = twoStages(app, emit, throwing);
            const rep = `${app}-by-region-repartition`;
            const exec = new TopologyExecutor(built, { redis });
            const got = await runTwoStages(exec, g, rep);
            // the model reads the input in the order the batches ran (each partition's order unchanged)
            const model = runModel(built, inputBatches(g).flat(), { partitions: { in: g.partitions } });
            assertEqual(model, got);
            seen.outputs += got.outputs.length;
            seen.regions += got.outputs.filter((o) => o.topic !== 'per-key').length;
            seen.late += model.deadLetters.length;
            seen.lateDownstream += model.deadLetters.filter((d) => d.source.topic === rep).length;
            seen.replays += got.replays;
            seen.repartitioned += got.repartitioned;
            seen.threw += model.failed.filter((d) => d.source.topic === rep).length;
            for (const d of model.failed)
              if (d.stateApplied === true)
                applied.add(d.source.topic === rep ? 'repartition' : d.source.topic);
          }),
          { numRuns: RUNS },
        );
        assert.ok(seen.regions > 0 && seen.repartitioned > 0, JSON.stringify(seen));
        assert.ok(seen.replays > 0, 'some batches were replayed');
        assert.ok(seen.late > 0, 'some records were late');
        if (emit === 'update') assert.ok(seen.lateDownstream > 0, 'some updates were late for the regions');
        if (throwing !== false) assert.ok(seen.threw > 0, 'some repartition records threw');
        if (throwing === 'downstream')
          assert.deepEqual(
            [...applied].sort(),
            ['in', 'repartition'],
            'updates threw downstream in both sub-topologies',
          );
      });

    it('the second aggregation keys its own fence space, fenced by the repartition partition’s epoch', async () => {
      const app = appName();
      const built = twoStages(app, 'update');
      const exec = new TopologyExecutor(built, { redis });
      const rep = `${app}-by-region-repartition`;
      const value = Buffer.from('{"amount":1}');
      const rec = (offset: number, key: string, timestamp: number) => ({
        topic: 'in',
        partition: 0,
        offset,
        key: Buffer.from(key),
        value,
        timestamp,
      });
      // the input at a high epoch: it never fences the repartition topic's partition, whose epochs are its own
      const first = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 7,
        committedOffset: 0,
        records: [rec(0, 'a', 1), rec(1, 'c', 2)],
      });
      const down = first.outputs
        .filter((o) => o.topic === rep)
        .map(({ offset: _o, ...o }, offset) => ({ ...o, partition: 0, offset }));
      assert.deepEqual(
        down.map((o) => o.key?.toString()),
        ['a', 'a'],
      );
      const second = await exec.runBatch({
        topic: rep,
        partition: 0,
        epoch: 1,
        committedOffset: 0,
        records: down,
      });
      assert.deepEqual(
        second.outputs.filter((o) => o.topic === 'region-updates').map((o) => o.value?.toString()),
        ['1', '2'],
      );
      const a = Buffer.from('a');
      const spaced = exec.storeFor(rep).keys.fence(a);
      assert.equal(spaced, `rf:{${app}@${rep}:a}`, 'the space is named by the topic it reads');
      const plain = exec.store.keys.fence(a);
      assert.equal(plain, `rf:{${app}:a}`, "the first keeps the app's own names");
      // key a in both: each fence hash holds its own topic's offset order and epoch
      const [p1, p2] = [await redis.hgetall(plain), await redis.hgetall(spaced)];
      assert.deepEqual([p1.p, p1.o, p1.e], ['0', '0', '7'], "the input record's");
      assert.deepEqual([p2.p, p2.o, p2.e], ['0', '1', '1'], "the repartition record's");
      // queryable state: the second sub-topology's stores by name, stamped with the repartition record
      const state = new TopologyState(built, { redis });
      const stamp = { topic: rep, partition: 0, offset: 1, epoch: 1 };
      assert.deepEqual(await state.keyValueStore<string, number>('region-updates').get('a'), {
        value: 2,
        timestamp: 2,
        stamp,
      });
      assert.deepEqual(await state.windowStore<string, number>('region-sums').fetch('a', 0, 100), {
        windows: [{ start: 0, end: 20, value: 2, timestamp: 2, final: false }],
        stamp,
      });
      assert.equal((await state.windowStore('per-key').fetch('a', 0, 100)).stamp?.topic, 'in');
      // a newer owner of the repartition partition fences the older one there
      const more = [{ ...(down[1] as ModelInput), offset: 2 }];
      await exec.runBatch({ topic: rep, partition: 0, epoch: 2, committedOffset: 2, records: more });
      await assert.rejects(
        exec.runBatch({
          topic: rep,
          partition: 0,
          epoch: 1,
          committedOffset: 2,
          records: [{ ...more[0], offset: 3 } as ModelInput],
        }),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_TOPOLOGY_FENCED') &&
          (err.details as { newerEpoch: number }).newerEpoch === 2,
      );
    });
  });
}
