/**
 * The processor's start-up topic check on the real broker and Redis: a missing output or dead-letter
 * topic stops start() with RF_TOPIC_MISSING before anything is consumed (it used to show only as produce
 * timeouts and endless redelivery); with `createTopics` they are made with the input's partition count
 * and the records flow. The same through the built CLI: one coded line and exit 2, or `--create-topics`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Child } from '../../src/harness/child.js';
import { defineProcessor, Processor, RedfenceError } from '../../src/index.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, kafka, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;

async function partitionsOf(topic: string): Promise<number | undefined> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
    return meta?.[0]?.partitions.length;
  } finally {
    await admin.disconnect();
  }
}

async function deleteTopics(topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics }).catch(() => undefined);
  await admin.disconnect();
}

describe('start-up topic check', { timeout: 120_000 }, () => {
  const redis = standalone();
  after(() => redis.disconnect());

  function processor(ns: string, createTopics = false): Processor {
    return new Processor({
      definition: defineProcessor<{ n: number }, number>({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: () => ({ op: 'add', by: 1 }),
      }),
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(',') },
      mode: 'exactly-once',
      createTopics,
      watchdog: false,
    });
  }

  it('a missing output or dead-letter topic fails start() with RF_TOPIC_MISSING naming it; nothing is consumed', async (t) => {
    const ns = uniqueName('tc-missing');
    t.after(await createTopics([{ topic: `${ns}-in`, partitions: 3 }]));
    await produce(`${ns}-in`, [{ key: 'a', value: '{"n":1}' }]);
    const p = processor(ns);
    await assert.rejects(p.start(), (err: unknown) => {
      assert.ok(RedfenceError.is(err, 'RF_TOPIC_MISSING'), String(err));
      const message = (err as Error).message;
      assert.match(message, new RegExp(`${ns}-out`), 'names the output topic');
      assert.match(message, new RegExp(`${ns}-in\\.DLT`), 'names the dead-letter topic');
      assert.match(message, /3 partitions/, "gives the input's partition count");
      return true;
    });
    assert.equal(p.state, 'closed', 'a failed start leaves the processor closed');
    assert.equal(await redis.exists(`rf:{${ns}:a}`), 0, 'no record was applied');
    const committed = await committedOffsets(p.groupId, `${ns}-in`);
    assert.deepEqual(
      [...committed.values()].filter((o) => o >= 0),
      [],
      'nothing committed',
    );
  });

  it('a missing input topic fails with RF_TOPIC_MISSING, even with createTopics', async () => {
    const ns = uniqueName('tc-noinput');
    const p = processor(ns, true);
    await assert.rejects(p.start(), (err: unknown) => {
      assert.ok(RedfenceError.is(err, 'RF_TOPIC_MISSING'), String(err));
      assert.match((err as Error).message, new RegExp(`${ns}-in`));
      return true;
    });
    assert.equal(await partitionsOf(`${ns}-out`), undefined, 'no output created for a missing input');
  });

  it('createTopics makes the output and dead-letter topics with the input partition count, and records flow', async (t) => {
    const ns = uniqueName('tc-create');
    t.after(await createTopics([{ topic: `${ns}-in`, partitions: 4 }]));
    t.after(() => deleteTopics([`${ns}-out`, `${ns}-in.DLT`]));
    const keys = ['a', 'b', 'c', 'd', 'e'];
    await produce(
      `${ns}-in`,
      keys.flatMap((k) => [1, 2, 3].map(() => ({ key: k, value: '{"n":1}' }))),
    );
    const p = processor(ns, true);
    await p.start();
    try {
      assert.equal(await partitionsOf(`${ns}-out`), 4);
      assert.equal(await partitionsOf(`${ns}-in.DLT`), 4);
      await pollUntil('all 15 records committed', async () => {
        const c = await committedOffsets(p.groupId, `${ns}-in`);
        return [...c.values()].reduce((a, b) => a + Math.max(0, b), 0) === 15;
      });
    } finally {
      await p.close();
    }
    const outputs = await readToEnd(`${ns}-out`);
    assertPerKey('outputs', outputs, countOf, countsUpTo(new Map(keys.map((k) => [k, 3]))));
  });

  it('redfence run: a missing output topic is one coded line and exit 2; --create-topics runs', async (t) => {
    const ns = uniqueName('tc-cli');
    t.after(await createTopics([{ topic: `${ns}-in`, partitions: 2 }]));
    t.after(() => deleteTopics([`${ns}-out`, `${ns}-in.DLT`]));
    const dir = mkdtempSync(join(tmpdir(), 'redfence-topics-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'p.mjs');
    writeFileSync(
      file,
      `export default { input: '${ns}-in', output: '${ns}-out', store: '${ns}', operation: () => ({ op: 'add', by: 1 }) };\n`,
    );
    const args = [BIN, 'run', file, '--brokers', KAFKA_BROKERS, '--redis', REDIS_URL];
    const missing = new Child({
      name: 'missing',
      command: process.execPath,
      args: [...args, '--log', 'silent'],
    });
    const exit = await missing.waitExit(30_000);
    const lines = missing.output.tail(5);
    assert.equal(exit.code, 2, lines);
    assert.equal(missing.output.count, 1, `one line: ${lines}`);
    assert.match(lines, /redfence run: [^\n]*RF_TOPIC_MISSING/);
    assert.match(lines, new RegExp(`${ns}-out`));

    await produce(`${ns}-in`, [{ key: 'x', value: '{}' }]);
    const running = new Child({
      name: 'create',
      command: process.execPath,
      args: [...args, '--create-topics', '--group', `${ns}-g`],
    });
    t.after(() => running.kill());
    await pollUntil('the record committed', async () => {
      const c = await committedOffsets(`${ns}-g`, `${ns}-in`);
      return [...c.values()].some((o) => o === 1);
    });
    const stopped = await running.terminate(15_000);
    assert.deepEqual([stopped.exit.code, stopped.forced], [0, false], running.tail());
    assert.equal(await partitionsOf(`${ns}-out`), 2);
  });
});
