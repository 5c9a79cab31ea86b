/**
 * `redfence chaos <topology module> --idle-close <ms>`: the instances close the windows of idle
 * partitions by ticks. A 1-second tumbling count with emit final (fixtures/idle-windows.ts) whose input
 * stops with every partition's last windows open, exactly-once, under a kill: the drain waits until
 * ticks have closed every window, and the verdict (the model over the input as read back, ticks
 * included) finds no difference. That ticks happened and closed windows is shown three ways: the ticks
 * read back from the input topic (at least one per partition), the model's outputs only they account
 * for, and the instances' `redfence_topology_ticks_total`. Bad values and modules that take no
 * --idle-close exit 2 before any connection.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const chaos = (args: string[]) => runCli(['chaos', ...args]);
const PARTITIONS = 3;

describe('redfence chaos --idle-close: refused before any connection', () => {
  const offline = ['--brokers', '127.0.0.1:1', '--quiet'];
  const cases: Array<[string, string[], RegExp]> = [
    ['below its bound', [join(FIXTURES, 'idle-windows.ts'), '--idle-close', '99'], /--idle-close/],
    ['without a module', ['--idle-close', '500'], /--idle-close applies to a topology module/],
    ['with --handler', ['--handler', '--idle-close', '500'], /--idle-close applies to a topology module/],
    [
      'a processor module',
      [join(FIXTURES, 'max-reading.mjs'), '--idle-close', '500'],
      /--idle-close applies to topologies, and the module exports a processor/,
    ],
    [
      'a topology with no windowed aggregation',
      [join(FIXTURES, 'regroup-count.ts'), '--idle-close', '500'],
      /"idleCloseMs": topology regroup-count has no windowed aggregation/,
    ],
  ];
  for (const [name, args, message] of cases)
    it(name, async () => {
      const r = await chaos([...args, ...offline]);
      assert.equal(r.code, 2, `${r.out}\n${r.err}`);
      assert.match(r.err, message);
    });
});

describe('redfence chaos <topology module> --idle-close', { timeout: 120_000 }, () => {
  it('ticks close the last windows of every partition under a kill, as the model says', async (t) => {
    const r = await chaos([
      join(FIXTURES, 'idle-windows.ts'),
      '--brokers',
      KAFKA_BROKERS,
      '--partitions',
      String(PARTITIONS),
      '--session-timeout',
      '6000',
      '--seed',
      '3',
      '--mode',
      'exactly-once',
      '--records',
      '600',
      '--duration',
      '6',
      '--idle-close',
      '500',
      '--kills',
      '1',
      '--crashes',
      '0',
      '--zombies',
      '0',
      '--redis-restarts',
      '0',
      '--scale',
      '1',
    ]);
    for (const line of r.out.split('\n').filter((l) => /drained|ticks:|total [\d.]+ s/.test(l)))
      t.diagnostic(line.trim());
    assert.equal(r.code, 0, `${r.out}\n${r.err}`);
    assert.match(r.out, /VERDICT: OK/);
    assert.match(r.out, /\| kill +\| 1 of 1 \|/);
    assert.match(r.out, /drained in [\d.]+ s \(every window closed by ticks\)/);
    assert.match(r.out, /\| input records \(read back\) +\| +600 \|/);
    assert.match(r.out, /\| outputs \(read_committed\) \/ model +\| +(\d+) \/ \1 \|/);
    for (const check of ['output', 'dead-letter', 'offsets', 'input'])
      assert.match(r.out, new RegExp(`\\| differences: ${check} +\\| +0 \\|`));
    const m =
      /ticks: (\d+) read back \((\d+) made after the drain, unread\), (\d+) of the model's outputs theirs; the instances' redfence_topology_ticks_total: (\d+) produced, (\d+) consumed/.exec(
        r.out,
      );
    assert.ok(m !== null, r.out);
    const [read, closed, produced, consumed] = [m[1], m[3], m[4], m[5]].map(Number) as number[];
    assert.ok((read ?? 0) >= PARTITIONS, `${read} ticks read back, one per partition at least`);
    assert.ok((closed ?? 0) > 0, 'the ticks account for final results');
    assert.ok((produced ?? 0) > 0 && (consumed ?? 0) > 0, 'the instances counted ticks');
  });
});
