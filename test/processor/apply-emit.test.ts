/**
 * The stages plan -> apply -> emit on a real Redis (strict and cluster fencing on one Redis): outputs in
 * offset order from the verdicts by record index; a user function that throws dead-letters its record
 * only (a retriable throw retried first); a batch delivered again re-emits the same outputs (REEMIT);
 * every verdict counted.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ProcessorDefinition } from '../../src/definition/definition.js';
import { Fence } from '../../src/index.js';
import type { InRecord } from '../../src/kafka/types.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { applyAll } from '../../src/processor/apply.js';
import { Counts } from '../../src/processor/counts.js';
import { emit } from '../../src/processor/emit.js';
import { jsonDecode, plan } from '../../src/processor/plan.js';
import { userCaller } from '../../src/processor/user-call.js';
import { silentLogger } from '../../src/runtime/logger.js';
import { standalone, uniqueName } from '../helpers/env.js';

const TOPIC = 'apply-emit';
const keys: string[] = [];
for (let i = 0; keys.length < 3; i++) if (partitionFor(Buffer.from(`c${i}`), 2) === 0) keys.push(`c${i}`);

function records(from: number, rows: Array<[string, unknown]>): InRecord[] {
  return rows.map(([key, value], i) => ({
    topic: TOPIC,
    partition: 0,
    offset: String(from + i),
    key: Buffer.from(key),
    value: Buffer.from(JSON.stringify(value)),
    headers: {},
    timestamp: String(1_000 + from + i),
  }));
}

const retriable = () => Object.assign(new Error('try again'), { retriable: true });

describe('plan -> apply -> emit on Redis', { timeout: 60_000 }, () => {
  const redis = standalone();
  after(() => redis.disconnect());
  const signal = new AbortController().signal;
  const callUser = userCaller(2, signal);
  const planCtx = { decode: jsonDecode, partitionCount: 2, partitionCounts: [2], callUser };

  const run = async (
    definition: ProcessorDefinition<unknown, unknown>,
    fence: Fence,
    epoch: number,
    batch: InRecord[],
    counts: Counts,
  ) => {
    const planned = await plan(planCtx, TOPIC, 0, batch);
    const ctx = {
      definition,
      fence,
      redisStep: <T>(_w: string, fn: () => Promise<T>) => fn(),
      callUser,
      signal,
    };
    const applied = await applyAll(ctx, { topic: TOPIC, partition: 0, epoch, committed: 0 }, planned);
    assert.notEqual(applied.results, 'FENCED');
    const emitCtx = {
      outputTopic: 'out',
      deadLetterTopic: 'dlq',
      groupId: 'g',
      metrics: undefined,
      counts,
      log: silentLogger,
    };
    return emit(emitCtx, TOPIC, 0, planned, applied as Parameters<typeof emit>[4]);
  };
  const [a, b, c] = keys as [string, string, string];
  const batch = records(0, [
    [a, { n: 1 }],
    [b, { n: 2 }],
    [a, { n: 'boom' }],
    [c, { n: 'again' }],
    [b, { n: 3 }],
    [a, { n: 4 }],
  ]);

  for (const mode of ['strict', 'cluster'] as const) {
    it(`operation: outputs in offset order, a throw dead-lettered alone, a replay re-emitted (${mode})`, async () => {
      const fence = new Fence({ redis, store: uniqueName('ae'), mode });
      const epoch = await fence.acquireEpoch(TOPIC, 0);
      let again = 0;
      const definition = {
        input: TOPIC,
        output: 'out',
        operation: (v: { n: unknown }) => {
          if (v.n === 'boom') throw new Error('boom');
          if (v.n === 'again' && again++ === 0) throw retriable();
          return { op: 'add', by: typeof v.n === 'number' ? v.n : 10 };
        },
      } as unknown as ProcessorDefinition<unknown, unknown>;
      const counts = new Counts();
      const out = await run(definition, fence, epoch, batch, counts);
      const seen = out.map(
        (o) => `${o.topic}:${String(o.key)}:${o.value === null ? 'null' : String(o.value)}`,
      );
      assert.deepEqual(seen, [
        `out:${a}:1`,
        `out:${b}:2`,
        `dlq:${a}:{"n":"boom"}`,
        `out:${c}:10`,
        `out:${b}:5`,
        `out:${a}:5`,
      ]);
      assert.equal(out[0]?.timestamp, '1000');
      assert.equal(again, 2, 'the retriable throw was retried once');
      assert.deepEqual(counts.snapshot().verdicts, { APPLY: 5 });
      // delivered again: the same outputs from the pending entries, the throw dead-lettered again
      const counts2 = new Counts();
      const replay = await run(definition, fence, epoch, batch, counts2);
      assert.deepEqual(
        replay.map((o) => `${o.topic}:${String(o.key)}:${o.value === null ? 'null' : String(o.value)}`),
        seen,
      );
      assert.deepEqual(counts2.snapshot().verdicts, { REEMIT: 5 });
    });
  }

  it('reduce: a throw dead-lettered alone, the others folded in offset order', async () => {
    const fence = new Fence({ redis, store: uniqueName('ae'), mode: 'strict' });
    const epoch = await fence.acquireEpoch(TOPIC, 0);
    const definition = {
      input: TOPIC,
      output: 'out',
      reduce: (state: { sum: number } | null, v: { n: unknown }) => {
        if (typeof v.n !== 'number') throw new Error('not a number');
        return { state: { sum: (state?.sum ?? 0) + v.n } };
      },
    } as unknown as ProcessorDefinition<unknown, unknown>;
    const counts = new Counts();
    const out = await run(definition, fence, epoch, batch, counts);
    assert.deepEqual(
      out.map((o) => `${o.topic}:${String(o.key)}:${String(o.value)}`),
      [
        `out:${a}:{"sum":1}`,
        `out:${b}:{"sum":2}`,
        `dlq:${a}:{"n":"boom"}`,
        `dlq:${c}:{"n":"again"}`,
        `out:${b}:{"sum":5}`,
        `out:${a}:{"sum":5}`,
      ],
    );
    assert.deepEqual(counts.snapshot().verdicts, { APPLY: 4 });
  });

  // A reducer's throw is kept in Redis as a dead letter (the value unchanged, the fence past it): once a
  // later record of the key moved the fence, a replay of the batch (its Kafka step failed, or the
  // process died before the commit) answers REEMIT with it, where it answered SKIP and lost it before.
  for (const mode of ['strict', 'cluster'] as const)
    it(`reduce: a batch delivered again makes the throw of a key with later records a dead letter again (${mode})`, async () => {
      const fence = new Fence({ redis, store: uniqueName('ae'), mode });
      const epoch = await fence.acquireEpoch(TOPIC, 0);
      const definition = {
        input: TOPIC,
        output: 'out',
        reduce: (state: { sum: number } | null, v: { n: unknown }) => {
          if (typeof v.n !== 'number') throw new TypeError('not a number');
          return { state: { sum: (state?.sum ?? 0) + v.n } };
        },
      } as unknown as ProcessorDefinition<unknown, unknown>;
      const show = (o: { topic: string; key: unknown; value: unknown; headers?: Record<string, unknown> }) =>
        `${o.topic}:${String(o.key)}:${String(o.value)}${
          o.topic === 'dlq'
            ? ` ${String(o.headers?.['redfence-reason'])} ${String(o.headers?.['kafka_dlt-exception-fqcn'])} ${String(o.headers?.['kafka_dlt-exception-message'])}`
            : ''
        }`;
      const counts = new Counts();
      const first = (await run(definition, fence, epoch, batch, counts)).map(show);
      assert.deepEqual(first, [
        `out:${a}:{"sum":1}`,
        `out:${b}:{"sum":2}`,
        `dlq:${a}:{"n":"boom"} processing-error redfence.TypeError not a number`,
        `dlq:${c}:{"n":"again"} processing-error redfence.TypeError not a number`,
        `out:${b}:{"sum":5}`,
        `out:${a}:{"sum":5}`,
      ]);
      assert.deepEqual(
        counts.snapshot().verdicts,
        { APPLY: 4 },
        'the kept throws are not counted as verdicts',
      );
      // a's throw is below a's fence now: kept as a dead letter, the value unchanged by it
      assert.equal((await fence.read(a))?.value?.toString(), '{"sum":5}');
      const again = new Counts();
      const replay = (await run(definition, fence, epoch, batch, again)).map(show);
      assert.deepEqual(replay, first, 'the same outputs and dead letters, with the same headers');
      assert.deepEqual(again.snapshot().verdicts, { REEMIT: 6 });
    });
});
