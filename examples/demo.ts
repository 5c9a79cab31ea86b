/**
 * The demo (`npm run demo`): the per-customer totals processor (examples/customer-totals.ts) run in
 * exactly-once mode as two instances of the real CLI (`redfence run`), against a real Kafka broker and
 * a real Redis. Orders are produced in waves while the instances run; when about a third of them are
 * processed, instance a is killed with SIGKILL (no shutdown at all: its open transaction, its Redis
 * writes not yet committed to Kafka, its group membership are left behind), instance b takes over a's
 * partitions after the session timeout, and the demo waits for every order to be processed. Then it
 * verifies, against what it produced:
 *
 * - the outputs a read_committed consumer sees: exactly one per valid order, and for each customer the
 *   running `count` is 1, 2, ..., n in order (no loss, no duplicate, no reordering), ending at the
 *   customer's input total;
 * - the state in Redis: the sum of every customer's total equals the sum of the input amounts;
 * - the consumer group's committed offsets: at the end of every input partition;
 * - the dead-letter topic: exactly the 5 poison records, with their reasons;
 * - the verdicts each instance counted (scraped from /metrics), the failover time, the throughput;
 * - a graceful stop of b (SIGTERM: exit 0 within 20 s).
 *
 * It prints a verification table and exits non-zero if anything does not add up. Every run uses its
 * own topics, consumer group and store, and deletes them (topics and Redis keys) at the end.
 *
 *   KAFKA_BROKERS (127.0.0.1:19092)  REDIS_URL (redis://127.0.0.1:16379)
 *   DEMO_RECORDS (20000)  DEMO_CUSTOMERS (1000)
 *   DEMO_KEEP_LOGS=1: keep the instances' logs (json, in the temp directory) even when the run passes
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { Child, freePort, pollUntil } from '../src/harness/index.js';
import { Fence, partitionFor, readDeadLetterHeaders } from '../src/index.js';

const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:19092';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:16379';
const N = Number(process.env.DEMO_RECORDS ?? 20_000);
const K = Number(process.env.DEMO_CUSTOMERS ?? 1000);
const PARTITIONS = 6;
const WAVES = 8;
const WAVE_PAUSE_MS = 250;
const SESSION_TIMEOUT_MS = 6000;
const STARTUP_DEADLINE_MS = 60_000;
const FINISH_DEADLINE_MS = 120_000;
const STOP_DEADLINE_MS = 20_000;

if (!Number.isInteger(N) || N < 100 || !Number.isInteger(K) || K < 1 || K > N) {
  process.stderr.write('DEMO_RECORDS must be an integer >= 100 and DEMO_CUSTOMERS from 1 to DEMO_RECORDS\n');
  process.exit(2);
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'src/cli/bin.ts');
const MODULE = join(ROOT, 'examples/customer-totals.ts');

const run = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const ORDERS = `orders-${run}`;
const TOTALS = `customer-totals-${run}`;
const DLT = `${ORDERS}.DLT`;
const STORE = `demo_${run}`;
const GROUP = `demo-${run}`;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: BROKERS.split(','), ...quiet } });
const admin = kafka.admin();
const redis = new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 3 });
redis.on('error', () => undefined); // failed commands reject; no need for ioredis' own reports too

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------------------------
// The inputs: N valid orders over K customers, and 5 poison records
// ---------------------------------------------------------------------------------------------

interface Msg {
  key: string | null;
  value: string;
  partition?: number;
}

/** A small deterministic generator (mulberry32), so a run's inputs depend only on N and K. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = rng(20_250_101);
const orders: Msg[] = [];
const expected = new Map<string, { count: number; total: number }>(); // per customer
let inputSum = 0;
for (let i = 0; i < N; i++) {
  // the first K orders give every customer one; the rest are spread at random
  const customer = `customer-${i < K ? i : Math.floor(random() * K)}`;
  const amount = 1 + Math.floor(random() * 10_000); // cents
  orders.push({ key: customer, value: JSON.stringify({ customer, amount }) });
  const e = expected.get(customer) ?? { count: 0, total: 0 };
  e.count++;
  e.total += amount;
  expected.set(customer, e);
  inputSum += amount;
}

function wrongPartition(key: string): number {
  return (partitionFor(key, PARTITIONS) + 1) % PARTITIONS;
}
/** Each poison record goes into a different wave, so both instances meet some. */
const poison: Array<{ wave: number; reason: string; msg: Msg }> = [
  { wave: 0, reason: 'undecodable', msg: { key: 'poison-1', value: '{"customer":"poison-1","amount":' } },
  {
    wave: 1,
    reason: 'wrong-partition',
    msg: { key: 'poison-2', value: '{"customer":"poison-2","amount":5}' },
  },
  { wave: 3, reason: 'null-key', msg: { key: null, value: '{"customer":"nobody","amount":7}' } },
  { wave: 5, reason: 'undecodable', msg: { key: 'poison-3', value: '{"customer":"poison-3","amount":2.5}' } },
  {
    wave: 6,
    reason: 'wrong-partition',
    msg: { key: 'poison-4', value: '{"customer":"poison-4","amount":9}' },
  },
];
for (const p of poison)
  if (p.reason === 'wrong-partition') p.msg.partition = wrongPartition(p.msg.key as string);
