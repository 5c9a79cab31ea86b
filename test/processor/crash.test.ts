/**
 * Crash at every boundary of the pipeline, on the real broker and Redis. For each (mode, crash point)
 * pair: instance A (`redfence run examples/customer-totals.ts` with REDFENCE_CRASH_AT=<point>,
 * REDFENCE_CRASH_AFTER=3) SIGKILLs itself the 3rd time it reaches the point, i.e. after two (after-commit:
 * three) committed batches, with most of the 600 orders (produced up front) still to process: A takes
 * batches of at most 40 records (REDFENCE_MAX_BATCH_SIZE), so three batches never hold the whole input,
 * and the crashed batch still holds several records per customer. Instance B (no crash variables) takes over once A's session expires and
 * finishes; then:
 * - every customer's state in Redis is the fold of all its orders, each applied exactly once;
 * - outputs (read_committed): exactly-once, one per order (counts 1..n once each); at-least-once, every
 *   order has an output, every output is the exact running state, duplicates are identical bytes, and
 *   the number of duplicates is what the crash point allows (at most what A applied without committing);
 * - committed offsets equal the end offsets;
 * - B's verdicts (scraped from its /metrics before it stops): REEMIT for exactly the records A applied in
 *   Redis without committing (read from Redis right after A's death: the pending entries at or past the
 *   committed offsets), APPLY for the rest of what B consumed, no SKIP. For after-commit that is at
 *   most the batch after the committed one (its Redis step overlaps the commit); for every other point
 *   it includes the whole crashed batch (> 0).
 *   in-transaction takes ~10-20 s longer: B cannot fetch its starting offsets until the broker aborts A's
 *   open transaction (transaction timeout 10 s, plus the broker's abort check interval).
 * A runs with group commit off (one Kafka step per batch) so the accounting above is per batch; the
 * chaos test kills instances at the same points with group commit on. Two more pairs run A and B with
 * two partitions' batches in flight (REDFENCE_PARTITIONS_IN_FLIGHT=2): A may then die with two batches
 * applied and not committed, and the same accounting holds.
 * The pairs run two at a time; each kills only its own children (never killLeftovers(), which would
 * kill the other test's).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Fence, type ProcessingMode, type StoredState } from '../../src/index.js';
import type { CrashPoint } from '../../src/processor/crash-points.js';
import { type ProcessorChild, startProcessorChild } from '../helpers/child.js';
import { standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo, customerOrders } from '../helpers/outputs.js';

const PARTITIONS = 3;
const CUSTOMERS = 30;
const ORDERS = 600;
const CRASH_AFTER = 3;
/** Progress notes (timings, verdicts) in the test output. */
const log = (s: string) => console.log(s);

type Mode = ProcessingMode;
/** `inFlight`: the processor's partitionsInFlight (several partitions' batches in the Redis stage at once). */
const CASES: Array<{ mode: Mode; point: CrashPoint; inFlight?: number }> = [
  { mode: 'exactly-once', point: 'after-redis-write' },
  { mode: 'exactly-once', point: 'after-redis-write', inFlight: 2 },
  { mode: 'at-least-once', point: 'after-delivery', inFlight: 2 },
  { mode: 'exactly-once', point: 'in-transaction' },
  { mode: 'exactly-once', point: 'after-commit' },
  { mode: 'at-least-once', point: 'after-redis-write' },
  { mode: 'at-least-once', point: 'after-produce' },
  { mode: 'at-least-once', point: 'after-delivery' },
  { mode: 'at-least-once', point: 'after-commit' },
];

interface Totals {
  total: number;
  count: number;
}

/** A customer's totals after its first `count` orders (its orders share one partition: offset order). */
function prefix(amounts: Map<string, number[]>, customer: string, count: number): Totals {
  const list = amounts.get(customer) ?? [];
  let total = 0;
  for (let i = 0; i < count; i++) total += list[i] ?? Number.NaN;
  return { total, count };
}

function sum(m: Map<number, number>): number {
  let s = 0;
  for (const v of m.values()) s += Math.max(0, v);
  return s;
}

/** `redfence run examples/customer-totals.ts` as a child with extra environment (the crash variables). */
function startChild(
  n: { orders: string; totals: string; store: string; group: string },
  mode: Mode,
  instance: string,
  env: Record<string, string>,
): Promise<ProcessorChild> {
  return startProcessorChild({ ...n, mode, instance, env });
}

