/**
 * Retry topics of a handler against the real broker and Redis: a record retried through two retry
 * topics is handled after its due times while the main topic keeps flowing; exhausted and fatal
 * records reach the DLT with Spring's headers (read back by src/dead-letter/decode.ts); dlt 'none'
 * drops and counts; keyOrder holds a key's later record behind its retried one; bad options fail
 * before any connection.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { decodeDeadLetter } from '../../src/dead-letter/decode.js';
import {
  createHandler,
  decodeRetryTopicHeaders,
  defineHandler,
  type HandlerOptions,
  KeySpace,
  RedfenceMetrics,
} from '../../src/index.js';
import type { Headers } from '../../src/kafka/types.js';
import { readDueMs } from '../../src/retry/retry-topics.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  produce,
  type ReadRecord,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey } from '../helpers/outputs.js';
import { until } from '../testing/support.js';

type Ev = { id: string; fail?: number; fatal?: boolean };

function headerMap(h: Headers | ReadRecord['headers']): Map<string, Buffer[]> {
  const m = new Map<string, Buffer[]>();
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    const all = (Array.isArray(v) ? v : [v]).map((x) => (typeof x === 'string' ? Buffer.from(x) : x));
    m.set(k, all);
  }
  return m;
}

/** Creates the topics; `cleanup` (one after-hook) closes what the test started first, then deletes them. */
async function topicsFor(
  t: { after(fn: () => unknown): void },
  input: string,
  retry: string[],
): Promise<{ cleanup: (fn: () => Promise<void>) => void }> {
  const drop = await createTopics(
    [input, `${input}.DLT`, ...retry].map((topic) => ({ topic, partitions: 1 })),
  );
  const first: Array<() => Promise<void>> = [];
  t.after(async () => {
    for (const fn of first.reverse()) await fn();
    await drop();
  });
  return { cleanup: (fn) => first.push(fn) };
}

function base(
  name: string,
): Pick<HandlerOptions, 'kafka' | 'groupId' | 'commitIntervalMs' | 'closeTimeoutMs'> {
  return {
    kafka: { brokers: KAFKA_BROKERS.split(',') },
    groupId: `${name}-g`,
    commitIntervalMs: 100,
    closeTimeoutMs: 2000,
  };
}

interface Seen {
  id: string;
  at: number;
  delivery: number;
  attempts: number | undefined;
  due: number;
  ok: boolean;
}

function fatalError(): Error {
  const e = new Error('bad input');
  e.name = 'ValidationError';
  return e;
}