const expectedReasons = new Map<string, number>();
for (const p of poison) expectedReasons.set(p.reason, (expectedReasons.get(p.reason) ?? 0) + 1);

// ---------------------------------------------------------------------------------------------
// The two instances: child processes of the real CLI
// ---------------------------------------------------------------------------------------------

interface Instance {
  name: string;
  port: number;
  child: ChildProcess;
  owned: Set<number>;
  /** When (Date.now()) each partition was last assigned, as seen in the instance's log. */
  assignedAt: Map<number, number>;
  logFile: string;
  log: WriteStream;
  tail: string[];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

const children = new Set<ChildProcess>();
function killChildren(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
process.on('exit', killChildren);
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    killChildren();
    process.stderr.write(`demo: ${sig}, cleaning up\n`);
    setTimeout(() => process.exit(130), 5000).unref();
    cleanup().finally(() => process.exit(130));
  });

async function startInstance(name: string): Promise<Instance> {
  const port = await freePort();
  // the shared spawner (its own line capture aside, the demo reads the streams itself too)
  const { proc: child } = new Child({
    name,
    command: process.execPath,
    args: [
      '--import',
      'tsx',
      BIN,
      'run',
      MODULE,
      '--brokers',
      BROKERS,
      '--redis',
      REDIS_URL,
      '--mode',
      'exactly-once',
      '--group',
      GROUP,
      '--instance',
      name,
      '--metrics-port',
      String(port),
      '--session-timeout',
      String(SESSION_TIMEOUT_MS),
      '--log',
      'info',
    ],
    cwd: ROOT,
    env: { ...process.env, ORDERS_TOPIC: ORDERS, TOTALS_TOPIC: TOTALS, TOTALS_STORE: STORE },
    keepLines: 40,
  });
  children.add(child);
  const logFile = join(tmpdir(), `redfence-demo-${run}-${name}.log`);
  const inst: Instance = {
    name,
    port,
    child,
    owned: new Set(),
    assignedAt: new Map(),
    logFile,
    log: createWriteStream(logFile),
    tail: [],
    exit: new Promise((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
    ),
  };
  let partial = '';
  const onLine = (line: string) => {
    inst.log.write(`${line}\n`);
    inst.tail.push(line);
    if (inst.tail.length > 40) inst.tail.shift();
    let entry: { msg?: string; partitions?: number[] };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return;
    }
    if (entry.msg === 'partitions assigned')
      for (const p of entry.partitions ?? []) {
        inst.owned.add(p);
        inst.assignedAt.set(p, Date.now());
      }
    else if (entry.msg === 'partitions revoked') for (const p of entry.partitions ?? []) inst.owned.delete(p);
  };
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  });
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => inst.log.write(chunk));
  return inst;
}

function alive(inst: Instance): boolean {
  return inst.child.exitCode === null && inst.child.signalCode === null;
}

interface Scrape {
  /** verdict -> count, over every partition */
  verdicts: Map<string, number>;
  /** partition -> records with any verdict */
  byPartition: Map<number, number>;
  /** reason -> dead letters */
  deadLetters: Map<string, number>;
}

