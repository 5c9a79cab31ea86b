/**
 * `redfence chaos [<module>]`: runs the fault harness (src/chaos) against real Kafka and a redis-server of
 * its own, prints the report table, and exits 1 when the run fails (src/chaos/verdict.ts; 2 on bad
 * options, a bad module or a bad input file). Without a module it runs the built-in orders workload and
 * its verifier; with one, a fault-free and a faulted run of that module compared key by key
 * (src/chaos/any-module.ts). With --handler, a handler (the built-in webhook or the module given) calling
 * a far side the harness starts, judged from the far side's calls (src/chaos/handler-verdict.ts).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { UserHandler, UserProcessor } from '../chaos/harness.js';
import {
  type ChaosOptions,
  type ChaosReport,
  DEFAULTS,
  formatFaults,
  formatReport,
  formatSummary,
  runChaos,
} from '../chaos/index.js';
import type { Topology } from '../chaos/redis-topology.js';
import { randomSeed } from '../chaos/rng.js';
import type { UserTopology } from '../chaos/run-options.js';
import { RedfenceError } from '../errors/index.js';
import { securityProperties } from '../kafka/client-config.js';
import { clientSecurity } from '../runtime/kafka-options.js';
import { CHAOS_HELP, CHAOS_OPTIONS, HANDLER_FLAGS, PROCESSOR_ONLY, WORKLOAD_ONLY } from './chaos-options.js';
import { type KafkaSecurity, type KafkaValues, kafkaSecurity } from './kafka-options.js';
import { parseOptions } from './options.js';

export interface ParsedChaos {
  /** A user's processor module; undefined: the built-in orders workload. */
  module?: string;
  /** --handler: the module (or the built-in one) is a handler. */
  handler: boolean;
  /** --handler: the far side's latency bound and failure rate. */
  farLatencyMs: number;
  farFailureRate: number;
  commitIntervalMs: number;
  /** Its input records as JSON Lines; undefined: its chaosInput. */
  input?: string;
  modes: Array<ChaosOptions['mode']>;
  options: Partial<ChaosOptions>;
  brokers: string[];
  /** The Kafka security options for the harness's clients and, through their environment, the instances. */
  kafkaConfig?: NonNullable<ChaosOptions['kafkaConfig']>;
  kafkaEnv?: Record<string, string>;
  report?: string;
  quiet: boolean;
  help: boolean;
}