describe('handler retry topics', () => {
  it('retries through the retry topics after their due times while the main topic flows', async (t) => {
    const name = uniqueName('rt_flow').replace(/-/g, '_');
    const input = name;
    const { cleanup } = await topicsFor(t, input, [`${input}-retry-400`, `${input}-retry-800`]);
    const seen: Seen[] = [];
    const metrics = new RedfenceMetrics();
    /** The group's committed offset on the first retry topic when A's delivery from it began. */
    let retryCommittedAtDelivery: number | undefined;
    const h = createHandler(
      defineHandler<Ev>({
        input,
        name,
        handle: async (r, ctx) => {
          if (r.value.id === 'A' && ctx.deliveryAttempt === 2)
            retryCommittedAtDelivery =
              (await committedOffsets(`${name}-g`, `${input}-retry-400`)).get(0) ?? -1;
          const info = decodeRetryTopicHeaders(headerMap(r.headers));
          const s: Seen = {
            id: r.value.id,
            at: Date.now(),
            delivery: ctx.deliveryAttempt,
            attempts: info.attempts,
            due: readDueMs(r.headers),
            ok: ctx.deliveryAttempt > (r.value.fail ?? 0),
          };
          seen.push(s);
          if (!s.ok) throw Object.assign(new Error('try later'), { code: 'EAGAIN' });
        },
      }),
      {
        ...base(name),
        metrics,
        retry: {
          topics: {
            backoff: { kind: 'exponential', delayMs: 400, multiplier: 2, maxDelayMs: 800 },
            maxAttempts: 4,
          },
        },
      },
    );
    cleanup(() => h.close());
    await h.start();
    await produce(input, [{ key: 'a', value: JSON.stringify({ id: 'A', fail: 2 }) }]);
    await until('A failed once', () => seen.some((s) => s.id === 'A'), 30_000);
    await until('A forwarded', () => h.counts().forwarded >= 1);
    await produce(input, [{ key: 'b', value: JSON.stringify({ id: 'B' }) }]);
    await until('A handled', () => seen.some((s) => s.id === 'A' && s.ok), 30_000);
    // Committed offsets only grow: what was committed when A's retry delivery began bounds what was
    // committed at any time while A waited there for its due time.
    assert.ok(retryCommittedAtDelivery !== undefined, "A's delivery from the retry topic was seen");
    assert.ok(retryCommittedAtDelivery <= 0, 'nothing of the retry topic committed while A waits');
    const a = seen.filter((s) => s.id === 'A');
    assert.deepEqual(
      a.map((s) => [s.delivery, s.attempts, s.ok]),
      [
        [1, undefined, false],
        [2, 2, false],
        [3, 3, true],
      ],
      'Spring counts deliveries: the main topic is attempt 1, each retry topic record carries the next',
    );
    for (const s of a.slice(1)) assert.ok(s.at >= s.due, `handled at ${s.at}, due ${s.due}`);
    assert.ok((a[1] as Seen).due - (a[0] as Seen).at >= 400 - 5, 'first step waits 400 ms');
    assert.ok((a[2] as Seen).due - (a[1] as Seen).at >= 800 - 5, 'second step waits 800 ms');
    const b = seen.find((s) => s.id === 'B' && s.ok);
    assert.ok(b && b.at < (a[2] as Seen).at, 'B (another key) was handled before the retry finished');
    await until('committed', () => h.counts().commits > 0 && h.counts().done === 2);
    const ends = async () =>
      Promise.all(
        [input, `${input}-retry-400`, `${input}-retry-800`].map(
          async (topic) => (await committedOffsets(`${name}-g`, topic)).get(0) ?? -1,
        ),
      );
    await until('each topic committed past its handled or forwarded records', async () => {
      const [main, r400, r800] = await ends();
      return main === 2 && r400 === 1 && r800 === 1;
    });
    assert.equal(h.counts().forwarded, 2);
    const text = await metrics.registry.metrics();
    assert.match(text, new RegExp(`redfence_handler_retry_attempts_total\\{topic="${input}-retry-400"\\} 1`));
    assert.match(text, new RegExp(`redfence_handler_retry_attempts_total\\{topic="${input}-retry-800"\\} 1`));
  });

  it('exhausted and fatal records go to the DLT with the kafka_dlt-* and retry_topic-* headers', async (t) => {
    const name = uniqueName('rt_dlt').replace(/-/g, '_');
    const input = name;
    const { cleanup } = await topicsFor(t, input, [`${input}-retry-300`]);
    const h = createHandler(
      defineHandler<Ev>({
        input,
        name,
        handle: async (r) => {
          if (r.value.fatal) throw fatalError();
          throw new Error('still down');
        },
      }),
      { ...base(name), retry: { topics: { backoff: { delayMs: 300 }, maxAttempts: 2 } } },
    );
    cleanup(() => h.close());
    await h.start();
    const before = Date.now();
    await produce(input, [
      { key: 'x', value: JSON.stringify({ id: 'X' }) },
      { key: 'f', value: JSON.stringify({ id: 'F', fatal: true }) },
    ]);
    await until('both dead-lettered', () => h.counts().deadLettered === 2, 30_000);
    const dlt = await readToEnd(`${input}.DLT`);
    // One dead letter per key, each once: X exhausted its attempts, F was fatal.
    const id = (r: ReadRecord) => JSON.parse(r.value as string).id as string;
    const once = { duplicates: 'none' } as const;
    assertPerKey(
      'dead letters',
      dlt,
      id,
      new Map([
        ['x', ['X']],
        ['f', ['F']],
      ]),
      once,
    );
    const byId = new Map(dlt.map((r) => [JSON.parse(r.value as string).id as string, r]));
    const x = byId.get('X') as ReadRecord;
    const f = byId.get('F') as ReadRecord;
    const xi = decodeDeadLetter(headerMap(x.headers));
    assert.equal(xi?.scheme, 'redfence');
    assert.equal(xi?.originalTopic, input, 'the original-* headers name the main topic record');
    assert.equal(xi?.originalOffset, 0n);
    assert.equal(xi?.originalPartition, 0);
    assert.equal(xi?.reason, 'processing-error');
    assert.equal(xi?.exceptionClass, 'redfence.Error');
    assert.equal(x.key, 'x', 'key kept');
    const xr = decodeRetryTopicHeaders(headerMap(x.headers));
    assert.equal(xr.attempts, 2);
    assert.ok(xr.backoffTimestamp !== undefined && xr.backoffTimestamp >= BigInt(before + 300));
    const fi = decodeDeadLetter(headerMap(f.headers));
    assert.equal(fi?.originalTopic, input);
    assert.equal(fi?.originalOffset, 1n);
    assert.equal(fi?.exceptionClass, 'redfence.ValidationError');
    assert.equal(decodeRetryTopicHeaders(headerMap(f.headers)).attempts, undefined, 'fatal: no retry topic');
    const retried = await readToEnd(`${input}-retry-300`);
    assertPerKey('retried (only X went through the retry topic)', retried, id, new Map([['x', ['X']]]), once);
    const original = decodeRetryTopicHeaders(headerMap((retried[0] as ReadRecord).headers)).originalTimestamp;
    assert.equal(xr.originalTimestamp, original, 'the original timestamp is carried on');
    assert.equal(xr.originalTimestamp, xi?.originalTimestamp, "both are the main topic record's timestamp");
  });

  it("dlt 'none' drops a fatal record and counts it", async (t) => {
    const name = uniqueName('rt_none').replace(/-/g, '_');
    const input = name;
    const { cleanup } = await topicsFor(t, input, [`${input}-retry-300`]);
    const metrics = new RedfenceMetrics();
    const h = createHandler(
      defineHandler<Ev>({
        input,
        name,
        // declared on the definition (as `redfence run` loads it)
        retry: { topics: { backoff: { delayMs: 300 }, dlt: 'none' } },
        handle: async (r) => {
          if (r.value.fatal) throw fatalError();
        },
      }),
      { ...base(name), metrics },
    );
    cleanup(() => h.close());
    await h.start();
    await produce(input, [
      { key: 'f', value: JSON.stringify({ id: 'F', fatal: true }) },
      { key: 'g', value: JSON.stringify({ id: 'G' }) },
    ]);
    await until('dropped and done', () => h.counts().dropped === 1 && h.counts().done === 1, 30_000);
    const text = await metrics.registry.metrics();
    assert.match(text, /redfence_handler_retry_dropped_total\{reason="fatal"\} 1/);
    assert.equal((await endOffsets(`${input}.DLT`)).get(0) ?? 0, 0, 'nothing dead-lettered');
  });

  it('keyOrder: a later record of a retried key waits for it; other keys flow', async (t) => {
    const name = uniqueName('rt_order').replace(/-/g, '_');
    const input = name;
    const { cleanup } = await topicsFor(t, input, [`${input}-retry-500`]);
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    cleanup(async () => {
      const keys = await redis.keys(`rf:{${name}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const done: { id: string; at: number }[] = [];
    const ids: string[] = [];
    const h = createHandler(
      defineHandler<Ev>({
        input,
        name,
        handle: async (r, ctx) => {
          if (r.value.id === 'K1') ids.push(ctx.id);
          await ctx.once(async () => {
            if (ctx.deliveryAttempt <= (r.value.fail ?? 0)) throw new Error('try later');
          });
          done.push({ id: r.value.id, at: Date.now() });
        },
      }),
      {
        ...base(name),
        redis,
        retry: { topics: { backoff: { delayMs: 500 }, maxAttempts: 3, keyOrder: true } },
      },
    );
    cleanup(() => h.close());
    await h.start();
    await produce(input, [
      { key: 'k', value: JSON.stringify({ id: 'K1', fail: 1 }) },
      { key: 'k', value: JSON.stringify({ id: 'K2' }) },
      { key: 'o', value: JSON.stringify({ id: 'O1' }) },
    ]);
    await until('all handled', () => done.length === 3, 30_000);
    const order = done.map((d) => d.id);
    assert.ok(order.indexOf('K1') < order.indexOf('K2'), `K1 before K2: ${order.join(',')}`);
    assert.ok(order.indexOf('O1') < order.indexOf('K1'), `O1 not blocked by key k: ${order.join(',')}`);
    assert.deepEqual(ids, [`${input}/0/0`, `${input}/0/0`], 'one id along the chain');
    const ks = new KeySpace({ store: name });
    assert.equal(
      await redis.exists(ks.once(input, 0, `${input}/0/0`)),
      1,
      "the retried record's marker is the input's",
    );
    const list = ks.retryKeyOrder(input, 0, Buffer.from('k'));
    await until('key k unblocked', async () => (await redis.exists(list)) === 0);
  });

  it('refuses bad retry.topics options before connecting, naming the path', () => {
    const def = defineHandler({ input: 'in', name: 'bad', handle: async () => undefined });
    const kafka = { brokers: ['127.0.0.1:1'] };
    const cases: [unknown, RegExp][] = [
      [{ backoff: { kind: 'linear' } }, /retry\.topics\.backoff\.kind/],
      [{ maxAttempts: 1 }, /retry\.topics\.maxAttempts/],
      [{ backoff: { kind: 'fixed', multiplier: 3 } }, /retry\.topics\.backoff\.multiplier/],
      [
        { backoff: { kind: 'exponential', delayMs: 500, maxDelayMs: 100 } },
        /retry\.topics\.backoff\.maxDelayMs/,
      ],
      [{ dlt: 'sometimes' }, /retry\.topics\.dlt/],
      [{ tries: 2 }, /retry\.topics\.tries/],
      [{ keyOrder: true }, /retry\.topics\.keyOrder.*redis/],
    ];
    assert.throws(
      () =>
        defineHandler({
          input: 'in',
          name: 'bad',
          retry: { topics: { backoff: { delayMs: -1 } } },
          handle: async () => undefined,
        }),
      (e: { code?: string; message: string }) =>
        e.code === 'RF_INVALID_OPTIONS' && /retry\.topics\.backoff\.delayMs/.test(e.message),
    );
    for (const [topics, message] of cases)
      assert.throws(
        () => createHandler(def, { kafka, retry: { topics } as HandlerOptions['retry'] }),
        (e: { code?: string; message: string }) => e.code === 'RF_INVALID_OPTIONS' && message.test(e.message),
        JSON.stringify(topics),
      );
  });
});
