/**
 * Every row of the decision table (docs/guarantees.md) through the real scripts, on each target,
 * checked against the reference model too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { decideApply, type ModelState } from '../../src/fence/model.js';
import {
  type ApplyRequest,
  defineProcessor,
  Fence,
  Processor,
  partitionFor,
  type RecordResult,
  readDeadLetterHeaders,
} from '../../src/index.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { TARGETS } from '../helpers/targets.js';

const T = 'orders';

for (const target of TARGETS) {
  describe(`decision table on ${target.name}`, () => {
    let redis: Redis | Cluster;
    let fence: Fence;
    const model = new Map<string, ModelState | null>();
    let partitionEpoch = new Map<number, number>();

    before(() => {
      redis = target.connect();
      fence = new Fence({ redis, store: uniqueName('dt').replace(/-/g, '_'), mode: target.mode });
      partitionEpoch = new Map();
    });
    after(() => redis.disconnect());

    async function acquire(partition: number): Promise<number> {
      const e = await fence.acquireEpoch(T, partition);
      partitionEpoch.set(partition, e);
      return e;
    }

    /** Applies through Redis and the model; asserts they agree; returns the Redis results. */
    async function apply(req: Omit<ApplyRequest, 'topic'>): Promise<RecordResult[]> {
      const full = { topic: T, ...req };
      const got = await fence.apply(full);
      const key = String(req.key);
      const expected = decideApply(model.get(key) ?? null, full, {
        mode: target.mode,
        partitionEpoch: partitionEpoch.get(req.partition) ?? 0,
      });
      model.set(key, expected.state);
      assert.deepEqual(got, expected.results, 'scripts and reference model disagree');
      return got;
    }

    for (const mode of ['at-least-once', 'exactly-once'] as const) {
      it(`DLQ (${mode}): a key that does not hash to its partition is dead-lettered by the processor, its state untouched`, async () => {
        const input = `dlq-${mode}`;
        // keys of their own per mode: the two runs share the store, and a key the other run applied and
        // committed would be a replay here (SKIP), not a first apply
        const key = `dlq-key-${mode}`;
        const wrong = (partitionFor(key, 6) + 1) % 6;
        assert.notEqual(partitionFor(key, 6), wrong);
        // a key of the same batch that does hash to it: applied, so the batch did go through apply
        let placed = `placed-${mode}-0`;
        for (let i = 1; partitionFor(placed, 6) !== wrong; i++) placed = `placed-${mode}-${i}`;
        // both records on partition `wrong`, in one batch
        const kafka = new MemoryKafka({ topics: { [input]: 6, [`${input}-out`]: 6, [`${input}.DLT`]: 6 } });
        kafka.produce([
          { topic: input, partition: wrong, key: key, value: '{}' },
          { topic: input, partition: wrong, key: placed, value: '{}' },
        ]);
        const groupId = uniqueName('dt-dlq');
        const p = new Processor({
          definition: defineProcessor<unknown, number>({
            input,
            output: `${input}-out`,
            store: fence.keys.store,
            decode: () => ({}),
            operation: () => ({ op: 'add', by: 1 }),
          }),
          redis,
          mode,
          fencing: target.mode,
          groupId,
          kafka: kafka.port({ groupId }),
          watchdog: false,
        });
        await p.start();
        try {
          await pollUntil(
            'both records committed',
            () => kafka.committedOffsets(groupId, input).get(wrong) === 2,
            15_000,
          );
        } finally {
          await p.close();
        }
        // the row: DLQ, state untouched (no state key written)
        assert.equal(await fence.read(key), null, 'no state for the misplaced key');
        assert.equal(await redis.exists(fence.keys.state(key)), 0);
        assert.equal((await fence.read(placed))?.value?.toString(), '1', 'the well-placed key applied');
        const dead = kafka.read(`${input}.DLT`);
        assert.equal(dead.length, 1, 'one dead letter');
        const h = readDeadLetterHeaders(dead[0]?.headers ?? {});
        assert.deepEqual(
          [h.reason, h.originalTopic, h.originalPartition, h.originalOffset],
          ['wrong-partition', input, wrong, 0n],
        );
        assert.deepEqual(
          kafka.read(`${input}-out`).map((r) => String(r.key)),
          [placed],
          'an output for the well-placed key only',
        );
        assert.deepEqual(
          [...kafka.committedOffsets(groupId, input)].filter(([, o]) => o > 0),
          [[wrong, 2]],
          'both committed, nothing else',
        );
      });
    }

    it('APPLY: no state yet, then higher offsets on the same partition; holes are gaps, not errors', async () => {
      const e = await acquire(0);
      const r = await apply({
        partition: 0,
        epoch: e,
        committedOffset: 10,
        key: 'apply',
        records: [
          { offset: 10, operation: { op: 'add', by: 5 }, output: 'state' },
          { offset: 11, operation: { op: 'add', by: 2 }, output: 'state' },
          { offset: 15, operation: { op: 'add', by: 1 }, output: { value: 'seen-15' } },
        ],
      });
      assert.deepEqual(
        r.map((x) => [x.verdict, 'gap' in x ? x.gap : undefined]),
        [
          ['APPLY', -1],
          ['APPLY', 0],
          ['APPLY', 3],
        ],
      );
      assert.equal((r[0] as { output: { value: Buffer } }).output.value.toString(), '5');
      const s = await fence.read('apply');
      assert.equal(s?.value?.toString(), '8');
      assert.deepEqual([s?.partition, s?.offset, s?.epoch], [0, 15, e]);
      assert.deepEqual(
        s?.pending.map((p) => p.offset),
        [10, 11, 15],
      );
    });

    it('REEMIT: an offset <= the fence with its output still pending returns exactly the stored bytes', async () => {
      const e = partitionEpoch.get(0) ?? 0;
      const r = await apply({
        partition: 0,
        epoch: e,
        committedOffset: 11,
        key: 'apply',
        records: [
          { offset: 11, operation: { op: 'add', by: 2 }, output: 'state' },
          { offset: 15, operation: { op: 'add', by: 1 }, output: { value: 'seen-15' } },
        ],
      });
      assert.deepEqual(
        r.map((x) => [x.verdict, 'output' in x ? x.output?.value?.toString() : undefined]),
        [
          ['REEMIT', '7'],
          ['REEMIT', 'seen-15'],
        ],
      );
      assert.equal((await fence.read('apply'))?.value?.toString(), '8', 'state untouched');
      assert.deepEqual(
        (await fence.read('apply'))?.pending.map((p) => p.offset),
        [11, 15],
        'offset 10 pruned below the watermark',
      );
    });

    it('SKIP: an offset <= the fence whose output is committed (pruned) or never existed', async () => {
      const e = partitionEpoch.get(0) ?? 0;
      const r = await apply({
        partition: 0,
        epoch: e,
        committedOffset: 16,
        key: 'apply',
        records: [
          { offset: 12, operation: { op: 'add', by: 100 } },
          { offset: 15, operation: { op: 'add', by: 1 }, output: { value: 'seen-15' } },
        ],
      });
      assert.deepEqual(
        r.map((x) => x.verdict),
        ['SKIP', 'SKIP'],
      );
      const s = await fence.read('apply');
      assert.equal(s?.value?.toString(), '8');
      assert.deepEqual(s?.pending, []);
    });

    it('FENCE: a caller with an older epoch than the key last saw writes nothing', async () => {
      const old = partitionEpoch.get(0) ?? 0;
      const newer = await acquire(0);
      await apply({
        partition: 0,
        epoch: newer,
        committedOffset: 16,
        key: 'apply',
        records: [{ offset: 20, operation: { op: 'add', by: 1 } }],
      });
      const r = await apply({
        partition: 0,
        epoch: old,
        committedOffset: 16,
        key: 'apply',
        records: [
          { offset: 21, operation: { op: 'add', by: 1000 } },
          { offset: 22, operation: { op: 'set', value: 'zombie' } },
        ],
      });
      assert.deepEqual(r, [
        { verdict: 'FENCE', offset: 21, epoch: newer },
        { verdict: 'FENCE', offset: 22, epoch: newer },
      ]);
      const s = await fence.read('apply');
      assert.deepEqual([s?.value?.toString(), s?.offset, s?.epoch], ['9', 20, newer]);
    });

    it(`FENCE on a key the newer owner never wrote: ${target.mode === 'strict' ? 'fenced by the partition epoch' : 'not fenceable without a cross-slot read (cluster fencing)'}`, async () => {
      const old = (partitionEpoch.get(0) ?? 1) - 1;
      const r = await apply({
        partition: 0,
        epoch: old,
        committedOffset: 16,
        key: 'untouched',
        records: [{ offset: 30, operation: { op: 'add', by: 1 } }],
      });
      assert.equal(r[0]?.verdict, target.mode === 'strict' ? 'FENCE' : 'APPLY');
      // Either way the newer owner's replay of that record does not apply it twice:
      const newer = partitionEpoch.get(0) ?? 0;
      const again = await apply({
        partition: 0,
        epoch: newer,
        committedOffset: 16,
        key: 'untouched',
        records: [{ offset: 30, operation: { op: 'add', by: 1 } }],
      });
      assert.equal(again[0]?.verdict, target.mode === 'strict' ? 'APPLY' : 'SKIP');
      assert.equal((await fence.read('untouched'))?.value?.toString(), '1');
    });

    it('REBASE: the key was last written from another partition: applied, fence reset, old pending dropped', async () => {
      const e1 = await acquire(1);
      const e2 = await acquire(2);
      await apply({
        partition: 1,
        epoch: e1,
        committedOffset: 0,
        key: 'moved',
        records: [{ offset: 500, operation: { op: 'add', by: 3 }, output: 'state' }],
      });
      const r = await apply({
        partition: 2,
        epoch: e2,
        committedOffset: 0,
        key: 'moved',
        records: [{ offset: 7, operation: { op: 'add', by: 4 }, output: 'state' }],
      });
      assert.equal(r[0]?.verdict, 'REBASE');
      assert.equal((r[0] as { previousPartition: number }).previousPartition, 1);
      const s = await fence.read('moved');
      assert.deepEqual([s?.value?.toString(), s?.partition, s?.offset], ['7', 2, 7]);
      assert.deepEqual(
        s?.pending.map((p) => p.offset),
        [7],
      );
    });

    it('operations: set, float add, max, min, delete (tombstone), and their outputs', async () => {
      const e = await acquire(3);
      const r = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'ops',
        records: [
          { offset: 1, operation: { op: 'addFloat', by: 1.5 }, output: 'state' },
          { offset: 2, operation: { op: 'addFloat', by: 2.25 }, output: 'state' },
          { offset: 3, operation: { op: 'max', value: 2 }, output: 'state' },
          { offset: 4, operation: { op: 'max', value: 9 }, output: 'state' },
          { offset: 5, operation: { op: 'min', value: 4 }, output: 'state' },
          { offset: 6, operation: { op: 'delete' }, output: 'state' },
          { offset: 7, operation: { op: 'set', value: Buffer.from([0, 255, 1]) }, output: { value: null } },
          { offset: 8, operation: { op: 'add', by: 10n ** 18n } },
        ],
      });
      assert.deepEqual(
        r.map((x) => ('output' in x ? (x.output?.value?.toString('hex') ?? null) : x.verdict)),
        [
          Buffer.from('1.5').toString('hex'),
          Buffer.from('3.75').toString('hex'),
          Buffer.from('3.75').toString('hex'),
          Buffer.from('9').toString('hex'),
          Buffer.from('4').toString('hex'),
          null,
          'APPLY',
          'REJECT',
        ],
      );
      const s = await fence.read('ops');
      assert.deepEqual(s?.value, Buffer.from([0, 255, 1]));
    });

    it('integer add is exact beyond 2^53 and rejects 64-bit overflow', async () => {
      const e = partitionEpoch.get(3) ?? 0;
      await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'big',
        records: [
          { offset: 1, operation: { op: 'add', by: 2n ** 62n } },
          { offset: 2, operation: { op: 'add', by: 3 }, output: 'state' },
        ],
      });
      assert.equal((await fence.read('big'))?.value?.toString(), (2n ** 62n + 3n).toString());
      const r = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'edge',
        records: [
          { offset: 1, operation: { op: 'add', by: 2 ** 53 - 1 }, output: 'state' },
          { offset: 2, operation: { op: 'add', by: 1 }, output: 'state' }, // crosses 2^53
          { offset: 3, operation: { op: 'add', by: 1 }, output: 'state' },
          { offset: 4, operation: { op: 'add', by: -(2n ** 53n) }, output: 'state' },
          { offset: 5, operation: { op: 'add', by: 2n ** 63n - 1n } }, // overflows int64
        ],
      });
      assert.deepEqual(
        r.map((x) => ('output' in x ? x.output?.value?.toString() : x.verdict)),
        ['9007199254740991', '9007199254740992', '9007199254740993', '1', 'REJECT'],
      );
      assert.match((r[4] as { reason: string }).reason, /overflow/);
    });

    it('REJECT: an operation that cannot apply moves the fence, keeps state, and re-emits its dead letter on replay', async () => {
      const e = partitionEpoch.get(3) ?? 0;
      const first = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'text',
        records: [
          { offset: 1, operation: { op: 'set', value: 'not a number' } },
          { offset: 2, operation: { op: 'add', by: 1 }, output: 'state' },
          { offset: 3, operation: { op: 'max', value: 1 } },
          { offset: 4, operation: { op: 'set', value: 'ok' } },
        ],
      });
      assert.deepEqual(
        first.map((x) => x.verdict),
        ['APPLY', 'REJECT', 'REJECT', 'APPLY'],
      );
      assert.match((first[1] as { reason: string }).reason, /not an integer/);
      const replay = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 1,
        key: 'text',
        records: [
          { offset: 2, operation: { op: 'add', by: 1 }, output: 'state' },
          { offset: 3, operation: { op: 'max', value: 1 } },
        ],
      });
      assert.deepEqual(
        replay.map((x) => [x.verdict, 'deadLetter' in x]),
        [
          ['REEMIT', true],
          ['REEMIT', true],
        ],
      );
      assert.equal((await fence.read('text'))?.value?.toString(), 'ok');
    });

    it('CONFLICT: compare-and-set applies only when the fence is where the caller read it', async () => {
      const e = partitionEpoch.get(3) ?? 0;
      const r1 = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'cas',
        records: [
          { offset: 1, operation: { op: 'cas', expected: null, value: 'a' }, output: 'state' },
          {
            offset: 2,
            operation: { op: 'cas', expected: { partition: 3, offset: 1 }, value: 'ab' },
            output: 'state',
          },
        ],
      });
      assert.deepEqual(
        r1.map((x) => x.verdict),
        ['APPLY', 'APPLY'],
      );
      const r2 = await apply({
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'cas',
        records: [
          { offset: 3, operation: { op: 'cas', expected: { partition: 3, offset: 1 }, value: 'stale' } },
        ],
      });
      assert.deepEqual(r2, [{ verdict: 'CONFLICT', offset: 3, current: { partition: 3, offset: 2 } }]);
      const s = await fence.read('cas');
      assert.deepEqual([s?.value?.toString(), s?.offset], ['ab', 2]);
    });

    it('TTL is refreshed on every write when configured', async () => {
      const withTtl = new Fence({ redis, store: fence.keys.store, mode: target.mode, ttlMs: 60_000 });
      const e = partitionEpoch.get(3) ?? 0;
      await withTtl.apply({
        topic: T,
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'ttl',
        records: [{ offset: 1, operation: { op: 'add', by: 1 } }],
      });
      const ttl = await redis.pttl(withTtl.keys.state('ttl'));
      assert.ok(ttl > 50_000 && ttl <= 60_000, `pttl ${ttl}`);
      assert.equal(await redis.pttl(fence.keys.state('apply')), -1, 'no TTL by default');
    });

    it('rejects malformed requests before sending anything, naming the field', async () => {
      const base = { topic: T, partition: 0, epoch: 1, committedOffset: 0, key: 'bad' };
      await assert.rejects(fence.apply({ ...base, records: [] }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /non-empty/,
      });
      await assert.rejects(
        fence.apply({
          ...base,
          records: [
            { offset: 2, operation: { op: 'add', by: 1 } },
            { offset: 2, operation: { op: 'add', by: 1 } },
          ],
        }),
        { message: /records\[1\]\.offset must be greater/ },
      );
      await assert.rejects(
        fence.apply({ ...base, records: [{ offset: 1, operation: { op: 'add', by: 1.5 } }] }),
        {
          message: /records\[0\]\.operation\.by/,
        },
      );
      await assert.rejects(
        fence.apply({ ...base, records: [{ offset: 1, operation: { op: 'nope' } as never }] }),
        {
          message: /records\[0\]\.operation\.op/,
        },
      );
      await assert.rejects(
        fence.apply({ ...base, topic: 'bad topic', records: [{ offset: 1, operation: { op: 'delete' } }] }),
        {
          message: /topic/,
        },
      );
      assert.equal(await fence.read('bad'), null);
    });

    it('reloads scripts after SCRIPT FLUSH (EVALSHA falls back to EVAL on NOSCRIPT)', async () => {
      if ('nodes' in redis) {
        await Promise.all((redis as Cluster).nodes('master').map((n) => n.script('FLUSH')));
      } else {
        await (redis as Redis).script('FLUSH');
      }
      const e = await acquire(4);
      const r = await apply({
        partition: 4,
        epoch: e,
        committedOffset: 0,
        key: 'noscript',
        records: [{ offset: 1, operation: { op: 'add', by: 1 } }],
      });
      assert.equal(r[0]?.verdict, 'APPLY');
    });
  });
}
