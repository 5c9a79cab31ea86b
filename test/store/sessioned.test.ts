/**
 * A session-windowed count run as key calls (`session` effects): generated inputs (a few keys,
 * out-of-order timestamps, records bridging sessions, late records) cut into partition batches, each
 * batch one key call per key. The owner computes Kafka Streams' bounds per record from the partition's
 * stream time (lookup from max(ts - gap, storeTime - retention + 1), close time streamTime - grace -
 * gap); Redis merges. Every record's forwards (a tombstone per merged-away session, then the merged
 * session's count; late records none) must equal what the topology's reference model forwards for the
 * same input; calls sent again REEMIT the same results and change nothing. Each call is also checked
 * against the key call's model (Twin).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Effect, KeyRecord, KeyRecordResult, SessionOp, SessionResult } from '../../src/store/types.js';
import { SessionWindows, serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { type In, input, outputs } from '../topology/model-helpers.js';
import { batchCalls, Twin } from './twin.js';

const COUNT = 4;

function built(gap: number, grace: number) {
  const t = topology({ applicationId: 'app' });
  t.stream<string, unknown>('in', { key: serdes.string() })
    .groupByKey()
    .windowedBy(SessionWindows.ofInactivityGapAndGrace(gap, grace))
    .count({ name: 'counts' })
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('counts', { key: serdes.string() });
  return t.build();
}

/** The owner's side: per record, its session effect with the bounds of the partition's times. */
function records(
  gap: number,
  grace: number,
  ins: readonly In[],
  expireBase: number,
  opOf: (offset: number) => SessionOp = () => ({ op: 'add', by: 1 }),
): KeyRecord[] {
  const retention = gap + grace;
  let streamTime = -1;
  let storeTime = -1;
  return ins.map((r, offset) => {
    streamTime = Math.max(streamTime, r.ts);
    const floor = storeTime - retention + 1;
    const effect: Effect = {
      store: COUNT,
      kind: 'session',
      time: r.ts,
      lowEnd: Math.max(r.ts - gap, floor),
      highStart: r.ts + gap,
      closeTime: streamTime - grace - gap,
      dropBefore: floor,
      expireAt: expireBase + r.ts + retention,
      op: opOf(offset),
    };
    // a late record's ts is below the store's time already; any other moves it to at least ts
    storeTime = Math.max(storeTime, r.ts);
    return { offset, emit: 1, effects: [effect] };
  });
}

const inputArb = fc.array(
  fc.record({ key: fc.constantFrom('a', 'b'), step: fc.integer({ min: 0, max: 30 }) }),
  { minLength: 1, maxLength: 40 },
);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`session count as key calls on ${target.name}`, { timeout: 120_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it("the forwards equal the topology model's: merges with tombstones, late records, replays REEMIT", async () => {
      const gap = 5;
      const grace = 4;
      let merges = 0;
      let lates = 0;
      await fc.assert(
        fc.asyncProperty(
          inputArb,
          fc.array(fc.integer({ min: 1, max: 8 }), { maxLength: 10 }),
          async (gen, cuts) => {
            let t = 0;
            const ins: In[] = gen.map((g) => {
              t = Math.max(0, t + g.step - 12); // mostly forward, sometimes back (out of order, late)
              return { key: g.key, value: 1, ts: t };
            });
            const model = runModel(built(gap, grace), input(ins));
            const twin = new Twin(redis, uniqueName('ses').replace(/-/g, '_'));
            const recs = records(gap, grace, ins, Date.now() + 3_600_000);
            const byOffset = new Map<number, KeyRecordResult>();
            for (const calls of batchCalls(
              ins.map((r) => r.key),
              recs,
              cuts,
              1,
            )) {
              for (const rs of await twin.callMany(calls)) for (const r of rs) byOffset.set(r.offset, r);
            }
            const rows: unknown[] = [];
            recs.forEach((_rec, offset) => {
              const r = byOffset.get(offset);
              assert.equal(r?.verdict, 'APPLY');
              const s = (r as unknown as { results: SessionResult[] }).results[0] as SessionResult;
              const key = ins[offset]?.key;
              if (s.late) {
                lates++;
                return;
              }
              if (s.removed.length > 0) merges++;
              for (const x of s.removed)
                rows.push({ key, value: { start: x.start, end: x.end, value: null } });
              rows.push({ key, value: { start: s.start, end: s.end, value: Number(s.value) } });
            });
            assert.deepEqual(
              rows,
              outputs(model, 'counts').map(({ key, value }) => ({ key, value })),
            );
            for (const k of ['a', 'b']) await twin.checkStored(k);
            // sent again by a new owner before any commit: the same results, nothing changed
            for (const calls of batchCalls(
              ins.map((r) => r.key),
              recs,
              cuts,
              2,
            ))
              for (const rs of await twin.callMany(calls))
                for (const r of rs) {
                  const first = byOffset.get(r.offset) as unknown as { results: SessionResult[] };
                  assert.deepEqual(r, { verdict: 'REEMIT', offset: r.offset, results: first.results });
                }
            for (const k of ['a', 'b']) await twin.checkStored(k);
          },
        ),
        { numRuns: Number(process.env.RF_STORE_SESSION_RUNS ?? 25) },
      );
      assert.ok(merges > 0, 'some records merged sessions');
      assert.ok(lates > 0, 'some records were late');
    });

    it('set and delete (a value computed by the caller): script equals model; merges, deletes, replays REEMIT', async () => {
      const seen = { merges: 0, deleted: 0, lates: 0 };
      await fc.assert(
        fc.asyncProperty(
          inputArb,
          fc.array(fc.integer({ min: 1, max: 8 }), { maxLength: 10 }),
          async (gen, cuts) => {
            let t = 0;
            const ins: In[] = gen.map((g) => {
              t = Math.max(0, t + g.step - 12);
              return { key: g.key, value: 1, ts: t };
            });
            const twin = new Twin(redis, uniqueName('sesv').replace(/-/g, '_'));
            const opOf = (o: number): SessionOp =>
              o % 4 === 3 ? { op: 'delete' } : { op: 'set', value: Buffer.from(`v${o}\u00ff`, 'latin1') };
            const recs = records(5, 4, ins, Date.now() + 3_600_000, opOf);
            const keys = ins.map((r) => r.key);
            const first = new Map<number, KeyRecordResult>();
            for (const calls of batchCalls(keys, recs, cuts, 1))
              for (const rs of await twin.callMany(calls)) for (const r of rs) first.set(r.offset, r);
            for (const r of first.values()) {
              const s = (r as unknown as { results: SessionResult[] }).results[0] as SessionResult;
              if (s.late) seen.lates++;
              else if (s.value === null) seen.deleted++;
              if (s.removed.length > 0) seen.merges++;
            }
            for (const k of ['a', 'b']) await twin.checkStored(k);
            for (const calls of batchCalls(keys, recs, cuts, 2))
              for (const rs of await twin.callMany(calls))
                for (const r of rs) assert.equal(r.verdict, 'REEMIT');
            for (const k of ['a', 'b']) await twin.checkStored(k);
          },
        ),
        { numRuns: Number(process.env.RF_STORE_SESSION_RUNS ?? 25) },
      );
      assert.ok(seen.merges > 0 && seen.deleted > 0 && seen.lates > 0, JSON.stringify(seen));
    });
  });
}
