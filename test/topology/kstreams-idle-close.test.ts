/**
 * Where redfence differs from Kafka Streams on purpose, pinned: the wall-clock close of idle partitions
 * (`idleCloseMs`; docs/streams.md, "Closing the windows of an idle partition"). A tumbling count with
 * emit final on two partitions whose input stops with each partition's last windows open (their end plus
 * grace beyond the partition's stream time). Kafka Streams (kstreams.ts: the comparison's driver, here
 * kept running on idle after its input, `idleMs`) and TopologyProcessor (exactly-once, `idleCloseMs`)
 * read the same input topic, each with its own group. Computed by hand from the input:
 *
 * - Kafka Streams emits the final result of every window the records closed, and none of the open ones:
 *   stream time moves with records only (a tick it reads is a null-key record its aggregation drops);
 * - TopologyProcessor emits, per key, exactly Kafka Streams' records first (key, window, value,
 *   timestamp and the closing record's headers, record for record), then the final results of that
 *   key's open windows, after its ticks (read back from the input topic: null key, the tick header, the
 *   wall clock, after the partition's last record), without headers.
 *
 * Skipped, saying why, only when there is no Java.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { partitionFor } from '../../src/partitioner/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { TICK_HEADER } from '../../src/topology/tick.js';
import { KAFKA_BROKERS, standalone } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  kafka,
  pollUntil,
  type ReadRecord,
  readToEnd,
} from '../helpers/kafka.js';
import { type KafkaStreamsTopics, readOutput, runKafkaStreams } from './kstreams.js';
import { scenarioTopology } from './scenario-model.js';
import { generateInput, type OutRecord, type Scenario, START_MS as T } from './scenarios.js';

const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
const NO_JAVA = java.error === undefined ? undefined : `no java on PATH (${java.error.message})`;

const SIZE = 10_000;
const GRACE = 2000;
const SCENARIO: Scenario = {
  name: 'idle-tumbling-final',
  window: { kind: 'tumbling', sizeMs: SIZE, graceMs: GRACE },
  aggregate: 'count',
  emit: 'final',
  partitions: 2,
};
/** A minute of records; out of order by at most a second, within the grace: none is late. */
const INPUT = generateInput(3, {
  keys: 6,
  records: 60,
  partitions: SCENARIO.partitions,
  startMs: T,
  spanMs: 60_000,
  outOfOrderFraction: 0.1,
  lateFraction: 0,
  nullKeyFraction: 0.05,
  disorderMs: 1000,
});
/** redfence's idle time before a tick; Kafka Streams runs on idle four times as long. */
const IDLE_CLOSE_MS = 500;
const KS_IDLE_MS = 4 * IDLE_CLOSE_MS;

type Window = { key: string; start: number; n: number; ts: number; closed: boolean };

/** Every window of the input by hand: its count, its largest timestamp, closed by its partition's stream time. */
function windowsByHand(): Window[] {
  const streamTime = new Map<number, number>();
  const windows = new Map<string, Window>();
  for (const r of INPUT) {
    streamTime.set(r.partition, Math.max(streamTime.get(r.partition) ?? -1, r.timestamp));
    if (r.key === null) continue;
    const start = r.timestamp - (r.timestamp % SIZE);
    const w = windows.get(`${r.key}@${start}`) ?? { key: r.key, start, n: 0, ts: r.timestamp, closed: false };
    w.n++;
    w.ts = Math.max(w.ts, r.timestamp);
    windows.set(`${r.key}@${start}`, w);
  }
  for (const w of windows.values())
    w.closed = w.start + SIZE + GRACE <= (streamTime.get(partitionFor(w.key, SCENARIO.partitions)) ?? -1);
  return [...windows.values()].sort((a, b) => a.start - b.start);
}

const byKey = (records: readonly OutRecord[]) => {
  const m = new Map<string, OutRecord[]>();
  for (const r of records) m.set(r.key, [...(m.get(r.key) ?? []), r]);
  return m;
};
const asOut = (w: Window): OutRecord => ({
  key: w.key,
  start: w.start,
  end: w.start + SIZE,
  value: w.n,
  timestamp: w.ts,
});
const bare = ({ headers: _h, ...r }: OutRecord): OutRecord => r;
const tick = (r: ReadRecord) => r.key === null && TICK_HEADER in r.headers;

/**
 * TopologyProcessor with `idleCloseMs` on the run's input topic until every window's final result is
 * in its output and its ticks are committed; returns its outputs and the input topic as read back.
 */
