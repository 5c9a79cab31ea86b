/**
 * The topology processor's crash points on the real broker and Redis, exactly-once. For each point
 * (after-redis-write, in-transaction, after-commit): instance A (`redfence run examples/fraud.ts` with
 * REDFENCE_CRASH_AT=<point>, REDFENCE_CRASH_AFTER=3, one Kafka step per batch of at most 40 records)
 * SIGKILLs itself the 3rd time it reaches the point, with most of the 400 orders (produced up front)
 * still to process; instance B (no crash variables, another instance id) takes over once A's session
 * expires and finishes. Then:
 * - A died by SIGKILL, mid-stream, having committed at most its first batches (three batches of 40 never
 *   hold the input), and at that point: B re-emits (REEMIT, scraped from its /metrics) what A applied in
 *   Redis without committing -- the whole crashed batch's key records for after-redis-write and
 *   in-transaction (> 0), at most the one batch past the commit for after-commit;
 * - the alerts topic (read_committed) equals the reference model's outputs per key, in order (value and
 *   timestamp), each result once, and the dead-letter topic holds one record per late order;
 * - the group committed the end offsets.
 * in-transaction takes ~10-20 s longer: B cannot read its starting offsets until the broker aborts A's
 * open transaction. The three points run at once; each kills only its own children. `redfence chaos
 * <topology> --crashes` (test/chaos/topology-chaos.test.ts) crashes instances inside grouped steps.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import type { BuiltTopology } from '../../src/index.js';
import type { CrashPoint } from '../../src/processor/crash-points.js';
import { resolveTopologyOptions } from '../../src/processor/topology/options.js';
import { runModel } from '../../src/topology/model.js';
import { freePort, ProcessorChild, takesOverToTheEnd } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, produce, readToEnd } from '../helpers/kafka.js';
import { generateInput, START_MS } from '../topology/scenarios.js';

const PARTITIONS = 3;
const RECORDS = 400;
const BATCH = 40;
const CRASH_AFTER = 3;
const POINTS: CrashPoint[] = ['after-redis-write', 'in-transaction', 'after-commit'];
/** The fraud example's thresholds: many alerts on 400 orders over 5 keys. */
const THRESHOLDS = { FRAUD_MIN_AMOUNT: '60', FRAUD_MIN_COUNT: '2' };
const log = (s: string) => console.log(s);
/** A fresh load of the example for the model (its names and thresholds read when it loads). */
const MODEL_QUERY = 'crash-model';

/** The input, produced to every case's topic: keyed orders with disorder and late ones. */
const INPUT = generateInput(11, {
  keys: 5,
  records: RECORDS,
  partitions: PARTITIONS,
  startMs: START_MS,
  spanMs: 30 * 60_000,
  outOfOrderFraction: 0.15,
  lateFraction: 0.05,
  nullKeyFraction: 0,
  disorderMs: 40_000,
  lateByMs: 8 * 60_000,
});

/** Per key, the alerts as `<value> @<timestamp>`, in order. */
function perKey(rows: { key: string | null; value: string | null; ts: string }[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const r of rows) m.set(r.key ?? '-', [...(m.get(r.key ?? '-') ?? []), `${r.value} @${r.ts}`]);
  return m;
}

const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + Math.max(0, b), 0);

/** `redfence run examples/fraud.ts` on a case's topics, as a child with its own metrics port. */
async function startFraud(
  env: Record<string, string>,
  instance: string,
  crash: Record<string, string>,
): Promise<ProcessorChild> {
  const port = await freePort();
  const args = [
    ...['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/fraud.ts'],
    ...['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--mode', 'exactly-once'],
    ...['--instance', instance, '--metrics-port', String(port), '--session-timeout', '6000'],
    ...['--log', 'info'],
  ];
  return new ProcessorChild(instance, port, args, {
    ...process.env,
    ...env,
    REDFENCE_CRASH_AT: '',
    REDFENCE_CRASH_AFTER: '',
    ...crash,
  });
}

