/** Fence implementations the history harness drives: redfence's scripts, and seed 000's sketch. */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { decideApply, type ModelState } from '../../src/fence/model.js';
import { Fence, type FencingMode, type RecordResult } from '../../src/index.js';
import { type FenceUnderTest, type Rec, toFenceRecords } from './harness.js';

const TOPIC = 'h';
const PARTITION = 0;

/**
 * redfence's fence. Every call is also run through the reference model; a disagreement is recorded
 * in `disagreements` (the test asserts it stays empty).
 */
export function redfenceFence(
  redis: Redis | Cluster,
  mode: FencingMode,
  store: string,
): FenceUnderTest & { disagreements: string[] } {
  const fence = new Fence({ redis, store, mode });
  const model = new Map<string, ModelState | null>();
  let partitionEpoch = 0;
  const disagreements: string[] = [];
  return {
    disagreements,
    async acquireEpoch() {
      partitionEpoch = await fence.acquireEpoch(TOPIC, PARTITION);
      return partitionEpoch;
    },
    async applyKey(key: string, recs: Rec[], epoch: number, watermark: number): Promise<RecordResult[]> {
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
      return s?.value?.toString() ?? null;
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
