/**
 * A topology reading several input topics, on the real broker and Redis: a source reading a list of two
 * topics merged with a source reading a third, each record's amount to `amounts` (stateless: the
 * sub-topology reads all three topics), and the merged stream given one topic by `repartition()` before
 * a windowed count (an aggregation reads one offset order: planTopology refuses it without the
 * repartition, test/topology/run-refusals.test.ts). The generated input's keys are spread over the three
 * topics (each key in one topic, so its records have one order in both the model and the runtime); the
 * grace is longer than the input's span, so no record is late and the repartition partitions' stream
 * times, which interleave several inputs, decide nothing. What the output topics hold (read_committed)
 * must equal the reference model's outputs per topic and key, every input and repartition record
 * committed once; then a missing input is RF_TOPIC_MISSING naming it before anything is consumed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, readToEnd, waitCommitted } from '../helpers/kafka.js';

import { assertOutputsPerKey, overTopics, produceTopic, waitReadPast } from './topology-helpers.js';

const s = serdes.string();
const MIN = 60_000;
const PARTITIONS = 3;

const inputsOf = (ns: string) => [`${ns}-web`, `${ns}-app`, `${ns}-store`];

/** Orders from three channels: their amounts, and a 5-minute count per customer across channels. */
function channels(ns: string): BuiltTopology {
  const [web, app, shop] = inputsOf(ns) as [string, string, string];
  const t = topology({ applicationId: ns });
  const online = t.stream<string, { amount: number }>([web, app], { key: s });
  const all = online.merge(t.stream<string, { amount: number }>(shop, { key: s }));
  all.mapValues((o) => o?.amount ?? null).to(`${ns}-amounts`, { key: s });
  all
    .repartition({ name: 'merged', key: s })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(5 * MIN, 120 * MIN))
    .count({ name: 'channel-counts' })
    .toStream()
    .map((w, n) => [w.key, { start: w.start, end: w.end, n }] as const)
    .to(`${ns}-counts`, { key: s });
  return t.build();
}

describe('topology processor: several input topics', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('a list source merged with another: outputs equal the model per topic and key, every record committed once', async () => {
    const ns = uniqueName('tpin');
    const inputs = inputsOf(ns);
    const outputs = [`${ns}-amounts`, `${ns}-counts`];
    const repartition = `${ns}-merged-repartition`;
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      ...[...inputs, ...outputs].map((topic) => ({ topic, partitions: PARTITIONS, config: keep })),
      { topic: `${inputs[0]}.DLT`, partitions: 1, config: keep },
    ]);
    try {
      const built = channels(ns);
      // key k<i> lives in input i % 3, in the partition the generator gave it
      const records = overTopics(51, 450, inputs);
      for (const topic of inputs)
        assert.ok(records.filter((r) => r.topic === topic).length > 50, `${topic} gets records`);
      const model = runModel(built, records, {
        partitions: Object.fromEntries(inputs.map((t) => [t, PARTITIONS])),
      });
      assert.equal(model.deadLetters.length, 0, 'no record is late');
      assert.ok(model.outputs.filter((o) => o.topic === `${ns}-counts`).length > 50, 'counts are emitted');
      for (const topic of inputs) await produceTopic(topic, records);

      const p = new TopologyProcessor({
        topology: built,
        redis,
        mode: 'exactly-once',
        createTopics: true,
        repartitionPurgeIntervalMs: 60 * MIN,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
      });
      assert.deepEqual(built.repartitionTopics, [repartition]);
      await p.start();
      try {
        assert.equal(p.deadLetterTopic, `${inputs[0]}.DLT`, 'dead letters follow the first input');
        for (const topic of inputs) await waitCommitted(p.groupId, topic, 120_000);
        const rows = await readToEnd(repartition);
        assert.equal(rows.length, records.length, 'each input record is in the repartition topic once');
        await waitReadPast(p.groupId, repartition);
      } finally {
        await p.close();
      }
      assert.equal(
        p.counts().records,
        2 * records.length,
        'every input and repartition record committed once',
      );
      await assertOutputsPerKey(outputs, model);
    } finally {
      await cleanup();
    }
  });

  it('a missing input is RF_TOPIC_MISSING naming it, before anything is consumed', async () => {
    const ns = uniqueName('tpim');
    const inputs = inputsOf(ns);
    const cleanup = await createTopics([
      { topic: inputs[0] as string, partitions: PARTITIONS },
      { topic: inputs[2] as string, partitions: PARTITIONS },
    ]);
    try {
      const p = new TopologyProcessor({
        topology: channels(ns),
        redis,
        createTopics: true,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      });
      await assert.rejects(
        p.start(),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_TOPIC_MISSING') &&
          err.message.includes(`input topic ${inputs[1]} does not exist`) &&
          !err.message.includes(inputs[0] as string),
      );
      await p.close();
    } finally {
      await cleanup();
    }
  });
});
