/**
 * The topology chaos verdict without services: the windowed count of test/chaos/fixtures/windowed-count.ts
 * over generated input, its run's outputs made from the model's and then broken on purpose. Exactly-once
 * accepts only the model's sequence per key; at-least-once accepts whole replays and refuses a dropped
 * output and a double-applied record (counts the model never gives); dead letters and commits are checked.
 * The topology on the run's topics keeps every node and renames only topics and the applicationId.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReadMessage } from '../../src/chaos/kafka.js';
import { chaosTopics, onChaosTopics, topologyInput } from '../../src/chaos/topology-module.js';
import { judgeTopologyRun, type TopologyVerdictInput } from '../../src/chaos/topology-verdict.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { TICK_HEADER } from '../../src/topology/tick.js';
import idleWindows from './fixtures/idle-windows.js';
import { windowedCount } from './fixtures/windowed-count.js';

const built = onChaosTopics(
  windowedCount(false),
  chaosTopics(windowedCount(false), 'in', 'out'),
  'chaos_app',
);

/** The default input on 2 partitions (by key), as read back. */
function input(n: number): ModelInput[] {
  const records = topologyInput({ path: 'x', built }, 9, n);
  const offsets = [0, 0];
  return records
    .map((r) => {
      const partition = (r.key?.[r.key.length - 2] ?? 0) % 2;
      const offset = offsets[partition] ?? 0;
      offsets[partition] = offset + 1;
      return { topic: 'in', partition, offset, key: r.key, value: r.value, timestamp: r.timestamp ?? 0 };
    })
    .sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}

/** The dead-letter headers' encodings (a 4-byte partition, an 8-byte offset: big-endian). */
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const int64 = (n: number) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(n));
  return b;
};

const msg = (
  o: { key: Buffer | null; value: Buffer | null; timestamp: number },
  offset: number,
): ReadMessage => ({
  partition: 0,
  offset,
  timestamp: o.timestamp,
  key: o.key,
  value: o.value,
  headers: new Map(),
});

function run(records: ModelInput[], mode: TopologyVerdictInput['mode'], edit?: (out: ReadMessage[]) => void) {
  const outputs: ReadMessage[] = [];
  const deadLetters: ReadMessage[] = [];
  for (const p of [0, 1]) {
    const m = runModel(
      built,
      records.filter((r) => r.partition === p),
    );
    outputs.push(...m.outputs.map((o, i) => msg(o, i)));
    for (const d of m.deadLetters)
      deadLetters.push({
        ...msg({ key: null, value: null, timestamp: 0 }, 0),
        headers: new Map([
          ['kafka_dlt-original-topic', [Buffer.from('in')]],
          ['kafka_dlt-original-partition', [int32(d.source.partition)]],
          ['kafka_dlt-original-offset', [int64(d.source.offset)]],
          ['redfence-reason', [Buffer.from('late')]],
        ]),
      });
  }
  edit?.(outputs);
  const ends = new Map([0, 1].map((p) => [p, records.filter((r) => r.partition === p).length]));
  return judgeTopologyRun({
    mode,
    built,
    produced: records.length,
    input: records,
    outputs: new Map([['out', outputs]]),
    deadLetters,
    offsets: new Map([['in', { committed: ends, ends }]]),
  });
}

const total = (r: ReturnType<typeof run>) => [...r.counts.values()].reduce((a, b) => a + b, 0);

