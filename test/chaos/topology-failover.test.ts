/**
 * `redfence chaos <topology module>` under a Redis failover, short: the fraud topology
 * (examples/fraud.ts) exactly-once on the harness's Sentinel set (primary, replica, three Sentinels),
 * its primary SIGKILLed once with the replica's link cut a second before, so the promoted replica misses
 * that second of writes. With `--wait-replicas 1` the outputs must be the model's (a batch whose
 * connection closed runs again; nothing is committed past unreplicated writes); without WAIT the same
 * seed and schedule lose the state written in the cut second and the judge must name the keys whose
 * counts fall short. Seed 10 starts the failover 7.8 s into the 15 s of input (src/chaos/schedule.ts),
 * after the second instance's rebalance and with 7 s of input left, so the cut second has records in
 * flight in both runs. test/chaos/failover.test.ts does the same for a
 * processor.
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
const failover = [
  FRAUD,
  '--brokers',
  KAFKA_BROKERS,
  '--partitions',
  '3',
  '--session-timeout',
  '6000',
  '--quiet',
  '--seed',
  '10',
  '--mode',
  'exactly-once',
  '--redis-topology',
  'sentinel',
  '--redis-failovers',
  '1',
  '--replica-lag',
  '1000',
  '--records',
  '2500',
  '--duration',
  '15',
  '--kills',
  '0',
  '--crashes',
  '0',
  '--zombies',
  '0',
  '--redis-restarts',
  '0',
  '--scale',
  '2',
];
// what the failover fault did: the primary SIGKILLed, the Sentinels promoted the replica, the old
// primary rejoined as its replica (the fault's facts, judged: `1 of 1` as intended)
const FAILOVER_DONE =
  /redis-failover +redis :\d+ -> :\d+ replication cut 1000 ms before, primary SIGKILLed, Sentinel promoted the replica in \d+ ms, old primary rejoined as a replica/;

describe('redfence chaos <topology module> under a Sentinel failover', { timeout: 240_000 }, () => {
  it('with --wait-replicas 1 the outputs are the model’s; without WAIT the judge names the lost counts', async () => {
    const [wait, noWait] = await Promise.all([
      chaos([...failover, '--wait-replicas', '1', '--wait-timeout', '500']),
      chaos(failover),
    ]);
    for (const r of [wait, noWait]) {
      assert.match(r.out, /\| redis-failover +\| 1 of 1 \|/, `${r.out}\n${r.err}`);
      assert.match(r.out, FAILOVER_DONE);
      assert.match(r.out, /\| instance exits not caused +\| +0 \|/);
      assert.match(r.out, /\| committed \/ end offsets +\| +2500 \/ 2500 \|/);
    }
    assert.match(wait.out, /\(topology\): .*Redis sentinel, --wait-replicas 1;/);
    assert.equal(wait.code, 0, `${wait.out}\n${wait.err}`);
    assert.match(wait.out, /VERDICT: OK/);
    assert.match(wait.out, /\| outputs \(read_committed\) \/ model +\| +(\d+) \/ \1 \|/);
    assert.match(wait.out, /\| differences: output +\| +0 \|/);
    assert.match(wait.out, /\| differences: dead-letter +\| +0 \|/);

    assert.match(noWait.out, /\(topology\): .*Redis sentinel, no WAIT;/);
    assert.equal(noWait.code, 1, noWait.out);
    assert.match(noWait.out, /VERDICT: FAILED/);
    assert.doesNotMatch(noWait.out, /\| differences: output +\| +0 \|/);
    // a lost count: the run's alert for a window carries a lower count than the model's there
    assert.match(
      noWait.out,
      /DIFFERENCE \[output\] \S+-output key "k-\d+": \d+ outputs, the model \d+; first difference at #\d+: \{[^}]*"count":\d+\} @\d+ in the run/,
    );
  });
});

describe('redfence chaos --wait-replicas: a WAIT the harness’s Redis cannot meet exits 2', () => {
  const offline = ['--brokers', '127.0.0.1:1', '--quiet'];
  for (const [flag, message] of [
    [['--wait-replicas', '1'], /--redis-topology standalone without --redis-failovers starts no replica/],
    [
      ['--wait-replicas', '2', '--redis-topology', 'sentinel', '--redis-failovers', '1'],
      /--wait-replicas 2: the harness starts one replica per primary/,
    ],
  ] as const)
    it(flag.join(' '), async () => {
      const r = await chaos([join(FIXTURES, 'windowed-count.ts'), ...flag, ...offline]);
      assert.equal(r.code, 2, `${r.out}\n${r.err}`);
      assert.match(r.err, message);
    });
});
