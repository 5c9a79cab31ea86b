/**
 * Failover against state size: K customers of state in Redis (one order each, processed by instance
 * A), then A is SIGKILLed, a replacement B starts at once, a wave of orders is produced, and the clock
 * runs from the kill to the first output of the wave visible to a read_committed consumer. B restores
 * nothing: its state is already in Redis. Two kinds of replacement:
 *
 *   static   `redfence run --static --instance A`: B takes the dead member's place (KIP-345) at once,
 *            and its transactional id (group + instance) fences and aborts A's open transaction;
 *   dynamic  B has another instance id: the group waits for A's session timeout before reassigning.
 *
 *   npm run build && node --import tsx bench/failover/run.ts
 *
 * The instances run the built CLI (dist/cli/bin.js, as users run it; through tsx from src/ when dist/
 * is missing, which adds the TypeScript loader's start-up to every figure).
 *
 * Env: BENCH_FAILOVER_KEYS ("10000,100000"), BENCH_FAILOVER_MEMBERSHIP ("static,dynamic"),
 * BENCH_PARTITIONS (6), BENCH_SESSION_TIMEOUT_MS (6000, the broker's minimum), KAFKA_BROKERS
 * (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379). Also reported: Redis used_memory per key of
 * state and A's peak RSS (VmHWM) after it processed the K keys. Results: bench/results/failover.raw.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { Child, pollUntil } from '../../src/harness/index.js';
import { customerTotalsCli, peakRss, ROOT } from '../processor/cli.js';
import {
  committedSum,
  createTopics,
  deleteTopics,
  envIntList,
  kafkaClient,
  preload,
} from '../processor/kafka.js';
import { dropStore } from '../processor/support.js';

const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:16379';
const partitions = Number(process.env.BENCH_PARTITIONS ?? 6);
const sessionMs = Number(process.env.BENCH_SESSION_TIMEOUT_MS ?? 6000);
const sizes = envIntList('BENCH_FAILOVER_KEYS', '10000,100000');
const memberships = (process.env.BENCH_FAILOVER_MEMBERSHIP ?? 'static,dynamic').split(',') as Membership[];
type Membership = 'static' | 'dynamic';
for (const m of memberships)
  if (m !== 'static' && m !== 'dynamic') throw new Error(`BENCH_FAILOVER_MEMBERSHIP: unknown ${m}`);
const { cli, module: moduleFile, cleanup: removeModule } = customerTotalsCli();
const WAVE = 100;
const kafka = kafkaClient(brokers);
const redis = new Redis(redisUrl);
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
const children = new Set<Child>();
let failed: Error | undefined;

const order = (customer: string, amount: number) => ({
  key: customer,
  value: JSON.stringify({ customer, amount }),
});

function startInstance(
  name: string,
  isStatic: boolean,
  t: { input: string; output: string; store: string; group: string },
) {
  const child = new Child({
    name,
    command: process.execPath,
    args: [
      ...cli,
      'run',
      moduleFile,
      '--brokers',
      brokers.join(','),
      '--redis',
      redisUrl,
      '--mode',
      'exactly-once',
      '--group',
      t.group,
      '--instance',
      name,
      '--session-timeout',
      String(sessionMs),
      '--log',
      'info',
      ...(isStatic ? ['--static'] : []),
    ],
    cwd: ROOT,
    env: { ...process.env, ORDERS_TOPIC: t.input, TOTALS_TOPIC: t.output, TOTALS_STORE: t.store },
  });
  children.add(child);
  void child.exited.then(({ code, signal }) => {
    children.delete(child);
    if (signal !== 'SIGKILL' && signal !== 'SIGTERM' && code !== 0)
      failed = new Error(`instance ${name} exited (${code ?? signal}): ${child.tail()}`);
  });
  let assignedAt: number | undefined;
  // settles when the line comes or the child exits (the bound is the run's own)
  void child.log
    .waitFor(
      'partitions assigned',
      (l) => l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0,
      3_600_000,
    )
    .then(
      () => {
        assignedAt = Date.now();
      },
      () => undefined,
    );
  return { child, assignedAt: () => assignedAt };
}

/** Polls `check`, failing at once when an instance died. */
function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 50) {
  return pollUntil(
    what,
    async () => {
      if (failed) throw failed;
      return check();
    },
    timeoutMs,
    everyMs,
  );
}

