/**
 * Multi-key apply calls (applyMany / applyManyStrict, used by Fence.applyBatch for the keys of one
 * partition batch) decide exactly as one call per key: random histories of batches over up to 300 keys
 * (more than one chunk of MAX_KEYS_PER_CALL) with every operation, output kind, replays, stale epochs
 * and moving watermarks are applied to one store through applyBatch and to a twin store key by key
 * through apply; results, stored states and pending entries must be identical, on every target.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { MAX_KEYS_PER_CALL } from '../../src/fence/fence.js';
import { type ApplyRequest, Fence, type FenceRecord, type Operation } from '../../src/index.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const TOPIC = 'many';

const opArb: fc.Arbitrary<Operation> = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }).map((by) => ({ op: 'add', by }) as const),
  fc.string({ maxLength: 8 }).map((value) => ({ op: 'set', value }) as const),
  fc.integer({ min: -50, max: 50 }).map((value) => ({ op: 'max', value }) as const),
  fc.integer({ min: -50, max: 50 }).map((value) => ({ op: 'min', value }) as const),
  fc.constant({ op: 'delete' } as const),
  fc.constant({ op: 'cas', expected: null, value: 'c' } as const),
);
const outputArb = fc.oneof(
  fc.constant(undefined),
  fc.constant('state' as const),
  fc.constant({ value: null }),
  fc.string({ maxLength: 6 }).map((value) => ({ value })),
);

interface Step {
  /** keys (indexes) in this batch, each with 1..3 records */
  keys: Array<{ key: number; records: Array<{ op: Operation; output: FenceRecord['output'] }> }>;
  /** rewind the offsets to replay earlier ones (redelivery) */
  replay: boolean;
  /** acquire a new epoch first (a new owner) */
  newOwner: boolean;
  /** use the previous epoch (a zombie) */
  stale: boolean;
}

const stepArb = (maxKeys: number, minKeys = 2): fc.Arbitrary<Step> =>
  fc.record({
    keys: fc.uniqueArray(
      fc.record({
        key: fc.integer({ min: 0, max: maxKeys - 1 }),
        records: fc.array(fc.record({ op: opArb, output: outputArb }), { minLength: 1, maxLength: 3 }),
      }),
      { minLength: minKeys, maxLength: maxKeys, selector: (k) => k.key },
    ),
    replay: fc.boolean(),
    newOwner: fc.boolean(),
    stale: fc.boolean(),
  });

describe('multi-key apply calls', { timeout: 240_000 }, () => {
  for (const target of TARGETS) {
    it(`decide exactly as one call per key (${target.name})`, async () => {
      const redis = target.connect();
      after(() => redis.disconnect());
      const runs = Number(process.env.RF_APPLY_MANY_RUNS ?? 6);
      let chunked = 0;
      await fc.assert(
        fc.asyncProperty(
          // one batch larger than a call's chunk, mixed among ordinary ones
          fc.tuple(
            fc.array(stepArb(300), { maxLength: 3 }),
            stepArb(300, MAX_KEYS_PER_CALL + 1),
            fc.array(stepArb(300), { minLength: 1, maxLength: 3 }),
          ),
          async ([before, big, later]) => {
            const steps = [...before, big, ...later];
            const name = uniqueName('many');
            const batched = new Fence({ redis, store: `${name}-b`, mode: target.mode });
            const single = new Fence({ redis, store: `${name}-s`, mode: target.mode });
            let epochs = [await batched.acquireEpoch(TOPIC, 0)];
            await single.acquireEpoch(TOPIC, 0);
            let next = 0; // next offset of the partition
            let committed = -1;
            for (const step of steps) {
              if (step.newOwner) {
                const e = await batched.acquireEpoch(TOPIC, 0);
                await single.acquireEpoch(TOPIC, 0);
                epochs = [...epochs, e];
              }
              const epoch =
                step.stale && epochs.length > 1 ? (epochs.at(-2) as number) : (epochs.at(-1) as number);
              const start = step.replay ? Math.max(0, next - 40) : next;
              let offset = start;
              const requests: ApplyRequest[] = step.keys.map(({ key, records }) => ({
                topic: TOPIC,
                partition: 0,
                epoch,
                committedOffset: committed,
                key: `k${key}`,
                records: records.map((r) => ({
                  offset: offset++,
                  operation: r.op,
                  ...(r.output === undefined ? {} : { output: r.output }),
                })),
              }));
              next = Math.max(next, offset);
              if (step.keys.length > MAX_KEYS_PER_CALL) chunked++;
              const got = await batched.applyBatch(requests);
              const want: unknown[] = [];
              for (const req of requests) want.push(await single.apply(req));
              assert.deepEqual(got, want, 'results of applyBatch == results of apply per key');
              committed = Math.max(committed, start + Math.floor((offset - start) / 2));
            }
            // The pending index: a key with pending outputs is indexed at (at least) its last one. The
            // multi-key call indexes only keys it wrote; the one-key path also indexes fenced keys (its
            // ZADD runs beside the apply), so the batched index is a subset with scores no higher.
            const scores = async (f: Fence) => {
              const rows = await redis.zrange(f.keys.pendingIndex(TOPIC, 0), '0', '-1', 'WITHSCORES');
              const m = new Map<string, number>();
              for (let i = 0; i < rows.length; i += 2)
                m.set((rows[i] as string).replace(/^rf:\{[^:]*:/, ''), Number(rows[i + 1]));
              return m;
            };
            const [bIdx, sIdx] = [await scores(batched), await scores(single)];
            for (const [member, score] of bIdx)
              assert.ok(
                score <= (sIdx.get(member) ?? -1),
                `index score of ${member}: ${score} > ${sIdx.get(member)}`,
              );
            for (let k = 0; k < 300; k++) {
              const b = await batched.read(`k${k}`);
              assert.deepEqual(b, await single.read(`k${k}`), `stored state of k${k}`);
              const last = Math.max(
                -1,
                ...(b?.pending ?? []).filter((e) => e.kind === 'output').map((e) => e.offset),
              );
              if (last >= 0) assert.ok((bIdx.get(`k${k}}`) ?? -1) >= last, `k${k} indexed at >= ${last}`);
            }
          },
        ),
        { numRuns: runs },
      );
      assert.ok(chunked > 0, 'some batch spanned more than one call');
    });
  }
});
