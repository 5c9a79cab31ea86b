/**
 * Kafka Streams itself on the scenarios of scenarios.ts: the reference the streams DSL is compared with.
 * For each run it makes the input topics (the scenario's `inputs`, named by inputTopics) and an output
 * topic (unique names, retention.ms -1, the scenario's partition count), produces the input as the
 * comparison contract says (each record to its key's topic, inputIndex), runs
 * test/interop/java/StreamsScenarios.java once for all runs (one JVM, one KafkaStreams instance a
 * scenario, exactly_once_v2, cache 0; it stops once its committed offsets reach every input's end and
 * pass the last record of any repartition topic), reads each output topic to its end (read_committed)
 * and deletes the topics (internal ones too: they share the run's prefix) and groups. `alongside` runs
 * something else on the same input topics meanwhile (run-equals-kstreams.test.ts: TopologyProcessor).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { kafka, pollUntil, produce, type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { type InRecord, inputIndex, inputTopics, type OutRecord, type Scenario } from './scenarios.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** A small heap and a fast start: the program runs for seconds. */
const JVM = ['-Xms64m', '-Xmx512m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];

export interface KafkaStreamsRun {
  scenario: Scenario;
  input: InRecord[];
  /**
   * With its input processed, Kafka Streams runs on idle this long more (wall clock), then reads what
   * its input topics received meanwhile (kstreams-idle-close.test.ts: redfence's ticks) to their end.
   */
  idleMs?: number;
}

/** A run's topics and Kafka Streams' application id (its consumer group), all unique to the call. */
export interface KafkaStreamsTopics {
  name: string;
  applicationId: string;
  /** the first input topic (its `.DLT` is a dead-letter topic's name) */
  input: string;
  /** every input topic, `input` first (inputTopics) */
  inputs: string[];
  output: string;
  scenario: Scenario;
  /** KafkaStreamsRun.idleMs */
  idleMs?: number;
}

export interface KafkaStreamsOptions {
  /** the JVM's bound for processing every input (default 120 s); the child is killed 20 s after it */
  timeoutMs?: number;
  /** KafkaStreams instances running at once (default 4) */
  concurrency?: number;
  /**
   * Runs while the JVM runs, once every input is produced, on the same input topics (another reader of
   * them uses its own group): e.g. the streams DSL on the very records Kafka Streams reads. The topics
   * are deleted only after both are done; it failing fails the call (once the JVM has ended).
   */
  alongside?: (topics: readonly KafkaStreamsTopics[]) => Promise<void>;
  /**
   * Gives every input record headers (`seq`: its index in its run's input; `tag`: two values, `k` and
   * its key) and reads the outputs' headers (OutRecord.headers): what each side carries to its outputs.
   */
  headers?: boolean;
}

/** The classpath of the JVM programs (jars fetched and sources compiled once by scripts/interop-jars.sh). */
export function interopClasspath(): string {
  return execFileSync('bash', [join(ROOT, 'scripts/interop-jars.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 300_000,
  }).trim();
}

/**
 * Runs every scenario with Kafka Streams on its input; returns each scenario's output records by name,
 * partition after partition in offset order (so the records of one key keep their order).
 */
export async function runKafkaStreams(
  runs: KafkaStreamsRun[],
  options: KafkaStreamsOptions = {},
): Promise<Map<string, OutRecord[]>> {
  const names = new Set<string>();
  for (const { scenario: s, input } of runs) {
    assert.match(s.name, /^[a-z0-9-]+$/, `scenario name ${s.name}`);
    assert.ok(!names.has(s.name), `two runs named ${s.name}`);
    names.add(s.name);
    const bad = input.find(
      (r) => !Number.isInteger(r.partition) || r.partition < 0 || r.partition >= s.partitions,
    );
    assert.equal(bad, undefined, `${s.name}: a record's partition is outside 0..${s.partitions - 1}`);
    const n = s.inputs ?? 1;
    assert.ok(Number.isInteger(n) && n >= 1, `${s.name}: inputs ${n}`);
    // every scenario aggregates, and the Redis runtime aggregates one topic: the merge is repartitioned
    assert.ok(n === 1 || s.repartition !== undefined, `${s.name}: ${n} inputs without repartition`);
  }
  const prefix = uniqueName('ks');
  const topics: KafkaStreamsTopics[] = runs.map(({ scenario: s, idleMs }) => ({
    name: s.name,
    applicationId: `${prefix}-${s.name}`,
    input: `${prefix}-${s.name}-in`,
    inputs: inputTopics(s, `${prefix}-${s.name}-in`),
    output: `${prefix}-${s.name}-out`,
    scenario: s,
    ...(idleMs === undefined ? {} : { idleMs }),
  }));
  const stateDir = mkdtempSync(join(tmpdir(), 'rf-kstreams-'));
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createTopics(
      admin,
      topics.flatMap((t) =>
        [...t.inputs, t.output].map((topic) => ({ topic, partitions: t.scenario.partitions })),
      ),
    );
    for (const [i, run] of runs.entries()) {
      const t = topics[i] as KafkaStreamsTopics;
      for (const [at, topic] of t.inputs.entries())
        await produceInput(
          topic,
          run.input.filter((r) => inputIndex(run.scenario, r.key) === at),
          options.headers === true ? run.input : undefined,
        );
    }
    const [jvm, beside] = await Promise.allSettled([
      runJvm({
        brokers: KAFKA_BROKERS,
        stateDir,
        timeoutMs: options.timeoutMs ?? 120_000,
        concurrency: options.concurrency ?? 4,
        runs: topics,
      }),
      options.alongside?.(topics),
    ]);
    if (jvm.status === 'rejected') throw jvm.reason;
    if (beside.status === 'rejected') throw beside.reason;
    const results = new Map<string, OutRecord[]>();
    for (const t of topics) results.set(t.name, await readOutput(t.output, options.headers === true));
    return results;
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
    const all = await admin.listTopics().catch(() => [] as string[]);
    const ours = all.filter((t) => t.startsWith(`${prefix}-`));
    if (ours.length > 0) await admin.deleteTopics({ topics: ours }).catch(() => undefined);
    await admin.deleteGroups(topics.map((t) => t.applicationId)).catch(() => undefined);
    await admin.disconnect();
  }
}

type Admin = ReturnType<typeof kafka.admin>;

/** Topics that keep every record whatever its event time (retention.ms -1), once every partition has a leader. */
async function createTopics(admin: Admin, topics: { topic: string; partitions: number }[]): Promise<void> {
  await admin.createTopics({
    topics: topics.map((t) => ({
      topic: t.topic,
      numPartitions: t.partitions,
      replicationFactor: 1,
      configEntries: [{ name: 'retention.ms', value: '-1' }],
    })),
  });
  await pollUntil(
    `${topics.length} topics to have leaders`,
    async () => {
      const seen = await admin
        .fetchTopicMetadata({ topics: topics.map((t) => t.topic) })
        .catch(() => undefined);
      return (
        seen !== undefined &&
        topics.every((t) => {
          const m = seen.find((x) => x.name === t.topic);
          return m?.partitions.length === t.partitions && m.partitions.every((p) => p.leader >= 0);
        })
      );
    },
    30_000,
  );
}

/**
 * The contract's wire format: value {"amount": n}, key UTF-8 or none, CreateTime, array order per
 * partition; with `all` (the run's whole input), headers naming the record's index in it.
 */
async function produceInput(topic: string, input: InRecord[], all?: readonly InRecord[]): Promise<void> {
  const seq = new Map(all?.map((r, i) => [r, i]));
  await produce(
    topic,
    input.map((r) => ({
      key: r.key,
      value: JSON.stringify({ amount: r.amount }),
      partition: r.partition,
      timestamp: String(r.timestamp),
      ...(all === undefined ? {} : { headers: { seq: String(seq.get(r)), tag: ['k', r.key ?? '-'] } }),
    })),
  );
}

/** Headers as one comparable string: `name=v1,v2` per name (values in order), names sorted, `;` between. */
function headerText(h: ReadRecord['headers']): string | undefined {
  const names = Object.keys(h)
    .filter((n) => h[n] !== undefined)
    .sort();
  if (names.length === 0) return undefined;
  const text = (v: Buffer | string) => v.toString();
  return names
    .map((n) => {
      const v = h[n] as Buffer | string | (Buffer | string)[];
      return `${n}=${Array.isArray(v) ? v.map(text).join(',') : text(v)}`;
    })
    .join(';');
}

/** Runs StreamsScenarios on the spec (stdin); bounded: killed timeoutMs + 20 s after the start. */
async function runJvm(spec: { timeoutMs: number; runs: unknown[] } & Record<string, unknown>): Promise<void> {
  const child = spawn('java', [...JVM, '-cp', interopClasspath(), 'StreamsScenarios'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  child.stdin.end(JSON.stringify(spec));
  const killer = setTimeout(() => child.kill('SIGKILL'), spec.timeoutMs + 20_000);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    assert.equal(code, 0, `StreamsScenarios exited ${code}:\n${err.slice(-6000)}`);
    const done = out.trim().split('\n').filter(Boolean).length;
    assert.equal(
      done,
      spec.runs.length,
      `StreamsScenarios finished ${done} of ${spec.runs.length} runs:\n${out}`,
    );
  } finally {
    clearTimeout(killer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/**
 * An output topic's records in the contract's shape (read_committed, to the end offsets it has when
 * called), partition after partition, each in offset order.
 */
export async function readOutput(topic: string, headers = false): Promise<OutRecord[]> {
  const records = await readToEnd(topic);
  records.sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset));
  return records.map((r) => {
    assert.ok(r.key !== null && r.value !== null, `${topic}: a record without key or value`);
    const v = JSON.parse(r.value) as { start: number; end: number; value: number | null };
    const out: OutRecord = {
      key: r.key,
      start: v.start,
      end: v.end,
      value: v.value,
      timestamp: Number(r.timestamp),
    };
    const h = headers ? headerText(r.headers) : undefined;
    return h === undefined ? out : { ...out, headers: h };
  });
}