describe('crash points', { timeout: 300_000, concurrency: 2 }, () => {
  for (const { mode, point, inFlight } of CASES) {
    const title = `${mode}${inFlight ? `, ${inFlight} partitions in flight` : ''}`;
    it(`${title}: SIGKILL ${point} (${CRASH_AFTER}rd time); a second instance finishes exactly`, async () => {
      const flight: Record<string, string> = inFlight
        ? { REDFENCE_PARTITIONS_IN_FLIGHT: String(inFlight) }
        : {};
      const ns = uniqueName(`crash-${mode === 'exactly-once' ? 'eos' : 'alo'}-${point}`);
      const n = {
        orders: `${ns}-orders`,
        totals: `${ns}-totals`,
        store: ns.replace(/-/g, '_'),
        group: `${ns}-group`,
      };
      const cleanup = await createTopics([
        { topic: n.orders, partitions: PARTITIONS },
        { topic: n.totals, partitions: PARTITIONS },
        { topic: `${n.orders}.DLT`, partitions: 1 },
      ]);
      const redis = standalone();
      const fence = new Fence({ redis, store: n.store, mode: 'strict' });
      const t0 = Date.now();
      const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
      const tag = `${mode}/${point}${inFlight ? `/in-flight ${inFlight}` : ''}`;
      // this test's children only (killLeftovers() would also kill the concurrently running test's)
      const children: ProcessorChild[] = [];
      const exactlyOnce = mode === 'exactly-once';
      try {
        const { messages, amounts } = customerOrders(ORDERS, CUSTOMERS);
        await produce(n.orders, messages);
        const input = await readToEnd(n.orders);
        assert.equal(input.length, ORDERS, 'every order read back from the input topic');

        // A: dies by its own SIGKILL the 3rd time it reaches the crash point
        const a = await startChild(n, mode, 'A', {
          REDFENCE_CRASH_AT: point,
          REDFENCE_CRASH_AFTER: String(CRASH_AFTER),
          // one Kafka step per batch, so "the 3rd commit" is the 3rd batch's (group commit could fold
          // the whole input into three steps); crashes inside grouped steps: test/chaos
          REDFENCE_GROUP_COMMIT_RECORDS: '0',
          REDFENCE_MAX_BATCH_SIZE: '40',
          ...flight,
        });
        children.push(a);
        const aExit = await a.waitExit(60_000);
        const started = a.log.find((l) => l.msg === 'processor started')[0];
        assert.equal(started?.partitionsInFlight, inFlight ?? 1, `A's partitions in flight ${a.tail()}`);
        assert.deepEqual(aExit, { code: null, signal: 'SIGKILL' }, `A died by SIGKILL ${a.tail()}`);
        assert.ok(
          a.log.find((l) => l.msg === 'partitions assigned').length > 0,
          `A was assigned ${a.tail()}`,
        );

        // What A left: committed offsets, and per customer the state and pending entries in Redis
        const committed = await committedOffsets(n.group, n.orders);
        const ends = await endOffsets(n.orders);
        const states = new Map<string, StoredState | null>();
        for (const c of amounts.keys()) states.set(c, await fence.read(c));
        assert.ok(sum(committed) > 0, `A committed some batches before dying (${sum(committed)})`);
        assert.ok(sum(committed) < sum(ends), `A died mid-stream (${sum(committed)} of ${sum(ends)})`);
        // every stored state is the exact fold of a prefix of the customer's orders
        let appliedByA = 0;
        for (const [c, s] of states) {
          if (s === null) continue;
          const v = JSON.parse(s.value?.toString('utf8') ?? 'null') as Totals;
          assert.deepEqual(v, prefix(amounts, c, v.count), `state of ${c} after A's death`);
          appliedByA += v.count;
        }
        // applied in Redis but not committed: the input records at or past their partition's committed
        // offset that the key's fence has passed -- each must have a pending entry (B re-emits it)
        let uncommittedApplied = 0;
        for (const r of input) {
          const s = states.get(r.key ?? '');
          const off = Number(r.offset);
          if (off < (committed.get(r.partition) ?? 0)) continue;
          if (s && s.partition === r.partition && s.offset >= off) {
            uncommittedApplied++;
            assert.ok(
              s.pending.some((e) => e.offset === off && e.kind === 'output'),
              `pending output of ${r.key} at ${r.partition}/${off}`,
            );
          }
        }
        let pendingPastCommit = 0;
        for (const s of states.values())
          for (const e of s?.pending ?? [])
            if (e.offset >= (committed.get(s?.partition ?? -1) ?? 0)) pendingPastCommit++;
        assert.equal(pendingPastCommit, uncommittedApplied, 'pending entries past the committed offsets');
        // after-commit: the next batch may already be in Redis (its Redis step overlaps this batch's
        // Kafka step), never more than one; every other point dies with the crashed batch applied
        if (point !== 'after-commit')
          assert.ok(uncommittedApplied > 0, 'A died with an applied, uncommitted batch');
        else
          assert.ok(
            uncommittedApplied <= 500,
            `A applied at most one batch past its commits (${uncommittedApplied}) ${a.tail()}`,
          );
        log(
          `[${tag} ${at()}] A died by SIGKILL: committed ${sum(committed)} of ${ORDERS}, applied ${appliedByA}, ` +
            `${uncommittedApplied} applied but not committed`,
        );

        // B: takes over once A's session expires and finishes
        const b = await startChild(n, mode, 'B', flight);
        children.push(b);
        await b.log.waitAssigned(60_000);
        await pollUntil(
          'B processed all input (committed offsets == end offsets)',
          async () => {
            if (!b.alive) throw new Error(`B exited ${JSON.stringify(b.exit)}`);
            const now = await committedOffsets(n.group, n.orders);
            for (const [p, end] of ends) if ((now.get(p) ?? -1) !== end) return false;
            return true;
          },
          60_000,
        ).catch((err: Error) => {
          throw new Error(`${err.message} ${b.tail()}`);
        });
        const v = await b.verdicts();
        log(`[${tag} ${at()}] B caught up; verdicts ${JSON.stringify(Object.fromEntries(v))}`);
        b.term();
        assert.deepEqual(await b.waitExit(20_000), { code: 0, signal: null }, `B exits 0 ${b.tail()}`);

        // B's verdicts: REEMIT exactly for what A applied without committing, APPLY for the rest it
        // consumed, no SKIP (nothing below the committed offsets is consumed again)
        const consumedByB = ORDERS - sum(committed);
        assert.equal(
          v.get('REEMIT') ?? 0,
          uncommittedApplied,
          'B re-emitted what A applied but did not commit',
        );
        assert.equal(v.get('APPLY') ?? 0, ORDERS - appliedByA, 'B applied what A had not');
        assert.equal(v.get('SKIP') ?? 0, 0, 'B skipped nothing');
        assert.equal(
          (v.get('REEMIT') ?? 0) + (v.get('APPLY') ?? 0),
          consumedByB,
          'B consumed from the commits',
        );

        // State: every customer's totals are the fold of all its orders, each applied once
        for (const c of amounts.keys()) {
          const s = await fence.read(c);
          const got = s?.value == null ? null : (JSON.parse(s.value.toString('utf8')) as Totals);
          assert.deepEqual(got, prefix(amounts, c, amounts.get(c)?.length ?? 0), `final state of ${c}`);
        }

        // Outputs, read_committed
        const outputs = await readToEnd(n.totals);
        const bytes = new Map<string, Set<string>>(); // customer/count -> distinct output bytes
        for (const o of outputs) {
          const c = o.key ?? '';
          const t = JSON.parse(o.value ?? 'null') as Totals;
          assert.deepEqual(
            t,
            prefix(amounts, c, t.count),
            `output ${o.value} of ${c} at ${o.partition}/${o.offset}`,
          );
          const id = `${c}/${t.count}`;
          const set = bytes.get(id) ?? new Set<string>();
          bytes.set(id, set.add(o.value ?? ''));
        }
        // per customer: counts 1..n, each once (exactly-once) or at least once; no other customer
        assertPerKey(
          exactlyOnce ? 'one output per order' : 'at least one output per order',
          outputs,
          countOf,
          countsUpTo(new Map([...amounts].map(([c, list]) => [c, list.length]))),
          exactlyOnce ? {} : { duplicates: 'allowed' },
        );
        for (const [id, set] of bytes) assert.equal(set.size, 1, `${id}: duplicates are identical bytes`);
        const duplicates = outputs.length - ORDERS;
        if (exactlyOnce || point === 'after-commit') {
          // nothing uncommitted reached the output topic: the batch after the committed one was at most
          // in Redis (its Kafka step waits for the committed one's)
          assert.equal(duplicates, 0, 'one committed output per order');
        } else if (point === 'after-delivery') {
          // A's crashed batch was delivered, then B re-emitted it (and the next batch, if A had it in
          // Redis, was produced by B only)
          assert.ok(
            duplicates > 0 && duplicates <= uncommittedApplied,
            `the crashed batch delivered twice (${duplicates} of ${uncommittedApplied})`,
          );
        } else {
          // after-produce: handed to the producer, maybe (partly) sent before the SIGKILL;
          // after-redis-write: the previous batch's Kafka step may have delivered without committing
          assert.ok(duplicates >= 0 && duplicates <= uncommittedApplied, `duplicates ${duplicates}`);
        }
        log(
          `[${tag} ${at()}] ${ORDERS} orders, ${outputs.length} outputs (${duplicates} duplicates), ` +
            `REEMIT ${v.get('REEMIT') ?? 0}`,
        );
      } finally {
        await Promise.all(children.map((c) => c.kill()));
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${n.store}:*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length > 0) await redis.del(...keys);
        } while (cursor !== '0');
        redis.disconnect();
        await cleanup();
      }
    });
  }
});
