/**
 * Reads a dead-letter topic from its earliest offset to the end offsets it has when the read starts,
 * through the library's one log reader (src/kafka/log-reader.ts: assigned, read_committed, never
 * commits): `dlq stats`, `show` and `replay` leave no consumer group offsets behind and change nothing
 * in Kafka. Partitions are read one at a time, in offset order.
 */
import type { ClientSettings } from '../kafka/client-config.js';
import { type LogMessage, LogReader } from '../kafka/log-reader.js';
import { type DeadLetterInfo, decodeDeadLetter } from './decode.js';

/** One record of the dead-letter topic, with its headers decoded. */
export interface DltRecord {
  /** The dead-letter topic's partition and offset (the replay marker's coordinates). */
  partition: number;
  offset: number;
  /** When it was dead-lettered (the DLT record's timestamp), ms since the epoch; -1 when unknown. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  /** Every header in order, repeated names included. */
  headerList: Array<[string, Buffer]>;
  /** Header name -> every value, in order. */
  headers: Map<string, Buffer[]>;
  /** Undefined when the record carries none of the four dead-letter schemes. */
  info: DeadLetterInfo | undefined;
}

export interface DltReadOptions {
  /** Brokers, client id, security and pass-through properties (the group id is made here). */
  client: Omit<ClientSettings, 'groupId'>;
  topic: string;
  /** Connect, metadata and watermark calls, and the most time a partition may go without progress. */
  timeoutMs: number;
  onRecord: (r: DltRecord) => void | Promise<void>;
}

/**
 * A record read from a dead-letter topic, its headers grouped by name and decoded (the four writers of
 * docs/dead-letters.md). `readDeadLetters` and the console's paged reads both make them here.
 *
 * ```ts
 * await reader.read(topic, 0, low, high, (m) => show(toDltRecord(m).info?.reason));
 * ```
 */
export function toDltRecord(m: LogMessage): DltRecord {
  const headers = new Map<string, Buffer[]>();
  for (const [name, b] of m.headers) {
    const list = headers.get(name) ?? [];
    if (list.length === 0) headers.set(name, list);
    list.push(b);
  }
  return {
    partition: m.partition,
    offset: m.offset,
    timestamp: m.timestamp,
    key: m.key,
    value: m.value,
    headerList: m.headers,
    headers,
    info: decodeDeadLetter(headers),
  };
}

/** Reads every partition of the topic to its end; returns partition -> end offset read to. */
export async function readDeadLetters(o: DltReadOptions): Promise<Map<number, number>> {
  const reader = await LogReader.open({ client: o.client, timeoutMs: o.timeoutMs });
  try {
    const count = await reader.partitionCount(o.topic, `dead-letter topic ${o.topic} does not exist`);
    const ends = new Map<number, number>();
    for (let p = 0; p < count; p++) {
      const w = await reader.watermarks(o.topic, p);
      ends.set(p, w.high);
      await reader.read(o.topic, p, w.low, w.high, (m) => o.onRecord(toDltRecord(m)));
    }
    return ends;
  } finally {
    await reader.close();
  }
}
