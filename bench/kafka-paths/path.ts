/**
 * One client path of @confluentinc/kafka-javascript in its own process (run.ts starts it): its peak RSS
 * and CPU are its own. Argument: the path id (a, b, c500, c5000, d); options in BENCH_PATH_OPTIONS.
 */
import { kafkaClient, startPassthrough } from '../processor/kafka.js';
import { startLowLevel, startTransactional } from './lowlevel.js';
import { pathOptions, type Running, report, timed } from './measure.js';

const opts = pathOptions();
const id = process.argv[2] ?? '';

/** The promise (KafkaJS-compatible) API through bench/processor's passthrough: stats count committed batches. */
async function promiseApi(maxBatchSize: number, lingerMs: number): Promise<Running> {
  const p = await startPassthrough(kafkaClient(opts.brokers), { ...opts, maxBatchSize, lingerMs });
  return {
    progress: () => p.stats.records,
    batches: () => p.stats.batches,
    // send() resolved for every committed record: delivered
    delivered: () => p.stats.records,
    failure: () => undefined,
    stop: () => p.stop(),
  };
}

const paths: Record<string, () => Promise<Running>> = {
  a: () => promiseApi(500, 5),
  b: () => promiseApi(2000, 1),
  c500: () => startLowLevel(opts, 500, 1),
  c5000: () => startLowLevel(opts, 5000, 1),
  d: () => startTransactional(opts, 2000, 1),
};

const go = paths[id];
if (!go) throw new Error(`unknown path ${JSON.stringify(id)} (one of ${Object.keys(paths).join(', ')})`);
report(await timed(opts.records, '@confluentinc/kafka-javascript', go));
