/**
 * `redfence state get` of a store behind a pattern source, against real Redis and a real broker: the
 * store keeps its keys in the fence space of the topic the pattern matched, so the cluster's topics are
 * needed. With `--topics` the pattern is resolved against them as the running processor resolves it;
 * without, they are listed from `--brokers` (topics created on the broker for this run). Either way the
 * count the real executor wrote is read (exit 0), stamped with the matched topic. Brokers that do not
 * answer are RF_KAFKA_UNAVAILABLE (exit 1) naming --topics as the way round.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import type { BuiltTopology } from '../../src/index.js';
import { resolvePatterns } from '../../src/topology/patterns.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics } from '../helpers/kafka.js';

const APP = uniqueName('ps').replace(/-/g, '_');
const PS = uniqueName('ps');
process.env.PATTERN_STATE_APP = APP;
process.env.PATTERN_STATE_PREFIX = PS;
const FIXTURE = 'test/cli/fixtures/pattern-state.ts';
const MATCHED = `${PS}-p-eu`;
const LISTED = [`${PS}-first`, MATCHED, `${PS}-out1`, `${PS}-out2`, 'other'];

describe('redfence state of a store behind a pattern source', { timeout: 60_000 }, () => {
  let redis: Redis;
  let dropTopics: () => Promise<void> = async () => undefined;
  const cli = (...args: string[]) => runCli(['state', ...args, '--redis', REDIS_URL]);
  before(async () => {
    redis = standalone();
    dropTopics = await createTopics([
      { topic: `${PS}-first`, partitions: 1 },
      { topic: MATCHED, partitions: 1 },
    ]);
    const built = (await import('./fixtures/pattern-state.js')).default as BuiltTopology;
    const exec = new TopologyExecutor(resolvePatterns(built, LISTED).built, { redis });
    const records = [0, 1].map((offset) => ({
      topic: MATCHED,
      partition: 0,
      offset,
      key: Buffer.from('k'),
      value: Buffer.from('1'),
      timestamp: 1000 + offset,
    }));
    await exec.runBatch({ topic: MATCHED, partition: 0, epoch: 1, committedOffset: 0, records });
  });
  after(async () => {
    redis.disconnect();
    await dropTopics();
  });

  const answer = (out: string) => {
    const a = JSON.parse(out) as {
      value: unknown;
      stamp: { topic: string; partition: number; offset: number };
    };
    return [a.value, a.stamp.topic, a.stamp.partition, a.stamp.offset];
  };

  it('without --topics: the topics listed from --brokers, the count read with its stamp', async () => {
    const r = await cli('get', FIXTURE, 'by-pattern', 'k', '--brokers', KAFKA_BROKERS, '--json');
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(answer(r.out), [2, MATCHED, 0, 1]);
  });

  it('without --topics, brokers that do not answer: RF_KAFKA_UNAVAILABLE (exit 1) naming --topics', async () => {
    const r = await cli('get', FIXTURE, 'by-pattern', 'k', '--brokers', '127.0.0.1:1', '--json');
    assert.equal(r.code, 1, r.err);
    assert.match(r.err, /RF_KAFKA_UNAVAILABLE/);
    assert.match(r.err, /--topics/);
    assert.equal(r.out, '');
  });

  it('with --topics: the pattern resolved as the processor does, the count read with its stamp', async () => {
    const r = await cli(
      'get',
      FIXTURE,
      'by-pattern',
      'k',
      '--topics',
      LISTED.join(','),
      '--brokers',
      '127.0.0.1:1',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(answer(r.out), [2, MATCHED, 0, 1]);
  });

  it('a --topics item that is no topic name is refused (exit 2)', async () => {
    const r = await cli('get', FIXTURE, 'by-pattern', 'k', '--topics', 'a b');
    assert.equal(r.code, 2);
    assert.match(r.err, /--topics/);
  });
});
