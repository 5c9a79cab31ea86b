/**
 * The staged topology verdict without services (src/chaos/topology-stages.ts): a groupBy + count
 * (test/chaos/fixtures/regroup-count.ts) over generated input on two partitions, its repartition topic
 * made from the model's stage-1 records interleaved in an order of the test's (not the model's), and its
 * outputs from an oracle of the test's own (a count per band, over the repartition partitions in that
 * order). That run passes; a missing, a repeated or a wrong output downstream of the repartition topic,
 * a repartition record missing, repeated or out of its task's order, a short commit on a repartition
 * partition and a reader that fell behind the purge are each caught and named. At-least-once accepts a
 * replay's repeated repartition records when the downstream outputs follow them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReadMessage } from '../../src/chaos/kafka.js';
import { kafkaPartition } from '../../src/chaos/murmur2.js';
import { chaosTopics, onChaosTopics, topologyInput } from '../../src/chaos/topology-module.js';
import { repartitionCounts, runStaged, tasksOf } from '../../src/chaos/topology-stages.js';
import { judgeTopologyRun, type TopologyVerdictInput } from '../../src/chaos/topology-verdict.js';
import type { ModelInput } from '../../src/topology/model.js';
import { regroupCount } from './fixtures/regroup-count.js';

const built = onChaosTopics(regroupCount(false), chaosTopics(regroupCount(false), 'in', 'out'), 'chaos_app');
const REP = 'chaos_app-by-band-repartition';

/** The default input on 2 partitions (by key), as read back. */
function input(n: number): ModelInput[] {
  const offsets = [0, 0];
  return topologyInput({ path: 'x', built }, 11, n)
    .map((r) => {
      const partition = kafkaPartition(r.key ?? Buffer.alloc(0), 2);
      const offset = offsets[partition] ?? 0;
      offsets[partition] = offset + 1;
      return { topic: 'in', partition, offset, key: r.key, value: r.value, timestamp: r.timestamp ?? 0 };
    })
    .sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}

const read = (
  partition: number,
  offset: number,
  key: Buffer | null,
  value: Buffer | null,
  ts: number,
): ReadMessage => ({
  partition,
  offset,
  timestamp: ts,
  key,
  value,
  headers: new Map(),
});

/**
 * The repartition topic as a run could leave it: each partition gets the two input tasks' records in
 * runs of `chunk` (task 1's first, unlike the model, which takes task 0's first), each task's in order.
 */
function repartition(records: ModelInput[], chunk: number): ReadMessage[] {
  const staged = runStaged(built, tasksOf(records));
  const out: ReadMessage[] = [];
  for (let q = 0; q < 2; q++) {
    const of = (task: string) =>
      staged.repartition.filter((o) => o.task === task && kafkaPartition(o.key as Buffer, 2) === q);
    const [a, b] = [of('in/1'), of('in/0')];
    let offset = 0;
    for (let i = 0; i < Math.max(a.length, b.length); i += chunk)
      for (const o of [...a.slice(i, i + chunk), ...b.slice(i, i + chunk)])
        out.push(read(q, offset++, o.key, o.value, o.timestamp));
  }
  return out;
}

/**
 * The test's own oracle of the downstream count: per band, 1, 2, 3... in each partition's order, each
 * stamped with the largest timestamp of the band's records so far (an aggregate's, as Kafka Streams').
 */
function counted(rep: readonly ReadMessage[]): ReadMessage[] {
  const counts = new Map<string, { n: number; ts: number }>();
  return rep.map((m, i) => {
    const band = m.key?.toString() ?? '';
    const was = counts.get(band) ?? { n: 0, ts: -1 };
    const now = { n: was.n + 1, ts: Math.max(was.ts, m.timestamp) };
    counts.set(band, now);
    return read(0, i, m.key, Buffer.from(JSON.stringify({ band, count: now.n })), now.ts);
  });
}

function judge(
  records: ModelInput[],
  rep: ReadMessage[],
  outputs: ReadMessage[],
  o: { mode?: TopologyVerdictInput['mode']; committed?: Map<number, number>; failures?: string[] } = {},
) {
  const ends = new Map([0, 1].map((p) => [p, records.filter((r) => r.partition === p).length]));
  const repEnds = new Map([0, 1].map((q) => [q, rep.filter((m) => m.partition === q).length]));
  return judgeTopologyRun({
    mode: o.mode ?? 'exactly-once',
    built,
    produced: records.length,
    input: records,
    outputs: new Map([['out', outputs]]),
    deadLetters: [],
    offsets: new Map([['in', { committed: ends, ends }]]),
    repartition: {
      counts: new Map([[REP, 2]]),
      records: new Map([[REP, rep]]),
      committed: new Map([[REP, o.committed ?? repEnds]]),
      purged: 0,
      failures: o.failures ?? [],
    },
  });
}

const total = (r: ReturnType<typeof judge>) => [...r.counts.values()].reduce((a, b) => a + b, 0);
const band = (m: ReadMessage | undefined) => m?.key?.toString() ?? '';

