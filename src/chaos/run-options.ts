/**
 * What a chaos run is given and what it returns: the options (the schedule's faults among them) and
 * their defaults, a user's processor or handler to run instead of the packaged one, and the report
 * (src/chaos/harness.ts runs it; src/chaos/report.ts prints it).
 */

import type { BuiltTopology } from '../topology/types.js';
import type { Comparison, Snapshot } from './compare.js';
import type { HandlerResult } from './handler-verdict.js';
import type { Mode } from './instances.js';
import type { ConnectionConfig } from './kafka.js';
import type { LateTopicReport } from './late-topic.js';
import type { InputRecord } from './module.js';
import type { Topology } from './redis-topology.js';
import type { Fault, ScheduleOptions } from './schedule.js';
import type { TopologyResult } from './topology-verdict.js';
import type { FaultOutcome } from './verdict.js';
import type { VerifyResult } from './verifier.js';

/** The faults (kills, crashes, zombies, Redis restarts and failovers, scale) are the schedule's options. */
export interface ChaosOptions extends Omit<ScheduleOptions, 'seed' | 'mode'> {
  mode: Mode;
  /** Default: a random seed (printed; pass it back to reproduce the workload and the schedule). */
  seed?: number;
  brokers: string[];
  /** librdkafka properties of the harness's own clients (security, `--kafka-config`). */
  kafkaConfig?: ConnectionConfig;
  /** Environment of every instance that gives it the same Kafka connection (`REDFENCE_KAFKA_*`). */
  kafkaEnv?: Record<string, string>;
  records: number;
  customers: number;
  partitions: number;
  /** Production window in seconds: records are produced at records / durationS per second. */
  durationS: number;
  poisonRate: number;
  /** Valid orders padded to just under 1 MB. */
  large: number;
  skew: number;
  sessionTimeoutMs: number;
  /** Waiting for the group to commit the whole input after the last fault. */
  drainTimeoutMs: number;
  /** A crash-armed instance that has not crashed within this long of its first partitions (and as long to get any) is killed and noted. */
  crashTimeoutMs: number;
  /** The Redis the harness starts (src/chaos/redis-topology.ts); redis-failover faults fit it. */
  redisTopology: Topology;
  /** `redfence run --wait-replicas` (and `--wait-timeout`) for every instance; default: no WAIT. */
  waitReplicas?: number;
  waitTimeoutMs?: number;
  /**
   * Processors: the instances' `--commit-interval` (least ms between two Kafka steps). Default: the
   * processor's own (100 exactly-once, 0 at-least-once).
   */
  commitIntervalMs?: number;
  /**
   * A topology's `redfence run --idle-close` for every instance (`idleCloseMs`: ticks close the windows
   * of idle partitions); the drain then also waits until the ticks have closed every window.
   */
  idleCloseMs?: number;
  /**
   * A topology's input topics with another partition count than `partitions` (`--input-partitions`):
   * the module's topic name (a listed input, or a name its records give a pattern) -> its count.
   */
  inputPartitions?: Readonly<Record<string, number>>;
  /**
   * A topology's topic a pattern reads that the harness makes while the run lasts (`--late-topic`: the
   * module's name, one its records give), when its first record is due (src/chaos/late-topic.ts).
   */
  lateTopic?: string;
  /** Sentinel and cluster failovers: how long the replica is stopped before its primary dies. */
  replicaLagMs?: number;
  /** A user's processor module (absolute path) and the records to produce, instead of the orders workload. */
  processor?: UserProcessor;
  /** A handler module and its records, instead of a processor (src/chaos/handler-run.ts). */
  handler?: UserHandler;
  /** A topology module and its records, judged against the reference model (src/chaos/topology-run.ts). */
  topology?: UserTopology;
  /** A word in the run's names (`ref`: the fault-free run of a comparison). */
  label?: string;
  /** Keep topics and the Redis directory (for a look afterwards). */
  keep?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface UserProcessor {
  module: string;
  records: readonly InputRecord[];
  /** Record i is produced with CreateTime timestampBase + i (the same in both runs). */
  timestampBase: number;
}

export interface UserTopology extends UserProcessor {
  /** The module's topology as loaded in the harness's process (its own topic names). */
  built: BuiltTopology;
}

export interface UserHandler extends UserProcessor {
  /** The far side's latency of every call, uniform in [min, max] ms. */
  latencyMs: readonly [number, number];
  /** The fraction of far-side calls answered 503. */
  failureRate: number;
  /** The instances' `--commit-interval`. */
  commitIntervalMs: number;
}

export const DEFAULTS: Omit<ChaosOptions, 'mode' | 'brokers'> = {
  records: 20_000,
  customers: 500,
  partitions: 6,
  durationS: 60,
  poisonRate: 0.005,
  large: 2,
  skew: 1.1,
  kills: 5,
  crashes: 0,
  zombies: 1,
  redisRestarts: 1,
  redisFailovers: 0,
  repairs: 0,
  scale: [1, 3, 2],
  sessionTimeoutMs: 6000,
  drainTimeoutMs: 300_000,
  crashTimeoutMs: 60_000,
  redisTopology: 'standalone',
};

export interface ChaosReport {
  seed: number;
  /** When the run started (ISO 8601). */
  startedAt: string;
  options: ChaosOptions;
  /** Every fault scheduled; `faults` has the outcome of each that ran. */
  schedule: Fault[];
  names: { input: string; output: string; deadLetter: string; group: string; store: string };
  faults: FaultOutcome[];
  unexpectedExits: string[];
  verdicts: Map<string, number>;
  deadLetterMetrics: Map<string, number>;
  /** `redfence_topology_ticks_total` by event (produced, consumed), summed over the instances' last scrapes. */
  tickMetrics: Map<string, number>;
  produced: Map<string, number>;
  produceSeconds: number;
  drainSeconds: number;
  totalSeconds: number;
  verify: VerifyResult | undefined;
  /** A user's processor: what the run left (read back after the drain). */
  snapshot?: Snapshot;
  /** A user's processor: the comparison with the fault-free run (src/chaos/any-module.ts). */
  comparison?: Comparison;
  /** A handler: the far side's calls judged against the input (src/chaos/handler-verdict.ts). */
  handler?: HandlerResult;
  /** A topology: its outputs and dead letters judged against the model (src/chaos/topology-verdict.ts). */
  topology?: TopologyResult;
  /** A topology's topic made while the run lasted (`lateTopic`): when, and how the instances came to read it. */
  lateTopic?: LateTopicReport;
  /** A user's processor: the fault-free run's names, duration and failures. */
  reference?: { names: ChaosReport['names']; totalSeconds: number; failures: string[] };
  /** Harness problems (no drain, an instance that would not stop): each fails the run. */
  harnessErrors: string[];
  /** Why the run fails (src/chaos/verdict.ts); empty when it is OK. */
  failures: string[];
  ok: boolean;
}
