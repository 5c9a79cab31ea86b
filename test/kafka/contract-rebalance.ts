/**
 * The contract's rebalance case: two members of one group, callbacks that take time and commit on
 * revocation; each partition has one owner at a time and every record is delivered once across the
 * handovers (a member joining, then one leaving).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ConsumerHandlers, KafkaPort } from '../../src/kafka/types.js';
import { uniqueName } from '../helpers/env.js';
import { type ContractSide, Recorder, range, waitFor } from './contract-support.js';

export function rebalanceCase(side: ContractSide): void {
  it('rebalance: awaited callbacks, one owner per partition, each record once across handovers', async (t) => {
    const topic = uniqueName('contract-rb');
    const P = 4;
    await side.topics(t, [{ topic, partitions: P }]);
    const groupId = uniqueName('contract-rb-g');
    const write = (from: number, to: number) =>
      side.write(
        topic,
        range(0, P).flatMap((partition) =>
          range(from, to).map((i) => ({ partition, value: `${partition}-${i}` })),
        ),
      );
    const all = new Recorder();
    const owned = new Map<string, Set<number>>();
    const ready = new Map<string, Set<number>>();
    const revoking = new Map<string, Set<number>>();
    const next = new Map<number, number>(); // partition -> next offset, from the batches handled
    const violations: string[] = [];
    const calls: string[] = [];
    // The callbacks take a little time on purpose: a batch or another member's assignment that does
    // not wait for them shows up as a violation.
    const slow = () => new Promise((r) => setTimeout(r, 30));
    const member = (name: string, port: KafkaPort): ConsumerHandlers => {
      owned.set(name, new Set());
      ready.set(name, new Set());
      revoking.set(name, new Set());
      return {
        onAssign: async (tps) => {
          for (const tp of tps) {
            for (const [other, set] of owned)
              if (set.has(tp.partition))
                violations.push(`${name} assigned ${tp.partition} while ${other} owns it`);
            owned.get(name)?.add(tp.partition);
          }
          calls.push(`${name}+${tps.map((tp) => tp.partition).join(',')}`);
          await slow();
          for (const tp of tps) ready.get(name)?.add(tp.partition);
        },
        onRevoke: async (tps, lost) => {
          if (lost) violations.push(`${name} lost ${tps.map((tp) => tp.partition)}`);
          for (const tp of tps) revoking.get(name)?.add(tp.partition);
          calls.push(`${name}-${tps.map((tp) => tp.partition).join(',')}`);
          await slow();
          const offsets = tps.flatMap((tp) => {
            const n = next.get(tp.partition);
            return n === undefined ? [] : [{ topic, partition: tp.partition, offset: n }];
          });
          await port.commit(offsets).catch((err: Error) => {
            violations.push(`${name}: the commit in onRevoke failed: ${err.message}`);
            throw err;
          });
          for (const tp of tps) {
            owned.get(name)?.delete(tp.partition);
            ready.get(name)?.delete(tp.partition);
            revoking.get(name)?.delete(tp.partition);
          }
        },
        onBatch: async (_topic, partition, records, high) => {
          if (!ready.get(name)?.has(partition))
            violations.push(`${name} got ${partition} before its onAssign ended`);
          if (revoking.get(name)?.has(partition))
            violations.push(`${name} got ${partition} while revoking it`);
          all.add(name, partition, records, high);
          next.set(partition, Number(records.at(-1)?.offset) + 1);
        },
      };
    };
    const assigned = (name: string) => [...(owned.get(name) ?? [])].filter((p) => ready.get(name)?.has(p));
    await write(0, 5);
    const a = side.port(t, { groupId, maxBatchSize: 2 });
    await a.start([topic], member('a', a));
    await waitFor(side, 'a consumed the first part', () => all.count() >= P * 5);
    const b = side.port(t, { groupId, maxBatchSize: 2 });
    await b.start([topic], member('b', b));
    await waitFor(
      side,
      'the partitions shared two and two',
      () => assigned('a').length === 2 && assigned('b').length === 2,
    );
    const shared = [...assigned('a'), ...assigned('b')].sort();
    assert.deepEqual(shared, range(0, P), 'every partition owned by exactly one member');
    const moved = assigned('b');
    await write(5, 10);
    await waitFor(side, 'the second part consumed', () => all.count() >= P * 10);
    await a.stop();
    await waitFor(side, 'b owns every partition', () => assigned('b').length === P);
    await write(10, 15);
    await waitFor(side, 'the third part consumed', () => all.count() >= P * 15);
    assert.deepEqual(violations, [], calls.join(' '));
    for (let p = 0; p < P; p++) {
      assert.deepEqual(all.offsets(p), range(0, 15), `partition ${p}: every offset once, in order`);
      const by = all.batches.filter((x) => x.partition === p).map((x) => x.member);
      const firstB = by.indexOf('b');
      assert.ok(
        firstB >= 0 && by.slice(firstB).every((m) => m === 'b'),
        `partition ${p}: one handover, to b`,
      );
      const firstBatchOfB = all.batches.find((x) => x.partition === p && x.member === 'b');
      assert.equal(
        firstBatchOfB?.offsets[0],
        moved.includes(p) ? 5 : 10,
        `partition ${p}: b starts where a's revoke callback committed`,
      );
    }
  });
}
