/**
 * What the DSL's classes (dsl.ts) share besides each other: the option shapes of its operators, the state
 * a stream carries, and the aggregators count and reduce are made of (Kafka Streams' own).
 */
import { RedfenceError } from '../errors/index.js';
import type { GroupedState, Materialized } from './aggregation.js';
import { DEFAULT_SERDE, type Graph, mustBeFunction } from './graph.js';
import { isSerde, type Serde } from './serdes.js';
import type { AggregateParams, Fn2, Fn3 } from './types.js';
import type { WindowSpec } from './windows.js';

/** `{ name }`: the node's name (default: generated, Kafka Streams style). */
export interface Named {
  readonly name?: string;
}

/** Serdes of a sink or a grouping (default: the stream's own, JSON after a key or value change). */
export interface Produced<K, V> extends Named {
  readonly key?: Serde<K>;
  readonly value?: Serde<V>;
}

/** How a stream is grouped: the serdes of its repartition topic and store keys, and `name` (the repartition topic is `<applicationId>-<name>-repartition`). */
export type Grouped<K, V> = Produced<K, V>;

/**
 * How `repartition()` writes and reads its topic `<applicationId>-<name>-repartition`: `name` (default
 * generated, `KSTREAM-REPARTITION-0000000003`), `numberOfPartitions` (default: the largest partition count
 * of the writing sub-topology's sources, as an automatic repartition), the serdes of its records (default:
 * the stream's). Kafka Streams' `streamPartitioner` is not offered: records go to murmur2 of their key bytes.
 *
 * @example
 * const r: Repartitioned<string, Order> = { name: 'by-region', numberOfPartitions: 6, key: serdes.string() };
 * orders.selectKey((_k, o) => o.region).repartition(r); // topic `<applicationId>-by-region-repartition`
 */
export interface Repartitioned<K, V> extends Produced<K, V> {
  readonly numberOfPartitions?: number;
}

/** The state a stream carries besides its node: its serdes and whether its key changed since the source. */
export interface StreamState {
  readonly graph: Graph;
  readonly node: string;
  readonly keySerde: Serde<unknown>;
  readonly valueSerde: Serde<unknown>;
  /** A map, flatMap, selectKey or groupBy changed the key: a stateful step must repartition first. */
  readonly keyChanged: boolean;
}

/** A windowed grouped stream's settings. */
export interface WindowSettings {
  readonly spec: WindowSpec;
  readonly emit: 'update' | 'final';
  readonly onLate: 'dead-letter' | 'drop';
}

/** `fn(value, key)` as the `(key, value)` function a node stores. */
export function flip<A, B, R>(fn: (a: A, b: B) => R): Fn2 {
  return ((k: B, v: A) => fn(v, k)) as Fn2;
}

/** The store's value serde: the one given, else (as Kafka Streams) the stream's for reduce, JSON otherwise. */
export function storeSerde(
  op: AggregateParams['op'],
  m: Materialized<unknown> | undefined,
  g: GroupedState,
): Serde<unknown> {
  return (m?.value as Serde<unknown> | undefined) ?? (op === 'reduce' ? g.valueSerde : DEFAULT_SERDE);
}

export const countAggregator: Fn3 = (_k, _v, a) => (a as number) + 1;

/** Kafka Streams' reduce as an aggregate: the first value (aggregate null), then `reducer(aggregate, value)`. */
export function reduceAggregator<V>(reducer: (aggregate: V, value: V) => V): Fn3 {
  mustBeFunction('reduce', reducer);
  return (_k, v, a) => (a === null || a === undefined ? v : reducer(a as V, v as V));
}

/**
 * Adds a `repartition()`: a sink writing its topic and the source reading it back, named as Kafka Streams
 * names them (generated: `KSTREAM-SINK-…` and `KSTREAM-SOURCE-…`; named: `<name>-repartition-sink` and
 * `-source`); returns the stream state after it (its key counts as the partitioning key again).
 *
 * @example
 * const next = addRepartition(stream.state, { numberOfPartitions: 2 }); // next.node: the reading source
 */
export function addRepartition(
  state: StreamState,
  r: Repartitioned<unknown, unknown> | undefined,
): StreamState {
  for (const serde of [r?.key, r?.value])
    if (serde !== undefined && !isSerde(serde))
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'repartition: a serde has serialize and deserialize');
  if (r?.name !== undefined && (typeof r.name !== 'string' || r.name === ''))
    throw new RedfenceError('RF_INVALID_ARGUMENT', 'repartition: name must be a non-empty string');
  const g = state.graph;
  const name = r?.name ?? g.newName('KSTREAM-REPARTITION');
  const topicName = name.endsWith('-repartition') ? name : `${name}-repartition`;
  // Kafka Streams takes three names (its sink, a pass-through filter, its source) whether it uses them or not
  const genSink = g.newName('KSTREAM-SINK');
  g.newName('KSTREAM-FILTER');
  const genSource = g.newName('KSTREAM-SOURCE');
  const generated = /^KSTREAM.*-[0-9]{10}$/.test(name);
  const sink = generated ? genSink : `${topicName}-sink`;
  const source = generated ? genSource : `${topicName}-source`;
  const topic = `${g.applicationId}-${topicName}`;
  const keySerde = (r?.key as Serde<unknown> | undefined) ?? state.keySerde;
  const valueSerde = (r?.value as Serde<unknown> | undefined) ?? state.valueSerde;
  const repartition = Object.freeze({ partitions: r?.numberOfPartitions ?? null });
  const serdes = { keySerde, valueSerde };
  g.add({ kind: 'sink', name: sink, topic, ...serdes, internal: true, repartition }, [state.node]);
  g.add({ kind: 'source', name: source, topics: [topic], pattern: null, ...serdes, internal: true }, []);
  return { ...state, node: source, keySerde, valueSerde, keyChanged: false };
}