/** Parses `redfence chaos` arguments; throws RF_INVALID_OPTIONS naming a bad option. */
export function parseChaosArgs(args: readonly string[], env = process.env): ParsedChaos {
  const { values: o, positionals, help, sources } = parseOptions(CHAOS_OPTIONS, args, env);
  if (positionals.length > 1)
    throw new RedfenceError('RF_INVALID_OPTIONS', `unexpected argument "${positionals[1]}"`);
  const module = positionals[0];
  const given = (flag: keyof typeof CHAOS_OPTIONS) =>
    sources[flag] !== undefined && sources[flag] !== 'default';
  for (const flag of o.handler ? [...PROCESSOR_ONLY, ...WORKLOAD_ONLY] : HANDLER_FLAGS)
    if (given(flag))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        o.handler
          ? `--${flag} applies to processors, not to --handler runs`
          : `--${flag} applies to --handler runs`,
      );
  if (o.handler && o['commit-interval'] === 0)
    throw new RedfenceError('RF_INVALID_OPTIONS', '--commit-interval with --handler must be at least 1 (ms)');
  if (o.handler && module === undefined && o.input !== undefined)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      '--input applies to a module: redfence chaos --handler <module> --input <file>',
    );
  for (const flag of ['idle-close', 'input-partitions', 'late-topic'] as const)
    if ((module === undefined || o.handler) && o[flag] !== undefined)
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `--${flag} applies to a topology module: redfence chaos <topology module> --${flag} <${flag === 'idle-close' ? 'ms' : flag === 'late-topic' ? 'topic' : 'list'}>`,
      );
  if (module === undefined && o.input !== undefined)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      '--input applies to a module: redfence chaos <module> --input <file>',
    );
  if (module !== undefined || o.handler) {
    for (const flag of WORKLOAD_ONLY)
      if (o[flag] !== undefined)
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `--${flag} applies to the built-in orders workload, not to a module's records`,
        );
    if (o.input !== undefined && o.records !== undefined)
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        '--records applies to chaosInput; --input gives every record',
      );
  }
  const options: Partial<ChaosOptions> = {};
  const numbers = {
    seed: 'seed',
    records: 'records',
    customers: 'customers',
    skew: 'skew',
    partitions: 'partitions',
    duration: 'durationS',
    'poison-rate': 'poisonRate',
    large: 'large',
    kills: 'kills',
    crashes: 'crashes',
    zombies: 'zombies',
    'redis-restarts': 'redisRestarts',
    'redis-failovers': 'redisFailovers',
    repairs: 'repairs',
    'wait-replicas': 'waitReplicas',
    'wait-timeout': 'waitTimeoutMs',
    'replica-lag': 'replicaLagMs',
    'session-timeout': 'sessionTimeoutMs',
    'crash-timeout': 'crashTimeoutMs',
    'drain-timeout': 'drainTimeoutMs',
    'commit-interval': 'commitIntervalMs',
    'idle-close': 'idleCloseMs',
  } as const satisfies Partial<Record<keyof typeof CHAOS_OPTIONS, keyof ChaosOptions>>;
  for (const [flag, key] of Object.entries(numbers)) {
    const v = o[flag as keyof typeof numbers];
    if (v !== undefined) options[key] = v;
  }
  if (o['wait-timeout'] !== undefined && o['wait-replicas'] === undefined)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      '--wait-timeout applies to --wait-replicas; add --wait-replicas <n>',
    );
  options.redisTopology = o['redis-topology'];
  checkWaitReplicas(o['wait-replicas'], o['redis-topology'], o['redis-failovers'] ?? DEFAULTS.redisFailovers);
  if (o['input-partitions'] !== undefined)
    options.inputPartitions = Object.fromEntries(o['input-partitions']);
  if (o['late-topic'] !== undefined) options.lateTopic = o['late-topic'];
  if (o.points !== undefined) options.points = o.points;
  if (o.scale !== undefined) options.scale = o.scale;
  if (o.keep) options.keep = true;
  const security = help ? {} : kafkaSecurity(o, env);
  const connection = Object.keys(security).length === 0 ? {} : kafkaConnection(o, security);
  return {
    ...(module === undefined ? {} : { module }),
    ...(o.input === undefined ? {} : { input: o.input }),
    handler: o.handler,
    farLatencyMs: o['far-latency'] ?? 20,
    farFailureRate: o['far-failure-rate'] ?? 0.02,
    commitIntervalMs: o['commit-interval'] ?? 3000,
    modes: o.handler ? ['at-least-once'] : o.mode === 'both' ? ['exactly-once', 'at-least-once'] : [o.mode],
    options,
    brokers: o.brokers,
    ...connection,
    ...(o.report === undefined ? {} : { report: o.report }),
    quiet: o.quiet,
    help,
  };
}

/**
 * `--wait-replicas n` asks every batch to wait for n replicas; the harness starts one replica per primary
 * (sentinel, cluster, standalone with --redis-failovers) or none (standalone without), so a larger n
 * would never be met: no batch would commit and the run would end at the drain timeout. Refused here,
 * before any connection.
 */
function checkWaitReplicas(n: number | undefined, topology: Topology, failovers: number): void {
  if (n === undefined) return;
  const replicas = topology === 'standalone' && failovers === 0 ? 0 : 1;
  if (n <= replicas) return;
  throw new RedfenceError(
    'RF_INVALID_OPTIONS',
    replicas === 0
      ? `--wait-replicas ${n}: --redis-topology standalone without --redis-failovers starts no replica, so WAIT would never be met; add --redis-failovers <n> or --redis-topology sentinel|cluster`
      : `--wait-replicas ${n}: the harness starts one replica per ${topology === 'cluster' ? 'master' : 'primary'} (--redis-topology ${topology}), so WAIT ${n} would never be met; use --wait-replicas 1`,
  );
}

/**
 * The Kafka connection of a chaos run: librdkafka properties for the harness's own clients, and the
 * environment that gives every instance (`redfence run`) the same settings: passwords and pass-through
 * values through the environment, never the instances' command lines.
 */
