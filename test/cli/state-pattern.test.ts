/**
 * `redfence state get` of a store behind a pattern source (the notes' "`redfence state` can't pass
 * pattern `topics`"), against real Redis: the store keeps its keys in the fence space of the topic the
 * pattern matched, so without `--topics` the read is refused before any connection (exit 2, the error
 * naming `--topics`); with the cluster's topic names the pattern is resolved as the running processor
 * resolves it and the count the real executor wrote is read (exit 0), stamped with the matched topic.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import type { BuiltTopology } from '../../src/index.js';
import { resolvePatterns } from '../../src/topology/patterns.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { runCli } from '../helpers/cli.js';
import { REDIS_URL, standalone, uniqueName } from '../helpers/env.js';

const APP = uniqueName('ps').replace(/-/g, '_');
process.env.PATTERN_STATE_APP = APP;
const FIXTURE = 'test/cli/fixtures/pattern-state.ts';
const LISTED = ['ps-first', 'ps-p-eu', 'ps-out1', 'ps-out2', 'other'];

describe('redfence state of a store behind a pattern source', { timeout: 60_000 }, () => {
  let redis: Redis;
  const cli = (...args: string[]) => runCli(['state', ...args, '--redis', REDIS_URL]);
  before(async () => {
    redis = standalone();
    const built = (await import('./fixtures/pattern-state.js')).default as BuiltTopology;
    const exec = new TopologyExecutor(resolvePatterns(built, LISTED).built, { redis });
    const records = [0, 1].map((offset) => ({
      topic: 'ps-p-eu',
      partition: 0,
      offset,
      key: Buffer.from('k'),
      value: Buffer.from('1'),
      timestamp: 1000 + offset,
    }));
    await exec.runBatch({ topic: 'ps-p-eu', partition: 0, epoch: 1, committedOffset: 0, records });
  });
  after(() => redis.disconnect());

  it('without --topics: exit 2 naming --topics, before any connection', async () => {
    const r = await runCli(['state', 'get', FIXTURE, 'by-pattern', 'k', '--redis', 'redis://127.0.0.1:1']);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /RF_INVALID_OPTIONS/);
    assert.match(r.err, /--topics/);
  });

  it('with --topics: the pattern resolved as the processor does, the count read with its stamp', async () => {
    const r = await cli('get', FIXTURE, 'by-pattern', 'k', '--topics', LISTED.join(','), '--json');
    assert.equal(r.code, 0, r.err);
    const a = JSON.parse(r.out) as {
      value: unknown;
      stamp: { topic: string; partition: number; offset: number };
    };
    assert.equal(a.value, 2);
    assert.deepEqual([a.stamp.topic, a.stamp.partition, a.stamp.offset], ['ps-p-eu', 0, 1]);
  });

  it('a --topics item that is no topic name is refused (exit 2)', async () => {
    const r = await cli('get', FIXTURE, 'by-pattern', 'k', '--topics', 'a b');
    assert.equal(r.code, 2);
    assert.match(r.err, /--topics/);
  });
});
