/**
 * The batch executor (src/topology/run/) through a repartition, against real Redis (standalone and
 * Cluster): `groupBy` then a windowed count with grace, on generated input with out-of-order, late and
 * null-keyed records. Each input record runs as its own batch and the records it sends to the
 * repartition topic run at once as batches of that topic (each in its key's murmur2 partition, offsets
 * from 0), which is the order the reference model processes them in: so every output, dead letter
 * (late records downstream of the repartition) and drop equals the model's, in order. Every third batch
 * is run again as a new owner would (the stream time before it, nothing committed): it re-emits the same
 * results.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { partitionFor } from '../../src/partitioner/index.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { TopologyBatch, TopologyBatchResult } from '../../src/topology/run/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { generateInput, START_MS } from './scenarios.js';

const s = serdes.string();
const MIN = 60_000;
const PARTITIONS = 3;

function upperCounts(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, { amount: number }>('in', { key: s })
    .groupBy((k) => (k === null ? null : k.toUpperCase()), { name: 'up', key: s })
    .windowedBy(TimeWindows.ofSizeAndGrace(5 * MIN, MIN))
    .count({ name: 'up-counts' })
    .toStream()
    .map((w, n) => [w.key, { start: w.start, n }] as const)
    .to('out', { key: s });
  return t.build();
}

/** Runs a batch; every third one again as a new owner would, which must give the same result. */
async function run(exec: TopologyExecutor, b: TopologyBatch, replay: boolean): Promise<TopologyBatchResult> {
  const before = exec.streamTime(b.partition, b.topic);
  const first = await exec.runBatch(b);
  if (!replay) return first;
  exec.setStreamTime(b.partition, before, b.topic);
  const again = await exec.runBatch(b);
  assert.deepEqual(again.outputs, first.outputs, 'a replay re-emits the same outputs');
  assert.deepEqual(again.deadLetters, first.deadLetters);
  assert.equal(again.verdicts.APPLY + again.verdicts.REBASE, 0, 'a replay applies nothing');
  return first;
}

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`topology batches through a repartition on ${target.name}`, { timeout: 120_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('outputs, late records and drops equal the model, in order; replays re-emit', async () => {
      const app = uniqueName('trp').replace(/-/g, '_');
      const built = upperCounts(app);
      const rep = `${app}-up-repartition`;
      const generated = generateInput(51, {
        keys: 7,
        records: 400,
        partitions: PARTITIONS,
        startMs: START_MS,
        spanMs: 40 * MIN,
        outOfOrderFraction: 0.2,
        lateFraction: 0.08,
        nullKeyFraction: 0.04,
        disorderMs: 2 * MIN,
        lateByMs: 6 * MIN,
      });
      const next = new Map<string, number>();
      const offset = (topic: string, partition: number) => {
        const k = `${topic}/${partition}`;
        const o = next.get(k) ?? 0;
        next.set(k, o + 1);
        return o;
      };
      const inputs: ModelInput[] = generated.map((r) => ({
        topic: 'in',
        partition: r.partition,
        offset: offset('in', r.partition),
        key: r.key === null ? null : Buffer.from(r.key),
        value: Buffer.from(JSON.stringify({ amount: r.amount })),
        timestamp: r.timestamp,
      }));
      const model = runModel(built, inputs, { partitions: { in: PARTITIONS } });
      assert.ok(
        model.outputs.length > 0 && model.deadLetters.length > 0 && model.dropped.length > 0,
        'late records and null keys',
      );

      next.clear();
      const exec = new TopologyExecutor(built, { redis });
      const got = { outputs: [] as unknown[], deadLetters: [] as unknown[], dropped: [] as unknown[] };
      let n = 0;
      const batch = async (rec: ModelInput): Promise<void> => {
        const b = {
          topic: rec.topic,
          partition: rec.partition,
          epoch: 1,
          committedOffset: -1,
          records: [rec],
        };
        const r = await run(exec, b, n++ % 3 === 2);
        got.deadLetters.push(...r.deadLetters);
        got.dropped.push(...r.dropped);
        for (const { offset: _offset, ...o } of r.outputs) {
          if (o.topic !== rep) {
            got.outputs.push(o);
            continue;
          }
          assert.ok(o.key !== null, 'a repartition record has a key');
          const partition = partitionFor(o.key, PARTITIONS);
          await batch({ ...o, partition, offset: offset(rep, partition) });
        }
      };
      for (const rec of inputs) {
        // the input's offsets as given (the model's); repartition offsets from 0 per partition
        await batch(rec);
      }
      assert.deepEqual(got.outputs, model.outputs, 'outputs');
      assert.deepEqual(got.deadLetters, model.deadLetters, 'late records after the repartition');
      assert.deepEqual(got.dropped, model.dropped, 'null keys dropped at the repartition sink');
      assert.ok(
        model.deadLetters.every((d) => d.source.topic === rep),
        'the late records are the repartition topic records',
      );
    });
  });
}