function kafkaConnection(
  v: KafkaValues,
  s: KafkaSecurity,
): { kafkaConfig: NonNullable<ChaosOptions['kafkaConfig']>; kafkaEnv: Record<string, string> } {
  const kafkaConfig = {
    ...s.config,
    ...securityProperties(clientSecurity(s).security),
  } as NonNullable<ChaosOptions['kafkaConfig']>;
  const sasl = s.sasl !== undefined && 'password' in s.sasl ? s.sasl : undefined;
  // every REDFENCE_KAFKA_* variable is set (empty counts as unset), so none of the caller's leaks in
  const kafkaEnv: Record<string, string> = {
    REDFENCE_KAFKA_SECURITY_PROTOCOL: s.securityProtocol ?? '',
    REDFENCE_KAFKA_SASL_MECHANISM: sasl?.mechanism ?? '',
    REDFENCE_KAFKA_USERNAME: sasl?.username ?? '',
    REDFENCE_KAFKA_PASSWORD: sasl?.password ?? '',
    REDFENCE_KAFKA_PASSWORD_FILE: '',
    REDFENCE_KAFKA_CA: v['kafka-ca'] ?? '',
    REDFENCE_KAFKA_CERT: v['kafka-cert'] ?? '',
    REDFENCE_KAFKA_KEY: v['kafka-key'] ?? '',
    REDFENCE_KAFKA_KEY_PASSWORD: s.ssl?.keyPassword ?? '',
    REDFENCE_KAFKA_KEY_PASSWORD_FILE: '',
    REDFENCE_KAFKA_CONFIG: Object.entries(s.config ?? {})
      .map(([k, x]) => `${k}=${x}`)
      .join('\n'),
  };
  return { kafkaConfig, kafkaEnv };
}

/** The module, loaded as `redfence run` loads it, and its records (the seed fixed now: they depend on it). */
async function userProcessor(parsed: ParsedChaos): Promise<UserProcessor> {
  const { loadChaosModule, generateInput, readInputFile } = await import('../chaos/module.js');
  const m = await loadChaosModule(parsed.module as string);
  parsed.options.seed ??= randomSeed();
  const records =
    parsed.input === undefined
      ? generateInput(m, parsed.options.seed, parsed.options.records ?? DEFAULTS.records)
      : await readInputFile(parsed.input);
  // one CreateTime base for every run of this command, so both runs of a comparison see the same
  return { module: m.path, records, timestampBase: Date.now() };
}

/**
 * A topology module (its default export a built topology) and its records; undefined for a processor
 * module. Its instances take crash points as a processor's do (--crashes, --points: the topology
 * processor calls the same hooks at the same points), --wait-replicas and --idle-close (`redfence run`
 * passes them to the topology processor; --idle-close is refused for a processor module, and for a
 * topology with no windowed aggregation by the processor's own check), under Redis restarts and
 * failovers on any --redis-topology.
 */
async function userTopology(parsed: ParsedChaos): Promise<UserTopology | undefined> {
  const { loadChaosTopology, runInputTopics, topologyInput } = await import('../chaos/topology-module.js');
  const { readInputFile } = await import('../chaos/module.js');
  const m = await loadChaosTopology(parsed.module as string);
  const { idleCloseMs, inputPartitions, lateTopic } = parsed.options;
  if (m === undefined) {
    const flag =
      idleCloseMs !== undefined
        ? 'idle-close'
        : inputPartitions !== undefined
          ? 'input-partitions'
          : lateTopic !== undefined
            ? 'late-topic'
            : undefined;
    if (flag !== undefined)
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `--${flag} applies to topologies, and the module exports a processor`,
      );
    return undefined;
  }
  // the topology processor's own check (a topology with no windowed aggregation refuses it)
  const { idleCloseOption } = await import('../processor/topology/options.js');
  idleCloseOption(m.built, idleCloseMs);
  parsed.options.seed ??= randomSeed();
  const records =
    parsed.input === undefined
      ? topologyInput(m, parsed.options.seed, parsed.options.records ?? DEFAULTS.records)
      : await readInputFile(parsed.input);
  // the topics the records name: listed inputs, or names the patterns match (RF_MODULE_INVALID else)
  const topics = new Set(records.map((r) => r.topic));
  runInputTopics(m.path, m.built, topics);
  // --input-partitions and --late-topic name topics of those (RF_INVALID_OPTIONS else)
  const { checkTopicShape } = await import('../chaos/topic-shape.js');
  checkTopicShape(m.path, m.built, topics, parsed.options);
  return { module: m.path, built: m.built, records, timestampBase: Date.now() };
}

