/**
 * A registered instance with a real metrics server (src/metrics/server.ts on a free loopback port,
 * RedfenceMetrics with the handler's retry metrics and the relay's outbox metrics on its registry), as
 * `redfence run --metrics-port` registers one; and one whose metrics server accepts connections and
 * never answers. Both leave the registry, and their servers close, when the test ends.
 */
import { createServer, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RetryMetrics } from '../../src/handler/retry-metrics.js';
import { INSTANCE_INDEX_KEY, instanceKey } from '../../src/keys/instances.js';
import { HealthState } from '../../src/metrics/health.js';
import { RedfenceMetrics } from '../../src/metrics/metrics.js';
import { startMetricsServer } from '../../src/metrics/server.js';
import { OutboxMetrics } from '../../src/outbox/metrics.js';
import { InstanceRegistration, setRegistryMetricsAddress } from '../../src/runtime/registry.js';
import { uniqueName } from '../helpers/env.js';

export interface MetricsInstance {
  id: string;
  address: string;
  metrics: RedfenceMetrics;
  retry: RetryMetrics;
  outbox: OutboxMetrics;
  /** What its /readyz answers. */
  health: HealthState;
}

export async function metricsInstance(t: TestContext, redis: Redis, group: string): Promise<MetricsInstance> {
  const metrics = new RedfenceMetrics({ registry: new Registry() });
  const retry = new RetryMetrics(metrics);
  const outbox = new OutboxMetrics(metrics.registry);
  const health = new HealthState();
  const server = await startMetricsServer({ metrics, health, port: 0 });
  t.after(() => server.close());
  const address = `127.0.0.1:${server.port}`;
  // what redfence run does once its metrics server listens (one address per process)
  setRegistryMetricsAddress(server.host, server.port);
  const id = uniqueName('processor');
  // the default heartbeat (written at once, then every 5 s; a 15 s expiry): a short one could let the
  // entry expire between two reads on a loaded machine
  const reg = new InstanceRegistration(redis, 'processor', () => ({ id, group, module: 'totals' }));
  t.after(() => reg.stop());
  reg.start();
  return { id, address, metrics, retry, outbox, health };
}

/** An instance in the registry whose metrics address accepts and never answers. */
export async function hungInstance(
  t: TestContext,
  redis: Redis,
): Promise<{ id: string; accepted: () => number }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const port = (server.address() as { port: number }).port;
  const id = uniqueName('hung');
  // the registry's own fields (src/runtime/registry.ts), written once with a TTL longer than the test
  await redis.hset(instanceKey(id), {
    id,
    kind: 'handler',
    metrics: `127.0.0.1:${port}`,
    seen: String(Date.now()),
  });
  await redis.pexpire(instanceKey(id), 120_000);
  await redis.zadd(INSTANCE_INDEX_KEY, Date.now() + 120_000, id);
  t.after(async () => {
    await redis.del(instanceKey(id));
    await redis.zrem(INSTANCE_INDEX_KEY, id);
  });
  return { id, accepted: () => sockets.length };
}
