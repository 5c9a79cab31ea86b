/**
 * `redfence chaos <topology module>` on input topics of other shapes than `--partitions` gives, against
 * Kafka and its own Redis, short:
 *
 * - input topics with their own partition counts (`--input-partitions`): two-inputs.ts's `orders` on 4
 *   partitions and `returns` on 2 (the outputs on 3), merged (a stateless sub-topology: each partition of
 *   each topic is a task of its own), to an output and through a repartition topic (4 partitions: the
 *   largest count its writer reads) into a windowed count; exactly-once under a kill and the
 *   in-transaction crash point, judged against the model per task;
 * - a topic a pattern reads made while the run lasts (`--late-topic`): pattern-late-region.ts's records
 *   name a fourth region's topic from the second half on; the harness makes it (2 partitions) when its
 *   first record is due, after the instances started, and restarts none: each running instance picks it
 *   up at its pattern refresh (it leaves the group and joins again with it); exactly-once under a kill,
 *   the late topic's records judged per key against the model with the others'. The report shows the
 *   order: the first start, the topic made, every live instance resolving the pattern to it.
 *
 * Bad values are refused before any connection (exit 2, RF_INVALID_OPTIONS naming the option).
 * test/chaos/topology-topics.test.ts checks the counts, the refusals and the feeder's placement without
 * services.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const chaos = (args: string[]) => runCli(['chaos', ...args]);
const two = join(FIXTURES, 'two-inputs.ts');
const late = join(FIXTURES, 'pattern-late-region.ts');

describe('redfence chaos --input-partitions and --late-topic: refused before any connection', () => {
  const offline = ['--brokers', '127.0.0.1:1', '--quiet', '--records', '200'];
  const cases: Array<[string, string[], RegExp]> = [
    [
      'a count of 0',
      [two, '--input-partitions', 'returns=0'],
      /^redfence chaos: --input-partitions .*must be topic=count pairs/,
    ],
    ['not a pair', [two, '--input-partitions', 'returns'], /--input-partitions .*must be topic=count pairs/],
    [
      'a topic twice',
      [two, '--input-partitions', 'returns=2,returns=3'],
      /--input-partitions: topic returns is given twice/,
    ],
    [
      'no input of the module',
      [two, '--input-partitions', 'refunds=2'],
      /--input-partitions refunds: .* reads no such topic \(its input topics: orders, returns\)/,
    ],
    [
      'without a module',
      ['--input-partitions', 'orders=2'],
      /--input-partitions applies to a topology module/,
    ],
    [
      'a processor module',
      [join(FIXTURES, 'max-reading.mjs'), '--late-topic', 'x'],
      /--late-topic applies to topologies, and the module exports a processor/,
    ],
    [
      'a listed input late',
      [two, '--late-topic', 'returns'],
      /--late-topic returns: a listed input topic must exist when the instances start/,
    ],
    [
      'a late topic no record names',
      [late, '--late-topic', 'region-xx'],
      /--late-topic region-xx: no record names it/,
    ],
    ['a bad topic name', [late, '--late-topic', 'region sa'], /--late-topic .*must be a topic name/],
  ];
  for (const [name, args, message] of cases)
    it(name, async () => {
      const r = await chaos([...args, ...offline]);
      assert.equal(r.code, 2, `${r.out}\n${r.err}`);
      assert.match(r.err, message);
      assert.match(r.err, /\[RF_INVALID_OPTIONS\]/);
    });
});

const common = ['--brokers', KAFKA_BROKERS, '--partitions', '3', '--session-timeout', '6000', '--quiet'];
const none = ['--zombies', '0', '--redis-restarts', '0'];

describe('redfence chaos <topology module> on input topics of other shapes', { timeout: 180_000 }, () => {
  it('topics of different partition counts, and a topic made mid-run, equal the model per task', async () => {
    const [counts, made] = await Promise.all([
      chaos([
        two,
        ...common,
        ...none,
        '--input-partitions',
        'orders=4,returns=2',
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
        late,
        ...common,
        ...none,
        '--late-topic',
        'region-sa',
        '--input-partitions',
        'region-sa=2',
        '--seed',
        '33',
        '--mode',
        'exactly-once',
        '--records',
        '1600',
        '--duration',
        '16',
        '--kills',
        '1',
        '--crashes',
        '0',
        '--scale',
        '2',
      ]),
    ]);
    for (const r of [counts, made])
      console.log(r.out.slice(r.out.indexOf('Compared with the model'), r.out.indexOf('Faults (')).trim());
    for (const [r, n] of [
      [counts, 2000],
      [made, 1600],
    ] as const) {
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: OK/);
      assert.match(r.out, new RegExp(`\\| input records \\(read back\\) +\\| +${n} \\|`));
      assert.match(r.out, new RegExp(`\\| committed / end offsets +\\| +${n} / ${n} \\|`));
      assert.match(r.out, /\| kill +\| 1 of 1 \|/);
      for (const check of ['input', 'repartition', 'output', 'dead-letter', 'offsets'])
        assert.match(r.out, new RegExp(`\\| differences: ${check} +\\| +0 \\|`));
      // the outputs and repartition records are the model's, each once, and there are some
      assert.match(r.out, /\| outputs \(read_committed\) \/ model +\| +([1-9]\d*) \/ \1 \|/);
      assert.match(
        r.out,
        /\| repartition records \(read_committed, read live\) \/ model +\| +([1-9]\d*) \/ \1 \|/,
      );
    }
    // the topics as read back: 4 and 2 partitions, both with records, keys from tasks of both
    assert.match(counts.out, /\| +partitions per input topic +\| +4 \/ 2 \|/);
    assert.match(counts.out, /\| +per input topic +\| +[1-9]\d* \/ [1-9]\d* \|/);
    assert.doesNotMatch(counts.out, /\| +of them from several tasks +\| +0 /);
    assert.match(counts.out, /crashed at in-transaction \(pass \d\)/);

    // the late topic: four input topics, the last (first named in the second half) the late one, on 2 partitions
    assert.match(made.out, /\| +per input topic +\| +\d+ \/ \d+ \/ \d+ \/ [1-9]\d* \|/);
    assert.match(made.out, /\| +partitions per input topic +\| +3 \/ 3 \/ 3 \/ 2 \|/);
    // what it held: records, and outputs the model writes from its tasks
    const held =
      /\| late topic region-sa \(2 partitions\) +\| +(\d+) records, (\d+) model outputs of its tasks \|/.exec(
        made.out,
      );
    assert.ok(held && Number(held[1]) > 0 && Number(held[2]) > 0, made.out);
    // made after the first instance had started, and read by every live instance after that
    const [, firstStart, createdAt, pickedUp] =
      /\| +first start \/ made \/ read by every instance +\| +([\d.]+) s \/ ([\d.]+) s \/ ([\d.]+) s \|/
        .exec(made.out)
        ?.map(Number) ?? [];
    assert.ok(
      (firstStart ?? 0) > 0 && (createdAt ?? 0) > (firstStart ?? 0) && (pickedUp ?? 0) > (createdAt ?? 0),
      made.out,
    );
    // none restarted for it: both live ones resolved the pattern to it while they ran (or at a fault's restart)
    assert.match(made.out, /\| +instances restarted \/ resolved it +\| +0 \/ 2 \|/);
  });
});
