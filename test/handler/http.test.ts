/**
 * A handler calling a local HTTP server with injected latency and failures, on the real broker and the
 * real Redis, across rebalances (a second instance joins, then the first closes): every record's side
 * effect happens once (the server counts idempotency ids), per-key order is kept (the server sees each
 * key's sequence numbers increase), and no commit is ever past an unfinished record (every commit is
 * checked, before it is sent, against the ids the server has completed).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createHandler, defineHandler, type Handler, type KafkaPort } from '../../src/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

type Ev = { key: string; seq: number };

/** The far side: counts each idempotency id's successful calls and each key's order; fails ~20% of calls. */
function farSide() {
  const done = new Map<string, number>();
  const lastSeq = new Map<string, number>();
  const orderViolations: string[] = [];
  let calls = 0;
  let failed = 0;
  let extraMs = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      calls++;
      const id = String(req.headers['idempotency-key']);
      const ev = JSON.parse(body) as Ev;
      const latency = extraMs + Math.floor(Math.random() * 15);
      setTimeout(() => {
        if (Math.random() < 0.2) {
          failed++;
          res.writeHead(503).end();
          return;
        }
        done.set(id, (done.get(id) ?? 0) + 1);
        const prev = lastSeq.get(ev.key) ?? -1;
        if (ev.seq <= prev) orderViolations.push(`${ev.key}: ${ev.seq} after ${prev}`);
        lastSeq.set(ev.key, ev.seq);
        res.writeHead(200).end();
      }, latency);
    });
  });
  return {
    server,
    done,
    orderViolations,
    stats: () => ({ calls, failed }),
    /** Added latency of every call from now on (slows the first instance while the second joins). */
    slow: (ms: number) => {
      extraMs = ms;
    },
  };
}

describe('handler calling an HTTP service (real broker, real Redis)', () => {
  it('handles every record once, in order per key, never committing past an unfinished record', async (t) => {
    const ns = uniqueName('hh').replace(/-/g, '_');
    const topic = `${ns}-in`;
    const groupId = `${ns}-g`;
    const PARTITIONS = 4;
    const N = 3000;
    const KEYS = 60;
    const drop = await createTopics([
      { topic, partitions: PARTITIONS },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]);
    t.after(drop);
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    t.after(async () => {
      const keys = await redis.keys(`rf:{${ns}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const far = farSide();
    await new Promise<void>((r) => far.server.listen(0, '127.0.0.1', r));
    t.after(() => new Promise<void>((r) => far.server.close(() => r())));
    far.server.unref();
    const url = `http://127.0.0.1:${(far.server.address() as AddressInfo).port}/effect`;

    const events: Ev[] = Array.from({ length: N }, (_, seq) => ({ key: `k${seq % KEYS}`, seq }));
    await produce(
      topic,
      events.map((e) => ({ key: e.key, value: JSON.stringify(e) })),
    );

    const commitViolations: string[] = [];
    const checkedUpTo = new Map<number, number>();
    /** The real adapter, with every commit checked first: all offsets below it are done at the far side. */
    const observed = (port: KafkaPort): KafkaPort =>
      new Proxy(port, {
        get(target, prop) {
          if (prop === 'commit')
            return async (offsets: { topic: string; partition: number; offset: number }[]) => {
              for (const o of offsets) {
                for (let x = checkedUpTo.get(o.partition) ?? 0; x < o.offset; x++)
                  if (!far.done.has(`${o.topic}/${o.partition}/${x}`))
                    commitViolations.push(`${o.partition}@${o.offset}: ${x} unfinished`);
                checkedUpTo.set(o.partition, Math.max(checkedUpTo.get(o.partition) ?? 0, o.offset));
              }
              return target.commit(offsets);
            };
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });

    const def = defineHandler<Ev>({
      input: topic,
      name: ns,
      handle: async (r, ctx) => {
        await ctx.once(async () => {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'idempotency-key': ctx.id, 'content-type': 'application/json' },
            body: JSON.stringify(r.value),
            signal: ctx.signal,
          });
          if (!res.ok) throw Object.assign(new Error(`HTTP ${res.status}`), { retriable: res.status >= 500 });
        });
      },
    });
    const instance = (id: string): Handler =>
      createHandler(def, {
        kafka: observed(
          new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId, clientId: id, maxBatchSize: 200 }),
        ),
        groupId,
        instanceId: id,
        redis,
        concurrency: 32,
        commitIntervalMs: 100,
        retry: { attempts: 10, baseMs: 5, maxMs: 50 },
      });
    const a = instance('a');
    const b = instance('b');
    t.after(() => Promise.all([a.close(), b.close()]));
    await a.start();
    await pollUntil('a third handled', () => far.done.size >= N / 3, 60_000, 20);
    // a slows down while b joins, so b's partitions still have records when it gets them (a fast a
    // could finish them during the rebalance and leave b nothing to do)
    far.slow(200);
    await b.start(); // the group rebalances: some partitions move to b
    await pollUntil('b owns partitions', () => b.assignment.length > 0, 60_000, 20);
    far.slow(0);
    await pollUntil('two thirds handled', () => far.done.size >= (2 * N) / 3, 60_000, 20);
    await a.close(); // a drains and leaves: b takes everything
    await pollUntil('all handled', () => far.done.size === N, 60_000, 20);
    await pollUntil(
      'all committed',
      async () => [...(await committedOffsets(groupId, topic)).values()].reduce((s, o) => s + o, 0) === N,
      60_000,
      100,
    );
    const twice = [...far.done].filter(([, n]) => n !== 1);
    assert.deepEqual(twice, [], 'every side effect exactly once');
    assert.deepEqual(far.orderViolations, [], 'per-key order');
    assert.deepEqual(commitViolations, [], 'no commit past an unfinished record');
    assert.ok(far.stats().failed > 0, 'failures were injected');
    assert.ok(b.counts().done > 0 && a.counts().done > 0, 'both instances worked');
    assert.equal(a.counts().deadLettered + b.counts().deadLettered, 0);
  });
});