describe('topology processor: crashHook option and REDFENCE_CRASH_AT', () => {
  it('crashHook is a function or nothing; redfence run <topology> refuses a wrong point with exit 2', async () => {
    const built = (await import('../../examples/fraud.js')).default as BuiltTopology;
    const base = { topology: built, redis: { config: () => undefined }, kafka: { brokers: ['127.0.0.1:1'] } };
    assert.equal(resolveTopologyOptions(base as never).crashHook, undefined);
    const hook = () => undefined;
    assert.equal(resolveTopologyOptions({ ...base, crashHook: hook } as never).crashHook, hook);
    assert.throws(
      () => resolveTopologyOptions({ ...base, crashHook: 'after-commit' } as never),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /"crashHook"/.test((e as Error).message),
    );
    const saved = process.env.REDFENCE_CRASH_AT;
    process.env.REDFENCE_CRASH_AT = 'after-everything';
    try {
      const r = await runCli([
        'run',
        'examples/fraud.ts',
        '--brokers',
        '127.0.0.1:1',
        '--redis',
        'redis://127.0.0.1:1',
      ]);
      assert.equal(r.code, 2, r.out + r.err);
      assert.match(r.err, /REDFENCE_CRASH_AT must be one of .*\[RF_INVALID_OPTIONS\]/);
    } finally {
      if (saved === undefined) delete process.env.REDFENCE_CRASH_AT;
      else process.env.REDFENCE_CRASH_AT = saved;
    }
  });
});

