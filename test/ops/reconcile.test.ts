/**
 * `redfence reconcile` on the real broker and Redis: the packaged example processor
 * (examples/customer-totals.ts) runs over generated orders (plus records that are dead-lettered and
 * never touch state); reconcile then finds nothing, finds each injected fault with its kind, finds
 * nothing again once the faults are undone, reports the keys it cannot judge after the start of a
 * partition was deleted (and still finds a deleted key there), and refuses bad input with exit 2.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { Processor, type ProcessorDefinition, partitionFor } from '../../src/index.js';
import { KeySpace } from '../../src/keys/index.js';
import { startProcessorChild } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, type Msg, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';

const PARTITIONS = 4;
const MODULE = new URL('../../examples/customer-totals.ts', import.meta.url).pathname;

interface Anomaly {
  kind: string;
  key: string;
  partition: number;
  offset: number;
  detail: string;
}
interface Report {
  anomalies: Anomaly[];
  cannotJudge: Array<{ key: string; partition: number; reason: string }>;
  records: number;
  storedKeys: number;
  deadLettered: Record<string, number>;
  samples: Array<{ partition: number; storedOffset: number; status: string }>;
  partitions: Array<{ partition: number; committed: number }>;
}

const reconcile = (args: string[]) => runCli(['reconcile', ...args]);

describe('redfence reconcile', { timeout: 240_000 }, () => {
  const ns = uniqueName('rec');
  const store = ns.replace(/-/g, '_');
  const input = `${ns}-orders`;
  const keys = new KeySpace({ store });
  const common = ['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--json'];
  let redis: Redis;
  let cleanup: () => Promise<void> = async () => undefined;
  /** customer -> offsets of its records (partition from murmur2) */
  const offsets = new Map<string, number[]>();
  const amounts = new Map<string, number[]>();
  let tmp = '';

  const run = async (extra: string[] = []) => {
    const r = await reconcile([MODULE, ...common, ...extra]);
    assert.equal(r.err, '', 'nothing on stderr');
    return { code: r.code, report: JSON.parse(r.out) as Report };
  };
  const ofKind = (rep: Report, kind: string) =>
    rep.anomalies.filter((a) => a.kind === kind).map((a) => a.key);

  before(async () => {
    // the example reads its topics and store from the environment, once, when it is first imported
    process.env.ORDERS_TOPIC = input;
    process.env.TOTALS_TOPIC = `${ns}-totals`;
    process.env.TOTALS_STORE = store;
    tmp = mkdtempSync(join(tmpdir(), 'rf-reconcile-'));
    redis = standalone();
    cleanup = await createTopics([
      { topic: input, partitions: PARTITIONS },
      { topic: `${ns}-totals`, partitions: PARTITIONS },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    const gen = customerOrders(600, 24);
    for (const [k, v] of gen.amounts) amounts.set(k, v);
    let wrong = 'w-0';
    for (let i = 0; partitionFor(wrong, PARTITIONS) === 0; i++) wrong = `w-${i}`;
    const poison: Msg[] = [
      { key: 'c-1', value: 'not json{' }, // undecodable
      { key: 'c-2', value: JSON.stringify({ customer: 'c-2', amount: 1.5 }) }, // decode throws
      { key: wrong, value: JSON.stringify({ customer: wrong, amount: 5 }), partition: 0 }, // wrong partition
    ];
    await produce(input, [...gen.messages.slice(0, 300), ...poison, ...gen.messages.slice(300)]);
    const { loadDefinition } = await import('../../src/loader/load.js');
    const definition = (await loadDefinition(MODULE)) as ProcessorDefinition;
    const p = new Processor({
      definition,
      redis,
      mode: 'exactly-once',
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 50 },
    });
    await p.start();
    try {
      await pollUntil('all records processed', () => p.counts().records >= 603, 120_000);
    } finally {
      await p.close();
    }
    for (const r of await readToEnd(input)) {
      if (r.key === null || !amounts.has(r.key) || !r.value?.startsWith('{"customer"')) continue;
      if (!Number.isInteger((JSON.parse(r.value) as { amount: number }).amount)) continue;
      offsets.set(r.key, [...(offsets.get(r.key) ?? []), Number(r.offset)]);
    }
  });
  after(async () => {
    const names = await redis.keys(`rf:{${store}:*`);
    if (names.length > 0) await redis.del(...names);
    await cleanup();
    redis.disconnect();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a clean run: exit 0, no anomaly, every record folded, dead letters counted', async () => {
    const { code, report } = await run(['--sample', '3']);
    assert.deepEqual(report.anomalies, []);
    assert.deepEqual(report.cannotJudge, []);
    assert.equal(code, 0);
    assert.equal(report.records, 603);
    assert.equal(report.storedKeys, 24);
    assert.deepEqual(report.deadLettered, {
      'null-key': 0,
      'wrong-partition': 1,
      undecodable: 2,
      'processing-error': 0,
    });
    assert.equal(report.samples.length, 3);
  });

  it('each injected fault is reported with its kind (exit 1), and none once they are undone', async () => {
    const [lost, doubled, regressed, deleted, stale, epoch, beyond] = [
      'c-3',
      'c-4',
      'c-5',
      'c-6',
      'c-7',
      'c-8',
      'c-9',
    ];
    const saved = new Map<string, Record<string, Buffer>>();
    for (const c of [lost, doubled, regressed, deleted, stale, epoch, beyond])
      saved.set(c, await redis.hgetallBuffer(keys.state(c)));
    const totals = (list: number[]) =>
      JSON.stringify({ total: list.reduce((a, b) => a + b, 0), count: list.length });
    const am = (c: string) => amounts.get(c) as number[];
    const offs = (c: string) => offsets.get(c) as number[];
    // lost write: the value of one record earlier, the fence unchanged
    await redis.hset(keys.state(lost), 'v', totals(am(lost).slice(0, -1)));
    // double apply: the first record counted twice
    await redis.hset(keys.state(doubled), 'v', totals([am(doubled)[0] as number, ...am(doubled)]));
    // the fence moved back to an earlier record of the key
    await redis.hset(keys.state(regressed), 'o', String(offs(regressed).at(-3)));
    await redis.del(keys.state(deleted));
    // a pending output below the committed offset, never pruned
    await redis.hset(keys.state(stale), `#${offs(stale)[0]}`, 'o{}');
    // the key's writer epoch above its partition's epoch (the epoch counter went back)
    await redis.hset(keys.state(epoch), 'e', '9999');
    // the fence beyond the end of the log
    await redis.hset(keys.state(beyond), 'o', '1000000');
    // a key no record produced, its fence inside the log
    await redis.hset(keys.state('ghost'), 'v', '{"total":1,"count":1}', 'p', '0', 'o', '1', 'e', '1');

    const { code, report } = await run();
    assert.equal(code, 1);
    assert.deepEqual(ofKind(report, 'lost-write').sort(), [keys.state(deleted), keys.state(lost)].sort());
    assert.deepEqual(ofKind(report, 'double-apply'), [keys.state(doubled)]);
    assert.deepEqual(ofKind(report, 'fence-regressed'), [keys.state(regressed)]);
    assert.deepEqual(ofKind(report, 'stale-pending'), [keys.state(stale)]);
    assert.deepEqual(ofKind(report, 'epoch-regressed'), [keys.state(epoch)]);
    assert.deepEqual(ofKind(report, 'unexpected-key'), [keys.state('ghost')]);
    assert.deepEqual(ofKind(report, 'fence-invalid'), [keys.state(beyond)]);
    assert.match(report.anomalies.find((a) => a.kind === 'fence-invalid')?.detail ?? '', /beyond the end/);
    assert.equal(report.anomalies.length, 8, JSON.stringify(report.anomalies));
    for (const a of report.anomalies) assert.doesNotMatch(a.detail, /"total"/, 'no value in a detail');

    // the text report: one line per anomaly, starting with its kind
    const text = await reconcile([MODULE, ...common.slice(0, -1)]);
    assert.equal(text.code, 1);
    const lines = text.out.trim().split('\n');
    assert.equal(
      lines.filter((l) =>
        /^(lost-write|double-apply|fence-regressed|stale-pending|epoch-regressed|unexpected-key) rf:/.test(l),
      ).length,
      7,
    );

    await redis.del(keys.state('ghost'));
    for (const [c, h] of saved) {
      await redis.del(keys.state(c));
      await redis.hset(keys.state(c), h);
    }
    const again = await run();
    assert.deepEqual(again.report.anomalies, []);
    assert.equal(again.code, 0);
  });

  it('--repair rewrites each drifted key to its committed fold; a key changed since it was read is left alone', async () => {
    const victims = ['c-10', 'c-11', 'c-12', 'c-13', 'c-14'];
    const saved = new Map<string, string | null>();
    for (const c of victims) saved.set(c, await redis.hget(keys.state(c), 'v'));
    const offs = (c: string) => offsets.get(c) as number[];
    await redis.hset(keys.state('c-10'), 'v', '{"total":1,"count":1}');
    await redis.hset(keys.state('c-11'), 'o', String(offs('c-11').at(-2)));
    await redis.del(keys.state('c-12'));
    await redis.hset(keys.state('c-13'), 'e', '9999', `#${offs('c-13')[0]}`, 'o{}');
    await redis.hset(keys.state('c-14'), 'o', '1000000');
    await redis.hset(keys.state('ghost2'), 'v', '{}', 'p', '1', 'o', '0', 'e', '1');
    const first = await run(['--repair']);
    assert.equal(first.code, 1);
    const repair = (first.report as unknown as { repair: { repaired: string[]; changed: string[] } }).repair;
    assert.deepEqual(repair.repaired.sort(), [...victims, 'ghost2'].map((c) => keys.state(c)).sort());
    assert.deepEqual(repair.changed, []);
    const second = await run();
    assert.deepEqual(second.report.anomalies, []);
    assert.equal(second.code, 0);
    for (const c of victims) {
      assert.equal(await redis.hget(keys.state(c), 'v'), saved.get(c), `value of ${c} restored`);
      const epochOf = await redis.get(keys.epoch(input, partitionFor(c, PARTITIONS)));
      if (c === 'c-13')
        assert.equal(await redis.hget(keys.state(c), 'e'), epochOf, "under the partition's epoch");
    }
    assert.equal(await redis.exists(keys.state('ghost2')), 0);

    // the script writes only if the key is as it was read
    const { applyRepairs } = await import('../../src/ops/reconcile-repair.js');
    const before = await redis.hgetall(keys.state('c-10'));
    const r = await applyRepairs(redis as never, [
      { redisKey: keys.state('c-10'), read: { fence: '0:0:0', valueSha: '-' }, target: null },
    ]);
    assert.deepEqual(r, { repaired: [], changed: [keys.state('c-10')] });
    assert.deepEqual(await redis.hgetall(keys.state('c-10')), before);
  });

  it('--repair leaves a key whose fence is at a record past the committed offset (an owner not committed yet), unless --repair-uncommitted', async () => {
    // a group that never committed: every partition's committed offset is its start, so every key's
    // fence is at one of its records past it, as a running owner's uncommitted writes are
    const c = 'c-15';
    const saved = await redis.hgetall(keys.state(c));
    const drifted = '{"total":1,"count":1}';
    await redis.hset(keys.state(c), 'v', drifted);
    try {
      const group = ['--group', `${uniqueName('nobody')}`];
      const held = await run(['--repair', ...group]);
      assert.equal(held.code, 1);
      const repair = (
        held.report as unknown as {
          repair: { repaired: string[]; skipped: { key: string; reason: string }[] };
        }
      ).repair;
      assert.ok(!repair.repaired.includes(keys.state(c)), 'not rewound');
      assert.match(
        repair.skipped.find((k) => k.key === keys.state(c))?.reason ?? '',
        /past the committed offset 0: written by an owner that has not committed it/,
      );
      assert.equal(await redis.hget(keys.state(c), 'v'), drifted, 'left as it was');
      const bad = await reconcile([MODULE, ...common, '--repair-uncommitted']);
      assert.equal(bad.code, 2);
      assert.match(bad.err, /--repair-uncommitted applies to --repair/);
      // told the processor is stopped: rewound to the fold under the committed offset (none: deleted)
      const told = await run(['--repair', '--repair-uncommitted', ...group]);
      const done = (told.report as unknown as { repair: { repaired: string[] } }).repair;
      assert.ok(done.repaired.includes(keys.state(c)));
      assert.equal(await redis.exists(keys.state(c)), 0);
    } finally {
      await redis.del(keys.state(c));
      await redis.hset(keys.state(c), saved);
    }
    assert.deepEqual((await run()).report.anomalies, []);
  });

  it('after the start of a partition is deleted: its keys cannot be judged (exit 0), a lost key still is found', async () => {
    const on0 = [...offsets.keys()].filter((c) => partitionFor(c, PARTITIONS) === 0);
    assert.ok(on0.length >= 2, 'keys on partition 0');
    const all0 = on0.flatMap((c) => offsets.get(c) as number[]).sort((a, b) => a - b);
    const cut = all0[Math.floor(all0.length / 2)] as number;
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.deleteTopicRecords({ topic: input, partitions: [{ partition: 0, offset: String(cut) }] });
    } finally {
      await admin.disconnect();
    }
    const { code, report } = await run();
    assert.deepEqual(report.anomalies, []);
    assert.equal(code, 0);
    const judged0 = new Set(report.cannotJudge.map((c) => c.key));
    // every key of partition 0 whose records start before the cut, none of the other partitions
    const want = on0
      .filter((c) => ((offsets.get(c) as number[])[0] as number) < cut)
      .map((c) => keys.state(c));
    assert.deepEqual([...judged0].sort(), want.sort());
    assert.ok(report.cannotJudge.every((c) => c.partition === 0));

    // a deleted key that still has records after the cut is a lost write
    const victim = on0.find((c) => ((offsets.get(c) as number[]).at(-1) as number) >= cut) as string;
    const saved = await redis.hgetallBuffer(keys.state(victim));
    await redis.del(keys.state(victim));
    const after = await run();
    assert.equal(after.code, 1);
    assert.deepEqual(ofKind(after.report, 'lost-write'), [keys.state(victim)]);
    await redis.hset(keys.state(victim), saved);
  });

  it('keys applied but not yet committed (a crash after the Redis write) are judged at their own fence: no anomaly', async () => {
    // not on partition 0: its start was deleted above, so its keys cannot be judged, and the batch the
    // child crashes after must be on a partition whose keys can be
    const more = customerOrders(120, 24).messages.filter(
      (m) => partitionFor(m.key as string, PARTITIONS) !== 0,
    );
    await produce(input, more);
    const child = await startProcessorChild({
      orders: input,
      totals: `${ns}-totals`,
      store,
      mode: 'exactly-once',
      group: `redfence-${store}`,
      instance: uniqueName('crash'),
      log: 'warn',
      env: { REDFENCE_CRASH_AT: 'after-redis-write', REDFENCE_CRASH_AFTER: '2' },
    });
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      child.exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.signal('SIGKILL');
          reject(new Error('the child did not reach its crash point within 90 s'));
        }, 90_000);
      }),
    ]).finally(() => clearTimeout(timer));
    assert.equal(exit.signal, 'SIGKILL', 'the child stopped at its crash point');
    const r = await reconcile([MODULE, ...common, '--sample', '100']);
    const report = JSON.parse(r.out) as Report;
    // The crashed instance swept nothing: a key written by a committed batch and not written again
    // keeps its pending entries below the committed offset until the next owner's sweep. Whether the
    // run has such keys depends on how the records were batched; they are stale-pending, nothing else.
    assert.deepEqual(
      report.anomalies.filter((a) => a.kind !== 'stale-pending'),
      [],
    );
    assert.equal(r.code, report.anomalies.length === 0 ? 0 : 1);
    const committed = new Map(report.partitions.map((x) => [x.partition, x.committed]));
    const ahead = report.samples.filter(
      (v) => v.status === 'clean' && v.storedOffset >= (committed.get(v.partition) ?? 0),
    );
    assert.ok(ahead.length > 0, 'some keys are ahead of the committed offset and judged clean');
  });

  it('bad input: exit 2 with one coded line (options and module before any connection)', async () => {
    const missing = await reconcile(['--redis', REDIS_URL]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /^redfence reconcile: missing <module>.*\[RF_INVALID_OPTIONS\]\n$/);
    const badOption = await reconcile([MODULE, '--sample', '-1']);
    assert.equal(badOption.code, 2);
    assert.match(badOption.err, /--sample.*\[RF_INVALID_OPTIONS\]/);
    const noFile = await reconcile([join(tmp, 'nope.mjs')]);
    assert.equal(noFile.code, 2);
    assert.match(noFile.err, /no such file \[RF_MODULE_INVALID\]/);
    const other = join(tmp, 'missing-topic.mjs');
    writeFileSync(
      other,
      `export default { input: '${ns}-absent', output: '${ns}-x', store: 's', reduce: (s) => ({ state: s }) };\n`,
    );
    const noTopic = await reconcile([other, ...common]);
    assert.equal(noTopic.code, 2);
    assert.match(noTopic.err, /does not exist \[RF_TOPIC_MISSING\]/);
    const badPartition = await reconcile([MODULE, ...common, '--partitions', '9']);
    assert.equal(badPartition.code, 2);
    assert.match(badPartition.err, /no partition 9 \(it has 4\) \[RF_INVALID_OPTIONS\]/);
  });
});
