/**
 * waitReplicas on a Redis Cluster that fails over while the client sends nothing but WAIT (an instance
 * whose partitions are idle): the dead master leaves the client's node list at once, its successor only
 * with a slot-map refresh. WAIT must refresh and cover the new master, not skip it (and not pass on an
 * empty list). The cluster is the chaos harness's own (free ports, its own directory).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { clusterFailover } from '../../src/chaos/failover.js';
import { startRedisSide, stopRedisSide } from '../../src/chaos/redis-topology.js';
import { waitReplicas } from '../../src/processor/redis-setup.js';

describe('waitReplicas across a cluster failover', { timeout: 180_000 }, () => {
  it('an idle client WAITs on every master after two masters were replaced', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'redfence-wait-failover-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const side = await startRedisSide('cluster', dir, 1);
    t.after(() => stopRedisSide(side));
    const c = new Cluster(
      (side.nodes ?? []).map((n) => ({ host: '127.0.0.1', port: n.port })),
      { lazyConnect: true },
    );
    c.on('error', () => undefined);
    c.on('node error', () => undefined);
    t.after(() => c.disconnect());
    await c.connect();
    await c.set('rf:{wait-failover}', '1');
    await waitReplicas(c, { replicas: 1, timeoutMs: 2000 });
    for (const pick of [0, 1]) {
      const r = await clusterFailover(side, { index: pick, kind: 'redis-failover', at: 0, pick, pauseMs: 0 });
      assert.equal(r.facts.promoted, true, r.outcome);
      assert.equal(r.facts.serverBack, true, r.outcome);
      const promoted = Number(/-> :(\d+)/.exec(r.target ?? '')?.[1]);
      await waitReplicas(c, { replicas: 1, timeoutMs: 2000 });
      const ports = c.nodes('master').map((n) => n.options.port);
      assert.equal(ports.length, 3, `three masters known, got ${ports.join(',')}`);
      assert.ok(ports.includes(promoted), `the promoted ${promoted} is among ${ports.join(',')}`);
    }
  });
});
