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
import { TOPOLOGIES } from '../chaos/redis-topology.js';
import { randomSeed } from '../chaos/rng.js';
import { ALL_POINTS, type CrashPointName } from '../chaos/schedule.js';
import { RedfenceError } from '../errors/index.js';
import { securityProperties } from '../kafka/client-config.js';
import { KAFKA_OPTIONS, type KafkaSecurity, type KafkaValues, kafkaSecurity } from './kafka-options.js';
import {
  choiceOption,
  helpText,
  hostPort,
  Invalid,
  listOption,
  numberOption,
  parseOptions,
  switchOption,
  textOption,
} from './options.js';

const count = (description: string, dflt: number, min = 0) =>
  numberOption('<n>', { description, defaultText: String(dflt), min });

/** The options of `redfence chaos`; values left unset take the harness's defaults (src/chaos). */
export const CHAOS_OPTIONS = {
  mode: choiceOption(['exactly-once', 'at-least-once', 'both'] as const, {
    description: 'processing mode of the instances; both: one run per mode, same seed',
    default: 'exactly-once',
  }),
  seed: numberOption('<n>', {
    description: "reproduce a run's workload and fault schedule",
    defaultText: 'random, printed',
    min: 0,
    max: 2 ** 32 - 1,
  }),
  brokers: listOption('<list>', {
    description: 'Kafka bootstrap servers host:port,...',
    env: 'KAFKA_BROKERS',
    default: ['127.0.0.1:19092'],
    allowed: 'host:port[,host:port...]',
    item: (s) => (hostPort(s) ? s : undefined),
  }),
  ...KAFKA_OPTIONS,
  records: count('orders to produce', DEFAULTS.records, 1),
  customers: count('distinct customers (keys)', DEFAULTS.customers, 1),
  skew: numberOption('<s>', {
    description: 'Zipf exponent of customer popularity',
    defaultText: String(DEFAULTS.skew),
    min: 0,
    fraction: true,
  }),
  partitions: numberOption('<n>', {
    description: 'input and output partitions',
    defaultText: String(DEFAULTS.partitions),
    min: 2,
    max: 1000,
  }),
  duration: numberOption('<s>', {
    description: 'production window in seconds (rate = records / duration)',
    defaultText: String(DEFAULTS.durationS),
    min: 0.1,
    fraction: true,
  }),
  'poison-rate': numberOption('<f>', {
    description: 'fraction of poison records',
    defaultText: String(DEFAULTS.poisonRate),
    min: 0,
    max: 1,
    fraction: true,
  }),
  large: count('valid orders padded to just under 1 MB', DEFAULTS.large),
  kills: count('random SIGKILLs (each followed by a restart)', DEFAULTS.kills),
  crashes: numberOption('<n>', {
    description: 'crash-point faults, cycling through --points',
    defaultText: 'one per point of the mode',
    min: 0,
  }),
  points: listOption('<list>', {
    description: `crash points: ${ALL_POINTS.join(',')}`,
    allowed: `crash points from ${ALL_POINTS.join(', ')}`,
    item: (p) => ((ALL_POINTS as readonly string[]).includes(p) ? (p as CrashPointName) : undefined),
    explain: (raw) => {
      const wrong = raw.split(',').find((p) => !(ALL_POINTS as readonly string[]).includes(p.trim()));
      return wrong === undefined
        ? undefined
        : new Invalid(`: unknown crash point ${JSON.stringify(wrong)} (known: ${ALL_POINTS.join(', ')})`);
    },
  }),
  zombies: count('SIGSTOP an owner past its session timeout, then SIGCONT', DEFAULTS.zombies),
  'redis-restarts': count(
    "SIGKILL the harness's Redis (AOF, appendfsync always) and restart it",
    DEFAULTS.redisRestarts,
  ),
  'redis-failovers': count(
    'SIGKILL the Redis primary (a cluster master with --redis-topology cluster) and promote its replica: by hand behind a proxy (standalone), by the Sentinels, or by the cluster; the killed one rejoins as a replica',
    DEFAULTS.redisFailovers,
  ),
  'redis-topology': choiceOption(TOPOLOGIES, {
    description:
      'the Redis the harness starts: one server (+ a replica with --redis-failovers), a primary + replica + 3 Sentinels, or a cluster of 3 masters + 3 replicas',
    default: DEFAULTS.redisTopology,
  }),
  'wait-replicas': numberOption('<n>', {
    description: "the instances' --wait-replicas (WAIT for n replicas before committing)",
    defaultText: 'no WAIT',
    min: 1,
    max: 5,
  }),
  'replica-lag': numberOption('<ms>', {
    description:
      'sentinel and cluster failovers: cut the replication link this long before killing the primary, so the replica misses that much of the writes',
    defaultText: '0',
    min: 0,
    max: 60_000,
  }),
  'wait-timeout': numberOption('<ms>', {
    description: "the instances' --wait-timeout (with --wait-replicas)",
    defaultText: "redfence run's",
    min: 1,
  }),
  scale: listOption('<list>', {
    description: 'instance counts: start, then one scale fault per further count',
    defaultText: DEFAULTS.scale.join(','),
    allowed: 'instance counts from 1 to 20 like 1,3,2',
    item: (s) => {
      const n = Number(s);
      return Number.isInteger(n) && n >= 1 && n <= 20 ? n : undefined;
    },
  }),
  'session-timeout': numberOption('<ms>', {
    description: "the instances' consumer session timeout",
    defaultText: String(DEFAULTS.sessionTimeoutMs),
    min: 1000,
  }),
  'crash-timeout': numberOption('<ms>', {
    description: 'give up on a crash point not reached after this long',
    defaultText: String(DEFAULTS.crashTimeoutMs),
    min: 1000,
  }),
  'drain-timeout': numberOption('<ms>', {
    description: 'wait this long for the group to commit the whole input',
    defaultText: String(DEFAULTS.drainTimeoutMs),
    min: 1000,
  }),
  input: textOption('<file.jsonl>', {
    description:
      'with <module>: the input records, one JSON object per line, {"key": ..., "value": ...} (instead of the module\'s chaosInput)',
  }),
  handler: switchOption({
    description:
      'run a handler (the built-in webhook handler, or <module> exporting defineHandler) against a far side the harness starts',
  }),
  'far-latency': numberOption('<ms>', {
    description: "with --handler: the far side's latency, uniform from a fifth of this to this",
    defaultText: '20',
    min: 0,
    max: 10_000,
  }),
  'far-failure-rate': numberOption('<f>', {
    description: 'with --handler: fraction of far-side calls answered 503 (retried by the handler)',
    defaultText: '0.02',
    min: 0,
    max: 0.5,
    fraction: true,
  }),
  'commit-interval': numberOption('<ms>', {
    description:
      "with --handler: the instances' --commit-interval (a longer one makes a replay after a kill reach further back)",
    defaultText: '3000',
    min: 1,
    max: 60_000,
  }),
  report: textOption('<file>', { description: 'also write the report to this file' }),
  keep: switchOption({ description: 'keep the topics and the Redis directory' }),
  quiet: switchOption({ description: 'print only the report' }),
};

