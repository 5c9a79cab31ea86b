/**
 * The chaos harness, short: both modes at once (each with its own topics and its own redis-server), every
 * crash point of the mode once, two random SIGKILLs, one zombie, one Redis restart, scaling 1 -> 3 -> 2,
 * poison (orders the reducer refuses among it) and two ~1 MB orders mixed in; the verifier must find
 * nothing. Plus checks that need no
 * services: the schedule and workload are functions of the seed, the verifier's murmur2 matches Kafka's
 * vectors, bad CLI options are named, and the verifier does catch broken results.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import {
  type Fault,
  type FaultOutcome,
  formatFaults,
  formatReport,
  judge,
  makeSchedule,
  pointsFor,
  runChaos,
  verify,
} from '../../src/chaos/index.js';
import { ChaosKafka } from '../../src/chaos/kafka.js';
import { kafkaMurmur2, kafkaPartition } from '../../src/chaos/murmur2.js';
import { productionLimit } from '../../src/chaos/run-steps.js';
import { EXPECTED_REASON, POISON_KINDS, Workload } from '../../src/chaos/workload.js';
import { parseChaosArgs } from '../../src/cli/chaos.js';
import { RedisServer } from '../../src/harness/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';

const brokers = KAFKA_BROKERS.split(',');

describe('chaos harness without services', () => {
  it('the schedule and the workload are functions of the seed', () => {
    const o = {
      seed: 7,
      mode: 'exactly-once' as const,
      kills: 5,
      crashes: 3,
      zombies: 1,
      redisRestarts: 1,
      redisFailovers: 0,
      scale: [1, 3, 2],
    };
    assert.deepEqual(makeSchedule(o), makeSchedule(o));
    assert.notDeepEqual(makeSchedule(o), makeSchedule({ ...o, seed: 8 }));
    const points = makeSchedule(o)
      .filter((f) => f.kind === 'crash')
      .map((f) => f.point)
      .sort();
    assert.deepEqual(points, [...pointsFor('exactly-once')].sort(), 'every crash point once');
    const scale = makeSchedule(o).filter((f) => f.kind === 'scale');
    assert.deepEqual(
      scale.map((f) => f.to),
      [3, 2],
      'scale steps in order',
    );
    const w = { seed: 7, records: 2000, customers: 50, partitions: 6, poisonRate: 0.05, large: 0, skew: 1.1 };
    const a = new Workload(w);
    const b = new Workload(w);
    for (let i = 0; i < 2000; i++) assert.deepEqual(a.next(), b.next());
    for (const kind of POISON_KINDS) assert.ok((a.counts.get(kind) ?? 0) > 0, `${kind} in the workload`);
    assert.equal(EXPECTED_REASON.refused, 'processing-error');
  });

  it("the verifier's murmur2 is Kafka's", () => {
    const vectors: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [s, h] of vectors) assert.equal(kafkaMurmur2(Buffer.from(s)), h, s);
    assert.equal(kafkaPartition('foobar', 6), (-790332482 & 0x7fffffff) % 6);
  });

  it('the input slows down while a fault is overdue, and only then', () => {
    const start = 1_000_000;
    const window = 100_000;
    // on time (the next fault due later than now): the feeder's own pace
    assert.equal(productionLimit(9000, window, start, start + 50_000, start + 20_000), 1800);
    // a fault due at 30% has not started at 60%: the clock ran at a quarter since 30%
    assert.equal(productionLimit(9000, window, start, start + 30_000, start + 60_000), 3375);
    assert.ok(
      productionLimit(9000, window, start, start + 30_000, start + 90_000) > 3375,
      'it never stops: a running fault still gets records',
    );
    // no fault left: the wall clock's pace again, and everything at the end
    assert.equal(productionLimit(9000, window, start, Number.POSITIVE_INFINITY, start + 50_000), 4500);
    assert.equal(productionLimit(9000, window, start, Number.POSITIVE_INFINITY, start + 120_000), 9000);
  });

  it('bad options are named', () => {
    assert.throws(() => parseChaosArgs(['--records', 'ten']), /--records must be an integer/);
    assert.throws(() => parseChaosArgs(['--mode', 'twice']), /--mode must be/);
    assert.throws(
      () => parseChaosArgs(['--points', 'after-lunch']),
      /--points: unknown crash point "after-lunch"/,
    );
    assert.throws(() => parseChaosArgs(['--frobnicate', '1']), /unknown option --frobnicate/);
    assert.throws(() => parseChaosArgs(['--kills']), /--kills needs a value/);
    assert.throws(() => parseChaosArgs(['--redis-topology', 'ring']), /--redis-topology must be/);
    assert.throws(
      () => parseChaosArgs(['--wait-timeout', '100']),
      /--wait-timeout applies to --wait-replicas/,
    );
    const failover = parseChaosArgs([
      '--redis-topology',
      'cluster',
      '--wait-replicas',
      '1',
      '--replica-lag',
      '500',
    ]);
    assert.equal(failover.options.redisTopology, 'cluster');
    assert.equal(failover.options.waitReplicas, 1);
    assert.equal(failover.options.replicaLagMs, 500);
    // WAIT for more replicas than the harness's Redis has: never met, refused before any connection
    assert.throws(
      () => parseChaosArgs(['--wait-replicas', '1']),
      /--wait-replicas 1: --redis-topology standalone without --redis-failovers starts no replica/,
    );
    assert.throws(
      () => parseChaosArgs(['--wait-replicas', '2', '--redis-topology', 'cluster']),
      /--wait-replicas 2: the harness starts one replica per master \(--redis-topology cluster\)/,
    );
    assert.equal(parseChaosArgs(['--wait-replicas', '1', '--redis-failovers', '1']).options.waitReplicas, 1);
    assert.deepEqual(parseChaosArgs(['--mode', 'both', '--scale', '1,3,2']).modes, [
      'exactly-once',
      'at-least-once',
    ]);
  });
});

describe('the verdict fails a run whose faults did not do what they were meant to', () => {
  const at = (kind: Fault['kind'], index: number, extra: Partial<Fault> = {}): Fault => ({
    index,
    kind,
    at: 0.1 * (index + 1),
    pick: 0,
    pauseMs: 0,
    ...extra,
  });
  const outcome = (fault: Fault, facts: FaultOutcome['facts']): FaultOutcome => ({
    fault,
    outcome: '-',
    facts,
    startedAt: 0,
    tookMs: 0,
  });
  const killed = { exit: { code: null, signal: 'SIGKILL' as const }, restarted: true };
  const clean = {
    schedule: [
      at('kill', 0),
      at('crash', 1, { point: 'after-commit', after: 1 }),
      at('zombie', 2),
      at('redis-restart', 3),
      at('scale', 4, { to: 3 }),
    ],
    unexpectedExits: [],
    harnessErrors: [],
    verify: { violations: [] },
  };
  const faults = (): FaultOutcome[] => [
    outcome(clean.schedule[0] as Fault, killed),
    outcome(clean.schedule[1] as Fault, killed),
    outcome(clean.schedule[2] as Fault, { partitionsMoved: true, woke: 'fenced' }),
    outcome(clean.schedule[3] as Fault, { serverKilled: true, serverBack: true, paused: 1, resumed: 1 }),
    outcome(clean.schedule[4] as Fault, { instances: 3, stoppedCleanly: true }),
  ];

  it('a run whose every fault did its work, with no unexpected exit and no violation, is OK', () => {
    assert.deepEqual(judge({ ...clean, faults: faults() }), []);
  });

  it('a fault that did nothing, or a scheduled fault that never ran, fails the run', () => {
    const cases: Array<[number, FaultOutcome['facts'], RegExp]> = [
      [0, { exit: { code: 0, signal: null } }, /#0 kill: the target did not die of the SIGKILL/],
      [1, { restarted: true }, /#1 crash: crash point after-commit not reached/],
      [1, { exit: { code: 1, signal: null }, restarted: true }, /#1 crash: exited before reaching/],
      [2, { partitionsMoved: false, woke: 'fenced' }, /#2 zombie: its partitions did not move/],
      [2, { partitionsMoved: true, woke: 'silent' }, /#2 zombie: woke, logged no FENCE/],
      [3, { serverKilled: false, serverBack: true }, /#3 redis-restart: Redis was not running/],
      [3, { serverKilled: true, serverBack: true, paused: 2, resumed: 1 }, /1 of 2 paused instances/],
      [4, { instances: 2, stoppedCleanly: true }, /#4 scale: 2 live instances, not 3/],
      [0, { skipped: 'no live instance' }, /#0 kill: not attempted/],
      [0, { error: 'redis-server exited' }, /#0 kill: could not be carried out/],
    ];
    for (const [i, facts, why] of cases) {
      const f = faults();
      f[i] = outcome(clean.schedule[i] as Fault, facts);
      const failures = judge({ ...clean, faults: f });
      assert.equal(failures.length, 1, `${why}: ${failures.join('; ')}`);
      assert.match(failures[0] as string, why);
    }
    const missing = judge({ ...clean, faults: faults().slice(0, 4) });
    assert.deepEqual(missing, ['fault #4 scale: never ran']);
  });

  it('an instance exit no fault caused, a harness error, or no verification fails the run', () => {
    const exit = 'i1#0 exited on its own {"code":1,"signal":null}\n--- log tail ---';
    assert.deepEqual(judge({ ...clean, faults: faults(), unexpectedExits: [exit] }), [
      'instance exit not caused by a fault: i1#0 exited on its own {"code":1,"signal":null}',
    ]);
    assert.equal(judge({ ...clean, faults: faults(), harnessErrors: ['no drain'] }).length, 1);
    assert.deepEqual(judge({ ...clean, faults: faults(), verify: undefined }), ['not verified']);
  });
});

describe('the verifier catches broken results', { timeout: 120_000 }, () => {
  it('flags a lost output, a duplicate, a double-applied state, missing, duplicate, extra and wrong dead letters, offsets', async () => {
    const ns = uniqueName('chaos-verifier');
    const names = { input: `${ns}-orders`, output: `${ns}-totals`, deadLetter: `${ns}-orders.DLT` };
    const kafka = new ChaosKafka(brokers);
    const dir = await mkdtemp(join(tmpdir(), 'redfence-chaos-verifier-'));
    const server = new RedisServer({ dir, persistent: false });
    const producer = kafka.producer();
    try {
      await server.start();
      await kafka.createTopics([
        { topic: names.input, partitions: 2 },
        { topic: names.output, partitions: 2 },
        { topic: names.deadLetter, partitions: 1 },
      ]);
      await producer.connect();
      // input: a: 10, 20; b: 5; a null-key poison and a wrong-partition poison; orders the reducer
      // refuses (processing-error): one of b's, c's only order, d's only order
      const home = kafkaPartition('a', 2);
      await producer.send({
        topic: names.input,
        messages: [
          { key: 'a', value: '{"customer":"a","amount":10}' },
          { key: 'a', value: '{"customer":"a","amount":20}' },
          { key: 'b', value: '{"customer":"b","amount":5}' },
          { key: null, value: '{"customer":"a","amount":1}', partition: 0 },
          { key: 'a', value: '{"customer":"a","amount":7}', partition: 1 - home },
          { key: 'b', value: '{"customer":"b","amount":9,"refuse":true}' },
          { key: 'c', value: '{"customer":"c","amount":4,"refuse":true}' },
          { key: 'd', value: '{"customer":"d","amount":3,"refuse":true}' },
        ],
      });
      // outputs: a's second order is missing, b's is there twice
      await producer.send({
        topic: names.output,
        messages: [
          { key: 'a', value: '{"total":10,"count":1}' },
          { key: 'b', value: '{"total":5,"count":1}' },
          { key: 'b', value: '{"total":5,"count":1}' },
        ],
      });
      // dead letters: the null-key one with the wrong reason; the wrong-partition one and b's refused one
      // missing; c's refused one twice; a processing-error one for a's first (valid) order; d's right
      type Source = { key: Buffer | null; value: Buffer | null; partition: number; offset: number };
      const input = new Map<string, Source>();
      const { readTopic } = await import('../../src/chaos/kafka.js');
      await readTopic(brokers, names.input, 'read_uncommitted', (m) => {
        const value = m.value?.toString('utf8') ?? '';
        // the first record of each kind per key: valid (on the key's partition), -wrong, -refused
        const key = m.key?.toString('utf8');
        const name =
          key === undefined
            ? 'null'
            : value.includes('refuse')
              ? `${key}-refused`
              : kafkaPartition(key, 2) === m.partition
                ? key
                : `${key}-wrong`;
        if (!input.has(name)) input.set(name, m);
      });
      const source = (name: string): Source => {
        const m = input.get(name);
        assert.ok(m, name);
        return m;
      };
      const deadLetter = (name: string, reason: string) => {
        const m = source(name);
        const long = Buffer.alloc(8);
        long.writeBigInt64BE(BigInt(m.offset));
        const int = Buffer.alloc(4);
        int.writeInt32BE(m.partition);
        return {
          key: m.key,
          value: m.value,
          headers: {
            'kafka_dlt-original-topic': names.input,
            'kafka_dlt-original-partition': int,
            'kafka_dlt-original-offset': long,
            'redfence-reason': reason,
          },
        };
      };
      await producer.send({
        topic: names.deadLetter,
        messages: [
          deadLetter('null', 'undecodable'),
          deadLetter('c-refused', 'processing-error'),
          deadLetter('c-refused', 'processing-error'),
          deadLetter('a', 'processing-error'),
          deadLetter('d-refused', 'processing-error'),
        ],
      });
      // state: a applied twice (35 instead of 30); c's fence at its refused order, no value (right);
      // d's refused order applied (a value where there must be none)
      const redis = new Redis(server.url);
      const store = 'verifier_test';
      await redis.hset(`rf:{${store}:a}`, { v: '{"total":40,"count":3}', p: home, o: 1, e: 1 });
      const c = source('c-refused');
      await redis.hset(`rf:{${store}:c}`, { p: c.partition, o: c.offset, e: 1, [`#${c.offset}`]: 'dx' });
      const d = source('d-refused');
      await redis.hset(`rf:{${store}:d}`, { v: '{"total":3,"count":1}', p: d.partition, o: d.offset, e: 1 });
      for (const p of [0, 1]) await redis.set(`rf:{${store}:${names.input}:${p}}:epoch`, '1');
      redis.disconnect();

      const result = await verify({
        brokers,
        redisUrl: server.url,
        mode: 'exactly-once',
        ...names,
        group: `${ns}-group`,
        store,
        partitions: 2,
        readTimeoutMs: 30_000,
      });
      const text = result.violations.map((v) => `[${v.check}] ${v.message}`).join('\n');
      const expect = (re: RegExp) => assert.match(text, re);
      expect(/\[output\] a: no output for order 2 of 2/);
      expect(/\[output\] b: order 1 output 2 times under read_committed/);
      expect(/\[state\] a: value \{"total":40,"count":3\}, expected \{"total":30,"count":2\}/);
      expect(/\[state\] b: no state stored/);
      expect(/\[dead-letter\] .* reason undecodable, expected null-key/);
      expect(/\[dead-letter\] poison .* \(wrong-partition\) has no dead letter/);
      // an order the reducer refuses: its dead letter missing, twice, or given to a valid order; its
      // state effect
      expect(
        new RegExp(
          `poison ${source('b-refused').partition}/${source('b-refused').offset} \\(processing-error\\) has no dead letter`,
        ),
      );
      expect(new RegExp(`poison ${c.partition}/${c.offset} dead-lettered 2 times under read_committed`));
      expect(
        /\[dead-letter\] .*: valid record \d+\/0 \(a\) dead-lettered \(reason processing-error\) and applied/,
      );
      expect(/\[state\] d: value \{"total":3,"count":1\}, expected no value/);
      assert.doesNotMatch(text, /\[state\] c:/, "c's fence at its refused order and no value are right");
      assert.doesNotMatch(
        text,
        new RegExp(`poison ${c.partition}/${c.offset} \\(processing-error\\) has no`),
      );
      assert.doesNotMatch(
        text,
        new RegExp(`poison ${d.partition}/${d.offset} `),
        "d's one dead letter is right",
      );
      assert.equal(result.poisonByReason.get('processing-error'), 3);
      assert.equal(result.duplicateDeadLetters, 1, "c's second dead letter");
      expect(/\[offsets\] partition 0: committed -1/);
      // the same violations by what they mean
      assert.equal(
        result.kinds.get('double apply'),
        2,
        'a: count 3 for 2 orders; d: a refused order applied',
      );
      assert.equal(result.extraApplies, 2);
      assert.equal(result.kinds.get('lost apply'), 1, 'b: no state');
      assert.ok((result.kinds.get('lost output') ?? 0) >= 1);
      assert.equal(result.kinds.get('duplicate output'), 1);
    } finally {
      await producer.disconnect().catch(() => undefined);
      await kafka.deleteTopics([names.input, names.output, names.deadLetter]);
      await kafka.close();
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('chaos, short', { timeout: 420_000, concurrency: 2 }, () => {
  for (const mode of ['exactly-once', 'at-least-once'] as const) {
    it(`${mode}${mode === 'exactly-once' ? ' (commit interval 300 ms)' : ''}: every crash point, kills, a zombie, a Redis restart, 1 -> 3 -> 2 instances, poison: no violation`, async () => {
      const points = pointsFor(mode);
      const report = await runChaos({
        mode,
        brokers,
        records: 9000,
        customers: 300,
        partitions: 6,
        durationS: 120,
        poisonRate: 0.01,
        large: 2,
        kills: 2,
        crashes: points.length,
        zombies: 1,
        redisRestarts: 1,
        redisDownMs: [2000, 6000], // keeps the run short; dev/chaos-long uses the 2-14 s default
        scale: [1, 3, 2],
        sessionTimeoutMs: 6000,
        // exactly-once with a commit interval (as Kafka Streams' commit.interval.ms): applied batches
        // wait for it, so kills, crashes, the zombie and the scaling revoke partitions with batches
        // waiting; at-least-once without, a Kafka step as soon as there is work
        ...(mode === 'exactly-once' ? { commitIntervalMs: 300 } : {}),
        ...(process.env.CHAOS_SEED ? { seed: Number(process.env.CHAOS_SEED) } : {}),
        crashTimeoutMs: 40_000,
        drainTimeoutMs: 120_000,
        log: (line) => console.log(`[${mode}] ${line}`),
      });
      console.log(`${formatReport(report)}\nFaults:\n${formatFaults(report)}`);
      // the exits no fault caused go in the message too: they are often what led to a harness error
      assert.equal(
        report.harnessErrors.length,
        0,
        [...report.harnessErrors, ...report.unexpectedExits.map((e) => `unexpected exit: ${e}`)].join('\n'),
      );
      assert.deepEqual(report.unexpectedExits, [], 'no instance exited without a fault causing it');
      assert.deepEqual(report.verify?.violations ?? ['not verified'], []);
      assert.equal(report.faults.length, report.schedule.length, 'every scheduled fault ran');
      assert.deepEqual(
        report.faults
          .filter((f) => f.failure !== undefined)
          .map((f) => `#${f.fault.index}: ${f.failure} (${f.outcome})`),
        [],
        'every fault did what it is meant to',
      );
      const crashed = report.faults.filter((f) => f.fault.kind === 'crash' && /^crashed/.test(f.outcome));
      assert.deepEqual(
        crashed.map((f) => f.fault.point).sort(),
        [...points].sort(),
        `every crash point reached (seed ${report.seed})`,
      );
      for (const kind of ['zombie', 'redis-restart', 'scale', 'kill'])
        assert.ok(
          report.faults.some((f) => f.fault.kind === kind),
          `${kind} injected`,
        );
      // orders the reducer refused were in the input, and each has its processing-error dead letter
      // (the verifier checked it): only a throw in reduce gives that reason
      assert.ok((report.verify?.poisonByReason.get('processing-error') ?? 0) > 0, 'refused orders');
      assert.deepEqual(report.failures, [], `seed ${report.seed}`);
      assert.equal(report.ok, true);
    });
  }
});
