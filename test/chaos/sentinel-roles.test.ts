/**
 * The Sentinel side's roles across Redis faults, on real redis-servers and Sentinels (no Kafka, no
 * instances): a `redis-restart` longer than the Sentinels' down-after time (1 s) makes them promote the
 * replica while the primary is down. The next faults must aim at the primary the Sentinels name: a
 * `redis-failover` after such a restart kills the promoted server (not the old primary, now its
 * replica) and is promoted back; a second restart kills the primary of the moment.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { type FaultContext, inject } from '../../src/chaos/faults.js';
import { type RedisSide, startRedisSide, stopRedisSide } from '../../src/chaos/redis-topology.js';
import type { Fault } from '../../src/chaos/schedule.js';

const unused = () => {
  throw new Error('no instance in this test');
};

describe('chaos Redis faults follow the Sentinels', { timeout: 180_000 }, () => {
  it('a restart the Sentinels took for a failure moves the roles; the next faults aim at the new primary', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'rf-sentinel-roles-'));
    const side: RedisSide = await startRedisSide('sentinel', dir, 1);
    t.after(async () => {
      await stopRedisSide(side);
      await rm(dir, { recursive: true, force: true });
    });
    const c: FaultContext = {
      sessionTimeoutMs: 6000,
      crashTimeoutMs: 10_000,
      redis: side,
      slots: [],
      live: () => [],
      addInstance: unused,
      restart: unused,
      stopGracefully: unused,
      inputDone: async () => false,
      inputProduced: () => false,
    };
    const fault = (index: number, kind: Fault['kind'], pauseMs: number): Fault => ({
      index,
      kind,
      at: 0,
      pick: 0,
      pauseMs,
    });
    const first = side.primary.port;
    const second = side.replica?.port as number;
    const sentinel = side.sentinels?.[0];
    assert.ok(sentinel !== undefined && second !== undefined);

    // down 6 s, far past the Sentinels' 1 s down-after: they promote the replica meanwhile
    const restart = await inject(c, fault(0, 'redis-restart', 6000));
    assert.equal(restart.facts.serverKilled, true, restart.outcome);
    assert.equal(restart.target, `redis :${first}`);
    assert.equal(
      await sentinel.primaryPort(),
      second,
      'the Sentinels promoted the replica during the restart',
    );
    assert.match(restart.outcome, new RegExp(`Sentinel promoted the replica :${second} meanwhile`));
    assert.deepEqual([side.primary.port, side.replica?.port], [second, first], 'the side follows them');

    const failover = await inject(c, fault(1, 'redis-failover', 0));
    assert.equal(failover.target, `redis :${second} -> :${first}`, failover.outcome);
    assert.equal(failover.facts.promoted, true, failover.outcome);
    assert.equal(failover.facts.serverBack, true, failover.outcome);
    assert.equal(await sentinel.primaryPort(), side.primary.port);

    const again = await inject(c, fault(2, 'redis-restart', 500));
    assert.equal(again.target, `redis :${side.primary.port}`, again.outcome);
    assert.equal(again.facts.serverKilled, true, again.outcome);
  });
});
