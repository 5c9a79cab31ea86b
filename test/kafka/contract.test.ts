/**
 * One KafkaPort contract (test/kafka/contract-cases.ts), run against MemoryKafka's port and against
 * the default adapter on the real broker: the broker is the reference, so MemoryKafka behaving
 * otherwise fails here. Differences kept on purpose are in docs/testing.md.
 */
import { describe } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { KafkaPort } from '../../src/kafka/types.js';
import { MemoryKafka, type MemoryKafkaPort } from '../../src/testing/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, produce } from '../helpers/kafka.js';
import { type ContractSide, contractCases } from './contract-cases.js';

/** What a transaction's beforeCommit throws to fail it inside the open transaction (both sides). */
const throwing = {
  arm: () => {
    const err = new Error('failed inside the transaction');
    return {
      beforeCommit: () => {
        throw err;
      },
      rejects: err,
    };
  },
};

function memorySide(): ContractSide {
  const kafka = new MemoryKafka();
  return {
    topics: async (_t, specs) => {
      for (const s of specs) kafka.createTopic(s.topic, s.partitions);
    },
    port: (t, spec) => {
      const port = kafka.port({
        groupId: spec.groupId,
        ...(spec.maxBatchSize === undefined ? {} : { maxBatchSize: spec.maxBatchSize }),
      });
      t.after(() => port.stop());
      return port;
    },
    write: async (topic, records) => {
      kafka.produce(records.map((r) => ({ topic, key: null, value: r.value, partition: r.partition })));
    },
    txnFailures: {
      'beforeCommit throws': throwing,
      'failNext(transaction)': {
        arm: (port) => {
          (port as MemoryKafkaPort).failNext('transaction');
          return { rejects: { code: 'INJECTED' } };
        },
      },
    },
    waitMs: 5_000,
  };
}

function brokerSide(): ContractSide {
  // a test's ports stop before its topics go (a revocation's commit on a deleted topic never lands)
  const ports = new WeakMap<object, KafkaPort[]>();
  return {
    topics: async (t, specs) => {
      const drop = await createTopics(specs);
      t.after(async () => {
        await Promise.all((ports.get(t) ?? []).map((p) => p.stop()));
        await drop();
      });
    },
    port: (t, spec) => {
      const port = new ConfluentKafka({
        brokers: KAFKA_BROKERS.split(','),
        groupId: spec.groupId,
        // the broker's lowest: a member learns of a rebalance within a heartbeat (1.2 s)
        sessionTimeoutMs: 6_000,
        ...(spec.maxBatchSize === undefined ? {} : { maxBatchSize: spec.maxBatchSize }),
        ...(spec.transactional ? { transactionalId: uniqueName('contract-txn') } : {}),
      });
      ports.set(t, [...(ports.get(t) ?? []), port]);
      t.after(() => port.stop());
      return port;
    },
    write: (topic, records) =>
      produce(
        topic,
        records.map((r) => ({ key: null, value: r.value, partition: r.partition })),
      ),
    txnFailures: { 'beforeCommit throws': throwing },
    waitMs: 30_000,
  };
}

describe('KafkaPort contract: MemoryKafka', { timeout: 30_000 }, () => contractCases(memorySide()));

describe('KafkaPort contract: the default adapter on the broker', { timeout: 90_000 }, () =>
  contractCases(brokerSide()),
);