export const CHAOS_HELP = helpText(
  'redfence chaos [<module>] [options]',
  `Runs the package's own customer-totals processor as child processes against real Kafka and a Redis
the harness starts itself (--redis-topology; redis-server and redis-cli must be on the PATH), produces a skewed workload
with poison records while injecting faults, then verifies outputs, state, dead letters and committed
offsets. Exit 0: every fault did what it is meant to and no violation; 1: a violation, a fault that did
not, or an instance exit no fault caused; 2: bad options.

With <module> (a processor module, as for redfence run): its records come from the module's
chaosInput(rng, n) export (n = --records) or from --input <file.jsonl>; a fault-free run and a run with
the faults above, each on its own topics, store and Redis, must end with the same state per key and the
same outputs and dead letters (exactly-once: the same multisets under read_committed; at-least-once: the
same values per key, duplicates allowed). Exit 1 names the keys that differ; 2: a bad module or input file.

With --handler [<module>] (a handler module, or the built-in one: ctx.once around one POST per record):
the instances call a far side on 127.0.0.1 the harness starts (its URL in REDFENCE_CHAOS_FAR_SIDE;
--far-latency, --far-failure-rate) under kills, a zombie and scaling; every record must have an effect
there (or a dead letter), no record more than one beyond those in flight at a kill or a stop, the first
effects of a key in offset order, and the group's commits at the end offsets. Exit 1 names the records.`,
  CHAOS_OPTIONS,
);

/** Faults and settings a handler run does not take (crash points are the processor's; Redis stays up). */
const PROCESSOR_ONLY = [
  'mode',
  'crashes',
  'points',
  'redis-restarts',
  'redis-failovers',
  'wait-replicas',
  'wait-timeout',
  'replica-lag',
] as const;
const HANDLER_FLAGS = ['far-latency', 'far-failure-rate', 'commit-interval'] as const;

/** Options of the built-in orders workload, refused with a module. */
const WORKLOAD_ONLY = ['customers', 'skew', 'poison-rate', 'large'] as const;

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
  if (o.handler && module === undefined && o.input !== undefined)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      '--input applies to a module: redfence chaos --handler <module> --input <file>',
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
    'wait-replicas': 'waitReplicas',
    'wait-timeout': 'waitTimeoutMs',
    'replica-lag': 'replicaLagMs',
    'session-timeout': 'sessionTimeoutMs',
    'crash-timeout': 'crashTimeoutMs',
    'drain-timeout': 'drainTimeoutMs',
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
    ...(s.securityProtocol === undefined
      ? {}
      : securityProperties({
          protocol: s.securityProtocol,
          ...(s.sasl === undefined ? {} : { sasl: s.sasl }),
          ...(s.ssl === undefined ? {} : { ssl: s.ssl }),
        })),
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
    inFlightMs: 1000,
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
  const processor = parsed.module === undefined || handler ? undefined : await userProcessor(parsed);
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
    const report = handler
      ? await runChaos(options)
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
