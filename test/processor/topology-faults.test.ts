/**
 * The topology processor's faults on the real broker and Redis. A failed Kafka step (an aborted
 * transaction, injected): the partitions in it are sought back, their batches (and those applied behind
 * them) run again from the stream time at the offset they start from, the key calls answer REEMIT, and
 * the output topics still equal the reference model's outputs per key, each once (read_committed).
 * A destroy() (a crash: applied batches never committed): the next instance replays them from the
 * committed offsets and stream time, with the same result. Redis down mid-run (a Redis this test
 * starts, restarted on its AOF): the partitions pause, nothing commits, then it resumes and finishes
 * with the same result.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisServer } from '../../src/harness/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { CommitOffset, OutRecord } from '../../src/kafka/types.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { freePort, LogBook } from '../helpers/child.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, pollUntil, waitCommitted } from '../helpers/kafka.js';
import {
  assertOutputsEqualModel,
  committedWithMetadata,
  HOPPING_FINAL,
  prepare,
  processor,
} from './topology-helpers.js';

/** The default adapter (transactional), aborting the transactions whose call numbers are listed. */
class FailingKafka extends ConfluentKafka {
  calls = 0;
  injected = 0;
  readonly #failAt: Set<number>;

  constructor(groupId: string, failAt: number[]) {
    super({
      brokers: KAFKA_BROKERS.split(','),
      groupId,
      sessionTimeoutMs: 6000,
      maxBatchSize: 20,
      transactionalId: `${groupId}-t`,
    });
    this.#failAt = new Set(failAt);
  }

  override async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    const fail = this.#failAt.has(++this.calls);
    return super.produceTransactionally(records, offsets, () => {
      beforeCommit?.();
      if (fail) {
        this.injected++;
        throw new Error('injected: transaction step failed');
      }
    });
  }
}

describe('topology processor faults', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('aborted transactions: the batches run again from their stream time; outputs still equal the model', async () => {
    const c = HOPPING_FINAL;
    const name = uniqueName('tpk');
    const { built, model, records, produce, cleanup } = await prepare(c, name, 51);
    try {
      await produce(0, records);
      const port = new FailingKafka(name, [2, 5, 9]);
      const p = new TopologyProcessor({ topology: built, redis, kafka: port, groupCommitRecords: 0 });
      await p.start();
      try {
        await waitCommitted(p.groupId, `${name}-orders`, 120_000);
      } finally {
        await p.close();
      }
      assert.equal(port.injected, 3, 'three transactions were aborted');
      const counts = p.counts();
      assert.ok((counts.verdicts.REEMIT ?? 0) > 0, 'batches ran again: their key calls answered REEMIT');
      assert.equal(counts.records, records, 'every record committed once');
      await assertOutputsEqualModel(c, name, model);
    } finally {
      await cleanup();
    }
  });

  it('destroy() with applied batches not committed: the next instance replays them exactly', async () => {
    const c = HOPPING_FINAL;
    const name = uniqueName('tpd');
    const { built, model, records, produce, cleanup } = await prepare(c, name, 52);
    try {
      await produce(0, records);
      // the first instance's every transaction fails after its first commits: it applies batches in
      // Redis that are never committed, then it is destroyed
      const port = new FailingKafka(
        name,
        Array.from({ length: 1000 }, (_, i) => i + 4),
      );
      const first = new TopologyProcessor({ topology: built, redis, kafka: port, groupCommitRecords: 0 });
      await first.start();
      await pollUntil('aborted transactions', () => port.injected >= 3, 120_000);
      await first.destroy();
      const committed = await committedWithMetadata(name, `${name}-orders`);
      const done = [...committed.values()].reduce((n, x) => n + Math.max(0, x.offset), 0);
      assert.ok(done > 0 && done < records, `part of the input was committed (${done} of ${records})`);
      assert.ok((first.counts().verdicts.APPLY ?? 0) > 0);

      const second = processor(built, redis, 'exactly-once', 20);
      await second.start();
      try {
        await waitCommitted(second.groupId, `${name}-orders`, 120_000);
      } finally {
        await second.close();
      }
      assert.ok((second.counts().verdicts.REEMIT ?? 0) > 0, 'the second instance replayed applied batches');
      assert.equal(second.counts().records, records - done, 'it resumed from the committed offsets');
      await assertOutputsEqualModel(c, name, model);
    } finally {
      await cleanup();
    }
  });

  it('Redis down mid-run: paused, nothing committed, then resumed; outputs still equal the model', async () => {
    const c = HOPPING_FINAL;
    const name = uniqueName('tpo');
    const { built, model, records, produce, cleanup } = await prepare(c, name, 53);
    const dir = await mkdtemp(join(tmpdir(), 'redfence-topology-outage-'));
    const server = new RedisServer({ port: await freePort(), dir, persistent: true });
    let own: Redis | undefined;
    try {
      await server.start();
      own = new Redis(server.url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
      own.on('error', () => undefined); // reconnect attempts while it is down
      const book = new LogBook('T');
      const p = new TopologyProcessor({
        topology: built,
        redis: own,
        logger: book.logger(),
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 20 },
      });
      const half = records / 2;
      await produce(0, half);
      await p.start();
      try {
        await waitCommitted(p.groupId, `${name}-orders`, 120_000);
        const before = await committedOffsets(p.groupId, `${name}-orders`);
        await server.shutdown();
        await produce(half, records);
        await book.waitFor('the outage', (l) => /^Redis unavailable: paused/.test(l.msg ?? ''), 30_000);
        assert.deepEqual(
          [...(await committedOffsets(p.groupId, `${name}-orders`))].sort(),
          [...before].sort(),
          'nothing committed while Redis is down',
        );
        const from = book.lines.length;
        await server.start(); // the AOF brings back the counts, fences, epochs and close-time indexes
        await book.waitFor('the resume', (l) => l.msg === 'Redis is back: resumed', 30_000, from);
        assert.equal(p.assignment.length, 3, 'it kept its partitions through the outage');
        await waitCommitted(p.groupId, `${name}-orders`, 120_000);
      } finally {
        await p.close();
      }
      assert.equal(p.counts().records, records);
      await assertOutputsEqualModel(c, name, model);
    } finally {
      own?.disconnect();
      await server.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      await cleanup();
    }
  });
});
