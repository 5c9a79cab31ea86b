/**
 * `redfence chaos <topology module>` for topologies reading several input topics, against Kafka and its
 * own Redis, short: two listed topics merged, to a stateless output and through a repartition topic into
 * a windowed count (test/chaos/fixtures/two-inputs.ts: the default input spread over both topics, the
 * second's event times 2 s behind), exactly-once under a kill and the in-transaction crash point; a
 * source reading a pattern (test/chaos/fixtures/pattern-regions.ts: three topics the records name, made by
 * the harness on the run's names, the pattern made to match them), at-least-once under a kill and the
 * after-produce crash point; both judged against the model per task. Then two-inputs.ts with a planted
 * fault in the merged sub-topology (every record of the second topic whose seq is a multiple of 3
 * dropped) fails with exit 1, naming the repartition partitions and output keys short of the model's.
 * test/chaos/topology-topics.test.ts checks the names, refusals and the judge without services.
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

describe('redfence chaos <topology module> with several input topics', { timeout: 180_000 }, () => {
  it('two merged topics and a pattern source equal the model per task under kills and crash points; a planted fault is named', async () => {
    const [two, regions, planted] = await Promise.all([
      chaos([
        join(FIXTURES, 'two-inputs.ts'),
        ...common,
        ...none,
        // seed 46: the crash (at its first pass) 2.4 s into the input, the kill at 12.8 s
        '--seed',
        '46',
        '--mode',
        'exactly-once',
        '--records',
        '2000',
        '--duration',
        '20',
        '--kills',
        '1',
        '--crashes',
        '1',
        '--points',
        'in-transaction',
        '--scale',
        '2',
      ]),
      chaos([
        join(FIXTURES, 'pattern-regions.ts'),
        ...common,
        ...none,
        '--seed',
        '32',
        '--mode',
        'at-least-once',
        '--records',
        '1600',
        '--duration',
        '16',
        '--kills',
        '1',
        '--crashes',
        '1',
        '--points',
        'after-produce',
        '--scale',
        '2',
      ]),
      chaos([
        join(FIXTURES, 'two-inputs-drops.ts'),
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
    for (const r of [two, regions])
      console.log(r.out.slice(r.out.indexOf('Compared with the model'), r.out.indexOf('Faults (')).trim());
    for (const [r, n] of [
      [two, 2000],
      [regions, 1600],
    ] as const) {
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: OK/);
      assert.match(r.out, new RegExp(`\\| input records \\(read back\\) +\\| +${n} \\|`));
      assert.match(r.out, new RegExp(`\\| committed / end offsets +\\| +${n} / ${n} \\|`));
      assert.match(r.out, /\| kill +\| 1 of 1 \|/);
      for (const check of ['input', 'repartition', 'output', 'dead-letter', 'offsets'])
        assert.match(r.out, new RegExp(`\\| differences: ${check} +\\| +0 \\|`));
      // records from every input topic reached the repartition topic and the outputs
      assert.doesNotMatch(r.out, /\| repartition records \([a-z_]+, read live\) \/ model +\| +0 \//);
      assert.doesNotMatch(r.out, /\| +of them from several tasks +\| +0 /);
    }
    // exactly-once: the outputs and repartition records are the model's, each once
    assert.match(two.out, /\| outputs \(read_committed\) \/ model +\| +(\d+) \/ \1 \|/);
    assert.match(
      two.out,
      /\| repartition records \(read_committed, read live\) \/ model +\| +(\d+) \/ \1 \|/,
    );
    assert.match(two.out, /\| +per input topic +\| +\d+ \/ \d+ \|/);
    assert.match(two.out, /crashed at in-transaction \(pass \d\)/);
    // the second topic's records, 2 s behind, are late behind the repartition: dead letters as the model's
    assert.match(two.out, /\| dead letters \/ model +\| +([1-9]\d*) \/ \1 \|/);
    assert.match(regions.out, /\| +per input topic +\| +\d+ \/ \d+ \/ \d+ \|/);
    assert.match(regions.out, /crashed at after-produce \(pass \d\)/);

    assert.equal(planted.code, 1, `${planted.out}\n${planted.err}`);
    assert.match(planted.out, /VERDICT: FAILED/);
    // the missing records named where they went missing: the repartition partitions and the merged output
    assert.match(
      planted.out,
      /DIFFERENCE \[repartition\] \S+-by-band-repartition\/\d: \d+ records, the model \d+; [1-9]\d* model records missing/,
    );
    assert.match(planted.out, /DIFFERENCE \[output\] \S+-output key "k-\d+"/);
    // downstream of the repartition the counts are the model's over the records as read
    assert.doesNotMatch(planted.out, /DIFFERENCE \[output\] \S+-output-1 /);
  });
});
