/**
 * The options and help text of `redfence chaos` (src/cli/chaos.ts parses them and runs the harness),
 * and which of them a handler run or a user's module refuses.
 */
import { DEFAULTS } from '../chaos/index.js';
import { TOPOLOGIES } from '../chaos/redis-topology.js';
import { ALL_POINTS, type CrashPointName } from '../chaos/schedule.js';
import { INPUT_PARTITIONS_MAX, inputPartitionsItem } from '../chaos/topic-shape.js';
import { IDLE_CLOSE_MAX_MS, IDLE_CLOSE_MIN_MS } from '../processor/topology/options.js';
import { KAFKA_OPTIONS } from './kafka-options.js';
import {
  choiceOption,
  helpText,
  hostPort,
  Invalid,
  listOption,
  numberOption,
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
  repairs: count(
    "give a few keys a wrong value under their fence, then run reconcile --repair's code on the store while the instances run (the built-in workload only)",
    DEFAULTS.repairs ?? 0,
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
    description: 'give up on a crash point not reached this long after the armed instance got partitions',
    defaultText: String(DEFAULTS.crashTimeoutMs),
    min: 1000,
  }),
  'drain-timeout': numberOption('<ms>', {
    description: 'wait this long for the group to commit the whole input',
    defaultText: String(DEFAULTS.drainTimeoutMs),
    min: 1000,
  }),
  'idle-close': numberOption('<ms>', {
    description:
      "a topology module: the instances' --idle-close (ticks close the windows of idle partitions); the drain waits until ticks have closed every window, and the verdict judges what they closed",
    defaultText: 'off',
    min: IDLE_CLOSE_MIN_MS,
    max: IDLE_CLOSE_MAX_MS,
  }),
  'input-partitions': listOption('<list>', {
    description:
      "a topology module: input topics with their own partition count, by the module's topic name (a listed input, or a topic its records name for a pattern); the others get --partitions",
    defaultText: '--partitions for every input topic',
    allowed: `topic=count pairs like returns=2,region-sa=1 (count 1 to ${INPUT_PARTITIONS_MAX})`,
    item: inputPartitionsItem,
    explain: (raw) => {
      const names = raw.split(',').map((x) => x.trim().split('=')[0]);
      const twice = names.find((x, i) => names.indexOf(x) !== i);
      return twice === undefined ? undefined : new Invalid(`: topic ${twice} is given twice`);
    },
  }),
  'late-topic': textOption('<topic>', {
    description:
      'a topology module: a topic its records name for a pattern, made by the harness when its first record is due (after the instances started), which then restarts the instances to read it (the runtime resolves patterns at start)',
    allowed: 'a topic name (letters, digits, ., _, -)',
    pattern: /^[A-Za-z0-9._-]{1,249}$/,
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
      "the instances' --commit-interval: for processors the least time between two Kafka steps, so batches wait for it (and a revocation or a kill finds them waiting); with --handler the commit interval (a longer one makes a replay after a kill reach further back)",
    defaultText: '0 for processors, 3000 with --handler',
    min: 0,
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
not, or an instance exit no fault caused; 2: bad options; 130/143: stopped by SIGINT/SIGTERM (the
instances and redis-servers it started are stopped too; its topics stay).

With <module> (a processor module, as for redfence run): its records come from the module's
chaosInput(rng, n) export (n = --records) or from --input <file.jsonl>; a fault-free run and a run with
the faults above, each on its own topics, store and Redis, must end with the same state per key and the
same outputs and dead letters (exactly-once: the same multisets under read_committed; at-least-once: the
same values per key, duplicates allowed). Exit 1 names the keys that differ; 2: a bad module or input file.

With a topology module (its default export topology(...).build()): the instances run it on the run's
topics; its records come from chaosInput, --input (a record may carry "timestamp", ms after the start) or
a default of JSON orders with timestamps in some disorder; the outputs must be the reference model's over
the input as written (per topic and key, in order and once; at-least-once: whole replays allowed), the
dead letters the model's, every input offset committed (a repartition topic: judged per task over the
repartition records as the run wrote them, read while it runs). Crash points as for a processor
(--crashes, --points: the topology processor reaches the same points), and Redis restarts, failovers
(--redis-topology, --redis-failovers) and --wait-replicas as for a processor. With --idle-close <ms> the
instances close the windows of idle partitions by ticks (redfence run --idle-close); the drain waits
until the ticks have closed every window, and the model takes the ticks as read back from the topics.
--input-partitions gives input topics their own partition counts (judged per task as any); --late-topic
makes a topic a pattern reads only when its first record is due, then restarts each instance to read it.

With --handler [<module>] (a handler module, or the built-in one: ctx.once around one POST per record):
the instances call a far side on 127.0.0.1 the harness starts (its URL in REDFENCE_CHAOS_FAR_SIDE;
--far-latency, --far-failure-rate) under kills, a zombie and scaling; every record must have an effect
there (or a dead letter), no record more than one beyond those in flight at a kill or a stop, the first
effects of a key in offset order, and the group's commits at the end offsets. Exit 1 names the records.`,
  CHAOS_OPTIONS,
);

/** Faults and settings a handler run does not take (crash points are the processor's; Redis stays up). */
export const PROCESSOR_ONLY = [
  'mode',
  'crashes',
  'points',
  'redis-restarts',
  'redis-failovers',
  'wait-replicas',
  'wait-timeout',
  'replica-lag',
] as const;
export const HANDLER_FLAGS = ['far-latency', 'far-failure-rate'] as const;

/** Options of the built-in orders workload, refused with a module. */
export const WORKLOAD_ONLY = ['customers', 'skew', 'poison-rate', 'large', 'repairs'] as const;
