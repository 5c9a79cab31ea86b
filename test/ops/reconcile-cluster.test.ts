/**
 * `redfence reconcile` on Redis Cluster with a built-in-operation processor: the store is scanned on
 * every master (keys of every slot found), the fold runs the operations through the fence's reference
 * model (add, set, max, a REJECT that moves the fence and keeps the value, an operation that throws and
 * is dead-lettered), a clean run finds nothing, and faults on keys of different masters are all found.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { defineProcessor, Processor, type ProcessorDefinition } from '../../src/index.js';
import { KeySpace, keySlot } from '../../src/keys/index.js';
import { runCli } from '../helpers/cli.js';
import { cluster, KAFKA_BROKERS, REDIS_CLUSTER_NODES, uniqueName } from '../helpers/env.js';
import { createTopics, type Msg, pollUntil, produce } from '../helpers/kafka.js';

const PARTITIONS = 3;
const OPERATION = `(o) => {
  if (o.n === 13) throw new RangeError('unlucky');
  if (o.set !== undefined) return { op: 'set', value: o.set };
  if (o.max !== undefined) return { op: 'max', value: o.max };
  return { op: 'add', by: o.n };
}`;

const reconcile = (args: string[]) => runCli(['reconcile', ...args]);

describe('redfence reconcile on Redis Cluster, operation processor', { timeout: 180_000 }, () => {
  const ns = uniqueName('recc');
  const store = ns.replace(/-/g, '_');
  const input = `${ns}-in`;
  const keys = new KeySpace({ store });
  const seeds = REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',');
  let redis: Cluster;
  let cleanup: () => Promise<void> = async () => undefined;
  let tmp = '';
  let module = '';
  const firstAdd = new Map<string, number>();
  const run = async () => {
    const r = await reconcile([module, '--brokers', KAFKA_BROKERS, '--cluster', seeds, '--json']);
    assert.equal(r.err, '');
    return {
      code: r.code,
      report: JSON.parse(r.out) as {
        anomalies: Array<{ kind: string; key: string }>;
        storedKeys: number;
        deadLettered: Record<string, number>;
      },
    };
  };

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'rf-reconcile-c-'));
    module = join(tmp, 'counter.mjs');
    writeFileSync(
      module,
      `export default { input: '${input}', output: '${ns}-out', store: '${store}', operation: ${OPERATION} };\n`,
    );
    redis = cluster();
    cleanup = await createTopics([
      { topic: input, partitions: PARTITIONS },
      { topic: `${ns}-out`, partitions: PARTITIONS },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    const messages: Msg[] = [];
    for (let i = 0; i < 300; i++) {
      const key = `k-${i % 30}`;
      const n = 1 + ((i * 37) % 50);
      if (!firstAdd.has(key) && n !== 13) firstAdd.set(key, n);
      messages.push({ key, value: JSON.stringify(i % 10 === 9 ? { max: n * 1000 } : { n }) });
    }
    // text, then an add on it: REJECT (the fence moves, the value stays)
    messages.push(
      { key: 'txt', value: JSON.stringify({ set: 'abc' }) },
      { key: 'txt', value: JSON.stringify({ n: 1 }) },
    );
    await produce(input, messages);
    const { loadDefinition } = await import('../../src/loader/load.js');
    const definition = defineProcessor((await loadDefinition(module)) as ProcessorDefinition);
    const p = new Processor({
      definition,
      redis,
      mode: 'at-least-once',
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
    });
    await p.start();
    try {
      await pollUntil('all records processed', () => p.counts().records >= messages.length, 120_000);
    } finally {
      await p.close();
    }
  });
  after(async () => {
    // every key of the store (state, epochs, pending indexes), on every master
    for (const node of redis.nodes('master'))
      for (const k of await node.keys(`rf:{${store}:*`)) await redis.del(k).catch(() => undefined);
    await cleanup();
    redis.disconnect();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('clean: every key of every master found and judged, exit 0', async () => {
    const slots = new Set(
      [...firstAdd.keys()].map((k) => {
        const slot = keySlot(keys.state(k));
        return slot < 5461 ? 0 : slot < 10923 ? 1 : 2;
      }),
    );
    assert.equal(slots.size, 3, 'the keys span the three masters');
    const { code, report } = await run();
    assert.deepEqual(report.anomalies, []);
    assert.equal(code, 0);
    assert.equal(report.storedKeys, 31);
    assert.equal(report.deadLettered['processing-error'], 6, 'n === 13 throws in the operation');
  });

  it('faults on keys of different masters are each found with their kind', async () => {
    const state = async (k: string) => (await redis.hget(keys.state(k), 'v')) as string;
    // double apply on the first key: its first add counted twice (max records keep the larger value)
    const dk = [...firstAdd.keys()].find((k) => !(Number(k.slice(2)) % 10 === 9)) as string;
    const before1 = await state(dk);
    await redis.hset(keys.state(dk), 'v', String(Number(before1) + (firstAdd.get(dk) as number)));
    await redis.del(keys.state('k-2'));
    await redis.hset(keys.state('ghost'), 'v', '5', 'p', '1', 'o', '2', 'e', '1');
    await redis.hset(keys.state('txt'), 'v', 'abd');
    const { code, report } = await run();
    assert.equal(code, 1);
    const kinds = new Map(report.anomalies.map((a) => [a.key, a.kind]));
    assert.equal(kinds.get(keys.state('k-2')), 'lost-write');
    assert.equal(kinds.get(keys.state('ghost')), 'unexpected-key');
    assert.equal(kinds.get(keys.state('txt')), 'value-mismatch');
    assert.equal(kinds.get(keys.state(dk)), 'double-apply', `kind of ${dk}`);
    assert.equal(report.anomalies.length, 4, JSON.stringify(report.anomalies));
  });
});