describe('the staged topology verdict (a repartition topic)', () => {
  const records = input(2000);
  const rep = repartition(records, 7);
  const outputs = counted(rep);

  it('renames the repartition topic to the run applicationId and counts its partitions', () => {
    assert.deepEqual(built.repartitionTopics, [REP]);
    assert.deepEqual([...repartitionCounts(built, 2)], [[REP, 2]]);
    assert.equal(rep.length, records.length);
  });

  it("an interleaving that is not the model's passes when the outputs follow it", () => {
    const r = judge(records, rep, outputs);
    assert.equal(total(r), 0, JSON.stringify(r.differences));
    assert.equal(r.repartitionRecords, 2000);
    assert.equal(r.modelRepartitionRecords, 2000);
    assert.equal(r.outputRecords, 2000);
    assert.equal(r.modelOutputs, 2000);
    assert.equal(r.keysUnordered, 0);
    // and the outputs of another interleaving are not this run's (the order the run took decides them)
    const other = judge(records, rep, counted(repartition(records, 3)));
    assert.ok((other.counts.get('output') ?? 0) > 0);
  });

  it('a missing, a repeated or a wrong output downstream of the repartition is a difference naming its key', () => {
    const missing = judge(
      records,
      rep,
      outputs.filter((_, i) => i !== 500),
    );
    assert.equal(missing.counts.get('output'), 1, JSON.stringify(missing.differences));
    assert.match(
      missing.differences[0]?.message ?? '',
      new RegExp(`^out key ${band(outputs[500])}: \\d+ outputs, the model \\d+; first difference at #\\d+`),
    );
    const repeated = judge(records, rep, [
      ...outputs.slice(0, 501),
      outputs[500] as ReadMessage,
      ...outputs.slice(501),
    ]);
    assert.equal(repeated.counts.get('output'), 1);
    const wrong = judge(
      records,
      rep,
      outputs.map((m, i) =>
        i === 900 ? { ...m, value: Buffer.from(JSON.stringify({ band: band(m), count: 0 })) } : m,
      ),
    );
    assert.equal(wrong.counts.get('output'), 1);
    assert.match(wrong.differences[0]?.message ?? '', new RegExp(`^out key ${band(outputs[900])}:`));
    for (const r of [missing, repeated, wrong]) assert.equal(r.counts.get('repartition') ?? 0, 0);
  });

  it("a repartition record missing, repeated or out of its task's order is a repartition difference", () => {
    // the outputs follow what the repartition topic holds, so only the stage before it is wrong
    const dropped = rep.filter((_, i) => i !== 10);
    const d = judge(records, dropped, counted(dropped));
    assert.equal(d.counts.get('repartition'), 1, JSON.stringify(d.differences));
    assert.match(
      d.differences[0]?.message ?? '',
      /^chaos_app-by-band-repartition\/\d: \d+ records, the model \d+; 1 model records missing \(first/,
    );
    const twice = [...rep.slice(0, 11), rep[10] as ReadMessage, ...rep.slice(11)];
    const t = judge(records, twice, counted(twice));
    assert.equal(t.counts.get('repartition'), 1);
    assert.match(t.differences[0]?.message ?? '', /; 1 records not the model's or repeated \(first/);
    // two records of one task swapped (each task's records come in its order)
    const swapped = [...rep];
    [swapped[2], swapped[3]] = [swapped[3] as ReadMessage, swapped[2] as ReadMessage];
    const s = judge(records, swapped, counted(swapped));
    assert.equal(s.counts.get('repartition'), 1, JSON.stringify(s.differences));
    assert.match(s.differences[0]?.message ?? '', /; record #2 is out of its task's order \(b-/);
  });

  it('at-least-once: a replay repeats repartition records and their downstream counts; that passes', () => {
    const replayed = [...rep.slice(0, 40), ...rep.slice(20, 40), ...rep.slice(40)];
    const q0 = replayed.filter((m) => m.partition === 0).map((m, i) => ({ ...m, offset: i }));
    const q1 = replayed.filter((m) => m.partition === 1).map((m, i) => ({ ...m, offset: i }));
    const r = judge(records, [...q0, ...q1], counted([...q0, ...q1]), { mode: 'at-least-once' });
    assert.equal(total(r), 0, JSON.stringify(r.differences));
    assert.equal(r.repartitionDuplicates, 20);
    // exactly-once refuses the same repeats
    const eos = judge(records, [...q0, ...q1], counted([...q0, ...q1]));
    assert.ok((eos.counts.get('repartition') ?? 0) > 0);
  });

  it('a repartition partition committed short, and a reader that fell behind the purge, fail the run', () => {
    const short = judge(records, rep, outputs, { committed: new Map([[0, 3]]) });
    assert.equal(short.counts.get('offsets'), 2, JSON.stringify(short.differences));
    assert.match(
      short.differences[0]?.message ?? '',
      /^repartition partition chaos_app-by-band-repartition\/0: committed 3/,
    );
    const behind = judge(records, rep, outputs, { failures: ['a partition fell behind the purge'] });
    assert.equal(behind.counts.get('repartition'), 1);
  });
});
