/**
 * What only the memory port can show about commit metadata (the contract, test/kafka/contract.test.ts,
 * runs the rest on both ports): a refused call reaches nothing (no step recorded, nothing committed, no
 * fault consumed), the steps record the metadata as given, and the `committed` step's holds and
 * failures apply to committedWithMetadata too, which is counted on its own.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CommitOffset, ConsumerHandlers } from '../../src/kafka/types.js';
import { MemoryKafka } from '../../src/testing/index.js';

const quiet: ConsumerHandlers = {
  onAssign: async () => undefined,
  onRevoke: async () => undefined,
  onBatch: async () => undefined,
};

async function started() {
  const kafka = new MemoryKafka({ topics: { in: 1, out: 1 } });
  const port = kafka.port({ groupId: 'g' });
  await port.start(['in'], quiet);
  await kafka.settled();
  return { kafka, port };
}

const tp = { topic: 'in', partition: 0 };

describe('MemoryKafka port: commit metadata', () => {
  it('a refused call records no step, commits nothing and leaves the injected failure for the next call', async () => {
    const { kafka, port } = await started();
    const bad: CommitOffset[] = [{ ...tp, offset: 3, metadata: 'x'.repeat(4096) }];
    port.failNext('commit');
    port.failNext('transaction');
    await assert.rejects(port.commit(bad), { code: 'RF_INVALID_ARGUMENT', message: /in\/0/ });
    await assert.rejects(port.produceTransactionally([{ topic: 'out', key: null, value: 'v' }], bad), {
      code: 'RF_INVALID_ARGUMENT',
    });
    assert.deepEqual(port.steps, [], 'no step ran');
    assert.deepEqual(kafka.read('out', { isolation: 'read_uncommitted' }), [], 'no record written');
    assert.deepEqual(kafka.committedOffsets('g', 'in'), new Map());
    assert.equal(port.calls.commit, 1);
    assert.equal(port.calls.produceTransactionally, 1);
    // the injected failures were not used up by the refused calls
    await assert.rejects(port.commit([{ ...tp, offset: 3 }]), { code: 'INJECTED' });
    await assert.rejects(port.produceTransactionally([], [{ ...tp, offset: 3 }]), { code: 'INJECTED' });
    await port.stop();
  });

  it('steps record the metadata as given; committed() and committedWithMetadata() read one store', async () => {
    const { kafka, port } = await started();
    await port.commit([{ ...tp, offset: 2, metadata: 'st=1' }]);
    await port.produceTransactionally([], [{ ...tp, offset: 4, metadata: 'st=2' }]);
    assert.deepEqual(
      port.steps.map((s) => s.offsets),
      [[{ ...tp, offset: 2, metadata: 'st=1' }], [{ ...tp, offset: 4, metadata: 'st=2' }]],
    );
    assert.deepEqual(
      await port.committedWithMetadata([tp]),
      new Map([['in/0', { offset: 4, metadata: 'st=2' }]]),
    );
    assert.deepEqual(await port.committed([tp]), new Map([['in/0', 4]]));
    assert.deepEqual(kafka.committedOffsets('g', 'in'), new Map([[0, 4]]));
    assert.equal(port.calls.committed, 1);
    assert.equal(port.calls.committedWithMetadata, 1);
    await port.stop();
  });

  it('failNext and hold of the committed step apply to committedWithMetadata', async () => {
    const { port } = await started();
    port.failNext('committed');
    await assert.rejects(port.committedWithMetadata([tp]), { code: 'INJECTED' });
    const held = port.hold('committed');
    let read = false;
    const reading = port.committedWithMetadata([tp]).then((m) => {
      read = true;
      return m;
    });
    await held.reached;
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(read, false, 'waits at the hold');
    held.release();
    assert.deepEqual(await reading, new Map([['in/0', { offset: -1, metadata: '' }]]));
    assert.equal(port.calls.committedWithMetadata, 2);
    assert.equal(port.calls.committed, 0);
    await port.stop();
  });
});
