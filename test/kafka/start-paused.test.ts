/**
 * A broker that stops answering while a processor starts (paused by SIGSTOP, as a long collection or a
 * starved machine pauses it): the start waits and goes on once the broker answers again, instead of
 * failing at the admin client's first 5 s request timeout with RF_KAFKA_UNAVAILABLE (what it did: the
 * pause here outlasts two such timeouts). A closed port still fails at once (test/kafka/unreachable).
 *
 * The broker is paused as test/kafka/commit.test.ts pauses it (test/helpers/broker-pause.ts), so the
 * file runs in the serial pass.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { defineProcessor, Processor } from '../../src/index.js';
import { brokerControl } from '../helpers/broker-pause.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

/** Longer than two of the admin client's 5 s request timeouts. */
const PAUSE_MS = 12_000;

describe('a processor started while the broker does not answer', { timeout: 150_000 }, () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('starts once the broker answers again, and processes exactly', async (t) => {
    const broker = brokerControl();
    if ('skip' in broker) {
      t.skip(broker.skip);
      return;
    }
    const ns = uniqueName('startpaused');
    const input = `${ns}-in`;
    t.after(
      await createTopics([
        { topic: input, partitions: 2 },
        { topic: `${ns}-out`, partitions: 2 },
        { topic: `${input}.DLT`, partitions: 2 },
      ]),
    );
    const keys = ['a', 'b', 'c', 'd'];
    await produce(input, Array.from({ length: 5 }, () => keys.map((key) => ({ key, value: '{}' }))).flat());
    const processor = new Processor({
      definition: defineProcessor<unknown, number>({
        input,
        output: `${ns}-out`,
        store: ns,
        operation: () => ({ op: 'add', by: 1 }),
      }),
      redis,
      groupId: ns,
      kafka: { brokers: KAFKA_BROKERS.split(',') },
      instanceId: 'p1',
      mode: 'exactly-once',
      watchdog: false,
    });
    // set first: a pause command that fails half-way still gets its resume
    let paused = true;
    let resumedAt = 0;
    try {
      await broker.pause();
      const started = processor.start().then(
        () => ({ at: Date.now() }),
        (err: Error) => ({ err }),
      );
      // the fault's length (not a synchronisation): the broker answers nothing meanwhile
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      await broker.resume();
      paused = false;
      resumedAt = Date.now();
      const outcome = await started;
      assert.ok(!('err' in outcome), `start() failed: ${'err' in outcome ? outcome.err.message : ''}`);
      assert.ok(
        outcome.at >= resumedAt,
        'start() resolved while the broker was paused (the pause did nothing)',
      );
      await waitCommitted(ns, input);
      assertPerKey(
        'outputs',
        await readToEnd(`${ns}-out`),
        countOf,
        countsUpTo(new Map(keys.map((k) => [k, 5]))),
        { ordered: true },
      );
      assert.deepEqual(await readToEnd(`${input}.DLT`), [], 'nothing dead-lettered');
    } finally {
      if (paused)
        await broker
          .resume()
          .catch((err: Error) => t.diagnostic(`resuming the broker failed: ${err.message}`));
      await processor.close();
    }
  });
});