describe('the topology chaos verdict', () => {
  const records = input(3000);

  it('renames only topics and the applicationId', () => {
    const source = built.nodes.find((n) => n.kind === 'source');
    const sink = built.nodes.find((n) => n.kind === 'sink');
    assert.deepEqual(source?.kind === 'source' ? source.topics : null, ['in']);
    assert.equal(sink?.kind === 'sink' ? sink.topic : null, 'out');
    assert.equal(built.applicationId, 'chaos_app');
    assert.equal(built.nodes.length, windowedCount(false).nodes.length);
    assert.ok(Object.isFrozen(built));
  });

  it('the model itself passes in both modes, with late records dead-lettered', () => {
    for (const mode of ['exactly-once', 'at-least-once'] as const) {
      const r = run(records, mode);
      assert.equal(total(r), 0, JSON.stringify(r.differences));
      assert.ok(r.modelOutputs > 2000, `${r.modelOutputs} outputs`);
      assert.ok(r.modelDeadLetters > 0, 'the default input has late records');
      assert.equal(r.keysUnordered, 0);
    }
  });

  it('exactly-once: a dropped, a repeated or a reordered output is a difference naming its key', () => {
    const dropped = run(records, 'exactly-once', (out) => out.splice(100, 1));
    assert.equal(dropped.counts.get('output'), 1);
    assert.match(
      dropped.differences[0]?.message ?? '',
      /^out key "k-\d+": \d+ outputs, the model \d+; first difference at #\d+/,
    );
    const repeated = run(records, 'exactly-once', (out) => out.splice(100, 0, out[100] as ReadMessage));
    assert.equal(repeated.counts.get('output'), 1);
    const swapped = run(records, 'exactly-once', (out) => {
      const key = out[100]?.key?.toString();
      const next = out.findIndex((o, i) => i > 100 && o.key?.toString() === key);
      [out[100], out[next]] = [out[next] as ReadMessage, out[100] as ReadMessage];
    });
    assert.equal(swapped.counts.get('output'), 1);
  });

  it('at-least-once: a whole replay passes; a dropped output and a double apply do not', () => {
    const replayed = run(records, 'at-least-once', (out) => out.splice(400, 0, ...out.slice(300, 400)));
    assert.equal(total(replayed), 0, JSON.stringify(replayed.differences));
    assert.equal(replayed.duplicateOutputs, 100);
    assert.ok(replayed.replays > 0);
    const dropped = run(records, 'at-least-once', (out) => out.splice(100, 1));
    assert.equal(dropped.counts.get('output'), 1);
    assert.match(dropped.differences[0]?.message ?? '', /1 model outputs missing/);
    // a record applied twice: its window's later counts are one too high (a count the model never gives)
    const doubled = run(records, 'at-least-once', (out) => {
      const key = out[50]?.key?.toString();
      for (const o of out.slice(50))
        if (o.key?.toString() === key) {
          const v = JSON.parse(o.value?.toString() ?? '{}') as { count: number };
          o.value = Buffer.from(JSON.stringify({ ...v, count: v.count + 1 }));
        }
    });
    assert.equal(doubled.counts.get('output'), 1);
    assert.match(doubled.differences[0]?.message ?? '', /outputs not the model's/);
  });

  it('a missing dead letter, a short commit and a short input are differences', () => {
    const r = judgeTopologyRun({
      mode: 'exactly-once',
      built,
      produced: records.length + 1,
      input: records,
      outputs: new Map([['out', []]]),
      deadLetters: [],
      offsets: new Map([
        [
          'in',
          {
            committed: new Map([[0, 1]]),
            ends: new Map([
              [0, 2],
              [1, 0],
            ]),
          },
        ],
      ]),
    });
    assert.equal(r.counts.get('input'), 1);
    assert.equal(r.counts.get('offsets'), 1);
    assert.ok((r.counts.get('dead-letter') ?? 0) > 0);
    assert.ok((r.counts.get('output') ?? 0) > 0);
  });

  it('ticks are records: the final results they close are judged; a tick past the committed offset is left out', () => {
    const idle = onChaosTopics(idleWindows, chaosTopics(idleWindows, 'in', 'out'), 'chaos_idle');
    const at = (offset: number, key: string | null, timestamp: number): ModelInput => ({
      topic: 'in',
      partition: 0,
      offset,
      key: key === null ? null : Buffer.from(key),
      value: key === null ? Buffer.alloc(0) : Buffer.from('{"amount":1}'),
      timestamp,
      ...(key === null ? { headers: { [TICK_HEADER]: 'i0' } } : {}),
    });
    // two records in [0, 1000), a tick (its transaction's marker at 3) that closes it, a record in
    // [5000, 6000), and a tick past the committed offset: taken, it would close that window too
    const read = [at(0, 'a', 100), at(1, 'a', 200), at(2, null, 5000), at(4, 'b', 5100), at(6, null, 9000)];
    const final = runModel(idle, read.slice(0, 3)).outputs;
    assert.equal(final.length, 1, 'the tick closes the window');
    const judged = (outputs: ReadMessage[]) =>
      judgeTopologyRun({
        mode: 'exactly-once',
        built: idle,
        produced: 3,
        input: read,
        outputs: new Map([['out', outputs]]),
        deadLetters: [],
        offsets: new Map([['in', { committed: new Map([[0, 5]]), ends: new Map([[0, 8]]) }]]),
      });
    const r = judged(final.map((o, i) => msg(o, i)));
    assert.equal(total(r), 0, JSON.stringify(r.differences));
    assert.deepEqual([r.inputRecords, r.ticks, r.ticksUnread, r.tickOutputs], [3, 2, 1, 1]);
    assert.equal(r.committed, 5, 'committed past the last record taken, short of the end offset');
    const missing = judged([]);
    assert.equal(missing.counts.get('output'), 1, 'the final result a tick closes is missing');
  });
});
