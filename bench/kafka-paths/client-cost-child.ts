/**
 * One measured run of client-cost.ts, in its own process: the adapter's producer or consume loop from
 * the source tree given (this tree's src/, or an earlier one's), with the main thread's CPU, the event
 * loop's utilisation and its longest synchronous block (a setInterval(0) probe: the longest gap between
 * two ticks) while it runs. Arguments: `produce` | `consume`, the source directory, JSON options.
 * Prints one JSON line.
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { orderMaker } from '../processor/kafka.js';

interface Options {
  brokers: string[];
  topic: string;
  records: number;
  perTransaction: number;
  keys: number;
  group: string;
  transactionalId: string;
}

const [what, src, raw] = process.argv.slice(2);
if ((what !== 'produce' && what !== 'consume') || !src || !raw)
  throw new Error('usage: client-cost-child.ts produce|consume <src dir> <options json>');
const o = JSON.parse(raw) as Options;
const load = (file: string) => import(pathToFileURL(`${src}/kafka/${file}`).href);

/** The longest gap between two ticks of a setInterval(0) (Node makes it 1 ms): the longest block. */
function probe(): { stop(): { longestMs: number; p99Ms: number; over5ms: number } } {
  let last = performance.now();
  const gaps: number[] = [];
  const t = setInterval(() => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }, 0);
  return {
    stop() {
      clearInterval(t);
      gaps.sort((a, b) => a - b);
      return {
        longestMs: gaps.at(-1) ?? 0,
        p99Ms: gaps[Math.floor(gaps.length * 0.99)] ?? 0,
        over5ms: gaps.filter((g) => g > 5).length,
      };
    },
  };
}

async function measured(work: () => Promise<void>) {
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const p = probe();
  await work();
  const lag = p.stop();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  return {
    records: o.records,
    seconds: ms / 1000,
    recordsPerSec: o.records / (ms / 1000),
    // process CPU (librdkafka's threads included), per record
    cpuUsPerRecord: (cpu.user + cpu.system) / o.records,
    elu: elu.utilization,
    longestBlockMs: lag.longestMs,
    p99GapMs: lag.p99Ms,
    gapsOver5ms: lag.over5ms,
  };
}

async function produce() {
  const { DeliveryProducer } = await load('producer.ts');
  const { producerProperties } = await load('client-config.ts');
  const p = await DeliveryProducer.connect(
    producerProperties({ brokers: o.brokers, groupId: o.group, transactionalId: o.transactionalId }),
  );
  const make = orderMaker(o.keys);
  const batches: { topic: string; key: string; value: string }[][] = [];
  for (let i = 0; i < o.records; i += o.perTransaction) {
    const batch = [];
    for (let j = i; j < Math.min(o.records, i + o.perTransaction); j++)
      batch.push({ topic: o.topic, ...make(j) });
    batches.push(batch);
  }
  await p.transaction(batches[0]?.slice(0, 10) ?? [], [], undefined); // warm: the first transaction's round trips
  const result = await measured(async () => {
    for (const b of batches) await p.transaction(b, [], undefined);
  });
  await p.close();
  return result;
}

async function consume() {
  const { ConfluentKafka } = await load('confluent.ts');
  const k = new ConfluentKafka({ brokers: o.brokers, groupId: o.group, maxBatchSize: 500 });
  let seen = 0;
  let started: (() => void) | undefined;
  let done: (() => void) | undefined;
  const first = new Promise<void>((r) => (started = r));
  const all = new Promise<void>((r) => (done = r));
  let result: Awaited<ReturnType<typeof measured>> | undefined;
  const run = first.then(async () => {
    result = await measured(() => all);
  });
  await k.start([o.topic], {
    onAssign: async () => undefined,
    onRevoke: async () => undefined,
    onBatch: async (_t: string, _p: number, records: unknown[]) => {
      if (seen === 0) started?.();
      seen += records.length;
      if (seen >= o.records) done?.();
    },
  });
  await run;
  await k.stop();
  return result;
}

const result = what === 'produce' ? await produce() : await consume();
process.stdout.write(`${JSON.stringify(result)}\n`);