describe('topology processor crash points (exactly-once)', { timeout: 240_000, concurrency: 3 }, () => {
  let model: ReturnType<typeof runModel>;
  const redis = new Redis(REDIS_URL);
  before(async () => {
    // the example's topology with the children's thresholds, built once on fixed topic names: the
    // model's outputs are compared per key by value and timestamp, not by topic
    const saved = { ...process.env };
    Object.assign(process.env, THRESHOLDS, {
      ORDERS_TOPIC: 'orders',
      ALERTS_TOPIC: 'alerts',
      FRAUD_APP: 'm',
    });
    const built = (await import(`../../examples/fraud.js?${MODEL_QUERY}`)).default as BuiltTopology;
    for (const k of [...Object.keys(THRESHOLDS), 'ORDERS_TOPIC', 'ALERTS_TOPIC', 'FRAUD_APP'])
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    const next = new Map<number, number>();
    model = runModel(
      built,
      INPUT.map((r) => {
        const offset = next.get(r.partition) ?? 0;
        next.set(r.partition, offset + 1);
        const value = Buffer.from(JSON.stringify({ amount: r.amount }));
        return {
          topic: 'orders',
          partition: r.partition,
          offset,
          key: Buffer.from(r.key as string),
          value,
          timestamp: r.timestamp,
        };
      }),
      { partitions: { orders: PARTITIONS } },
    );
    assert.ok(model.outputs.length > 50 && model.deadLetters.length > 0, 'alerts and late orders');
  });
  after(() => redis.disconnect());

  for (const point of POINTS)
    it(`SIGKILL ${point} (${CRASH_AFTER}rd time); a second instance finishes: the alerts equal the model, each once`, async (t) => {
      const ns = uniqueName(`tcrash-${point}`);
      const env = {
        ...THRESHOLDS,
        ORDERS_TOPIC: `${ns}-orders`,
        ALERTS_TOPIC: `${ns}-alerts`,
        FRAUD_APP: ns,
      };
      // the orders carry event times of 2026-01-01: without retention.ms -1 the broker's retention check
      // deletes them while A or B reads (the consumer then finds its committed offset out of range,
      // resets to the new log start, which is the end, and sits idle)
      const keep = { 'retention.ms': '-1' };
      t.after(
        await createTopics([
          { topic: env.ORDERS_TOPIC, partitions: PARTITIONS, config: keep },
          { topic: env.ALERTS_TOPIC, partitions: PARTITIONS, config: keep },
          { topic: `${env.ORDERS_TOPIC}.DLT`, partitions: 1, config: keep },
        ]),
      );
      const children: ProcessorChild[] = [];
      t.after(async () => {
        await Promise.all(children.map((c) => c.kill()));
        const keys = await redis.keys(`rf:{${ns}:*`);
        if (keys.length > 0) await redis.del(...keys);
      });
      const t0 = Date.now();
      const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
      await produce(
        env.ORDERS_TOPIC,
        INPUT.map((r) => ({
          key: r.key,
          value: JSON.stringify({ amount: r.amount }),
          partition: r.partition,
          timestamp: String(r.timestamp),
        })),
      );
      const ends = await endOffsets(env.ORDERS_TOPIC);
      assert.equal(sum(ends), RECORDS, 'every order written');

      // A: dies by its own SIGKILL the 3rd time it reaches the point; one Kafka step per batch of at most
      // 40 records, so three steps never hold the input
      const a = await startFraud(env, 'A', {
        REDFENCE_CRASH_AT: point,
        REDFENCE_CRASH_AFTER: String(CRASH_AFTER),
        REDFENCE_GROUP_COMMIT_RECORDS: '0',
        REDFENCE_MAX_BATCH_SIZE: String(BATCH),
      });
      children.push(a);
      assert.deepEqual(
        await a.waitExit(60_000),
        { code: null, signal: 'SIGKILL' },
        `A died by SIGKILL ${a.tail()}`,
      );
      assert.ok(
        a.log.seen((l) => l.msg === 'topology processor started'),
        `A started ${a.tail()}`,
      );
      const committed = await committedOffsets(ns, env.ORDERS_TOPIC);
      // one batch per Kafka step: after-commit died after its 3rd commit, in-transaction with its 3rd step
      // open (two committed), after-redis-write with its 3rd batch in Redis (at most two committed; maybe
      // none: the next batch's Redis step overlaps a Kafka step)
      const steps = point === 'after-commit' ? CRASH_AFTER : CRASH_AFTER - 1;
      if (point !== 'after-redis-write')
        assert.ok(sum(committed) > 0, `A committed before dying (${sum(committed)})`);
      assert.ok(
        sum(committed) <= steps * BATCH,
        `A committed at most ${steps} batches (${sum(committed)} records)`,
      );
      log(`[${point} ${at()}] A died by SIGKILL: committed ${sum(committed)} of ${RECORDS}`);

      // B: takes over once A's session expires, and finishes
      const b = await startFraud(env, 'B', {});
      children.push(b);
      const v = await takesOverToTheEnd(b, ns, env.ORDERS_TOPIC, ends);
      log(`[${point} ${at()}] B caught up; verdicts ${JSON.stringify(Object.fromEntries(v))}`);

      // where A died: the crashed batch was applied in Redis and not committed, so B re-emits it; after
      // the commit at most the next batch was (its Redis step overlaps the committed one's Kafka step)
      const reemit = v.get('REEMIT') ?? 0;
      if (point === 'after-commit') assert.ok(reemit <= BATCH, `B re-emitted at most one batch (${reemit})`);
      else assert.ok(reemit > 0, `B re-emitted A's applied, uncommitted batch (${reemit})`);
      assert.equal(v.get('SKIP') ?? 0, 0, 'B consumed nothing below the committed offsets');

      // the alerts (read_committed) are the model's per key, in order, each result once
      const alerts = await readToEnd(env.ALERTS_TOPIC);
      assert.deepEqual(
        perKey(alerts.map((r) => ({ key: r.key, value: r.value, ts: r.timestamp }))),
        perKey(
          model.outputs.map((o) => ({
            key: o.key?.toString() ?? null,
            value: o.value?.toString() ?? null,
            ts: String(o.timestamp),
          })),
        ),
        'alerts per key',
      );
      const seen = new Set<string>();
      for (const r of alerts) {
        const id = `${r.key} ${r.value}`;
        assert.ok(!seen.has(id), `alert ${id} once`);
        seen.add(id);
      }
      const dead = await readToEnd(`${env.ORDERS_TOPIC}.DLT`);
      assert.equal(dead.length, model.deadLetters.length, 'one dead letter per late order');
      log(`[${point} ${at()}] ${alerts.length} alerts as the model's; ${dead.length} dead letters`);
    });
});
