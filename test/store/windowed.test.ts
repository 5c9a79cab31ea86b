/**
 * A windowed count and sum run as key calls: generated inputs (a few keys, out-of-order timestamps,
 * tumbling and hopping windows with grace) are cut into partition batches, each batch sent as one key
 * call per key (KeyStore.callMany), the window starts from src/topology/windows.ts timeWindowsFor and
 * late windows left out by the owner's stream time, as Kafka Streams does. Every record's window
 * values must equal what the topology's reference model (runModel, emit 'update') forwards for the same
 * input; the calls sent again (an owner that crashed before its commit) REEMIT the same results and
 * change nothing; a zombie with the old epoch is FENCEd and writes nothing.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Effect, KeyRecord, KeyRecordResult } from '../../src/store/types.js';
import { serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { timeWindowsFor } from '../../src/topology/windows.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { type In, input, outputs } from '../topology/model-helpers.js';
import { batchCalls, Twin } from './twin.js';

const COUNT = 1;
const SUM = 2;

function built(w: TimeWindows) {
  const t = topology({ applicationId: 'app' });
  const g = t.stream<string, { amount: number }>('in', { key: serdes.string() }).groupByKey().windowedBy(w);
  g.count({ name: 'counts' })
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('counts', { key: serdes.string() });
  g.aggregate(
    () => 0,
    (_k, v, sum: number) => sum + v.amount,
    { name: 'sums' },
  )
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('sums', { key: serdes.string() });
  return t.build();
}

interface Spec {
  sizeMs: number;
  advanceMs: number;
  graceMs: number;
}

/** The owner's side: per record, its window effects (late windows left out by stream time). */
function records(spec: Spec, ins: readonly In[], expireBase: number): KeyRecord[] {
  let streamTime = -1;
  return ins.map((r, offset) => {
    streamTime = Math.max(streamTime, r.ts);
    const close = streamTime - spec.graceMs;
    const amount = (r.value as { amount: number }).amount;
    const effects: Effect[] = [];
    for (const start of timeWindowsFor(spec, r.ts)) {
      if (start + spec.sizeMs <= close) continue;
      const expireAt = expireBase + start + spec.sizeMs + spec.graceMs;
      effects.push({ store: COUNT, kind: 'window', start, expireAt, op: { op: 'add', by: 1 } });
      effects.push({ store: SUM, kind: 'window', start, expireAt, op: { op: 'add', by: amount } });
    }
    return { offset, emit: effects.length > 0 ? 1 : 0, effects };
  });
}

const inputArb = fc.array(
  fc.record({
    key: fc.constantFrom('a', 'b', 'c'),
    ts: fc.integer({ min: 0, max: 60 }),
    amount: fc.integer({ min: 1, max: 9 }),
  }),
  { minLength: 1, maxLength: 40 },
);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`windowed count and sum as key calls on ${target.name}`, { timeout: 120_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, spec] of [
      ['tumbling', { sizeMs: 10, advanceMs: 10, graceMs: 3 }],
      ['hopping', { sizeMs: 10, advanceMs: 5, graceMs: 5 }],
    ] as const) {
      it(`${name}: the window values equal the topology model's, replays REEMIT, zombies are fenced`, async () => {
        let runs = 0;
        let late = 0;
        await fc.assert(
          fc.asyncProperty(
            inputArb,
            fc.array(fc.integer({ min: 1, max: 8 }), { maxLength: 10 }),
            async (gen, cuts) => {
              runs++;
              // timestamps mostly rising, with some going back (out of order, some of them late)
              let t = 0;
              const ins: In[] = gen.map((g) => {
                t = Math.max(0, t + g.ts - 20);
                return { key: g.key, value: { amount: g.amount }, ts: t };
              });
              const w = TimeWindows.ofSizeAndGrace(spec.sizeMs, spec.graceMs).advanceBy(spec.advanceMs);
              const model = runModel(built(w), input(ins));
              late += model.deadLetters.length;
              const twin = new Twin(redis, uniqueName('win').replace(/-/g, '_'));
              const recs = records(spec, ins, Date.now() + 3_600_000);

              const byOffset = new Map<number, KeyRecordResult>();
              // the owner's commits lag (none landed before it crashed)
              for (const calls of batchCalls(
                ins.map((r) => r.key),
                recs,
                cuts,
                1,
                false,
              )) {
                const got = await twin.callMany(calls);
                for (const rs of got) for (const r of rs) byOffset.set(r.offset, r);
              }
              const counts: unknown[] = [];
              const sums: unknown[] = [];
              recs.forEach((rec, offset) => {
                const r = byOffset.get(offset);
                assert.equal(r?.verdict, 'APPLY');
                const results = r !== undefined && 'results' in r ? (r.results ?? []) : [];
                rec.effects.forEach((e, i) => {
                  if (e.kind !== 'window') return;
                  const row = {
                    key: ins[offset]?.key,
                    value: { start: e.start, end: e.start + spec.sizeMs, value: Number(results[i]) },
                  };
                  (e.store === COUNT ? counts : sums).push(row);
                });
              });
              const strip = (topic: string) =>
                outputs(model, topic).map(({ key, value }) => ({ key, value }));
              assert.deepEqual(counts, strip('counts'));
              assert.deepEqual(sums, strip('sums'));
              for (const k of ['a', 'b', 'c']) await twin.checkStored(k);

              // the owner crashed before its commit: a new owner sends the same calls again
              // (committing each batch as it goes: the entries it passed are pruned behind it)
              for (const calls of batchCalls(
                ins.map((r) => r.key),
                recs,
                cuts,
                2,
                true,
              )) {
                const again = await twin.callMany(calls);
                for (const rs of again)
                  for (const r of rs) {
                    const first = byOffset.get(r.offset);
                    if (first !== undefined && 'results' in first && first.results !== undefined)
                      assert.deepEqual(r, { verdict: 'REEMIT', offset: r.offset, results: first.results });
                    else assert.equal(r.verdict, 'SKIP');
                  }
              }
              for (const k of ['a', 'b', 'c']) await twin.checkStored(k);

              // the old owner, now a zombie, goes on with new records: fenced, nothing written
              const next = recs.length;
              const written = ['a', 'b', 'c'].map((k) => twin.model.get(k)?.fence != null);
              const zombie = await twin.callMany(
                ['a', 'b', 'c'].map((key, i) => ({
                  partition: 0,
                  epoch: 1,
                  committedOffset: -1,
                  key,
                  records: [
                    {
                      offset: next + i,
                      emit: 1,
                      effects:
                        records(spec, [{ key, value: { amount: 1 }, ts: t }], Date.now() + 3_600_000)[0]
                          ?.effects ?? [],
                    },
                  ],
                })),
              );
              for (const [i, rs] of zombie.entries()) {
                // cluster fencing: a key never written has no writer epoch to stop a zombie (strict fencing does)
                if (!written[i]) continue;
                assert.deepEqual(
                  rs.map((r) => r.verdict),
                  ['FENCE'],
                );
              }
              for (const k of ['a', 'b', 'c']) await twin.checkStored(k);
            },
          ),
          { numRuns: Number(process.env.RF_STORE_WINDOW_RUNS ?? 15) },
        );
        assert.ok(runs >= 1);
        assert.ok(late > 0, 'some records were late');
      });
    }
  });
}
