/**
 * The handler runtime on the in-memory Kafka (fast; the guarantees are proven again against the real
 * broker in http.test.ts): order within a key with concurrency across keys, commits never past an
 * unfinished record, retries then the dead-letter topic, classification, bounds, the close rule and
 * options refused before any connection.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import {
  createHandler,
  defineHandler,
  type HandlerOptions,
  type Logger,
  RedfenceError,
  RedfenceMetrics,
  readDeadLetterHeaders,
} from '../../src/index.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { uniqueName } from '../helpers/env.js';
import { until, within } from '../testing/support.js';

type Order = { key: string; seq: number };

function setup(partitions: number, maxBatchSize = 50) {
  const kafka = new MemoryKafka({ topics: { in: partitions, 'in.DLT': 1 } });
  const groupId = uniqueName('h');
  const port = kafka.port({ groupId, maxBatchSize });
  const produce = (n: number, keys: number, from = 0) =>
    kafka.produce(
      Array.from({ length: n }, (_, i) => {
        const seq = from + i;
        const key = `k${seq % keys}`;
        return { topic: 'in', key, value: JSON.stringify({ key, seq }) };
      }),
    );
  const committed = (p: number) => kafka.committedOffsets(groupId, 'in').get(p) ?? -1;
  const options = (extra: Partial<HandlerOptions> = {}): HandlerOptions => ({
    kafka: port,
    groupId,
    commitIntervalMs: 10,
    retry: { attempts: 3, baseMs: 1, maxMs: 5 },
    ...extra,
  });
  return { kafka, port, produce, committed, options };
}

const gate = () => {
  let open!: () => void;
  const p = new Promise<void>((r) => {
    open = r;
  });
  return { p, open };
};

describe('handler on the in-memory Kafka', () => {
  it('keeps order within a key, runs keys concurrently, commits every partition to its end', async (t) => {
    const { kafka, produce, committed, options } = setup(4);
    const N = 2000;
    produce(N, 40);
    const seen = new Map<string, number[]>();
    let running = 0;
    let most = 0;
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'order',
        handle: async (r) => {
          running++;
          most = Math.max(most, running);
          await new Promise((res) => setImmediate(res));
          const list = seen.get(r.value.key) ?? [];
          list.push(r.value.seq);
          seen.set(r.value.key, list);
          running--;
        },
      }),
      options({ concurrency: 16 }),
    );
    t.after(() => h.close());
    await h.start();
    await until('all handled', () => h.counts().done === N);
    const hw = kafka.highWatermarks('in');
    await until('committed to the end', () => [0, 1, 2, 3].every((p) => committed(p) === hw.get(p)));
    // Per key: every record of the key handled exactly once, in offset order (a total or a sortedness
    // check cannot see one lost and another duplicated).
    const want = new Map<string, number[]>();
    for (let seq = 0; seq < N; seq++) want.set(`k${seq % 40}`, [...(want.get(`k${seq % 40}`) ?? []), seq]);
    assert.deepEqual([...seen.keys()].sort(), [...want.keys()].sort(), 'the keys handled');
    for (const [key, seqs] of want)
      assert.deepEqual(seen.get(key), seqs, `key ${key}: each record once, in order`);
    assert.ok(most > 1 && most <= 16, `concurrency ${most}`);
  });

  it('never commits past an unfinished record', async (t) => {
    const { produce, committed, options } = setup(1);
    produce(100, 100); // a key per record: only the held record waits
    const held = gate();
    const metrics = new RedfenceMetrics();
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'hold',
        handle: async (r) => {
          if (r.offset === 37) await held.p;
        },
      }),
      options({ closeTimeoutMs: 100, metrics }),
    );
    t.after(() => h.close());
    t.after(() => held.open());
    await h.start();
    await until('the other keys done', () => h.counts().done === 99);
    await until('committed up to the held record', () => committed(0) === 37);
    // every other record is done, the commit stays at the held one: a negative check, so it waits five
    // commit intervals (commitIntervalMs 10) for a commit that must not come; no event marks "no commit"
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(committed(0), 37);
    const text = await metrics.metricsText();
    assert.match(text, /redfence_handler_in_flight_records\{topic="in",partition="0"\} 1\n/);
    assert.match(text, /redfence_handler_records_total\{topic="in",partition="0",outcome="done"\} 99\n/);
    held.open();
    await until('committed to the end', () => committed(0) === 100);
  });

  it('retries retriable failures, then dead-letters; fatal and undecodable go at once; the partition goes on', async (t) => {
    const { kafka, produce, committed, options } = setup(1);
    produce(10, 10);
    kafka.produce([{ topic: 'in', key: 'bad', value: '{not json SECRET-42' }]);
    const attempts = new Map<number, number>();
    const lines: Array<Record<string, unknown>> = [];
    const at = (level: string) => (o: object, msg?: string) => lines.push({ level, msg, ...o });
    const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'fail',
        classify: { fatal: { codes: ['DECLINED'] } },
        handle: async (r, ctx) => {
          attempts.set(r.value.seq, ctx.attempt);
          if (r.value.seq === 2) throw new Error('always down');
          if (r.value.seq === 3) throw Object.assign(new Error('declined'), { code: 'DECLINED' });
          if (r.value.seq === 4 && ctx.attempt < 3) throw new Error('flaky');
        },
      }),
      options({ logger }),
    );
    t.after(() => h.close());
    await h.start();
    await until('committed to the end', () => committed(0) === 11);
    assert.equal(attempts.get(2), 3, 'retried up to retry.attempts');
    assert.equal(attempts.get(3), 1, 'fatal by code: no retry');
    assert.equal(attempts.get(4), 3, 'succeeded on its third try');
    assert.deepEqual(h.counts().done, 8);
    assert.deepEqual(h.counts().deadLettered, 3);
    // in the order they failed, not offset order: records of different keys run concurrently
    const letters = kafka.read('in.DLT').map((r) => readDeadLetterHeaders(r.headers));
    assert.deepEqual(
      letters
        .map((d) => [Number(d.originalOffset), d.reason, d.exceptionFqcn])
        .sort((a, b) => Number(a[0]) - Number(b[0])),
      [
        [2, 'processing-error', 'redfence.Error'],
        [3, 'processing-error', 'redfence.Error'],
        [10, 'undecodable', 'redfence.RedfenceError'],
      ],
    );
    // logs name the record by topic/partition/offset, never its value or the error's message
    const dead = lines.filter((l) => l.msg === 'dead-lettering the record');
    assert.deepEqual(dead.map((l) => [l.topic, l.partition, l.offset]).sort(), [
      ['in', 0, '10'],
      ['in', 0, '2'],
      ['in', 0, '3'],
    ]);
    const all = JSON.stringify(lines);
    for (const secret of ['SECRET-42', 'always down', 'declined', '"seq"'])
      assert.ok(!all.includes(secret), secret);
  });

  it('pauses a partition whose key has maxPerKey records waiting, and resumes it', async (t) => {
    const { port, produce, committed, options } = setup(1, 2);
    produce(60, 1); // one hot key
    const held = gate();
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'bound',
        handle: async (r) => {
          if (r.value.seq === 0) await held.p;
        },
      }),
      options({ maxPerKey: 8, closeTimeoutMs: 100 }),
    );
    t.after(() => h.close());
    t.after(() => held.open());
    await h.start();
    await until('the key is full', () => h.inFlight.records >= 8);
    // the consumer has delivered all it will: the partition is paused, so nothing more comes
    await within('the paused consumer idle', port.idle());
    // accepted whole batches of 2: at most maxPerKey + one batch
    assert.ok(h.inFlight.records <= 10, `buffered ${h.inFlight.records}`);
    held.open();
    await until('committed to the end', () => committed(0) === 60);
    assert.equal(h.counts().done, 60);
  });

  it('close(): running calls get closeTimeoutMs (finished ones are committed), then are abandoned (ctx.signal), never committed', async (t) => {
    const { produce, committed, options } = setup(1);
    produce(5, 5);
    let reason: unknown;
    const slow = gate();
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'close',
        handle: async (r, ctx) => {
          if (r.offset === 1) return slow.p; // finishes during the drain
          if (r.offset !== 3) return;
          await new Promise<void>((res) =>
            ctx.signal.addEventListener('abort', () => {
              reason = ctx.signal.reason;
              res();
            }),
          );
          throw ctx.signal.reason;
        },
      }),
      options({ closeTimeoutMs: 100 }),
    );
    t.after(() => h.close());
    await h.start();
    await until('the others done', () => h.counts().done === 3);
    const closing = h.close();
    slow.open();
    await within('close', closing, 5000);
    assert.ok(RedfenceError.is(reason, 'RF_HANDLER_ABANDONED'));
    assert.equal(committed(0), 3, 'past the record finished during the drain, up to the abandoned one');
    assert.equal(h.counts().abandoned, 1);
    assert.equal(h.state, 'closed');
  });

  it('retry.attemptTimeoutMs: a call past it fails with RF_HANDLER_TIMEOUT and is retried; one that ignores the signal keeps its key', async (t) => {
    const { kafka, produce, committed, options } = setup(1);
    // k0: seq 0 hangs on its first attempt until the signal aborts, then seq 3 of the same key;
    // k1: seq 1 ignores the signal and returns after three deadlines (a success); k2: seq 2 always hangs
    produce(4, 3);
    const calls: Array<[number, number]> = [];
    const reasons: unknown[] = [];
    const running = new Set<string>();
    const overlaps: string[] = [];
    const untilAborted = (signal: AbortSignal) =>
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    const h = createHandler(
      defineHandler<Order>({
        input: 'in',
        name: 'deadline',
        handle: async (r, ctx) => {
          calls.push([r.value.seq, ctx.attempt]);
          if (running.has(r.value.key)) overlaps.push(`${r.value.key} seq ${r.value.seq}`);
          running.add(r.value.key);
          try {
            if ((r.value.seq === 0 && ctx.attempt === 1) || r.value.seq === 2) {
              await untilAborted(ctx.signal).catch((e) => {
                reasons.push(e);
                throw new Error('the far side hung up');
              });
            }
            // ignores the signal as a failure: returns normally once its deadline has passed
            if (r.value.seq === 1 && !ctx.signal.aborted) await once(ctx.signal, 'abort');
          } finally {
            running.delete(r.value.key);
          }
        },
      }),
      options({ retry: { attempts: 2, baseMs: 1, maxMs: 5, attemptTimeoutMs: 30 } }),
    );
    t.after(() => h.close());
    await h.start();
    await until('committed to the end', () => committed(0) === 4);
    assert.deepEqual(
      calls.sort((a, b) => a[0] - b[0] || a[1] - b[1]),
      [
        [0, 1],
        [0, 2],
        [1, 1],
        [2, 1],
        [2, 2],
        [3, 1],
      ],
      'seq 0 and 2 tried again after their deadline; seq 1 (past its deadline, but it returned) once',
    );
    assert.ok(reasons.length === 3 && reasons.every((e) => RedfenceError.is(e, 'RF_HANDLER_TIMEOUT')));
    assert.deepEqual(overlaps, [], 'no second call of a key while one runs');
    assert.equal(h.counts().done, 3);
    assert.equal(h.counts().deadLettered, 1);
    const [letter] = kafka.read('in.DLT').map((r) => readDeadLetterHeaders(r.headers));
    assert.equal(Number(letter?.originalOffset), 2);
    assert.match(letter?.exceptionMessage ?? '', /in\/0@2: handle ran past 30 ms/);
  });

  it('refuses bad options before any connection, naming the path', () => {
    const def = defineHandler({ input: 'in', name: 'opts', handle: async () => undefined });
    const kafka = { brokers: ['127.0.0.1:1'] };
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ kafka, concurrancy: 4 }, /unknown handler option "concurrancy"/],
      [
        { kafka: { brokers: ['127.0.0.1:1'], sessionTimeout: 1 } },
        /unknown handler option "kafka.sessionTimeout"/,
      ],
      [{ kafka, retry: { attempts: 0 } }, /"retry.attempts" must be an integer from 1/],
      [{ kafka, retry: { tries: 2 } }, /unknown handler option "retry.tries"/],
      [{ kafka, retry: { attemptTimeoutMs: -1 } }, /"retry.attemptTimeoutMs" must be an integer from 0/],
      [{ kafka, retry: { baseMs: 500, maxMs: 100 } }, /retry.maxMs/],
      [{ kafka, postgres: { table: 'x' } }, /"postgres.pool" is required/],
      [{ kafka, postgres: { pool: { connect() {} }, table: 'a;drop' } }, /postgres.table/],
      [{ kafka, concurrency: 0 }, /"concurrency" must be an integer/],
      [{ kafka, redis: {} }, /"redis" must be an ioredis/],
    ];
    for (const [o, re] of bad)
      assert.throws(
        () => createHandler(def, o as unknown as HandlerOptions),
        (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && re.test((e as Error).message),
        String(re),
      );
    assert.throws(
      () => defineHandler({ input: 'in', name: 'bad name', handle: async () => undefined }),
      /handler definition: name must match/,
    );
    assert.throws(
      () =>
        defineHandler({
          input: 'in',
          name: 'n',
          handle: async () => undefined,
          classify: { fatal: { code: [] } },
        } as never),
      /classify\.fatal\.code is not a known field/,
    );
  });
});
