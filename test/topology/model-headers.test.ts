/**
 * Headers in the reference model: an output carries the headers of the record that caused it, through
 * maps and a repartition topic; a final result the headers of the record whose stream time closed its
 * window (whatever that record's key); a session window's updates none, as Kafka Streams 4.x forwards
 * them (test/topology/run-equals-kstreams.test.ts compares all of it with Kafka Streams itself). Input
 * headers that are not Buffer or string values are refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { SessionWindows, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';

const s = serdes.string();
const rec = (offset: number, key: string, ts: number, h?: string): ModelInput => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from(key),
  value: Buffer.from('1'),
  timestamp: ts,
  ...(h === undefined ? {} : { headers: { h, many: ['x', Buffer.from(h)] } }),
});
const seen = (r: ReturnType<typeof runModel>) =>
  r.outputs.map((o) => `${o.key?.toString()}:${o.headers === undefined ? '-' : String(o.headers.h)}`);

describe('streams model: headers', () => {
  it('a stateless output and a windowed update carry their record headers, through a repartition topic', () => {
    const t = topology({ applicationId: 'app' });
    const st = t.stream<string, string>('in', { key: s, value: s });
    st.to('plain', { key: s, value: s });
    st.selectKey((k) => `${k}!`)
      .groupByKey({ key: s })
      .windowedBy(TimeWindows.ofSizeWithNoGrace(10))
      .count()
      .toStream()
      .map((w, n) => [w.key, n] as const)
      .to('counts', { key: s });
    const r = runModel(t.build(), [rec(0, 'a', 1, 'one'), rec(1, 'b', 2), rec(2, 'a', 3, 'three')]);
    assert.deepEqual(
      r.outputs.filter((o) => o.topic === 'plain').map((o) => o.headers),
      [
        { h: 'one', many: ['x', Buffer.from('one')] },
        undefined,
        { h: 'three', many: ['x', Buffer.from('three')] },
      ],
    );
    assert.deepEqual(seen({ ...r, outputs: r.outputs.filter((o) => o.topic === 'counts') }), [
      'a!:one',
      'b!:-',
      'a!:three',
    ]);
  });

  it('a final result carries the closing record headers; a session update none', () => {
    const t = topology({ applicationId: 'app' });
    const g = t.stream<string, string>('in', { key: s, value: s }).groupByKey();
    g.windowedBy(TimeWindows.ofSizeWithNoGrace(10))
      .emit('final')
      .count()
      .toStream()
      .map((w, n) => [w.key, n] as const)
      .to('final', { key: s });
    g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5))
      .count()
      .toStream()
      .map((w, n) => [w.key, n ?? -1] as const)
      .to('sessions', { key: s });
    const r = runModel(t.build(), [rec(0, 'a', 1, 'one'), rec(1, 'b', 12, 'closer')]);
    // b at 12 closes a's window [0, 10): a's final result carries b's headers
    assert.deepEqual(seen({ ...r, outputs: r.outputs.filter((o) => o.topic === 'final') }), ['a:closer']);
    assert.deepEqual(seen({ ...r, outputs: r.outputs.filter((o) => o.topic === 'sessions') }), [
      'a:-',
      'b:-',
    ]);
  });

  it('refuses input headers that are not Buffer or string values, naming the input', () => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, string>('in', { key: s, value: s }).to('out', { key: s, value: s });
    const bad = { ...rec(0, 'a', 1), headers: { n: 5 } } as unknown as ModelInput;
    assert.throws(
      () => runModel(t.build(), [bad]),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT') && /input\[0\].*headers/.test(e.message),
    );
  });
});