async function scrape(inst: Instance): Promise<Scrape | undefined> {
  let text: string;
  try {
    const res = await fetch(`http://127.0.0.1:${inst.port}/metrics`, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return undefined;
    text = await res.text();
  } catch {
    return undefined;
  }
  const s: Scrape = { verdicts: new Map(), byPartition: new Map(), deadLetters: new Map() };
  for (const line of text.split('\n')) {
    const m = /^redfence_(verdicts_total|dlq_records_total)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
    );
    const n = Number(m[3]);
    if (m[1] === 'verdicts_total') {
      const v = labels.verdict ?? '?';
      const p = Number(labels.partition);
      s.verdicts.set(v, (s.verdicts.get(v) ?? 0) + n);
      s.byPartition.set(p, (s.byPartition.get(p) ?? 0) + n);
    } else {
      const r = labels.reason ?? '?';
      s.deadLetters.set(r, (s.deadLetters.get(r) ?? 0) + n);
    }
  }
  return s;
}

async function ready(inst: Instance): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${inst.port}/readyz`, { signal: AbortSignal.timeout(2000) });
    return res.ok;
  } catch {
    return false;
  }
}

const sorted = (s: Iterable<number>) => [...s].sort((x, y) => x - y);
const total = (m: Map<string, number> | undefined) => [...(m?.values() ?? [])].reduce((a, b) => a + b, 0);
const show = (m: Map<string, number> | undefined) =>
  m === undefined || m.size === 0
    ? '(none)'
    : [...m]
        .filter(([, n]) => n > 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]) => `${k} ${n}`)
        .join(', ');

// ---------------------------------------------------------------------------------------------
// The reader: outputs and dead letters, as a read_committed consumer sees them
// ---------------------------------------------------------------------------------------------

interface Reader {
  /** customer -> the `count` values seen, in arrival order */
  counts: Map<string, number[]>;
  /** customer -> the last `total` seen */
  lastTotal: Map<string, number>;
  outputs: number;
  badOutputs: number;
  deadLetters: Array<{ reason: string; originalTopic: string }>;
  /** Once set (at the kill): partition -> [offset, Date.now()] of each output read from then on. */
  arrivals: Map<number, Array<[number, number]>> | undefined;
  stop(): Promise<void>;
}

async function startReader(): Promise<Reader> {
  const consumer = kafka.consumer({
    'isolation.level': 'read_committed',
    'js.consumer.max.batch.size': 1000,
    // a subscribed topic missing from the first metadata is looked for again within a second
    'topic.metadata.refresh.interval.ms': 1000,
    kafkaJS: { groupId: `${GROUP}-reader`, fromBeginning: true, autoCommit: false, ...quiet },
  });
  const reader: Reader = {
    counts: new Map(),
    lastTotal: new Map(),
    outputs: 0,
    badOutputs: 0,
    deadLetters: [],
    arrivals: undefined,
    stop: () => consumer.disconnect(),
  };
  await consumer.connect();
  await consumer.subscribe({ topics: [TOTALS, DLT] });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        if (batch.topic === DLT) {
          try {
            const h = readDeadLetterHeaders(m.headers as Parameters<typeof readDeadLetterHeaders>[0]);
            reader.deadLetters.push({ reason: h.reason ?? '(none)', originalTopic: h.originalTopic });
          } catch (err) {
            reader.deadLetters.push({ reason: `unreadable: ${(err as Error).message}`, originalTopic: '' });
          }
          continue;
        }
        reader.outputs++;
        if (reader.arrivals) {
          const list = reader.arrivals.get(batch.partition) ?? [];
          if (list.length === 0) reader.arrivals.set(batch.partition, list);
          list.push([Number(m.offset), Date.now()]);
        }
        const customer = m.key?.toString() ?? '';
        let v: { total?: unknown; count?: unknown };
        try {
          v = JSON.parse(m.value?.toString() ?? '') as typeof v;
        } catch {
          reader.badOutputs++;
          continue;
        }
        if (typeof v.count !== 'number' || typeof v.total !== 'number') {
          reader.badOutputs++;
          continue;
        }
        const list = reader.counts.get(customer) ?? [];
        if (list.length === 0) reader.counts.set(customer, list);
        list.push(v.count);
        reader.lastTotal.set(customer, v.total);
      }
    },
  });
  return reader;
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

const instances: Instance[] = [];
let topicsCreated = false;

async function main(): Promise<number> {
  const wallStart = Date.now();
  await redis.ping().catch((err: unknown) => {
    throw new Error(`Redis at ${REDIS_URL} does not answer: ${(err as Error).message}`);
  });
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic: ORDERS, numPartitions: PARTITIONS, replicationFactor: 1 },
      { topic: TOTALS, numPartitions: PARTITIONS, replicationFactor: 1 },
      { topic: DLT, numPartitions: 1, replicationFactor: 1 },
    ],
  });
  topicsCreated = true;
  // The create call returns once the controller has the topics; a client that asks a busy broker at
  // once may not see them yet (a reader that missed the dead-letter topic would look again only at
  // librdkafka's 5-minute metadata refresh). Start once every partition has a leader.
  await pollUntil(
    'the topics to have leaders',
    async () => {
      const seen = await admin.fetchTopicMetadata({ topics: [ORDERS, TOTALS, DLT] }).catch(() => []);
      return [ORDERS, TOTALS, DLT].every((t) => {
        const m = seen.find((x) => x.name === t);
        return m !== undefined && m.partitions.length > 0 && m.partitions.every((p) => p.leader >= 0);
      });
    },
    30_000,
  );
  process.stdout.write(
    `redfence demo ${run}: ${N} orders over ${K} customers + ${poison.length} poison records, ` +
      `${PARTITIONS} partitions, two exactly-once instances (a, b); a gets SIGKILLed midway\n`,
  );

  const reader = await startReader();
  const a = await startInstance('a');
  const b = await startInstance('b');
  instances.push(a, b);

  // 1. Both instances up, the six partitions split between them.
  const startupDeadline = Date.now() + STARTUP_DEADLINE_MS;
  for (;;) {
    const split =
      a.owned.size > 0 &&
      b.owned.size > 0 &&
      a.owned.size + b.owned.size === PARTITIONS &&
      [...a.owned].every((p) => !b.owned.has(p));
    if (split && (await ready(a)) && (await ready(b))) break;
    for (const inst of [a, b])
      if (!alive(inst)) throw new Error(`instance ${inst.name} exited during start-up; log: ${inst.logFile}`);
    if (Date.now() > startupDeadline)
      throw new Error(
        `instances not both ready with the partitions split within ${STARTUP_DEADLINE_MS / 1000} s ` +
          `(a owns [${[...a.owned]}], b owns [${[...b.owned]}])`,
      );
    await sleep(100);
  }
  process.stdout.write(`a owns partitions [${sorted(a.owned)}], b owns [${sorted(b.owned)}]\n`);

  // 2. Produce the orders in waves while the instances run.
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    'linger.ms': 5,
    kafkaJS: quiet,
  });
  await producer.connect();
  const produceStart = Date.now();
  const waveSize = Math.ceil(N / WAVES);
  let producedValid = 0;
  const production = (async () => {
    for (let w = 0; w < WAVES; w++) {
      const wave: Msg[] = orders.slice(w * waveSize, (w + 1) * waveSize);
      for (const p of poison) if (p.wave === w) wave.splice(Math.floor(wave.length / 2), 0, p.msg);
      for (let i = 0; i < wave.length; i += 1000)
        await producer.send({
          topic: ORDERS,
          messages: wave.slice(i, i + 1000).map((m) => ({
            key: m.key,
            value: m.value,
            ...(m.partition === undefined ? {} : { partition: m.partition }),
          })),
        });
      producedValid = Math.min(N, (w + 1) * waveSize);
      if (w < WAVES - 1) await sleep(WAVE_PAUSE_MS);
    }
  })();
  production.catch(() => undefined); // awaited below

  // 3. Watch the instances' /metrics; SIGKILL a once about a third of the orders are processed.
  let lastA: Scrape | undefined;
  let killAt = 0;
  let producedAtKill = 0;
  let aOwnedAtKill: number[] = [];
  let processedBeforeKill = 0;
  while (killAt === 0) {
    const [sa, sb] = await Promise.all([scrape(a), scrape(b)]);
    if (sa) lastA = sa;
    if (!alive(a) || !alive(b)) throw new Error('an instance exited before the kill; see its log');
    processedBeforeKill = total(sa?.verdicts) + total(sb?.verdicts);
    if (processedBeforeKill >= N / 3) {
      aOwnedAtKill = sorted(a.owned);
      reader.arrivals = new Map();
      a.child.kill('SIGKILL');
      killAt = Date.now();
      producedAtKill = producedValid;
    } else if (Date.now() - produceStart > FINISH_DEADLINE_MS) {
      throw new Error(`fewer than a third of the orders processed after ${FINISH_DEADLINE_MS / 1000} s`);
    } else await sleep(50);
  }
  const aExit = await a.exit;
  // Everything a wrote (committed, or in a transaction it never finished) lies below these offsets.
  const totalsEndsAtKill = new Map(
    (await admin.fetchTopicOffsets(TOTALS)).map((r) => [r.partition, Number(r.high)]),
  );
  const processedAtKill = total(lastA?.verdicts);
  process.stdout.write(
    `killed a (SIGKILL) after ${secs(killAt - produceStart)}: its last scrape counted ${processedAtKill} ` +
      `records; ${producedAtKill} of ${N} orders produced so far\n`,
  );

  // 4. b takes over a's partitions; wait until every order has its output (read_committed).
  let takeoverAt = 0;
  let firstOnTakenAt = 0;
  const finishDeadline = Date.now() + FINISH_DEADLINE_MS;
  let lastB: Scrape | undefined;
  let completeAt = 0;
  const distinctOutputs = () => {
    let n = 0;
    for (const list of reader.counts.values()) n += new Set(list).size;
    return n;
  };
  await production;
  await producer.disconnect();
  for (;;) {
    if (
      takeoverAt === 0 &&
      aOwnedAtKill.length > 0 &&
      aOwnedAtKill.every((p) => (b.assignedAt.get(p) ?? 0) >= killAt)
    )
      takeoverAt = Math.max(...aOwnedAtKill.map((p) => b.assignedAt.get(p) ?? 0));
    const sb = await scrape(b);
    if (sb) lastB = sb;
    if (firstOnTakenAt === 0 && aOwnedAtKill.some((p) => (sb?.byPartition.get(p) ?? 0) > 0))
      firstOnTakenAt = Date.now();
    if (distinctOutputs() >= N && reader.deadLetters.length >= poison.length) {
      completeAt = Date.now();
      break;
    }
    if (!alive(b)) break;
    if (Date.now() > finishDeadline) break;
    await sleep(100);
  }
  const finished = completeAt > 0;
  if (!finished)
    process.stdout.write(
      `TIMED OUT after ${FINISH_DEADLINE_MS / 1000} s waiting for the outputs: ${distinctOutputs()} of ${N} ` +
        `outputs and ${reader.deadLetters.length} of ${poison.length} dead letters read` +
        `${alive(b) ? '' : ' (instance b exited!)'}\n`,
    );
  else process.stdout.write(`all outputs read ${secs(completeAt - killAt)} after the kill\n`);
  await sleep(1500); // let duplicates, if any, arrive too
  const sb = await scrape(b);
  if (sb) lastB = sb;

  // 5. Stop b gracefully.
  const termAt = Date.now();
  const bWasAlive = alive(b);
  b.child.kill('SIGTERM');
  const bExit = await Promise.race([b.exit, sleep(STOP_DEADLINE_MS).then(() => undefined)]);
  if (bExit === undefined) b.child.kill('SIGKILL');
  await reader.stop();

  // 6. Verify.
  const endsRows = await admin.fetchTopicOffsets(ORDERS);
  const ends = new Map(endsRows.map((r) => [r.partition, Number(r.high)]));
  const committedRows = await admin.fetchOffsets({ groupId: GROUP, topics: [ORDERS] });
  const committed = new Map((committedRows[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  const uncommitted = [...ends].filter(([p, end]) => committed.get(p) !== end).map(([p]) => p);

  const fence = new Fence({ redis, store: STORE, mode: 'strict' });
  let stateSum = 0;
  let stateCount = 0;
  let stateWrong = 0;
  for (const [customer, e] of expected) {
    const s = await fence.read(customer);
    const v = s?.value
      ? (JSON.parse(s.value.toString('utf8')) as { total: number; count: number })
      : undefined;
    stateSum += v?.total ?? 0;
    stateCount += v?.count ?? 0;
    if (v?.total !== e.total || v?.count !== e.count) stateWrong++;
  }
  const poisonStates = (
    await Promise.all(['poison-1', 'poison-2', 'poison-3', 'poison-4'].map((k) => fence.read(k)))
  ).filter((s) => s !== null).length;

  let badSequences = 0;
  let badTotals = 0;
  for (const [customer, e] of expected) {
    const list = reader.counts.get(customer) ?? [];
    if (list.length !== e.count || list.some((c, i) => c !== i + 1)) badSequences++;
    if (reader.lastTotal.get(customer) !== e.total) badTotals++;
  }
  const strangers = [...reader.counts.keys()].filter((c) => !expected.has(c)).length;

  const reasons = new Map<string, number>();
  for (const d of reader.deadLetters) reasons.set(d.reason, (reasons.get(d.reason) ?? 0) + 1);
  const reasonsOk =
    reader.deadLetters.length === poison.length &&
    [...expectedReasons].every(([r, n]) => reasons.get(r) === n) &&
    reader.deadLetters.every((d) => d.originalTopic === ORDERS);

  const aVerdicts = lastA?.verdicts;
  const bVerdicts = lastB?.verdicts;
  const bad = (m: Map<string, number> | undefined) =>
    ['FENCE', 'REJECT', 'CONFLICT', 'REBASE'].some((v) => (m?.get(v) ?? 0) > 0);
  const bOnTaken = aOwnedAtKill.reduce((n, p) => n + (lastB?.byPartition.get(p) ?? 0), 0);
  const applies = (aVerdicts?.get('APPLY') ?? 0) + (bVerdicts?.get('APPLY') ?? 0);
  const dlqMetric = new Map<string, number>();
  for (const m of [lastA?.deadLetters, lastB?.deadLetters])
    for (const [r, n] of m ?? []) dlqMetric.set(r, (dlqMetric.get(r) ?? 0) + n);
  const seconds = ((completeAt || Date.now()) - produceStart) / 1000;
  // b's first output on a's former partitions, as a read_committed consumer saw it
  // (per partition: an unfinished transaction of a holds back read_committed readers of the partitions
  // it wrote to, until the broker aborts it at its transaction timeout)
  const firstVisible = new Map<number, number>();
  for (const p of aOwnedAtKill) {
    const b0 = totalsEndsAtKill.get(p) ?? 0;
    const hit = (reader.arrivals?.get(p) ?? []).find(([offset]) => offset >= b0);
    if (hit) firstVisible.set(p, hit[1]);
  }
  const visibleOnAll = aOwnedAtKill.length > 0 && firstVisible.size === aOwnedAtKill.length;
  const heldBack = [...firstVisible]
    .filter(([, at]) => firstOnTakenAt > 0 && at - firstOnTakenAt > 5000)
    .map(([p]) => p);

  const rows: Array<[string, string, boolean]> = [
    ['inputs', `${N + poison.length} (${N} valid + ${poison.length} poison), ${K} customers`, true],
    [
      'instance a killed (SIGKILL)',
      `at ${processedAtKill} records processed, owning partitions [${aOwnedAtKill}]`,
      aExit.signal === 'SIGKILL' && aOwnedAtKill.length > 0,
    ],
    [
      "instance b took over a's partitions",
      takeoverAt > 0
        ? `${secs(takeoverAt - killAt)} after the kill (session timeout ${secs(SESSION_TIMEOUT_MS)})`
        : 'never',
      takeoverAt > 0,
    ],
    [
      "kill -> b's first record on a's partitions",
      firstOnTakenAt > 0 ? secs(firstOnTakenAt - killAt) : 'never',
      firstOnTakenAt > 0,
    ],
    [
      "kill -> b's first output visible (read_committed), per partition",
      `${aOwnedAtKill.map((p) => `p${p} ${firstVisible.has(p) ? secs((firstVisible.get(p) ?? 0) - killAt) : 'never'}`).join(', ')}${
        heldBack.length > 0
          ? ` (${heldBack.map((p) => `p${p}`).join(', ')}: held back until a's unfinished transaction timed out)`
          : ''
      }`,
      visibleOnAll,
    ],
    [
      'kill -> all outputs visible (read_committed)',
      finished ? secs(completeAt - killAt) : 'never',
      finished,
    ],
    [
      'outputs read (read_committed)',
      `${reader.outputs} of ${N}`,
      reader.outputs === N && reader.badOutputs === 0,
    ],
    [
      'per-customer counts 1..n in order, no gap or duplicate',
      `${K - badSequences} of ${K} customers${strangers > 0 ? `, ${strangers} unknown keys` : ''}`,
      badSequences === 0 && strangers === 0,
    ],
    [
      "last output total = sum of the customer's orders",
      `${K - badTotals} of ${K} customers`,
      badTotals === 0,
    ],
    ['sum of input amounts', String(inputSum), true],
    ['sum of totals in Redis', String(stateSum), stateSum === inputSum],
    [
      'total and count in Redis, per customer',
      `${K - stateWrong} of ${K} right, counts sum to ${stateCount}; poison keys with state: ${poisonStates}`,
      stateWrong === 0 && stateCount === N && poisonStates === 0,
    ],
    [
      'input offsets committed',
      uncommitted.length === 0 ? `all ${PARTITIONS} partitions at their end` : `behind on [${uncommitted}]`,
      uncommitted.length === 0,
    ],
    ['verdicts, a (last scrape before the kill)', show(aVerdicts), !bad(aVerdicts)],
    [
      'verdicts, b (at the end)',
      `${show(bVerdicts)}; ${bOnTaken} on a's former partitions`,
      !bad(bVerdicts) && bOnTaken > 0 && applies <= N,
    ],
    ['dead-letter metric (a + b)', show(dlqMetric), true],
    ['dead letters (read_committed)', `${reader.deadLetters.length}: ${show(reasons)}`, reasonsOk],
    [
      'records per second, both instances, before the kill',
      (processedBeforeKill / ((killAt - produceStart) / 1000)).toFixed(0),
      true,
    ],
    [
      'records per second, overall',
      `${(N / seconds).toFixed(0)} (${N} in ${seconds.toFixed(1)} s, from the first order produced to the last output read, failover included)`,
      finished,
    ],
    [
      'b stopped by SIGTERM',
      bExit === undefined
        ? `still running after ${secs(STOP_DEADLINE_MS)}: killed`
        : `exit ${bExit.code ?? bExit.signal} after ${secs(bExit.at - termAt)}`,
      bWasAlive && bExit !== undefined && bExit.code === 0,
    ],
  ];
  const ok = rows.every(([, , pass]) => pass);
  process.stdout.write('\n| check | value | ok |\n| --- | --- | --- |\n');
  for (const [name, value, pass] of rows)
    process.stdout.write(`| ${name} | ${value} | ${pass ? 'yes' : 'NO'} |\n`);
  const failed = rows.filter(([, , pass]) => !pass).map(([name]) => name);
  process.stdout.write(`\nwall time ${secs(Date.now() - wallStart)}\n`);
  const keepLogs = !ok || process.env.DEMO_KEEP_LOGS === '1';
  if (keepLogs) process.stdout.write(`instance logs: ${instances.map((i) => i.logFile).join(' ')}\n`);
  else for (const inst of instances) rmSync(inst.logFile, { force: true });
  process.stdout.write(ok ? '\nPASS\n' : `\nFAIL: ${failed.join('; ')}\n`);
  return ok ? 0 : 1;
}

async function cleanup(): Promise<void> {
  killChildren();
  await Promise.all(instances.map((i) => new Promise<void>((r) => i.log.end(() => r()))));
  if (topicsCreated) await admin.deleteTopics({ topics: [ORDERS, TOTALS, DLT] }).catch(() => undefined);
  await admin.disconnect().catch(() => undefined);
  // the store's keys: rf:{<store>:<key>}, rf:{<store>:<topic>:<partition>}:epoch|pending
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${STORE}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err: unknown) => {
    process.stderr.write(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    for (const inst of instances)
      process.stderr.write(
        `\n--- last log lines of instance ${inst.name} (${inst.logFile}) ---\n${inst.tail.join('\n')}\n`,
      );
    process.exitCode = 1;
  })
  .finally(() =>
    cleanup().catch((err: unknown) => {
      process.stderr.write(`cleanup failed: ${err instanceof Error ? err.message : String(err)}\n`);
    }),
  )
  .finally(() => {
    // librdkafka handles can keep the event loop alive; everything is closed by now
    setTimeout(() => process.exit(), 500).unref();
  });
