/**
 * The reference model's records and results (src/topology/model.ts runs them): what goes in, what its
 * sinks write, its dead letters and drops.
 */

/**
 * A record's headers, as the Kafka port gives them (a repeated header name: its values in order). A
 * record's headers go with everything it causes, as Kafka Streams carries them (docs/streams.md,
 * "Headers go where Kafka Streams 4.x sends them").
 */
export type ModelHeaders = Readonly<Record<string, Buffer | string | readonly (Buffer | string)[]>>;

/** A window's bounds: [start, end) for time windows, both ends inclusive for sliding and session windows. */
export interface WindowBounds {
  readonly start: number;
  readonly end: number;
}

/** One input record (records of one partition in offset order; partitions interleaved as given). */
export interface ModelInput {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly timestamp: number;
  /** Its headers, if any: carried to its outputs and repartition records. */
  readonly headers?: ModelHeaders;
}

/** One record a sink writes. */
export interface ModelOutput {
  readonly topic: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly timestamp: number;
  /**
   * The headers of the record that caused it (for a final result: the record whose stream time closed
   * the window); none for a session window's updates, as Kafka Streams forwards them. Absent when none.
   */
  readonly headers?: ModelHeaders;
}

/** Where a record the model did not fully process came from (a repartition record: its internal topic). */
export interface ModelSource {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly timestamp: number;
  readonly headers?: ModelHeaders;
}

/** A late record at an aggregation (onLate 'dead-letter'): the windows it missed. */
export interface ModelDeadLetter {
  readonly reason: 'late';
  readonly node: string;
  readonly store: string;
  readonly windows: readonly WindowBounds[];
  readonly source: ModelSource;
}

/**
 * A record whose walk threw (a source's serde that cannot read it, a filter, map, flatMap, selectKey,
 * split predicate or peek that throws, a sink's serde that cannot write what reached it), or whose
 * aggregation's own code threw (its key serde, reducer, aggregator, initializer, merger, or its store
 * serde writing the new aggregate): none of its effects is made, and the rest of its partition goes on.
 *
 * Or (`stateApplied`) a record one of whose aggregation's updates or final results threw downstream
 * (a filter, map or sink serde after `toStream()`): its state changes were made, the outputs of each
 * update or final result that threw were not (all or nothing per update: what it made in another branch,
 * a repartition record too), its other updates went on; `node` is the first node that threw. Kafka
 * Streams' ProcessingExceptionHandler answering CONTINUE (KIP-1033) does the same. A store serde that
 * cannot read stored state fails the run instead (RF_TOPOLOGY_NODE_THREW).
 *
 * @example
 * const r = runModel(built, input);
 * for (const f of r.failed) if (f.stateApplied) console.log(f.source.offset, f.node, 'after', f.downstreamOf);
 */
export interface ModelErrorDeadLetter {
  readonly reason: 'processing-error';
  /** The node whose code threw (a source, a stateless node, an aggregation or a sink). */
  readonly node: string;
  /** What it threw. */
  readonly error: unknown;
  readonly source: ModelSource;
  /** The record's state changes were made: a node downstream of an aggregation threw (absent otherwise). */
  readonly stateApplied?: true;
  /** With `stateApplied`: the aggregation whose update or final result the throwing node was walking. */
  readonly downstreamOf?: string;
}

/**
 * A record the partition check refused (docs/streams.md, "The partition check"): its key does not hash
 * (murmur2) to the partition it was read from, and its sub-topology keeps state per key (or it was read
 * from a repartition topic), so it is a dead letter of reason `wrong-partition`, none of its effects made
 * and no function of yours called on it, as the processor's partition check does.
 */
export interface ModelMisplaced {
  readonly reason: 'wrong-partition';
  /** The source reading its topic. */
  readonly node: string;
  /** The partition its key hashes to under the topic's count. */
  readonly expected: number;
  /** The topic's partition count the check used. */
  readonly partitions: number;
  readonly source: ModelSource;
}

/** A record an aggregation or a repartition dropped, as Kafka Streams drops it (a warning and a metric there). */
export interface ModelDrop {
  readonly reason: 'null-key' | 'null-value' | 'late';
  readonly node: string;
  readonly source: ModelSource;
}

export interface ModelResult {
  /** Every sink record, in the order the sinks wrote them. */
  readonly outputs: readonly ModelOutput[];
  readonly deadLetters: readonly ModelDeadLetter[];
  /**
   * Records whose walk threw, in the order they came, or (`stateApplied`) a node downstream of their
   * aggregation: dead letters of reason `processing-error`.
   */
  readonly failed: readonly ModelErrorDeadLetter[];
  /** Records the partition check refused, in the order they came: dead letters of reason `wrong-partition`. */
  readonly misplaced: readonly ModelMisplaced[];
  readonly dropped: readonly ModelDrop[];
}

export interface ModelOptions {
  /**
   * Partition counts of input topics (default: the largest partition seen in the input, plus one). A
   * repartition topic has its `repartition()` numberOfPartitions, else the largest count of its
   * sub-topology's inputs, as Kafka Streams makes it. An input topic given here is partition-checked
   * where its records' keys decide state ({@link ModelMisplaced}); one left to the default is not (its
   * count is a guess).
   */
  readonly partitions?: Readonly<Record<string, number>>;
}
