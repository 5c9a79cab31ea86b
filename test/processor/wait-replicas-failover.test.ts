/**
 * waitReplicas on a Redis Cluster that fails over while the client sends nothing but WAIT (an instance
 * whose partitions are idle): the dead master leaves the client's node list at once, its successor only
 * with a slot-map refresh. WAIT must refresh and cover the new master, not skip it (and not pass on an
 * empty list). And an auto-pipelining client, idle across the failover, gets the MOVED replies of
 * pipelines whose slots moved handed over again and again until its slot map is refreshed:
 * refreshAfterRedirect does that, so the Redis guard's retry succeeds. The cluster is the chaos
 * harness's own (free ports, its own directory).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { clusterFailover } from '../../src/chaos/failover.js';
import { startRedisSide, stopRedisSide } from '../../src/chaos/redis-topology.js';
import { pollUntil } from '../../src/harness/poll.js';
import { refreshAfterRedirect, waitReplicas } from '../../src/processor/redis-setup.js';

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
    const piped = new Cluster(
      (side.nodes ?? []).map((n) => ({ host: '127.0.0.1', port: n.port })),
      { lazyConnect: true, enableAutoPipelining: true },
    );
    piped.on('error', () => undefined);
    piped.on('node error', () => undefined);
    t.after(() => piped.disconnect());
    await piped.connect();
    // one script call per key over many slots, all at once (auto-pipelined by node)
    const writeAll = async () => {
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, k) =>
          piped.eval("return redis.call('INCR', KEYS[1])", 1, `rf:{wait-failover-${k}}`).then(
            () => undefined,
            (err: Error) => err,
          ),
        ),
      );
      return results.filter((e) => e !== undefined);
    };
    assert.deepEqual(await writeAll(), []);
    let redirected = 0;
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
      await pollUntil(
        'every write to go through after the failover',
        async () => {
          const errors = await writeAll();
          for (const err of errors) {
            assert.match(err.message, /^(MOVED|ASK) /, err.message);
            redirected++;
            refreshAfterRedirect(piped, err);
          }
          return errors.length === 0;
        },
        15_000,
        200,
      );
    }
    // the case it is for did happen (one of the two failovers moved slots under the idle pipeline)
    assert.ok(redirected > 0, 'some MOVED replies reached the caller');
  });
});
