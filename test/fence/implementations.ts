/** Fence implementations the history harness drives: redfence's scripts, and seed 000's sketch. */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type { FenceRedis } from '../../src/fence/index.js';
import { decideApply, type ModelState } from '../../src/fence/model.js';
import { Fence, type FencingMode, type RecordResult } from '../../src/index.js';
import { applyRepairs } from '../../src/ops/reconcile-repair.js';
import { OwnerState } from '../../src/processor/owner-state.js';
import {
  type FenceUnderTest,
  type OwnerRef,
  type Rec,
  type RepairOutcome,
  toFenceRecords,
} from './harness.js';
import { type PathState, reduceKey } from './reducer-path.js';

/** What the owner-local state and the repairs did in one history. */
export interface CacheCounts {
  hits: number;
  misses: number;
  /** CONFLICT verdicts, and those whose current token carries a generation (a repair since the read). */
  conflicts: number;
  generationConflicts: number;
}

const TOPIC = 'h';
const PARTITION = 0;

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

/**
 * redfence's fence. Every call is also run through the reference model; a disagreement is recorded
 * in `disagreements` (the test asserts it stays empty). With `reduce`, owners go through the
 * processor's reducer path (reducer-path.ts), an owner with `cached` keeping its own owner-local state;
 * `repair` is reconcile --repair's own script (applyRepairs), the model told what it wrote.
 */
export function redfenceFence(
  redis: Redis | Cluster,
  mode: FencingMode,
  store: string,
  options: { reduce?: boolean } = {},
): FenceUnderTest & { disagreements: string[]; counts(): CacheCounts } {
  const fence = new Fence({ redis, store, mode });
  const model = new Map<string, ModelState | null>();
  let partitionEpoch = 0;
  const disagreements: string[] = [];
  const path: PathState = {
    model,
    mode,
    partitionEpoch: () => partitionEpoch,
    disagreements,
    conflicts: 0,
    generationConflicts: 0,
  };
  const caches = new Map<number, OwnerState>();
  const reduce = options.reduce === true;
  const decode = (v: Buffer | null) => {
    if (v === null) return null;
    if (!reduce) return v.toString();
    const n = JSON.parse(v.toString()) as number | null;
    return n === null ? null : String(n);
  };
  return {
    disagreements,
    counts() {
      const c = {
        hits: 0,
        misses: 0,
        conflicts: path.conflicts,
        generationConflicts: path.generationConflicts,
      };
      for (const o of caches.values()) {
        c.hits += o.hits;
        c.misses += o.misses;
      }
      return c;
    },
    async acquireEpoch() {
      partitionEpoch = await fence.acquireEpoch(TOPIC, PARTITION);
      return partitionEpoch;
    },
    async applyKey(
      key: string,
      recs: Rec[],
      epoch: number,
      watermark: number,
      owner: OwnerRef,
    ): Promise<RecordResult[]> {
      if (reduce) {
        // Two instances: owners 0 and 2 (1 and 3) are one instance assigned the
        // partition again, whose entries from its earlier epoch must not be used under the new one.
        const instance = owner.id % 2;
        let cache = owner.cached ? caches.get(instance) : undefined;
        if (cache === undefined && owner.cached) {
          cache = new OwnerState(1024 * 1024);
          caches.set(instance, cache);
        }
        return reduceKey(fence, path, cache, key, recs, epoch, watermark);
      }
      const req = {
        topic: TOPIC,
        partition: PARTITION,
        epoch,
        committedOffset: watermark,
        key,
        records: toFenceRecords(recs),
      };
      const got = await fence.apply(req);
      const want = decideApply(model.get(key) ?? null, req, { mode, partitionEpoch });
      model.set(key, want.state);
      if (JSON.stringify(got) !== JSON.stringify(want.results)) {
        disagreements.push(
          `key ${key} epoch ${epoch}: scripts ${JSON.stringify(got)} != model ${JSON.stringify(want.results)}`,
        );
      }
      return got;
    },
    async readValue(key: string) {
      const s = await fence.read(key);
      return decode(s?.value ?? null);
    },
    async repair(key, committed, valueAt): Promise<RepairOutcome> {
      const s = await fence.read(key);
      if (s === null || s.partition !== PARTITION || s.offset >= committed) return { repaired: false };
      const text = valueAt(s.offset);
      const value = reduce ? JSON.stringify(text === null ? null : Number(text)) : text;
      const target = { partition: PARTITION, offset: s.offset, epoch: partitionEpoch, value };
      const done = await applyRepairs(redis as unknown as FenceRedis, [
        {
          redisKey: fence.keys.state(key),
          read: {
            fence: `${s.partition}:${s.offset}:${s.epoch}`,
            valueSha: s.value === null ? '-' : sha1(s.value),
          },
          target,
        },
      ]);
      if (done.repaired.length !== 1)
        throw new Error(`key ${key} changed under a repair in a one-writer history`);
      const generation = (s.generation ?? 0) + 1;
      model.set(key, { ...target, pending: new Map(), generation });
      const now = await fence.read(key);
      if (
        now?.generation !== generation ||
        now.value?.toString() !== (value ?? undefined) ||
        now.pending.length > 0
      )
        disagreements.push(
          `key ${key}: after a repair ${JSON.stringify(now)}, model generation ${generation}`,
        );
      return { repaired: true, found: { offset: s.offset, value: decode(s.value) } };
    },
  };
}

const SEED = readFileSync(new URL('./fixtures/seed-sketch.lua', import.meta.url), 'utf8');

/** Seed 000's sketch: one EVAL per record, last-write-wins values computed by the client ('set' records only). */
export function seedSketchFence(redis: Redis, store: string): FenceUnderTest {
  const epochKey = `rf:{${store}}:seed-epoch`;
  return {
    async acquireEpoch() {
      return redis.incr(epochKey);
    },
    async applyKey(key: string, recs: Rec[], epoch: number): Promise<RecordResult[]> {
      const results: RecordResult[] = [];
      for (const r of recs) {
        if (r.op !== 'set') throw new Error('the seed sketch only handles client-computed values (set)');
        const reply = (await redis.eval(
          SEED,
          2,
          `rf:{${store}}:seed:${key}`,
          epochKey,
          PARTITION,
          r.offset,
          epoch,
          r.arg,
        )) as string[];
        const [verdict, extra] = reply;
        if (verdict === 'FENCE') results.push({ verdict: 'FENCE', offset: r.offset, epoch: 0 });
        else if (verdict === 'SKIP') results.push({ verdict: 'SKIP', offset: r.offset });
        else if (verdict === 'REEMIT')
          results.push({ verdict: 'REEMIT', offset: r.offset, output: { value: Buffer.from(extra ?? '') } });
        else
          results.push({ verdict: 'APPLY', offset: r.offset, gap: 0, output: { value: Buffer.from(r.arg) } });
      }
      return results;
    },
    async readValue(key: string) {
      return redis.hget(`rf:{${store}}:seed:${key}`, 'value');
    },
  };
}