async function runIdleClosing(
  redis: Redis,
  t: KafkaStreamsTopics,
  windows: number,
): Promise<{ outputs: OutRecord[]; input: ReadRecord[] }> {
  const applicationId = `${t.applicationId}-rf`;
  const output = `${applicationId}-out`;
  const keep = { 'retention.ms': '-1' };
  const cleanup = await createTopics([
    { topic: output, partitions: SCENARIO.partitions, config: keep },
    { topic: `${t.input}.DLT`, partitions: 1, config: keep },
  ]);
  // the records' end offsets, taken before any tick (a tick's transaction ends with a marker)
  const records = await endOffsets(t.input);
  const p = new TopologyProcessor({
    topology: scenarioTopology(SCENARIO, { applicationId, input: t.input, output }),
    redis,
    mode: 'exactly-once',
    idleCloseMs: IDLE_CLOSE_MS,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
  });
  try {
    await p.start();
    try {
      await pollUntil('every final result, the open windows too', async () => {
        return (await readToEnd(output)).length >= windows;
      });
      await pollUntil('the records and the ticks committed', async () => {
        const ticks = (await readToEnd(t.input)).filter(tick);
        const at = await committedOffsets(p.groupId, t.input);
        return (
          ticks.length > 0 &&
          [...records].every(([q, end]) => (at.get(q) ?? 0) >= end) &&
          ticks.every((r) => (at.get(r.partition) ?? -1) > Number(r.offset))
        );
      });
    } finally {
      await p.close();
    }
    return { outputs: await readOutput(output, true), input: await readToEnd(t.input) };
  } finally {
    await cleanup();
    const keys = await redis.keys(`rf:{${applicationId}*`);
    if (keys.length > 0) await redis.del(...keys);
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteGroups([applicationId]).catch(() => undefined);
    await admin.disconnect();
  }
}

describe('idleCloseMs against Kafka Streams: the open windows of an idle partition', {
  skip: NO_JAVA,
  timeout: 240_000,
}, () => {
  const windows = windowsByHand();
  const open = windows.filter((w) => !w.closed);
  let redis: Redis | undefined;
  let theirs: OutRecord[] = [];
  let ours: { outputs: OutRecord[]; input: ReadRecord[] } | undefined;
  const startedAt = Date.now();

  before(async () => {
    const client = standalone();
    redis = client;
    const results = await runKafkaStreams([{ scenario: SCENARIO, input: INPUT, idleMs: KS_IDLE_MS }], {
      concurrency: 1,
      headers: true,
      alongside: async ([t]) => {
        ours = await runIdleClosing(client, t as KafkaStreamsTopics, windows.length);
      },
    });
    theirs = results.get(SCENARIO.name) ?? [];
  });
  after(() => redis?.disconnect());

  it('the input leaves windows open on every partition', () => {
    const partitions = new Set(open.map((w) => partitionFor(w.key, SCENARIO.partitions)));
    assert.equal(partitions.size, SCENARIO.partitions, 'open windows on each partition');
    assert.ok(windows.length > open.length, 'and windows the records closed');
  });

  it('Kafka Streams: every window the records closed, none of the open ones, though it ran on idle', (t) => {
    t.diagnostic(`${theirs.length} final results; ${open.length} windows open when the input stopped`);
    assert.deepEqual(
      byKey(theirs.map(bare)),
      byKey(windows.filter((w) => w.closed).map(asOut)),
      'the closed windows, each once, with its count and timestamp',
    );
  });

  it("TopologyProcessor: per key, Kafka Streams' records first, record for record, then the open windows after the ticks", (t) => {
    assert.ok(ours !== undefined);
    const rf = byKey(ours.outputs);
    const ks = byKey(theirs);
    const tails = byKey(open.map(asOut));
    assert.deepEqual([...rf.keys()].sort(), [...new Set([...ks.keys(), ...tails.keys()])].sort());
    for (const [key, records] of rf) {
      const before = ks.get(key) ?? [];
      assert.deepEqual(records.slice(0, before.length), before, `${key}: what Kafka Streams emitted`);
      // closed by a tick: the final results carry no headers (never the tick's)
      assert.deepEqual(records.slice(before.length), tails.get(key) ?? [], `${key}: its open windows`);
    }
    const ticks = ours.input.filter(tick);
    t.diagnostic(`${ours.outputs.length} final results; ${ticks.length} ticks`);
    assert.deepEqual(
      [...new Set(ticks.map((r) => r.partition))].sort(),
      [0, 1],
      'a tick into each idle partition',
    );
    const input = ours.input;
    for (const k of ticks) {
      const records = input.filter((r) => r.partition === k.partition && !tick(r));
      assert.ok(
        records.length > 0 && records.every((r) => Number(r.offset) < Number(k.offset)),
        "a tick after its partition's records",
      );
      assert.ok(Number(k.timestamp) >= startedAt, 'a tick carries the wall clock');
    }
  });
});
