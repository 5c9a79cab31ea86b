/**
 * `redfence chaos <topology module>` for topologies with a repartition topic, against Kafka and its own
 * Redis, short, exactly-once, on the default input: a groupBy + count (test/chaos/fixtures/regroup-count.ts)
 * under a kill and the after-redis-write crash point, long enough (36 s) for the runtime to purge its
 * repartition topic while the harness reads it; a fraud-like windowed count after a key change
 * (test/chaos/fixtures/regional-alerts.ts) under a kill and the in-transaction and after-commit crash
 * points, whose late dead letters are repartition records; both judged in stages against the model
 * (src/chaos/topology-stages.ts). Then the groupBy + count with a planted fault downstream of the
 * repartition topic (every band's seventh count dropped) fails with exit 1 naming keys.
 * test/chaos/topology-stages.test.ts checks the staged judge itself without services.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const chaos = (args: string[]) => runCli(['chaos', ...args]);
const common = ['--brokers', KAFKA_BROKERS, '--partitions', '3', '--session-timeout', '6000', '--quiet'];
const none = ['--zombies', '0', '--redis-restarts', '0'];

describe('redfence chaos <topology module> with a repartition topic', { timeout: 240_000 }, () => {
  it('a groupBy + count and a regrouped windowed count equal the model in stages under kills and crash points', async () => {
    const [count, alerts, planted] = await Promise.all([
      chaos([
        join(FIXTURES, 'regroup-count.ts'),
        ...common,
        ...none,
        '--seed',
        '21',
        '--mode',
        'exactly-once',
        '--records',
        '3600',
        '--duration',
        '36',
        '--kills',
        '1',
        '--crashes',
        '1',
        '--points',
        'after-redis-write',
        '--scale',
        '2',
      ]),
      chaos([
        join(FIXTURES, 'regional-alerts.ts'),
        ...common,
        ...none,
        // seed 8: the after-commit crash at pass 1, the kill, then in-transaction at pass 2, within the input
        '--seed',
        '8',
        '--mode',
        'exactly-once',
        '--records',
        '3600',
        '--duration',
        '36',
        '--kills',
        '1',
        '--crashes',
        '2',
        '--points',
        'in-transaction,after-commit',
        '--scale',
        '2',
      ]),
      chaos([
        join(FIXTURES, 'regroup-count-drops.ts'),
        ...common,
        ...none,
        '--seed',
        '5',
        '--records',
        '600',
        '--duration',
        '2',
        '--kills',
        '0',
        '--crashes',
        '0',
        '--scale',
        '1',
      ]),
    ]);
    // what each run compared, for its margins (records purged, dead letters, crash passes)
    for (const r of [count, alerts])
      console.log(r.out.slice(r.out.indexOf('Compared with the model'), r.out.indexOf('Faults (')).trim());
    for (const r of [count, alerts]) {
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: OK/);
      assert.match(r.out, /\| input records \(read back\) +\| +3600 \|/);
      assert.match(r.out, /\| outputs \(read_committed\) \/ model +\| +(\d+) \/ \1 \|/);
      assert.match(
        r.out,
        /\| repartition records \(read_committed, read live\) \/ model +\| +(\d+) \/ \1 \|/,
      );
      assert.doesNotMatch(r.out, /\| repartition records \(read_committed, read live\) \/ model +\| +0 \//);
      for (const check of ['repartition', 'output', 'dead-letter', 'offsets'])
        assert.match(r.out, new RegExp(`\\| differences: ${check} +\\| +0 \\|`));
      assert.match(r.out, /\| committed \/ end offsets +\| +3600 \/ 3600 \|/);
      assert.match(r.out, /\| kill +\| 1 of 1 \|/);
    }
    // the purge deleted repartition records the harness had read (the run outlived its 30 s interval)
    assert.doesNotMatch(count.out, /\| +repartition records purged during the run +\| +0 \|/);
    assert.match(count.out, /crashed at after-redis-write \(pass \d\)/);
    assert.match(alerts.out, /crashed at in-transaction \(pass \d\)/);
    assert.match(alerts.out, /crashed at after-commit \(pass \d\)/);
    // late records at the windowed count downstream: dead letters carrying repartition records
    assert.doesNotMatch(alerts.out, /\| dead letters \/ model +\| +0 \//);

    assert.equal(planted.code, 1, `${planted.out}\n${planted.err}`);
    assert.match(planted.out, /VERDICT: FAILED/);
    assert.match(
      planted.out,
      /DIFFERENCE \[output\] \S+-output key b-\d: \d+ outputs, the model \d+; first difference at #6/,
    );
    assert.match(planted.out, /\| differences: repartition +\| +0 \|/);
  });
});
