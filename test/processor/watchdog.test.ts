import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type WatchdogInput, watchdogVerdict } from '../../src/processor/watchdog.js';

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
