/**
 * A processor on the in-memory Kafka with the real standalone Redis, for the commit-pipeline tests:
 * input records over a few keys, a counting definition (each record adds 1, emitting the new count),
 * and checks per key (outputs exactly 1..n, state equal to the committed input).
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { pollUntil } from '../../src/harness/poll.js';
import { defineProcessor, type ProcessingMode, Processor, type ProcessorOptions } from '../../src/index.js';
import { MemoryKafka, type MemoryKafkaPort } from '../../src/testing/index.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';

export const MODES: ProcessingMode[] = ['exactly-once', 'at-least-once'];

/** Polls `check` every few milliseconds until it holds; fails naming `what` after the timeout. */
export function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  return pollUntil(what, check, timeoutMs, 2);
}

/** Awaits `promise`, failing naming `what` if it has not settled within the timeout. */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

export interface PipelineOptions {
  mode: ProcessingMode;
  partitions: number;
  records: number;
  keys: number;
  maxBatchSize: number;
}

type Extra = Omit<ProcessorOptions, 'definition' | 'redis' | 'kafka' | 'mode' | 'groupId'>;

export async function pipeline(t: TestContext, o: PipelineOptions) {
  const ns = uniqueName('mem').replace(/-/g, '_');
  const groupId = `${ns}-g`;
  const kafka = new MemoryKafka({ topics: { in: o.partitions, out: o.partitions, 'in.DLT': 1 } });
  const redis = new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 2 });
  t.after(async () => {
    const keys = await redis.keys(`rf:{${ns}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  const keyOf = (i: number) => `k${i % o.keys}`;
  let total = 0;
  /** Appends `n` more input records over the keys. */
  function more(n: number): void {
    kafka.produce(Array.from({ length: n }, (_, i) => ({ topic: 'in', key: keyOf(total + i), value: '{}' })));
    total += n;
  }
  more(o.records);
  const definition = defineProcessor({
    input: 'in',
    output: 'out',
    store: ns,
    operation: () => ({ op: 'add' as const, by: 1 }),
  });

  /** One more instance of the processor, on a port of its own. */
  function instance(extra: Extra = {}): { port: MemoryKafkaPort; processor: Processor } {
    const port = kafka.port({ groupId, maxBatchSize: o.maxBatchSize });
    const processor = new Processor({
      definition,
      redis,
      kafka: port,
      mode: o.mode,
      groupId,
      watchdog: false,
      ...extra,
    });
    t.after(() => processor.close());
    return { port, processor };
  }

  const keys = Array.from({ length: o.keys }, (_, i) => `k${i}`);

  /** Records consumed-and-committed per key (input offsets below the group's committed offsets). */
  function committedInput(): Map<string, number> {
    const committed = kafka.committedOffsets(groupId, 'in');
    const counts = new Map(keys.map((k) => [k, 0]));
    for (const r of kafka.read('in'))
      if (Number(r.offset) < (committed.get(r.partition) ?? 0)) {
        const k = r.key?.toString() ?? '';
        counts.set(k, (counts.get(k) ?? 0) + 1);
      }
    return counts;
  }

  function committedTotal(): number {
    return [...kafka.committedOffsets(groupId, 'in').values()].reduce((a, b) => a + b, 0);
  }

  /** The output values of each key, in the order they were written (read_committed). */
  function outputs(): Map<string, number[]> {
    const out = new Map(keys.map((k) => [k, [] as number[]]));
    for (const r of kafka.read('out')) out.get(r.key?.toString() ?? '')?.push(Number(r.value?.toString()));
    return out;
  }

  async function state(processor: Processor): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const k of keys) out.set(k, Number((await processor.fence.read(k))?.value?.toString() ?? 0));
    return out;
  }

  /**
   * Each key's state equals its committed input; its outputs are exactly 1..n in order (`exact`), or
   * (at-least-once after a failed step) every value of 1..n at least once and nothing else.
   */
  async function check(processor: Processor, exact: boolean): Promise<void> {
    const expected = committedInput();
    assert.deepEqual(await state(processor), expected, 'state per key equals the committed input');
    const outs = outputs();
    for (const [k, n] of expected) {
      const want = Array.from({ length: n }, (_, i) => i + 1);
      const got = outs.get(k) ?? [];
      if (exact) assert.deepEqual(got, want, `outputs of ${k}`);
      else
        assert.deepEqual(
          [...new Set(got)].sort((a, b) => a - b),
          want,
          `outputs of ${k} (at least once)`,
        );
    }
  }

  /** Waits until every input record is committed. */
  const allCommitted = () => until('every input committed', () => committedTotal() === total);

  return {
    kafka,
    redis,
    groupId,
    instance,
    more,
    committedInput,
    committedTotal,
    outputs,
    check,
    allCommitted,
  };
}
