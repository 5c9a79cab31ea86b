/**
 * Redis failover under the chaos harness, short: the harness's own Sentinel set (primary, replica, three
 * Sentinels) and its own Redis Cluster (three masters, three replicas), each primary or master SIGKILLed
 * twice with its replication link cut a second before, so the replica that takes over misses that
 * second of writes. With `--wait-replicas 1` the verifier must find nothing; without WAIT it must find
 * the lost writes (which shows the fault does what it is meant to, and what WAIT is for).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ChaosReport, runChaos } from '../../src/chaos/index.js';
import type { Topology } from '../../src/chaos/redis-topology.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const brokers = KAFKA_BROKERS.split(',');

function run(topology: Topology, waitReplicas: number | undefined, failovers: number) {
  return runChaos({
    mode: 'exactly-once',
    brokers,
    redisTopology: topology,
    ...(waitReplicas === undefined ? {} : { waitReplicas, waitTimeoutMs: 500 }),
    replicaLagMs: 1000,
    redisFailovers: failovers,
    records: 2500,
    durationS: 15,
    customers: 200,
    large: 0,
    kills: 0,
    crashes: 0,
    zombies: 0,
    redisRestarts: 0,
    scale: [2],
    drainTimeoutMs: 60_000,
  });
}

const failovers = (r: ChaosReport) =>
  r.faults.filter(
    (f) => f.fault.kind === 'redis-failover' && f.facts.promoted === true && f.failure === undefined,
  ).length;
const why = (r: ChaosReport) =>
  `${r.failures.join('; ')}\n${r.faults
    .filter((f) => f.failure !== undefined)
    .map((f) => f.outcome)
    .join('\n')}\n${r.verify?.violations.map((v) => v.message).join('\n') ?? ''}`;

describe('Redis failover chaos', { timeout: 240_000 }, () => {
  it('with --wait-replicas 1: Sentinel promotions and cluster master kills lose nothing', async () => {
    const [sentinel, cluster] = await Promise.all([run('sentinel', 1, 2), run('cluster', 1, 2)]);
    for (const [name, r] of [
      ['sentinel', sentinel],
      ['cluster', cluster],
    ] as const) {
      assert.equal(failovers(r), 2, `${name}: two failovers promoted a replica and rejoined: ${why(r)}`);
      assert.equal(r.verify?.violations.length, 0, `${name}: ${why(r)}`);
      assert.ok(r.ok, `${name}: ${why(r)}`);
      assert.equal(r.verify?.committed, r.verify?.endOffsets);
    }
  });

  it('without WAIT: the writes the promoted replica never had are lost, and the verifier says so', async () => {
    const r = await run('sentinel', undefined, 1);
    assert.equal(failovers(r), 1, why(r));
    assert.equal(r.ok, false);
    const kinds = r.verify?.kinds ?? new Map();
    assert.ok((kinds.get('lost apply') ?? 0) > 0, `lost applies expected: ${why(r)}`);
    assert.ok((r.verify?.missingApplies ?? 0) > 0);
  });
});
