/**
 * The committer's own rules, on a recording commit function (the real-broker handler and invalidation
 * tests cover it against Kafka): only moved points, one commit at a time, a failure leaves the point to
 * the next commit, a fatal error is handed on.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import type { CommitOffset } from '../../src/kafka/types.js';
import { type CommitPart, Committer } from '../../src/runtime/committer.js';
import { silentLogger } from '../../src/runtime/logger.js';

type P = CommitPart & { point: number };
const part = (partition: number, point: number, committed = -1): P => ({
  tp: { topic: 't', partition },
  point,
  committed,
});

function setUp(parts: P[], commit: (o: readonly CommitOffset[]) => Promise<void>) {
  const calls: CommitOffset[][] = [];
  const fatal: Error[] = [];
  let committedCount = 0;
  const c = new Committer<P>({
    kafka: {
      commit: async (o) => {
        calls.push([...o]);
        await commit(o);
      },
    },
    log: silentLogger,
    pointOf: (p) => p.point,
    live: () => parts,
    onCommitted: () => {
      committedCount++;
    },
    onFatal: (err) => fatal.push(err),
  });
  return { c, calls, fatal, commits: () => committedCount };
}

describe('Committer', () => {
  it('commits only the partitions whose point moved, and raises their committed offset', async () => {
    const parts = [part(0, 5, 5), part(1, 7, 3), part(2, -1)];
    const s = setUp(parts, async () => undefined);
    await s.c.commit();
    assert.deepEqual(s.calls, [[{ topic: 't', partition: 1, offset: 7 }]]);
    assert.equal(parts[1]?.committed, 7);
    assert.equal(s.commits(), 1);
    await s.c.commit();
    assert.equal(s.calls.length, 1, 'nothing moved: no commit');
    // given partitions are committed instead of the live ones
    const gone = part(9, 4);
    await s.c.commit([gone]);
    assert.deepEqual(s.calls[1], [{ topic: 't', partition: 9, offset: 4 }]);
  });

  it('runs one commit at a time, in call order', async () => {
    // three commits called at once, each with its own moved partition (so each one calls Kafka); every
    // call is held open until released here
    const parts = [part(0, 1), part(1, 1), part(2, 1)];
    let open = 0;
    let most = 0;
    const held: Array<() => void> = [];
    let entered: () => void = () => undefined;
    const s = setUp(parts, async () => {
      open++;
      most = Math.max(most, open);
      await new Promise<void>((release) => {
        held.push(release);
        entered();
      });
      open--;
    });
    const nextEntry = () =>
      new Promise<void>((r) => {
        entered = r;
      });
    let waiting = nextEntry();
    const done = parts.map((p) => s.c.commit([p]));
    for (let i = 0; i < parts.length; i++) {
      await waiting;
      waiting = nextEntry();
      assert.equal(open, 1, `commit ${i} is the only one open`);
      assert.equal(s.calls.length, i + 1, `commit ${i + 1} has not started while commit ${i} is open`);
      held.shift()?.();
    }
    await Promise.all(done);
    assert.equal(most, 1, 'at most one commit call open at any moment');
    assert.deepEqual(
      s.calls.map((c) => c[0]?.partition),
      [0, 1, 2],
      'the commits ran in call order',
    );
    assert.deepEqual(
      parts.map((p) => p.committed),
      [1, 1, 1],
    );
  });

  it('a commit reads the points when it runs, not when it is called', async () => {
    const parts = [part(0, 1)];
    const s = setUp(parts, async () => undefined);
    const a = s.c.commit();
    (parts[0] as P).point = 2;
    const b = s.c.commit();
    await Promise.all([a, b]);
    assert.deepEqual(
      s.calls.map((c) => c[0]?.offset),
      [2],
      'the first commit reads the point when it runs; the second finds nothing moved',
    );
  });

  it('a failed commit leaves the point for the next one; a fatal error is handed on', async () => {
    const parts = [part(0, 3)];
    let fail: Error | undefined = new Error('coordinator away');
    const s = setUp(parts, async () => {
      if (fail) throw fail;
    });
    await s.c.commit();
    assert.equal(parts[0]?.committed, -1);
    assert.equal(s.fatal.length, 0);
    fail = undefined;
    await s.c.commit();
    assert.equal(parts[0]?.committed, 3);
    (parts[0] as P).point = 4;
    fail = new RedfenceError('RF_KAFKA_FATAL', 'fenced');
    await s.c.commit();
    assert.equal(s.fatal.length, 1);
    assert.equal(parts[0]?.committed, 3);
  });
});