/** The handler module (the built-in webhook without one) and its records, checked before any connection. */
async function userHandler(parsed: ParsedChaos): Promise<UserHandler> {
  const { loadChaosHandler, generateInput, readInputFile } = await import('../chaos/module.js');
  const { webhookModule } = await import('../chaos/instances.js');
  const m = await loadChaosHandler(parsed.module ?? webhookModule());
  parsed.options.seed ??= randomSeed();
  const records =
    parsed.input === undefined
      ? generateInput(m, parsed.options.seed, parsed.options.records ?? HANDLER_RECORDS)
      : await readInputFile(parsed.input);
  return {
    module: m.path,
    records,
    timestampBase: Date.now(),
    latencyMs: [parsed.farLatencyMs / 5, parsed.farLatencyMs],
    failureRate: parsed.farFailureRate,
    commitIntervalMs: parsed.commitIntervalMs,
  };
}

/** --handler's default record count (fewer than the orders workload: each is a far-side call). */
const HANDLER_RECORDS = 5000;

/** Where the markdown summary of `--report <file>` goes: the same name with `.md`. */
export function summaryPath(report: string): string {
  return `${report.replace(/\.txt$/, '')}.md`;
}

export async function chaos(args: readonly string[], out: (s: string) => void): Promise<number> {
  // Bad options throw RF_INVALID_OPTIONS; the command line prints it and exits 2.
  const parsed = parseChaosArgs(args);
  if (parsed.help) {
    out(CHAOS_HELP);
    return 0;
  }
  // A module and its records are checked (RF_MODULE_INVALID, RF_INVALID_OPTIONS) before any connection.
  const handler = parsed.handler ? await userHandler(parsed) : undefined;
  const topology = parsed.module === undefined || handler ? undefined : await userTopology(parsed);
  const processor =
    parsed.module === undefined || handler || topology ? undefined : await userProcessor(parsed);
  // SIGINT/SIGTERM: exit through process.exit, so the harness's exit listener (src/harness/child.ts)
  // SIGKILLs every instance and redis-server still running (a signal's default action skips it)
  const interrupted = (signal: NodeJS.Signals): void => {
    process.stderr.write(`redfence chaos: ${signal}: stopping the run's instances and redis-servers\n`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    return await runModes(parsed, { handler, processor, topology }, args, out);
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
  }
}

async function runModes(
  parsed: ReturnType<typeof parseChaosArgs>,
  user: {
    handler?: UserHandler | undefined;
    processor?: UserProcessor | undefined;
    topology?: UserTopology | undefined;
  },
  args: readonly string[],
  out: (s: string) => void,
): Promise<number> {
  const { handler, processor, topology } = user;
  const reports: ChaosReport[] = [];
  const texts: string[] = [];
  const summaries: string[] = [];
  for (const mode of parsed.modes) {
    const { pointsFor } = await import('../chaos/schedule.js');
    const crashes = handler
      ? 0
      : (parsed.options.crashes ?? (parsed.options.points ?? pointsFor(mode)).length);
    const options = {
      ...parsed.options,
      ...(handler ? { redisRestarts: 0, redisFailovers: 0, handler } : {}),
      crashes,
      mode,
      brokers: parsed.brokers,
      ...(parsed.kafkaConfig ? { kafkaConfig: parsed.kafkaConfig } : {}),
      ...(parsed.kafkaEnv ? { kafkaEnv: parsed.kafkaEnv } : {}),
      ...(parsed.quiet ? {} : { log: (line: string) => out(`${line}\n`) }),
    };
    const report =
      handler || topology
        ? await runChaos({ ...options, ...(topology ? { topology } : {}) })
        : processor
          ? await (await import('../chaos/any-module.js')).runModuleChaos({ ...options, processor })
          : await runChaos(options);
    // the next mode reuses the seed, so `--seed` reproduces both
    parsed.options.seed = report.seed;
    reports.push(report);
    const text = `${formatReport(report)}\nFaults:\n${formatFaults(report)}\n`;
    texts.push(text);
    summaries.push(formatSummary(report, `redfence chaos ${args.join(' ')}`));
    out(`\n${text}\n`);
  }
  if (parsed.report) {
    // the report, and beside it the markdown summary for docs/chaos.md's list of long runs
    await mkdir(dirname(parsed.report), { recursive: true });
    await writeFile(parsed.report, texts.join('\n'));
    await writeFile(summaryPath(parsed.report), `${summaries.join('\n\n')}\n`);
  }
  return reports.every((r) => r.ok) ? 0 : 1;
}
