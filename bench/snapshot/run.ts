/**
 * What snapshots cost the processor, and how long a rebuild takes. One preloaded topic; the same
 * exactly-once processor over all of it without snapshots and with `snapshot: { intervalMs }`, rounds
 * alternating (off, on, off, on, ...) so drift on a shared machine hits both; records/s of each and the
 * ratio on/off. Then the last store is dropped and `redfence rebuild` restores it: seconds, keys/s.
 *
 *   node --import tsx bench/snapshot/run.ts
 *   BENCH_RECORDS=200000 BENCH_KEYS=20000 BENCH_ROUNDS=2 BENCH_SNAPSHOT_MS=1000 node --import tsx bench/snapshot/run.ts
 */
import { Redis } from 'ioredis';
import { main } from '../../src/cli/main.js';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../../test/helpers/env.js';
import { createTopics, kafka, produce } from '../../test/helpers/kafka.js';
import { dropStore, untilDone, writeResults } from '../processor/support.js';

const RECORDS = Number(process.env.BENCH_RECORDS ?? 200_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SNAPSHOT_MS = Number(process.env.BENCH_SNAPSHOT_MS ?? 1000);
const PARTITIONS = 6;

const ns = uniqueName('bench-snap');
const input = `${ns}-in`;
const output = `${ns}-out`;
const redis = new Redis(REDIS_URL, { enableAutoPipelining: true });
const cleanup = await createTopics([
  { topic: input, partitions: PARTITIONS },
  { topic: output, partitions: PARTITIONS },
  { topic: `${input}.DLT`, partitions: 1 },
]);
const snapshotTopics: string[] = [];
const stores: string[] = [];
const results: Array<Record<string, number | string>> = [];
let rebuildResult: Record<string, number> | undefined;

try {
  const msgs = [];
  for (let i = 0; i < RECORDS; i++) msgs.push({ key: `k-${i % KEYS}`, value: String(1 + (i % 97)) });
  await produce(input, msgs);

  const once = async (round: number, snapshots: boolean) => {
    const store = `${ns}-${round}-${snapshots ? 'on' : 'off'}`.replace(/-/g, '_');
    stores.push(store);
    if (snapshots) snapshotTopics.push(`${store}-snapshot`);
    const definition = defineProcessor<string>({
      input,
      output,
      store,
      decode: (v) => v?.toString() ?? '0',
      operation: (v) => ({ op: 'add', by: Number(v) }),
    });
    const p = new Processor({
      definition,
      redis,
      mode: 'exactly-once',
      kafka: { brokers: KAFKA_BROKERS.split(',') },
      ...(snapshots ? { snapshot: { intervalMs: SNAPSHOT_MS } } : {}),
    });
    const t0 = performance.now();
    await p.start();
    const { t1 } = await untilDone(
      store,
      { progress: () => p.counts().records, stop: () => p.close() },
      RECORDS,
      t0,
      600_000,
    );
    if (snapshots) {
      // a pass that began after the last commit: what a rebuild restores
      const before = p.snapshots()?.passes ?? 0;
      const deadline = performance.now() + 120_000;
      while ((p.snapshots()?.passes ?? 0) < before + 2 && performance.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
    }
    const s = p.snapshots();
    await p.close();
    const row = {
      round,
      snapshots: snapshots ? 'on' : 'off',
      recordsPerSecond: Math.round((RECORDS * 1000) / (t1 - t0)),
      passes: s?.passes ?? 0,
      keysWritten: s?.keys ?? 0,
      lastPassMs: s?.lastPassMs ?? 0,
      failures: s?.failures ?? 0,
    };
    results.push(row);
    console.log(JSON.stringify(row));
    return { store, definition };
  };

  let last: Awaited<ReturnType<typeof once>> | undefined;
  for (let round = 0; round < ROUNDS; round++) {
    await once(round, false);
    last = await once(round, true);
  }
  if (last !== undefined) {
    // the store goes; rebuild it from its snapshot topic and the log
    const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'bench-snap-'));
    const module = join(dir, 'm.ts');
    const src = new URL('../../src/index.ts', import.meta.url).pathname;
    writeFileSync(
      module,
      `import { defineProcessor } from ${JSON.stringify(src)};\nexport default defineProcessor<string>({ input: ${JSON.stringify(input)}, output: ${JSON.stringify(output)}, store: ${JSON.stringify(last.store)}, decode: (v) => v?.toString() ?? '0', operation: (v) => ({ op: 'add', by: Number(v) }) });\n`,
    );
    await dropStore(redis, last.store);
    const t0 = performance.now();
    let out = '';
    const code = await main(
      ['rebuild', module, '--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--json'],
      (s) => {
        out += s;
      },
    );
    const seconds = (performance.now() - t0) / 1000;
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0) throw new Error(`rebuild exited ${code}`);
    const r = JSON.parse(out) as { keys: number; partitions: Array<{ replayed: number }> };
    rebuildResult = {
      seconds: Number(seconds.toFixed(2)),
      keys: r.keys,
      keysPerSecond: Math.round(r.keys / seconds),
      replayed: r.partitions.reduce((n, p) => n + p.replayed, 0),
    };
    console.log(JSON.stringify({ rebuild: rebuildResult }));
  }
  // per round: on / off of the same round; then their geometric mean
  const rate = (round: number, on: string) =>
    Number(results.find((r) => r.round === round && r.snapshots === on)?.recordsPerSecond);
  const ratios = Array.from({ length: ROUNDS }, (_, i) => rate(i, 'on') / rate(i, 'off'));
  const ratio = Math.exp(ratios.reduce((a, r) => a + Math.log(r), 0) / ratios.length);
  console.log(
    `snapshots on / off: ${ratio.toFixed(3)} (rounds: ${ratios.map((r) => r.toFixed(3)).join(', ')})`,
  );
  const file = writeResults(
    'snapshot',
    { RECORDS, KEYS, ROUNDS, SNAPSHOT_MS, PARTITIONS },
    { runs: results, ratios, ratio, rebuild: rebuildResult },
  );
  console.log(file);
} finally {
  for (const s of stores) await dropStore(redis, s);
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics: snapshotTopics }).catch(() => undefined);
  await admin.disconnect();
  await cleanup();
  redis.disconnect();
}
