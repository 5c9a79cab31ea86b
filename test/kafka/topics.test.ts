/**
 * The start-up topic check on the real broker: a missing input or output topic fails with
 * RF_TOPIC_MISSING naming it (and, for an output, the partition count to create it with); with
 * `create` a missing output is made with the input's partition count; outputs that exist with another
 * partition count are reported. The admin calls work before start() and stop() closes them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { ensureTopics } from '../../src/kafka/topics.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, kafka } from '../helpers/kafka.js';

describe('ensureTopics on the real broker', { timeout: 120_000 }, () => {
  let port: ConfluentKafka;
  const made: string[] = [];
  before(() => {
    port = new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: uniqueName('topics-g') });
  });
  after(async () => {
    await port.stop();
    if (made.length === 0) return;
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: made }).catch(() => undefined);
    await admin.disconnect();
  });

  /** Topics made by the code under test: deleted by the suite's `after`. */
  function willCreate(...topics: string[]): void {
    made.push(...topics);
  }

  it('a missing input fails with RF_TOPIC_MISSING naming it, even with create', async () => {
    const ns = uniqueName('topics-in');
    const cleanup = await createTopics([{ topic: `${ns}-out`, partitions: 2 }]);
    try {
      for (const create of [false, true]) {
        await assert.rejects(
          ensureTopics(port, { input: `${ns}-in`, outputs: [`${ns}-out`], create }),
          (err: unknown) =>
            RedfenceError.is(err, 'RF_TOPIC_MISSING') &&
            err.message.includes(`${ns}-in `) &&
            /does not exist/.test(err.message),
        );
      }
      assert.equal((await port.describeTopics([`${ns}-in`])).size, 0, 'the input was not created');
    } finally {
      await cleanup();
    }
  });

  it('a missing output fails naming it, the partition count and both fixes', async () => {
    const ns = uniqueName('topics-out');
    const cleanup = await createTopics([
      { topic: `${ns}-in`, partitions: 3 },
      { topic: `${ns}-out`, partitions: 3 },
    ]);
    try {
      await assert.rejects(
        ensureTopics(port, { input: `${ns}-in`, outputs: [`${ns}-out`, `${ns}-in.DLT`], create: false }),
        (err: unknown) => {
          assert.ok(RedfenceError.is(err, 'RF_TOPIC_MISSING'));
          assert.match(err.message, new RegExp(`topic ${ns}-in\\.DLT does not exist`));
          assert.match(err.message, /with 3 partitions/);
          assert.match(err.message, /createTopics: true/);
          assert.match(err.message, /--create-topics/);
          assert.doesNotMatch(err.message, new RegExp(`topic ${ns}-out does not exist`));
          return true;
        },
      );
      assert.equal((await port.describeTopics([`${ns}-in.DLT`])).size, 0, 'nothing was created');
    } finally {
      await cleanup();
    }
  });

  it('create makes missing outputs with the input partition count; a second run finds them', async () => {
    const ns = uniqueName('topics-create');
    const cleanup = await createTopics([{ topic: `${ns}-in`, partitions: 4 }]);
    willCreate(`${ns}-out`, `${ns}-in.DLT`);
    try {
      const first = await ensureTopics(port, {
        input: `${ns}-in`,
        outputs: [`${ns}-out`, `${ns}-in.DLT`],
        create: true,
        replicationFactor: 1,
      });
      assert.deepEqual(first, {
        inputPartitions: 4,
        created: [`${ns}-out`, `${ns}-in.DLT`],
        mismatched: [],
      });
      const seen = await port.describeTopics([`${ns}-out`, `${ns}-in.DLT`]);
      assert.equal(seen.get(`${ns}-out`), 4);
      assert.equal(seen.get(`${ns}-in.DLT`), 4);
      // Another instance starting at the same time: both create, both succeed.
      willCreate(`${ns}-race`);
      const [a, b] = await Promise.all(
        [1, 2].map(() =>
          ensureTopics(port, { input: `${ns}-in`, outputs: [`${ns}-out`, `${ns}-race`], create: true }),
        ),
      );
      assert.equal((await port.describeTopics([`${ns}-race`])).get(`${ns}-race`), 4);
      for (const r of [a, b]) assert.deepEqual(r?.mismatched, []);
      const again = await ensureTopics(port, {
        input: `${ns}-in`,
        outputs: [`${ns}-out`, `${ns}-in.DLT`],
        create: true,
      });
      assert.deepEqual(again.created, [], 'nothing to create the second time');
    } finally {
      await cleanup();
    }
  });

  it('outputs that exist with another partition count are reported, not changed', async () => {
    const ns = uniqueName('topics-mismatch');
    const cleanup = await createTopics([
      { topic: `${ns}-in`, partitions: 3 },
      { topic: `${ns}-out`, partitions: 2 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]);
    try {
      const r = await ensureTopics(port, {
        input: `${ns}-in`,
        outputs: [`${ns}-out`, `${ns}-in.DLT`],
        create: true,
      });
      assert.deepEqual(r, {
        inputPartitions: 3,
        created: [],
        mismatched: [
          { topic: `${ns}-out`, partitions: 2 },
          { topic: `${ns}-in.DLT`, partitions: 1 },
        ],
      });
      assert.equal((await port.describeTopics([`${ns}-out`])).get(`${ns}-out`), 2);
    } finally {
      await cleanup();
    }
  });

  it('bad options fail with RF_INVALID_OPTIONS before any call', async () => {
    let calls = 0;
    const counting = new Proxy(port, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          calls++;
          return v.apply(target, args);
        };
      },
    });
    const bad: unknown[] = [
      { input: '', outputs: [], create: false },
      { input: 'a', outputs: 'b', create: false },
      { input: 'a', outputs: [''], create: false },
      { input: 'a', outputs: [], create: 'yes' },
      { input: 'a', outputs: [], create: true, replicationFactor: 0 },
      { input: 'a', outputs: [], create: true, replicationFactor: 1.5 },
      { input: 'a', outputs: [], create: true, partitions: 3 },
    ];
    for (const options of bad)
      await assert.rejects(
        ensureTopics(counting, options as Parameters<typeof ensureTopics>[1]),
        (err: unknown) => RedfenceError.is(err, 'RF_INVALID_OPTIONS'),
        JSON.stringify(options),
      );
    assert.equal(calls, 0);
  });

  it('the admin calls work before start() and not after stop()', async () => {
    const ns = uniqueName('topics-life');
    const cleanup = await createTopics([{ topic: `${ns}-in`, partitions: 2 }]);
    const fresh = new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: `${ns}-g` });
    try {
      assert.equal(await fresh.partitionCount(`${ns}-in`), 2);
      await assert.rejects(fresh.partitionCount(`${ns}-nope`), (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPIC_MISSING'),
      );
      await fresh.stop();
      await assert.rejects(fresh.describeTopics([`${ns}-in`]), (err: unknown) =>
        RedfenceError.is(err, 'RF_INVALID_STATE'),
      );
    } finally {
      await fresh.stop();
      await cleanup();
    }
  });
});
