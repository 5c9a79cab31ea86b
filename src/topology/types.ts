/**
 * The built topology: plain, frozen data that an executor walks (the reference model in model.ts today,
 * the Redis execution next). Every node has a unique name, a kind and its parameters; edges run from a
 * node to the nodes it forwards to, in the order they were attached; sub-topologies split at repartition
 * topics, as Kafka Streams splits them.
 */
import type { Serde } from './serdes.js';
import type { WindowSpec } from './windows.js';

/** A windowed key: the grouping key and its window's bounds (time windows: `[start, end)`; sliding and session: `[start, end]`). */
export interface Windowed<K> {
  readonly key: K;
  readonly start: number;
  readonly end: number;
}

/** A user function of two or three arguments as a node stores it (the builder's types say more). */
export type Fn2 = (a: unknown, b: unknown) => unknown;
export type Fn3 = (a: unknown, b: unknown, c: unknown) => unknown;

export type TopologyNode =
  | ({ readonly name: string } & {
      readonly kind: 'source';
      readonly topics: readonly string[] | null;
      readonly pattern: RegExp | null;
      readonly keySerde: Serde<unknown>;
      readonly valueSerde: Serde<unknown>;
      /** Set on the reading side of a repartition topic. */
      readonly internal: boolean;
    })
  | ({ readonly name: string } & {
      readonly kind: 'filter';
      readonly predicate: (key: unknown, value: unknown) => unknown;
      readonly not: boolean;
    })
  | ({ readonly name: string } & {
      readonly kind: 'map';
      readonly mapper: (key: unknown, value: unknown) => unknown;
    })
  | ({ readonly name: string } & {
      readonly kind: 'mapValues';
      readonly mapper: (key: unknown, value: unknown) => unknown;
    })
  | ({ readonly name: string } & {
      readonly kind: 'flatMap';
      readonly mapper: (key: unknown, value: unknown) => unknown;
    })
  | ({ readonly name: string } & {
      readonly kind: 'flatMapValues';
      readonly mapper: (key: unknown, value: unknown) => unknown;
    })
  | ({ readonly name: string } & {
      readonly kind: 'selectKey';
      readonly mapper: (key: unknown, value: unknown) => unknown;
    })
  | ({ readonly name: string } & {
      readonly kind: 'peek';
      readonly action: (key: unknown, value: unknown) => unknown;
    })
  /** Sends each record to the first branch whose predicate holds (null predicate: the default branch). */
  | ({ readonly name: string } & { readonly kind: 'split'; readonly branches: readonly SplitBranch[] })
  /** A pass-through node that starts one branch of a split. */
  | ({ readonly name: string } & { readonly kind: 'branch' })
  | ({ readonly name: string } & { readonly kind: 'merge' })
  | ({ readonly name: string } & {
      readonly kind: 'sink';
      readonly topic: string;
      readonly keySerde: Serde<unknown>;
      readonly valueSerde: Serde<unknown>;
      /** Set on the writing side of a repartition topic (a grouping's drops records with a null key: its aggregation would). */
      readonly internal: boolean;
      /** Set on a `repartition()` sink (null on every other): records with a null key are written too, as Kafka Streams 4.x writes them. */
      readonly repartition: RepartitionSpec | null;
    })
  | ({ readonly name: string } & AggregateParams & { readonly kind: 'aggregate' })
  | ({ readonly name: string } & { readonly kind: 'toStream' });

/** What a `repartition()` sink fixes of its topic. */
export interface RepartitionSpec {
  /** The topic's partition count (`numberOfPartitions`); null: the largest of the writing sub-topology's sources', as an automatic repartition. */
  readonly partitions: number | null;
}

export interface SplitBranch {
  /** The branch's node name (a pass-through node the branch's stream starts from). */
  readonly name: string;
  readonly predicate: ((key: unknown, value: unknown) => unknown) | null;
}

/** What an aggregation node holds. */
export interface AggregateParams {
  /** `count`, `reduce` or `aggregate`: an executor may run count (and sums it recognises) inside Redis. */
  readonly op: 'count' | 'reduce' | 'aggregate';
  readonly store: string;
  /** null: an unwindowed table. */
  readonly window: WindowSpec | null;
  /** The initial aggregate (reduce: returns null, the first value becomes the aggregate). */
  readonly initializer: () => unknown;
  /** `(key, value, aggregate) => newAggregate`. */
  readonly aggregator: (key: unknown, value: unknown, aggregate: unknown) => unknown;
  /** Session windows: `(key, aggregate1, aggregate2) => merged`. */
  readonly merger: ((key: unknown, aggregate1: unknown, aggregate2: unknown) => unknown) | null;
  /** The grouping key's serde (the store's key bytes; their order is the store's order). */
  readonly keySerde: Serde<unknown>;
  /** The store's value serde: every aggregate is stored (and read back) through it. */
  readonly valueSerde: Serde<unknown>;
  /** Windowed only: 'update' forwards every change (Kafka Streams with caching off); 'final' once per window when it closes. */
  readonly emit: 'update' | 'final';
  /** Windowed only: what a late record becomes. */
  readonly onLate: 'dead-letter' | 'drop';
}

export interface TopologyEdge {
  readonly from: string;
  readonly to: string;
}

/** A set of nodes connected without a repartition topic between them: one task per input partition. */
export interface SubTopology {
  readonly id: number;
  readonly nodes: readonly string[];
  readonly sourceTopics: readonly string[];
  readonly sourcePatterns: readonly RegExp[];
  readonly sinkTopics: readonly string[];
}

export interface StoreSpec {
  readonly name: string;
  readonly node: string;
  readonly kind: 'key-value' | 'window' | 'session';
}

/** What `build()` returns: immutable. */
export interface BuiltTopology {
  readonly applicationId: string;
  readonly nodes: readonly TopologyNode[];
  readonly edges: readonly TopologyEdge[];
  readonly subTopologies: readonly SubTopology[];
  readonly stores: readonly StoreSpec[];
  /** Internal repartition topics, `<applicationId>-<name>-repartition`. */
  readonly repartitionTopics: readonly string[];
}
