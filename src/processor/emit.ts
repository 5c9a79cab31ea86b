/**
 * Emit: a batch's outputs and dead letters, in offset order. APPLY, REBASE and REEMIT give an output
 * (keyed by the input key, with its timestamp); REJECT and a re-emitted rejection give a dead letter, as
 * do records the plan refused and records whose user function threw. Dead letters follow Spring Kafka's
 * format and are capped in size (src/dead-letter/record.ts).
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import { deadLetterRecord } from '../dead-letter/record.js';
import { type BatchResults, V, VERDICT_OF } from '../fence/index.js';
import type { InRecord, OutRecord } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import type { Applied } from './apply.js';
import type { Counts } from './counts.js';
import type { Planned } from './plan.js';
import { fromStoredDeadLetter } from './stored-dead-letter.js';

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
  applied: Applied & { results: BatchResults },
): OutRecord[] {
  const { results, outputs, deadFromUser } = applied;
  const { verdicts, rare } = results;
  const out: OutRecord[] = [];
  // counted once per verdict kind per batch, not per record
  const tally = new Uint32Array(V.REJECT + 1);
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i] as Planned;
    const dead = p.dead ?? (deadFromUser.size === 0 ? undefined : deadFromUser.get(i));
    if (dead) {
      out.push(deadLetter(ctx, p.record, dead.reason, dead.error));
      continue;
    }
    const v = verdicts[i] as number;
    if (v === 0) continue;
    tally[v] = (tally[v] as number) + 1;
    if (v === V.APPLY) {
      const value = results.outputs[i] ?? outputs[i];
      if (value !== undefined) out.push(output(ctx, p.record, value));
    } else if (v === V.REEMIT) {
      const r = rare.size === 0 ? undefined : rare.get(i);
      if (r?.verdict === 'REEMIT' && 'deadLetter' in r) {
        // a rejection, or a reducer's throw the fence kept (stored-dead-letter.ts)
        const { reason, error } = fromStoredDeadLetter(r.deadLetter);
        out.push(deadLetter(ctx, p.record, reason, error));
      } else {
        const value = results.outputs[i];
        if (value !== undefined) out.push(output(ctx, p.record, value));
      }
    } else if (v === V.REBASE) {
      const r = rare.get(i);
      ctx.log.warn(
        { topic, partition, previousPartition: r?.verdict === 'REBASE' ? r.previousPartition : undefined },
        'REBASE: a key moved partitions',
      );
      const value = results.outputs[i] ?? outputs[i];
      if (value !== undefined) out.push(output(ctx, p.record, value));
    } else if (v === V.REJECT) {
      const r = rare.get(i);
      out.push(deadLetter(ctx, p.record, 'rejected', new Error(r?.verdict === 'REJECT' ? r.reason : '')));
    }
  }
  for (let v = 0; v < tally.length; v++) {
    const n = tally[v] as number;
    if (n === 0) continue;
    const verdict = VERDICT_OF[v] as NonNullable<(typeof VERDICT_OF)[number]>;
    ctx.counts.verdict(verdict, n);
    ctx.metrics?.verdict(topic, partition, verdict, n);
  }
  return out;
}

/** An output keeps its input record's key and timestamp (event time, as Kafka Streams does). */
function output(ctx: EmitContext, record: InRecord, value: Buffer | string | null): OutRecord {
  const ts = record.timestamp;
  return ts !== undefined && ts !== '' && Number(ts) >= 0
    ? { topic: ctx.outputTopic, key: record.key, value, timestamp: ts }
    : { topic: ctx.outputTopic, key: record.key, value };
}

function deadLetter(ctx: EmitContext, record: InRecord, reason: DeadLetterReason, error: unknown): OutRecord {
  ctx.metrics?.deadLetter(reason);
  return deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, record, reason, error);
}
