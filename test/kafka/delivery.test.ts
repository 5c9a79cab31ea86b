/**
 * The producer hears failed records only (delivery.report.only.error), on the real broker: a record the
 * broker refuses (larger than its topic's max.message.bytes, so librdkafka hands it over and the refusal
 * comes back late, in the produce response) still fails the call, at-least-once (after the flush) and
 * exactly-once (the commit fails, nothing of the transaction is visible); a batch larger than
 * librdkafka's local queue completes in order; a failed call's other reports do not fail the next call.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { producerProperties } from '../../src/kafka/client-config.js';
import { DeliveryProducer } from '../../src/kafka/producer.js';
import type { OutRecord } from '../../src/kafka/types.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, endOffsets, kafka, readToEnd } from '../helpers/kafka.js';

const SMALL_LIMIT = 2000;

/** A topic whose records may hold at most SMALL_LIMIT bytes (the producer's own limit is 1 MB). */
async function smallTopic(topic: string): Promise<() => Promise<void>> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [
      {
        topic,
        numPartitions: 2,
        replicationFactor: 1,
        configEntries: [{ name: 'max.message.bytes', value: String(SMALL_LIMIT) }],
      },
    ],
  });
  return async () => {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  };
}

function records(topic: string, n: number, tag: string): OutRecord[] {
  return Array.from({ length: n }, (_, i) => ({ topic, key: `k-${i % 50}`, value: `${tag}-${i}` }));
}

/** The librdkafka / broker code a failed delivery carries (Kafka's MESSAGE_TOO_LARGE is 10). */
function codeOf(err: unknown): unknown {
  return ((err as { cause?: { code?: unknown } })?.cause as { code?: unknown } | undefined)?.code;
}

async function connect(ns: string, transactional: boolean, extra: Record<string, unknown> = {}) {
  const props = producerProperties({
    brokers: KAFKA_BROKERS.split(','),
    groupId: `${ns}-g`,
    ...(transactional ? { transactionalId: `${ns}-t` } : {}),
    producerConfig: extra as Record<string, string | number | boolean>,
  });
  return DeliveryProducer.connect(props);
}

describe('delivery reports for failed records only', { timeout: 180_000 }, () => {
  const ns = uniqueName('dr');
  const small = `${ns}-small`;
  const big = `${ns}-big`;
  const drops: Array<() => Promise<void>> = [];
  before(async () => {
    drops.push(await smallTopic(small));
    drops.push(await createTopics([{ topic: big, partitions: 3 }]));
  });
  after(async () => {
    for (const drop of drops) await drop();
  });

  it('at-least-once: a record the broker refuses late fails the call, and only that call', async () => {
    const p = await connect(`${ns}-alo`, false);
    try {
      const batch = records(small, 3000, 'alo');
      // near the end, so it is handed over after most others and refused in a produce response
      batch.splice(2900, 0, { topic: small, key: 'k-big', value: 'x'.repeat(SMALL_LIMIT * 3) });
      let handedOver = false;
      const err = await p
        .produce(batch, () => (handedOver = true))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.ok(handedOver, 'every record was handed to librdkafka (the refusal came later)');
      assert.ok(err instanceof Error, 'the call failed');
      assert.match(err.message, /delivery failed/);
      assert.equal(codeOf(err), 10, `MESSAGE_TOO_LARGE, got ${String(codeOf(err))}: ${err.message}`);
      // the failed call's other reports do not reach the next call, which resolves (another topic: on
      // the refused one, the idempotent producer's sequence numbers go on failing for a while)
      const before = [...(await endOffsets(big)).values()].reduce((a, b) => a + b, 0);
      await p.produce(records(big, 500, 'after'));
      const now = [...(await endOffsets(big)).values()].reduce((a, b) => a + b, 0);
      assert.equal(now - before, 500, 'the next call delivered its 500 records');
    } finally {
      await p.close();
    }
  });

  it('exactly-once: the commit fails on a refused record, nothing of the transaction is visible', async () => {
    const p = await connect(`${ns}-eos`, true);
    try {
      const batch = records(small, 2000, 'eos');
      batch.push({ topic: small, key: 'k-big', value: 'x'.repeat(SMALL_LIMIT * 3) });
      const refused: Error[] = [];
      await assert.rejects(p.transaction(batch, [], undefined, undefined, (e) => refused.push(e)));
      assert.equal(refused.length, 1, 'onRefused heard the refused record once');
      assert.equal(codeOf(refused[0]), 10, `MESSAGE_TOO_LARGE: ${refused[0]?.message}`);
      const seen = await readToEnd(small);
      assert.equal(
        seen.filter((r) => r.value?.startsWith('eos-')).length,
        0,
        'no record of the aborted transaction is visible',
      );
    } finally {
      await p.close();
    }
  });

  for (const transactional of [false, true]) {
    it(`${transactional ? 'exactly-once' : 'at-least-once'}: a batch larger than the local queue completes in order`, async () => {
      const topic = `${big}`;
      const p = await connect(`${ns}-q${transactional ? 't' : 'a'}`, transactional, {
        'queue.buffering.max.messages': 64,
      });
      const tag = transactional ? 'qt' : 'qa';
      try {
        const batch = records(topic, 5000, tag);
        if (transactional) await p.transaction(batch, [], undefined);
        else await p.produce(batch);
      } finally {
        await p.close();
      }
      const seen = (await readToEnd(topic)).filter((r) => r.value?.startsWith(`${tag}-`));
      assert.equal(seen.length, 5000, 'every record delivered');
      // per key (one partition each), the records in the order they were given
      const byKey = new Map<string, number[]>();
      for (const r of seen.sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset))) {
        const list = byKey.get(r.key ?? '') ?? [];
        list.push(Number(r.value?.slice(tag.length + 1)));
        byKey.set(r.key ?? '', list);
      }
      for (const [key, list] of byKey)
        assert.deepEqual(
          list,
          [...list].sort((a, b) => a - b),
          `records of ${key} in order`,
        );
    });
  }
});
