/**
 * After a handler chaos run has drained: the input and dead-letter topics are read back (which record
 * is where, which were dead-lettered), the group's committed offsets taken, and with the far side's
 * calls and the processes' kill and stop times handed to the verdict (src/chaos/handler-verdict.ts).
 */
import type { FarSideCall, FarSideReturn } from './far-side.js';
import { type HandlerResult, type InputPosition, judgeHandlerRun } from './handler-verdict.js';
import type { Instance } from './instances.js';
import { ChaosKafka, type ConnectionConfig, readTopic } from './kafka.js';

export interface JudgeHandlerOptions {
  brokers: string[];
  kafkaConfig?: ConnectionConfig;
  input: string;
  deadLetter: string;
  group: string;
  calls: readonly FarSideCall[];
  /** Every process the run started. */
  instances: readonly Instance[];
  /** The `handle` calls that returned (src/chaos/far-side.ts). */
  returns: readonly FarSideReturn[];
}

const int = (b: Buffer | undefined): number | undefined => {
  if (b === undefined) return undefined;
  if (b.length === 4) return b.readInt32BE(0);
  if (b.length === 8) return Number(b.readBigInt64BE(0));
  const n = Number(b.toString('utf8'));
  return Number.isInteger(n) ? n : undefined;
};

export async function judgeHandler(o: JudgeHandlerOptions): Promise<HandlerResult> {
  const records: InputPosition[] = [];
  await readTopic(
    o.brokers,
    o.input,
    'read_uncommitted',
    (m) => records.push({ partition: m.partition, offset: m.offset, key: m.key?.toString('hex') ?? null }),
    120_000,
    o.kafkaConfig,
  );
  const deadLettered = new Set<string>();
  await readTopic(
    o.brokers,
    o.deadLetter,
    'read_uncommitted',
    (m) => {
      const p = int(m.headers.get('kafka_dlt-original-partition')?.[0]);
      const off = int(m.headers.get('kafka_dlt-original-offset')?.[0]);
      if (p !== undefined && off !== undefined) deadLettered.add(`${p}/${off}`);
    },
    120_000,
    o.kafkaConfig,
  );
  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  // one after the other: the first call connects the admin client (two at once would connect two)
  const committed = await kafka.committedOffsets(o.group, o.input).catch(async (err: Error) => {
    await kafka.close();
    throw err;
  });
  const ends = await kafka.endOffsets(o.input).finally(() => kafka.close());
  const deaths = new Map<string, number>();
  const zombies = new Set<string>();
  for (const i of o.instances) {
    const t = Math.min(i.killedAt ?? Number.POSITIVE_INFINITY, i.stoppedAt ?? Number.POSITIVE_INFINITY);
    if (Number.isFinite(t)) deaths.set(i.name, t);
    if (i.stoppedAt !== undefined) zombies.add(i.name);
  }
  return judgeHandlerRun({
    records,
    deadLettered,
    calls: o.calls,
    deaths,
    zombies,
    committed,
    ends,
    returns: o.returns,
  });
}
