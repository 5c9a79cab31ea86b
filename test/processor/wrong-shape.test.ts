/**
 * A reducer that returns the state itself instead of `{ state }`, or an operation that returns no known
 * operation, is treated like a throw (real broker and Redis): the record goes to the dead-letter topic
 * with RF_USER_RESULT naming the function and the type of what it returned (never the value), the
 * partition moves past it (committed to the end), and the other keys' records are applied and emitted.
 * Before, the codec failed the whole batch (`records[0].output.value must be a string or a
 * Uint8Array/Buffer, got undefined`) and it was delivered again for ever: nothing committed, no output.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import {
  defineProcessor,
  Processor,
  type ProcessorDefinition,
  readDeadLetterHeaders,
} from '../../src/index.js';
import { checkOperation, checkReduction } from '../../src/processor/user-result.js';
import { standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';

const SECRET = 'secret-value-7f3a';

async function run(
  redis: Redis,
  ns: string,
  definition: (ns: string) => ProcessorDefinition<unknown, unknown>,
) {
  after(
    await createTopics([
      { topic: `${ns}-in`, partitions: 2 },
      { topic: `${ns}-out`, partitions: 2 },
      { topic: `${ns}-in.DLT`, partitions: 2 },
    ]),
  );
  // keys good-0..3 and one bad key: 5 records each, the bad key's values carry a marker
  const msgs = Array.from({ length: 25 }, (_, i) => {
    const key = i % 5 === 4 ? 'bad' : `good-${i % 5}`;
    return { key, value: JSON.stringify({ n: 1, note: key === 'bad' ? SECRET : 'ok' }) };
  });
  await produce(`${ns}-in`, msgs);
  const p = new Processor({
    definition: definition(ns),
    redis,
    groupId: `${ns}-g`,
    kafka: { brokers: (process.env.KAFKA_BROKERS || '127.0.0.1:19092').split(','), sessionTimeoutMs: 6000 },
  });
  after(() => p.close());
  await p.start();
  const end = await endOffsets(`${ns}-in`);
  await pollUntil(
    'the group committed to the end of every partition',
    async () => {
      const c = await committedOffsets(`${ns}-g`, `${ns}-in`);
      return [...end].every(([part, e]) => c.get(part) === e);
    },
    60_000,
    100,
  );
  const outputs = await readToEnd(`${ns}-out`);
  const dead = await readToEnd(`${ns}-in.DLT`);
  return { outputs, dead };
}

describe('a reduce or operation that returns the wrong shape (real broker and Redis)', {
  timeout: 120_000,
}, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('reduce returning the state itself: dead-lettered with the reason, the partition goes on', async () => {
    const ns = uniqueName('shape-reduce');
    const { outputs, dead } = await run(
      redis,
      ns,
      (n) =>
        defineProcessor({
          input: `${n}-in`,
          output: `${n}-out`,
          store: n,
          reduce: (s: { count: number } | null, v: { n: number; note: string }, meta) => {
            const next = { count: (s?.count ?? 0) + v.n };
            // the slip: the state itself for one key (as an untyped module would write it)
            return (meta.key === 'bad' ? next : { state: next }) as never;
          },
        }) as ProcessorDefinition<unknown, unknown>,
    );
    const last = new Map<string, number>();
    for (const r of outputs) last.set(r.key as string, JSON.parse(r.value as string).count);
    assert.deepEqual(
      [...last].sort(),
      [
        ['good-0', 5],
        ['good-1', 5],
        ['good-2', 5],
        ['good-3', 5],
      ],
      'each other key applied five times, the bad key never',
    );
    assert.equal(dead.length, 5, 'the bad key: five dead letters');
    for (const d of dead) {
      assert.equal(d.key, 'bad');
      const h = readDeadLetterHeaders(d.headers);
      assert.equal(h.reason, 'processing-error');
      const message = String(h.exceptionMessage);
      assert.match(message, /reduce returned an object without a "state" field/);
      assert.match(message, /return \{ state: next \}/);
      assert.ok(!message.includes(SECRET), 'never the record value');
      assert.match(String(h.exceptionFqcn), /RedfenceError/);
    }
  });

  it('operation returning no known operation: dead-lettered with the reason, the partition goes on', async () => {
    const ns = uniqueName('shape-op');
    const { outputs, dead } = await run(
      redis,
      ns,
      (n) =>
        defineProcessor({
          input: `${n}-in`,
          output: `${n}-out`,
          store: n,
          operation: (v: { n: number; note: string }, meta) =>
            (meta.key === 'bad' ? { op: 'increment', by: v.n } : { op: 'add', by: v.n }) as never,
        }) as ProcessorDefinition<unknown, unknown>,
    );
    const keys = new Set(outputs.map((r) => r.key));
    assert.deepEqual([...keys].sort(), ['good-0', 'good-1', 'good-2', 'good-3']);
    assert.equal(outputs.length, 20, 'one output per good record');
    assert.equal(dead.length, 5);
    for (const d of dead) {
      const h = readDeadLetterHeaders(d.headers);
      assert.equal(h.reason, 'processing-error');
      assert.match(
        String(h.exceptionMessage),
        /operation returned an object whose op is a string the fence does not know/,
      );
    }
  });
});

describe('checkReduction / checkOperation: the type of what came back, never the value', () => {
  it('names each wrong shape and passes the right ones', () => {
    const bad: Array<[unknown, RegExp]> = [
      [undefined, /reduce returned undefined;/],
      [42, /reduce returned a number;/],
      [[SECRET], /reduce returned an array;/],
      [{ count: SECRET }, /without a "state" field/],
      [{ state: 10n }, /JSON.stringify cannot write \(TypeError/],
      [{ state: () => SECRET }, /a state of type a function/],
      [{ state: 1, output: 7 }, /an output of type a number/],
      [{ state: 1, emit: 'no' }, /emit of type a string/],
    ];
    for (const [r, re] of bad) {
      const c = checkReduction(r);
      assert.ok(!c.ok && c.error.code === 'RF_USER_RESULT', String(re));
      assert.match(c.error.message, re);
      assert.ok(!c.error.message.includes(SECRET));
    }
    const ok = checkReduction({ state: { a: 1 }, output: new Uint8Array([1]), emit: false });
    assert.ok(ok.ok && ok.json === '{"a":1}' && Buffer.isBuffer(ok.output) && ok.emit === false);
    const badOps: Array<[unknown, RegExp]> = [
      [null, /operation returned null;/],
      [{ op: 'add', by: 1.5 }, /by a number; by must be a safe integer/],
      [{ op: 'add', by: 2n ** 64n }, /outside the 64-bit range/],
      [{ op: 'max', value: Number.NaN }, /value a non-finite number/],
      [{ op: 'set', value: { v: SECRET } }, /value an object/],
      [{ op: 7 }, /whose op is a number/],
    ];
    for (const [op, re] of badOps) {
      const e = checkOperation(op);
      assert.ok(e?.code === 'RF_USER_RESULT');
      assert.match(e.message, re);
      assert.ok(!e.message.includes(SECRET));
    }
    for (const op of [
      { op: 'add', by: 2n },
      { op: 'set', value: 'x' },
      { op: 'delete' },
      { op: 'min', value: 1 },
    ])
      assert.equal(checkOperation(op), undefined);
  });
});
