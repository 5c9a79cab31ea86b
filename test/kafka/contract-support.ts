/**
 * What the KafkaPort contract's cases share: a side (topics, ports, a plain writer, the ways it can
 * fail a transaction), and a recorder of what a port hands its handlers, per partition.
 */
import type { TestContext } from 'node:test';
import { pollUntil } from '../../src/harness/poll.js';
import type { ConsumerHandlers, InRecord, KafkaPort } from '../../src/kafka/types.js';

export interface PortSpec {
  groupId: string;
  maxBatchSize?: number;
  /** A transactional producer (produceTransactionally needs it on the real broker). */
  transactional?: boolean;
}

/** A way to make produceTransactionally fail after its records are in the open transaction. */
export interface TxnFailure {
  /** Sets the failure up for the port's next transaction; returns its beforeCommit and what it throws. */
  arm(port: KafkaPort): { beforeCommit?: () => void; rejects: Error | { code: string } };
}

export interface ContractSide {
  /** Creates fresh topics; removed after the test. */
  topics(t: TestContext, specs: { topic: string; partitions: number }[]): Promise<void>;
  /** A consumer instance (not started); stopped after the test. */
  port(t: TestContext, spec: PortSpec): KafkaPort;
  /** Writes a test's input outside any transaction (explicit partitions), awaited. */
  write(topic: string, records: { partition: number; value: string }[]): Promise<void>;
  readonly txnFailures: Readonly<Record<string, TxnFailure>>;
  /** Bound on each wait. */
  readonly waitMs: number;
}

/** A record as compared across sides: bytes as text or hex, offsets as numbers. */
export interface Seen {
  partition: number;
  offset: number;
  key: string | null;
  value: string | null;
  headers: Record<string, string | string[]>;
  timestamp: string;
}

function seen(r: InRecord): Seen {
  const headers: Record<string, string | string[]> = {};
  for (const name of Object.keys(r.headers).sort()) {
    const v = r.headers[name];
    if (v === undefined) continue;
    headers[name] = Array.isArray(v)
      ? v.map((x) => Buffer.from(x).toString('hex'))
      : Buffer.from(v).toString('hex');
  }
  return {
    partition: r.partition,
    offset: Number(r.offset),
    key: r.key === null ? null : r.key.toString('utf8'),
    value: r.value === null ? null : r.value.toString('utf8'),
    headers,
    timestamp: r.timestamp,
  };
}

interface Batch {
  member: string;
  partition: number;
  offsets: number[];
  high: number;
}

/** Records what a port hands its handlers, per partition in delivery order. */
export class Recorder {
  readonly batches: Batch[] = [];
  readonly byPartition = new Map<number, Seen[]>();
  readonly violations: string[] = [];

  add(member: string, partition: number, records: InRecord[], high: string): void {
    const list = this.byPartition.get(partition) ?? [];
    for (const r of records) {
      if (r.partition !== partition)
        this.violations.push(`${member}: a record of ${r.partition} in ${partition}`);
      list.push(seen(r));
    }
    this.byPartition.set(partition, list);
    this.batches.push({
      member,
      partition,
      offsets: records.map((r) => Number(r.offset)),
      high: Number(high),
    });
  }

  offsets(partition: number): number[] {
    return (this.byPartition.get(partition) ?? []).map((r) => r.offset);
  }

  values(partition: number): (string | null)[] {
    return (this.byPartition.get(partition) ?? []).map((r) => r.value);
  }

  count(): number {
    let n = 0;
    for (const l of this.byPartition.values()) n += l.length;
    return n;
  }

  handlers(member = 'p'): ConsumerHandlers {
    return {
      onAssign: async () => undefined,
      onRevoke: async () => undefined,
      onBatch: async (_topic, partition, records, high) => this.add(member, partition, records, high),
    };
  }
}

/**
 * Key or value bytes as the default adapter's client sends them: a zero-length buffer goes as null
 * (a '' value becomes one); a '' key goes as a string and stays empty.
 */
export function asSent(v: Buffer | string | null, kind: 'key' | 'value'): string | null {
  if (v === null || (v.length === 0 && (kind === 'value' || typeof v !== 'string'))) return null;
  return Buffer.from(v).toString('utf8');
}

export const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

export function waitFor(
  side: ContractSide,
  what: string,
  check: () => boolean | Promise<boolean>,
): Promise<void> {
  return pollUntil(what, check, side.waitMs, 10);
}
