/**
 * `redfence chaos <topology module>` against Kafka and a Redis of its own, short: the fraud topology
 * (examples/fraud.ts) exactly-once under a kill, a zombie, a Redis restart and a scale step, a windowed
 * count (test/chaos/fixtures/windowed-count.ts) at-least-once under a kill over two instances, and the
 * same windowed count at-least-once under two crash points (--crashes 2: after-produce and
 * after-delivery, the points after which a replay writes outputs again), all on the default input and
 * judged against the reference model; then the same windowed count with a planted fault (its instances
 * drop every window's third count) fails with exit 1 naming keys. Options a topology does not take
 * exit 2 before any connection. test/processor/topology-crash.test.ts kills the topology processor at
 * each exactly-once point and compares the replacement's outputs with the model.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const FRAUD = fileURLToPath(new URL('../../examples/fraud.ts', import.meta.url));
const chaos = (args: string[]) => runCli(['chaos', ...args]);
const common = ['--brokers', KAFKA_BROKERS, '--partitions', '3', '--session-timeout', '6000', '--quiet'];

describe('redfence chaos <topology module> against Kafka and its own Redis', { timeout: 240_000 }, () => {
  it('the fraud topology (exactly-once) and a windowed count (at-least-once) equal the model under faults', async () => {
    const [fraud, count, crashes, planted] = await Promise.all([
      chaos([
        FRAUD,
        ...common,
        // seed 128: a kill, scale to 2, the zombie (one of two owners), then a Redis restart (3.6 s
        // down) right after it; seed 7 with a zombie keeps Redis down 11 s and the test ran ~15 s longer
        '--seed',
        '128',
        '--mode',
        'exactly-once',
        '--records',
        '4000',
        '--duration',
        '24',
        '--kills',
        '1',
        '--crashes',
        '0',
        '--zombies',
        '1',
        '--redis-restarts',
        '1',
        '--scale',
        '1,2',
      ]),
      chaos([
        join(FIXTURES, 'windowed-count.ts'),
        ...common,
        '--seed',
        '5',
        '--mode',
        'at-least-once',
        '--records',
        '2000',
        '--duration',
        '10',
        '--kills',
        '1',
        '--crashes',
        '0',
        '--zombies',
        '0',
        '--redis-restarts',
        '0',
        '--scale',
        '2',
      ]),
      chaos([
        join(FIXTURES, 'windowed-count.ts'),
        ...common,
        // seed 8: the crashes are due at 4% (pass 1) and 17% (pass 2) of the window; the first takes
        // ~20 s beside the other runs (a graceful stop and two starts), so the second's armed instance
        // starts ~30 s into the window: 36 s leaves it input to crash on
        '--seed',
        '8',
        '--mode',
        'at-least-once',
        '--records',
        '3600',
        '--duration',
        '36',
        '--kills',
        '0',
        '--crashes',
        '2',
        '--points',
        'after-produce,after-delivery',
        '--zombies',
        '0',
        '--redis-restarts',
        '0',
        '--scale',
        '1',
      ]),
      chaos([
        join(FIXTURES, 'windowed-count-drops.ts'),
        ...common,
        '--seed',
        '5',
        '--records',
        '1000',
        '--duration',
        '2',
        '--kills',
        '0',
        '--crashes',
        '0',
        '--zombies',
        '0',
        '--redis-restarts',
        '0',
        '--scale',
        '1',
      ]),
    ]);
    // the crash run's faults (time, target, outcome), for its margin: the second must start while input flows
    console.log(crashes.out.slice(crashes.out.lastIndexOf('Faults:')).trim());
    for (const r of [fraud, count, crashes]) {
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: OK/);
      assert.match(r.out, /\| differences: output +\| +0 \|/);
      assert.match(r.out, /\| differences: dead-letter +\| +0 \|/);
      assert.match(r.out, /\| committed \/ end offsets +\| +(\d+) \/ \1 \|/);
      assert.doesNotMatch(r.out, /\| dead letters \/ model +\| +0 \//, 'late records were dead-lettered');
    }
    for (const r of [fraud, count]) assert.match(r.out, /\| kill +\| 1 of 1 \|/);
    assert.match(fraud.out, /\| input records \(read back\) +\| +4000 \|/);
    assert.match(fraud.out, /\| outputs \(read_committed\) \/ model +\| +(\d+) \/ \1 \|/);
    assert.match(fraud.out, /\| redis-restart +\| 1 of 1 \|/);
    assert.match(fraud.out, /\| zombie +\| 1 of 1 \|/);
    assert.match(fraud.out, /\| committed \/ end offsets +\| +4000 \/ 4000 \|/);
    assert.match(count.out, /\| outputs \(read_uncommitted\) \/ model +\| +\d+ \/ \d+ \|/);
    assert.match(count.out, /duplicate outputs in replays \(allowed\)/);
    // each crash point reached: the armed instance died by its own SIGKILL there, and was replaced
    assert.match(crashes.out, /\| crash after-produce +\| 1 of 1 \|/);
    assert.match(crashes.out, /\| crash after-delivery +\| 1 of 1 \|/);
    assert.match(crashes.out, /crashed at after-produce \(pass \d\)/);
    assert.match(crashes.out, /crashed at after-delivery \(pass \d\)/);
    assert.match(crashes.out, /\| outputs \(read_uncommitted\) \/ model +\| +\d+ \/ \d+ \|/);

    assert.equal(planted.code, 1, `${planted.out}\n${planted.err}`);
    assert.match(planted.out, /VERDICT: FAILED/);
    assert.match(
      planted.out,
      /DIFFERENCE \[output\] \S+-output key "k-\d+": \d+ outputs, the model \d+; first difference at #\d+/,
    );
    assert.doesNotMatch(planted.out, /\| differences: output +\| +0 \|/);
  });
});

describe('redfence chaos <topology module>: options a topology does not take exit 2', () => {
  const offline = ['--brokers', '127.0.0.1:1', '--quiet'];
  for (const [flag, message] of [[['--points', 'after-comit'], /unknown crash point "after-comit"/]] as const)
    it(flag.join(' '), async () => {
      const r = await chaos([join(FIXTURES, 'windowed-count.ts'), ...flag, ...offline]);
      assert.equal(r.code, 2, `${r.out}\n${r.err}`);
      assert.match(r.err, message);
    });
});
