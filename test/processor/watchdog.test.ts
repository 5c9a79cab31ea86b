import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Watchdog, type WatchdogInput, watchdogVerdict } from '../../src/processor/watchdog.js';

const base: WatchdogInput = {
  now: 100_000,
  lastDeliveryAt: 0,
  stallMs: 60_000,
  batchInFlight: false,
  redisOutage: false,
  lag: 10,
  recoveries: 0,
  maxRecoveries: 3,
};

describe('watchdog', () => {
  it('recovers a consumer with lag that delivered nothing for longer than stallMs', () => {
    assert.equal(watchdogVerdict(base), 'recover');
  });

  it('is quiet when caught up, busy, paused for a Redis outage, or recently active', () => {
    assert.equal(watchdogVerdict({ ...base, lag: 0 }), 'ok');
    assert.equal(watchdogVerdict({ ...base, batchInFlight: true }), 'ok');
    assert.equal(watchdogVerdict({ ...base, redisOutage: true }), 'ok');
    assert.equal(watchdogVerdict({ ...base, lastDeliveryAt: 50_000 }), 'ok');
  });

  it('gives up after maxRecoveries so liveness fails', () => {
    assert.equal(watchdogVerdict({ ...base, recoveries: 2 }), 'recover');
    assert.equal(watchdogVerdict({ ...base, recoveries: 3 }), 'give-up');
  });
});

describe('watchdog: lag is what the consumer has yet to hand over', () => {
  /** A watchdog over one partition committed at 5 whose high watermark is 6 (a transaction marker). */
  function markerOnly(positions?: Map<string, number>) {
    const seeks: number[] = [];
    const w = new Watchdog(
      {
        running: () => true,
        partitions: () => [{ topic: 't', partition: 0, committed: 5 }],
        highWatermarks: async () => new Map([[0, 6]]),
        ...(positions === undefined ? {} : { positions: () => positions }),
        kafka: { seek: (_tp, offset) => void seeks.push(offset) },
        batchInFlight: () => false,
        redisOutage: () => false,
        giveUp: () => true,
        log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
      },
      { stallMs: 0, intervalMs: 60_000, maxRecoveries: 3 },
    );
    return { w, seeks };
  }

  it('a position past the last transaction marker is no lag; without positions the marker reads as lag', async () => {
    const caughtUp = markerOnly(new Map([['t/0', 6]]));
    await caughtUp.w.check();
    assert.deepEqual(caughtUp.seeks, [], 'no recovery: nothing left to hand over');
    const behind = markerOnly(new Map([['t/0', 5]]));
    await behind.w.check();
    assert.deepEqual(behind.seeks, [5], 'a position short of the end still is lag');
    const blind = markerOnly();
    await blind.w.check();
    assert.deepEqual(blind.seeks, [5], 'a port without positions: the marker is taken for lag');
  });
});