async function usedMemory(): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

async function one(keys: number, membership: Membership) {
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const t = {
    input: `bench-fo-${run}-in`,
    output: `bench-fo-${run}-out`,
    store: `bench-fo-${run}`,
    group: `bench-fo-${run}-group`,
  };
  await createTopics(kafka, [t.input, t.output, `${t.input}.DLT`], partitions);
  try {
    const mem0 = await usedMemory();
    await preload(kafka, t.input, keys, (i) => order(`c${i}`, 1 + (i % 100)));
    const isStatic = membership === 'static';
    const a = startInstance('A', isStatic, t);
    await until(
      'A processed the first wave',
      async () => (await committedSum(kafka, t.group, t.input)) >= keys,
      900_000,
      500,
    );
    const memPerKey = ((await usedMemory()) - mem0) / keys;
    const aPeakRss = peakRss(a.child.pid);

    // a read_committed consumer at the output's end, waiting for the wave's first output
    const consumer = kafka.consumer({
      'group.id': `${t.group}-watch`,
      'auto.offset.reset': 'latest',
      'isolation.level': 'read_committed',
      kafkaJS: quiet,
    } as unknown as KafkaJS.ConsumerConstructorConfig);
    await consumer.connect();
    await consumer.subscribe({ topics: [t.output] });
    let firstOutputAt: number | undefined;
    let assigned = false;
    consumer.run({
      eachMessage: async () => {
        firstOutputAt ??= Date.now();
      },
    });
    await until(
      'the watcher is assigned',
      () => {
        assigned = consumer.assignment().length === partitions;
        return assigned;
      },
      60_000,
    );
    // let the watcher fetch once at the end before the clock starts
    await new Promise((r) => setTimeout(r, 2000));

    const killedAt = Date.now();
    void a.child.kill();
    const b = startInstance(isStatic ? 'A' : 'B', isStatic, t);
    await preload(kafka, t.input, WAVE, (i) => order(`c${i % keys}`, 1));
    await until('the first output of the wave', () => firstOutputAt !== undefined, 300_000, 20);
    const result = {
      keys,
      membership,
      peakRssMiB: Math.round(aPeakRss / 2 ** 20),
      memoryBytesPerKey: Math.round(memPerKey),
      killToFirstOutputMs: (firstOutputAt as number) - killedAt,
      killToBAssignedMs: (b.assignedAt() ?? Number.NaN) - killedAt,
      sessionTimeoutMs: sessionMs,
    };
    console.error(`[failover] ${JSON.stringify(result)}`);
    await consumer.disconnect().catch(() => undefined);
    await b.child.terminate(30_000);
    return result;
  } finally {
    for (const c of children) c.signal('SIGKILL');
    await deleteTopics(kafka, [t.input, t.output, `${t.input}.DLT`]);
    await dropStore(redis, t.store);
  }
}

try {
  const results = [];
  for (const k of sizes) for (const m of memberships) results.push(await one(k, m));
  console.log(
    '| keys of state | replacement | Redis bytes / key | A peak RSS (MiB) | kill -> B assigned (ms) | kill -> first output (ms) |',
  );
  console.log('| ---: | --- | ---: | ---: | ---: | ---: |');
  for (const r of results)
    console.log(
      `| ${r.keys} | ${r.membership} | ${r.memoryBytesPerKey} | ${r.peakRssMiB} | ${r.killToBAssignedMs} | ${r.killToFirstOutputMs} |`,
    );
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/failover.raw.json',
    `${JSON.stringify({ date: new Date().toISOString(), loadavg: loadavg(), sessionMs, results }, null, 2)}\n`,
  );
} finally {
  for (const c of children) c.signal('SIGKILL');
  redis.disconnect();
  removeModule();
}
