/**
 * An attempt's deadline (src/handler/context.ts), pure: it aborts at the deadline with RF_HANDLER_TIMEOUT,
 * passes the partition's abandonment on with its reason, and leaves no listener on the partition's
 * long-lived signal once cleared (one attempt after another must not pile them up).
 */
import assert from 'node:assert/strict';
import { getEventListeners, once } from 'node:events';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { attemptDeadline } from '../../src/handler/context.js';
import type { PartitionWork } from '../../src/handler/scheduler.js';

const partition = () => {
  const abandon = new AbortController();
  return { abandon, part: { abandon } as unknown as PartitionWork };
};

describe('attempt deadline', () => {
  it('aborts at the deadline with RF_HANDLER_TIMEOUT naming the record', async () => {
    const { part } = partition();
    const d = attemptDeadline(part, 20, 'in', 3, 42);
    assert.equal(d.expired, false);
    await once(d.signal, 'abort');
    d.clear();
    assert.equal(d.expired, true);
    assert.ok(RedfenceError.is(d.signal.reason, 'RF_HANDLER_TIMEOUT'));
    assert.match(d.signal.reason.message, /^in\/3@42: handle ran past 20 ms$/);
    const wrapped = d.error(new Error('socket hang up'));
    assert.ok(RedfenceError.is(wrapped, 'RF_HANDLER_TIMEOUT') && wrapped.retriable === true);
    assert.equal((wrapped.cause as Error).message, 'socket hang up');
  });

  it("passes the partition's abandonment on, with its reason, before the deadline", () => {
    const { abandon, part } = partition();
    const d = attemptDeadline(part, 60_000, 'in', 0, 1);
    const reason = new RedfenceError('RF_HANDLER_ABANDONED', 'revoked');
    abandon.abort(reason);
    assert.equal(d.signal.aborted, true);
    assert.equal(d.signal.reason, reason);
    assert.equal(d.expired, false);
    d.clear();
    const late = attemptDeadline(part, 60_000, 'in', 0, 2);
    assert.equal(late.signal.reason, reason, 'an attempt begun after the abandonment is aborted at once');
    late.clear();
  });

  it("leaves no listener on the partition's signal after clear()", () => {
    const { abandon, part } = partition();
    for (let i = 0; i < 1000; i++) attemptDeadline(part, 60_000, 'in', 0, i).clear();
    assert.equal(getEventListeners(abandon.signal, 'abort').length, 0);
  });
});
