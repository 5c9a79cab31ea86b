/**
 * What the topology runtime's batch executor takes and gives (src/topology/run/executor.ts): one
 * partition batch of a sub-topology's input in, its outputs, dead letters, drops and the partition's new
 * stream time out. The shapes are the reference model's (src/topology/model.ts), so the two compare
 * record for record.
 */
import type {
  ModelDeadLetter,
  ModelDrop,
  ModelErrorDeadLetter,
  ModelInput,
  ModelMisplaced,
  ModelOutput,
  ModelSource,
} from '../model.js';
import type { WindowClock } from './final.js';
import type { NodeFlows } from './flows.js';

/** One partition batch: the records of one input topic-partition, in offset order. */
export interface TopologyBatch {
  /** The input topic (the sub-topology's one source topic). */
  readonly topic: string;
  readonly partition: number;
  /** The partition epoch this owner acquired (a lower one than a key's last writer is FENCEd). */
  readonly epoch: number;
  /** The partition's committed offset (next offset to consume), or -1: pending results below it are pruned. */
  readonly committedOffset: number;
  /** The records, offsets strictly increasing; each record's topic and partition are the batch's. */
  readonly records: readonly ModelInput[];
  /**
   * The topic's partition count now: given, the partition check applies (docs/streams.md, "The partition
   * check"): a keyed record of a sub-topology keeping state per key, or of a repartition topic, whose key
   * murmur2 places on another partition is a dead letter (`wrong-partition`), not walked. Absent: no check.
   */
  readonly partitionCount?: number;
  /** Every count the topic had while the application's state was written (a key placed under one passes). */
  readonly partitionCounts?: readonly number[];
}

/** A sink record, with the input offset that caused it (its batch's records produce in offset order). */
export interface TopologyOutput extends ModelOutput {
  readonly offset: number;
}

/**
 * A record whose effects on a fence key the store refused (REJECT, e.g. a count beyond 2^53): none of
 * those was made. One dead letter per record: with `stateApplied` when its effects on other keys were.
 */
export interface RejectedDeadLetter {
  readonly reason: 'rejected';
  /** The first aggregation of the record on the fence key. */
  readonly node: string;
  readonly store: string;
  /** The store's reason (never a value). */
  readonly message: string;
  readonly source: ModelSource;
  /**
   * Some of the record's state changes were made: its effects on another fence key applied (another
   * aggregation's key serde, a window it closed). Its one dead letter then carries `redfence-state-applied`.
   */
  readonly stateApplied?: true;
  /** A node downstream of one of its applied aggregations threw too: that walk's outputs were not made. */
  readonly downstream?: { readonly node: string; readonly downstreamOf: string; readonly error: unknown };
}

/** A late record, one whose walk threw or one the partition check refused (as the model's), or a refused one. */
export type TopologyDeadLetter = ModelDeadLetter | ModelErrorDeadLetter | ModelMisplaced | RejectedDeadLetter;

/**
 * A partition's stream time: per windowed aggregation node, its clock (the largest timestamp it has
 * seen, the close time of its last final emission, the newest window start it wrote; -1: none), as Kafka
 * Streams keeps them per processor and task. It must be the value at the batch's committed offset when
 * a batch runs (so a replay decides lateness and final results as the first run did): today the
 * executor keeps it in memory; next, it travels in the offset commit's metadata.
 */
export type StreamTimes = Readonly<Record<string, Readonly<WindowClock>>>;

/**
 * Verdicts of the batch's key records, by kind (for metrics and tests). CONFLICT counts the key
 * records of reduce and aggregate calls another writer's change sent back to be read and folded again
 * (each then has one of the other verdicts too).
 */
export type VerdictCounts = Readonly<
  Record<'APPLY' | 'REBASE' | 'SKIP' | 'REEMIT' | 'REJECT' | 'CONFLICT', number>
>;

export interface TopologyBatchResult {
  /** Sink records in the order the reference model writes them (per input record, depth first). */
  readonly outputs: readonly TopologyOutput[];
  readonly deadLetters: readonly TopologyDeadLetter[];
  readonly dropped: readonly ModelDrop[];
  /** The partition's stream time after the batch (also kept by the executor). */
  readonly streamTime: StreamTimes;
  readonly verdicts: VerdictCounts;
  /**
   * Records in and out per node (flows.ts), as this run walked them: a replay re-emits, so it counts
   * its re-emitted results again (the processor adds a batch's counts to its metrics at its commit).
   */
  readonly nodes: NodeFlows;
  /**
   * Reduce and aggregate keys the batch folded from owner-local state (`hits`) or read first
   * (`misses`); both 0 without the executor's `ownerCache` (src/topology/run/owner-cache.ts).
   */
  readonly ownerCache: { readonly hits: number; readonly misses: number };
}
