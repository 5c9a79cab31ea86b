/**
 * The contract's resubscribe case (KafkaPort.resubscribe, what a topology reading a pattern uses for a
 * topic made while it runs): the owned partitions are revoked through onRevoke (which commits) before
 * `between` runs with nothing owned and nothing delivered; the new subscription is assigned through
 * onAssign and every record of the old topic and the new one is delivered once, in order, the old
 * topic taken up where the revocation committed, records written meanwhile included.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ConsumerHandlers, KafkaPort } from '../../src/kafka/types.js';
import { uniqueName } from '../helpers/env.js';
import { type ContractSide, Recorder, range, waitFor } from './contract-support.js';

export function resubscribeCase(side: ContractSide): void {
  it('resubscribe: revoked (and committed) before `between`, nothing owned then, each record once after', async (t) => {
    const [old, added] = [uniqueName('contract-rs-a'), uniqueName('contract-rs-b')];
    const P = 2;
    await side.topics(t, [
      { topic: old, partitions: P },
      { topic: added, partitions: P },
    ]);
    const write = (topic: string, from: number, to: number) =>
      side.write(
        topic,
        range(0, P).flatMap((partition) => range(from, to).map((i) => ({ partition, value: `${i}` }))),
      );
    const rec = new Map([
      [old, new Recorder()],
      [added, new Recorder()],
    ]);
    const owned = new Set<string>();
    const next = new Map<string, number>();
    const calls: string[] = [];
    const violations: string[] = [];
    const port: KafkaPort = side.port(t, { groupId: uniqueName('contract-rs-g'), maxBatchSize: 3 });
    let between = false;
    const handlers: ConsumerHandlers = {
      onAssign: async (tps) => {
        for (const tp of tps) owned.add(`${tp.topic}/${tp.partition}`);
        calls.push(`+${tps.length}`);
      },
      onRevoke: async (tps) => {
        calls.push(`-${tps.length}`);
        const offsets = tps.flatMap((tp) => {
          const n = next.get(`${tp.topic}/${tp.partition}`);
          return n === undefined ? [] : [{ topic: tp.topic, partition: tp.partition, offset: n }];
        });
        await port.commit(offsets);
        for (const tp of tps) owned.delete(`${tp.topic}/${tp.partition}`);
      },
      onBatch: async (topic, partition, records, high) => {
        if (between) violations.push(`a batch of ${topic}/${partition} during between`);
        if (!owned.has(`${topic}/${partition}`))
          violations.push(`a batch of ${topic}/${partition} not owned`);
        rec.get(topic)?.add('p', partition, records, high);
        next.set(`${topic}/${partition}`, Number(records.at(-1)?.offset) + 1);
      },
    };
    const count = (topic: string) => rec.get(topic)?.count() ?? 0;
    await write(old, 0, 5);
    await port.start([old], handlers);
    await waitFor(side, 'the first part consumed', () => count(old) >= P * 5);
    assert.ok(port.resubscribe, 'the port resubscribes');
    const writing = write(old, 5, 10); // written while it leaves and joins again
    await port.resubscribe([old, added], async () => {
      between = true;
      calls.push('between');
      if (owned.size > 0) violations.push(`owned during between: ${[...owned].join(', ')}`);
      await Promise.resolve(); // a batch delivered while it awaits shows as a violation
      between = false;
    });
    await writing;
    await write(added, 0, 5);
    await waitFor(side, 'both topics consumed', () => count(old) >= P * 10 && count(added) >= P * 5);
    assert.deepEqual(violations, [], calls.join(' '));
    const at = calls.indexOf('between');
    assert.ok(at > 0 && calls.slice(0, at).includes(`-${P}`), `revoked before between: ${calls.join(' ')}`);
    for (let p = 0; p < P; p++) {
      assert.deepEqual(rec.get(old)?.offsets(p), range(0, 10), `${old} ${p}: every offset once, in order`);
      assert.deepEqual(rec.get(added)?.offsets(p), range(0, 5), `${added} ${p}: every offset once`);
    }
    assert.equal(owned.size, 2 * P, 'both topics owned after');
  });
}
