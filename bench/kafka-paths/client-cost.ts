/**
 * The adapter's client costs on the main thread, this tree against an earlier one (BENCH_BASE_SRC: a
 * copy of an earlier commit's src/, e.g. `git archive <commit> src | tar -x -C /tmp/rf-base`):
 * - produce: N records in transactions of BENCH_PER_TXN through DeliveryProducer.transaction (the
 *   earlier tree: a delivery report per record; this one: failed records only, handed over in slices);
 * - consume: N preloaded records through ConfluentKafka's consume loop to a handler that does nothing
 *   (the earlier tree: each fetch split and converted in one go; this one: in slices).
 * Each run in its own process (client-cost-child.ts), the trees alternating, BENCH_RUNS runs each.
 * Reported per run: CPU µs per record (process.cpuUsage, librdkafka's threads included), records/s,
 * event-loop utilisation, and from a setInterval(0) probe the longest gap between two ticks (the longest
 * synchronous block), the 99th percentile gap and the number of gaps over 5 ms.
 *
 *   BENCH_BASE_SRC=/tmp/rf-base/src node --import tsx bench/kafka-paths/client-cost.ts
 *
 * Env: BENCH_RECORDS (200000), BENCH_PER_TXN (2000), BENCH_RUNS (3), BENCH_KEYS (10000),
 * BENCH_PARTITIONS (6), BENCH_ONLY (produce,consume), KAFKA_BROKERS (127.0.0.1:19092).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { createTopics, deleteTopics, envInt, kafkaClient, orderMaker, preload } from '../processor/kafka.js';
import { writeResults } from '../processor/support.js';

const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const opts = {
  records: envInt('BENCH_RECORDS', 200_000),
  perTransaction: envInt('BENCH_PER_TXN', 2000),
  runs: envInt('BENCH_RUNS', 3),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  only: (process.env.BENCH_ONLY ?? 'produce,consume').split(','),
};
const base = process.env.BENCH_BASE_SRC;
if (!base) throw new Error('BENCH_BASE_SRC: a directory with an earlier commit of src/ (see the header)');
const trees = { earlier: resolve(base), this: resolve('src') };
const kafka = kafkaClient(brokers);
const id = randomBytes(3).toString('hex');
const topics: string[] = [];

interface Result {
  recordsPerSec: number;
  cpuUsPerRecord: number;
  elu: number;
  longestBlockMs: number;
  p99GapMs: number;
  gapsOver5ms: number;
}

function child(what: string, src: string, o: Record<string, unknown>): Result {
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'bench/kafka-paths/client-cost-child.ts', what, src, JSON.stringify(o)],
    { encoding: 'utf8', timeout: 300_000 },
  );
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !line.startsWith('{')) throw new Error(`${what} ${src}: ${r.stderr || r.stdout}`);
  return JSON.parse(line) as Result;
}

const rows: { what: string; tree: string; run: number; result: Result }[] = [];
try {
  for (const what of opts.only) {
    let topic = `cost-${what}-${id}`;
    if (what === 'consume') {
      await createTopics(kafka, [topic], opts.partitions);
      topics.push(topic);
      await preload(kafka, topic, opts.records, orderMaker(opts.keys));
    }
    for (let run = 0; run < opts.runs; run++) {
      // alternating, the first tree changing every run
      const order = run % 2 === 0 ? (['earlier', 'this'] as const) : (['this', 'earlier'] as const);
      for (const tree of order) {
        if (what === 'produce') {
          topic = `cost-produce-${id}-${run}-${tree}`;
          await createTopics(kafka, [topic], opts.partitions);
          topics.push(topic);
        }
        const result = child(what, trees[tree], {
          brokers,
          topic,
          records: opts.records,
          perTransaction: opts.perTransaction,
          keys: opts.keys,
          group: `cost-${id}-${what}-${run}-${tree}`,
          transactionalId: `cost-${id}-${run}-${tree}`,
        });
        rows.push({ what, tree, run, result });
        process.stderr.write(`${what} ${tree} run ${run}: ${JSON.stringify(result)}\n`);
      }
    }
  }
} finally {
  await deleteTopics(kafka, topics);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const f = (x: number, d = 2) => x.toFixed(d);
console.log(
  `${opts.records} records, ${opts.perTransaction} per transaction, ${opts.runs} runs each, alternating\n`,
);
console.log(
  '| path | tree | CPU µs/record (runs) | records/s (median) | ELU (median) | longest block ms (runs) | p99 tick gap ms (runs) | gaps > 5 ms (runs) |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const what of opts.only)
  for (const tree of ['earlier', 'this']) {
    const rs = rows.filter((r) => r.what === what && r.tree === tree).map((r) => r.result);
    console.log(
      `| ${what} | ${tree} | ${rs.map((r) => f(r.cpuUsPerRecord)).join(', ')} | ${f(median(rs.map((r) => r.recordsPerSec)), 0)} | ${f(median(rs.map((r) => r.elu)))} | ${rs.map((r) => f(r.longestBlockMs, 1)).join(', ')} | ${rs.map((r) => f(r.p99GapMs, 1)).join(', ')} | ${rs.map((r) => r.gapsOver5ms).join(', ')} |`,
    );
  }
console.log(`\n${writeResults('client-cost', { ...opts, trees }, rows)}`);
