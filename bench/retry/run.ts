/**
 * Retry-topics benchmark: the main-topic throughput of a handler with `retry.topics` when 1% of the
 * records fail once (each goes to the retry topic and is handled from there a second later) against
 * 0% failures, in the same run. Work per record: an in-process wait of BENCH_LATENCY_MS (5) at
 * concurrency BENCH_CONCURRENCY (64). Each contender has its own preloaded input (and so its own
 * retry topic); they alternate BENCH_ROUNDS (5) times, and the ratio compares the medians.
 * Main-topic throughput: records of the input handled or forwarded, per second, first call to last.
 * The target: overhead (1 - ratio) <= 10%.
 *
 *   node --import tsx bench/retry/run.ts
 *
 * Env: BENCH_RECORDS (20000), BENCH_PARTITIONS (4), BENCH_KEYS (5000), BENCH_LATENCY_MS (5),
 * BENCH_CONCURRENCY (64), BENCH_ROUNDS (5), KAFKA_BROKERS. Results: bench/results/retry-<date>.raw.json.
 */
import { createHandler, defineHandler } from '../../src/index.js';
import { createTopics, deleteTopics, envInt, kafkaClient, preload } from '../processor/kafka.js';
import { writeResults } from '../processor/support.js';

const opts = {
  records: envInt('BENCH_RECORDS', 20_000),
  partitions: envInt('BENCH_PARTITIONS', 4),
  keys: envInt('BENCH_KEYS', 5000),
  latencyMs: envInt('BENCH_LATENCY_MS', 5),
  concurrency: envInt('BENCH_CONCURRENCY', 64),
  rounds: envInt('BENCH_ROUNDS', 5),
  retryDelayMs: envInt('BENCH_RETRY_DELAY_MS', 1000),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
};
const TIMEOUT_MS = envInt('BENCH_TIMEOUT_MS', 180_000);
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const kafka = kafkaClient(opts.brokers);
const made: string[] = [];

interface Result {
  label: string;
  round: number;
  failPercent: number;
  records: number;
  seconds: number;
  mainRecordsPerSecond: number;
  forwarded: number;
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function contender(round: number, failPercent: number): Promise<Result> {
  const label = `${failPercent}% fail once`;
  const input = `bench-retry-${run}-${round}-${failPercent}`;
  const topics = [input, `${input}.DLT`, `${input}-retry-${opts.retryDelayMs}`];
  made.push(...topics);
  await createTopics(kafka, topics, opts.partitions);
  await preload(kafka, input, opts.records, (i) => ({
    key: `k${i % opts.keys}`,
    value: JSON.stringify({ i, fail: failPercent > 0 && i % Math.round(100 / failPercent) === 0 }),
  }));
  let first = 0;
  let last = 0;
  let mainOk = 0;
  const h = createHandler(
    defineHandler<{ i: number; fail: boolean }>({
      input,
      name: `bench-retry-${run}`,
      handle: async (r, ctx) => {
        if (r.topic === input && first === 0) first = performance.now();
        await wait(opts.latencyMs);
        if (r.value.fail && ctx.deliveryAttempt === 1) {
          last = performance.now();
          throw new Error('fails once');
        }
        if (r.topic === input) {
          mainOk++;
          last = performance.now();
        }
      },
    }),
    {
      kafka: { brokers: opts.brokers },
      groupId: `${input}-g`,
      concurrency: opts.concurrency,
      retry: { topics: { backoff: { kind: 'fixed', delayMs: opts.retryDelayMs }, maxAttempts: 2 } },
    },
  );
  await h.start();
  const deadline = Date.now() + TIMEOUT_MS;
  while (mainOk + h.counts().forwarded < opts.records) {
    if (Date.now() > deadline) throw new Error(`${label}: timed out: ${JSON.stringify(h.counts())}`);
    await wait(5);
  }
  const seconds = (last - first) / 1000;
  const forwarded = h.counts().forwarded;
  // the retried ones finish from the retry topic a delay later: not part of the main-topic figure
  while (h.counts().done < opts.records) {
    if (Date.now() > deadline) throw new Error(`${label}: retries not done: ${JSON.stringify(h.counts())}`);
    await wait(20);
  }
  await h.close();
  const r: Result = {
    label,
    round,
    failPercent,
    records: opts.records,
    seconds: Number(seconds.toFixed(3)),
    mainRecordsPerSecond: Math.round(opts.records / seconds),
    forwarded,
  };
  console.log(JSON.stringify(r));
  return r;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const results: Result[] = [];
try {
  for (let round = 1; round <= opts.rounds; round++) {
    // alternate which goes first, so a drift of the shared machine hits both alike
    const order = round % 2 === 1 ? [0, 1] : [1, 0];
    for (const p of order) results.push(await contender(round, p));
  }
  const base = median(results.filter((r) => r.failPercent === 0).map((r) => r.mainRecordsPerSecond));
  const failing = median(results.filter((r) => r.failPercent === 1).map((r) => r.mainRecordsPerSecond));
  const ratio = Number((failing / base).toFixed(3));
  const summary = {
    medianRecordsPerSecond0: base,
    medianRecordsPerSecond1: failing,
    ratio,
    overheadPercent: Number(((1 - ratio) * 100).toFixed(1)),
    target: 'overhead <= 10%',
    met: ratio >= 0.9,
  };
  console.log(JSON.stringify(summary));
  console.log(writeResults('retry', opts, { results, summary }));
} finally {
  await deleteTopics(kafka, made).catch(() => undefined);
}
