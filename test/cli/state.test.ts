/**
 * `redfence state get|windows <module> <store> <key>` against real Redis (standalone and Cluster), on
 * state the real executor wrote: the value, windows and sessions asked for with the stamp of the key's
 * last record, as text and as JSON; exit 3 for a key without a value; unknown stores, stores of another
 * kind, bad options and a module without a topology refused (exit 2) before any connection; a stored
 * value the serde cannot read fails (exit 1) without the value in the message.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import type { BuiltTopology } from '../../src/index.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { storeIdOf } from '../../src/topology/run/plan.js';
import { runCli } from '../helpers/cli.js';
import { cluster, REDIS_CLUSTER_NODES, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';

const FIXTURE = 'test/cli/fixtures/state-topology.ts';
const T = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const APP = uniqueName('st').replace(/-/g, '_');
process.env.STATE_APP = APP;

const record = (key: string, partition: number, offset: number, timestamp: number, amount: number) => ({
  topic: 'state-orders',
  partition,
  offset,
  key: Buffer.from(key),
  value: Buffer.from(JSON.stringify({ amount })),
  timestamp,
});

const TARGETS: [string, () => Redis | Cluster, string[]][] = [
  ['standalone', standalone, ['--redis', REDIS_URL]],
  ['cluster', cluster, ['--cluster', REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',')]],
];

for (const [name, connect, target] of TARGETS) {
  describe(`redfence state on ${name}`, { timeout: 60_000 }, () => {
    let redis: Redis | Cluster;
    let built: BuiltTopology;
    const cli = (...args: string[]) => runCli(['state', ...args, ...target]);
    before(async () => {
      redis = connect();
      built = (await import('./fixtures/state-topology.js')).default as BuiltTopology;
      const exec = new TopologyExecutor(built, { redis });
      const k1 = [
        record('k1', 0, 3, T + 1_000, 5),
        record('k1', 0, 4, T + 2_000, 7),
        record('k1', 0, 9, T + 90_000, 1),
      ];
      const first = await exec.runBatch({
        topic: 'state-orders',
        partition: 0,
        epoch: 2,
        committedOffset: 3,
        records: k1,
      });
      // the counts' updates re-keyed to 'all', as the repartition topic gives them to its reader
      const regroup = `${APP}-regroup-repartition`;
      const updates = first.outputs.filter((o) => o.topic === regroup);
      assert.equal(updates.length, 3);
      await exec.runBatch({
        topic: regroup,
        partition: 0,
        epoch: 5,
        committedOffset: 0,
        records: updates.map((o, i) => ({ ...o, partition: 0, offset: 10 + i })),
      });
      await exec.runBatch({
        topic: 'state-orders',
        partition: 1,
        epoch: 1,
        committedOffset: 0,
        records: [record('bad', 1, 0, T, 1)],
      });
      // a value the aggregate's JSON serde cannot read, as only a foreign writer could leave it
      await redis.hset(
        exec.store.keys.fence(Buffer.from('bad')),
        `v:${storeIdOf('totals')}`,
        'not-json-SECRET',
      );
    });
    after(() => redis.disconnect());

    it('get: the value, its timestamp and the stamp of the key’s last record', async () => {
      const text = await cli('get', FIXTURE, 'counts', 'k1');
      assert.equal(text.code, 0, text.err);
      assert.equal(
        text.out,
        'counts k1: 3 (timestamp 1767225690000 2026-01-01T00:01:30.000Z), as of state-orders partition 0, offset 9 (epoch 2)\n',
      );
      const json = await cli('get', FIXTURE, 'totals', 'k1', '--json');
      assert.equal(json.code, 0, json.err);
      assert.deepEqual(JSON.parse(json.out), {
        store: 'totals',
        kind: 'key-value',
        key: 'k1',
        value: { sum: 13 },
        timestamp: T + 90_000,
        stamp: { topic: 'state-orders', partition: 0, offset: 9, epoch: 2 },
      });
    });

    it('get: a store after a re-key, stamped with its repartition topic’s record', async () => {
      const text = await cli('get', FIXTURE, 'count-sums', 'all');
      assert.equal(text.code, 0, text.err);
      assert.equal(
        text.out,
        // the sum of the counts' updates 1, 2, 3 of k1; the last at offset 12 of the repartition topic
        `count-sums all: 6 (timestamp 1767225690000 2026-01-01T00:01:30.000Z), as of ${APP}-regroup-repartition partition 0, offset 12 (epoch 5)\n`,
      );
    });

    it('windows: a window store’s windows in [--from, --to]; a session store’s sessions', async () => {
      const json = await cli(
        'windows',
        FIXTURE,
        'per-minute',
        'k1',
        '--from',
        '2026-01-01T00:00:00Z',
        '--to',
        String(T + 60_000),
        '--json',
      );
      assert.equal(json.code, 0, json.err);
      assert.deepEqual(JSON.parse(json.out), {
        store: 'per-minute',
        kind: 'window',
        key: 'k1',
        from: T,
        to: T + 60_000,
        windows: [
          { start: T, end: T + 60_000, value: 2, timestamp: T + 2_000, final: false },
          { start: T + 60_000, end: T + 120_000, value: 1, timestamp: T + 90_000, final: false },
        ],
        stamp: { topic: 'state-orders', partition: 0, offset: 9, epoch: 2 },
      });
      const narrow = await cli(
        'windows',
        FIXTURE,
        'per-minute',
        'k1',
        '--from',
        String(T + 1),
        '--to',
        String(T + 60_000),
      );
      assert.equal(narrow.code, 0, narrow.err);
      assert.deepEqual(narrow.out.split('\n'), [
        'per-minute k1: 1 windows starting in [2026-01-01T00:00:00.001Z, 2026-01-01T00:01:00.000Z], as of state-orders partition 0, offset 9 (epoch 2)',
        'start                     end                       value  timestamp                 final',
        '2026-01-01T00:01:00.000Z  2026-01-01T00:02:00.000Z  1      2026-01-01T00:01:30.000Z  no',
        '',
      ]);
      const sessions = await cli('windows', FIXTURE, 'visits', 'k1', '--json');
      assert.equal(sessions.code, 0, sessions.err);
      assert.deepEqual(JSON.parse(sessions.out).sessions, [
        { start: T + 1_000, end: T + 2_000, value: 2 },
        { start: T + 90_000, end: T + 90_000, value: 1 },
      ]);
      const overlapping = await cli(
        'windows',
        FIXTURE,
        'visits',
        'k1',
        '--from',
        String(T + 50_000),
        '--json',
      );
      assert.deepEqual(JSON.parse(overlapping.out).sessions, [
        { start: T + 90_000, end: T + 90_000, value: 1 },
      ]);
    });

    it('a key without a value, or no window in the range: exit 3', async () => {
      const none = await cli('get', FIXTURE, 'counts', 'nobody');
      assert.equal(none.code, 3);
      assert.equal(none.out, 'counts nobody: no value, no record of this key applied\n');
      const empty = await cli('windows', FIXTURE, 'per-minute', 'k1', '--from', '0', '--to', '1000');
      assert.equal(empty.code, 3);
    });

    it('a stored value the serde cannot read fails (exit 1) without the value in the message', async () => {
      const r = await cli('get', FIXTURE, 'totals', 'bad');
      assert.equal(r.code, 1);
      assert.match(
        r.err,
        /store "totals": its value serde could not read a stored value \[RF_STATE_CORRUPT\]/,
      );
      assert.doesNotMatch(r.err + r.out, /SECRET/);
    });
  });
}

describe('redfence state: refusals (exit 2, before any connection)', () => {
  // a Redis that does not answer: a refusal must come before any connection
  const nowhere = ['--redis', 'redis://127.0.0.1:1', '--connect-timeout', '200'];
  const cli = (...args: string[]) => runCli(['state', ...args, ...nowhere]);
  const cases: [string[], RegExp][] = [
    [
      ['get', FIXTURE, 'nope', 'k'],
      /has no store "nope" \(its stores: counts, count-sums, totals, per-minute, visits\) \[RF_STORE_UNKNOWN\]/,
    ],
    [
      ['get', FIXTURE, 'per-minute', 'k'],
      /"per-minute" is a window store: read it with redfence state windows \[RF_STORE_KIND\]/,
    ],
    [
      ['windows', FIXTURE, 'counts', 'k'],
      /"counts" is a key-value store: read it with redfence state get \[RF_STORE_KIND\]/,
    ],
    [
      ['windows', FIXTURE, 'visits', 'k', '--from', 'yesterday'],
      /--from must be ms since the epoch or an ISO-8601 date/,
    ],
    [['get', FIXTURE, 'counts'], /missing <module> <store> <key>/],
    [['get', FIXTURE, 'counts', 'k', 'extra'], /unexpected arguments extra/],
    [['get', FIXTURE, 'counts', '{', '--key-json'], /--key-json: <key> is not JSON \[RF_INVALID_OPTIONS\]/],
    [['get', 'examples/customer-totals.ts', 'counts', 'k'], /exports no topology.*\[RF_MODULE_INVALID\]/],
    [['list', FIXTURE], /unknown subcommand "list"/],
  ];
  for (const [args, message] of cases)
    it(args.join(' '), async () => {
      const r = await cli(...args);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, message);
    });

  it('--help of each subcommand lists its options', async () => {
    const get = await runCli(['state', 'get', '--help']);
    assert.equal(get.code, 0);
    assert.match(get.out, /--key-json/);
    assert.doesNotMatch(get.out, /--from/);
    const windows = await runCli(['state', 'windows', '--help']);
    assert.match(windows.out, /--from <time>/);
    assert.match((await runCli(['state', '--help'])).out, /redfence state windows/);
  });
});
