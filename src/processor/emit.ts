/**
 * Emit: a batch's outputs and dead letters, in offset order. APPLY, REBASE and REEMIT give an output
 * (keyed by the input key, with its timestamp); REJECT and a re-emitted rejection give a dead letter, as
 * do records the plan refused and records whose user function threw. Dead letters follow Spring Kafka's
 * format (dead-letter.ts) and are capped in size here.
 */
import { createHash } from 'node:crypto';
import type { RecordResult } from '../fence/index.js';
import type { InRecord, OutRecord } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import type { Applied } from './apply.js';
import type { Counts } from './counts.js';
import { buildDeadLetter, type DeadLetterReason } from './dead-letter.js';
import type { Planned } from './plan.js';

/**
 * A dead letter larger than this (key + value + headers) is sent without its value (the broker's
 * default message.max.bytes is 1 MiB): headers `redfence-value-omitted` (the value's byte length) and
 * `redfence-value-sha256` say so; `kafka_dlt-original-*` locate the record in its topic.
 */
export const MAX_DEAD_LETTER_BYTES = 900_000;

export interface EmitContext {
  readonly outputTopic: string;
  readonly deadLetterTopic: string;
  readonly groupId: string;
  readonly metrics: RedfenceMetrics | undefined;
  readonly counts: Counts;
  readonly log: Logger;
}

/** The records a batch produces, in offset order; counts every verdict on the way. */
export function emit(
  ctx: EmitContext,
  topic: string,
  partition: number,
  planned: readonly Planned[],
  applied: Applied & { results: Map<number, RecordResult> },
): OutRecord[] {
  const { results, outputs, deadFromUser } = applied;
  const out: OutRecord[] = [];
  // the metric is counted once per verdict kind per batch, not per record
  const tally = new Map<string, number>();
  for (const p of planned) {
    const dead = p.dead ?? deadFromUser.get(p.meta.offset);
    if (dead) {
      out.push(deadLetter(ctx, p.record, dead.reason, dead.error));
      continue;
    }
    const r = results.get(p.meta.offset);
    if (r === undefined) continue;
    ctx.counts.verdict(r.verdict);
    tally.set(r.verdict, (tally.get(r.verdict) ?? 0) + 1);
    if (r.verdict === 'REBASE')
      ctx.log.warn(
        { topic, partition, previousPartition: r.previousPartition },
        'REBASE: a key moved partitions',
      );
    if (r.verdict === 'REJECT') out.push(deadLetter(ctx, p.record, 'rejected', new Error(r.reason)));
    else if (r.verdict === 'REEMIT' && 'deadLetter' in r)
      out.push(deadLetter(ctx, p.record, 'rejected', new Error(r.deadLetter)));
    else if (r.verdict === 'APPLY' || r.verdict === 'REBASE' || r.verdict === 'REEMIT') {
      const value = r.verdict === 'REEMIT' ? r.output.value : (r.output?.value ?? outputs.get(p.meta.offset));
      if (value !== undefined) out.push(output(ctx, p.record, value));
    }
  }
  if (ctx.metrics) for (const [verdict, n] of tally) ctx.metrics.verdict(topic, partition, verdict, n);
  return out;
}

/** An output keeps its input record's key and timestamp (event time, as Kafka Streams does). */
function output(ctx: EmitContext, record: InRecord, value: Buffer | string | null): OutRecord {
  const ts = record.timestamp;
  return {
    topic: ctx.outputTopic,
    key: record.key,
    value,
    ...(ts !== undefined && ts !== '' && Number(ts) >= 0 ? { timestamp: ts } : {}),
  };
}

function deadLetter(ctx: EmitContext, record: InRecord, reason: DeadLetterReason, error: unknown): OutRecord {
  ctx.metrics?.deadLetter(reason);
  return deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, record, reason, error);
}

/**
 * A consumed record's dead letter for `topic`, in Spring Kafka's format (dead-letter.ts), capped in
 * size. Shared with the handler runtime (src/handler/), which dead-letters the same way.
 */
export function deadLetterRecord(
  topic: string,
  groupId: string,
  record: InRecord,
  reason: DeadLetterReason,
  error: unknown,
): OutRecord {
  const dl = buildDeadLetter({
    source: {
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      timestamp: record.timestamp,
      key: record.key,
      value: record.value,
      headers: record.headers,
    },
    consumerGroup: groupId,
    reason,
    error,
  });
  const headers = dl.headers as Record<string, Buffer | string | Array<Buffer | string>>;
  let size = (dl.key?.length ?? 0) + (dl.value?.length ?? 0);
  for (const [name, v] of Object.entries(headers))
    for (const x of Array.isArray(v) ? v : [v]) size += name.length + Buffer.byteLength(x);
  if (size > MAX_DEAD_LETTER_BYTES && dl.value !== null) {
    // Too large for the dead-letter topic (the broker would refuse it and the partition would be
    // stuck): the value is left out, its size and SHA-256 kept; the original-* headers locate it.
    const original = dl.value;
    return {
      topic,
      key: dl.key,
      value: null,
      headers: {
        ...headers,
        'redfence-value-omitted': String(original.length),
        'redfence-value-sha256': createHash('sha256').update(original).digest('hex'),
      },
    };
  }
  return { topic, key: dl.key, value: dl.value, headers: dl.headers };
}
